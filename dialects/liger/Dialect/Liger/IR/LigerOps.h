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

#endif // LIGER_DIALECT_LIGER_IR_LIGEROPS_H
