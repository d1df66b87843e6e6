//===- LigerDialect.cpp - liger dialect registration
//-----------------------===//
//
// Registers the ops and attributes of the liger dialect.
//
//===----------------------------------------------------------------------===//

#include "liger/Dialect/Liger/IR/LigerDialect.h"
#include "liger/Dialect/Liger/IR/LigerKernelAttrs.h"
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
  registerKernelAttributes();
}

// The dialect's attributes are generated in two groups (LigerDialect.td
// says why): the enum attributes here, the kernel attributes in
// LigerKernelAttrs.cpp.
Attribute LigerDialect::parseAttribute(DialectAsmParser &parser,
                                       Type type) const {
  SMLoc loc = parser.getCurrentLocation();
  StringRef mnemonic;
  Attribute attr;
  OptionalParseResult result =
      generatedAttributeParser(parser, &mnemonic, type, attr);
  if (result.has_value())
    return attr;
  if (std::optional<Attribute> kernel =
          parseKernelAttribute(parser, mnemonic, type))
    return *kernel;
  parser.emitError(loc) << "unknown attribute `" << mnemonic
                        << "` in dialect `" << getNamespace() << "`";
  return {};
}

void LigerDialect::printAttribute(Attribute attr,
                                  DialectAsmPrinter &printer) const {
  if (succeeded(generatedAttributePrinter(attr, printer)))
    return;
  (void)printKernelAttribute(attr, printer);
}
