//===- GPUPipeline.cpp - liger ops to GPU kernels -------------------------===//
//
// The stages of the GPU path up to the gpu.module of kernels, as
// liger-compile runs them and `liger-gpu-pipeline` registers them:
// canonicalize; fuse (and plan the loss groups); choose every group's
// configuration and lower it to a kernel. Pipelines.h states each stage's
// pre- and post-conditions.
//
//===----------------------------------------------------------------------===//

#include "liger/Conversion/Passes.h"
#include "liger/Pipelines/Pipelines.h"
#include "liger/Transforms/Passes.h"

#include "mlir/Pass/PassManager.h"
#include "mlir/Transforms/Passes.h"

using namespace mlir;
using namespace mlir::liger;

void mlir::liger::buildGpuCanonicalizeStage(OpPassManager &pm,
                                            const GpuPipelineOptions &) {
  pm.addPass(createCanonicalizerPass());
}

void mlir::liger::buildGpuFusionStage(OpPassManager &pm,
                                      const GpuPipelineOptions &opts) {
  if (!opts.fuse)
    return;
  FusePipelineOptions fuse;
  fuse.report = opts.report;
  fuse.normPrologue = opts.normPrologue;
  // The gradient epilogues are matmul groups: only where they compile.
  fuse.gradientEpilogues = opts.matmulKernels;
  buildFusePipeline(pm, fuse);
  if (!opts.matmulKernels)
    return;
  // The lm_head's loss groups, planned as chunks of matmul and
  // cross-entropy kernels (their functions join the module; the loss and
  // its gradient of a chunk fuse into one kernel).
  PlanLossPassOptions plan;
  plan.memoryBudget = opts.lossMemoryBudget;
  plan.dwF32 = opts.lossDwF32;
  pm.addPass(createPlanLossPass(plan));
  FuseCrossEntropyGradPassOptions grad;
  grad.report = opts.report;
  pm.addPass(createFuseCrossEntropyGradPass(grad));
}

void mlir::liger::buildLossPlanPipeline(OpPassManager &pm,
                                        const LossPlanPipelineOptions &opts) {
  pm.addPass(createFuseLinearCrossEntropyPass());
  PlanLossPassOptions plan;
  plan.memoryBudget = opts.memoryBudget;
  plan.dwF32 = opts.dwF32;
  pm.addPass(createPlanLossPass(plan));
}

void mlir::liger::buildGpuKernelStage(OpPassManager &pm,
                                      const GpuPipelineOptions &opts) {
  SelectKernelConfigPassOptions config;
  config.chip = opts.chip;
  config.matmulSchedule = opts.matmulSchedule;
  config.matmulConfigTable = opts.matmulConfigTable;
  pm.addPass(createSelectKernelConfigPass(config));
  LowerToGPUPassOptions lower;
  lower.chip = opts.chip;
  lower.features = opts.features;
  lower.matmulKernels = opts.matmulKernels;
  lower.matmulSchedule = opts.matmulSchedule;
  lower.matmulConfigTable = opts.matmulConfigTable;
  lower.spillFallbackKernels.assign(opts.spillFallbackKernels.begin(),
                                    opts.spillFallbackKernels.end());
  pm.addPass(createLowerToGPUPass(lower));
}

void mlir::liger::buildGpuPipeline(OpPassManager &pm,
                                   const GpuPipelineOptions &opts) {
  buildGpuCanonicalizeStage(pm, opts);
  buildGpuFusionStage(pm, opts);
  buildGpuKernelStage(pm, opts);
}
