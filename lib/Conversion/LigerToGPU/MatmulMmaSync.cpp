//===- MatmulMmaSync.cpp - the cp.async + mma.sync matmul template --------===//
//
// sm_80 and later (the fallback):
//
//  - a CTA computes a tile_m x tile_n tile of y; its warps split it into
//    64-row x (tile_n / warps_n)-column warp tiles of m16n8k16 MMAs whose
//    f32 accumulators live in registers for the whole K loop;
//  - tile_k-wide slices of x and W go global -> shared with cp.async
//    (16-byte chunks, out-of-range rows zero-filled with a clamped address)
//    through a ring of `stages` buffers, `stages - 1` slices ahead;
//  - shared -> registers with ldmatrix (rows padded by 16 bytes, so the 8
//    rows an ldmatrix reads fall in distinct banks; `.trans` for an
//    MN-major operand of a gradient product);
//  - bf16 MMAs are emitted as nvvm.mma.sync on i32-packed pairs (upstream's
//    nvgpu.mma.sync cannot lower bf16 in MLIR 22);
//  - a gate/up pair keeps one accumulator set per projection, from the
//    same x fragments; LoRA computes x · Aᵀ alongside (every warp of a row
//    band, for its rows) and adds t · Bᵀ after the loop.
//
//===----------------------------------------------------------------------===//

#include "liger/Conversion/LigerToGPU/MatmulEmitters.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/LLVMIR/NVVMDialect.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/NVGPU/IR/NVGPUDialect.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"

using namespace mlir;
using namespace mlir::liger;

MmaSyncWarps::MmaSyncWarps(const MatmulKernelConfig &config) {
  warps = config.threads() / 32;
  warpsM = config.tileM / 64;
  warpsN = warps / std::max<int64_t>(warpsM, 1);
  warpN = warpsN ? config.tileN / warpsN : 0;
  nTiles = warpN / 8;
}

MmaSyncTiles mlir::liger::getMmaSyncTiles(GpuBuilder &b,
                                          const MatmulKernel &k) {
  auto view = [&](StringRef region) -> Value {
    return b.sharedView(k.shared, k.layout.offset(region),
                        k.layout.shape(region), k.elementType());
  };
  MmaSyncTiles tiles;
  tiles.x = view(MatmulLayout::kX);
  for (int64_t p = 0; p < k.plan.numBTiles(); ++p)
    tiles.weights.push_back(view(MatmulLayout::weightRegion(p)));
  if (k.plan.lora) {
    tiles.loraA = view(MatmulLayout::kLoRAA);
    tiles.loraB = view(MatmulLayout::kLoRAB);
  }
  return tiles;
}

/// Emits `total` 16-byte cp.async chunks over the CTA's threads (thread t
/// takes chunks t, t + threads, ...); threads past the end take none (a
/// zero-byte copy still writes its 16 bytes). `chunk(b, c)` emits chunk c.
static void forEachChunk(GpuBuilder &b, const MatmulKernel &k, int64_t total,
                         function_ref<void(GpuBuilder &, Value)> chunk) {
  int64_t threads = k.config.threads();
  for (int64_t i = 0; i < (total + threads - 1) / threads; ++i) {
    Value c = b.add(k.tid, i * threads);
    if ((i + 1) * threads <= total) {
      chunk(b, c);
      continue;
    }
    GpuBuilder gb = b.ifThen(b.lessThan(c, total));
    chunk(gb, c);
  }
}

void mlir::liger::emitMmaSyncSliceLoad(GpuBuilder &b, const MatmulKernel &k,
                                       const MmaSyncTiles &tiles, Value stage,
                                       Value kt) {
  const MatmulPlan &plan = k.plan;
  const MatmulKernelConfig &config = k.config;
  int64_t chunksPerRow = config.tileK / 8; // 16-byte chunks of bf16/f16
  Value inK = b.lessThan(kt, k.kTiles);
  Value ktc = b.min(kt, b.sub(k.kTiles, 1));
  Value k0 = b.mul(ktc, config.tileK);
  // K-major: `tileRows` rows from `base` (masked at `limit`) x the slice.
  auto copy = [&](GpuBuilder &ob, Value src, Value dst, int64_t tileRows,
                  Value base, Value limit) {
    forEachChunk(ob, k, tileRows * chunksPerRow, [&](GpuBuilder &cb, Value c) {
      Value r = cb.div(c, chunksPerRow);
      Value col = cb.mul(cb.rem(c, chunksPerRow), 8);
      Value g = cb.add(base, r);
      Value valid = cb.bitAnd(cb.lessThan(g, limit), inK);
      Value gc = cb.min(g, cb.sub(limit, 1));
      cb.asyncCopy16(dst, ValueRange{stage, r, col}, src,
                     ValueRange{gc, cb.add(k0, col)}, 8, valid);
    });
  };
  // MN-major (a gradient product's operand): tile_k rows of K, `width`
  // columns from `base`, masked at the K end (kRows) and the column end.
  auto copyMN = [&](Value src, Value dst, int64_t width, Value base,
                    int64_t colLimit) {
    int64_t perRow = width / 8;
    forEachChunk(b, k, config.tileK * perRow, [&](GpuBuilder &cb, Value c) {
      Value r = cb.div(c, perRow);
      Value col = cb.mul(cb.rem(c, perRow), 8);
      Value g = cb.add(k0, r), gc = cb.add(base, col);
      Value valid = cb.bitAnd(
          cb.bitAnd(cb.lessThan(g, k.kRows), cb.lessThan(gc, colLimit)), inK);
      Value gr = cb.min(g, cb.sub(k.kRows, 1));
      Value gcc = cb.min(gc, colLimit - 8);
      cb.asyncCopy16(dst, ValueRange{stage, r, col}, src, ValueRange{gr, gcc},
                     8, valid);
    });
  };
  if (plan.aMNMajor())
    copyMN(k.x, tiles.x, config.tileM, k.m0, plan.m);
  else
    copy(b, k.x, tiles.x, config.tileM, k.m0, k.rows);
  if (plan.lora) // A's [r, tile_k] slice rides along
    copy(b, k.loraA, tiles.loraA, plan.loraRank, b.index(0),
         b.index(plan.loraRank));
  if (plan.rope) {
    // The column tile lies in Wq (columns [0, nq)) or in Wk.
    auto [qb, kb] = b.ifThenElse(b.lessThan(k.n0, plan.nq));
    copy(qb, k.weights[0], tiles.weights[0], config.tileN, k.n0,
         qb.index(plan.nq));
    copy(kb, k.weights[1], tiles.weights[0], config.tileN,
         kb.sub(k.n0, plan.nq), kb.index(plan.n - plan.nq));
  } else {
    for (auto [w, tile] : llvm::zip(k.weights, tiles.weights)) {
      if (plan.bMNMajor())
        copyMN(w, tile, config.tileN, k.n0, plan.n);
      else
        copy(b, w, tile, config.tileN, k.n0, b.index(plan.n));
    }
  }
  b.asyncCopyCommit();
}

MmaSyncThread mlir::liger::getMmaSyncThread(GpuBuilder &b,
                                            const MatmulKernel &k) {
  MmaSyncWarps tiling(k.config);
  MmaSyncThread thread;
  Value warp = b.div(k.tid, 32);
  thread.lane = b.rem(k.tid, 32);
  thread.wm = b.div(warp, tiling.warpsN);
  thread.wn = b.rem(warp, tiling.warpsN);
  return thread;
}

namespace {
/// The warp's place and the MMA's operand and result types.
struct Warp {
  MmaSyncWarps tiling;
  MmaSyncThread thread;
  Type resultType;
  NVVM::MMATypes mmaType;
};
} // namespace

/// One m16n8k16 MMA of `a` and `b` onto the four accumulators at `base`
/// of `acc`.
static void mma(GpuBuilder &b, const Warp &w, ArrayRef<Value> a,
                ArrayRef<Value> bf, SmallVectorImpl<Value> &acc, int64_t base) {
  auto op = NVVM::MmaOp::create(
      b, w.resultType, a, bf, ArrayRef(acc).slice(base, 4), {16, 8, 16},
      std::nullopt, std::nullopt, std::array{w.mmaType, w.mmaType},
      std::array{NVVM::MMALayout::row, NVVM::MMALayout::col});
  for (int64_t e = 0; e < 4; ++e)
    acc[base + e] = LLVM::ExtractValueOp::create(b, op, e);
}

/// Row `row` of an ldmatrix fragment as an MMA operand.
static Value fragmentRow(GpuBuilder &b, Value fragment, int64_t row) {
  return b.mmaOperand(vector::ExtractOp::create(b, fragment, row));
}

/// One k16 step of the main loop on ring buffer `stage`: x's fragments
/// (ldmatrix.x4), each weight's (.x2) and their MMAs, LoRA A's and x · Aᵀ.
static void emitMmaSyncStep(GpuBuilder &lb, const MatmulKernel &k,
                            const MmaSyncTiles &tiles, const Warp &w,
                            Value stage, int64_t kk,
                            SmallVectorImpl<Value> &acc) {
  const MatmulPlan &plan = k.plan;
  Type elem = k.elementType();
  constexpr int64_t mTiles = MmaSyncWarps::mTiles;
  int64_t nTiles = w.tiling.nTiles;
  int64_t perProjection = mTiles * nTiles * 4;
  int64_t loraTiles = plan.loraRank / 8;
  int64_t loraBase = plan.numBTiles() * perProjection;
  Value lane = w.thread.lane;
  auto vec = [&](int64_t rows) { return VectorType::get({rows, 2}, elem); };
  SmallVector<SmallVector<Value>> a(mTiles);
  for (int64_t i = 0; i < mTiles; ++i) {
    // Lane l addresses one 8-element row of one of the four 8x8 matrices
    // (m 0-7 / 8-15 x k 0-7 / 8-15): K-major, row m = l % 16 at k = 8 (l /
    // 16); MN-major (transposed on load), row k = l % 8 + 8 (l / 16) at m =
    // 8 ((l / 8) % 2).
    Value mBase = lb.add(lb.mul(w.thread.wm, 64), i * 16);
    Value row, col;
    if (plan.aMNMajor()) {
      row = lb.add(lb.index(kk * 16),
                   lb.add(lb.rem(lane, 8), lb.mul(lb.div(lane, 16), 8)));
      col = lb.add(mBase, lb.mul(lb.rem(lb.div(lane, 8), 2), 8));
    } else {
      row = lb.add(mBase, lb.rem(lane, 16));
      col = lb.add(lb.index(kk * 16), lb.mul(lb.div(lane, 16), 8));
    }
    Value frag = nvgpu::LdMatrixOp::create(lb, vec(4), tiles.x,
                                           ValueRange{stage, row, col},
                                           /*transpose=*/plan.aMNMajor(),
                                           /*numTiles=*/4);
    for (int64_t r = 0; r < 4; ++r)
      a[i].push_back(fragmentRow(lb, frag, r));
  }
  for (int64_t p = 0; p < plan.numBTiles(); ++p) {
    SmallVector<SmallVector<Value>> bf(nTiles);
    for (int64_t j = 0; j < nTiles; ++j) {
      // K-major: row n = l % 8 at k = 8 ((l / 8) % 2); MN-major
      // (transposed on load): row k = l % 16 at the tile's n.
      Value nBase = lb.add(lb.mul(w.thread.wn, w.tiling.warpN), j * 8);
      Value row, col;
      if (plan.bMNMajor()) {
        row = lb.add(lb.index(kk * 16), lb.rem(lane, 16));
        col = nBase;
      } else {
        row = lb.add(nBase, lb.rem(lane, 8));
        col = lb.add(lb.index(kk * 16), lb.mul(lb.rem(lb.div(lane, 8), 2), 8));
      }
      Value frag = nvgpu::LdMatrixOp::create(lb, vec(2), tiles.weights[p],
                                             ValueRange{stage, row, col},
                                             /*transpose=*/plan.bMNMajor(),
                                             /*numTiles=*/2);
      for (int64_t r = 0; r < 2; ++r)
        bf[j].push_back(fragmentRow(lb, frag, r));
    }
    for (int64_t i = 0; i < mTiles; ++i)
      for (int64_t j = 0; j < nTiles; ++j)
        mma(lb, w, a[i], bf[j], acc, p * perProjection + (i * nTiles + j) * 4);
  }
  // LoRA: x · Aᵀ from A's slice (K-major rows of r, like W's).
  for (int64_t j = 0; j < loraTiles; ++j) {
    Value row = lb.add(lb.index(j * 8), lb.rem(lane, 8));
    Value col =
        lb.add(lb.index(kk * 16), lb.mul(lb.rem(lb.div(lane, 8), 2), 8));
    Value frag = nvgpu::LdMatrixOp::create(lb, vec(2), tiles.loraA,
                                           ValueRange{stage, row, col},
                                           /*transpose=*/false,
                                           /*numTiles=*/2);
    SmallVector<Value> la = {fragmentRow(lb, frag, 0),
                             fragmentRow(lb, frag, 1)};
    for (int64_t i = 0; i < mTiles; ++i)
      mma(lb, w, a[i], la, acc, loraBase + (i * loraTiles + j) * 4);
  }
}

/// LoRA after the loop: y = rstd · x̂Wᵀ + scale · t Bᵀ, t = round(rstd ·
/// x̂Aᵀ): the main accumulators scaled by rstd / scale, t's accumulator
/// tiles are the A fragments of k16 MMAs against B's tile (two n8 tiles of
/// t per k16: c0c1 / c2c3 are a0 / a1 of the first, a2 / a3 of the second),
/// and the epilogue multiplies by scale (`rowFactor`).
static void emitMmaSyncLoRA(GpuBuilder &b, const MatmulKernel &k,
                            const MmaSyncTiles &tiles, const Warp &w,
                            scf::ForOp loop, ArrayRef<Value> rstd,
                            SmallVectorImpl<Value> &mains,
                            SmallVector<Value> &rowFactor) {
  const MatmulPlan &plan = k.plan;
  constexpr int64_t mTiles = MmaSyncWarps::mTiles;
  int64_t nTiles = w.tiling.nTiles, loraTiles = plan.loraRank / 8;
  int64_t loraBase = plan.numBTiles() * mTiles * nTiles * 4;
  gpu::BarrierOp::create(b); // B's tile, copied by every thread
  double scale = plan.lora.getScale().convertToDouble();
  SmallVector<Value> factor;
  for (int64_t q = 0; q < 2 * mTiles; ++q)
    factor.push_back(
        plan.norm
            ? arith::MulFOp::create(b, rstd[q], b.f32(1.0 / scale)).getResult()
            : b.f32(1.0 / scale));
  for (int64_t i = 0; i < mTiles; ++i)
    for (int64_t j = 0; j < nTiles; ++j)
      for (int64_t e = 0; e < 4; ++e) {
        int64_t at = (i * nTiles + j) * 4 + e;
        mains[at] = arith::MulFOp::create(b, mains[at], factor[i * 2 + e / 2]);
      }
  auto pack = [&](Value lo, Value hi, Value s) {
    return b.packMmaOperand(lo, hi, k.elementType(), s);
  };
  for (int64_t kb = 0; kb < plan.loraRank / 16; ++kb) {
    SmallVector<SmallVector<Value>> bf(nTiles);
    for (int64_t j = 0; j < nTiles; ++j) {
      Value row = b.add(b.add(b.mul(w.thread.wn, w.tiling.warpN), j * 8),
                        b.rem(w.thread.lane, 8));
      Value col =
          b.add(b.index(kb * 16), b.mul(b.rem(b.div(w.thread.lane, 8), 2), 8));
      Value frag = nvgpu::LdMatrixOp::create(
          b, VectorType::get({2, 2}, k.elementType()), tiles.loraB,
          ValueRange{row, col}, /*transpose=*/false, /*numTiles=*/2);
      bf[j] = {fragmentRow(b, frag, 0), fragmentRow(b, frag, 1)};
    }
    for (int64_t i = 0; i < mTiles; ++i) {
      auto t = [&](int64_t tile, int64_t e) {
        return loop.getResult(loraBase + (i * loraTiles + tile) * 4 + e);
      };
      Value s0 = plan.norm ? rstd[i * 2] : Value();
      Value s1 = plan.norm ? rstd[i * 2 + 1] : Value();
      SmallVector<Value> a = {pack(t(2 * kb, 0), t(2 * kb, 1), s0),
                              pack(t(2 * kb, 2), t(2 * kb, 3), s1),
                              pack(t(2 * kb + 1, 0), t(2 * kb + 1, 1), s0),
                              pack(t(2 * kb + 1, 2), t(2 * kb + 1, 3), s1)};
      for (int64_t j = 0; j < nTiles; ++j)
        mma(b, w, a, bf[j], mains, (i * nTiles + j) * 4);
    }
  }
  rowFactor.assign(2 * mTiles, b.f32(scale));
}

LogicalResult mlir::liger::emitMmaSyncKernel(GpuBuilder &b, MatmulKernel &k) {
  const MatmulPlan &plan = k.plan;
  const MatmulKernelConfig &config = k.config;
  MLIRContext *ctx = b.getContext();
  Type f32 = b.getF32Type();
  Warp w{MmaSyncWarps(config), getMmaSyncThread(b, k),
         LLVM::LLVMStructType::getLiteral(ctx, {f32, f32, f32, f32}),
         k.elementType().isBF16() ? NVVM::MMATypes::bf16 : NVVM::MMATypes::f16};
  constexpr int64_t mTiles = MmaSyncWarps::mTiles;
  int64_t nTiles = w.tiling.nTiles;
  int64_t numB = plan.numBTiles();
  k.shared = b.dynamicSharedMemory();
  MmaSyncTiles tiles = getMmaSyncTiles(b, k);
  if (plan.lora) {
    // B's [tile_n, r] tile joins the first slice's cp.async group.
    int64_t perRow = plan.loraRank / 8;
    forEachChunk(b, k, config.tileN * perRow, [&](GpuBuilder &cb, Value c) {
      Value r = cb.div(c, perRow);
      Value col = cb.mul(cb.rem(c, perRow), 8);
      Value gr = cb.add(k.n0, r);
      Value valid = cb.lessThan(gr, plan.n);
      cb.asyncCopy16(tiles.loraB, ValueRange{r, col}, k.loraB,
                     ValueRange{cb.min(gr, plan.n - 1), col}, 8, valid);
    });
  }
  // RMSNorm prologue: each row's sum of squares, in f32 after the tiles.
  if (plan.norm)
    emitMmaSyncNormInit(b, k, tiles);

  // Prologue: slices 0 .. stages-2 in flight.
  for (int64_t s = 0; s + 1 < config.stages; ++s)
    emitMmaSyncSliceLoad(b, k, tiles, b.index(s), b.index(s));

  Value zero = b.f32(0.0);
  int64_t perProjection = mTiles * nTiles * 4; // accumulators
  // LoRA: x · Aᵀ alongside, mTiles x r/8 m16n8 tiles (each warp computes
  // its rows' t; the warps of a row band repeat it).
  int64_t loraBase = numB * perProjection;
  SmallVector<Value> init(loraBase + mTiles * plan.loraRank / 8 * 4, zero);
  auto loop = scf::ForOp::create(b, b.index(0), k.kTiles, b.index(1), init);
  {
    GpuBuilder lb = b.atStart(loop.getBody());
    Value kt = loop.getInductionVar();
    // Slice kt has landed (at most stages-2 younger groups pending), and
    // every warp is done with the buffer the next load overwrites.
    lb.asyncCopyWait(config.stages - 2);
    gpu::BarrierOp::create(lb);
    Value next = lb.add(kt, config.stages - 1);
    emitMmaSyncSliceLoad(lb, k, tiles, lb.rem(next, config.stages), next);
    Value stage = lb.rem(kt, config.stages);
    if (plan.norm)
      emitMmaSyncNormSlice(lb, k, tiles, stage, kt);
    SmallVector<Value> acc(loop.getRegionIterArgs());
    for (int64_t kk = 0; kk < config.tileK / 16; ++kk)
      emitMmaSyncStep(lb, k, tiles, w, stage, kk, acc);
    scf::YieldOp::create(lb, acc);
  }
  // No copy may be in flight when the CTA exits.
  b.asyncCopyWait(0);

  // The RMSNorm row scales of this thread's rows, once every sum is in.
  SmallVector<Value> rstd; // [i * 2 + half]
  if (plan.norm) {
    gpu::BarrierOp::create(b);
    for (int64_t i = 0; i < mTiles; ++i)
      for (int64_t half = 0; half < 2; ++half) {
        Value r = b.add(b.add(b.mul(w.thread.wm, 64), i * 16 + 8 * half),
                        b.div(w.thread.lane, 4));
        rstd.push_back(rowRstd(
            b, k, memref::LoadOp::create(b, tiles.rowSums, ValueRange{r})));
      }
  }
  // The accumulators the epilogue reads, and the row factor it applies.
  SmallVector<Value> mains(loop.getResults().take_front(loraBase));
  SmallVector<Value> rowFactor = rstd; // [i * 2 + half], or empty
  if (plan.lora)
    emitMmaSyncLoRA(b, k, tiles, w, loop, rstd, mains, rowFactor);
  if (plan.rope) {
    auto [qb, kb] = b.ifThenElse(b.lessThan(k.n0, plan.nq));
    emitMmaSyncRoPEEpilogue(qb, k, w.thread, loop.getResults(), rstd,
                            k.outputs[0], k.n0, k.biases[0]);
    emitMmaSyncRoPEEpilogue(kb, k, w.thread, loop.getResults(), rstd,
                            k.outputs[1], kb.sub(k.n0, plan.nq), k.biases[1]);
    return success();
  }
  // Epilogue: lane l holds rows l/4 and l/4 + 8 of each m16n8 tile, columns
  // 2 (l % 4) and the next.
  // Pair (i nTiles + j) 2 + half: m16n8 tile (i, j), rows + 8 half.
  SmallVector<MatmulPairSite> sites;
  for (int64_t i = 0; i < mTiles; ++i)
    for (int64_t j = 0; j < nTiles; ++j) {
      Value r0 = b.add(b.add(k.m0, b.add(b.mul(w.thread.wm, 64), i * 16)),
                       b.div(w.thread.lane, 4));
      Value c =
          b.add(b.add(k.n0, b.add(b.mul(w.thread.wn, w.tiling.warpN), j * 8)),
                b.mul(b.rem(w.thread.lane, 4), 2));
      sites.push_back({r0, c});
      sites.push_back({b.add(r0, 8), c});
    }
  auto accPairsAt = [&](GpuBuilder &ob, size_t index) {
    int64_t tile = index / 2, half = index % 2, i = tile / nTiles;
    SmallVector<Value, 2> accPairs;
    for (int64_t p = 0; p < numB; ++p) {
      int64_t base = p * perProjection + tile * 4 + half * 2;
      Value lo = mains[base], hi = mains[base + 1];
      if (!rowFactor.empty()) {
        lo = arith::MulFOp::create(ob, lo, rowFactor[i * 2 + half]);
        hi = arith::MulFOp::create(ob, hi, rowFactor[i * 2 + half]);
      }
      accPairs.push_back(vector::FromElementsOp::create(
          ob, VectorType::get({2}, f32), ValueRange{lo, hi}));
    }
    return accPairs;
  };
  return storeMatmulPairs(b, k, sites, accPairsAt);
}
