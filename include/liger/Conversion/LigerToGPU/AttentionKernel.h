//===- AttentionKernel.h - liger.attention as a GPU kernel ------*- C++ -*-===//
//
// The attention template (sm_90a): an attention group (one liger.attention)
// as one persistent kernel. A CTA takes tiles of 128 query rows of one
// (batch, head); a producer warp loads the tile's q once and blocks of k
// and v into a ring of stages with TMA; two consumer warpgroups (64 rows
// each) compute S = q·kᵀ with wgmma, an online softmax in f32 (exp2, the
// scale's log2 e folded in), and O += P·v with P from registers, and store
// O / l. AttentionKernel.cpp and docs/Design/GPU-Lowering.md have the
// details.
//
//===----------------------------------------------------------------------===//

#ifndef LIGER_CONVERSION_LIGERTOGPU_ATTENTIONKERNEL_H
#define LIGER_CONVERSION_LIGERTOGPU_ATTENTIONKERNEL_H

#include "liger/Conversion/LigerToGPU/GpuBuilder.h"
#include "liger/Dialect/Liger/IR/LigerKernelAttrs.h"
#include "liger/Dialect/Liger/IR/LigerOps.h"
#include "liger/Runtime/KernelAbi.h"
#include "liger/Target/GpuTarget.h"

#include "mlir/Dialect/GPU/IR/GPUDialect.h"

namespace mlir::liger {

/// What the attention template reads of an attention group: one
/// liger.attention (the forward) or one liger.attention_grad (the
/// backward).
struct AttentionPlan {
  mutable FusionOp group; /// (ops are handles: mutable in a const plan)
  mutable AttentionOp op; ///< the forward's, or null
  mutable AttentionGradOp gradOp; ///< the backward's, or null
  /// The group's inputs (block arguments) q, k and v read (one input may
  /// be more than one of them); the backward's incoming gradient, and the
  /// forward's output and lse it takes as saved operands (null when it has
  /// none).
  BlockArgument q, k, v, grad, out, lse;
  Type elementType;
  int64_t queryHeads = 0, kvHeads = 0, headDim = 0, valueDim = 0;
  bool causal = false;
  /// The sliding window (keys a query sees up to its diagonal), 0: none.
  int64_t window = 0;
  /// The logit softcap c (scores c · tanh(scale · q · kᵀ / c)), 0: none.
  double softcap = 0;
  double scale = 0; ///< the op's, or 1/sqrt(D)

  /// The factor of the scores in the log2 domain of the softmax: scale ·
  /// log2 e, or with a softcap c · log2 e (the scores then being the
  /// tanh's).
  double log2Factor() const {
    return (softcap ? softcap : scale) * 1.4426950408889634;
  }
  /// With a softcap c, the factor of the raw scores S in the tanh's
  /// argument: S · scale / c.
  double capArgumentFactor() const { return scale / softcap; }

  bool backward() const { return static_cast<bool>(gradOp); }
  /// The forward yields its lse too.
  bool returnsLse() const { return op && op.getReturnLse(); }
};

/// The plan of `group` (kind attention), or failure with an error on it
/// when its body is not one liger.attention over its inputs yielding its
/// result.
FailureOr<AttentionPlan> analyzeAttentionGroup(FusionOp group);

/// Whether `target` has what the attention template is built of (wgmma and
/// TMA: sm_90a).
bool attentionTemplateRunsOn(const GpuTargetInfo &target);

/// Why the attention template does not take `plan` on `target` (its
/// limits: sm_90a, bf16 or f16, static head counts and head dimension, D
/// = Dv a multiple of 64 up to 256); empty when it does.
std::string attentionTemplateProblem(const AttentionPlan &plan,
                                     const GpuTargetInfo &target);

/// The default tunables for `plan` on `target`: key/value blocks of 128
/// rows (64 for D > 128, which keeps the accumulators in registers), as
/// many stages as fit in shared memory, 2 to 4.
KernelConfigAttr selectAttentionKernelConfig(const AttentionPlan &plan,
                                             const GpuTargetInfo &target);

/// Checks a pinned configuration's tunables against the template: tile_n
/// 64, 96 or 128, 2 to 4 stages, the registers and shared memory they take.
/// Emits on the group.
LogicalResult verifyAttentionKernelConfig(const AttentionPlan &plan,
                                          KernelConfigAttr config,
                                          const GpuTargetInfo &target);

/// Builds the kernel `name` of `plan`'s group into `module`, or warns on
/// the group (naming attentionTemplateProblem) and fails: the group is
/// then left uncompiled.
FailureOr<::liger::runtime::KernelSpec>
buildAttentionKernel(const AttentionPlan &plan, gpu::GPUModuleOp module,
                     StringRef name, KernelConfigAttr config,
                     const GpuTargetInfo &target);

/// The backward kernel (AttentionGradKernel.cpp), for buildAttentionKernel
/// once the plan and its configuration have been checked: a persistent
/// kernel over 128-row key tiles and a finishing kernel that rounds dq
/// from its f32 workspace.
FailureOr<::liger::runtime::KernelSpec>
buildAttentionGradKernel(const AttentionPlan &plan, gpu::GPUModuleOp module,
                         StringRef name, KernelConfigAttr config);

/// The backward kernel's shared memory for head dimension `headDim` and a
/// ring of `stages` query blocks.
int64_t attentionGradSharedBytes(int64_t headDim, int64_t stages);

/// The tensor map of the attention kernels' heads parameter `param` of
/// `elementBytes`-byte elements: boxes of `rows` rows by 128 bytes (64
/// columns of bf16/f16, 32 of f32), 128-byte swizzle.
::liger::runtime::KernelTensorMap
attentionTensorMap(unsigned param, int64_t rows, int64_t elementBytes = 2);

/// The attention kernels' persistent order: tiles in rounds of gridDim.x,
/// one a CTA, in a snake (block b takes place b of even rounds and
/// gridDim.x - 1 - b of odd ones, so that the CTA with a round's heaviest
/// tile takes the next round's lightest). The index of the tile the CTA
/// takes at its iteration `i`.
Value snakeTileIndex(GpuBuilder &b, Value i);
/// How many of `tiles` tiles the CTA takes in that order: one a full
/// round, and one of the last, partial round if its place there is below
/// what is left.
Value snakeTilesOfCta(GpuBuilder &b, Value tiles);

/// The attention kernels' loop over a persistent CTA's tiles: an scf.for
/// over `ctaTiles` carrying the fills of the ring before each tile, the
/// tile of iteration i from `tileAt`, `body` run on it, then its fills
/// (`fillsOf`) added.
template <typename Tile>
void forEachCtaTile(
    GpuBuilder &b, Value ctaTiles,
    function_ref<Tile(GpuBuilder &, Value i)> tileAt,
    function_ref<Value(const Tile &)> fillsOf,
    function_ref<void(GpuBuilder &, const Tile &, Value i, Value fills)> body) {
  auto tiles = scf::ForOp::create(b, b.index(0), ctaTiles, b.index(1),
                                  ValueRange{b.index(0)});
  GpuBuilder tb = b.atStart(tiles.getBody());
  Value i = tiles.getInductionVar();
  Value fills = tiles.getRegionIterArgs()[0];
  Tile t = tileAt(tb, i);
  body(tb, t, i, fills);
  scf::YieldOp::create(tb, ValueRange{tb.add(fills, fillsOf(t))});
}

} // namespace mlir::liger

#endif // LIGER_CONVERSION_LIGERTOGPU_ATTENTIONKERNEL_H
