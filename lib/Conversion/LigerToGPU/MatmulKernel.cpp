//===- MatmulKernel.cpp - matmul groups as Tensor Core kernels ------------===//
//
// The matmul templates: y = f(x̂ · W₁ᵀ + b₁[, x̂ · W₂ᵀ + b₂]) for a group
// holding one `liger.linear` (or `liger.lora_linear`), or two on the same
// input (a gate/up pair), each W [N, K], K-major as PyTorch stores it, with
// an elementwise f, where x̂ is the group's x or RMSNorm(x). Two main loops
// share the rest (parameters, epilogue, stores); docs/Design/GPU-Lowering.md
// has the whole design.
//
// wgmma + TMA (sm_90a, emitWgmma): a producer warpgroup issues TMA copies
// of 128-byte-swizzled x and W tiles into a ring of stages guarded by
// full/empty mbarriers; one consumer warpgroup per 64 rows issues
// wgmma.mma_async from shared-memory descriptors, f32 accumulators in
// registers; descriptors are by-value kernel parameters. The RMSNorm
// prologue rescales each x tile in place (x ⊙ g) and scales rows by rstd
// in the epilogue; LoRA accumulates x · Aᵀ alongside and adds t · Bᵀ with
// register-A wgmmas after the loop.
//
// mma.sync (sm_80 and later, emitMmaSync; the fallback):
//
//  - a CTA computes a tile_m x tile_n tile of y; its warps split it into
//    64-row x (tile_n / warps_n)-column warp tiles of m16n8k16 MMAs whose f32
//    accumulators live in registers for the whole K loop;
//  - tile_k-wide slices of x and W go global -> shared with cp.async
//    (16-byte chunks, out-of-range rows zero-filled with a clamped address)
//    through a ring of `stages` buffers, `stages - 1` slices ahead;
//  - shared -> registers with ldmatrix (rows padded by 16 bytes, so the 8
//    rows an ldmatrix reads fall in distinct banks);
//  - bf16 MMAs are emitted as nvvm.mma.sync on i32-packed pairs (upstream's
//    nvgpu.mma.sync cannot lower bf16 in MLIR 22);
//  - a gate/up pair keeps one accumulator set per projection, from the
//    same x fragments.
//
// Both epilogues add the bias in f32, round the accumulators to the
// projections' dtype (as liger.linear does), apply the group's elementwise
// ops (residual add, mul, SiLU, GELU, SwiGLU/GeGLU of the pair: their
// reference lowering, on pairs of columns, reading [rows, N] and [N] inputs
// at the pair) and store pairs of columns, masked at the row and column
// ends.
//
// Grid: (ceil(N / tile_n), ceil(rows / tile_m)); the wgmma kernels remap
// the CTA index so that groups of 8 row tiles run together (L2 reuse of the
// weight tiles).
//
//===----------------------------------------------------------------------===//

#include "liger/Conversion/LigerToGPU/MatmulKernel.h"
#include "liger/Conversion/LigerToLinalg/LigerToLinalg.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/LLVMIR/NVVMDialect.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/NVGPU/IR/NVGPUDialect.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"
#include "mlir/IR/IRMapping.h"
#include "mlir/Transforms/DialectConversion.h"

using namespace mlir;
using namespace mlir::liger;

namespace {
class MatmulKernelBuilder {
public:
  MatmulKernelBuilder(FusionOp group, const MatmulKernelConfig &config)
      : group(group), config(config), ctx(group.getContext()),
        loc(group.getLoc()) {}

  FailureOr<RowKernelInfo> build(gpu::GPUModuleOp module, StringRef name);

private:
  /// What the template does not implement is a warning: the group stays
  /// for a later template, the rest of the module compiles.
  LogicalResult fail(const Twine &why) {
    group.emitWarning("left for a later matmul template: ") << why;
    return failure();
  }
  Value idx(OpBuilder &b, int64_t v) {
    return arith::ConstantIndexOp::create(b, loc, v);
  }
  Value add(OpBuilder &b, Value x, Value y) {
    return arith::AddIOp::create(b, loc, x, y);
  }
  Value mul(OpBuilder &b, Value x, int64_t y) {
    return arith::MulIOp::create(b, loc, x, idx(b, y));
  }
  Value div(OpBuilder &b, Value x, int64_t y) {
    return arith::DivUIOp::create(b, loc, x, idx(b, y));
  }
  Value rem(OpBuilder &b, Value x, int64_t y) {
    return arith::RemUIOp::create(b, loc, x, idx(b, y));
  }
  Value lessThan(OpBuilder &b, Value x, Value y) {
    return arith::CmpIOp::create(b, loc, arith::CmpIPredicate::ult, x, y);
  }
  /// cp.async of slice `kt` of x and W into ring buffer `stage`, then one
  /// commit group (slices past the end are zero-filled, so that every
  /// iteration commits exactly one group).
  void loadSlice(OpBuilder &b, Value stage, Value kt);
  /// Emits `total` 16-byte cp.async chunks over the CTA's threads (thread
  /// t takes chunks t, t + threads, ...); threads past the end take none
  /// (a zero-byte copy still writes its 16 bytes). `chunk(b, c)` emits
  /// chunk c.
  void forEachChunk(OpBuilder &b, int64_t total,
                    function_ref<void(OpBuilder &, Value)> chunk);
  /// One chunk: 8 elements from `src` at `srcIdx` (a readable, clamped
  /// address) into `dst` at `dstIdx`, zero-filled unless `valid`.
  void copyChunk(OpBuilder &b, Value dst, ValueRange dstIdx, Value src,
                 ValueRange srcIdx, Value valid) {
    nvgpu::DeviceAsyncCopyOp::create(
        b, loc, nvgpu::DeviceAsyncTokenType::get(ctx), dst, dstIdx, src,
        srcIdx, b.getIndexAttr(8),
        arith::SelectOp::create(b, loc, valid, idx(b, 8), idx(b, 0)),
        b.getUnitAttr());
  }
  /// Row `row` of an ldmatrix fragment as an MMA operand: bf16 pairs packed
  /// in an i32, f16 pairs as vector<2xf16>.
  Value toI32(OpBuilder &b, Value fragment, int64_t row);
  /// A bf16/f16 pair as an MMA operand register: an i32 (bf16 always; f16
  /// with `asI32`, as wgmma's inline PTX takes it) or vector<2xf16>.
  Value operandOf(OpBuilder &b, Value pair, bool asI32 = false);
  /// The f32 pair (lo, hi), times `scale` if given, rounded to the dtype
  /// as an MMA operand register (LoRA's t = round(rstd · x̂Aᵀ)).
  Value packPair(OpBuilder &b, Value lo, Value hi, Value scale,
                 bool asI32 = false);
  /// The ops after the projections as linalg on a scratch function
  /// @epilogue(%projections..., %other inputs...), checked to be
  /// elementwise.
  LogicalResult lowerEpilogue();
  /// The epilogue on the rounded pairs of the projections at row `r`,
  /// columns `c` and c + 1; returns the pair to store.
  FailureOr<Value> applyEpilogue(OpBuilder &b, ValueRange projected, Value r,
                                 Value c);
  /// Rounds the f32 accumulator pairs (one vector<2xf32> per projection)
  /// of row `r`, columns `c` and c + 1, applies the epilogue and stores the
  /// pair, masked at the row and column ends.
  /// `sink`, when given, stores the pair instead (the TMA-store epilogue
  /// stages it in shared memory).
  using PairSink = function_ref<void(OpBuilder &, Value pair)>;
  LogicalResult storePair(OpBuilder &b, ArrayRef<Value> accPairs, Value r,
                          Value c, PairSink sink = nullptr);
  /// Sets m0 and n0 to the origin of tile `pid` of `numM` x ceil(N /
  /// tile_n) tiles, in groups of `groupM` row tiles: CTAs running together
  /// take groupM row tiles times a run of column tiles, so that the weight
  /// tiles they share stay in L2 (row-major order streams all of W from
  /// memory once per row tile). The mma.sync kernels keep row-major order
  /// (groupM = 1): the remapping's registers tip the gate/up kernel into
  /// spills there.
  void setTileOrigin(OpBuilder &b, Value pid, Value numM, int64_t groupM);
  /// The RMSNorm prologue on a chunk of x, 8 f32 values at K index `gk`:
  /// x ⊙ (g + offset) rounded to the operand dtype.
  Value normScaled(OpBuilder &b, Value xv, Value gk) {
    auto v8 = [](Type t) { return VectorType::get({8}, t); };
    Type f32 = b.getF32Type();
    Type gElem = cast<MemRefType>(g.getType()).getElementType();
    Value gf = vector::LoadOp::create(b, loc, v8(gElem), g, ValueRange{gk},
                                      false, llvm::MaybeAlign(16));
    if (!gElem.isF32())
      gf = arith::ExtFOp::create(b, loc, v8(f32), gf);
    double offset = norm.getOffset().convertToDouble();
    if (offset != 0.0)
      gf = arith::AddFOp::create(
          b, loc, gf,
          arith::ConstantOp::create(
              b, loc, DenseElementsAttr::get(v8(f32), b.getF32FloatAttr(offset))));
    return arith::TruncFOp::create(b, loc, v8(elem),
                                   arith::MulFOp::create(b, loc, xv, gf));
  }
  /// Σ x² of a chunk of x (f32), added to `acc` when given.
  Value sumOfSquares(OpBuilder &b, Value xv, Value acc = Value()) {
    return vector::ReductionOp::create(b, loc, vector::CombiningKind::ADD,
                                       arith::MulFOp::create(b, loc, xv, xv),
                                       acc);
  }
  /// rsqrt(sum / K + eps) of a row's sum of squares (the RMSNorm prologue).
  Value rowRstd(OpBuilder &b, Value sumOfSquares) {
    Value mean = arith::MulFOp::create(
        b, loc, sumOfSquares,
        arith::ConstantOp::create(b, loc, b.getF32FloatAttr(1.0 / k)));
    return math::RsqrtOp::create(
        b, loc,
        arith::AddFOp::create(
            b, loc, mean,
            arith::ConstantOp::create(
                b, loc, b.getF32FloatAttr(norm.getEps().convertToDouble()))));
  }
  /// The mma.sync main loop and epilogue (sm_80 and later).
  LogicalResult emitMmaSync(OpBuilder &b);
  /// The TMA + mbarrier + wgmma main loop and epilogue (sm_90a).
  LogicalResult emitWgmma(OpBuilder &b, ValueRange descriptors);
  /// The gradient products read MN-major operands (see MatmulShape).
  bool aMN() const { return layout == Layout::gradWeight; }
  bool bMN() const { return layout != Layout::forward; }
  /// The body of a gradient product (one linear_grad_input or
  /// linear_grad_weight on the group's inputs): sets the layout, the
  /// projection and the sizes.
  LogicalResult takeGradient(Operation *op);
  /// The rules every body shares, once elem and k are set: bf16/f16
  /// operands; wgmma reads 128-byte slices of K and TMA 16-byte rows of a
  /// static K (zero-filling the tail); mma.sync whole tile_k slices of it.
  LogicalResult checkElementAndK();
  /// The body of a q/k projection pair with RoPE: rope(split(x̂ · Wqᵀ),
  /// split(x̂ · Wkᵀ), cos, sin), the head splits being expand_shape +
  /// transpose [B, T, H·D] -> [B, H, T, D]. The kernel computes the
  /// concatenation [Wq; Wk] (each column tile inside one of them), rotates
  /// in registers and stores head-major.
  LogicalResult takeQKRoPE(RoPEOp op);
  /// liger.linear's rounding of an f32 accumulator pair at columns `c`,
  /// c + 1: round(acc + bias[c..c+1]) in the operand dtype (no bias: just
  /// round).
  Value roundPair(OpBuilder &b, Value accPair, Value bias, Value c);
  /// RoPE of the pair x at head offset d of token (tableBatch, pos):
  /// round(x ⊙ cos[d] + rotated ⊙ sin[d]), x and `rotated` (the partner
  /// pair, negated in the first half) in f32.
  Value ropePair(OpBuilder &b, Value x, Value rotated, Value tableBatch,
                 Value pos, Value d);
  /// The tables' batch row for a token of batch `batch`: 0 when the tables
  /// broadcast (batch dimension 1).
  Value tableBatchOf(OpBuilder &b, Value batch) {
    Value broadcast = arith::CmpIOp::create(
        b, loc, arith::CmpIPredicate::eq,
        memref::DimOp::create(b, loc, cosT, 0), idx(b, 1));
    return arith::SelectOp::create(b, loc, broadcast, idx(b, 0), batch);
  }
  /// The RoPE epilogue of one of the pair (builder inside the q or k
  /// branch): `out` [B, H, T, D], `colBase` the tile's first column within
  /// that projection.
  void emitRoPEEpilogue(OpBuilder &b, Value acc, ArrayRef<Value> rowScale,
                        Value r0, Value out, Value colBase, Value bias);
  /// The body of a forward product: one liger.linear / liger.lora_linear
  /// (or a gate/up pair), an optional RMSNorm prologue, an elementwise
  /// epilogue.
  LogicalResult takeProjections();
  bool isProjectionOperand(Value v) {
    return v == xArg || v == gArg || (accArg && v == accArg) ||
           (rope && (v == cosArg || v == sinArg)) ||
           (lora && (v == lora.getLoraA() ||
                                               v == lora.getLoraB())) ||
           llvm::any_of(projs, [&](const Projection &l) {
             return v == l.input || v == l.weight || (l.bias && v == l.bias);
           });
  }

  FusionOp group;
  MatmulKernelConfig config;
  MLIRContext *ctx;
  Location loc;
  Type elem;
  int64_t n = 0, k = 0;
  /// forward: y = x̂ · Wᵀ; gradInput: dx = dy · W (B MN-major); gradWeight:
  /// dW = dyᵀ · x (A and B MN-major, K = the tokens, rows = dy's features).
  enum class Layout { forward, gradInput, gradWeight } layout = Layout::forward;
  int64_t m = 0;           // gradWeight: the output rows (static)
  Value accArg, accum;     // gradWeight: the f32 accumulator, and its param
  RoPEOp rope;             // the q/k + RoPE epilogue, or null
  /// wgmma: the output tile goes out through shared memory with TMA
  /// stores (16-bit outputs in 64-column boxes), else pairs from registers.
  bool tmaStore = false;
  /// wgmma, dW accumulated into a 16-bit buffer: the producer TMA-loads the
  /// buffer's old tile into a region of its own (after the stages) at the
  /// start; the epilogue adds the product to it there and TMA-stores it.
  bool oldTile = false;
  int64_t nq = 0, headDim = 0; // its q width (k follows) and head size
  Value cosArg, sinArg, cosT, sinT, yK; // its tables and k output
  Value x, y, rows, tid, m0, n0, smemA, dynSmem;
  Value kTiles;            // the K loop's trip count (dynamic for gradWeight)
  Value kRows;             // gradient products: K's extent (the MN-major rows)
  /// A liger.linear or liger.lora_linear of the group.
  struct Projection {
    Operation *op;
    Value input, weight, bias, result;
  };
  SmallVector<Projection> projs;    // 1, or 2 for a gate/up pair
  LoRALinearOp lora;                // the single projection, when LoRA
  int64_t loraRank = 0;             // its r
  RMSNormOp norm;                   // the prologue, or null
  Value xArg, gArg;                 // the group's x (and the norm's weight)
  Value g;                          // the norm weight's kernel parameter
  Value loraA, loraB;               // LoRA's factors' kernel parameters
  Value smemLA, smemLB;             // mma.sync: A's slices, B's tile
  SmallVector<Value> ws, smemBs;    // per projection
  SmallVector<Value> biases;        // per projection: its [N] bias, or null
  OwningOpRef<ModuleOp> scratch;
  func::FuncOp epilogue;
  // The group's other inputs: block argument -> kernel parameter, and
  // whether it is [rows, N] (else [N]).
  DenseMap<Value, Value> epilogueParams;
  DenseMap<Value, bool> epilogueRows;
};

LogicalResult MatmulKernelBuilder::lowerEpilogue() {
  Block &body = group.getBody().front();
  OpBuilder b(ctx);
  scratch = ModuleOp::create(loc);
  b.setInsertionPointToEnd(scratch->getBody());
  SmallVector<Type> types;
  for (const Projection &proj : projs)
    types.push_back(proj.result.getType());
  SmallVector<Value> others;
  for (BlockArgument arg : body.getArguments())
    if (!isProjectionOperand(arg)) {
      types.push_back(arg.getType());
      others.push_back(arg);
    }
  Value result = group.getYield().getValues()[0];
  epilogue = func::FuncOp::create(b, loc, "epilogue",
                                  FunctionType::get(ctx, types,
                                                    {result.getType()}));
  Block *entry = epilogue.addEntryBlock();
  IRMapping mapping;
  for (auto [proj, value] : llvm::zip(projs, entry->getArguments()))
    mapping.map(proj.result, value);
  for (auto [arg, value] :
       llvm::zip(others, entry->getArguments().drop_front(projs.size())))
    mapping.map(arg, value);
  b.setInsertionPointToEnd(entry);
  for (Operation &op : body.without_terminator()) {
    if (isa<LinearOp, LoRALinearOp, LinearGradInputOp, LinearGradWeightOp>(
            op) ||
        &op == norm.getOperation())
      continue;
    if (!isa<AddOp, MulOp, SiLUOp, GELUOp, SwiGLUOp, GEGLUOp>(op))
      return fail("'" + op.getName().getStringRef() +
                  "' after the projection is not an elementwise epilogue op "
                  "of the mma.sync template");
    b.clone(op, mapping);
  }
  func::ReturnOp::create(b, loc, mapping.lookupOrDefault(result));
  RewritePatternSet patterns(ctx);
  populateLowerToLinalgPatterns(patterns);
  ConversionTarget target(*ctx);
  target.addIllegalDialect<LigerDialect>();
  target.markUnknownOpDynamicallyLegal([](Operation *) { return true; });
  if (failed(applyPartialConversion(epilogue, target, std::move(patterns))))
    return fail("its epilogue's reference lowering failed");
  unsigned rank = cast<RankedTensorType>(types.front()).getRank();
  WalkResult walk = epilogue.walk([&](linalg::GenericOp op) {
    if (op.getNumLoops() != rank || op.getNumReductionLoops() != 0)
      return WalkResult::interrupt();
    for (AffineMap map : op.getIndexingMapsArray())
      if (!map.isIdentity() &&
          !(map.getNumResults() == 1 &&
            map.getResult(0) == getAffineDimExpr(rank - 1, ctx)))
        return WalkResult::interrupt();
    return WalkResult::advance();
  });
  if (walk.wasInterrupted())
    return fail("its epilogue is not elementwise over [rows, N] and [N] "
                "operands");
  return success();
}

FailureOr<Value> MatmulKernelBuilder::applyEpilogue(OpBuilder &b,
                                                    ValueRange projected,
                                                    Value r, Value c) {
  Block &entry = epilogue.getBody().front();
  DenseMap<Value, Value> pairs;
  for (auto [arg, value] : llvm::zip(entry.getArguments(), projected))
    pairs[arg] = value;
  Block &body = group.getBody().front();
  unsigned next = projected.size();
  for (BlockArgument arg : body.getArguments()) {
    auto it = epilogueParams.find(arg);
    if (it == epilogueParams.end())
      continue;
    Value param = it->second;
    auto type = VectorType::get(
        {2}, cast<MemRefType>(param.getType()).getElementType());
    SmallVector<Value> indices;
    if (epilogueRows.lookup(arg))
      indices.push_back(r);
    indices.push_back(c);
    pairs[entry.getArgument(next++)] = vector::LoadOp::create(
        b, loc, type, param, indices, /*nontemporal=*/false,
        llvm::MaybeAlign(
            std::min<int64_t>(16, 2 * type.getElementTypeBitWidth() / 8)));
  }
  for (Operation &op : entry.without_terminator()) {
    auto generic = dyn_cast<linalg::GenericOp>(op);
    if (!generic)
      continue;
    SmallVector<Value> args;
    for (Value in : generic.getDpsInputs())
      args.push_back(pairs.lookup(in));
    for (Value init : generic.getDpsInits()) {
      Type t = getElementTypeOrSelf(init.getType());
      args.push_back(arith::ConstantOp::create(
          b, loc,
          DenseElementsAttr::get(VectorType::get({2}, t), b.getZeroAttr(t))));
    }
    if (llvm::any_of(args, [](Value v) { return !v; }))
      return fail("its epilogue reads a value the kernel does not hold");
    std::string why;
    FailureOr<SmallVector<Value>> results =
        cloneElementwiseBody(b, loc, *generic.getBlock(), args, 2, why);
    if (failed(results))
      return fail(why);
    for (auto [result, v] : llvm::zip(generic->getResults(), *results))
      pairs[result] = v;
  }
  Value out = pairs.lookup(entry.getTerminator()->getOperand(0));
  if (!out)
    return fail("its epilogue's result is not computed per element");
  return out;
}

void MatmulKernelBuilder::forEachChunk(
    OpBuilder &b, int64_t total, function_ref<void(OpBuilder &, Value)> chunk) {
  int64_t threads = config.threads();
  for (int64_t i = 0; i < (total + threads - 1) / threads; ++i) {
    Value c = add(b, tid, idx(b, i * threads));
    if ((i + 1) * threads <= total) {
      chunk(b, c);
      continue;
    }
    auto guard =
        scf::IfOp::create(b, loc, lessThan(b, c, idx(b, total)), false);
    OpBuilder gb = guard.getThenBodyBuilder();
    chunk(gb, c);
  }
}

void MatmulKernelBuilder::loadSlice(OpBuilder &b, Value stage, Value kt) {
  int64_t chunksPerRow = config.tileK / 8; // 16-byte chunks of bf16/f16
  Value inK = lessThan(b, kt, kTiles);
  Value ktc = arith::MinUIOp::create(
      b, loc, kt, arith::SubIOp::create(b, loc, kTiles, idx(b, 1)));
  Value k0 = mul(b, ktc, config.tileK);
  // K-major: `tileRows` rows from `base` (masked at `limit`) x the slice.
  auto copy = [&](OpBuilder &ob, Value src, Value dst, int64_t tileRows,
                  Value base, Value limit) {
    forEachChunk(ob, tileRows * chunksPerRow, [&](OpBuilder &cb, Value c) {
      Value r = div(cb, c, chunksPerRow);
      Value col = mul(cb, rem(cb, c, chunksPerRow), 8);
      Value g = add(cb, base, r);
      Value valid =
          arith::AndIOp::create(cb, loc, lessThan(cb, g, limit), inK);
      Value gc = arith::MinUIOp::create(
          cb, loc, g, arith::SubIOp::create(cb, loc, limit, idx(cb, 1)));
      copyChunk(cb, dst, {stage, r, col}, src, {gc, add(cb, k0, col)}, valid);
    });
  };
  // MN-major (a gradient product's operand): tile_k rows of K, `width`
  // columns from `base`, masked at the K end (kRows) and the column end.
  auto copyMN = [&](Value src, Value dst, int64_t width, Value base,
                    int64_t colLimit) {
    int64_t perRow = width / 8;
    forEachChunk(b, config.tileK * perRow, [&](OpBuilder &cb, Value c) {
      Value r = div(cb, c, perRow);
      Value col = mul(cb, rem(cb, c, perRow), 8);
      Value g = add(cb, k0, r), gc = add(cb, base, col);
      Value valid = arith::AndIOp::create(
          cb, loc,
          arith::AndIOp::create(cb, loc, lessThan(cb, g, kRows),
                                lessThan(cb, gc, idx(cb, colLimit))),
          inK);
      Value gr = arith::MinUIOp::create(
          cb, loc, g, arith::SubIOp::create(cb, loc, kRows, idx(cb, 1)));
      Value gcc = arith::MinUIOp::create(cb, loc, gc, idx(cb, colLimit - 8));
      copyChunk(cb, dst, {stage, r, col}, src, {gr, gcc}, valid);
    });
  };
  if (aMN())
    copyMN(x, smemA, config.tileM, m0, m);
  else
    copy(b, x, smemA, config.tileM, m0, rows);
  if (lora) // A's [r, tile_k] slice rides along
    copy(b, loraA, smemLA, loraRank, idx(b, 0), idx(b, loraRank));
  if (rope) {
    // The column tile lies in Wq (columns [0, nq)) or in Wk.
    auto inQ = scf::IfOp::create(b, loc, lessThan(b, n0, idx(b, nq)),
                                 /*withElseRegion=*/true);
    OpBuilder qb = inQ.getThenBodyBuilder(), kb = inQ.getElseBodyBuilder();
    copy(qb, ws[0], smemBs[0], config.tileN, n0, idx(qb, nq));
    copy(kb, ws[1], smemBs[0], config.tileN,
         arith::SubIOp::create(kb, loc, n0, idx(kb, nq)), idx(kb, n - nq));
  } else {
    for (auto [w, smemB] : llvm::zip(ws, smemBs)) {
      if (bMN())
        copyMN(w, smemB, config.tileN, n0, n);
      else
        copy(b, w, smemB, config.tileN, n0, idx(b, n));
    }
  }
  NVVM::CpAsyncCommitGroupOp::create(b, loc);
}

Value MatmulKernelBuilder::operandOf(OpBuilder &b, Value pair, bool asI32) {
  if (elem.isF16() && !asI32) // nvvm.mma.sync takes f16 pairs as vector<2xf16>
    return pair;
  Value packed = vector::BitCastOp::create(
      b, loc, VectorType::get({1}, b.getI32Type()), pair);
  return vector::ExtractOp::create(b, loc, packed, 0);
}

Value MatmulKernelBuilder::packPair(OpBuilder &b, Value lo, Value hi,
                                    Value scale, bool asI32) {
  if (scale) {
    lo = arith::MulFOp::create(b, loc, lo, scale);
    hi = arith::MulFOp::create(b, loc, hi, scale);
  }
  Value pair = arith::TruncFOp::create(
      b, loc, VectorType::get({2}, elem),
      vector::FromElementsOp::create(
          b, loc, VectorType::get({2}, b.getF32Type()), ValueRange{lo, hi}));
  return operandOf(b, pair, asI32);
}

Value MatmulKernelBuilder::toI32(OpBuilder &b, Value fragment, int64_t row) {
  return operandOf(b, vector::ExtractOp::create(b, loc, fragment, row));
}

LogicalResult MatmulKernelBuilder::takeGradient(Operation *op) {
  // The group verifier keeps a gradient product alone in its group.
  if (auto g = dyn_cast<LinearGradInputOp>(op)) {
    layout = Layout::gradInput;
    projs.push_back({op, g.getGrad(), g.getWeight(), Value(), g.getResult()});
    auto w = cast<RankedTensorType>(g.getWeight().getType());
    k = w.getDimSize(0);
    n = w.getDimSize(1);
  } else {
    auto gw = cast<LinearGradWeightOp>(op);
    layout = Layout::gradWeight;
    projs.push_back(
        {op, gw.getGrad(), gw.getInput(), Value(), gw.getResult()});
    accArg = gw.getAccumulate();
    m = cast<RankedTensorType>(gw.getGrad().getType()).getDimSize(1);
    n = cast<RankedTensorType>(gw.getInput().getType()).getDimSize(1);
    k = ShapedType::kDynamic;
  }
  xArg = projs.front().input;
  elem = cast<RankedTensorType>(xArg.getType()).getElementType();
  if (failed(checkElementAndK()))
    return failure();
  // The MN-major rows (dW's dy; W or x) are 16-byte multiples too.
  int64_t elemBytes = elem.getIntOrFloatBitWidth() / 8;
  SmallVector<int64_t, 2> widths = {n};
  if (layout == Layout::gradWeight)
    widths.push_back(m);
  for (int64_t width : widths)
    if ((width * elemBytes) % 16)
      return fail("a row of " + Twine(width) + " elements is not a multiple "
                  "of 16 bytes (" + (config.wgmma ? "TMA" : "cp.async") + ")");
  return success();
}

LogicalResult MatmulKernelBuilder::checkElementAndK() {
  if (!elem.isBF16() && !elem.isF16())
    return fail(Twine(config.wgmma ? "wgmma" : "mma.sync") +
                " takes bf16 or f16 inputs");
  int64_t elemBytes = elem.getIntOrFloatBitWidth() / 8;
  bool dynamicK = ShapedType::isDynamic(k); // dW's tokens: masked by rows
  if (!config.wgmma) {
    if (!dynamicK && k % config.tileK)
      return fail("K = " + Twine(k) + " is not a multiple of tile_k = " +
                  Twine(config.tileK));
    return success();
  }
  if (config.tileK * elemBytes != 128)
    return fail("the wgmma template reads 128-byte slices of K (tile_k = " +
                Twine(128 / elemBytes) + "), got tile_k = " +
                Twine(config.tileK));
  if (!dynamicK && (k * elemBytes) % 16)
    return fail("K = " + Twine(k) + " is not a multiple of " +
                Twine(16 / elemBytes) + " (TMA needs 16-byte rows)");
  return success();
}

LogicalResult MatmulKernelBuilder::takeQKRoPE(RoPEOp op) {
  // transpose [0, 2, 1, 3] <- expand_shape [[0], [1], [2, 3]] <- linear.
  auto trace = [](Value v) -> LinearOp {
    auto t = v.getDefiningOp<linalg::TransposeOp>();
    if (!t || t.getPermutation() != ArrayRef<int64_t>{0, 2, 1, 3})
      return {};
    auto e = t.getInput().getDefiningOp<tensor::ExpandShapeOp>();
    if (!e || e.getReassociationIndices() !=
                  SmallVector<ReassociationIndices>{{0}, {1}, {2, 3}})
      return {};
    return e.getSrc().getDefiningOp<LinearOp>();
  };
  LinearOp q = trace(op.getQ()), k2 = trace(op.getK());
  Block &body = group.getBody().front();
  if (!q || !k2 || q.getInput() != k2.getInput() ||
      group.getYield().getValues() != op->getResults() ||
      !isa<BlockArgument>(op.getCos()) || !isa<BlockArgument>(op.getSin()) ||
      !isa<BlockArgument>(q.getWeight()) || !isa<BlockArgument>(k2.getWeight()) ||
      (q.getBias() && !isa<BlockArgument>(q.getBias())) ||
      (k2.getBias() && !isa<BlockArgument>(k2.getBias())))
    return fail("a RoPE epilogue takes liger.rope of the head splits "
                "([B, T, H*D] -> [B, H, T, D]) of two liger.linear on one "
                "input, weights, biases and tables among the group's inputs, "
                "yielding the rotated q and k");
  rope = op;
  for (LinearOp l : {q, k2})
    projs.push_back({l, l.getInput(), l.getWeight(), l.getBias(),
                     l.getResult()});
  norm = q.getInput().getDefiningOp<RMSNormOp>();
  if (norm && (!isa<BlockArgument>(norm.getInput()) ||
               !isa<BlockArgument>(norm.getWeight())))
    return fail("the RMSNorm before a RoPE pair must read group inputs");
  for (Operation &o : body.without_terminator())
    if (!isa<tensor::DimOp, tensor::ExpandShapeOp, tensor::EmptyOp,
             linalg::TransposeOp>(o) &&
        !o.hasTrait<OpTrait::ConstantLike>() && &o != op.getOperation() &&
        &o != q.getOperation() && &o != k2.getOperation() &&
        &o != norm.getOperation())
      return fail("'" + o.getName().getStringRef() +
                  "' is not part of a q/k projection pair with RoPE");
  xArg = norm ? norm.getInput() : q.getInput();
  gArg = norm ? norm.getWeight() : Value();
  cosArg = op.getCos();
  sinArg = op.getSin();
  auto qType = cast<RankedTensorType>(op.getQ().getType());
  auto xType = cast<RankedTensorType>(xArg.getType());
  elem = xType.getElementType();
  headDim = qType.getDimSize(3);
  nq = cast<RankedTensorType>(q.getWeight().getType()).getDimSize(0);
  int64_t nk = cast<RankedTensorType>(k2.getWeight().getType()).getDimSize(0);
  k = xType.getShape().back();
  n = nq + nk;
  if (failed(checkElementAndK()))
    return failure();
  // A column tile holds whole heads of one projection (on wgmma each
  // thread then holds both halves of its rotations; mma.sync exchanges
  // them through shared memory).
  if (headDim % 16 || config.tileN % headDim || nq % config.tileN ||
      nk % config.tileN)
    return fail("tile_n = " + Twine(config.tileN) + " must hold whole heads "
                "(head_dim " + Twine(headDim) + ", a multiple of 16) and "
                "divide both projections (" + Twine(nq) + " and " + Twine(nk) +
                ")");
  return success();
}

LogicalResult MatmulKernelBuilder::takeProjections() {
  // The body this template implements: one liger.linear (bias optional) on
  // the group's inputs, then elementwise ops, one result.
  Block &body = group.getBody().front();
  for (Operation &op : body) {
    if (auto l = dyn_cast<LinearOp>(op))
      projs.push_back({l, l.getInput(), l.getWeight(), l.getBias(),
                       l.getResult()});
    if (auto l = dyn_cast<LoRALinearOp>(op)) {
      lora = l;
      projs.push_back({l, l.getInput(), l.getWeight(), l.getBias(),
                       l.getResult()});
    }
  }
  if (projs.size() > 2)
    return fail("the group holds " + Twine(projs.size()) +
                " projections; one, or a gate/up pair, is what the template "
                "computes");
  if (lora && projs.size() != 1)
    return fail("a LoRA projection is implemented alone, not in a pair");
  if (lora && (!isa<BlockArgument>(lora.getLoraA()) ||
               !isa<BlockArgument>(lora.getLoraB())))
    return fail("the LoRA factors must be among the group's inputs");
  const Projection *linear = projs.empty() ? nullptr : &projs.front();
  bool sameInputs = llvm::all_of(projs, [&](const Projection &other) {
    return other.input == linear->input &&
           other.weight.getType() == linear->weight.getType() &&
           (!other.bias || isa<BlockArgument>(other.bias)) &&
           isa<BlockArgument>(other.weight);
  });
  // An RMSNorm prologue: x -> rms_norm(x, g) -> the projection(s) only.
  norm = linear ? linear->input.getDefiningOp<RMSNormOp>() : RMSNormOp();
  if (norm && (!isa<BlockArgument>(norm.getInput()) ||
               !isa<BlockArgument>(norm.getWeight()) ||
               llvm::any_of(norm.getResult().getUsers(), [](Operation *u) {
                 return !isa<LinearOp, LoRALinearOp>(u);
               })))
    norm = RMSNormOp();
  xArg = norm ? norm.getInput() : (linear ? linear->input : Value());
  gArg = norm ? norm.getWeight() : Value();
  if (!linear || !sameInputs || !isa_and_nonnull<BlockArgument>(xArg) ||
      group.getYield().getValues().size() != 1)
    return fail("the matmul templates implement one liger.linear or "
                "liger.lora_linear (weight and bias among the group's "
                "inputs) on the group's inputs (or a gate/up pair on one "
                "input, optionally after an RMSNorm of it), with an "
                "elementwise epilogue and one result; other prologues come "
                "with the next templates");
  auto xType = cast<RankedTensorType>(xArg.getType());
  auto wType = cast<RankedTensorType>(linear->weight.getType());
  elem = xType.getElementType();
  n = wType.getDimSize(0);
  k = wType.getDimSize(1);
  if (failed(checkElementAndK()))
    return failure();
  if (n % 8)
    return fail("N = " + Twine(n) + " is not a multiple of 8");
  if (lora) {
    loraRank = cast<RankedTensorType>(lora.getLoraA().getType()).getDimSize(0);
    if (loraRank % 16 || loraRank > 64)
      return fail("LoRA rank " + Twine(loraRank) + " is not a multiple of 16 up "
                  "to 64 (the second product is k16 MMAs over r, B's "
                  "rows at most one 128-byte swizzle span)");
  }
  return success();
}

FailureOr<RowKernelInfo> MatmulKernelBuilder::build(gpu::GPUModuleOp module,
                                                    StringRef name) {
  Block &body = group.getBody().front();
  Operation *gradient = nullptr;
  RoPEOp ropeOp;
  for (Operation &op : body) {
    if (isa<LinearGradInputOp, LinearGradWeightOp>(op))
      gradient = &op;
    if (auto r = dyn_cast<RoPEOp>(op))
      ropeOp = r;
  }
  if (failed(gradient ? takeGradient(gradient)
             : ropeOp ? takeQKRoPE(ropeOp)
                      : takeProjections()))
    return failure();
  auto xType = cast<RankedTensorType>(xArg.getType());
  int64_t elemBytes = elem.getIntOrFloatBitWidth() / 8;
  if (!rope && failed(lowerEpilogue()))
    return failure();
  int64_t threads = config.threads();
  int64_t numB = static_cast<int64_t>(projs.size());

  RowKernelInfo info;
  info.name = name.str();
  info.config.threads = threads;
  info.config.vectorWidth = 8;
  info.hidden = n;
  MatmulShape shape;
  shape.paired = numB == 2 && !rope;
  shape.elementBytes = elemBytes;
  shape.loraRank = loraRank;
  shape.rmsNorm = static_cast<bool>(norm);
  shape.aMNMajor = aMN();
  shape.bMNMajor = bMN();
  shape.headDim = rope ? headDim : 0;
  oldTile = config.wgmma && accArg &&
            getElementTypeOrSelf(accArg.getType()).getIntOrFloatBitWidth() ==
                16;
  shape.accumulateTile = oldTile;
  info.sharedMemoryBytes = config.sharedMemoryBytes(shape);
  info.templateName = "matmul";
  info.gridDims = {std::to_string((n + config.tileN - 1) / config.tileN),
                   layout == Layout::gradWeight
                       ? std::to_string((m + config.tileM - 1) / config.tileM)
                       : "rows/" + std::to_string(config.tileM),
                   "1"};
  // Parameters: the group's inputs in order, then the output, then (wgmma)
  // the TMA descriptors of x and the weights, passed by value.
  SmallVector<Type> paramTypes;
  unsigned rank = xType.getRank();
  for (BlockArgument arg : body.getArguments()) {
    std::string pname = "input" + std::to_string(arg.getArgNumber());
    auto type = cast<RankedTensorType>(arg.getType());
    Type argElem = type.getElementType();
    if (rope) {
      // x [B, T, K] as rows, the norm weight, Wq and Wk, their biases, the
      // tables [1 or B, T, D].
      RowKernelParam p{pname, false, false, RowParamKind::Rows, argElem, 0, 0};
      Type memref;
      const Projection *proj = llvm::find_if(projs, [&](const Projection &l) {
        return l.weight == arg || l.bias == arg;
      });
      if (arg == xArg) {
        p.hidden = k;
        memref = MemRefType::get({ShapedType::kDynamic, k}, elem);
      } else if (arg == gArg) {
        p.kind = RowParamKind::Feature;
        p.hidden = k;
        memref = MemRefType::get({k}, argElem);
      } else if (proj != projs.end()) {
        int64_t width =
            cast<RankedTensorType>(proj->weight.getType()).getDimSize(0);
        p.kind = arg == proj->weight ? RowParamKind::Matrix
                                     : RowParamKind::Feature;
        p.hidden = arg == proj->weight ? k : width;
        p.heads = arg == proj->weight ? width : 0;
        memref = arg == proj->weight ? MemRefType::get({width, k}, elem)
                                     : MemRefType::get({width}, argElem);
      } else if (arg == cosArg || arg == sinArg) {
        p.kind = RowParamKind::Tables;
        p.hidden = headDim;
        p.heads = type.getDimSize(0) == 1 ? 1 : 0; // a broadcast batch
        memref = MemRefType::get(type.getShape(), argElem);
      } else {
        return fail("input #" + Twine(arg.getArgNumber()) +
                    " is not read by the q/k projections or RoPE");
      }
      info.params.push_back(p);
      paramTypes.push_back(memref);
      continue;
    }
    if (layout != Layout::forward) {
      // dy [T, K_red] (gradInput) or [T, M] (gradWeight); W [K_red, N]
      // (gradInput) or x [T, N] (gradWeight); the accumulator [M, N] f32.
      if (arg == xArg) {
        int64_t width = layout == Layout::gradWeight ? m : k;
        info.params.push_back(
            {pname, false, false, RowParamKind::Rows, elem, width, 0});
        paramTypes.push_back(
            MemRefType::get({ShapedType::kDynamic, width}, elem));
      } else if (arg == projs.front().weight &&
                 layout == Layout::gradInput) {
        info.params.push_back(
            {pname, false, false, RowParamKind::Matrix, elem, n, k});
        paramTypes.push_back(MemRefType::get({k, n}, elem));
      } else if (arg == projs.front().weight) {
        info.params.push_back(
            {pname, false, false, RowParamKind::Rows, elem, n, 0});
        paramTypes.push_back(MemRefType::get({ShapedType::kDynamic, n}, elem));
      } else {
        info.params.push_back(
            {pname, false, false, RowParamKind::Matrix, argElem, n, m});
        paramTypes.push_back(MemRefType::get({m, n}, argElem));
      }
      continue;
    }
    if (arg == xArg) {
      info.params.push_back({pname, false, false, RowParamKind::Rows, elem, k, 0});
      paramTypes.push_back(MemRefType::get({ShapedType::kDynamic, k}, elem));
    } else if (lora && arg == lora.getLoraA()) { // [r, K]
      info.params.push_back(
          {pname, false, false, RowParamKind::Matrix, elem, k, loraRank});
      paramTypes.push_back(MemRefType::get({loraRank, k}, elem));
    } else if (lora && arg == lora.getLoraB()) { // [N, r]
      info.params.push_back(
          {pname, false, false, RowParamKind::Matrix, elem, loraRank, n});
      paramTypes.push_back(MemRefType::get({n, loraRank}, elem));
    } else if (llvm::any_of(projs, [&](const Projection &l) {
                 return l.bias == arg;
               })) { // a projection's bias, [N]
      info.params.push_back(
          {pname, false, false, RowParamKind::Feature, argElem, n, 0});
      paramTypes.push_back(MemRefType::get({n}, argElem));
    } else if (arg == gArg) { // the norm's weight, [K]
      info.params.push_back(
          {pname, false, false, RowParamKind::Feature, argElem, k, 0});
      paramTypes.push_back(MemRefType::get({k}, argElem));
    } else if (isProjectionOperand(arg)) { // a weight
      info.params.push_back(
          {pname, false, false, RowParamKind::Matrix, elem, k, n});
      paramTypes.push_back(MemRefType::get({n, k}, elem));
    } else if (type.getRank() == rank && type.getShape().back() == n) {
      info.params.push_back(
          {pname, false, false, RowParamKind::Rows, argElem, n, 0});
      paramTypes.push_back(
          MemRefType::get({ShapedType::kDynamic, n}, argElem));
    } else if (type.getRank() == 1 && type.getShape().back() == n) {
      info.params.push_back(
          {pname, false, false, RowParamKind::Feature, argElem, n, 0});
      paramTypes.push_back(MemRefType::get({n}, argElem));
    } else {
      return fail("input #" + Twine(arg.getArgNumber()) +
                  " is neither [rows, N] nor [N] for the epilogue");
    }
  }
  Type outElem = getElementTypeOrSelf(group.getResult(0).getType());
  if (rope) {
    // q [B, Hq, T, D] and k [B, Hkv, T, D], head-major.
    for (auto [i, result] : llvm::enumerate(rope->getResults())) {
      auto type = cast<RankedTensorType>(result.getType());
      info.params.push_back({"output" + std::to_string(i), true, false,
                             RowParamKind::Heads, outElem, headDim,
                             type.getDimSize(1)});
      paramTypes.push_back(MemRefType::get(type.getShape(), outElem));
    }
  } else if (layout == Layout::gradWeight) {
    info.params.push_back(
        {"output0", true, false, RowParamKind::Matrix, outElem, n, m});
    paramTypes.push_back(MemRefType::get({m, n}, outElem));
  } else {
    info.params.push_back(
        {"output0", true, false, RowParamKind::Rows, outElem, n, 0});
    paramTypes.push_back(MemRefType::get({ShapedType::kDynamic, n}, outElem));
  }
  if (layout != Layout::forward) {
    // MN-major tiles arrive as [tile_k rows, 64 columns] boxes: tile_m / 64
    // of them for dy (gradWeight), tile_n / 64 for W or x.
    int64_t xBoxRows = aMN() ? config.tileK : config.tileM;
    int64_t xBoxCols = aMN() ? 64 : config.tileK;
    info.tensorMaps.push_back(
        {cast<BlockArgument>(xArg).getArgNumber(), xBoxRows, xBoxCols});
    info.tensorMaps.push_back(
        {cast<BlockArgument>(projs.front().weight).getArgNumber(),
         config.tileK, 64});
  } else if (config.wgmma) {
    info.tensorMaps.push_back({cast<BlockArgument>(xArg).getArgNumber(),
                               config.tileM, config.tileK});
    for (const Projection &l : projs)
      info.tensorMaps.push_back(
          {cast<BlockArgument>(l.weight).getArgNumber(), config.tileN,
           config.tileK});
    if (lora) {
      // A's [r, 64] slices ride along with W's; B's [tile_n, r] tile is
      // read once, swizzled by its r * 2-byte rows.
      info.tensorMaps.push_back(
          {cast<BlockArgument>(lora.getLoraA()).getArgNumber(), loraRank,
           config.tileK});
      info.tensorMaps.push_back(
          {cast<BlockArgument>(lora.getLoraB()).getArgNumber(), config.tileN,
           loraRank, loraRank * elemBytes});
    }
  }
  if (config.wgmma) {
    // The output's map (64 x 64 boxes, 128-byte swizzle) for TMA stores.
    // (A 16-bit dW buffer's old tile comes in through a map of its own.)
    tmaStore = !rope && (!accArg || oldTile) && config.tileN % 64 == 0 &&
               outElem.getIntOrFloatBitWidth() == 16;
    // (verifyMatmulKernelConfig keeps a gradient product's tile_n a
    // multiple of 64.)
    assert((!oldTile || tmaStore) && "a 16-bit dW buffer stores with TMA");
    if (oldTile)
      info.tensorMaps.push_back(
          {cast<BlockArgument>(accArg).getArgNumber(), 64, 64});
    if (tmaStore)
      info.tensorMaps.push_back(
          {static_cast<int64_t>(body.getNumArguments()), 64, 64});
    paramTypes.append(info.tensorMaps.size(), LLVM::LLVMPointerType::get(ctx));
  }
  // The ops the kernel computes (not the constants and sizes its layout
  // ops read).
  for (Operation &op : body.without_terminator())
    if (!op.hasTrait<OpTrait::ConstantLike>() && !isa<tensor::DimOp>(op))
      info.opChain += (info.opChain.empty() ? "" : ", ") +
                      op.getName().getStringRef().str();

  OpBuilder b(ctx);
  b.setInsertionPointToEnd(module.getBody());
  auto kernel = gpu::GPUFuncOp::create(b, loc, name,
                                       FunctionType::get(ctx, paramTypes, {}));
  kernel->setAttr(gpu::GPUDialect::getKernelFuncAttrName(), b.getUnitAttr());
  kernel.setKnownBlockSizeAttr(
      b.getDenseI32ArrayAttr({static_cast<int32_t>(threads), 1, 1}));
  if (config.wgmma)
    kernel->setAttr("liger.tensor_maps",
                    b.getI64IntegerAttr(info.tensorMaps.size()));
  Block &entry = kernel.getBody().front();
  b.setInsertionPointToStart(&entry);
  for (BlockArgument arg : body.getArguments()) {
    Value param = entry.getArgument(arg.getArgNumber());
    if (arg == xArg) {
      x = param;
    } else if (accArg && arg == accArg) {
      accum = param;
    } else if (rope && arg == cosArg) {
      cosT = param;
    } else if (rope && arg == sinArg) {
      sinT = param;
    } else if (arg == gArg) {
      g = param;
    } else if (isProjectionOperand(arg)) {
      // weights are bound per projection below
    } else {
      epilogueParams[arg] = param;
      epilogueRows[arg] = cast<MemRefType>(param.getType()).getRank() == 2;
    }
  }
  y = entry.getArgument(body.getNumArguments());
  if (lora) {
    loraA = entry.getArgument(
        cast<BlockArgument>(lora.getLoraA()).getArgNumber());
    loraB = entry.getArgument(
        cast<BlockArgument>(lora.getLoraB()).getArgNumber());
  }
  if (rope)
    yK = entry.getArgument(body.getNumArguments() + 1);
  for (const Projection &l : projs) {
    ws.push_back(entry.getArgument(
        cast<BlockArgument>(l.weight).getArgNumber()));
    biases.push_back(l.bias ? entry.getArgument(
                                  cast<BlockArgument>(l.bias).getArgNumber())
                            : Value());
  }
  tid = gpu::ThreadIdOp::create(b, loc, gpu::Dimension::x);
  if (layout == Layout::gradWeight) {
    // The output rows are dy's features; K runs over the tokens.
    rows = idx(b, m);
    kRows = memref::DimOp::create(b, loc, x, 0);
    kTiles = div(b, add(b, kRows, idx(b, config.tileK - 1)), config.tileK);
  } else {
    rows = memref::DimOp::create(b, loc, x, 0);
    kRows = idx(b, k);
    kTiles = idx(b, (k + config.tileK - 1) / config.tileK);
  }
  setTileOrigin(b,
                add(b, mul(b, gpu::BlockIdOp::create(b, loc, gpu::Dimension::y),
                           (n + config.tileN - 1) / config.tileN),
                    gpu::BlockIdOp::create(b, loc, gpu::Dimension::x)),
                gpu::GridDimOp::create(b, loc, gpu::Dimension::y),
                config.wgmma ? 8 : 1);
  LogicalResult emitted =
      config.wgmma
          ? emitWgmma(b, entry.getArguments().take_back(info.tensorMaps.size()))
          : emitMmaSync(b);
  if (failed(emitted)) {
    kernel.erase();
    return failure();
  }
  gpu::ReturnOp::create(b, loc);
  return info;
}

void MatmulKernelBuilder::setTileOrigin(OpBuilder &b, Value pid, Value numM,
                                        int64_t groupM) {
  int64_t numN = (n + config.tileN - 1) / config.tileN;
  Value inGroup = rem(b, pid, groupM * numN);
  Value firstM = mul(b, div(b, pid, groupM * numN), groupM);
  Value groupRows = arith::MinUIOp::create(
      b, loc, arith::SubIOp::create(b, loc, numM, firstM), idx(b, groupM));
  Value tileM =
      add(b, firstM, arith::RemUIOp::create(b, loc, inGroup, groupRows));
  Value tileN = arith::DivUIOp::create(b, loc, inGroup, groupRows);
  m0 = mul(b, tileM, config.tileM);
  n0 = mul(b, tileN, config.tileN);
}

Value MatmulKernelBuilder::roundPair(OpBuilder &b, Value accPair, Value bias,
                                     Value c) {
  if (bias) {
    auto type = VectorType::get(
        {2}, cast<MemRefType>(bias.getType()).getElementType());
    Value bv = vector::LoadOp::create(
        b, loc, type, bias, ValueRange{c}, false,
        llvm::MaybeAlign(2 * type.getElementTypeBitWidth() / 8));
    if (!type.getElementType().isF32())
      bv = arith::ExtFOp::create(
          b, loc, VectorType::get({2}, b.getF32Type()), bv);
    accPair = arith::AddFOp::create(b, loc, accPair, bv);
  }
  return arith::TruncFOp::create(b, loc, VectorType::get({2}, elem), accPair);
}

Value MatmulKernelBuilder::ropePair(OpBuilder &b, Value x, Value rotated,
                                    Value tableBatch, Value pos, Value d) {
  auto f32x2 = VectorType::get({2}, b.getF32Type());
  Type tElem = cast<MemRefType>(cosT.getType()).getElementType();
  auto table = [&](Value t) -> Value {
    Value v = vector::LoadOp::create(
        b, loc, VectorType::get({2}, tElem), t, ValueRange{tableBatch, pos, d},
        false, llvm::MaybeAlign(2 * tElem.getIntOrFloatBitWidth() / 8));
    return tElem.isF32() ? v
                         : arith::ExtFOp::create(b, loc, f32x2, v).getResult();
  };
  Value sinTerm = arith::MulFOp::create(b, loc, rotated, table(sinT));
  Value cosTerm = arith::MulFOp::create(b, loc, x, table(cosT));
  return arith::TruncFOp::create(
      b, loc, VectorType::get({2}, elem),
      arith::AddFOp::create(b, loc, cosTerm, sinTerm));
}

LogicalResult MatmulKernelBuilder::storePair(OpBuilder &b,
                                             ArrayRef<Value> accPairs, Value r,
                                             Value c, PairSink sink) {
  Value ok = arith::AndIOp::create(b, loc, lessThan(b, r, rows),
                                   lessThan(b, c, idx(b, n)));
  auto ifOp = scf::IfOp::create(b, loc, ok, false);
  OpBuilder tb = ifOp.getThenBodyBuilder();
  if (accum && sink) {
    // A 16-bit buffer's old tile is in shared memory: the sink adds.
    sink(tb, accPairs[0]);
    return success();
  }
  if (accum) {
    // dW into a buffer: buffer + the product in f32, rounded once to the
    // buffer's dtype (none for f32).
    Type accElem = cast<MemRefType>(accum.getType()).getElementType();
    int64_t align = 2 * std::max<unsigned>(1, accElem.getIntOrFloatBitWidth() / 8);
    auto type = VectorType::get({2}, accElem);
    auto f32Pair = VectorType::get({2}, tb.getF32Type());
    Value old = vector::LoadOp::create(tb, loc, type, accum, ValueRange{r, c},
                                       false, llvm::MaybeAlign(align));
    if (!accElem.isF32())
      old = arith::ExtFOp::create(tb, loc, f32Pair, old);
    Value sum = arith::AddFOp::create(tb, loc, old, accPairs[0]);
    if (!accElem.isF32())
      sum = arith::TruncFOp::create(tb, loc, type, sum);
    vector::StoreOp::create(tb, loc, sum, y, ValueRange{r, c}, false,
                            llvm::MaybeAlign(align));
    return success();
  }
  // liger.linear: round(x · Wᵀ + b), the bias added in f32.
  SmallVector<Value> rounded;
  for (auto [accPair, bias] : llvm::zip(accPairs, biases))
    rounded.push_back(roundPair(tb, accPair, bias, c));
  FailureOr<Value> out = applyEpilogue(tb, rounded, r, c);
  if (failed(out))
    return failure();
  if (sink) {
    sink(tb, *out);
    return success();
  }
  auto outType = cast<VectorType>(out->getType());
  vector::StoreOp::create(
      tb, loc, *out, y, ValueRange{r, c}, /*nontemporal=*/false,
      llvm::MaybeAlign(2 * outType.getElementTypeBitWidth() / 8));
  return success();
}

LogicalResult MatmulKernelBuilder::emitMmaSync(OpBuilder &b) {
  int64_t threads = config.threads();
  int64_t warps = threads / 32;
  int64_t warpsM = config.tileM / 64;
  int64_t warpsN = warps / std::max<int64_t>(warpsM, 1);
  // (cp.async leaves threads out of tiles of fewer 16-byte chunks.)
  if (warpsM < 1 || warpsN < 1 || warpsM * warpsN != warps ||
      config.tileN % (warpsN * 8) || config.tileK % 16)
    return fail("tile " + Twine(config.tileM) + "x" + Twine(config.tileN) +
                "x" + Twine(config.tileK) + " does not split over " +
                Twine(warps) + " warps");
  int64_t warpN = config.tileN / warpsN; // columns per warp
  int64_t nTiles = warpN / 8;
  constexpr int64_t mTiles = 4; // 64 rows per warp
  int64_t pad = config.tileK + 8; // 16 bytes of padding per shared row
  int64_t elemBytes = elem.getIntOrFloatBitWidth() / 8;
  // Shared tiles: K-major [rows, tile_k + 8], or MN-major (a gradient
  // product's operand) [tile_k, columns + 8].
  auto tileShape = [&](int64_t width, bool mnMajor) -> SmallVector<int64_t> {
    return mnMajor ? SmallVector<int64_t>{config.stages, config.tileK, width + 8}
                   : SmallVector<int64_t>{config.stages, width, pad};
  };
  SmallVector<int64_t> shapeA = tileShape(config.tileM, aMN());
  SmallVector<int64_t> shapeB = tileShape(config.tileN, bMN());
  int64_t bytesA = shapeA[0] * shapeA[1] * shapeA[2] * elemBytes;
  int64_t bytesB = shapeB[0] * shapeB[1] * shapeB[2] * elemBytes; // each
  int64_t numB = rope ? 1 : static_cast<int64_t>(projs.size());
  Value warp = div(b, tid, 32);
  Value lane = rem(b, tid, 32);
  Value wm = div(b, warp, warpsN);
  Value wn = rem(b, warp, warpsN);
  auto workgroup = gpu::AddressSpaceAttr::get(ctx, gpu::AddressSpace::Workgroup);
  dynSmem = gpu::DynamicSharedMemoryOp::create(
      b, loc,
      MemRefType::get({ShapedType::kDynamic}, b.getI8Type(),
                      MemRefLayoutAttrInterface(), workgroup));
  smemA = memref::ViewOp::create(
      b, loc,
      MemRefType::get(shapeA, elem, MemRefLayoutAttrInterface(), workgroup),
      dynSmem, idx(b, 0), ValueRange{});
  for (int64_t p = 0; p < numB; ++p)
    smemBs.push_back(memref::ViewOp::create(
        b, loc,
        MemRefType::get(shapeB, elem, MemRefLayoutAttrInterface(), workgroup),
        dynSmem, idx(b, bytesA + p * bytesB), ValueRange{}));

  // LoRA: A's [r, tile_k] slice per stage after the weight tiles, B's
  // [tile_n, r] tile once after them (padded rows, like the others).
  int64_t bytesLA = config.stages * loraRank * pad * elemBytes;
  int64_t bytesLB = lora ? config.tileN * (loraRank + 8) * elemBytes : 0;
  if (lora) {
    smemLA = memref::ViewOp::create(
        b, loc,
        MemRefType::get({config.stages, loraRank, pad}, elem,
                        MemRefLayoutAttrInterface(), workgroup),
        dynSmem, idx(b, bytesA + numB * bytesB), ValueRange{});
    smemLB = memref::ViewOp::create(
        b, loc,
        MemRefType::get({config.tileN, loraRank + 8}, elem,
                        MemRefLayoutAttrInterface(), workgroup),
        dynSmem, idx(b, bytesA + numB * bytesB + bytesLA), ValueRange{});
    // B's tile joins the first slice's cp.async group.
    int64_t perRow = loraRank / 8;
    forEachChunk(b, config.tileN * perRow, [&](OpBuilder &cb, Value c) {
      Value r = div(cb, c, perRow);
      Value col = mul(cb, rem(cb, c, perRow), 8);
      Value gr = add(cb, n0, r);
      Value valid = lessThan(cb, gr, idx(cb, n));
      copyChunk(cb, smemLB, {r, col}, loraB,
                {arith::MinUIOp::create(cb, loc, gr, idx(cb, n - 1)), col},
                valid);
    });
  }

  // RMSNorm prologue: each row's sum of squares, in f32 after the tiles.
  Value sumsq;
  if (norm) {
    sumsq = memref::ViewOp::create(
        b, loc,
        MemRefType::get({config.tileM}, b.getF32Type(),
                        MemRefLayoutAttrInterface(), workgroup),
        dynSmem, idx(b, bytesA + numB * bytesB + bytesLA + bytesLB),
        ValueRange{});
    Value zeroF = arith::ConstantOp::create(b, loc, b.getF32FloatAttr(0.0f));
    for (int64_t i = 0; i < config.tileM; i += threads) {
      Value r = add(b, tid, idx(b, i));
      auto inRange = scf::IfOp::create(b, loc, lessThan(b, r, idx(b, config.tileM)),
                                       false);
      OpBuilder ib = inRange.getThenBodyBuilder();
      memref::StoreOp::create(ib, loc, zeroF, sumsq, ValueRange{r});
    }
  }

  // Prologue: slices 0 .. stages-2 in flight.
  for (int64_t s = 0; s + 1 < config.stages; ++s)
    loadSlice(b, idx(b, s), idx(b, s));

  Type f32 = b.getF32Type();
  Value zero = arith::ConstantOp::create(b, loc, b.getF32FloatAttr(0.0f));
  int64_t perProjection = mTiles * nTiles * 4; // accumulators
  // LoRA: x · Aᵀ alongside, mTiles x r/8 m16n8 tiles (each warp computes
  // its rows' t; the warps of a row band repeat it).
  int64_t loraTiles = loraRank / 8;
  int64_t loraBase = numB * perProjection;
  SmallVector<Value> init(loraBase + mTiles * loraTiles * 4, zero);
  auto loop = scf::ForOp::create(b, loc, idx(b, 0), kTiles, idx(b, 1), init);
  {
    OpBuilder lb = OpBuilder::atBlockBegin(loop.getBody());
    Value kt = loop.getInductionVar();
    // Slice kt has landed (at most stages-2 younger groups pending), and
    // every warp is done with the buffer the next load overwrites.
    NVVM::CpAsyncWaitGroupOp::create(lb, loc,
                                     static_cast<uint32_t>(config.stages - 2));
    gpu::BarrierOp::create(lb, loc);
    Value next = add(lb, kt, idx(lb, config.stages - 1));
    loadSlice(lb, rem(lb, next, config.stages), next);
    Value stage = rem(lb, kt, config.stages);
    if (norm) {
      // x ⊙ (g + offset) in place in slice kt's x tile (rstd waits for the
      // epilogue), each thread's partial sums of squares added to its rows'
      // shared sums; a barrier before ldmatrix reads the tile.
      auto v8 = [&](Type t) { return VectorType::get({8}, t); };
      int64_t chunksPerRow = config.tileK / 8;
      Value k0 = mul(lb, kt, config.tileK);
      for (int64_t i = 0; i < config.tileM * chunksPerRow / threads; ++i) {
        Value c = add(lb, tid, idx(lb, i * threads));
        Value r = div(lb, c, chunksPerRow);
        Value col = mul(lb, rem(lb, c, chunksPerRow), 8);
        Value xv = arith::ExtFOp::create(
            lb, loc, v8(f32),
            vector::LoadOp::create(lb, loc, v8(elem), smemA,
                                   ValueRange{stage, r, col}, false,
                                   llvm::MaybeAlign(16))
                .getResult());
        memref::AtomicRMWOp::create(lb, loc, arith::AtomicRMWKind::addf,
                                    sumOfSquares(lb, xv), sumsq, ValueRange{r});
        vector::StoreOp::create(lb, loc, normScaled(lb, xv, add(lb, k0, col)),
                                smemA, ValueRange{stage, r, col}, false,
                                llvm::MaybeAlign(16));
      }
      gpu::BarrierOp::create(lb, loc);
    }
    SmallVector<Value> acc(loop.getRegionIterArgs().begin(),
                           loop.getRegionIterArgs().end());
    auto vec = [&](int64_t rows, Type t) {
      return VectorType::get({rows, 2}, t);
    };
    auto resultType = LLVM::LLVMStructType::getLiteral(ctx, {f32, f32, f32, f32});
    NVVM::MMATypes mmaType =
        elem.isBF16() ? NVVM::MMATypes::bf16 : NVVM::MMATypes::f16;
    for (int64_t kk = 0; kk < config.tileK / 16; ++kk) {
      SmallVector<SmallVector<Value>> a(mTiles);
      for (int64_t i = 0; i < mTiles; ++i) {
        // Lane l addresses one 8-element row of one of the four 8x8
        // matrices (m 0-7 / 8-15 x k 0-7 / 8-15): K-major, row m = l % 16
        // at k = 8 (l / 16); MN-major (transposed on load), row k = l % 8
        // + 8 (l / 16) at m = 8 ((l / 8) % 2).
        Value mBase = add(lb, mul(lb, wm, 64), idx(lb, i * 16));
        Value row, col;
        if (aMN()) {
          row = add(lb, idx(lb, kk * 16),
                    add(lb, rem(lb, lane, 8), mul(lb, div(lb, lane, 16), 8)));
          col = add(lb, mBase, mul(lb, rem(lb, div(lb, lane, 8), 2), 8));
        } else {
          row = add(lb, mBase, rem(lb, lane, 16));
          col = add(lb, idx(lb, kk * 16), mul(lb, div(lb, lane, 16), 8));
        }
        Value frag = nvgpu::LdMatrixOp::create(lb, loc, vec(4, elem), smemA,
                                               ValueRange{stage, row, col},
                                               /*transpose=*/aMN(),
                                               /*numTiles=*/4);
        for (int64_t r = 0; r < 4; ++r)
          a[i].push_back(toI32(lb, frag, r));
      }
      for (int64_t p = 0; p < numB; ++p) {
        SmallVector<SmallVector<Value>> bf(nTiles);
        for (int64_t j = 0; j < nTiles; ++j) {
          // K-major: row n = l % 8 at k = 8 ((l / 8) % 2); MN-major
          // (transposed on load): row k = l % 16 at the tile's n.
          Value nBase = add(lb, mul(lb, wn, warpN), idx(lb, j * 8));
          Value row, col;
          if (bMN()) {
            row = add(lb, idx(lb, kk * 16), rem(lb, lane, 16));
            col = nBase;
          } else {
            row = add(lb, nBase, rem(lb, lane, 8));
            col = add(lb, idx(lb, kk * 16),
                      mul(lb, rem(lb, div(lb, lane, 8), 2), 8));
          }
          Value frag = nvgpu::LdMatrixOp::create(lb, loc, vec(2, elem),
                                                 smemBs[p],
                                                 ValueRange{stage, row, col},
                                                 /*transpose=*/bMN(),
                                                 /*numTiles=*/2);
          for (int64_t r = 0; r < 2; ++r)
            bf[j].push_back(toI32(lb, frag, r));
        }
        for (int64_t i = 0; i < mTiles; ++i)
          for (int64_t j = 0; j < nTiles; ++j) {
            int64_t base = p * perProjection + (i * nTiles + j) * 4;
            auto mma = NVVM::MmaOp::create(
                lb, loc, resultType, a[i], bf[j],
                ArrayRef(acc).slice(base, 4), {16, 8, 16}, std::nullopt,
                std::nullopt, std::array{mmaType, mmaType},
                std::array{NVVM::MMALayout::row, NVVM::MMALayout::col});
            for (int64_t e = 0; e < 4; ++e)
              acc[base + e] = LLVM::ExtractValueOp::create(lb, loc, mma, e);
          }
      }
      // LoRA: x · Aᵀ from A's slice (K-major rows of r, like W's).
      for (int64_t j = 0; j < loraTiles; ++j) {
        Value row = add(lb, idx(lb, j * 8), rem(lb, lane, 8));
        Value col = add(lb, idx(lb, kk * 16),
                        mul(lb, rem(lb, div(lb, lane, 8), 2), 8));
        Value frag = nvgpu::LdMatrixOp::create(lb, loc, vec(2, elem), smemLA,
                                               ValueRange{stage, row, col},
                                               /*transpose=*/false,
                                               /*numTiles=*/2);
        SmallVector<Value> la = {toI32(lb, frag, 0), toI32(lb, frag, 1)};
        for (int64_t i = 0; i < mTiles; ++i) {
          int64_t base = loraBase + (i * loraTiles + j) * 4;
          auto mma = NVVM::MmaOp::create(
              lb, loc, resultType, a[i], la, ArrayRef(acc).slice(base, 4),
              {16, 8, 16}, std::nullopt, std::nullopt,
              std::array{mmaType, mmaType},
              std::array{NVVM::MMALayout::row, NVVM::MMALayout::col});
          for (int64_t e = 0; e < 4; ++e)
            acc[base + e] = LLVM::ExtractValueOp::create(lb, loc, mma, e);
        }
      }
    }
    scf::YieldOp::create(lb, loc, acc);
  }
  // No copy may be in flight when the CTA exits.
  NVVM::CpAsyncWaitGroupOp::create(b, loc, 0u);

  // The RMSNorm row scales of this thread's rows, once every sum is in.
  SmallVector<Value> rstd; // [i * 2 + half]
  if (norm) {
    gpu::BarrierOp::create(b, loc);
    for (int64_t i = 0; i < mTiles; ++i)
      for (int64_t half = 0; half < 2; ++half) {
        Value r = add(b, add(b, mul(b, wm, 64), idx(b, i * 16 + 8 * half)),
                      div(b, lane, 4));
        rstd.push_back(rowRstd(
            b, memref::LoadOp::create(b, loc, sumsq, ValueRange{r})));
      }
  }
  // The accumulators the epilogue reads, and the row factor it applies.
  SmallVector<Value> mains(loop.getResults().take_front(loraBase));
  SmallVector<Value> rowFactor = rstd; // [i * 2 + half], or empty
  if (lora) {
    // y = rstd · x̂Wᵀ + scale · t Bᵀ, t = round(rstd · x̂Aᵀ): the main
    // accumulators scaled by rstd / scale, t's accumulator tiles are the
    // A fragments of k16 MMAs against B's tile (two n8 tiles of t per k16:
    // c0c1 / c2c3 are a0 / a1 of the first, a2 / a3 of the second), and
    // the epilogue multiplies by scale.
    gpu::BarrierOp::create(b, loc); // B's tile, copied by every thread
    double scale = lora.getScale().convertToDouble();
    auto cf = [&](double v) -> Value {
      return arith::ConstantOp::create(b, loc, b.getF32FloatAttr(v));
    };
    SmallVector<Value> factor;
    for (int64_t q = 0; q < 2 * mTiles; ++q)
      factor.push_back(norm ? arith::MulFOp::create(b, loc, rstd[q],
                                                    cf(1.0 / scale))
                            : cf(1.0 / scale));
    for (int64_t i = 0; i < mTiles; ++i)
      for (int64_t j = 0; j < nTiles; ++j)
        for (int64_t e = 0; e < 4; ++e) {
          int64_t at = (i * nTiles + j) * 4 + e;
          mains[at] =
              arith::MulFOp::create(b, loc, mains[at], factor[i * 2 + e / 2]);
        }
    auto pack = [&](Value lo, Value hi, Value s) {
      return packPair(b, lo, hi, s);
    };
    auto resultType =
        LLVM::LLVMStructType::getLiteral(ctx, {f32, f32, f32, f32});
    NVVM::MMATypes mmaType =
        elem.isBF16() ? NVVM::MMATypes::bf16 : NVVM::MMATypes::f16;
    for (int64_t kb = 0; kb < loraRank / 16; ++kb) {
      SmallVector<SmallVector<Value>> bf(nTiles);
      for (int64_t j = 0; j < nTiles; ++j) {
        Value row = add(b, add(b, mul(b, wn, warpN), idx(b, j * 8)),
                        rem(b, lane, 8));
        Value col = add(b, idx(b, kb * 16),
                        mul(b, rem(b, div(b, lane, 8), 2), 8));
        Value frag = nvgpu::LdMatrixOp::create(
            b, loc, VectorType::get({2, 2}, elem), smemLB,
            ValueRange{row, col}, /*transpose=*/false, /*numTiles=*/2);
        bf[j] = {toI32(b, frag, 0), toI32(b, frag, 1)};
      }
      for (int64_t i = 0; i < mTiles; ++i) {
        auto t = [&](int64_t tile, int64_t e) {
          return loop.getResult(loraBase + (i * loraTiles + tile) * 4 + e);
        };
        Value s0 = norm ? rstd[i * 2] : Value();
        Value s1 = norm ? rstd[i * 2 + 1] : Value();
        SmallVector<Value> a = {pack(t(2 * kb, 0), t(2 * kb, 1), s0),
                                pack(t(2 * kb, 2), t(2 * kb, 3), s1),
                                pack(t(2 * kb + 1, 0), t(2 * kb + 1, 1), s0),
                                pack(t(2 * kb + 1, 2), t(2 * kb + 1, 3), s1)};
        for (int64_t j = 0; j < nTiles; ++j) {
          int64_t base = (i * nTiles + j) * 4;
          auto mma = NVVM::MmaOp::create(
              b, loc, resultType, a, bf[j], ArrayRef(mains).slice(base, 4),
              {16, 8, 16}, std::nullopt, std::nullopt,
              std::array{mmaType, mmaType},
              std::array{NVVM::MMALayout::row, NVVM::MMALayout::col});
          for (int64_t e = 0; e < 4; ++e)
            mains[base + e] = LLVM::ExtractValueOp::create(b, loc, mma, e);
        }
      }
    }
    rowFactor.assign(2 * mTiles, cf(scale));
  }
  if (rope) {
    // q/k with RoPE: the rotation's partner column (d ± D/2) lies in
    // another warp's accumulators, so the rounded projection tile goes
    // through shared memory ([tile_m, tile_n + 8], over the drained stage
    // buffers) before each thread rotates its own pairs.
    auto inQ = scf::IfOp::create(b, loc, lessThan(b, n0, idx(b, nq)),
                                 /*withElseRegion=*/true);
    auto emit = [&](OpBuilder eb, Value out, Value colBase, Value bias) {
      auto v2 = [&](Type t) { return VectorType::get({2}, t); };
      Value ex = memref::ViewOp::create(
          eb, loc,
          MemRefType::get({config.tileM, config.tileN + 8}, elem,
                          MemRefLayoutAttrInterface(), workgroup),
          dynSmem, idx(eb, 0), ValueRange{});
      gpu::BarrierOp::create(eb, loc);
      auto local = [&](OpBuilder &ob, int64_t i, int64_t j, int64_t half) {
        Value r = add(ob, add(ob, mul(ob, wm, 64), idx(ob, i * 16 + 8 * half)),
                      div(ob, lane, 4));
        Value c = add(ob, add(ob, mul(ob, wn, warpN), idx(ob, j * 8)),
                      mul(ob, rem(ob, lane, 4), 2));
        return std::pair<Value, Value>(r, c);
      };
      for (int64_t i = 0; i < mTiles; ++i)
        for (int64_t j = 0; j < nTiles; ++j)
          for (int64_t half = 0; half < 2; ++half) {
            auto [r, c] = local(eb, i, j, half);
            int64_t base = (i * nTiles + j) * 4 + half * 2;
            Value lo = loop.getResult(base), hi = loop.getResult(base + 1);
            if (norm) {
              lo = arith::MulFOp::create(eb, loc, lo, rstd[i * 2 + half]);
              hi = arith::MulFOp::create(eb, loc, hi, rstd[i * 2 + half]);
            }
            Value v = vector::FromElementsOp::create(eb, loc, v2(f32),
                                                     ValueRange{lo, hi});
            vector::StoreOp::create(
                eb, loc,
                roundPair(eb, v, bias, bias ? add(eb, colBase, c) : Value()),
                ex, ValueRange{r, c}, false,
                llvm::MaybeAlign(2 * elem.getIntOrFloatBitWidth() / 8));
          }
      gpu::BarrierOp::create(eb, loc);
      Value seq = memref::DimOp::create(eb, loc, out, 2);
      llvm::MaybeAlign align2(2 * elem.getIntOrFloatBitWidth() / 8);
      Value half = idx(eb, headDim / 2);
      for (int64_t i = 0; i < mTiles; ++i)
        for (int64_t j = 0; j < nTiles; ++j)
          for (int64_t hf = 0; hf < 2; ++hf) {
            auto [r, c] = local(eb, i, j, hf);
            Value row = add(eb, m0, r);
            auto inRows = scf::IfOp::create(eb, loc, lessThan(eb, row, rows),
                                            false);
            OpBuilder rb = inRows.getThenBodyBuilder();
            Value batch = arith::DivUIOp::create(rb, loc, row, seq);
            Value pos = arith::RemUIOp::create(rb, loc, row, seq);
            Value tb = tableBatchOf(rb, batch);
            Value d = rem(rb, c, headDim);
            Value first = lessThan(rb, d, half);
            Value partner = arith::SelectOp::create(
                rb, loc, first, add(rb, c, half),
                arith::SubIOp::create(rb, loc, c, half));
            auto read = [&](Value col) -> Value {
              return arith::ExtFOp::create(
                  rb, loc, v2(f32),
                  vector::LoadOp::create(rb, loc, v2(elem), ex,
                                         ValueRange{r, col}, false, align2)
                      .getResult());
            };
            Value xp = read(partner);
            Value rotated = arith::SelectOp::create(
                rb, loc, first, arith::NegFOp::create(rb, loc, xp), xp);
            Value head = div(rb, add(rb, colBase, c), headDim);
            vector::StoreOp::create(
                rb, loc, ropePair(rb, read(c), rotated, tb, pos, d), out,
                ValueRange{batch, head, pos, d}, false, align2);
          }
    };
    emit(inQ.getThenBodyBuilder(), y, n0, biases[0]);
    OpBuilder kb = inQ.getElseBodyBuilder();
    emit(kb, yK, arith::SubIOp::create(kb, loc, n0, idx(kb, nq)), biases[1]);
    return success();
  }
  // Epilogue: lane l holds rows l/4 and l/4 + 8 of each m16n8 tile, columns
  // 2 (l % 4) and the next.
  for (int64_t i = 0; i < mTiles; ++i)
    for (int64_t j = 0; j < nTiles; ++j) {
      Value r0 = add(b, add(b, m0, add(b, mul(b, wm, 64), idx(b, i * 16))),
                     div(b, lane, 4));
      Value c = add(b, add(b, n0, add(b, mul(b, wn, warpN), idx(b, j * 8))),
                    mul(b, rem(b, lane, 4), 2));
      for (int64_t half = 0; half < 2; ++half) {
        SmallVector<Value> pairs;
        for (int64_t p = 0; p < numB; ++p) {
          int64_t base = p * perProjection + (i * nTiles + j) * 4 + half * 2;
          Value lo = mains[base], hi = mains[base + 1];
          if (!rowFactor.empty()) {
            lo = arith::MulFOp::create(b, loc, lo, rowFactor[i * 2 + half]);
            hi = arith::MulFOp::create(b, loc, hi, rowFactor[i * 2 + half]);
          }
          pairs.push_back(vector::FromElementsOp::create(
              b, loc, VectorType::get({2}, f32), ValueRange{lo, hi}));
        }
        if (failed(storePair(b, pairs, half ? add(b, r0, idx(b, 8)) : r0, c)))
          return failure();
      }
    }
  return success();
}

LogicalResult MatmulKernelBuilder::emitWgmma(OpBuilder &b,
                                             ValueRange descriptors) {
  // A RoPE pair computes one column tile of [Wq; Wk] at a time.
  int64_t numB = rope ? 1 : static_cast<int64_t>(projs.size());
  int64_t consumers = config.tileM / 64; // warpgroups issuing wgmma
  int64_t stages = config.stages;
  int64_t elemBytes = elem.getIntOrFloatBitWidth() / 8;
  int64_t rowBytes = config.tileK * elemBytes; // 128: one swizzle atom row
  int64_t bytesA = config.tileM * rowBytes;
  int64_t bytesB = config.tileN * rowBytes;
  // LoRA: A's [r, 64] slice rides in each stage after the weight tiles;
  // B's [tile_n, r] tile is loaded once, after the stages.
  int64_t bytesLoraA = loraRank * rowBytes;
  int64_t stageBytes = bytesA + numB * bytesB + bytesLoraA;
  int64_t loraBOffset = 1024 + stages * stageBytes;
  // An accumulated dW's old tile: a [64, tile_n] region per consumer
  // warpgroup after the stages, as 64-column boxes of 128-byte swizzled
  // rows (the TMA store's layout); its mbarrier at byte 768.
  int64_t oldTileOffset = loraBOffset + config.tileN * loraRank * elemBytes;
  int64_t outBytes = 64 * config.tileN * 2; // per warpgroup
  Type i32 = b.getI32Type(), i64 = b.getI64Type(), f32 = b.getF32Type();
  auto ptr3 = LLVM::LLVMPointerType::get(ctx, 3);

  // One dynamic shared buffer, 1024-byte aligned (the 128-byte swizzle's
  // atom): the full and empty mbarriers of each stage in the first 1024
  // bytes, then per stage the x tile and the weight tiles.
  auto gm = b.getInsertionBlock()->getParentOp()->getParentOfType<gpu::GPUModuleOp>();
  constexpr StringLiteral kSmem = "liger_matmul_smem";
  if (!gm.lookupSymbol(kSmem)) {
    OpBuilder mb = OpBuilder::atBlockBegin(gm.getBody());
    LLVM::GlobalOp::create(mb, loc,
                           LLVM::LLVMArrayType::get(b.getI8Type(), 0),
                           /*isConstant=*/false, LLVM::Linkage::External,
                           kSmem, Attribute(), /*alignment=*/1024,
                           /*addrSpace=*/3);
  }
  Value smem = LLVM::AddressOfOp::create(b, loc, ptr3, kSmem);
  auto i32c = [&](OpBuilder &ob, int64_t v) -> Value {
    return arith::ConstantIntOp::create(ob, loc, i32, v);
  };
  auto toI32v = [&](OpBuilder &ob, Value v) -> Value {
    return arith::IndexCastOp::create(ob, loc, i32, v);
  };
  auto at = [&](OpBuilder &ob, Value byteOffset) -> Value {
    return LLVM::GEPOp::create(ob, loc, ptr3, ob.getI8Type(), smem,
                               ArrayRef<LLVM::GEPArg>{byteOffset});
  };
  auto full = [&](OpBuilder &ob, Value s) {
    return at(ob, arith::MulIOp::create(ob, loc, toI32v(ob, s), i32c(ob, 8)));
  };
  auto empty = [&](OpBuilder &ob, Value s) {
    return at(ob, arith::AddIOp::create(
                      ob, loc,
                      arith::MulIOp::create(ob, loc, toI32v(ob, s), i32c(ob, 8)),
                      i32c(ob, 8 * stages)));
  };
  // Byte offset of tile `t` (0: x, 1 + p: weight p) of stage `s`.
  auto tile = [&](OpBuilder &ob, Value s, int64_t t) -> Value {
    Value off = arith::MulIOp::create(ob, loc, toI32v(ob, s),
                                      i32c(ob, stageBytes));
    return arith::AddIOp::create(
        ob, loc, off, i32c(ob, 1024 + (t ? bytesA + (t - 1) * bytesB : 0)));
  };

  // Thread 0 initializes the barriers; everyone sees them after the barrier.
  Value isFirst = arith::CmpIOp::create(b, loc, arith::CmpIPredicate::eq, tid,
                                        idx(b, 0));
  {
    auto init = scf::IfOp::create(b, loc, isFirst, false);
    OpBuilder ib = init.getThenBodyBuilder();
    for (int64_t s = 0; s < stages; ++s) {
      NVVM::MBarrierInitOp::create(ib, loc, full(ib, idx(ib, s)), i32c(ib, 1),
                                   Value());
      NVVM::MBarrierInitOp::create(ib, loc, empty(ib, idx(ib, s)),
                                   i32c(ib, consumers), Value());
    }
    if (lora) // B's tile: byte 512
      NVVM::MBarrierInitOp::create(ib, loc, at(ib, i32c(ib, 512)),
                                   i32c(ib, 1), Value());
    if (oldTile)
      NVVM::MBarrierInitOp::create(ib, loc, at(ib, i32c(ib, 768)),
                                   i32c(ib, 1), Value());
    NVVM::FenceMbarrierInitOp::create(ib, loc);
  }
  gpu::BarrierOp::create(b, loc);

  Value ticks = i32c(b, 0x989680); // suspend-time hint of the waits, in ns
  Value isProducer = lessThan(b, tid, idx(b, 128));
  auto roles = scf::IfOp::create(b, loc, isProducer, /*withElse=*/true);
  // Phase parity of the use `kt / stages` of a stage, as i32.
  auto parity = [&](OpBuilder &ob, Value kt) -> Value {
    return toI32v(ob, rem(ob, div(ob, kt, stages), 2));
  };

  // Producer warpgroup: one thread issues the TMA copies of each stage once
  // the consumers have released it.
  {
    OpBuilder pb = roles.getThenBodyBuilder();
    NVVM::SetMaxRegisterOp::create(pb, loc, 40,
                                   NVVM::SetMaxRegisterAction::decrease);
    auto one = scf::IfOp::create(pb, loc, isFirst, false);
    OpBuilder ob = one.getThenBodyBuilder();
    if (lora) {
      Value bar = at(ob, i32c(ob, 512));
      NVVM::MBarrierArriveExpectTxOp::create(
          ob, loc, Type(), bar, i32c(ob, config.tileN * loraRank * elemBytes),
          NVVM::MemScopeKind::CTA, false, Value());
      NVVM::CpAsyncBulkTensorGlobalToSharedClusterOp::create(
          ob, loc, at(ob, i32c(ob, loraBOffset)), descriptors[2 + numB],
          ValueRange{i32c(ob, 0), toI32v(ob, n0)}, bar, ValueRange{}, Value(),
          Value(), NVVM::TMALoadMode::TILE, /*isCTAOnly=*/true,
          NVVM::CTAGroupKindAttr(), Value());
    }
    if (oldTile) {
      // The old dW tile, whose load overlaps the whole product: box jb of
      // warpgroup w's rows at (n0 + 64 jb, m0 + 64 w); TMA fills past the
      // ends with zeros, which the store clips.
      Value bar = at(ob, i32c(ob, 768));
      NVVM::MBarrierArriveExpectTxOp::create(
          ob, loc, Type(), bar, i32c(ob, consumers * outBytes),
          NVVM::MemScopeKind::CTA, false, Value());
      for (int64_t w = 0; w < consumers; ++w)
        for (int64_t jb = 0; jb < config.tileN / 64; ++jb)
          NVVM::CpAsyncBulkTensorGlobalToSharedClusterOp::create(
              ob, loc,
              at(ob, i32c(ob, oldTileOffset + w * outBytes + jb * 64 * 128)),
              descriptors[descriptors.size() - 2],
              ValueRange{toI32v(ob, add(ob, n0, idx(ob, 64 * jb))),
                         toI32v(ob, add(ob, m0, idx(ob, 64 * w)))},
              bar, ValueRange{}, Value(), Value(), NVVM::TMALoadMode::TILE,
              /*isCTAOnly=*/true, NVVM::CTAGroupKindAttr(), Value());
    }
    auto loop = scf::ForOp::create(ob, loc, idx(ob, 0), kTiles, idx(ob, 1));
    OpBuilder lb = OpBuilder::atBlockBegin(loop.getBody());
    Value kt = loop.getInductionVar();
    Value s = rem(lb, kt, stages);
    Value freed = arith::XOrIOp::create(lb, loc, parity(lb, kt), i32c(lb, 1));
    NVVM::MBarrierTryWaitParityOp::create(lb, loc, empty(lb, s), freed, ticks);
    Value bar = full(lb, s);
    NVVM::MBarrierArriveExpectTxOp::create(lb, loc, Type(), bar,
                                           i32c(lb, stageBytes),
                                           NVVM::MemScopeKind::CTA, false,
                                           Value());
    Value k0 = toI32v(lb, mul(lb, kt, config.tileK));
    // A TMA copy into tile `t` of the stage, `offset` bytes in, at
    // coordinates (column, row) of the tensor.
    auto copyAt = [&](int64_t t, int64_t offset, Value descriptor, Value col,
                      Value row) {
      NVVM::CpAsyncBulkTensorGlobalToSharedClusterOp::create(
          lb, loc,
          at(lb, arith::AddIOp::create(lb, loc, tile(lb, s, t),
                                       i32c(lb, offset))),
          descriptor, ValueRange{col, row}, bar, ValueRange{}, Value(),
          Value(), NVVM::TMALoadMode::TILE, /*isCTAOnly=*/true,
          NVVM::CTAGroupKindAttr(), Value());
    };
    // K-major: one box of the tile's rows x tile_k; MN-major: boxes of
    // tile_k rows x 64 columns side by side, 64 * rowBytes bytes apart.
    auto copy = [&](int64_t t, Value descriptor, Value row, int64_t width,
                    bool mnMajor) {
      if (!mnMajor)
        return copyAt(t, 0, descriptor, k0, toI32v(lb, row));
      for (int64_t j = 0; j < width / 64; ++j)
        copyAt(t, j * config.tileK * rowBytes, descriptor,
               toI32v(lb, add(lb, row, idx(lb, 64 * j))), k0);
    };
    copy(0, descriptors[0], m0, config.tileM, aMN());
    if (rope) {
      // The column tile lies in Wq (columns [0, nq)) or in Wk.
      auto inQ = scf::IfOp::create(lb, loc, lessThan(lb, n0, idx(lb, nq)),
                                   /*withElseRegion=*/true);
      OpBuilder qb = inQ.getThenBodyBuilder(), kb = inQ.getElseBodyBuilder();
      for (auto [ob, descriptor, row] :
           {std::tuple<OpBuilder *, Value, Value>{&qb, descriptors[1], n0},
            {&kb, descriptors[2],
             arith::SubIOp::create(kb, loc, n0, idx(kb, nq))}})
        NVVM::CpAsyncBulkTensorGlobalToSharedClusterOp::create(
            *ob, loc, at(*ob, tile(*ob, s, 1)), descriptor,
            ValueRange{k0, toI32v(*ob, row)}, bar, ValueRange{}, Value(),
            Value(), NVVM::TMALoadMode::TILE, /*isCTAOnly=*/true,
            NVVM::CTAGroupKindAttr(), Value());
    }
    for (int64_t p = 0; p < numB && !rope; ++p)
      copy(1 + p, descriptors[1 + p], n0, config.tileN, bMN());
    if (lora)
      copy(1 + numB, descriptors[1 + numB], idx(lb, 0), loraRank, false);
  }

  // Consumer warpgroups: each owns 64 rows of the tile; per stage it waits
  // for the copies, issues tile_k / 16 wgmmas per projection as one group,
  // and releases the previous stage once that stage's group has completed.
  OpBuilder cb = roles.getElseBodyBuilder();
  NVVM::SetMaxRegisterOp::create(cb, loc, consumers > 1 ? 232 : 240,
                                 NVVM::SetMaxRegisterAction::increase);
  Value cw = arith::SubIOp::create(cb, loc, div(cb, tid, 128), idx(cb, 1));
  int64_t regs = config.tileN / 2; // f32 accumulators per thread
  auto accType = LLVM::LLVMStructType::getLiteral(
      ctx, SmallVector<Type>(regs, f32));
  SmallVector<Value> init(numB, LLVM::ZeroOp::create(cb, loc, accType));
  // LoRA: x · Aᵀ accumulates alongside, r / 2 f32 per thread.
  Type loraType = lora ? LLVM::LLVMStructType::getLiteral(
                             ctx, SmallVector<Type>(loraRank / 2, f32))
                       : Type();
  int64_t loraIdx = numB, sumIdx = numB + (lora ? 1 : 0);
  if (lora)
    init.push_back(LLVM::ZeroOp::create(cb, loc, loraType));
  // RMSNorm prologue: each thread's partial sums of squares of its two rows.
  if (norm)
    init.append(2, arith::ConstantOp::create(cb, loc, cb.getF32FloatAttr(0)));
  Value lane = rem(cb, tid, 32);
  Value warp = rem(cb, div(cb, tid, 32), 4);
  // Shared-memory matrix descriptor of a K-major tile at byte offset `off`
  // whose rows are swizzled in spans of `span` bytes (128, 64 or 32):
  // start address >> 4, leading offset 16 B (unused when swizzled), stride
  // 8 rows x span between 8-row atoms, the swizzle mode.
  Value smemBase = LLVM::PtrToIntOp::create(cb, loc, i64, smem);
  // A descriptor: the start address >> 4 of the tile at byte offset `off`
  // with the fixed fields (leading and stride offsets, swizzle mode).
  auto descriptor = [&](OpBuilder &ob, Value off, uint64_t fixed) -> Value {
    Value addr = arith::AddIOp::create(
        ob, loc, smemBase, arith::ExtUIOp::create(ob, loc, i64, off));
    Value start = arith::AndIOp::create(
        ob, loc, arith::ShRUIOp::create(ob, loc, addr,
                                        arith::ConstantIntOp::create(ob, loc, i64, 4)),
        arith::ConstantIntOp::create(ob, loc, i64, 0x3FFF));
    return arith::OrIOp::create(
        ob, loc, start,
        arith::ConstantIntOp::create(ob, loc, i64, static_cast<int64_t>(fixed)));
  };
  auto descriptorAt = [&](OpBuilder &ob, Value off,
                          int64_t span = 128) -> Value {
    uint64_t mode = span == 128 ? 1 : span == 64 ? 2 : 3;
    return descriptor(ob, off,
                      (1ull << 16) | (uint64_t(8 * span / 16) << 32) |
                          (mode << 62));
  };
  // Descriptor of an MN-major tile (a gradient product's operand): boxes of
  // tile_k swizzled 128-byte rows (64 elements of M or N each) side by
  // side: leading offset = the bytes between boxes along MN, stride = 8
  // rows (1024 bytes) along K, the 128-byte swizzle.
  int64_t boxBytes = config.tileK * rowBytes;
  auto descriptorMN = [&](OpBuilder &ob, Value off) -> Value {
    return descriptor(ob, off,
                      (uint64_t(boxBytes / 16) << 16) |
                          (uint64_t(1024 / 16) << 32) | (1ull << 62));
  };
  // The kk-th 16-wide K slice of a tile at byte offset `off`: 32 bytes into
  // each K-major row (the swizzle atom), or 16 rows down an MN-major box.
  auto slice = [&](OpBuilder &ob, Value off, int64_t kk, bool mnMajor) {
    return mnMajor ? descriptorMN(ob, arith::AddIOp::create(
                                          ob, loc, off, i32c(ob, kk * 16 * rowBytes)))
                   : descriptorAt(ob, arith::AddIOp::create(ob, loc, off,
                                                            i32c(ob, kk * 32)));
  };
  // The x tile of this warpgroup in stage `st`.
  auto xTile = [&](OpBuilder &ob, Value st) -> Value {
    return arith::AddIOp::create(
        ob, loc, tile(ob, st, 0),
        arith::MulIOp::create(ob, loc, toI32v(ob, cw), i32c(ob, 64 * rowBytes)));
  };
  // RMSNorm prologue on k-iteration `kt`: waits for its stage, then
  // rescales the x tile in place and adds to the rows' sums of squares.
  auto rescale = [&](OpBuilder &lb, Value kt,
                     SmallVector<Value, 2> sums) -> SmallVector<Value, 2> {
    Value s = rem(lb, kt, stages);
    NVVM::MBarrierTryWaitParityOp::create(lb, loc, full(lb, s), parity(lb, kt),
                                          ticks);
    Value aOff = xTile(lb, s);
    // x ⊙ (g + offset) in place on this warpgroup's 64 rows of the x tile
    // (the row scale rstd waits for the epilogue), summing x² per row.
    // Lane l of warp w takes rows 16 w + l/4 and + 8 (the rows its
    // accumulators hold) and 16-byte chunks 2 (l % 4) and the next of
    // each; chunk c of row r sits at chunk c ^ (r % 8) = c ^ (l / 4)
    // under the 128-byte swizzle.
    auto v8 = [&](Type t) { return VectorType::get({8}, t); };
    Value quad = toI32v(lb, div(lb, lane, 4));
    Value k0 = mul(lb, kt, config.tileK);
    for (int64_t h = 0; h < 2; ++h) {
      Value row = add(lb, add(lb, mul(lb, warp, 16), div(lb, lane, 4)),
                      idx(lb, 8 * h));
      Value sum = sums[h];
      for (int64_t cc = 0; cc < 2; ++cc) {
        Value c = add(lb, mul(lb, rem(lb, lane, 4), 2), idx(lb, cc));
        Value phys = arith::XOrIOp::create(lb, loc, toI32v(lb, c), quad);
        Value off = arith::AddIOp::create(
            lb, loc, aOff,
            arith::AddIOp::create(
                lb, loc, arith::MulIOp::create(lb, loc, toI32v(lb, row),
                                               i32c(lb, rowBytes)),
                arith::MulIOp::create(lb, loc, phys, i32c(lb, 16))));
        Value ptr = at(lb, off);
        Value xv = arith::ExtFOp::create(
            lb, loc, v8(f32),
            LLVM::LoadOp::create(lb, loc, v8(elem), ptr, 16).getResult());
        sum = sumOfSquares(lb, xv, sum);
        // Past K the tile holds TMA's zeros: any in-range g will do.
        Value gk = arith::MinUIOp::create(
            lb, loc, add(lb, k0, mul(lb, c, 8)), idx(lb, k - 8));
        LLVM::StoreOp::create(lb, loc, normScaled(lb, xv, gk), ptr, 16);
      }
      sums[h] = sum;
    }
    // The generic-proxy stores before the async-proxy (wgmma) reads, then
    // the warpgroup's named barrier.
    NVVM::FenceProxyOp::create(
        lb, loc, NVVM::ProxyKind::async_shared,
        NVVM::SharedSpaceAttr::get(ctx, NVVM::SharedSpace::shared_cta));
    NVVM::BarrierOp::create(
        lb, loc, Type(),
        toI32v(lb, add(lb, cw, idx(lb, 1))), i32c(lb, 128),
        NVVM::BarrierReductionAttr(), Value());
    return sums;
  };
  // With a prologue, stage kt + 1 is rescaled while stage kt's wgmmas run
  // (after the release of kt - 1, so that two stages suffice): stage 0
  // before the loop.
  if (norm) {
    SmallVector<Value, 2> sums =
        rescale(cb, idx(cb, 0), {init[sumIdx], init[sumIdx + 1]});
    init[sumIdx] = sums[0];
    init[sumIdx + 1] = sums[1];
  }
  auto loop = scf::ForOp::create(cb, loc, idx(cb, 0), kTiles, idx(cb, 1),
                                 init);
  {
    OpBuilder lb = OpBuilder::atBlockBegin(loop.getBody());
    Value kt = loop.getInductionVar();
    Value s = rem(lb, kt, stages);
    if (!norm)
      NVVM::MBarrierTryWaitParityOp::create(lb, loc, full(lb, s),
                                            parity(lb, kt), ticks);
    SmallVector<Value> acc(loop.getRegionIterArgs());
    Value aOff = xTile(lb, s);
    NVVM::WgmmaFenceAlignedOp::create(lb, loc);
    auto type = elem.isBF16() ? NVVM::WGMMATypes::bf16 : NVVM::WGMMATypes::f16;
    for (int64_t kk = 0; kk < config.tileK / 16; ++kk) {
      Value a = slice(lb, aOff, kk, aMN());
      for (int64_t p = 0; p < numB; ++p) {
        Value w = slice(lb, tile(lb, s, 1 + p), kk, bMN());
        // Layouts: A row = K-major (col: transposed), B col = K-major.
        acc[p] = NVVM::WgmmaMmaAsyncOp::create(
            lb, loc, accType, acc[p], a, w,
            NVVM::MMAShapeAttr::get(ctx, 64, config.tileN, 16), type, type,
            NVVM::WGMMATypes::f32, NVVM::WGMMAScaleOut::one,
            NVVM::WGMMAScaleIn::one, NVVM::WGMMAScaleIn::one,
            aMN() ? NVVM::MMALayout::col : NVVM::MMALayout::row,
            bMN() ? NVVM::MMALayout::row : NVVM::MMALayout::col,
            NVVM::MMAIntOverflowAttr());
      }
      if (lora) {
        Value la = slice(lb, tile(lb, s, 1 + numB), kk, false);
        acc[loraIdx] = NVVM::WgmmaMmaAsyncOp::create(
            lb, loc, loraType, acc[loraIdx], a, la,
            NVVM::MMAShapeAttr::get(ctx, 64, loraRank, 16), type, type,
            NVVM::WGMMATypes::f32, NVVM::WGMMAScaleOut::one,
            NVVM::WGMMAScaleIn::one, NVVM::WGMMAScaleIn::one,
            NVVM::MMALayout::row, NVVM::MMALayout::col,
            NVVM::MMAIntOverflowAttr());
      }
    }
    NVVM::WgmmaGroupSyncAlignedOp::create(lb, loc);
    NVVM::WgmmaWaitGroupSyncOp::create(lb, loc, 1);
    // The group of kt - 1 has completed: its stage may be refilled.
    Value release = arith::AndIOp::create(
        lb, loc,
        arith::CmpIOp::create(lb, loc, arith::CmpIPredicate::ugt, kt,
                              idx(lb, 0)),
        arith::CmpIOp::create(lb, loc, arith::CmpIPredicate::eq,
                              rem(lb, tid, 128), idx(lb, 0)));
    auto rel = scf::IfOp::create(lb, loc, release, false);
    OpBuilder rb = rel.getThenBodyBuilder();
    Value prev = rem(rb, add(rb, kt, idx(rb, stages - 1)), stages);
    NVVM::MBarrierArriveOp::create(rb, loc, Type(), empty(rb, prev), Value());
    if (norm) {
      Value more = lessThan(lb, add(lb, kt, idx(lb, 1)), kTiles);
      auto next = scf::IfOp::create(lb, loc, TypeRange{f32, f32}, more,
                                    /*withElseRegion=*/true);
      OpBuilder tb = next.getThenBodyBuilder();
      SmallVector<Value, 2> sums = rescale(tb, add(tb, kt, idx(tb, 1)),
                                           {acc[sumIdx], acc[sumIdx + 1]});
      scf::YieldOp::create(tb, loc, ValueRange(sums));
      OpBuilder eb = next.getElseBodyBuilder();
      scf::YieldOp::create(eb, loc, ValueRange{acc[sumIdx], acc[sumIdx + 1]});
      acc[sumIdx] = next.getResult(0);
      acc[sumIdx + 1] = next.getResult(1);
    }
    scf::YieldOp::create(lb, loc, acc);
  }
  NVVM::WgmmaWaitGroupSyncOp::create(cb, loc, 0);

  // The RMSNorm row scales: each row's sum of squares is spread over the 4
  // lanes of a quad.
  SmallVector<Value> rstd;
  if (norm) {
    for (int64_t h = 0; h < 2; ++h) {
      Value sum = loop.getResult(sumIdx + h);
      for (int64_t mask : {1, 2})
        sum = arith::AddFOp::create(
            cb, loc, sum,
            gpu::ShuffleOp::create(cb, loc, sum, mask, 32,
                                   gpu::ShuffleMode::XOR)
                .getShuffleResult());
      rstd.push_back(rowRstd(cb, sum));
    }
  }
  // Row factors for the epilogue (rstd with a norm), and the main
  // accumulators as the epilogue reads them.
  SmallVector<Value> rowScale(2, Value());
  if (norm)
    rowScale = {rstd[0], rstd[1]};
  SmallVector<Value> mains;
  for (int64_t p = 0; p < numB; ++p)
    mains.push_back(loop.getResult(p));
  if (lora) {
    // y = rstd · x̂Wᵀ + scale · t Bᵀ with t = round(rstd · x̂Aᵀ) (x̂ = x or
    // x ⊙ g): scale the main accumulators by rstd / scale in f32, add t Bᵀ
    // with wgmma (t from registers: the m64n{r} accumulator fragment of
    // k-slice kk is the A fragment of a k16 wgmma), and multiply by scale
    // in the epilogue.
    double scale = lora.getScale().convertToDouble();
    auto cf = [&](double v) -> Value {
      return arith::ConstantOp::create(cb, loc, cb.getF32FloatAttr(v));
    };
    SmallVector<Value> factor;
    for (int64_t h = 0; h < 2; ++h)
      factor.push_back(norm ? arith::MulFOp::create(cb, loc, rstd[h],
                                                    cf(1.0 / scale))
                            : cf(1.0 / scale));
    Value acc = mains[0];
    for (int64_t i = 0; i < regs; ++i) {
      Value v = LLVM::ExtractValueOp::create(cb, loc, acc, i);
      v = arith::MulFOp::create(cb, loc, v, factor[(i % 4) / 2]);
      acc = LLVM::InsertValueOp::create(cb, loc, acc, v, i);
    }
    Value t = loop.getResult(loraIdx);
    SmallVector<Value> aRegs; // bf16 pairs as i32, 4 per k16 slice
    for (int64_t i = 0; i < loraRank / 2; i += 2) {
      Value lo = LLVM::ExtractValueOp::create(cb, loc, t, i);
      Value hi = LLVM::ExtractValueOp::create(cb, loc, t, i + 1);
      aRegs.push_back(packPair(cb, lo, hi, norm ? rstd[(i % 4) / 2] : Value(),
                               /*asI32=*/true));
    }
    NVVM::MBarrierTryWaitParityOp::create(cb, loc, at(cb, i32c(cb, 512)),
                                          i32c(cb, 0), ticks);
    NVVM::WgmmaFenceAlignedOp::create(cb, loc);
    // B's tile: K-major rows of r * 2 bytes, swizzled in that span.
    int64_t span = loraRank * elemBytes;
    std::string shape = "m64n" + std::to_string(config.tileN) + "k16";
    std::string dtype = elem.isBF16() ? "bf16" : "f16";
    for (int64_t kk = 0; kk < loraRank / 16; ++kk) {
      Value desc =
          descriptorAt(cb, i32c(cb, loraBOffset + kk * 32), span);
      // wgmma with A in registers (NVVM's op takes A from shared memory
      // only): d += a · B, as inline PTX.
      std::string ptx = "{\n.reg .pred p;\nsetp.ne.b32 p, 1, 0;\nwgmma."
                        "mma_async.sync.aligned." + shape + ".f32." + dtype +
                        "." + dtype + " {";
      std::string constraints;
      for (int64_t i = 0; i < regs; ++i) {
        ptx += (i ? ", $" : "$") + std::to_string(i);
        constraints += (i ? ",=f" : "=f");
      }
      ptx += "}, {";
      for (int64_t i = 0; i < 4; ++i)
        ptx += (i ? ", $" : "$") + std::to_string(2 * regs + i);
      ptx += "}, $" + std::to_string(2 * regs + 4) + ", p, 1, 1, 0;\n}";
      for (int64_t i = 0; i < regs; ++i)
        constraints += "," + std::to_string(i);
      constraints += ",r,r,r,r,l";
      SmallVector<Value> operands;
      for (int64_t i = 0; i < regs; ++i)
        operands.push_back(LLVM::ExtractValueOp::create(cb, loc, acc, i));
      operands.append(aRegs.begin() + 4 * kk, aRegs.begin() + 4 * kk + 4);
      operands.push_back(desc);
      acc = LLVM::InlineAsmOp::create(
                cb, loc, accType, operands, ptx, constraints,
                /*has_side_effects=*/true, /*is_align_stack=*/false,
                LLVM::tailcallkind::TailCallKind::None,
                LLVM::AsmDialectAttr::get(ctx, LLVM::AsmDialect::AD_ATT),
                ArrayAttr())
                .getResult(0);
    }
    NVVM::WgmmaGroupSyncAlignedOp::create(cb, loc);
    NVVM::WgmmaWaitGroupSyncOp::create(cb, loc, 0);
    mains[0] = acc;
    rowScale = {cf(scale), cf(scale)};
  }
  // Epilogue: thread (warp w, lane l) of a warpgroup holds, for each n8
  // block j, rows 16 w + l/4 (registers 4j, 4j+1) and + 8 (4j+2, 4j+3) at
  // columns 8 j + 2 (l % 4) and the next: mma.sync's m16n8 fragment.
  Value r0 = add(cb, add(cb, m0, mul(cb, cw, 64)),
                 add(cb, mul(cb, warp, 16), div(cb, lane, 4)));
  if (rope) {
    auto inQ = scf::IfOp::create(cb, loc, lessThan(cb, n0, idx(cb, nq)),
                                 /*withElseRegion=*/true);
    OpBuilder qb = inQ.getThenBodyBuilder(), kb = inQ.getElseBodyBuilder();
    emitRoPEEpilogue(qb, mains[0], rowScale, r0, y, n0, biases[0]);
    emitRoPEEpilogue(kb, mains[0], rowScale, r0, yK,
                     arith::SubIOp::create(kb, loc, n0, idx(kb, nq)),
                     biases[1]);
    return success();
  }
  // TMA-store epilogue: the warpgroup's 64 x tile_n result goes into shared
  // memory (over the drained stage buffers, once every consumer is past
  // its last wgmma) as 64-column boxes with the 128-byte swizzle — pair
  // (row rl, column 8j + 2(l % 4)) lands in chunk (j % 8) ^ (rl % 8) of row
  // rl of box j / 8, so a quad's eight rows hit distinct banks — then one
  // thread stores the boxes with cp.async.bulk.tensor (the map clips the
  // row and column ends).
  // An accumulated dW's tile is read, summed and stored in its own region
  // once its load has landed.
  Value outBase;
  if (oldTile) {
    NVVM::MBarrierTryWaitParityOp::create(cb, loc, at(cb, i32c(cb, 768)),
                                          i32c(cb, 0), ticks);
    outBase = arith::AddIOp::create(
        cb, loc, i32c(cb, oldTileOffset),
        arith::MulIOp::create(cb, loc, toI32v(cb, cw), i32c(cb, outBytes)));
  } else if (tmaStore) {
    NVVM::BarrierOp::create(cb, loc, Type(), i32c(cb, 8),
                            i32c(cb, 128 * consumers),
                            NVVM::BarrierReductionAttr(), Value());
    outBase = arith::AddIOp::create(
        cb, loc, i32c(cb, 1024),
        arith::MulIOp::create(cb, loc, toI32v(cb, cw), i32c(cb, outBytes)));
  }
  Value quad = toI32v(cb, div(cb, lane, 4));
  Value rowInWG = toI32v(cb, add(cb, mul(cb, warp, 16), div(cb, lane, 4)));
  for (int64_t j = 0; j < config.tileN / 8; ++j) {
    Value c = add(cb, add(cb, n0, idx(cb, j * 8)), mul(cb, rem(cb, lane, 4), 2));
    for (int64_t half = 0; half < 2; ++half) {
      SmallVector<Value> pairs;
      for (int64_t p = 0; p < numB; ++p) {
        int64_t base = 4 * j + 2 * half;
        Value lo = LLVM::ExtractValueOp::create(cb, loc, mains[p], base);
        Value hi = LLVM::ExtractValueOp::create(cb, loc, mains[p], base + 1);
        if (rowScale[half]) {
          lo = arith::MulFOp::create(cb, loc, lo, rowScale[half]);
          hi = arith::MulFOp::create(cb, loc, hi, rowScale[half]);
        }
        pairs.push_back(vector::FromElementsOp::create(
            cb, loc, VectorType::get({2}, f32), ValueRange{lo, hi}));
      }
      auto toSmem = [&](OpBuilder &ob, Value pair) {
        Value rl = arith::AddIOp::create(ob, loc, rowInWG, i32c(ob, 8 * half));
        Value phys = arith::XOrIOp::create(ob, loc, i32c(ob, j % 8), quad);
        Value off = arith::AddIOp::create(
            ob, loc,
            arith::AddIOp::create(
                ob, loc, outBase,
                arith::AddIOp::create(
                    ob, loc, i32c(ob, (j / 8) * 64 * 128),
                    arith::MulIOp::create(ob, loc, rl, i32c(ob, 128)))),
            arith::AddIOp::create(
                ob, loc, arith::MulIOp::create(ob, loc, phys, i32c(ob, 16)),
                toI32v(ob, mul(ob, rem(ob, lane, 4), 4))));
        Value ptr = at(ob, off);
        if (oldTile) {
          // old + the f32 product, rounded once.
          auto f32x2 = VectorType::get({2}, f32);
          auto elemx2 = VectorType::get({2}, elem);
          Value old = arith::ExtFOp::create(
              ob, loc, f32x2,
              LLVM::LoadOp::create(ob, loc, elemx2, ptr, 4).getResult());
          pair = arith::TruncFOp::create(
              ob, loc, elemx2, arith::AddFOp::create(ob, loc, old, pair));
        }
        LLVM::StoreOp::create(ob, loc, pair, ptr, 4);
      };
      Value r = half ? add(cb, r0, idx(cb, 8)) : r0;
      if (failed(tmaStore ? storePair(cb, pairs, r, c, toSmem)
                          : storePair(cb, pairs, r, c)))
        return failure();
    }
  }
  if (tmaStore) {
    // The generic-proxy writes before the async-proxy reads, the
    // warpgroup's barrier, then its first thread stores the boxes and waits
    // until they have been read.
    NVVM::FenceProxyOp::create(
        cb, loc, NVVM::ProxyKind::async_shared,
        NVVM::SharedSpaceAttr::get(ctx, NVVM::SharedSpace::shared_cta));
    NVVM::BarrierOp::create(cb, loc, Type(),
                            toI32v(cb, add(cb, cw, idx(cb, 1))), i32c(cb, 128),
                            NVVM::BarrierReductionAttr(), Value());
    auto first = scf::IfOp::create(
        cb, loc,
        arith::CmpIOp::create(cb, loc, arith::CmpIPredicate::eq,
                              rem(cb, tid, 128), idx(cb, 0)),
        false);
    OpBuilder fb = first.getThenBodyBuilder();
    Value rowOrigin = toI32v(fb, add(fb, m0, mul(fb, cw, 64)));
    for (int64_t jb = 0; jb < config.tileN / 64; ++jb)
      NVVM::CpAsyncBulkTensorSharedCTAToGlobalOp::create(
          fb, loc, descriptors.back(),
          at(fb, arith::AddIOp::create(fb, loc, outBase,
                                       i32c(fb, jb * 64 * 128))),
          ValueRange{toI32v(fb, add(fb, n0, idx(fb, 64 * jb))), rowOrigin},
          Value(), NVVM::TMAStoreMode::TILE, Value());
    NVVM::CpAsyncBulkCommitGroupOp::create(fb, loc);
    NVVM::CpAsyncBulkWaitGroupOp::create(fb, loc, 0, fb.getUnitAttr());
  }
  return success();
}

void MatmulKernelBuilder::emitRoPEEpilogue(OpBuilder &b, Value acc,
                                           ArrayRef<Value> rowScale, Value r0,
                                           Value out, Value colBase,
                                           Value bias) {
  Type f32 = b.getF32Type();
  auto v2 = [&](Type t) { return VectorType::get({2}, t); };
  int64_t pairs = config.tileN / 8, half = headDim / 2;
  Value lane = rem(b, tid, 32);
  Value quadCol = mul(b, rem(b, lane, 4), 2);
  Value seq = memref::DimOp::create(b, loc, out, 2);
  Value firstHead = div(b, colBase, headDim);
  for (int64_t h = 0; h < 2; ++h) {
    Value r = h ? add(b, r0, idx(b, 8)) : r0;
    auto inRows = scf::IfOp::create(b, loc, lessThan(b, r, rows), false);
    OpBuilder rb = inRows.getThenBodyBuilder();
    Value batch = arith::DivUIOp::create(rb, loc, r, seq);
    Value pos = arith::RemUIOp::create(rb, loc, r, seq);
    Value tb = tableBatchOf(rb, batch);
    // liger.linear's values: (rstd ·) acc (+ bias) rounded to the dtype,
    // then back to f32 for the rotation.
    SmallVector<Value> vals;
    for (int64_t j = 0; j < pairs; ++j) {
      Value lo = LLVM::ExtractValueOp::create(rb, loc, acc, 4 * j + 2 * h);
      Value hi = LLVM::ExtractValueOp::create(rb, loc, acc, 4 * j + 2 * h + 1);
      if (rowScale[h]) {
        lo = arith::MulFOp::create(rb, loc, lo, rowScale[h]);
        hi = arith::MulFOp::create(rb, loc, hi, rowScale[h]);
      }
      Value v = vector::FromElementsOp::create(rb, loc, v2(f32),
                                               ValueRange{lo, hi});
      Value c = bias ? add(rb, add(rb, colBase, idx(rb, 8 * j)), quadCol)
                     : Value();
      vals.push_back(
          arith::ExtFOp::create(rb, loc, v2(f32), roundPair(rb, v, bias, c)));
    }
    // rope: x[d] cos[d] + rotate_half(x)[d] sin[d], rotate_half(x)[d] =
    // -x[d + D/2] in the first half, x[d - D/2] in the second: the partner
    // pair is D/16 n8 blocks away, in the same thread.
    for (int64_t j = 0; j < pairs; ++j) {
      int64_t inHead = (8 * j) % headDim;
      bool first = inHead < half;
      int64_t partner = first ? j + half / 8 : j - half / 8;
      Value d = add(rb, idx(rb, inHead), quadCol);
      Value rotated = vals[partner];
      if (first)
        rotated = arith::NegFOp::create(rb, loc, rotated);
      Value head = add(rb, firstHead, idx(rb, 8 * j / headDim));
      vector::StoreOp::create(
          rb, loc, ropePair(rb, vals[j], rotated, tb, pos, d), out,
          ValueRange{batch, head, pos, d}, false,
          llvm::MaybeAlign(2 * elem.getIntOrFloatBitWidth() / 8));
    }
  }
}
} // namespace

FailureOr<RowKernelInfo>
mlir::liger::buildMatmulKernel(FusionOp group, gpu::GPUModuleOp module,
                               StringRef name,
                               const MatmulKernelConfig &config) {
  return MatmulKernelBuilder(group, config).build(module, name);
}
