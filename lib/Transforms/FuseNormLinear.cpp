//===- FuseNormLinear.cpp - RMSNorm as the prologue of its projections ----===//
//
// liger-fuse-norm-linear: a liger.rms_norm read only by projections joins
// each projection's matmul group as its prologue (one copy of the norm per
// group; the row statistics are cheap next to the GEMM).
//
//===----------------------------------------------------------------------===//

#include "liger/Transforms/Fusion.h"
#include "liger/Transforms/Passes.h"

namespace mlir::liger {
#define GEN_PASS_DEF_FUSENORMLINEARPASS
#include "liger/Transforms/Passes.h.inc"
} // namespace mlir::liger

using namespace mlir;
using namespace mlir::liger;

namespace {
constexpr StringLiteral kPass = "liger-fuse-norm-linear";

/// Whether `user` can take `normed` as the activation of its projections: a
/// projection reading it as its input, or a matmul group whose projections
/// all read the block argument bound to it (and that has no norm yet).
bool isProjectionReader(Operation *user, Value normed) {
  if (auto linear = dyn_cast<LinearOp>(user))
    return linear.getInput() == normed && linear.getWeight() != normed &&
           linear.getBias() != normed;
  if (auto lora = dyn_cast<LoRALinearOp>(user))
    return lora.getInput() == normed &&
           llvm::count(lora->getOperands(), normed) == 1;
  auto group = dyn_cast<FusionOp>(user);
  if (!group || group.getKind() != FusionKind::matmul)
    return false;
  Block &body = group.getBody().front();
  bool readsAsActivation = false;
  for (auto [input, arg] : llvm::zip(group.getInputs(), body.getArguments())) {
    if (input != normed)
      continue;
    for (Operation *reader : arg.getUsers()) {
      if (isa<LinearOp, LoRALinearOp>(reader) && reader->getOperand(0) == arg &&
          llvm::count(reader->getOperands(), arg) == 1)
        readsAsActivation = true;
      else
        return false;
    }
  }
  bool hasNorm = llvm::any_of(body.getOperations(),
                              [](Operation &op) { return isa<RMSNormOp>(op); });
  return readsAsActivation && !hasNorm;
}

struct FuseNormLinear : OpRewritePattern<RMSNormOp> {
  FuseNormLinear(MLIRContext *ctx, const FusionOptions &options,
                 int64_t maxConsumers, bool fold)
      : OpRewritePattern(ctx), options(options), maxConsumers(maxConsumers),
        fold(fold) {}

  LogicalResult matchAndRewrite(RMSNormOp norm,
                                PatternRewriter &rewriter) const override {
    if (isInFusionGroup(norm))
      return failure();
    Value normed = norm.getResult();
    if (normed.use_empty())
      return failure();
    if (Value rstd = norm.getRstd(); rstd && !rstd.use_empty())
      return leaveAlone(
          options, kPass, norm,
          "its rstd result is read (by '" +
              (*rstd.getUsers().begin())->getName().getStringRef() + "')");
    llvm::SetVector<Operation *> consumers;
    for (Operation *user : normed.getUsers()) {
      if (isa<LinearOp, LoRALinearOp>(user) &&
          !isProjectionReader(user, normed))
        return leaveAlone(options, kPass, norm,
                          "'" + user->getName().getStringRef() +
                              "' reads the normed value as more than its "
                              "activation");
      if (user->getBlock() != norm->getBlock() ||
          !isProjectionReader(user, normed))
        return leaveAlone(options, kPass, norm,
                          "the normed value is also read by '" +
                              user->getName().getStringRef() +
                              "', which is not a projection");
      consumers.insert(user);
    }
    if (static_cast<int64_t>(consumers.size()) > maxConsumers)
      return leaveAlone(options, kPass, norm,
                        Twine(consumers.size()) +
                            " projections read it (max-consumers=" +
                            Twine(maxConsumers) + ")");
    // Ask the policy about every group before changing anything.
    for (Operation *consumer : consumers) {
      FusionCandidate candidate{
          kPass, FusionKind::matmul, {norm, consumer}, {}};
      if (options.control && !options.control(candidate))
        return leaveAlone(options, kPass, norm, "refused by the policy");
    }
    if (!fold)
      return leaveAlone(options, kPass, norm,
                        "kept as a rowwise kernel before its projections "
                        "(fold=false; liger-fuse folds it with "
                        "norm-prologue=true, liger-compile with "
                        "--norm-prologue)");
    // One copy of the norm per consumer; the last takes the original.
    for (auto [i, consumer] : llvm::enumerate(consumers)) {
      Operation *copy = norm;
      if (i + 1 < consumers.size()) {
        rewriter.setInsertionPoint(norm);
        copy = rewriter.clone(*norm);
        rewriter.modifyOpInPlace(consumer, [&] {
          consumer->replaceUsesOfWith(normed, copy->getResult(0));
        });
      }
      FusionCandidate candidate{
          kPass, FusionKind::matmul, {copy, consumer}, {}};
      // Every reader of the norm is in the group and in its block.
      commitFusion(rewriter, candidate, describeOps(candidate.ops), options);
    }
    return success();
  }

  FusionOptions options;
  int64_t maxConsumers;
  bool fold;
};

/// add_rms_norm feeding projections is a near-miss worth reporting: its sum
/// is the next residual, which a matmul prologue would have to write too.
struct ReportAddRMSNorm : OpRewritePattern<AddRMSNormOp> {
  ReportAddRMSNorm(MLIRContext *ctx, const FusionOptions &options)
      : OpRewritePattern(ctx), options(options) {}

  LogicalResult matchAndRewrite(AddRMSNormOp op,
                                PatternRewriter &) const override {
    // The normed value as the function sees it: the op's result, or the
    // result of the rowwise group that yields it.
    Value normed = op.getResult();
    if (auto group = dyn_cast<FusionOp>(op->getParentOp())) {
      normed = {};
      for (auto [result, yielded] :
           llvm::zip(group.getResults(), group.getYield().getValues()))
        if (yielded == op.getResult())
          normed = result;
    }
    if (!normed || llvm::none_of(normed.getUsers(), [](Operation *user) {
          return isa<LinearOp, LoRALinearOp, FusionOp>(user);
        }))
      return failure();
    return leaveAlone(options, kPass, op,
                      "an add + RMSNorm also writes the new residual, so it "
                      "stays a rowwise kernel before the projections");
  }

  FusionOptions options;
};

struct FuseNormLinearPass
    : liger::impl::FuseNormLinearPassBase<FuseNormLinearPass> {
  using Base::Base;
  void runOnOperation() override {
    numGroups += runFusionPatterns(
        getOperation(), report, allowExtraOutputs,
        [&](RewritePatternSet &patterns, const FusionOptions &options) {
          populateFuseNormLinearPatterns(patterns, options, maxConsumers,
                                         fold);
        });
  }
};
} // namespace

void mlir::liger::populateFuseNormLinearPatterns(RewritePatternSet &patterns,
                                                 const FusionOptions &options,
                                                 int64_t maxConsumers,
                                                 bool fold) {
  patterns.add<FuseNormLinear>(patterns.getContext(), options, maxConsumers,
                               fold);
  patterns.add<ReportAddRMSNorm>(patterns.getContext(), options);
}
