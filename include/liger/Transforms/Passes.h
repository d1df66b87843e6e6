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

/// The bytes one chunk of a planned loss group's logits may take unless a
/// caller says otherwise: liger-plan-loss's `memory-budget`, the GPU and
/// loss-plan pipelines' and liger-compile's options all default to it.
inline constexpr int64_t kDefaultLossMemoryBudget = int64_t(512) << 20;

#define GEN_PASS_DECL
#include "liger/Transforms/Passes.h.inc"

#define GEN_PASS_REGISTRATION
#include "liger/Transforms/Passes.h.inc"

} // namespace mlir::liger

#endif // LIGER_TRANSFORMS_PASSES_H
