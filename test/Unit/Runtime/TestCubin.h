//===- TestCubin.h - cubins for the runtime's tests -------------*- C++ -*-===//
//
// makeTestCubin writes, for a module of a manifest, a cubin laid out as
// ptxas lays out liger's (ELF64, EM_CUDA, CUDA ELF ABI 8): per kernel and
// finishing kernel a .text.<name> function with its global symbol, an
// .nv.info.<name> that lists the parameters a launch passes (8 bytes per
// memref word, 128 per tensor map) with their constant bank and the block
// as .maxntid, an .nv.constant0.<name> and an .nv.shared.<name>; a
// module-wide .nv.info, a relocated .debug_frame and a program header.
// Nothing runs it: the stand-in driver takes any image. The layout's
// constants are the runtime's (liger/Runtime/Cubin.h).
//
//===----------------------------------------------------------------------===//

#ifndef LIGER_TEST_UNIT_RUNTIME_TESTCUBIN_H
#define LIGER_TEST_UNIT_RUNTIME_TESTCUBIN_H

#include "liger/Runtime/Cubin.h"
#include "liger/Runtime/KernelAbi.h"

#include <cstdint>
#include <elf.h>
#include <string>
#include <vector>

namespace liger::runtime::testing {

/// Little-endian integers appended to a byte string.
template <typename T> void put(std::string *out, T value) {
  for (size_t i = 0; i < sizeof(T); ++i)
    out->push_back(static_cast<char>(static_cast<uint64_t>(value) >> (8 * i)));
}

/// An ELF64 file being written: sections in index order (#0 null, #1
/// .shstrtab), laid out and given headers by write().
class TestElf {
public:
  TestElf() {
    sections.push_back({});
    add(".shstrtab", SHT_STRTAB, 0, "");
  }
  /// Adds a section; returns its index. A SHT_NOBITS section takes
  /// `nobits` bytes in memory and none in the file.
  size_t add(const std::string &name, uint32_t type, uint64_t flags,
             std::string content, uint32_t link = 0, uint32_t info = 0,
             uint64_t entsize = 0, uint64_t align = 8, uint64_t nobits = 0) {
    sections.push_back({name, type, flags, std::move(content), link, info,
                        entsize, align, nobits});
    return sections.size() - 1;
  }
  /// The index the next section gets.
  size_t next() const { return sections.size(); }

  /// The file: the header, the sections, their headers, and one loadable
  /// segment holding section `segment`.
  std::string write(uint32_t flags, size_t segment) {
    std::string names(1, '\0');
    for (Section &s : sections) {
      if (s.name.empty())
        continue;
      s.nameOffset = static_cast<uint32_t>(names.size());
      names += s.name + '\0';
    }
    sections[1].content = names;
    std::string body(64, '\0');
    for (size_t i = 1; i < sections.size(); ++i) {
      Section &s = sections[i];
      body.resize((body.size() + s.align - 1) / s.align * s.align, '\0');
      s.offset = body.size();
      if (s.type != SHT_NOBITS)
        body += s.content;
    }
    body.resize((body.size() + 7) / 8 * 8, '\0');
    uint64_t shoff = body.size();
    for (const Section &s : sections) {
      put<uint32_t>(&body, s.nameOffset);
      put<uint32_t>(&body, s.type);
      put<uint64_t>(&body, s.flags);
      put<uint64_t>(&body, 0); // address
      put<uint64_t>(&body, s.offset);
      put<uint64_t>(&body, s.type == SHT_NOBITS ? s.nobits : s.content.size());
      put<uint32_t>(&body, s.link);
      put<uint32_t>(&body, s.info);
      put<uint64_t>(&body, s.align);
      put<uint64_t>(&body, s.entsize);
    }
    uint64_t phoff = body.size();
    const Section &seg = sections[segment];
    put<uint32_t>(&body, PT_LOAD);
    put<uint32_t>(&body, PF_R | PF_X);
    put<uint64_t>(&body, seg.offset);
    put<uint64_t>(&body, 0);
    put<uint64_t>(&body, 0);
    put<uint64_t>(&body, seg.content.size());
    put<uint64_t>(&body, seg.content.size());
    put<uint64_t>(&body, 8);
    std::string header = "\x7f"
                         "ELF";
    header += {ELFCLASS64, ELFDATA2LSB, EV_CURRENT, 0x41, 8};
    header.resize(16, '\0');
    put<uint16_t>(&header, ET_EXEC);
    put<uint16_t>(&header, cubin::kMachineCuda);
    put<uint32_t>(&header, EV_CURRENT);
    put<uint64_t>(&header, 0); // entry
    put<uint64_t>(&header, phoff);
    put<uint64_t>(&header, shoff);
    put<uint32_t>(&header, flags);
    put<uint16_t>(&header, 64);
    put<uint16_t>(&header, 56);
    put<uint16_t>(&header, 1);
    put<uint16_t>(&header, 64);
    put<uint16_t>(&header, static_cast<uint16_t>(sections.size()));
    put<uint16_t>(&header, 1);
    body.replace(0, 64, header);
    return body;
  }

private:
  struct Section {
    std::string name;
    uint32_t type = SHT_NULL;
    uint64_t flags = 0;
    std::string content;
    uint32_t link = 0, info = 0;
    uint64_t entsize = 0, align = 1, nobits = 0;
    uint32_t nameOffset = 0;
    uint64_t offset = 0;
  };
  std::vector<Section> sections;
};

/// A .nv.info record of `format`, `attribute` and a 16-bit value or the
/// 32-bit words of a payload.
inline void nvInfoRecord(std::string *out, uint8_t format, uint8_t attribute,
                         uint16_t value, std::vector<uint32_t> words = {}) {
  out->push_back(static_cast<char>(format));
  out->push_back(static_cast<char>(attribute));
  put<uint16_t>(out, format == cubin::kSized ? 4 * words.size() : value);
  for (uint32_t w : words)
    put<uint32_t>(out, w);
}

/// A cubin of the kernels (and their side kernels) of `module`, as ptxas
/// writes them for its arch, each with `staticSharedBytes` of static
/// shared memory.
inline std::string makeTestCubin(const ModuleSpec &module,
                                 uint64_t staticSharedBytes = 0) {
  struct Function {
    std::string name;
    const KernelSpec *spec;
    const int64_t *block;
  };
  std::vector<Function> functions;
  for (const KernelSpec &k : module.kernels) {
    EntryPoint entries[kNumLaunchStages];
    for (int e = 0, n = k.entryPoints(entries); e < n; ++e)
      functions.push_back({*entries[e].name, &k, entries[e].block});
  }
  TestElf elf;
  // Sections #2 to #6 as below, then four per function f: its .nv.info at
  // #7 + 4f, .text, .nv.constant0 and .nv.shared. Symbols: #0 null, #1
  // .debug_frame's section symbol, then function f at #2 + f.
  const size_t kStrtab = 2, kSymtab = 3, kDebugFrame = 5;
  auto textOf = [](size_t f) { return 8 + 4 * f; };
  std::string strtab(1, '\0'), symtab(24, '\0');
  auto symbol = [&](const std::string &name, uint8_t info, size_t section,
                    uint64_t size) {
    put<uint32_t>(&symtab, name.empty() ? 0 : strtab.size());
    if (!name.empty())
      strtab += name + '\0';
    symtab.push_back(static_cast<char>(info));
    symtab.push_back(static_cast<char>(name.empty() ? 0 : 0x10));
    put<uint16_t>(&symtab, static_cast<uint16_t>(section));
    put<uint64_t>(&symtab, 0);
    put<uint64_t>(&symtab, size);
  };
  const std::string code(256, '\x5a'); // what a kernel's code is here
  symbol("", ELF64_ST_INFO(STB_LOCAL, STT_SECTION), kDebugFrame, 0);
  for (size_t f = 0; f < functions.size(); ++f)
    symbol(functions[f].name, ELF64_ST_INFO(STB_GLOBAL, STT_FUNC), textOf(f),
           code.size());
  elf.add(".strtab", SHT_STRTAB, 0, strtab);
  elf.add(".symtab", SHT_SYMTAB, 0, symtab, kStrtab, 1, 24);
  std::string info;
  for (size_t f = 0; f < functions.size(); ++f)
    nvInfoRecord(&info, cubin::kSized, 0x2f, 0, {uint32_t(2 + f), 32});
  elf.add(".nv.info", cubin::kSectionNvInfo, 0, info, kSymtab);
  elf.add(".debug_frame", SHT_PROGBITS, 0, std::string(64, '\0'));
  std::string rela;
  put<uint64_t>(&rela, 8);
  put<uint64_t>(&rela, uint64_t(1) << 32 | 2);
  put<uint64_t>(&rela, 0);
  elf.add(".rela.debug_frame", SHT_RELA, SHF_INFO_LINK, rela, kSymtab,
          kDebugFrame, 24);
  for (size_t f = 0; f < functions.size(); ++f) {
    const KernelSpec &spec = *functions[f].spec;
    // The arguments a launch passes, at their offsets in constant bank 0.
    std::vector<uint32_t> sizes;
    for (const KernelParam &p : spec.params)
      sizes.insert(sizes.end(), descriptorWords(p), 8);
    sizes.insert(sizes.end(), spec.tensorMaps.size(), 128);
    std::string records;
    nvInfoRecord(&records, cubin::kSized, 0x37, 0, {0x82}); // skipped
    uint32_t offset = 0;
    for (size_t a = 0; a < sizes.size(); ++a) {
      uint32_t align = sizes[a] == 128 ? 64 : 8;
      offset = (cubin::kParamBase + offset + align - 1) / align * align -
               cubin::kParamBase;
      nvInfoRecord(&records, cubin::kSized, cubin::kKparamInfo, 0,
                   {0, uint32_t(a) | offset << 16, sizes[a] << 18 | 0x1f000});
      offset += sizes[a];
    }
    nvInfoRecord(&records, cubin::kSized, cubin::kMaxThreads, 0,
                 {uint32_t(functions[f].block[0]),
                  uint32_t(functions[f].block[1]),
                  uint32_t(functions[f].block[2])});
    // Its exit: the last instruction.
    nvInfoRecord(&records, cubin::kSized, cubin::kCodeOffsetLists[0], 0,
                 {uint32_t(code.size() - 16)});
    nvInfoRecord(&records, cubin::kHalf, cubin::kCbankParamSize,
                 static_cast<uint16_t>(offset));
    nvInfoRecord(&records, cubin::kSized, cubin::kParamCbank, 0,
                 {0, cubin::kParamBase | offset << 16});
    const std::string &name = functions[f].name;
    size_t text = textOf(f);
    elf.add(".nv.info." + name, cubin::kSectionNvInfo, SHF_INFO_LINK, records,
            kSymtab, static_cast<uint32_t>(text), 0, 4);
    elf.add(".text." + name, SHT_PROGBITS, SHF_ALLOC | SHF_EXECINSTR, code,
            kSymtab, static_cast<uint32_t>(2 + f), 0, 128);
    elf.add(".nv.constant0." + name, SHT_PROGBITS, SHF_ALLOC | SHF_INFO_LINK,
            std::string(cubin::kParamBase + offset, '\0'), 0,
            static_cast<uint32_t>(text), 0, 4);
    elf.add(".nv.shared." + name, SHT_NOBITS, SHF_ALLOC | SHF_WRITE, "", 0,
            static_cast<uint32_t>(text), 0, 16, staticSharedBytes);
  }
  Arch arch;
  (void)parseArch(module.arch, &arch);
  uint32_t sm = static_cast<uint32_t>(arch.major * 10 + arch.minor);
  return elf.write(0x06000004 | sm << 8, textOf(0));
}

} // namespace liger::runtime::testing

#endif // LIGER_TEST_UNIT_RUNTIME_TESTCUBIN_H
