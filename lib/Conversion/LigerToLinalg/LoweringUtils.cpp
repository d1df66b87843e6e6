//===- LoweringUtils.cpp - builders shared by the linalg lowerings --------===//

#include "LoweringUtils.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"

using namespace mlir;
using namespace mlir::liger;
using namespace mlir::liger::lowering;

Value lowering::toF32(OpBuilder &b, Location loc, Value v) {
  Type f32Type = b.getF32Type();
  if (v.getType() == f32Type)
    return v;
  return arith::ExtFOp::create(b, loc, f32Type, v);
}

Value lowering::fromF32(OpBuilder &b, Location loc, Value v, Type type) {
  if (v.getType() == type)
    return v;
  return arith::TruncFOp::create(b, loc, type, v);
}

Value lowering::roundThrough(OpBuilder &b, Location loc, Value v, Type type) {
  if (type.isF32())
    return v;
  return toF32(b, loc, fromF32(b, loc, v, type));
}

Value lowering::f32(OpBuilder &b, Location loc, double value) {
  return arith::ConstantOp::create(b, loc, b.getF32FloatAttr(value));
}

SmallVector<OpFoldResult> lowering::sizesOf(OpBuilder &b, Location loc,
                                            Value tensor) {
  return tensor::getMixedSizes(b, loc, tensor);
}

Value lowering::emptyTensor(OpBuilder &b, Location loc,
                            ArrayRef<OpFoldResult> sizes, Type elementType) {
  return tensor::EmptyOp::create(b, loc, sizes, elementType);
}

Value lowering::filledTensor(OpBuilder &b, Location loc,
                             ArrayRef<OpFoldResult> sizes, Type elementType,
                             double value) {
  Value init = emptyTensor(b, loc, sizes, elementType);
  Value scalar =
      arith::ConstantOp::create(b, loc, b.getFloatAttr(elementType, value));
  return linalg::FillOp::create(b, loc, ValueRange{scalar}, ValueRange{init})
      .getResult(0);
}

AffineMap lowering::accessMap(MLIRContext *ctx, unsigned rank, Access access) {
  switch (access) {
  case Access::Full:
    return AffineMap::getMultiDimIdentityMap(rank, ctx);
  case Access::Row: {
    SmallVector<AffineExpr> dims;
    for (unsigned d = 0; d + 1 < rank; ++d)
      dims.push_back(getAffineDimExpr(d, ctx));
    return AffineMap::get(rank, 0, dims, ctx);
  }
  case Access::Feature:
    return AffineMap::get(rank, 0, getAffineDimExpr(rank - 1, ctx));
  case Access::Scalar:
    return AffineMap::get(rank, 0, ctx);
  }
  llvm_unreachable("unknown access");
}

/// Collects the values and maps of `inputs` for a generic of `rank` loops.
static void collectInputs(MLIRContext *ctx, unsigned rank,
                          ArrayRef<RowOperand> inputs,
                          SmallVectorImpl<Value> &values,
                          SmallVectorImpl<AffineMap> &maps) {
  for (const RowOperand &in : inputs) {
    values.push_back(in.value);
    maps.push_back(accessMap(ctx, rank, in.access));
  }
}

SmallVector<Value> lowering::mapRows(OpBuilder &b, Location loc,
                                     ArrayRef<OpFoldResult> sizes,
                                     ArrayRef<RowOperand> inputs,
                                     ArrayRef<Type> resultTypes,
                                     ScalarFn body) {
  MLIRContext *ctx = b.getContext();
  unsigned rank = sizes.size();
  SmallVector<Value> ins;
  SmallVector<AffineMap> maps;
  collectInputs(ctx, rank, inputs, ins, maps);
  SmallVector<Value> outs;
  SmallVector<Type> tensorTypes;
  for (Type elementType : resultTypes) {
    Value init = emptyTensor(b, loc, sizes, elementType);
    outs.push_back(init);
    tensorTypes.push_back(init.getType());
    maps.push_back(accessMap(ctx, rank, Access::Full));
  }
  SmallVector<utils::IteratorType> iterators(rank,
                                             utils::IteratorType::parallel);
  auto generic = linalg::GenericOp::create(
      b, loc, tensorTypes, ins, outs, maps, iterators,
      [&](OpBuilder &nb, Location nloc, ValueRange args) {
        SmallVector<Value> results =
            body(nb, nloc, args.take_front(inputs.size()));
        linalg::YieldOp::create(nb, nloc, results);
      });
  return SmallVector<Value>(generic.getResults());
}

Value lowering::reduceRows(OpBuilder &b, Location loc,
                           ArrayRef<OpFoldResult> sizes,
                           ArrayRef<RowOperand> inputs, double init,
                           ScalarFn combine) {
  MLIRContext *ctx = b.getContext();
  unsigned rank = sizes.size();
  SmallVector<Value> ins;
  SmallVector<AffineMap> maps;
  collectInputs(ctx, rank, inputs, ins, maps);
  Value acc = filledTensor(b, loc, sizes.drop_back(), b.getF32Type(), init);
  maps.push_back(accessMap(ctx, rank, Access::Row));
  SmallVector<utils::IteratorType> iterators(rank,
                                             utils::IteratorType::parallel);
  iterators.back() = utils::IteratorType::reduction;
  auto generic = linalg::GenericOp::create(
      b, loc, TypeRange{acc.getType()}, ins, ValueRange{acc}, maps, iterators,
      [&](OpBuilder &nb, Location nloc, ValueRange args) {
        linalg::YieldOp::create(nb, nloc, combine(nb, nloc, args));
      });
  return generic.getResult(0);
}

Value lowering::contractF32(OpBuilder &b, Location loc, Value lhs, Value rhs,
                           ArrayRef<AffineMap> maps,
                           ArrayRef<OpFoldResult> sizes) {
  Value acc = filledTensor(b, loc, sizes, b.getF32Type(), 0.0);
  // The loops past the result's are reductions.
  SmallVector<utils::IteratorType> iterators(maps.back().getNumResults(),
                                             utils::IteratorType::parallel);
  iterators.resize(maps.front().getNumDims(), utils::IteratorType::reduction);
  auto generic = linalg::GenericOp::create(
      b, loc, TypeRange{acc.getType()}, ValueRange{lhs, rhs}, ValueRange{acc},
      maps, iterators, [&](OpBuilder &nb, Location nloc, ValueRange args) {
        Value product = arith::MulFOp::create(
            nb, nloc, toF32(nb, nloc, args[0]), toF32(nb, nloc, args[1]));
        Value sum = arith::AddFOp::create(nb, nloc, args[2], product);
        linalg::YieldOp::create(nb, nloc, sum);
      });
  return generic.getResult(0);
}

Value lowering::matmulLastDim(OpBuilder &b, Location loc, Value x, Value w,
                             bool transposedW) {
  MLIRContext *ctx = b.getContext();
  auto xType = cast<RankedTensorType>(x.getType());
  auto wType = cast<RankedTensorType>(w.getType());
  unsigned rank = xType.getRank();
  // Loops: the leading dims of x, then the output column, then the
  // reduction.
  unsigned numLoops = rank + 1;
  AffineExpr out = getAffineDimExpr(rank - 1, ctx);
  AffineExpr red = getAffineDimExpr(rank, ctx);
  SmallVector<AffineExpr> xExprs, outExprs;
  for (unsigned d = 0; d + 1 < rank; ++d) {
    xExprs.push_back(getAffineDimExpr(d, ctx));
    outExprs.push_back(getAffineDimExpr(d, ctx));
  }
  xExprs.push_back(red);
  outExprs.push_back(out);
  SmallVector<AffineExpr> wExprs =
      transposedW ? SmallVector<AffineExpr>{out, red}
                  : SmallVector<AffineExpr>{red, out};
  SmallVector<AffineMap> maps = {AffineMap::get(numLoops, 0, xExprs, ctx),
                                 AffineMap::get(numLoops, 0, wExprs, ctx),
                                 AffineMap::get(numLoops, 0, outExprs, ctx)};
  SmallVector<OpFoldResult> sizes = sizesOf(b, loc, x);
  sizes.back() = b.getIndexAttr(wType.getDimSize(transposedW ? 0 : 1));
  return contractF32(b, loc, x, w, maps, sizes);
}

Value lowering::matmulTransposedB(OpBuilder &b, Location loc, Value x,
                                  Value w) {
  return matmulLastDim(b, loc, x, w, /*transposedW=*/true);
}

Value lowering::loopIndex(OpBuilder &b, Location loc, int64_t dim) {
  return linalg::IndexOp::create(b, loc, dim);
}

Value mlir::liger::lowering::roundAccumulator(OpBuilder &b, Location loc,
                                              Value acc, Value bias, Type elem) {
  SmallVector<RowOperand> ins = {{acc, Access::Full}};
  if (bias)
    ins.push_back({bias, Access::Feature});
  return mapRows(
      b, loc, sizesOf(b, loc, acc), ins, {elem},
      [&](OpBuilder &nb, Location nloc, ValueRange args) -> SmallVector<Value> {
        Value v = args[0];
        if (args.size() > 1)
          v = arith::AddFOp::create(nb, nloc, v, toF32(nb, nloc, args[1]));
        return {fromF32(nb, nloc, v, elem)};
      })[0];
}

Value mlir::liger::lowering::gradWeightF32(OpBuilder &b, Location loc,
                                           Value dy, Value x) {
  MLIRContext *ctx = b.getContext();
  // Loops: n, k, then the tokens t (reduction).
  AffineExpr n = getAffineDimExpr(0, ctx), k = getAffineDimExpr(1, ctx),
             t = getAffineDimExpr(2, ctx);
  return contractF32(
      b, loc, dy, x,
      {AffineMap::get(3, 0, {t, n}, ctx), AffineMap::get(3, 0, {t, k}, ctx),
       AffineMap::get(3, 0, {n, k}, ctx)},
      {b.getIndexAttr(cast<RankedTensorType>(dy.getType()).getDimSize(1)),
       b.getIndexAttr(cast<RankedTensorType>(x.getType()).getDimSize(1))});
}
