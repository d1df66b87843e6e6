//===- KernelConfig.cpp - a fusion group's kernel configuration -----------===//

#include "liger/Conversion/LigerToGPU/KernelConfig.h"
#include "liger/Conversion/LigerToGPU/AttentionKernel.h"
#include "liger/Conversion/LigerToGPU/MatmulConfig.h"
#include "liger/Conversion/LigerToGPU/RowKernel.h"

using namespace mlir;
using namespace mlir::liger;

FailureOr<KernelConfigAttr>
mlir::liger::selectKernelConfig(FusionOp group, const GpuTargetInfo &target,
                                MatmulSelection matmul,
                                KernelConfigAttr *spillFallback) {
  MLIRContext *ctx = group.getContext();
  if (spillFallback)
    *spillFallback = {};
  if (group.getKind() == FusionKind::matmul) {
    FailureOr<MatmulPlan> plan = analyzeMatmulGroup(group);
    if (failed(plan))
      return failure();
    if (matmul.table) {
      FailureOr<std::optional<MatmulKernelConfig>> measured =
          matmul.table->lookup(*plan, target);
      if (failed(measured))
        return failure();
      if (*measured)
        return getMatmulKernelConfigAttr(ctx, **measured);
    }
    return getMatmulKernelConfigAttr(
        ctx, selectMatmulKernelConfig(*plan, target, matmul.schedule));
  }
  if (group.getKind() == FusionKind::attention) {
    FailureOr<AttentionPlan> plan = analyzeAttentionGroup(group);
    if (failed(plan))
      return failure();
    return selectAttentionKernelConfig(*plan, target);
  }
  KernelTemplate kernelTemplate = rowKernelTemplate(group);
  if (kernelTemplate == KernelTemplate::rope) // no tunables
    return KernelConfigAttr::get(ctx, kernelTemplate, std::nullopt,
                                 std::nullopt, std::nullopt, std::nullopt,
                                 std::nullopt, std::nullopt, std::nullopt,
                                 std::nullopt, std::nullopt, std::nullopt);
  RowKernelConfig row = selectRowKernelConfig(group);
  if (spillFallback && row.spillFallbackThreads) {
    RowKernelConfig fallback = row;
    fallback.threads = row.spillFallbackThreads;
    *spillFallback = getRowKernelConfigAttr(ctx, kernelTemplate, fallback);
  }
  return getRowKernelConfigAttr(ctx, kernelTemplate, row);
}

LogicalResult mlir::liger::verifyKernelConfig(FusionOp group,
                                              KernelConfigAttr config,
                                              const GpuTargetInfo &target) {
  bool matmulGroup = group.getKind() == FusionKind::matmul;
  bool attentionGroup = group.getKind() == FusionKind::attention;
  KernelTemplate pinned = config.getKernelTemplate();
  bool fits = matmulGroup      ? config.isMatmul()
              : attentionGroup ? pinned == KernelTemplate::attention
                               : pinned == rowKernelTemplate(group);
  if (!fits)
    return group.emitOpError("has a 'liger.kernel_config' of the ")
           << stringifyKernelTemplate(pinned)
           << " template; its ops are built by the "
           << (matmulGroup ? StringRef("matmul_wgmma or matmul_mma_sync")
               : attentionGroup
                   ? StringRef("attention")
                   : stringifyKernelTemplate(rowKernelTemplate(group)))
           << " template";
  if (attentionGroup) {
    FailureOr<AttentionPlan> plan = analyzeAttentionGroup(group);
    if (failed(plan))
      return failure();
    return verifyAttentionKernelConfig(*plan, config, target);
  }
  if (matmulGroup) {
    FailureOr<MatmulPlan> plan = analyzeMatmulGroup(group);
    if (failed(plan))
      return failure();
    FailureOr<MatmulKernelConfig> matmul = readMatmulKernelConfig(group, config);
    if (failed(matmul))
      return failure();
    return verifyMatmulKernelConfig(*matmul, *plan, target);
  }
  if (config.getKernelTemplate() == KernelTemplate::rope)
    return success();
  FailureOr<RowKernelConfig> row = getRowKernelConfig(group, config);
  if (failed(row))
    return failure();
  // Thread-block clusters came with sm_90.
  if (row->cluster > 1 && target.computeCapability < 90)
    return group.emitOpError("has an invalid 'liger.kernel_config': a "
                             "cluster of ")
           << row->cluster << " CTAs needs sm_90 or later; the target is "
           << target.chip;
  return success();
}

FailureOr<KernelConfigAttr>
mlir::liger::getKernelConfig(FusionOp group, const GpuTargetInfo &target,
                             MatmulSelection matmul,
                             KernelConfigAttr *spillFallback) {
  if (spillFallback)
    *spillFallback = {};
  auto pinned =
      group->getAttrOfType<KernelConfigAttr>(KernelConfigAttr::getAttrName());
  if (!pinned)
    return selectKernelConfig(group, target, matmul, spillFallback);
  if (failed(verifyKernelConfig(group, pinned, target)))
    return failure();
  return pinned;
}
