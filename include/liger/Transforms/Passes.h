//===- Passes.h - liger transformation and analysis passes ------*- C++ -*-===//
//
// Declarations and registration of the passes in Passes.td.
//
//===----------------------------------------------------------------------===//

#ifndef LIGER_TRANSFORMS_PASSES_H
#define LIGER_TRANSFORMS_PASSES_H

#include "mlir/IR/BuiltinOps.h"
#include "mlir/Pass/Pass.h"

namespace mlir::liger {

#define GEN_PASS_DECL
#include "liger/Transforms/Passes.h.inc"

#define GEN_PASS_REGISTRATION
#include "liger/Transforms/Passes.h.inc"

} // namespace mlir::liger

#endif // LIGER_TRANSFORMS_PASSES_H
