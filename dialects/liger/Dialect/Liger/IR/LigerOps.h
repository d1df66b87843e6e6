//===- LigerOps.h - liger op classes ----------------------------*- C++ -*-===//
//
// The generated op classes of the liger dialect.
//
//===----------------------------------------------------------------------===//

#ifndef LIGER_DIALECT_LIGER_IR_LIGEROPS_H
#define LIGER_DIALECT_LIGER_IR_LIGEROPS_H

#include "liger/Dialect/Liger/IR/LigerDialect.h"
#include "mlir/Bytecode/BytecodeOpInterface.h"
#include "mlir/Interfaces/ControlFlowInterfaces.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/OpDefinition.h"
#include "mlir/Interfaces/InferTypeOpInterface.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"

#define GET_OP_CLASSES
#include "liger/Dialect/Liger/IR/LigerOps.h.inc"

namespace mlir::liger {
/// Ops a rowwise kernel implements, in a rowwise fusion group or alone:
/// everything row-local (the rowwise group's verifier and the GPU lowering
/// read this one list).
bool isRowwiseOp(Operation *op);
/// The elementwise ops a matmul kernel computes in its epilogue on the
/// product's pairs (the matmul group's verifier and the GPU lowering read
/// this one list).
bool isMatmulElementwiseOp(Operation *op);
/// The `linalg.transpose` ([1, 0]) that gives a projection its weight
/// `weight` from a [K, N] tensor which a matmul kernel then reads MN-major
/// in its place: `weight` read once, written into a `tensor.empty` that
/// nothing else reads; else null. (liger-fuse-lora brings such a transpose
/// into the group; the matmul plan reads through it.)
Operation *getMNMajorWeightTranspose(Value weight);
} // namespace mlir::liger

#endif // LIGER_DIALECT_LIGER_IR_LIGEROPS_H
