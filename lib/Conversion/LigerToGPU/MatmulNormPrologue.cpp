//===- MatmulNormPrologue.cpp - the RMSNorm prologue of matmul kernels ----===//
//
// A group x -> liger.rms_norm(x, g) -> projection(s) -> epilogue, where the
// normalized x feeds only the projections, is one kernel: each x tile is
// rewritten in shared memory as x ⊙ (g + offset) rounded to the operand
// dtype while its rows' Σx² accumulate in f32, and the epilogue multiplies
// the accumulators by rstd = rsqrt(Σx²/K + eps) before rounding. So the
// kernel rounds x·g where the unfused op rounds x·rstd (and then ·g): the
// two agree to the dtype's rounding.
//
// wgmma: each consumer thread rescales its four 16-byte chunks of a stage
// (the rows its accumulators hold), its sums in registers, completed by a
// quad shuffle after the loop. mma.sync: the CTA's threads rescale the
// slice's chunks and add their sums into the rows' f32 sums in shared
// memory (atomics).
//
//===----------------------------------------------------------------------===//

#include "liger/Conversion/LigerToGPU/MatmulEmitters.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"

using namespace mlir;
using namespace mlir::liger;

Value mlir::liger::normScaled(GpuBuilder &b, const MatmulKernel &k, Value xv,
                              Value gk) {
  auto v8 = [](Type t) { return VectorType::get({8}, t); };
  Type f32 = b.getF32Type();
  Type gElem = cast<MemRefType>(k.normWeight.getType()).getElementType();
  Value gf = vector::LoadOp::create(b, v8(gElem), k.normWeight, ValueRange{gk},
                                    false, llvm::MaybeAlign(16));
  if (!gElem.isF32())
    gf = arith::ExtFOp::create(b, v8(f32), gf);
  double offset = k.plan.norm.getOffset().convertToDouble();
  if (offset != 0.0)
    gf = arith::AddFOp::create(b, gf, b.f32Splat(8, offset));
  return arith::TruncFOp::create(b, v8(k.elementType()),
                                 arith::MulFOp::create(b, xv, gf));
}

Value mlir::liger::sumOfSquares(GpuBuilder &b, Value xv, Value acc) {
  return vector::ReductionOp::create(b, vector::CombiningKind::ADD,
                                     arith::MulFOp::create(b, xv, xv), acc);
}

Value mlir::liger::rowRstd(GpuBuilder &b, const MatmulKernel &k,
                           Value sumOfSquares) {
  Value mean = arith::MulFOp::create(b, sumOfSquares, b.f32(1.0 / k.plan.k));
  return math::RsqrtOp::create(
      b, arith::AddFOp::create(b, mean,
                               b.f32(k.plan.norm.getEps().convertToDouble())));
}

SmallVector<Value>
mlir::liger::emitWgmmaNormStage(GpuBuilder &b, const MatmulKernel &k,
                                const WgmmaConsumerThread &thread, Value kt,
                                Value step, SmallVector<Value> sums) {
  Value s = b.rem(step, k.config.stages);
  b.mbarrierWaitParity(wgmmaFullBarrier(b, k, s), wgmmaStageParity(b, k, step),
                       wgmmaWaitTicks(b));
  SmallVector<Value> aOffs;
  for (int64_t rb = 0; rb < thread.blocks; ++rb)
    aOffs.push_back(wgmmaXTileOffset(b, k, s, thread.rowBlock(b, rb)));
  Value lane = thread.lane;
  // x ⊙ (g + offset) in place on each of this warpgroup's 64-row blocks of
  // the x tile (the row scale rstd waits for the epilogue), summing x² per
  // row.
  // Lane l of warp w takes rows 16 w + l/4 and + 8 (the rows its
  // accumulators hold) and 16-byte chunks 2 (l % 4) and the next of each;
  // chunk c of row r sits at chunk c ^ (r % 8) = c ^ (l / 4) under the
  // 128-byte swizzle.
  auto v8 = [&](Type t) { return VectorType::get({8}, t); };
  Value quad = b.toI32(b.div(lane, 4));
  Value k0 = b.mul(kt, k.config.tileK);
  for (int64_t i = 0; i < 2 * thread.blocks; ++i) {
    int64_t h = i % 2;
    Value aOff = aOffs[i / 2];
    Value row = b.add(b.add(b.mul(thread.warp, 16), b.div(lane, 4)), 8 * h);
    Value sum = sums[i];
    for (int64_t cc = 0; cc < 2; ++cc) {
      Value c = b.add(b.mul(b.rem(lane, 4), 2), cc);
      Value phys = b.bitXor(b.toI32(c), quad);
      Value off = b.add(aOff, b.add(b.mul(b.toI32(row), k.layout.rowBytes()),
                                    b.mul(phys, 16)));
      Value ptr = wgmmaSharedAt(b, k, off);
      Value xv = arith::ExtFOp::create(
          b, v8(b.getF32Type()), b.loadShared(v8(k.elementType()), ptr, 16));
      sum = sumOfSquares(b, xv, sum);
      // Past K the tile holds TMA's zeros: any in-range g will do.
      Value gk = b.min(b.add(k0, b.mul(c, 8)), k.plan.k - 8);
      b.storeShared(normScaled(b, k, xv, gk), ptr, 16);
    }
    sums[i] = sum;
  }
  // The generic-proxy stores before the async-proxy (wgmma) reads, then
  // the warpgroup's named barrier.
  b.fenceProxyAsyncShared();
  b.namedBarrier(b.toI32(b.add(thread.wg, 1)), 128);
  return sums;
}

void mlir::liger::emitMmaSyncNormInit(GpuBuilder &b, const MatmulKernel &k,
                                      MmaSyncTiles &tiles) {
  StringRef region = MatmulLayout::kRowSums;
  tiles.rowSums = b.sharedView(k.shared, k.layout.offset(region),
                               k.layout.shape(region), b.getF32Type());
  Value zero = b.f32(0.0);
  int64_t tileM = k.config.tileM, threads = k.config.threads();
  for (int64_t i = 0; i < tileM; i += threads) {
    Value r = b.add(k.tid, i);
    GpuBuilder ib = b.ifThen(b.lessThan(r, tileM));
    memref::StoreOp::create(ib, zero, tiles.rowSums, ValueRange{r});
  }
}

void mlir::liger::emitMmaSyncNormSlice(GpuBuilder &b, const MatmulKernel &k,
                                       const MmaSyncTiles &tiles, Value stage,
                                       Value kt) {
  // x ⊙ (g + offset) in place in slice kt's x tile (rstd waits for the
  // epilogue), each thread's partial sums of squares added to its rows'
  // shared sums; a barrier before ldmatrix reads the tile.
  auto v8 = [&](Type t) { return VectorType::get({8}, t); };
  int64_t chunksPerRow = k.config.tileK / 8, threads = k.config.threads();
  Value k0 = b.mul(kt, k.config.tileK);
  for (int64_t i = 0; i < k.config.tileM * chunksPerRow / threads; ++i) {
    Value c = b.add(k.tid, i * threads);
    Value r = b.div(c, chunksPerRow);
    Value col = b.mul(b.rem(c, chunksPerRow), 8);
    Value xv = arith::ExtFOp::create(
        b, v8(b.getF32Type()),
        vector::LoadOp::create(b, v8(k.elementType()), tiles.x,
                               ValueRange{stage, r, col}, false,
                               llvm::MaybeAlign(16))
            .getResult());
    memref::AtomicRMWOp::create(b, arith::AtomicRMWKind::addf,
                                sumOfSquares(b, xv), tiles.rowSums,
                                ValueRange{r});
    vector::StoreOp::create(b, normScaled(b, k, xv, b.add(k0, col)), tiles.x,
                            ValueRange{stage, r, col}, false,
                            llvm::MaybeAlign(16));
  }
  gpu::BarrierOp::create(b);
}
