//===- ReferenceLowering.h - the reference lowering in kernels -*- C++ -*-===//
//
// The row program (RowKernel.cpp) and the matmul templates' elementwise
// epilogue (MatmulEpilogue.cpp) do not define ops again: they lower a
// scratch copy of the group's ops with liger-lower-to-linalg's patterns and
// emit each resulting linalg.generic's body on the kernel's values. These
// are the two steps they share.
//
//===----------------------------------------------------------------------===//

#ifndef LIGER_CONVERSION_LIGERTOGPU_REFERENCELOWERING_H
#define LIGER_CONVERSION_LIGERTOGPU_REFERENCELOWERING_H

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"

#include <string>

namespace mlir::liger {

/// Lowers the liger ops of `fn` in place with liger-lower-to-linalg's
/// patterns (their reference semantics: linalg.generic ops on tensors);
/// other ops stay. Fails when one has no lowering.
LogicalResult lowerToReference(func::FuncOp fn);

/// Clones the arith/math body of an elementwise linalg.generic on `args`,
/// each value widened to vector<width x T> when width > 0 (constants
/// splatted; a row of odd length has chunks of vector<1 x T>), kept scalar
/// when width is 0. Fails with `why` on any other op.
FailureOr<SmallVector<Value>> cloneElementwiseBody(OpBuilder &b, Location loc,
                                                   Block &body, ValueRange args,
                                                   int64_t width,
                                                   std::string &why);

} // namespace mlir::liger

#endif // LIGER_CONVERSION_LIGERTOGPU_REFERENCELOWERING_H
