//===- LigerCanonicalize.cpp - canonicalization patterns of liger ops -----===//
//
// Canonicalizations of the liger dialect:
//  - an optional statistics result nobody reads is not computed
//    (rms_norm/add_rms_norm `rstd`, cross-entropy `z_loss`, attention
//    `lse`; the z-loss term stays in the loss, only its separate result
//    goes);
//  - a LoRA projection with scale 0 is a plain linear projection.
//
//===----------------------------------------------------------------------===//

#include "liger/Dialect/Liger/IR/LigerOps.h"

#include "mlir/IR/PatternMatch.h"

using namespace mlir;
using namespace mlir::liger;

namespace {

/// Rebuilds `OpTy` without its trailing optional result when that result
/// exists (its unit attribute `flag` is set) but has no uses. The op's result
/// types are re-inferred from the operands and the updated properties.
/// `getResult` is the optional result's getter, `setFlag` the setter of the
/// unit attribute that requests it.
template <typename OpTy, auto getResult, auto setFlag>
struct DropUnusedOptionalResult : OpRewritePattern<OpTy> {
  using OpRewritePattern<OpTy>::OpRewritePattern;

  LogicalResult matchAndRewrite(OpTy op,
                                PatternRewriter &rewriter) const override {
    Value optional = (op.*getResult)();
    if (!optional || !optional.use_empty())
      return rewriter.notifyMatchFailure(op, "optional result absent or used");
    typename OpTy::Properties props = op.getProperties();
    (props.*setFlag)(UnitAttr());
    SmallVector<NamedAttribute> discardable =
        llvm::to_vector(op->getDiscardableAttrs());
    auto replacement = OpTy::create(rewriter, op.getLoc(), op->getOperands(),
                                    props, discardable);
    SmallVector<Value> values(replacement->getResults());
    values.push_back(Value());
    rewriter.replaceOp(op, values);
    return success();
  }
};

/// lora_linear with scale == 0 computes x · Wᵀ + bias.
struct LoRAWithZeroScaleToLinear : OpRewritePattern<LoRALinearOp> {
  using OpRewritePattern::OpRewritePattern;

  LogicalResult matchAndRewrite(LoRALinearOp op,
                                PatternRewriter &rewriter) const override {
    if (!op.getScale().isZero())
      return rewriter.notifyMatchFailure(op, "scale is not zero");
    rewriter.replaceOpWithNewOp<LinearOp>(op, op.getInput(), op.getWeight(),
                                          op.getBias());
    return success();
  }
};

} // namespace

void RMSNormOp::getCanonicalizationPatterns(RewritePatternSet &patterns,
                                            MLIRContext *context) {
  patterns.add<DropUnusedOptionalResult<RMSNormOp, &RMSNormOp::getRstd,
                                        &Properties::setWithRstd>>(context);
}

void AddRMSNormOp::getCanonicalizationPatterns(RewritePatternSet &patterns,
                                               MLIRContext *context) {
  patterns.add<DropUnusedOptionalResult<AddRMSNormOp, &AddRMSNormOp::getRstd,
                                        &Properties::setWithRstd>>(context);
}

void CrossEntropyOp::getCanonicalizationPatterns(RewritePatternSet &patterns,
                                                 MLIRContext *context) {
  patterns.add<DropUnusedOptionalResult<
      CrossEntropyOp, &CrossEntropyOp::getZLoss, &Properties::setReturnZLoss>>(
      context);
}

void FusedLinearCrossEntropyOp::getCanonicalizationPatterns(
    RewritePatternSet &patterns, MLIRContext *context) {
  patterns.add<DropUnusedOptionalResult<FusedLinearCrossEntropyOp,
                                        &FusedLinearCrossEntropyOp::getZLoss,
                                        &Properties::setReturnZLoss>>(context);
}

void AttentionOp::getCanonicalizationPatterns(RewritePatternSet &patterns,
                                              MLIRContext *context) {
  patterns.add<DropUnusedOptionalResult<AttentionOp, &AttentionOp::getLse,
                                        &Properties::setReturnLse>>(context);
}

void LoRALinearOp::getCanonicalizationPatterns(RewritePatternSet &patterns,
                                               MLIRContext *context) {
  patterns.add<LoRAWithZeroScaleToLinear>(context);
}
