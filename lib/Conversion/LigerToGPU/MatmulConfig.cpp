//===- MatmulConfig.cpp - tile configuration of matmul groups -------------===//

#include "liger/Conversion/LigerToGPU/MatmulConfig.h"

#include "mlir/IR/TypeUtilities.h"

#include <algorithm>

using namespace mlir;
using namespace mlir::liger;

int64_t
MatmulKernelConfig::sharedMemoryBytes(const MatmulShape &shape) const {
  int64_t bTiles = shape.paired ? 2 : 1;
  int64_t tileRows = tileM + bTiles * tileN + shape.loraRank;
  // wgmma: TMA tiles packed in 128-byte swizzled rows after 1024 bytes of
  // mbarriers (and alignment); mma.sync: cp.async tiles with 16 bytes of
  // padding per row.
  // A LoRA B tile ([tile_n, r]) is read once, after the stages; so is an
  // accumulated dW's old tile.
  if (wgmma)
    return 1024 + stages * tileRows * tileK * shape.elementBytes +
           tileN * shape.loraRank * shape.elementBytes +
           (shape.accumulateTile ? tileM * tileN * shape.elementBytes : 0);
  // An RMSNorm prologue adds each row's f32 sum of squares. An MN-major
  // operand (a gradient product's) is staged [tile_k, columns + 8].
  auto tileElems = [&](int64_t width, bool mnMajor) {
    return mnMajor ? tileK * (width + 8) : width * (tileK + 8);
  };
  // A RoPE epilogue exchanges the rounded tile ([tile_m, tile_n + 8])
  // through the drained stage buffers.
  int64_t exchange = shape.headDim ? tileM * (tileN + 8) * shape.elementBytes : 0;
  return std::max(exchange, stages *
             (tileElems(tileM, shape.aMNMajor) +
              bTiles * tileElems(tileN, shape.bMNMajor) +
              shape.loraRank * (tileK + 8)) *
                 shape.elementBytes +
             tileN * (shape.loraRank ? shape.loraRank + 8 : 0) *
                 shape.elementBytes) +
         (shape.rmsNorm ? tileM * 4 : 0);
}

FailureOr<MatmulShape> mlir::liger::analyzeMatmulGroup(FusionOp group) {
  MatmulShape shape;
  auto take = [&](Operation *op, Value input, Value weight) -> LogicalResult {
    auto x = cast<RankedTensorType>(input.getType());
    auto w = cast<RankedTensorType>(weight.getType());
    if (!w.hasStaticShape())
      return op->emitOpError("needs a static weight shape for a matmul kernel");
    if (shape.k && shape.k != w.getDimSize(1))
      return group.emitOpError("holds projections of different widths (")
             << shape.k << " and " << w.getDimSize(1)
             << "), which one matmul kernel does not compute";
    shape.k = w.getDimSize(1);
    shape.n.push_back(w.getDimSize(0));
    shape.elementBytes =
        std::max<int64_t>(1, x.getElementTypeBitWidth() / 8);
    int64_t m = 1;
    for (int64_t d : x.getShape().drop_back())
      m = (m == ShapedType::kDynamic || ShapedType::isDynamic(d))
              ? ShapedType::kDynamic
              : m * d;
    shape.m = m;
    return success();
  };
  WalkResult walk = group.getBody().walk([&](Operation *op) {
    LogicalResult result = success();
    if (auto linear = dyn_cast<LinearOp>(op))
      result = take(op, linear.getInput(), linear.getWeight());
    else if (auto lora = dyn_cast<LoRALinearOp>(op)) {
      result = take(op, lora.getInput(), lora.getWeight());
      shape.loraRank = cast<RankedTensorType>(lora.getLoraA().getType())
                           .getDimSize(0);
    } else if (auto g = dyn_cast<LinearGradInputOp>(op)) {
      // dx [T, K] = dy [T, N] · W [N, K]: the reduction runs over N.
      auto w = cast<RankedTensorType>(g.getWeight().getType());
      result = take(op, g.getGrad(), g.getWeight());
      shape.k = w.getDimSize(0);
      shape.n = {w.getDimSize(1)};
      shape.bMNMajor = true;
    } else if (auto g = dyn_cast<LinearGradWeightOp>(op)) {
      // dW [N, K] = dyᵀ [N, T] · x [T, K]: the reduction runs over the
      // tokens, the rows are dy's features.
      auto dy = cast<RankedTensorType>(g.getGrad().getType());
      auto x = cast<RankedTensorType>(g.getInput().getType());
      shape.m = dy.getDimSize(1);
      shape.k = x.getDimSize(0);
      shape.n = {x.getDimSize(1)};
      shape.elementBytes =
          std::max<int64_t>(1, x.getElementTypeBitWidth() / 8);
      shape.aMNMajor = shape.bMNMajor = true;
      shape.accumulateTile =
          g.getAccumulate() &&
          getElementTypeOrSelf(g.getAccumulate().getType())
                  .getIntOrFloatBitWidth() == 16;
    } else if (auto r = dyn_cast<RoPEOp>(op)) {
      shape.headDim = cast<RankedTensorType>(r.getQ().getType()).getDimSize(3);
    } else if (isa<SwiGLUOp, GEGLUOp>(op)) {
      shape.paired = true;
    } else if (isa<RMSNormOp>(op)) {
      shape.rmsNorm = true;
    }
    return failed(result) ? WalkResult::interrupt() : WalkResult::advance();
  });
  if (walk.wasInterrupted())
    return failure();
  if (shape.n.empty())
    return group.emitOpError("is a matmul group without a projection");
  return shape;
}

MatmulKernelConfig
mlir::liger::selectMatmulKernelConfig(const MatmulShape &shape,
                                      const GpuTargetInfo &target) {
  MatmulKernelConfig config;
  config.wgmma = target.hasWgmma;
  // One 128-byte (wgmma, the 128-byte swizzle) or 64-byte (cp.async +
  // ldmatrix) row of K per stage.
  config.tileK = (config.wgmma ? 128 : 64) / shape.elementBytes;
  // Decode-sized inputs take a 64-row tile (one consumer warpgroup).
  bool small = !ShapedType::isDynamic(shape.m) && shape.m <= 64;
  config.tileM = small ? 64 : 128;
  auto allMultiples = [&](int64_t of) {
    return llvm::all_of(shape.n, [&](int64_t n) { return n % of == 0; });
  };
  if (config.wgmma) {
    // 128 accumulator registers per consumer thread: 128 x 256 tiles, or
    // 128 x 128 per projection of a gate/up pair.
    config.tileN = shape.paired || !allMultiples(256) ? 128 : 256;
    // A narrow projection takes a narrower tile (wgmma's n: multiples of 8).
    int64_t widest = *llvm::max_element(shape.n);
    // An MN-major B tile is TMA boxes 64 columns wide.
    int64_t step = shape.bMNMajor ? 64 : 8;
    config.tileN = std::min(config.tileN, (widest + step - 1) / step * step);
    // RoPE: the widest tile of whole heads that divides both projections.
    if (shape.headDim > 0 && shape.headDim % 8 == 0)
      for (int64_t t = 256 / shape.headDim * shape.headDim; t >= shape.headDim;
           t -= shape.headDim)
        if (allMultiples(t)) {
          config.tileN = t;
          break;
        }
  } else {
    // A paired gate/up tile holds two accumulators: half the width each.
    config.tileN = shape.paired || !allMultiples(128) ? 64 : 128;
    // RoPE: whole heads dividing both projections, split over 4 warps of
    // n8 tiles.
    if (shape.headDim > 0 && shape.headDim % 8 == 0)
      for (int64_t t = 128 / shape.headDim * shape.headDim; t >= shape.headDim;
           t -= shape.headDim)
        if (allMultiples(t) && t % 32 == 0) {
          config.tileN = t;
          break;
        }
  }
  // As many stages as shared memory holds, 2 to 5.
  config.stages = 5;
  while (config.stages > 2 &&
         config.sharedMemoryBytes(shape) > target.maxSharedMemoryBytes)
    --config.stages;
  return config;
}

LogicalResult mlir::liger::verifyMatmulKernelConfig(
    FusionOp group, const MatmulKernelConfig &config, const MatmulShape &shape,
    const GpuTargetInfo &target) {
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
  if (config.wgmma && shape.bMNMajor && config.tileN % 64)
    return bad() << "tile_n must be a multiple of 64 for a gradient product "
                    "(its B operand is read N-major, in 64-column boxes), got "
                 << config.tileN;
  int64_t kBytes = config.tileK * shape.elementBytes;
  if (config.tileK < 1 || (kBytes != 32 && kBytes != 64 && kBytes != 128))
    return bad() << "tile_k must span 32, 64 or 128 bytes of K, got "
                 << config.tileK << " (" << kBytes << " bytes)";
  if (config.stages < 2 || config.stages > 8)
    return bad() << "stages must be in [2, 8], got " << config.stages;
  int64_t smem = config.sharedMemoryBytes(shape);
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
      b.getNamedAttr("mma", b.getStringAttr(config.wgmma ? "wgmma"
                                                         : "mma_sync")),
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
