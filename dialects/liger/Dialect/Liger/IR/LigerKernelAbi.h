//===- LigerKernelAbi.h - the kernel ABI's records in attributes -*- C++ -*-===//
//
// How the kernel attributes (LigerKernelAttrs.td) hold the kernel ABI's own
// records (liger/Runtime/KernelAbi.h): each ABI enumeration is printed and
// parsed by the ABI's spelling table (roleName / parseRole, ...), so the
// compiler carries no second list of them; the mappings from MLIR to the
// ABI (an element type to a DType, a kernel template to the ABI's) are
// written here once.
//
//===----------------------------------------------------------------------===//

#ifndef LIGER_DIALECT_LIGER_IR_LIGERKERNELABI_H
#define LIGER_DIALECT_LIGER_IR_LIGERKERNELABI_H

#include "liger/Runtime/KernelAbi.h"

#include "mlir/IR/DialectImplementation.h"

#include <optional>

namespace liger::runtime {
// Printed by the ABI's spellings (a keyword, an element type, the swizzle's
// bytes, a grid entry as the manifest writes it). Found by argument-dependent
// lookup from the generated printers.
mlir::AsmPrinter &operator<<(mlir::AsmPrinter &printer, ParamRole role);
mlir::AsmPrinter &operator<<(mlir::AsmPrinter &printer, ParamKind kind);
mlir::AsmPrinter &operator<<(mlir::AsmPrinter &printer, DType dtype);
mlir::AsmPrinter &operator<<(mlir::AsmPrinter &printer,
                             KernelTemplate kernelTemplate);
mlir::AsmPrinter &operator<<(mlir::AsmPrinter &printer,
                             TensorMapSwizzle swizzle);
mlir::AsmPrinter &operator<<(mlir::AsmPrinter &printer, const GridDim &dim);
llvm::hash_code hash_value(const GridDim &dim);
} // namespace liger::runtime

namespace mlir {
// The parsers of the ABI's enumerations and grid entries: each reads the
// ABI's spelling and names what it got when it is none.
template <>
struct FieldParser<::liger::runtime::ParamRole> {
  static FailureOr<::liger::runtime::ParamRole> parse(AsmParser &parser);
};
template <>
struct FieldParser<::liger::runtime::ParamKind> {
  static FailureOr<::liger::runtime::ParamKind> parse(AsmParser &parser);
};
template <>
struct FieldParser<::liger::runtime::DType> {
  static FailureOr<::liger::runtime::DType> parse(AsmParser &parser);
};
template <>
struct FieldParser<::liger::runtime::KernelTemplate> {
  static FailureOr<::liger::runtime::KernelTemplate> parse(AsmParser &parser);
};
template <>
struct FieldParser<::liger::runtime::TensorMapSwizzle> {
  static FailureOr<::liger::runtime::TensorMapSwizzle> parse(AsmParser &parser);
};
template <>
struct FieldParser<::liger::runtime::GridDim> {
  static FailureOr<::liger::runtime::GridDim> parse(AsmParser &parser);
};

namespace liger {
/// A list of `T` in square brackets, `[]` when empty (the kernel
/// attributes' lists, among the other fields of a struct format).
template <typename T>
FailureOr<SmallVector<T>> parseBracketedList(AsmParser &parser) {
  SmallVector<T> elements;
  if (parser.parseCommaSeparatedList(AsmParser::Delimiter::Square, [&] {
        FailureOr<T> element = FieldParser<T>::parse(parser);
        if (failed(element))
          return failure();
        elements.push_back(*element);
        return success();
      }))
    return failure();
  return elements;
}
template <typename T>
void printBracketedList(AsmPrinter &printer, ArrayRef<T> elements) {
  printer << '[';
  llvm::interleaveComma(elements, printer,
                        [&](const T &element) { printer << element; });
  printer << ']';
}

/// The kernel ABI's dtype of element type `type`; none for a type the ABI
/// does not carry (bf16, f16, f32, i32, i64 are what it does).
std::optional<::liger::runtime::DType> abiDTypeOf(Type type);
} // namespace liger
} // namespace mlir

#endif // LIGER_DIALECT_LIGER_IR_LIGERKERNELABI_H
