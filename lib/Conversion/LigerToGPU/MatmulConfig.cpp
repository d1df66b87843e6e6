//===- MatmulConfig.cpp - tile configuration of matmul groups -------------===//

#include "liger/Conversion/LigerToGPU/MatmulConfig.h"
#include "liger/Conversion/LigerToGPU/MatmulLayout.h"

#include <algorithm>

using namespace mlir;
using namespace mlir::liger;

MatmulKernelConfig
mlir::liger::selectMatmulKernelConfig(const MatmulPlan &plan,
                                      const GpuTargetInfo &target) {
  MatmulKernelConfig config;
  config.wgmma = target.hasWgmma;
  // One 128-byte (wgmma, the 128-byte swizzle) or 64-byte (cp.async +
  // ldmatrix) row of K per stage.
  config.tileK = (config.wgmma ? 128 : 64) / plan.elementBytes;
  // Decode-sized inputs take a 64-row tile (one consumer warpgroup).
  bool small = !ShapedType::isDynamic(plan.m) && plan.m <= 64;
  config.tileM = small ? 64 : 128;
  auto allMultiples = [&](int64_t of) {
    return llvm::all_of(plan.widths, [&](int64_t n) { return n % of == 0; });
  };
  if (config.wgmma) {
    // 128 accumulator registers per consumer thread: 128 x 256 tiles, or
    // 128 x 128 per projection of a gate/up pair.
    config.tileN = plan.paired() || !allMultiples(256) ? 128 : 256;
    // A narrow projection takes a narrower tile (wgmma's n: multiples of 8).
    int64_t widest = *llvm::max_element(plan.widths);
    // An MN-major B tile is TMA boxes 64 columns wide.
    int64_t step = plan.bMNMajor() ? 64 : 8;
    config.tileN = std::min(config.tileN, (widest + step - 1) / step * step);
    // RoPE: the widest tile of whole heads that divides both projections.
    if (plan.headDim > 0 && plan.headDim % 8 == 0)
      for (int64_t t = 256 / plan.headDim * plan.headDim; t >= plan.headDim;
           t -= plan.headDim)
        if (allMultiples(t)) {
          config.tileN = t;
          break;
        }
  } else {
    // A paired gate/up tile holds two accumulators: half the width each.
    config.tileN = plan.paired() || !allMultiples(128) ? 64 : 128;
    // RoPE: whole heads dividing both projections, split over 4 warps of
    // n8 tiles.
    if (plan.headDim > 0 && plan.headDim % 8 == 0)
      for (int64_t t = 128 / plan.headDim * plan.headDim; t >= plan.headDim;
           t -= plan.headDim)
        if (allMultiples(t) && t % 32 == 0) {
          config.tileN = t;
          break;
        }
  }
  // As many stages as shared memory holds, 2 to 5.
  config.stages = 5;
  while (config.stages > 2 &&
         MatmulLayout(plan, config).size() > target.maxSharedMemoryBytes)
    --config.stages;
  return config;
}

LogicalResult
mlir::liger::verifyMatmulKernelConfig(const MatmulKernelConfig &config,
                                      const MatmulPlan &plan,
                                      const GpuTargetInfo &target) {
  FusionOp group = plan.group;
  auto bad = [&]() {
    return group.emitOpError("has an invalid matmul 'liger.kernel_config': ");
  };
  if (config.wgmma && !target.hasWgmma)
    return bad() << "mma = wgmma needs sm_90a, the target is " << target.chip;
  int64_t mStep = config.wgmma ? 64 : 16;
  if (config.tileM < mStep || config.tileM > 256 || config.tileM % mStep)
    return bad() << "tile_m must be a multiple of " << mStep
                 << " up to 256, got " << config.tileM;
  if (config.tileN < 8 || config.tileN > 256 || config.tileN % 8)
    return bad() << "tile_n must be a multiple of 8 in [8, 256], got "
                 << config.tileN;
  if (config.wgmma && plan.bMNMajor() && config.tileN % 64)
    return bad() << "tile_n must be a multiple of 64 for a gradient product "
                    "(its B operand is read N-major, in 64-column boxes), got "
                 << config.tileN;
  int64_t kBytes = config.tileK * plan.elementBytes;
  if (config.tileK < 1 || (kBytes != 32 && kBytes != 64 && kBytes != 128))
    return bad() << "tile_k must span 32, 64 or 128 bytes of K, got "
                 << config.tileK << " (" << kBytes << " bytes)";
  if (config.stages < 2 || config.stages > 8)
    return bad() << "stages must be in [2, 8], got " << config.stages;
  int64_t smem = MatmulLayout(plan, config).size();
  if (smem > target.maxSharedMemoryBytes)
    return bad() << "it needs " << smem << " bytes of shared memory, "
                 << target.chip << " has " << target.maxSharedMemoryBytes;
  return success();
}

DictionaryAttr
mlir::liger::getMatmulKernelConfigAttr(MLIRContext *ctx,
                                       const MatmulKernelConfig &config) {
  Builder b(ctx);
  return b.getDictionaryAttr({
      b.getNamedAttr("mma",
                     b.getStringAttr(config.wgmma ? "wgmma" : "mma_sync")),
      b.getNamedAttr("stages", b.getI64IntegerAttr(config.stages)),
      b.getNamedAttr("threads", b.getI64IntegerAttr(config.threads())),
      b.getNamedAttr("tile_k", b.getI64IntegerAttr(config.tileK)),
      b.getNamedAttr("tile_m", b.getI64IntegerAttr(config.tileM)),
      b.getNamedAttr("tile_n", b.getI64IntegerAttr(config.tileN)),
  });
}

FailureOr<MatmulKernelConfig>
mlir::liger::readMatmulKernelConfig(FusionOp group, DictionaryAttr dict) {
  MatmulKernelConfig config;
  for (auto [key, field] :
       {std::pair<StringRef, int64_t *>{"tile_m", &config.tileM},
        {"tile_n", &config.tileN},
        {"tile_k", &config.tileK},
        {"stages", &config.stages}}) {
    auto value = dict.getAs<IntegerAttr>(key);
    if (!value)
      return group.emitOpError("expects an integer '")
             << key << "' in the matmul 'liger.kernel_config'";
    *field = value.getInt();
  }
  auto mma = dict.getAs<StringAttr>("mma");
  if (!mma || (mma.getValue() != "wgmma" && mma.getValue() != "mma_sync"))
    return group.emitOpError("expects 'mma' = \"wgmma\" or \"mma_sync\" in "
                             "the matmul 'liger.kernel_config'");
  config.wgmma = mma.getValue() == "wgmma";
  if (auto threads = dict.getAs<IntegerAttr>("threads");
      threads && threads.getInt() != config.threads())
    return group.emitOpError("has 'threads' = ")
           << threads.getInt() << " in its matmul 'liger.kernel_config', but "
           << "the tile needs " << config.threads();
  return config;
}
