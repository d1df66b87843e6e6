//===- LigerDialect.cpp - liger dialect registration
//-----------------------===//
//
// Registers the ops and attributes of the liger dialect.
//
//===----------------------------------------------------------------------===//

#include "liger/Dialect/Liger/IR/LigerDialect.h"
#include "liger/Dialect/Liger/IR/LigerOps.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/DialectImplementation.h"
#include "llvm/ADT/TypeSwitch.h"

using namespace mlir;
using namespace mlir::liger;

#include "liger/Dialect/Liger/IR/LigerOpsDialect.cpp.inc"

#include "liger/Dialect/Liger/IR/LigerEnums.cpp.inc"

#define GET_ATTRDEF_CLASSES
#include "liger/Dialect/Liger/IR/LigerAttrs.cpp.inc"

void LigerDialect::initialize() {
  addOperations<
#define GET_OP_LIST
#include "liger/Dialect/Liger/IR/LigerOps.cpp.inc"
      >();
  addAttributes<
#define GET_ATTRDEF_LIST
#include "liger/Dialect/Liger/IR/LigerAttrs.cpp.inc"
      >();
}
