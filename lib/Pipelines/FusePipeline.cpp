//===- FusePipeline.cpp - the liger-fuse pipeline -------------------------===//
//
// Runs every fusion pass in the order documented in Pipelines.h.
//
//===----------------------------------------------------------------------===//

#include "liger/Pipelines/Pipelines.h"
#include "liger/Transforms/Passes.h"

#include "mlir/Pass/PassManager.h"

using namespace mlir;
using namespace mlir::liger;

void mlir::liger::buildFusePipeline(OpPassManager &pm,
                                    const FusePipelineOptions &opts) {
  // Every pass takes the two shared options.
  auto with = [&](auto options) {
    options.report = opts.report;
    options.allowExtraOutputs = opts.allowExtraOutputs;
    return options;
  };
  pm.addPass(createFuseLinearCrossEntropyPass(
      with(FuseLinearCrossEntropyPassOptions())));
  pm.addPass(createFuseCrossEntropyGradPass(
      with(FuseCrossEntropyGradPassOptions())));
  pm.addPass(createFuseAddRMSNormPass(with(FuseAddRMSNormPassOptions())));
  pm.addPass(createFuseQKVRoPEPass(with(FuseQKVRoPEPassOptions())));
  FuseGatedMLPPassOptions gated = with(FuseGatedMLPPassOptions());
  gated.gradients = opts.gradientEpilogues;
  pm.addPass(createFuseGatedMLPPass(gated));
  pm.addPass(createFuseLoRAPass(with(FuseLoRAPassOptions())));
  FuseNormLinearPassOptions normLinear = with(FuseNormLinearPassOptions());
  normLinear.fold = opts.normPrologue;
  pm.addPass(createFuseNormLinearPass(normLinear));
  pm.addPass(createFuseElementwisePass(with(FuseElementwisePassOptions())));
}
