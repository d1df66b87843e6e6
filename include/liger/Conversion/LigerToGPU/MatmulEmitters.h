//===- MatmulEmitters.h - the parts of a matmul kernel ----------*- C++ -*-===//
//
// The matmul templates are built from free functions over one MatmulKernel:
// the plan (MatmulPlan.h), the configuration (MatmulConfig.h) and the
// shared-memory layout (MatmulLayout.h) the kernel follows, and the values
// of its gpu.func that every part reads. MatmulKernel.cpp creates the
// function and runs one template; the liger-test-matmul-part pass runs one
// part alone.
//
//   MatmulKernel.cpp        the template's limits, parameters, the
//                           function, the values every part reads
//   MatmulWgmma.cpp         wgmma: the consumer warpgroups' main loop,
//                           LoRA's second product, the epilogue's dispatch
//   MatmulTma.cpp           wgmma: mbarriers, the producer warpgroup's TMA
//                           loads, the TMA-store epilogue
//   MatmulMmaSync.cpp       mma.sync: cp.async slices, the ldmatrix + mma
//                           main loop, LoRA's second product, the epilogue
//   MatmulNormPrologue.cpp  the RMSNorm prologue of both templates
//   MatmulEpilogue.cpp      liger.linear's rounding, the elementwise
//                           epilogue, the stores of column pairs
//   MatmulRoPE.cpp          the RoPE epilogue of both templates
//
//===----------------------------------------------------------------------===//

#ifndef LIGER_CONVERSION_LIGERTOGPU_MATMULEMITTERS_H
#define LIGER_CONVERSION_LIGERTOGPU_MATMULEMITTERS_H

#include "liger/Conversion/LigerToGPU/GpuBuilder.h"
#include "liger/Conversion/LigerToGPU/MatmulLayout.h"
#include "liger/Conversion/LigerToGPU/RowKernel.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/OwningOpRef.h"

namespace mlir::liger {

/// The group's elementwise epilogue as linalg on a scratch function
/// @epilogue(%projections..., %epilogue inputs...), checked to be
/// elementwise over [rows, N] and [N] operands.
struct MatmulEpilogue {
  OwningOpRef<ModuleOp> scratch;
  mutable func::FuncOp function;
};

/// A matmul kernel being built.
struct MatmulKernel {
  MatmulKernel(const MatmulPlan &plan, const MatmulKernelConfig &config,
               const MatmulLayout &layout)
      : plan(plan), config(config), layout(layout) {}

  const MatmulPlan &plan;
  const MatmulKernelConfig &config;
  const MatmulLayout &layout;
  /// The kernel's gpu.func.
  mutable gpu::GPUFuncOp function;
  /// The Projection and gradient bodies' epilogue (null for RoPE).
  const MatmulEpilogue *epilogue = nullptr;

  // Parameters, by role.
  Value x; ///< the A operand [rows, K] (dW: dy [T, M])
  /// The outputs in the group's result order (RoPE: q [B, Hq, T, D], then
  /// k [B, Hkv, T, D]).
  SmallVector<Value, 2> outputs;
  SmallVector<Value, 2> weights, biases; ///< per projection (no bias: null)
  Value normWeight, loraA, loraB, cos, sin, accumulator;
  /// A LoRA projection handing x · Aᵀ over (handsOffLoRAProduct): its
  /// rows' products [rows, r] and a flag per 64-row block [rows] (f32
  /// workspaces); else null.
  Value loraProducts, loraFlags;
  /// The epilogue's other inputs: group input -> parameter.
  DenseMap<Value, Value> epilogueInputs;
  /// wgmma: the TMA descriptors (by-value parameters), where present.
  Value xMap, loraAMap, loraBMap, oldTileMap;
  SmallVector<Value, 2> weightMaps, outputMaps;
  /// wgmma: maps of [tile_m, 128-byte] boxes over what the epilogue reads
  /// at each row (its [rows, N] inputs, an f32 dW buffer), which the
  /// producer prefetches into L2 before the main loop ends.
  SmallVector<Value, 2> prefetchMaps;

  // Values every part reads.
  Value tid;    ///< the thread index
  Value rows;   ///< the output rows (M)
  Value kRows;  ///< K's extent (dW: the tokens)
  Value kTiles; ///< the K loop's trip count
  Value m0, n0; ///< the tile's origin (a tile loop: set per tile)
  /// A cluster (config.cluster > 1): the CTA's rank in it (index), which
  /// part of the shared weight tiles it loads for all.
  Value clusterRank;
  /// A tile loop (pingpong, persistent): the row tiles (index) and the
  /// tiles this CTA takes (tiles blockIdx.x + i · gridDim.x for i below
  /// it).
  Value rowTiles, ctaTiles;
  /// The shared memory: wgmma's extern buffer (!llvm.ptr<3>), or
  /// mma.sync's gpu.dynamic_shared_memory.
  Value shared;

  Type elementType() const { return plan.elementType; }
  int64_t elementBytes() const {
    return plan.elementType.getIntOrFloatBitWidth() / 8;
  }
};

//===----------------------------------------------------------------------===//
// MatmulKernel.cpp
//===----------------------------------------------------------------------===//

/// What fills a begun kernel (its gpu.func's parameters bound, the thread
/// index, rows, K trip count and tile origin emitted): a template
/// (emitWgmmaKernel, emitMmaSyncKernel) or, in a test, one part.
using MatmulKernelBody =
    function_ref<LogicalResult(GpuBuilder &, MatmulKernel &)>;
/// Whether a LoRA projection's CTAs hand x · Aᵀ over (wgmma,
/// data-parallel, more than one column tile): the CTAs of column tile 0,
/// launched first, compute it in the main loop and publish it per 64-row
/// block; a CTA of another column that finds its block's published when it
/// starts skips the rank-r wgmmas and reads it (emitWgmmaLoRA).
bool handsOffLoRAProduct(const MatmulPlan &plan,
                         const MatmulKernelConfig &config);

/// A tile loop: runs `body` for each of this CTA's tiles i = first, first +
/// step, ... (an scf.for), with a copy of `k` whose m0 and n0 are tile i's
/// origin.
void forEachCtaTile(
    GpuBuilder &b, const MatmulKernel &k, Value first, int64_t step,
    function_ref<void(GpuBuilder &, const MatmulKernel &, Value i)> body);

/// buildMatmulKernel (MatmulKernel.h) with `body` for the configuration's
/// template: checks the template's limits, lowers the epilogue, lays out
/// shared memory, creates gpu.func `name` in `module` and runs `body` in it.
/// Warns and fails (leaving no function) where a step does.
FailureOr<::liger::runtime::KernelSpec>
buildMatmulKernel(const MatmulPlan &plan, gpu::GPUModuleOp module,
                  StringRef name, const MatmulKernelConfig &config,
                  MatmulKernelBody body);

//===----------------------------------------------------------------------===//
// MatmulWgmma.cpp, MatmulTma.cpp: the wgmma + TMA template (sm_90a)
//===----------------------------------------------------------------------===//

/// What a wgmma kernel's epilogue reads at each of the tile's rows from
/// global memory (its [rows, N] inputs in argument order, then an f32 dW
/// buffer): the group's arguments whose tile the producer prefetches into
/// L2 (kernel parameters: MatmulKernel::prefetchMaps, in this order), and
/// their maps' box width.
struct EpiloguePrefetch {
  Value arg;       ///< the group's argument
  int64_t boxCols; ///< its map's box: tile_m rows x boxCols (128 bytes)
};
SmallVector<EpiloguePrefetch> getEpiloguePrefetches(const MatmulPlan &plan,
                                                    const MatmulLayout &layout);
/// How many of the consumers' K steps before the end of the main loop the
/// producer prefetches them: enough to cover the prefetch's latency, few
/// enough that the main loop's tiles do not evict them from L2 first.
constexpr int64_t kEpiloguePrefetchLead = 8;

/// The whole wgmma kernel.
LogicalResult emitWgmmaKernel(GpuBuilder &b, MatmulKernel &k);

/// A consumer thread's warpgroup among all consumers (`wg`, from 0: its
/// named barrier is 1 + wg), its consumer set (`set`: pingpong's 0 or 1,
/// else 0) and warpgroup in the set (`cw`), its warp in the warpgroup and
/// its lane. The warpgroup holds `blocks` 64-row blocks of the tile, cw ·
/// blocks to cw · blocks + blocks - 1.
struct WgmmaConsumerThread {
  Value wg, set, cw, warp, lane;
  int64_t blocks = 1;

  /// The tile's 64-row block that is the warpgroup's `rb`-th (index).
  Value rowBlock(GpuBuilder &b, int64_t rb) const {
    return blocks == 1 ? cw : b.add(b.mul(cw, blocks), rb);
  }
};
WgmmaConsumerThread getWgmmaConsumerThread(GpuBuilder &b,
                                           const MatmulKernel &k);

/// The extern shared buffer at `byteOffset` (i32).
Value wgmmaSharedAt(GpuBuilder &b, const MatmulKernel &k, Value byteOffset);
/// The full and empty mbarriers of `stage` (index).
Value wgmmaFullBarrier(GpuBuilder &b, const MatmulKernel &k, Value stage);
Value wgmmaEmptyBarrier(GpuBuilder &b, const MatmulKernel &k, Value stage);
/// The byte offset (i32) of tile `tile` (MatmulLayout::tileOffset) of
/// `stage`.
Value wgmmaTileOffset(GpuBuilder &b, const MatmulKernel &k, Value stage,
                      int64_t tile);
/// The byte offset (i32) of 64-row block `rowBlock` (index) of the x tile
/// of `stage`.
Value wgmmaXTileOffset(GpuBuilder &b, const MatmulKernel &k, Value stage,
                       Value rowBlock);
/// The phase parity (i32) of the use `step / stages` of a stage, where
/// `step` counts the ring's fills (the K iteration, or in a tile loop the
/// CTA's K iterations over all its tiles so far).
Value wgmmaStageParity(GpuBuilder &b, const MatmulKernel &k, Value step);
/// The suspend-time hint of the mbarrier waits (i32, ns).
Value wgmmaWaitTicks(GpuBuilder &b);

/// Thread 0 initializes every mbarrier of the layout (then a CTA barrier).
void emitWgmmaBarrierInit(GpuBuilder &b, const MatmulKernel &k, Value isFirst);
/// The producer warpgroup: registers lowered, one thread issuing the TMA
/// copies of LoRA B's tile and the old dW tile once, then of every stage
/// once the consumers have released it (in a tile loop, each tile's stages
/// and then its old dW tile, once the set's previous store has read it).
void emitTmaProducer(GpuBuilder &b, const MatmulKernel &k, Value isFirst);

/// The TMA-store epilogue's tile of one consumer warpgroup: its byte offset
/// (i32), and the lane's row and chunk coordinates in it.
struct TmaStoreTile {
  Value base;           ///< i32
  Value quad;           ///< i32: lane / 4, the row within an 8-row atom
  Value rowInWarpgroup; ///< i32: 16 warp + lane / 4
};
/// Where the consumer warpgroup stages its output rows (its first 64-row
/// block; the next follow): in its set's `old_tile` once the old dW tile
/// has landed (in a tile loop, the CTA's tile `tileIndex`'s: index), over
/// the drained stages once every consumer is past its last wgmma, or in a
/// tile loop in its rotating boxes (beside the ring) once the previous
/// tile's stores have read them.
TmaStoreTile emitTmaStoreBegin(GpuBuilder &b, const MatmulKernel &k,
                               const WgmmaConsumerThread &thread,
                               Value tileIndex);
/// Stages result `result`'s `pair` of row 16 w + l / 4 + 8 `half` of the
/// warpgroup's row block `rowBlock` and columns 8 `j` + 2 (l % 4) (lane l
/// of warp w) in its tile: 64-column
/// boxes in the output's 128-byte swizzle, pair (rl, 8j + 2(l % 4)) in
/// chunk (j % 8) ^ (rl % 8) of row rl of box j / 8, so that a quad's eight
/// rows hit distinct banks. An accumulated dW adds the old value there and
/// rounds once.
void emitTmaStoreStage(GpuBuilder &b, const MatmulKernel &k,
                       const WgmmaConsumerThread &thread,
                       const TmaStoreTile &tile, Value pair, int64_t j,
                       int64_t half, int64_t result, int64_t rowBlock = 0);
/// Fences the staged tiles for the async proxy, meets at the warpgroup's
/// barrier, and lets its first thread store each result's boxes through
/// that output's tensor map (which clips the row and column ends), waiting
/// until they have been read (in a tile loop, then frees the set's old dW
/// tile for the producer's next copy). Not where the boxes rotate
/// (emitTmaStoreBox stores each).
void emitTmaStoreEnd(GpuBuilder &b, const MatmulKernel &k,
                     const WgmmaConsumerThread &thread,
                     const TmaStoreTile &tile);
/// Rotating boxes (MatmulLayout::rotatesOutputBoxes): before the
/// warpgroup writes box `jb` of its row block `rb`, its first thread waits
/// until the store kRotatingBoxes boxes back has read the box, then the
/// warpgroup meets (nothing for its first boxes: emitTmaStoreBegin waited
/// for the previous tile's stores).
void emitTmaStoreBoxBegin(GpuBuilder &b, const MatmulKernel &k,
                          const WgmmaConsumerThread &thread, int64_t rb,
                          int64_t jb);
/// Rotating boxes: the box written, fenced for the async proxy, the
/// warpgroup meets, and its first thread stores it and commits the store
/// without waiting (the next boxes are written meanwhile).
void emitTmaStoreBox(GpuBuilder &b, const MatmulKernel &k,
                     const WgmmaConsumerThread &thread,
                     const TmaStoreTile &tile, int64_t rb, int64_t jb);
/// After a consumer warpgroup's tile loop: its first thread waits until
/// its last tile's stores have been read (where the boxes rotate; the
/// other forms waited at emitTmaStoreEnd).
void emitTmaStoreDrain(GpuBuilder &b, const MatmulKernel &k);

/// Named barriers of the wgmma kernels: every consumer warpgroup (8, in the
/// data-parallel kernel before the output tile is written over the
/// stages), consumer warpgroup w alone (1 + w), and pingpong's turns: set
/// s may start its main loop (10 + s).
constexpr int64_t kConsumersBarrier = 8;
constexpr int64_t kTurnBarrier = 10;

//===----------------------------------------------------------------------===//
// MatmulMmaSync.cpp: the cp.async + ldmatrix + mma.sync template (sm_80)
//===----------------------------------------------------------------------===//

/// How the mma.sync template splits a tile over its warps: warpsM x
/// warpsN warps, each owning 64 rows (mTiles m16 tiles) x warpN columns
/// (nTiles n8 tiles) of m16n8k16 MMAs.
struct MmaSyncWarps {
  explicit MmaSyncWarps(const MatmulKernelConfig &config);
  static constexpr int64_t mTiles = 4;
  int64_t warps, warpsM, warpsN, warpN, nTiles;
};

/// A thread's lane and its warp's row and column among the warps
/// (MmaSyncWarps).
struct MmaSyncThread {
  Value lane, wm, wn;
};
MmaSyncThread getMmaSyncThread(GpuBuilder &b, const MatmulKernel &k);

/// The whole mma.sync kernel.
LogicalResult emitMmaSyncKernel(GpuBuilder &b, MatmulKernel &k);

/// The memref views of the mma.sync layout's regions.
struct MmaSyncTiles {
  Value x, loraA, loraB, rowSums;
  SmallVector<Value, 2> weights;
};
MmaSyncTiles getMmaSyncTiles(GpuBuilder &b, const MatmulKernel &k);
/// cp.async of slice `kt` of x, the weights and LoRA's A into ring buffer
/// `stage`, then one commit group; slices past the end are zero-filled, so
/// that every iteration commits exactly one group.
void emitMmaSyncSliceLoad(GpuBuilder &b, const MatmulKernel &k,
                          const MmaSyncTiles &tiles, Value stage, Value kt);

//===----------------------------------------------------------------------===//
// MatmulNormPrologue.cpp
//===----------------------------------------------------------------------===//

/// x ⊙ (g + offset) of a chunk of x (8 f32 values at K index `gk`),
/// rounded to the operand dtype.
Value normScaled(GpuBuilder &b, const MatmulKernel &k, Value xv, Value gk);
/// Σ x² of a chunk of x (f32), added to `acc` when given.
Value sumOfSquares(GpuBuilder &b, Value xv, Value acc = Value());
/// rsqrt(sum / K + eps) of a row's sum of squares.
Value rowRstd(GpuBuilder &b, const MatmulKernel &k, Value sumOfSquares);
/// wgmma: waits for the stage of k-iteration `kt` (the ring's fill
/// `step`), rescales the consumer warpgroup's row blocks of its x tile in
/// place and adds each thread's two rows' x² of each block to `sums` (2 a
/// block); fences and meets at the warpgroup's barrier.
SmallVector<Value> emitWgmmaNormStage(GpuBuilder &b, const MatmulKernel &k,
                                      const WgmmaConsumerThread &thread,
                                      Value kt, Value step,
                                      SmallVector<Value> sums);
/// mma.sync: views the rows' shared sums of squares (`tiles.rowSums`) and
/// zeroes them.
void emitMmaSyncNormInit(GpuBuilder &b, const MatmulKernel &k,
                         MmaSyncTiles &tiles);
/// mma.sync: rescales slice `kt`'s x tile in ring buffer `stage` in place
/// and adds its chunks' x² to the rows' shared sums; then a CTA barrier.
void emitMmaSyncNormSlice(GpuBuilder &b, const MatmulKernel &k,
                          const MmaSyncTiles &tiles, Value stage, Value kt);

//===----------------------------------------------------------------------===//
// MatmulEpilogue.cpp
//===----------------------------------------------------------------------===//

/// The ops after the projections as linalg (MatmulEpilogue); warns and
/// fails when they are not an elementwise epilogue.
FailureOr<MatmulEpilogue> lowerMatmulEpilogue(const MatmulPlan &plan);
/// A projection's bias pair bias[c..c+1] (no bias: null).
Value loadBiasPair(GpuBuilder &b, Value bias, Value c);
/// liger.linear's rounding of an f32 accumulator pair: round(acc + the
/// bias pair, in f32) in the operand dtype (no bias pair: round).
Value roundMatmulPair(GpuBuilder &b, const MatmulKernel &k, Value accPair,
                      Value biasPair);
/// Where pair `index` of a thread's output tile lies: row `r`, columns `c`
/// and c + 1.
struct MatmulPairSite {
  Value r, c;
};
/// Emits pair `index`'s f32 accumulator pairs (one vector<2xf32> per
/// projection) where the epilogue uses them.
using MatmulAccumulatorPairs =
    function_ref<SmallVector<Value, 2>(GpuBuilder &, size_t index)>;
/// How many pairs storeMatmulPairs loads for before it stores any.
constexpr size_t kMatmulEpilogueBatch = 16;
/// Rounds each pair, applies the epilogue and stores the results' pairs,
/// masked at the row and column ends (dW into a buffer: adds to it). In
/// batches of kMatmulEpilogueBatch pairs, every global load of a batch (the
/// epilogue's inputs, the biases, a dW buffer's old pairs) is issued before
/// its first store: the compiler cannot move a load above a store it may
/// alias, and loads taken one pair at a time would each wait out a memory
/// latency. `sink`, when given, takes pair `index`'s value of each result
/// instead of the store, unmasked (the TMA-store epilogue stages it in
/// shared memory; the tensor map clips the ends).
using MatmulPairSink =
    function_ref<void(GpuBuilder &, size_t index, size_t result, Value pair)>;
LogicalResult storeMatmulPairs(GpuBuilder &b, const MatmulKernel &k,
                               ArrayRef<MatmulPairSite> sites,
                               MatmulAccumulatorPairs accPairsAt,
                               MatmulPairSink sink = nullptr);

//===----------------------------------------------------------------------===//
// MatmulRoPE.cpp
//===----------------------------------------------------------------------===//

/// wgmma: the RoPE epilogue of a column tile of q or of k (`out`
/// [B, H, T, D], `colBase` the tile's first column in that projection):
/// each thread's accumulators `acc` (rows r0 and r0 + 8, times `rowScale`
/// where given) rounded as liger.linear does, rotated with their partner
/// pair D/16 n8 blocks away in the same thread, stored head-major.
void emitWgmmaRoPEEpilogue(GpuBuilder &b, const MatmulKernel &k, Value acc,
                           ArrayRef<Value> rowScale, Value r0, Value out,
                           Value colBase, Value bias);
/// mma.sync: the rotation's partner lies in another warp's accumulators:
/// the rounded tile goes through shared memory (`exchange`, between two
/// barriers), then each thread rotates its own pairs. `accumulators` are
/// the main loop's, `rstd` the row scales [i · 2 + half] (or empty).
void emitMmaSyncRoPEEpilogue(GpuBuilder &b, const MatmulKernel &k,
                             const MmaSyncThread &thread,
                             ValueRange accumulators, ArrayRef<Value> rstd,
                             Value out, Value colBase, Value bias);

} // namespace mlir::liger

#endif // LIGER_CONVERSION_LIGERTOGPU_MATMULEMITTERS_H
