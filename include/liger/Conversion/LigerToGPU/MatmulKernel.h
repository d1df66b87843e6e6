//===- MatmulKernel.h - matmul groups as Tensor Core kernels ----*- C++ -*-===//
//
// Builds the kernel of a matmul liger.fusion group (MatmulKernel.cpp says
// which bodies and configurations the current template implements).
//
//===----------------------------------------------------------------------===//

#ifndef LIGER_CONVERSION_LIGERTOGPU_MATMULKERNEL_H
#define LIGER_CONVERSION_LIGERTOGPU_MATMULKERNEL_H

#include "liger/Conversion/LigerToGPU/MatmulConfig.h"
#include "liger/Conversion/LigerToGPU/RowKernel.h"

namespace mlir::liger {

/// Builds the kernel of `group` into `module`, or fails with a diagnostic on
/// the group naming what the template does not implement.
FailureOr<RowKernelInfo> buildMatmulKernel(FusionOp group,
                                           gpu::GPUModuleOp module,
                                           StringRef name,
                                           const MatmulKernelConfig &config);

/// cp.async (sm_80 and later) of one 16-byte chunk, `elements` elements of
/// `src` at `srcIndices` (global memory) into `dst` at `dstIndices` (shared
/// memory), bypassing L1; and the thread's commit of its copies so far as
/// one group, and its wait until none of its groups is pending (its own
/// copies are then visible to it). Defined beside the templates that
/// include the NVGPU and NVVM dialects, for the other templates' use.
void emitAsyncCopy16(OpBuilder &b, Location loc, Value dst,
                     ValueRange dstIndices, Value src, ValueRange srcIndices,
                     int64_t elements);
void emitAsyncCopyCommit(OpBuilder &b, Location loc);
void emitAsyncCopyWaitAll(OpBuilder &b, Location loc);

} // namespace mlir::liger

#endif // LIGER_CONVERSION_LIGERTOGPU_MATMULKERNEL_H
