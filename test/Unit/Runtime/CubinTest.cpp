//===- CubinTest.cpp - a cubin's structure, and the manifest against it ---===//
//
// readCubin on a cubin laid out as ptxas lays out liger's (TestCubin.h):
// what it reads back, then every structural rule, each broken in one field
// of that cubin, with its whole message. checkCubin and Bundle::open on
// manifests that lie about their cubin (its arch, a kernel, the
// parameters, the tensor maps, the block, a finishing kernel's block).
// Real cubins of every kernel template are checked by
// test/Runtime/cubin-checks.mlir.
//
//===----------------------------------------------------------------------===//

#include "liger/Runtime/Cubin.h"
#include "BundleDir.h"
#include "TestCubin.h"
#include "TestManifests.h"
#include "liger/Runtime/Bundle.h"

#include <cstring>
#include <gtest/gtest.h>

using namespace liger::runtime;
using liger::runtime::testing::kTestManifest;
using liger::runtime::testing::makeTestCubin;
using liger::runtime::testing::put;

namespace {

/// The module of the test manifest: "norm" (4 parameters, 24 words) and
/// "grad" (3 parameters, 19 words, 1 tensor map) with "grad_finish".
ModuleSpec testModule() {
  Manifest m;
  Status s = parseManifest(kTestManifest, "t", &m);
  EXPECT_TRUE(s.isOk()) << s.message();
  return m.modules[0];
}

/// A cubin to break, with the offsets of its headers.
class Bytes {
public:
  explicit Bytes(std::string bytes) : bytes(std::move(bytes)) {}
  uint64_t u64(size_t at) const {
    uint64_t v = 0;
    for (int i = 7; i >= 0; --i)
      v = v << 8 | static_cast<unsigned char>(bytes[at + i]);
    return v;
  }
  uint32_t u32(size_t at) const { return static_cast<uint32_t>(u64(at)); }
  template <typename T> void set(size_t at, T value) {
    std::string v;
    put<T>(&v, value);
    bytes.replace(at, sizeof(T), v);
  }
  /// The offset of the header of section `name`.
  size_t section(const std::string &name) const {
    size_t shoff = u64(40), names = u64(shoff + 64 + 24); // #1: .shstrtab
    for (size_t i = 0;; ++i) {
      size_t h = shoff + 64 * i;
      if (bytes.compare(names + u32(h), name.size() + 1, name.c_str(),
                        name.size() + 1) == 0)
        return h;
    }
  }
  /// The offset of the contents of section `name`.
  size_t contents(const std::string &name) const {
    return u64(section(name) + 24);
  }
  std::string bytes;
};

/// The message of reading `cubin`, "" when it reads.
std::string readError(const Bytes &cubin) {
  Cubin c;
  Status s = readCubin(cubin.bytes.data(), cubin.bytes.size(), "k.cubin", &c);
  return s.isOk() ? "" : s.message();
}

const std::string kNotACubin = "k.cubin is not a well-formed cubin: ";

TEST(CubinTest, ReadsWhatTheCubinRecords) {
  ModuleSpec module = testModule();
  std::string bytes = makeTestCubin(module, 1024);
  Cubin cubin;
  Status s = readCubin(bytes.data(), bytes.size(), "k.cubin", &cubin);
  ASSERT_TRUE(s.isOk()) << s.message();
  EXPECT_EQ(cubin.sm, 90);
  ASSERT_EQ(cubin.kernels.size(), 3u);
  const CubinKernel *norm = cubin.find("norm");
  ASSERT_NE(norm, nullptr);
  EXPECT_TRUE(norm->hasInfo);
  EXPECT_EQ(norm->paramSizes, std::vector<uint32_t>(24, 8)); // 7 + 5 + 7 + 5
  EXPECT_EQ(norm->paramBytes, 192u);
  EXPECT_EQ(norm->maxBlock[0], 256u);
  EXPECT_EQ(norm->requiredBlock[0], 0u); // no .reqntid
  EXPECT_EQ(norm->staticSharedBytes, 1024u);
  const CubinKernel *grad = cubin.find("grad");
  ASSERT_NE(grad, nullptr);
  std::vector<uint32_t> sizes(19, 8);
  sizes.push_back(128); // the tensor map, 64-byte aligned in the bank
  EXPECT_EQ(grad->paramSizes, sizes);
  EXPECT_EQ(grad->paramBytes, 152u + 24 + 128);
  EXPECT_EQ(cubin.find("grad_finish")->maxBlock[0], 256u);
  EXPECT_EQ(cubin.find("other"), nullptr);
  EXPECT_TRUE(checkCubin(module, cubin, "k.cubin").isOk());
}

struct Breakage {
  const char *name;
  void (*breakIt)(Bytes &);
  const char *message;
};

class CubinStructureTest : public ::testing::TestWithParam<Breakage> {};

TEST_P(CubinStructureTest, SaysWhatIsWrong) {
  Bytes cubin(makeTestCubin(testModule()));
  GetParam().breakIt(cubin);
  EXPECT_EQ(readError(cubin), kNotACubin + GetParam().message);
}

// Section #3 is .symtab, #5 .debug_frame, #6 .rela.debug_frame; then four
// per kernel from #7: .nv.info.norm, .text.norm, .nv.constant0.norm,
// .nv.shared.norm, .nv.info.grad, ...
INSTANTIATE_TEST_SUITE_P(
    Cubin, CubinStructureTest,
    ::testing::Values(
        Breakage{"short", [](Bytes &c) { c.bytes.resize(63); },
                 "63 bytes, fewer than an ELF header's 64"},
        Breakage{"magic", [](Bytes &c) { c.bytes[1] = 'e'; },
                 "no ELF magic number"},
        Breakage{"elf32", [](Bytes &c) { c.bytes[4] = 1; },
                 "not a little-endian ELF64 file of ELF version 1"},
        Breakage{"big-endian", [](Bytes &c) { c.bytes[5] = 2; },
                 "not a little-endian ELF64 file of ELF version 1"},
        Breakage{"os-abi", [](Bytes &c) { c.bytes[7] = 0; },
                 "OS ABI 0 version 8 is not a CUDA ELF ABI (51 version 7, 65 "
                 "version 8)"},
        Breakage{"machine", [](Bytes &c) { c.set<uint16_t>(18, 62); },
                 "not an executable for EM_CUDA (type 2, machine 62)"},
        Breakage{"relocatable", [](Bytes &c) { c.set<uint16_t>(16, 1); },
                 "not an executable for EM_CUDA (type 1, machine 190)"},
        Breakage{"header-size", [](Bytes &c) { c.set<uint16_t>(58, 40); },
                 "header sizes 64, 40 and 56 are not ELF64's 64, 64 and 56"},
        Breakage{"no-sections", [](Bytes &c) { c.set<uint16_t>(60, 0); },
                 "0 section headers"},
        Breakage{"names-index", [](Bytes &c) { c.set<uint16_t>(62, 200); },
                 "the section name table is section #200 of 19"},
        Breakage{"section-table",
                 [](Bytes &c) { c.set<uint64_t>(40, c.bytes.size() - 64); },
                 "its 19 section headers at offset 6392 extend past its end "
                 "(6456 bytes)"},
        Breakage{"section-past-end",
                 [](Bytes &c) {
                   c.set<uint64_t>(c.section(".text.norm") + 32, 1 << 20);
                 },
                 "section #8 (1048576 bytes at offset 1152) extends past its "
                 "end (6456 bytes)"},
        Breakage{"section-overflow",
                 [](Bytes &c) {
                   size_t h = c.section(".text.norm");
                   c.set<uint64_t>(h + 24, ~uint64_t(0) - 8);
                 },
                 "section #8 (256 bytes at offset 18446744073709551607) "
                 "extends past its end (6456 bytes)"},
        Breakage{"strtab-nul",
                 [](Bytes &c) {
                   size_t h = c.section(".strtab");
                   c.bytes[c.u64(h + 24) + c.u64(h + 32) - 1] = 'x';
                 },
                 "string table section #2 does not end with a NUL"},
        Breakage{"null-section",
                 [](Bytes &c) { c.set<uint32_t>(c.u64(40) + 4, SHT_PROGBITS); },
                 "section #0 is not the null section"},
        Breakage{"names-type",
                 [](Bytes &c) { c.set<uint32_t>(c.u64(40) + 64 + 4, 1); },
                 "the section name table (section #1) is not a string table"},
        Breakage{"section-name",
                 [](Bytes &c) { c.set<uint32_t>(c.section(".strtab"), 9999); },
                 "the name of section #2 is outside the section name table"},
        Breakage{"section-link",
                 [](Bytes &c) {
                   c.set<uint32_t>(c.section(".text.norm") + 40, 77);
                 },
                 "section #8 (.text.norm) links to section #77 of 19"},
        Breakage{"program-headers",
                 [](Bytes &c) { c.set<uint16_t>(56, 1000); },
                 "its 1000 program headers at offset 6400 extend past its end "
                 "(6456 bytes)"},
        Breakage{"segment",
                 [](Bytes &c) { c.set<uint64_t>(c.u64(32) + 32, 1 << 20); },
                 "segment #0 (1048576 bytes at offset 1152) extends past its "
                 "end (6456 bytes)"},
        Breakage{"segment-memory",
                 [](Bytes &c) { c.set<uint64_t>(c.u64(32) + 40, 8); },
                 "segment #0 has 256 bytes in the file but 8 in memory"},
        Breakage{"symbol-size",
                 [](Bytes &c) { c.set<uint64_t>(c.section(".symtab") + 56, 16); },
                 "section #3 (.symtab) is not a table of 24-byte symbols"},
        Breakage{"symbol-names",
                 [](Bytes &c) { c.set<uint32_t>(c.section(".symtab") + 40, 5); },
                 "section #3 (.symtab) names its symbols in section #5 "
                 "(.debug_frame), which is not a string table"},
        Breakage{"symbol-name",
                 [](Bytes &c) {
                   c.set<uint32_t>(c.contents(".symtab") + 48, 5000);
                 },
                 "the name of symbol #2 is outside its string table"},
        Breakage{"symbol-section",
                 [](Bytes &c) {
                   c.set<uint16_t>(c.contents(".symtab") + 48 + 6, 300);
                 },
                 "symbol #2 is in section #300 of 19"},
        Breakage{"no-symbols",
                 [](Bytes &c) {
                   c.set<uint32_t>(c.section(".symtab") + 4, SHT_PROGBITS);
                 },
                 "no symbol table"},
        Breakage{"two-symbol-tables",
                 [](Bytes &c) {
                   size_t h = c.section(".debug_frame");
                   c.bytes.replace(h + 4, 60, c.bytes, c.section(".symtab") + 4,
                                   60);
                 },
                 "more than one symbol table"},
        Breakage{"relocation-size",
                 [](Bytes &c) {
                   c.set<uint64_t>(c.section(".rela.debug_frame") + 56, 16);
                 },
                 "section #6 (.rela.debug_frame) is not a table of 24-byte "
                 "relocations"},
        Breakage{"relocation-target",
                 [](Bytes &c) {
                   c.set<uint32_t>(c.section(".rela.debug_frame") + 44, 0);
                 },
                 "section #6 (.rela.debug_frame) relocates section #0 by the "
                 "symbols of section #3"},
        Breakage{"relocation-offset",
                 [](Bytes &c) {
                   c.set<uint64_t>(c.contents(".rela.debug_frame"), 64);
                 },
                 "relocation #0 of section #6 (.rela.debug_frame) is at offset "
                 "64 of a 64-byte section, by symbol #1 of 5"},
        Breakage{"relocation-symbol",
                 [](Bytes &c) {
                   c.set<uint32_t>(c.contents(".rela.debug_frame") + 12, 5);
                 },
                 "relocation #0 of section #6 (.rela.debug_frame) is at offset "
                 "8 of a 64-byte section, by symbol #5 of 5"},
        Breakage{"record-cut",
                 [](Bytes &c) {
                   size_t h = c.section(".nv.info.norm");
                   c.set<uint64_t>(h + 32, c.u64(h + 32) - 10);
                 },
                 "section #7 (.nv.info.norm): a record is cut off at its end"},
        Breakage{"record-payload",
                 [](Bytes &c) {
                   size_t h = c.section(".nv.info.norm");
                   c.set<uint64_t>(h + 32, c.u64(h + 32) - 2);
                 },
                 "section #7 (.nv.info.norm): a record of 8 bytes runs past "
                 "its end"},
        Breakage{"record-format",
                 [](Bytes &c) { c.bytes[c.contents(".nv.info.norm")] = 9; },
                 "section #7 (.nv.info.norm): a record has the unknown format "
                 "9"},
        Breakage{"record-length",
                 [](Bytes &c) {
                   c.set<uint16_t>(c.contents(".nv.info.norm") + 2, 4000);
                 },
                 "section #7 (.nv.info.norm): a record of 4000 bytes runs past "
                 "its end"},
        Breakage{"module-info",
                 [](Bytes &c) { c.bytes[c.contents(".nv.info")] = 0; },
                 "section #4 (.nv.info): a record has the unknown format 0"},
        Breakage{"param-twice",
                 [](Bytes &c) {
                   // The second parameter's record says it is the first.
                   c.set<uint16_t>(c.contents(".nv.info.norm") + 8 + 16 + 8, 0);
                 },
                 "section #7 (.nv.info.norm): parameter #0 is described twice"},
        Breakage{"param-missing",
                 [](Bytes &c) {
                   c.set<uint16_t>(c.contents(".nv.info.norm") + 8 + 16 + 8,
                                   40);
                 },
                 "section #7 (.nv.info.norm): parameter #1 is not described"},
        Breakage{"param-record-size",
                 [](Bytes &c) {
                   c.set<uint16_t>(c.contents(".nv.info.norm") + 8 + 2, 8);
                 },
                 "section #7 (.nv.info.norm): attribute 23 is not 12 bytes"},
        Breakage{"param-bytes",
                 [](Bytes &c) {
                   // The last parameter's offset, past the parameters' bytes.
                   c.set<uint16_t>(
                       c.contents(".nv.info.norm") + 8 + 16 * 21 + 10, 200);
                 },
                 "section #7 (.nv.info.norm): parameter #21 ends at byte 208 "
                 "of the parameters' 192"},
        Breakage{"param-cbank-size",
                 [](Bytes &c) {
                   // The constant bank record's size (its last 16 bits).
                   size_t h = c.section(".nv.info.norm");
                   c.set<uint16_t>(c.u64(h + 24) + c.u64(h + 32) - 2, 160);
                 },
                 "section #7 (.nv.info.norm): the parameters are 192 bytes "
                 "(attribute 25), but take 160 in constant bank 0 (attribute "
                 "10)"},
        Breakage{"constant-bank",
                 [](Bytes &c) {
                   size_t h = c.section(".nv.constant0.norm");
                   c.set<uint64_t>(h + 32, 600);
                 },
                 "section #7 (.nv.info.norm): the parameters lie at 528 + 192 "
                 "bytes of .nv.constant0.norm, which has 600 bytes"},
        Breakage{"code-offset",
                 [](Bytes &c) {
                   // The exit's offset, after the parameters and block.
                   c.set<uint32_t>(
                       c.contents(".nv.info.norm") + 8 + 16 * 24 + 16 + 4, 256);
                 },
                 "section #7 (.nv.info.norm): attribute 28 lists offset 256 of "
                 "the kernel's 256 bytes of code"},
        Breakage{"code-offset-list",
                 [](Bytes &c) {
                   c.set<uint16_t>(
                       c.contents(".nv.info.norm") + 8 + 16 * 24 + 16 + 2, 2);
                 },
                 "section #7 (.nv.info.norm): attribute 28 is not a list of "
                 "32-bit offsets"},
        Breakage{"module-symbol",
                 [](Bytes &c) { c.set<uint32_t>(c.contents(".nv.info") + 4, 99); },
                 "section #4 (.nv.info): attribute 47 is about symbol #99 of 5"},
        Breakage{"cbank-symbol",
                 [](Bytes &c) {
                   size_t h = c.section(".nv.info.norm");
                   c.set<uint32_t>(c.u64(h + 24) + c.u64(h + 32) - 8, 9);
                 },
                 "section #7 (.nv.info.norm): the parameters' constant bank is "
                 "symbol #9 of 5"},
        Breakage{"info-target",
                 [](Bytes &c) {
                   c.set<uint32_t>(c.section(".nv.info.norm") + 44, 12);
                 },
                 "section #7 (.nv.info.norm) does not describe section #8 "
                 "(.text.norm)"},
        Breakage{"repeated-name",
                 [](Bytes &c) {
                   // .nv.info.grad named .nv.info.norm.
                   c.set<uint32_t>(c.section(".nv.info.grad"),
                                   c.u32(c.section(".nv.info.norm")));
                 },
                 "two sections are named .nv.info.norm"}),
    [](const ::testing::TestParamInfo<Breakage> &info) {
      std::string name = info.param.name;
      for (char &c : name)
        if (c == '-')
          c = '_';
      return name;
    });

//===----------------------------------------------------------------------===//
// Manifests that lie about their cubin
//===----------------------------------------------------------------------===//

class LyingManifestTest : public liger::runtime::testing::BundleDirTest {
protected:
  /// The message of opening the test manifest with a cubin made from its
  /// module after `edit`.
  std::string opened(const std::function<void(ModuleSpec &)> &edit) {
    std::unique_ptr<Bundle> b;
    Status s = openWith(kTestManifest, &b, edit);
    return s.isOk() ? "" : s.message();
  }
  std::string cubin() const { return dir + "/k.cubin"; }
};

TEST_F(LyingManifestTest, TheTruthOpens) { EXPECT_EQ(opened({}), ""); }

TEST_F(LyingManifestTest, AnotherArch) {
  EXPECT_EQ(opened([](ModuleSpec &m) { m.arch = "sm_80"; }),
            cubin() + " is compiled for sm_80, but the manifest's module "
                      "'liger_kernels' says sm_90a");
}

TEST_F(LyingManifestTest, AKernelTheCubinDoesNotHave) {
  EXPECT_EQ(opened([](ModuleSpec &m) { m.kernels[0].name = "other"; }),
            cubin() + ": kernel 'norm': the cubin has no such kernel (no "
                      "section .text.norm with its function)");
  EXPECT_EQ(opened([](ModuleSpec &m) { m.kernels[1].finish.name = "other"; }),
            cubin() +
                ": kernel 'grad_finish': the cubin has no such kernel (no "
                "section .text.grad_finish with its function)");
}

// The filed case: a manifest with one parameter fewer than the kernel has
// would have the driver read past the arguments a launch passes.
TEST_F(LyingManifestTest, MoreOrFewerParameters) {
  EXPECT_EQ(opened([](ModuleSpec &m) { m.kernels[0].params.pop_back(); }),
            cubin() + ": kernel 'norm': the manifest says 4 parameters and 0 "
                      "tensor maps, 24 arguments of 192 bytes, but the "
                      "cubin's .nv.info.norm has 19 arguments of 152 bytes");
  EXPECT_EQ(opened([](ModuleSpec &m) {
              m.kernels[0].params.push_back(m.kernels[0].params[1]);
            }),
            cubin() + ": kernel 'norm': the manifest says 4 parameters and 0 "
                      "tensor maps, 24 arguments of 192 bytes, but the cubin's "
                      ".nv.info.norm has 29 arguments of 232 bytes");
}

TEST_F(LyingManifestTest, ATensorMapMoreOrLess) {
  EXPECT_EQ(opened([](ModuleSpec &m) { m.kernels[1].tensorMaps.clear(); }),
            cubin() + ": kernel 'grad': the manifest says 3 parameters and 1 "
                      "tensor map, 20 arguments of 280 bytes, but the cubin's "
                      ".nv.info.grad has 19 arguments of 152 bytes");
  // As many arguments, some of another size: the cubin's kernel takes a
  // scalar (3 words) where the manifest says a feature (5), and two
  // tensor maps more.
  EXPECT_EQ(opened([](ModuleSpec &m) {
              KernelSpec &k = m.kernels[1];
              k.params[1].kind = ParamKind::Scalar;
              k.tensorMaps.push_back(k.tensorMaps[0]);
              k.tensorMaps.push_back(k.tensorMaps[0]);
            }),
            cubin() + ": kernel 'grad': the manifest says 3 parameters and 1 "
                      "tensor map, 20 arguments of 280 bytes, but the cubin's "
                      ".nv.info.grad has 20 arguments of 520 bytes; argument "
                      "#17 is 128 bytes there, not 8");
}

// The filed case: half the block gave a wrong weight gradient.
TEST_F(LyingManifestTest, AnotherBlock) {
  EXPECT_EQ(opened([](ModuleSpec &m) { m.kernels[0].block[0] = 512; }),
            cubin() + ": kernel 'norm': the manifest's block is [256, 1, 1], "
                      "but the cubin's is [512, 1, 1] (.maxntid in "
                      ".nv.info.norm): the kernel is built for that block");
  EXPECT_EQ(opened([](ModuleSpec &m) { m.kernels[1].finish.block[0] = 128; }),
            cubin() +
                ": kernel 'grad_finish': the manifest's block is [256, 1, "
                "1], but the cubin's is [128, 1, 1] (.maxntid in "
                ".nv.info.grad_finish): the kernel is built for that block");
}

// The grid and the dynamic shared memory a kernel needs are not in the
// cubin: a manifest may lie about them within the verifier's ranges
// (docs/Design/Kernel-ABI.md).
TEST_F(LyingManifestTest, WhatTheCubinDoesNotRecordIsNotCompared) {
  std::string text = kTestManifest;
  text.replace(text.find("\"rows\", 1, 1"), 6, "\"rows/2\"");
  text.replace(text.find("36"), 2, "0");
  std::unique_ptr<Bundle> b;
  Status s = openWith(text, &b);
  EXPECT_TRUE(s.isOk()) << s.message();
}

TEST(CubinCheckTest, ReqntidAndStaticSharedMemory) {
  ModuleSpec module = testModule();
  std::string bytes = makeTestCubin(module);
  Cubin cubin;
  ASSERT_TRUE(readCubin(bytes.data(), bytes.size(), "k.cubin", &cubin).isOk());
  CubinKernel &norm = cubin.kernels[0];
  norm.requiredBlock[0] = 128;
  norm.requiredBlock[1] = norm.requiredBlock[2] = 1;
  EXPECT_EQ(checkCubin(module, cubin, "k.cubin").message(),
            "k.cubin: kernel 'norm': the manifest's block is [256, 1, 1], but "
            "the cubin's is [128, 1, 1] (.reqntid in .nv.info.norm): the "
            "kernel is built for that block");
  norm.requiredBlock[0] = 256;
  norm.staticSharedBytes = uint64_t(1) << 40;
  EXPECT_EQ(checkCubin(module, cubin, "k.cubin").message(),
            "k.cubin: kernel 'norm': the cubin's .nv.shared.norm is "
            "1099511627776 bytes, more shared memory than any GPU has");
  norm.staticSharedBytes = 0;
  norm.hasInfo = false;
  EXPECT_EQ(checkCubin(module, cubin, "k.cubin").message(),
            "k.cubin: kernel 'norm': the cubin has no .nv.info.norm to "
            "compare its parameters with");
}

} // namespace
