//===- LigerDialect.h - the liger dialect -----------------------*- C++ -*-===//
//
// Declares the liger dialect, its enum attributes and its dialect-wide trait.
// Op classes are in LigerOps.h.
//
//===----------------------------------------------------------------------===//

#ifndef LIGER_DIALECT_LIGER_IR_LIGERDIALECT_H
#define LIGER_DIALECT_LIGER_IR_LIGERDIALECT_H

#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/Dialect.h"
#include "mlir/IR/OpDefinition.h"

#include "liger/Dialect/Liger/IR/LigerOpsDialect.h.inc"

#include "liger/Dialect/Liger/IR/LigerEnums.h.inc"

#define GET_ATTRDEF_CLASSES
#include "liger/Dialect/Liger/IR/LigerAttrs.h.inc"

namespace mlir::liger {

/// Checks the dialect-wide element-type invariant: every ranked-tensor operand
/// and result has element type bf16, f16 or f32 (floats) or i32, i64
/// (integers). Defined in Verification.cpp.
LogicalResult verifyElementTypes(Operation *op);

/// Rejects discardable attributes without a dialect prefix: on a liger op,
/// `{epsilon = ...}` is a typo, not metadata. Defined in Verification.cpp.
LogicalResult verifyDiscardableAttributes(Operation *op);

/// Trait attached to every liger op (through `Liger_Op`): the element-type
/// invariant and the attribute-name invariant of the dialect.
template <typename ConcreteType>
class LigerOpInvariants
    : public OpTrait::TraitBase<ConcreteType, LigerOpInvariants> {
public:
  static LogicalResult verifyTrait(Operation *op) {
    if (failed(verifyElementTypes(op)))
      return failure();
    return verifyDiscardableAttributes(op);
  }
};

} // namespace mlir::liger

#endif // LIGER_DIALECT_LIGER_IR_LIGERDIALECT_H
