//===- FuseAddRMSNorm.cpp - residual add + RMSNorm -> rowwise group -------===//
//
// liger-fuse-add-rms-norm: liger.add followed by liger.rms_norm of the sum
// becomes one liger.add_rms_norm in a rowwise group; an add_rms_norm written
// as such gets its group too.
//
//===----------------------------------------------------------------------===//

#include "liger/Transforms/Fusion.h"
#include "liger/Transforms/Passes.h"

namespace mlir::liger {
#define GEN_PASS_DEF_FUSEADDRMSNORMPASS
#include "liger/Transforms/Passes.h.inc"
} // namespace mlir::liger

using namespace mlir;
using namespace mlir::liger;

namespace {
constexpr StringLiteral kPass = "liger-fuse-add-rms-norm";

struct FuseAddRMSNorm : OpRewritePattern<RMSNormOp> {
  FuseAddRMSNorm(MLIRContext *ctx, const FusionOptions &options)
      : OpRewritePattern(ctx), options(options) {}

  LogicalResult matchAndRewrite(RMSNormOp norm,
                                PatternRewriter &rewriter) const override {
    if (isInFusionGroup(norm))
      return failure();
    auto add = norm.getInput().getDefiningOp<AddOp>();
    if (!add)
      return failure();
    if (add->getBlock() != norm->getBlock())
      return leaveAlone(options, kPass, norm, "the add is in another block");
    // liger.add_rms_norm takes the place of the norm: other readers of the
    // sum must come after it (they then read the op's second result).
    for (Operation *user : add->getUsers())
      if (user != norm.getOperation() && user->getBlock() == norm->getBlock() &&
          user->isBeforeInBlock(norm))
        return leaveAlone(options, kPass, norm,
                          "'" + user->getName().getStringRef() +
                              "' reads the sum before the norm");
    FusionCandidate candidate{kPass, FusionKind::rowwise, {add, norm}, {}};
    if (options.control && !options.control(candidate))
      return leaveAlone(options, kPass, norm, "refused by the policy");
    std::string what = describeOps(candidate.ops);

    rewriter.setInsertionPoint(norm);
    AddRMSNormOp::Properties props;
    props.eps = norm.getEpsAttr();
    props.offset = norm.getOffsetAttr();
    props.casting_mode = norm.getCastingModeAttr();
    props.with_rstd = norm.getWithRstdAttr();
    auto fused = AddRMSNormOp::create(
        rewriter, norm.getLoc(),
        ValueRange{add.getLhs(), add.getRhs(), norm.getWeight()}, props, {});
    SmallVector<Value> normResults = {fused.getResult()};
    if (norm.getRstd())
      normResults.push_back(fused.getRstd());
    rewriter.replaceOp(norm, normResults);
    rewriter.replaceOp(add, fused.getSum());

    commitFusion(rewriter, {kPass, FusionKind::rowwise, {fused}, {}}, what,
                 options);
    return success();
  }

  FusionOptions options;
};

/// An add_rms_norm written as such is the same kernel: give it its group.
struct WrapAddRMSNorm : OpRewritePattern<AddRMSNormOp> {
  WrapAddRMSNorm(MLIRContext *ctx, const FusionOptions &options)
      : OpRewritePattern(ctx), options(options) {}

  LogicalResult matchAndRewrite(AddRMSNormOp op,
                                PatternRewriter &rewriter) const override {
    if (isInFusionGroup(op))
      return failure();
    FusionCandidate candidate{kPass, FusionKind::rowwise, {op}, {}};
    return success(succeeded(tryFuse(rewriter, op, candidate, options)));
  }

  FusionOptions options;
};

struct FuseAddRMSNormPass
    : liger::impl::FuseAddRMSNormPassBase<FuseAddRMSNormPass> {
  using Base::Base;
  void runOnOperation() override {
    numGroups += runFusionPatterns(
        getOperation(), report, allowExtraOutputs,
        [](RewritePatternSet &patterns, const FusionOptions &options) {
          populateFuseAddRMSNormPatterns(patterns, options);
        });
  }
};
} // namespace

void mlir::liger::populateFuseAddRMSNormPatterns(RewritePatternSet &patterns,
                                                 const FusionOptions &options) {
  patterns.add<FuseAddRMSNorm, WrapAddRMSNorm>(patterns.getContext(), options);
}
