//===- LowerToLinalg.cpp - the liger-lower-to-linalg pass -----------------===//
//
// Assembles the liger-to-linalg patterns and applies them with every liger
// op illegal. The patterns live in one file per op family.
//
//===----------------------------------------------------------------------===//

#include "liger/Conversion/LigerToLinalg/LigerToLinalg.h"
#include "liger/Conversion/Passes.h"
#include "liger/Dialect/Liger/IR/LigerOps.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/Transforms/DialectConversion.h"

#include "llvm/ADT/DenseSet.h"

namespace mlir::liger {
#define GEN_PASS_DEF_LOWERTOLINALGPASS
#include "liger/Conversion/Passes.h.inc"
} // namespace mlir::liger

using namespace mlir;
using namespace mlir::liger;

namespace {
/// A fusion group means its body: inline it (its ops are lowered in turn).
struct InlineFusionGroup : OpConversionPattern<FusionOp> {
  using OpConversionPattern::OpConversionPattern;
  LogicalResult
  matchAndRewrite(FusionOp op, OpAdaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    YieldOp yield = op.getYield();
    SmallVector<Value> results(yield.getValues());
    rewriter.inlineBlockBefore(&op.getBody().front(), op, adaptor.getInputs());
    rewriter.eraseOp(yield);
    rewriter.replaceOp(op, results);
    return success();
  }
};
} // namespace

void mlir::liger::populateLowerToLinalgPatterns(RewritePatternSet &patterns) {
  patterns.add<InlineFusionGroup>(patterns.getContext());
  populateLowerNormsToLinalgPatterns(patterns);
  populateLowerElementwiseToLinalgPatterns(patterns);
  populateLowerProjectionsToLinalgPatterns(patterns);
  populateLowerLossesToLinalgPatterns(patterns);
}

namespace {
struct LowerToLinalgPass
    : liger::impl::LowerToLinalgPassBase<LowerToLinalgPass> {
  void runOnOperation() override {
    MLIRContext *ctx = &getContext();
    RewritePatternSet patterns(ctx);
    populateLowerToLinalgPatterns(patterns);

    // Name every liger op without a pattern up front, rather than leaving
    // it to the driver's generic "failed to legalize".
    llvm::DenseSet<OperationName> lowered;
    for (const std::unique_ptr<RewritePattern> &pattern :
         patterns.getNativePatterns())
      if (std::optional<OperationName> root = pattern->getRootKind())
        lowered.insert(*root);
    // liger.yield goes with its group.
    lowered.insert(OperationName(YieldOp::getOperationName(), ctx));
    auto *dialect = ctx->getLoadedDialect<LigerDialect>();
    int64_t count = 0;
    WalkResult walk = getOperation()->walk([&](Operation *op) {
      if (op->getDialect() != dialect)
        return WalkResult::advance();
      if (!lowered.contains(op->getName())) {
        op->emitOpError("has no lowering to linalg (the CPU reference path) "
                        "yet");
        return WalkResult::interrupt();
      }
      ++count;
      return WalkResult::advance();
    });
    if (walk.wasInterrupted())
      return signalPassFailure();

    ConversionTarget target(*ctx);
    target.addIllegalDialect<LigerDialect>();
    target.addLegalDialect<arith::ArithDialect, linalg::LinalgDialect,
                           math::MathDialect, tensor::TensorDialect>();
    target.markUnknownOpDynamicallyLegal([](Operation *) { return true; });
    if (failed(applyPartialConversion(getOperation(), target,
                                      std::move(patterns))))
      return signalPassFailure();
    numLoweredOps += count;
  }
};
} // namespace
