//===- FuseElementwise.cpp - elementwise ops into their producer's group --===//
//
// liger-fuse-elementwise: an elementwise op joins the rowwise op or group
// that produces one of its operands (or, with into-matmul, a projection or
// matmul group as its epilogue). Applied greedily, chains grow one op at a
// time.
//
//===----------------------------------------------------------------------===//

#include "liger/Transforms/Fusion.h"
#include "liger/Transforms/Passes.h"

namespace mlir::liger {
#define GEN_PASS_DEF_FUSEELEMENTWISEPASS
#include "liger/Transforms/Passes.h.inc"
} // namespace mlir::liger

using namespace mlir;
using namespace mlir::liger;

namespace {
constexpr StringLiteral kPass = "liger-fuse-elementwise";

bool isElementwise(Operation *op) {
  return isa<SiLUOp, GELUOp, SwiGLUOp, GEGLUOp, AddOp, MulOp>(op);
}

/// Row-local producers an elementwise consumer can join (losses reduce rows
/// to scalars and stay alone). The norms' backward ops are row-local in dx
/// (their weight gradients become a second, finishing kernel): a residual
/// gradient added to dx is add + RMSNorm's backward in one kernel.
bool isRowwiseProducer(Operation *op) {
  return isElementwise(op) ||
         isa<RMSNormOp, AddRMSNormOp, LayerNormOp, RoPEOp, SoftmaxOp,
             RMSNormGradOp, LayerNormGradOp, SwiGLUGradOp, GEGLUGradOp,
             SoftmaxGradOp>(op);
}

/// The kind of group `producer` would give its consumer, if any.
std::optional<FusionKind> groupKindOf(Operation *producer, bool intoMatmul) {
  if (auto group = dyn_cast<FusionOp>(producer)) {
    if (group.getKind() == FusionKind::rowwise)
      return FusionKind::rowwise;
    if (group.getKind() == FusionKind::matmul && intoMatmul)
      return FusionKind::matmul;
    return std::nullopt;
  }
  if (isRowwiseProducer(producer))
    return FusionKind::rowwise;
  if (intoMatmul && isa<LinearOp, LoRALinearOp>(producer))
    return FusionKind::matmul;
  return std::nullopt;
}

struct FuseIntoProducer : RewritePattern {
  FuseIntoProducer(MLIRContext *ctx, const FusionOptions &options,
                   bool intoMatmul)
      : RewritePattern(MatchAnyOpTypeTag(), /*benefit=*/1, ctx),
        options(options), intoMatmul(intoMatmul) {}

  LogicalResult matchAndRewrite(Operation *op,
                                PatternRewriter &rewriter) const override {
    if (!isElementwise(op) || isInFusionGroup(op))
      return failure();
    for (Value operand : op->getOperands()) {
      Operation *producer = operand.getDefiningOp();
      if (!producer || producer->getBlock() != op->getBlock() ||
          isInFusionGroup(producer))
        continue;
      std::optional<FusionKind> kind = groupKindOf(producer, intoMatmul);
      if (!kind)
        continue;
      FusionCandidate candidate{kPass, *kind, {producer, op}, {}};
      candidate.extraOutputs =
          getExtraOutputs(candidate.ops, {op->getResult(0)});
      if (succeeded(tryFuse(rewriter, op, candidate, options)))
        return success();
    }
    return failure();
  }

  FusionOptions options;
  bool intoMatmul;
};

/// A projection whose only reader is a rowwise group (an add + RMSNorm) is a
/// near-miss worth reporting: the group's other ops are not epilogue ops.
struct ReportProjectionIntoRowwise : OpRewritePattern<LinearOp> {
  ReportProjectionIntoRowwise(MLIRContext *ctx, const FusionOptions &options)
      : OpRewritePattern(ctx), options(options) {}

  LogicalResult matchAndRewrite(LinearOp op, PatternRewriter &) const override {
    if (isInFusionGroup(op) || !op->hasOneUse())
      return failure();
    auto group = dyn_cast<FusionOp>(*op->getUsers().begin());
    if (!group || group.getKind() != FusionKind::rowwise)
      return failure();
    return leaveAlone(options, kPass, op,
                      "its reader is a rowwise group (" +
                          describeOps(llvm::to_vector(llvm::map_range(
                              group.getBody().front().without_terminator(),
                              [](Operation &inner) { return &inner; }))) +
                          "), which a matmul epilogue does not take");
  }

  FusionOptions options;
};

struct FuseElementwisePass
    : liger::impl::FuseElementwisePassBase<FuseElementwisePass> {
  using Base::Base;
  void runOnOperation() override {
    numGroups += runFusionPatterns(
        getOperation(), report, allowExtraOutputs,
        [&](RewritePatternSet &patterns, const FusionOptions &options) {
          populateFuseElementwisePatterns(patterns, options, intoMatmul);
        });
  }
};
} // namespace

void mlir::liger::populateFuseElementwisePatterns(RewritePatternSet &patterns,
                                                  const FusionOptions &options,
                                                  bool intoMatmul) {
  patterns.add<FuseIntoProducer>(patterns.getContext(), options, intoMatmul);
  patterns.add<ReportProjectionIntoRowwise>(patterns.getContext(), options);
}
