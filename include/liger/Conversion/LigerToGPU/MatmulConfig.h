//===- MatmulConfig.h - tile configuration of matmul groups -----*- C++ -*-===//
//
// The launch configuration of a matmul fusion group (a Tensor Core GEMM with
// its prologue and epilogue): the CTA tile (tile_m x tile_n), the K slice per
// pipeline stage, the number of stages, and the Tensor Core instruction
// family (wgmma on sm_90a, mma.sync on sm_80). liger-select-kernel-config
// chooses it from the group's shapes and the target and writes it as
// `liger.kernel_config`; a pinned configuration is checked against the
// target's limits (shared memory, instruction shapes) with a diagnostic.
//
//===----------------------------------------------------------------------===//

#ifndef LIGER_CONVERSION_LIGERTOGPU_MATMULCONFIG_H
#define LIGER_CONVERSION_LIGERTOGPU_MATMULCONFIG_H

#include "liger/Dialect/Liger/IR/LigerOps.h"
#include "liger/Target/GpuTarget.h"

namespace mlir::liger {

/// What the configuration depends on, read from a matmul group's body.
struct MatmulShape {
  int64_t m = ShapedType::kDynamic; ///< rows (tokens): static or dynamic
  int64_t k = 0;                    ///< the reduction width (x's last size)
  SmallVector<int64_t> n;           ///< each projection's output width
  bool paired = false;  ///< gate and up computed together (SwiGLU/GeGLU)
  int64_t loraRank = 0; ///< r of a LoRA projection, else 0
  bool rmsNorm = false;  ///< an RMSNorm prologue
  int64_t elementBytes = 2;
  /// The operands' layouts: K-major (x [M, K], W [N, K]: the forward
  /// product) or MN-major (a gradient product reads W [K, N] for dx = dy · W
  /// and both dy [K, M] and x [K, N] for dW = dyᵀ · x, K being the tokens).
  bool aMNMajor = false, bMNMajor = false;
  /// A q/k pair with RoPE: the head size (a column tile holds whole heads
  /// of one projection), else 0.
  int64_t headDim = 0;
  /// dW accumulated into a 16-bit buffer (wgmma): the buffer's old tile is
  /// TMA-loaded into a region of its own while the product runs, then
  /// added and stored back through it with TMA.
  bool accumulateTile = false;
};

struct MatmulKernelConfig {
  int64_t tileM = 128, tileN = 128, tileK = 64, stages = 4;
  bool wgmma = true; ///< wgmma + TMA (sm_90a), else mma.sync (sm_80)

  /// Threads per CTA: for wgmma one warpgroup per 64 rows of the tile plus
  /// a producer warpgroup issuing TMA; for mma.sync 8 warps (4 for a
  /// 64-row tile).
  int64_t threads() const {
    return wgmma ? 128 * (tileM / 64 + 1) : (tileM >= 128 ? 256 : 128);
  }
  /// Shared memory: `stages` operand stages plus one output tile.
  int64_t sharedMemoryBytes(const MatmulShape &shape) const;
};

/// Reads the projections of a matmul group; fails with a diagnostic on the
/// group when it holds none or their shapes are not static.
FailureOr<MatmulShape> analyzeMatmulGroup(FusionOp group);

/// The default configuration of `shape` on `target`.
MatmulKernelConfig selectMatmulKernelConfig(const MatmulShape &shape,
                                            const GpuTargetInfo &target);

/// Checks `config` against `shape` and `target`; emits on `group`.
LogicalResult verifyMatmulKernelConfig(FusionOp group,
                                       const MatmulKernelConfig &config,
                                       const MatmulShape &shape,
                                       const GpuTargetInfo &target);

DictionaryAttr getMatmulKernelConfigAttr(MLIRContext *ctx,
                                         const MatmulKernelConfig &config);

/// The `liger.kernel_config` of a matmul group, parsed (not yet verified).
FailureOr<MatmulKernelConfig> readMatmulKernelConfig(FusionOp group,
                                                     DictionaryAttr dict);

} // namespace mlir::liger

#endif // LIGER_CONVERSION_LIGERTOGPU_MATMULCONFIG_H
