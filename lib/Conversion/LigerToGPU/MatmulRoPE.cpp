//===- MatmulRoPE.cpp - the RoPE epilogue of the q/k matmul kernels -------===//
//
// The q/k projections with RoPE (MatmulBody::QKRoPE): a column tile holds
// whole heads of one projection; the epilogue rounds the projection (as
// liger.linear does), rotates in f32 with the tables' pair at (batch or 0,
// t, d), and stores pairs head-major into q [B, Hq, T, D] or k
// [B, Hkv, T, D] (b = row / T, t = row mod T). On wgmma the partner of
// column d (d ± D/2) is D/16 n8 blocks away in the same thread's
// accumulators; on mma.sync it lies in another warp's, so the rounded tile
// goes through shared memory first.
//
//===----------------------------------------------------------------------===//

#include "liger/Conversion/LigerToGPU/MatmulEmitters.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"

using namespace mlir;
using namespace mlir::liger;

/// The tables' batch row for a token of batch `batch`: 0 when the tables
/// broadcast (batch dimension 1).
static Value tableBatchOf(GpuBuilder &b, const MatmulKernel &k, Value batch) {
  Value broadcast = b.equal(memref::DimOp::create(b, k.cos, 0), 1);
  return b.select(broadcast, b.index(0), batch);
}

/// The pair of table `t` (cos or sin) at head offset d of token
/// (tableBatch, pos), in f32.
static Value loadTablePair(GpuBuilder &b, Value t, Value tableBatch, Value pos,
                           Value d) {
  Type tElem = cast<MemRefType>(t.getType()).getElementType();
  Value v = vector::LoadOp::create(
      b, VectorType::get({2}, tElem), t, ValueRange{tableBatch, pos, d}, false,
      llvm::MaybeAlign(2 * tElem.getIntOrFloatBitWidth() / 8));
  return tElem.isF32()
             ? v
             : arith::ExtFOp::create(b, VectorType::get({2}, b.getF32Type()), v)
                   .getResult();
}

/// RoPE of the pair x with the tables' pairs cos and sin:
/// round(x ⊙ cos + rotated ⊙ sin), x and `rotated` (the partner pair,
/// negated in the first half) in f32.
static Value ropePair(GpuBuilder &b, const MatmulKernel &k, Value x,
                      Value rotated, Value cos, Value sin) {
  return arith::TruncFOp::create(
      b, VectorType::get({2}, k.elementType()),
      b.ropeTerm(x, cos, rotated, sin, /*subtract=*/false));
}

void mlir::liger::emitWgmmaRoPEEpilogue(GpuBuilder &b, const MatmulKernel &k,
                                        Value acc, ArrayRef<Value> rowScale,
                                        Value r0, Value out, Value colBase,
                                        Value bias) {
  Type f32 = b.getF32Type();
  auto v2 = [&](Type t) { return VectorType::get({2}, t); };
  int64_t headDim = k.plan.headDim;
  int64_t pairs = k.config.tileN / 8, half = headDim / 2;
  Value lane = b.rem(k.tid, 32);
  Value quadCol = b.mul(b.rem(lane, 4), 2);
  Value seq = memref::DimOp::create(b, out, 2);
  Value firstHead = b.div(colBase, headDim);
  for (int64_t h = 0; h < 2; ++h) {
    Value r = h ? b.add(r0, 8) : r0;
    GpuBuilder rb = b.ifThen(b.lessThan(r, k.rows));
    Value batch = arith::DivUIOp::create(rb, r, seq);
    Value pos = arith::RemUIOp::create(rb, r, seq);
    Value tb = tableBatchOf(rb, k, batch);
    // liger.linear's values: (rstd ·) acc (+ bias) rounded to the dtype,
    // then back to f32 for the rotation.
    SmallVector<Value> vals;
    for (int64_t j = 0; j < pairs; ++j) {
      Value lo = LLVM::ExtractValueOp::create(rb, acc, 4 * j + 2 * h);
      Value hi = LLVM::ExtractValueOp::create(rb, acc, 4 * j + 2 * h + 1);
      if (rowScale[h]) {
        lo = arith::MulFOp::create(rb, lo, rowScale[h]);
        hi = arith::MulFOp::create(rb, hi, rowScale[h]);
      }
      Value v = vector::FromElementsOp::create(rb, v2(f32), ValueRange{lo, hi});
      Value c = bias ? rb.add(rb.add(colBase, 8 * j), quadCol) : Value();
      vals.push_back(arith::ExtFOp::create(
          rb, v2(f32), roundMatmulPair(rb, k, v, loadBiasPair(rb, bias, c))));
    }
    // The row's table pairs, one cos and one sin per head offset (the
    // tile's heads share them), all loaded before the row's first store:
    // a load after a store that may alias it would wait out a memory
    // latency each.
    SmallVector<Value> cosAt, sinAt;
    for (int64_t e = 0; e < headDim / 8; ++e) {
      Value d = rb.add(rb.index(8 * e), quadCol);
      cosAt.push_back(loadTablePair(rb, k.cos, tb, pos, d));
      sinAt.push_back(loadTablePair(rb, k.sin, tb, pos, d));
    }
    // rope: x[d] cos[d] + rotate_half(x)[d] sin[d], rotate_half(x)[d] =
    // -x[d + D/2] in the first half, x[d - D/2] in the second: the partner
    // pair is D/16 n8 blocks away, in the same thread.
    for (int64_t j = 0; j < pairs; ++j) {
      int64_t inHead = (8 * j) % headDim;
      bool first = inHead < half;
      int64_t partner = first ? j + half / 8 : j - half / 8;
      Value d = rb.add(rb.index(inHead), quadCol);
      Value rotated = vals[partner];
      if (first)
        rotated = arith::NegFOp::create(rb, rotated);
      Value head = rb.add(firstHead, 8 * j / headDim);
      vector::StoreOp::create(
          rb,
          ropePair(rb, k, vals[j], rotated, cosAt[inHead / 8],
                   sinAt[inHead / 8]),
          out, ValueRange{batch, head, pos, d}, false,
          llvm::MaybeAlign(2 * k.elementType().getIntOrFloatBitWidth() / 8));
    }
  }
}

void mlir::liger::emitMmaSyncRoPEEpilogue(GpuBuilder &b, const MatmulKernel &k,
                                          const MmaSyncThread &thread,
                                          ValueRange accumulators,
                                          ArrayRef<Value> rstd, Value out,
                                          Value colBase, Value bias) {
  MmaSyncWarps warps(k.config);
  Type elem = k.elementType(), f32 = b.getF32Type();
  int64_t headDim = k.plan.headDim;
  auto v2 = [&](Type t) { return VectorType::get({2}, t); };
  StringRef region = MatmulLayout::kExchange;
  Value ex = b.sharedView(k.shared, k.layout.offset(region),
                          k.layout.shape(region), elem);
  gpu::BarrierOp::create(b);
  // Lane l holds rows l/4 and l/4 + 8 of each m16n8 tile, columns 2 (l % 4)
  // and the next.
  Value lane = thread.lane;
  auto local = [&](GpuBuilder &ob, int64_t i, int64_t j, int64_t half) {
    Value r = ob.add(ob.add(ob.mul(thread.wm, 64), i * 16 + 8 * half),
                     ob.div(lane, 4));
    Value c = ob.add(ob.add(ob.mul(thread.wn, warps.warpN), j * 8),
                     ob.mul(ob.rem(lane, 4), 2));
    return std::pair<Value, Value>(r, c);
  };
  llvm::MaybeAlign align2(2 * elem.getIntOrFloatBitWidth() / 8);
  for (int64_t i = 0; i < MmaSyncWarps::mTiles; ++i)
    for (int64_t j = 0; j < warps.nTiles; ++j)
      for (int64_t half = 0; half < 2; ++half) {
        auto [r, c] = local(b, i, j, half);
        int64_t base = (i * warps.nTiles + j) * 4 + half * 2;
        Value lo = accumulators[base], hi = accumulators[base + 1];
        if (!rstd.empty()) {
          lo = arith::MulFOp::create(b, lo, rstd[i * 2 + half]);
          hi = arith::MulFOp::create(b, hi, rstd[i * 2 + half]);
        }
        Value v =
            vector::FromElementsOp::create(b, v2(f32), ValueRange{lo, hi});
        vector::StoreOp::create(
            b,
            roundMatmulPair(b, k, v,
                            bias ? loadBiasPair(b, bias, b.add(colBase, c))
                                 : Value()),
            ex, ValueRange{r, c}, false, align2);
      }
  gpu::BarrierOp::create(b);
  Value seq = memref::DimOp::create(b, out, 2);
  Value half = b.index(headDim / 2);
  for (int64_t i = 0; i < MmaSyncWarps::mTiles; ++i)
    for (int64_t j = 0; j < warps.nTiles; ++j)
      for (int64_t hf = 0; hf < 2; ++hf) {
        auto [r, c] = local(b, i, j, hf);
        Value row = b.add(k.m0, r);
        GpuBuilder rb = b.ifThen(b.lessThan(row, k.rows));
        Value batch = arith::DivUIOp::create(rb, row, seq);
        Value pos = arith::RemUIOp::create(rb, row, seq);
        Value tb = tableBatchOf(rb, k, batch);
        Value d = rb.rem(c, headDim);
        Value first = rb.lessThan(d, half);
        Value partner = rb.select(first, rb.add(c, half), rb.sub(c, half));
        auto read = [&](Value col) -> Value {
          return arith::ExtFOp::create(
              rb, v2(f32),
              vector::LoadOp::create(rb, v2(elem), ex, ValueRange{r, col},
                                     false, align2)
                  .getResult());
        };
        Value xp = read(partner);
        Value rotated = rb.select(first, arith::NegFOp::create(rb, xp), xp);
        Value head = rb.div(rb.add(colBase, c), headDim);
        Value sin = loadTablePair(rb, k.sin, tb, pos, d);
        Value cos = loadTablePair(rb, k.cos, tb, pos, d);
        vector::StoreOp::create(rb, ropePair(rb, k, read(c), rotated, cos, sin),
                                out, ValueRange{batch, head, pos, d}, false,
                                align2);
      }
}
