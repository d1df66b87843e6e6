//===- Pipelines.h - liger pass pipelines -----------------------*- C++ -*-===//
//
// The pass pipelines of the compiler, as C++ builders with typed options.
// Tools and the Python package call these builders; nothing else assembles
// pass lists.
//
//===----------------------------------------------------------------------===//

#ifndef LIGER_PIPELINES_PIPELINES_H
#define LIGER_PIPELINES_PIPELINES_H

#include "liger/Transforms/Passes.h"
#include "mlir/Pass/PassOptions.h"

#include <string>

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
  PassOptions::Option<bool> gradientEpilogues{
      *this, "gradient-epilogues",
      llvm::cl::desc("liger-fuse-gated-mlp also fuses a gated activation's "
                     "gradient into the down projection's dx product (a "
                     "matmul group: on with liger-compile's matmul-kernels, "
                     "off otherwise, where that gradient stays a rowwise "
                     "kernel)"),
      llvm::cl::init(false)};
};

/// `liger-fuse`: every fusion pass, in an order where the larger kernels
/// claim their ops first. Pre: liger ops (after canonicalization). Post:
/// liger.fusion groups; ops no pattern matched stay outside groups.
///   1. liger-fuse-linear-cross-entropy  lm_head + loss (loss group)
///   2. liger-fuse-cross-entropy-grad    loss + its gradient (rowwise)
///   3. liger-fuse-add-rms-norm          residual add + norm (rowwise)
///   4. liger-fuse-qkv-rope              q/k projections + RoPE (matmul)
///   5. liger-fuse-gated-mlp             gate/up + SwiGLU/GeGLU (matmul);
///                                       with gradient-epilogues, dx of
///                                       the down projection + their
///                                       gradient (matmul)
///   6. liger-fuse-lora                  LoRA + activation + residual
///   7. liger-fuse-norm-linear           RMSNorm as projection prologue
///                                       (reports only, unless norm-prologue)
///   8. liger-fuse-elementwise           the remaining elementwise chains
void buildFusePipeline(OpPassManager &pm, const FusePipelineOptions &opts);

/// Options of `liger-gpu-pipeline`: liger-compile's flags, one field each.
struct GpuPipelineOptions : public PassPipelineOptions<GpuPipelineOptions> {
  PassOptions::Option<std::string> chip{
      *this, "chip", llvm::cl::desc("GPU target: sm_90a or sm_80"),
      llvm::cl::init("sm_90a")};
  PassOptions::Option<std::string> features{
      *this, "features", llvm::cl::desc("PTX ISA version, as +ptxNN"),
      llvm::cl::init("+ptx86")};
  PassOptions::Option<bool> fuse{
      *this, "fuse",
      llvm::cl::desc("Run the fusion passes (off: every op is its own "
                     "kernel)"),
      llvm::cl::init(true)};
  PassOptions::Option<bool> report{
      *this, "report",
      llvm::cl::desc("Print what each fusion pass fused, and why chains were "
                     "left alone"),
      llvm::cl::init(false)};
  PassOptions::Option<bool> normPrologue{
      *this, "norm-prologue",
      llvm::cl::desc("Fold an RMSNorm read only by projections into their "
                     "matmul kernels (liger-fuse's norm-prologue)"),
      llvm::cl::init(false)};
  PassOptions::Option<bool> matmulKernels{
      *this, "matmul-kernels",
      llvm::cl::desc("Compile matmul groups with the wgmma (sm_90a) or "
                     "mma.sync template, and plan loss groups as chunks of "
                     "matmul and cross-entropy kernels (off: they stay "
                     "uncompiled)"),
      llvm::cl::init(true)};
  PassOptions::Option<std::string> matmulSchedule{
      *this, "matmul-schedule",
      llvm::cl::desc("The schedule of wgmma matmul groups: auto, "
                     "data-parallel, pingpong or persistent "
                     "(liger-select-kernel-config)"),
      llvm::cl::init("auto")};
  PassOptions::Option<std::string> matmulConfigTable{
      *this, "matmul-config-table",
      llvm::cl::desc("A JSON table of matmul configurations measured per "
                     "shape (liger-select-kernel-config)"),
      llvm::cl::init("")};
  PassOptions::Option<int64_t> lossMemoryBudget{
      *this, "loss-memory-budget",
      llvm::cl::desc("With matmul-kernels: bytes one chunk of a planned loss "
                     "group's logits may take (liger-plan-loss)"),
      llvm::cl::init(kDefaultLossMemoryBudget)};
  PassOptions::ListOption<std::string> spillFallbackKernels{
      *this, "spill-fallback-kernels",
      llvm::cl::desc("Kernels to build at their group's liger.spill_fallback "
                     "(liger-lower-to-gpu's spill-fallback-kernels)")};
  PassOptions::Option<bool> lossDwF32{
      *this, "loss-dw-f32",
      llvm::cl::desc("With matmul-kernels: a planned loss group sums dW "
                     "across chunks in an f32 buffer (liger-plan-loss's "
                     "dw-f32)"),
      llvm::cl::init(false)};
};

/// The stages of the GPU path, as liger-compile runs (and --emit stops
/// after) them. What follows the last, the lowering of the gpu.module to
/// NVVM and its serialization to PTX and cubins, is lib/Target's
/// (lowerGpuModulesToNVVM, serializeGpuModules).
///
/// Stage `liger`. Pre: a module of liger ops. Post: verified and
/// canonicalized.
void buildGpuCanonicalizeStage(OpPassManager &pm,
                               const GpuPipelineOptions &opts);
/// Stage `fused`. Pre: stage `liger`'s post-condition. Post: with `fuse`,
/// liger.fusion groups (liger-fuse); with `matmul-kernels` too, every loss
/// group that liger-plan-loss can plan carries `liger.plan` and its chunk
/// functions are in the module (their loss and gradient fused into one
/// rowwise group).
void buildGpuFusionStage(OpPassManager &pm, const GpuPipelineOptions &opts);
/// Stage `gpu`. Pre: stage `fused`'s post-condition. Post: every rowwise
/// group (and, with `matmul-kernels`, every matmul group a template
/// implements) has a `liger.kernel_config` and a kernel in
/// `gpu.module @liger_kernels` (named by `liger.kernel`, described by its
/// `liger.kernel_info`); the rest stays for later templates, with a
/// warning.
void buildGpuKernelStage(OpPassManager &pm, const GpuPipelineOptions &opts);
/// `liger-gpu-pipeline`: the three stages above.
void buildGpuPipeline(OpPassManager &pm, const GpuPipelineOptions &opts);

/// Options of `liger-loss-plan-pipeline`: liger-plan-loss's.
struct LossPlanPipelineOptions
    : public PassPipelineOptions<LossPlanPipelineOptions> {
  PassOptions::Option<int64_t> memoryBudget{
      *this, "memory-budget",
      llvm::cl::desc("Bytes one chunk of a planned loss group's logits may "
                     "take (liger-plan-loss)"),
      llvm::cl::init(kDefaultLossMemoryBudget)};
  PassOptions::Option<bool> dwF32{
      *this, "dw-f32",
      llvm::cl::desc("A planned loss group sums dW across chunks in an f32 "
                     "buffer (liger-plan-loss)"),
      llvm::cl::init(false)};
};

/// `liger-loss-plan-pipeline`: the lm_head loss fused and planned as the
/// GPU path plans it, without the other fusions (the CPU reference of a
/// planned loss runs its chunk functions). Pre: liger ops. Post: every
/// linear + cross-entropy chain is a loss group; every one liger-plan-loss
/// can plan carries `liger.plan` and its chunk functions are in the module.
///   1. liger-fuse-linear-cross-entropy
///   2. liger-plan-loss
void buildLossPlanPipeline(OpPassManager &pm,
                           const LossPlanPipelineOptions &opts);

/// Registers the pipelines above with the pass registry.
void registerLigerPipelines();

} // namespace mlir::liger

#endif // LIGER_PIPELINES_PIPELINES_H
