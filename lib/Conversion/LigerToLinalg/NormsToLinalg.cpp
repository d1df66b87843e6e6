//===- NormsToLinalg.cpp - lower the liger norms to linalg ----------------===//
//
// rms_norm, add_rms_norm, layer_norm, rms_norm_grad and layer_norm_grad as
// linalg.generic ops on tensors: reductions over the hidden dimension for the
// row statistics (f32), then one elementwise pass that normalizes and rounds
// where the casting mode says. The backward ops read the statistics that
// their forward op returned.
//
//===----------------------------------------------------------------------===//

#include "LoweringUtils.h"

#include "liger/Conversion/LigerToLinalg/LigerToLinalg.h"
#include "liger/Dialect/Liger/IR/LigerOps.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Transforms/DialectConversion.h"

using namespace mlir;
using namespace mlir::liger;
using namespace mlir::liger::lowering;

namespace {

/// Attributes shared by the RMSNorm ops.
struct RMSNormParams {
  double eps;
  double offset;
  CastingMode casting;
};

/// sum over the hidden dimension of x_f32^2, as f32 [...].
Value sumOfSquares(OpBuilder &b, Location loc, ArrayRef<OpFoldResult> sizes,
                   Value x) {
  return reduceRows(
      b, loc, sizes, {{x, Access::Full}}, 0.0,
      [](OpBuilder &nb, Location nloc, ValueRange args) -> SmallVector<Value> {
        Value v = toF32(nb, nloc, args[0]);
        Value sq = arith::MulFOp::create(nb, nloc, v, v);
        return {arith::AddFOp::create(nb, nloc, args[1], sq)};
      });
}

/// rms_norm of `x` [..., H]: returns {y, rstd} with rstd f32 [...].
std::pair<Value, Value> buildRMSNorm(OpBuilder &b, Location loc, Value x,
                                     Value weight, const RMSNormParams &p) {
  auto xType = cast<RankedTensorType>(x.getType());
  Type xElem = xType.getElementType();
  Type wElem = cast<RankedTensorType>(weight.getType()).getElementType();
  double hidden = static_cast<double>(xType.getShape().back());
  SmallVector<OpFoldResult> sizes = sizesOf(b, loc, x);

  Value sumSq = sumOfSquares(b, loc, sizes, x);
  Value rstd = mapRows(
      b, loc, ArrayRef(sizes).drop_back(), {{sumSq, Access::Full}},
      {b.getF32Type()},
      [&](OpBuilder &nb, Location nloc, ValueRange args) -> SmallVector<Value> {
        Value mean =
            arith::DivFOp::create(nb, nloc, args[0], f32(nb, nloc, hidden));
        Value shifted =
            arith::AddFOp::create(nb, nloc, mean, f32(nb, nloc, p.eps));
        return {math::RsqrtOp::create(nb, nloc, shifted)};
      })[0];

  Value y = mapRows(
      b, loc, sizes,
      {{x, Access::Full}, {weight, Access::Feature}, {rstd, Access::Row}},
      {xElem},
      [&](OpBuilder &nb, Location nloc, ValueRange args) -> SmallVector<Value> {
        Value xv = toF32(nb, nloc, args[0]);
        Value scale = arith::AddFOp::create(nb, nloc, f32(nb, nloc, p.offset),
                                            toF32(nb, nloc, args[1]));
        Value r = args[2];
        Value out;
        switch (p.casting) {
        case CastingMode::llama: {
          // LlamaRMSNorm: normalize in f32, cast to the input dtype, then
          // multiply by the weight (offset + weight rounded in its dtype).
          Value normed = roundThrough(
              nb, nloc, arith::MulFOp::create(nb, nloc, xv, r), xElem);
          out = arith::MulFOp::create(nb, nloc, normed,
                                      roundThrough(nb, nloc, scale, wElem));
          break;
        }
        case CastingMode::gemma:
          // GemmaRMSNorm: all in f32, one rounding at the end.
          out = arith::MulFOp::create(
              nb, nloc, arith::MulFOp::create(nb, nloc, xv, r), scale);
          break;
        case CastingMode::none: {
          // Every elementwise step in the input dtype; only the mean in f32.
          Value rr = roundThrough(nb, nloc, r, xElem);
          Value normed = roundThrough(
              nb, nloc, arith::MulFOp::create(nb, nloc, xv, rr), xElem);
          out = arith::MulFOp::create(nb, nloc, normed,
                                      roundThrough(nb, nloc, scale, xElem));
          break;
        }
        }
        return {fromF32(nb, nloc, out, xElem)};
      })[0];
  return {y, rstd};
}

template <typename OpTy> RMSNormParams getRMSNormParams(OpTy op) {
  return {op.getEps().convertToDouble(), op.getOffset().convertToDouble(),
          op.getCastingMode()};
}

/// Replaces an RMSNorm op by `values` plus `rstd` when the op returns it.
template <typename OpTy>
void replaceWithOptionalRstd(ConversionPatternRewriter &rewriter, OpTy op,
                             SmallVector<Value> values, Value rstd) {
  if (op.getRstd())
    values.push_back(rstd);
  rewriter.replaceOp(op, values);
}

struct LowerRMSNorm : OpConversionPattern<RMSNormOp> {
  using OpConversionPattern::OpConversionPattern;
  LogicalResult
  matchAndRewrite(RMSNormOp op, OpAdaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    auto [y, rstd] = buildRMSNorm(rewriter, op.getLoc(), adaptor.getInput(),
                                  adaptor.getWeight(), getRMSNormParams(op));
    replaceWithOptionalRstd(rewriter, op, {y}, rstd);
    return success();
  }
};

struct LowerAddRMSNorm : OpConversionPattern<AddRMSNormOp> {
  using OpConversionPattern::OpConversionPattern;
  LogicalResult
  matchAndRewrite(AddRMSNormOp op, OpAdaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    Location loc = op.getLoc();
    Value x = adaptor.getInput();
    Type xElem = cast<RankedTensorType>(x.getType()).getElementType();
    Value sum = mapRows(
        rewriter, loc, sizesOf(rewriter, loc, x),
        {{x, Access::Full}, {adaptor.getResidual(), Access::Full}}, {xElem},
        [&](OpBuilder &nb, Location nloc,
            ValueRange args) -> SmallVector<Value> {
          Value s = arith::AddFOp::create(nb, nloc, toF32(nb, nloc, args[0]),
                                          toF32(nb, nloc, args[1]));
          return {fromF32(nb, nloc, s, xElem)};
        })[0];
    auto [y, rstd] = buildRMSNorm(rewriter, loc, sum, adaptor.getWeight(),
                                  getRMSNormParams(op));
    replaceWithOptionalRstd(rewriter, op, {y, sum}, rstd);
    return success();
  }
};

struct LowerLayerNorm : OpConversionPattern<LayerNormOp> {
  using OpConversionPattern::OpConversionPattern;
  LogicalResult
  matchAndRewrite(LayerNormOp op, OpAdaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    Location loc = op.getLoc();
    OpBuilder &b = rewriter;
    Value x = adaptor.getInput();
    auto xType = cast<RankedTensorType>(x.getType());
    Type xElem = xType.getElementType();
    double hidden = static_cast<double>(xType.getShape().back());
    double eps = op.getEps().convertToDouble();
    SmallVector<OpFoldResult> sizes = sizesOf(b, loc, x);
    ArrayRef<OpFoldResult> rowSizes = ArrayRef(sizes).drop_back();
    Type f32Type = b.getF32Type();

    Value sum = reduceRows(b, loc, sizes, {{x, Access::Full}}, 0.0,
                           [](OpBuilder &nb, Location nloc,
                              ValueRange args) -> SmallVector<Value> {
                             return {arith::AddFOp::create(
                                 nb, nloc, args[1], toF32(nb, nloc, args[0]))};
                           });
    Value mean = mapRows(b, loc, rowSizes, {{sum, Access::Full}}, {f32Type},
                         [&](OpBuilder &nb, Location nloc,
                             ValueRange args) -> SmallVector<Value> {
                           return {arith::DivFOp::create(
                               nb, nloc, args[0], f32(nb, nloc, hidden))};
                         })[0];
    // Two-pass (biased) variance: sum((x - mean)^2) / H; rstd from it.
    Value sqDev =
        reduceRows(b, loc, sizes, {{x, Access::Full}, {mean, Access::Row}}, 0.0,
                   [](OpBuilder &nb, Location nloc,
                      ValueRange args) -> SmallVector<Value> {
                     Value d = arith::SubFOp::create(
                         nb, nloc, toF32(nb, nloc, args[0]), args[1]);
                     Value sq = arith::MulFOp::create(nb, nloc, d, d);
                     return {arith::AddFOp::create(nb, nloc, args[2], sq)};
                   });
    Value rstd = mapRows(
        b, loc, rowSizes, {{sqDev, Access::Full}}, {f32Type},
        [&](OpBuilder &nb, Location nloc,
            ValueRange args) -> SmallVector<Value> {
          Value var =
              arith::DivFOp::create(nb, nloc, args[0], f32(nb, nloc, hidden));
          return {math::RsqrtOp::create(
              nb, nloc,
              arith::AddFOp::create(nb, nloc, var, f32(nb, nloc, eps)))};
        })[0];

    SmallVector<RowOperand> ins = {{x, Access::Full},
                                   {mean, Access::Row},
                                   {rstd, Access::Row},
                                   {adaptor.getWeight(), Access::Feature}};
    if (Value bias = adaptor.getBias())
      ins.push_back({bias, Access::Feature});
    Value y = mapRows(
        b, loc, sizes, ins, {xElem},
        [&](OpBuilder &nb, Location nloc,
            ValueRange args) -> SmallVector<Value> {
          Value d = arith::SubFOp::create(nb, nloc, toF32(nb, nloc, args[0]),
                                          args[1]);
          Value out = arith::MulFOp::create(
              nb, nloc, arith::MulFOp::create(nb, nloc, d, args[2]),
              toF32(nb, nloc, args[3]));
          if (args.size() > 4)
            out =
                arith::AddFOp::create(nb, nloc, out, toF32(nb, nloc, args[4]));
          return {fromF32(nb, nloc, out, xElem)};
        })[0];
    SmallVector<Value> results = {y};
    if (op.getWithStats())
      results.append({mean, rstd});
    rewriter.replaceOp(op, results);
    return success();
  }
};

/// dw and db of the norms: sum over all rows of `term(args)` (f32), every
/// loop but the last a reduction, rounded to `elem`.
static Value reduceOverRows(OpBuilder &b, Location loc,
                            ArrayRef<OpFoldResult> sizes,
                            ArrayRef<RowOperand> ins, Type elem,
                            function_ref<Value(OpBuilder &, Location,
                                               ValueRange)>
                                term) {
  MLIRContext *ctx = b.getContext();
  unsigned rank = sizes.size();
  Value acc = filledTensor(b, loc, {sizes.back()}, b.getF32Type(), 0.0);
  SmallVector<Value> inputs;
  SmallVector<AffineMap> maps;
  for (const RowOperand &in : ins) {
    inputs.push_back(in.value);
    maps.push_back(accessMap(ctx, rank, in.access));
  }
  maps.push_back(accessMap(ctx, rank, Access::Feature));
  SmallVector<utils::IteratorType> iterators(rank,
                                             utils::IteratorType::reduction);
  iterators.back() = utils::IteratorType::parallel;
  Value total =
      linalg::GenericOp::create(
          b, loc, TypeRange{acc.getType()}, inputs, ValueRange{acc}, maps,
          iterators,
          [&](OpBuilder &nb, Location nloc, ValueRange args) {
            Value t = term(nb, nloc, args.drop_back());
            linalg::YieldOp::create(
                nb, nloc,
                ValueRange{arith::AddFOp::create(nb, nloc, args.back(), t)});
          })
          .getResult(0);
  return mapRows(b, loc, {sizes.back()}, {{total, Access::Full}}, {elem},
                 [&](OpBuilder &nb, Location nloc,
                     ValueRange args) -> SmallVector<Value> {
                   return {fromF32(nb, nloc, args[0], elem)};
                 })[0];
}

struct LowerRMSNormGrad : OpConversionPattern<RMSNormGradOp> {
  using OpConversionPattern::OpConversionPattern;
  LogicalResult
  matchAndRewrite(RMSNormGradOp op, OpAdaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    Location loc = op.getLoc();
    OpBuilder &b = rewriter;
    Value dy = adaptor.getGrad(), x = adaptor.getInput();
    Value w = adaptor.getWeight(), rstd = adaptor.getRstd();
    auto xType = cast<RankedTensorType>(x.getType());
    Type xElem = xType.getElementType();
    Type wElem = cast<RankedTensorType>(w.getType()).getElementType();
    double hidden = static_cast<double>(xType.getShape().back());
    double offset = op.getOffset().convertToDouble();
    // llama and none round x_hat to the input dtype in the forward pass; the
    // weight gradient sees that rounded value.
    bool roundXHat = op.getCastingMode() != CastingMode::gemma;
    SmallVector<OpFoldResult> sizes = sizesOf(b, loc, x);

    // dot = sum_h g * x_hat with g = dy * (offset + w), x_hat = x * rstd.
    Value dot = reduceRows(
        b, loc, sizes,
        {{dy, Access::Full},
         {x, Access::Full},
         {w, Access::Feature},
         {rstd, Access::Row}},
        0.0,
        [&](OpBuilder &nb, Location nloc,
            ValueRange args) -> SmallVector<Value> {
          Value g = arith::MulFOp::create(
              nb, nloc, toF32(nb, nloc, args[0]),
              arith::AddFOp::create(nb, nloc, f32(nb, nloc, offset),
                                    toF32(nb, nloc, args[2])));
          Value xHat = arith::MulFOp::create(nb, nloc, toF32(nb, nloc, args[1]),
                                             args[3]);
          return {arith::AddFOp::create(
              nb, nloc, args[4], arith::MulFOp::create(nb, nloc, g, xHat))};
        });
    // dx = rstd * (g - x_hat * dot / H).
    Value dx = mapRows(
        b, loc, sizes,
        {{dy, Access::Full},
         {x, Access::Full},
         {w, Access::Feature},
         {rstd, Access::Row},
         {dot, Access::Row}},
        {xElem},
        [&](OpBuilder &nb, Location nloc,
            ValueRange args) -> SmallVector<Value> {
          Value g = arith::MulFOp::create(
              nb, nloc, toF32(nb, nloc, args[0]),
              arith::AddFOp::create(nb, nloc, f32(nb, nloc, offset),
                                    toF32(nb, nloc, args[2])));
          Value xHat = arith::MulFOp::create(nb, nloc, toF32(nb, nloc, args[1]),
                                             args[3]);
          Value meanDot =
              arith::DivFOp::create(nb, nloc, args[4], f32(nb, nloc, hidden));
          Value inner = arith::SubFOp::create(
              nb, nloc, g, arith::MulFOp::create(nb, nloc, xHat, meanDot));
          return {fromF32(nb, nloc,
                          arith::MulFOp::create(nb, nloc, args[3], inner),
                          xElem)};
        })[0];

    // dw[h] = sum over all rows of dy * x_hat.
    Value dw = reduceOverRows(
        b, loc, sizes, {{dy, Access::Full}, {x, Access::Full}, {rstd, Access::Row}},
        wElem, [&](OpBuilder &nb, Location nloc, ValueRange args) -> Value {
          Value xHat =
              arith::MulFOp::create(nb, nloc, toF32(nb, nloc, args[1]), args[2]);
          if (roundXHat)
            xHat = roundThrough(nb, nloc, xHat, xElem);
          return arith::MulFOp::create(nb, nloc, toF32(nb, nloc, args[0]), xHat);
        });
    rewriter.replaceOp(op, {dx, dw});
    return success();
  }
};

struct LowerLayerNormGrad : OpConversionPattern<LayerNormGradOp> {
  using OpConversionPattern::OpConversionPattern;
  LogicalResult
  matchAndRewrite(LayerNormGradOp op, OpAdaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    Location loc = op.getLoc();
    OpBuilder &b = rewriter;
    Value dy = adaptor.getGrad(), x = adaptor.getInput();
    Value w = adaptor.getWeight();
    Value mean = adaptor.getMean(), rstd = adaptor.getRstd();
    auto xType = cast<RankedTensorType>(x.getType());
    Type xElem = xType.getElementType();
    Type wElem = cast<RankedTensorType>(w.getType()).getElementType();
    double hidden = static_cast<double>(xType.getShape().back());
    SmallVector<OpFoldResult> sizes = sizesOf(b, loc, x);

    // x_hat = (x - mean) * rstd from (x, mean, rstd); g = dy * w.
    auto xHat = [&](OpBuilder &nb, Location nloc, Value xv, Value m, Value r) {
      return arith::MulFOp::create(
          nb, nloc, arith::SubFOp::create(nb, nloc, toF32(nb, nloc, xv), m), r);
    };
    auto gOf = [&](OpBuilder &nb, Location nloc, Value dyv, Value wv) {
      return arith::MulFOp::create(nb, nloc, toF32(nb, nloc, dyv),
                                   toF32(nb, nloc, wv));
    };
    // The two row sums read only the inputs: independent of each other, so
    // a row kernel reduces them together.
    SmallVector<RowOperand> rowIns = {{dy, Access::Full},
                                      {x, Access::Full},
                                      {w, Access::Feature},
                                      {mean, Access::Row},
                                      {rstd, Access::Row}};
    Value sumG = reduceRows(b, loc, sizes, rowIns, 0.0,
                            [&](OpBuilder &nb, Location nloc,
                                ValueRange args) -> SmallVector<Value> {
                              return {arith::AddFOp::create(
                                  nb, nloc, args[5],
                                  gOf(nb, nloc, args[0], args[2]))};
                            });
    Value sumGXHat = reduceRows(
        b, loc, sizes, rowIns, 0.0,
        [&](OpBuilder &nb, Location nloc,
            ValueRange args) -> SmallVector<Value> {
          Value t = arith::MulFOp::create(
              nb, nloc, gOf(nb, nloc, args[0], args[2]),
              xHat(nb, nloc, args[1], args[3], args[4]));
          return {arith::AddFOp::create(nb, nloc, args[5], t)};
        });
    SmallVector<RowOperand> dxIns = rowIns;
    dxIns.push_back({sumG, Access::Row});
    dxIns.push_back({sumGXHat, Access::Row});
    Value dx = mapRows(
        b, loc, sizes, dxIns, {xElem},
        [&](OpBuilder &nb, Location nloc,
            ValueRange args) -> SmallVector<Value> {
          Value n = f32(nb, nloc, hidden);
          Value inner = arith::SubFOp::create(
              nb, nloc,
              arith::SubFOp::create(nb, nloc, gOf(nb, nloc, args[0], args[2]),
                                    arith::DivFOp::create(nb, nloc, args[5], n)),
              arith::MulFOp::create(
                  nb, nloc, xHat(nb, nloc, args[1], args[3], args[4]),
                  arith::DivFOp::create(nb, nloc, args[6], n)));
          return {fromF32(nb, nloc,
                          arith::MulFOp::create(nb, nloc, args[4], inner),
                          xElem)};
        })[0];
    Value dw = reduceOverRows(
        b, loc, sizes,
        {{dy, Access::Full}, {x, Access::Full}, {mean, Access::Row},
         {rstd, Access::Row}},
        wElem, [&](OpBuilder &nb, Location nloc, ValueRange args) -> Value {
          return arith::MulFOp::create(
              nb, nloc, toF32(nb, nloc, args[0]),
              xHat(nb, nloc, args[1], args[2], args[3]));
        });
    Value db = reduceOverRows(
        b, loc, sizes, {{dy, Access::Full}}, wElem,
        [&](OpBuilder &nb, Location nloc, ValueRange args) -> Value {
          return toF32(nb, nloc, args[0]);
        });
    rewriter.replaceOp(op, {dx, dw, db});
    return success();
  }
};

} // namespace

void mlir::liger::populateLowerNormsToLinalgPatterns(
    RewritePatternSet &patterns) {
  patterns.add<LowerRMSNorm, LowerAddRMSNorm, LowerLayerNorm, LowerRMSNormGrad,
               LowerLayerNormGrad>(
      patterns.getContext());
}
