//===- CrossEntropyKernel.cpp - liger.cross_entropy(_grad) as GPU kernels -===//
//
// A vocabulary row does not fit in a CTA's registers (128256 bf16 logits
// are 250 KiB), and the loss gathers the target's logit, so cross-entropy
// has its own template instead of the row program. A CTA streams its row in
// W-wide chunks:
//
//   pass 1  per thread, an online softmax: running max m and sum
//           s = sum exp(z - m), rescaled when m grows, plus the sums label
//           smoothing needs (sum z, or sum w z and sum w with class
//           weights); then one block reduction of the tuple
//           ((m1, s1) + (m2, s2) = (m, s1 e^(m1-m) + s2 e^(m2-m))).
//           lse = m + log s.
//   scalars the target, its logit, its class weight, the per-token loss
//           terms (docs/Reference/Semantics.md), uniform across the CTA.
//   pass 2  (cross_entropy_grad only) the gradient of every logit from
//           p = exp(z - lse), written once: a product with the row's
//           scalars per logit, the one-hot term one store by the thread
//           owning the target's chunk. With its CTAs per SM given, the
//           kernel keeps the row's first columns (as many as its share of
//           shared memory holds) there: cp.async brings them in, a row
//           ahead (pass 2 copies the next row's chunks into the slots it
//           has read), and both passes read them from there.
//
// z = softcap * tanh(x / softcap) when a softcap is given, f32 math on bf16,
// f16 or f32 logits. The forward with reduction = none writes one loss per
// row (one CTA per row). With mean or sum the CTAs loop over rows with a
// stride of the grid and keep four sums (the weighted loss terms, the
// z-loss terms, the counted weight and the counted tokens), written as one
// partial row per CTA; `<name>_finish` (one CTA) adds the partials and
// divides. The gradient with mean needs those totals first: every CTA of
// its fixed grid adds them up from the targets (N integers, read from L2)
// before its rows. No atomics: results do not depend on scheduling.
//
//===----------------------------------------------------------------------===//

#include "liger/Conversion/LigerToGPU/GpuBuilder.h"
#include "liger/Conversion/LigerToGPU/RowKernel.h"
#include "liger/Transforms/Fusion.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"

#include <limits>

using namespace mlir;
using namespace mlir::liger;
namespace rt = ::liger::runtime;

namespace {
/// The gradient kernel's grid: CTAs that loop over the rows (8 per SM on an
/// H200's 132, a few waves on smaller parts).
constexpr int64_t kGradCtas = 1056;
/// The most values one block reduction combines (max, sum and three
/// smoothing sums).
constexpr int64_t kMaxValues = 8;
/// Chunks per thread in flight in the streaming loops; two in a peeled row
/// (its head, span and next row's take registers: at four, the fused loss
/// and gradient over 262147 bf16 at 1024 threads spilled 72 bytes).
constexpr int64_t kUnroll = 4;
constexpr int64_t kPeeledUnroll = 2;

/// The attributes both ops share, read once.
struct CEAttrs {
  int64_t ignoreIndex = -100;
  double labelSmoothing = 0.0;
  Reduction reduction = Reduction::mean;
  std::optional<double> softcap;
  double lseSquareScale = 0.0;
  bool hasWeight = false;
  bool returnZLoss = false;
};

template <typename OpTy> CEAttrs readAttrs(OpTy op) {
  CEAttrs a;
  a.ignoreIndex = op.getIgnoreIndexAttr().getInt();
  a.labelSmoothing = op.getLabelSmoothing().convertToDouble();
  a.reduction = op.getReduction();
  if (auto s = op.getSoftcap())
    a.softcap = s->convertToDouble();
  a.lseSquareScale = op.getLseSquareScale().convertToDouble();
  a.hasWeight = static_cast<bool>(op.getWeight());
  return a;
}

/// Emits the kernels of one cross-entropy group.
class CEBuilder {
public:
  CEBuilder(FusionOp group, gpu::GPUModuleOp module, StringRef name,
            const RowKernelConfig &config, int64_t maxSharedMemoryBytes)
      : group(group), module(module), name(name), ctx(group.getContext()),
        loc(group.getLoc()), config(config),
        maxSharedMemoryBytes(maxSharedMemoryBytes) {}

  FailureOr<rt::KernelSpec> build();

private:
  // Float arithmetic and small helpers.
  /// `scalar` broadcast to the vector type `like` (a chunk's).
  Value splat(GpuBuilder &b, Value scalar, Type like) {
    return vector::BroadcastOp::create(b, loc, like, scalar);
  }
  VectorType vecF32(int64_t w) {
    return VectorType::get({w}, Float32Type::get(ctx));
  }
  Value add(GpuBuilder &b, Value x, Value y) {
    return arith::AddFOp::create(b, loc, x, y);
  }
  Value sub(GpuBuilder &b, Value x, Value y) {
    return arith::SubFOp::create(b, loc, x, y);
  }
  Value mul(GpuBuilder &b, Value x, Value y) {
    return arith::MulFOp::create(b, loc, x, y);
  }
  Value div(GpuBuilder &b, Value x, Value y) {
    return arith::DivFOp::create(b, loc, x, y);
  }
  /// exp with `afn`: __nv_fast_expf, ex2.approx(x · log2 e) (two
  /// instructions, relative error about 2^-21 + |x| 2^-24), where the
  /// default __nv_expf takes ten; a row's passes are bound by their
  /// instructions, not by memory, without it.
  Value exp(GpuBuilder &b, Value x) {
    return math::ExpOp::create(b, loc, x, arith::FastMathFlags::afn);
  }
  /// exp(x - y) for a scalar y (splat over a vector x) as
  /// exp2(x log2 e - y log2 e): one fma and one ex2.approx per element,
  /// the product y log2 e formed once (pass 1's online softmax; in pass 2
  /// of the gradient alone with a softcap, ptxas spilled a predicate).
  Value expMinus(GpuBuilder &b, Value x, Value y) {
    bool isVec = isa<VectorType>(x.getType());
    auto s = [&](Value v) { return isVec ? splat(b, v, x.getType()) : v; };
    Value log2e = b.f32(1.4426950408889634);
    Value arg = math::FmaOp::create(
        b, loc, x, s(log2e),
        s(arith::NegFOp::create(b, loc, mul(b, y, log2e))));
    return math::Exp2Op::create(b, loc, arg, arith::FastMathFlags::afn);
  }
  Value reduceAdd(GpuBuilder &b, Value v) {
    return vector::ReductionOp::create(b, loc, vector::CombiningKind::ADD, v);
  }
  /// The `w` elements of `memref` at `indices` (a row, or none, and a
  /// column), widened to f32; `aligned`: the column starts a chunk of the
  /// row's (a load of w elements), else only element-aligned.
  Value loadChunk(GpuBuilder &b, Value memref, ValueRange indices, int64_t w,
                  bool aligned);
  /// The logits' `w` elements at (`row`, `col`), widened to f32: a chunk
  /// from the staging area when staged, else from memory.
  Value loadLogits(GpuBuilder &b, Value row, Value col, int64_t w);
  /// The staging area's view of the shared buffer (at the kernel's entry),
  /// and whether the chunk at offset `off` of the row's chunks is staged.
  Value makeStageArea(GpuBuilder &b);
  Value isStaged(GpuBuilder &b, Value off);
  /// cp.async of the logits' chunk at (`row`, `col`) into the staging slot
  /// of offset `off` (the column, unless the row is peeled).
  void stageChunk(GpuBuilder &b, Value row, Value col, Value off) {
    b.asyncCopy16(stage, ValueRange{off}, logits,
                    ValueRange{row, col}, width);
  }
  /// A row whose start is not chunk-aligned (the vocabulary is not a
  /// multiple of W) is peeled: its first `head` = (W - (row V mod W)) mod W
  /// elements and the last ones past its full chunks are single elements,
  /// one a thread, and its chunks start at column head, 16-byte aligned.
  /// Returns head and the elements its full chunks cover (a multiple of W).
  std::pair<Value, Value> peelRow(GpuBuilder &b, Value row);
  /// The column of the chunk at offset `off` of the current row's chunks,
  /// and back.
  Value columnOf(GpuBuilder &b, Value off) {
    return peeled ? arith::AddIOp::create(b, loc, rowHead, off) : off;
  }
  Value offsetOf(GpuBuilder &b, Value col) {
    return peeled ? arith::SubIOp::create(b, loc, col, rowHead) : col;
  }
  /// z = softcap * tanh(x / softcap), or x.
  Value capped(GpuBuilder &b, Value x);

  /// Reduces `values` across the CTA with `combine`
  /// (GpuBuilder::blockAllReduce); every thread gets the result. `neutral`
  /// holds the identity of each value. Every reduction of the kernel uses
  /// one area at the start of shared memory.
  SmallVector<Value> blockReduce(GpuBuilder &b, ValueRange values,
                                 ArrayRef<double> neutral,
                                 GpuBuilder::Combine combine);
  SmallVector<Value> addAll(GpuBuilder &b, ValueRange values) {
    return blockReduce(b, values, SmallVector<double>(values.size(), 0.0),
                       [&](GpuBuilder &nb, ValueRange x, ValueRange y) {
                         SmallVector<Value> r;
                         for (auto [a, c] : llvm::zip(x, y))
                           r.push_back(add(nb, a, c));
                         return r;
                       });
  }

  /// Per-token values every step needs.
  struct Token {
    Value index;   // the class to read (0 when not readable)
    Value weightT; // w[target] (1 without weights), 0 when ignored
    Value counted; // 1.0 when counted, else 0.0
    Value ignored; // i1: the target is ignore_index
    Value invalid; // i1: neither ignored nor in [0, V)
    Value readable; // i1: counted and in [0, V) (index is the target)
  };
  Token readToken(GpuBuilder &b, Value row);

  /// Pass 1 over `row`: lse and, when asked, sum z, sum w z and sum w.
  struct RowStats {
    Value lse;
    Value sumZ, sumWZ, sumW; // null when not asked for
  };
  RowStats rowStats(GpuBuilder &b, Value row, bool sumZ, bool sumWZ, bool sumW);
  std::pair<Value, Value> lossTerms(GpuBuilder &b, Value row,
                                    const RowStats &stats, const Token &tok);
  /// Streams the chunks c = tid W + i T W < V of a row: kUnroll at a time
  /// (`body` issues their loads before their math) while they all fit, then
  /// one at a time; a peeled row's chunks from its head, then its single
  /// elements (width 1), one a thread. `body` maps the chunks' columns,
  /// their width and the carried values to the next carried values.
  using ChunkBody = function_ref<SmallVector<Value>(
      GpuBuilder &, ArrayRef<Value>, int64_t, ValueRange)>;
  SmallVector<Value> streamRow(GpuBuilder &b, ValueRange inits, ChunkBody body);
  /// Writes the gradient of `row` (pass 2).
  void writeGrad(GpuBuilder &b, Value row, Value out, const RowStats &stats,
                 const Token &tok, Value scaleCE, Value scaleZ);

  /// The one kernel of the group (and the finishing kernel of a reduced
  /// loss): the loss when the group has the forward op, the gradient when
  /// it has the backward op, both in one pass over the rows when it has
  /// both.
  FailureOr<rt::KernelSpec> buildKernel();
  void buildFinish(ArrayRef<Type> paramTypes, unsigned lossParam);
  gpu::GPUFuncOp createKernel(GpuBuilder &b, StringRef kname,
                              ArrayRef<Type> params, int64_t blockSize);

  FusionOp group;
  gpu::GPUModuleOp module;
  StringRef name;
  MLIRContext *ctx;
  Location loc;
  RowKernelConfig config;
  int64_t maxSharedMemoryBytes; // the target's, per CTA
  Operation *op = nullptr; // the first op (its attributes)
  bool withLoss = false, withGrad = false;
  CEAttrs attrs;
  Type elem, targetType, weightType, gradLossType;
  int64_t vocab = 0, width = 1, threads = 256, bytes = 4;
  /// The vocabulary is not a multiple of the width: rows are peeled
  /// (peelRow), and the current row's head and full-chunk span, and the
  /// next row's (the staged chunks' prefetch).
  bool peeled = false;
  Value rowHead, rowBody, nextHead, nextBody;
  // Kernel state while emitting one kernel.
  Value tid, smem, logits, target, weight;
  Value stage; // the staging area (stagedChunks > 0)
  int64_t smemSlots = 0; // f32 slots of the reduction area
  /// A loss + gradient kernel whose CTAs per SM are given (a reduced loss
  /// with ctas_per_sm set, as liger-select-kernel-config sets it for rows
  /// of 64 KiB or more, and reuse_loads not off) keeps each thread's first
  /// stagedChunks chunks of the row (the row's first stagedChunks x threads
  /// x width columns) in its share of the SM's shared memory between the
  /// passes, after the reduction area: pass 2 reads from memory only what
  /// did not fit (a 128256-wide bf16 row is 250 KiB; at one CTA per SM 14
  /// of a thread's 16 chunks fit in 227 KiB). Each thread reads back only
  /// what it wrote.
  int64_t stagedChunks = 0, stageOffset = 0;
  /// The CTA's next row, and whether it has one (the staged chunks'
  /// prefetch in the gradient pass).
  Value nextRow, hasNextRow;
};
} // namespace

gpu::GPUFuncOp CEBuilder::createKernel(GpuBuilder &b, StringRef kname,
                                       ArrayRef<Type> params,
                                       int64_t blockSize) {
  gpu::GPUFuncOp kernel = b.beginKernel(module, kname, params, blockSize);
  tid = b.threadId();
  smem = b.dynamicSharedMemory();
  return kernel;
}

Value CEBuilder::loadChunk(GpuBuilder &b, Value memref, ValueRange indices,
                           int64_t w, bool aligned) {
  Type e = cast<MemRefType>(memref.getType()).getElementType();
  int64_t eb = std::max<unsigned>(1, e.getIntOrFloatBitWidth() / 8);
  Value v = vector::LoadOp::create(
      b, loc, VectorType::get({w}, e), memref, indices,
      /*nontemporal=*/false,
      llvm::MaybeAlign(aligned ? std::min<int64_t>(16, w * eb) : eb));
  if (!e.isF32())
    v = arith::ExtFOp::create(b, loc, vecF32(w), v);
  return v;
}

std::pair<Value, Value> CEBuilder::peelRow(GpuBuilder &b, Value row) {
  Value w = b.index(width);
  Value misalign = arith::RemUIOp::create(
      b, loc, arith::MulIOp::create(b, loc, row, b.index(vocab % width)), w);
  Value head = arith::RemUIOp::create(
      b, loc, arith::SubIOp::create(b, loc, w, misalign), w);
  if (vocab < width - 1) // a row shorter than its head: single elements
    head = arith::MinUIOp::create(b, loc, head, b.index(vocab));
  Value body = arith::MulIOp::create(
      b, loc,
      arith::DivUIOp::create(
          b, loc, arith::SubIOp::create(b, loc, b.index(vocab), head), w),
      w);
  return {head, body};
}

Value CEBuilder::makeStageArea(GpuBuilder &b) {
  return b.sharedView(smem, stageOffset, {stagedChunks * threads * width},
                      elem);
}

Value CEBuilder::isStaged(GpuBuilder &b, Value off) {
  // The thread's chunk i sits at offset tid W + i T W of the row's chunks
  // (its column, unless the row is peeled): its first stagedChunks are the
  // row's first stagedChunks T W chunk elements, each kept at its offset.
  return arith::CmpIOp::create(b, loc, arith::CmpIPredicate::ult, off,
                               b.index(stagedChunks * threads * width));
}

Value CEBuilder::loadLogits(GpuBuilder &b, Value row, Value col, int64_t w) {
  if (!stagedChunks || w != width)
    return loadChunk(b, logits, {row, col}, w, /*aligned=*/true);
  auto rawType = VectorType::get({width}, elem);
  llvm::MaybeAlign align(std::min<int64_t>(16, width * bytes));
  Value off = offsetOf(b, col);
  auto pick = scf::IfOp::create(b, loc, TypeRange{rawType}, isStaged(b, off),
                                /*withElseRegion=*/true);
  OpBuilder tb = pick.getThenBodyBuilder(), eb = pick.getElseBodyBuilder();
  scf::YieldOp::create(tb, loc,
                       vector::LoadOp::create(tb, loc, rawType, stage,
                                              ValueRange{off}, false, align)
                           .getResult());
  scf::YieldOp::create(eb, loc,
                       vector::LoadOp::create(eb, loc, rawType, logits,
                                              ValueRange{row, col}, false,
                                              align)
                           .getResult());
  Value raw = pick.getResult(0);
  if (!elem.isF32())
    raw = arith::ExtFOp::create(b, loc, vecF32(width), raw);
  return raw;
}

Value CEBuilder::capped(GpuBuilder &b, Value x) {
  if (!attrs.softcap)
    return x;
  bool isVec = isa<VectorType>(x.getType());
  auto c = [&](double v) {
    return isVec ? splat(b, b.f32(v), x.getType()) : b.f32(v);
  };
  Value t = math::TanhOp::create(b, loc, div(b, x, c(*attrs.softcap)));
  return mul(b, c(*attrs.softcap), t);
}

SmallVector<Value> CEBuilder::blockReduce(GpuBuilder &b, ValueRange values,
                                          ArrayRef<double> neutral,
                                          GpuBuilder::Combine combine) {
  if (threads > 32)
    smemSlots = std::max(smemSlots,
                         GpuBuilder::blockReduceSlots(threads, values.size(),
                                                      kMaxValues));
  return b.blockAllReduce(smem, 0, kMaxValues, tid, threads, values, neutral,
                          combine);
}

CEBuilder::Token CEBuilder::readToken(GpuBuilder &b, Value row) {
  Value t = memref::LoadOp::create(b, loc, target, ValueRange{row});
  auto intC = [&](int64_t v) -> Value {
    return arith::ConstantOp::create(b, loc, b.getIntegerAttr(targetType, v));
  };
  auto cmp = [&](arith::CmpIPredicate p, Value x, Value y) -> Value {
    return arith::CmpIOp::create(b, loc, p, x, y);
  };
  Value yes = arith::ConstantOp::create(b, loc, b.getBoolAttr(true));
  Value ignored = cmp(arith::CmpIPredicate::eq, t, intC(attrs.ignoreIndex));
  Value inRange =
      arith::AndIOp::create(b, loc, cmp(arith::CmpIPredicate::sge, t, intC(0)),
                            cmp(arith::CmpIPredicate::slt, t, intC(vocab)));
  Value readable = arith::AndIOp::create(
      b, loc, inRange, arith::XOrIOp::create(b, loc, ignored, yes));
  Token tok;
  tok.index = b.select(
      readable, arith::IndexCastOp::create(b, loc, b.getIndexType(), t),
      b.index(0));
  Value one = b.f32(1.0), zero = b.f32(0.0);
  Value w = one;
  if (attrs.hasWeight) {
    w = memref::LoadOp::create(b, loc, weight, ValueRange{tok.index});
    if (!w.getType().isF32())
      w = arith::ExtFOp::create(b, loc, b.getF32Type(), w);
  }
  tok.readable = readable;
  tok.counted = b.select(ignored, zero, one);
  tok.ignored = ignored;
  tok.weightT = b.select(ignored, zero, w);
  tok.invalid = arith::XOrIOp::create(
      b, loc, arith::OrIOp::create(b, loc, ignored, inRange), yes);
  return tok;
}

CEBuilder::RowStats CEBuilder::rowStats(GpuBuilder &b, Value row, bool sumZ,
                                        bool sumWZ, bool sumW) {
  double lowest = std::numeric_limits<float>::lowest();
  SmallVector<Value> inits = {b.f32(lowest), b.f32(0.0)};
  SmallVector<double> neutral = {lowest, 0.0};
  for (bool want : {sumZ, sumWZ, sumW})
    if (want) {
      inits.push_back(b.f32(0.0));
      neutral.push_back(0.0);
    }
  SmallVector<Value> partial = streamRow(
      b, inits,
      [&](GpuBuilder &lb, ArrayRef<Value> cols, int64_t w, ValueRange acc) {
        SmallVector<Value> xs, ws;
        for (Value c : cols)
          xs.push_back(loadLogits(lb, row, c, w));
        if (sumWZ || sumW)
          for (Value c : cols)
            ws.push_back(loadChunk(lb, weight, {c}, w, !peeled));
        SmallVector<Value> zs;
        Value chunkMax;
        for (Value x : xs) {
          Value z = capped(lb, x);
          zs.push_back(z);
          Value mx = vector::ReductionOp::create(
              lb, loc, vector::CombiningKind::MAXIMUMF, z);
          chunkMax = chunkMax ? arith::MaximumFOp::create(lb, loc, chunkMax, mx)
                              : mx;
        }
        Value m = arith::MaximumFOp::create(lb, loc, acc[0], chunkMax);
        Value s = mul(lb, acc[1], exp(lb, sub(lb, acc[0], m)));
        for (Value z : zs)
          s = add(lb, s, reduceAdd(lb, expMinus(lb, z, m)));
        SmallVector<Value> next = {m, s};
        unsigned a = 2;
        if (sumZ) {
          Value t = acc[a++];
          for (Value z : zs)
            t = add(lb, t, reduceAdd(lb, z));
          next.push_back(t);
        }
        if (sumWZ) {
          Value t = acc[a++];
          for (auto [w, z] : llvm::zip(ws, zs))
            t = add(lb, t, reduceAdd(lb, mul(lb, w, z)));
          next.push_back(t);
        }
        if (sumW) {
          Value t = acc[a++];
          for (Value w : ws)
            t = add(lb, t, reduceAdd(lb, w));
          next.push_back(t);
        }
        return next;
      });
  SmallVector<Value> total = blockReduce(
      b, partial, neutral,
      [&](GpuBuilder &nb, ValueRange x, ValueRange y) {
        Value m = arith::MaximumFOp::create(nb, loc, x[0], y[0]);
        SmallVector<Value> r = {
            m, add(nb, mul(nb, x[1], exp(nb, sub(nb, x[0], m))),
                   mul(nb, y[1], exp(nb, sub(nb, y[0], m))))};
        for (size_t j = 2; j < x.size(); ++j)
          r.push_back(add(nb, x[j], y[j]));
        return r;
      });
  RowStats stats;
  stats.lse = add(b, total[0], math::LogOp::create(b, loc, total[1]));
  unsigned a = 2;
  if (sumZ)
    stats.sumZ = total[a++];
  if (sumWZ)
    stats.sumWZ = total[a++];
  if (sumW)
    stats.sumW = total[a++];
  return stats;
}

/// The per-token loss terms (the weighted cross-entropy part and the z-loss
/// part), NaN for an out-of-range target.
std::pair<Value, Value> CEBuilder::lossTerms(GpuBuilder &b, Value row,
                                             const RowStats &stats,
                                             const Token &tok) {
  Value xt = memref::LoadOp::create(b, loc, logits, ValueRange{row, tok.index});
  if (!xt.getType().isF32())
    xt = arith::ExtFOp::create(b, loc, b.getF32Type(), xt);
  Value lse = stats.lse;
  Value ce = mul(b, tok.weightT, sub(b, lse, capped(b, xt)));
  double eps = attrs.labelSmoothing;
  if (eps > 0.0) {
    // sum_v w_v (lse - z_v), or V lse - sum_v z_v without weights.
    Value smooth = attrs.hasWeight
                       ? sub(b, mul(b, lse, stats.sumW), stats.sumWZ)
                       : sub(b, mul(b, b.f32(double(vocab)), lse), stats.sumZ);
    smooth = mul(b, tok.counted, div(b, smooth, b.f32(double(vocab))));
    ce = add(b, mul(b, b.f32(1.0 - eps), ce), mul(b, b.f32(eps), smooth));
  }
  Value zl = mul(b, tok.counted,
                 mul(b, b.f32(attrs.lseSquareScale), mul(b, lse, lse)));
  Value nan = b.f32(std::numeric_limits<double>::quiet_NaN());
  return {b.select(tok.invalid, nan, ce), b.select(tok.invalid, nan, zl)};
}


SmallVector<Value> CEBuilder::streamRow(GpuBuilder &b, ValueRange inits,
                                        ChunkBody body) {
  int64_t step = threads * width;
  // Loops over the chunk offsets (the columns, unless the row is peeled).
  auto loopOver = [&](Value lb, Value ub, int64_t count, ValueRange init) {
    auto loop =
        scf::ForOp::create(b, loc, lb, ub, b.index(count * step), init);
    GpuBuilder lbld(loc, OpBuilder::atBlockBegin(loop.getBody()));
    SmallVector<Value> cols = {columnOf(lbld, loop.getInductionVar())};
    for (int64_t k = 1; k < count; ++k)
      cols.push_back(columnOf(
          lbld, arith::AddIOp::create(lbld, loc, loop.getInductionVar(),
                                      lbld.index(k * step))));
    SmallVector<Value> next = body(lbld, cols, width, loop.getRegionIterArgs());
    if (!init.empty()) // else the loop has its empty yield already
      scf::YieldOp::create(lbld, loc, next);
    return loop;
  };
  Value start = arith::MulIOp::create(b, loc, tid, b.index(width));
  SmallVector<Value> carried(inits.begin(), inits.end());
  // Main loop: kUnroll chunks while the last of them is in the row (its
  // full chunks when peeled).
  int64_t kUnroll = peeled ? kPeeledUnroll : ::kUnroll;
  int64_t mainEnd = vocab - (kUnroll - 1) * step;
  if (mainEnd > 0) {
    Value end = peeled ? arith::SubIOp::create(b, loc, rowBody,
                                               b.index((kUnroll - 1) * step))
                             .getResult()
                       : b.index(mainEnd);
    auto main = loopOver(start, end, kUnroll, carried);
    carried.assign(main.getResults().begin(), main.getResults().end());
    // Where it stopped: start + ceil((mainEnd - start) / (kUnroll step))
    // kUnroll step when it ran, else start.
    Value ran = arith::CmpIOp::create(
        b, loc, peeled ? arith::CmpIPredicate::slt : arith::CmpIPredicate::ult,
        start, peeled ? end : b.index(mainEnd));
    Value trips = arith::DivUIOp::create(
        b, loc,
        arith::AddIOp::create(
            b, loc,
            arith::SubIOp::create(b, loc, peeled ? end : b.index(mainEnd),
                                  start),
            b.index(kUnroll * step - 1)),
        b.index(kUnroll * step));
    start = b.select(ran,
                   arith::AddIOp::create(
                       b, loc, start,
                       arith::MulIOp::create(b, loc, trips,
                                             b.index(kUnroll * step))),
                   start);
  }
  auto tail = loopOver(start, peeled ? rowBody : b.index(vocab), 1, carried);
  carried.assign(tail.getResults().begin(), tail.getResults().end());
  if (!peeled)
    return carried;
  // A peeled row's single elements: its head, then what follows its full
  // chunks; element e is thread e's, at column e or e + body.
  Value singles = arith::SubIOp::create(b, loc, b.index(vocab), rowBody);
  auto one = scf::IfOp::create(
      b, loc, ValueRange(carried).getTypes(),
      arith::CmpIOp::create(b, loc, arith::CmpIPredicate::ult, tid, singles),
      /*withElseRegion=*/!carried.empty());
  GpuBuilder ob(loc, one.getThenBodyBuilder());
  Value inHead =
      arith::CmpIOp::create(ob, loc, arith::CmpIPredicate::ult, tid, rowHead);
  Value col =
      ob.select(inHead, tid, arith::AddIOp::create(ob, loc, tid, rowBody));
  SmallVector<Value> next = body(ob, {col}, 1, carried);
  if (carried.empty())
    return carried;
  scf::YieldOp::create(ob, loc, next);
  GpuBuilder eb(loc, one.getElseBodyBuilder());
  scf::YieldOp::create(eb, loc, carried);
  return SmallVector<Value>(one.getResults().begin(), one.getResults().end());
}

void CEBuilder::writeGrad(GpuBuilder &b, Value row, Value out,
                          const RowStats &stats, const Token &tok,
                          Value scaleCE, Value scaleZ) {
  // dz_v = p_v A - C w_v - [v = t] B with p_v = exp(z_v - lse), from
  //   the loss:      scaleCE (1 - eps) w_t (p_v - [v = t])
  //   smoothing:     scaleCE eps (p_v sum_u w_u - w_v) / V
  //   the z-loss:    scaleZ 2 lsq lse p_v
  // (w_v = 1 without class weights), times sech²(x_v / s) with a softcap.
  // The row's scalars are formed once: a chunk's gradient is a multiply
  // (and a subtraction with smoothing) per logit; the one-hot term is one
  // store after the row, by the thread that wrote the target's chunk. An
  // invalid target makes A NaN, so every gradient of its row is NaN.
  double eps = attrs.labelSmoothing;
  bool smoothing = eps > 0.0;
  Value B = mul(b, scaleCE, mul(b, b.f32(1.0 - eps), tok.weightT));
  Value A = B, C;
  if (smoothing) {
    C = mul(b, scaleCE, b.f32(eps / double(vocab)));
    Value wSum = attrs.hasWeight ? stats.sumW : b.f32(double(vocab));
    A = add(b, A, mul(b, C, wSum));
  }
  if (attrs.lseSquareScale > 0.0)
    A = add(b, A,
            mul(b, scaleZ, mul(b, b.f32(2.0 * attrs.lseSquareScale),
                               stats.lse)));
  A = b.select(tok.invalid,
             b.f32(std::numeric_limits<double>::quiet_NaN()), A);
  // The gradient of a logit x with weight w (both f32 scalars or vectors)
  // before the one-hot term.
  auto grad = [&](GpuBuilder &lb, Value x, Value w) -> Value {
    bool isVec = isa<VectorType>(x.getType());
    auto s = [&](Value v) { return isVec ? splat(lb, v, x.getType()) : v; };
    Value p = exp(lb, sub(lb, capped(lb, x), s(stats.lse)));
    Value dz = mul(lb, p, s(A));
    if (smoothing)
      dz = sub(lb, dz, w ? mul(lb, s(C), w) : s(C));
    return dz;
  };
  // sech²(x / s) as 4e / (1 + e)² with e = exp(-2 |x / s|): 1 - tanh²
  // cancels where tanh saturates.
  auto capFactor = [&](GpuBuilder &lb, Value dz, Value x) -> Value {
    if (!attrs.softcap)
      return dz;
    bool isVec = isa<VectorType>(x.getType());
    auto c = [&](double v) {
      return isVec ? splat(lb, lb.f32(v), x.getType()) : lb.f32(v);
    };
    Value a = math::AbsFOp::create(lb, loc, div(lb, x, c(*attrs.softcap)));
    Value e = exp(lb, mul(lb, c(-2.0), a));
    Value onePlus = add(lb, c(1.0), e);
    return mul(lb, dz, div(lb, mul(lb, c(4.0), e), mul(lb, onePlus, onePlus)));
  };
  // The target's logit, read before any gradient is written over it.
  Value xt = memref::LoadOp::create(b, loc, logits, ValueRange{row, tok.index});
  if (!xt.getType().isF32())
    xt = arith::ExtFOp::create(b, loc, b.getF32Type(), xt);
  // Whether the next row stages the chunk at offset `off`, and its column
  // there.
  auto nextStages = [&](GpuBuilder &lb, Value off) -> Value {
    Value staged = isStaged(lb, off);
    if (peeled)
      staged = arith::AndIOp::create(
          lb, loc, staged,
          arith::CmpIOp::create(lb, loc, arith::CmpIPredicate::ult, off,
                                nextBody));
    return arith::AndIOp::create(lb, loc, hasNextRow, staged);
  };
  auto nextColumn = [&](GpuBuilder &lb, Value off) -> Value {
    return peeled ? arith::AddIOp::create(lb, loc, nextHead, off) : off;
  };
  streamRow(
      b, {}, [&](GpuBuilder &lb, ArrayRef<Value> cols, int64_t w, ValueRange) {
        // Every load of the chunks first (an in-place gradient overwrites only
        // this thread's own chunks, after reading them).
        SmallVector<Value> xs, ws;
        for (Value c : cols)
          xs.push_back(loadLogits(lb, row, c, w));
        if (smoothing && attrs.hasWeight)
          for (Value c : cols)
            ws.push_back(loadChunk(lb, weight, {c}, w, !peeled));
        for (auto [k, c] : llvm::enumerate(cols)) {
          Value dz = capFactor(
              lb, grad(lb, xs[k], ws.empty() ? Value() : ws[k]), xs[k]);
          if (!elem.isF32())
            dz = arith::TruncFOp::create(lb, loc, VectorType::get({w}, elem),
                                         dz);
          vector::StoreOp::create(
              lb, loc, dz, out, ValueRange{row, c}, /*nontemporal=*/false,
              llvm::MaybeAlign(std::min<int64_t>(16, w * bytes)));
        }
        // The next row's staged chunks into the slots just read (their values
        // consumed by the stores above): its loads overlap this row's work.
        if (stagedChunks && w == width)
          for (Value c : cols) {
            Value off = offsetOf(lb, c);
            auto next = scf::IfOp::create(lb, loc, nextStages(lb, off), false);
            GpuBuilder nb(loc, next.getThenBodyBuilder());
            stageChunk(nb, nextRow, nextColumn(nb, off), off);
          }
        return SmallVector<Value>();
      });
  if (stagedChunks && peeled) {
    // The next row may have one chunk more than this one (its head is
    // shorter): the thread that owns that offset stages it.
    Value owner = arith::RemUIOp::create(
        b, loc, arith::DivUIOp::create(b, loc, rowBody, b.index(width)),
        b.index(threads));
    auto extra = scf::IfOp::create(
        b, loc,
        arith::AndIOp::create(
            b, loc,
            arith::CmpIOp::create(b, loc, arith::CmpIPredicate::eq, tid, owner),
            nextStages(b, rowBody)),
        false);
    GpuBuilder eb(loc, extra.getThenBodyBuilder());
    stageChunk(eb, nextRow, nextColumn(eb, rowBody), rowBody);
  }
  if (stagedChunks)
    b.asyncCopyCommit();
  // The one-hot term: the thread whose chunk holds the target (chunk t / W
  // of the row belongs to thread (t / W) mod T; in a peeled row chunk
  // (t - head) / W, or single element t or t - body) rewrites that
  // gradient, after its own store of it.
  Value owner;
  if (!peeled) {
    owner = arith::RemUIOp::create(
        b, loc, arith::DivUIOp::create(b, loc, tok.index, b.index(width)),
        b.index(threads));
  } else {
    Value off = arith::SubIOp::create(b, loc, tok.index, rowHead);
    Value inChunks =
        arith::CmpIOp::create(b, loc, arith::CmpIPredicate::ult, off, rowBody);
    Value chunkOwner = arith::RemUIOp::create(
        b, loc, arith::DivUIOp::create(b, loc, off, b.index(width)),
        b.index(threads));
    Value inHead = arith::CmpIOp::create(b, loc, arith::CmpIPredicate::ult,
                                         tok.index, rowHead);
    Value single = b.select(inHead, tok.index,
                          arith::SubIOp::create(b, loc, tok.index, rowBody));
    owner = b.select(inChunks, chunkOwner, single);
  }
  Value mine = arith::AndIOp::create(
      b, loc, tok.readable,
      arith::CmpIOp::create(b, loc, arith::CmpIPredicate::eq, tid, owner));
  auto fix = scf::IfOp::create(b, loc, mine, false);
  GpuBuilder fb(loc, fix.getThenBodyBuilder());
  Value wt = smoothing && attrs.hasWeight ? tok.weightT : Value();
  Value dzt = capFactor(fb, sub(fb, grad(fb, xt, wt), B), xt);
  if (!elem.isF32())
    dzt = arith::TruncFOp::create(fb, loc, elem, dzt);
  memref::StoreOp::create(fb, loc, dzt, out, ValueRange{row, tok.index});
}

FailureOr<rt::KernelSpec> CEBuilder::buildKernel() {
  bool reduced = attrs.reduction != Reduction::none;
  bool mean = attrs.reduction == Reduction::mean;
  bool smoothing = attrs.labelSmoothing > 0.0;
  bool partials = withLoss && reduced;
  auto f32Type = Float32Type::get(ctx);
  auto rowsType = MemRefType::get({ShapedType::kDynamic, vocab}, elem);
  auto lossType = reduced ? MemRefType::get({}, f32Type)
                          : MemRefType::get({ShapedType::kDynamic}, f32Type);
  rt::KernelSpec info;
  info.name = name.str();
  info.block[0] = threads;
  info.vectorWidth = width;
  info.kernelTemplate = rt::KernelTemplate::CrossEntropy;
  for (Operation &o : group.getBody().front().without_terminator())
    info.ops += (info.ops.empty() ? "" : ", ") +
                o.getName().getStringRef().str();
  // Parameters in the group's order: logits, target, then the weight and
  // the incoming gradient (in the backward op's order, grad_loss first,
  // when it is alone); the outputs; the partials of a reduced loss.
  SmallVector<Type> params;
  auto param = [&](StringRef pname, rt::ParamRole role, rt::ParamKind kind,
                   Type type, int64_t length, Type memref) {
    info.params.push_back(abiParam(pname.str(), role, kind, type, length));
    params.push_back(memref);
    return params.size() - 1;
  };
  rt::ParamKind lossKind =
      reduced ? rt::ParamKind::Scalar : rt::ParamKind::RowScalars;
  unsigned inputs = 0;
  auto input = [&](rt::ParamKind kind, Type type, int64_t length, Type memref) {
    return param("input" + std::to_string(inputs++), rt::ParamRole::Input,
                 kind, type, length, memref);
  };
  input(rt::ParamKind::Rows, elem, vocab, rowsType);
  input(rt::ParamKind::RowScalars, targetType, 0,
        MemRefType::get({ShapedType::kDynamic}, targetType));
  std::optional<unsigned> weightParam, gradLossParam;
  auto weightInput = [&] {
    weightParam = input(rt::ParamKind::Feature, weightType, vocab,
                        MemRefType::get({vocab}, weightType));
  };
  if (withLoss && attrs.hasWeight)
    weightInput();
  if (withGrad)
    gradLossParam = input(lossKind, f32Type, 0, lossType);
  if (!withLoss && attrs.hasWeight)
    weightInput();
  unsigned outputs = 0;
  auto output = [&](rt::ParamKind kind, Type type, int64_t length,
                    Type memref) {
    return param("output" + std::to_string(outputs++), rt::ParamRole::Output,
                 kind, type, length, memref);
  };
  std::optional<unsigned> lossParam, zParam, gradParam;
  if (withLoss) {
    lossParam = output(lossKind, f32Type, 0, lossType);
    if (attrs.returnZLoss)
      zParam = output(lossKind, f32Type, 0, lossType);
  }
  if (withGrad)
    gradParam = output(rt::ParamKind::Rows, elem, vocab, rowsType);
  if (partials) {
    param("workspace0", rt::ParamRole::Workspace, rt::ParamKind::Partials,
          f32Type, 4, MemRefType::get({ShapedType::kDynamic, 4}, f32Type));
  }

  // Staging (see stagedChunks) after the largest reduction area, 16-byte
  // aligned.
  // cp.async (with its L1 bypass) copies 16-byte chunks only: narrower
  // ones (a pinned width, or bf16 logits narrowed to f32 class weights'
  // chunks) are read from memory in both passes.
  if (withGrad && partials && config.ctasPerSm && config.reuseLoads &&
      width * bytes == 16) {
    int64_t chunkBytes = width * bytes;
    int64_t perThread = (vocab / width + threads - 1) / threads;
    int64_t share = sharedMemoryShare(maxSharedMemoryBytes, config.ctasPerSm);
    stageOffset =
        (GpuBuilder::blockReduceSlots(threads, kMaxValues, kMaxValues) * 4 + 15) /
        16 * 16;
    stagedChunks = std::max<int64_t>(
        0, std::min(perThread, (share - stageOffset) / (threads * chunkBytes)));
  }

  GpuBuilder b(loc, OpBuilder(ctx));
  gpu::GPUFuncOp kernel = createKernel(b, name, params, threads);
  // A peeled kernel may take 128 registers a thread (at least 512 /
  // threads CTAs an SM; 64 at 1024 threads): unbounded, ptxas gave the
  // gradient over 262147 bf16 48 registers and spilled.
  if (peeled)
    kernel->setAttr("nvvm.minctasm",
                    b.getI32IntegerAttr(std::max<int64_t>(1, 512 / threads)));
  Block &entry = kernel.getBody().front();
  if (stagedChunks)
    stage = makeStageArea(b);
  logits = entry.getArgument(0);
  target = entry.getArgument(1);
  weight = weightParam ? entry.getArgument(*weightParam) : Value();
  Value rows = memref::DimOp::create(b, loc, logits, 0);
  Value cta = gpu::BlockIdOp::create(b, loc, gpu::Dimension::x);
  Value isThread0 =
      arith::CmpIOp::create(b, loc, arith::CmpIPredicate::eq, tid, b.index(0));

  // The first row's staged chunks, in flight while the totals below are
  // added up.
  if (stagedChunks) {
    auto first = scf::IfOp::create(
        b, loc,
        arith::CmpIOp::create(b, loc, arith::CmpIPredicate::ult, cta, rows),
        false);
    GpuBuilder fb(loc, first.getThenBodyBuilder());
    if (peeled)
      std::tie(rowHead, rowBody) = peelRow(fb, cta);
    for (int64_t i = 0; i < stagedChunks; ++i) {
      Value off = arith::AddIOp::create(
          fb, loc, arith::MulIOp::create(fb, loc, tid, fb.index(width)),
          fb.index(i * threads * width));
      auto in = scf::IfOp::create(
          fb, loc,
          arith::CmpIOp::create(fb, loc, arith::CmpIPredicate::ult, off,
                                peeled ? rowBody : fb.index(vocab)),
          false);
      GpuBuilder ib(loc, in.getThenBodyBuilder());
      stageChunk(ib, cta, columnOf(ib, off), off);
    }
    b.asyncCopyCommit();
  }

  // The gradient with mean: the counted weight and the counted tokens of
  // the whole batch, before any row.
  Value weightSum, count;
  if (withGrad && mean) {
    Value zero = b.f32(0.0);
    auto scan = scf::ForOp::create(b, loc, tid, rows, b.index(threads),
                                   ValueRange{zero, zero});
    {
      GpuBuilder lb(loc, OpBuilder::atBlockBegin(scan.getBody()));
      Token tok = readToken(lb, scan.getInductionVar());
      scf::YieldOp::create(
          lb, loc,
          ValueRange{add(lb, scan.getRegionIterArgs()[0], tok.weightT),
                     add(lb, scan.getRegionIterArgs()[1], tok.counted)});
    }
    SmallVector<Value> totals = addAll(b, scan.getResults());
    weightSum = totals[0];
    count = totals[1];
  }

  // The rows, with a stride of the grid (one row per CTA for a per-token
  // loss); a reduced loss carries its four sums.
  Value stride = gpu::GridDimOp::create(b, loc, gpu::Dimension::x);
  SmallVector<Value> sums;
  if (partials)
    sums.assign(4, b.f32(0.0));
  auto rowLoop = scf::ForOp::create(b, loc, cta, rows, stride, sums);
  {
    GpuBuilder rb(loc, OpBuilder::atBlockBegin(rowLoop.getBody()));
    Value row = rowLoop.getInductionVar();
    if (peeled)
      std::tie(rowHead, rowBody) = peelRow(rb, row);
    if (stagedChunks) {
      // This row's staged chunks (this thread's own copies) have landed.
      rb.asyncCopyWait(0);
      nextRow = arith::AddIOp::create(rb, loc, row, stride);
      hasNextRow = arith::CmpIOp::create(rb, loc, arith::CmpIPredicate::ult,
                                         nextRow, rows);
      if (peeled)
        std::tie(nextHead, nextBody) = peelRow(rb, nextRow);
    }
    RowStats stats =
        rowStats(rb, row, withLoss && smoothing && !attrs.hasWeight,
                 withLoss && smoothing && attrs.hasWeight,
                 smoothing && attrs.hasWeight);
    Token tok = readToken(rb, row);
    SmallVector<Value> next;
    if (withLoss) {
      auto [ce, zl] = lossTerms(rb, row, stats, tok);
      if (partials) {
        ValueRange acc = rowLoop.getRegionIterArgs();
        next = {add(rb, acc[0], ce), add(rb, acc[1], zl),
                add(rb, acc[2], tok.weightT), add(rb, acc[3], tok.counted)};
      } else {
        auto store = scf::IfOp::create(rb, loc, isThread0, false);
        GpuBuilder sb(loc, store.getThenBodyBuilder());
        memref::StoreOp::create(sb, loc, add(sb, ce, zl),
                                entry.getArgument(*lossParam), ValueRange{row});
        if (zParam)
          memref::StoreOp::create(sb, loc, zl, entry.getArgument(*zParam),
                                  ValueRange{row});
      }
    }
    if (withGrad) {
      // Every thread has read the target's logit (lossTerms) before the
      // thread owning that column may write an in-place gradient over it.
      if (withLoss)
        gpu::BarrierOp::create(rb, loc);
      Value gradLoss = entry.getArgument(*gradLossParam);
      Value g = reduced
                    ? memref::LoadOp::create(rb, loc, gradLoss, ValueRange{})
                    : memref::LoadOp::create(rb, loc, gradLoss, ValueRange{row});
      // An ignored row's scales are 0, whatever the incoming gradient and
      // the totals: with no counted token at all (totals 0) the gradient is
      // zero, as in PyTorch, not 0/0. (The clamp to the smallest normal f32
      // changes only totals of subnormal class weights.)
      Value gc = rb.select(tok.ignored, rb.f32(0.0), g);
      auto share = [&](Value total) -> Value {
        return mean ? div(rb, gc,
                          arith::MaximumFOp::create(
                              rb, loc, total,
                              rb.f32(std::numeric_limits<float>::min())))
                    : gc;
      };
      writeGrad(rb, row, entry.getArgument(*gradParam), stats, tok,
                share(weightSum), share(count));
    }
    if (partials)
      scf::YieldOp::create(rb, loc, next);
  }
  if (partials) {
    Value ws = entry.getArguments().back();
    auto store = scf::IfOp::create(b, loc, isThread0, false);
    GpuBuilder sb(loc, store.getThenBodyBuilder());
    for (int64_t j = 0; j < 4; ++j)
      memref::StoreOp::create(sb, loc, rowLoop.getResult(j), ws,
                              ValueRange{cta, sb.index(j)});
  }
  gpu::ReturnOp::create(b, loc);

  if (partials) {
    // 4 CTAs per SM by default: rows enough in flight to stream the
    // logits, few partials for the finishing kernel.
    info.grid[0] = {rt::GridDim::Ctas, 1};
    info.ctasPerSm = config.ctasPerSm ? config.ctasPerSm : 4;
    buildFinish(params, *lossParam);
    info.finish.name = (name + "_finish").str();
    info.finish.grid = 1;
    info.finish.block[0] = threads;
  } else if (!withLoss) {
    // The gradient alone: a fixed grid, so that the mean's totals are added
    // up once per CTA, not once per row.
    info.grid[0] = {rt::GridDim::Const, kGradCtas};
  } // else one CTA per row ("rows")
  info.dynamicSharedMemoryBytes =
      stagedChunks ? stageOffset + stagedChunks * threads * width * bytes
                   : smemSlots * 4;
  if (partials)
    info.finish.dynamicSharedMemoryBytes = smemSlots * 4;
  return info;
}

void CEBuilder::buildFinish(ArrayRef<Type> paramTypes, unsigned lossParam) {
  GpuBuilder b(loc, OpBuilder(ctx));
  gpu::GPUFuncOp kernel =
      createKernel(b, (name + "_finish").str(), paramTypes, threads);
  Block &entry = kernel.getBody().front();
  Value lossOut = entry.getArgument(lossParam);
  Value zOut = attrs.returnZLoss ? entry.getArgument(lossParam + 1) : Value();
  Value partials = entry.getArguments().back();
  Value ctas = memref::DimOp::create(b, loc, partials, 0);
  Value zero = b.f32(0.0);
  auto loop = scf::ForOp::create(b, loc, tid, ctas, b.index(threads),
                                 ValueRange{zero, zero, zero, zero});
  {
    GpuBuilder lb(loc, OpBuilder::atBlockBegin(loop.getBody()));
    SmallVector<Value> next;
    for (int64_t j = 0; j < 4; ++j)
      next.push_back(add(
          lb, loop.getRegionIterArgs()[j],
          memref::LoadOp::create(lb, loc, partials,
                                 ValueRange{loop.getInductionVar(),
                                            lb.index(j)})));
    scf::YieldOp::create(lb, loc, next);
  }
  SmallVector<Value> total = addAll(b, loop.getResults());
  Value isThread0 =
      arith::CmpIOp::create(b, loc, arith::CmpIPredicate::eq, tid, b.index(0));
  auto store = scf::IfOp::create(b, loc, isThread0, false);
  GpuBuilder sb(loc, store.getThenBodyBuilder());
  Value loss, z;
  if (attrs.reduction == Reduction::mean) {
    // The weighted part over the counted weight, the z-loss over the
    // counted tokens (0/0 = NaN when every token is ignored, as PyTorch).
    z = div(sb, total[1], total[3]);
    loss = add(sb, div(sb, total[0], total[2]), z);
  } else {
    z = total[1];
    loss = add(sb, total[0], total[1]);
  }
  memref::StoreOp::create(sb, loc, loss, lossOut, ValueRange{});
  if (zOut)
    memref::StoreOp::create(sb, loc, z, zOut, ValueRange{});
  gpu::ReturnOp::create(b, loc);
}

FailureOr<rt::KernelSpec> CEBuilder::build() {
  Block &body = group.getBody().front();
  auto fail = [&](const Twine &why) {
    return group.emitOpError("cannot be lowered to a cross-entropy kernel: ")
           << why;
  };
  // One forward op, one backward op, or the forward op then its backward op
  // on the same logits, targets and weights (the loss and its gradient in
  // one pass over the rows).
  SmallVector<Operation *> ops;
  for (Operation &o : body.without_terminator())
    ops.push_back(&o);
  auto forward = ops.empty() ? CrossEntropyOp() : dyn_cast<CrossEntropyOp>(ops[0]);
  auto backward = dyn_cast<CrossEntropyGradOp>(ops.back());
  bool shapeOk = (ops.size() == 1 && (forward || backward)) ||
                 (ops.size() == 2 && forward && backward);
  if (!shapeOk)
    return fail("it must hold one liger.cross_entropy, one "
                "liger.cross_entropy_grad, or a cross_entropy followed by "
                "its cross_entropy_grad");
  withLoss = static_cast<bool>(forward);
  withGrad = static_cast<bool>(backward);
  op = ops.front();
  // The group inputs, in order: logits, target, then the operands the ops
  // add (weight, grad_loss; grad_loss, weight for the backward op alone).
  SmallVector<Value> expected;
  for (Operation *o : ops)
    for (Value v : o->getOperands())
      if (!llvm::is_contained(expected, v))
        expected.push_back(v);
  if (ValueRange(expected) != ValueRange(body.getArguments()))
    return fail("its ops must read the group inputs in order");
  SmallVector<Value> results;
  for (Operation *o : ops)
    results.append(o->result_begin(), o->result_end());
  if (ValueRange(body.getTerminator()->getOperands()) != ValueRange(results))
    return fail("the group must yield the ops' results in order");
  auto logitsType = cast<RankedTensorType>(op->getOperand(0).getType());
  if (logitsType.getRank() != 2 || logitsType.isDynamicDim(1))
    return fail("the logits must be [N, V] with a static V");
  elem = logitsType.getElementType();
  vocab = logitsType.getDimSize(1);
  targetType = cast<RankedTensorType>(op->getOperand(1).getType())
                   .getElementType();
  if (forward && backward &&
      (!differingLossAttribute(forward, backward).empty() ||
       backward.getLogits() != forward.getLogits() ||
       backward.getTarget() != forward.getTarget() ||
       backward.getWeight() != forward.getWeight()))
    return fail("the gradient must be of the loss in the group (the same "
                "logits, targets, weights and attributes)");
  attrs = forward ? readAttrs(forward) : readAttrs(backward);
  attrs.returnZLoss = forward && forward.getReturnZLoss();
  if (Value w = forward ? forward.getWeight() : backward.getWeight())
    weightType = cast<RankedTensorType>(w.getType()).getElementType();
  bytes = std::max<unsigned>(1, elem.getIntOrFloatBitWidth() / 8);
  // The configuration's vector width follows the row templates' rule
  // (checkRowVectorWidth); liger-select-kernel-config's default is the
  // widest it allows, narrowed here to fit the class weights' chunk in 16
  // bytes.
  int64_t weightBytes =
      weightType ? std::max<unsigned>(1, weightType.getIntOrFloatBitWidth() / 8)
                 : 1;
  width = config.vectorWidth;
  std::string why =
      checkRowVectorWidth(RowTemplate::CrossEntropy, vocab, elem, width);
  if (!why.empty())
    return fail(why);
  while (width * weightBytes > 16)
    width /= 2;
  peeled = vocab % width != 0;
  threads = config.threads;
  return buildKernel();
}

FailureOr<rt::KernelSpec>
mlir::liger::buildCrossEntropyKernel(FusionOp group, gpu::GPUModuleOp module,
                                     StringRef name,
                                     const RowKernelConfig &config,
                                     int64_t maxSharedMemoryBytes) {
  return CEBuilder(group, module, name, config, maxSharedMemoryBytes).build();
}
