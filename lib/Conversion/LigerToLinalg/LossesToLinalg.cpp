//===- LossesToLinalg.cpp - lower the liger losses to linalg --------------===//
//
// cross_entropy (forward and backward), fused_linear_cross_entropy, kl_div
// and jsd. All math is f32. Cross-entropy follows PyTorch's
// F.cross_entropy for ignore_index, class weights and label smoothing, plus
// Liger-Kernel's softcap and z-loss; docs/Reference/Semantics.md has the
// formulas, including what an out-of-range target gives (NaN, never an
// out-of-bounds read).
//
//===----------------------------------------------------------------------===//

#include "LoweringUtils.h"

#include "liger/Conversion/LigerToLinalg/LigerToLinalg.h"
#include "liger/Dialect/Liger/IR/LigerOps.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Arith/Utils/Utils.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/Transforms/DialectConversion.h"

#include <cmath>

using namespace mlir;
using namespace mlir::liger;
using namespace mlir::liger::lowering;

namespace {

Value add(OpBuilder &b, Location loc, Value x, Value y) {
  return arith::AddFOp::create(b, loc, x, y);
}
Value sub(OpBuilder &b, Location loc, Value x, Value y) {
  return arith::SubFOp::create(b, loc, x, y);
}
Value mul(OpBuilder &b, Location loc, Value x, Value y) {
  return arith::MulFOp::create(b, loc, x, y);
}
Value div(OpBuilder &b, Location loc, Value x, Value y) {
  return arith::DivFOp::create(b, loc, x, y);
}

/// A value computed once per op: the sum of a [N] (or [N, V]) f32 tensor as
/// tensor<f32>.
Value sumAll(OpBuilder &b, Location loc, Value t) {
  Value current = t;
  while (cast<RankedTensorType>(current.getType()).getRank() > 0)
    current = reduceRows(b, loc, sizesOf(b, loc, current),
                         {{current, Access::Full}}, 0.0,
                         [](OpBuilder &nb, Location nloc,
                            ValueRange args) -> SmallVector<Value> {
                           return {add(nb, nloc, args[1], args[0])};
                         });
  return current;
}

/// Elementwise f32 combination of rank-0 tensors.
Value combineScalars(OpBuilder &b, Location loc, ValueRange scalars,
                     ScalarFn fn) {
  SmallVector<RowOperand> ins;
  for (Value s : scalars)
    ins.push_back({s, Access::Full});
  return mapRows(b, loc, {}, ins, {b.getF32Type()}, fn)[0];
}

/// The attributes of the cross-entropy family.
struct CEParams {
  int64_t ignoreIndex;
  double labelSmoothing;
  Reduction reduction;
  std::optional<double> softcap;
  double lseSquareScale;
};

template <typename OpTy> CEParams getCEParams(OpTy op) {
  std::optional<double> softcap;
  if (auto s = op.getSoftcap())
    softcap = s->convertToDouble();
  return {op.getIgnoreIndexAttr().getInt(),
          op.getLabelSmoothing().convertToDouble(), op.getReduction(), softcap,
          op.getLseSquareScale().convertToDouble()};
}

/// What every cross-entropy lowering computes first, per token, in f32:
/// the capped logits z [N, V], their logsumexp [N], and for each token the
/// class index to read (0 when ignored or out of range, so that reads stay in
/// bounds), its class weight, whether it counts and whether its target is
/// valid.
struct CERows {
  Value z;       // f32 [N, V]
  Value lse;     // f32 [N]
  Value index;   // index [N]: target, or 0 when not readable
  Value weightT; // f32 [N]: w[target] (1 without class weights), 0 if ignored
  Value counted; // f32 [N]: 1 if counted, else 0
  Value invalid; // f32 [N]: 1 if the target is neither ignored nor in range
};

CERows buildCERows(OpBuilder &b, Location loc, Value logits, Value target,
                   Value classWeight, const CEParams &p) {
  Type f32Type = b.getF32Type();
  auto logitsType = cast<RankedTensorType>(logits.getType());
  int64_t vocab = logitsType.getDimSize(1);
  SmallVector<OpFoldResult> sizes = sizesOf(b, loc, logits);
  CERows rows;
  rows.z = mapRows(
      b, loc, sizes, {{logits, Access::Full}}, {f32Type},
      [&](OpBuilder &nb, Location nloc, ValueRange args) -> SmallVector<Value> {
        Value x = toF32(nb, nloc, args[0]);
        if (!p.softcap)
          return {x};
        Value s = f32(nb, nloc, *p.softcap);
        return {mul(nb, nloc, s,
                    math::TanhOp::create(nb, nloc, div(nb, nloc, x, s)))};
      })[0];
  Value rowMax = reduceRows(
      b, loc, sizes, {{rows.z, Access::Full}}, -INFINITY,
      [](OpBuilder &nb, Location nloc, ValueRange args) -> SmallVector<Value> {
        return {arith::MaximumFOp::create(nb, nloc, args[1], args[0])};
      });
  Value sumExp = reduceRows(
      b, loc, sizes, {{rows.z, Access::Full}, {rowMax, Access::Row}}, 0.0,
      [](OpBuilder &nb, Location nloc, ValueRange args) -> SmallVector<Value> {
        Value e =
            math::ExpOp::create(nb, nloc, sub(nb, nloc, args[0], args[1]));
        return {add(nb, nloc, args[2], e)};
      });
  SmallVector<OpFoldResult> tokenSizes = {sizes[0]};
  rows.lse = mapRows(
      b, loc, tokenSizes, {{rowMax, Access::Full}, {sumExp, Access::Full}},
      {f32Type},
      [](OpBuilder &nb, Location nloc, ValueRange args) -> SmallVector<Value> {
        return {add(nb, nloc, args[0], math::LogOp::create(nb, nloc, args[1]))};
      })[0];

  auto targetType = cast<RankedTensorType>(target.getType());
  Type intType = targetType.getElementType();
  SmallVector<Value> perToken = mapRows(
      b, loc, tokenSizes, {{target, Access::Full}},
      {b.getIndexType(), f32Type, f32Type, f32Type},
      [&](OpBuilder &nb, Location nloc, ValueRange args) -> SmallVector<Value> {
        Value t = args[0];
        auto intConst = [&](int64_t v) -> Value {
          return arith::ConstantOp::create(nb, nloc,
                                           nb.getIntegerAttr(intType, v));
        };
        Value ignored = arith::CmpIOp::create(
            nb, nloc, arith::CmpIPredicate::eq, t, intConst(p.ignoreIndex));
        Value inRange = arith::AndIOp::create(
            nb, nloc,
            arith::CmpIOp::create(nb, nloc, arith::CmpIPredicate::sge, t,
                                  intConst(0)),
            arith::CmpIOp::create(nb, nloc, arith::CmpIPredicate::slt, t,
                                  intConst(vocab)));
        Value readable = arith::AndIOp::create(
            nb, nloc, inRange,
            arith::XOrIOp::create(
                nb, nloc, ignored,
                arith::ConstantOp::create(nb, nloc, nb.getBoolAttr(true))));
        Value zeroIdx = arith::ConstantIndexOp::create(nb, nloc, 0);
        Value idx = arith::SelectOp::create(
            nb, nloc, readable,
            arith::IndexCastOp::create(nb, nloc, nb.getIndexType(), t),
            zeroIdx);
        Value one = f32(nb, nloc, 1.0), zero = f32(nb, nloc, 0.0);
        Value w = one;
        if (classWeight)
          w = toF32(nb, nloc,
                    tensor::ExtractOp::create(nb, nloc, classWeight,
                                              ValueRange{idx}));
        Value counted = arith::SelectOp::create(nb, nloc, ignored, zero, one);
        Value weightT = arith::SelectOp::create(nb, nloc, ignored, zero, w);
        Value invalid = arith::SelectOp::create(
            nb, nloc, arith::OrIOp::create(nb, nloc, ignored, inRange), zero,
            one);
        return {idx, weightT, counted, invalid};
      });
  rows.index = perToken[0];
  rows.weightT = perToken[1];
  rows.counted = perToken[2];
  rows.invalid = perToken[3];
  return rows;
}

/// NaN where `invalid` is 1, else `v`.
Value poisonInvalid(OpBuilder &b, Location loc, Value v, Value invalid) {
  Value isInvalid = arith::CmpFOp::create(b, loc, arith::CmpFPredicate::ONE,
                                          invalid, f32(b, loc, 0.0));
  return arith::SelectOp::create(b, loc, isInvalid, f32(b, loc, NAN), v);
}

/// Lowers cross_entropy (and, through it, fused_linear_cross_entropy).
SmallVector<Value> buildCrossEntropy(OpBuilder &b, Location loc, Value logits,
                                     Value target, Value classWeight,
                                     const CEParams &p, bool returnZLoss) {
  Type f32Type = b.getF32Type();
  int64_t vocab = cast<RankedTensorType>(logits.getType()).getDimSize(1);
  SmallVector<OpFoldResult> sizes = sizesOf(b, loc, logits);
  SmallVector<OpFoldResult> tokenSizes = {sizes[0]};
  CERows rows = buildCERows(b, loc, logits, target, classWeight, p);

  // Label smoothing: sum_v w_v (lse - z_v), per token.
  Value smooth;
  if (p.labelSmoothing > 0.0) {
    SmallVector<RowOperand> ins = {{rows.z, Access::Full},
                                   {rows.lse, Access::Row}};
    if (classWeight)
      ins.push_back({classWeight, Access::Feature});
    smooth = reduceRows(b, loc, sizes, ins, 0.0,
                        [&](OpBuilder &nb, Location nloc,
                            ValueRange args) -> SmallVector<Value> {
                          Value d = sub(nb, nloc, args[1], args[0]);
                          if (classWeight)
                            d = mul(nb, nloc, d, toF32(nb, nloc, args[2]));
                          return {add(nb, nloc, args.back(), d)};
                        });
  }

  // Per token: the (class-weighted) cross-entropy part and the z-loss part,
  // 0 for ignored tokens, NaN for out-of-range targets.
  SmallVector<RowOperand> ins = {{rows.lse, Access::Full},
                                 {rows.index, Access::Full},
                                 {rows.weightT, Access::Full},
                                 {rows.counted, Access::Full},
                                 {rows.invalid, Access::Full}};
  if (smooth)
    ins.push_back({smooth, Access::Full});
  SmallVector<Value> parts = mapRows(
      b, loc, tokenSizes, ins, {f32Type, f32Type},
      [&](OpBuilder &nb, Location nloc, ValueRange args) -> SmallVector<Value> {
        Value lse = args[0], idx = args[1], wt = args[2], counted = args[3];
        Value zt = tensor::ExtractOp::create(
            nb, nloc, rows.z, ValueRange{loopIndex(nb, nloc, 0), idx});
        Value ce = mul(nb, nloc, wt, sub(nb, nloc, lse, zt));
        if (smooth) {
          Value eps = f32(nb, nloc, p.labelSmoothing);
          Value smoothTerm =
              mul(nb, nloc, counted,
                  div(nb, nloc, args[5], f32(nb, nloc, double(vocab))));
          ce = add(nb, nloc,
                   mul(nb, nloc, sub(nb, nloc, f32(nb, nloc, 1.0), eps), ce),
                   mul(nb, nloc, eps, smoothTerm));
        }
        Value zl = mul(nb, nloc, counted,
                       mul(nb, nloc, f32(nb, nloc, p.lseSquareScale),
                           mul(nb, nloc, lse, lse)));
        return {poisonInvalid(nb, nloc, ce, args[4]),
                poisonInvalid(nb, nloc, zl, args[4])};
      });
  Value ce = parts[0], zl = parts[1];

  if (p.reduction == Reduction::none) {
    Value loss = mapRows(b, loc, tokenSizes,
                         {{ce, Access::Full}, {zl, Access::Full}}, {f32Type},
                         [](OpBuilder &nb, Location nloc,
                            ValueRange args) -> SmallVector<Value> {
                           return {add(nb, nloc, args[0], args[1])};
                         })[0];
    if (returnZLoss)
      return {loss, zl};
    return {loss};
  }
  Value ceSum = sumAll(b, loc, ce), zlSum = sumAll(b, loc, zl);
  Value zOut = zlSum, loss;
  if (p.reduction == Reduction::sum) {
    loss = combineScalars(b, loc, {ceSum, zlSum},
                          [](OpBuilder &nb, Location nloc,
                             ValueRange args) -> SmallVector<Value> {
                            return {add(nb, nloc, args[0], args[1])};
                          });
  } else {
    // mean: the weighted part over the total weight of counted targets, the
    // z-loss over the number of counted tokens (PyTorch: 0/0 = NaN when every
    // token is ignored).
    Value weightSum = sumAll(b, loc, rows.weightT);
    Value count = sumAll(b, loc, rows.counted);
    zOut = combineScalars(b, loc, {zlSum, count},
                          [](OpBuilder &nb, Location nloc,
                             ValueRange args) -> SmallVector<Value> {
                            return {div(nb, nloc, args[0], args[1])};
                          });
    loss = combineScalars(
        b, loc, {ceSum, weightSum, zOut},
        [](OpBuilder &nb, Location nloc,
           ValueRange args) -> SmallVector<Value> {
          return {add(nb, nloc, div(nb, nloc, args[0], args[1]), args[2])};
        });
  }
  if (returnZLoss)
    return {loss, zOut};
  return {loss};
}

struct LowerCrossEntropy : OpConversionPattern<CrossEntropyOp> {
  using OpConversionPattern::OpConversionPattern;
  LogicalResult
  matchAndRewrite(CrossEntropyOp op, OpAdaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    rewriter.replaceOp(
        op, buildCrossEntropy(rewriter, op.getLoc(), adaptor.getLogits(),
                              adaptor.getTarget(), adaptor.getWeight(),
                              getCEParams(op), op.getZLoss() != nullptr));
    return success();
  }
};

/// The logits x · Wᵀ + b of a fused linear cross-entropy, rounded to the
/// input dtype (as F.linear returns them).
Value buildLinearLogits(OpBuilder &b, Location loc, Value hidden, Value weight,
                        Value bias) {
  return roundAccumulator(
      b, loc, matmulTransposedB(b, loc, hidden, weight), bias,
      cast<RankedTensorType>(hidden.getType()).getElementType());
}

/// The reference meaning of fused_linear_cross_entropy: the logits
/// x · Wᵀ + b rounded to the input dtype (as F.linear returns them), then
/// cross-entropy. The CPU lowering materializes them; GPU kernels do not.
struct LowerFusedLinearCrossEntropy
    : OpConversionPattern<FusedLinearCrossEntropyOp> {
  using OpConversionPattern::OpConversionPattern;
  LogicalResult
  matchAndRewrite(FusedLinearCrossEntropyOp op, OpAdaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    Location loc = op.getLoc();
    Value logits = buildLinearLogits(rewriter, loc, adaptor.getHidden(),
                                     adaptor.getWeight(), adaptor.getBias());
    rewriter.replaceOp(op, buildCrossEntropy(rewriter, loc, logits,
                                             adaptor.getTarget(),
                                             adaptor.getClassWeight(),
                                             getCEParams(op),
                                             op.getZLoss() != nullptr));
    return success();
  }
};

/// The gradient of cross_entropy(logits, target) for the incoming gradient
/// `gradLoss`, in the logits' type (cross_entropy_grad's meaning).
Value buildCrossEntropyGrad(OpBuilder &b, Location loc, Value logits,
                            Value target, Value gradLoss, Value classWeight,
                            const CEParams &p) {
  Type f32Type = b.getF32Type();
  auto logitsType = cast<RankedTensorType>(logits.getType());
  int64_t vocab = logitsType.getDimSize(1);
  SmallVector<OpFoldResult> sizes = sizesOf(b, loc, logits);
  SmallVector<OpFoldResult> tokenSizes = {sizes[0]};
  CERows rows = buildCERows(b, loc, logits, target, classWeight, p);

  // The total class weight sum_v w_v (V without weights), for the
  // gradient of the smoothing term.
  Value classWeightSum;
  if (classWeight) {
    classWeightSum =
        sumAll(b, loc,
               mapRows(b, loc, {b.getIndexAttr(vocab)},
                       {{classWeight, Access::Full}}, {f32Type},
                       [](OpBuilder &nb, Location nloc,
                          ValueRange args) -> SmallVector<Value> {
                         return {toF32(nb, nloc, args[0])};
                       })[0]);
  } else {
    classWeightSum =
        filledTensor(b, loc, {}, f32Type, static_cast<double>(vocab));
  }

  // Per-token gradient scales of the weighted part and of the z-loss.
  bool perToken = cast<RankedTensorType>(gradLoss.getType()).getRank() == 1;
  Value weightSum = filledTensor(b, loc, {}, f32Type, 1.0);
  Value count = weightSum;
  if (p.reduction == Reduction::mean) {
    weightSum = sumAll(b, loc, rows.weightT);
    count = sumAll(b, loc, rows.counted);
  }
  SmallVector<Value> scales =
      mapRows(b, loc, tokenSizes,
              {{gradLoss, perToken ? Access::Full : Access::Scalar},
               {weightSum, Access::Scalar},
               {count, Access::Scalar},
               {rows.counted, Access::Full}},
              {f32Type, f32Type},
              [](OpBuilder &nb, Location nloc,
                 ValueRange args) -> SmallVector<Value> {
                Value g = mul(nb, nloc, toF32(nb, nloc, args[0]), args[3]);
                return {div(nb, nloc, g, args[1]), div(nb, nloc, g, args[2])};
              });

  SmallVector<RowOperand> ins = {
      {logits, Access::Full},          {rows.z, Access::Full},
      {rows.lse, Access::Row},         {rows.index, Access::Row},
      {rows.weightT, Access::Row},     {scales[0], Access::Row},
      {scales[1], Access::Row},        {rows.invalid, Access::Row},
      {classWeightSum, Access::Scalar}};
  if (classWeight)
    ins.push_back({classWeight, Access::Feature});
  Value grad = mapRows(
      b, loc, sizes, ins, {logitsType.getElementType()},
      [&](OpBuilder &nb, Location nloc,
          ValueRange args) -> SmallVector<Value> {
        Value x = toF32(nb, nloc, args[0]), z = args[1], lse = args[2];
        Value idx = args[3], wt = args[4], scaleCE = args[5];
        Value scaleZ = args[6], invalid = args[7], wSum = args[8];
        Value wv = classWeight ? toF32(nb, nloc, args[9]) : f32(nb, nloc, 1);
        Value prob = math::ExpOp::create(nb, nloc, sub(nb, nloc, z, lse));
        Value isTarget = arith::CmpIOp::create(
            nb, nloc, arith::CmpIPredicate::eq, loopIndex(nb, nloc, 1), idx);
        Value onehot = arith::SelectOp::create(
            nb, nloc, isTarget, f32(nb, nloc, 1.0), f32(nb, nloc, 0.0));
        // d nll / dz = w_t (p - onehot).
        Value dz = mul(nb, nloc, wt, sub(nb, nloc, prob, onehot));
        if (p.labelSmoothing > 0.0) {
          // d smooth / dz = (p sum_u w_u - w_v) / V.
          Value eps = f32(nb, nloc, p.labelSmoothing);
          Value dSmooth =
              div(nb, nloc, sub(nb, nloc, mul(nb, nloc, prob, wSum), wv),
                  f32(nb, nloc, double(vocab)));
          dz = add(nb, nloc,
                   mul(nb, nloc, sub(nb, nloc, f32(nb, nloc, 1.0), eps), dz),
                   mul(nb, nloc, eps, dSmooth));
        }
        dz = mul(nb, nloc, scaleCE, dz);
        if (p.lseSquareScale > 0.0) {
          Value dzl = mul(nb, nloc, f32(nb, nloc, 2.0 * p.lseSquareScale),
                          mul(nb, nloc, lse, prob));
          dz = add(nb, nloc, dz, mul(nb, nloc, scaleZ, dzl));
        }
        if (p.softcap) {
          // z = s tanh(x / s): dz/dx = 1 - tanh^2(x / s) = sech^2(x / s),
          // computed as 4 e / (1 + e)^2 with e = exp(-2 |x / s|): the
          // form 1 - t^2 cancels catastrophically in f32 where tanh
          // saturates.
          Value a = math::AbsFOp::create(
              nb, nloc, div(nb, nloc, x, f32(nb, nloc, *p.softcap)));
          Value e = math::ExpOp::create(
              nb, nloc, mul(nb, nloc, f32(nb, nloc, -2.0), a));
          Value onePlus = add(nb, nloc, f32(nb, nloc, 1.0), e);
          Value sech2 = div(nb, nloc, mul(nb, nloc, f32(nb, nloc, 4.0), e),
                            mul(nb, nloc, onePlus, onePlus));
          dz = mul(nb, nloc, dz, sech2);
        }
        return {fromF32(nb, nloc, poisonInvalid(nb, nloc, dz, invalid),
                        logitsType.getElementType())};
      })[0];
  return grad;
}

struct LowerCrossEntropyGrad : OpConversionPattern<CrossEntropyGradOp> {
  using OpConversionPattern::OpConversionPattern;
  LogicalResult
  matchAndRewrite(CrossEntropyGradOp op, OpAdaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    rewriter.replaceOp(op, buildCrossEntropyGrad(
                               rewriter, op.getLoc(), adaptor.getLogits(),
                               adaptor.getTarget(), adaptor.getGradLoss(),
                               adaptor.getWeight(), getCEParams(op)));
    return success();
  }
};

/// The reference meaning of fused_linear_cross_entropy_grad: G, the
/// cross-entropy gradient of the materialized logits (in their dtype), then
/// dhidden = G · W, dweight = Gᵀ · hidden (f32 sums rounded to the input
/// dtype) and dbias = Σ_tokens G (rounded to the bias dtype).
struct LowerFusedLinearCrossEntropyGrad
    : OpConversionPattern<FusedLinearCrossEntropyGradOp> {
  using OpConversionPattern::OpConversionPattern;
  LogicalResult
  matchAndRewrite(FusedLinearCrossEntropyGradOp op, OpAdaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    Location loc = op.getLoc();
    MLIRContext *ctx = rewriter.getContext();
    Value hidden = adaptor.getHidden(), weight = adaptor.getWeight();
    Type elem = cast<RankedTensorType>(hidden.getType()).getElementType();
    Value logits =
        buildLinearLogits(rewriter, loc, hidden, weight, adaptor.getBias());
    Value g = buildCrossEntropyGrad(rewriter, loc, logits, adaptor.getTarget(),
                                    adaptor.getGradLoss(),
                                    adaptor.getClassWeight(), getCEParams(op));
    SmallVector<Value> results;
    results.push_back(roundAccumulator(
        rewriter, loc, matmulLastDim(rewriter, loc, g, weight, false), {},
        elem));
    auto wType = cast<RankedTensorType>(weight.getType());
    Value dw = gradWeightF32(rewriter, loc, g, hidden);
    results.push_back(roundAccumulator(rewriter, loc, dw, {}, elem));
    if (Value bias = adaptor.getBias()) {
      // dbias: loops v, then the tokens t (reduction), against ones.
      SmallVector<OpFoldResult> tokens = {sizesOf(rewriter, loc, g)[0]};
      Value ones = filledTensor(rewriter, loc, tokens, rewriter.getF32Type(), 1.0);
      AffineExpr bv = getAffineDimExpr(0, ctx), bt = getAffineDimExpr(1, ctx);
      Value db = contractF32(
          rewriter, loc, g, ones,
          {AffineMap::get(2, 0, {bt, bv}, ctx), AffineMap::get(2, 0, {bt}, ctx),
           AffineMap::get(2, 0, {bv}, ctx)},
          {rewriter.getIndexAttr(wType.getDimSize(0))});
      results.push_back(
          roundAccumulator(rewriter, loc, db, {},
                           cast<RankedTensorType>(bias.getType()).getElementType()));
    }
    rewriter.replaceOp(op, results);
    return success();
  }
};

/// Divides the rank-0 `total` by the f32 value of `count` (an index).
Value divideByCount(OpBuilder &b, Location loc, Value total, Value count) {
  Value countF = arith::UIToFPOp::create(
      b, loc, b.getF32Type(),
      arith::IndexCastUIOp::create(b, loc, b.getI64Type(), count));
  return combineScalars(
      b, loc, {total},
      [&](OpBuilder &nb, Location nloc, ValueRange args) -> SmallVector<Value> {
        return {div(nb, nloc, args[0], countF)};
      });
}

struct LowerKLDiv : OpConversionPattern<KLDivOp> {
  using OpConversionPattern::OpConversionPattern;
  LogicalResult
  matchAndRewrite(KLDivOp op, OpAdaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    Location loc = op.getLoc();
    OpBuilder &b = rewriter;
    Value input = adaptor.getInput();
    SmallVector<OpFoldResult> sizes = sizesOf(b, loc, input);
    bool logTarget = op.getLogTarget();
    double eps = op.getEps().convertToDouble();
    Value pointwise = mapRows(
        b, loc, sizes,
        {{input, Access::Full}, {adaptor.getTarget(), Access::Full}},
        {b.getF32Type()},
        [&](OpBuilder &nb, Location nloc,
            ValueRange args) -> SmallVector<Value> {
          Value x = toF32(nb, nloc, args[0]), t = toF32(nb, nloc, args[1]);
          if (logTarget)
            return {mul(nb, nloc, math::ExpOp::create(nb, nloc, t),
                        sub(nb, nloc, t, x))};
          Value clamped =
              arith::MaximumFOp::create(nb, nloc, t, f32(nb, nloc, eps));
          return {
              mul(nb, nloc, t,
                  sub(nb, nloc, math::LogOp::create(nb, nloc, clamped), x))};
        })[0];
    Value result;
    switch (op.getReduction()) {
    case KLReduction::none:
      result = pointwise;
      break;
    case KLReduction::sum:
      result = sumAll(b, loc, pointwise);
      break;
    case KLReduction::mean: {
      Value rows = getValueOrCreateConstantIndexOp(b, loc, sizes[0]);
      Value cols = getValueOrCreateConstantIndexOp(b, loc, sizes[1]);
      result = divideByCount(b, loc, sumAll(b, loc, pointwise),
                             arith::MulIOp::create(b, loc, rows, cols));
      break;
    }
    case KLReduction::batchmean:
      result = divideByCount(b, loc, sumAll(b, loc, pointwise),
                             getValueOrCreateConstantIndexOp(b, loc, sizes[0]));
      break;
    }
    rewriter.replaceOp(op, result);
    return success();
  }
};

/// Liger-Kernel's generalized JSD: beta = 0 is the forward KL(P || Q),
/// beta = 1 the reverse KL(Q || P), and in between
/// beta KL(P || M) + (1 - beta) KL(Q || M) with M = beta P + (1 - beta) Q.
struct LowerJSD : OpConversionPattern<JSDOp> {
  using OpConversionPattern::OpConversionPattern;
  LogicalResult
  matchAndRewrite(JSDOp op, OpAdaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    Location loc = op.getLoc();
    OpBuilder &b = rewriter;
    Type f32Type = b.getF32Type();
    Value input = adaptor.getInput();
    SmallVector<OpFoldResult> sizes = sizesOf(b, loc, input);
    double beta = op.getBeta().convertToDouble();
    Value perRow = reduceRows(
        b, loc, sizes,
        {{input, Access::Full}, {adaptor.getTarget(), Access::Full}}, 0.0,
        [&](OpBuilder &nb, Location nloc,
            ValueRange args) -> SmallVector<Value> {
          Value x = toF32(nb, nloc, args[0]), y = toF32(nb, nloc, args[1]);
          Value term;
          if (beta == 0.0) {
            term = mul(nb, nloc, math::ExpOp::create(nb, nloc, y),
                       sub(nb, nloc, y, x));
          } else if (beta == 1.0) {
            term = mul(nb, nloc, math::ExpOp::create(nb, nloc, x),
                       sub(nb, nloc, x, y));
          } else {
            Value pv = math::ExpOp::create(nb, nloc, y);
            Value qv = math::ExpOp::create(nb, nloc, x);
            Value bP = mul(nb, nloc, f32(nb, nloc, beta), pv);
            Value bQ = mul(nb, nloc, f32(nb, nloc, 1.0 - beta), qv);
            Value m = add(nb, nloc, bP, bQ);
            term =
                sub(nb, nloc,
                    add(nb, nloc, mul(nb, nloc, bP, y), mul(nb, nloc, bQ, x)),
                    mul(nb, nloc, m, math::LogOp::create(nb, nloc, m)));
          }
          return {add(nb, nloc, args[2], term)};
        });
    Value labels = adaptor.getShiftLabels();
    Value result;
    if (!labels) {
      result = divideByCount(b, loc, sumAll(b, loc, perRow),
                             getValueOrCreateConstantIndexOp(b, loc, sizes[0]));
    } else {
      Type intType = cast<RankedTensorType>(labels.getType()).getElementType();
      int64_t ignoreIndex = op.getIgnoreIndexAttr().getInt();
      SmallVector<Value> masked = mapRows(
          b, loc, {sizes[0]}, {{perRow, Access::Full}, {labels, Access::Full}},
          {f32Type, f32Type},
          [&](OpBuilder &nb, Location nloc,
              ValueRange args) -> SmallVector<Value> {
            Value ignored = arith::CmpIOp::create(
                nb, nloc, arith::CmpIPredicate::eq, args[1],
                arith::ConstantOp::create(
                    nb, nloc, nb.getIntegerAttr(intType, ignoreIndex)));
            Value zero = f32(nb, nloc, 0.0);
            return {arith::SelectOp::create(nb, nloc, ignored, zero, args[0]),
                    arith::SelectOp::create(nb, nloc, ignored, zero,
                                            f32(nb, nloc, 1.0))};
          });
      result = combineScalars(
          b, loc, {sumAll(b, loc, masked[0]), sumAll(b, loc, masked[1])},
          [](OpBuilder &nb, Location nloc,
             ValueRange args) -> SmallVector<Value> {
            return {div(nb, nloc, args[0], args[1])};
          });
    }
    rewriter.replaceOp(op, result);
    return success();
  }
};

} // namespace

void mlir::liger::populateLowerLossesToLinalgPatterns(
    RewritePatternSet &patterns) {
  patterns.add<LowerCrossEntropy, LowerFusedLinearCrossEntropy,
               LowerCrossEntropyGrad, LowerFusedLinearCrossEntropyGrad,
               LowerKLDiv, LowerJSD>(
      patterns.getContext());
}
