//===- MatmulConfig.cpp - tile configuration of matmul groups -------------===//

#include "liger/Conversion/LigerToGPU/MatmulConfig.h"
#include "liger/Conversion/LigerToGPU/GpuBuilder.h"
#include "liger/Conversion/LigerToGPU/MatmulEmitters.h"
#include "liger/Conversion/LigerToGPU/MatmulLayout.h"

#include <algorithm>

using namespace mlir;
using namespace mlir::liger;

namespace {
/// Each schedule's option spelling, indexed by MatmulSchedule's value; a
/// choice other than Auto is the schedule one past it.
constexpr StringLiteral kScheduleNames[] = {"data-parallel", "pingpong",
                                            "persistent"};
static_assert(static_cast<size_t>(MatmulSchedule::persistent) + 1 ==
                  std::size(kScheduleNames) &&
              static_cast<int>(MatmulScheduleChoice::Persistent) ==
                  static_cast<int>(MatmulSchedule::persistent) + 1);
} // namespace

ArrayRef<StringLiteral> mlir::liger::matmulScheduleNames() {
  return kScheduleNames;
}

std::optional<MatmulScheduleChoice>
mlir::liger::parseMatmulScheduleChoice(StringRef text) {
  if (text == "auto")
    return MatmulScheduleChoice::Auto;
  for (auto [i, name] : llvm::enumerate(kScheduleNames))
    if (text == name)
      return choiceOf(static_cast<MatmulSchedule>(i));
  return std::nullopt;
}

MatmulSchedule mlir::liger::scheduleOf(MatmulScheduleChoice choice) {
  if (choice == MatmulScheduleChoice::Auto) // (the default rule's)
    return MatmulSchedule::data_parallel;
  return static_cast<MatmulSchedule>(static_cast<int>(choice) - 1);
}

MatmulScheduleChoice mlir::liger::choiceOf(MatmulSchedule schedule) {
  return static_cast<MatmulScheduleChoice>(static_cast<int>(schedule) + 1);
}

std::string mlir::liger::badMatmulScheduleChoice(StringRef option,
                                                 StringRef text) {
  std::string names = "auto";
  for (auto [i, name] : llvm::enumerate(kScheduleNames))
    names += (i + 1 == std::size(kScheduleNames) ? " or " : ", ") + name.str();
  return (option + " must be " + names + ", got '" + text + "'").str();
}

/// The shared memory a matmul kernel of `config` may take on `target`:
/// the wgmma template's is one 1024-aligned extern buffer.
static int64_t sharedBudget(const MatmulKernelConfig &config,
                            const GpuTargetInfo &target) {
  return config.wgmma ? GpuBuilder::externSharedBudget(target)
                      : target.maxSharedMemoryBytes;
}

std::string mlir::liger::tileLoopLimit(const MatmulPlan &plan) {
  // What the data-parallel kernel reads once per CTA, next to the ring.
  if (plan.lora)
    return "LoRA's B tile is read once per CTA";
  return "";
}

std::string mlir::liger::pingpongLimit(const MatmulPlan &plan, int64_t tileM,
                                       int64_t tileN) {
  if (std::string limit = tileLoopLimit(plan); !limit.empty())
    return limit;
  // Two sets of one consumer warpgroup each: the whole tile's accumulators
  // in one warpgroup (a 128 x 128 or 64 x 256 tile at most). (tile_m is 64
  // or 128 on wgmma: matmulConfigProblem's rule, and the default's.)
  MatmulKernelConfig config;
  config.schedule = MatmulSchedule::pingpong;
  config.tileM = tileM;
  config.tileN = tileN;
  return accumulatorLimit(plan, config);
}

int64_t mlir::liger::accumulatorsPerThread(const MatmulPlan &plan,
                                           const MatmulKernelConfig &config) {
  int64_t perProjection = config.tileM * config.tileN;
  // wgmma: a consumer warpgroup's 128 threads hold its 64-row blocks of the
  // tile (data-parallel: one each; pingpong: the whole tile's).
  if (config.wgmma)
    perProjection = 64 * config.rowBlocks() * config.tileN / 128;
  else
    perProjection /= config.threads();
  return perProjection * plan.numBTiles();
}

std::string mlir::liger::accumulatorLimit(const MatmulPlan &plan,
                                          const MatmulKernelConfig &config) {
  // 128 f32 accumulators a thread leave the fragments and addresses their
  // registers (232 a consumer thread with wgmma, 255 with mma.sync); more
  // spill.
  int64_t accumulators = accumulatorsPerThread(plan, config);
  if (accumulators <= 128)
    return "";
  return "its " + std::string(config.wgmma ? "consumer " : "") +
         "threads would hold " + std::to_string(accumulators) +
         " f32 accumulators each (" +
         (config.wgmma ? "a warpgroup's 64-row blocks x tile_n / 2"
                       : "tile_m x tile_n / threads") +
         " per projection), more than 128";
}

MatmulKernelConfig
mlir::liger::selectMatmulKernelConfig(const MatmulPlan &plan,
                                      const GpuTargetInfo &target,
                                      MatmulScheduleChoice schedule) {
  MatmulKernelConfig config;
  config.wgmma = target.hasWgmma;
  // One 128-byte (wgmma, the 128-byte swizzle) or 64-byte (cp.async +
  // ldmatrix) row of K per stage.
  config.tileK = (config.wgmma ? 128 : 64) / plan.elementBytes;
  // Decode-sized inputs take a 64-row tile (one consumer warpgroup).
  bool small = !ShapedType::isDynamic(plan.m) && plan.m <= 64;
  config.tileM = small ? 64 : 128;
  // The pingpong schedule where it is asked for and the group takes it:
  // two sets of tiles as tall, half as wide (a set's warpgroup holds the
  // accumulators a data-parallel tile spreads over two).
  bool pingpong = config.wgmma && schedule == MatmulScheduleChoice::PingPong;
  if (pingpong)
    config.schedule = MatmulSchedule::pingpong;
  // The persistent schedule: the data-parallel tile, looped over (where
  // the group takes it).
  if (config.wgmma && schedule == MatmulScheduleChoice::Persistent) {
    if (!tileLoopLimit(plan).empty())
      return selectMatmulKernelConfig(plan, target,
                                      MatmulScheduleChoice::DataParallel);
    config.schedule = MatmulSchedule::persistent;
  }
  auto allMultiples = [&](int64_t of) {
    return llvm::all_of(plan.widths, [&](int64_t n) { return n % of == 0; });
  };
  if (config.wgmma) {
    // 128 accumulator registers per consumer thread: 128 x 256 tiles, or
    // 128 x 128 per projection of a gate/up pair (pingpong: half as wide).
    int64_t widestTile = pingpong ? 128 : 256;
    config.tileN = plan.paired() || !allMultiples(widestTile) ? widestTile / 2
                                                              : widestTile;
    // A narrow projection takes a narrower tile (wgmma's n: multiples of 8).
    int64_t widest = *llvm::max_element(plan.widths);
    // An MN-major B tile is TMA boxes 64 columns wide.
    int64_t step = plan.bMNMajor() ? 64 : 8;
    config.tileN = std::min(config.tileN, (widest + step - 1) / step * step);
    // RoPE: the widest tile of whole heads that divides both projections.
    if (plan.headDim > 0 && plan.headDim % 8 == 0)
      for (int64_t t = widestTile / plan.headDim * plan.headDim;
           t >= plan.headDim; t -= plan.headDim)
        if (allMultiples(t)) {
          config.tileN = t;
          break;
        }
    // A group pingpong does not take stays data-parallel.
    if (pingpong && !pingpongLimit(plan, config.tileM, config.tileN).empty())
      return selectMatmulKernelConfig(plan, target,
                                      MatmulScheduleChoice::DataParallel);
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
  config.stages = fittingStages(plan, config, target);
  return config;
}

std::optional<MatmulKernelConfig> mlir::liger::narrowMatmulKernelConfig(
    const MatmulPlan &plan, const MatmulKernelConfig &config,
    const GpuTargetInfo &target, int64_t boundRows) {
  if (!config.wgmma || config.loopsOverTiles() || config.tileM <= 64 ||
      !ShapedType::isDynamic(plan.m) || plan.lora || plan.accumulateTile ||
      boundRows < 1)
    return std::nullopt;
  int64_t columnTiles = (plan.n + config.tileN - 1) / config.tileN;
  if ((boundRows + config.tileM - 1) / config.tileM * columnTiles >=
      kNarrowVariantCtas)
    return std::nullopt;
  MatmulKernelConfig narrow = config;
  narrow.tileM = 64;
  narrow.cluster = 1;
  narrow.stages = fittingStages(plan, narrow, target);
  if (!matmulConfigProblem(narrow, plan, target).empty())
    return std::nullopt;
  return narrow;
}

int64_t mlir::liger::fittingStages(const MatmulPlan &plan,
                                   MatmulKernelConfig config,
                                   const GpuTargetInfo &target) {
  // As many stages as shared memory holds, 2 to 5 (to 8 in pingpong, whose
  // tiles are half as tall).
  config.stages = config.pingpong() ? 8 : 5;
  while (config.stages > 2 &&
         MatmulLayout(plan, config).size() > sharedBudget(config, target))
    --config.stages;
  return config.stages;
}

std::string mlir::liger::matmulConfigProblem(const MatmulKernelConfig &config,
                                             const MatmulPlan &plan,
                                             const GpuTargetInfo &target) {
  auto str = [](int64_t v) { return std::to_string(v); };
  if (config.wgmma && !target.hasWgmma)
    return "the matmul_wgmma template needs sm_90a, the target is " +
           target.chip.str();
  // Both templates give each warp 64-row tiles (wgmma: a consumer
  // warpgroup, at most two, whose 232 registers a thread fill the register
  // file beside the producer's).
  if (config.wgmma ? config.tileM != 64 && config.tileM != 128
                   : config.tileM < 64 || config.tileM > 256 ||
                         config.tileM % 64)
    return std::string("tile_m must be ") +
           (config.wgmma ? "64 or 128" : "a multiple of 64 up to 256") +
           ", got " + str(config.tileM);
  if (config.tileN < 8 || config.tileN > 256 || config.tileN % 8)
    return "tile_n must be a multiple of 8 in [8, 256], got " +
           str(config.tileN);
  if (config.wgmma && plan.bMNMajor() && config.tileN % 64)
    return "tile_n must be a multiple of 64 where B is read N-major (a "
           "gradient product's operand or a transposed weight, in 64-column "
           "boxes), got " +
           str(config.tileN);
  // wgmma: one 128-byte swizzled row of K per stage; mma.sync: k16 steps
  // over 32, 64 or 128 bytes.
  int64_t kBytes = config.tileK * plan.elementBytes;
  if (config.wgmma && (config.tileK < 1 || config.tileK > 256 || kBytes != 128))
    return "tile_k must span 128 bytes of K on the wgmma template (" +
           str(128 / plan.elementBytes) + " elements), got " +
           str(config.tileK);
  if (!config.wgmma &&
      (config.tileK < 1 || config.tileK > 256 || config.tileK % 16 ||
       (kBytes != 32 && kBytes != 64 && kBytes != 128)))
    return "tile_k must be a multiple of 16 spanning 32, 64 or 128 bytes of "
           "K, got " +
           str(config.tileK);
  if (!config.wgmma) {
    // Warp tiles of 64 rows by a multiple of 8 columns.
    MmaSyncWarps warps(config);
    if (warps.warpsM * warps.warpsN != warps.warps ||
        config.tileN % (warps.warpsN * 8))
      return "tile " + str(config.tileM) + "x" + str(config.tileN) +
             " does not split over " + str(warps.warps) +
             " warps (64 rows by a multiple of 8 columns each)";
  }
  if (config.stages < 2 || config.stages > 8)
    return "stages must be in [2, 8], got " + str(config.stages);
  if (config.loopsOverTiles()) {
    std::string schedule = stringifyMatmulSchedule(config.schedule).str();
    if (!config.wgmma)
      return "the " + schedule + " schedule is the wgmma template's";
    if (std::string limit = tileLoopLimit(plan); !limit.empty())
      return "the " + schedule + " schedule does not take this group: " + limit;
  }
  if (config.cluster != 1) {
    if (config.cluster != 2)
      return "cluster must be 1 or 2, got " + str(config.cluster);
    if (!config.wgmma)
      return "a cluster is the wgmma template's";
    if (config.loopsOverTiles())
      return "the " + stringifyMatmulSchedule(config.schedule).str() +
             " schedule takes no cluster (the data-parallel one does)";
    if (plan.lora)
      return "a cluster does not take a LoRA group (its CTAs of column tile "
             "0 hand x · Aᵀ over to the others)";
    if (plan.rope)
      return "a cluster does not take a RoPE group (a column tile reads q's "
             "or k's weight)";
    // Each CTA loads a part of tile_n / cluster rows, or every cluster-th
    // 64-column box (MN-major).
    if (config.tileN % (64 * config.cluster))
      return "tile_n must be a multiple of " + str(64 * config.cluster) +
             " in a cluster of " + str(config.cluster) +
             " (each CTA multicasts its part of the weight tile), got " +
             str(config.tileN);
  }
  // (In pingpong one warpgroup holds the whole tile's accumulators:
  // pingpongLimit's rule.)
  if (std::string limit = accumulatorLimit(plan, config); !limit.empty())
    return (config.pingpong()
                ? "the pingpong schedule does not take this group: " + limit
                : limit);
  int64_t smem = MatmulLayout(plan, config).size();
  if (smem > sharedBudget(config, target))
    return "it needs " + str(smem) + " bytes of shared memory, " +
           target.chip.str() + " has " + str(sharedBudget(config, target)) +
           (config.wgmma ? " beside the kernel's 1024 static bytes" : "");
  return "";
}

LogicalResult
mlir::liger::verifyMatmulKernelConfig(const MatmulKernelConfig &config,
                                      const MatmulPlan &plan,
                                      const GpuTargetInfo &target) {
  std::string problem = matmulConfigProblem(config, plan, target);
  if (problem.empty())
    return success();
  return plan.group.emitOpError(
             "has an invalid matmul 'liger.kernel_config': ")
         << problem;
}

KernelConfigAttr
mlir::liger::getMatmulKernelConfigAttr(MLIRContext *ctx,
                                       const MatmulKernelConfig &config) {
  return KernelConfigAttr::get(
      ctx,
      config.wgmma ? KernelTemplate::matmul_wgmma
                   : KernelTemplate::matmul_mma_sync,
      config.threads(), std::nullopt, std::nullopt, std::nullopt, config.tileM,
      config.tileN, config.tileK, config.stages,
      config.loopsOverTiles() ? std::optional(config.schedule) : std::nullopt,
      config.cluster > 1 ? std::optional(config.cluster) : std::nullopt);
}

FailureOr<MatmulKernelConfig>
mlir::liger::readMatmulKernelConfig(FusionOp group, KernelConfigAttr attr) {
  // The attribute's verifier established that a matmul template has its
  // tile and stages.
  MatmulKernelConfig config;
  config.wgmma = attr.getKernelTemplate() == KernelTemplate::matmul_wgmma;
  config.tileM = attr.getTileM().value_or(config.tileM);
  config.tileN = attr.getTileN().value_or(config.tileN);
  config.tileK = attr.getTileK().value_or(config.tileK);
  config.stages = attr.getStages().value_or(config.stages);
  config.schedule = attr.getSchedule().value_or(config.schedule);
  config.cluster = attr.getCluster().value_or(config.cluster);
  if (std::optional<int64_t> threads = attr.getThreads();
      threads && *threads != config.threads())
    return group.emitOpError("has 'threads' = ")
           << *threads << " in its matmul 'liger.kernel_config', but "
           << "the tile needs " << config.threads();
  return config;
}
