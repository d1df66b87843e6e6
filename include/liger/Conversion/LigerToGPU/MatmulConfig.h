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

#include "liger/Conversion/LigerToGPU/MatmulPlan.h"
#include "liger/Dialect/Liger/IR/LigerKernelAttrs.h"
#include "liger/Target/GpuTarget.h"

namespace mlir::liger {

struct MatmulKernelConfig {
  int64_t tileM = 128, tileN = 128, tileK = 64, stages = 4;
  bool wgmma = true; ///< wgmma + TMA (sm_90a), else mma.sync (sm_80)
  /// wgmma: one CTA per output tile, or persistent CTAs (one per SM)
  /// looping over tiles: with two consumer sets taking turns (pingpong) or
  /// one (persistent).
  MatmulSchedule schedule = MatmulSchedule::data_parallel;
  /// wgmma, data-parallel: the CTAs of a thread-block cluster (1 or 2).
  /// The CTAs of a cluster take consecutive row tiles of one column tile,
  /// so they read the same weight tiles: CTA r loads part r of each (its
  /// rows, or its 64-column boxes, r modulo the cluster) for all of them
  /// with a TMA multicast, and a stage is free once every CTA's consumers
  /// released it (clusterParts).
  int64_t cluster = 1;

  bool pingpong() const { return schedule == MatmulSchedule::pingpong; }
  /// A K-major tile of `rows` rows that the cluster's CTAs share: the rows
  /// each loads for all (CTA r rows [r, r + 1) of this many).
  int64_t clusterPartRows(int64_t rows) const { return rows / cluster; }
  /// One CTA per SM looping over tiles, the stage ring carried across them.
  bool loopsOverTiles() const {
    return schedule != MatmulSchedule::data_parallel;
  }
  /// wgmma: the consumer warpgroups that compute one tile (one per 64 rows;
  /// in pingpong one for the whole tile), the 64-row blocks each holds, and
  /// the sets of them (two in pingpong, each on its own tiles).
  int64_t tileWarpgroups() const { return pingpong() ? 1 : tileM / 64; }
  int64_t rowBlocks() const { return tileM / 64 / tileWarpgroups(); }
  int64_t consumerSets() const { return pingpong() ? 2 : 1; }
  /// Threads per CTA: for wgmma a producer warpgroup issuing TMA and the
  /// consumer warpgroups; for mma.sync 8 warps (4 for a 64-row tile).
  int64_t threads() const {
    return wgmma ? 128 * (1 + consumerSets() * tileWarpgroups())
                 : (tileM >= 128 ? 256 : 128);
  }
};

/// Which schedule liger-select-kernel-config gives a wgmma group: its
/// default rule, or one schedule wherever the group takes it
/// (`liger-compile --matmul-schedule`).
enum class MatmulScheduleChoice { Auto, DataParallel, PingPong, Persistent };

/// The choice a `--matmul-schedule` value names ("auto", "data-parallel",
/// "pingpong", "persistent"); none for another.
std::optional<MatmulScheduleChoice> parseMatmulScheduleChoice(StringRef text);
/// The schedules' option spellings ("data-parallel", "pingpong",
/// "persistent"; with "auto", the choices).
ArrayRef<StringLiteral> matmulScheduleNames();
/// The schedule a choice other than Auto names, and the choice naming a
/// schedule.
MatmulSchedule scheduleOf(MatmulScheduleChoice choice);
MatmulScheduleChoice choiceOf(MatmulSchedule schedule);
/// What an option of `option`'s name says of a value `text` that names no
/// choice: "<option> must be auto, data-parallel, pingpong or persistent,
/// got '<text>'".
std::string badMatmulScheduleChoice(StringRef option, StringRef text);

/// The f32 accumulators each consumer thread of `config` holds, and why
/// they are too many (more than 128), or empty.
int64_t accumulatorsPerThread(const MatmulPlan &plan,
                              const MatmulKernelConfig &config);
std::string accumulatorLimit(const MatmulPlan &plan,
                             const MatmulKernelConfig &config);

/// Why the pingpong schedule cannot take `plan` with a tile_m x tile_n
/// tile (empty: it can).
std::string pingpongLimit(const MatmulPlan &plan, int64_t tileM, int64_t tileN);
/// Why a schedule that loops over tiles (pingpong, persistent) cannot take
/// `plan`: what the data-parallel kernel reads once per CTA (empty: it
/// can).
std::string tileLoopLimit(const MatmulPlan &plan);

/// The default configuration of `plan` on `target`: the widest tiles its
/// projections allow, as many stages (2 to 5) as the shared memory holds
/// (MatmulLayout).
MatmulKernelConfig selectMatmulKernelConfig(
    const MatmulPlan &plan, const GpuTargetInfo &target,
    MatmulScheduleChoice schedule = MatmulScheduleChoice::Auto);

/// Two waves of the most SMs a GPU liger targets has (132: H100 and H200
/// SXM): a grid of at least this many CTAs fills any of them.
inline constexpr int64_t kNarrowVariantCtas = 2 * 132;

/// The narrow-tile variant (tile_m 64, as many stages as fit) of a
/// data-parallel wgmma `config` for a group of dynamic rows whose launches
/// have at most `boundRows` (a loss plan's chunk): the runtime runs it
/// instead of the kernel where its grid fills the GPU better
/// (liger::runtime::chooseNarrow). None for static rows, a tile of 64
/// rows, LoRA (its hand-over workspaces), a 16-bit accumulated tile, a
/// grid at `boundRows` of kNarrowVariantCtas or more (a chunk that fills
/// the GPU: the variant would run only for a call's last, short chunk or a
/// call of few tokens), or a variant that does not fit
/// (matmulConfigProblem).
std::optional<MatmulKernelConfig>
narrowMatmulKernelConfig(const MatmulPlan &plan,
                         const MatmulKernelConfig &config,
                         const GpuTargetInfo &target, int64_t boundRows);

/// The most stages (2 to 5; to 8 in pingpong) of `config`'s tile whose
/// layout (MatmulLayout) fits `target`'s shared memory.
int64_t fittingStages(const MatmulPlan &plan, MatmulKernelConfig config,
                      const GpuTargetInfo &target);

/// Why `config` does not fit `plan` on `target` (instruction shapes, the
/// schedule, the shared memory its layout needs), or empty where it does.
std::string matmulConfigProblem(const MatmulKernelConfig &config,
                                const MatmulPlan &plan,
                                const GpuTargetInfo &target);

/// Checks `config` against `plan` and `target` (matmulConfigProblem);
/// emits on the plan's group.
LogicalResult verifyMatmulKernelConfig(const MatmulKernelConfig &config,
                                       const MatmulPlan &plan,
                                       const GpuTargetInfo &target);

/// The `#liger.kernel_config` holding `config` (its template, tile, stages
/// and threads).
KernelConfigAttr getMatmulKernelConfigAttr(MLIRContext *ctx,
                                           const MatmulKernelConfig &config);

/// The tile configuration of a matmul template's `#liger.kernel_config`
/// (not yet verified against the plan and target); fails when its
/// `threads` is not what the tile needs.
FailureOr<MatmulKernelConfig> readMatmulKernelConfig(FusionOp group,
                                                     KernelConfigAttr attr);

} // namespace mlir::liger

#endif // LIGER_CONVERSION_LIGERTOGPU_MATMULCONFIG_H
