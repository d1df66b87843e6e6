//===- MatmulKernel.cpp - matmul groups as Tensor Core kernels ------------===//
//
// The first matmul template: y = f(x · W₁ᵀ[, x · W₂ᵀ]) for a group holding
// one `liger.linear`, or two on the same input (a gate/up pair), each W
// [N, K], K-major as PyTorch stores it, with an elementwise f, using the
// mma.sync family (sm_80 and later; the fallback the issue asks for, and the
// simplest Tensor Core kernel that is right):
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
//    same x fragments;
//  - the epilogue rounds the accumulators to the projections' dtype (as
//    liger.linear does), applies the group's elementwise ops (residual add,
//    mul, SiLU, GELU, SwiGLU/GeGLU of the pair: their reference lowering,
//    on pairs of columns, reading [rows, N] and [N] inputs at the pair) and
//    stores pairs of columns, masked at the row and column ends.
//
// Grid: (ceil(N / tile_n), ceil(rows / tile_m)).
//
//===----------------------------------------------------------------------===//

#include "liger/Conversion/LigerToGPU/MatmulKernel.h"
#include "liger/Conversion/LigerToLinalg/LigerToLinalg.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/LLVMIR/NVVMDialect.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/NVGPU/IR/NVGPUDialect.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
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
  /// Row `row` of an ldmatrix fragment as an MMA operand: bf16 pairs packed
  /// in an i32, f16 pairs as vector<2xf16>.
  Value toI32(OpBuilder &b, Value fragment, int64_t row);
  /// The ops after the projections as linalg on a scratch function
  /// @epilogue(%projections..., %other inputs...), checked to be
  /// elementwise.
  LogicalResult lowerEpilogue();
  /// The epilogue on the rounded pairs of the projections at row `r`,
  /// columns `c` and c + 1; returns the pair to store.
  FailureOr<Value> applyEpilogue(OpBuilder &b, ValueRange projected, Value r,
                                 Value c);
  bool isProjectionOperand(Value v) {
    return llvm::any_of(linears, [&](LinearOp l) {
      return v == l.getInput() || v == l.getWeight();
    });
  }

  FusionOp group;
  MatmulKernelConfig config;
  MLIRContext *ctx;
  Location loc;
  Type elem;
  int64_t n = 0, k = 0, pad = 0, numK = 0;
  Value x, y, rows, tid, m0, n0, smemA;
  SmallVector<LinearOp> linears;    // 1, or 2 for a gate/up pair
  SmallVector<Value> ws, smemBs;    // per projection
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
  for (LinearOp linear : linears)
    types.push_back(linear.getResult().getType());
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
  for (auto [linear, value] : llvm::zip(linears, entry->getArguments()))
    mapping.map(linear.getResult(), value);
  for (auto [arg, value] :
       llvm::zip(others, entry->getArguments().drop_front(linears.size())))
    mapping.map(arg, value);
  b.setInsertionPointToEnd(entry);
  for (Operation &op : body.without_terminator()) {
    if (isa<LinearOp>(op))
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

void MatmulKernelBuilder::loadSlice(OpBuilder &b, Value stage, Value kt) {
  int64_t threads = config.threads();
  int64_t chunksPerRow = config.tileK / 8; // 16-byte chunks of bf16/f16
  Value inK = lessThan(b, kt, idx(b, numK));
  Value ktc = arith::MinUIOp::create(b, loc, kt, idx(b, numK - 1));
  Value k0 = mul(b, ktc, config.tileK);
  auto copy = [&](Value src, Value dst, int64_t tileRows, Value base,
                  Value limit) {
    for (int64_t i = 0; i < tileRows * chunksPerRow / threads; ++i) {
      Value c = add(b, tid, idx(b, i * threads));
      Value r = div(b, c, chunksPerRow);
      Value col = mul(b, rem(b, c, chunksPerRow), 8);
      Value g = add(b, base, r);
      Value valid = arith::AndIOp::create(b, loc, lessThan(b, g, limit), inK);
      // A clamped (readable) address, zero bytes read when out of range.
      Value gc = arith::MinUIOp::create(
          b, loc, g, arith::SubIOp::create(b, loc, limit, idx(b, 1)));
      Value count =
          arith::SelectOp::create(b, loc, valid, idx(b, 8), idx(b, 0));
      nvgpu::DeviceAsyncCopyOp::create(
          b, loc, nvgpu::DeviceAsyncTokenType::get(ctx), dst,
          ValueRange{stage, r, col}, src, ValueRange{gc, add(b, k0, col)},
          b.getIndexAttr(8), count, b.getUnitAttr());
    }
  };
  copy(x, smemA, config.tileM, m0, rows);
  for (auto [w, smemB] : llvm::zip(ws, smemBs))
    copy(w, smemB, config.tileN, n0, idx(b, n));
  NVVM::CpAsyncCommitGroupOp::create(b, loc);
}

Value MatmulKernelBuilder::toI32(OpBuilder &b, Value fragment, int64_t row) {
  Value pair = vector::ExtractOp::create(b, loc, fragment, row);
  if (elem.isF16()) // nvvm.mma.sync takes f16 pairs as vector<2xf16>
    return pair;
  Value packed = vector::BitCastOp::create(
      b, loc, VectorType::get({1}, b.getI32Type()), pair);
  return vector::ExtractOp::create(b, loc, packed, 0);
}

FailureOr<RowKernelInfo> MatmulKernelBuilder::build(gpu::GPUModuleOp module,
                                                    StringRef name) {
  // The body this template implements: one liger.linear without bias on
  // the group's inputs, then elementwise ops, one result.
  Block &body = group.getBody().front();
  for (Operation &op : body)
    if (auto linear = dyn_cast<LinearOp>(op))
      linears.push_back(linear);
  if (llvm::any_of(body, [](Operation &op) { return isa<LoRALinearOp>(op); }))
    return fail("LoRA projections come with the next templates");
  if (linears.size() > 2)
    return fail("the group holds " + Twine(linears.size()) +
                " projections; one, or a gate/up pair, is what the template "
                "computes");
  auto linear = linears.empty() ? LinearOp() : linears.front();
  bool sameInputs = llvm::all_of(linears, [&](LinearOp other) {
    return other.getInput() == linear.getInput() &&
           other.getWeight().getType() == linear.getWeight().getType() &&
           !other.getBias() && isa<BlockArgument>(other.getWeight());
  });
  if (!linear || !sameInputs || !isa<BlockArgument>(linear.getInput()) ||
      group.getYield().getValues().size() != 1)
    return fail("the mma.sync template implements one liger.linear without "
                "bias on the group's inputs (or a gate/up pair on one "
                "input), with an elementwise epilogue and one result; "
                "prologues, bias and LoRA projections come with the next "
                "templates");
  if (config.wgmma)
    return fail("the wgmma template is not implemented yet; pin "
                "mma = \"mma_sync\" in 'liger.kernel_config'");
  auto xType = cast<RankedTensorType>(linear.getInput().getType());
  auto wType = cast<RankedTensorType>(linear.getWeight().getType());
  elem = xType.getElementType();
  if (!elem.isBF16() && !elem.isF16())
    return fail("mma.sync takes bf16 or f16 inputs");
  n = wType.getDimSize(0);
  k = wType.getDimSize(1);
  if (k % config.tileK)
    return fail("K = " + Twine(k) + " is not a multiple of tile_k = " +
                Twine(config.tileK));
  if (n % 8)
    return fail("N = " + Twine(n) + " is not a multiple of 8");
  if (failed(lowerEpilogue()))
    return failure();
  int64_t threads = config.threads();
  int64_t warps = threads / 32;
  int64_t warpsM = config.tileM / 64;
  int64_t warpsN = warps / std::max<int64_t>(warpsM, 1);
  if (warpsM < 1 || warpsN < 1 || warpsM * warpsN != warps ||
      config.tileN % (warpsN * 8) || config.tileK % 16 ||
      (config.tileM * config.tileK / 8) % threads ||
      (config.tileN * config.tileK / 8) % threads)
    return fail("tile " + Twine(config.tileM) + "x" + Twine(config.tileN) +
                "x" + Twine(config.tileK) + " does not split over " +
                Twine(warps) + " warps");
  int64_t warpN = config.tileN / warpsN; // columns per warp
  int64_t nTiles = warpN / 8;
  constexpr int64_t mTiles = 4; // 64 rows per warp
  numK = k / config.tileK;
  pad = config.tileK + 8; // 16 bytes of padding per shared-memory row
  int64_t elemBytes = elem.getIntOrFloatBitWidth() / 8;
  int64_t bytesA = config.stages * config.tileM * pad * elemBytes;
  int64_t bytesB = config.stages * config.tileN * pad * elemBytes; // each
  int64_t numB = static_cast<int64_t>(linears.size());

  RowKernelInfo info;
  info.name = name.str();
  info.config.threads = threads;
  info.config.vectorWidth = 8;
  info.hidden = n;
  info.sharedMemoryBytes = bytesA + numB * bytesB;
  info.templateName = "matmul";
  info.gridDims = {std::to_string((n + config.tileN - 1) / config.tileN),
                   "rows/" + std::to_string(config.tileM), "1"};
  // Parameters: the group's inputs in order, then the output.
  SmallVector<Type> paramTypes;
  unsigned rank = xType.getRank();
  for (BlockArgument arg : body.getArguments()) {
    std::string pname = "input" + std::to_string(arg.getArgNumber());
    auto type = cast<RankedTensorType>(arg.getType());
    Type argElem = type.getElementType();
    if (arg == linear.getInput()) {
      info.params.push_back({pname, false, false, RowParamKind::Rows, elem, k, 0});
      paramTypes.push_back(MemRefType::get({ShapedType::kDynamic, k}, elem));
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
  info.params.push_back({"output0", true, false, RowParamKind::Rows, outElem, n, 0});
  paramTypes.push_back(MemRefType::get({ShapedType::kDynamic, n}, outElem));
  for (Operation &op : body.without_terminator())
    info.opChain += (info.opChain.empty() ? "" : ", ") +
                    op.getName().getStringRef().str();

  OpBuilder b(ctx);
  b.setInsertionPointToEnd(module.getBody());
  auto kernel = gpu::GPUFuncOp::create(b, loc, name,
                                       FunctionType::get(ctx, paramTypes, {}));
  kernel->setAttr(gpu::GPUDialect::getKernelFuncAttrName(), b.getUnitAttr());
  kernel.setKnownBlockSizeAttr(
      b.getDenseI32ArrayAttr({static_cast<int32_t>(threads), 1, 1}));
  Block &entry = kernel.getBody().front();
  b.setInsertionPointToStart(&entry);
  for (BlockArgument arg : body.getArguments()) {
    Value param = entry.getArgument(arg.getArgNumber());
    if (arg == linear.getInput()) {
      x = param;
    } else if (isProjectionOperand(arg)) {
      // weights are bound per projection below
    } else {
      epilogueParams[arg] = param;
      epilogueRows[arg] = cast<MemRefType>(param.getType()).getRank() == 2;
    }
  }
  y = entry.getArguments().back();
  for (LinearOp l : linears)
    ws.push_back(entry.getArgument(
        cast<BlockArgument>(l.getWeight()).getArgNumber()));
  tid = gpu::ThreadIdOp::create(b, loc, gpu::Dimension::x);
  Value tileN = gpu::BlockIdOp::create(b, loc, gpu::Dimension::x);
  Value tileM = gpu::BlockIdOp::create(b, loc, gpu::Dimension::y);
  rows = memref::DimOp::create(b, loc, x, 0);
  m0 = mul(b, tileM, config.tileM);
  n0 = mul(b, tileN, config.tileN);
  Value warp = div(b, tid, 32);
  Value lane = rem(b, tid, 32);
  Value wm = div(b, warp, warpsN);
  Value wn = rem(b, warp, warpsN);
  auto workgroup = gpu::AddressSpaceAttr::get(ctx, gpu::AddressSpace::Workgroup);
  Value dynSmem = gpu::DynamicSharedMemoryOp::create(
      b, loc,
      MemRefType::get({ShapedType::kDynamic}, b.getI8Type(),
                      MemRefLayoutAttrInterface(), workgroup));
  smemA = memref::ViewOp::create(
      b, loc,
      MemRefType::get({config.stages, config.tileM, pad}, elem,
                      MemRefLayoutAttrInterface(), workgroup),
      dynSmem, idx(b, 0), ValueRange{});
  for (int64_t p = 0; p < numB; ++p)
    smemBs.push_back(memref::ViewOp::create(
        b, loc,
        MemRefType::get({config.stages, config.tileN, pad}, elem,
                        MemRefLayoutAttrInterface(), workgroup),
        dynSmem, idx(b, bytesA + p * bytesB), ValueRange{}));

  // Prologue: slices 0 .. stages-2 in flight.
  for (int64_t s = 0; s + 1 < config.stages; ++s)
    loadSlice(b, idx(b, s), idx(b, s));

  Type f32 = b.getF32Type();
  Value zero = arith::ConstantOp::create(b, loc, b.getF32FloatAttr(0.0f));
  int64_t perProjection = mTiles * nTiles * 4; // accumulators
  SmallVector<Value> init(numB * perProjection, zero);
  auto loop = scf::ForOp::create(b, loc, idx(b, 0), idx(b, numK), idx(b, 1),
                                 init);
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
        Value row = add(lb, add(lb, mul(lb, wm, 64), idx(lb, i * 16)),
                        rem(lb, lane, 16));
        Value col = add(lb, idx(lb, kk * 16), mul(lb, div(lb, lane, 16), 8));
        Value frag = nvgpu::LdMatrixOp::create(lb, loc, vec(4, elem), smemA,
                                               ValueRange{stage, row, col},
                                               /*transpose=*/false,
                                               /*numTiles=*/4);
        for (int64_t r = 0; r < 4; ++r)
          a[i].push_back(toI32(lb, frag, r));
      }
      for (int64_t p = 0; p < numB; ++p) {
      SmallVector<SmallVector<Value>> bf(nTiles);
      for (int64_t j = 0; j < nTiles; ++j) {
        Value row = add(lb, add(lb, mul(lb, wn, warpN), idx(lb, j * 8)),
                        rem(lb, lane, 8));
        Value col = add(lb, idx(lb, kk * 16),
                        mul(lb, rem(lb, div(lb, lane, 8), 2), 8));
        Value frag = nvgpu::LdMatrixOp::create(lb, loc, vec(2, elem),
                                               smemBs[p],
                                               ValueRange{stage, row, col},
                                               /*transpose=*/false,
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
    }
    scf::YieldOp::create(lb, loc, acc);
  }
  // No copy may be in flight when the CTA exits.
  NVVM::CpAsyncWaitGroupOp::create(b, loc, 0u);

  // Epilogue: lane l holds rows l/4 and l/4 + 8 of each m16n8 tile, columns
  // 2 (l % 4) and the next.
  Value nValue = idx(b, n);
  for (int64_t i = 0; i < mTiles; ++i)
    for (int64_t j = 0; j < nTiles; ++j) {
      Value r0 = add(b, add(b, m0, add(b, mul(b, wm, 64), idx(b, i * 16))),
                     div(b, lane, 4));
      Value c = add(b, add(b, n0, add(b, mul(b, wn, warpN), idx(b, j * 8))),
                    mul(b, rem(b, lane, 4), 2));
      Value cOk = lessThan(b, c, nValue);
      for (int64_t half = 0; half < 2; ++half) {
        Value r = half ? add(b, r0, idx(b, 8)) : r0;
        SmallVector<Value> rounded;
        for (int64_t p = 0; p < numB; ++p) {
          int64_t base = p * perProjection + (i * nTiles + j) * 4 + half * 2;
          Value pair = vector::FromElementsOp::create(
              b, loc, VectorType::get({2}, f32),
              ValueRange{loop.getResult(base), loop.getResult(base + 1)});
          rounded.push_back(arith::TruncFOp::create(
              b, loc, VectorType::get({2}, elem), pair));
        }
        Value ok = arith::AndIOp::create(b, loc, lessThan(b, r, rows), cOk);
        auto ifOp = scf::IfOp::create(b, loc, ok, false);
        OpBuilder tb = ifOp.getThenBodyBuilder();
        FailureOr<Value> out = applyEpilogue(tb, rounded, r, c);
        if (failed(out)) {
          kernel.erase();
          return failure();
        }
        auto outType = cast<VectorType>(out->getType());
        vector::StoreOp::create(
            tb, loc, *out, y, ValueRange{r, c}, /*nontemporal=*/false,
            llvm::MaybeAlign(2 * outType.getElementTypeBitWidth() / 8));
      }
    }
  gpu::ReturnOp::create(b, loc);
  return info;
}
} // namespace

FailureOr<RowKernelInfo>
mlir::liger::buildMatmulKernel(FusionOp group, gpu::GPUModuleOp module,
                               StringRef name,
                               const MatmulKernelConfig &config) {
  return MatmulKernelBuilder(group, config).build(module, name);
}
