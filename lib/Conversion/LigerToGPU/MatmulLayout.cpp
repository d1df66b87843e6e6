//===- MatmulLayout.cpp - shared memory of a matmul kernel ----------------===//
//
// MatmulLayout.h draws the two layouts; this file places their regions.
//
//===----------------------------------------------------------------------===//

#include "liger/Conversion/LigerToGPU/MatmulLayout.h"

#include "mlir/IR/TypeUtilities.h"

using namespace mlir;
using namespace mlir::liger;

MatmulLayout::MatmulLayout(const MatmulPlan &plan,
                           const MatmulKernelConfig &config)
    : stages(config.stages), tileK(config.tileK) {
  int64_t elementBytes = plan.elementBytes;
  int64_t numB = plan.numBTiles();
  int64_t r = plan.loraRank;
  bytesPerRow = config.tileK * elementBytes;
  if (config.wgmma) {
    // Tiles are TMA destinations in 128-byte swizzled rows: the ring and
    // the swizzle atoms 1024-byte aligned, the tiles read once 128-byte
    // aligned (TMA's least).
    layout.append(kBarriers, 1024, 1024);
    tileOffsets.push_back(0);
    int64_t bytesA = config.tileM * bytesPerRow;
    int64_t bytesB = config.tileN * bytesPerRow;
    for (int64_t t = 0; t <= numB; ++t)
      tileOffsets.push_back(bytesA + t * bytesB);
    bytesPerStage = bytesA + numB * bytesB + r * bytesPerRow;
    layout.append(kStages, config.stages * bytesPerStage, 1024);
    if (r)
      layout.append(kLoRAB, config.tileN * r * elementBytes, 128);
    // A consumer warpgroup's 64 rows of a 16-bit output tile.
    bytesPerOutputWarpgroup = 64 * config.tileN * 2;
    // The output tiles go over the drained stages where they all fit there
    // (an accumulated dW's one tile sums in its set's `old_tile`). In a
    // tile loop (pingpong, persistent) the ring is never drained: the
    // output goes through boxes of its own (below), where the group has one
    // result (more would need a region per result).
    bytesPerOutputTile = config.tileM / 64 * bytesPerOutputWarpgroup;
    oldTile = plan.accumulateTile;
    if (oldTile)
      // (1024-byte aligned: the swizzle's atom, as the consumers address it)
      layout.append(kOldTile, config.consumerSets() * bytesPerOutputTile, 1024);
    bool sixteenBit = llvm::all_of(plan.group.getResultTypes(), [](Type t) {
      return getElementTypeOrSelf(t).getIntOrFloatBitWidth() == 16;
    });
    bool fits = config.loopsOverTiles()
                    ? plan.numOutputs() == 1
                    : plan.numOutputs() * bytesPerOutputTile <=
                          config.stages * bytesPerStage;
    tmaStore = plan.body != MatmulBody::QKRoPE && sixteenBit &&
               (!plan.accumulator || oldTile) && config.tileN % 64 == 0 &&
               (oldTile || fits);
    int64_t bytesPerOutputSet = plan.numOutputs() * bytesPerOutputTile;
    boxesPerRowBlock = config.tileN / 64;
    // In a tile loop each consumer warpgroup stages its one result in
    // kRotatingBoxes boxes in turn, each stored as soon as it is written:
    // 16 KiB a warpgroup beside the ring, not its whole rows (a 128 x 256
    // tile keeps 4 stages).
    rotating = tmaStore && config.loopsOverTiles() && !oldTile;
    if (rotating)
      layout.append(kOutput,
                    config.consumerSets() * config.tileWarpgroups() *
                        kRotatingBoxes * outputBoxBytes,
                    1024);
    else if (tmaStore && !oldTile)
      layout.overlay(kOutput, kStages, bytesPerOutputSet);
    return;
  }
  // cp.async + ldmatrix: K-major tiles [rows, tile_k + 8], MN-major ones
  // [tile_k, columns + 8], in rings of `stages`.
  auto tileShape = [&](int64_t width, bool mnMajor) -> SmallVector<int64_t> {
    return mnMajor
               ? SmallVector<int64_t>{config.stages, config.tileK, width + 8}
               : SmallVector<int64_t>{config.stages, width, config.tileK + 8};
  };
  layout.appendArray(kX, tileShape(config.tileM, plan.aMNMajor()), elementBytes,
                     16);
  for (int64_t p = 0; p < numB; ++p)
    layout.appendArray(weightRegion(p),
                       tileShape(config.tileN, plan.bMNMajor()), elementBytes,
                       16);
  if (r) {
    layout.appendArray(kLoRAA, {config.stages, r, config.tileK + 8},
                       elementBytes, 16);
    layout.appendArray(kLoRAB, {config.tileN, r + 8}, elementBytes, 16);
  }
  if (plan.headDim) {
    SmallVector<int64_t> exchange = {config.tileM, config.tileN + 8};
    layout.overlay(kExchange, kX, exchange[0] * exchange[1] * elementBytes,
                   exchange);
  }
  if (plan.norm)
    layout.appendArray(kRowSums, {config.tileM}, 4, 4);
}
