//===- MatmulTma.cpp - the wgmma kernels' shared memory and TMA -----------===//
//
// The wgmma template's side of shared memory: the extern buffer's
// mbarriers and tiles as addresses (MatmulLayout gives every offset), the
// producer warpgroup that fills the stage ring with TMA copies, and the
// epilogue that stores the output tile with TMA.
//
// One producer warpgroup (registers lowered to 40 with setmaxnreg); one of
// its threads waits for a stage's empty mbarrier, arms its full mbarrier
// with the stage's byte count and issues cp.async.bulk.tensor copies of the
// x tile and each weight tile, 128-byte swizzled, out-of-range rows and K
// columns zero-filled by TMA. The descriptors are kernel parameters passed
// by value (MatmulKernel.cpp).
//
//===----------------------------------------------------------------------===//

#include "liger/Conversion/LigerToGPU/MatmulEmitters.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/LLVMIR/NVVMDialect.h"

using namespace mlir;
using namespace mlir::liger;

Value mlir::liger::wgmmaSharedAt(GpuBuilder &b, const MatmulKernel &k,
                                 Value byteOffset) {
  return b.sharedPtr(k.shared, byteOffset);
}

Value mlir::liger::wgmmaFullBarrier(GpuBuilder &b, const MatmulKernel &k,
                                    Value stage) {
  return wgmmaSharedAt(b, k,
                       b.offsetOf(b.toI32(stage), MatmulLayout::barrierBytes,
                                  k.layout.fullBarrier()));
}

Value mlir::liger::wgmmaEmptyBarrier(GpuBuilder &b, const MatmulKernel &k,
                                     Value stage) {
  return wgmmaSharedAt(b, k,
                       b.offsetOf(b.toI32(stage), MatmulLayout::barrierBytes,
                                  k.layout.emptyBarrier()));
}

/// Consumer set `set`'s (index; null: the one set's) old dW tile mbarrier
/// of those from `base` (MatmulLayout::oldTileBarrier, oldTileEmptyBarrier).
static Value oldTileBarrierAt(GpuBuilder &b, const MatmulKernel &k,
                              int64_t base, Value set) {
  return wgmmaSharedAt(
      b, k,
      set ? b.offsetOf(b.toI32(set), MatmulLayout::barrierBytes, base)
          : b.i32(base));
}

/// The byte offset (i32) `at` bytes into consumer set `set`'s (index;
/// null: the one set's) old dW tile.
static Value oldTileAt(GpuBuilder &b, const MatmulKernel &k, Value set,
                       int64_t at = 0) {
  int64_t base = k.layout.offset(MatmulLayout::kOldTile) + at;
  return set ? b.offsetOf(b.toI32(set), k.layout.outputTileBytes(), base)
             : b.i32(base);
}

Value mlir::liger::wgmmaTileOffset(GpuBuilder &b, const MatmulKernel &k,
                                   Value stage, int64_t tile) {
  return b.offsetOf(b.toI32(stage), k.layout.stageBytes(),
                    k.layout.offset(MatmulLayout::kStages) +
                        k.layout.tileOffset(tile));
}

Value mlir::liger::wgmmaXTileOffset(GpuBuilder &b, const MatmulKernel &k,
                                    Value stage, Value rowBlock) {
  Value rows = b.mul(b.toI32(rowBlock), 64 * k.layout.rowBytes());
  return b.add(wgmmaTileOffset(b, k, stage, 0), rows);
}

Value mlir::liger::wgmmaStageParity(GpuBuilder &b, const MatmulKernel &k,
                                    Value step) {
  return b.toI32(b.rem(b.div(step, k.config.stages), 2));
}

Value mlir::liger::wgmmaWaitTicks(GpuBuilder &b) { return b.i32(0x989680); }

void mlir::liger::emitWgmmaBarrierInit(GpuBuilder &b, const MatmulKernel &k,
                                       Value isFirst) {
  GpuBuilder ib = b.ifThen(isFirst);
  // A stage is released by the warpgroups of the tile that read it (in a
  // tile loop by each of their threads: MatmulWgmma.cpp), in a cluster by
  // those of every CTA (whose stages the producer's multicasts fill).
  int64_t consumers = k.config.tileWarpgroups() *
                      (k.config.loopsOverTiles() ? 128 : 1) * k.config.cluster;
  for (int64_t s = 0; s < k.config.stages; ++s) {
    ib.mbarrierInit(wgmmaFullBarrier(ib, k, ib.index(s)), 1);
    ib.mbarrierInit(wgmmaEmptyBarrier(ib, k, ib.index(s)), consumers);
  }
  if (k.plan.lora)
    ib.mbarrierInit(wgmmaSharedAt(ib, k, ib.i32(k.layout.loraBarrier())), 1);
  // Each consumer set's old dW tile: filled by the producer's copies; in a
  // tile loop freed by the set's warpgroups once their stores have read it.
  for (int64_t s = 0; k.layout.hasOldTile() && s < k.config.consumerSets();
       ++s) {
    Value set = s ? ib.index(s) : Value();
    ib.mbarrierInit(oldTileBarrierAt(ib, k, k.layout.oldTileBarrier(), set), 1);
    if (k.config.loopsOverTiles())
      ib.mbarrierInit(
          oldTileBarrierAt(ib, k, k.layout.oldTileEmptyBarrier(), set),
          k.config.tileWarpgroups());
  }
  ib.mbarrierInitFence();
  // (In a cluster the other CTAs' producers and consumers use them too.)
  if (k.config.cluster > 1)
    b.clusterBarrier();
  else
    gpu::BarrierOp::create(b);
}

/// The producer's copies of one tile's stages: K iteration kt fills stage
/// (base + kt) % stages (no `base`: kt % stages).
static void emitTmaProducerTile(GpuBuilder &ob, const MatmulKernel &k,
                                Value base);

/// The producer's copies of the old dW tile at k's tile origin into
/// consumer set `set`'s old tile (index; null: the one set's), for the
/// set's use `use` of it (index; in a tile loop, after its previous use's
/// stores have read it).
/// Box jb of row block w lands at (n0 + 64 jb, m0 + 64 w); TMA fills past
/// the ends with zeros, which the store clips.
static void emitOldTileLoad(GpuBuilder &ob, const MatmulKernel &k, Value set,
                            Value use) {
  const MatmulLayout &layout = k.layout;
  if (k.config.loopsOverTiles())
    ob.mbarrierWaitParity(
        oldTileBarrierAt(ob, k, layout.oldTileEmptyBarrier(), set),
        ob.bitXor(ob.toI32(ob.rem(use, 2)), ob.i32(1)), wgmmaWaitTicks(ob));
  int64_t rowBlocks = k.config.tileM / 64;
  int64_t slice = layout.outputWarpgroupBytes();
  Value bar = oldTileBarrierAt(ob, k, layout.oldTileBarrier(), set);
  ob.mbarrierArriveExpectTx(bar, rowBlocks * slice);
  for (int64_t w = 0; w < rowBlocks; ++w)
    for (int64_t jb = 0; jb < k.config.tileN / 64; ++jb)
      ob.tmaLoad(wgmmaSharedAt(
                     ob, k,
                     oldTileAt(ob, k, set,
                               w * slice + jb * MatmulLayout::outputBoxBytes)),
                 k.oldTileMap,
                 ValueRange{ob.toI32(ob.add(k.n0, 64 * jb)),
                            ob.toI32(ob.add(k.m0, 64 * w))},
                 bar);
}

void mlir::liger::emitTmaProducer(GpuBuilder &b, const MatmulKernel &k,
                                  Value isFirst) {
  const MatmulPlan &plan = k.plan;
  const MatmulKernelConfig &config = k.config;
  const MatmulLayout &layout = k.layout;
  NVVM::SetMaxRegisterOp::create(b, 40, NVVM::SetMaxRegisterAction::decrease);
  GpuBuilder ob = b.ifThen(isFirst);
  if (config.loopsOverTiles()) {
    // Every tile of the CTA in turn, the ring's fills counted across them
    // (tileLoopLimit leaves out LoRA B). An old dW tile follows its tile's
    // stages: the producer runs a ring ahead of the consumers, so it lands
    // before their epilogue, and where the K loop is longer than the ring
    // the set's previous store has read the region by then (the set's
    // warpgroups finished it before starting this tile), so that the wait
    // for it holds no stage back (a shorter one may wait here).
    int64_t sets = config.consumerSets();
    forEachCtaTile(ob, k, ob.index(0), 1,
                   [&](GpuBuilder &lb, const MatmulKernel &tk, Value i) {
                     emitTmaProducerTile(lb, tk, lb.mul(i, k.kTiles));
                     if (layout.hasOldTile())
                       emitOldTileLoad(lb, tk,
                                       sets > 1 ? lb.rem(i, sets) : Value(),
                                       lb.div(i, sets));
                   });
    return;
  }
  if (plan.lora) {
    Value bar = wgmmaSharedAt(ob, k, ob.i32(layout.loraBarrier()));
    ob.mbarrierArriveExpectTx(bar,
                              config.tileN * plan.loraRank * k.elementBytes());
    ob.tmaLoad(
        wgmmaSharedAt(ob, k, ob.i32(layout.offset(MatmulLayout::kLoRAB))),
        k.loraBMap, ValueRange{ob.i32(0), ob.toI32(k.n0)}, bar);
  }
  // The old dW tile, whose load overlaps the whole product.
  if (layout.hasOldTile())
    emitOldTileLoad(ob, k, Value(), Value());
  emitTmaProducerTile(ob, k, Value());
}

static void emitTmaProducerTile(GpuBuilder &ob, const MatmulKernel &k,
                                Value base) {
  const MatmulPlan &plan = k.plan;
  const MatmulKernelConfig &config = k.config;
  const MatmulLayout &layout = k.layout;
  auto loop = scf::ForOp::create(ob, ob.index(0), k.kTiles, ob.index(1));
  GpuBuilder lb = ob.atStart(loop.getBody());
  Value kt = loop.getInductionVar();
  Value step = base ? lb.add(base, kt) : kt;
  Value s = lb.rem(step, config.stages);
  Value freed = lb.bitXor(wgmmaStageParity(lb, k, step), lb.i32(1));
  lb.mbarrierWaitParity(wgmmaEmptyBarrier(lb, k, s), freed, wgmmaWaitTicks(lb));
  Value bar = wgmmaFullBarrier(lb, k, s);
  lb.mbarrierArriveExpectTx(bar, layout.stageBytes());
  Value k0 = lb.toI32(lb.mul(kt, config.tileK));
  // A TMA copy into tile `t` of the stage, `offset` bytes in, at
  // coordinates (column, row) of the tensor; multicast to the cluster's
  // CTAs where `shared`.
  int64_t cluster = config.cluster;
  auto copyAt = [&](int64_t t, GpuBuilder::IntOperand offset, Value map,
                    Value col, Value row, bool shared) {
    Value dst =
        wgmmaSharedAt(lb, k, lb.add(wgmmaTileOffset(lb, k, s, t), offset));
    if (shared)
      return lb.tmaLoadMulticast(dst, map, ValueRange{col, row}, bar,
                                 (1 << cluster) - 1);
    lb.tmaLoad(dst, map, ValueRange{col, row}, bar);
  };
  // K-major: one box of the tile's rows x tile_k; MN-major: boxes of
  // tile_k rows x 64 columns side by side, one box apart. A tile the
  // cluster's CTAs share (`shared`, in a cluster): CTA r's part, rows
  // [r, r + 1) · width / cluster of the box, or boxes r, r + cluster, ...
  auto copy = [&](int64_t t, Value map, Value row, int64_t width, bool mnMajor,
                  bool shared = false) {
    if (shared && cluster > 1) {
      Value part = k.clusterRank;
      if (!mnMajor) {
        Value first = lb.mul(part, config.clusterPartRows(width));
        return copyAt(t, lb.toI32(lb.mul(first, layout.rowBytes())), map, k0,
                      lb.toI32(lb.add(row, first)), true);
      }
      for (int64_t j = 0; j < width / 64; j += cluster) {
        Value box = lb.add(part, j);
        copyAt(t, lb.toI32(lb.mul(box, layout.mnBoxBytes())), map,
               lb.toI32(lb.add(row, lb.mul(box, 64))), k0, true);
      }
      return;
    }
    if (!mnMajor)
      return copyAt(t, 0, map, k0, lb.toI32(row), false);
    for (int64_t j = 0; j < width / 64; ++j)
      copyAt(t, j * layout.mnBoxBytes(), map, lb.toI32(lb.add(row, 64 * j)), k0,
             false);
  };
  copy(0, k.xMap, k.m0, config.tileM, plan.aMNMajor());
  if (plan.rope) {
    // The column tile lies in Wq (columns [0, nq)) or in Wk.
    auto [qb, kb] = lb.ifThenElse(lb.lessThan(k.n0, plan.nq));
    Value kRow = kb.sub(k.n0, plan.nq);
    for (auto [rb, map, row] :
         {std::tuple<GpuBuilder *, Value, Value>{&qb, k.weightMaps[0], k.n0},
          {&kb, k.weightMaps[1], kRow}})
      rb->tmaLoad(wgmmaSharedAt(*rb, k, wgmmaTileOffset(*rb, k, s, 1)), map,
                  ValueRange{k0, rb->toI32(row)}, bar);
  }
  for (int64_t p = 0; p < plan.numBTiles() && !plan.rope; ++p)
    copy(1 + p, k.weightMaps[p], k.n0, config.tileN, plan.bMNMajor(),
         /*shared=*/true);
  if (plan.lora)
    copy(1 + plan.numBTiles(), k.loraAMap, lb.index(0), plan.loraRank, false);
  if (k.prefetchMaps.empty())
    return;
  // The epilogue's row inputs: prefetched into L2 when the producer fills
  // the stage of step kTiles - stages - lead (the consumers then have lead
  // to lead + stages steps to go), or at step 0 for a short K loop.
  int64_t lead = config.stages + kEpiloguePrefetchLead;
  Value at = lb.select(lb.lessThan(k.kTiles, lead), lb.index(0),
                       lb.sub(k.kTiles, lead));
  GpuBuilder pb = lb.ifThen(lb.equal(kt, at));
  Value row = pb.toI32(k.m0);
  for (auto [prefetch, map] :
       llvm::zip_equal(getEpiloguePrefetches(plan, layout), k.prefetchMaps))
    for (int64_t c = 0; c < config.tileN; c += prefetch.boxCols)
      pb.tmaPrefetchL2(map, ValueRange{pb.toI32(pb.add(k.n0, c)), row});
}

/// A builder inside `if` the thread is its warpgroup's first: the one that
/// issues, commits and waits for the warpgroup's TMA stores.
static GpuBuilder warpgroupLeader(GpuBuilder &b, const MatmulKernel &k) {
  return b.ifThen(b.equal(b.rem(k.tid, 128), 0));
}

TmaStoreTile mlir::liger::emitTmaStoreBegin(GpuBuilder &b,
                                            const MatmulKernel &k,
                                            const WgmmaConsumerThread &thread,
                                            Value tileIndex) {
  const MatmulLayout &layout = k.layout;
  TmaStoreTile tile;
  int64_t slice = layout.outputWarpgroupBytes();
  if (layout.hasOldTile()) {
    // The set's use tileIndex / sets of its old tile (the producer's
    // emitOldTileLoad), or its one use.
    int64_t sets = k.config.consumerSets();
    Value set = sets > 1 ? thread.set : Value();
    Value parity =
        tileIndex ? b.toI32(b.rem(b.div(tileIndex, sets), 2)) : b.i32(0);
    b.mbarrierWaitParity(oldTileBarrierAt(b, k, layout.oldTileBarrier(), set),
                         parity, wgmmaWaitTicks(b));
    tile.base = b.add(oldTileAt(b, k, set),
                      b.mul(b.toI32(thread.rowBlock(b, 0)), slice));
  } else if (layout.rotatesOutputBoxes()) {
    // The warpgroup's own boxes (beside the ring, which the producer is
    // filling with the next tiles' stages), free once the previous tile's
    // stores have been read: its first thread waits for them (committed box
    // by box, read while this tile's main loop ran), then the warpgroup
    // meets.
    warpgroupLeader(b, k).tmaStoreWaitRead();
    b.namedBarrier(b.toI32(b.add(thread.wg, 1)), 128);
    tile.base = b.add(b.i32(layout.offset(MatmulLayout::kOutput)),
                      b.mul(b.toI32(thread.wg), MatmulLayout::kRotatingBoxes *
                                                    MatmulLayout::outputBoxBytes));
  } else {
    b.namedBarrier(b.i32(kConsumersBarrier), 128 * (k.config.tileM / 64));
    tile.base = b.add(b.i32(layout.offset(MatmulLayout::kOutput)),
                      b.mul(b.toI32(thread.cw), slice));
  }
  tile.quad = b.toI32(b.div(thread.lane, 4));
  tile.rowInWarpgroup =
      b.toI32(b.add(b.mul(thread.warp, 16), b.div(thread.lane, 4)));
  return tile;
}

void mlir::liger::emitTmaStoreStage(GpuBuilder &b, const MatmulKernel &k,
                                    const WgmmaConsumerThread &thread,
                                    const TmaStoreTile &tile, Value pair,
                                    int64_t j, int64_t half, int64_t result,
                                    int64_t rowBlock) {
  Value rl = b.add(tile.rowInWarpgroup, 8 * half);
  Value phys = b.bitXor(b.i32(j % 8), tile.quad);
  int64_t box = k.layout.stagedBoxOffset(result, rowBlock, j / 8);
  Value off =
      b.add(b.add(tile.base, b.add(b.i32(box), b.mul(rl, 128))),
            b.add(b.mul(phys, 16), b.toI32(b.mul(b.rem(thread.lane, 4), 4))));
  Value ptr = wgmmaSharedAt(b, k, off);
  if (k.layout.hasOldTile()) {
    // old + the f32 product, rounded once.
    auto f32x2 = VectorType::get({2}, b.getF32Type());
    auto elemx2 = VectorType::get({2}, k.elementType());
    Value old = arith::ExtFOp::create(b, f32x2, b.loadShared(elemx2, ptr, 4));
    pair =
        arith::TruncFOp::create(b, elemx2, arith::AddFOp::create(b, old, pair));
  }
  b.storeShared(pair, ptr, 4);
}

/// The TMA store of result `result`'s box `jb` of the warpgroup's row
/// block `rb`, from where it is staged (by the warpgroup's first thread).
static void storeBox(GpuBuilder &fb, const MatmulKernel &k,
                     const WgmmaConsumerThread &thread,
                     const TmaStoreTile &tile, int64_t result, int64_t rb,
                     int64_t jb) {
  Value rowOrigin = fb.toI32(fb.add(k.m0, fb.mul(thread.rowBlock(fb, rb), 64)));
  fb.tmaStore(k.outputMaps[result],
              wgmmaSharedAt(fb, k,
                            fb.add(tile.base, k.layout.stagedBoxOffset(
                                                  result, rb, jb))),
              ValueRange{fb.toI32(fb.add(k.n0, 64 * jb)), rowOrigin});
}

void mlir::liger::emitTmaStoreBoxBegin(GpuBuilder &b, const MatmulKernel &k,
                                       const WgmmaConsumerThread &thread,
                                       int64_t rb, int64_t jb) {
  assert(k.layout.rotatesOutputBoxes() && "boxes rotate in a tile loop");
  if (k.layout.rotatingBoxIndex(rb, jb) < MatmulLayout::kRotatingBoxes)
    return;
  // The store kRotatingBoxes boxes back read this one; later ones may
  // still be reading theirs.
  warpgroupLeader(b, k).tmaStoreWaitRead(MatmulLayout::kRotatingBoxes - 1);
  b.namedBarrier(b.toI32(b.add(thread.wg, 1)), 128);
}

void mlir::liger::emitTmaStoreBox(GpuBuilder &b, const MatmulKernel &k,
                                  const WgmmaConsumerThread &thread,
                                  const TmaStoreTile &tile, int64_t rb,
                                  int64_t jb) {
  assert(k.layout.rotatesOutputBoxes() && "boxes rotate in a tile loop");
  b.fenceProxyAsyncShared();
  b.namedBarrier(b.toI32(b.add(thread.wg, 1)), 128);
  GpuBuilder fb = warpgroupLeader(b, k);
  storeBox(fb, k, thread, tile, 0, rb, jb);
  fb.tmaStoreCommit();
}

void mlir::liger::emitTmaStoreEnd(GpuBuilder &b, const MatmulKernel &k,
                                  const WgmmaConsumerThread &thread,
                                  const TmaStoreTile &tile) {
  // The generic-proxy writes before the async-proxy reads, the
  // warpgroup's barrier, then its first thread stores the boxes and waits
  // until they have been read.
  assert(!k.layout.rotatesOutputBoxes() && "emitTmaStoreBox stored each box");
  b.fenceProxyAsyncShared();
  b.namedBarrier(b.toI32(b.add(thread.wg, 1)), 128);
  GpuBuilder fb = warpgroupLeader(b, k);
  for (int64_t rb = 0; rb < thread.blocks; ++rb)
    for (size_t result = 0; result < k.outputMaps.size(); ++result)
      for (int64_t jb = 0; jb < k.layout.outputBoxesPerRowBlock(); ++jb)
        storeBox(fb, k, thread, tile, result, rb, jb);
  fb.tmaStoreCommitAndWaitRead();
  // The set's old dW tile, read: the producer may copy the next one in.
  if (k.layout.hasOldTile() && k.config.loopsOverTiles())
    fb.mbarrierArrive(
        oldTileBarrierAt(fb, k, k.layout.oldTileEmptyBarrier(),
                         k.config.consumerSets() > 1 ? thread.set : Value()));
}

void mlir::liger::emitTmaStoreDrain(GpuBuilder &b, const MatmulKernel &k) {
  if (k.layout.rotatesOutputBoxes())
    warpgroupLeader(b, k).tmaStoreWaitRead();
}
