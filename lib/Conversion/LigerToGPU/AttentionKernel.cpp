//===- AttentionKernel.cpp - liger.attention as a wgmma kernel ------------===//
//
// The attention template (sm_90a), FlashAttention's forward:
//
//   for each tile of 128 query rows of one (batch, head):
//     m = -inf, l = 0, O = 0                      (per row, f32)
//     for each block of tile_n keys (causal: up to the tile's diagonal):
//       S = q · kᵀ                                 (wgmma, f32)
//       (softcap c: S = tanh(S · scale / c), and c in place of scale below)
//       S = -inf where masked (past the keys' end; causal j > i + S - T)
//       m' = max(m, rowmax(S) · scale · log2 e)
//       P = exp2(S · scale · log2 e - m'),  α = exp2(m - m')
//       l = α l + rowsum(P),  O = α O + P · v     (P rounded, from registers)
//       m = m'
//     out = O / l
//
// Persistent: one CTA per SM takes tiles blockIdx.x, + gridDim.x, ...; the
// tiles of one (batch, head) are consecutive, the last query rows first
// (under a causal mask the longest tiles start first). Threads 0-127 are
// the producer warpgroup (registers lowered to 40); its first thread loads
// each tile's q (two 64-column boxes per 128 bytes of head, 128 rows) once
// it is free, and each key/value block into a ring of `stages` stages
// (full and empty mbarriers; the ring's fills counted across the CTA's
// tiles). The tensor maps are 3-D over [batch · heads, seq, D] (the
// kernel ABI's rule for a heads parameter), so a box never reads another
// head's rows: TMA zero-fills past the sequence. Warpgroups 1 and 2 are
// the consumers, 64 query rows each, issuing their wgmmas in turns (two
// named barriers: one's products run while the other computes its
// softmax, FlashAttention-3's ping-pong): at block j each issues S_j = q·k_jᵀ
// (D / 16 wgmmas, q and k K-major, 128-byte swizzle) together with O +=
// P_{j-1}·v_{j-1} (tile_n / 16 wgmmas with P from registers: the m64nN
// accumulator fragment of 16 columns is the A fragment of a k16 wgmma; v
// MN-major), waits for S_j alone, computes block j's softmax, then waits
// for the product, rescales O and releases block j - 1's stage (every
// consumer thread arrives: ptxas serializes wgmmas in a loop after a
// branch around one thread's arrive). Masks are computed only for blocks
// that reach past the keys' end or the diagonal. Each thread holds rows
// 16 w + l / 4 and + 8 of its warpgroup's 64 (warp w, lane l), columns
// 8 j + 2 (l % 4) and the next: the row's max and sum are completed
// across the quad. A row
// whose every key is masked (causal with S < T) ends as 0 / 0 = NaN, as
// the op's reference does.
//
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

#include <cmath>

using namespace mlir;
using namespace mlir::liger;
namespace rt = ::liger::runtime;

namespace {
/// Query rows per CTA tile: two consumer warpgroups of 64.
constexpr int64_t kTileM = 128;
/// Producer warpgroup + two consumers.
constexpr int64_t kThreads = 384;
/// The consumers' every thread releases a stage (and the q tile).
constexpr int64_t kConsumerThreads = 256;
/// The consumers' turns: named barriers kTurnBarrier + w (w = 0, 1), one
/// a consumer warpgroup waits at before issuing its wgmmas.
constexpr int64_t kTurnBarrier = 1;

/// The shared buffer: the mbarriers, the q tile, then the stages (k's
/// block, then v's), every tile in boxes of 128-byte swizzled rows of 64
/// elements (the swizzle's atom is 1024 bytes: tiles 1024-aligned).
struct AttentionLayout {
  AttentionLayout(int64_t headDim, int64_t tileN, int64_t stages)
      : headDim(headDim), tileN(tileN), stages(stages) {}
  int64_t headDim, tileN, stages;

  int64_t boxes() const { return headDim / 64; }
  int64_t qBoxBytes() const { return kTileM * 128; }
  int64_t kvBoxBytes() const { return tileN * 128; }
  int64_t kvTileBytes() const { return boxes() * kvBoxBytes(); }
  int64_t qFullBarrier() const { return 0; }
  int64_t qEmptyBarrier() const { return 8; }
  int64_t fullBarrier(int64_t s) const { return 16 + 8 * s; }
  int64_t emptyBarrier(int64_t s) const { return 16 + 8 * (stages + s); }
  int64_t qOffset() const { return 1024; }
  int64_t stagesOffset() const { return qOffset() + boxes() * qBoxBytes(); }
  int64_t stageBytes() const { return 2 * kvTileBytes(); }
  int64_t size() const { return stagesOffset() + stages * stageBytes(); }
};

/// The tile a CTA takes at its loop's iteration `i`, and its extent.
struct AttentionTile {
  Value m0;        ///< its first query row
  Value batch;     ///< b
  Value head;      ///< h
  Value qIndex;    ///< b · Hq + h: q's and the output's 3-D map index
  Value kvIndex;   ///< b · Hkv + h / (Hq / Hkv)
  Value firstBlock; ///< the first key/value block it reads
  Value numBlocks;  ///< the key/value blocks it reads from there
};

struct AttentionKernelBuilder {
  const AttentionPlan &plan;
  AttentionLayout layout;
  Value shared;                         ///< !llvm.ptr<3>
  Value q, k, out, lse, qMap, kMap, vMap; ///< the parameters (q and k for
                                          ///< sizes; lse null without it)
  Value tid, seq, kvSeq, mTiles, ctaTiles;

  int64_t tileN() const { return layout.tileN; }
  int64_t stages() const { return layout.stages; }

  Value at(GpuBuilder &b, int64_t offset) const {
    return b.sharedPtr(shared, b.i32(offset));
  }
  Value at(GpuBuilder &b, Value offset) const {
    return b.sharedPtr(shared, offset);
  }
  /// Stage `s`'s (index) k or v tile's byte offset (i32).
  Value kvTileOffset(GpuBuilder &b, Value s, bool value) const {
    return b.offsetOf(b.toI32(s), layout.stageBytes(),
                      layout.stagesOffset() +
                          (value ? layout.kvTileBytes() : 0));
  }
  Value fullBarrier(GpuBuilder &b, Value s) const {
    return at(b, b.offsetOf(b.toI32(s), 8, layout.fullBarrier(0)));
  }
  Value emptyBarrier(GpuBuilder &b, Value s) const {
    return at(b, b.offsetOf(b.toI32(s), 8, layout.emptyBarrier(0)));
  }
  Value waitTicks(GpuBuilder &b) const { return b.i32(0x989680); }

  /// Iteration `i`'s tile (see the file comment for the order).
  AttentionTile tileAt(GpuBuilder &b, Value i) const {
    AttentionTile t;
    // A head's tiles are consecutive, so that CTAs running at once read the
    // same keys (the backward's heaviest-first order, tried here, measured
    // 3-5% slower causal at seq 4096 and 8192: docs/benchmarks.md).
    Value linear = b.add(b.blockId(gpu::Dimension::x),
                         b.mul(i, b.gridDim(gpu::Dimension::x)));
    Value mt = b.sub(b.sub(mTiles, 1), b.rem(linear, mTiles));
    Value bh = b.div(linear, mTiles);
    t.m0 = b.mul(mt, kTileM);
    t.batch = b.div(bh, plan.queryHeads);
    t.head = b.rem(bh, plan.queryHeads);
    t.qIndex = bh;
    t.kvIndex = b.add(b.mul(t.batch, plan.kvHeads),
                      b.div(t.head, plan.queryHeads / plan.kvHeads));
    // Causal (bottom-right aligned): row i sees keys j <= i + S - T, so
    // the tile's keys end before m0 + 128 + S - T (never below 0).
    Value keys = kvSeq;
    if (plan.causal) {
      Value reach = b.add(b.add(t.m0, kTileM), kvSeq);
      Value ahead =
          arith::CmpIOp::create(b, arith::CmpIPredicate::ugt, reach, seq);
      keys = b.min(b.select(ahead, b.sub(reach, seq), b.index(0)), kvSeq);
    }
    Value endBlock = b.div(b.add(keys, tileN() - 1), tileN());
    // A window W: row i sees keys j > i + S - T - W, so the tile's keys
    // start at m0 + S - T - W + 1 (never below 0).
    t.firstBlock = b.index(0);
    if (plan.window) {
      Value reach = b.add(b.add(t.m0, kvSeq), 1);
      Value above = arith::CmpIOp::create(b, arith::CmpIPredicate::ugt, reach,
                                          b.add(seq, plan.window));
      Value low =
          b.select(above, b.sub(reach, b.add(seq, plan.window)), b.index(0));
      t.firstBlock = b.min(b.div(low, tileN()), endBlock);
    }
    t.numBlocks = b.sub(endBlock, t.firstBlock);
    return t;
  }

  /// Runs `body` for each of the CTA's tiles (an scf.for over them,
  /// carrying the ring's fills before the tile: `fills`).
  void forEachTile(GpuBuilder &b,
                   function_ref<void(GpuBuilder &, const AttentionTile &,
                                     Value i, Value fills)>
                       body) const {
    forEachCtaTile<AttentionTile>(
        b, ctaTiles, [&](GpuBuilder &tb, Value i) { return tileAt(tb, i); },
        [](const AttentionTile &t) { return t.numBlocks; }, body);
  }

  void emitBarrierInit(GpuBuilder &b) const;
  void emitProducer(GpuBuilder &b) const;
  void emitConsumer(GpuBuilder &b) const;
};
} // namespace

void AttentionKernelBuilder::emitBarrierInit(GpuBuilder &b) const {
  GpuBuilder ib = b.ifThen(b.equal(tid, 0));
  ib.mbarrierInit(at(ib, layout.qFullBarrier()), 1);
  ib.mbarrierInit(at(ib, layout.qEmptyBarrier()), kConsumerThreads);
  for (int64_t s = 0; s < stages(); ++s) {
    ib.mbarrierInit(at(ib, layout.fullBarrier(s)), 1);
    ib.mbarrierInit(at(ib, layout.emptyBarrier(s)), kConsumerThreads);
  }
  ib.mbarrierInitFence();
  gpu::BarrierOp::create(b);
}

void AttentionKernelBuilder::emitProducer(GpuBuilder &b) const {
  NVVM::SetMaxRegisterOp::create(b, 40, NVVM::SetMaxRegisterAction::decrease);
  GpuBuilder ob = b.ifThen(b.equal(tid, 0));
  forEachTile(ob, [&](GpuBuilder &tb, const AttentionTile &t, Value i,
                      Value fills) {
    // q's tile, once the consumers are done with the last one's.
    {
      GpuBuilder wb = tb.ifThen(tb.lessThan(tb.index(0), i));
      wb.mbarrierWaitParity(at(wb, layout.qEmptyBarrier()),
                            wb.toI32(wb.rem(wb.sub(i, 1), 2)), waitTicks(wb));
    }
    Value qFull = at(tb, layout.qFullBarrier());
    tb.mbarrierArriveExpectTx(qFull, layout.boxes() * layout.qBoxBytes());
    for (int64_t c = 0; c < layout.boxes(); ++c)
      tb.tmaLoad(at(tb, layout.qOffset() + c * layout.qBoxBytes()), qMap,
                 ValueRange{tb.i32(64 * c), tb.toI32(t.m0), tb.toI32(t.qIndex)},
                 qFull);
    // The key/value blocks, each into the next stage of the ring once its
    // last use (fill f - stages) has been released.
    auto blocks = scf::ForOp::create(tb, tb.index(0), t.numBlocks, tb.index(1));
    {
      GpuBuilder lb = tb.atStart(blocks.getBody());
      Value j = blocks.getInductionVar();
      Value f = lb.add(fills, j);
      Value s = lb.rem(f, stages());
      Value round = lb.div(f, stages());
      GpuBuilder wb = lb.ifThen(lb.lessThan(lb.index(0), round));
      wb.mbarrierWaitParity(emptyBarrier(wb, s),
                            wb.toI32(wb.rem(wb.sub(round, 1), 2)),
                            waitTicks(wb));
      Value full = fullBarrier(lb, s);
      lb.mbarrierArriveExpectTx(full, layout.stageBytes());
      Value row = lb.toI32(lb.mul(lb.add(t.firstBlock, j), tileN()));
      for (int64_t c = 0; c < layout.boxes(); ++c) {
        int64_t box = c * layout.kvBoxBytes();
        SmallVector<Value, 3> coords{lb.i32(64 * c), row, lb.toI32(t.kvIndex)};
        lb.tmaLoad(at(lb, lb.add(kvTileOffset(lb, s, false), box)), kMap,
                   coords, full);
        lb.tmaLoad(at(lb, lb.add(kvTileOffset(lb, s, true), box)), vMap, coords,
                   full);
      }
    }
  });
}

/// The consumer warpgroups: per tile, the online softmax over its blocks
/// and the store of O / l. Software-pipelined as FlashAttention-3 does
/// within a warpgroup: at block j the warpgroup issues S_j = q · k_jᵀ and
/// O += P_{j-1} · v_{j-1} together, waits for S_j alone, computes block
/// j's softmax while the P · v product runs, then waits for it, rescales O
/// by block j's α and releases block j - 1's stage.
void AttentionKernelBuilder::emitConsumer(GpuBuilder &b) const {
  NVVM::SetMaxRegisterOp::create(b, 232, NVVM::SetMaxRegisterAction::increase);
  MLIRContext *ctx = b.getContext();
  Type f32 = b.getF32Type(), i32 = b.getI32Type();
  Type elem = plan.elementType;
  int64_t d = plan.headDim, bn = tileN();
  int64_t sRegs = bn / 2, oRegs = d / 2, pRegs = bn / 4;
  auto sType =
      LLVM::LLVMStructType::getLiteral(ctx, SmallVector<Type>(sRegs, f32));
  auto oType =
      LLVM::LLVMStructType::getLiteral(ctx, SmallVector<Type>(oRegs, f32));
  // The warpgroup's role from lane 0: the tile loop around the wgmmas is
  // then known warp-uniform.
  Value wg = b.warpUniform(b.sub(b.div(tid, 128), 1));
  Value warp = b.rem(b.div(tid, 32), 4);
  Value lane = b.rem(tid, 32);
  Value quadCol = b.mul(b.rem(lane, 4), 2);
  Value rowInWg = b.add(b.mul(warp, 16), b.div(lane, 4));
  Value sharedBase = LLVM::PtrToIntOp::create(b, b.getI64Type(), shared);
  Value cScale = b.f32(plan.log2Factor());
  Value negInf = b.f32(-std::numeric_limits<double>::infinity());
  Value zero = b.f32(0);

  // Warpgroup 0 takes the first turn: its first wait at its barrier
  // completes with its own arrival. (Warpgroup 1's last pass is left
  // unmatched at the exit.)
  Value myTurn = b.add(b.i32(kTurnBarrier), b.toI32(wg));
  Value otherTurn = b.sub(b.i32(kTurnBarrier + 1), b.toI32(wg));
  {
    GpuBuilder fb = b.ifThen(b.equal(wg, 0));
    fb.namedBarrierArrive(myTurn, 256);
  }
  forEachTile(b, [&](GpuBuilder &tb, const AttentionTile &t, Value i,
                     Value fills) {
    Value rowBase = tb.add(t.m0, tb.mul(wg, 64));
    Value rows[2] = {tb.add(rowBase, rowInWg),
                     tb.add(rowBase, tb.add(rowInWg, 8))};
    tb.mbarrierWaitParity(at(tb, layout.qFullBarrier()), tb.toI32(tb.rem(i, 2)),
                          waitTicks(tb));
    // q's 64-row block of this warpgroup, in each 64-column box.
    Value qBlock =
        tb.add(tb.i32(layout.qOffset()), tb.toI32(tb.mul(wg, 64 * 128)));

    // Block j's stage, once it has landed.
    auto waitStage = [&](GpuBuilder &wb, Value j) {
      Value f = wb.add(fills, j);
      Value s = wb.rem(f, stages());
      wb.mbarrierWaitParity(fullBarrier(wb, s),
                            wb.toI32(wb.rem(wb.div(f, stages()), 2)),
                            waitTicks(wb));
      return s;
    };
    // S = q · kᵀ of stage s: D / 16 K slices, 32 bytes into each 128-byte
    // row (the caller fences before and commits after).
    // (q's descriptor passes through inLoop: its slices' descriptors are
    // computed with the product, not held across the loop.)
    auto issueS = [&](GpuBuilder &gb, Value s) {
      Value qBase = gb.inLoop(gb.wgmmaDescriptor(
          sharedBase, qBlock, wgmmaKMajorDescriptorFields(128)));
      Value kBase = gb.wgmmaDescriptor(sharedBase, kvTileOffset(gb, s, false),
                                       wgmmaKMajorDescriptorFields(128));
      Value acc = LLVM::UndefOp::create(gb, sType);
      for (int64_t kk = 0; kk < d / 16; ++kk) {
        int64_t slice = (kk % 4) * 32;
        Value a = gb.wgmmaDescriptorAdvance(
            qBase, (kk / 4) * layout.qBoxBytes() + slice);
        Value kd = gb.wgmmaDescriptorAdvance(
            kBase, (kk / 4) * layout.kvBoxBytes() + slice);
        acc = gb.wgmmaShared(acc, bn, elem, a, kd, /*accumulate=*/kk > 0);
      }
      return acc;
    };
    // O += P · v of stage s: P's 16-column slices as A fragments, v's
    // 16-row slices MN-major (boxes of 64 columns of D, kvBoxBytes apart).
    auto issuePV = [&](GpuBuilder &gb, Value o, ArrayRef<Value> p, Value s) {
      Value vBase =
          gb.wgmmaDescriptor(sharedBase, kvTileOffset(gb, s, true),
                             wgmmaMNMajorDescriptorFields(layout.kvBoxBytes()));
      for (int64_t kk = 0; kk < bn / 16; ++kk)
        o = gb.wgmmaRegisterA(o, d, elem, p.slice(4 * kk, 4),
                              gb.wgmmaDescriptorAdvance(vBase, kk * 16 * 128),
                              /*bMNMajor=*/true);
      return o;
    };
    // Block j's (of the tile's) scores, masked where the block reaches past
    // the keys' end, (causal) past the warpgroup's first row's diagonal or
    // (window W) below its last row's window: col >= S, col + T > row + S,
    // or col + T + W <= row + S.
    auto mask = [&](GpuBuilder &mb0, Value sAcc, Value j) {
      Value n0 = mb0.mul(mb0.add(t.firstBlock, j), bn);
      Value blockEnd = mb0.add(n0, bn);
      Value needMask = arith::CmpIOp::create(mb0, arith::CmpIPredicate::ugt,
                                             blockEnd, kvSeq);
      if (plan.causal)
        needMask = arith::OrIOp::create(
            mb0, needMask,
            arith::CmpIOp::create(mb0, arith::CmpIPredicate::ugt,
                                  mb0.add(blockEnd, seq),
                                  mb0.add(mb0.add(rowBase, kvSeq), 1)));
      if (plan.window)
        needMask = arith::OrIOp::create(
            mb0, needMask,
            arith::CmpIOp::create(mb0, arith::CmpIPredicate::ule,
                                  mb0.add(n0, mb0.add(seq, plan.window)),
                                  mb0.add(mb0.add(rowBase, kvSeq), 63)));
      auto masked = scf::IfOp::create(mb0, TypeRange{sType}, needMask,
                                      /*withElseRegion=*/true);
      GpuBuilder mb = mb0.with(masked.getThenBodyBuilder());
      Value sm = sAcc;
      Value colBase = mb.add(n0, quadCol);
      for (int64_t r = 0; r < sRegs; ++r) {
        Value col = mb.add(colBase, 8 * (r / 4) + r % 2);
        Value valid = mb.lessThan(col, kvSeq);
        if (plan.causal)
          valid = arith::AndIOp::create(
              mb, valid,
              arith::CmpIOp::create(mb, arith::CmpIPredicate::ule,
                                    mb.add(col, seq),
                                    mb.add(rows[(r % 4) / 2], kvSeq)));
        if (plan.window)
          valid = arith::AndIOp::create(
              mb, valid,
              arith::CmpIOp::create(mb, arith::CmpIPredicate::ugt,
                                    mb.add(col, mb.add(seq, plan.window)),
                                    mb.add(rows[(r % 4) / 2], kvSeq)));
        Value x = LLVM::ExtractValueOp::create(mb, sm, r);
        sm =
            LLVM::InsertValueOp::create(mb, sm, mb.select(valid, x, negInf), r);
      }
      scf::YieldOp::create(mb, ValueRange{sm});
      GpuBuilder eb = mb0.with(masked.getElseBodyBuilder());
      scf::YieldOp::create(eb, ValueRange{sAcc});
      return masked.getResult(0);
    };
    // With a softcap c, the scores' tanh(S · scale / c) (before the mask:
    // a masked score is -inf, not -c).
    auto cap = [&](GpuBuilder &cb, Value sAcc) {
      if (!plan.softcap)
        return sAcc;
      Value factor = cb.f32(plan.capArgumentFactor());
      for (int64_t r = 0; r < sRegs; ++r) {
        Value x = LLVM::ExtractValueOp::create(cb, sAcc, r);
        sAcc = LLVM::InsertValueOp::create(
            cb, sAcc, cb.tanhApprox(arith::MulFOp::create(cb, x, factor)), r);
      }
      return sAcc;
    };
    // The online softmax of the thread's two rows over block j's scores:
    // the new maxima and sums, the factors α of the old ones, and P rounded
    // to the operand type as A fragments (bn / 4 registers).
    struct Softmax {
      Value m[2], l[2], alpha[2];
      SmallVector<Value> p;
    };
    auto softmax = [&](GpuBuilder &sb, Value sAcc, ArrayRef<Value> mOld,
                       ArrayRef<Value> lOld) {
      Softmax out;
      SmallVector<Value> sv;
      for (int64_t r = 0; r < sRegs; ++r)
        sv.push_back(LLVM::ExtractValueOp::create(sb, sAcc, r));
      Value rowMax[2] = {negInf, negInf};
      for (int64_t r = 0; r < sRegs; ++r) {
        Value &m = rowMax[(r % 4) / 2];
        m = arith::MaxNumFOp::create(sb, m, sv[r]);
      }
      SmallVector<Value> quadMax =
          sb.warpAllReduce(ValueRange{rowMax[0], rowMax[1]}, 4,
                           [](GpuBuilder &rb, ValueRange x, ValueRange y) {
                             SmallVector<Value> r;
                             for (auto [a, c] : llvm::zip(x, y))
                               r.push_back(arith::MaxNumFOp::create(rb, a, c));
                             return r;
                           });
      Value negM[2];
      for (int h = 0; h < 2; ++h) {
        out.m[h] = arith::MaxNumFOp::create(
            sb, mOld[h], arith::MulFOp::create(sb, quadMax[h], cScale));
        // Every key masked so far: subtract 0 (exp2(-inf - -inf) is NaN).
        Value none = arith::CmpFOp::create(sb, arith::CmpFPredicate::OEQ,
                                           out.m[h], negInf);
        Value mSub = sb.select(none, zero, out.m[h]);
        out.alpha[h] = sb.ex2Approx(arith::SubFOp::create(sb, mOld[h], mSub));
        out.l[h] = arith::MulFOp::create(sb, lOld[h], out.alpha[h]);
        negM[h] = arith::NegFOp::create(sb, mSub);
      }
      SmallVector<Value> p(sRegs);
      for (int64_t r = 0; r < sRegs; ++r) {
        int h = (r % 4) / 2;
        p[r] = sb.ex2Approx(math::FmaOp::create(sb, sv[r], cScale, negM[h]));
        out.l[h] = arith::AddFOp::create(sb, out.l[h], p[r]);
      }
      for (int64_t r = 0; r < sRegs; r += 2)
        out.p.push_back(
            sb.packMmaOperand(p[r], p[r + 1], elem, Value(), /*asI32=*/true));
      return out;
    };
    auto scaleO = [&](GpuBuilder &ob, Value o, const Value alpha[2]) {
      for (int64_t r = 0; r < oRegs; ++r) {
        Value x = LLVM::ExtractValueOp::create(ob, o, r);
        o = LLVM::InsertValueOp::create(
            ob, o, arith::MulFOp::create(ob, x, alpha[(r % 4) / 2]), r);
      }
      return o;
    };
    auto release = [&](GpuBuilder &rb, Value j) {
      rb.mbarrierArrive(emptyBarrier(rb, rb.rem(rb.add(fills, j), stages())));
    };
    // The warpgroups' wgmmas take turns (FlashAttention-3's ping-pong):
    // each issues its products only after the other has issued its own, so
    // one's softmax runs while the other's products hold the Tensor Cores.
    // Both take the same number of turns a tile (the blocks, plus the last
    // P · v).
    auto takeTurn = [&](GpuBuilder &wb) { wb.namedBarrier(myTurn, 256); };
    auto passTurn = [&](GpuBuilder &ab) {
      ab.namedBarrierArrive(otherTurn, 256);
    };

    // Block 0 (there is one: a tile always has keys to read, except a
    // causal one with S < T whose rows are all masked: 0 / 0).
    SmallVector<Type> carriedTypes = {f32, f32, f32, f32, oType};
    carriedTypes.append(pRegs, i32);
    auto any = scf::IfOp::create(tb, carriedTypes,
                                 tb.lessThan(tb.index(0), t.numBlocks),
                                 /*withElseRegion=*/true);
    {
      GpuBuilder fb = tb.with(any.getThenBodyBuilder());
      Value s0 = waitStage(fb, fb.index(0));
      takeTurn(fb);
      NVVM::WgmmaFenceAlignedOp::create(fb);
      Value sAcc = issueS(fb, s0);
      NVVM::WgmmaGroupSyncAlignedOp::create(fb);
      passTurn(fb);
      NVVM::WgmmaWaitGroupSyncOp::create(fb, 0);
      sAcc = mask(fb, cap(fb, fb.fenceOperands(sAcc)), fb.index(0));
      Softmax first = softmax(fb, sAcc, {negInf, negInf}, {zero, zero});
      SmallVector<Value> yields = {first.m[0], first.m[1], first.l[0],
                                   first.l[1], LLVM::ZeroOp::create(fb, oType)};
      yields.append(first.p.begin(), first.p.end());
      scf::YieldOp::create(fb, yields);
      GpuBuilder eb = tb.with(any.getElseBodyBuilder());
      SmallVector<Value> none = {negInf, negInf, zero, zero,
                                 LLVM::ZeroOp::create(eb, oType)};
      none.append(pRegs, eb.i32(0));
      scf::YieldOp::create(eb, none);
    }
    // Blocks 1 to n - 1: S_j and P_{j-1} · v_{j-1} issued together.
    auto blocks = scf::ForOp::create(tb, tb.index(1), t.numBlocks, tb.index(1),
                                     any.getResults());
    {
      GpuBuilder lb = tb.atStart(blocks.getBody());
      Value j = blocks.getInductionVar();
      ValueRange carried = blocks.getRegionIterArgs();
      Value mOld[2] = {carried[0], carried[1]};
      Value lOld[2] = {carried[2], carried[3]};
      SmallVector<Value> pPrev(carried.drop_front(5));
      Value s = waitStage(lb, j);
      Value sPrev = lb.rem(lb.add(lb.add(fills, j), stages() - 1), stages());
      takeTurn(lb);
      NVVM::WgmmaFenceAlignedOp::create(lb);
      Value sAcc = issueS(lb, s);
      NVVM::WgmmaGroupSyncAlignedOp::create(lb);
      NVVM::WgmmaFenceAlignedOp::create(lb);
      Value o = issuePV(lb, carried[4], pPrev, sPrev);
      NVVM::WgmmaGroupSyncAlignedOp::create(lb);
      passTurn(lb);
      NVVM::WgmmaWaitGroupSyncOp::create(lb, 1);
      sAcc = mask(lb, cap(lb, lb.fenceOperands(sAcc)), j);
      Softmax next = softmax(lb, sAcc, mOld, lOld);
      // The softmax before the wait for P · v (else nothing keeps its
      // arithmetic from sinking below the wait, to its uses).
      {
        SmallVector<Value> done = {next.m[0], next.m[1],     next.l[0],
                                   next.l[1], next.alpha[0], next.alpha[1]};
        done.append(next.p.begin(), next.p.end());
        done = lb.fenceRegisters(done);
        for (int h = 0; h < 2; ++h) {
          next.m[h] = done[h];
          next.l[h] = done[2 + h];
          next.alpha[h] = done[4 + h];
        }
        next.p.assign(done.begin() + 6, done.end());
      }
      NVVM::WgmmaWaitGroupSyncOp::create(lb, 0);
      o = scaleO(lb, lb.fenceOperands(o), next.alpha);
      (void)lb.fenceRegisters(pPrev);
      release(lb, lb.sub(j, 1));
      SmallVector<Value> yields = {next.m[0], next.m[1], next.l[0], next.l[1],
                                   o};
      yields.append(next.p.begin(), next.p.end());
      scf::YieldOp::create(lb, yields);
    }
    // The last block's P · v.
    Value o = blocks.getResult(4);
    {
      auto last = scf::IfOp::create(tb, TypeRange{oType},
                                    tb.lessThan(tb.index(0), t.numBlocks),
                                    /*withElseRegion=*/true);
      GpuBuilder lb = tb.with(last.getThenBodyBuilder());
      Value jLast = lb.sub(t.numBlocks, 1);
      Value sLast = lb.rem(lb.add(fills, jLast), stages());
      takeTurn(lb);
      NVVM::WgmmaFenceAlignedOp::create(lb);
      Value oLast = issuePV(
          lb, o, SmallVector<Value>(blocks.getResults().drop_front(5)), sLast);
      NVVM::WgmmaGroupSyncAlignedOp::create(lb);
      passTurn(lb);
      NVVM::WgmmaWaitGroupSyncOp::create(lb, 0);
      oLast = lb.fenceOperands(oLast);
      release(lb, jLast);
      scf::YieldOp::create(lb, ValueRange{oLast});
      GpuBuilder eb = tb.with(last.getElseBodyBuilder());
      scf::YieldOp::create(eb, ValueRange{o});
      o = last.getResult(0);
    }
    // q's tile is free for the next one.
    tb.mbarrierArrive(at(tb, layout.qEmptyBarrier()));

    // out = O / l: each row's sum completed across its quad; lse = m ln 2
    // + ln l (m in the log2 domain), by the quad's first thread.
    Value inv[2];
    for (int h = 0; h < 2; ++h) {
      Value l = tb.warpAllReduceSum(blocks.getResult(2 + h), 4);
      inv[h] = arith::DivFOp::create(tb, tb.f32(1), l);
      if (!lse)
        continue;
      GpuBuilder sb = tb.ifThen(arith::AndIOp::create(
          tb, tb.lessThan(rows[h], seq), tb.equal(tb.rem(lane, 4), 0)));
      Value x = arith::AddFOp::create(
          sb,
          arith::MulFOp::create(sb, blocks.getResult(h),
                                sb.f32(0.6931471805599453)),
          math::LogOp::create(sb, l));
      memref::StoreOp::create(sb, x, lse, ValueRange{t.batch, t.head, rows[h]});
    }
    auto pairType = VectorType::get({2}, elem);
    for (int h = 0; h < 2; ++h) {
      GpuBuilder sb = tb.ifThen(tb.lessThan(rows[h], seq));
      for (int64_t jj = 0; jj < d / 8; ++jj) {
        int64_t r = 4 * jj + 2 * h;
        Value lo = arith::MulFOp::create(
            sb, LLVM::ExtractValueOp::create(sb, o, r), inv[h]);
        Value hi = arith::MulFOp::create(
            sb, LLVM::ExtractValueOp::create(sb, o, r + 1), inv[h]);
        Value pair = arith::TruncFOp::create(
            sb, pairType,
            vector::FromElementsOp::create(sb, VectorType::get({2}, f32),
                                           ValueRange{lo, hi}));
        vector::StoreOp::create(
            sb, pair, out,
            ValueRange{t.batch, t.head, rows[h], sb.add(quadCol, 8 * jj)});
      }
    }
  });
}

//===----------------------------------------------------------------------===//
// The plan, the configuration, the kernel
//===----------------------------------------------------------------------===//

/// The CTA's place in round `i` of the snake.
static Value snakePlace(GpuBuilder &b, Value i) {
  Value cta = b.blockId(gpu::Dimension::x);
  Value mirror = b.sub(b.sub(b.gridDim(gpu::Dimension::x), 1), cta);
  return b.select(b.equal(b.rem(i, 2), 1), mirror, cta);
}

Value mlir::liger::snakeTileIndex(GpuBuilder &b, Value i) {
  return b.add(b.mul(i, b.gridDim(gpu::Dimension::x)), snakePlace(b, i));
}

Value mlir::liger::snakeTilesOfCta(GpuBuilder &b, Value tiles) {
  Value ctas = b.gridDim(gpu::Dimension::x);
  Value rounds = b.div(tiles, ctas);
  return b.add(rounds,
               b.select(b.lessThan(snakePlace(b, rounds), b.rem(tiles, ctas)),
                        b.index(1), b.index(0)));
}

rt::KernelTensorMap mlir::liger::attentionTensorMap(unsigned param,
                                                    int64_t rows,
                                                    int64_t elementBytes) {
  rt::KernelTensorMap map;
  map.param = param;
  map.boxRows = rows;
  map.boxCols = 128 / elementBytes;
  map.swizzle = rt::TensorMapSwizzle::B128;
  return map;
}

FailureOr<AttentionPlan> mlir::liger::analyzeAttentionGroup(FusionOp group) {
  Block &body = group.getBody().front();
  Operation *first = &body.front();
  if (!isa<AttentionOp, AttentionGradOp>(first) ||
      first->getNextNode() != body.getTerminator() ||
      !llvm::equal(group.getYield().getValues(), first->getResults()))
    return group.emitOpError("cannot be lowered to an attention kernel: it "
                             "must hold one liger.attention or "
                             "liger.attention_grad and yield its results");
  AttentionPlan plan;
  plan.group = group;
  // The attributes both ops share (the gradient's are its forward's).
  auto readAttributes = [&](auto op) {
    plan.causal = op.getCausal();
    plan.window = op.getWindow().value_or(0);
    if (auto softcap = op.getSoftcapAttr())
      plan.softcap = softcap.getValueAsDouble();
    if (auto scale = op.getScaleAttr())
      plan.scale = scale.getValueAsDouble();
  };
  Value q, k, v;
  if (auto op = dyn_cast<AttentionOp>(first)) {
    plan.op = op;
    q = op.getQ(), k = op.getK(), v = op.getV();
    readAttributes(op);
  } else {
    auto grad = cast<AttentionGradOp>(first);
    plan.gradOp = grad;
    q = grad.getQ(), k = grad.getK(), v = grad.getV();
    plan.grad = cast<BlockArgument>(grad.getGrad());
    if (grad.getOut()) {
      plan.out = cast<BlockArgument>(grad.getOut());
      plan.lse = cast<BlockArgument>(grad.getLse());
    }
    readAttributes(grad);
  }
  plan.q = cast<BlockArgument>(q);
  plan.k = cast<BlockArgument>(k);
  plan.v = cast<BlockArgument>(v);
  auto qType = cast<RankedTensorType>(q.getType());
  auto kType = cast<RankedTensorType>(k.getType());
  auto vType = cast<RankedTensorType>(v.getType());
  plan.elementType = qType.getElementType();
  plan.queryHeads = qType.getDimSize(1);
  plan.kvHeads = kType.getDimSize(1);
  plan.headDim = qType.getDimSize(3);
  plan.valueDim = vType.getDimSize(3);
  if (plan.scale == 0 && plan.headDim > 0)
    plan.scale = 1.0 / std::sqrt(static_cast<double>(plan.headDim));
  return plan;
}

bool mlir::liger::attentionTemplateRunsOn(const GpuTargetInfo &target) {
  return target.hasWgmma && target.hasTma;
}

std::string mlir::liger::attentionTemplateProblem(const AttentionPlan &plan,
                                                  const GpuTargetInfo &target) {
  if (!attentionTemplateRunsOn(target))
    return "the attention template needs wgmma and TMA (sm_90a); the target "
           "is " +
           target.chip.str();
  if (!plan.elementType.isBF16() && !plan.elementType.isF16())
    return "the attention template takes bf16 or f16 (wgmma's operands)";
  if (ShapedType::isDynamic(plan.queryHeads) ||
      ShapedType::isDynamic(plan.kvHeads) ||
      ShapedType::isDynamic(plan.headDim) ||
      ShapedType::isDynamic(plan.valueDim))
    return "the attention template needs static head counts and head "
           "dimensions";
  if (plan.valueDim != plan.headDim)
    return "the attention template needs v's head dimension equal to q's "
           "(v's is " +
           std::to_string(plan.valueDim) + ", q's " +
           std::to_string(plan.headDim) + ")";
  if (plan.headDim % 64 != 0 || plan.headDim > 256)
    return "the attention template takes a head dimension that is a multiple "
           "of 64 up to 256 (its tiles' 128-byte rows), got " +
           std::to_string(plan.headDim);
  if (plan.backward()) {
    if (!plan.out)
      return "the attention template's backward takes the forward's output "
             "and lse (liger.attention_grad's saved operands; liger.attention "
             "return_lse gives the lse)";
    if (plan.headDim > 128)
      return "the attention template's backward holds dk and dv of 64 key "
             "rows in registers: head dimension 64 or 128, got " +
             std::to_string(plan.headDim);
  }
  return "";
}

/// The shared memory of `plan`'s kernel with these tunables.
static int64_t attentionSharedBytes(const AttentionPlan &plan, int64_t tileN,
                                    int64_t stages) {
  if (plan.backward())
    return attentionGradSharedBytes(plan.headDim, stages);
  return AttentionLayout(plan.headDim, tileN, stages).size();
}

/// The tile_n and stages limits, the consumers' registers (the forward's S
/// and O accumulators: tile_n / 2 + D / 2 f32 a thread) and the shared
/// memory they take; empty when they fit. The backward's tile_n is its key
/// tile: 128 (64 rows for each consumer warpgroup).
static std::string attentionConfigProblem(const AttentionPlan &plan,
                                          int64_t tileN, int64_t stages,
                                          const GpuTargetInfo &target) {
  if (plan.backward() && tileN != 128)
    return "the backward's 'tile_n' (its key rows a tile) must be 128, got " +
           std::to_string(tileN);
  if (tileN != 64 && tileN != 96 && tileN != 128)
    return "'tile_n' must be 64, 96 or 128, got " + std::to_string(tileN);
  if (stages < 2 || stages > 4)
    return "'stages' must be 2 to 4, got " + std::to_string(stages);
  if (!plan.backward() && tileN / 2 + plan.headDim / 2 > 160)
    return "'tile_n' " + std::to_string(tileN) + " with head dimension " +
           std::to_string(plan.headDim) +
           " holds more accumulators than a consumer thread's registers "
           "(tile_n / 2 + D / 2 must be at most 160)";
  int64_t bytes = attentionSharedBytes(plan, tileN, stages);
  int64_t budget = GpuBuilder::externSharedBudget(target);
  if (bytes > budget)
    return "'tile_n' " + std::to_string(tileN) + " and " +
           std::to_string(stages) + " stages take " + std::to_string(bytes) +
           " bytes of shared memory, over the " + std::to_string(budget) +
           " a kernel may take beside its 1024 static bytes on " +
           target.chip.str();
  return "";
}

KernelConfigAttr
mlir::liger::selectAttentionKernelConfig(const AttentionPlan &plan,
                                         const GpuTargetInfo &target) {
  int64_t tileN = plan.headDim > 128 && !plan.backward() ? 64 : 128;
  // The forward's consumers hold two blocks' stages at once (block j's k
  // for S_j, block j - 1's v for P · v): a third lets the producer load
  // the next block meanwhile. The backward's hold one query block; a
  // second is loaded meanwhile. As many as fit, up to 4.
  int64_t stages = 4;
  while (stages > 2 && attentionSharedBytes(plan, tileN, stages) >
                           GpuBuilder::externSharedBudget(target))
    --stages;
  return KernelConfigAttr::get(
      plan.group.getContext(), KernelTemplate::attention, std::nullopt,
      std::nullopt, std::nullopt, std::nullopt, std::nullopt, tileN,
      std::nullopt, stages, std::nullopt, std::nullopt);
}

LogicalResult
mlir::liger::verifyAttentionKernelConfig(const AttentionPlan &plan,
                                         KernelConfigAttr config,
                                         const GpuTargetInfo &target) {
  std::string problem = attentionConfigProblem(plan, *config.getTileN(),
                                               *config.getStages(), target);
  if (!problem.empty())
    return plan.group.emitOpError("has a 'liger.kernel_config' the attention "
                                  "template cannot take: ")
           << problem;
  return success();
}

FailureOr<rt::KernelSpec> mlir::liger::buildAttentionKernel(
    const AttentionPlan &plan, gpu::GPUModuleOp module, StringRef name,
    KernelConfigAttr config, const GpuTargetInfo &target) {
  std::string problem = attentionTemplateProblem(plan, target);
  if (problem.empty())
    problem = attentionConfigProblem(plan, *config.getTileN(),
                                     *config.getStages(), target);
  if (!problem.empty()) {
    plan.group.emitWarning("left for a later attention template: ") << problem;
    return failure();
  }
  if (plan.backward())
    return buildAttentionGradKernel(plan, module, name, config);
  MLIRContext *ctx = plan.group.getContext();
  Block &body = plan.group.getBody().front();
  AttentionKernelBuilder kb{
      plan,
      AttentionLayout(plan.headDim, *config.getTileN(), *config.getStages())};

  // Parameters: the group's inputs (each a heads tensor, its head count
  // that of the first operand reading it), the output, then the three
  // tensor maps by value.
  rt::KernelSpec info;
  info.name = name.str();
  info.kernelTemplate = rt::KernelTemplate::Attention;
  info.ops = plan.op->getName().getStringRef().str();
  info.block[0] = kThreads;
  info.vectorWidth = 8;
  info.dynamicSharedMemoryBytes = kb.layout.size();
  info.grid[0] = {rt::GridDim::Sms, 1};
  SmallVector<Type> paramTypes;
  for (BlockArgument arg : body.getArguments()) {
    int64_t heads = arg == plan.q ? plan.queryHeads : plan.kvHeads;
    if (arg != plan.q && arg != plan.k && arg != plan.v)
      return plan.group.emitOpError("cannot be lowered to an attention "
                                    "kernel: its input ")
             << arg.getArgNumber() << " is not read by its op";
    auto type = cast<RankedTensorType>(arg.getType());
    info.params.push_back(abiParam("input" + std::to_string(arg.getArgNumber()),
                                   rt::ParamRole::Input, rt::ParamKind::Heads,
                                   plan.elementType, plan.headDim, heads));
    paramTypes.push_back(MemRefType::get(type.getShape(), plan.elementType));
  }
  auto resultType = cast<RankedTensorType>(plan.op.getResult().getType());
  info.params.push_back(abiParam("output0", rt::ParamRole::Output,
                                 rt::ParamKind::Heads, plan.elementType,
                                 plan.headDim, plan.queryHeads));
  paramTypes.push_back(
      MemRefType::get(resultType.getShape(), plan.elementType));
  if (plan.returnsLse()) {
    auto lseType = cast<RankedTensorType>(plan.op.getLse().getType());
    info.params.push_back(
        abiParam("output1", rt::ParamRole::Output, rt::ParamKind::HeadScalars,
                 lseType.getElementType(), 0, plan.queryHeads));
    paramTypes.push_back(
        MemRefType::get(lseType.getShape(), lseType.getElementType()));
  }
  info.tensorMaps.push_back(attentionTensorMap(plan.q.getArgNumber(), kTileM));
  info.tensorMaps.push_back(
      attentionTensorMap(plan.k.getArgNumber(), kb.tileN()));
  info.tensorMaps.push_back(
      attentionTensorMap(plan.v.getArgNumber(), kb.tileN()));
  paramTypes.append(info.tensorMaps.size(), LLVM::LLVMPointerType::get(ctx));

  GpuBuilder b(plan.group.getLoc(), OpBuilder(ctx));
  gpu::GPUFuncOp kernel = b.beginKernel(module, name, paramTypes, kThreads);
  kernel->setAttr("liger.tensor_maps",
                  b.getI64IntegerAttr(info.tensorMaps.size()));
  Block &entry = kernel.getBody().front();
  kb.q = entry.getArgument(plan.q.getArgNumber());
  kb.k = entry.getArgument(plan.k.getArgNumber());
  kb.out = entry.getArgument(body.getNumArguments());
  if (plan.returnsLse())
    kb.lse = entry.getArgument(body.getNumArguments() + 1);
  ValueRange maps = entry.getArguments().take_back(3);
  kb.qMap = maps[0];
  kb.kMap = maps[1];
  kb.vMap = maps[2];
  kb.shared = b.externSharedBuffer(module, "liger_attention_smem", 1024);
  kb.tid = b.threadId();
  Value batch = memref::DimOp::create(b, kb.q, 0);
  kb.seq = memref::DimOp::create(b, kb.q, 2);
  kb.kvSeq = memref::DimOp::create(b, kb.k, 2);
  kb.mTiles = b.div(b.add(kb.seq, kTileM - 1), kTileM);
  Value tiles = b.mul(b.mul(batch, plan.queryHeads), kb.mTiles);
  // This CTA's tiles: blockIdx.x + i · gridDim.x below `tiles`.
  Value ctas = b.gridDim(gpu::Dimension::x);
  Value first = b.blockId(gpu::Dimension::x);
  Value ahead = b.lessThan(first, tiles);
  kb.ctaTiles =
      b.select(ahead, b.div(b.sub(b.add(tiles, ctas), b.add(first, 1)), ctas),
               b.index(0));
  kb.emitBarrierInit(b);
  auto [pb, cb] = b.ifThenElse(b.lessThan(kb.tid, 128));
  kb.emitProducer(pb);
  kb.emitConsumer(cb);
  gpu::ReturnOp::create(b);
  return info;
}
