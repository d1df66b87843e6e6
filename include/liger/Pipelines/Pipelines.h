//===- Pipelines.h - liger pass pipelines -----------------------*- C++ -*-===//
//
// The pass pipelines of the compiler, as C++ builders with typed options.
// Tools and the Python package call these builders; nothing else assembles
// pass lists.
//
//===----------------------------------------------------------------------===//

#ifndef LIGER_PIPELINES_PIPELINES_H
#define LIGER_PIPELINES_PIPELINES_H

#include "mlir/Pass/PassOptions.h"

namespace mlir {
class OpPassManager;
} // namespace mlir

namespace mlir::liger {

/// Options of `liger-cpu-pipeline`.
struct CPUPipelineOptions : public PassPipelineOptions<CPUPipelineOptions> {
  PassOptions::Option<bool> cleanup{
      *this, "cleanup",
      llvm::cl::desc("Canonicalize and CSE after the linalg lowering"),
      llvm::cl::init(true)};
};

/// Stage 1, reference semantics. Pre: liger ops on tensors in func.func
/// bodies. Post: no liger op is left; linalg/tensor/arith/math on tensors.
void buildCPUReferenceStage(OpPassManager &pm, const CPUPipelineOptions &opts);

/// Stage 2, bufferization. Pre: stage 1's post-condition. Post: memrefs with
/// identity layouts at function boundaries (results are returned buffers the
/// caller owns, a copy where a result aliases an argument); temporaries are
/// deallocated; no bufferization op is left.
void buildCPUBufferizeStage(OpPassManager &pm, const CPUPipelineOptions &opts);

/// Stage 3, to the LLVM dialect. Pre: stage 2's post-condition. Post: only
/// the llvm dialect (an expand_shape that splits one dynamic size into
/// several goes through liger-lower-expand-shape first); math functions without an LLVM intrinsic call libm; bf16
/// conversions are expanded to integer arithmetic so no runtime helper is
/// needed.
void buildCPUToLLVMStage(OpPassManager &pm, const CPUPipelineOptions &opts);

/// `liger-cpu-pipeline`: the three stages above, from liger ops to the LLVM
/// dialect, ready for the ExecutionEngine (liger/Target/CPURunner.h).
void buildCPUPipeline(OpPassManager &pm, const CPUPipelineOptions &opts);

/// Options of `liger-fuse`.
struct FusePipelineOptions : public PassPipelineOptions<FusePipelineOptions> {
  PassOptions::Option<bool> report{
      *this, "report",
      llvm::cl::desc("Print what each fusion pass fused, and why chains were "
                     "left alone"),
      llvm::cl::init(false)};
  PassOptions::Option<bool> allowExtraOutputs{
      *this, "allow-extra-outputs",
      llvm::cl::desc("Let intermediates read outside a group become extra "
                     "results"),
      llvm::cl::init(true)};
  PassOptions::Option<bool> normPrologue{
      *this, "norm-prologue",
      llvm::cl::desc("liger-fuse-norm-linear folds an RMSNorm read only by "
                     "projections into their matmul groups. Off by "
                     "default: on the H200 the norm as its own rowwise "
                     "kernel before the projection measured faster "
                     "(docs/benchmarks.md)"),
      llvm::cl::init(false)};
};

/// `liger-fuse`: every fusion pass, in an order where the larger kernels
/// claim their ops first. Pre: liger ops (after canonicalization). Post:
/// liger.fusion groups; ops no pattern matched stay outside groups.
///   1. liger-fuse-linear-cross-entropy  lm_head + loss (loss group)
///   2. liger-fuse-cross-entropy-grad    loss + its gradient (rowwise)
///   3. liger-fuse-add-rms-norm          residual add + norm (rowwise)
///   4. liger-fuse-qkv-rope              q/k projections + RoPE (matmul)
///   5. liger-fuse-gated-mlp             gate/up + SwiGLU/GeGLU (matmul)
///   6. liger-fuse-lora                  LoRA + activation + residual
///   7. liger-fuse-norm-linear           RMSNorm as projection prologue
///                                       (reports only, unless norm-prologue)
///   8. liger-fuse-elementwise           the remaining elementwise chains
void buildFusePipeline(OpPassManager &pm, const FusePipelineOptions &opts);

/// Registers the pipelines above with the pass registry.
void registerLigerPipelines();

} // namespace mlir::liger

#endif // LIGER_PIPELINES_PIPELINES_H
