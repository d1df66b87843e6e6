//===- KernelConfig.h - a fusion group's kernel configuration ---*- C++ -*-===//
//
// The `#liger.kernel_config` of a fusion group: its kernel template, chosen
// here once, and the template's tunables (RowKernel.h for the row
// templates, MatmulConfig.h for the matmul ones). liger-select-kernel-config
// writes the default on every group without one and checks pinned ones;
// liger-lower-to-gpu reads it (or the default, when the selection pass did
// not run) and builds the template it names.
//
//===----------------------------------------------------------------------===//

#ifndef LIGER_CONVERSION_LIGERTOGPU_KERNELCONFIG_H
#define LIGER_CONVERSION_LIGERTOGPU_KERNELCONFIG_H

#include "liger/Conversion/LigerToGPU/MatmulConfig.h"
#include "liger/Dialect/Liger/IR/LigerKernelAttrs.h"
#include "liger/Dialect/Liger/IR/LigerOps.h"
#include "liger/Target/GpuTarget.h"

namespace mlir::liger {

/// The default configuration of `group` (a rowwise or matmul group) on
/// `target`: the template its ops need (rowKernelTemplate; a matmul group
/// takes matmul_wgmma where the target has wgmma, else matmul_mma_sync) and
/// that template's default tunables (a wgmma group's schedule by
/// `schedule`).
FailureOr<KernelConfigAttr>
selectKernelConfig(FusionOp group, const GpuTargetInfo &target,
                   MatmulScheduleChoice schedule = MatmulScheduleChoice::Auto);

/// Checks a pinned `config` of `group` on `target`: its template is the one
/// the group's ops need (either matmul template for a matmul group), and
/// its tunables fit the group's rows or its matmul plan and the target.
/// Emits on the group.
LogicalResult verifyKernelConfig(FusionOp group, KernelConfigAttr config,
                                 const GpuTargetInfo &target);

/// The group's `liger.kernel_config`, checked by verifyKernelConfig, or the
/// default of selectKernelConfig (with `schedule`) where it has none.
FailureOr<KernelConfigAttr>
getKernelConfig(FusionOp group, const GpuTargetInfo &target,
                MatmulScheduleChoice schedule = MatmulScheduleChoice::Auto);

} // namespace mlir::liger

#endif // LIGER_CONVERSION_LIGERTOGPU_KERNELCONFIG_H
