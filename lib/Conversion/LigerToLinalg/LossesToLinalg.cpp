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

/// exp and log of f32 elements with `afn`, the per-element transcendentals
/// of the losses' row programs: in a row kernel ex2.approx.ftz of x log2 e
/// (RowKernel.cpp's lowerFastExps; elsewhere __nv_fast_expf, ex2.approx)
/// and __nv_fast_logf (lg2.approx times ln 2), relative error
/// about 2^-21 (+ |x| 2^-24 for exp), where the default forms take ten and
/// twenty instructions and a row of three transcendentals an element is
/// bound by its instructions, not by its loads; on the CPU the flag changes
/// nothing (libm).
Value fastExp(OpBuilder &b, Location loc, Value x) {
  return math::ExpOp::create(b, loc, x, arith::FastMathFlags::afn);
}
Value fastLog(OpBuilder &b, Location loc, Value x) {
  return math::LogOp::create(b, loc, x, arith::FastMathFlags::afn);
}

/// The log-sum-exp [N] of each row of the f32 [N, V] `z`, as max + log(sum
/// exp(z - max)): the max and the sum of exponentials are the pair a row
/// kernel runs as one online pass. `fast`: its exponentials are fastExp's
/// (the JSD's log-softmax); the cross-entropy keeps exact ones, its loss
/// lse - z[target] cancelling where the target's logit is the largest (a
/// 1e-4 relative error of a one-token loss over 7 classes with fastExp).
/// (A looped row kernel runs the pair as its own online max and sum, whose
/// exponentials are exact either way: RowKernel.cpp's.)
Value rowLogSumExp(OpBuilder &b, Location loc, ArrayRef<OpFoldResult> sizes,
                   Value z, bool fast) {
  Value rowMax = reduceRows(
      b, loc, sizes, {{z, Access::Full}}, -INFINITY,
      [](OpBuilder &nb, Location nloc, ValueRange args) -> SmallVector<Value> {
        return {arith::MaximumFOp::create(nb, nloc, args[1], args[0])};
      });
  Value sumExp = reduceRows(
      b, loc, sizes, {{z, Access::Full}, {rowMax, Access::Row}}, 0.0,
      [&](OpBuilder &nb, Location nloc, ValueRange args) -> SmallVector<Value> {
        Value shifted = sub(nb, nloc, args[0], args[1]);
        Value e = fast ? fastExp(nb, nloc, shifted)
                       : math::ExpOp::create(nb, nloc, shifted);
        return {add(nb, nloc, args[2], e)};
      });
  return mapRows(
      b, loc, {sizes[0]}, {{rowMax, Access::Full}, {sumExp, Access::Full}},
      {b.getF32Type()},
      [](OpBuilder &nb, Location nloc, ValueRange args) -> SmallVector<Value> {
        return {add(nb, nloc, args[0], math::LogOp::create(nb, nloc, args[1]))};
      })[0];
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
  rows.lse = rowLogSumExp(b, loc, sizes, rows.z, /*fast=*/false);
  SmallVector<OpFoldResult> tokenSizes = {sizes[0]};

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
                // An ignored token's scales are 0, whatever the incoming
                // gradient and the totals: a batch with no counted token
                // (totals 0) has a zero gradient, as in PyTorch.
                Value g = toF32(nb, nloc, args[0]);
                Value ignored = arith::CmpFOp::create(
                    nb, nloc, arith::CmpFPredicate::OEQ, args[3],
                    f32(nb, nloc, 0.0));
                auto share = [&](Value total) -> Value {
                  return arith::SelectOp::create(nb, nloc, ignored,
                                                 f32(nb, nloc, 0.0),
                                                 div(nb, nloc, g, total));
                };
                return {share(args[1]), share(args[2])};
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

/// The f32 count of tokens, rows of `sizes` [N, V] (for batchmean and a
/// JSD without labels), or rows times vocabulary (kl_div's mean).
Value countOf(OpBuilder &b, Location loc, ArrayRef<OpFoldResult> sizes,
              bool elements) {
  Value count = getValueOrCreateConstantIndexOp(b, loc, sizes[0]);
  if (elements)
    count = arith::MulIOp::create(
        b, loc, count, getValueOrCreateConstantIndexOp(b, loc, sizes[1]));
  return arith::UIToFPOp::create(
      b, loc, b.getF32Type(),
      arith::IndexCastUIOp::create(b, loc, b.getI64Type(), count));
}

/// KL divergence's pointwise term of input x and target t (f32).
Value klPointwise(OpBuilder &b, Location loc, Value x, Value t, bool logTarget,
                  double eps) {
  if (logTarget)
    return mul(b, loc, fastExp(b, loc, t), sub(b, loc, t, x));
  Value clamped = arith::MaximumFOp::create(b, loc, t, f32(b, loc, eps));
  return mul(b, loc, t, sub(b, loc, fastLog(b, loc, clamped), x));
}

/// The derivative of klPointwise with respect to x: -t, or -exp(t).
Value klDerivative(OpBuilder &b, Location loc, Value t, bool logTarget) {
  return arith::NegFOp::create(b, loc, logTarget ? fastExp(b, loc, t) : t);
}

/// The divisor of a reduced kl_div's total (1 for sum).
Value klDivisor(OpBuilder &b, Location loc, ArrayRef<OpFoldResult> sizes,
                KLReduction reduction) {
  if (reduction == KLReduction::batchmean || reduction == KLReduction::mean)
    return countOf(b, loc, sizes, reduction == KLReduction::mean);
  return f32(b, loc, 1.0);
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
    SmallVector<RowOperand> operands = {{input, Access::Full},
                                        {adaptor.getTarget(), Access::Full}};
    KLReduction reduction = op.getReduction();
    if (reduction == KLReduction::none) {
      rewriter.replaceOp(
          op, mapRows(b, loc, sizes, operands, {b.getF32Type()},
                      [&](OpBuilder &nb, Location nloc,
                          ValueRange args) -> SmallVector<Value> {
                        return {klPointwise(nb, nloc, toF32(nb, nloc, args[0]),
                                            toF32(nb, nloc, args[1]), logTarget,
                                            eps)};
                      })[0]);
      return success();
    }
    // The sums per token (one step a row kernel runs), then the total.
    Value perToken = reduceRows(
        b, loc, sizes, operands, 0.0,
        [&](OpBuilder &nb, Location nloc,
            ValueRange args) -> SmallVector<Value> {
          return {add(nb, nloc, args[2],
                      klPointwise(nb, nloc, toF32(nb, nloc, args[0]),
                                  toF32(nb, nloc, args[1]), logTarget, eps))};
        });
    if (op.getPerToken()) {
      rewriter.replaceOp(op, perToken);
      return success();
    }
    Value divisor = klDivisor(b, loc, sizes, reduction);
    rewriter.replaceOp(
        op, combineScalars(b, loc, {sumAll(b, loc, perToken)},
                           [&](OpBuilder &nb, Location nloc,
                               ValueRange args) -> SmallVector<Value> {
                             return {div(nb, nloc, args[0], divisor)};
                           }));
    return success();
  }
};

struct LowerKLDivGrad : OpConversionPattern<KLDivGradOp> {
  using OpConversionPattern::OpConversionPattern;
  LogicalResult
  matchAndRewrite(KLDivGradOp op, OpAdaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    Location loc = op.getLoc();
    OpBuilder &b = rewriter;
    Value target = adaptor.getTarget();
    Type elementType =
        cast<RankedTensorType>(target.getType()).getElementType();
    SmallVector<OpFoldResult> sizes = sizesOf(b, loc, target);
    KLReduction reduction = op.getReduction();
    bool perToken = op.getPerToken(), logTarget = op.getLogTarget();
    Access gradAccess = reduction == KLReduction::none ? Access::Full
                        : perToken                     ? Access::Row
                                                       : Access::Scalar;
    // The scale of a reduced loss's incoming gradient (none for the forms a
    // row kernel computes: their bodies read nothing but their operands).
    Value divisor = gradAccess == Access::Scalar
                        ? klDivisor(b, loc, sizes, reduction)
                        : Value();
    rewriter.replaceOp(
        op,
        mapRows(b, loc, sizes,
                {{target, Access::Full}, {adaptor.getGradLoss(), gradAccess}},
                {elementType},
                [&](OpBuilder &nb, Location nloc,
                    ValueRange args) -> SmallVector<Value> {
                  Value g = toF32(nb, nloc, args[1]);
                  if (divisor)
                    g = div(nb, nloc, g, divisor);
                  Value d = mul(nb, nloc,
                                klDerivative(nb, nloc, toF32(nb, nloc, args[0]),
                                             logTarget),
                                g);
                  return {fromF32(nb, nloc, d, elementType)};
                })[0]);
    return success();
  }
};

/// input * factor, in f32, rounded once (a scalar factor for every row or
/// one per row).
struct LowerScale : OpConversionPattern<ScaleOp> {
  using OpConversionPattern::OpConversionPattern;
  LogicalResult
  matchAndRewrite(ScaleOp op, OpAdaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    Location loc = op.getLoc();
    OpBuilder &b = rewriter;
    Value input = adaptor.getInput(), factor = adaptor.getFactor();
    Type elementType = cast<RankedTensorType>(input.getType()).getElementType();
    Access factorAccess = cast<RankedTensorType>(factor.getType()).getRank()
                              ? Access::Row
                              : Access::Scalar;
    rewriter.replaceOp(
        op,
        mapRows(b, loc, sizesOf(b, loc, input),
                {{input, Access::Full}, {factor, factorAccess}}, {elementType},
                [&](OpBuilder &nb, Location nloc,
                    ValueRange args) -> SmallVector<Value> {
                  return {
                      fromF32(nb, nloc,
                              mul(nb, nloc, toF32(nb, nloc, args[0]), args[1]),
                              elementType)};
                })[0]);
    return success();
  }
};

/// The generalized JSD of student x and teacher y (f32) at one element,
/// Liger-Kernel's: beta = 0 is the forward KL(P || Q), beta = 1 the reverse
/// KL(Q || P), and in between beta KL(P || M) + (1 - beta) KL(Q || M) with
/// M = beta P + (1 - beta) Q. `withLoss` / `withGrad` / `withQ` pick the
/// pointwise loss, its derivative with respect to x (one log M for both)
/// and Q.
struct JSDTerms {
  Value loss, grad;
  /// Q = e^x, the student's probability (`withQ`), from the terms' own
  /// exponentials where they take it.
  Value q;
};
JSDTerms jsdTerms(OpBuilder &b, Location loc, Value x, Value y, double beta,
                  bool withLoss, bool withGrad, bool withQ = false) {
  JSDTerms terms;
  if (beta == 0.0) {
    Value p = fastExp(b, loc, y);
    if (withLoss)
      terms.loss = mul(b, loc, p, sub(b, loc, y, x));
    if (withGrad)
      terms.grad = arith::NegFOp::create(b, loc, p);
    if (withQ)
      terms.q = fastExp(b, loc, x);
    return terms;
  }
  if (beta == 1.0) {
    Value q = fastExp(b, loc, x);
    Value diff = sub(b, loc, x, y);
    if (withLoss)
      terms.loss = mul(b, loc, q, diff);
    if (withGrad)
      terms.grad = mul(b, loc, q, add(b, loc, diff, f32(b, loc, 1.0)));
    if (withQ)
      terms.q = q;
    return terms;
  }
  // log M = max + log(beta e^(y - max) + (1 - beta) e^(x - max)): M itself
  // underflows where both probabilities are tiny. One of the two
  // exponentials is 1, the other e = e^-|x - y|, and Q and P are e^max
  // times theirs: three transcendentals an element, not five.
  Value big = arith::MaximumFOp::create(b, loc, x, y);
  Value xBig = arith::CmpFOp::create(b, loc, arith::CmpFPredicate::OGE, x, y);
  Value e =
      fastExp(b, loc,
              arith::NegFOp::create(
                  b, loc, math::AbsFOp::create(b, loc, sub(b, loc, x, y))));
  Value one = f32(b, loc, 1.0);
  Value xPart = arith::SelectOp::create(b, loc, xBig, one, e); // e^(x - max)
  Value yPart = arith::SelectOp::create(b, loc, xBig, e, one); // e^(y - max)
  Value top = fastExp(b, loc, big);
  Value shifted = add(b, loc, mul(b, loc, f32(b, loc, beta), yPart),
                      mul(b, loc, f32(b, loc, 1.0 - beta), xPart));
  Value logM = add(b, loc, big, fastLog(b, loc, shifted));
  Value q = mul(b, loc, top, xPart);
  Value bQ = mul(b, loc, f32(b, loc, 1.0 - beta), q);
  Value qTerm = mul(b, loc, bQ, sub(b, loc, x, logM));
  if (withLoss) {
    Value bP = mul(b, loc, f32(b, loc, beta), mul(b, loc, top, yPart));
    terms.loss = add(b, loc, mul(b, loc, bP, sub(b, loc, y, logM)), qTerm);
  }
  if (withGrad)
    terms.grad = qTerm;
  if (withQ)
    terms.q = q;
  return terms;
}

/// Whether a token's `label` (an integer) is `ignoreIndex`.
Value isIgnored(OpBuilder &b, Location loc, Value label, int64_t ignoreIndex) {
  return arith::CmpIOp::create(
      b, loc, arith::CmpIPredicate::eq, label,
      arith::ConstantOp::create(
          b, loc, b.getIntegerAttr(label.getType(), ignoreIndex)));
}

/// One f32 per token: `values` [N] where the token counts, 0 where its
/// label is `ignoreIndex` (`values` itself without labels).
Value maskIgnored(OpBuilder &b, Location loc, ArrayRef<OpFoldResult> sizes,
                  Value values, Value labels, int64_t ignoreIndex) {
  if (!labels)
    return values;
  return mapRows(
      b, loc, {sizes[0]}, {{values, Access::Full}, {labels, Access::Full}},
      {b.getF32Type()},
      [&](OpBuilder &nb, Location nloc, ValueRange args) -> SmallVector<Value> {
        Value ignored = isIgnored(nb, nloc, args[1], ignoreIndex);
        return {arith::SelectOp::create(nb, nloc, ignored, f32(nb, nloc, 0.0),
                                        args[0])};
      })[0];
}

/// `values` [N, V] with the rows of the tokens whose label is `ignoreIndex`
/// set to 0 by a select (`values` itself without labels): an ignored row's
/// gradient is 0 whatever its operands hold (-inf or NaN included), where
/// a product with a 0 scale would keep their NaNs.
Value zeroIgnoredRows(OpBuilder &b, Location loc, ArrayRef<OpFoldResult> sizes,
                      Value values, Value labels, int64_t ignoreIndex) {
  if (!labels)
    return values;
  Type elementType = cast<RankedTensorType>(values.getType()).getElementType();
  return mapRows(
      b, loc, sizes, {{values, Access::Full}, {labels, Access::Row}},
      {elementType},
      [&](OpBuilder &nb, Location nloc, ValueRange args) -> SmallVector<Value> {
        Value ignored = isIgnored(nb, nloc, args[1], ignoreIndex);
        Value zero = arith::ConstantOp::create(
            nb, nloc, nb.getFloatAttr(elementType, 0.0));
        return {arith::SelectOp::create(nb, nloc, ignored, zero, args[0])};
      })[0];
}

/// The counted tokens of a JSD (those whose label is not `ignoreIndex`, all
/// without labels), at least 1: a loss over no token is 0, as in
/// Liger-Kernel, and so is its gradient.
Value jsdCount(OpBuilder &b, Location loc, ArrayRef<OpFoldResult> sizes,
               Value labels, int64_t ignoreIndex) {
  if (!labels)
    return combineScalars(
        b, loc, {},
        [&](OpBuilder &nb, Location nloc, ValueRange) -> SmallVector<Value> {
          return {countOf(nb, nloc, sizes, false)};
        });
  Value ones = filledTensor(b, loc, {sizes[0]}, b.getF32Type(), 1.0);
  Value counted =
      sumAll(b, loc, maskIgnored(b, loc, sizes, ones, labels, ignoreIndex));
  return combineScalars(
      b, loc, {counted},
      [](OpBuilder &nb, Location nloc, ValueRange args) -> SmallVector<Value> {
        return {
            arith::MaximumFOp::create(nb, nloc, args[0], f32(nb, nloc, 1.0))};
      });
}

/// A JSD's temperature: set where its operands are logits.
template <typename OpTy> std::optional<double> jsdTemperature(OpTy op) {
  if (auto t = op.getTemperature())
    return t->convertToDouble();
  return std::nullopt;
}

/// The log-probabilities of a JSD operand `x` [N, V]: `x` itself, or with a
/// `temperature` (x holds logits) log_softmax(x / T) in f32.
Value jsdLogProbs(OpBuilder &b, Location loc, ArrayRef<OpFoldResult> sizes,
                  Value x, std::optional<double> temperature) {
  if (!temperature)
    return x;
  Value z = mapRows(
      b, loc, sizes, {{x, Access::Full}}, {b.getF32Type()},
      [&](OpBuilder &nb, Location nloc, ValueRange args) -> SmallVector<Value> {
        return {mul(nb, nloc, toF32(nb, nloc, args[0]),
                    f32(nb, nloc, 1.0 / *temperature))};
      })[0];
  Value lse = rowLogSumExp(b, loc, sizes, z, /*fast=*/true);
  return mapRows(
      b, loc, sizes, {{z, Access::Full}, {lse, Access::Row}}, {b.getF32Type()},
      [](OpBuilder &nb, Location nloc, ValueRange args) -> SmallVector<Value> {
        return {sub(nb, nloc, args[0], args[1])};
      })[0];
}

struct LowerJSD : OpConversionPattern<JSDOp> {
  using OpConversionPattern::OpConversionPattern;
  LogicalResult
  matchAndRewrite(JSDOp op, OpAdaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    Location loc = op.getLoc();
    OpBuilder &b = rewriter;
    Value input = adaptor.getInput();
    SmallVector<OpFoldResult> sizes = sizesOf(b, loc, input);
    double beta = op.getBeta().convertToDouble();
    int64_t ignoreIndex = op.getIgnoreIndexAttr().getInt();
    Value labels = adaptor.getShiftLabels();
    std::optional<double> temperature = jsdTemperature(op);
    Value perRow = reduceRows(
        b, loc, sizes,
        {{jsdLogProbs(b, loc, sizes, input, temperature), Access::Full},
         {jsdLogProbs(b, loc, sizes, adaptor.getTarget(), temperature),
          Access::Full}},
        0.0,
        [&](OpBuilder &nb, Location nloc,
            ValueRange args) -> SmallVector<Value> {
          Value term = jsdTerms(nb, nloc, toF32(nb, nloc, args[0]),
                                toF32(nb, nloc, args[1]), beta, true, false)
                           .loss;
          return {add(nb, nloc, args[2], term)};
        });
    Value perToken = maskIgnored(b, loc, sizes, perRow, labels, ignoreIndex);
    if (op.getPerToken()) {
      rewriter.replaceOp(op, perToken);
      return success();
    }
    rewriter.replaceOp(
        op, combineScalars(b, loc,
                           {sumAll(b, loc, perToken),
                            jsdCount(b, loc, sizes, labels, ignoreIndex)},
                           [](OpBuilder &nb, Location nloc,
                              ValueRange args) -> SmallVector<Value> {
                             return {div(nb, nloc, args[0], args[1])};
                           }));
    return success();
  }
};

struct LowerJSDGrad : OpConversionPattern<JSDGradOp> {
  using OpConversionPattern::OpConversionPattern;
  LogicalResult
  matchAndRewrite(JSDGradOp op, OpAdaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    Location loc = op.getLoc();
    OpBuilder &b = rewriter;
    Value input = adaptor.getInput();
    Type elementType = cast<RankedTensorType>(input.getType()).getElementType();
    SmallVector<OpFoldResult> sizes = sizesOf(b, loc, input);
    double beta = op.getBeta().convertToDouble();
    int64_t ignoreIndex = op.getIgnoreIndexAttr().getInt();
    Value labels = adaptor.getShiftLabels();
    // The scale of each token's gradient: its incoming gradient (per token),
    // or the reduced loss's over the counted tokens; 0 where skipped.
    Value grad = adaptor.getGradLoss();
    if (!op.getPerToken()) {
      Value scalar = combineScalars(
          b, loc, {grad, jsdCount(b, loc, sizes, labels, ignoreIndex)},
          [](OpBuilder &nb, Location nloc,
             ValueRange args) -> SmallVector<Value> {
            return {div(nb, nloc, args[0], args[1])};
          });
      grad = mapRows(
          b, loc, {sizes[0]}, {{scalar, Access::Scalar}}, {b.getF32Type()},
          [](OpBuilder &, Location, ValueRange args) -> SmallVector<Value> {
            return {args[0]};
          })[0];
    }
    Value scale = maskIgnored(b, loc, sizes, grad, labels, ignoreIndex);
    std::optional<double> temperature = jsdTemperature(op);
    Value logQ = jsdLogProbs(b, loc, sizes, input, temperature);
    Value logP = jsdLogProbs(b, loc, sizes, adaptor.getTarget(), temperature);
    RowOperand operands[] = {
        {logQ, Access::Full}, {logP, Access::Full}, {scale, Access::Row}};
    // The gradient with respect to the log-probabilities, scaled, in the
    // operand's type (f32 for logits: the log-softmax's backward follows).
    Type dType = temperature ? b.getF32Type() : elementType;
    Value d =
        mapRows(b, loc, sizes, operands, {dType},
                [&](OpBuilder &nb, Location nloc,
                    ValueRange args) -> SmallVector<Value> {
                  Value d =
                      jsdTerms(nb, nloc, toF32(nb, nloc, args[0]),
                               toF32(nb, nloc, args[1]), beta, false, true)
                          .grad;
                  return {fromF32(nb, nloc, mul(nb, nloc, d, args[2]), dType)};
                })[0];
    if (temperature) {
      // Through log_softmax(z / T): (d - softmax · sum(d)) / T, where the
      // softmax is the terms' own Q and d is formed again beside it (a row
      // kernel's pass after the sum recomputes d either way: no third
      // exponential an element for the softmax).
      Value sumD = reduceRows(b, loc, sizes, {{d, Access::Full}}, 0.0,
                              [](OpBuilder &nb, Location nloc,
                                 ValueRange args) -> SmallVector<Value> {
                                return {add(nb, nloc, args[1], args[0])};
                              });
      SmallVector<RowOperand> withSum(std::begin(operands), std::end(operands));
      withSum.push_back({sumD, Access::Row});
      d = mapRows(
          b, loc, sizes, withSum, {elementType},
          [&](OpBuilder &nb, Location nloc,
              ValueRange args) -> SmallVector<Value> {
            // (Log-probabilities of logits are f32: jsdLogProbs.)
            assert(args[0].getType().isF32() && args[1].getType().isF32());
            JSDTerms terms =
                jsdTerms(nb, nloc, args[0], args[1], beta, false, true, true);
            Value g = sub(nb, nloc, mul(nb, nloc, terms.grad, args[2]),
                          mul(nb, nloc, terms.q, args[3]));
            return {fromF32(nb, nloc,
                            mul(nb, nloc, g, f32(nb, nloc, 1.0 / *temperature)),
                            elementType)};
          })[0];
    }
    rewriter.replaceOp(op,
                       zeroIgnoredRows(b, loc, sizes, d, labels, ignoreIndex));
    return success();
  }
};

} // namespace

void mlir::liger::populateLowerLossesToLinalgPatterns(
    RewritePatternSet &patterns) {
  patterns.add<LowerCrossEntropy, LowerFusedLinearCrossEntropy,
               LowerCrossEntropyGrad, LowerFusedLinearCrossEntropyGrad,
               LowerKLDiv, LowerKLDivGrad, LowerJSD, LowerJSDGrad, LowerScale>(
      patterns.getContext());
}
