//===- FuseGatedMLP.cpp - gate/up projections + gated activation ----------===//
//
// liger-fuse-gated-mlp: liger.swiglu (or liger.geglu) of two liger.linear
// projections of one activation becomes one matmul group: one GEMM over the
// concatenated weights with the activation in its epilogue.
//
//===----------------------------------------------------------------------===//

#include "liger/Transforms/Fusion.h"
#include "liger/Transforms/Passes.h"

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

struct FuseGatedMLPPass : liger::impl::FuseGatedMLPPassBase<FuseGatedMLPPass> {
  using Base::Base;
  void runOnOperation() override {
    numGroups += runFusionPatterns(
        getOperation(), report, allowExtraOutputs,
        [](RewritePatternSet &patterns, const FusionOptions &options) {
          populateFuseGatedMLPPatterns(patterns, options);
        });
  }
};
} // namespace

void mlir::liger::populateFuseGatedMLPPatterns(RewritePatternSet &patterns,
                                               const FusionOptions &options) {
  patterns.add<FuseGatedMLP<SwiGLUOp>, FuseGatedMLP<GEGLUOp>>(
      patterns.getContext(), options);
}
