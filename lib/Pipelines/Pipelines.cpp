//===- Pipelines.cpp - registration of the liger pipelines ----------------===//
//
// Registers the pipelines of Pipelines.h by name, for liger-opt and every
// tool that calls registerAllPasses.
//
//===----------------------------------------------------------------------===//

#include "liger/Pipelines/Pipelines.h"

#include "mlir/Pass/PassRegistry.h"

using namespace mlir;
using namespace mlir::liger;

void mlir::liger::registerLigerPipelines() {
  PassPipelineRegistration<FusePipelineOptions>(
      "liger-fuse",
      "Run every fusion pass: group chains of liger ops into liger.fusion "
      "kernels",
      buildFusePipeline);
  PassPipelineRegistration<GpuPipelineOptions>(
      "liger-gpu-pipeline",
      "Compile liger ops to GPU kernels up to the gpu.module: canonicalize, "
      "fuse (and plan loss groups), choose each group's configuration and "
      "lower it to a kernel (liger-compile's stages liger, fused, gpu)",
      buildGpuPipeline);
  PassPipelineRegistration<LossPlanPipelineOptions>(
      "liger-loss-plan-pipeline",
      "Fuse the lm_head loss and plan it in chunks as the GPU path does "
      "(liger-fuse-linear-cross-entropy, liger-plan-loss), for the CPU "
      "reference of a planned loss",
      buildLossPlanPipeline);
  PassPipelineRegistration<CPUPipelineOptions>(
      "liger-cpu-pipeline",
      "Lower liger ops to the LLVM dialect for the CPU (reference lowering, "
      "bufferization, loops, LLVM)",
      buildCPUPipeline);
}
