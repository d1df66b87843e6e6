//===- Passes.h - liger conversion passes -----------------------*- C++ -*-===//
//
// Declarations and registration of the passes in Passes.td.
//
//===----------------------------------------------------------------------===//

#ifndef LIGER_CONVERSION_PASSES_H
#define LIGER_CONVERSION_PASSES_H

#include "mlir/Pass/Pass.h"

namespace mlir::liger {

#define GEN_PASS_DECL
#include "liger/Conversion/Passes.h.inc"

#define GEN_PASS_REGISTRATION
#include "liger/Conversion/Passes.h.inc"

} // namespace mlir::liger

#endif // LIGER_CONVERSION_PASSES_H
