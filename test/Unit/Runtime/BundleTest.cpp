//===- BundleTest.cpp - manifest parsing, argument checks, no driver ------===//
//
// The runtime's checks that need no GPU: manifests (valid, malformed, wrong
// format or version, bad fields), bundle files (missing, truncated cubin),
// the argument checks of a launch, and the error a machine without a CUDA
// driver gets.
//
//===----------------------------------------------------------------------===//

#include "BundleDir.h"
#include "liger/Runtime/Bundle.h"
#include "liger/Runtime/CudaDriver.h"

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <gtest/gtest.h>
#include <string>

using namespace liger::runtime;

namespace {

const char *kManifest = R"({
  "format": "liger-bundle", "version": 1, "source": "t.mlir",
  "modules": [{"name": "liger_kernels", "arch": "sm_90a",
    "cubin": "k.cubin", "ptx": "k.ptx",
    "kernels": [{"name": "norm", "template": "rowwise", "ops": "liger.rms_norm",
      "abi": "memref-descriptor", "grid": ["rows", 1, 1], "block": [256, 1, 1],
      "dynamic_shared_memory_bytes": 36, "vector_width": 8, "alignment_bytes": 16,
      "params": [
        {"name": "input0", "role": "input", "kind": "rows", "dtype": "bf16", "shape": ["rows", 4096]},
        {"name": "input1", "role": "input", "kind": "feature", "dtype": "bf16", "shape": [4096]},
        {"name": "output0", "role": "output", "kind": "rows", "dtype": "bf16", "shape": ["rows", 4096]},
        {"name": "output1", "role": "output", "kind": "row_scalars", "dtype": "f32", "shape": ["rows"]}
      ]}]}]})";

std::string replaced(std::string text, const std::string &from,
                     const std::string &to) {
  size_t at = text.find(from);
  EXPECT_NE(at, std::string::npos) << from;
  return text.replace(at, from.size(), to);
}

Status parse(const std::string &text, Manifest *m) {
  return parseManifest(text, "manifest.json", m);
}

TEST(ManifestTest, ParsesEveryField) {
  Manifest m;
  ASSERT_TRUE(parse(kManifest, &m).isOk());
  ASSERT_EQ(m.modules.size(), 1u);
  EXPECT_EQ(m.modules[0].arch, "sm_90a");
  const KernelSpec &k = m.modules[0].kernels.at(0);
  EXPECT_EQ(k.name, "norm");
  EXPECT_EQ(k.block[0], 256);
  EXPECT_EQ(k.dynamicSharedMemoryBytes, 36);
  ASSERT_EQ(k.params.size(), 4u);
  EXPECT_EQ(k.params[1].kind, ParamKind::Feature);
  EXPECT_EQ(k.params[1].length, 4096);
  EXPECT_TRUE(k.params[2].isOutput);
  EXPECT_EQ(k.params[3].dtype, DType::f32);
}

struct BadManifest {
  const char *from, *to, *message;
};

class ManifestErrorTest : public ::testing::TestWithParam<BadManifest> {};

TEST_P(ManifestErrorTest, SaysWhatIsWrong) {
  Manifest m;
  Status s = parse(replaced(kManifest, GetParam().from, GetParam().to), &m);
  ASSERT_FALSE(s.isOk());
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find(GetParam().message), std::string::npos)
      << s.toString();
}

INSTANTIATE_TEST_SUITE_P(
    Manifest, ManifestErrorTest,
    ::testing::Values(
        BadManifest{"\"liger-bundle\"", "\"other\"",
                    "format is 'other', expected 'liger-bundle'"},
        BadManifest{"\"version\": 1", "\"version\": 2",
                    "version 2 is not supported"},
        BadManifest{"\"bf16\", \"shape\": [4096]",
                    "\"bf17\", \"shape\": [4096]",
                    "modules[0].kernels[0].params[1]: unknown dtype 'bf17'"},
        BadManifest{"\"kind\": \"feature\"", "\"kind\": \"cube\"",
                    "unknown kind 'cube'"},
        BadManifest{"[\"rows\", 1, 1]", "[\"rows/0\", 1, 1]",
                    "unknown grid size 'rows/0'"},
        BadManifest{"[\"rows\", 1, 1]", "[\"cols\", 1, 1]",
                    "unknown grid size 'cols' (an integer, rows, tokens, ctas "
                    "or rows/N)"},
        BadManifest{"[\"rows\", 1, 1]", "[\"rows\", 0, 1]",
                    "grid sizes must be integers in [1, 2^31)"},
        BadManifest{"[256, 1, 1]", "[2048, 1, 1]",
                    "block sizes must be integers in [1, 1024]"},
        BadManifest{"\"k.cubin\"", "\"../k.cubin\"",
                    "cubin must name a file in the bundle"},
        BadManifest{"\"memref-descriptor\"", "\"bare\"", "unknown abi 'bare'"},
        BadManifest{"\"role\": \"output\", \"kind\": \"rows\"",
                    "\"role\": \"inout\", \"kind\": \"rows\"",
                    "role must be input, output or workspace"},
        BadManifest{"\"dynamic_shared_memory_bytes\": 36",
                    "\"dynamic_shared_memory_bytes\": \"36\"",
                    "expected an integer 'dynamic_shared_memory_bytes'"}));

TEST(ManifestTest, MalformedJsonGivesTheOffset) {
  Manifest m;
  Status s = parse("{\"format\": \"liger-bundle\", ", &m);
  ASSERT_FALSE(s.isOk());
  EXPECT_NE(s.message().find("manifest.json: malformed JSON"),
            std::string::npos);
  EXPECT_NE(s.message().find("at byte"), std::string::npos);
}

using BundleFilesTest = liger::runtime::testing::BundleDirTest;

TEST_F(BundleFilesTest, MissingManifest) {
  std::unique_ptr<Bundle> b;
  Status s = Bundle::open(dir, &b);
  EXPECT_EQ(s.code(), StatusCode::kNotFound);
  EXPECT_NE(s.message().find("manifest.json"), std::string::npos);
}

TEST_F(BundleFilesTest, TruncatedCubin) {
  write("manifest.json", kManifest);
  write("k.cubin", "\x7f"
                   "EL");
  std::unique_ptr<Bundle> b;
  Status s = Bundle::open(dir, &b);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("is not a cubin"), std::string::npos);
}

TEST_F(BundleFilesTest, ArgumentChecks) {
  std::unique_ptr<Bundle> b;
  ASSERT_TRUE(openWith(kManifest, &b).isOk());
  const KernelSpec *k = b->findKernel("norm");
  ASSERT_NE(k, nullptr);
  alignas(16) static char buf[64];
  auto good = [&] {
    return std::vector<TensorArg>{{buf, DType::bf16, {2, 3, 4096}},
                                  {buf, DType::bf16, {4096}},
                                  {buf, DType::bf16, {6, 4096}},
                                  {buf, DType::f32, {6}}};
  };
  int64_t rows = 0;
  ASSERT_TRUE(b->checkArgs(*k, good(), &rows).isOk());
  EXPECT_EQ(rows, 6);

  auto expectError = [&](std::vector<TensorArg> args, const char *message) {
    Status s = b->checkArgs(*k, args, &rows);
    ASSERT_FALSE(s.isOk());
    EXPECT_NE(s.message().find(message), std::string::npos) << s.toString();
  };
  auto args = good();
  args.pop_back();
  expectError(args, "expects 4 tensors (inputs then outputs), got 3");
  args = good();
  args[0].dtype = DType::f32;
  expectError(args, "'input0' (#0) must be bf16, got f32");
  args = good();
  args[1].shape = {4095};
  expectError(args, "'input1' (#1) must have shape [4096], got [4095]");
  args = good();
  args[0].shape = {6, 4095};
  expectError(args, "must have 4096 elements in its last dimension");
  args = good();
  args[3].shape = {7};
  expectError(args, "'output1' (#3) has 7 rows, the earlier tensors 6");
  args = good();
  args[2].data = buf + 2;
  expectError(args, "must be 16-byte aligned");
  args = good();
  args[1].data = nullptr;
  expectError(args, "is a null pointer");

  // A kernel that does not exist.
  Status s = b->launch("nope", good(), nullptr);
  EXPECT_EQ(s.code(), StatusCode::kNotFound);
}

const char *kRoPEManifest = R"({
  "format": "liger-bundle", "version": 1, "source": "t.mlir",
  "modules": [{"name": "liger_kernels", "arch": "sm_90a", "cubin": "k.cubin", "ptx": "k.ptx",
    "kernels": [{"name": "rope", "template": "rope", "ops": "liger.rope",
      "abi": "memref-descriptor", "grid": ["tokens", 1, 1], "block": [256, 1, 1],
      "dynamic_shared_memory_bytes": 0, "vector_width": 4, "alignment_bytes": 16,
      "params": [
        {"name": "input0", "role": "input", "kind": "heads", "dtype": "f32", "shape": ["batch", 4, "seq", 16]},
        {"name": "input1", "role": "input", "kind": "heads", "dtype": "f32", "shape": ["batch", 2, "seq", 16]},
        {"name": "input2", "role": "input", "kind": "tables", "dtype": "f32", "shape": [1, "seq", 16]},
        {"name": "input3", "role": "input", "kind": "tables", "dtype": "f32", "shape": [1, "seq", 16]},
        {"name": "output0", "role": "output", "kind": "heads", "dtype": "f32", "shape": ["batch", 4, "seq", 16]},
        {"name": "output1", "role": "output", "kind": "heads", "dtype": "f32", "shape": ["batch", 2, "seq", 16]}
      ]}]}]})";

TEST_F(BundleFilesTest, RoPEArgumentChecks) {
  std::unique_ptr<Bundle> b;
  ASSERT_TRUE(openWith(kRoPEManifest, &b).isOk());
  const KernelSpec *k = b->findKernel("rope");
  ASSERT_NE(k, nullptr);
  EXPECT_EQ(k->params[0].kind, ParamKind::Heads);
  EXPECT_EQ(k->params[0].heads, 4);
  EXPECT_EQ(k->params[2].heads, 1); // a broadcast table
  alignas(16) static char buf[64];
  auto good = [&] {
    return std::vector<TensorArg>{
        {buf, DType::f32, {2, 4, 5, 16}}, {buf, DType::f32, {2, 2, 5, 16}},
        {buf, DType::f32, {1, 5, 16}},    {buf, DType::f32, {1, 5, 16}},
        {buf, DType::f32, {2, 4, 5, 16}}, {buf, DType::f32, {2, 2, 5, 16}}};
  };
  int64_t tokens = 0;
  ASSERT_TRUE(b->checkArgs(*k, good(), &tokens).isOk());
  EXPECT_EQ(tokens, 10); // one CTA per token: batch 2 x sequence 5
  auto expectError = [&](std::vector<TensorArg> args, const char *message) {
    Status s = b->checkArgs(*k, args, &tokens);
    ASSERT_FALSE(s.isOk());
    EXPECT_NE(s.message().find(message), std::string::npos) << s.toString();
  };
  auto args = good();
  args[1].shape = {2, 3, 5, 16};
  expectError(args, "must have shape [batch, 2, seq, 16], got [2, 3, 5, 16]");
  args = good();
  args[1].shape = {2, 2, 6, 16};
  expectError(
      args,
      "has batch and sequence [2, 2, 6, 16], the earlier tensors 2 and 5");
  args = good();
  args[2].shape = {2, 5, 16};
  expectError(
      args, "must have batch 1 (the kernel was compiled for broadcast tables)");
  args = good();
  args[3].shape = {1, 4, 16};
  expectError(args, "must have shape [1 or 2, 5, 16], got [1, 4, 16]");
}

// A group reducing across rows (RMSNorm backward): a workspace and a
// finishing kernel.
const char *kGradManifest = R"({
  "format": "liger-bundle", "version": 1, "source": "t.mlir",
  "modules": [{"name": "liger_kernels", "arch": "sm_90a", "cubin": "k.cubin", "ptx": "k.ptx",
    "kernels": [{"name": "grad", "template": "rowwise", "ops": "liger.rms_norm_grad",
      "abi": "memref-descriptor", "grid": ["ctas", 1, 1], "block": [128, 1, 1],
      "dynamic_shared_memory_bytes": 20, "vector_width": 8, "alignment_bytes": 16,
      "ctas_per_sm": 4,
      "finish": {"name": "grad_finish", "grid": [32, 1, 1], "block": [256, 1, 1],
                 "dynamic_shared_memory_bytes": 1024},
      "params": [
        {"name": "input0", "role": "input", "kind": "rows", "dtype": "bf16", "shape": ["rows", 1000]},
        {"name": "input1", "role": "input", "kind": "feature", "dtype": "bf16", "shape": [1000]},
        {"name": "output0", "role": "output", "kind": "feature", "dtype": "bf16", "shape": [1000]},
        {"name": "workspace0", "role": "workspace", "kind": "partials", "dtype": "f32", "shape": ["ctas", 1000]}
      ]}]}]})";

TEST(ManifestTest, ParsesWorkspacesAndTheFinishingKernel) {
  Manifest m;
  ASSERT_TRUE(parse(kGradManifest, &m).isOk());
  const KernelSpec &k = m.modules[0].kernels.at(0);
  EXPECT_TRUE(k.hasWorkspaces());
  EXPECT_EQ(k.finish.name, "grad_finish");
  EXPECT_EQ(k.finish.grid, 32);
  EXPECT_EQ(k.finish.block[0], 256);
  EXPECT_EQ(k.finish.dynamicSharedMemoryBytes, 1024);
  EXPECT_EQ(k.ctasPerSm, 4);
  EXPECT_TRUE(k.params[3].isWorkspace);
  EXPECT_FALSE(k.params[3].isOutput);
  EXPECT_EQ(k.params[3].kind, ParamKind::Partials);
  EXPECT_EQ(k.params[3].length, 1000);
  // min(rows, SMs * ctas_per_sm), at least one CTA.
  EXPECT_EQ(workspaceCtas(k, 16384, 132), 528);
  EXPECT_EQ(workspaceCtas(k, 7, 132), 7);
  EXPECT_EQ(workspaceCtas(k, 0, 132), 1);
}

class WorkspaceManifestErrorTest
    : public ::testing::TestWithParam<BadManifest> {};

TEST_P(WorkspaceManifestErrorTest, SaysWhatIsWrong) {
  Manifest m;
  Status s = parse(replaced(kGradManifest, GetParam().from, GetParam().to), &m);
  ASSERT_FALSE(s.isOk());
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find(GetParam().message), std::string::npos)
      << s.toString();
}

INSTANTIATE_TEST_SUITE_P(
    Workspaces, WorkspaceManifestErrorTest,
    ::testing::Values(
        // A workspace but no finishing kernel, and the other way round.
        BadManifest{"\"finish\"", "\"unfinished\"",
                    "a kernel has workspaces if and only if it has a 'finish' "
                    "kernel"},
        BadManifest{"\"role\": \"workspace\", \"kind\": \"partials\"",
                    "\"role\": \"output\", \"kind\": \"partials\"",
                    "a workspace is an f32 'partials' parameter"},
        BadManifest{"\"partials\", \"dtype\": \"f32\"",
                    "\"partials\", \"dtype\": \"bf16\"",
                    "a workspace is an f32 'partials' parameter"},
        BadManifest{"\"ctas_per_sm\": 4", "\"ctas_per_sm\": 0",
                    "ctas_per_sm must be in [1, 64]"},
        BadManifest{"\"grid\": [32, 1, 1]", "\"grid\": [32, 2, 1]",
                    "finish: grid must be [n, 1, 1]"}));

TEST_F(BundleFilesTest, WorkspaceArgumentChecks) {
  std::unique_ptr<Bundle> b;
  ASSERT_TRUE(openWith(kGradManifest, &b).isOk());
  const KernelSpec *k = b->findKernel("grad");
  ASSERT_NE(k, nullptr);
  alignas(16) static char buf[64];
  auto good = [&] {
    return std::vector<TensorArg>{{buf, DType::bf16, {6, 1000}},
                                  {buf, DType::bf16, {1000}},
                                  {buf, DType::bf16, {1000}},
                                  {buf, DType::f32, {3, 1000}}};
  };
  int64_t rows = 0, ctas = 0;
  ASSERT_TRUE(b->checkArgs(*k, good(), &rows, &ctas).isOk());
  EXPECT_EQ(rows, 6);
  EXPECT_EQ(ctas, 3);
  // Zero rows still need one CTA: the weight gradient is written (zeros).
  auto args = good();
  args[0].shape = {0, 1000};
  ASSERT_TRUE(b->checkArgs(*k, args, &rows, &ctas).isOk());
  EXPECT_EQ(rows, 0);
  auto expectError = [&](std::vector<TensorArg> args, const char *message) {
    Status s = b->checkArgs(*k, args, &rows, &ctas);
    ASSERT_FALSE(s.isOk());
    EXPECT_NE(s.message().find(message), std::string::npos) << s.toString();
  };
  args = good();
  args[3].shape = {0, 1000};
  expectError(args, "'workspace0' (#3) (a workspace) must have shape [ctas, "
                    "1000] with ctas >= 1, got [0, 1000]");
  args = good();
  args[3].shape = {3, 999};
  expectError(args, "must have shape [ctas, 1000]");
  args = good();
  args[3].dtype = DType::bf16;
  expectError(args, "'workspace0' (#3) must be f32, got bf16");
  args = good();
  args.pop_back();
  expectError(args,
              "expects 4 tensors (inputs, outputs, then workspaces), got 3");
}

// A projection: a static [N, K] weight and a 2-D grid of tiles.
const char *kMatmulManifest = R"({
  "format": "liger-bundle", "version": 1, "source": "t.mlir",
  "modules": [{"name": "liger_kernels", "arch": "sm_90a", "cubin": "k.cubin", "ptx": "k.ptx",
    "kernels": [{"name": "proj", "template": "matmul", "ops": "liger.linear",
      "abi": "memref-descriptor", "grid": [8, "rows/128", 1], "block": [256, 1, 1],
      "dynamic_shared_memory_bytes": 61440, "vector_width": 8, "alignment_bytes": 16,
      "params": [
        {"name": "input0", "role": "input", "kind": "rows", "dtype": "bf16", "shape": ["rows", 256]},
        {"name": "input1", "role": "input", "kind": "matrix", "dtype": "bf16", "shape": [1024, 256]},
        {"name": "output0", "role": "output", "kind": "rows", "dtype": "bf16", "shape": ["rows", 1024]}
      ]}]}]})";

TEST_F(BundleFilesTest, MatrixParametersAndTiledGrids) {
  std::unique_ptr<Bundle> b;
  ASSERT_TRUE(openWith(kMatmulManifest, &b).isOk());
  const KernelSpec *k = b->findKernel("proj");
  ASSERT_NE(k, nullptr);
  EXPECT_EQ(k->grid[0].kind, GridDim::Const);
  EXPECT_EQ(k->grid[0].value, 8);
  EXPECT_EQ(k->grid[1].kind, GridDim::Rows);
  EXPECT_EQ(k->grid[1].value, 128);
  EXPECT_EQ(k->params[1].kind, ParamKind::Matrix);
  EXPECT_EQ(k->params[1].heads, 1024); // N
  EXPECT_EQ(k->params[1].length, 256); // K
  alignas(16) static char buf[64];
  std::vector<TensorArg> args = {{buf, DType::bf16, {300, 256}},
                                 {buf, DType::bf16, {1024, 256}},
                                 {buf, DType::bf16, {300, 1024}}};
  int64_t rows = 0;
  ASSERT_TRUE(b->checkArgs(*k, args, &rows).isOk());
  EXPECT_EQ(rows, 300);
  args[1].shape = {1024, 255};
  Status s = b->checkArgs(*k, args, &rows);
  ASSERT_FALSE(s.isOk());
  EXPECT_NE(s.message().find("'input1' (#1) must have shape [1024, 256], got "
                             "[1024, 255]"),
            std::string::npos)
      << s.toString();
}

// A weight gradient (dW = dyᵀ · x): row-shaped inputs, a matrix output and
// a constant grid; it reduces over the rows, so 0 rows is refused rather
// than leaving dW unwritten.
TEST_F(BundleFilesTest, WeightGradientNeedsRows) {
  std::string text = kMatmulManifest;
  auto replace = [&](const std::string &from, const std::string &to) {
    size_t at = text.find(from);
    ASSERT_NE(at, std::string::npos) << from;
    text.replace(at, from.size(), to);
  };
  replace(R"("grid": [8, "rows/128", 1])", R"("grid": [4, 8, 1])");
  replace(R"({"name": "input1", "role": "input", "kind": "matrix", "dtype": "bf16", "shape": [1024, 256]})",
          R"({"name": "input1", "role": "input", "kind": "rows", "dtype": "bf16", "shape": ["rows", 1024]})");
  replace(R"({"name": "output0", "role": "output", "kind": "rows", "dtype": "bf16", "shape": ["rows", 1024]})",
          R"({"name": "output0", "role": "output", "kind": "matrix", "dtype": "bf16", "shape": [256, 1024]})");
  std::unique_ptr<Bundle> b;
  ASSERT_TRUE(openWith(text, &b).isOk());
  const KernelSpec *k = b->findKernel("proj");
  ASSERT_NE(k, nullptr);
  EXPECT_EQ(k->grid[1].kind, GridDim::Const);
  alignas(16) static char buf[64];
  std::vector<TensorArg> args = {{buf, DType::bf16, {77, 256}},
                                 {buf, DType::bf16, {77, 1024}},
                                 {buf, DType::bf16, {256, 1024}}};
  int64_t rows = 0;
  ASSERT_TRUE(b->checkArgs(*k, args, &rows).isOk());
  EXPECT_EQ(rows, 77);
  args[0].shape = {0, 256};
  args[1].shape = {0, 1024};
  Status s = b->checkArgs(*k, args, &rows);
  ASSERT_FALSE(s.isOk());
  EXPECT_NE(s.message().find("reduces over the rows into 'output0': with 0 "
                             "rows it would not be written"),
            std::string::npos)
      << s.toString();
  args[1].shape = {76, 1024};
  s = b->checkArgs(*k, args, &rows);
  ASSERT_FALSE(s.isOk());
  EXPECT_NE(s.message().find("has 76 rows, the earlier tensors 0"),
            std::string::npos)
      << s.toString();
}

// The wgmma kernels' TMA descriptors: which parameter, which box.
TEST(ManifestTest, ParsesTensorMapsAndRejectsBadOnes) {
  std::string text = kMatmulManifest;
  std::string maps =
      R"("tensor_maps": [{"param": "input0", "box": [128, 64], "swizzle": 128, "oob": "zero"},
                         {"param": "input1", "box": [256, 64], "swizzle": 128, "oob": "zero"}],
      "params")";
  auto with = [&](const std::string &entry) {
    std::string t = text;
    t.replace(t.find("\"params\""), 8, entry);
    return t;
  };
  Manifest m;
  ASSERT_TRUE(parse(with(maps), &m).isOk());
  const KernelSpec &k = m.modules[0].kernels[0];
  ASSERT_EQ(k.tensorMaps.size(), 2u);
  EXPECT_EQ(k.tensorMaps[0].param, 0u);
  EXPECT_EQ(k.tensorMaps[0].boxRows, 128);
  EXPECT_EQ(k.tensorMaps[1].param, 1u);
  EXPECT_EQ(k.tensorMaps[1].boxRows, 256);
  EXPECT_EQ(k.tensorMaps[1].boxCols, 64);
  EXPECT_EQ(k.tensorMaps[1].swizzleBytes, 128);

  auto expectError = [&](const std::string &entry, const char *message) {
    Manifest bad;
    Status s = parse(with(entry), &bad);
    ASSERT_FALSE(s.isOk()) << message;
    EXPECT_NE(s.message().find(message), std::string::npos) << s.toString();
  };
  expectError(R"("tensor_maps": [{"param": "output1", "box": [128, 64], "swizzle": 128}], "params")",
              "param 'output1' is not a rows or matrix parameter");
  expectError(R"("tensor_maps": [{"param": "input0", "box": [512, 64], "swizzle": 128}], "params")",
              "box must be [rows, cols], each in [1, 256]");
  expectError(R"("tensor_maps": [{"param": "input0", "box": [128], "swizzle": 128}], "params")",
              "box must be [rows, cols]");
  expectError(R"("tensor_maps": [{"param": "input0", "box": [128, 64], "swizzle": 16}], "params")",
              "swizzle 16 is not supported (32, 64 or 128)");
  expectError(R"("tensor_maps": {"param": "input0"}, "params")",
              "tensor_maps: expected an array");
}

TEST(CudaDriverTest, NoDriverIsAClearError) {
  const CudaDriver *driver = nullptr;
  Status s = CudaDriver::get(&driver);
  if (s.isOk())
    GTEST_SKIP() << "a CUDA driver is present on this machine";
  EXPECT_EQ(driver, nullptr);
  EXPECT_TRUE(s.code() == StatusCode::kUnavailable ||
              s.code() == StatusCode::kInternal)
      << s.toString();
  if (s.code() == StatusCode::kUnavailable) {
    EXPECT_NE(s.message().find("cannot load the CUDA driver"),
              std::string::npos)
        << s.toString();
  }
}

} // namespace
