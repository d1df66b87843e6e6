//===- MatmulLayout.h - shared memory of a matmul kernel --------*- C++ -*-===//
//
// Where a matmul kernel keeps what it stages in shared memory, built once
// from its plan and configuration. The configuration's selection and
// verification read its size (the only size formula of the templates); the
// emitters read every offset, stride and shape from it.
//
// wgmma + TMA: one extern buffer, 1024-byte aligned (the 128-byte
// swizzle's atom):
//
//   barriers   [0, 1024)  full and empty mbarrier of each stage, LoRA B's
//                         mbarrier, each consumer set's old dW tile's
//                         full (and in a tile loop empty) mbarrier
//   stages                the ring: per stage the x tile, the weight
//                         tile(s) and LoRA A's slice, rows of tile_k
//                         elements (128 bytes), 128-byte swizzled
//   lora_b                LoRA B's [tile_n, r] tile, read once
//   old_tile              a 16-bit dW buffer's old [tile_m, tile_n] tile,
//                         one per consumer set, summed and stored there
//   output     (over stages, once drained) the tiles the TMA-store
//                         epilogue stores, one per result, 64 rows per
//                         consumer warpgroup (none beside `old_tile`,
//                         where a dW's one tile sums); in a tile loop a region
//                         of its own, two 64 x 64 boxes per consumer
//                         warpgroup, written and stored in turn
//
// mma.sync: memref views of the dynamic shared memory:
//
//   x, w0[, w1]           [stages, rows, tile_k + 8] (K-major) or
//                         [stages, tile_k, columns + 8] (MN-major): rows
//                         padded by 16 bytes so that ldmatrix's eight rows
//                         fall in distinct banks
//   lora_a, lora_b        LoRA's [stages, r, tile_k + 8] and [tile_n, r + 8]
//   exchange   (over x, once drained) RoPE's rounded [tile_m, tile_n + 8]
//                         tile, exchanged between warps
//   row_sums              the RMSNorm prologue's [tile_m] f32 sums
//
//===----------------------------------------------------------------------===//

#ifndef LIGER_CONVERSION_LIGERTOGPU_MATMULLAYOUT_H
#define LIGER_CONVERSION_LIGERTOGPU_MATMULLAYOUT_H

#include "liger/Conversion/LigerToGPU/MatmulConfig.h"
#include "liger/Conversion/LigerToGPU/SharedMemoryLayout.h"

#include <cassert>

namespace mlir::liger {

/// The shared memory of one matmul kernel, as drawn above.
class MatmulLayout {
public:
  MatmulLayout(const MatmulPlan &plan, const MatmulKernelConfig &config);

  const SharedMemoryLayout &regions() const { return layout; }
  /// The dynamic shared memory the kernel needs, in bytes.
  int64_t size() const { return layout.size(); }
  int64_t offset(StringRef region) const { return layout.offset(region); }
  /// The shape of an mma.sync region's memref view.
  ArrayRef<int64_t> shape(StringRef region) const {
    return layout[region].shape;
  }

  // Regions.
  static constexpr StringLiteral kBarriers = "barriers", kStages = "stages",
                                 kLoRAB = "lora_b", kOldTile = "old_tile",
                                 kOutput = "output", kX = "x",
                                 kLoRAA = "lora_a", kExchange = "exchange",
                                 kRowSums = "row_sums";
  /// mma.sync: weight p's tiles.
  static std::string weightRegion(int64_t p) { return "w" + std::to_string(p); }

  // wgmma.
  /// The full mbarrier of stage s is at fullBarrier() + barrierBytes · s,
  /// its empty one at emptyBarrier() + barrierBytes · s.
  static constexpr int64_t barrierBytes = 8;
  int64_t fullBarrier() const { return 0; }
  int64_t emptyBarrier() const { return barrierBytes * stages; }
  /// LoRA B's and the old dW tiles' mbarriers (the stages' pairs stay below
  /// 512: verifyMatmulKernelConfig allows 8 stages at most): consumer set
  /// s's old tile is full at oldTileBarrier() + barrierBytes · s and, in a
  /// tile loop, free again (its store has read it) at oldTileEmptyBarrier()
  /// + barrierBytes · s.
  int64_t loraBarrier() const { return 512; }
  int64_t oldTileBarrier() const { return 768; }
  int64_t oldTileEmptyBarrier() const { return 768 + 4 * barrierBytes; }
  /// Stage s starts at offset(kStages) + s · stageBytes(); tile t at
  /// tileOffset(t) into it: 0 the x tile, 1 + p weight p, 1 + numBTiles
  /// LoRA A's slice.
  int64_t stageBytes() const { return bytesPerStage; }
  int64_t tileOffset(int64_t tile) const { return tileOffsets[tile]; }
  /// One row of a stage's tiles: tile_k elements (128 bytes for wgmma).
  int64_t rowBytes() const { return bytesPerRow; }
  /// An MN-major tile's TMA box: tile_k rows of 128 bytes.
  int64_t mnBoxBytes() const { return bytesPerRow * tileK; }
  /// A 64 x 64 box of a 16-bit output (128-byte swizzled rows), and a
  /// 64-row block of the output tile (or of the old one): a data-parallel
  /// consumer warpgroup's rows.
  static constexpr int64_t outputBoxBytes = 64 * 128;
  int64_t outputWarpgroupBytes() const { return bytesPerOutputWarpgroup; }
  /// Where 64-column box `box` of result `result`'s part of a consumer
  /// warpgroup's output rows starts, in bytes from the warpgroup's first
  /// (each result's tile is tile_m x tile_n, one after the other).
  int64_t outputBoxOffset(int64_t result, int64_t box) const {
    return result * bytesPerOutputTile + box * outputBoxBytes;
  }
  /// In a tile loop (not a 16-bit dW's old tile): consumer warpgroup w
  /// stages its output rows box by box (64-row block rb's box jb is its
  /// box rb · tile_n / 64 + jb) in kRotatingBoxes boxes of its own, at
  /// offset(kOutput) + (w · kRotatingBoxes + box % kRotatingBoxes) ·
  /// outputBoxBytes, storing each as soon as it is written; a box is
  /// written again once the store kRotatingBoxes boxes before has read it.
  static constexpr int64_t kRotatingBoxes = 2;
  bool rotatesOutputBoxes() const { return rotating; }
  /// The 64-column boxes of a 64-row block of the output (tile_n / 64).
  int64_t outputBoxesPerRowBlock() const { return boxesPerRowBlock; }
  /// The warpgroup's box `box` of row block `rowBlock`, counted in the
  /// order it writes them.
  int64_t rotatingBoxIndex(int64_t rowBlock, int64_t box) const {
    return rowBlock * boxesPerRowBlock + box;
  }
  /// Where the warpgroup stages result `result`'s box `box` of its row
  /// block `rowBlock`, in bytes from its first box (the rotating boxes, or
  /// its rows of the output tile).
  int64_t stagedBoxOffset(int64_t result, int64_t rowBlock,
                          int64_t box) const {
    if (rotating) {
      assert(result == 0 && "tile loops stage one result");
      return rotatingBoxIndex(rowBlock, box) % kRotatingBoxes * outputBoxBytes;
    }
    return outputBoxOffset(result, box) + rowBlock * bytesPerOutputWarpgroup;
  }
  /// One 16-bit tile_m x tile_n tile: consumer set s's old dW tile starts
  /// at offset(kOldTile) + s · outputTileBytes().
  int64_t outputTileBytes() const { return bytesPerOutputTile; }
  /// The epilogue stages each result's output tile in `output` and stores
  /// it with TMA (16-bit results, tile_n a multiple of 64, every result's
  /// tile within the stages, or in a tile loop one result; not RoPE, not an
  /// f32 accumulation).
  bool storesWithTma() const { return tmaStore; }
  /// dW accumulated into a 16-bit buffer: its old tile is TMA-loaded into
  /// the consumer set's `old_tile`, summed there and stored from there.
  bool hasOldTile() const { return oldTile; }

private:
  SharedMemoryLayout layout;
  int64_t stages = 0, tileK = 0;
  int64_t bytesPerStage = 0, bytesPerRow = 0, bytesPerOutputWarpgroup = 0,
          bytesPerOutputTile = 0, boxesPerRowBlock = 0;
  SmallVector<int64_t, 4> tileOffsets;
  bool tmaStore = false, oldTile = false, rotating = false;
};

} // namespace mlir::liger

#endif // LIGER_CONVERSION_LIGERTOGPU_MATMULLAYOUT_H
