//===- CPUPipeline.cpp - liger ops to LLVM for the CPU --------------------===//
//
// The CPU pipeline: reference lowering to linalg, one-shot bufferization,
// loops, then the LLVM dialect. It runs the numerical oracle of the test
// suite and the CPU fallback; speed is not its goal.
//
//===----------------------------------------------------------------------===//

#include "liger/Conversion/Passes.h"
#include "liger/Pipelines/Pipelines.h"

#include "mlir/Conversion/Passes.h"
#include "mlir/Dialect/Arith/Transforms/Passes.h"
#include "mlir/Dialect/Bufferization/Pipelines/Passes.h"
#include "mlir/Dialect/Bufferization/Transforms/Passes.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Linalg/Passes.h"
#include "mlir/Dialect/MemRef/Transforms/Passes.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Transforms/Passes.h"

using namespace mlir;
using namespace mlir::liger;

void mlir::liger::buildCPUReferenceStage(OpPassManager &pm,
                                         const CPUPipelineOptions &opts) {
  pm.addPass(createLowerToLinalgPass());
  if (opts.cleanup) {
    pm.addPass(createCanonicalizerPass());
    pm.addPass(createCSEPass());
  }
}

void mlir::liger::buildCPUBufferizeStage(OpPassManager &pm,
                                         const CPUPipelineOptions &) {
  bufferization::OneShotBufferizePassOptions bufferize;
  bufferize.bufferizeFunctionBoundaries = true;
  bufferize.functionBoundaryTypeConversion =
      bufferization::LayoutMapOption::IdentityLayoutMap;
  pm.addPass(bufferization::createOneShotBufferizePass(bufferize));
  bufferization::buildBufferDeallocationPipeline(pm);
  // A result that aliases an argument (a reshape of an input) is returned as
  // a bufferization.clone: a fresh buffer the caller owns, copied here.
  pm.addPass(createConvertBufferizationToMemRefPass());
}

void mlir::liger::buildCPUToLLVMStage(OpPassManager &pm,
                                      const CPUPipelineOptions &) {
  pm.addNestedPass<func::FuncOp>(createConvertLinalgToLoopsPass());
  pm.addPass(createLowerAffinePass());
  pm.addPass(createSCFToControlFlowPass());
  arith::ArithExpandOpsPassOptions expand;
  expand.includeBf16 = true;
  pm.addPass(arith::createArithExpandOpsPass(expand));
  // Upstream expand-strided-metadata cannot lower an expand_shape that
  // splits one dynamic size into several (the flattened tokens of a
  // gradient split back into batch and sequence): those go first.
  pm.addPass(createLowerExpandShapePass());
  pm.addPass(memref::createExpandStridedMetadataPass());
  pm.addPass(createLowerAffinePass());
  // LLVM intrinsics first (exp, log, tanh, sqrt, rsqrt, ...), libm for the
  // rest (erf): math-to-libm would turn rsqrt into rsqrtf, which libm lacks.
  pm.addPass(createConvertMathToLLVMPass());
  pm.addPass(createConvertMathToLibmPass());
  pm.addPass(createFinalizeMemRefToLLVMConversionPass());
  pm.addPass(createConvertFuncToLLVMPass());
  pm.addPass(createArithToLLVMConversionPass());
  pm.addPass(createConvertControlFlowToLLVMPass());
  pm.addPass(createConvertIndexToLLVMPass());
  pm.addPass(createReconcileUnrealizedCastsPass());
}

void mlir::liger::buildCPUPipeline(OpPassManager &pm,
                                   const CPUPipelineOptions &opts) {
  buildCPUReferenceStage(pm, opts);
  buildCPUBufferizeStage(pm, opts);
  buildCPUToLLVMStage(pm, opts);
}
