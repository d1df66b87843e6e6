//===- Cubin.cpp - what a cubin is and says about its kernels -------------===//
//
// readCubin decodes the ELF64 headers field by field from the bytes (no
// cast of the buffer to a struct: any alignment, any host), checks each
// offset + size against the file without overflow before it reads there,
// and requires every string table to end with a NUL so that every name in
// it ends inside it. Then it reads the .nv.info record lists, each record
// checked to fit its section. checkCubin compares a module with the
// result; the messages name the kernel, the field and both sides.
//
//===----------------------------------------------------------------------===//

#include "liger/Runtime/Cubin.h"

#include <algorithm>
#include <cstring>
#include <elf.h>
#include <map>

using namespace liger::runtime;

const CubinKernel *Cubin::find(std::string_view name) const {
  for (const CubinKernel &k : kernels)
    if (k.name == name)
      return &k;
  return nullptr;
}

namespace {
constexpr size_t kElfHeaderBytes = 64, kSectionHeaderBytes = 64,
                 kProgramHeaderBytes = 56, kSymbolBytes = 24, kRelBytes = 16,
                 kRelaBytes = 24;

uint16_t u16(const unsigned char *p) { return uint16_t(p[0] | p[1] << 8); }
uint32_t u32(const unsigned char *p) {
  return uint32_t(p[0]) | uint32_t(p[1]) << 8 | uint32_t(p[2]) << 16 |
         uint32_t(p[3]) << 24;
}
uint64_t u64(const unsigned char *p) {
  return uint64_t(u32(p)) | uint64_t(u32(p + 4)) << 32;
}

/// Whether [offset, offset + bytes) lies within `size` bytes.
bool within(uint64_t offset, uint64_t bytes, uint64_t size) {
  return offset <= size && bytes <= size - offset;
}

struct Section {
  uint32_t name, type, link, info;
  uint64_t flags, offset, size, entsize;
  std::string_view nameText;
};

/// The reader of one cubin; `fail` makes its messages.
class CubinReader {
public:
  CubinReader(const void *data, size_t size, const std::string &origin)
      : bytes(static_cast<const unsigned char *>(data)), size(size),
        origin(origin) {}

  Status read(Cubin *cubin);

private:
  Status fail(const std::string &what) const {
    return LIGER_MAKE_STATUS(StatusCode::kInvalidArgument,
                             origin + " is not a well-formed cubin: " + what);
  }
  /// "section #3 (.symtab)".
  std::string sectionName(size_t index) const {
    return "section #" + std::to_string(index) + " (" +
           std::string(sections[index].nameText) + ")";
  }
  /// The section named `name`, or -1.
  int find(const std::string &name) const {
    auto it = byName.find(name);
    return it == byName.end() ? -1 : static_cast<int>(it->second);
  }

  Status header(Cubin *cubin);
  Status sectionHeaders();
  Status programHeaders();
  Status symbols();
  Status relocations();
  Status kernels(Cubin *cubin);
  Status nvInfo(size_t index, CubinKernel *kernel,
                uint64_t textBytes = 0) const;

  const unsigned char *bytes;
  uint64_t size;
  const std::string &origin;
  uint64_t shoff = 0, phoff = 0;
  uint16_t shnum = 0, phnum = 0, shstrndx = 0;
  std::vector<Section> sections;
  /// Unique names only: a name given twice maps to the first index, and
  /// the kernels' sections are checked not to repeat.
  std::map<std::string, size_t, std::less<>> byName;
  std::map<std::string, size_t, std::less<>> repeated;
  int symtab = -1;
  uint64_t numSymbols = 0;
};

Status CubinReader::header(Cubin *cubin) {
  if (size < kElfHeaderBytes)
    return fail(std::to_string(size) + " bytes, fewer than an ELF header's 64");
  const unsigned char *e = bytes;
  if (std::memcmp(e, ELFMAG, SELFMAG) != 0)
    return fail("no ELF magic number");
  if (e[EI_CLASS] != ELFCLASS64 || e[EI_DATA] != ELFDATA2LSB ||
      e[EI_VERSION] != EV_CURRENT)
    return fail("not a little-endian ELF64 file of ELF version 1");
  const cubin::ElfAbi *abi = nullptr;
  for (const cubin::ElfAbi &a : cubin::kElfAbis)
    if (e[EI_OSABI] == a.osAbi && e[EI_ABIVERSION] == a.abiVersion)
      abi = &a;
  if (!abi)
    return fail("OS ABI " + std::to_string(e[EI_OSABI]) + " version " +
                std::to_string(e[EI_ABIVERSION]) +
                " is not a CUDA ELF ABI (51 version 7, 65 version 8)");
  if (u16(e + 16) != ET_EXEC || u16(e + 18) != cubin::kMachineCuda ||
      u32(e + 20) != EV_CURRENT)
    return fail("not an executable for EM_CUDA (type " +
                std::to_string(u16(e + 16)) + ", machine " +
                std::to_string(u16(e + 18)) + ")");
  cubin->sm = static_cast<int>(u32(e + 48) >> abi->smShift & 0xff);
  phoff = u64(e + 32);
  shoff = u64(e + 40);
  uint16_t ehsize = u16(e + 52), phentsize = u16(e + 54),
           shentsize = u16(e + 58);
  phnum = u16(e + 56);
  shnum = u16(e + 60);
  shstrndx = u16(e + 62);
  if (ehsize != kElfHeaderBytes || shentsize != kSectionHeaderBytes ||
      (phnum && phentsize != kProgramHeaderBytes))
    return fail("header sizes " + std::to_string(ehsize) + ", " +
                std::to_string(shentsize) + " and " +
                std::to_string(phentsize) + " are not ELF64's 64, 64 and 56");
  // Extended numbering (0, SHN_XINDEX, PN_XNUM) is for files far larger
  // than a cubin.
  if (shnum == 0 || shnum >= SHN_LORESERVE)
    return fail(std::to_string(shnum) + " section headers");
  if (phnum == PN_XNUM)
    return fail("extended program header numbering");
  if (shstrndx == SHN_UNDEF || shstrndx >= shnum)
    return fail("the section name table is section #" +
                std::to_string(shstrndx) + " of " + std::to_string(shnum));
  return Status::ok();
}

Status CubinReader::sectionHeaders() {
  if (!within(shoff, uint64_t(shnum) * kSectionHeaderBytes, size))
    return fail("its " + std::to_string(shnum) + " section headers at offset " +
                std::to_string(shoff) + " extend past its end (" +
                std::to_string(size) + " bytes)");
  sections.resize(shnum);
  for (size_t i = 0; i < shnum; ++i) {
    const unsigned char *h = bytes + shoff + i * kSectionHeaderBytes;
    Section &s = sections[i];
    s.name = u32(h);
    s.type = u32(h + 4);
    s.flags = u64(h + 8);
    s.offset = u64(h + 24);
    s.size = u64(h + 32);
    s.link = u32(h + 40);
    s.info = u32(h + 44);
    s.entsize = u64(h + 56);
    if (s.type != SHT_NOBITS && !within(s.offset, s.size, size))
      return fail("section #" + std::to_string(i) + " (" +
                  std::to_string(s.size) + " bytes at offset " +
                  std::to_string(s.offset) + ") extends past its end (" +
                  std::to_string(size) + " bytes)");
    // String tables end with a NUL: every name in one ends inside it.
    if (s.type == SHT_STRTAB && s.size && bytes[s.offset + s.size - 1] != 0)
      return fail("string table section #" + std::to_string(i) +
                  " does not end with a NUL");
  }
  if (sections[0].type != SHT_NULL)
    return fail("section #0 is not the null section");
  const Section &names = sections[shstrndx];
  if (names.type != SHT_STRTAB)
    return fail("the section name table (section #" + std::to_string(shstrndx) +
                ") is not a string table");
  for (size_t i = 0; i < shnum; ++i) {
    Section &s = sections[i];
    if (s.name >= names.size && !(i == 0 && s.name == 0))
      return fail("the name of section #" + std::to_string(i) +
                  " is outside the section name table");
    s.nameText = names.size ? std::string_view(reinterpret_cast<const char *>(
                                  bytes + names.offset + s.name))
                            : std::string_view();
    if (s.link >= shnum)
      return fail(sectionName(i) + " links to section #" +
                  std::to_string(s.link) + " of " + std::to_string(shnum));
    auto [it, fresh] = byName.emplace(std::string(s.nameText), i);
    if (!fresh)
      repeated.emplace(it->first, i);
  }
  return Status::ok();
}

Status CubinReader::programHeaders() {
  if (!phnum)
    return Status::ok();
  if (!within(phoff, uint64_t(phnum) * kProgramHeaderBytes, size))
    return fail("its " + std::to_string(phnum) + " program headers at offset " +
                std::to_string(phoff) + " extend past its end (" +
                std::to_string(size) + " bytes)");
  for (size_t i = 0; i < phnum; ++i) {
    const unsigned char *h = bytes + phoff + i * kProgramHeaderBytes;
    uint32_t type = u32(h);
    uint64_t offset = u64(h + 8), filesz = u64(h + 32), memsz = u64(h + 40);
    if (!within(offset, filesz, size))
      return fail("segment #" + std::to_string(i) + " (" +
                  std::to_string(filesz) + " bytes at offset " +
                  std::to_string(offset) + ") extends past its end (" +
                  std::to_string(size) + " bytes)");
    if (type == PT_LOAD && filesz > memsz)
      return fail("segment #" + std::to_string(i) + " has " +
                  std::to_string(filesz) + " bytes in the file but " +
                  std::to_string(memsz) + " in memory");
  }
  return Status::ok();
}

Status CubinReader::symbols() {
  for (size_t i = 0; i < shnum; ++i) {
    const Section &s = sections[i];
    if (s.type != SHT_SYMTAB && s.type != SHT_DYNSYM)
      continue;
    if (symtab >= 0)
      return fail("more than one symbol table");
    if (s.entsize != kSymbolBytes || s.size % kSymbolBytes != 0)
      return fail(sectionName(i) + " is not a table of 24-byte symbols");
    const Section &names = sections[s.link];
    if (names.type != SHT_STRTAB)
      return fail(sectionName(i) + " names its symbols in " +
                  sectionName(s.link) + ", which is not a string table");
    symtab = static_cast<int>(i);
    numSymbols = s.size / kSymbolBytes;
    for (uint64_t k = 0; k < numSymbols; ++k) {
      const unsigned char *sym = bytes + s.offset + k * kSymbolBytes;
      uint32_t name = u32(sym);
      uint16_t shndx = u16(sym + 6);
      if (name && name >= names.size)
        return fail("the name of symbol #" + std::to_string(k) +
                    " is outside its string table");
      if (shndx >= shnum && shndx < SHN_LORESERVE)
        return fail("symbol #" + std::to_string(k) + " is in section #" +
                    std::to_string(shndx) + " of " + std::to_string(shnum));
    }
  }
  if (symtab < 0)
    return fail("no symbol table");
  return Status::ok();
}

Status CubinReader::relocations() {
  for (size_t i = 0; i < shnum; ++i) {
    const Section &s = sections[i];
    if (s.type != SHT_REL && s.type != SHT_RELA)
      continue;
    uint64_t entry = s.type == SHT_REL ? kRelBytes : kRelaBytes;
    if (s.entsize != entry || s.size % entry != 0)
      return fail(sectionName(i) + " is not a table of " +
                  std::to_string(entry) + "-byte relocations");
    if (static_cast<int>(s.link) != symtab || s.info == 0 || s.info >= shnum)
      return fail(sectionName(i) + " relocates section #" +
                  std::to_string(s.info) + " by the symbols of section #" +
                  std::to_string(s.link));
    const Section &target = sections[s.info];
    for (uint64_t k = 0; k < s.size / entry; ++k) {
      const unsigned char *r = bytes + s.offset + k * entry;
      uint64_t offset = u64(r), symbol = u64(r + 8) >> 32;
      if (offset >= target.size || symbol >= numSymbols)
        return fail("relocation #" + std::to_string(k) + " of " +
                    sectionName(i) + " is at offset " + std::to_string(offset) +
                    " of a " + std::to_string(target.size) +
                    "-byte section, by symbol #" + std::to_string(symbol) +
                    " of " + std::to_string(numSymbols));
    }
  }
  return Status::ok();
}

/// Reads the records of .nv.info section `index` (every record must fit,
/// and name symbols of the cubin); with `kernel` (whose code is
/// `textBytes` long), keeps what it says about that kernel.
Status CubinReader::nvInfo(size_t index, CubinKernel *kernel,
                           uint64_t textBytes) const {
  const Section &s = sections[index];
  const unsigned char *at = bytes + s.offset, *end = at + s.size;
  std::vector<bool> seen;
  bool cbank = false;
  uint32_t cbankBytes = 0;
  // The parameter that ends last, and where.
  uint32_t lastEnd = 0, last = 0;
  auto bad = [&](const std::string &what) {
    return fail(sectionName(index) + ": " + what);
  };
  while (at < end) {
    if (end - at < 4)
      return bad("a record is cut off at its end");
    uint8_t format = at[0], attribute = at[1];
    uint16_t value = u16(at + 2);
    at += 4;
    if (format < cubin::kNoValue || format > cubin::kSized)
      return bad("a record has the unknown format " + std::to_string(format));
    const unsigned char *payload = at;
    if (format == cubin::kSized) {
      if (end - at < value)
        return bad("a record of " + std::to_string(value) +
                   " bytes runs past its end");
      at += value;
    }
    auto listed = [&](const uint8_t *begin, const uint8_t *end) {
      return std::find(begin, end, attribute) != end;
    };
    if (!kernel) {
      if (format == cubin::kSized && value >= 4 &&
          listed(std::begin(cubin::kSymbolAttributes),
                 std::end(cubin::kSymbolAttributes)) &&
          u32(payload) >= numSymbols)
        return bad("attribute " + std::to_string(attribute) +
                   " is about symbol #" + std::to_string(u32(payload)) +
                   " of " + std::to_string(numSymbols));
      continue;
    }
    if (listed(std::begin(cubin::kCodeOffsetLists),
               std::end(cubin::kCodeOffsetLists))) {
      if (format != cubin::kSized || value % 4 != 0)
        return bad("attribute " + std::to_string(attribute) +
                   " is not a list of 32-bit offsets");
      for (uint16_t k = 0; k < value; k += 4)
        if (u32(payload + k) >= textBytes)
          return bad("attribute " + std::to_string(attribute) +
                     " lists offset " + std::to_string(u32(payload + k)) +
                     " of the kernel's " + std::to_string(textBytes) +
                     " bytes of code");
      continue;
    }
    auto sized = [&](uint16_t want) -> Status {
      if (format != cubin::kSized || value != want)
        return bad("attribute " + std::to_string(attribute) + " is not " +
                   std::to_string(want) + " bytes");
      return Status::ok();
    };
    switch (attribute) {
    case cubin::kKparamInfo: {
      LIGER_RETURN_IF_ERROR(sized(12));
      uint16_t ordinal = u16(payload + 4), offset = u16(payload + 6);
      uint32_t paramSize = cubin::kparamSize(u32(payload + 8));
      if (ordinal >= kernel->paramSizes.size()) {
        kernel->paramSizes.resize(ordinal + 1, 0);
        seen.resize(ordinal + 1, false);
      }
      if (seen[ordinal])
        return bad("parameter #" + std::to_string(ordinal) +
                   " is described twice");
      seen[ordinal] = true;
      kernel->paramSizes[ordinal] = paramSize;
      // Checked against the parameters' bytes once all records are read.
      if (uint32_t(offset) + paramSize > lastEnd) {
        lastEnd = offset + paramSize;
        last = ordinal;
      }
      break;
    }
    case cubin::kCbankParamSize:
      if (format != cubin::kHalf)
        return bad("attribute " + std::to_string(attribute) +
                   " is not a 16-bit value");
      kernel->paramBytes = value;
      break;
    case cubin::kParamCbank:
      LIGER_RETURN_IF_ERROR(sized(8));
      if (u32(payload) >= numSymbols)
        return bad("the parameters' constant bank is symbol #" +
                   std::to_string(u32(payload)) + " of " +
                   std::to_string(numSymbols));
      cbank = true;
      cbankBytes = u16(payload + 6);
      // The parameters' place in constant bank 0, which must hold them.
      if (int c0 = find(".nv.constant0." + kernel->name);
          c0 < 0 || sections[c0].size < uint64_t(u16(payload + 4)) + cbankBytes)
        return bad(
            "the parameters lie at " + std::to_string(u16(payload + 4)) +
            " + " + std::to_string(cbankBytes) + " bytes of .nv.constant0." +
            kernel->name + ", which " +
            (c0 < 0 ? std::string("does not exist")
                    : "has " + std::to_string(sections[c0].size) + " bytes"));
      break;
    case cubin::kMaxThreads:
    case cubin::kReqntid: {
      LIGER_RETURN_IF_ERROR(sized(12));
      uint32_t *block = attribute == cubin::kMaxThreads ? kernel->maxBlock
                                                        : kernel->requiredBlock;
      for (int d = 0; d < 3; ++d)
        block[d] = u32(payload + 4 * d);
      break;
    }
    default:
      break;
    }
  }
  if (!kernel)
    return Status::ok();
  for (size_t p = 0; p < seen.size(); ++p)
    if (!seen[p])
      return bad("parameter #" + std::to_string(p) + " is not described");
  if (!cbank)
    return bad("no record places the parameters in constant bank 0 "
               "(attribute 10)");
  if (cbankBytes != kernel->paramBytes)
    return bad("the parameters are " + std::to_string(kernel->paramBytes) +
               " bytes (attribute 25), but take " + std::to_string(cbankBytes) +
               " in constant bank 0 (attribute 10)");
  if (lastEnd > kernel->paramBytes)
    return bad("parameter #" + std::to_string(last) + " ends at byte " +
               std::to_string(lastEnd) + " of the parameters' " +
               std::to_string(kernel->paramBytes));
  kernel->hasInfo = true;
  return Status::ok();
}

Status CubinReader::kernels(Cubin *cubin) {
  const Section &symbolTable = sections[symtab];
  const Section &symbolNames = sections[symbolTable.link];
  for (size_t i = 0; i < shnum; ++i) {
    const Section &s = sections[i];
    if (s.type == cubin::kSectionNvInfo && s.nameText == ".nv.info")
      LIGER_RETURN_IF_ERROR(nvInfo(i, nullptr)); // well-formed records
    constexpr std::string_view kText = ".text.";
    if (s.nameText.substr(0, kText.size()) != kText ||
        !(s.flags & SHF_EXECINSTR))
      continue;
    CubinKernel kernel;
    kernel.name = std::string(s.nameText.substr(kText.size()));
    for (const char *prefix : {".text.", ".nv.info.", ".nv.shared."})
      if (repeated.count(prefix + kernel.name))
        return fail("two sections are named " + std::string(prefix) +
                    kernel.name);
    // Its entry: a global function symbol of its name, within it.
    bool entry = false;
    for (uint64_t k = 0; k < numSymbols && !entry; ++k) {
      const unsigned char *sym = bytes + symbolTable.offset + k * kSymbolBytes;
      uint32_t name = u32(sym);
      entry = name < symbolNames.size &&
              reinterpret_cast<const char *>(bytes + symbolNames.offset +
                                             name) == kernel.name &&
              ELF64_ST_TYPE(sym[4]) == STT_FUNC &&
              ELF64_ST_BIND(sym[4]) == STB_GLOBAL && u16(sym + 6) == i &&
              within(u64(sym + 8), u64(sym + 16), s.size);
    }
    if (!entry)
      continue; // a device function, not a kernel
    if (int info = find(".nv.info." + kernel.name); info >= 0) {
      if (sections[info].type != cubin::kSectionNvInfo ||
          sections[info].info != i)
        return fail(sectionName(info) + " does not describe " + sectionName(i));
      LIGER_RETURN_IF_ERROR(nvInfo(info, &kernel, s.size));
    }
    if (int shared = find(".nv.shared." + kernel.name); shared >= 0)
      kernel.staticSharedBytes = sections[shared].size;
    cubin->kernels.push_back(std::move(kernel));
  }
  return Status::ok();
}

Status CubinReader::read(Cubin *cubin) {
  LIGER_RETURN_IF_ERROR(header(cubin));
  LIGER_RETURN_IF_ERROR(sectionHeaders());
  LIGER_RETURN_IF_ERROR(programHeaders());
  LIGER_RETURN_IF_ERROR(symbols());
  LIGER_RETURN_IF_ERROR(relocations());
  return kernels(cubin);
}
} // namespace

Status liger::runtime::readCubin(const void *data, size_t size,
                                 const std::string &origin, Cubin *cubin) {
  *cubin = Cubin();
  return CubinReader(data, size, origin).read(cubin);
}

//===----------------------------------------------------------------------===//
// The manifest against the cubin
//===----------------------------------------------------------------------===//

namespace {
std::string blockText(const int64_t *b) {
  return "[" + std::to_string(b[0]) + ", " + std::to_string(b[1]) + ", " +
         std::to_string(b[2]) + "]";
}

/// `n` `what`s: "1 tensor map", "3 parameters".
std::string count(size_t n, const char *what) {
  return std::to_string(n) + " " + what + (n == 1 ? "" : "s");
}

/// Compares one entry point `name` of a launch of `spec` (the kernel or a
/// side kernel), launched with `spec`'s
/// arguments and block `block` with what the cubin records.
Status checkKernel(const KernelSpec &spec, const std::string &name,
                   const int64_t *block, const Cubin &cubin,
                   const std::string &origin) {
  auto refuse = [&](const std::string &what) {
    return LIGER_MAKE_STATUS(StatusCode::kInvalidArgument,
                             origin + ": kernel '" + name + "': " + what);
  };
  const CubinKernel *k = cubin.find(name);
  if (!k)
    return refuse("the cubin has no such kernel (no section .text." + name +
                  " with its function)");
  if (!k->hasInfo)
    return refuse("the cubin has no .nv.info." + name +
                  " to compare its parameters with");
  if (k->staticSharedBytes > 0x7fffffff)
    return refuse("the cubin's .nv.shared." + name + " is " +
                  std::to_string(k->staticSharedBytes) +
                  " bytes, more shared memory than any GPU has");
  // What a launch passes: 8 bytes per memref descriptor word, then a
  // 128-byte CUtensorMap per tensor map (Bundle::launch).
  std::vector<uint32_t> args;
  for (const KernelParam &p : spec.params)
    args.insert(args.end(), descriptorWords(p), 8);
  args.insert(args.end(), spec.tensorMaps.size(), 128);
  if (args != k->paramSizes) {
    uint64_t bytes = 0, cubinBytes = 0;
    for (uint32_t a : args)
      bytes += a;
    for (uint32_t a : k->paramSizes)
      cubinBytes += a;
    std::string detail;
    if (args.size() == k->paramSizes.size())
      for (size_t i = 0; i < args.size() && detail.empty(); ++i)
        if (args[i] != k->paramSizes[i])
          detail = "; argument #" + std::to_string(i) + " is " +
                   std::to_string(k->paramSizes[i]) + " bytes there, not " +
                   std::to_string(args[i]);
    return refuse("the manifest says " +
                  count(spec.params.size(), "parameter") + " and " +
                  count(spec.tensorMaps.size(), "tensor map") + ", " +
                  count(args.size(), "argument") + " of " +
                  std::to_string(bytes) + " bytes, but the cubin's .nv.info." +
                  name + " has " + count(k->paramSizes.size(), "argument") +
                  " of " + std::to_string(cubinBytes) + " bytes" + detail);
  }
  for (const auto &[recorded, directive] :
       {std::make_pair(k->requiredBlock, ".reqntid"),
        std::make_pair(k->maxBlock, ".maxntid")}) {
    if (!recorded[0])
      continue;
    int64_t cubinBlock[3] = {recorded[0], recorded[1], recorded[2]};
    if (!std::equal(block, block + 3, cubinBlock))
      return refuse("the manifest's block is " + blockText(block) +
                    ", but the cubin's is " + blockText(cubinBlock) + " (" +
                    directive + " in .nv.info." + name +
                    "): the kernel is built for that block");
  }
  return Status::ok();
}
} // namespace

Status liger::runtime::checkCubin(const ModuleSpec &module, const Cubin &cubin,
                                  const std::string &origin) {
  Arch arch;
  (void)parseArch(module.arch, &arch); // verified
  if (cubin.sm != arch.major * 10 + arch.minor)
    return LIGER_MAKE_STATUS(StatusCode::kInvalidArgument,
                             origin + " is compiled for sm_" +
                                 std::to_string(cubin.sm) +
                                 ", but the manifest's module '" + module.name +
                                 "' says " + module.arch);
  for (const KernelSpec &k : module.kernels) {
    EntryPoint entries[kNumLaunchStages];
    for (int e = 0, n = k.entryPoints(entries); e < n; ++e)
      LIGER_RETURN_IF_ERROR(
          checkKernel(k, *entries[e].name, entries[e].block, cubin, origin));
  }
  return Status::ok();
}
