//===- FuseQKVRoPE.cpp - q/k projections + head split + RoPE --------------===//
//
// liger-fuse-qkv-rope: liger.rope whose q and k come from liger.linear
// projections of one activation through the head split (expand_shape, then
// transpose) becomes one matmul group with RoPE in the epilogue.
//
//===----------------------------------------------------------------------===//

#include "liger/Transforms/Fusion.h"
#include "liger/Transforms/Passes.h"

#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"

namespace mlir::liger {
#define GEN_PASS_DEF_FUSEQKVROPEPASS
#include "liger/Transforms/Passes.h.inc"
} // namespace mlir::liger

using namespace mlir;
using namespace mlir::liger;

namespace {
constexpr StringLiteral kPass = "liger-fuse-qkv-rope";

/// A projection followed by the head split [T..., H*D] -> [B, H, T, D].
struct HeadSplit {
  LinearOp projection;
  tensor::ExpandShapeOp expand;
  linalg::TransposeOp transpose;
  tensor::EmptyOp init; // the transpose's destination, if a tensor.empty
};

/// Follows `v` back through transpose <- expand_shape <- linear, each read
/// only by the next. Returns nullopt (and sets `why` when it gets as far as a
/// projection) otherwise.
std::optional<HeadSplit> traceHeadSplit(Value v, std::string &why) {
  auto transpose = v.getDefiningOp<linalg::TransposeOp>();
  if (!transpose || isInFusionGroup(transpose))
    return std::nullopt;
  auto expand = transpose.getInput().getDefiningOp<tensor::ExpandShapeOp>();
  if (!expand)
    return std::nullopt;
  auto projection = expand.getSrc().getDefiningOp<LinearOp>();
  if (!projection || isInFusionGroup(projection))
    return std::nullopt;
  if (!projection->hasOneUse() || !expand->hasOneUse() ||
      !transpose->hasOneUse()) {
    why = "a projection or its head split is also read outside the chain";
    return std::nullopt;
  }
  return HeadSplit{projection, expand, transpose,
                   transpose.getInit().getDefiningOp<tensor::EmptyOp>()};
}

struct FuseQKVRoPE : OpRewritePattern<RoPEOp> {
  FuseQKVRoPE(MLIRContext *ctx, const FusionOptions &options)
      : OpRewritePattern(ctx), options(options) {}

  LogicalResult matchAndRewrite(RoPEOp rope,
                                PatternRewriter &rewriter) const override {
    if (isInFusionGroup(rope))
      return failure();
    // One value rotated as both q and k has one projection, where the
    // template's epilogue writes q and k from two.
    if (rope.getQ() == rope.getK()) {
      if (rope.getQ().getDefiningOp<linalg::TransposeOp>())
        return leaveAlone(options, kPass, rope, "q and k are one value");
      return failure();
    }
    std::string why;
    std::optional<HeadSplit> q = traceHeadSplit(rope.getQ(), why);
    std::optional<HeadSplit> k = traceHeadSplit(rope.getK(), why);
    if (!q || !k) {
      if (!why.empty())
        return leaveAlone(options, kPass, rope, why);
      return failure();
    }
    if (q->projection.getInput() != k->projection.getInput())
      return leaveAlone(options, kPass, rope,
                        "q and k project different activations");
    Block *block = rope->getBlock();
    for (Operation *op :
         {q->projection.getOperation(), k->projection.getOperation()})
      if (op->getBlock() != block)
        return leaveAlone(options, kPass, rope,
                          "a projection is in another block");
    FusionCandidate candidate{kPass,
                              FusionKind::matmul,
                              {q->projection, k->projection, q->expand,
                               k->expand, q->transpose, k->transpose, rope},
                              {}};
    if (options.control && !options.control(candidate))
      return leaveAlone(options, kPass, rope, "refused by the policy");
    std::string what = describeOps(candidate.ops);

    // The transposes' destinations join the group as private copies (other
    // transposes, of v for one, may share a tensor.empty).
    for (HeadSplit *split : {&*q, &*k}) {
      if (!split->init)
        continue;
      rewriter.setInsertionPoint(split->transpose);
      Operation *copy = rewriter.clone(*split->init);
      rewriter.modifyOpInPlace(split->transpose, [&] {
        split->transpose.getInitMutable().assign(copy->getResult(0));
      });
      candidate.ops.push_back(copy);
    }
    // The head split's dynamic sizes (batch, sequence) are read inside the
    // group (tensor.dim of the projection, or of the split for the
    // transpose's destination), so that the group's inputs are tensors: its
    // kernel takes no index parameters.
    for (HeadSplit *split : {&*q, &*k}) {
      tensor::ExpandShapeOp expand = split->expand;
      SmallVector<ReassociationIndices> groups =
          expand.getReassociationIndices();
      SmallVector<Value> sizes;
      rewriter.setInsertionPoint(expand);
      unsigned next = 0;
      for (auto [dim, size] : llvm::enumerate(expand.getResultType().getShape())) {
        if (!ShapedType::isDynamic(size))
          continue;
        Value old = expand.getOutputShape()[next++];
        // A result dimension alone in its group is the source's.
        auto it = llvm::find_if(groups, [&](const ReassociationIndices &g) {
          return llvm::is_contained(g, static_cast<int64_t>(dim));
        });
        if (it->size() != 1) {
          sizes.push_back(old);
          continue;
        }
        auto read = tensor::DimOp::create(rewriter, expand.getLoc(),
                                          expand.getSrc(), it - groups.begin());
        candidate.ops.push_back(read);
        sizes.push_back(read);
      }
      rewriter.modifyOpInPlace(
          expand, [&] { expand.getOutputShapeMutable().assign(sizes); });
      auto empty = split->transpose.getInit().getDefiningOp<tensor::EmptyOp>();
      if (!empty || !llvm::is_contained(candidate.ops, empty.getOperation()))
        continue;
      rewriter.setInsertionPoint(empty);
      SmallVector<Value> emptySizes;
      ArrayRef<int64_t> perm = split->transpose.getPermutation();
      for (auto [dim, size] : llvm::enumerate(empty.getType().getShape())) {
        if (!ShapedType::isDynamic(size))
          continue;
        auto read = tensor::DimOp::create(rewriter, empty.getLoc(),
                                          expand.getResult(), perm[dim]);
        candidate.ops.push_back(read);
        emptySizes.push_back(read);
      }
      rewriter.modifyOpInPlace(empty, [&] {
        empty.getDynamicSizesMutable().assign(emptySizes);
      });
    }
    // Every op of the chain has its only reader in the chain.
    commitFusion(rewriter, candidate, what, options);
    return success();
  }

  FusionOptions options;
};

struct FuseQKVRoPEPass : liger::impl::FuseQKVRoPEPassBase<FuseQKVRoPEPass> {
  using Base::Base;
  void runOnOperation() override {
    numGroups += runFusionPatterns(
        getOperation(), report, allowExtraOutputs,
        [](RewritePatternSet &patterns, const FusionOptions &options) {
          populateFuseQKVRoPEPatterns(patterns, options);
        });
  }
};
} // namespace

void mlir::liger::populateFuseQKVRoPEPatterns(RewritePatternSet &patterns,
                                              const FusionOptions &options) {
  patterns.add<FuseQKVRoPE>(patterns.getContext(), options);
}
