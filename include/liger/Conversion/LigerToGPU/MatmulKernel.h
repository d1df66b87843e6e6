//===- MatmulKernel.h - matmul groups as Tensor Core kernels ----*- C++ -*-===//
//
// Builds the kernel of a matmul liger.fusion group (MatmulKernel.cpp says
// which bodies and configurations the current template implements).
//
//===----------------------------------------------------------------------===//

#ifndef LIGER_CONVERSION_LIGERTOGPU_MATMULKERNEL_H
#define LIGER_CONVERSION_LIGERTOGPU_MATMULKERNEL_H

#include "liger/Conversion/LigerToGPU/GpuBuilder.h"
#include "liger/Conversion/LigerToGPU/MatmulConfig.h"
#include "liger/Conversion/LigerToGPU/RowKernel.h"

namespace mlir::liger {

/// Builds the kernel of `group` into `module`, or fails with a diagnostic on
/// the group naming what the template does not implement.
FailureOr<RowKernelInfo> buildMatmulKernel(FusionOp group,
                                           gpu::GPUModuleOp module,
                                           StringRef name,
                                           const MatmulKernelConfig &config);

} // namespace mlir::liger

#endif // LIGER_CONVERSION_LIGERTOGPU_MATMULKERNEL_H
