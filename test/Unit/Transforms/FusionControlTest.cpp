//===- FusionControlTest.cpp - the policy callback of fusion patterns -----===//
//
// A framework embedding liger populates the fusion patterns itself with its
// own ControlFusionFn. These tests check that the callback sees the
// candidate (pass, kind, ops), that a refusal leaves the IR alone and is
// reported, and that an acceptance forms the group.
//
//===----------------------------------------------------------------------===//

#include "liger/Transforms/Fusion.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/IR/Verifier.h"
#include "mlir/Parser/Parser.h"
#include "mlir/Transforms/GreedyPatternRewriteDriver.h"

#include <gtest/gtest.h>

using namespace mlir;
using namespace mlir::liger;

namespace {

constexpr const char *kMLP = R"mlir(
func.func @mlp(%x: tensor<?x64xf32>, %wg: tensor<96x64xf32>, %wu: tensor<96x64xf32>) -> tensor<?x96xf32> {
  %g = liger.linear %x, %wg : tensor<?x64xf32>, tensor<96x64xf32>
  %u = liger.linear %x, %wu : tensor<?x64xf32>, tensor<96x64xf32>
  %h = liger.swiglu %g, %u : tensor<?x96xf32>
  return %h : tensor<?x96xf32>
}
)mlir";

class FusionControlTest : public ::testing::Test {
protected:
  FusionControlTest() {
    context.loadDialect<LigerDialect, func::FuncDialect, tensor::TensorDialect,
                        linalg::LinalgDialect>();
    module = parseSourceString<ModuleOp>(kMLP, &context);
  }

  /// Runs the gated-MLP patterns with `control`; returns the groups formed.
  int runWith(ControlFusionFn control, FusionReport &report) {
    FusionOptions options;
    options.control = std::move(control);
    options.report = &report;
    RewritePatternSet patterns(&context);
    populateFuseGatedMLPPatterns(patterns, options);
    EXPECT_TRUE(succeeded(applyPatternsGreedily(*module, std::move(patterns))));
    EXPECT_TRUE(succeeded(verify(*module)));
    int groups = 0;
    module->walk([&](FusionOp) { ++groups; });
    return groups;
  }

  MLIRContext context;
  OwningOpRef<ModuleOp> module;
};

TEST_F(FusionControlTest, CallbackSeesTheCandidate) {
  ASSERT_TRUE(module);
  std::vector<std::string> seen;
  FusionKind kind = FusionKind::rowwise;
  StringRef pass;
  FusionReport report;
  int groups = runWith(
      [&](const FusionCandidate &candidate) {
        pass = candidate.pass;
        kind = candidate.kind;
        for (Operation *op : candidate.ops)
          seen.push_back(op->getName().getStringRef().str());
        return true;
      },
      report);
  EXPECT_EQ(groups, 1);
  EXPECT_EQ(pass, "liger-fuse-gated-mlp");
  EXPECT_EQ(kind, FusionKind::matmul);
  EXPECT_EQ(seen, (std::vector<std::string>{"liger.linear", "liger.linear",
                                            "liger.swiglu"}));
  EXPECT_EQ(report.getNumFused(), 1);
}

TEST_F(FusionControlTest, RefusalLeavesTheIRAndIsReported) {
  ASSERT_TRUE(module);
  FusionReport report;
  int groups = runWith([](const FusionCandidate &) { return false; }, report);
  EXPECT_EQ(groups, 0);
  EXPECT_EQ(report.getNumFused(), 0);
  std::string text;
  llvm::raw_string_ostream os(text);
  report.print(os);
  EXPECT_NE(text.find("[liger-fuse-gated-mlp] left alone liger.swiglu"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("refused by the policy"), std::string::npos) << text;
  int linears = 0;
  module->walk([&](LinearOp) { ++linears; });
  EXPECT_EQ(linears, 2);
}

TEST_F(FusionControlTest, NoCallbackFusesEveryLegalCandidate) {
  ASSERT_TRUE(module);
  FusionReport report;
  EXPECT_EQ(runWith(nullptr, report), 1);
}

} // namespace
