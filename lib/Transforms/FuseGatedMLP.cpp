//===- FuseGatedMLP.cpp - gate/up projections + gated activation ----------===//
//
// liger-fuse-gated-mlp: liger.swiglu (or liger.geglu) of two liger.linear
// projections of one activation becomes one matmul group: one GEMM over the
// concatenated weights with the activation in its epilogue. With
// `gradients`, the backward's liger.swiglu_grad (geglu_grad) of dh = dy ·
// W_down becomes one matmul group too: the down projection's dx GEMM with
// the activation's gradient in its epilogue, writing dgate and dup (dh is
// never stored).
//
//===----------------------------------------------------------------------===//

#include "liger/Transforms/Fusion.h"
#include "liger/Transforms/Passes.h"

#include "mlir/IR/TypeUtilities.h"

namespace mlir::liger {
#define GEN_PASS_DEF_FUSEGATEDMLPPASS
#include "liger/Transforms/Passes.h.inc"
} // namespace mlir::liger

using namespace mlir;
using namespace mlir::liger;

namespace {
constexpr StringLiteral kPass = "liger-fuse-gated-mlp";

template <typename ActivationOp>
struct FuseGatedMLP : OpRewritePattern<ActivationOp> {
  FuseGatedMLP(MLIRContext *ctx, const FusionOptions &options)
      : OpRewritePattern<ActivationOp>(ctx), options(options) {}

  LogicalResult matchAndRewrite(ActivationOp act,
                                PatternRewriter &rewriter) const override {
    if (isInFusionGroup(act))
      return failure();
    auto gate = act.getGate().template getDefiningOp<LinearOp>();
    auto up = act.getUp().template getDefiningOp<LinearOp>();
    if (!gate && !up)
      return failure();
    if (!gate || !up)
      return leaveAlone(options, kPass, act,
                        Twine("its ") + (gate ? "up" : "gate") +
                            " operand is not a liger.linear");
    if (isInFusionGroup(gate) || isInFusionGroup(up))
      return failure();
    if (gate.getInput() != up.getInput())
      return leaveAlone(options, kPass, act,
                        "gate and up project different activations");
    // One projection read as both gate and up (silu(g) * g) is a group of
    // that projection and the activation.
    FusionCandidate candidate{kPass, FusionKind::matmul, {gate, act}, {}};
    if (up != gate)
      candidate.ops.insert(candidate.ops.begin() + 1, up);
    candidate.extraOutputs = getExtraOutputs(candidate.ops, {act.getResult()});
    return success(succeeded(tryFuse(rewriter, act, candidate, options)));
  }

  FusionOptions options;
};

/// dgate, dup = swiglu_grad(dy · W_down, gate, up): the dx product of the
/// down projection with the gradient in its epilogue (gate and up read at
/// each element of dh, as the epilogue reads any [rows, N] input).
template <typename GradOp>
struct FuseGatedMLPGrad : OpRewritePattern<GradOp> {
  FuseGatedMLPGrad(MLIRContext *ctx, const FusionOptions &options)
      : OpRewritePattern<GradOp>(ctx), options(options) {}

  LogicalResult matchAndRewrite(GradOp grad,
                                PatternRewriter &rewriter) const override {
    if (isInFusionGroup(grad))
      return failure();
    auto dh = grad.getGrad().template getDefiningOp<LinearGradInputOp>();
    if (!dh)
      return leaveAlone(options, kPass, grad,
                        "its incoming gradient is not a "
                        "liger.linear_grad_input (the down projection's dx)");
    if (isInFusionGroup(dh))
      return failure();
    // (A group the templates cannot compile would take the gradient's row
    // kernel away.)
    Type elem = getElementTypeOrSelf(dh.getType());
    if (!elem.isBF16() && !elem.isF16())
      return leaveAlone(options, kPass, grad,
                        "the matmul templates take bf16 or f16: the gradient "
                        "stays a kernel of its own");
    FusionCandidate candidate{kPass, FusionKind::matmul, {dh, grad}, {}};
    candidate.extraOutputs =
        getExtraOutputs(candidate.ops, SmallVector<Value>(grad->getResults()));
    return success(succeeded(tryFuse(rewriter, grad, candidate, options)));
  }

  FusionOptions options;
};

struct FuseGatedMLPPass : liger::impl::FuseGatedMLPPassBase<FuseGatedMLPPass> {
  using Base::Base;
  void runOnOperation() override {
    bool withGradients = gradients;
    numGroups += runFusionPatterns(
        getOperation(), report, allowExtraOutputs,
        [&](RewritePatternSet &patterns, const FusionOptions &options) {
          populateFuseGatedMLPPatterns(patterns, options);
          if (withGradients)
            populateFuseGatedMLPGradPatterns(patterns, options);
        });
  }
};
} // namespace

void mlir::liger::populateFuseGatedMLPPatterns(RewritePatternSet &patterns,
                                               const FusionOptions &options) {
  patterns.add<FuseGatedMLP<SwiGLUOp>, FuseGatedMLP<GEGLUOp>>(
      patterns.getContext(), options);
}

void mlir::liger::populateFuseGatedMLPGradPatterns(
    RewritePatternSet &patterns, const FusionOptions &options) {
  patterns.add<FuseGatedMLPGrad<SwiGLUGradOp>, FuseGatedMLPGrad<GEGLUGradOp>>(
      patterns.getContext(), options);
}
