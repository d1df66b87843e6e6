//===- BundleTest.cpp - bundles, argument checks and shapes, no driver ----===//
//
// The runtime's launch-time rules that need no GPU: bundle files (missing,
// truncated cubin), kernel handles, every argument check of a launch with
// its full message, the shapes of outputs and workspaces for given inputs
// (and their rules over ranks alone, for symbolic sizes), tensors from a
// caller's rank and sizes, and the error a machine without a CUDA driver
// gets. The manifest's own rules are ManifestTest.cpp's.
//
//===----------------------------------------------------------------------===//

#include "liger/Runtime/Bundle.h"
#include "BundleDir.h"
#include "TestManifests.h"
#include "liger/Runtime/CudaDriver.h"
#include "liger/Runtime/Sha256.h"

#include <fstream>
#include <gtest/gtest.h>
#include <iterator>
#include <string>

using namespace liger::runtime;

namespace {

using liger::runtime::testing::kTestManifest;
using liger::runtime::testing::kUnsetCubinSha256;

using BundleFilesTest = liger::runtime::testing::BundleDirTest;

/// The full message of checkArgs on `args`, "" when they pass.
std::string checked(const KernelSpec &k, const std::vector<TensorArg> &args,
                    LaunchDims *dims = nullptr) {
  LaunchDims ignored;
  Status s = checkArgs(k, args, dims ? dims : &ignored);
  return s.isOk() ? "" : s.message();
}

/// The full message of inferOutputShapes, "" when it passes.
std::string inferred(const KernelSpec &k, const std::vector<Shape> &inputs,
                     std::vector<Shape> *outputs) {
  Status s = inferOutputShapes(k, inputs.data(), inputs.size(), outputs);
  return s.isOk() ? "" : s.message();
}

TEST_F(BundleFilesTest, MissingManifest) {
  std::unique_ptr<Bundle> b;
  Status s = Bundle::open(dir, &b);
  EXPECT_EQ(s.code(), StatusCode::kNotFound);
  EXPECT_EQ(s.message(),
            "cannot read " + dir + "/manifest.json: No such file or directory");
}

// A copy cut short, or a flipped bit: not the cubin the manifest's digest
// is of.
TEST_F(BundleFilesTest, ACubinThatIsNotTheManifestsIsRefused) {
  std::unique_ptr<Bundle> b;
  ASSERT_TRUE(openWith(kTestManifest, &b).isOk());
  std::ifstream in(dir + "/k.cubin", std::ios::binary);
  std::string cubin((std::istreambuf_iterator<char>(in)),
                    std::istreambuf_iterator<char>());
  std::string digest = sha256Hex(cubin.data(), cubin.size());
  write("k.cubin", cubin.substr(0, 3));
  Status s = Bundle::open(dir, &b);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(s.message(),
            dir +
                "/k.cubin is not the cubin the manifest names: its SHA-256 "
                "is " +
                sha256Hex(cubin.data(), 3) +
                " (3 bytes), the manifest's cubin_sha256 is " + digest +
                "; the bundle is truncated, damaged or mixed with another "
                "build (rebuild it with liger-compile)");
  cubin[40] ^= 4;
  write("k.cubin", cubin);
  EXPECT_EQ(Bundle::open(dir, &b).message(),
            dir +
                "/k.cubin is not the cubin the manifest names: its SHA-256 "
                "is " +
                sha256Hex(cubin.data(), cubin.size()) + " (" +
                std::to_string(cubin.size()) +
                " bytes), the manifest's cubin_sha256 is " + digest +
                "; the bundle is truncated, damaged or mixed with another "
                "build (rebuild it with liger-compile)");
}

// The digest covers the cubin, not what it is: a manifest written for a
// file that is no cubin is refused too (CubinTest.cpp has every rule).
TEST_F(BundleFilesTest, AFileThatIsNoCubinIsRefused) {
  std::string text = kTestManifest;
  text.replace(text.find(kUnsetCubinSha256), 64,
               sha256Hex("\x7f"
                         "EL",
                         3));
  write("manifest.json", text);
  write("k.cubin", "\x7f"
                   "EL");
  std::unique_ptr<Bundle> b;
  EXPECT_EQ(Bundle::open(dir, &b).message(),
            dir + "/k.cubin is not a well-formed cubin: 3 bytes, fewer than "
                  "an ELF header's 64");
}

TEST_F(BundleFilesTest, AManifestErrorNamesTheFile) {
  std::unique_ptr<Bundle> b;
  Status s = openWith(
      std::string(kTestManifest)
          .replace(std::string(kTestManifest).find("\"bf16\""), 6, "\"x\""),
      &b);
  EXPECT_EQ(s.message(), dir + "/manifest.json: modules[0].kernels[0]."
                               "params[0]: unknown dtype 'x'");
}

TEST_F(BundleFilesTest, KernelHandles) {
  std::unique_ptr<Bundle> b;
  ASSERT_TRUE(openWith(kTestManifest, &b).isOk());
  EXPECT_EQ(b->kernelCount(), 2u);
  EXPECT_EQ(b->kernelIndex("norm"), 0);
  EXPECT_EQ(b->kernelIndex("grad"), 1);
  EXPECT_EQ(b->kernelIndex("grad_finish"), -1); // launched by "grad" only
  EXPECT_EQ(b->kernelIndex("nope"), -1);
  EXPECT_EQ(&b->kernel(0), b->findKernel("norm"));
  EXPECT_EQ(b->findKernel("nope"), nullptr);
  EXPECT_EQ(b->moduleOf(0).arch, "sm_90a");
  Status s = b->launch("nope", {}, nullptr);
  EXPECT_EQ(s.code(), StatusCode::kNotFound);
  EXPECT_EQ(s.message(), dir + " has no kernel 'nope'");
  s = b->launch(size_t(3), nullptr, 0, nullptr);
  EXPECT_EQ(s.code(), StatusCode::kNotFound);
  EXPECT_EQ(s.message(), dir + " has no kernel #3 (it has 2)");
}

TEST_F(BundleFilesTest, ArgumentChecks) {
  std::unique_ptr<Bundle> b;
  ASSERT_TRUE(openWith(kTestManifest, &b).isOk());
  const KernelSpec &k = *b->findKernel("norm");
  alignas(16) static char buf[64];
  auto good = [&] {
    return std::vector<TensorArg>{{buf, DType::bf16, {2, 3, 4096}},
                                  {buf, DType::bf16, {4096}},
                                  {buf, DType::bf16, {6, 4096}},
                                  {buf, DType::f32, {6}}};
  };
  LaunchDims dims;
  ASSERT_EQ(checked(k, good(), &dims), "");
  EXPECT_EQ(dims.rows, 6);
  EXPECT_EQ(dims.ctas, -1);

  auto args = good();
  args.pop_back();
  EXPECT_EQ(checked(k, args), "kernel 'norm': expects 4 tensors (inputs then "
                              "outputs), got 3");
  args = good();
  args[0].dtype = DType::f32;
  EXPECT_EQ(checked(k, args), "kernel 'norm': 'input0' (#0) must be bf16, got "
                              "f32");
  args = good();
  args[1].shape = {4095};
  EXPECT_EQ(checked(k, args), "kernel 'norm': 'input1' (#1) must have shape "
                              "[4096], got [4095]");
  args = good();
  args[0].shape = {6, 4095};
  EXPECT_EQ(checked(k, args), "kernel 'norm': 'input0' (#0) must have 4096 "
                              "elements in its last dimension, got shape [6, "
                              "4095]");
  args = good();
  args[0].shape = {};
  EXPECT_EQ(checked(k, args), "kernel 'norm': 'input0' (#0) must have 4096 "
                              "elements in its last dimension, got shape []");
  args = good();
  args[3].shape = {7};
  EXPECT_EQ(checked(k, args), "kernel 'norm': 'output1' (#3) has 7 rows, the "
                              "earlier tensors 6");
  args = good();
  args[2].data = buf + 2;
  EXPECT_EQ(checked(k, args), "kernel 'norm': 'output0' (#2) must be 16-byte "
                              "aligned (the kernel uses vector loads)");
  args = good();
  args[1].data = nullptr;
  EXPECT_EQ(checked(k, args), "kernel 'norm': 'input1' (#1) is a null "
                              "pointer");
  // An empty tensor may have no storage.
  args = good();
  args[0] = {nullptr, DType::bf16, {0, 4096}};
  args[2] = {nullptr, DType::bf16, {0, 4096}};
  args[3] = {nullptr, DType::f32, {0}};
  ASSERT_EQ(checked(k, args, &dims), "");
  EXPECT_EQ(dims.rows, 0);
  args = good();
  args[0].shape = {65536, 32768, 4096};
  args[2].shape = {int64_t(1) << 31, 4096};
  args[3].shape = {int64_t(1) << 31};
  EXPECT_EQ(checked(k, args), "kernel 'norm': too many rows for one launch "
                              "(2147483648)");
  // Sizes whose product overflows count as more rows than any launch.
  args = good();
  args[0].shape = {int64_t(1) << 40, int64_t(1) << 40, 4096};
  EXPECT_EQ(checked(k, args), "kernel 'norm': 'output0' (#2) has 6 rows, the "
                              "earlier tensors 9223372036854775807");
  EXPECT_EQ((Shape{int64_t(1) << 40, int64_t(1) << 40}).elements(), INT64_MAX);
}

TEST_F(BundleFilesTest, OutputShapes) {
  std::unique_ptr<Bundle> b;
  ASSERT_TRUE(openWith(kTestManifest, &b).isOk());
  const KernelSpec &k = *b->findKernel("norm");
  std::vector<Shape> out;
  ASSERT_EQ(inferred(k, {{2, 3, 4096}, {4096}}, &out), "");
  EXPECT_EQ(out, (std::vector<Shape>{{2, 3, 4096}, {2, 3}}));
  // The inputs are checked as a launch checks them.
  EXPECT_EQ(inferred(k, {{2, 3, 4096}}, &out),
            "kernel 'norm': takes 2 input tensors (input0, input1), got 1");
  EXPECT_EQ(inferred(k, {{2, 3, 4000}, {4096}}, &out),
            "kernel 'norm': 'input0' (#0) must have 4096 elements in its last "
            "dimension, got shape [2, 3, 4000]");
  EXPECT_EQ(inferred(k, {{2, 3, 4096}, {4000}}, &out),
            "kernel 'norm': 'input1' (#1) must have shape [4096], got [4000]");
  // The same as rules over ranks: output i's size j is input a's size b.
  std::vector<std::vector<DimSource>> rules;
  size_t ranks[] = {3, 1};
  ASSERT_TRUE(outputShapeRules(k, ranks, 2, &rules).isOk());
  ASSERT_EQ(rules.size(), 2u);
  ASSERT_EQ(rules[0].size(), 3u);
  EXPECT_EQ(rules[0][1].input, 0);
  EXPECT_EQ(rules[0][1].dim, 1);
  EXPECT_EQ(rules[0][2].input, -1);
  EXPECT_EQ(rules[0][2].size, 4096);
  EXPECT_EQ(rules[1].size(), 2u);
  size_t scalarRows[] = {0, 1};
  EXPECT_EQ(outputShapeRules(k, scalarRows, 2, &rules).message(),
            "kernel 'norm': 'input0' (#0) must have 4096 elements in its last "
            "dimension, got a scalar");
  // No workspaces.
  std::vector<Shape> inputs = {{2, 3, 4096}, {4096}}, ws = {{1}};
  ASSERT_TRUE(inferWorkspaceShapes(k, inputs.data(), 2, 132, &ws).isOk());
  EXPECT_TRUE(ws.empty());
}

TEST(ShapeTest, TensorsFromACallersSizes) {
  TensorArg a;
  int64_t sizes[9] = {1, 2, 3, 4, 5, 6, 7, 8, 9};
  ASSERT_TRUE(
      makeTensorArg(nullptr, DType::f16, sizes, 8, "input", 0, &a).isOk());
  EXPECT_EQ(a.shape.size(), 8u);
  EXPECT_EQ(a.shape.elements(), 40320);
  EXPECT_EQ(a.dtype, DType::f16);
  EXPECT_EQ(
      makeTensorArg(nullptr, DType::f16, sizes, 9, "input", 2, &a).message(),
      "input #2 has rank 9; liger kernels take tensors of rank 0 to 8");
  EXPECT_EQ(
      makeTensorArg(nullptr, DType::f16, sizes, -1, "input", 2, &a).message(),
      "input #2 has rank -1; liger kernels take tensors of rank 0 to 8");
  EXPECT_EQ(
      makeTensorArg(nullptr, DType::f16, nullptr, 2, "output", 1, &a).message(),
      "output #1 has rank 2 but no sizes");
  int64_t negative[] = {3, -1};
  EXPECT_EQ(makeTensorArg(nullptr, DType::f16, negative, 2, "output", 1, &a)
                .message(),
            "output #1 has a negative size: [3, -1]");
  Shape s = {4, 5};
  EXPECT_TRUE(s.push_back(6));
  EXPECT_EQ(shapeString(s), "[4, 5, 6]");
  EXPECT_EQ(s, (Shape{4, 5, 6}));
  EXPECT_NE(s, (Shape{4, 5}));
  Shape full = {1, 1, 1, 1, 1, 1, 1, 1};
  EXPECT_FALSE(full.push_back(1));
  EXPECT_EQ(Shape().elements(), 1);
}

const char *kRoPEManifest = R"({
  "format": "liger-bundle", "version": 3, "source": "t.mlir",
  "modules": [{"name": "liger_kernels", "arch": "sm_90a", "cubin": "k.cubin",
    "cubin_sha256": "0000000000000000000000000000000000000000000000000000000000000000", "ptx": "k.ptx",
    "kernels": [{"name": "rope", "function": "layer", "template": "rope", "ops": "liger.rope",
      "abi": "memref-descriptor", "grid": ["tokens", 1, 1], "block": [256, 1, 1],
      "dynamic_shared_memory_bytes": 0, "vector_width": 4, "alignment_bytes": 16,
      "params": [
        {"name": "input0", "role": "input", "kind": "heads", "dtype": "f32", "shape": ["batch", 4, "seq", 16]},
        {"name": "input1", "role": "input", "kind": "heads", "dtype": "f32", "shape": ["batch", 2, "seq", 16]},
        {"name": "input2", "role": "input", "kind": "tables", "dtype": "f32", "shape": [1, "seq", 16]},
        {"name": "input3", "role": "input", "kind": "tables", "dtype": "f32", "shape": ["table_batch", "seq", 16]},
        {"name": "output0", "role": "output", "kind": "heads", "dtype": "f32", "shape": ["batch", 4, "seq", 16]},
        {"name": "output1", "role": "output", "kind": "heads", "dtype": "f32", "shape": ["batch", 2, "seq", 16]}
      ]}]}]})";

TEST_F(BundleFilesTest, RoPEArgumentChecks) {
  std::unique_ptr<Bundle> b;
  ASSERT_TRUE(openWith(kRoPEManifest, &b).isOk());
  const KernelSpec &k = *b->findKernel("rope");
  EXPECT_EQ(k.params[0].kind, ParamKind::Heads);
  EXPECT_EQ(k.params[0].outer, 4);
  EXPECT_EQ(k.params[2].outer, 1); // a broadcast table
  EXPECT_EQ(k.params[3].outer, 0);
  alignas(16) static char buf[64];
  auto good = [&] {
    return std::vector<TensorArg>{
        {buf, DType::f32, {2, 4, 5, 16}}, {buf, DType::f32, {2, 2, 5, 16}},
        {buf, DType::f32, {1, 5, 16}},    {buf, DType::f32, {2, 5, 16}},
        {buf, DType::f32, {2, 4, 5, 16}}, {buf, DType::f32, {2, 2, 5, 16}}};
  };
  LaunchDims dims;
  ASSERT_EQ(checked(k, good(), &dims), "");
  EXPECT_EQ(dims.rows, 10); // one CTA per token: batch 2 x sequence 5
  auto args = good();
  args[1].shape = {2, 3, 5, 16};
  EXPECT_EQ(checked(k, args), "kernel 'rope': 'input1' (#1) must have shape "
                              "[batch, 2, seq, 16], got [2, 3, 5, 16]");
  args = good();
  args[1].shape = {2, 2, 6, 16};
  EXPECT_EQ(checked(k, args), "kernel 'rope': 'input1' (#1) has batch and "
                              "sequence [2, 2, 6, 16], the earlier tensors 2 "
                              "and 5");
  args = good();
  args[2].shape = {2, 5, 16};
  EXPECT_EQ(checked(k, args),
            "kernel 'rope': 'input2' (#2) must have batch 1 (the kernel was "
            "compiled for broadcast tables), got shape [2, 5, 16]");
  args = good();
  args[3].shape = {1, 4, 16};
  EXPECT_EQ(checked(k, args), "kernel 'rope': 'input3' (#3) must have shape "
                              "[1 or 2, 5, 16], got [1, 4, 16]");

  // Outputs take the batch and sequence of the [B, H, T, D] inputs.
  std::vector<Shape> out;
  ASSERT_EQ(
      inferred(k, {{3, 4, 7, 16}, {3, 2, 7, 16}, {1, 7, 16}, {3, 7, 16}}, &out),
      "");
  EXPECT_EQ(out, (std::vector<Shape>{{3, 4, 7, 16}, {3, 2, 7, 16}}));
  size_t ranks[] = {4, 4, 3, 2};
  std::vector<std::vector<DimSource>> rules;
  EXPECT_EQ(outputShapeRules(k, ranks, 4, &rules).message(), "");
  size_t badRanks[] = {4, 3, 3, 3};
  EXPECT_EQ(outputShapeRules(k, badRanks, 4, &rules).message(),
            "kernel 'rope': 'input1' (#1) must have shape [batch, 2, seq, 16], "
            "got rank 3");
}

// The q/k projections with RoPE: rows [B, T, K] in, [B, H, T, D] out (a
// head split), tables sized by B and T of the rows.
const char *kQKManifest = R"({
  "format": "liger-bundle", "version": 3, "source": "t.mlir",
  "modules": [{"name": "liger_kernels", "arch": "sm_90a", "cubin": "k.cubin",
    "cubin_sha256": "0000000000000000000000000000000000000000000000000000000000000000", "ptx": "k.ptx",
    "kernels": [{"name": "qk", "function": "qk", "template": "matmul", "ops": "liger.linear, liger.rope",
      "abi": "memref-descriptor", "grid": [4, "rows/128", 1], "block": [384, 1, 1],
      "dynamic_shared_memory_bytes": 0, "vector_width": 8, "alignment_bytes": 16,
      "params": [
        {"name": "input0", "role": "input", "kind": "rows", "dtype": "bf16", "shape": ["rows", 64]},
        {"name": "input1", "role": "input", "kind": "matrix", "dtype": "bf16", "shape": [64, 64]},
        {"name": "input2", "role": "input", "kind": "tables", "dtype": "bf16", "shape": [1, "seq", 16]},
        {"name": "output0", "role": "output", "kind": "heads", "dtype": "bf16", "shape": ["batch", 4, "seq", 16]}
      ]}]}]})";

TEST_F(BundleFilesTest, HeadSplitShapes) {
  std::unique_ptr<Bundle> b;
  ASSERT_TRUE(openWith(kQKManifest, &b).isOk());
  const KernelSpec &k = *b->findKernel("qk");
  std::vector<Shape> out;
  ASSERT_EQ(inferred(k, {{3, 7, 64}, {64, 64}, {1, 7, 16}}, &out), "");
  EXPECT_EQ(out, (std::vector<Shape>{{3, 4, 7, 16}}));
  EXPECT_EQ(inferred(k, {{3, 7, 64}, {64, 64}, {1, 8, 16}}, &out),
            "kernel 'qk': 'input2' (#2) must have shape [1 or 3, 7, 16], got "
            "[1, 8, 16]");
  EXPECT_EQ(inferred(k, {{21, 64}, {64, 64}, {1, 7, 16}}, &out),
            "kernel 'qk': writes [B, H, T, D] from [B, T, K] rows, got rows of "
            "rank 2");

  size_t ranks[] = {2, 2, 3};
  std::vector<std::vector<DimSource>> rules;
  EXPECT_EQ(outputShapeRules(k, ranks, 3, &rules).message(),
            "kernel 'qk': writes [B, H, T, D] from [B, T, K] rows, got rows of "
            "rank 2");
  alignas(16) static char buf[64];
  std::vector<TensorArg> args = {{buf, DType::bf16, {3, 7, 64}},
                                 {buf, DType::bf16, {64, 64}},
                                 {buf, DType::bf16, {1, 7, 16}},
                                 {buf, DType::bf16, {3, 4, 7, 16}}};
  LaunchDims dims;
  ASSERT_EQ(checked(k, args, &dims), "");
  EXPECT_EQ(dims.rows, 21);
  args[3].shape = {3, 4, 6, 16};
  args[2].shape = {1, 6, 16};
  EXPECT_EQ(checked(k, args), "kernel 'qk': has 21 rows, but its [batch, "
                              "heads, seq, D] tensors have batch x seq = 18");

  // Tables without [B, H, T, D] tensors take B and T from [B, T, K] rows.
  std::string text = kQKManifest;
  std::string heads =
      R"("kind": "heads", "dtype": "bf16", "shape": ["batch", 4, "seq", 16])";
  text.replace(text.find(heads), heads.size(),
               R"("kind": "rows", "dtype": "bf16", "shape": ["rows", 64])");
  ASSERT_TRUE(openWith(text, &b).isOk());
  const KernelSpec &rows = *b->findKernel("qk");
  args = {{buf, DType::bf16, {3, 7, 64}},
          {buf, DType::bf16, {64, 64}},
          {buf, DType::bf16, {1, 7, 16}},
          {buf, DType::bf16, {3, 7, 64}}};
  ASSERT_EQ(checked(rows, args, &dims), "");
  EXPECT_EQ(dims.rows, 21);
  args[0].shape = args[3].shape = {21, 64};
  EXPECT_EQ(checked(rows, args),
            "kernel 'qk': 'input2' (#2) needs the batch and sequence of a "
            "[batch, heads, seq, D] tensor or of [batch, seq, K] rows, and "
            "there is none");
}

// Attention: the forward saves one log-sum-exp per (batch, head,
// position), head scalars, for the backward, which accumulates dq into a
// heads workspace. Head scalars share the batch and sequence of the heads
// tensors.
const char *kAttentionManifest = R"({
  "format": "liger-bundle", "version": 3, "source": "t.mlir",
  "modules": [{"name": "liger_kernels", "arch": "sm_90a", "cubin": "k.cubin",
    "cubin_sha256": "0000000000000000000000000000000000000000000000000000000000000000", "ptx": "k.ptx",
    "kernels": [{"name": "attn", "function": "attn", "template": "attention", "ops": "liger.attention",
      "abi": "memref-descriptor", "grid": ["rows/128", 1, 1], "block": [384, 1, 1],
      "dynamic_shared_memory_bytes": 0, "vector_width": 8, "alignment_bytes": 16,
      "params": [
        {"name": "input0", "role": "input", "kind": "heads", "dtype": "bf16", "shape": ["batch", 8, "seq", 16]},
        {"name": "input1", "role": "input", "kind": "heads", "dtype": "bf16", "shape": ["batch", 2, "seq", 16]},
        {"name": "output0", "role": "output", "kind": "heads", "dtype": "bf16", "shape": ["batch", 8, "seq", 16]},
        {"name": "output1", "role": "output", "kind": "head_scalars", "dtype": "f32", "shape": ["batch", 8, "seq"]}
      ]},
     {"name": "attn_bwd", "function": "attn_grad", "template": "attention", "ops": "liger.attention_grad",
      "abi": "memref-descriptor", "grid": ["sms", 1, 1], "block": [384, 1, 1],
      "dynamic_shared_memory_bytes": 0, "vector_width": 8, "alignment_bytes": 16,
      "ctas_per_sm": 1,
      "finish": {"name": "attn_bwd_finish", "grid": [64, 1, 1], "block": [256, 1, 1],
                 "dynamic_shared_memory_bytes": 0},
      "params": [
        {"name": "input0", "role": "input", "kind": "heads", "dtype": "bf16", "shape": ["batch", 8, "seq", 16]},
        {"name": "input1", "role": "input", "kind": "head_scalars", "dtype": "f32", "shape": ["batch", 8, "seq"]},
        {"name": "input2", "role": "input", "kind": "heads", "dtype": "bf16", "shape": ["batch", 2, "seq", 16]},
        {"name": "output0", "role": "output", "kind": "heads", "dtype": "bf16", "shape": ["batch", 8, "seq", 16]},
        {"name": "workspace0", "role": "workspace", "kind": "heads", "dtype": "f32", "shape": ["batch", 8, "seq", 16]}
      ]}]}]})";

TEST_F(BundleFilesTest, HeadScalarsShareTheHeadsBatchAndSequence) {
  std::unique_ptr<Bundle> b;
  ASSERT_TRUE(openWith(kAttentionManifest, &b).isOk());
  const KernelSpec &fwd = *b->findKernel("attn");
  const KernelSpec &bwd = *b->findKernel("attn_bwd");
  EXPECT_EQ(bwd.params[1].kind, ParamKind::HeadScalars);
  EXPECT_EQ(bwd.params[1].outer, 8);
  EXPECT_EQ(bwd.params[1].length, 0);

  // An output's shape: B and T of the heads inputs.
  std::vector<Shape> out;
  ASSERT_EQ(inferred(fwd, {{3, 8, 7, 16}, {3, 2, 7, 16}}, &out), "");
  EXPECT_EQ(out, (std::vector<Shape>{{3, 8, 7, 16}, {3, 8, 7}}));
  size_t ranks[] = {4, 4};
  std::vector<std::vector<DimSource>> rules;
  ASSERT_TRUE(outputShapeRules(fwd, ranks, 2, &rules).isOk());
  ASSERT_EQ(rules.size(), 2u);
  ASSERT_EQ(rules[1].size(), 3u);
  EXPECT_EQ((std::vector<int>{rules[1][0].input, rules[1][0].dim}),
            (std::vector<int>{0, 0}));
  EXPECT_EQ(rules[1][1].input, -1);
  EXPECT_EQ(rules[1][1].size, 8);
  EXPECT_EQ((std::vector<int>{rules[1][2].input, rules[1][2].dim}),
            (std::vector<int>{0, 2}));
  // As an input: rank 3, checked with the heads tensors.
  size_t badRanks[] = {4, 4, 4};
  EXPECT_EQ(outputShapeRules(bwd, badRanks, 3, &rules).message(),
            "kernel 'attn_bwd': 'input1' (#1) must have shape [batch, 8, seq], "
            "got rank 4");
  ASSERT_EQ(inferred(bwd, {{3, 8, 7, 16}, {3, 8, 7}, {3, 2, 7, 16}}, &out), "");
  EXPECT_EQ(out, (std::vector<Shape>{{3, 8, 7, 16}}));
  EXPECT_EQ(inferred(bwd, {{3, 8, 7, 16}, {3, 8, 6}, {3, 2, 7, 16}}, &out),
            "kernel 'attn_bwd': 'input1' (#1) has batch and sequence [3, 8, "
            "6], the earlier tensors 3 and 7");

  alignas(16) static char buf[64];
  auto good = [&] {
    return std::vector<TensorArg>{{buf, DType::bf16, {2, 8, 5, 16}},
                                  {buf, DType::f32, {2, 8, 5}},
                                  {buf, DType::bf16, {2, 2, 5, 16}},
                                  {buf, DType::bf16, {2, 8, 5, 16}},
                                  {buf, DType::f32, {2, 8, 5, 16}}};
  };
  LaunchDims dims;
  ASSERT_EQ(checked(bwd, good(), &dims), "");
  EXPECT_EQ(dims.rows, 10);
  EXPECT_EQ(dims.ctas, -1); // no partials workspaces
  auto args = good();
  args[1].shape = {3, 8, 5};
  EXPECT_EQ(checked(bwd, args), "kernel 'attn_bwd': 'input1' (#1) has batch "
                                "and sequence [3, 8, 5], the earlier tensors 2 "
                                "and 5");
  args = good();
  args[1].shape = {2, 8, 4};
  EXPECT_EQ(checked(bwd, args), "kernel 'attn_bwd': 'input1' (#1) has batch "
                                "and sequence [2, 8, 4], the earlier tensors 2 "
                                "and 5");
  args = good();
  args[1].shape = {2, 2, 5};
  EXPECT_EQ(checked(bwd, args), "kernel 'attn_bwd': 'input1' (#1) must have "
                                "shape [batch, 8, seq], got [2, 2, 5]");
  args = good();
  args[1].shape = {2, 8, 5, 1};
  EXPECT_EQ(checked(bwd, args), "kernel 'attn_bwd': 'input1' (#1) must have "
                                "shape [batch, 8, seq], got [2, 8, 5, 1]");
  // The head scalars bind first when they come first.
  std::string text = kAttentionManifest;
  std::string q =
      R"({"name": "input0", "role": "input", "kind": "heads", "dtype": "bf16", "shape": ["batch", 8, "seq", 16]},
        {"name": "input1", "role": "input", "kind": "head_scalars", "dtype": "f32", "shape": ["batch", 8, "seq"]},)";
  text.replace(
      text.rfind(q), q.size(),
      R"({"name": "input0", "role": "input", "kind": "head_scalars", "dtype": "f32", "shape": ["batch", 8, "seq"]},
        {"name": "input1", "role": "input", "kind": "heads", "dtype": "bf16", "shape": ["batch", 8, "seq", 16]},)");
  ASSERT_TRUE(openWith(text, &b).isOk());
  args = good();
  std::swap(args[0], args[1]);
  ASSERT_EQ(checked(*b->findKernel("attn_bwd"), args), "");
  args[0].shape = {2, 8, 6};
  EXPECT_EQ(checked(*b->findKernel("attn_bwd"), args),
            "kernel 'attn_bwd': 'input1' (#1) has batch and sequence [2, 8, 5, "
            "16], the earlier tensors 2 and 6");
}

TEST_F(BundleFilesTest, HeadsWorkspaceShapes) {
  std::unique_ptr<Bundle> b;
  ASSERT_TRUE(openWith(kAttentionManifest, &b).isOk());
  const KernelSpec &k = *b->findKernel("attn_bwd");
  EXPECT_TRUE(k.hasWorkspaces());
  // [B, heads, T, D], B and T of the heads inputs; the SM count does not
  // matter.
  std::vector<Shape> inputs = {{3, 8, 7, 16}, {3, 8, 7}, {3, 2, 7, 16}}, ws;
  ASSERT_TRUE(inferWorkspaceShapes(k, inputs.data(), 3, 132, &ws).isOk());
  EXPECT_EQ(ws, (std::vector<Shape>{{3, 8, 7, 16}}));
  inputs = {{0, 8, 7, 16}, {0, 8, 7}, {0, 2, 7, 16}};
  ASSERT_TRUE(inferWorkspaceShapes(k, inputs.data(), 3, 1, &ws).isOk());
  EXPECT_EQ(ws, (std::vector<Shape>{{0, 8, 7, 16}}));
  inputs[1] = {0, 8, 6};
  EXPECT_EQ(inferWorkspaceShapes(k, inputs.data(), 3, 132, &ws).message(),
            "kernel 'attn_bwd': 'input1' (#1) has batch and sequence [0, 8, "
            "6], the earlier tensors 0 and 7");
  // The workspace passed to a launch is checked as a heads tensor.
  alignas(16) static char buf[64];
  std::vector<TensorArg> args = {{buf, DType::bf16, {2, 8, 5, 16}},
                                 {buf, DType::f32, {2, 8, 5}},
                                 {buf, DType::bf16, {2, 2, 5, 16}},
                                 {buf, DType::bf16, {2, 8, 5, 16}},
                                 {buf, DType::f32, {2, 8, 6, 16}}};
  EXPECT_EQ(checked(k, args), "kernel 'attn_bwd': 'workspace0' (#4) has batch "
                              "and sequence [2, 8, 6, 16], the earlier "
                              "tensors 2 and 5");
  args[4] = {buf, DType::bf16, {2, 8, 5, 16}};
  EXPECT_EQ(checked(k, args), "kernel 'attn_bwd': 'workspace0' (#4) must be "
                              "f32, got bf16");
  // Without heads tensors, only [B, T, K] rows give B and T.
  KernelSpec rows = k;
  rows.params = {
      {"input0", ParamRole::Input, ParamKind::Rows, DType::bf16, 128, 0},
      {"workspace0", ParamRole::Workspace, ParamKind::Heads, DType::f32, 16,
       8}};
  inputs = {{3, 7, 128}};
  ASSERT_TRUE(inferWorkspaceShapes(rows, inputs.data(), 1, 132, &ws).isOk());
  EXPECT_EQ(ws, (std::vector<Shape>{{3, 8, 7, 16}}));
  inputs = {{21, 128}};
  EXPECT_EQ(
      inferWorkspaceShapes(rows, inputs.data(), 1, 132, &ws).message(),
      "kernel 'attn_bwd': 'workspace0' (#1) needs the batch and sequence "
      "of a [batch, heads, seq, D] tensor or of [batch, seq, K] rows, and "
      "there is none");
  // Rows and row_scalars workspaces take the inputs' row count.
  rows.params = {
      {"input0", ParamRole::Input, ParamKind::Rows, DType::bf16, 128, 0},
      {"workspace0", ParamRole::Workspace, ParamKind::Rows, DType::f32, 16, 0},
      {"workspace1", ParamRole::Workspace, ParamKind::RowScalars, DType::f32,
       0, 0}};
  inputs = {{3, 7, 128}};
  ASSERT_TRUE(inferWorkspaceShapes(rows, inputs.data(), 1, 132, &ws).isOk());
  EXPECT_EQ(ws, (std::vector<Shape>{{21, 16}, {21}}));
  // And are checked as rows at a launch.
  args = {{buf, DType::bf16, {21, 128}},
          {buf, DType::f32, {20, 16}},
          {buf, DType::f32, {21}}};
  EXPECT_EQ(checked(rows, args), "kernel 'attn_bwd': 'workspace0' (#1) has 20 "
                                 "rows, the earlier tensors 21");
}

// A group reducing across rows (RMSNorm backward): a workspace and a
// finishing kernel.
const char *kGradManifest = R"({
  "format": "liger-bundle", "version": 3, "source": "t.mlir",
  "modules": [{"name": "liger_kernels", "arch": "sm_90a", "cubin": "k.cubin",
    "cubin_sha256": "0000000000000000000000000000000000000000000000000000000000000000", "ptx": "k.ptx",
    "kernels": [{"name": "grad", "function": "layer", "template": "rowwise", "ops": "liger.rms_norm_grad",
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

TEST_F(BundleFilesTest, WorkspaceArgumentChecksAndShapes) {
  std::unique_ptr<Bundle> b;
  ASSERT_TRUE(openWith(kGradManifest, &b).isOk());
  const KernelSpec &k = *b->findKernel("grad");
  EXPECT_TRUE(k.hasWorkspaces());
  // min(rows, SMs * ctas_per_sm), at least one CTA.
  EXPECT_EQ(workspaceCtas(k, 16384, 132), 528);
  EXPECT_EQ(workspaceCtas(k, 7, 132), 7);
  EXPECT_EQ(workspaceCtas(k, 0, 132), 1);
  std::vector<Shape> inputs = {{2, 3, 1000}, {1000}}, ws, out;
  ASSERT_TRUE(inferWorkspaceShapes(k, inputs.data(), 2, 132, &ws).isOk());
  EXPECT_EQ(ws, (std::vector<Shape>{{6, 1000}}));
  inputs[0] = {16384, 1000};
  ASSERT_TRUE(inferWorkspaceShapes(k, inputs.data(), 2, 132, &ws).isOk());
  EXPECT_EQ(ws, (std::vector<Shape>{{528, 1000}}));
  ASSERT_EQ(inferred(k, inputs, &out), "");
  EXPECT_EQ(out, (std::vector<Shape>{{1000}}));
  inputs[0] = {16384, 999};
  EXPECT_EQ(inferWorkspaceShapes(k, inputs.data(), 2, 132, &ws).message(),
            "kernel 'grad': 'input0' (#0) must have 1000 elements in its last "
            "dimension, got shape [16384, 999]");

  alignas(16) static char buf[64];
  auto good = [&] {
    return std::vector<TensorArg>{{buf, DType::bf16, {6, 1000}},
                                  {buf, DType::bf16, {1000}},
                                  {buf, DType::bf16, {1000}},
                                  {buf, DType::f32, {3, 1000}}};
  };
  LaunchDims dims;
  ASSERT_EQ(checked(k, good(), &dims), "");
  EXPECT_EQ(dims.rows, 6);
  EXPECT_EQ(dims.ctas, 3);
  // Zero rows still need one CTA: the weight gradient is written (zeros).
  auto args = good();
  args[0].shape = {0, 1000};
  ASSERT_EQ(checked(k, args, &dims), "");
  EXPECT_EQ(dims.rows, 0);
  args = good();
  args[3].shape = {0, 1000};
  EXPECT_EQ(checked(k, args), "kernel 'grad': 'workspace0' (#3) (a workspace) "
                              "must have shape [ctas, 1000] with ctas >= 1, "
                              "got [0, 1000]");
  args = good();
  args[3].shape = {3, 999};
  EXPECT_EQ(checked(k, args), "kernel 'grad': 'workspace0' (#3) (a workspace) "
                              "must have shape [ctas, 1000] with ctas >= 1, "
                              "got [3, 999]");
  args = good();
  args[3].dtype = DType::bf16;
  EXPECT_EQ(checked(k, args), "kernel 'grad': 'workspace0' (#3) must be f32, "
                              "got bf16");
  args = good();
  args.pop_back();
  EXPECT_EQ(checked(k, args), "kernel 'grad': expects 4 tensors (inputs, "
                              "outputs, then workspaces), got 3");
}

TEST_F(BundleFilesTest, WorkspacesAgreeOnTheirCtas) {
  std::string text = kGradManifest;
  std::string ws =
      R"({"name": "workspace0", "role": "workspace", "kind": "partials", "dtype": "f32", "shape": ["ctas", 1000]})";
  text.replace(
      text.find(ws), ws.size(),
      ws + ",\n" +
          R"({"name": "workspace1", "role": "workspace", "kind": "partials", "dtype": "f32", "shape": ["ctas", 1000]})");
  std::unique_ptr<Bundle> b;
  ASSERT_TRUE(openWith(text, &b).isOk());
  alignas(16) static char buf[64];
  std::vector<TensorArg> args = {{buf, DType::bf16, {6, 1000}},
                                 {buf, DType::bf16, {1000}},
                                 {buf, DType::bf16, {1000}},
                                 {buf, DType::f32, {3, 1000}},
                                 {buf, DType::f32, {4, 1000}}};
  EXPECT_EQ(checked(*b->findKernel("grad"), args),
            "kernel 'grad': 'workspace1' (#4) has 4 CTA rows, the earlier "
            "workspaces 3");
}

// A projection: a static [N, K] weight and a 2-D grid of tiles.
const char *kMatmulManifest = R"({
  "format": "liger-bundle", "version": 3, "source": "t.mlir",
  "modules": [{"name": "liger_kernels", "arch": "sm_90a", "cubin": "k.cubin",
    "cubin_sha256": "0000000000000000000000000000000000000000000000000000000000000000", "ptx": "k.ptx",
    "kernels": [{"name": "proj", "function": "layer", "template": "matmul", "ops": "liger.linear",
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
  const KernelSpec &k = *b->findKernel("proj");
  EXPECT_EQ(k.grid[0], (GridDim{GridDim::Const, 8}));
  EXPECT_EQ(k.grid[1], (GridDim{GridDim::Rows, 128}));
  EXPECT_EQ(k.params[1].outer, 1024); // N
  EXPECT_EQ(k.params[1].length, 256); // K
  alignas(16) static char buf[64];
  std::vector<TensorArg> args = {{buf, DType::bf16, {300, 256}},
                                 {buf, DType::bf16, {1024, 256}},
                                 {buf, DType::bf16, {300, 1024}}};
  LaunchDims dims;
  ASSERT_EQ(checked(k, args, &dims), "");
  EXPECT_EQ(dims.rows, 300);
  args[1].shape = {1024, 255};
  EXPECT_EQ(checked(k, args), "kernel 'proj': 'input1' (#1) must have shape "
                              "[1024, 256], got [1024, 255]");
  std::vector<Shape> out;
  ASSERT_EQ(inferred(k, {{5, 60, 256}, {1024, 256}}, &out), "");
  EXPECT_EQ(out, (std::vector<Shape>{{5, 60, 1024}}));
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
  replace(
      R"({"name": "input1", "role": "input", "kind": "matrix", "dtype": "bf16", "shape": [1024, 256]})",
      R"({"name": "input1", "role": "input", "kind": "rows", "dtype": "bf16", "shape": ["rows", 1024]})");
  replace(
      R"({"name": "output0", "role": "output", "kind": "rows", "dtype": "bf16", "shape": ["rows", 1024]})",
      R"({"name": "output0", "role": "output", "kind": "matrix", "dtype": "bf16", "shape": [256, 1024]})");
  std::unique_ptr<Bundle> b;
  ASSERT_TRUE(openWith(text, &b).isOk());
  const KernelSpec &k = *b->findKernel("proj");
  EXPECT_EQ(k.grid[1].kind, GridDim::Const);
  alignas(16) static char buf[64];
  std::vector<TensorArg> args = {{buf, DType::bf16, {77, 256}},
                                 {buf, DType::bf16, {77, 1024}},
                                 {buf, DType::bf16, {256, 1024}}};
  LaunchDims dims;
  ASSERT_EQ(checked(k, args, &dims), "");
  EXPECT_EQ(dims.rows, 77);
  std::vector<Shape> out;
  ASSERT_EQ(inferred(k, {{1, 256}, {1, 1024}}, &out), "");
  EXPECT_EQ(out, (std::vector<Shape>{{256, 1024}}));
  args[0].shape = {0, 256};
  args[1].shape = {0, 1024};
  EXPECT_EQ(checked(k, args), "kernel 'proj': reduces over the rows into "
                              "'output0': with 0 rows it would not be written "
                              "(pass at least one row)");
  args[1].shape = {76, 1024};
  EXPECT_EQ(checked(k, args), "kernel 'proj': 'input1' (#1) has 76 rows, the "
                              "earlier tensors 0");
}

TEST(DescriptorTest, EachKindIsItsMemref) {
  alignas(16) static char buf[64];
  auto ptr = static_cast<int64_t>(reinterpret_cast<intptr_t>(buf));
  LaunchDims dims{6, 3};
  auto packed = [&](const KernelParam &p, const TensorArg &a) {
    int64_t words[16] = {};
    int64_t *end = packDescriptor(p, a, dims, words);
    EXPECT_EQ(static_cast<size_t>(end - words), descriptorWords(p));
    return std::vector<int64_t>(words, end);
  };
  using V = std::vector<int64_t>;
  KernelParam rows{"x", ParamRole::Input, ParamKind::Rows, DType::bf16, 64, 0};
  EXPECT_EQ(packed(rows, {buf, DType::bf16, {2, 3, 64}}),
            (V{ptr, ptr, 0, 6, 64, 64, 1}));
  KernelParam scalars{
      "r", ParamRole::Output, ParamKind::RowScalars, DType::f32, 0, 0};
  EXPECT_EQ(packed(scalars, {buf, DType::f32, {2, 3}}), (V{ptr, ptr, 0, 6, 1}));
  KernelParam feature{
      "w", ParamRole::Input, ParamKind::Feature, DType::bf16, 64, 0};
  EXPECT_EQ(packed(feature, {buf, DType::bf16, {64}}), (V{ptr, ptr, 0, 64, 1}));
  KernelParam scalar{"l", ParamRole::Output, ParamKind::Scalar, DType::f32, 0,
                     0};
  EXPECT_EQ(packed(scalar, {buf, DType::f32, {}}), (V{ptr, ptr, 0}));
  KernelParam partials{
      "p", ParamRole::Workspace, ParamKind::Partials, DType::f32, 64, 0};
  EXPECT_EQ(packed(partials, {buf, DType::f32, {3, 64}}),
            (V{ptr, ptr, 0, 3, 64, 64, 1}));
  KernelParam matrix{"m", ParamRole::Input, ParamKind::Matrix, DType::bf16, 64,
                     32};
  EXPECT_EQ(packed(matrix, {buf, DType::bf16, {32, 64}}),
            (V{ptr, ptr, 0, 32, 64, 64, 1}));
  KernelParam heads{"q", ParamRole::Input, ParamKind::Heads, DType::bf16, 16,
                    4};
  EXPECT_EQ(packed(heads, {buf, DType::bf16, {2, 4, 5, 16}}),
            (V{ptr, ptr, 0, 2, 4, 5, 16, 320, 80, 16, 1}));
  KernelParam tables{"c", ParamRole::Input, ParamKind::Tables, DType::bf16, 16,
                     0};
  EXPECT_EQ(packed(tables, {buf, DType::bf16, {1, 5, 16}}),
            (V{ptr, ptr, 0, 1, 5, 16, 80, 16, 1}));
  KernelParam lse{
      "lse", ParamRole::Output, ParamKind::HeadScalars, DType::f32, 0, 4};
  EXPECT_EQ(packed(lse, {buf, DType::f32, {2, 4, 5}}),
            (V{ptr, ptr, 0, 2, 4, 5, 20, 5, 1}));
  KernelParam acc{"dq", ParamRole::Workspace, ParamKind::Heads, DType::f32, 16,
                  4};
  EXPECT_EQ(packed(acc, {buf, DType::f32, {2, 4, 5, 16}}),
            (V{ptr, ptr, 0, 2, 4, 5, 16, 320, 80, 16, 1}));
  EXPECT_EQ(memrefSizes(matrix, {buf, DType::bf16, {32, 64}}, dims),
            (Shape{32, 64}));
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
