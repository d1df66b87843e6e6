//===- CompileTest.cpp - liger::compile through libliger_compiler.so ------===//
//
// The compiler as a program links it (liger/Pipelines/Compile.h, the
// installed liger::compiler): a module compiles to a bundle that the runtime
// opens, each stage stops where asked, and bad input (a parse error, a
// verifier error, an unknown target, options that do not go together,
// nothing to compile, no bundle directory) comes back as an error naming
// it, with its location where it has one.
//
//===----------------------------------------------------------------------===//

#include "liger/Pipelines/Compile.h"
#include "liger/Runtime/liger_runtime.h"

#include <cstdlib>
#include <filesystem>
#include <gtest/gtest.h>
#include <string>
#include <unistd.h>
#include <vector>

namespace {

/// Two rowwise kernels (add + RMSNorm, SiLU * mul) and a projection, which
/// the matmul templates compile (by default).
const char *const kLayer = R"mlir(
func.func @layer(%h: tensor<?x256xbf16>, %res: tensor<?x256xbf16>, %g: tensor<256xbf16>,
                 %w: tensor<256x256xbf16>, %a: tensor<?x256xbf16>, %b: tensor<?x256xbf16>)
    -> (tensor<?x256xbf16>, tensor<?x256xbf16>, tensor<?x256xbf16>) {
  %s = liger.add %h, %res : tensor<?x256xbf16>
  %n = liger.rms_norm %s, %g eps = 1.0e-5 : tensor<?x256xbf16>, tensor<256xbf16>
  %p = liger.linear %n, %w : tensor<?x256xbf16>, tensor<256x256xbf16>
  %t = liger.silu %a : tensor<?x256xbf16>
  %m = liger.mul %t, %b : tensor<?x256xbf16>
  return %p, %s, %m : tensor<?x256xbf16>, tensor<?x256xbf16>, tensor<?x256xbf16>
}
)mlir";

bool havePtxas() {
  const char *home = std::getenv("CUDA_HOME");
  std::string toolkit = home && *home ? home : "/usr/local/cuda";
  return access((toolkit + "/bin/ptxas").c_str(), X_OK) == 0;
}

class CompileTest : public ::testing::Test {
protected:
  void SetUp() override {
    std::string pattern = "/tmp/liger-compile-test-XXXXXX";
    ASSERT_NE(mkdtemp(pattern.data()), nullptr);
    dir = pattern;
    options.sourceName = "layer.mlir";
  }
  void TearDown() override {
    std::error_code ignored;
    std::filesystem::remove_all(dir, ignored);
  }
  /// compile() of `text`, which must fail: its error.
  std::string refused(const std::string &text) {
    std::string error;
    EXPECT_FALSE(liger::compile(text, options, dir + "/out.bundle", result,
                                error));
    EXPECT_FALSE(std::filesystem::exists(dir + "/out.bundle"));
    return error;
  }
  std::string dir;
  liger::CompileOptions options;
  liger::CompileResult result;
};

TEST_F(CompileTest, CompilesABundleTheRuntimeOpens) {
  if (!havePtxas())
    GTEST_SKIP() << "no ptxas in $CUDA_HOME/bin or /usr/local/cuda/bin";
  std::string error, bundle = dir + "/layer.bundle";
  ASSERT_TRUE(liger::compile(kLayer, options, bundle, result, error)) << error;
  EXPECT_EQ(error, "");
  EXPECT_EQ(result.numKernels, 3);
  EXPECT_EQ(result.numPlannedLossGroups, 0);
  EXPECT_EQ(result.notCompiled, "");
  EXPECT_TRUE(std::filesystem::exists(bundle + "/liger_kernels.sm_90a.cubin"));

  liger_bundle *handle = nullptr;
  ASSERT_EQ(liger_bundle_open(bundle.c_str(), &handle), LIGER_OK)
      << liger_last_error();
  ASSERT_EQ(liger_bundle_kernel_count(handle), 3);
  std::vector<std::string> kernels;
  for (int32_t k = 0; k < 3; ++k) {
    liger_kernel_info info;
    ASSERT_EQ(liger_bundle_kernel_info(handle, k, &info), LIGER_OK);
    EXPECT_STREQ(info.arch, "sm_90a");
    kernels.push_back(std::string(info.name) + ": " + info.ops);
  }
  liger_bundle_close(handle);
  EXPECT_EQ(kernels, (std::vector<std::string>{
                         "layer_rowwise_0: liger.add_rms_norm",
                         "layer_matmul_1: liger.linear",
                         "layer_rowwise_2: liger.silu, liger.mul"}));
}

TEST_F(CompileTest, EachTargetHasItsOwnCubin) {
  if (!havePtxas())
    GTEST_SKIP() << "no ptxas in $CUDA_HOME/bin or /usr/local/cuda/bin";
  options.target = "sm_80";
  std::string error, bundle = dir + "/layer.bundle";
  ASSERT_TRUE(liger::compile(kLayer, options, bundle, result, error)) << error;
  EXPECT_TRUE(std::filesystem::exists(bundle + "/liger_kernels.sm_80.cubin"));
  EXPECT_FALSE(std::filesystem::exists(bundle + "/liger_kernels.sm_90a.cubin"));
}

TEST_F(CompileTest, StopsAfterTheStageAsked) {
  std::string error;
  options.stopAfter = liger::CompileStage::Fused;
  ASSERT_TRUE(liger::compile(kLayer, options, "", result, error)) << error;
  EXPECT_NE(result.output.find("liger.fusion rowwise"), std::string::npos)
      << result.output;
  EXPECT_EQ(result.output.find("gpu.module"), std::string::npos);
  options.stopAfter = liger::CompileStage::Gpu;
  ASSERT_TRUE(liger::compile(kLayer, options, "", result, error)) << error;
  EXPECT_NE(result.output.find("gpu.module @liger_kernels"), std::string::npos);
}

TEST_F(CompileTest, AParseErrorNamesItsLocation) {
  EXPECT_EQ(refused("func.func @f(%x: tensor<?x8xbf16>) {\n  liger.frobnicate\n}\n"),
            "layer.mlir:2:3: error: custom op 'liger.frobnicate' is unknown\n"
            "  liger.frobnicate\n"
            "  ^\n");
}

TEST_F(CompileTest, AVerifierErrorNamesTheRule) {
  std::string error = refused(
      "func.func @f(%x: tensor<?x256xbf16>, %w: tensor<128xbf16>) -> "
      "tensor<?x256xbf16> {\n"
      "  %y = liger.rms_norm %x, %w eps = 1.0e-5 : tensor<?x256xbf16>, "
      "tensor<128xbf16>\n"
      "  return %y : tensor<?x256xbf16>\n"
      "}\n");
  EXPECT_EQ(error.substr(0, error.find('\n')),
            "layer.mlir:2:8: error: 'liger.rms_norm' op expects 'weight' to "
            "have shape [256] (the hidden size of 'input'), got "
            "'tensor<128xbf16>'");
}

TEST_F(CompileTest, DiagnosticsGoToTheHandlerAsTheyCome) {
  std::vector<std::string> diagnostics;
  options.diagnosticHandler = [&](const std::string &diagnostic) {
    diagnostics.push_back(diagnostic);
  };
  EXPECT_EQ(refused("func.func @f(%x: tensor<?x8xbf16>) {\n  liger.frobnicate\n}\n"),
            "");
  ASSERT_EQ(diagnostics.size(), 1u);
  EXPECT_EQ(diagnostics[0].substr(0, diagnostics[0].find('\n')),
            "layer.mlir:2:3: error: custom op 'liger.frobnicate' is unknown");
}

TEST_F(CompileTest, AnUnknownTargetIsRefusedWithTheTargets) {
  options.target = "sm_70";
  EXPECT_EQ(refused(kLayer),
            "unsupported GPU target 'sm_70' (supported: sm_80, sm_86, sm_90a)");
}

TEST_F(CompileTest, LossOptionsTakeTheMatmulKernels) {
  EXPECT_TRUE(options.matmulKernels); // the default
  options.matmulKernels = false;
  options.lossDwF32 = true;
  EXPECT_EQ(refused(kLayer), "--loss-dw-f32 plans loss groups, which "
                             "--no-matmul-kernels leaves uncompiled");
  options.lossDwF32 = false;
  options.lossMemoryBudget = 1 << 20;
  EXPECT_EQ(refused(kLayer), "--loss-memory-budget plans loss groups, which "
                             "--no-matmul-kernels leaves uncompiled");
  options.matmulKernels = true;
  options.fuse = false;
  EXPECT_EQ(refused(kLayer), "--loss-memory-budget plans loss groups, which "
                             "--no-fuse leaves uncompiled");
  options.fuse = true;
  options.lossMemoryBudget = 0;
  EXPECT_EQ(refused(kLayer), "--loss-memory-budget must be positive, got 0");
}

TEST_F(CompileTest, NothingToCompileSaysWhatWaits) {
  options.matmulKernels = false; // --no-matmul-kernels
  EXPECT_EQ(refused("func.func @f(%x: tensor<?x256xbf16>, %w: "
                    "tensor<512x256xbf16>) -> tensor<?x512xbf16> {\n"
                    "  %y = liger.linear %x, %w : tensor<?x256xbf16>, "
                    "tensor<512x256xbf16>\n"
                    "  return %y : tensor<?x512xbf16>\n"
                    "}\n"),
            "no kernel to compile in layer.mlir (left out by "
            "--no-matmul-kernels: 1 liger.linear)");
}

TEST_F(CompileTest, ABundleNeedsADirectory) {
  std::string error;
  EXPECT_FALSE(liger::compile(kLayer, options, "", result, error));
  EXPECT_EQ(error, "no bundle directory to write the bundle into");
}

} // namespace
