//===- FuseCrossEntropyGrad.cpp - a loss and its gradient in one kernel ---===//
//
// liger-fuse-cross-entropy-grad: a liger.cross_entropy and the
// liger.cross_entropy_grad of the same loss (the same logits, targets,
// class weights and attributes) become one rowwise group, so that the GPU
// kernel computes the loss and writes the gradient in one pass over the
// rows: the logits are read from memory once instead of three times.
//
//===----------------------------------------------------------------------===//

#include "liger/Transforms/Fusion.h"
#include "liger/Transforms/Passes.h"

namespace mlir::liger {
#define GEN_PASS_DEF_FUSECROSSENTROPYGRADPASS
#include "liger/Transforms/Passes.h.inc"
} // namespace mlir::liger

using namespace mlir;
using namespace mlir::liger;

namespace {
constexpr StringLiteral kPass = "liger-fuse-cross-entropy-grad";

struct FuseCrossEntropyGrad : OpRewritePattern<CrossEntropyGradOp> {
  FuseCrossEntropyGrad(MLIRContext *ctx, const FusionOptions &options)
      : OpRewritePattern(ctx), options(options) {}

  LogicalResult matchAndRewrite(CrossEntropyGradOp grad,
                                PatternRewriter &rewriter) const override {
    if (isInFusionGroup(grad))
      return failure();
    // The loss on the same logits, before the gradient in its block.
    CrossEntropyOp loss;
    for (Operation *user : grad.getLogits().getUsers())
      if (auto ce = dyn_cast<CrossEntropyOp>(user);
          ce && ce->getBlock() == grad->getBlock() &&
          ce->isBeforeInBlock(grad) && !isInFusionGroup(ce))
        loss = ce;
    if (!loss)
      return failure(); // a gradient alone: nothing to fuse, nothing to say
    if (loss.getTarget() != grad.getTarget())
      return leaveAlone(options, kPass, grad,
                        "the loss on these logits reads other targets");
    if (loss.getWeight() != grad.getWeight())
      return leaveAlone(options, kPass, grad,
                        "the loss on these logits has other class weights");
    if (StringRef attr = differingLossAttribute(loss, grad); !attr.empty())
      return leaveAlone(options, kPass, grad,
                        "the loss on these logits has another " + attr);
    // One pass over the rows computes the loss and the gradient together:
    // a gradient scaled by the loss itself waits for the whole loss.
    if (llvm::any_of(grad->getOperands(), [&](Value v) {
          return v.getDefiningOp() == loss.getOperation();
        }))
      return leaveAlone(options, kPass, grad,
                        "the gradient reads a result of the loss");
    for (Value result : loss->getResults())
      if (result.use_empty())
        return leaveAlone(options, kPass, grad,
                          "a result of the loss is not read (the kernel "
                          "writes every result)");
    // The loss's results are the group's own results, not extras.
    FusionCandidate candidate{kPass, FusionKind::rowwise, {loss, grad}, {}};
    return success(succeeded(tryFuse(rewriter, grad, candidate, options)));
  }

  FusionOptions options;
};

struct FuseCrossEntropyGradPass
    : liger::impl::FuseCrossEntropyGradPassBase<FuseCrossEntropyGradPass> {
  using Base::Base;
  void runOnOperation() override {
    numGroups += runFusionPatterns(
        getOperation(), report, allowExtraOutputs,
        [](RewritePatternSet &patterns, const FusionOptions &options) {
          populateFuseCrossEntropyGradPatterns(patterns, options);
        });
  }
};
} // namespace

void mlir::liger::populateFuseCrossEntropyGradPatterns(
    RewritePatternSet &patterns, const FusionOptions &options) {
  patterns.add<FuseCrossEntropyGrad>(patterns.getContext(), options);
}
