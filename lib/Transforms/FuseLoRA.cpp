//===- FuseLoRA.cpp - LoRA projection + activation + residual -------------===//
//
// liger-fuse-lora: liger.lora_linear, with the activation and the residual
// add that follow it, becomes one matmul group; a weight it alone reads
// transposed (linalg.transpose [1, 0]: the LoRA dx, lora_linear of dy, Wᵀ,
// Bᵀ, Aᵀ) joins the group, which then reads W itself, MN-major.
//
//===----------------------------------------------------------------------===//

#include "liger/Transforms/Fusion.h"
#include "liger/Transforms/Passes.h"

#include "mlir/Dialect/Linalg/IR/Linalg.h"

namespace mlir::liger {
#define GEN_PASS_DEF_FUSELORAPASS
#include "liger/Transforms/Passes.h.inc"
} // namespace mlir::liger

using namespace mlir;
using namespace mlir::liger;

namespace {
constexpr StringLiteral kPass = "liger-fuse-lora";

/// The single reader of `v` (which may read it more than once) if it is one
/// of `Ops` in `v`'s block.
template <typename... Ops> Operation *getSingleUserOfKind(Value v) {
  if (v.use_empty())
    return nullptr;
  Operation *user = *v.getUsers().begin();
  if (llvm::any_of(v.getUsers(), [&](Operation *u) { return u != user; }))
    return nullptr;
  if (!isa<Ops...>(user) || user->getBlock() != v.getParentBlock() ||
      isInFusionGroup(user))
    return nullptr;
  return user;
}

/// The tensor.empty and the transpose that give `lora` a weight read
/// MN-major (getMNMajorWeightTranspose), where both are in its block.
static SmallVector<Operation *> transposedWeight(LoRALinearOp lora) {
  auto t = dyn_cast_or_null<linalg::TransposeOp>(
      getMNMajorWeightTranspose(lora.getWeight()));
  if (!t || t->getBlock() != lora->getBlock() || isInFusionGroup(t))
    return {};
  Operation *init = t.getInit().getDefiningOp();
  if (init->getBlock() != lora->getBlock())
    return {};
  return {init, t};
}

struct FuseLoRA : OpRewritePattern<LoRALinearOp> {
  FuseLoRA(MLIRContext *ctx, const FusionOptions &options)
      : OpRewritePattern(ctx), options(options) {}

  LogicalResult matchAndRewrite(LoRALinearOp lora,
                                PatternRewriter &rewriter) const override {
    if (isInFusionGroup(lora))
      return failure();
    FusionCandidate candidate{kPass, FusionKind::matmul,
                              transposedWeight(lora), {}};
    candidate.ops.push_back(lora);
    Value current = lora.getResult();
    if (Operation *act = getSingleUserOfKind<SiLUOp, GELUOp>(current)) {
      candidate.ops.push_back(act);
      current = act->getResult(0);
    }
    if (Operation *residual = getSingleUserOfKind<AddOp>(current))
      candidate.ops.push_back(residual);
    return success(succeeded(tryFuse(rewriter, lora, candidate, options)));
  }

  FusionOptions options;
};

struct FuseLoRAPass : liger::impl::FuseLoRAPassBase<FuseLoRAPass> {
  using Base::Base;
  void runOnOperation() override {
    numGroups += runFusionPatterns(
        getOperation(), report, allowExtraOutputs,
        [](RewritePatternSet &patterns, const FusionOptions &options) {
          populateFuseLoRAPatterns(patterns, options);
        });
  }
};
} // namespace

void mlir::liger::populateFuseLoRAPatterns(RewritePatternSet &patterns,
                                           const FusionOptions &options) {
  patterns.add<FuseLoRA>(patterns.getContext(), options);
}
