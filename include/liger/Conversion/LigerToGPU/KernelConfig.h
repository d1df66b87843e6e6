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

#include "liger/Conversion/LigerToGPU/MatmulConfigTable.h"
#include "liger/Dialect/Liger/IR/LigerKernelAttrs.h"
#include "liger/Dialect/Liger/IR/LigerOps.h"
#include "liger/Target/GpuTarget.h"

namespace mlir::liger {

/// The default configuration of `group` (a rowwise or matmul group) on
/// `target`: the template its ops need (rowKernelTemplate; a matmul group
/// takes matmul_wgmma where the target has wgmma, else matmul_mma_sync) and
/// that template's tunables: a matmul group's from the first entry of
/// `matmul.table` that matches it, else the default rule's (a wgmma
/// group's schedule by `matmul.schedule`). Fails with a diagnostic where
/// the matching table entry does not fit the group.
///
/// `spillFallback`, where given, receives the configuration to compile the
/// group at instead where ptxas spills registers at the default, or null
/// where the default has no such alternative: a looped row program's
/// default of 512 threads (at most 64 registers a thread) falls back to 256
/// (RowKernel.cpp, kLoopThreads). liger-select-kernel-config writes it
/// beside the default as `liger.spill_fallback`; liger-compile checks
/// ptxas's report of each such kernel and compiles the group again at its
/// fallback where the report shows a spill.
FailureOr<KernelConfigAttr>
selectKernelConfig(FusionOp group, const GpuTargetInfo &target,
                   MatmulSelection matmul = {},
                   KernelConfigAttr *spillFallback = nullptr);

/// The discardable attribute holding a group's spill fallback.
inline constexpr llvm::StringLiteral kSpillFallbackAttrName =
    "liger.spill_fallback";

/// Checks a pinned `config` of `group` on `target`: its template is the one
/// the group's ops need (either matmul template for a matmul group), and
/// its tunables fit the group's rows or its matmul plan and the target.
/// Emits on the group.
LogicalResult verifyKernelConfig(FusionOp group, KernelConfigAttr config,
                                 const GpuTargetInfo &target);

/// The group's `liger.kernel_config`, checked by verifyKernelConfig, or the
/// choice of selectKernelConfig (with `matmul`, and its `spillFallback`)
/// where it has none. `spillFallback` stays null for a pinned one.
FailureOr<KernelConfigAttr>
getKernelConfig(FusionOp group, const GpuTargetInfo &target,
                MatmulSelection matmul = {},
                KernelConfigAttr *spillFallback = nullptr);

} // namespace mlir::liger

#endif // LIGER_CONVERSION_LIGERTOGPU_KERNELCONFIG_H
