//===- MatmulKernel.h - matmul groups as Tensor Core kernels ----*- C++ -*-===//
//
// Builds the kernel of a matmul liger.fusion group from its plan and
// configuration (MatmulKernel.cpp says which bodies and configurations the
// templates implement; MatmulEmitters.h lists the parts).
//
//===----------------------------------------------------------------------===//

#ifndef LIGER_CONVERSION_LIGERTOGPU_MATMULKERNEL_H
#define LIGER_CONVERSION_LIGERTOGPU_MATMULKERNEL_H

#include "liger/Conversion/LigerToGPU/GpuBuilder.h"
#include "liger/Conversion/LigerToGPU/MatmulConfig.h"
#include "liger/Conversion/LigerToGPU/RowKernel.h"

namespace mlir::liger {

/// Builds the kernel of `plan`'s group into `module`, or fails with a
/// warning on the group naming what the templates do not implement (the
/// group is then left for a later template).
FailureOr<::liger::runtime::KernelSpec> buildMatmulKernel(const MatmulPlan &plan,
                                           gpu::GPUModuleOp module,
                                           StringRef name,
                                           const MatmulKernelConfig &config);

} // namespace mlir::liger

#endif // LIGER_CONVERSION_LIGERTOGPU_MATMULKERNEL_H
