//===- LoweringUtils.h - builders shared by the linalg lowerings -*- C++
//-*-===//
//
// Small builders the liger-to-linalg patterns share: f32 promotion and
// rounding, empty/filled tensors shaped like an operand, and linalg.generic
// ops over the hidden (last) dimension of row tensors, which is the shape of
// almost every liger op.
//
//===----------------------------------------------------------------------===//

#ifndef LIGER_LIB_CONVERSION_LIGERTOLINALG_LOWERINGUTILS_H
#define LIGER_LIB_CONVERSION_LIGERTOLINALG_LOWERINGUTILS_H

#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/PatternMatch.h"

namespace mlir::liger::lowering {

/// Extends a bf16/f16 scalar to f32 (f32 passes through).
Value toF32(OpBuilder &b, Location loc, Value v);

/// Converts an f32 scalar to `type` (truncation rounds to nearest even).
Value fromF32(OpBuilder &b, Location loc, Value v, Type type);

/// Rounds an f32 scalar to `type` and extends it back: the value a tensor of
/// `type` would store. Identity for f32.
Value roundThrough(OpBuilder &b, Location loc, Value v, Type type);

/// An f32 constant.
Value f32(OpBuilder &b, Location loc, double value);

/// The sizes of a ranked tensor value, dynamic ones read with tensor.dim.
SmallVector<OpFoldResult> sizesOf(OpBuilder &b, Location loc, Value tensor);

/// tensor.empty of `sizes` and `elementType`.
Value emptyTensor(OpBuilder &b, Location loc, ArrayRef<OpFoldResult> sizes,
                  Type elementType);

/// A tensor of `sizes` filled with the f32 `value` (cast to `elementType`).
Value filledTensor(OpBuilder &b, Location loc, ArrayRef<OpFoldResult> sizes,
                   Type elementType, double value);

/// How an operand of a row computation over [..., H] (rank n) is indexed.
enum class Access {
  Full,    ///< [..., H]: the identity map.
  Row,     ///< [...]: one value per row (drops the hidden dimension).
  Feature, ///< [H]: one value per hidden index (a norm weight, a bias).
  Scalar,  ///< tensor<T>: one value for everything.
};

struct RowOperand {
  Value value;
  Access access;
};

/// The indexing map of `access` in an iteration space of `rank` loops.
AffineMap accessMap(MLIRContext *ctx, unsigned rank, Access access);

/// Body of a row computation: the scalar operands (in order), returns the
/// scalar results.
using ScalarFn =
    function_ref<SmallVector<Value>(OpBuilder &, Location, ValueRange)>;

/// An all-parallel linalg.generic over `sizes` (rank n = sizes.size()) that
/// reads `inputs` and writes one Full tensor per entry of `resultTypes`
/// (element types). `body` receives the input scalars; ops that gather read
/// loop indices with loopIndex().
SmallVector<Value> mapRows(OpBuilder &b, Location loc,
                           ArrayRef<OpFoldResult> sizes,
                           ArrayRef<RowOperand> inputs,
                           ArrayRef<Type> resultTypes, ScalarFn body);

/// A linalg.generic reducing over the last of `sizes` into an f32 [...]
/// tensor initialized to `init`. `combine` receives the input scalars then
/// the accumulator, and returns the new accumulator.
Value reduceRows(OpBuilder &b, Location loc, ArrayRef<OpFoldResult> sizes,
                 ArrayRef<RowOperand> inputs, double init, ScalarFn combine);

/// An f32 contraction of `lhs` and `rhs` (any float types) into a zero
/// f32 tensor of `sizes`: one linalg.generic with the indexing `maps` (lhs,
/// rhs, result), whose last loop is the reduction.
Value contractF32(OpBuilder &b, Location loc, Value lhs, Value rhs,
                  ArrayRef<AffineMap> maps, ArrayRef<OpFoldResult> sizes);

/// f32 `x · wᵀ` (`transposedW`, w [N, K]) or `x · w` (w [K, N]) for `x`
/// [..., K], as an f32 [..., N] tensor: one linalg.generic with the
/// reduction innermost.
Value matmulLastDim(OpBuilder &b, Location loc, Value x, Value w,
                    bool transposedW);

/// f32 `x · wᵀ` for `x` [..., K] and `w` [N, K] (any float types), as an
/// f32 [..., N] tensor: one linalg.generic with the K loop innermost.
Value matmulTransposedB(OpBuilder &b, Location loc, Value x, Value w);

/// f32 `dyᵀ · x` for `dy` [T, N] and `x` [T, K] (static N and K, any float
/// types), as an f32 [N, K] tensor: a weight gradient, the tokens T the
/// innermost (reduction) loop.
Value gradWeightF32(OpBuilder &b, Location loc, Value dy, Value x);

/// Rounds the f32 accumulator `acc` [..., N] (+ the optional f32-extended
/// `bias` [N]) to `elem`.
Value roundAccumulator(OpBuilder &b, Location loc, Value acc, Value bias,
                       Type elem);

/// Loop index `dim` inside a linalg.generic body.
Value loopIndex(OpBuilder &b, Location loc, int64_t dim);

} // namespace mlir::liger::lowering

#endif // LIGER_LIB_CONVERSION_LIGERTOLINALG_LOWERINGUTILS_H
