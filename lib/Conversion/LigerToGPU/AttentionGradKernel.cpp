//===- AttentionGradKernel.cpp - liger.attention_grad as a wgmma kernel ---===//
//
// The attention template's backward (sm_90a), FlashAttention-3's form: a
// liger.attention_grad with the forward's saved `out` and `lse` as a
// prepare kernel, one persistent kernel and a finishing kernel.
//
//   prepare: per query row, lse · log2 e and D = rowsum(dO ∘ out)  (f32)
//   for each tile of 128 key rows of one (batch, key/value head):
//     dK = 0, dV = 0                                (f32, registers)
//     for each query head g of the group, each block of 64 query rows
//     that sees a key of the tile (causal: from the tile's diagonal on):
//       Sᵀ = K · qᵀ,  dPᵀ = V · dOᵀ                  (wgmma, f32)
//       Pᵀ = exp2(Sᵀ · scale · log2 e - lse · log2 e), 0 where masked
//       dSᵀ = Pᵀ ∘ (dPᵀ - D)
//       (softcap c: Sᵀ = tanh(Sᵀ · scale / c), c in place of scale in Pᵀ,
//       and dSᵀ ∘= 1 - Sᵀ²)
//       dV += Pᵀ · dO,  dK += dSᵀ · q               (P, dS from registers)
//       dQacc += dS · K                              (f32, TMA reduce-add)
//     dk = scale · dK,  dv = dV
//   finish: dq = scale · dQacc
//
// Persistent: one CTA per SM takes one tile a round, in a snake (block b
// takes tile b of even rounds, gridDim.x - 1 - b of odd ones); under a
// causal mask the tiles go heaviest first (every head's first key rows,
// which see the most queries), without one a head's tiles are consecutive.
// Threads 0-127 are the producer warpgroup (registers lowered to 24): its
// first thread loads the tile's k and v (128 rows) once the consumers
// released the last tile's, and each step's q and dO blocks (64 rows, by
// TMA through the 3-D maps of the heads tensors, zero past each head's
// sequence) and their rows' statistics (a bulk copy from the prepare
// kernel's workspace, up to the sequence's end) into a ring of `stages`
// stages (full and empty mbarriers, the fills counted across the CTA's
// tiles). Warpgroups 1 and 2 are the consumers, 64 key rows each. At each
// step each warpgroup computes its Sᵀ and dPᵀ (m64n64, K-major operands),
// masks and forms Pᵀ and dSᵀ in registers (rows: keys, columns: queries)
// with the staged statistics, writes dSᵀ to shared memory (128-byte
// swizzled rows of 64 queries), and after a barrier between the consumers
// issues dV += Pᵀ·dO and dK += dSᵀ·q with the A operands from registers
// (the accumulator fragment is the A fragment) and dO and q MN-major, and
// dQ = dS·K with dS from shared memory (A MN-major: transposed) and K
// MN-major: for D 128 each warpgroup takes 64 of dQ's columns over all 128
// keys, for D 64 each its own 64 keys. dQ is staged in shared memory and
// added to an f32 workspace [B, Hq, T, D] (zero-filled by the launcher) by
// TMA reductions (cp.reduce.async.bulk .add), issued by each warpgroup's
// first thread; the finishing kernel scales and rounds it into dq.
//===----------------------------------------------------------------------===//

#include "liger/Conversion/LigerToGPU/AttentionKernel.h"
#include "liger/Conversion/LigerToGPU/GpuBuilder.h"
#include "liger/Conversion/LigerToGPU/RowKernel.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/LLVMIR/NVVMDialect.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"

using namespace mlir;
using namespace mlir::liger;
namespace rt = ::liger::runtime;

namespace {
/// Key rows per CTA tile: two consumer warpgroups of 64.
constexpr int64_t kKeyTile = 128;
/// Query rows per step.
constexpr int64_t kQueryBlock = 64;
/// Producer warpgroup + two consumers.
constexpr int64_t kThreads = 384;
constexpr int64_t kConsumerThreads = 256;
/// The named barrier among the consumers (the staged D, dSᵀ).
constexpr int64_t kConsumerBarrier = 1;
/// Each consumer warpgroup's own named barrier (its staged dQ part): this
/// one plus the warpgroup's index.
constexpr int64_t kWarpgroupBarrier = 2;
/// The side kernels: CTAs of 256 threads striding over their rows.
constexpr int64_t kSideThreads = 256;
constexpr int64_t kSideCtas = 1024;
/// A query row's statistics in the prepare kernel's workspace and in a
/// stage: lse · log2 e, D, two unused f32 (16 bytes: a block's rows are a
/// bulk copy's 16-byte aligned span wherever the block starts).
constexpr int64_t kStatsColumns = 4;
constexpr int64_t kStatsRowBytes = 4 * kStatsColumns;

/// The shared buffer: the mbarriers, k's and v's tiles, the stages (q's and
/// dO's blocks, the block's row statistics), dSᵀ, then the consumers' dQ
/// parts. Tiles in boxes of 128-byte swizzled rows, 1024-aligned.
struct GradLayout {
  GradLayout(int64_t headDim, int64_t stages)
      : headDim(headDim), stages(stages) {}
  int64_t headDim, stages;

  int64_t boxes() const { return headDim / 64; }
  int64_t keyBoxBytes() const { return kKeyTile * 128; }
  int64_t keyTileBytes() const { return boxes() * keyBoxBytes(); }
  int64_t queryBoxBytes() const { return kQueryBlock * 128; }
  int64_t queryTileBytes() const { return boxes() * queryBoxBytes(); }
  int64_t keysFullBarrier() const { return 0; }
  int64_t keysEmptyBarrier() const { return 8; }
  int64_t fullBarrier(int64_t s) const { return 16 + 8 * s; }
  int64_t emptyBarrier(int64_t s) const { return 16 + 8 * (stages + s); }
  int64_t kOffset() const { return 1024; }
  int64_t vOffset() const { return kOffset() + keyTileBytes(); }
  int64_t stagesOffset() const { return vOffset() + keyTileBytes(); }
  /// q, dO (each queryTileBytes), then the statistics of their rows.
  int64_t statsBytes() const { return kQueryBlock * kStatsRowBytes; }
  int64_t stageBytes() const { return 2 * queryTileBytes() + statsBytes(); }
  int64_t dsOffset() const { return stagesOffset() + stages * stageBytes(); }
  int64_t dsBytes() const { return kKeyTile * 128; }
  /// dQ's staging, a warpgroup's part (64 query rows x 64 f32 columns) as
  /// two boxes of 64 rows x 32 columns in 128-byte swizzled rows.
  int64_t dqBoxBytes() const { return kQueryBlock * 128; }
  int64_t dqPartBytes() const { return 2 * dqBoxBytes(); }
  int64_t dqOffset() const { return dsOffset() + dsBytes(); }
  int64_t size() const { return dqOffset() + 2 * dqPartBytes(); }
};

/// The tile a CTA takes at its loop's iteration `i`.
struct GradTile {
  Value n0;         ///< its first key row
  Value batch;      ///< b
  Value kvHead;     ///< the key/value head
  Value kvIndex;    ///< b · Hkv + kvHead: k's, v's, dk's and dv's map index
  Value firstBlock; ///< the first query block that sees one of its keys
  Value blocks;     ///< query blocks from there to the end, per query head
  Value steps;      ///< blocks · (Hq / Hkv)
};

/// Step `st` of a tile: its query head and first query row.
struct GradStep {
  Value head;   ///< the query head
  Value qIndex; ///< b · Hq + head: q's, dO's, out's map index
  Value m0;     ///< its first query row
};

struct GradKernelBuilder {
  const AttentionPlan &plan;
  GradLayout layout;
  Value shared; ///< !llvm.ptr<3>
  Value q, lse, dO, out, dq, dk, dv, dqAcc, stats;
  Value qMap, doMap, kMap, vMap, dqAccMap;
  Value tid, seq, kvSeq, keyTiles, ctaTiles, queryBlocks;

  int64_t group() const { return plan.queryHeads / plan.kvHeads; }
  Value at(GpuBuilder &b, int64_t offset) const {
    return b.sharedPtr(shared, b.i32(offset));
  }
  Value at(GpuBuilder &b, Value offset) const {
    return b.sharedPtr(shared, offset);
  }
  Value waitTicks(GpuBuilder &b) const { return b.i32(0x989680); }
  /// Stage `s`'s (index) part `which` (0 q, 1 dO, 2 the row statistics):
  /// byte offset (i32).
  Value stageTile(GpuBuilder &b, Value s, int64_t which) const {
    return b.offsetOf(b.toI32(s), layout.stageBytes(),
                      layout.stagesOffset() + which * layout.queryTileBytes());
  }
  Value fullBarrier(GpuBuilder &b, Value s) const {
    return at(b, b.offsetOf(b.toI32(s), 8, layout.fullBarrier(0)));
  }
  Value emptyBarrier(GpuBuilder &b, Value s) const {
    return at(b, b.offsetOf(b.toI32(s), 8, layout.emptyBarrier(0)));
  }

  GradTile tileAt(GpuBuilder &b, Value i) const {
    GradTile t;
    Value linear = snakeTileIndex(b, i);
    // Under a causal mask a tile's work falls with its first key row: the
    // tiles go key tile by key tile (every head's first key rows first),
    // heaviest first. Without one, a head's key tiles are consecutive, so
    // that CTAs running at once read the same query blocks.
    Value bh;
    if (plan.causal) {
      Value bhs = b.mul(memref::DimOp::create(b, q, 0), plan.kvHeads);
      t.n0 = b.mul(b.div(linear, bhs), kKeyTile);
      bh = b.rem(linear, bhs);
    } else {
      t.n0 = b.mul(b.rem(linear, keyTiles), kKeyTile);
      bh = b.div(linear, keyTiles);
    }
    t.batch = b.div(bh, plan.kvHeads);
    t.kvHead = b.rem(bh, plan.kvHeads);
    t.kvIndex = bh;
    // Causal (bottom-right aligned): query i sees key j <= i + S - T, so
    // the tile's first key n0 is seen from query n0 + T - S on.
    t.firstBlock = b.index(0);
    if (plan.causal) {
      Value reach = b.add(t.n0, seq);
      Value past =
          arith::CmpIOp::create(b, arith::CmpIPredicate::ugt, reach, kvSeq);
      t.firstBlock = b.min(
          b.select(past, b.div(b.sub(reach, kvSeq), kQueryBlock), b.index(0)),
          queryBlocks);
    }
    // A window W: query i sees key j only while i < j + W + T - S, so the
    // tile's last key n0 + 127 is seen by the queries below n0 + 127 + W +
    // T - S.
    Value endBlock = queryBlocks;
    if (plan.window) {
      Value reach = b.add(b.add(t.n0, kKeyTile - 1 + plan.window), seq);
      Value past =
          arith::CmpIOp::create(b, arith::CmpIPredicate::ugt, reach, kvSeq);
      Value end = b.select(past, b.sub(reach, kvSeq), b.index(0));
      endBlock = b.max(
          b.min(b.div(b.add(end, kQueryBlock - 1), kQueryBlock), queryBlocks),
          t.firstBlock);
    }
    t.blocks = b.sub(endBlock, t.firstBlock);
    t.steps = b.mul(t.blocks, group());
    return t;
  }

  GradStep stepAt(GpuBuilder &b, const GradTile &t, Value st) const {
    GradStep s;
    s.head = b.add(b.mul(t.kvHead, group()), b.div(st, t.blocks));
    s.qIndex = b.add(b.mul(t.batch, plan.queryHeads), s.head);
    s.m0 = b.mul(b.add(t.firstBlock, b.rem(st, t.blocks)), kQueryBlock);
    return s;
  }

  /// Runs `body` for each of the CTA's tiles, carrying the ring's fills
  /// before the tile.
  void forEachTile(
      GpuBuilder &b,
      function_ref<void(GpuBuilder &, const GradTile &, Value i, Value fills)>
          body) const {
    forEachCtaTile<GradTile>(
        b, ctaTiles, [&](GpuBuilder &tb, Value i) { return tileAt(tb, i); },
        [](const GradTile &t) { return t.steps; }, body);
  }

  void emitBarrierInit(GpuBuilder &b) const;
  void emitProducer(GpuBuilder &b) const;
  void emitConsumer(GpuBuilder &b) const;
  void emitPrepare(GpuBuilder &b) const;
  void emitFinish(GpuBuilder &b) const;
};
} // namespace

void GradKernelBuilder::emitBarrierInit(GpuBuilder &b) const {
  GpuBuilder ib = b.ifThen(b.equal(tid, 0));
  ib.mbarrierInit(at(ib, layout.keysFullBarrier()), 1);
  ib.mbarrierInit(at(ib, layout.keysEmptyBarrier()), kConsumerThreads);
  for (int64_t s = 0; s < layout.stages; ++s) {
    ib.mbarrierInit(at(ib, layout.fullBarrier(s)), 1);
    ib.mbarrierInit(at(ib, layout.emptyBarrier(s)), kConsumerThreads);
  }
  ib.mbarrierInitFence();
  gpu::BarrierOp::create(b);
}

void GradKernelBuilder::emitProducer(GpuBuilder &b) const {
  NVVM::SetMaxRegisterOp::create(b, 24, NVVM::SetMaxRegisterAction::decrease);
  GpuBuilder ob = b.ifThen(b.equal(tid, 0));
  forEachTile(ob, [&](GpuBuilder &tb, const GradTile &t, Value i, Value fills) {
    // k's and v's tiles, once the consumers are done with the last ones.
    {
      GpuBuilder wb = tb.ifThen(tb.lessThan(tb.index(0), i));
      wb.mbarrierWaitParity(at(wb, layout.keysEmptyBarrier()),
                            wb.toI32(wb.rem(wb.sub(i, 1), 2)), waitTicks(wb));
    }
    Value keysFull = at(tb, layout.keysFullBarrier());
    tb.mbarrierArriveExpectTx(keysFull, 2 * layout.keyTileBytes());
    for (int64_t c = 0; c < layout.boxes(); ++c) {
      SmallVector<Value, 3> coords{tb.i32(64 * c), tb.toI32(t.n0),
                                   tb.toI32(t.kvIndex)};
      int64_t box = c * layout.keyBoxBytes();
      tb.tmaLoad(at(tb, layout.kOffset() + box), kMap, coords, keysFull);
      tb.tmaLoad(at(tb, layout.vOffset() + box), vMap, coords, keysFull);
    }
    // Each step's q, dO and out blocks, into the next stage of the ring
    // once its last use (fill f - stages) has been released.
    auto steps = scf::ForOp::create(tb, tb.index(0), t.steps, tb.index(1));
    GpuBuilder lb = tb.atStart(steps.getBody());
    Value st = steps.getInductionVar();
    GradStep step = stepAt(lb, t, st);
    Value f = lb.add(fills, st);
    Value s = lb.rem(f, layout.stages);
    Value round = lb.div(f, layout.stages);
    {
      GpuBuilder wb = lb.ifThen(lb.lessThan(lb.index(0), round));
      wb.mbarrierWaitParity(emptyBarrier(wb, s),
                            wb.toI32(wb.rem(wb.sub(round, 1), 2)),
                            waitTicks(wb));
    }
    // The tiles' boxes are whole (TMA fills what is past the sequence);
    // the statistics stop at its end.
    Value full = fullBarrier(lb, s);
    Value statsBytes = lb.toI32(
        lb.mul(lb.min(lb.sub(seq, step.m0), kQueryBlock), kStatsRowBytes));
    lb.mbarrierArriveExpectTx(
        full, lb.add(statsBytes, lb.i32(2 * layout.queryTileBytes())));
    Value maps[2] = {qMap, doMap};
    for (int64_t which = 0; which < 2; ++which)
      for (int64_t c = 0; c < layout.boxes(); ++c)
        lb.tmaLoad(
            at(lb, lb.add(stageTile(lb, s, which), c * layout.queryBoxBytes())),
            maps[which],
            ValueRange{lb.i32(64 * c), lb.toI32(step.m0),
                       lb.toI32(step.qIndex)},
            full);
    Value statsRow = lb.add(lb.mul(step.qIndex, seq), step.m0);
    lb.bulkLoad(at(lb, stageTile(lb, s, 2)),
                lb.globalPtr(stats, lb.mul(statsRow, kStatsRowBytes)),
                statsBytes, full);
  });
}

void GradKernelBuilder::emitConsumer(GpuBuilder &b) const {
  NVVM::SetMaxRegisterOp::create(b, 240, NVVM::SetMaxRegisterAction::increase);
  MLIRContext *ctx = b.getContext();
  Type f32 = b.getF32Type();
  Type elem = plan.elementType;
  int64_t d = plan.headDim;
  // Sᵀ and dPᵀ: m64n64 (keys x queries); dK, dV: m64nD; dQ's part: m64n64.
  auto blockType =
      LLVM::LLVMStructType::getLiteral(ctx, SmallVector<Type>(32, f32));
  auto accType =
      LLVM::LLVMStructType::getLiteral(ctx, SmallVector<Type>(d / 2, f32));
  Value wg = b.warpUniform(b.sub(b.div(tid, 128), 1));
  Value ctid = b.sub(tid, 128);
  Value warp = b.rem(b.div(tid, 32), 4);
  Value lane = b.rem(tid, 32);
  Value quadCol = b.mul(b.rem(lane, 4), 2);
  Value rowInWg = b.add(b.mul(warp, 16), b.div(lane, 4));
  Value sharedBase = LLVM::PtrToIntOp::create(b, b.getI64Type(), shared);
  Value cScale = b.f32(plan.log2Factor());
  Value capFactor = plan.softcap ? b.f32(plan.capArgumentFactor()) : Value();
  Value zero = b.f32(0);
  // dQ's part of this warpgroup: its 64 columns over all 128 keys (D 128),
  // or all 64 columns over its own 64 keys (D 64).
  bool splitColumns = d == 128;
  int64_t dqSlices = splitColumns ? kKeyTile / 16 : 64 / 16;
  Value wgThread = b.rem(ctid, 128);

  forEachTile(b, [&](GpuBuilder &tb, const GradTile &t, Value i, Value fills) {
    tb.mbarrierWaitParity(at(tb, layout.keysFullBarrier()),
                          tb.toI32(tb.rem(i, 2)), waitTicks(tb));
    // This warpgroup's 64 key rows of the k and v tiles.
    Value kRows = tb.add(tb.i32(layout.kOffset()), tb.toI32(tb.mul(wg, 8192)));
    Value vRows = tb.add(tb.i32(layout.vOffset()), tb.toI32(tb.mul(wg, 8192)));
    // The key rows of a thread's registers: row 8 h of its warpgroup's
    // (`group`) 64 from the thread's `row` in it.
    auto keyRowOf = [&](GpuBuilder &kb, Value group, Value row, int64_t h) {
      return kb.add(kb.add(t.n0, kb.mul(group, 64)), kb.add(row, 8 * h));
    };
    Value keyRow[2] = {keyRowOf(tb, wg, rowInWg, 0),
                       keyRowOf(tb, wg, rowInWg, 1)};

    auto steps =
        scf::ForOp::create(tb, tb.index(0), t.steps, tb.index(1),
                           ValueRange{LLVM::ZeroOp::create(tb, accType),
                                      LLVM::ZeroOp::create(tb, accType)});
    {
      GpuBuilder lb = tb.atStart(steps.getBody());
      Value st = steps.getInductionVar();
      Value dK = steps.getRegionIterArgs()[0];
      Value dV = steps.getRegionIterArgs()[1];
      GradStep step = stepAt(lb, t, st);
      Value f = lb.add(fills, st);
      Value s = lb.rem(f, layout.stages);
      lb.mbarrierWaitParity(fullBarrier(lb, s),
                            lb.toI32(lb.rem(lb.div(f, layout.stages), 2)),
                            waitTicks(lb));
      Value qTile = stageTile(lb, s, 0), doTile = stageTile(lb, s, 1),
            statsTile = stageTile(lb, s, 2);
      // The thread's and the tile's invariants pass through inLoop: what
      // the step derives from them (every k slice's descriptor, every
      // register's mask bound and shared-memory offset) is computed here,
      // not hoisted and held across the loop (at D 128 that spilled about
      // 400 bytes, reloaded in every step).
      Value wgL = lb.inLoop(wg), quadL = lb.inLoop(quadCol),
            rowL = lb.inLoop(rowInWg);
      auto kMajor = [&](Value offset) {
        return lb.wgmmaDescriptor(sharedBase, offset,
                                  wgmmaKMajorDescriptorFields(128));
      };
      auto mnMajor = [&](Value offset, int64_t boxBytes) {
        return lb.wgmmaDescriptor(sharedBase, offset,
                                  wgmmaMNMajorDescriptorFields(boxBytes));
      };

      // Sᵀ = K · qᵀ and dPᵀ = V · dOᵀ: K-major operands, D / 16 slices.
      auto issueBlock = [&](GpuBuilder &gb, Value aRows, Value bTile) {
        Value aBase = gb.inLoop(kMajor(aRows)), bBase = kMajor(bTile);
        Value acc = LLVM::UndefOp::create(gb, blockType);
        for (int64_t kk = 0; kk < d / 16; ++kk) {
          int64_t slice = (kk % 4) * 32;
          Value a = gb.wgmmaDescriptorAdvance(
              aBase, (kk / 4) * layout.keyBoxBytes() + slice);
          Value bd = gb.wgmmaDescriptorAdvance(
              bBase, (kk / 4) * layout.queryBoxBytes() + slice);
          acc = gb.wgmmaShared(acc, 64, elem, a, bd, /*accumulate=*/kk > 0);
        }
        return acc;
      };
      NVVM::WgmmaFenceAlignedOp::create(lb);
      Value sAcc = issueBlock(lb, kRows, qTile);
      Value dpAcc = issueBlock(lb, vRows, doTile);
      NVVM::WgmmaGroupSyncAlignedOp::create(lb);
      NVVM::WgmmaWaitGroupSyncOp::create(lb, 0);
      sAcc = lb.fenceOperands(sAcc);
      dpAcc = lb.fenceOperands(dpAcc);

      // Pᵀ and dSᵀ: register r holds key row keyRow[h], h = (r % 4) / 2,
      // and query column quadCol + c, c = 8 (r / 4) + r % 2, of the block;
      // its terms count where lo[h] <= c < hi[h] (i32): below hi[h] the
      // query row is in the sequence (and, with a window W, within the
      // key's: query + S < key + W + T), from lo[h] on its key is in the
      // keys and (under a causal mask: key + T <= query + S) seen by it.
      Type i32 = lb.getI32Type();
      Value quad = lb.toI32(quadL);
      Value seq32 = lb.toI32(seq), kvSeq32 = lb.toI32(kvSeq),
            m032 = lb.toI32(step.m0);
      Value hiSeq = lb.sub(lb.sub(seq32, m032), quad);
      Value lo[2], hi[2];
      for (int64_t h = 0; h < 2; ++h) {
        Value key = lb.toI32(keyRowOf(lb, wgL, rowL, h));
        hi[h] = hiSeq;
        if (plan.window)
          hi[h] = arith::MinSIOp::create(
              lb, hiSeq,
              lb.sub(lb.add(lb.add(key, lb.i32(plan.window)),
                            lb.sub(seq32, kvSeq32)),
                     lb.add(m032, quad)));
        Value seen = plan.causal ? lb.sub(lb.sub(lb.add(key, seq32), kvSeq32),
                                          lb.add(m032, quad))
                                 : lb.i32(0);
        lo[h] = lb.select(lb.lessThan(key, kvSeq32), seen,
                          lb.constant(i32, INT32_MAX));
      }
      // The statistics of the thread's columns (lse · log2 e and D; stale
      // past the sequence's end, where the terms are selected away).
      Value statsBase = lb.add(statsTile, lb.mul(quad, kStatsRowBytes));
      Value rowStats[16];
      for (int64_t c = 0; c < 16; ++c)
        rowStats[c] = lb.loadShared(
            VectorType::get({2}, f32),
            at(lb, lb.add(statsBase, (8 * (c / 2) + c % 2) * kStatsRowBytes)),
            8);
      SmallVector<Value> p(32), ds(32);
      for (int64_t r = 0; r < 32; ++r) {
        int64_t c = 8 * (r / 4) + r % 2;
        Value column = lb.i32(c);
        Value valid = arith::AndIOp::create(
            lb,
            arith::CmpIOp::create(lb, arith::CmpIPredicate::sge, column,
                                  lo[(r % 4) / 2]),
            arith::CmpIOp::create(lb, arith::CmpIPredicate::slt, column,
                                  hi[(r % 4) / 2]));
        Value stats = rowStats[2 * (r / 4) + r % 2];
        Value lse2 = vector::ExtractOp::create(lb, stats, 0);
        Value rowD = vector::ExtractOp::create(lb, stats, 1);
        Value x = LLVM::ExtractValueOp::create(lb, sAcc, r);
        // With a softcap c: t = tanh(S · scale / c) in place of S, and
        // dS's factor 1 - t² (the tanh's derivative).
        Value capSlope;
        if (plan.softcap) {
          x = lb.tanhApprox(arith::MulFOp::create(lb, x, capFactor));
          capSlope = math::FmaOp::create(lb, arith::NegFOp::create(lb, x), x,
                                         lb.f32(1));
        }
        Value e = lb.ex2Approx(math::FmaOp::create(
            lb, x, cScale, arith::NegFOp::create(lb, lse2)));
        p[r] = lb.select(valid, e, zero);
        Value dp = LLVM::ExtractValueOp::create(lb, dpAcc, r);
        Value g = arith::MulFOp::create(lb, p[r],
                                        arith::SubFOp::create(lb, dp, rowD));
        if (capSlope)
          g = arith::MulFOp::create(lb, g, capSlope);
        ds[r] = lb.select(valid, g, zero);
      }
      SmallVector<Value> pA, dsA;
      for (int64_t r = 0; r < 32; r += 2) {
        pA.push_back(
            lb.packMmaOperand(p[r], p[r + 1], elem, Value(), /*asI32=*/true));
        dsA.push_back(
            lb.packMmaOperand(ds[r], ds[r + 1], elem, Value(), /*asI32=*/true));
      }
      // dV += Pᵀ · dO and dK += dSᵀ · q (A from registers, B MN-major),
      // issued first: the Tensor Cores run them while the consumers meet
      // and write dSᵀ for dQ's product.
      NVVM::WgmmaFenceAlignedOp::create(lb);
      Value doBase = mnMajor(doTile, layout.queryBoxBytes()),
            qBase = mnMajor(qTile, layout.queryBoxBytes());
      for (int64_t kk = 0; kk < kQueryBlock / 16; ++kk) {
        dV =
            lb.wgmmaRegisterA(dV, d, elem, ArrayRef<Value>(pA).slice(4 * kk, 4),
                              lb.wgmmaDescriptorAdvance(doBase, kk * 16 * 128),
                              /*bMNMajor=*/true);
        dK = lb.wgmmaRegisterA(dK, d, elem,
                               ArrayRef<Value>(dsA).slice(4 * kk, 4),
                               lb.wgmmaDescriptorAdvance(qBase, kk * 16 * 128),
                               /*bMNMajor=*/true);
      }
      NVVM::WgmmaGroupSyncAlignedOp::create(lb);
      // With D 128 each warpgroup's dQ reads the other's dSᵀ rows: both
      // are past the last step's dQ before either writes them again.
      if (splitColumns)
        lb.namedBarrier(lb.i32(kConsumerBarrier), kConsumerThreads);
      // dSᵀ to shared memory: row 64 wg + rowInWg (+ 8), the pair at query
      // column 8 jj + quadCol, in 128-byte rows swizzled as TMA would.
      for (int64_t jj = 0; jj < 8; ++jj)
        for (int64_t h = 0; h < 2; ++h) {
          Value row = lb.add(lb.mul(wgL, 64), lb.add(rowL, 8 * h));
          Value offset =
              lb.swizzle128Offset(row, lb.index(jj), lb.mul(quadL, 2));
          lb.storeShared(dsA[2 * jj + h],
                         at(lb, lb.add(lb.i32(layout.dsOffset()), offset)), 4);
        }
      lb.fenceProxyAsyncShared();
      // The last step's dQ part has been read out of the staging (its
      // reduction issued by the warpgroup's first thread) before the
      // barrier: after it, the staging can be written again.
      {
        GpuBuilder ib = lb.ifThen(lb.equal(wgThread, 0));
        NVVM::CpAsyncBulkWaitGroupOp::create(ib, 0, /*read=*/ib.getUnitAttr());
      }
      lb.namedBarrier(lb.i32(kConsumerBarrier), kConsumerThreads);

      // This warpgroup's part of dQ = dS · K (dS MN-major from shared
      // memory: transposed; K MN-major).
      NVVM::WgmmaFenceAlignedOp::create(lb);
      Value dQ = LLVM::UndefOp::create(lb, blockType);
      Value dqColumn = splitColumns ? lb.mul(wgL, 64) : lb.index(0);
      {
        Value rows0 = lb.toI32(
            lb.mul(splitColumns ? lb.index(0) : lb.mul(wgL, 4), 16 * 128));
        Value kBox = lb.add(
            lb.i32(layout.kOffset()),
            lb.toI32(lb.mul(lb.div(dqColumn, 64), layout.keyBoxBytes())));
        Value aBase =
            mnMajor(lb.add(lb.i32(layout.dsOffset()), rows0), layout.dsBytes());
        Value bBase = mnMajor(lb.add(kBox, rows0), layout.keyBoxBytes());
        for (int64_t kk = 0; kk < dqSlices; ++kk)
          dQ = lb.wgmmaShared(dQ, 64, elem,
                              lb.wgmmaDescriptorAdvance(aBase, kk * 16 * 128),
                              lb.wgmmaDescriptorAdvance(bBase, kk * 16 * 128),
                              /*accumulate=*/kk > 0,
                              /*aMNMajor=*/true, /*bMNMajor=*/true);
      }
      NVVM::WgmmaGroupSyncAlignedOp::create(lb);
      NVVM::WgmmaWaitGroupSyncOp::create(lb, 0);
      dV = lb.fenceOperands(dV);
      dK = lb.fenceOperands(dK);
      dQ = lb.fenceOperands(dQ);
      (void)lb.fenceRegisters(pA);
      (void)lb.fenceRegisters(dsA);
      lb.mbarrierArrive(emptyBarrier(lb, s));

      // dQ's part into the workspace: staged (register r holds query row
      // rowInWg (+ 8) and column 8 (r / 4) + quadCol + r % 2 of the part,
      // box column / 32, 16-byte chunk XOR-swizzled by the row as TMA
      // reads it), then added by a TMA reduction of the two boxes, whose
      // map clips the rows past the sequence.
      Value dqPart = lb.add(lb.i32(layout.dqOffset()),
                            lb.toI32(lb.mul(wgL, layout.dqPartBytes())));
      for (int64_t r = 0; r < 32; r += 2) {
        Value row = lb.add(rowL, 8 * ((r % 4) / 2));
        int64_t col = 8 * (r / 4) + r % 2; // + quadCol
        Value inBox = lb.add(quadL, col % 32);
        Value offset = lb.add(lb.swizzle128Offset(row, lb.div(inBox, 4),
                                                  lb.mul(lb.rem(inBox, 4), 4)),
                              (col / 32) * layout.dqBoxBytes());
        Value pair = vector::FromElementsOp::create(
            lb, VectorType::get({2}, f32),
            ValueRange{LLVM::ExtractValueOp::create(lb, dQ, r),
                       LLVM::ExtractValueOp::create(lb, dQ, r + 1)});
        lb.storeShared(pair, at(lb, lb.add(dqPart, offset)), 8);
      }
      lb.fenceProxyAsyncShared();
      lb.namedBarrier(lb.toI32(lb.add(wgL, kWarpgroupBarrier)), 128);
      {
        GpuBuilder ib = lb.ifThen(lb.equal(wgThread, 0));
        for (int64_t box = 0; box < 2; ++box)
          ib.tmaReduceAdd(dqAccMap,
                          at(ib, ib.add(dqPart, box * layout.dqBoxBytes())),
                          ValueRange{ib.toI32(ib.add(dqColumn, 32 * box)),
                                     ib.toI32(step.m0), ib.toI32(step.qIndex)});
        NVVM::CpAsyncBulkCommitGroupOp::create(ib);
      }
      scf::YieldOp::create(lb, ValueRange{dK, dV});
    }
    // k's and v's tiles are free for the next tile.
    tb.mbarrierArrive(at(tb, layout.keysEmptyBarrier()));

    // dk = scale · dK and dv = dV, rows past the keys' end skipped.
    auto pairType = VectorType::get({2}, elem);
    Value scale = tb.f32(plan.scale);
    for (int64_t h = 0; h < 2; ++h) {
      GpuBuilder sb = tb.ifThen(tb.lessThan(keyRow[h], kvSeq));
      for (int64_t jj = 0; jj < d / 8; ++jj) {
        int64_t r = 4 * jj + 2 * h;
        SmallVector<Value, 2> indices;
        auto store = [&](Value acc, Value target, Value factor) {
          Value lo = LLVM::ExtractValueOp::create(sb, acc, r);
          Value hi = LLVM::ExtractValueOp::create(sb, acc, r + 1);
          if (factor) {
            lo = arith::MulFOp::create(sb, lo, factor);
            hi = arith::MulFOp::create(sb, hi, factor);
          }
          Value pair = arith::TruncFOp::create(
              sb, pairType,
              vector::FromElementsOp::create(sb, VectorType::get({2}, f32),
                                             ValueRange{lo, hi}));
          vector::StoreOp::create(sb, pair, target,
                                  ValueRange{t.batch, t.kvHead, keyRow[h],
                                             sb.add(quadCol, 8 * jj)});
        };
        store(steps.getResult(0), dk, scale);
        store(steps.getResult(1), dv, Value());
      }
    }
  });
  // The last dQ reductions are complete before the CTA leaves (its shared
  // memory read, the workspace written for the finishing kernel).
  GpuBuilder ib = b.ifThen(b.equal(wgThread, 0));
  NVVM::CpAsyncBulkWaitGroupOp::create(ib, 0, UnitAttr());
}

void GradKernelBuilder::emitPrepare(GpuBuilder &b) const {
  // Each query row's statistics, a row a quad (each thread a quarter of
  // its D, 8 elements at a time): lse · log2 e and D = rowsum(dO ∘ out).
  // The CTAs stride over blocks of 64 rows, every lane of a warp in every
  // iteration (the quad's shuffles); rows past the last are not stored.
  Type f32 = b.getF32Type();
  Type elem = plan.elementType;
  int64_t d = plan.headDim;
  int64_t rowsPerCta = kSideThreads / 4;
  Value batch = memref::DimOp::create(b, q, 0);
  Value rows = b.mul(b.mul(batch, plan.queryHeads), seq);
  Value tid = b.threadId();
  Value quarter = b.rem(tid, 4);
  auto loop =
      scf::ForOp::create(b, b.mul(b.blockId(gpu::Dimension::x), rowsPerCta),
                         rows, b.mul(b.gridDim(gpu::Dimension::x), rowsPerCta));
  GpuBuilder lb = b.atStart(loop.getBody());
  Value row = lb.add(loop.getInductionVar(), lb.div(tid, 4));
  Value inRange = lb.lessThan(row, rows);
  Value clamped = lb.min(row, lb.sub(rows, 1));
  Value t = lb.rem(clamped, seq);
  Value bh = lb.div(clamped, seq);
  Value bi = lb.div(bh, plan.queryHeads), h = lb.rem(bh, plan.queryHeads);
  auto chunkType = VectorType::get({8}, elem);
  auto wideType = VectorType::get({8}, f32);
  Value sum = lb.f32(0);
  for (int64_t c = 0; c < d / 32; ++c) {
    // The quad reads 64 contiguous bytes of each at a time.
    Value col = lb.mul(lb.add(lb.mul(lb.index(c), 4), quarter), 8);
    SmallVector<Value, 4> at{bi, h, t, col};
    Value g = arith::ExtFOp::create(
        lb, wideType,
        vector::LoadOp::create(lb, chunkType, dO, at).getResult());
    Value o = arith::ExtFOp::create(
        lb, wideType,
        vector::LoadOp::create(lb, chunkType, out, at).getResult());
    sum = arith::AddFOp::create(
        lb, sum,
        vector::ReductionOp::create(lb, vector::CombiningKind::ADD,
                                    arith::MulFOp::create(lb, g, o)));
  }
  sum = lb.warpAllReduceSum(sum, 4);
  GpuBuilder sb =
      lb.ifThen(arith::AndIOp::create(lb, inRange, lb.equal(quarter, 0)));
  Value lse2 = arith::MulFOp::create(
      sb, memref::LoadOp::create(sb, lse, ValueRange{bi, h, t}),
      sb.f32(1.4426950408889634));
  Value zero = sb.f32(0);
  vector::StoreOp::create(
      sb,
      vector::FromElementsOp::create(sb, VectorType::get({kStatsColumns}, f32),
                                     ValueRange{lse2, sum, zero, zero}),
      stats, ValueRange{bi, h, t, sb.index(0)});
}

void GradKernelBuilder::emitFinish(GpuBuilder &b) const {
  // dq = scale · dQacc in pairs, the CTAs striding over them.
  Type f32 = b.getF32Type();
  Value batch = memref::DimOp::create(b, q, 0);
  int64_t halfD = plan.headDim / 2;
  Value pairs = b.mul(b.mul(b.mul(batch, plan.queryHeads), seq), halfD);
  Value first =
      b.add(b.mul(b.blockId(gpu::Dimension::x), kSideThreads), b.threadId());
  Value stride = b.mul(b.gridDim(gpu::Dimension::x), kSideThreads);
  auto loop = scf::ForOp::create(b, first, pairs, stride);
  GpuBuilder lb = b.atStart(loop.getBody());
  Value idx = loop.getInductionVar();
  Value col = lb.mul(lb.rem(idx, halfD), 2);
  Value rest = lb.div(idx, halfD);
  Value row = lb.rem(rest, seq);
  Value bh = lb.div(rest, seq);
  SmallVector<Value, 4> at{lb.div(bh, plan.queryHeads),
                           lb.rem(bh, plan.queryHeads), row, col};
  Value acc = vector::LoadOp::create(lb, VectorType::get({2}, f32), dqAcc, at);
  Value scaled = arith::MulFOp::create(
      lb, acc,
      vector::BroadcastOp::create(lb, VectorType::get({2}, f32),
                                  lb.f32(plan.scale)));
  vector::StoreOp::create(
      lb,
      arith::TruncFOp::create(lb, VectorType::get({2}, plan.elementType),
                              scaled),
      dq, at);
}

//===----------------------------------------------------------------------===//
// The kernel
//===----------------------------------------------------------------------===//

int64_t mlir::liger::attentionGradSharedBytes(int64_t headDim, int64_t stages) {
  return GradLayout(headDim, stages).size();
}

FailureOr<rt::KernelSpec>
mlir::liger::buildAttentionGradKernel(const AttentionPlan &plan,
                                      gpu::GPUModuleOp module, StringRef name,
                                      KernelConfigAttr config) {
  MLIRContext *ctx = plan.group.getContext();
  Block &body = plan.group.getBody().front();
  GradKernelBuilder kb{plan, GradLayout(plan.headDim, *config.getStages())};

  // Parameters: the group's inputs (heads tensors, lse head scalars), the
  // outputs dq, dk, dv, dq's f32 workspace, then the tensor maps of q, dO,
  // out, k, v and the workspace by value.
  rt::KernelSpec info;
  info.name = name.str();
  info.kernelTemplate = rt::KernelTemplate::Attention;
  info.ops = plan.gradOp->getName().getStringRef().str();
  info.block[0] = kThreads;
  info.vectorWidth = 8;
  info.dynamicSharedMemoryBytes = kb.layout.size();
  info.grid[0] = {rt::GridDim::Sms, 1};
  Type f32 = Float32Type::get(ctx);
  SmallVector<Type> paramTypes;
  for (BlockArgument arg : body.getArguments()) {
    auto type = cast<RankedTensorType>(arg.getType());
    std::string pname = "input" + std::to_string(arg.getArgNumber());
    if (arg == plan.lse) {
      info.params.push_back(abiParam(pname, rt::ParamRole::Input,
                                     rt::ParamKind::HeadScalars, f32, 0,
                                     plan.queryHeads));
      paramTypes.push_back(MemRefType::get(type.getShape(), f32));
      continue;
    }
    if (arg != plan.q && arg != plan.k && arg != plan.v && arg != plan.grad &&
        arg != plan.out)
      return plan.group.emitOpError("cannot be lowered to an attention "
                                    "kernel: its input ")
             << arg.getArgNumber() << " is not read by its op";
    bool queryHeads = arg == plan.q || arg == plan.grad || arg == plan.out;
    info.params.push_back(abiParam(
        pname, rt::ParamRole::Input, rt::ParamKind::Heads, plan.elementType,
        plan.headDim, queryHeads ? plan.queryHeads : plan.kvHeads));
    paramTypes.push_back(MemRefType::get(type.getShape(), plan.elementType));
  }
  for (auto [index, result] : llvm::enumerate(plan.gradOp->getResults())) {
    auto type = cast<RankedTensorType>(result.getType());
    info.params.push_back(
        abiParam("output" + std::to_string(index), rt::ParamRole::Output,
                 rt::ParamKind::Heads, plan.elementType, plan.headDim,
                 index == 0 ? plan.queryHeads : plan.kvHeads));
    paramTypes.push_back(MemRefType::get(type.getShape(), plan.elementType));
  }
  // The workspaces: dq's f32 accumulator [B, Hq, T, D] and the query
  // rows' statistics [B, Hq, T, 4] (the prepare kernel's).
  auto qType = cast<RankedTensorType>(plan.q.getType());
  info.params.push_back(abiParam("workspace0", rt::ParamRole::Workspace,
                                 rt::ParamKind::Heads, f32, plan.headDim,
                                 plan.queryHeads));
  paramTypes.push_back(MemRefType::get(qType.getShape(), f32));
  SmallVector<int64_t, 4> statsShape(qType.getShape());
  statsShape.back() = kStatsColumns;
  info.params.push_back(abiParam("workspace1", rt::ParamRole::Workspace,
                                 rt::ParamKind::Heads, f32, kStatsColumns,
                                 plan.queryHeads));
  paramTypes.push_back(MemRefType::get(statsShape, f32));
  info.tensorMaps.push_back(
      attentionTensorMap(plan.q.getArgNumber(), kQueryBlock));
  info.tensorMaps.push_back(
      attentionTensorMap(plan.grad.getArgNumber(), kQueryBlock));
  info.tensorMaps.push_back(
      attentionTensorMap(plan.k.getArgNumber(), kKeyTile));
  info.tensorMaps.push_back(
      attentionTensorMap(plan.v.getArgNumber(), kKeyTile));
  info.tensorMaps.push_back(attentionTensorMap(
      info.params.size() - 2, kQueryBlock, /*elementBytes=*/4));
  paramTypes.append(info.tensorMaps.size(), LLVM::LLVMPointerType::get(ctx));
  info.prepare.name = (name + "_prepare").str();
  info.prepare.grid = kSideCtas;
  info.prepare.block[0] = kSideThreads;
  info.finish.name = (name + "_finish").str();
  info.finish.grid = kSideCtas;
  info.finish.block[0] = kSideThreads;
  // One CTA per SM (the grid is "sms"); the workspaces are sized by the
  // heads tensors, not per CTA.
  info.ctasPerSm = 1;

  unsigned numInputs = body.getNumArguments();
  auto bind = [&](gpu::GPUFuncOp kernel) {
    Block &entry = kernel.getBody().front();
    kb.q = entry.getArgument(plan.q.getArgNumber());
    kb.lse = entry.getArgument(plan.lse.getArgNumber());
    kb.dO = entry.getArgument(plan.grad.getArgNumber());
    kb.out = entry.getArgument(plan.out.getArgNumber());
    kb.dq = entry.getArgument(numInputs);
    kb.dk = entry.getArgument(numInputs + 1);
    kb.dv = entry.getArgument(numInputs + 2);
    kb.dqAcc = entry.getArgument(numInputs + 3);
    kb.stats = entry.getArgument(numInputs + 4);
    ValueRange maps = entry.getArguments().take_back(5);
    kb.qMap = maps[0];
    kb.doMap = maps[1];
    kb.kMap = maps[2];
    kb.vMap = maps[3];
    kb.dqAccMap = maps[4];
  };

  // The main kernel.
  {
    GpuBuilder b(plan.group.getLoc(), OpBuilder(ctx));
    gpu::GPUFuncOp kernel = b.beginKernel(module, name, paramTypes, kThreads);
    b.markWarpSpecialized(kernel);
    kernel->setAttr("liger.tensor_maps",
                    b.getI64IntegerAttr(info.tensorMaps.size()));
    bind(kernel);
    kb.shared = b.externSharedBuffer(module, "liger_attention_smem", 1024);
    kb.tid = b.threadId();
    Value batch = memref::DimOp::create(b, kb.q, 0);
    kb.seq = memref::DimOp::create(b, kb.q, 2);
    kb.kvSeq = memref::DimOp::create(
        b, kernel.getBody().front().getArgument(plan.k.getArgNumber()), 2);
    kb.keyTiles = b.div(b.add(kb.kvSeq, kKeyTile - 1), kKeyTile);
    kb.queryBlocks = b.div(b.add(kb.seq, kQueryBlock - 1), kQueryBlock);
    kb.ctaTiles =
        snakeTilesOfCta(b, b.mul(b.mul(batch, plan.kvHeads), kb.keyTiles));
    kb.emitBarrierInit(b);
    auto [pb, cb] = b.ifThenElse(b.lessThan(kb.tid, 128));
    kb.emitProducer(pb);
    kb.emitConsumer(cb);
    gpu::ReturnOp::create(b);
  }
  // The side kernels: the same parameters.
  for (auto [side, emit] :
       {std::make_pair(&info.prepare, &GradKernelBuilder::emitPrepare),
        std::make_pair(&info.finish, &GradKernelBuilder::emitFinish)}) {
    GpuBuilder b(plan.group.getLoc(), OpBuilder(ctx));
    gpu::GPUFuncOp kernel =
        b.beginKernel(module, side->name, paramTypes, kSideThreads);
    kernel->setAttr("liger.tensor_maps",
                    b.getI64IntegerAttr(info.tensorMaps.size()));
    bind(kernel);
    kb.seq = memref::DimOp::create(b, kb.q, 2);
    (kb.*emit)(b);
    gpu::ReturnOp::create(b);
  }
  return info;
}
