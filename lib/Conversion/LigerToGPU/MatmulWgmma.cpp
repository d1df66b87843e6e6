//===- MatmulWgmma.cpp - the wgmma + TMA matmul template ------------------===//
//
// sm_90a: a producer warpgroup fills a ring of stages with TMA copies
// (MatmulTma.cpp) guarded by full/empty mbarriers; one consumer warpgroup
// per 64 rows of the tile waits on a stage's full barrier, issues
// tile_k / 16 wgmma.mma_async per projection from shared-memory
// descriptors (K-major, 128-byte swizzle, or MN-major boxes for a gradient
// product), commits them as one group, waits until the previous stage's
// group is done and releases that stage. f32 accumulators stay in
// registers. The RMSNorm prologue rescales each x tile in place
// (MatmulNormPrologue.cpp); LoRA accumulates x · Aᵀ alongside and adds
// t · Bᵀ with register-A wgmmas after the loop; the epilogue rounds and
// stores through shared memory and TMA, from registers, or rotates
// (MatmulRoPE.cpp).
//
//===----------------------------------------------------------------------===//

#include "liger/Conversion/LigerToGPU/MatmulEmitters.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/LLVMIR/NVVMDialect.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"

using namespace mlir;
using namespace mlir::liger;

namespace {
/// What the consumer warpgroups' parts share: the thread's place, the
/// shared buffer's address, the accumulators' types.
struct Consumer {
  WgmmaConsumerThread thread;
  Value sharedBase; ///< i64: the buffer's address, for descriptors
  int64_t regs;     ///< f32 accumulators per thread and projection
  Type accType, loraType;
  /// A tile loop (pingpong, persistent): the CTA's tile this is (i, index)
  /// and the ring's fills before its own; else null.
  Value tileIndex, stepBase;

  /// The ring's fill of the tile's K iteration `kt`.
  Value step(GpuBuilder &b, Value kt) const {
    return stepBase ? b.add(stepBase, kt) : kt;
  }
};
} // namespace

WgmmaConsumerThread mlir::liger::getWgmmaConsumerThread(GpuBuilder &b,
                                                        const MatmulKernel &k) {
  WgmmaConsumerThread thread;
  thread.wg = b.sub(b.div(k.tid, 128), 1);
  if (k.config.pingpong()) {
    // The set bounds the tile loop around the wgmmas.
    thread.wg = b.warpUniform(thread.wg);
    int64_t warpgroups = k.config.tileWarpgroups();
    thread.set = b.div(thread.wg, warpgroups);
    thread.cw = b.rem(thread.wg, warpgroups);
  } else {
    thread.set = b.index(0);
    thread.cw = thread.wg;
  }
  thread.blocks = k.config.rowBlocks();
  thread.lane = b.rem(k.tid, 32);
  thread.warp = b.rem(b.div(k.tid, 32), 4);
  return thread;
}

/// The wgmma descriptor of the kk-th 16-wide K slice of a tile at byte
/// `off` (i32): 32 bytes into each K-major row (the swizzle atom), or 16
/// rows down an MN-major box.
static Value sliceDescriptor(GpuBuilder &b, const MatmulKernel &k,
                             const Consumer &c, Value off, int64_t kk,
                             bool mnMajor) {
  int64_t rowBytes = k.layout.rowBytes();
  if (mnMajor)
    return b.wgmmaDescriptor(
        c.sharedBase, b.add(off, kk * 16 * rowBytes),
        wgmmaMNMajorDescriptorFields(k.layout.mnBoxBytes()));
  return b.wgmmaDescriptor(c.sharedBase, b.add(off, kk * 32),
                           wgmmaKMajorDescriptorFields(128));
}

/// Where `cond` holds, the warpgroup releases the stage of the ring's fill
/// `step`: its first thread, or in a tile loop every thread (ptxas
/// serializes the wgmmas of a tile loop after a branch around one thread's
/// arrive). In a cluster the stage is released in every CTA's ring, whose
/// producer multicasts into this CTA's stage too.
static void emitWgmmaStageRelease(GpuBuilder &b, const MatmulKernel &k,
                                  Value cond, Value step) {
  if (!k.config.loopsOverTiles())
    cond = b.bitAnd(cond, b.equal(b.rem(k.tid, 128), 0));
  GpuBuilder rb = b.ifThen(cond);
  Value stage = rb.rem(rb.add(step, k.config.stages), k.config.stages);
  Value barrier = wgmmaEmptyBarrier(rb, k, stage);
  if (k.config.cluster == 1)
    return rb.mbarrierArrive(barrier);
  for (int64_t rank = 0; rank < k.config.cluster; ++rank)
    rb.mbarrierArriveInCta(barrier, rb.i32(rank));
}

/// The K loop: per stage, wait (or the RMSNorm prologue's rescale of the
/// next stage), issue the stage's wgmmas as one group, release the previous
/// stage. Returns its results: the accumulators per projection and row
/// block (p · rowBlocks + rb), then LoRA's x · Aᵀ (zero where `withLoRA`
/// is false: the loop leaves its wgmmas out), then each row block's two
/// rows' sums of squares, once every wgmma group is done.
static SmallVector<Value> emitWgmmaMainLoop(GpuBuilder &cb,
                                            const MatmulKernel &k,
                                            const Consumer &c, bool withLoRA) {
  const MatmulPlan &plan = k.plan;
  const MatmulKernelConfig &config = k.config;
  int64_t numB = plan.numBTiles(), blocks = config.rowBlocks();
  bool lora = plan.lora && withLoRA;
  SmallVector<Value> init(numB * blocks, LLVM::ZeroOp::create(cb, c.accType));
  int64_t loraIdx = numB * blocks, sumIdx = loraIdx + (lora ? 1 : 0);
  // (LoRA's zeros through a register fence: registers of their own, set
  // before the loop, not copies of the main accumulators' zero between the
  // first stage's wgmmas, where ptxas injects a warpgroup.arrive: C7519.)
  if (lora)
    init.push_back(cb.fenceOperands(LLVM::ZeroOp::create(cb, c.loraType)));
  // RMSNorm prologue: each thread's partial sums of squares of its two rows
  // of each row block.
  int64_t numSums = plan.norm ? 2 * blocks : 0;
  if (plan.norm)
    init.append(numSums, cb.f32(0));
  // With a prologue, stage kt + 1 is rescaled while stage kt's wgmmas run
  // (after the release of kt - 1, so that two stages suffice): stage 0
  // before the loop.
  if (plan.norm) {
    SmallVector<Value> sums = emitWgmmaNormStage(
        cb, k, c.thread, cb.index(0), c.step(cb, cb.index(0)),
        SmallVector<Value>(ArrayRef<Value>(init).slice(sumIdx, numSums)));
    llvm::copy(sums, init.begin() + sumIdx);
  }
  auto loop = scf::ForOp::create(cb, cb.index(0), k.kTiles, cb.index(1), init);
  GpuBuilder lb = cb.atStart(loop.getBody());
  Value kt = loop.getInductionVar();
  Value step = c.step(lb, kt);
  Value s = lb.rem(step, config.stages);
  if (!plan.norm)
    lb.mbarrierWaitParity(wgmmaFullBarrier(lb, k, s),
                          wgmmaStageParity(lb, k, step), wgmmaWaitTicks(lb));
  SmallVector<Value> acc(loop.getRegionIterArgs());
  SmallVector<Value> aOffs;
  for (int64_t rb = 0; rb < blocks; ++rb)
    aOffs.push_back(wgmmaXTileOffset(lb, k, s, c.thread.rowBlock(lb, rb)));
  NVVM::WgmmaFenceAlignedOp::create(lb);
  for (int64_t kk = 0; kk < config.tileK / 16; ++kk) {
    // A's slice in each of the warpgroup's row blocks.
    Value a = sliceDescriptor(lb, k, c, aOffs[0], kk, plan.aMNMajor());
    SmallVector<Value> as = {a};
    for (Value off : ArrayRef<Value>(aOffs).drop_front())
      as.push_back(sliceDescriptor(lb, k, c, off, kk, plan.aMNMajor()));
    for (int64_t p = 0; p < numB; ++p) {
      Value w = sliceDescriptor(lb, k, c, wgmmaTileOffset(lb, k, s, 1 + p), kk,
                                plan.bMNMajor());
      for (int64_t rb = 0; rb < blocks; ++rb) {
        Value &d = acc[p * blocks + rb];
        d = lb.wgmmaShared(d, config.tileN, k.elementType(), as[rb], w,
                           /*accumulate=*/true, plan.aMNMajor(),
                           plan.bMNMajor());
      }
    }
    if (lora) {
      Value la = sliceDescriptor(lb, k, c, wgmmaTileOffset(lb, k, s, 1 + numB),
                                 kk, false);
      acc[loraIdx] =
          lb.wgmmaShared(acc[loraIdx], plan.loraRank, k.elementType(), a, la,
                         /*accumulate=*/true);
    }
  }
  NVVM::WgmmaGroupSyncAlignedOp::create(lb);
  NVVM::WgmmaWaitGroupSyncOp::create(lb, 1);
  // The group of kt - 1 has completed: its stage may be refilled.
  emitWgmmaStageRelease(
      lb, k,
      arith::CmpIOp::create(lb, arith::CmpIPredicate::ugt, kt, lb.index(0)),
      lb.sub(step, 1));
  if (plan.norm) {
    SmallVector<Value> sums(ArrayRef<Value>(acc).slice(sumIdx, numSums));
    Value more = lb.lessThan(lb.add(kt, 1), k.kTiles);
    auto next = scf::IfOp::create(lb, ValueRange(sums).getTypes(), more,
                                  /*withElseRegion=*/true);
    GpuBuilder tb = lb.with(next.getThenBodyBuilder());
    scf::YieldOp::create(
        tb, ValueRange(emitWgmmaNormStage(tb, k, c.thread, tb.add(kt, 1),
                                          tb.add(step, 1), sums)));
    GpuBuilder eb = lb.with(next.getElseBodyBuilder());
    scf::YieldOp::create(eb, ValueRange(sums));
    llvm::copy(next.getResults(), acc.begin() + sumIdx);
  }
  scf::YieldOp::create(lb, acc);
  // Every group done before the accumulators leave the loop (in a branch,
  // before its results merge: ptxas serializes wgmmas whose accumulators a
  // move defines while they run).
  NVVM::WgmmaWaitGroupSyncOp::create(cb, 0);
  SmallVector<Value> results(loop.getResults());
  if (plan.lora && !lora)
    results.insert(results.begin() + loraIdx,
                   LLVM::ZeroOp::create(cb, c.loraType));
  // In a branch (LoRA's hand-over), the accumulators through a register
  // fence below the wait, so that LLVM merges no wait (or zero) of the
  // branches after their join, where a wgmma would still run.
  if (k.loraFlags)
    for (Value &v : results)
      if (isa<LLVM::LLVMStructType>(v.getType()))
        v = cb.fenceOperands(v);
  return results;
}

/// The first row (index) of the warpgroup's first 64-row block.
static Value warpgroupFirstRow(GpuBuilder &b, const MatmulKernel &k,
                               const Consumer &c) {
  return b.add(k.m0, b.mul(c.thread.rowBlock(b, 0), 64));
}

/// LoRA hand-over (handsOffLoRAProduct): whether the x · Aᵀ of the
/// warpgroup's rows was published when it starts (i1, the same in the
/// warpgroup). Column tile 0's CTAs never read it; the others' threads each
/// acquire the block's flag and the warpgroup takes the product only if
/// every thread saw it set (bar.red.and), since its wgmmas must agree.
static Value emitLoRAPublished(GpuBuilder &cb, const MatmulKernel &k,
                               const Consumer &c) {
  Value row = warpgroupFirstRow(cb, k, c);
  Value reads = cb.bitAnd(cb.lessThan(cb.index(0), k.n0),
                          cb.lessThan(row, k.rows));
  auto flag = scf::IfOp::create(cb, TypeRange{cb.getI32Type()}, reads,
                                /*withElseRegion=*/true);
  GpuBuilder tb = cb.with(flag.getThenBodyBuilder());
  scf::YieldOp::create(
      tb, tb.loadAcquireGpu(tb.globalPtr(k.loraFlags, tb.mul(row, 4))));
  GpuBuilder eb = cb.with(flag.getElseBodyBuilder());
  scf::YieldOp::create(eb, eb.i32(0));
  Value set = arith::CmpIOp::create(cb, arith::CmpIPredicate::ne,
                                    flag.getResult(0), cb.i32(0));
  Value all = cb.namedBarrierAll(cb.toI32(cb.add(c.thread.wg, 1)), 128, set);
  // The same in every thread; through a shuffle so that ptxas sees it
  // warp-uniform and keeps the wgmmas of the branches it picks async.
  Value uniform = cb.warpUniform(arith::IndexCastUIOp::create(
      cb, cb.getIndexType(),
      arith::ExtUIOp::create(cb, cb.getI32Type(), all)));
  return cb.lessThan(cb.index(0), uniform);
}

/// LoRA after the loop: y = rstd · x̂Wᵀ + scale · t Bᵀ with t =
/// round(rstd · x̂Aᵀ) (x̂ = x or x ⊙ g). Scales the main accumulators by
/// rstd / scale in f32 and adds t Bᵀ with wgmma, t from registers (the
/// m64n{r} accumulator fragment of k-slice kk is the A fragment of a k16
/// wgmma); the epilogue multiplies by scale (`rowScale`). Handing x · Aᵀ
/// over (`published`, emitLoRAPublished, non-null): column tile 0's CTAs
/// store rstd · x̂Aᵀ in f32 and set each 64-row block's flag (release);
/// a warpgroup that found its flag set reads those values instead of its
/// zero accumulators: the same f32 values, rounded the same way.
static Value emitWgmmaLoRA(GpuBuilder &cb, const MatmulKernel &k,
                           const Consumer &c, Value acc, Value t,
                           ArrayRef<Value> rstd, Value published,
                           SmallVector<Value> &rowScale) {
  const MatmulPlan &plan = k.plan;
  int64_t loraRank = plan.loraRank, regs = c.regs;
  double scale = plan.lora.getScale().convertToDouble();
  SmallVector<Value> factor;
  for (int64_t h = 0; h < 2; ++h)
    factor.push_back(
        plan.norm ? arith::MulFOp::create(cb, rstd[h], cb.f32(1.0 / scale))
                        .getResult()
                  : cb.f32(1.0 / scale));
  for (int64_t i = 0; i < regs; ++i) {
    Value v = LLVM::ExtractValueOp::create(cb, acc, i);
    v = arith::MulFOp::create(cb, v, factor[(i % 4) / 2]);
    acc = LLVM::InsertValueOp::create(cb, acc, v, i);
  }
  // The thread's pairs of rstd · x̂Aᵀ: registers i and i + 1 (i even) hold
  // row 16 w + l / 4 + 8 ((i % 4) / 2) of the warpgroup's rows, columns
  // 8 (i / 4) + 2 (l % 4) and the next (the accumulator fragment).
  Type f32 = cb.getF32Type();
  VectorType pairType = VectorType::get({2}, f32);
  SmallVector<Value> pairs;
  for (int64_t i = 0; i < loraRank / 2; i += 2) {
    Value lo = LLVM::ExtractValueOp::create(cb, t, i);
    Value hi = LLVM::ExtractValueOp::create(cb, t, i + 1);
    if (plan.norm) {
      lo = arith::MulFOp::create(cb, lo, rstd[(i % 4) / 2]);
      hi = arith::MulFOp::create(cb, hi, rstd[(i % 4) / 2]);
    }
    pairs.push_back(vector::FromElementsOp::create(cb, pairType,
                                                   ValueRange{lo, hi}));
  }
  if (published) {
    Value first = warpgroupFirstRow(cb, k, c);
    Value r0 = cb.add(first, cb.add(cb.mul(c.thread.warp, 16),
                                    cb.div(c.thread.lane, 4)));
    Value col = cb.mul(cb.rem(c.thread.lane, 4), 2);
    auto at = [&](GpuBuilder &b, Value row, int64_t i) {
      Value element = b.add(b.mul(row, loraRank), b.add(col, 8 * (i / 4)));
      return b.globalPtr(k.loraProducts, b.mul(element, 4));
    };
    auto rowOf = [&](GpuBuilder &b, int64_t i) {
      return (i % 4) / 2 ? b.add(r0, 8) : r0;
    };
    // Column tile 0 publishes its rows' products, then each block's flag
    // once the warpgroup's stores are done.
    GpuBuilder lb = cb.ifThen(cb.equal(k.n0, 0));
    for (auto [p, pair] : llvm::enumerate(pairs)) {
      int64_t i = 2 * static_cast<int64_t>(p);
      Value row = rowOf(lb, i);
      GpuBuilder sb = lb.ifThen(lb.lessThan(row, k.rows));
      LLVM::StoreOp::create(sb, pair, at(sb, row, i), /*alignment=*/8);
    }
    lb.namedBarrier(lb.toI32(lb.add(c.thread.wg, 1)), 128);
    GpuBuilder fb = lb.ifThen(lb.bitAnd(lb.equal(lb.rem(k.tid, 128), 0),
                                        lb.lessThan(first, k.rows)));
    fb.storeReleaseGpu(fb.globalPtr(k.loraFlags, fb.mul(first, 4)),
                       fb.i32(0x3f800000)); // 1.0f
    // Published: the stored values (rows past the end read the last row's,
    // which no store uses).
    auto read = scf::IfOp::create(cb, SmallVector<Type>(pairs.size(), pairType),
                                  published, /*withElseRegion=*/true);
    GpuBuilder rb = cb.with(read.getThenBodyBuilder());
    SmallVector<Value> loaded;
    Value last = rb.sub(k.rows, 1);
    for (size_t p = 0; p < pairs.size(); ++p) {
      int64_t i = 2 * static_cast<int64_t>(p);
      loaded.push_back(LLVM::LoadOp::create(
          rb, pairType, at(rb, rb.min(rowOf(rb, i), last), i), /*alignment=*/8));
    }
    scf::YieldOp::create(rb, loaded);
    GpuBuilder eb = cb.with(read.getElseBodyBuilder());
    scf::YieldOp::create(eb, pairs);
    pairs.assign(read.getResults().begin(), read.getResults().end());
  }
  SmallVector<Value> aRegs; // bf16 pairs as i32, 4 per k16 slice
  for (Value pair : pairs)
    aRegs.push_back(cb.packMmaOperand(
        vector::ExtractOp::create(cb, pair, 0), vector::ExtractOp::create(cb, pair, 1),
        k.elementType(), Value(), /*asI32=*/true));
  cb.mbarrierWaitParity(wgmmaSharedAt(cb, k, cb.i32(k.layout.loraBarrier())),
                        cb.i32(0), wgmmaWaitTicks(cb));
  NVVM::WgmmaFenceAlignedOp::create(cb);
  // B's tile: K-major rows of r * 2 bytes, swizzled in that span.
  int64_t span = loraRank * k.elementBytes();
  for (int64_t kk = 0; kk < loraRank / 16; ++kk) {
    Value desc = cb.wgmmaDescriptor(
        c.sharedBase, cb.i32(k.layout.offset(MatmulLayout::kLoRAB) + kk * 32),
        wgmmaKMajorDescriptorFields(span));
    acc = cb.wgmmaRegisterA(acc, k.config.tileN, k.elementType(),
                            ArrayRef<Value>(aRegs).slice(4 * kk, 4), desc,
                            /*bMNMajor=*/false);
  }
  NVVM::WgmmaGroupSyncAlignedOp::create(cb);
  NVVM::WgmmaWaitGroupSyncOp::create(cb, 0);
  rowScale = {cb.f32(scale), cb.f32(scale)};
  return acc;
}

/// The epilogue of a consumer warpgroup: in each of its 64-row blocks rb,
/// thread (warp w, lane l) holds, for each n8 block j, rows 16 w + l/4
/// (registers 4j, 4j+1) and + 8 (4j+2, 4j+3) at columns 8 j + 2 (l % 4) and
/// the next: mma.sync's m16n8 fragment. `mains` holds the accumulators per
/// projection and row block (p · blocks + rb), `rowScale` two factors per
/// row block (null: none).
static LogicalResult emitWgmmaEpilogue(GpuBuilder &cb, const MatmulKernel &k,
                                       const Consumer &c, ArrayRef<Value> mains,
                                       ArrayRef<Value> rowScale) {
  const MatmulPlan &plan = k.plan;
  const WgmmaConsumerThread &thread = c.thread;
  int64_t blocks = thread.blocks;
  SmallVector<Value> r0s;
  for (int64_t rb = 0; rb < blocks; ++rb)
    r0s.push_back(
        cb.add(cb.add(k.m0, cb.mul(thread.rowBlock(cb, rb), 64)),
               cb.add(cb.mul(thread.warp, 16), cb.div(thread.lane, 4))));
  if (plan.rope) {
    auto [qb, kb] = cb.ifThenElse(cb.lessThan(k.n0, plan.nq));
    for (int64_t rb = 0; rb < blocks; ++rb) {
      ArrayRef<Value> scale = rowScale.slice(2 * rb, 2);
      emitWgmmaRoPEEpilogue(qb, k, mains[rb], scale, r0s[rb], k.outputs[0],
                            k.n0, k.biases[0]);
      emitWgmmaRoPEEpilogue(kb, k, mains[rb], scale, r0s[rb], k.outputs[1],
                            kb.sub(k.n0, plan.nq), k.biases[1]);
    }
    return success();
  }
  bool tmaStore = k.layout.storesWithTma();
  TmaStoreTile tile;
  if (tmaStore)
    tile = emitTmaStoreBegin(cb, k, thread, c.tileIndex);
  Type f32 = cb.getF32Type();
  // Pair (rb · tile_n / 8 + j) · 2 + half: row block rb, n8 block j, rows
  // r0 + 8 half.
  SmallVector<MatmulPairSite> sites;
  int64_t perBlock = k.config.tileN / 4;
  for (Value r0 : r0s)
    for (int64_t j = 0; j < k.config.tileN / 8; ++j) {
      Value col =
          cb.add(cb.add(k.n0, j * 8), cb.mul(cb.rem(thread.lane, 4), 2));
      sites.push_back({r0, col});
      sites.push_back({cb.add(r0, 8), col});
    }
  auto accPairsAt = [&](GpuBuilder &ob, size_t index) {
    int64_t rb = index / perBlock, j = index % perBlock / 2, half = index % 2;
    int64_t base = 4 * j + 2 * half;
    Value scale = rowScale[2 * rb + half];
    SmallVector<Value, 2> accPairs;
    for (int64_t p = 0; p < plan.numBTiles(); ++p) {
      Value acc = mains[p * blocks + rb];
      Value lo = LLVM::ExtractValueOp::create(ob, acc, base);
      Value hi = LLVM::ExtractValueOp::create(ob, acc, base + 1);
      if (scale) {
        lo = arith::MulFOp::create(ob, lo, scale);
        hi = arith::MulFOp::create(ob, hi, scale);
      }
      accPairs.push_back(vector::FromElementsOp::create(
          ob, VectorType::get({2}, f32), ValueRange{lo, hi}));
    }
    return accPairs;
  };
  auto toShared = [&](GpuBuilder &ob, size_t index, size_t result, Value pair) {
    emitTmaStoreStage(ob, k, thread, tile, pair, index % perBlock / 2,
                      index % 2, result, index / perBlock);
  };
  if (!tmaStore)
    return storeMatmulPairs(cb, k, sites, accPairsAt);
  if (!k.layout.rotatesOutputBoxes()) {
    if (failed(storeMatmulPairs(cb, k, sites, accPairsAt, toShared)))
      return failure();
    emitTmaStoreEnd(cb, k, thread, tile);
    return success();
  }
  // Box by box: a box's pairs of a thread (its 8 n8 blocks, two rows
  // each) are sites [boxPairs jb, boxPairs (jb + 1)) of the row block's.
  int64_t boxPairs = 64 / 8 * 2;
  for (int64_t rb = 0; rb < blocks; ++rb)
    for (int64_t jb = 0; jb < k.layout.outputBoxesPerRowBlock(); ++jb) {
      int64_t first = rb * perBlock + jb * boxPairs;
      emitTmaStoreBoxBegin(cb, k, thread, rb, jb);
      if (failed(storeMatmulPairs(
              cb, k, ArrayRef<MatmulPairSite>(sites).slice(first, boxPairs),
              [&](GpuBuilder &ob, size_t index) {
                return accPairsAt(ob, first + index);
              },
              [&](GpuBuilder &ob, size_t index, size_t result, Value pair) {
                toShared(ob, first + index, result, pair);
              })))
        return failure();
      emitTmaStoreBox(cb, k, thread, tile, rb, jb);
    }
  return success();
}

/// A consumer warpgroup's part of one tile: it owns 64 rows of it.
static LogicalResult emitWgmmaConsumerTile(GpuBuilder &cb,
                                           const MatmulKernel &k,
                                           const Consumer &c) {
  const MatmulPlan &plan = k.plan;
  // Pingpong: the sets' main loops take turns, tile by tile. Besides
  // keeping the Tensor Cores on one tile at a time (the other set's
  // epilogue runs meanwhile), the turn makes the ring's phases unambiguous:
  // a set waits for fill f only once fill f - stages has been consumed (a
  // set waiting ahead of the ring could see a stage's parity two phases
  // back as the one it waits for).
  int64_t turnThreads = 2 * 128 * k.config.tileWarpgroups();
  Value set = c.thread.set;
  bool turns = c.stepBase && k.config.pingpong();
  if (turns) {
    GpuBuilder wb = cb.ifThen(cb.lessThan(cb.index(0), c.tileIndex));
    wb.namedBarrier(wb.add(wb.i32(kTurnBarrier), wb.toI32(set)), turnThreads);
  }
  // LoRA hand-over: a warpgroup whose rows' x · Aᵀ is published runs the
  // main loop without the rank-r wgmmas.
  Value published = k.loraFlags ? emitLoRAPublished(cb, k, c) : Value();
  SmallVector<Value> results;
  if (published) {
    auto branch = scf::IfOp::create(
        cb, published,
        [&](OpBuilder &b, Location) {
          GpuBuilder tb = cb.with(b);
          scf::YieldOp::create(tb, emitWgmmaMainLoop(tb, k, c, false));
        },
        [&](OpBuilder &b, Location) {
          GpuBuilder eb = cb.with(b);
          scf::YieldOp::create(eb, emitWgmmaMainLoop(eb, k, c, true));
        });
    results.assign(branch.getResults().begin(), branch.getResults().end());
  } else {
    results = emitWgmmaMainLoop(cb, k, c, true);
  }
  // A tile loop: the ring goes on to the next tiles, so the last stage is
  // released too (the loop releases each stage one iteration late); then,
  // in pingpong, the other set's turn, where it has a next tile.
  if (c.stepBase)
    emitWgmmaStageRelease(cb, k, cb.lessThan(cb.index(0), k.kTiles),
                          cb.sub(cb.add(c.stepBase, k.kTiles), 1));
  if (turns) {
    GpuBuilder ab = cb.ifThen(cb.lessThan(cb.add(c.tileIndex, 1), k.ctaTiles));
    ab.namedBarrierArrive(ab.sub(ab.i32(kTurnBarrier + 1), ab.toI32(set)),
                          turnThreads);
  }

  // The RMSNorm row scales: each row's sum of squares is spread over the 4
  // lanes of a quad (two rows a thread in each row block).
  int64_t blocks = c.thread.blocks;
  int64_t numB = plan.numBTiles() * blocks;
  int64_t loraIdx = numB, sumIdx = numB + (plan.lora ? 1 : 0);
  SmallVector<Value> rstd;
  if (plan.norm)
    for (int64_t i = 0; i < 2 * blocks; ++i)
      rstd.push_back(
          rowRstd(cb, k, cb.warpAllReduceSum(results[sumIdx + i], 4)));
  // Row factors for the epilogue (rstd with a norm), and the main
  // accumulators as the epilogue reads them.
  SmallVector<Value> rowScale(2 * blocks, Value());
  if (plan.norm)
    rowScale = rstd;
  SmallVector<Value> mains(ArrayRef<Value>(results).take_front(numB));
  assert((!plan.lora || blocks == 1) && "tileLoopLimit leaves LoRA out");
  if (plan.lora)
    mains[0] = emitWgmmaLoRA(cb, k, c, mains[0], results[loraIdx], rstd,
                             published, rowScale);
  return emitWgmmaEpilogue(cb, k, c, mains, rowScale);
}

/// A consumer warpgroup: its tile, or in pingpong its set's tiles (the
/// CTA's tiles set, set + 2, ...), in persistent all the CTA's tiles.
static LogicalResult emitWgmmaConsumer(GpuBuilder &cb, const MatmulKernel &k) {
  const MatmulPlan &plan = k.plan;
  const MatmulKernelConfig &config = k.config;
  int64_t consumers = config.consumerSets() * config.tileWarpgroups();
  NVVM::SetMaxRegisterOp::create(cb, consumers > 1 ? 232 : 240,
                                 NVVM::SetMaxRegisterAction::increase);
  Consumer c;
  c.thread = getWgmmaConsumerThread(cb, k);
  Type f32 = cb.getF32Type();
  MLIRContext *ctx = cb.getContext();
  c.regs = config.tileN / 2;
  c.accType =
      LLVM::LLVMStructType::getLiteral(ctx, SmallVector<Type>(c.regs, f32));
  // LoRA: x · Aᵀ accumulates alongside, r / 2 f32 per thread.
  if (plan.lora)
    c.loraType = LLVM::LLVMStructType::getLiteral(
        ctx, SmallVector<Type>(plan.loraRank / 2, f32));
  c.sharedBase = LLVM::PtrToIntOp::create(cb, cb.getI64Type(), k.shared);
  if (!config.loopsOverTiles())
    return emitWgmmaConsumerTile(cb, k, c);
  LogicalResult result = success();
  forEachCtaTile(cb, k, c.thread.set, config.consumerSets(),
                 [&](GpuBuilder &lb, const MatmulKernel &tk, Value i) {
                   Consumer tc = c;
                   tc.tileIndex = i;
                   tc.stepBase = lb.mul(i, k.kTiles);
                   if (failed(emitWgmmaConsumerTile(lb, tk, tc)))
                     result = failure();
                 });
  emitTmaStoreDrain(cb, k);
  return result;
}

LogicalResult mlir::liger::emitWgmmaKernel(GpuBuilder &b, MatmulKernel &k) {
  k.shared =
      b.externSharedBuffer(k.function->getParentOfType<gpu::GPUModuleOp>(),
                           "liger_matmul_smem", 1024);
  // Thread 0 initializes the barriers; everyone sees them after the barrier.
  Value isFirst = b.equal(k.tid, 0);
  emitWgmmaBarrierInit(b, k, isFirst);
  auto [pb, cb] = b.ifThenElse(b.lessThan(k.tid, 128));
  emitTmaProducer(pb, k, isFirst);
  if (failed(emitWgmmaConsumer(cb, k)))
    return failure();
  // A cluster's CTAs copy into each other's shared memory and arrive on
  // each other's barriers: none exits while another may still do so.
  if (k.config.cluster > 1)
    b.clusterBarrier();
  return success();
}
