//===- ProjectionsToLinalg.cpp - lower projections, RoPE, attention -------===//
//
// linear, lora_linear, attention and attention_grad become f32-accumulating
// linalg.generic contractions followed by an elementwise pass that applies
// the epilogue (bias, LoRA scale, softmax) and rounds; rope and rope_grad
// gather the rotate-half partner of each element with tensor.extract.
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

Type elementTypeOf(Value v) {
  return cast<RankedTensorType>(v.getType()).getElementType();
}

struct LowerLinear : OpConversionPattern<LinearOp> {
  using OpConversionPattern::OpConversionPattern;
  LogicalResult
  matchAndRewrite(LinearOp op, OpAdaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    Location loc = op.getLoc();
    Value x = adaptor.getInput();
    Value acc = matmulTransposedB(rewriter, loc, x, adaptor.getWeight());
    rewriter.replaceOp(op,
                       roundAccumulator(rewriter, loc, acc, adaptor.getBias(),
                                        elementTypeOf(x)));
    return success();
  }
};

struct LowerLoRALinear : OpConversionPattern<LoRALinearOp> {
  using OpConversionPattern::OpConversionPattern;
  LogicalResult
  matchAndRewrite(LoRALinearOp op, OpAdaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    Location loc = op.getLoc();
    OpBuilder &b = rewriter;
    Value x = adaptor.getInput();
    Type elem = elementTypeOf(x);
    double scale = op.getScale().convertToDouble();
    // PEFT rounds the low-rank intermediate x · Aᵀ to the input dtype.
    Value low = roundAccumulator(
        b, loc, matmulTransposedB(b, loc, x, adaptor.getLoraA()), {}, elem);
    Value lowOut = matmulTransposedB(b, loc, low, adaptor.getLoraB());
    Value main = matmulTransposedB(b, loc, x, adaptor.getWeight());
    SmallVector<RowOperand> ins = {{main, Access::Full},
                                   {lowOut, Access::Full}};
    if (Value bias = adaptor.getBias())
      ins.push_back({bias, Access::Feature});
    Value y = mapRows(
        b, loc, sizesOf(b, loc, main), ins, {elem},
        [&](OpBuilder &nb, Location nloc,
            ValueRange args) -> SmallVector<Value> {
          Value v = arith::AddFOp::create(
              nb, nloc, args[0],
              arith::MulFOp::create(nb, nloc, f32(nb, nloc, scale), args[1]));
          if (args.size() > 2)
            v = arith::AddFOp::create(nb, nloc, v, toF32(nb, nloc, args[2]));
          return {fromF32(nb, nloc, v, elem)};
        })[0];
    rewriter.replaceOp(op, y);
    return success();
  }
};

struct LowerLinearGradInput : OpConversionPattern<LinearGradInputOp> {
  using OpConversionPattern::OpConversionPattern;
  LogicalResult
  matchAndRewrite(LinearGradInputOp op, OpAdaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    Location loc = op.getLoc();
    Value dy = adaptor.getGrad();
    Value acc = matmulLastDim(rewriter, loc, dy, adaptor.getWeight(),
                              /*transposedW=*/false);
    rewriter.replaceOp(op, roundAccumulator(rewriter, loc, acc, {},
                                            elementTypeOf(dy)));
    return success();
  }
};

struct LowerLinearGradWeight : OpConversionPattern<LinearGradWeightOp> {
  using OpConversionPattern::OpConversionPattern;
  LogicalResult
  matchAndRewrite(LinearGradWeightOp op, OpAdaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    Location loc = op.getLoc();
    auto dwType = cast<RankedTensorType>(op.getGradWeight().getType());
    Value acc =
        gradWeightF32(rewriter, loc, adaptor.getGrad(), adaptor.getInput());
    Value dw;
    if (Value into = adaptor.getAccumulate()) {
      // The buffer plus the product in f32, rounded once to the buffer's
      // dtype (a no-op for an f32 buffer).
      Type accElem = dwType.getElementType();
      dw = mapRows(rewriter, loc, sizesOf(rewriter, loc, acc),
                   {{into, Access::Full}, {acc, Access::Full}}, {accElem},
                   [&](OpBuilder &nb, Location nloc,
                       ValueRange args) -> SmallVector<Value> {
                     Value sum = arith::AddFOp::create(
                         nb, nloc, toF32(nb, nloc, args[0]), args[1]);
                     return {fromF32(nb, nloc, sum, accElem)};
                   })[0];
    } else {
      dw = roundAccumulator(rewriter, loc, acc, {}, dwType.getElementType());
    }
    rewriter.replaceOp(op, dw);
    return success();
  }
};

/// RoPE of one [B, H, T, D] tensor with cos/sin [B or 1, T, D], in the
/// rotate-half convention. With `inverse` (the gradient), applies the
/// transposed rotation: out[d] = x[d] cos[d] - sign(d) x[p] sin[p], where p is
/// d's partner in the other half and sign(d) is -1 in the first half.
Value buildRoPE(OpBuilder &b, Location loc, Value x, Value cos, Value sin,
                bool inverse) {
  auto xType = cast<RankedTensorType>(x.getType());
  Type elem = xType.getElementType();
  int64_t half = xType.getShape().back() / 2;
  // The tables' batch dimension is 1 (broadcast) or the batch size; a
  // dynamic one is read at run time.
  Value c0 = arith::ConstantIndexOp::create(b, loc, 0);
  Value cosBatch = tensor::DimOp::create(b, loc, cos, 0);
  Value broadcastBatch =
      arith::CmpIOp::create(b, loc, arith::CmpIPredicate::eq, cosBatch,
                            arith::ConstantIndexOp::create(b, loc, 1));
  return mapRows(
      b, loc, sizesOf(b, loc, x), {{x, Access::Full}}, {elem},
      [&](OpBuilder &nb, Location nloc, ValueRange args) -> SmallVector<Value> {
        Value bi = loopIndex(nb, nloc, 0), hi = loopIndex(nb, nloc, 1);
        Value ti = loopIndex(nb, nloc, 2), di = loopIndex(nb, nloc, 3);
        Value halfIdx = arith::ConstantIndexOp::create(nb, nloc, half);
        Value firstHalf = arith::CmpIOp::create(
            nb, nloc, arith::CmpIPredicate::ult, di, halfIdx);
        Value partner = arith::SelectOp::create(
            nb, nloc, firstHalf, arith::AddIOp::create(nb, nloc, di, halfIdx),
            arith::SubIOp::create(nb, nloc, di, halfIdx));
        Value tableBatch =
            arith::SelectOp::create(nb, nloc, broadcastBatch, c0, bi);
        auto table = [&](Value t, Value d) {
          return toF32(nb, nloc,
                       tensor::ExtractOp::create(
                           nb, nloc, t, ValueRange{tableBatch, ti, d}));
        };
        Value xv = toF32(nb, nloc, args[0]);
        Value xp = toF32(nb, nloc,
                         tensor::ExtractOp::create(
                             nb, nloc, x, ValueRange{bi, hi, ti, partner}));
        // rotate_half(x)[d] = -x[d + D/2] in the first half, x[d - D/2] in
        // the second.
        Value sign = arith::SelectOp::create(
            nb, nloc, firstHalf, f32(nb, nloc, -1.0), f32(nb, nloc, 1.0));
        Value rotated = arith::MulFOp::create(nb, nloc, sign, xp);
        Value sinv = table(sin, inverse ? partner : di);
        Value term = arith::MulFOp::create(nb, nloc, rotated, sinv);
        Value base = arith::MulFOp::create(nb, nloc, xv, table(cos, di));
        Value out = inverse
                        ? Value(arith::SubFOp::create(nb, nloc, base, term))
                        : Value(arith::AddFOp::create(nb, nloc, base, term));
        return {fromF32(nb, nloc, out, elem)};
      })[0];
}

template <typename OpTy, bool Inverse>
struct LowerRoPEFamily : OpConversionPattern<OpTy> {
  using OpConversionPattern<OpTy>::OpConversionPattern;
  LogicalResult
  matchAndRewrite(OpTy op, typename OpTy::Adaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    Location loc = op.getLoc();
    ValueRange operands = adaptor.getOperands();
    Value cos = operands[2], sin = operands[3];
    Value q = buildRoPE(rewriter, loc, operands[0], cos, sin, Inverse);
    Value k = buildRoPE(rewriter, loc, operands[1], cos, sin, Inverse);
    rewriter.replaceOp(op, {q, k});
    return success();
  }
};

/// out[i...] = sum over the last `reductions` loop dimensions of
/// lhs[lhsMap] * rhs[rhsMap], in f32, over an f32 result of `sizes` (the
/// first sizes.size() loop dimensions, in order): contractF32's maps.
static Value contract(OpBuilder &b, Location loc, ArrayRef<Value> operands,
                      ArrayRef<OpFoldResult> sizes, ArrayRef<AffineMap> maps,
                      unsigned reductions) {
  unsigned loops = sizes.size() + reductions;
  SmallVector<AffineMap> indexing(maps);
  indexing.push_back(
      AffineMap::getMultiDimIdentityMap(loops, b.getContext())
          .getSubMap(llvm::to_vector(llvm::seq<unsigned>(0, sizes.size()))));
  return contractF32(b, loc, operands[0], operands[1], indexing, sizes);
}

/// liger.attention's probabilities, shared by its lowering and its
/// gradient's: p = softmax(scale q·kᵀ + mask) over the key axis, in f32
/// [B, Hq, T, S] (K/V heads shared by groups of `group` query heads), and
/// when asked the rows' log-sum-exp lse = max + log(sum exp(s - max)), f32
/// [B, Hq, T] (-inf for a row whose keys are all masked).
struct AttentionProbabilities {
  Value probs;
  Value lse;
  /// With a softcap, tanh(scale · q · kᵀ / c) (f32, unmasked): the
  /// gradient's factor 1 - tanh².
  Value capped;
  double scale;
  int64_t group;
  SmallVector<OpFoldResult> qSizes, kSizes, probSizes;
};

/// With `returnLse`, fills in `lse`. With a `savedLse` (the forward's), p =
/// exp(s - lse) instead of the softmax: what a backward kernel computes.
static AttentionProbabilities attentionProbabilities(
    OpBuilder &b, Location loc, Value q, Value k, bool causal,
    std::optional<int64_t> window, std::optional<APFloat> softcapAttr,
    std::optional<APFloat> scaleAttr, bool returnLse, Value savedLse) {
  MLIRContext *ctx = b.getContext();
  auto qType = cast<RankedTensorType>(q.getType());
  auto kType = cast<RankedTensorType>(k.getType());
  AttentionProbabilities a;
  a.group = qType.getDimSize(1) / kType.getDimSize(1);
  a.scale = scaleAttr ? scaleAttr->convertToDouble()
                      : 1.0 / std::sqrt(double(qType.getShape().back()));
  a.qSizes = sizesOf(b, loc, q);
  a.kSizes = sizesOf(b, loc, k);
  auto d = [&](unsigned i) { return getAffineDimExpr(i, ctx); };
  Type f32Type = b.getF32Type();
  int64_t group = a.group;
  double scale = a.scale;

  // scores[b, h, t, s] = sum_d q[b, h, t, d] k[b, h / group, s, d].
  a.probSizes = {a.qSizes[0], a.qSizes[1], a.qSizes[2], a.kSizes[2]};
  Value scores = contract(
      b, loc, {q, k}, a.probSizes,
      {AffineMap::get(5, 0, {d(0), d(1), d(2), d(4)}, ctx),
       AffineMap::get(5, 0, {d(0), d(1).floorDiv(group), d(3), d(4)}, ctx)},
      1);

  // Scale (softcap c: c tanh(s / c), the tanh kept for the gradient) and
  // mask: key j is masked for query i when j > i + (S - T), and with a
  // window W when j <= i + (S - T) - W.
  if (softcapAttr) {
    double cap = softcapAttr->convertToDouble();
    a.capped =
        mapRows(b, loc, a.probSizes, {{scores, Access::Full}}, {f32Type},
                [&](OpBuilder &nb, Location nloc,
                    ValueRange args) -> SmallVector<Value> {
                  return {math::TanhOp::create(
                      nb, nloc,
                      arith::MulFOp::create(nb, nloc, args[0],
                                            f32(nb, nloc, scale / cap)))};
                })[0];
    scores = a.capped;
    scale = cap;
  }
  Value tLen = getValueOrCreateConstantIndexOp(b, loc, a.qSizes[2]);
  Value sLen = getValueOrCreateConstantIndexOp(b, loc, a.kSizes[2]);
  Value shift = arith::SubIOp::create(b, loc, sLen, tLen);
  Value masked = mapRows(
      b, loc, a.probSizes, {{scores, Access::Full}}, {f32Type},
      [&](OpBuilder &nb, Location nloc, ValueRange args) -> SmallVector<Value> {
        Value s =
            arith::MulFOp::create(nb, nloc, args[0], f32(nb, nloc, scale));
        if (!causal)
          return {s};
        Value limit =
            arith::AddIOp::create(nb, nloc, loopIndex(nb, nloc, 2), shift);
        Value key = loopIndex(nb, nloc, 3);
        Value isMasked = arith::CmpIOp::create(
            nb, nloc, arith::CmpIPredicate::sgt, key, limit);
        if (window) {
          Value floor = arith::SubIOp::create(
              nb, nloc, limit,
              arith::ConstantIndexOp::create(nb, nloc, *window));
          isMasked = arith::OrIOp::create(
              nb, nloc, isMasked,
              arith::CmpIOp::create(nb, nloc, arith::CmpIPredicate::sle, key,
                                    floor));
        }
        return {arith::SelectOp::create(nb, nloc, isMasked,
                                        f32(nb, nloc, -INFINITY), s)};
      })[0];

  auto expShifted = [](OpBuilder &nb, Location nloc, Value x, Value m) {
    return math::ExpOp::create(nb, nloc, arith::SubFOp::create(nb, nloc, x, m));
  };
  if (savedLse) {
    a.probs =
        mapRows(b, loc, a.probSizes,
                {{masked, Access::Full}, {savedLse, Access::Row}}, {f32Type},
                [&](OpBuilder &nb, Location nloc,
                    ValueRange args) -> SmallVector<Value> {
                  return {expShifted(nb, nloc, args[0], args[1])};
                })[0];
    return a;
  }

  // Softmax over the key axis, in f32.
  Value rowMax = reduceRows(
      b, loc, a.probSizes, {{masked, Access::Full}}, -INFINITY,
      [](OpBuilder &nb, Location nloc, ValueRange args) -> SmallVector<Value> {
        return {arith::MaximumFOp::create(nb, nloc, args[1], args[0])};
      });
  Value sumExp = reduceRows(
      b, loc, a.probSizes, {{masked, Access::Full}, {rowMax, Access::Row}}, 0.0,
      [&](OpBuilder &nb, Location nloc, ValueRange args) -> SmallVector<Value> {
        return {arith::AddFOp::create(nb, nloc, args[2],
                                      expShifted(nb, nloc, args[0], args[1]))};
      });
  a.probs = mapRows(
      b, loc, a.probSizes,
      {{masked, Access::Full}, {rowMax, Access::Row}, {sumExp, Access::Row}},
      {f32Type},
      [&](OpBuilder &nb, Location nloc, ValueRange args) -> SmallVector<Value> {
        return {arith::DivFOp::create(
            nb, nloc, expShifted(nb, nloc, args[0], args[1]), args[2])};
      })[0];
  if (!returnLse)
    return a;
  // A fully masked row has max = -inf and a NaN sum; its lse is -inf.
  a.lse = mapRows(
      b, loc, ArrayRef(a.probSizes).drop_back(),
      {{rowMax, Access::Full}, {sumExp, Access::Full}}, {f32Type},
      [&](OpBuilder &nb, Location nloc, ValueRange args) -> SmallVector<Value> {
        Value lse = arith::AddFOp::create(
            nb, nloc, args[0], math::LogOp::create(nb, nloc, args[1]));
        Value empty = arith::CmpFOp::create(nb, nloc, arith::CmpFPredicate::OEQ,
                                            args[0], f32(nb, nloc, -INFINITY));
        return {arith::SelectOp::create(nb, nloc, empty, args[0], lse)};
      })[0];
  return a;
}

/// Scaled dot-product attention: the probabilities (above), then p·v
/// accumulated in f32 and rounded to q's type; with return_lse, the rows'
/// log-sum-exp as a second result.
struct LowerAttention : OpConversionPattern<AttentionOp> {
  using OpConversionPattern::OpConversionPattern;
  LogicalResult
  matchAndRewrite(AttentionOp op, OpAdaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    Location loc = op.getLoc();
    OpBuilder &b = rewriter;
    MLIRContext *ctx = b.getContext();
    Value q = adaptor.getQ(), v = adaptor.getV();
    AttentionProbabilities a = attentionProbabilities(
        b, loc, q, adaptor.getK(), op.getCausal(), op.getWindow(),
        op.getSoftcap(), op.getScale(), op.getReturnLse(), Value());
    auto d = [&](unsigned i) { return getAffineDimExpr(i, ctx); };
    // out[b, h, t, e] = sum_s p[b, h, t, s] v[b, h / group, s, e].
    Value out = contract(
        b, loc, {a.probs, v},
        {a.qSizes[0], a.qSizes[1], a.qSizes[2], sizesOf(b, loc, v)[3]},
        {AffineMap::get(5, 0, {d(0), d(1), d(2), d(4)}, ctx),
         AffineMap::get(5, 0, {d(0), d(1).floorDiv(a.group), d(4), d(3)}, ctx)},
        1);
    SmallVector<Value> results = {
        roundAccumulator(b, loc, out, {}, getElementTypeOrSelf(q.getType()))};
    if (a.lse)
      results.push_back(a.lse);
    rewriter.replaceOp(op, results);
    return success();
  }
};

/// liger.attention_grad: the probabilities recomputed (above), then in f32
/// dp = grad·vᵀ, ds = p (dp - D) scale with D = rowsum(p dp), dq = ds·k,
/// and the key/value heads' dk = dsᵀ·q and dv = pᵀ·grad summed over the
/// query heads of their group; each rounded to its operand's type. With the
/// forward's saved out and lse, p = exp(s - lse) and D = rowsum(grad out),
/// as a backward kernel computes them.
struct LowerAttentionGrad : OpConversionPattern<AttentionGradOp> {
  using OpConversionPattern::OpConversionPattern;
  LogicalResult
  matchAndRewrite(AttentionGradOp op, OpAdaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    Location loc = op.getLoc();
    OpBuilder &b = rewriter;
    MLIRContext *ctx = b.getContext();
    Value dy = adaptor.getGrad(), q = adaptor.getQ(), k = adaptor.getK(),
          v = adaptor.getV();
    Value savedOut = adaptor.getOut();
    AttentionProbabilities a = attentionProbabilities(
        b, loc, q, k, op.getCausal(), op.getWindow(), op.getSoftcap(),
        op.getScale(), /*returnLse=*/false, adaptor.getLse());
    auto d = [&](unsigned i) { return getAffineDimExpr(i, ctx); };
    Type f32Type = b.getF32Type();
    int64_t group = a.group;
    // [B, Hq, ...] as [B, Hkv, group, ...]: query head j group + g.
    auto byGroup = [&](Value t) {
      auto type = cast<RankedTensorType>(t.getType());
      SmallVector<int64_t> shape(type.getShape());
      shape[1] /= group;
      shape.insert(shape.begin() + 2, group);
      SmallVector<OpFoldResult> sizes = sizesOf(b, loc, t);
      sizes[1] = b.getIndexAttr(shape[1]);
      sizes.insert(sizes.begin() + 2, b.getIndexAttr(group));
      return tensor::ExpandShapeOp::create(
                 b, loc, RankedTensorType::get(shape, type.getElementType()), t,
                 SmallVector<ReassociationIndices>{{0}, {1, 2}, {3}, {4}},
                 sizes)
          .getResult();
    };

    // dp[b, h, t, s] = sum_e grad[b, h, t, e] v[b, h / group, s, e].
    Value dp = contract(
        b, loc, {dy, v}, a.probSizes,
        {AffineMap::get(5, 0, {d(0), d(1), d(2), d(4)}, ctx),
         AffineMap::get(5, 0, {d(0), d(1).floorDiv(group), d(3), d(4)}, ctx)},
        1);
    // D = rowsum(grad out) over [B, Hq, T, Dv] with the saved output, else
    // rowsum(p dp) over [B, Hq, T, S]; in f32.
    auto rowSum = [](OpBuilder &nb, Location nloc,
                     ValueRange args) -> SmallVector<Value> {
      Value product = arith::MulFOp::create(nb, nloc, toF32(nb, nloc, args[0]),
                                            toF32(nb, nloc, args[1]));
      return {arith::AddFOp::create(nb, nloc, args[2], product)};
    };
    Value rowDot =
        savedOut ? reduceRows(b, loc, sizesOf(b, loc, dy),
                              {{dy, Access::Full}, {savedOut, Access::Full}},
                              0.0, rowSum)
                 : reduceRows(b, loc, a.probSizes,
                              {{a.probs, Access::Full}, {dp, Access::Full}},
                              0.0, rowSum);
    // ds = p (dp - D) scale, times 1 - tanh² of the capped scores with a
    // softcap.
    double scale = a.scale;
    SmallVector<RowOperand> dsInputs = {
        {a.probs, Access::Full}, {dp, Access::Full}, {rowDot, Access::Row}};
    if (a.capped)
      dsInputs.push_back({a.capped, Access::Full});
    Value ds = mapRows(
        b, loc, a.probSizes, dsInputs, {f32Type},
        [&](OpBuilder &nb, Location nloc,
            ValueRange args) -> SmallVector<Value> {
          Value centered = arith::SubFOp::create(nb, nloc, args[1], args[2]);
          Value g = arith::MulFOp::create(nb, nloc, args[0], centered);
          if (a.capped) {
            Value t2 = arith::MulFOp::create(nb, nloc, args[3], args[3]);
            g = arith::MulFOp::create(
                nb, nloc, g,
                arith::SubFOp::create(nb, nloc, f32(nb, nloc, 1.0), t2));
          }
          return {arith::MulFOp::create(nb, nloc, g, f32(nb, nloc, scale))};
        })[0];
    SmallVector<OpFoldResult> vSizes = sizesOf(b, loc, v);
    // dq[b, h, t, d] = sum_s ds[b, h, t, s] k[b, h / group, s, d].
    Value dq = contract(
        b, loc, {ds, k}, a.qSizes,
        {AffineMap::get(5, 0, {d(0), d(1), d(2), d(4)}, ctx),
         AffineMap::get(5, 0, {d(0), d(1).floorDiv(group), d(4), d(3)}, ctx)},
        1);
    // dk[b, j, s, d] = sum_{g, t} ds[b, j, g, t, s] q[b, j, g, t, d] and
    // dv[b, j, s, e] = sum_{g, t} p[b, j, g, t, s] grad[b, j, g, t, e]
    // (the query heads j group + g of key/value head j).
    SmallVector<AffineMap> perKeyHead = {
        AffineMap::get(6, 0, {d(0), d(1), d(4), d(5), d(2)}, ctx),
        AffineMap::get(6, 0, {d(0), d(1), d(4), d(5), d(3)}, ctx)};
    Value dk =
        contract(b, loc, {byGroup(ds), byGroup(q)}, a.kSizes, perKeyHead, 2);
    Value dv = contract(b, loc, {byGroup(a.probs), byGroup(dy)}, vSizes,
                        perKeyHead, 2);
    SmallVector<Value> results;
    Value sums[] = {dq, dk, dv}, operands[] = {q, k, v};
    for (auto [value, like] : llvm::zip_equal(sums, operands))
      results.push_back(roundAccumulator(b, loc, value, {},
                                         getElementTypeOrSelf(like.getType())));
    rewriter.replaceOp(op, results);
    return success();
  }
};

} // namespace

void mlir::liger::populateLowerProjectionsToLinalgPatterns(
    RewritePatternSet &patterns) {
  patterns.add<LowerLinear, LowerLoRALinear, LowerLinearGradInput,
               LowerLinearGradWeight, LowerRoPEFamily<RoPEOp, false>,
               LowerRoPEFamily<RoPEGradOp, true>, LowerAttention,
               LowerAttentionGrad>(patterns.getContext());
}
