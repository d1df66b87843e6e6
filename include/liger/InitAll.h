//===- InitAll.h - register everything liger tools need ---------*- C++ -*-===//
//
// One place that registers the liger dialect and passes together with the
// upstream dialects, interfaces and passes of the liger pipelines (tensor and
// linalg for the reference path; gpu, nvgpu, nvvm, llvm for the GPU path).
// Every tool calls these instead of assembling its own lists.
//
//===----------------------------------------------------------------------===//

#ifndef LIGER_INITALL_H
#define LIGER_INITALL_H

namespace mlir {
class DialectRegistry;
} // namespace mlir

namespace mlir::liger {

/// Inserts the liger dialect and the upstream dialects the pipelines use,
/// with the external interface models the GPU lowering needs
/// (ConvertToLLVMPatternInterface, NVVM target, LLVM IR translations).
void registerAllDialects(DialectRegistry &registry);

/// Registers the liger passes and the upstream passes the pipelines use.
void registerAllPasses();

} // namespace mlir::liger

#endif // LIGER_INITALL_H
