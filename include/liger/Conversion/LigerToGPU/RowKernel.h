//===- RowKernel.h - rowwise fusion groups as GPU kernels -------*- C++ -*-===//
//
// Turns a rowwise liger.fusion group into one gpu.func: one CTA per row,
// each thread holding `vectorWidth`-wide chunks of the row in registers,
// f32 math, warp-shuffle then shared-memory reductions, vector loads and
// stores of 16 bytes where the width allows, masked tail chunks.
//
// The kernel's meaning is the group's reference lowering: the body is
// lowered to linalg (liger-lower-to-linalg's patterns) and each
// linalg.generic becomes a step of a row program (an elementwise pass over
// the row, a row reduction, or a per-row scalar computation), so the GPU
// kernel and the CPU oracle share one definition of every op.
//
//===----------------------------------------------------------------------===//

#ifndef LIGER_CONVERSION_LIGERTOGPU_ROWKERNEL_H
#define LIGER_CONVERSION_LIGERTOGPU_ROWKERNEL_H

#include "liger/Dialect/Liger/IR/LigerKernelAttrs.h"
#include "liger/Dialect/Liger/IR/LigerOps.h"
#include "liger/Runtime/KernelAbi.h"

#include "mlir/Dialect/GPU/IR/GPUDialect.h"

#include <algorithm>
#include <string>

namespace mlir::liger {

/// The launch configuration of a rowwise kernel.
struct RowKernelConfig {
  int64_t threads = 256;
  int64_t vectorWidth = 8;
  /// Keep the chunks of an input that a step loaded in registers for the
  /// later steps of the row (RMSNorm reads x for its sum of squares and
  /// again to normalize) instead of reading them again through the caches;
  /// a reduced cross-entropy fused with its gradient at one CTA per SM, and
  /// a looped row program reading a row input in several passes, keep what
  /// of the row fits in shared memory for the later passes.
  bool reuseLoads = true;
  /// CTAs per SM for a kernel whose grid is one CTA per workspace row (a
  /// reduced cross-entropy, a row program reducing across rows), and that a
  /// looped row program aims at (its register bound and its staging's share
  /// of shared memory); 0: the template's default.
  int64_t ctasPerSm = 0;
  /// Selection only (not a tunable of the attribute): the threads to
  /// compile the group at instead where ptxas spills at `threads`, 0 for
  /// none. The loop form's default sets it (RowKernel.cpp, kLoopThreads);
  /// selectKernelConfig hands it on as the group's spill fallback.
  int64_t spillFallbackThreads = 0;
  /// The CTAs of a thread-block cluster that split each row of a looped
  /// row program (rowClusterSlice), 1 for none: each keeps its part of the
  /// row inputs its passes read again in shared memory, and their block
  /// reductions are combined through distributed shared memory.
  int64_t cluster = 1;
};

/// The columns of a row of `hidden` that each CTA of a cluster of
/// `cluster` takes (the last CTA the rest): ceil(hidden / (cluster W)) chunks
/// of `width` W, CTA r from column r times that. The one formula of the
/// split, for the lowering and for the rule on it (checkRowCluster).
int64_t rowClusterSlice(int64_t hidden, int64_t width, int64_t cluster);

/// The rule on a row program's cluster: every CTA of it takes at least one
/// chunk of the row. Returns why `cluster` cannot split rows of `hidden`
/// in chunks of `width`, or an empty string when it can.
std::string checkRowCluster(int64_t hidden, int64_t width, int64_t cluster);

/// The templates that read a row configuration, for the rule on its vector
/// width.
enum class RowTemplate {
  RowProgram,   ///< buildRowKernel; RoPE's half head follows the same rule
  CrossEntropy, ///< buildCrossEntropyKernel
};

/// The rule on the vector width W of a row template over rows of `hidden`
/// elements of `elementType`, written once for the default configuration
/// and every check of a pinned one: W is a power of two whose chunk spans
/// at most 16 bytes (one vector load or store). Both templates take any
/// row length at any such W: where W does not divide the row, a row does
/// not start on a chunk boundary (a row of 7 f32 is only 4-byte aligned
/// after the first) and is peeled (single elements up to its first aligned
/// chunk and after its last: rowPeelBody). Returns why W is refused, or an
/// empty string when it is legal.
std::string checkRowVectorWidth(RowTemplate tmpl, int64_t hidden,
                                Type elementType, int64_t width);

/// The widest vector width checkRowVectorWidth accepts: 16-byte chunks.
int64_t widestRowVectorWidth(Type elementType);

/// The widest vector width checkRowVectorWidth accepts, 16-byte chunks,
/// where it divides the row; for the row program narrower ones until one
/// divides it (selectRowKernelConfig peels a looped row program instead,
/// where it can).
int64_t selectRowVectorWidth(RowTemplate tmpl, int64_t hidden,
                             Type elementType);

/// The elements of a peeled row's full chunks of `width` (a multiple of
/// it), the same for every row: the most that fit after any row's head of
/// up to width - 1 single elements. The row's other hidden - rowPeelBody
/// elements (at most 2 width - 2, or the whole of a short row) are single
/// elements, one a thread.
int64_t rowPeelBody(int64_t hidden, int64_t width);

/// The rule on peeling a row program's rows of `hidden` at vector width W
/// (W does not divide them; else no rule): a row's full chunks start at its
/// first chunk boundary, a column that differs from row to row, so no
/// operand may be indexed by column alone (`readsByColumn`: a weight, or a
/// value reduced across rows, would be read there unaligned), and the row
/// is not split over a cluster. Returns why the peel is refused, or an
/// empty string.
std::string checkRowPeel(int64_t hidden, int64_t width, int64_t cluster,
                         bool readsByColumn);

/// The default configuration for rows of `hidden` elements of `elementType`:
/// the widest legal vector width, about two chunks per thread.
RowKernelConfig selectRowKernelConfig(int64_t hidden, Type elementType);

/// The default configuration of a rowwise group: selectRowKernelConfig for
/// the row length and dtype of its first row-shaped input. (No cluster: a
/// cluster is pinned; RowKernelConfig::cluster.)
RowKernelConfig selectRowKernelConfig(FusionOp group);

/// The template that builds rowwise group `group`, decided by its first op:
/// rope for liger.rope and liger.rope_grad, cross_entropy for
/// liger.cross_entropy and liger.cross_entropy_grad, else rowwise.
KernelTemplate rowKernelTemplate(FusionOp group);

/// Reads the row tunables of `config` (a rowwise or cross_entropy
/// `#liger.kernel_config`), checking its vector width by
/// checkRowVectorWidth against the row of `group`.
FailureOr<RowKernelConfig> getRowKernelConfig(FusionOp group,
                                              KernelConfigAttr config);

/// The `#liger.kernel_config` of template `kernelTemplate` holding `config`.
KernelConfigAttr getRowKernelConfigAttr(MLIRContext *ctx,
                                        KernelTemplate kernelTemplate,
                                        const RowKernelConfig &config);

/// The kernel ABI's record of a parameter of element type `elementType`
/// (one the dialect allows, which are the ones the ABI carries).
::liger::runtime::KernelParam abiParam(std::string name,
                                       ::liger::runtime::ParamRole role,
                                       ::liger::runtime::ParamKind kind,
                                       Type elementType, int64_t length,
                                       int64_t outer = 0);

/// Each template builds its kernel and returns the kernel ABI's record of
/// it (the function it implements is the bundle writer's to fill in).
///
/// Builds the kernel of `group` into `module` (at its end), and its finishing
/// kernel `<name>_finish` when the group reduces across rows. Fails with a
/// diagnostic on the group when a body op is outside what the row program
/// supports.
///
/// The loop form (a row past the register form's budget) aims at
/// config.ctasPerSm CTAs an SM (0: two, four with a reduction across rows),
/// and with reuse_loads keeps the part of each row input that more than
/// one of its passes reads that fits that share of `maxSharedMemoryBytes`
/// (the target's, per CTA) in shared memory for the later passes; every
/// other pass runs backwards over the row.
FailureOr<::liger::runtime::KernelSpec>
buildRowKernel(FusionOp group, gpu::GPUModuleOp module, StringRef name,
               const RowKernelConfig &config, int64_t maxSharedMemoryBytes);

/// The dynamic shared memory a CTA of a row template may take with
/// `ctasPerSm` CTAs resident on an SM whose CTAs may take
/// `maxSharedMemoryBytes` each (the target's maximum): the SM has that
/// maximum plus 1 KiB, each resident CTA reserves 1 KiB, and for sm_90a
/// ptxas gives the kernel's 1024-aligned dynamic buffer a 1 KiB static
/// section (GpuBuilder::externSharedBudget; .nv.shared.<kernel> in the
/// cubin, none for sm_80), which counts with its dynamic bytes. It is
/// reserved on every target.
inline int64_t sharedMemoryShare(int64_t maxSharedMemoryBytes,
                                 int64_t ctasPerSm) {
  return std::min(maxSharedMemoryBytes,
                  (maxSharedMemoryBytes + 1024) / ctasPerSm - 1024) -
         1024;
}

/// Builds the kernel of a group holding one liger.rope or liger.rope_grad:
/// one CTA per token (B·T) applies the rotation to every head of q and k,
/// each thread a pair of W-wide chunks (d, d + D/2), so that every element
/// and its rotate-half partner are read once and written once.
FailureOr<::liger::runtime::KernelSpec>
buildRoPEKernel(FusionOp group, gpu::GPUModuleOp module, StringRef name);

/// Builds the kernels of a group holding one liger.cross_entropy or
/// liger.cross_entropy_grad (CrossEntropyKernel.cpp): a CTA streams its
/// row twice at most (an online softmax, then the gradient), whatever the
/// vocabulary size; a reduced loss adds a finishing kernel.
/// `config` gives the threads, the vector width (checkRowVectorWidth: any
/// vocabulary, rows peeled to their first aligned chunk where the width
/// does not divide it) and, for a reduced loss, the CTAs per SM. A reduced
/// loss fused with its gradient with its CTAs per SM given (and
/// reuse_loads, and 16-byte chunks for cp.async) keeps what of each
/// thread's part of the row fits in `maxSharedMemoryBytes` (the target's,
/// per CTA) in shared memory between its two passes.
FailureOr<::liger::runtime::KernelSpec> buildCrossEntropyKernel(FusionOp group,
                                                 gpu::GPUModuleOp module,
                                                 StringRef name,
                                                 const RowKernelConfig &config,
                                                 int64_t maxSharedMemoryBytes);

} // namespace mlir::liger

#endif // LIGER_CONVERSION_LIGERTOGPU_ROWKERNEL_H
