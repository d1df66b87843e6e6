//===- InferTypesTest.cpp - builders infer liger result types -------------===//
//
// A frontend builds liger ops without spelling result types; these tests
// build ops through the generated builders and check the inferred types,
// including attributes left at their ODS defaults, and that the shared rules
// of Verification.cpp answer "invalid" quietly when given no location.
//
//===----------------------------------------------------------------------===//

#include "liger/Dialect/Liger/IR/LigerOps.h"
#include "liger/Dialect/Liger/IR/Verification.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/IR/Verifier.h"

#include <gtest/gtest.h>

using namespace mlir;
using namespace mlir::liger;

namespace {

class InferTypesTest : public ::testing::Test {
protected:
  InferTypesTest() : builder(&context) {
    context.loadDialect<LigerDialect>();
    module = ModuleOp::create(builder.getUnknownLoc());
    builder.setInsertionPointToStart(module->getBody());
  }

  ~InferTypesTest() override {
    // The ops use argBlock's arguments: erase them before the block goes.
    module->getBody()->clear();
  }

  /// A value of `type`: an argument of a block that owns nothing else.
  Value arg(Type type) {
    return argBlock.addArgument(type, builder.getUnknownLoc());
  }

  RankedTensorType tensor(ArrayRef<int64_t> shape, Type element) {
    return RankedTensorType::get(shape, element);
  }

  MLIRContext context;
  OpBuilder builder;
  Block argBlock;
  OwningOpRef<ModuleOp> module;
  static constexpr int64_t kDyn = ShapedType::kDynamic;
};

TEST_F(InferTypesTest, LinearResultReplacesTheLastDimension) {
  Type bf16 = builder.getBF16Type();
  Value x = arg(tensor({kDyn, 7, 4096}, bf16));
  Value w = arg(tensor({1024, 4096}, bf16));
  auto op = LinearOp::create(builder, builder.getUnknownLoc(), x, w, Value());
  EXPECT_EQ(op.getType(), tensor({kDyn, 7, 1024}, bf16));
  EXPECT_TRUE(succeeded(verify(op)));
}

TEST_F(InferTypesTest, RMSNormWithRstdHasTwoResults) {
  Type bf16 = builder.getBF16Type();
  Value x = arg(tensor({kDyn, 4096}, bf16));
  Value w = arg(tensor({4096}, builder.getF32Type()));
  auto op = RMSNormOp::create(builder, builder.getUnknownLoc(), x, w,
                              APFloat(1e-5f), APFloat(0.0f), CastingMode::gemma,
                              /*with_rstd=*/true);
  ASSERT_EQ(op->getNumResults(), 2u);
  EXPECT_EQ(op.getResult().getType(), x.getType());
  EXPECT_EQ(op.getRstd().getType(), tensor({kDyn}, builder.getF32Type()));
}

// Built from operands alone, the op's default-valued attributes (reduction
// = mean) are not in its properties yet when types are inferred.
TEST_F(InferTypesTest, CrossEntropyFromOperandsUsesTheDefaultReduction) {
  Value logits = arg(tensor({kDyn, 32000}, builder.getF32Type()));
  Value target = arg(tensor({kDyn}, builder.getI64Type()));
  auto op = CrossEntropyOp::create(builder, builder.getUnknownLoc(),
                                   ValueRange{logits, target});
  EXPECT_EQ(op.getLoss().getType(), tensor({}, builder.getF32Type()));
  EXPECT_EQ(op.getReduction(), Reduction::mean);
  EXPECT_TRUE(succeeded(verify(op)));
}

TEST_F(InferTypesTest, AttentionTakesValueHeadDimension) {
  Type f16 = builder.getF16Type();
  auto op = AttentionOp::create(
      builder, builder.getUnknownLoc(), arg(tensor({2, 8, kDyn, 64}, f16)),
      arg(tensor({2, 2, 100, 64}, f16)), arg(tensor({2, 2, 100, 32}, f16)),
      /*causal=*/builder.getUnitAttr(), /*window=*/IntegerAttr(),
      /*softcap=*/FloatAttr(), /*scale=*/FloatAttr(),
      /*return_lse=*/UnitAttr());
  ASSERT_EQ(op->getNumResults(), 1u);
  EXPECT_EQ(op.getResult().getType(), tensor({2, 8, kDyn, 32}, f16));
  EXPECT_FALSE(op.getLse());
}

// return_lse adds the f32 log-sum-exp of each query row: [B, Hq, T] of q,
// its dynamic sizes kept.
TEST_F(InferTypesTest, AttentionReturnLseAddsQueryRowStatistics) {
  Type bf16 = builder.getBF16Type();
  auto op = AttentionOp::create(
      builder, builder.getUnknownLoc(), arg(tensor({kDyn, 8, kDyn, 64}, bf16)),
      arg(tensor({kDyn, 2, 100, 64}, bf16)),
      arg(tensor({kDyn, 2, 100, 32}, bf16)), /*causal=*/UnitAttr(),
      /*window=*/IntegerAttr(), /*softcap=*/FloatAttr(), /*scale=*/FloatAttr(),
      /*return_lse=*/builder.getUnitAttr());
  ASSERT_EQ(op->getNumResults(), 2u);
  EXPECT_EQ(op.getResult().getType(), tensor({kDyn, 8, kDyn, 32}, bf16));
  EXPECT_EQ(op.getLse().getType(),
            tensor({kDyn, 8, kDyn}, builder.getF32Type()));
  EXPECT_TRUE(succeeded(verify(op)));
}

// The rules answer without emitting anything when given no location, as a
// fusion matcher asking "would this be valid?" needs.
TEST_F(InferTypesTest, RulesFailQuietlyWithoutALocation) {
  int emitted = 0;
  ScopedDiagnosticHandler handler(&context, [&](Diagnostic &) {
    ++emitted;
    return success();
  });
  Type f32 = builder.getF32Type();
  RuleContext quiet(std::nullopt, LinearOp::getOperationName());
  EXPECT_TRUE(
      failed(inferLinearType(quiet, tensor({4, 64}, f32), tensor({32, 48}, f32),
                             Type(), Type(), Type())));
  EXPECT_EQ(emitted, 0);

  RuleContext loud(builder.getUnknownLoc(), LinearOp::getOperationName());
  EXPECT_TRUE(
      failed(inferLinearType(loud, tensor({4, 64}, f32), tensor({32, 48}, f32),
                             Type(), Type(), Type())));
  EXPECT_EQ(emitted, 1);
}

} // namespace
