//===- ElementwiseToLinalg.cpp - lower elementwise liger ops to linalg ----===//
//
// silu, gelu, swiglu, geglu, add, mul, swiglu_grad, geglu_grad, softmax and
// softmax_grad: every value
// is extended to f32, computed, and rounded once to the result type.
//
//===----------------------------------------------------------------------===//

#include "LoweringUtils.h"

#include "liger/Conversion/LigerToLinalg/LigerToLinalg.h"
#include "liger/Dialect/Liger/IR/LigerOps.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Transforms/DialectConversion.h"

#include <cmath>

using namespace mlir;
using namespace mlir::liger;
using namespace mlir::liger::lowering;

namespace {

/// sigmoid(x) = 1 / (1 + exp(-x)), in f32.
Value sigmoid(OpBuilder &b, Location loc, Value x) {
  Value e = math::ExpOp::create(b, loc, arith::NegFOp::create(b, loc, x));
  return arith::DivFOp::create(
      b, loc, f32(b, loc, 1.0),
      arith::AddFOp::create(b, loc, f32(b, loc, 1.0), e));
}

Value silu(OpBuilder &b, Location loc, Value x) {
  return arith::MulFOp::create(b, loc, x, sigmoid(b, loc, x));
}

/// GELU in f32, exact (erf) or with PyTorch's tanh approximation.
Value gelu(OpBuilder &b, Location loc, Value x, GeluApproximation approx) {
  Value inner;
  if (approx == GeluApproximation::tanh) {
    Value x3 =
        arith::MulFOp::create(b, loc, x, arith::MulFOp::create(b, loc, x, x));
    Value poly = arith::AddFOp::create(
        b, loc, x, arith::MulFOp::create(b, loc, f32(b, loc, 0.044715), x3));
    inner = math::TanhOp::create(
        b, loc,
        arith::MulFOp::create(b, loc, f32(b, loc, std::sqrt(2.0 / M_PI)),
                              poly));
  } else {
    inner = math::ErfOp::create(
        b, loc, arith::MulFOp::create(b, loc, x, f32(b, loc, M_SQRT1_2)));
  }
  Value half = arith::MulFOp::create(b, loc, f32(b, loc, 0.5), x);
  return arith::MulFOp::create(
      b, loc, half, arith::AddFOp::create(b, loc, f32(b, loc, 1.0), inner));
}

/// Lowers an elementwise op whose operands and results all have the type of
/// its first operand: `compute` maps the f32 operands to the f32 results.
template <typename OpTy> struct LowerElementwise : OpConversionPattern<OpTy> {
  using OpConversionPattern<OpTy>::OpConversionPattern;
  using OpAdaptor = typename OpTy::Adaptor;

  virtual SmallVector<Value> compute(OpTy op, OpBuilder &b, Location loc,
                                     ValueRange args) const = 0;

  LogicalResult
  matchAndRewrite(OpTy op, OpAdaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    Location loc = op.getLoc();
    ValueRange operands = adaptor.getOperands();
    Type elem = cast<RankedTensorType>(operands[0].getType()).getElementType();
    SmallVector<RowOperand> ins;
    for (Value v : operands)
      ins.push_back({v, Access::Full});
    SmallVector<Type> resultTypes(op->getNumResults(), elem);
    SmallVector<Value> results = mapRows(
        rewriter, loc, sizesOf(rewriter, loc, operands[0]), ins, resultTypes,
        [&](OpBuilder &nb, Location nloc,
            ValueRange args) -> SmallVector<Value> {
          SmallVector<Value> wide;
          for (Value a : args)
            wide.push_back(toF32(nb, nloc, a));
          SmallVector<Value> out;
          for (Value r : compute(op, nb, nloc, wide))
            out.push_back(fromF32(nb, nloc, r, elem));
          return out;
        });
    rewriter.replaceOp(op, results);
    return success();
  }
};

struct LowerSiLU : LowerElementwise<SiLUOp> {
  using LowerElementwise::LowerElementwise;
  SmallVector<Value> compute(SiLUOp, OpBuilder &b, Location loc,
                             ValueRange args) const override {
    return {silu(b, loc, args[0])};
  }
};

struct LowerGELU : LowerElementwise<GELUOp> {
  using LowerElementwise::LowerElementwise;
  SmallVector<Value> compute(GELUOp op, OpBuilder &b, Location loc,
                             ValueRange args) const override {
    return {gelu(b, loc, args[0], op.getApproximate())};
  }
};

struct LowerSwiGLU : LowerElementwise<SwiGLUOp> {
  using LowerElementwise::LowerElementwise;
  SmallVector<Value> compute(SwiGLUOp, OpBuilder &b, Location loc,
                             ValueRange args) const override {
    return {arith::MulFOp::create(b, loc, silu(b, loc, args[0]), args[1])};
  }
};

struct LowerGEGLU : LowerElementwise<GEGLUOp> {
  using LowerElementwise::LowerElementwise;
  SmallVector<Value> compute(GEGLUOp op, OpBuilder &b, Location loc,
                             ValueRange args) const override {
    return {arith::MulFOp::create(
        b, loc, gelu(b, loc, args[0], op.getApproximate()), args[1])};
  }
};

struct LowerAdd : LowerElementwise<AddOp> {
  using LowerElementwise::LowerElementwise;
  SmallVector<Value> compute(AddOp, OpBuilder &b, Location loc,
                             ValueRange args) const override {
    return {arith::AddFOp::create(b, loc, args[0], args[1])};
  }
};

struct LowerMul : LowerElementwise<MulOp> {
  using LowerElementwise::LowerElementwise;
  SmallVector<Value> compute(MulOp, OpBuilder &b, Location loc,
                             ValueRange args) const override {
    return {arith::MulFOp::create(b, loc, args[0], args[1])};
  }
};

struct LowerSwiGLUGrad : LowerElementwise<SwiGLUGradOp> {
  using LowerElementwise::LowerElementwise;
  SmallVector<Value> compute(SwiGLUGradOp, OpBuilder &b, Location loc,
                             ValueRange args) const override {
    Value grad = args[0], gate = args[1], up = args[2];
    Value s = sigmoid(b, loc, gate);
    // d_gate = grad * up * s * (1 + gate * (1 - s)).
    Value oneMinusS = arith::SubFOp::create(b, loc, f32(b, loc, 1.0), s);
    Value dsilu = arith::MulFOp::create(
        b, loc, s,
        arith::AddFOp::create(b, loc, f32(b, loc, 1.0),
                              arith::MulFOp::create(b, loc, gate, oneMinusS)));
    Value dGate = arith::MulFOp::create(
        b, loc, arith::MulFOp::create(b, loc, grad, up), dsilu);
    // d_up = grad * silu(gate).
    Value dUp = arith::MulFOp::create(b, loc, grad,
                                      arith::MulFOp::create(b, loc, gate, s));
    return {dGate, dUp};
  }
};

/// d/dx GELU in f32, exact (erf) or with PyTorch's tanh approximation.
Value geluDerivative(OpBuilder &b, Location loc, Value x,
                     GeluApproximation approx) {
  auto mul = [&](Value p, Value q) {
    return arith::MulFOp::create(b, loc, p, q);
  };
  auto add = [&](Value p, Value q) {
    return arith::AddFOp::create(b, loc, p, q);
  };
  Value half = f32(b, loc, 0.5), one = f32(b, loc, 1.0);
  if (approx == GeluApproximation::tanh) {
    Value k = f32(b, loc, std::sqrt(2.0 / M_PI));
    Value c = f32(b, loc, 0.044715);
    Value x2 = mul(x, x);
    Value inner = mul(k, add(x, mul(c, mul(x, x2))));
    Value t = math::TanhOp::create(b, loc, inner);
    Value dInner = mul(k, add(one, mul(f32(b, loc, 3 * 0.044715), x2)));
    Value sech2 = arith::SubFOp::create(b, loc, one, mul(t, t));
    return add(mul(half, add(one, t)), mul(mul(half, x), mul(sech2, dInner)));
  }
  // Phi(x) + x phi(x), phi(x) = exp(-x^2/2) / sqrt(2 pi).
  Value cdf = mul(half, add(one, math::ErfOp::create(
                                     b, loc, mul(x, f32(b, loc, M_SQRT1_2)))));
  Value pdf =
      mul(f32(b, loc, 1.0 / std::sqrt(2.0 * M_PI)),
          math::ExpOp::create(b, loc, mul(f32(b, loc, -0.5), mul(x, x))));
  return add(cdf, mul(x, pdf));
}

struct LowerGEGLUGrad : LowerElementwise<GEGLUGradOp> {
  using LowerElementwise::LowerElementwise;
  SmallVector<Value> compute(GEGLUGradOp op, OpBuilder &b, Location loc,
                             ValueRange args) const override {
    Value grad = args[0], gate = args[1], up = args[2];
    Value dGate = arith::MulFOp::create(
        b, loc, arith::MulFOp::create(b, loc, grad, up),
        geluDerivative(b, loc, gate, op.getApproximate()));
    Value dUp = arith::MulFOp::create(b, loc, grad,
                                      gelu(b, loc, gate, op.getApproximate()));
    return {dGate, dUp};
  }
};

/// dx = y * (grad - sum(grad * y)) over the last dimension.
struct LowerSoftmaxGrad : OpConversionPattern<SoftmaxGradOp> {
  using OpConversionPattern::OpConversionPattern;
  LogicalResult
  matchAndRewrite(SoftmaxGradOp op, OpAdaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    Location loc = op.getLoc();
    OpBuilder &b = rewriter;
    Value dy = adaptor.getGrad(), y = adaptor.getOutput();
    Type elem = cast<RankedTensorType>(y.getType()).getElementType();
    SmallVector<OpFoldResult> sizes = sizesOf(b, loc, y);
    Value dot = reduceRows(
        b, loc, sizes, {{dy, Access::Full}, {y, Access::Full}}, 0.0,
        [](OpBuilder &nb, Location nloc,
           ValueRange args) -> SmallVector<Value> {
          Value p = arith::MulFOp::create(nb, nloc, toF32(nb, nloc, args[0]),
                                          toF32(nb, nloc, args[1]));
          return {arith::AddFOp::create(nb, nloc, args[2], p)};
        });
    Value dx = mapRows(
        b, loc, sizes,
        {{dy, Access::Full}, {y, Access::Full}, {dot, Access::Row}}, {elem},
        [&](OpBuilder &nb, Location nloc,
            ValueRange args) -> SmallVector<Value> {
          Value d = arith::SubFOp::create(nb, nloc, toF32(nb, nloc, args[0]),
                                          args[2]);
          return {fromF32(
              nb, nloc,
              arith::MulFOp::create(nb, nloc, toF32(nb, nloc, args[1]), d),
              elem)};
        })[0];
    rewriter.replaceOp(op, dx);
    return success();
  }
};

/// softmax over the last dimension: max, then the sum of exp(x - max), then
/// one normalizing pass rounded to the input type.
struct LowerSoftmax : OpConversionPattern<SoftmaxOp> {
  using OpConversionPattern::OpConversionPattern;
  LogicalResult
  matchAndRewrite(SoftmaxOp op, OpAdaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    Location loc = op.getLoc();
    OpBuilder &b = rewriter;
    Value x = adaptor.getInput();
    Type elem = cast<RankedTensorType>(x.getType()).getElementType();
    SmallVector<OpFoldResult> sizes = sizesOf(b, loc, x);
    Value rowMax =
        reduceRows(b, loc, sizes, {{x, Access::Full}}, -INFINITY,
                   [](OpBuilder &nb, Location nloc,
                      ValueRange args) -> SmallVector<Value> {
                     return {arith::MaximumFOp::create(
                         nb, nloc, args[1], toF32(nb, nloc, args[0]))};
                   });
    Value sumExp = reduceRows(
        b, loc, sizes, {{x, Access::Full}, {rowMax, Access::Row}}, 0.0,
        [](OpBuilder &nb, Location nloc,
           ValueRange args) -> SmallVector<Value> {
          Value e = math::ExpOp::create(
              nb, nloc,
              arith::SubFOp::create(nb, nloc, toF32(nb, nloc, args[0]),
                                    args[1]));
          return {arith::AddFOp::create(nb, nloc, args[2], e)};
        });
    Value y = mapRows(
        b, loc, sizes,
        {{x, Access::Full}, {rowMax, Access::Row}, {sumExp, Access::Row}},
        {elem},
        [&](OpBuilder &nb, Location nloc,
            ValueRange args) -> SmallVector<Value> {
          Value e = math::ExpOp::create(
              nb, nloc,
              arith::SubFOp::create(nb, nloc, toF32(nb, nloc, args[0]),
                                    args[1]));
          return {fromF32(nb, nloc, arith::DivFOp::create(nb, nloc, e, args[2]),
                          elem)};
        })[0];
    rewriter.replaceOp(op, y);
    return success();
  }
};

} // namespace

void mlir::liger::populateLowerElementwiseToLinalgPatterns(
    RewritePatternSet &patterns) {
  patterns
      .add<LowerSiLU, LowerGELU, LowerSwiGLU, LowerGEGLU, LowerAdd, LowerMul,
           LowerSwiGLUGrad, LowerGEGLUGrad, LowerSoftmax, LowerSoftmaxGrad>(
          patterns.getContext());
}
