//===- LigerKernelAttrs.h - kernel_config and kernel_info -------*- C++ -*-===//
//
// The kernel attributes of the liger dialect (LigerKernelAttrs.td): the
// kernel configuration of a fusion group and the kernel ABI's record of a
// kernel. Apart from LigerDialect.h because they hold the kernel ABI's
// types (the `::liger::runtime` namespace), which only their users see.
//
//===----------------------------------------------------------------------===//

#ifndef LIGER_DIALECT_LIGER_IR_LIGERKERNELATTRS_H
#define LIGER_DIALECT_LIGER_IR_LIGERKERNELATTRS_H

#include "liger/Dialect/Liger/IR/LigerDialect.h"
#include "liger/Dialect/Liger/IR/LigerKernelAbi.h"

#include "liger/Dialect/Liger/IR/LigerKernelEnums.h.inc"

#define GET_ATTRDEF_CLASSES
#include "liger/Dialect/Liger/IR/LigerKernelAttrs.h.inc"

namespace mlir::liger {
/// The liger dialect's parser and printer of its kernel attributes
/// (LigerDialect::parseAttribute and printAttribute call them after those
/// of its enum attributes): the attribute named `mnemonic`, whose keyword
/// was read; none when it is not one of them.
std::optional<Attribute> parseKernelAttribute(AsmParser &parser,
                                              StringRef mnemonic, Type type);
LogicalResult printKernelAttribute(Attribute attr, AsmPrinter &printer);
} // namespace mlir::liger

#endif // LIGER_DIALECT_LIGER_IR_LIGERKERNELATTRS_H
