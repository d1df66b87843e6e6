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

#include "liger/Dialect/Liger/IR/LigerOps.h"
#include "liger/Runtime/KernelAbi.h"

#include "mlir/Dialect/GPU/IR/GPUDialect.h"

#include <string>

namespace mlir::liger {

/// The launch configuration of a rowwise kernel.
struct RowKernelConfig {
  int64_t threads = 256;
  int64_t vectorWidth = 8;
  /// Keep the chunks of an input that a step loaded in registers for the
  /// later steps of the row (RMSNorm reads x for its sum of squares and
  /// again to normalize) instead of reading them again through the caches;
  /// a reduced cross-entropy fused with its gradient at one CTA per SM keeps
  /// what of the row fits in shared memory for its gradient pass.
  bool reuseLoads = true;
  /// CTAs per SM for a kernel whose grid is one CTA per workspace row (a
  /// reduced cross-entropy); 0: the template's default.
  int64_t ctasPerSm = 0;
};

/// The templates that read a row configuration, for the rule on its vector
/// width.
enum class RowTemplate {
  RowProgram,   ///< buildRowKernel; RoPE's half head follows the same rule
  CrossEntropy, ///< buildCrossEntropyKernel
};

/// The rule on the vector width W of a row template over rows of `hidden`
/// elements of `elementType`, written once for the default configuration
/// and every check of a pinned one: W is a power of two whose chunk spans
/// at most 16 bytes (one vector load or store), and for the row program W
/// divides the row, because every row must start on a chunk boundary (a row
/// of 7 f32 is only 4-byte aligned after the first). The cross-entropy
/// template takes any row length at any such W: a row that does not start
/// on a chunk boundary is peeled (single elements up to its first aligned
/// chunk and after its last). Returns why W is refused, or an empty string
/// when it is legal.
std::string checkRowVectorWidth(RowTemplate tmpl, int64_t hidden,
                                Type elementType, int64_t width);

/// The widest vector width checkRowVectorWidth accepts: 16-byte chunks
/// wherever the row allows them.
int64_t selectRowVectorWidth(RowTemplate tmpl, int64_t hidden,
                             Type elementType);

/// The default configuration for rows of `hidden` elements of `elementType`:
/// the widest legal vector width, about two chunks per thread.
RowKernelConfig selectRowKernelConfig(int64_t hidden, Type elementType);

/// The default configuration of a rowwise group: selectRowKernelConfig for
/// the row length and dtype of its first row-shaped input.
RowKernelConfig selectRowKernelConfig(FusionOp group);

/// Reads the `liger.kernel_config` attribute of `group` ({threads,
/// vector_width[, reuse_loads][, ctas_per_sm]}), checking it (the vector
/// width by checkRowVectorWidth against the group's row), or returns the
/// default of selectRowKernelConfig(group).
FailureOr<RowKernelConfig> getRowKernelConfig(FusionOp group);

/// The `liger.kernel_config` attribute holding `config`.
DictionaryAttr getRowKernelConfigAttr(MLIRContext *ctx,
                                      const RowKernelConfig &config);

/// How a kernel parameter is indexed, for the manifest.
enum class RowParamKind {
  Rows,       ///< [..., H], leading dimensions flattened into rows
  RowScalars, ///< [...]: one value per row
  Feature,    ///< [H]
  Scalar,     ///< rank 0
  Heads,      ///< [B, heads, T, D] (RoPE's q and k)
  Tables,     ///< [B or 1, T, D] (RoPE's cos and sin)
  Partials,   ///< [ctas, H] f32 workspace: one partial column reduction per
              ///< CTA, finished by the second kernel
  Matrix,     ///< [N, K], static: a projection's weight (`heads` holds N)
};

/// One kernel parameter (a memref), in order.
struct RowKernelParam {
  std::string name; // "input0", "output1", ...
  bool isOutput = false;
  bool isWorkspace = false; // a Partials buffer the launcher allocates
  RowParamKind kind = RowParamKind::Rows;
  Type elementType;
  int64_t hidden = 0; // the row (or feature) length; 0 for row scalars
  int64_t heads = 0;  // the head count of a Heads parameter
};

/// What the runtime needs to launch a kernel.
struct RowKernelInfo {
  std::string name;
  RowKernelConfig config;
  int64_t hidden = 0;
  int64_t sharedMemoryBytes = 0;
  SmallVector<RowKernelParam> params;
  std::string opChain;       // "liger.add_rms_norm"
  std::string grid = "rows"; // the grid shape symbol: "rows", "tokens" or
                             // "ctas" (the leading size of the workspaces)
  /// A 3-D grid (manifest syntax: integers, "rows", "rows/N", ...) for
  /// templates whose grid is not one CTA per row or token; empty otherwise.
  SmallVector<std::string> gridDims;
  std::string templateName; // empty: "rowwise" or "rope" from `grid`
  /// Groups that reduce across rows (RMSNorm's dW) are two kernels: the
  /// first loops over rows with a stride of the grid and writes one partial
  /// per CTA into each workspace; this second one (same parameters) reduces
  /// the partials and finishes the per-feature steps. Empty when none.
  std::string finishName;
  int64_t finishGrid = 0;
  int64_t finishThreads = 0;
  int64_t finishSharedMemoryBytes = 0;
  /// The CTAs per SM the first kernel is meant to run with: a launcher
  /// sizes the workspaces to min(rows, SMs * ctasPerSm) rows (at least 1).
  int64_t ctasPerSm = 0;
  /// The TMA descriptors the launcher encodes and passes by value after
  /// the memref parameters (the wgmma matmul kernels): the kernel ABI's
  /// record, as the manifest carries it.
  SmallVector<::liger::runtime::KernelTensorMap> tensorMaps;
};

/// Builds the kernel of `group` into `module` (at its end), and its finishing
/// kernel `<name>_finish` when the group reduces across rows. Fails with a
/// diagnostic on the group when a body op is outside what the row program
/// supports.
FailureOr<RowKernelInfo> buildRowKernel(FusionOp group, gpu::GPUModuleOp module,
                                        StringRef name,
                                        const RowKernelConfig &config);

/// Builds the kernel of a group holding one liger.rope or liger.rope_grad:
/// one CTA per token (B·T) applies the rotation to every head of q and k,
/// each thread a pair of W-wide chunks (d, d + D/2), so that every element
/// and its rotate-half partner are read once and written once.
FailureOr<RowKernelInfo>
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
FailureOr<RowKernelInfo> buildCrossEntropyKernel(FusionOp group,
                                                 gpu::GPUModuleOp module,
                                                 StringRef name,
                                                 const RowKernelConfig &config,
                                                 int64_t maxSharedMemoryBytes);

} // namespace mlir::liger

#endif // LIGER_CONVERSION_LIGERTOGPU_ROWKERNEL_H
