//===- ManifestTest.cpp - the kernel ABI's manifest, read and written -----===//
//
// Every rule of the kernel ABI with its full message: the JSON ones
// (malformed text, duplicate and unknown keys, missing fields, wrong types,
// unknown enumerators, shapes that are not their kind's) through
// parseManifest, the others (ranges, names, order, workspaces, tensor maps,
// grids, archs, plans) through verifyManifest on the structs the bundle
// writer fills, which writeManifest checks the same way. And the round trip
// writer -> reader, names with control characters and non-ASCII included.
//
//===----------------------------------------------------------------------===//

#include "TestManifests.h"
#include "liger/Runtime/KernelAbi.h"

#include <fstream>
#include <functional>
#include <gtest/gtest.h>
#include <sstream>
#include <string>

using namespace liger::runtime;
using liger::runtime::testing::kTestManifest;
using liger::runtime::testing::moduleManifest;
using liger::runtime::testing::rowwiseKernel;

namespace {

/// A manifest with one kernel of each shape of the ABI: rows, a weight
/// gradient with its workspace and finishing kernel, a matmul with tensor
/// maps, RoPE, an attention backward (head scalars, a heads workspace),
/// and a loss plan.
Manifest sample() {
  KernelSpec norm = rowwiseKernel(
      "layer_rowwise_0", "liger.add_rms_norm",
      {{"input0", ParamRole::Input, ParamKind::Rows, DType::bf16, 4096, 0},
       {"input1", ParamRole::Input, ParamKind::Feature, DType::bf16, 4096, 0},
       {"output0", ParamRole::Output, ParamKind::Rows, DType::bf16, 4096, 0},
       {"output1", ParamRole::Output, ParamKind::RowScalars, DType::f32, 0,
        0}});
  Manifest m = moduleManifest("sm_90a", {});
  m.source = "layer.mlir";
  ModuleSpec &module = m.modules[0];
  module.cubinFile = "liger_kernels.sm_90a.cubin";
  module.ptxFile = "liger_kernels.sm_90a.ptx";
  module.kernels.push_back(norm);

  KernelSpec grad = norm;
  grad.name = "grad_rowwise_0";
  grad.function = "grad";
  grad.ops = "liger.rms_norm_grad";
  grad.grid[0] = {GridDim::Ctas, 1};
  grad.ctasPerSm = 4;
  grad.finish = {"grad_rowwise_0_finish", 128, {256, 1, 1}, 1024};
  grad.params = {
      {"input0", ParamRole::Input, ParamKind::Rows, DType::bf16, 4096, 0},
      {"output0", ParamRole::Output, ParamKind::Feature, DType::bf16, 4096, 0},
      {"workspace0", ParamRole::Workspace, ParamKind::Partials, DType::f32,
       4096, 0}};
  module.kernels.push_back(grad);

  KernelSpec proj = norm;
  proj.name = "layer_matmul_1";
  proj.ops = "liger.linear";
  proj.kernelTemplate = KernelTemplate::Matmul;
  proj.grid[0] = {GridDim::Const, 16};
  proj.grid[1] = {GridDim::Rows, 128};
  proj.dynamicSharedMemoryBytes = 200704;
  proj.params = {
      {"input0", ParamRole::Input, ParamKind::Rows, DType::bf16, 4096, 0},
      {"input1", ParamRole::Input, ParamKind::Matrix, DType::bf16, 4096, 1024},
      {"output0", ParamRole::Output, ParamKind::Rows, DType::bf16, 1024, 0}};
  proj.tensorMaps = {{0, 128, 64, TensorMapSwizzle::B128, true},
                     {1, 256, 64, TensorMapSwizzle::B128, true}};
  proj.narrow.name = "layer_matmul_1_narrow";
  proj.narrow.grid[0] = {GridDim::Const, 16};
  proj.narrow.grid[1] = {GridDim::Rows, 64};
  proj.narrow.block[0] = 256;
  proj.narrow.dynamicSharedMemoryBytes = 150000;
  proj.narrow.tensorMaps = {{0, 64, 64, TensorMapSwizzle::B128, true},
                            {1, 256, 64, TensorMapSwizzle::B128, true}};
  module.kernels.push_back(proj);

  KernelSpec rope = norm;
  rope.name = "rope_rowwise_0";
  rope.function = "rope";
  rope.ops = "liger.rope";
  rope.kernelTemplate = KernelTemplate::RoPE;
  rope.grid[0] = {GridDim::Tokens, 1};
  rope.params = {
      {"input0", ParamRole::Input, ParamKind::Heads, DType::bf16, 128, 32},
      {"input1", ParamRole::Input, ParamKind::Tables, DType::bf16, 128, 1},
      {"input2", ParamRole::Input, ParamKind::Tables, DType::bf16, 128, 0},
      {"output0", ParamRole::Output, ParamKind::Heads, DType::bf16, 128, 32}};
  module.kernels.push_back(rope);

  KernelSpec attn = norm;
  attn.name = "attn_attention_0";
  attn.function = "attn";
  attn.ops = "liger.attention_grad";
  attn.kernelTemplate = KernelTemplate::Attention;
  attn.grid[0] = {GridDim::Sms, 1};
  attn.ctasPerSm = 1;
  attn.prepare = {"attn_attention_0_prepare", 512, {256, 1, 1}, 0};
  attn.finish = {"attn_attention_0_finish", 264, {256, 1, 1}, 0};
  attn.params = {
      {"input0", ParamRole::Input, ParamKind::Heads, DType::bf16, 128, 32},
      {"input1", ParamRole::Input, ParamKind::HeadScalars, DType::f32, 0, 32},
      {"output0", ParamRole::Output, ParamKind::Heads, DType::bf16, 128, 32},
      {"workspace0", ParamRole::Workspace, ParamKind::Heads, DType::f32, 128,
       32}};
  attn.tensorMaps = {{0, 64, 64, TensorMapSwizzle::B128, true}};
  module.kernels.push_back(attn);

  // A LoRA projection: rows and row_scalars workspaces its CTAs hand each
  // other values through, and no finishing kernel.
  KernelSpec lora = proj;
  lora.name = "lora_matmul_0";
  lora.narrow = {};
  lora.function = "lora";
  lora.ops = "liger.lora_linear";
  lora.params.push_back({"workspace0", ParamRole::Workspace, ParamKind::Rows,
                         DType::f32, 16, 0});
  lora.params.push_back({"workspace1", ParamRole::Workspace,
                         ParamKind::RowScalars, DType::f32, 0, 0});
  module.kernels.push_back(lora);

  LossPlan plan;
  plan.function = "step";
  plan.chunkTokens = 2048;
  plan.memoryBudget = 536870912;
  plan.mean = true;
  plan.kernels[static_cast<int>(LossStage::Logits)] = "layer_matmul_1";
  plan.kernels[static_cast<int>(LossStage::CE)] = "layer_rowwise_0";
  m.plans.push_back(plan);
  return m;
}

std::string written(const Manifest &m) {
  std::string text;
  Status s = writeManifest(m, "t", &text);
  EXPECT_TRUE(s.isOk()) << s.toString();
  return text;
}

//===----------------------------------------------------------------------===//
// The round trip
//===----------------------------------------------------------------------===//

TEST(ManifestTest, WhatIsWrittenReadsBackTheSame) {
  Manifest m = sample();
  std::string text = written(m);
  Manifest back;
  Status s = parseManifest(text, "t", &back);
  ASSERT_TRUE(s.isOk()) << s.toString();
  EXPECT_EQ(written(back), text);
  ASSERT_EQ(back.modules.size(), 1u);
  ASSERT_EQ(back.modules[0].kernels.size(), 6u);
  const KernelSpec &grad = back.modules[0].kernels[1];
  EXPECT_EQ(grad.function, "grad");
  EXPECT_EQ(grad.grid[0], (GridDim{GridDim::Ctas, 1}));
  EXPECT_EQ(grad.finish.name, "grad_rowwise_0_finish");
  EXPECT_EQ(grad.finish.grid, 128);
  EXPECT_EQ(grad.finish.dynamicSharedMemoryBytes, 1024);
  EXPECT_EQ(grad.ctasPerSm, 4);
  EXPECT_EQ(grad.params[2].role, ParamRole::Workspace);
  const KernelSpec &proj = back.modules[0].kernels[2];
  EXPECT_EQ(proj.kernelTemplate, KernelTemplate::Matmul);
  EXPECT_EQ(proj.grid[1], (GridDim{GridDim::Rows, 128}));
  EXPECT_EQ(proj.params[1].outer, 1024);
  EXPECT_EQ(proj.params[1].length, 4096);
  ASSERT_EQ(proj.tensorMaps.size(), 2u);
  EXPECT_EQ(proj.tensorMaps[1].param, 1u);
  EXPECT_EQ(proj.tensorMaps[1].boxRows, 256);
  EXPECT_EQ(proj.tensorMaps[1].swizzle, TensorMapSwizzle::B128);
  ASSERT_TRUE(proj.hasNarrow());
  EXPECT_EQ(proj.narrow.name, "layer_matmul_1_narrow");
  EXPECT_EQ(proj.narrow.grid[1], (GridDim{GridDim::Rows, 64}));
  EXPECT_EQ(proj.narrow.block[0], 256);
  EXPECT_EQ(proj.narrow.dynamicSharedMemoryBytes, 150000);
  ASSERT_EQ(proj.narrow.tensorMaps.size(), 2u);
  EXPECT_EQ(proj.narrow.tensorMaps[0].boxRows, 64);
  EntryPoint projEntries[kNumLaunchStages];
  ASSERT_EQ(proj.entryPoints(projEntries), 2);
  EXPECT_EQ(projEntries[1].stage, LaunchStage::Narrow);
  EXPECT_EQ(*projEntries[1].name, "layer_matmul_1_narrow");
  EXPECT_EQ(projEntries[1].dynamicSharedMemoryBytes, 150000);
  EXPECT_FALSE(back.modules[0].kernels[5].hasNarrow());
  const KernelSpec &rope = back.modules[0].kernels[3];
  EXPECT_EQ(rope.grid[0], (GridDim{GridDim::Tokens, 1}));
  EXPECT_EQ(rope.params[0].outer, 32);
  EXPECT_EQ(rope.params[1].outer, 1); // a broadcast table
  EXPECT_EQ(rope.params[2].outer, 0);
  const KernelSpec &attn = back.modules[0].kernels[4];
  EXPECT_EQ(attn.params[1].kind, ParamKind::HeadScalars);
  EXPECT_EQ(attn.params[1].outer, 32);
  EXPECT_EQ(attn.params[1].length, 0);
  EXPECT_EQ(attn.params[3].role, ParamRole::Workspace);
  EXPECT_EQ(attn.params[3].kind, ParamKind::Heads);
  EXPECT_TRUE(attn.hasPrepare());
  EXPECT_EQ(attn.prepare.name, "attn_attention_0_prepare");
  EXPECT_EQ(attn.prepare.grid, 512);
  EXPECT_EQ(attn.prepare.block[0], 256);
  EXPECT_FALSE(back.modules[0].kernels[1].hasPrepare());
  EntryPoint entries[kNumLaunchStages];
  ASSERT_EQ(attn.entryPoints(entries), 3);
  EXPECT_EQ(entries[0].stage, LaunchStage::Prepare);
  EXPECT_EQ(*entries[1].name, "attn_attention_0");
  EXPECT_EQ(*entries[2].name, "attn_attention_0_finish");
  ASSERT_EQ(back.modules[0].kernels[0].entryPoints(entries), 1);
  EXPECT_EQ(entries[0].stage, LaunchStage::Main);
  const KernelSpec &lora = back.modules[0].kernels[5];
  EXPECT_TRUE(lora.hasWorkspaces());
  EXPECT_FALSE(lora.hasFinish());
  EXPECT_EQ(lora.params[4].kind, ParamKind::RowScalars);
  ASSERT_EQ(lora.entryPoints(entries), 1);
  EXPECT_FALSE(back.modules[0].kernels[0].hasWorkspaces());
  ASSERT_EQ(back.plans.size(), 1u);
  EXPECT_EQ(back.plans[0].kernels[static_cast<int>(LossStage::CE)],
            "layer_rowwise_0");
  EXPECT_TRUE(back.plans[0].kernels[static_cast<int>(LossStage::DX)].empty());
  EXPECT_TRUE(back.plans[0].mean);
}

// Each template's spelling reads back as it; templates added later come
// last, so that the values of the others stay.
// The launcher's choice of a narrow variant, on the fused linear JSD's
// dx (the lm_head sweep, docs/benchmarks.md: 1024 rows by 2048 columns in
// 128 x 256 tiles is 64 CTAs, in 64 x 256 tiles 128; the narrow tile 1.42x
// faster on an H100's 132 SMs; at 8192 rows 1.40x slower; at 1024 rows by
// 4096 columns, 128 CTAs against 256, 1.16x slower).
TEST(ManifestTest, ANarrowVariantRunsWhereTheKernelLeavesSmsIdle) {
  EXPECT_TRUE(chooseNarrow(64, 128, 132));
  EXPECT_FALSE(chooseNarrow(512, 1024, 132));
  EXPECT_FALSE(chooseNarrow(128, 256, 132));
  // The same CTAs (one row tile either way): the kernel.
  EXPECT_FALSE(chooseNarrow(8, 8, 132));
  // Twice the CTAs within one wave: the narrow tile; in two waves (120 CTAs
  // on 114 SMs), the kernel.
  EXPECT_TRUE(chooseNarrow(60, 120, 132));
  EXPECT_FALSE(chooseNarrow(60, 120, 114));
  EXPECT_FALSE(chooseNarrow(100, 200, 132));
  // Counts outside [1, 2^30]: the kernel.
  EXPECT_FALSE(chooseNarrow(0, 8, 132));
  EXPECT_FALSE(chooseNarrow(8, 16, 0));
  EXPECT_FALSE(chooseNarrow(8, kMaxNarrowCtas + 1, 132));
  EXPECT_FALSE(chooseNarrow(kMaxNarrowCtas, kMaxNarrowCtas, 1));
}

TEST(ManifestTest, TemplateNamesRoundTrip) {
  for (KernelTemplate t : {KernelTemplate::Rowwise, KernelTemplate::RoPE,
                           KernelTemplate::CrossEntropy, KernelTemplate::Matmul,
                           KernelTemplate::Attention}) {
    KernelTemplate back = KernelTemplate::Rowwise;
    ASSERT_TRUE(parseTemplate(templateName(t), &back)) << templateName(t);
    EXPECT_EQ(back, t) << templateName(t);
  }
  EXPECT_STREQ(templateName(KernelTemplate::Attention), "attention");
  EXPECT_EQ(static_cast<int>(KernelTemplate::Attention), 4);
  KernelTemplate t;
  EXPECT_FALSE(parseTemplate("Attention", &t));
}

// The same for parameter kinds: head_scalars came last.
TEST(ManifestTest, KindNamesRoundTrip) {
  for (ParamKind k :
       {ParamKind::Rows, ParamKind::RowScalars, ParamKind::Feature,
        ParamKind::Scalar, ParamKind::Heads, ParamKind::Tables,
        ParamKind::Partials, ParamKind::Matrix, ParamKind::HeadScalars}) {
    ParamKind back = ParamKind::Rows;
    ASSERT_TRUE(parseKind(kindName(k), &back)) << kindName(k);
    EXPECT_EQ(back, k) << kindName(k);
  }
  EXPECT_STREQ(kindName(ParamKind::HeadScalars), "head_scalars");
  EXPECT_EQ(static_cast<int>(ParamKind::Matrix), 7);
  EXPECT_EQ(static_cast<int>(ParamKind::HeadScalars), 8);
}

// A head_scalars parameter is ["batch", heads, "seq"]: a rank-3 memref of
// 9 words, whatever its role.
TEST(ManifestTest, HeadScalarsShape) {
  KernelParam lse{
      "lse", ParamRole::Output, ParamKind::HeadScalars, DType::f32, 0, 8};
  EXPECT_EQ(manifestShape(lse),
            (std::vector<ShapeEntry>{{0, "batch"}, {8, nullptr}, {0, "seq"}}));
  EXPECT_EQ(shapePattern(ParamKind::HeadScalars),
            "[\"batch\", heads, \"seq\"]");
  EXPECT_EQ(descriptorWords(lse), 9u);
  int64_t length = -1, outer = -1;
  ASSERT_TRUE(paramSizesFromShape(ParamKind::HeadScalars, manifestShape(lse),
                                  &length, &outer));
  EXPECT_EQ(length, 0);
  EXPECT_EQ(outer, 8);
  EXPECT_FALSE(paramSizesFromShape(
      ParamKind::HeadScalars,
      {{0, "batch"}, {8, nullptr}, {0, "seq"}, {64, nullptr}}, &length,
      &outer));
  EXPECT_FALSE(paramSizesFromShape(ParamKind::HeadScalars,
                                   {{0, "batch"}, {0, "seq"}, {8, nullptr}},
                                   &length, &outer));
}

// A tensor map may name a [batch, heads, seq, D] parameter (an attention
// kernel's); it is written and read as any other.
TEST(ManifestTest, AHeadsParameterTakesATensorMap) {
  Manifest m = sample();
  KernelSpec &attn = m.modules[0].kernels[3];
  attn.kernelTemplate = KernelTemplate::Attention;
  attn.tensorMaps = {{0, 128, 64, TensorMapSwizzle::B128, true},
                     {3, 64, 64, TensorMapSwizzle::B128, false}};
  std::string text = written(m);
  EXPECT_NE(text.find("\"template\": \"attention\""), std::string::npos)
      << text;
  Manifest back;
  Status s = parseManifest(text, "t", &back);
  ASSERT_TRUE(s.isOk()) << s.toString();
  EXPECT_EQ(written(back), text);
  const KernelSpec &k = back.modules[0].kernels[3];
  EXPECT_EQ(k.kernelTemplate, KernelTemplate::Attention);
  ASSERT_EQ(k.tensorMaps.size(), 2u);
  EXPECT_EQ(k.tensorMaps[0].param, 0u);
  EXPECT_EQ(k.tensorMaps[0].boxRows, 128);
  EXPECT_EQ(k.tensorMaps[0].boxCols, 64);
  EXPECT_EQ(k.tensorMaps[1].param, 3u);
  EXPECT_FALSE(k.tensorMaps[1].zeroFill);
  EXPECT_EQ(k.params[k.tensorMaps[1].param].kind, ParamKind::Heads);
  EXPECT_TRUE(verifyKernel(k, "c", "kernel").isOk());
}

TEST(ManifestTest, TheWrittenTextIsTheDocumentedForm) {
  std::string text = written(sample());
  // Keys sorted, two-space indentation, shapes in shape symbols.
  EXPECT_NE(text.find("{\n  \"format\": \"liger-bundle\",\n  \"modules\": ["),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("\"shape\": [\n                \"rows\",\n"
                      "                4096\n"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("\"batch\",\n                32,\n                "
                      "\"seq\",\n                128"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("\"table_batch\""), std::string::npos);
  EXPECT_NE(text.find("\"kind\": \"head_scalars\",\n              \"name\": "
                      "\"input1\",\n              \"role\": \"input\",\n"
                      "              \"shape\": [\n                "
                      "\"batch\",\n                32,\n                "
                      "\"seq\"\n              ]"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("\"rows/128\""), std::string::npos);
  EXPECT_NE(text.find("\"oob\": \"zero\""), std::string::npos);
  EXPECT_NE(text.find("\"version\": 3\n}\n"), std::string::npos) << text;
}

// Names are arbitrary UTF-8: control characters are escaped, the rest
// written as they are, and both read back.
TEST(ManifestTest, ControlCharactersAndNonAsciiRoundTrip) {
  Manifest m = sample();
  KernelSpec &k = m.modules[0].kernels[0];
  k.name = "k\x01\x1f\t\"\\/\xc3\xa9\xe2\x9c\x93\xf0\x9f\x90\xaf";
  k.ops = "liger.add\n\xce\xbb";
  m.plans[0].kernels[static_cast<int>(LossStage::CE)] = k.name;
  std::string text = written(m);
  EXPECT_NE(text.find("\"k\\u0001\\u001f\\t\\\"\\\\/\xc3\xa9\xe2\x9c\x93"
                      "\xf0\x9f\x90\xaf\""),
            std::string::npos)
      << text;
  Manifest back;
  Status s = parseManifest(text, "t", &back);
  ASSERT_TRUE(s.isOk()) << s.toString();
  EXPECT_EQ(back.modules[0].kernels[0].name, k.name);
  EXPECT_EQ(back.modules[0].kernels[0].ops, k.ops);
  // Escapes the writer does not use read the same: \u00e9 is é, a
  // surrogate pair one code point.
  std::string escaped = text;
  escaped.replace(escaped.find("\xc3\xa9"), 2, "\\u00e9");
  escaped.replace(escaped.find("\xf0\x9f\x90\xaf"), 4, "\\ud83d\\udc2f");
  Manifest again;
  s = parseManifest(escaped, "t", &again);
  ASSERT_TRUE(s.isOk()) << s.toString();
  EXPECT_EQ(again.modules[0].kernels[0].name, k.name);
}

TEST(ManifestTest, TheWriterRefusesWhatTheReaderWould) {
  Manifest m = sample();
  m.modules[0].kernels[0].ops = "liger.\xff";
  std::string text;
  Status s = writeManifest(m, "t", &text);
  ASSERT_FALSE(s.isOk());
  EXPECT_EQ(s.message(), "t: modules[0].kernels[0]: ops is not valid UTF-8");
  EXPECT_TRUE(text.empty());
}

TEST(ManifestTest, OneKernelIsVerifiedAsTheManifestVerifiesIt) {
  Manifest m = sample();
  for (const KernelSpec &k : m.modules[0].kernels)
    EXPECT_TRUE(verifyKernel(k, "c", "kernel").isOk()) << k.name;
  KernelSpec k = m.modules[0].kernels[1];
  k.finish.name = "";
  k.grid[0] = {GridDim::Rows, 1};
  Status s = verifyKernel(k, "c", "kernel");
  ASSERT_FALSE(s.isOk());
  EXPECT_EQ(s.message(), "c: kernel: a kernel has a 'finish' kernel if and "
                         "only if it has a 'partials' or 'heads' workspace");
  // The manifest's verifier says the same of it, at its place.
  m.modules[0].kernels[1] = k;
  EXPECT_EQ(verifyManifest(m, "t").message(),
            "t: modules[0].kernels[1]: a kernel has a 'finish' kernel if and "
            "only if it has a 'partials' or 'heads' workspace");
}

//===----------------------------------------------------------------------===//
// Rules on the structs (verifyManifest; the writer and the reader)
//===----------------------------------------------------------------------===//

struct Rule {
  const char *name;
  std::function<void(Manifest &)> mutate;
  const char *message; ///< after "t: "
};

class VerifyTest : public ::testing::TestWithParam<Rule> {};

TEST_P(VerifyTest, SaysWhatIsWrong) {
  Manifest m = sample();
  GetParam().mutate(m);
  Status s = verifyManifest(m, "t");
  ASSERT_FALSE(s.isOk()) << GetParam().name;
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(s.message(), std::string("t: ") + GetParam().message);
  // The writer checks the same rules.
  std::string text;
  EXPECT_EQ(writeManifest(m, "t", &text).message(), s.message());
}

KernelSpec &kernel(Manifest &m, int k) { return m.modules[0].kernels[k]; }
KernelParam &param(Manifest &m, int k, int p) { return kernel(m, k).params[p]; }

INSTANTIATE_TEST_SUITE_P(
    Manifest, VerifyTest,
    ::testing::Values(
        Rule{"version", [](Manifest &m) { m.version = 2; },
             "manifest: version 2 is not supported (this runtime reads "
             "version 3; rebuild the bundle with this liger-compile)"},
        Rule{"source-nul", [](Manifest &m) { m.source = std::string(1, '\0'); },
             "manifest: source contains a NUL character"},
        Rule{"module-name", [](Manifest &m) { m.modules[0].name = ""; },
             "modules[0]: name is empty"},
        Rule{"module-unique",
             [](Manifest &m) {
               m.modules.push_back(m.modules[0]);
               m.modules[1].kernels.clear();
             },
             "modules[1]: module name 'liger_kernels' is also modules[0]'s"},
        Rule{"arch", [](Manifest &m) { m.modules[0].arch = "sm_9"; },
             "modules[0]: arch 'sm_9' is not a GPU arch (sm_<major><minor>, "
             "optionally with 'a': sm_80, sm_90a)"},
        Rule{"arch-suffix", [](Manifest &m) { m.modules[0].arch = "sm_90b"; },
             "modules[0]: arch 'sm_90b' is not a GPU arch (sm_<major><minor>, "
             "optionally with 'a': sm_80, sm_90a)"},
        Rule{"cubin", [](Manifest &m) { m.modules[0].cubinFile = "../k.cubin"; },
             "modules[0]: cubin must name a file in the bundle, got "
             "'../k.cubin'"},
        Rule{"cubin-sha256",
             [](Manifest &m) { m.modules[0].cubinSha256 = "ABC"; },
             "modules[0]: cubin_sha256 must be the cubin's SHA-256 as 64 "
             "lowercase hexadecimal digits, got 'ABC'"},
        Rule{"cubin-sha256-hex",
             [](Manifest &m) {
               m.modules[0].cubinSha256 = std::string(63, 'a') + "g";
             },
             "modules[0]: cubin_sha256 must be the cubin's SHA-256 as 64 "
             "lowercase hexadecimal digits, got "
             "'aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaag'"},
        Rule{"ptx", [](Manifest &m) { m.modules[0].ptxFile = ".."; },
             "modules[0]: ptx must name a file in the bundle, got '..'"},
        Rule{"kernel-name", [](Manifest &m) { kernel(m, 0).name = ""; },
             "modules[0].kernels[0]: name is empty"},
        Rule{"kernel-name-nul",
             [](Manifest &m) { kernel(m, 0).name = std::string("a\0b", 3); },
             "modules[0].kernels[0]: name contains a NUL character"},
        Rule{"function", [](Manifest &m) { kernel(m, 0).function = ""; },
             "modules[0].kernels[0]: function is empty"},
        Rule{"ops-utf8", [](Manifest &m) { kernel(m, 0).ops = "\xc3\x28"; },
             "modules[0].kernels[0]: ops is not valid UTF-8"},
        Rule{"overlong-utf8", [](Manifest &m) { kernel(m, 0).ops = "\xc0\xaf"; },
             "modules[0].kernels[0]: ops is not valid UTF-8"},
        Rule{"surrogate-utf8",
             [](Manifest &m) { kernel(m, 0).ops = "\xed\xa0\x80"; },
             "modules[0].kernels[0]: ops is not valid UTF-8"},
        Rule{"truncated-utf8", [](Manifest &m) { kernel(m, 0).ops = "a\xe2\x9c"; },
             "modules[0].kernels[0]: ops is not valid UTF-8"},
        Rule{"kernel-unique",
             [](Manifest &m) { kernel(m, 1).name = "layer_rowwise_0"; },
             "modules[0].kernels[1]: kernel name 'layer_rowwise_0' is also "
             "modules[0].kernels[0]'s"},
        Rule{"finish-unique",
             [](Manifest &m) { kernel(m, 1).finish.name = "layer_rowwise_0"; },
             "modules[0].kernels[1].finish: kernel name 'layer_rowwise_0' is "
             "also modules[0].kernels[0]'s"},
        Rule{"param-name", [](Manifest &m) { param(m, 0, 1).name = ""; },
             "modules[0].kernels[0].params[1]: name is empty"},
        Rule{"param-unique", [](Manifest &m) { param(m, 0, 1).name = "input0"; },
             "modules[0].kernels[0].params[1]: parameter name 'input0' is also "
             "params[0]'s"},
        Rule{"param-order",
             [](Manifest &m) { std::swap(param(m, 0, 1), param(m, 0, 2)); },
             "modules[0].kernels[0].params[2]: an input follows an output "
             "(parameters are inputs, then outputs, then workspaces)"},
        Rule{"workspace-kind",
             [](Manifest &m) { param(m, 1, 2).kind = ParamKind::Feature; },
             "modules[0].kernels[1].params[2]: a workspace is an f32 "
             "'partials', 'heads', 'rows' or 'row_scalars' parameter, got "
             "f32 'feature'"},
        Rule{"rows-workspace-with-finish",
             [](Manifest &m) {
               param(m, 1, 2).kind = ParamKind::Rows;
               kernel(m, 1).grid[0] = {GridDim::Rows, 1};
             },
             "modules[0].kernels[1]: a kernel has a 'finish' kernel if and "
             "only if it has a 'partials' or 'heads' workspace"},
        Rule{"rows-workspace-ctas",
             [](Manifest &m) { kernel(m, 5).ctasPerSm = 2; },
             "modules[0].kernels[5]: ctas_per_sm is for a kernel with a "
             "'finish' kernel"},
        Rule{"rows-workspace-bf16",
             [](Manifest &m) { param(m, 5, 3).dtype = DType::bf16; },
             "modules[0].kernels[5].params[3]: a workspace is an f32 "
             "'partials', 'heads', 'rows' or 'row_scalars' parameter, got "
             "bf16 'rows'"},
        Rule{"workspace-dtype",
             [](Manifest &m) { param(m, 1, 2).dtype = DType::bf16; },
             "modules[0].kernels[1].params[2]: a workspace is an f32 "
             "'partials', 'heads', 'rows' or 'row_scalars' parameter, got "
             "bf16 'partials'"},
        Rule{"heads-workspace-dtype",
             [](Manifest &m) { param(m, 4, 3).dtype = DType::bf16; },
             "modules[0].kernels[4].params[3]: a workspace is an f32 "
             "'partials', 'heads', 'rows' or 'row_scalars' parameter, got "
             "bf16 'heads'"},
        Rule{"head-scalars-workspace",
             [](Manifest &m) {
               param(m, 4, 3).kind = ParamKind::HeadScalars;
               param(m, 4, 3).length = 0;
             },
             "modules[0].kernels[4].params[3]: a workspace is an f32 "
             "'partials', 'heads', 'rows' or 'row_scalars' parameter, got "
             "f32 'head_scalars'"},
        Rule{"partials-role",
             [](Manifest &m) { param(m, 1, 2).role = ParamRole::Output; },
             "modules[0].kernels[1].params[2]: a 'partials' parameter is a "
             "workspace, got an output"},
        Rule{"partials-input",
             [](Manifest &m) {
               param(m, 0, 1).kind = ParamKind::Partials;
               param(m, 0, 1).dtype = DType::f32;
             },
             "modules[0].kernels[0].params[1]: a 'partials' parameter is a "
             "workspace, got an input"},
        Rule{"tables-output",
             [](Manifest &m) {
               param(m, 3, 3) = param(m, 3, 2);
               param(m, 3, 3).name = "output0";
               param(m, 3, 3).role = ParamRole::Output;
             },
             "modules[0].kernels[3].params[3]: a 'tables' parameter is an "
             "input"},
        Rule{"length", [](Manifest &m) { param(m, 0, 0).length = 0; },
             "modules[0].kernels[0].params[0]: a rows parameter needs a "
             "static length in [1, 2^31), got 0"},
        Rule{"length-large",
             [](Manifest &m) { param(m, 0, 0).length = int64_t(1) << 31; },
             "modules[0].kernels[0].params[0]: a rows parameter needs a "
             "static length in [1, 2^31), got 2147483648"},
        Rule{"no-length", [](Manifest &m) { param(m, 0, 3).length = 7; },
             "modules[0].kernels[0].params[3]: a row_scalars parameter has no "
             "static length, got 7"},
        Rule{"matrix-n", [](Manifest &m) { param(m, 2, 1).outer = 0; },
             "modules[0].kernels[2].params[1]: a matrix parameter needs a "
             "static N in [1, 2^31), got 0"},
        Rule{"heads", [](Manifest &m) { param(m, 3, 0).outer = -2; },
             "modules[0].kernels[3].params[0]: a heads parameter needs a "
             "static head count in [1, 2^31), got -2"},
        Rule{"heads-large",
             [](Manifest &m) { param(m, 3, 0).outer = INT64_MAX; },
             "modules[0].kernels[3].params[0]: a heads parameter needs a "
             "static head count in [1, 2^31), got 9223372036854775807"},
        Rule{"head-scalars-heads", [](Manifest &m) { param(m, 4, 1).outer = 0; },
             "modules[0].kernels[4].params[1]: a head_scalars parameter needs "
             "a static head count in [1, 2^31), got 0"},
        Rule{"head-scalars-length",
             [](Manifest &m) { param(m, 4, 1).length = 128; },
             "modules[0].kernels[4].params[1]: a head_scalars parameter has "
             "no static length, got 128"},
        Rule{"tables-batch", [](Manifest &m) { param(m, 3, 1).outer = 3; },
             "modules[0].kernels[3].params[1]: a tables parameter's batch is "
             "1 (broadcast) or 'table_batch', got 3"},
        Rule{"no-outer", [](Manifest &m) { param(m, 0, 1).outer = 2; },
             "modules[0].kernels[0].params[1]: a feature parameter has no "
             "static outer size, got 2"},
        Rule{"no-rows",
             [](Manifest &m) {
               kernel(m, 0).params = {{"input0", ParamRole::Input,
                                       ParamKind::Feature, DType::f32, 8, 0}};
             },
             "modules[0].kernels[0]: has no rows, row_scalars or heads "
             "parameter to count its rows from"},
        Rule{"grid-x", [](Manifest &m) { kernel(m, 2).grid[0].value = 0; },
             "modules[0].kernels[2]: grid[0] is 0; a grid size must be in [1, "
             "2147483647]"},
        Rule{"grid-y",
             [](Manifest &m) { kernel(m, 0).grid[1] = {GridDim::Const, 65536}; },
             "modules[0].kernels[0]: grid[1] is 65536; a grid size must be in "
             "[1, 65535]"},
        Rule{"grid-divisor", [](Manifest &m) { kernel(m, 2).grid[1].value = 0; },
             "modules[0].kernels[2]: grid[1] divides the rows by 0; the "
             "divisor must be at least 1"},
        Rule{"grid-ctas",
             [](Manifest &m) { kernel(m, 0).grid[0] = {GridDim::Ctas, 1}; },
             "modules[0].kernels[0]: grid[0] is 'ctas', but the kernel has no "
             "'partials' workspaces"},
        // A heads workspace is sized by the batch and sequence, not by
        // CTAs.
        Rule{"grid-ctas-heads-workspace",
             [](Manifest &m) { kernel(m, 4).grid[0] = {GridDim::Ctas, 1}; },
             "modules[0].kernels[4]: grid[0] is 'ctas', but the kernel has no "
             "'partials' workspaces"},
        Rule{"block", [](Manifest &m) { kernel(m, 0).block[0] = 2048; },
             "modules[0].kernels[0]: block sizes must be in [1, 1024] with a "
             "product of at most 1024, got [2048, 1, 1]"},
        Rule{"block-product", [](Manifest &m) { kernel(m, 0).block[1] = 8; },
             "modules[0].kernels[0]: block sizes must be in [1, 1024] with a "
             "product of at most 1024, got [256, 8, 1]"},
        // Sizes whose product overflows 64 bits are refused, not multiplied.
        Rule{"block-overflow",
             [](Manifest &m) {
               kernel(m, 0).block[0] = kernel(m, 0).block[1] = int64_t(1) << 32;
             },
             "modules[0].kernels[0]: block sizes must be in [1, 1024] with a "
             "product of at most 1024, got [4294967296, 4294967296, 1]"},
        Rule{"shared-memory",
             [](Manifest &m) { kernel(m, 0).dynamicSharedMemoryBytes = -1; },
             "modules[0].kernels[0]: dynamic_shared_memory_bytes must be in "
             "[0, 2^31), got -1"},
        Rule{"vector-width", [](Manifest &m) { kernel(m, 0).vectorWidth = 3; },
             "modules[0].kernels[0]: vector_width must be 1, 2, 4, 8 or 16, "
             "got 3"},
        Rule{"alignment", [](Manifest &m) { kernel(m, 0).alignmentBytes = 12; },
             "modules[0].kernels[0]: alignment_bytes must be a power of two "
             "in [1, 256], got 12"},
        Rule{"map-index",
             [](Manifest &m) { kernel(m, 2).tensorMaps[0].param = 7; },
             "modules[0].kernels[2].tensor_maps[0]: names parameter #7 of a "
             "kernel with 3"},
        Rule{"map-kind",
             [](Manifest &m) {
               kernel(m, 2).params[1].kind = ParamKind::Feature;
               kernel(m, 2).params[1].outer = 0;
             },
             "modules[0].kernels[2].tensor_maps[1]: param 'input1' is not a "
             "rows, matrix or heads parameter"},
        Rule{"map-kind-row-scalars",
             [](Manifest &m) {
               kernel(m, 0).tensorMaps = {
                   {3, 128, 16, TensorMapSwizzle::B64, true}};
             },
             "modules[0].kernels[0].tensor_maps[0]: param 'output1' is not a "
             "rows, matrix or heads parameter"},
        // Head scalars have no tensor map: no TMA box of a [batch, heads,
        // seq] tensor is read by any kernel.
        Rule{"map-kind-head-scalars",
             [](Manifest &m) {
               kernel(m, 4).tensorMaps = {
                   {1, 64, 16, TensorMapSwizzle::B64, true}};
             },
             "modules[0].kernels[4].tensor_maps[0]: param 'input1' is not a "
             "rows, matrix or heads parameter"},
        Rule{"map-kind-tables",
             [](Manifest &m) {
               kernel(m, 3).tensorMaps = {
                   {1, 128, 64, TensorMapSwizzle::B128, true}};
             },
             "modules[0].kernels[3].tensor_maps[0]: param 'input1' is not a "
             "rows, matrix or heads parameter"},
        // A heads parameter's box is checked as a 2-D one's.
        Rule{"map-heads-span",
             [](Manifest &m) {
               kernel(m, 3).tensorMaps = {
                   {0, 128, 128, TensorMapSwizzle::B128, true}};
             },
             "modules[0].kernels[3].tensor_maps[0]: the box's innermost size "
             "(256 bytes) exceeds the 128-byte swizzle span (bf16 'input0')"},
        Rule{"map-box", [](Manifest &m) { kernel(m, 2).tensorMaps[0].boxRows = 512; },
             "modules[0].kernels[2].tensor_maps[0]: box must be [rows, cols], "
             "each in [1, 256], got [512, 64]"},
        Rule{"map-swizzle",
             [](Manifest &m) {
               kernel(m, 2).tensorMaps[0].swizzle = TensorMapSwizzle::None;
             },
             "modules[0].kernels[2].tensor_maps[0]: swizzle must be 32, 64 "
             "or 128 bytes"},
        Rule{"map-span",
             [](Manifest &m) { kernel(m, 2).tensorMaps[0].boxCols = 128; },
             "modules[0].kernels[2].tensor_maps[0]: the box's innermost size "
             "(256 bytes) exceeds the 128-byte swizzle span (bf16 'input0')"},
        Rule{"map-16-bytes",
             [](Manifest &m) { kernel(m, 2).tensorMaps[0].boxCols = 60; },
             "modules[0].kernels[2].tensor_maps[0]: the box's innermost size "
             "is 120 bytes; it must be a multiple of 16 (bf16 'input0')"},
        Rule{"workspace-without-finish",
             [](Manifest &m) {
               kernel(m, 1).finish.name = "";
               kernel(m, 1).grid[0] = {GridDim::Rows, 1};
             },
             "modules[0].kernels[1]: a kernel has a 'finish' kernel if and "
             "only if it has a 'partials' or 'heads' workspace"},
        Rule{"finish-without-workspace",
             [](Manifest &m) { kernel(m, 0).finish.name = "f"; },
             "modules[0].kernels[0]: a kernel has a 'finish' kernel if and "
             "only if it has a 'partials' or 'heads' workspace"},
        Rule{"finish-with-rows-workspaces",
             [](Manifest &m) { kernel(m, 5).finish.name = "f"; },
             "modules[0].kernels[5]: a kernel has a 'finish' kernel if and "
             "only if it has a 'partials' or 'heads' workspace"},
        Rule{"prepare-without-workspace",
             [](Manifest &m) { kernel(m, 0).prepare.name = "p"; },
             "modules[0].kernels[0]: a 'prepare' kernel is for a kernel with "
             "a 'finish' kernel"},
        Rule{"prepare-grid", [](Manifest &m) { kernel(m, 4).prepare.grid = 0; },
             "modules[0].kernels[4].prepare: grid must be [n, 1, 1] with n in "
             "[1, 2^31), got n = 0"},
        Rule{"prepare-block",
             [](Manifest &m) { kernel(m, 4).prepare.block[0] = 2048; },
             "modules[0].kernels[4].prepare: block sizes must be in [1, 1024] "
             "with a product of at most 1024, got [2048, 1, 1]"},
        Rule{"prepare-unique",
             [](Manifest &m) {
               kernel(m, 4).prepare.name = "attn_attention_0_finish";
             },
             "modules[0].kernels[4].finish: kernel name "
             "'attn_attention_0_finish' is also "
             "modules[0].kernels[4].prepare's"},
        Rule{"ctas-per-sm-alone", [](Manifest &m) { kernel(m, 0).ctasPerSm = 4; },
             "modules[0].kernels[0]: ctas_per_sm is for a kernel with "
             "a 'finish' kernel"},
        Rule{"ctas-per-sm", [](Manifest &m) { kernel(m, 1).ctasPerSm = 65; },
             "modules[0].kernels[1]: ctas_per_sm must be in [1, 64], got 65"},
        Rule{"finish-grid", [](Manifest &m) { kernel(m, 1).finish.grid = 0; },
             "modules[0].kernels[1].finish: grid must be [n, 1, 1] with n in "
             "[1, 2^31), got n = 0"},
        Rule{"finish-block", [](Manifest &m) { kernel(m, 1).finish.block[2] = 0; },
             "modules[0].kernels[1].finish: block sizes must be in [1, 1024] "
             "with a product of at most 1024, got [256, 1, 0]"},
        Rule{"finish-shared-memory",
             [](Manifest &m) {
               kernel(m, 1).finish.dynamicSharedMemoryBytes = int64_t(1) << 31;
             },
             "modules[0].kernels[1].finish: dynamic_shared_memory_bytes must "
             "be in [0, 2^31), got 2147483648"},
        // A narrow-tile variant: a matmul kernel's, without workspaces, a
        // grid of tiles where its kernel has them, the kernel's tensor maps
        // but for the boxes.
        Rule{"narrow-rowwise",
             [](Manifest &m) { kernel(m, 0).narrow = kernel(m, 2).narrow; },
             "modules[0].kernels[0].narrow: a narrow variant is for a matmul "
             "kernel, not a rowwise kernel"},
        Rule{"narrow-workspaces",
             [](Manifest &m) { kernel(m, 5).narrow = kernel(m, 2).narrow; },
             "modules[0].kernels[5].narrow: a narrow variant is for a kernel "
             "without workspaces (their sizes may follow the tile)"},
        Rule{"narrow-persistent-kernel",
             [](Manifest &m) {
               kernel(m, 2).grid[0] = {GridDim::Sms, 1};
               kernel(m, 2).grid[1] = {};
             },
             "modules[0].kernels[2].narrow: a narrow variant's kernel has a "
             "grid of tiles (constants and 'rows/N'), got 'sms'"},
        Rule{"narrow-persistent",
             [](Manifest &m) { kernel(m, 2).narrow.grid[0] = {GridDim::Sms, 1}; },
             "modules[0].kernels[2].narrow: grid[0] is 'sms', the kernel's "
             "'16': a narrow variant's grid has its kernel's constants and "
             "row tiles in the same places"},
        Rule{"narrow-grid-kind",
             [](Manifest &m) { kernel(m, 2).narrow.grid[1] = {GridDim::Const, 8}; },
             "modules[0].kernels[2].narrow: grid[1] is '8', the kernel's "
             "'rows/128': a narrow variant's grid has its kernel's constants "
             "and row tiles in the same places"},
        Rule{"narrow-grid",
             [](Manifest &m) { kernel(m, 2).narrow.grid[2] = {GridDim::Const, 70000}; },
             "modules[0].kernels[2].narrow: grid[2] is 70000; a grid size must "
             "be in [1, 65535]"},
        Rule{"narrow-block",
             [](Manifest &m) { kernel(m, 2).narrow.block[0] = 2048; },
             "modules[0].kernels[2].narrow: block sizes must be in [1, 1024] "
             "with a product of at most 1024, got [2048, 1, 1]"},
        Rule{"narrow-shared-memory",
             [](Manifest &m) {
               kernel(m, 2).narrow.dynamicSharedMemoryBytes = -1;
             },
             "modules[0].kernels[2].narrow: dynamic_shared_memory_bytes must "
             "be in [0, 2^31), got -1"},
        Rule{"narrow-map-box",
             [](Manifest &m) { kernel(m, 2).narrow.tensorMaps[0].boxRows = 512; },
             "modules[0].kernels[2].narrow.tensor_maps[0]: box must be [rows, "
             "cols], each in [1, 256], got [512, 64]"},
        Rule{"narrow-map-param",
             [](Manifest &m) { kernel(m, 2).narrow.tensorMaps[1].param = 2; },
             "modules[0].kernels[2].narrow: a narrow variant's tensor_maps are "
             "its kernel's (the same parameters, swizzles and oob, in order); "
             "only their boxes may differ"},
        Rule{"narrow-map-count",
             [](Manifest &m) { kernel(m, 2).narrow.tensorMaps.pop_back(); },
             "modules[0].kernels[2].narrow: a narrow variant's tensor_maps are "
             "its kernel's (the same parameters, swizzles and oob, in order); "
             "only their boxes may differ"},
        Rule{"narrow-unique",
             [](Manifest &m) { kernel(m, 2).narrow.name = "layer_rowwise_0"; },
             "modules[0].kernels[2].narrow: kernel name 'layer_rowwise_0' is "
             "also modules[0].kernels[0]'s"},
        Rule{"plan-function", [](Manifest &m) { m.plans[0].function = ""; },
             "plans[0]: function is empty"},
        Rule{"plan-chunk", [](Manifest &m) { m.plans[0].chunkTokens = 0; },
             "plans[0]: chunk_tokens must be positive, got 0"},
        Rule{"plan-budget", [](Manifest &m) { m.plans[0].memoryBudget = -5; },
             "plans[0]: memory_budget must be positive, got -5"},
        Rule{"plan-kernel",
             [](Manifest &m) {
               m.plans[0].kernels[static_cast<int>(LossStage::CE)] = "nope";
             },
             "plans[0]: kernels.ce names 'nope', which is not a kernel of the "
             "bundle"},
        Rule{"plan-finish-is-a-kernel",
             [](Manifest &m) {
               m.plans[0].kernels[static_cast<int>(LossStage::DX)] =
                   "grad_rowwise_0_finish";
             },
             "plans[0]: kernels.dx names 'grad_rowwise_0_finish', which is not "
             "a kernel of the bundle"},
        Rule{"plan-without-ce",
             [](Manifest &m) {
               m.plans[0].kernels[static_cast<int>(LossStage::CE)] = "";
             },
             "plans[0]: the kernels {logits} do not make a plan: a plan has "
             "logits and ce, and with a gradient dx, dw and, unless dw_f32, "
             "dw0"},
        Rule{"plan-dw-f32-without-gradient",
             [](Manifest &m) { m.plans[0].dwF32 = true; },
             "plans[0]: the kernels {logits, ce} with dw_f32 do not make a "
             "plan: a plan has logits and ce, and with a gradient dx, dw and, "
             "unless dw_f32, dw0"},
        Rule{"plan-dw0-with-dw-f32",
             [](Manifest &m) {
               for (LossStage s :
                    {LossStage::DX, LossStage::DW0, LossStage::DW})
                 m.plans[0].kernels[static_cast<int>(s)] = "layer_matmul_1";
               m.plans[0].dwF32 = true;
             },
             "plans[0]: the kernels {logits, ce, dx, dw0, dw} with dw_f32 do "
             "not make a plan: a plan has logits and ce, and with a gradient "
             "dx, dw and, unless dw_f32, dw0"}),
    [](const ::testing::TestParamInfo<Rule> &info) {
      std::string name = info.param.name;
      for (char &c : name)
        if (c == '-')
          c = '_';
      return name;
    });

TEST(ManifestTest, CompletePlansPass) {
  Manifest m = sample();
  LossPlan &plan = m.plans[0];
  for (LossStage s : {LossStage::DX, LossStage::DW0, LossStage::DW})
    plan.kernels[static_cast<int>(s)] = "layer_matmul_1";
  EXPECT_TRUE(verifyManifest(m, "t").isOk());
  plan.kernels[static_cast<int>(LossStage::DW0)] = "";
  plan.dwF32 = true;
  EXPECT_TRUE(verifyManifest(m, "t").isOk());
  EXPECT_TRUE(plan.hasGradient());
}

//===----------------------------------------------------------------------===//
// Rules of the JSON form (parseManifest)
//===----------------------------------------------------------------------===//

std::string replaced(std::string text, const std::string &from,
                     const std::string &to) {
  size_t at = text.find(from);
  EXPECT_NE(at, std::string::npos) << from;
  return at == std::string::npos ? text : text.replace(at, from.size(), to);
}

TEST(ManifestTest, ParsesEveryField) {
  Manifest m;
  Status s = parseManifest(kTestManifest, "manifest.json", &m);
  ASSERT_TRUE(s.isOk()) << s.toString();
  ASSERT_EQ(m.modules.size(), 1u);
  EXPECT_EQ(m.source, "t.mlir");
  EXPECT_EQ(m.modules[0].arch, "sm_90a");
  EXPECT_EQ(m.modules[0].ptxFile, "k.ptx");
  const KernelSpec &k = m.modules[0].kernels.at(0);
  EXPECT_EQ(k.name, "norm");
  EXPECT_EQ(k.function, "layer");
  EXPECT_EQ(k.kernelTemplate, KernelTemplate::Rowwise);
  EXPECT_EQ(k.block[0], 256);
  EXPECT_EQ(k.dynamicSharedMemoryBytes, 36);
  EXPECT_EQ(k.vectorWidth, 8);
  ASSERT_EQ(k.params.size(), 4u);
  EXPECT_EQ(k.params[1].kind, ParamKind::Feature);
  EXPECT_EQ(k.params[1].length, 4096);
  EXPECT_TRUE(k.params[2].isOutput());
  EXPECT_EQ(k.params[3].dtype, DType::f32);
  EXPECT_EQ(k.params[3].length, 0);
  const KernelSpec &g = m.modules[0].kernels.at(1);
  EXPECT_TRUE(g.hasWorkspaces());
  EXPECT_EQ(g.finish.block[0], 256);
  EXPECT_EQ(g.tensorMaps.at(0).boxCols, 64);
  ASSERT_EQ(m.plans.size(), 1u);
  EXPECT_EQ(m.plans[0].chunkTokens, 128);
  EXPECT_EQ(m.plans[0].ignoreIndex, -100);
  EXPECT_EQ(m.plans[0].kernels[static_cast<int>(LossStage::Logits)], "grad");
}

struct BadJson {
  const char *from, *to, *message; ///< message after "manifest.json: "
};

class ManifestJsonTest : public ::testing::TestWithParam<BadJson> {};

TEST_P(ManifestJsonTest, SaysWhatIsWrong) {
  Manifest m;
  Status s =
      parseManifest(replaced(kTestManifest, GetParam().from, GetParam().to),
                    "manifest.json", &m);
  ASSERT_FALSE(s.isOk()) << GetParam().message;
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(s.message(), std::string("manifest.json: ") + GetParam().message);
}

INSTANTIATE_TEST_SUITE_P(
    Manifest, ManifestJsonTest,
    ::testing::Values(
        // A narrow variant: an object of the kernel's launch fields, read,
        // then verified as the kernel is.
        BadJson{"\"tensor_maps\": [{\"param\": \"input0\", \"box\": [128, 64], "
                "\"swizzle\": 128, \"oob\": \"zero\"}],",
                "\"tensor_maps\": [{\"param\": \"input0\", \"box\": [128, 64], "
                "\"swizzle\": 128, \"oob\": \"zero\"}], \"narrow\": 5,",
                "modules[0].kernels[1]: 'narrow' must be an object, got 5"},
        BadJson{"\"tensor_maps\": [{\"param\": \"input0\", \"box\": [128, 64], "
                "\"swizzle\": 128, \"oob\": \"zero\"}],",
                "\"tensor_maps\": [{\"param\": \"input0\", \"box\": [128, 64], "
                "\"swizzle\": 128, \"oob\": \"zero\"}], \"narrow\": {\"name\": "
                "\"n\", \"grid\": [1, \"rows/64\", 1], \"block\": [256, 1, 1], "
                "\"dynamic_shared_memory_bytes\": 0, \"tiles\": 2},",
                "modules[0].kernels[1].narrow: unknown key 'tiles'"},
        BadJson{"\"tensor_maps\": [{\"param\": \"input0\", \"box\": [128, 64], "
                "\"swizzle\": 128, \"oob\": \"zero\"}],",
                "\"tensor_maps\": [{\"param\": \"input0\", \"box\": [128, 64], "
                "\"swizzle\": 128, \"oob\": \"zero\"}], \"narrow\": {\"name\": "
                "\"n\", \"block\": [256, 1, 1], "
                "\"dynamic_shared_memory_bytes\": 0},",
                "modules[0].kernels[1].narrow: missing 'grid' (an array)"},
        BadJson{"\"tensor_maps\": [{\"param\": \"input0\", \"box\": [128, 64], "
                "\"swizzle\": 128, \"oob\": \"zero\"}],",
                "\"tensor_maps\": [{\"param\": \"input0\", \"box\": [128, 64], "
                "\"swizzle\": 128, \"oob\": \"zero\"}], \"narrow\": {\"name\": "
                "\"n\", \"grid\": [1, \"rows/64\", 1], \"block\": [256, 1, 1], "
                "\"dynamic_shared_memory_bytes\": 0},",
                "modules[0].kernels[1].narrow: a narrow variant is for a "
                "matmul kernel, not a rowwise kernel"},
        BadJson{"\"tensor_maps\": [{\"param\": \"input0\", \"box\": [128, 64], "
                "\"swizzle\": 128, \"oob\": \"zero\"}],",
                "\"tensor_maps\": [{\"param\": \"input0\", \"box\": [128, 64], "
                "\"swizzle\": 128, \"oob\": \"zero\"}], \"narrow\": {\"name\": "
                "\"\", \"grid\": [1, \"rows/64\", 1], \"block\": [256, 1, 1], "
                "\"dynamic_shared_memory_bytes\": 0},",
                "modules[0].kernels[1].narrow: name is empty"},
        BadJson{"\"liger-bundle\"", "\"other\"",
                "manifest: format is 'other', expected 'liger-bundle'"},
        BadJson{"\"version\": 3", "\"version\": 2",
                "manifest: version 2 is not supported (this runtime reads "
                "version 3; rebuild the bundle with this liger-compile)"},
        BadJson{"\"version\": 3", "\"version\": 3.0",
                "manifest: 'version' must be a 64-bit integer, got 3.0"},
        BadJson{"\"version\": 3", "\"version\": 18446744073709551615",
                "manifest: 'version' must be a 64-bit integer, got "
                "18446744073709551615"},
        BadJson{"\"source\": \"t.mlir\",", "",
                "manifest: missing 'source' (a string)"},
        BadJson{"\"source\": \"t.mlir\",",
                "\"source\": \"t.mlir\", \"source\": \"u.mlir\",",
                "manifest: duplicate key 'source'"},
        BadJson{"\"source\": \"t.mlir\",",
                "\"source\": \"t.mlir\", \"extra\": 1,",
                "manifest: unknown key 'extra'"},
        BadJson{"\"ptx\": \"k.ptx\",", "",
                "modules[0]: missing 'ptx' (a string)"},
        BadJson{"\"cubin_sha256\"", "\"cubin_sha\"",
                "modules[0]: missing 'cubin_sha256' (a string)"},
        BadJson{"\"ops\": \"liger.rms_norm\",",
                "\"ops\": \"liger.rms_norm\", \"ops\": \"x\",",
                "modules[0].kernels[0]: duplicate key 'ops'"},
        BadJson{"\"ops\": \"liger.rms_norm\",",
                "\"ops\": \"liger.rms_norm\", \"colour\": \"red\",",
                "modules[0].kernels[0]: unknown key 'colour'"},
        BadJson{"\"kind\": \"feature\",",
                "\"kind\": \"feature\", \"kind\": \"rows\",",
                "modules[0].kernels[0].params[1]: duplicate key 'kind'"},
        BadJson{"\"name\": \"grad\",",
                "\"name\": \"grad\", \"name\": \"grad\",",
                "modules[0].kernels[1]: duplicate key 'name'"},
        BadJson{"\"ce\": \"norm\"", "\"ce\": \"norm\", \"ce\": \"norm\"",
                "plans[0].kernels: duplicate key 'ce'"},
        BadJson{"\"name\": \"norm\",", "\"name\": 5,",
                "modules[0].kernels[0]: 'name' must be a string, got 5"},
        BadJson{"\"dynamic_shared_memory_bytes\": 36",
                "\"dynamic_shared_memory_bytes\": \"36\"",
                "modules[0].kernels[0]: 'dynamic_shared_memory_bytes' must be "
                "a 64-bit integer, got \"36\""},
        BadJson{"\"block\": [256, 1, 1]", "\"block\": [256, 1]",
                "modules[0].kernels[0]: 'block' must be three integers, got "
                "[256,1]"},
        BadJson{"\"block\": [256, 1, 1]", "\"block\": 256",
                "modules[0].kernels[0]: 'block' must be an array, got 256"},
        BadJson{"\"mean\": true", "\"mean\": 1",
                "plans[0]: 'mean' must be true or false, got 1"},
        BadJson{"\"kernels\": {\"logits\": \"grad\", \"ce\": \"norm\"}",
                "\"kernels\": [{\"logits\": \"grad\", \"ce\": \"norm\"}]",
                "plans[0]: 'kernels' must be an object, got "
                "[{\"logits\":\"grad\",\"ce\":\"norm\"}]"},
        BadJson{"\"bf16\", \"shape\": [4096]", "\"bf17\", \"shape\": [4096]",
                "modules[0].kernels[0].params[1]: unknown dtype 'bf17'"},
        BadJson{"\"kind\": \"feature\"", "\"kind\": \"cube\"",
                "modules[0].kernels[0].params[1]: unknown kind 'cube'"},
        BadJson{"\"role\": \"output\", \"kind\": \"rows\"",
                "\"role\": \"inout\", \"kind\": \"rows\"",
                "modules[0].kernels[0].params[2]: unknown role 'inout'"},
        BadJson{"\"template\": \"rowwise\", \"ops\": \"liger.rms_norm\"",
                "\"template\": \"tiled\", \"ops\": \"liger.rms_norm\"",
                "modules[0].kernels[0]: unknown template 'tiled'"},
        BadJson{"\"memref-descriptor\"", "\"bare\"",
                "modules[0].kernels[0]: unknown abi 'bare'"},
        BadJson{"\"fused_linear_cross_entropy\"", "\"mse\"",
                "plans[0]: unknown plan kind 'mse'"},
        BadJson{"\"logits\": \"grad\"", "\"logit\": \"grad\"",
                "plans[0].kernels: unknown stage 'logit' (logits, ce, dx, dw0 "
                "or dw)"},
        BadJson{"\"ce\": \"norm\"", "\"ce\": 3",
                "plans[0].kernels: 'ce' must be a string, got 3"},
        BadJson{"[\"rows\", 1, 1]", "[\"cols\", 1, 1]",
                "modules[0].kernels[0]: unknown grid size \"cols\" (an "
                "integer, rows, tokens, ctas, sms or rows/N)"},
        BadJson{"[\"rows\", 1, 1]", "[\"rows/0\", 1, 1]",
                "modules[0].kernels[0]: unknown grid size \"rows/0\" (an "
                "integer, rows, tokens, ctas, sms or rows/N)"},
        BadJson{"[\"rows\", 1, 1]", "[\"12\", 1, 1]",
                "modules[0].kernels[0]: unknown grid size \"12\" (an integer, "
                "rows, tokens, ctas, sms or rows/N)"},
        BadJson{"[\"rows\", 1, 1]", "[\"rows\", 1]",
                "modules[0].kernels[0]: grid must have 3 entries, got "
                "[\"rows\",1]"},
        BadJson{"[\"rows\", 1, 1]", "[\"rows\", 0, 1]",
                "modules[0].kernels[0]: grid[1] is 0; a grid size must be in "
                "[1, 65535]"},
        BadJson{"\"shape\": [4096]", "\"shape\": [\"rows\", 4096]",
                "modules[0].kernels[0].params[1]: the shape of a feature "
                "parameter is [H], got [\"rows\",4096]"},
        BadJson{"\"shape\": [\"rows\"]", "\"shape\": [\"tokens\"]",
                "modules[0].kernels[0].params[3]: the shape of a row_scalars "
                "parameter is [\"rows\"], got [\"tokens\"]"},
        BadJson{"\"shape\": [\"ctas\", 1000]", "\"shape\": [\"rows\", 1000]",
                "modules[0].kernels[1].params[2]: the shape of a partials "
                "parameter is [\"ctas\", H], got [\"rows\",1000]"},
        BadJson{"\"kind\": \"row_scalars\", \"dtype\": \"f32\", \"shape\": "
                "[\"rows\"]",
                "\"kind\": \"head_scalars\", \"dtype\": \"f32\", \"shape\": "
                "[\"batch\", 8, \"seq\", 64]",
                "modules[0].kernels[0].params[3]: the shape of a head_scalars "
                "parameter is [\"batch\", heads, \"seq\"], got "
                "[\"batch\",8,\"seq\",64]"},
        BadJson{"\"kind\": \"row_scalars\", \"dtype\": \"f32\", \"shape\": "
                "[\"rows\"]",
                "\"kind\": \"head_scalars\", \"dtype\": \"f32\", \"shape\": "
                "[\"batch\", \"heads\", \"seq\"]",
                "modules[0].kernels[0].params[3]: the shape of a head_scalars "
                "parameter is [\"batch\", heads, \"seq\"], got "
                "[\"batch\",\"heads\",\"seq\"]"},
        BadJson{"\"shape\": [4096]", "\"shape\": [0]",
                "modules[0].kernels[0].params[1]: a feature parameter needs a "
                "static length in [1, 2^31), got 0"},
        BadJson{"\"k.cubin\"", "\"../k.cubin\"",
                "modules[0]: cubin must name a file in the bundle, got "
                "'../k.cubin'"},
        BadJson{"\"param\": \"input0\"", "\"param\": \"output1\"",
                "modules[0].kernels[1].tensor_maps[0]: param 'output1' is not "
                "a parameter of the kernel"},
        BadJson{"\"box\": [128, 64]", "\"box\": [128]",
                "modules[0].kernels[1].tensor_maps[0]: box must be [rows, "
                "cols], got [128]"},
        BadJson{"\"box\": [128, 64]", "\"box\": [512, 64]",
                "modules[0].kernels[1].tensor_maps[0]: box must be [rows, "
                "cols], each in [1, 256], got [512, 64]"},
        BadJson{"\"swizzle\": 128", "\"swizzle\": 16",
                "modules[0].kernels[1].tensor_maps[0]: swizzle 16 is not "
                "supported (32, 64 or 128)"},
        BadJson{"\"oob\": \"zero\"", "\"oob\": \"clamp\"",
                "modules[0].kernels[1].tensor_maps[0]: oob must be 'zero' or "
                "'nan', got 'clamp'"},
        BadJson{"\"tensor_maps\": [{\"param\": \"input0\", \"box\": [128, 64], "
                "\"swizzle\": 128, \"oob\": \"zero\"}]",
                "\"tensor_maps\": {\"param\": \"input0\"}",
                "modules[0].kernels[1]: 'tensor_maps' must be an array, got "
                "{\"param\":\"input0\"}"},
        BadJson{"\"finish\"", "\"unfinished\"",
                "modules[0].kernels[1]: ctas_per_sm is for a kernel with "
                "a 'finish' kernel"},
        BadJson{"\"ctas_per_sm\": 4,", "",
                "modules[0].kernels[1]: missing 'ctas_per_sm' (an integer)"},
        BadJson{"\"grid\": [32, 1, 1]", "\"grid\": [32, 2, 1]",
                "modules[0].kernels[1].finish: grid must be [n, 1, 1], got "
                "[32, 2, 1]"},
        BadJson{"\"params\": [\n        {\"name\": \"input0\", \"role\": "
                "\"input\", \"kind\": \"rows\", \"dtype\": \"bf16\", "
                "\"shape\": [\"rows\", 1000]}",
                "\"params\": [\n        [1]",
                "modules[0].kernels[1].params[0]: expected an object, got "
                "[1]"},
        BadJson{"\"name\": \"input1\"", "\"name\": \"\\u0000\"",
                "modules[0].kernels[0].params[1]: name contains a NUL "
                "character"},
        BadJson{"\"name\": \"input1\"", "\"name\": \"input0\"",
                "modules[0].kernels[0].params[1]: parameter name 'input0' is "
                "also params[0]'s"},
        BadJson{"\"ce\": \"norm\"", "\"ce\": \"grad_finish\"",
                "plans[0]: kernels.ce names 'grad_finish', which is not a "
                "kernel of the bundle"}));

TEST(ManifestTest, MalformedJsonSaysWhere) {
  Manifest m;
  Status s =
      parseManifest("{\"format\": \"liger-bundle\", ", "manifest.json", &m);
  ASSERT_FALSE(s.isOk());
  EXPECT_EQ(s.message(),
            "manifest.json: malformed JSON: parse error at line 1, column 28: "
            "syntax error while parsing object key - unexpected end of input; "
            "expected string literal");
  s = parseManifest("[1]", "manifest.json", &m);
  EXPECT_EQ(s.message(),
            "manifest.json: manifest: expected an object, got [1]");
  // Not UTF-8: the JSON reader refuses it.
  s = parseManifest("{\"format\": \"\xff\"}", "manifest.json", &m);
  EXPECT_EQ(s.message().rfind("manifest.json: malformed JSON: parse error at "
                              "line 1, column 13: syntax error while parsing "
                              "value - invalid string: ill-formed UTF-8 byte",
                              0),
            0u)
      << s.message();
}

// What the reader reads at most, refused before the document grows past it:
// a depth that would recurse or a count that would exhaust memory.
TEST(ManifestTest, TheReaderIsBounded) {
  Manifest m;
  std::string deep = std::string(100000, '[') + std::string(100000, ']');
  std::string text = kTestManifest;
  text.replace(text.find("\"t.mlir\""), 8, deep);
  Status s = parseManifest(text, "manifest.json", &m);
  std::string path = "source"; // the array holding the one too deep
  for (size_t i = 0; i + 2 < kMaxManifestDepth; ++i)
    path += "[0]";
  EXPECT_EQ(s.message(), "manifest.json: " + path +
                             ": nested deeper than 32 arrays and objects");
  std::string many = "[0";
  for (size_t i = 0; i < kMaxManifestValues; ++i)
    many += ",0";
  s = parseManifest(many + "]", "manifest.json", &m);
  EXPECT_EQ(s.message(), "manifest.json: manifest: more than 1048576 JSON "
                         "values (the runtime reads no more)");
  // A long value is shown in part.
  std::string ones = "1";
  for (int i = 0; i < 50000; ++i)
    ones += ",1";
  text = kTestManifest;
  text.replace(text.find("\"block\": [256, 1, 1]"), 20,
               "\"block\": [" + ones + "]");
  s = parseManifest(text, "manifest.json", &m);
  EXPECT_EQ(s.message(), "manifest.json: modules[0].kernels[0]: 'block' must "
                         "be three integers, got "
                         "[1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,...");
  text = kTestManifest;
  text.replace(text.find("36"), 2, std::string(100000, '9'));
  s = parseManifest(text, "manifest.json", &m);
  EXPECT_EQ(s.message().size(),
            std::string("manifest.json: malformed JSON: ").size() + 240)
      << s.message();
  EXPECT_EQ(s.message().rfind("manifest.json: malformed JSON: number "
                              "overflow parsing '9999",
                              0),
            0u)
      << s.message();
}

// The manifest docs/Design/Bundle.md shows is one this runtime reads.
TEST(ManifestTest, TheDocumentedExampleReads) {
  std::ifstream in(std::string(LIGER_SOURCE_DIR) + "/docs/Design/Bundle.md");
  ASSERT_TRUE(in) << "docs/Design/Bundle.md";
  std::stringstream page;
  page << in.rdbuf();
  std::string text = page.str();
  size_t begin = text.find("```json\n");
  ASSERT_NE(begin, std::string::npos);
  begin += 8;
  std::string example = text.substr(begin, text.find("```", begin) - begin);
  Manifest m;
  Status s = parseManifest(example, "Bundle.md", &m);
  ASSERT_TRUE(s.isOk()) << s.toString();
  EXPECT_EQ(m.modules.at(0).kernels.at(0).function, "layer");
}

TEST(ManifestTest, GridEntriesAndArchs) {
  GridDim d;
  ASSERT_TRUE(parseGridDim("rows/128", &d));
  EXPECT_EQ(d, (GridDim{GridDim::Rows, 128}));
  EXPECT_EQ(gridDimText(d), "rows/128");
  ASSERT_TRUE(parseGridDim("42", &d));
  EXPECT_EQ(d, (GridDim{GridDim::Const, 42}));
  ASSERT_TRUE(parseGridDim("sms", &d));
  EXPECT_EQ(d, (GridDim{GridDim::Sms, 1}));
  EXPECT_EQ(gridDimText(d), "sms");
  for (const char *bad :
       {"rows/", "rows/0", "rows/-1", "0", "-3", "042", "", "cols", "rows/1x",
        "99999999999999999999", "sms/2", "SMS"})
    EXPECT_FALSE(parseGridDim(bad, &d)) << bad;

  Arch a;
  ASSERT_TRUE(parseArch("sm_90a", &a));
  EXPECT_TRUE(archRunsOn(a, 9, 0));
  EXPECT_FALSE(archRunsOn(a, 10, 0)); // an "a" arch: this GPU only
  EXPECT_FALSE(archRunsOn(a, 8, 0));
  ASSERT_TRUE(parseArch("sm_80", &a));
  EXPECT_TRUE(archRunsOn(a, 8, 0));
  EXPECT_TRUE(archRunsOn(a, 8, 6));
  EXPECT_FALSE(archRunsOn(a, 9, 0)); // another major: no cubin compatibility
  EXPECT_FALSE(archRunsOn(a, 7, 5));
  ASSERT_TRUE(parseArch("sm_86", &a));
  EXPECT_FALSE(archRunsOn(a, 8, 0));
  ASSERT_TRUE(parseArch("sm_100a", &a));
  EXPECT_EQ(a.major, 10);
  for (const char *bad : {"sm_9", "sm_", "90a", "sm_90b", "sm_9000", "sm_x0"})
    EXPECT_FALSE(parseArch(bad, &a)) << bad;
}

} // namespace
