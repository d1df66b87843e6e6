//===- FuseLinearCrossEntropy.cpp - lm_head + cross-entropy -> loss group -===//
//
// liger-fuse-linear-cross-entropy: liger.cross_entropy of liger.linear
// logits becomes liger.fused_linear_cross_entropy in a loss group, so the
// [tokens, vocab] logits are never stored.
//
//===----------------------------------------------------------------------===//

#include "liger/Transforms/Fusion.h"
#include "liger/Transforms/Passes.h"

namespace mlir::liger {
#define GEN_PASS_DEF_FUSELINEARCROSSENTROPYPASS
#include "liger/Transforms/Passes.h.inc"
} // namespace mlir::liger

using namespace mlir;
using namespace mlir::liger;

namespace {
constexpr StringLiteral kPass = "liger-fuse-linear-cross-entropy";

struct FuseLinearIntoCrossEntropy : OpRewritePattern<CrossEntropyOp> {
  FuseLinearIntoCrossEntropy(MLIRContext *ctx, const FusionOptions &options)
      : OpRewritePattern(ctx), options(options) {}

  LogicalResult matchAndRewrite(CrossEntropyOp ce,
                                PatternRewriter &rewriter) const override {
    if (isInFusionGroup(ce))
      return failure();
    auto linear = ce.getLogits().getDefiningOp<LinearOp>();
    if (!linear || isInFusionGroup(linear))
      return failure();
    for (Operation *user : linear->getUsers())
      if (user != ce.getOperation())
        return leaveAlone(options, kPass, ce,
                          "the logits are also read by '" +
                              user->getName().getStringRef() +
                              "', so they would be stored anyway");
    if (linear->getBlock() != ce->getBlock())
      return leaveAlone(options, kPass, ce,
                        "the projection is in another block");
    FusionCandidate candidate{kPass, FusionKind::loss, {linear, ce}, {}};
    if (options.control && !options.control(candidate))
      return leaveAlone(options, kPass, ce, "refused by the policy");
    std::string what = describeOps(candidate.ops);

    rewriter.setInsertionPoint(ce);
    FusedLinearCrossEntropyOp::Properties props;
    props.ignore_index = ce.getIgnoreIndexAttr();
    props.label_smoothing = ce.getLabelSmoothingAttr();
    props.reduction = ce.getReductionAttr();
    props.softcap = ce.getSoftcapAttr();
    props.lse_square_scale = ce.getLseSquareScaleAttr();
    props.return_z_loss = ce.getReturnZLossAttr();
    SmallVector<Value> operands = {linear.getInput(), linear.getWeight(),
                                   ce.getTarget()};
    if (Value bias = linear.getBias())
      operands.push_back(bias);
    if (Value classWeight = ce.getWeight())
      operands.push_back(classWeight);
    props.operandSegmentSizes = {1, 1, 1, linear.getBias() ? 1 : 0,
                                 ce.getWeight() ? 1 : 0};
    auto fused = FusedLinearCrossEntropyOp::create(rewriter, ce.getLoc(),
                                                   operands, props, {});
    rewriter.replaceOp(ce, fused->getResults());
    rewriter.eraseOp(linear);
    commitFusion(rewriter, {kPass, FusionKind::loss, {fused}, {}}, what,
                 options);
    return success();
  }

  FusionOptions options;
};

/// A fused_linear_cross_entropy written as such still needs its group.
struct WrapFusedLinearCrossEntropy
    : OpRewritePattern<FusedLinearCrossEntropyOp> {
  WrapFusedLinearCrossEntropy(MLIRContext *ctx, const FusionOptions &options)
      : OpRewritePattern(ctx), options(options) {}

  LogicalResult matchAndRewrite(FusedLinearCrossEntropyOp loss,
                                PatternRewriter &rewriter) const override {
    if (isInFusionGroup(loss))
      return failure();
    FusionCandidate candidate{kPass, FusionKind::loss, {loss}, {}};
    return success(succeeded(tryFuse(rewriter, loss, candidate, options)));
  }

  FusionOptions options;
};

/// The lm_head's backward joins the loss group of its forward: one plan
/// computes the loss and the gradients (the logits recomputed or kept per
/// chunk, never whole).
struct FuseLossGradIntoLossGroup : OpRewritePattern<FusedLinearCrossEntropyGradOp> {
  FuseLossGradIntoLossGroup(MLIRContext *ctx, const FusionOptions &options)
      : OpRewritePattern(ctx), options(options) {}

  LogicalResult matchAndRewrite(FusedLinearCrossEntropyGradOp grad,
                                PatternRewriter &rewriter) const override {
    if (isInFusionGroup(grad))
      return failure();
    // The loss group in this block whose forward reads the same operands.
    FusionOp group;
    FusedLinearCrossEntropyOp loss;
    for (Operation &op : *grad->getBlock()) {
      if (&op == grad.getOperation())
        break;
      auto candidate = dyn_cast<FusionOp>(op);
      if (!candidate || candidate.getKind() != FusionKind::loss)
        continue;
      for (auto flce : candidate.getBody().getOps<FusedLinearCrossEntropyOp>())
        if (valueOutsideGroups(flce.getHidden()) == grad.getHidden() &&
            valueOutsideGroups(flce.getWeight()) == grad.getWeight()) {
          group = candidate;
          loss = flce;
        }
    }
    if (!group)
      return failure(); // a backward alone: nothing to join, nothing to say
    if (llvm::any_of(group.getBody().getOps(), [](Operation &op) {
          return isa<FusedLinearCrossEntropyGradOp>(op);
        }))
      return leaveAlone(options, kPass, grad,
                        "the loss group of this lm_head has its backward "
                        "already");
    if (valueOutsideGroups(loss.getTarget()) != grad.getTarget())
      return leaveAlone(options, kPass, grad,
                        "the loss of this lm_head reads other targets");
    Value lossBias = loss.getBias() ? valueOutsideGroups(loss.getBias()) : Value();
    if (lossBias != grad.getBias())
      return leaveAlone(options, kPass, grad,
                        "the loss of this lm_head has another bias");
    Value lossWeights = loss.getClassWeight()
                            ? valueOutsideGroups(loss.getClassWeight())
                            : Value();
    if (lossWeights != grad.getClassWeight())
      return leaveAlone(options, kPass, grad,
                        "the loss of this lm_head has other class weights");
    if (StringRef attr = differingLossAttribute(loss, grad); !attr.empty())
      return leaveAlone(options, kPass, grad,
                        "the loss of this lm_head has another " + attr);
    FusionCandidate candidate{kPass, FusionKind::loss, {group, grad}, {}};
    return success(succeeded(tryFuse(rewriter, grad, candidate, options)));
  }

  FusionOptions options;
};

struct FuseLinearCrossEntropyPass
    : liger::impl::FuseLinearCrossEntropyPassBase<FuseLinearCrossEntropyPass> {
  using Base::Base;
  void runOnOperation() override {
    numGroups += runFusionPatterns(
        getOperation(), report, allowExtraOutputs,
        [](RewritePatternSet &patterns, const FusionOptions &options) {
          populateFuseLinearCrossEntropyPatterns(patterns, options);
        });
  }
};
} // namespace

void mlir::liger::populateFuseLinearCrossEntropyPatterns(
    RewritePatternSet &patterns, const FusionOptions &options) {
  patterns.add<FuseLinearIntoCrossEntropy, WrapFusedLinearCrossEntropy,
               FuseLossGradIntoLossGroup>(patterns.getContext(), options);
}
