//===- LowerExpandShape.cpp - the liger-lower-expand-shape pass -----------===//
//
// Rewrites a memref.expand_shape that splits one dynamic size into several
// dynamic ones into the memref.reinterpret_cast of its source's base
// buffer, with the sizes of its output_shape. Upstream expand-strided-metadata
// (MLIR 22) cannot lower such an op (llvm/llvm-project#186830); the CPU
// pipeline runs this pass just before it. Passes.td says more.
//
//===----------------------------------------------------------------------===//

#include "liger/Conversion/Passes.h"

#include "mlir/Dialect/Affine/IR/AffineOps.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/IR/PatternMatch.h"
#include "mlir/Transforms/GreedyPatternRewriteDriver.h"

namespace mlir::liger {
#define GEN_PASS_DEF_LOWEREXPANDSHAPEPASS
#include "liger/Conversion/Passes.h.inc"
} // namespace mlir::liger

using namespace mlir;

namespace {
/// Whether a reassociation group of `op` holds more than one dynamic size.
bool hasSplitDynamicSize(memref::ExpandShapeOp op) {
  MemRefType type = op.getResultType();
  for (const ReassociationIndices &group : op.getReassociationIndices()) {
    if (llvm::count_if(group, [&](int64_t d) { return type.isDynamicDim(d); }) >
        1)
      return true;
  }
  return false;
}

struct LowerSplitDynamicExpandShape
    : public OpRewritePattern<memref::ExpandShapeOp> {
  using OpRewritePattern::OpRewritePattern;

  LogicalResult matchAndRewrite(memref::ExpandShapeOp op,
                                PatternRewriter &rewriter) const override {
    if (!hasSplitDynamicSize(op))
      return rewriter.notifyMatchFailure(op, "at most one dynamic size per "
                                             "group: upstream lowers it");
    Location loc = op.getLoc();
    auto source =
        memref::ExtractStridedMetadataOp::create(rewriter, loc, op.getSrc());
    SmallVector<OpFoldResult> sizes = op.getMixedOutputShape();
    SmallVector<OpFoldResult> sourceStrides =
        source.getConstifiedMixedStrides();
    SmallVector<OpFoldResult> strides(sizes.size());
    AffineExpr s0, s1;
    bindSymbols(rewriter.getContext(), s0, s1);
    for (auto [sourceDim, group] :
         llvm::enumerate(op.getReassociationIndices())) {
      // Innermost first: each dimension's stride is the one inside it times
      // that one's size (folded to a constant where both are).
      OpFoldResult stride = sourceStrides[sourceDim];
      for (int64_t d : llvm::reverse(group)) {
        strides[d] = stride;
        stride = affine::makeComposedFoldedAffineApply(rewriter, loc, s0 * s1,
                                                       {stride, sizes[d]});
      }
    }
    rewriter.replaceOpWithNewOp<memref::ReinterpretCastOp>(
        op, op.getResultType(), source.getBaseBuffer(),
        source.getConstifiedMixedOffset(), sizes, strides);
    return success();
  }
};

struct LowerExpandShapePass
    : liger::impl::LowerExpandShapePassBase<LowerExpandShapePass> {
  using Base::Base;

  void runOnOperation() override {
    int64_t before = 0;
    getOperation()->walk(
        [&](memref::ExpandShapeOp op) { before += hasSplitDynamicSize(op); });
    RewritePatternSet patterns(&getContext());
    patterns.add<LowerSplitDynamicExpandShape>(&getContext());
    if (failed(applyPatternsGreedily(getOperation(), std::move(patterns))))
      return signalPassFailure();
    numLowered += before;
  }
};
} // namespace
