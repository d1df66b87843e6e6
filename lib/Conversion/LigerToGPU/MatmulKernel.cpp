//===- MatmulKernel.cpp - matmul groups as Tensor Core kernels ------------===//
//
// The matmul templates: y = f(x̂ · W₁ᵀ + b₁[, x̂ · W₂ᵀ + b₂]) for a group
// holding one `liger.linear` (or `liger.lora_linear`), or two on the same
// input (a gate/up pair), each W [N, K], K-major as PyTorch stores it, with
// an elementwise f, where x̂ is the group's x or RMSNorm(x); the q/k pair
// with RoPE; the gradient products dx = dy · W and dW = dyᵀ · x.
// docs/Design/GPU-Lowering.md has the whole design.
//
// This file checks what the templates implement, lays out the kernel's
// parameters and launch information, creates the gpu.func with the values
// every part reads, and runs one template: wgmma + TMA (sm_90a,
// MatmulWgmma.cpp) or mma.sync (sm_80 and later, MatmulMmaSync.cpp). The
// parts are free functions over the group's plan, configuration and
// shared-memory layout (MatmulEmitters.h).
//
// Grid: (ceil(N / tile_n), ceil(rows / tile_m)); the wgmma kernels remap
// the CTA index so that groups of 8 row tiles run together (L2 reuse of the
// weight tiles).
//
//===----------------------------------------------------------------------===//

#include "liger/Conversion/LigerToGPU/MatmulKernel.h"
#include "liger/Conversion/LigerToGPU/MatmulEmitters.h"

#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/LLVMIR/NVVMDialect.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/IR/TypeUtilities.h"

using namespace mlir;
using namespace mlir::liger;
namespace rt = ::liger::runtime;

SmallVector<EpiloguePrefetch>
mlir::liger::getEpiloguePrefetches(const MatmulPlan &plan,
                                   const MatmulLayout &layout) {
  // Boxes of 128-byte rows: the widest the 128-byte swizzle of the maps
  // takes.
  auto of = [](Value arg) {
    return EpiloguePrefetch{
        arg, 128 * 8 /
                 getElementTypeOrSelf(arg.getType()).getIntOrFloatBitWidth()};
  };
  SmallVector<EpiloguePrefetch> prefetches;
  for (BlockArgument arg : plan.group.getBody().front().getArguments())
    if (plan.operandOf(arg).role == MatmulOperandRole::EpilogueRows)
      prefetches.push_back(of(arg));
  if (plan.accumulator && !layout.hasOldTile())
    prefetches.push_back(of(plan.accumulator));
  return prefetches;
}

/// The output's column tiles, and its row tiles where they are static (a
/// gradient product's dW [M, N]; else the rows decide at launch).
static int64_t columnTiles(const MatmulPlan &plan,
                           const MatmulKernelConfig &config) {
  return (plan.n + config.tileN - 1) / config.tileN;
}
static int64_t staticRowTiles(const MatmulPlan &plan,
                              const MatmulKernelConfig &config) {
  return (plan.m + config.tileM - 1) / config.tileM;
}

bool mlir::liger::handsOffLoRAProduct(const MatmulPlan &plan,
                                      const MatmulKernelConfig &config) {
  return plan.lora && config.wgmma && !config.loopsOverTiles() &&
         columnTiles(plan, config) > 1;
}

/// bf16/f16 operands; wgmma reads 128-byte slices of K and TMA 16-byte rows
/// of a static K (zero-filling the tail); mma.sync whole tile_k slices of
/// it.
static LogicalResult checkElementAndK(const MatmulPlan &plan,
                                      const MatmulKernelConfig &config) {
  FusionOp group = plan.group;
  Type elem = plan.elementType;
  if (!elem.isBF16() && !elem.isF16())
    return leaveForLaterTemplate(group,
                                 Twine(config.wgmma ? "wgmma" : "mma.sync") +
                                     " takes bf16 or f16 inputs");
  int64_t elemBytes = elem.getIntOrFloatBitWidth() / 8;
  int64_t k = plan.k;
  bool dynamicK = ShapedType::isDynamic(k); // dW's tokens: masked by rows
  if (!config.wgmma) {
    if (!dynamicK && k % config.tileK)
      return leaveForLaterTemplate(
          group, "K = " + Twine(k) +
                     " is not a multiple of tile_k = " + Twine(config.tileK));
    return success();
  }
  // The configuration's verifier (matmulConfigProblem) holds tile_k to
  // one 128-byte slice of K.
  assert(config.tileK * elemBytes == 128 && "a verified wgmma tile_k");
  if (!dynamicK && (k * elemBytes) % 16)
    return leaveForLaterTemplate(
        group, "K = " + Twine(k) + " is not a multiple of " +
                   Twine(16 / elemBytes) + " (TMA needs 16-byte rows)");
  return success();
}

/// What each body adds to the rules every body shares.
static LogicalResult checkBody(const MatmulPlan &plan,
                               const MatmulKernelConfig &config) {
  FusionOp group = plan.group;
  int64_t elemBytes = plan.elementType.getIntOrFloatBitWidth() / 8;
  switch (plan.body) {
  case MatmulBody::QKRoPE: {
    // A column tile holds whole heads of one projection (on wgmma each
    // thread then holds both halves of its rotations; mma.sync exchanges
    // them through shared memory).
    int64_t headDim = plan.headDim, nq = plan.nq, nk = plan.n - plan.nq;
    if (headDim % 16 || config.tileN % headDim || nq % config.tileN ||
        nk % config.tileN)
      return leaveForLaterTemplate(
          group, "tile_n = " + Twine(config.tileN) +
                     " must hold whole heads (head_dim " + Twine(headDim) +
                     ", a multiple of 16) and divide both projections (" +
                     Twine(nq) + " and " + Twine(nk) + ")");
    return success();
  }
  case MatmulBody::GradInput:
  case MatmulBody::GradWeight: {
    // The MN-major rows (dW's dy; W or x) are 16-byte multiples too.
    SmallVector<int64_t, 2> widths = {plan.n};
    if (plan.body == MatmulBody::GradWeight)
      widths.push_back(plan.m);
    for (int64_t width : widths)
      if ((width * elemBytes) % 16)
        return leaveForLaterTemplate(
            group, "a row of " + Twine(width) +
                       " elements is not a multiple of 16 bytes (" +
                       (config.wgmma ? "TMA" : "cp.async") + ")");
    return success();
  }
  case MatmulBody::Projection:
    if (plan.n % 8)
      return leaveForLaterTemplate(group, "N = " + Twine(plan.n) +
                                              " is not a multiple of 8");
    // (A transposed weight's MN-major rows, N 16-bit elements, are then
    // 16-byte multiples.)
    if (plan.lora && (plan.loraRank % 16 || plan.loraRank > 64))
      return leaveForLaterTemplate(
          group, "LoRA rank " + Twine(plan.loraRank) +
                     " is not a multiple of 16 up to 64 (the second product "
                     "is k16 MMAs over r, B's rows at most one 128-byte "
                     "swizzle span)");
    // On wgmma B's [tile_n, r] tile arrives through TMA swizzled by its
    // rows, which must be one swizzle span.
    ::liger::runtime::TensorMapSwizzle span;
    if (plan.lora && config.wgmma &&
        !::liger::runtime::parseSwizzleBytes(plan.loraRank * elemBytes, &span))
      return leaveForLaterTemplate(
          group, "LoRA rank " + Twine(plan.loraRank) + " makes B's rows " +
                     Twine(plan.loraRank * elemBytes) +
                     " bytes, not a TMA swizzle span (32, 64 or 128 bytes: "
                     "rank 16, 32 or 64 on wgmma)");
    return success();
  }
  llvm_unreachable("unknown matmul body");
}

/// Checks what the templates implement for `plan` with `config`: the body
/// (the plan's reason), bf16/f16 operands, K, tile_n against RoPE's heads,
/// the rows' 16-byte multiples, N, LoRA's rank.
/// Warns and fails otherwise.
static LogicalResult checkMatmulTemplate(const MatmulPlan &plan,
                                         const MatmulKernelConfig &config) {
  FusionOp group = plan.group;
  if (!plan.unsupported.empty())
    return leaveForLaterTemplate(group, plan.unsupported);
  if (failed(checkElementAndK(plan, config)) || failed(checkBody(plan, config)))
    return failure();
  // The mma.sync warp split (64-row warp tiles, k16 steps) is the
  // configuration verifier's (matmulConfigProblem).
  return success();
}

/// The parameter of group input `arg` (named `name`): its manifest entry
/// and its memref type; fails on an input the kernel does not read.
static FailureOr<std::pair<rt::KernelParam, Type>>
parameterOf(const MatmulKernel &k, BlockArgument arg) {
  using Role = MatmulOperandRole;
  const MatmulPlan &plan = k.plan;
  std::string name = "input" + std::to_string(arg.getArgNumber());
  auto type = cast<RankedTensorType>(arg.getType());
  Type argElem = type.getElementType(), elem = plan.elementType;
  int64_t kk = plan.k, n = plan.n, dyn = ShapedType::kDynamic;
  auto param =
      [&](rt::ParamKind kind, Type dtype, int64_t hidden, int64_t heads,
          ArrayRef<int64_t> shape) -> std::pair<rt::KernelParam, Type> {
    return {abiParam(name, rt::ParamRole::Input, kind, dtype, hidden, heads),
            MemRefType::get(shape, dtype)};
  };
  const MatmulOperand &operand = plan.operandOf(arg);
  auto width = [&] {
    return cast<RankedTensorType>(
               plan.projections[operand.projection].weight.getType())
        .getDimSize(0);
  };
  auto unread = [&](StringRef why) {
    return leaveForLaterTemplate(
        plan.group, "input #" + Twine(arg.getArgNumber()) + " " + why);
  };
  switch (plan.body) {
  case MatmulBody::QKRoPE:
    // x [B, T, K] as rows, the norm weight, Wq and Wk, their biases, the
    // tables [1 or B, T, D].
    switch (operand.role) {
    case Role::X:
      return param(rt::ParamKind::Rows, argElem, kk, 0, {dyn, kk});
    case Role::NormWeight:
      return param(rt::ParamKind::Feature, argElem, kk, 0, {kk});
    case Role::Weight:
      return param(rt::ParamKind::Matrix, argElem, kk, width(), {width(), kk});
    case Role::Bias:
      return param(rt::ParamKind::Feature, argElem, width(), 0, {width()});
    case Role::Cos:
    case Role::Sin: // a broadcast batch: heads = 1
      return param(rt::ParamKind::Tables, argElem, plan.headDim,
                   type.getDimSize(0) == 1 ? 1 : 0, type.getShape());
    default:
      return unread("is not read by the q/k projections or RoPE");
    }
  case MatmulBody::GradInput:
  case MatmulBody::GradWeight: {
    // dy [T, K_red] (dx) or [T, M] (dW); W [K_red, N] (dx) or x [T, N]
    // (dW); the buffer [M, N].
    bool dW = plan.body == MatmulBody::GradWeight;
    int64_t m = plan.m;
    switch (operand.role) {
    case Role::X:
      return param(rt::ParamKind::Rows, elem, dW ? m : kk, 0,
                   {dyn, dW ? m : kk});
    case Role::Weight:
      if (dW)
        return param(rt::ParamKind::Rows, elem, n, 0, {dyn, n});
      return param(rt::ParamKind::Matrix, elem, n, kk, {kk, n});
    case Role::Accumulator:
      return param(rt::ParamKind::Matrix, argElem, n, m, {m, n});
    case Role::EpilogueRows: // dx's epilogue (a gated gradient's gate, up)
      return param(rt::ParamKind::Rows, argElem, n, 0, {dyn, n});
    case Role::EpilogueFeature:
      return param(rt::ParamKind::Feature, argElem, n, 0, {n});
    default:
      return unread(dW ? "is not read by the gradient product"
                       : "is neither [rows, N] nor [N] for dx's epilogue");
    }
  }
  case MatmulBody::Projection:
    switch (operand.role) {
    case Role::X:
      return param(rt::ParamKind::Rows, elem, kk, 0, {dyn, kk});
    case Role::LoRAA: // [r, K]
      return param(rt::ParamKind::Matrix, elem, kk, plan.loraRank,
                   {plan.loraRank, kk});
    case Role::LoRAB: // [N, r]
      return param(rt::ParamKind::Matrix, elem, plan.loraRank, n,
                   {n, plan.loraRank});
    case Role::Bias:
      return param(rt::ParamKind::Feature, argElem, n, 0, {n});
    case Role::NormWeight:
      return param(rt::ParamKind::Feature, argElem, kk, 0, {kk});
    case Role::Weight: // [N, K], or [K, N] read MN-major where transposed
      if (plan.weightTranspose)
        return param(rt::ParamKind::Matrix, elem, n, kk, {kk, n});
      return param(rt::ParamKind::Matrix, elem, kk, n, {n, kk});
    case Role::EpilogueRows:
      return param(rt::ParamKind::Rows, argElem, n, 0, {dyn, n});
    case Role::EpilogueFeature:
      return param(rt::ParamKind::Feature, argElem, n, 0, {n});
    default:
      return unread("is neither [rows, N] nor [N] for the epilogue");
    }
  }
  llvm_unreachable("unknown matmul body");
}

/// The kernel's launch information (parameters, grid, shared memory, TMA
/// descriptors) and its gpu.func's parameter types. Warns and fails on an
/// input the kernel has no parameter for.
static FailureOr<std::pair<rt::KernelSpec, SmallVector<Type>>>
getMatmulKernelSignature(const MatmulKernel &k, StringRef name) {
  const MatmulPlan &plan = k.plan;
  const MatmulKernelConfig &config = k.config;
  Block &body = plan.group.getBody().front();
  MLIRContext *ctx = plan.group.getContext();
  int64_t n = plan.n, m = plan.m;
  rt::KernelSpec info;
  info.name = name.str();
  info.block[0] = config.threads();
  info.vectorWidth = 8;
  info.dynamicSharedMemoryBytes = k.layout.size();
  info.kernelTemplate = rt::KernelTemplate::Matmul;
  // A cluster's CTAs take consecutive row tiles of one column tile: the
  // grid's x holds them side by side (the cluster's shape), its y the row
  // tiles' groups (the last group's CTAs past the rows compute zeros and
  // store nothing: TMA fills and clips, the epilogue masks).
  int64_t cluster = config.cluster;
  info.grid[0] = {rt::GridDim::Const, cluster * columnTiles(plan, config)};
  info.grid[1] = plan.body == MatmulBody::GradWeight
                     ? rt::GridDim{rt::GridDim::Const,
                                   llvm::divideCeilSigned(
                                       staticRowTiles(plan, config), cluster)}
                     : rt::GridDim{rt::GridDim::Rows, cluster * config.tileM};
  if (config.loopsOverTiles()) // one CTA per SM
    info.grid[0] = {rt::GridDim::Sms, 1}, info.grid[1] = {};
  // Parameters: the group's inputs in order, then the output(s), then
  // (wgmma) the TMA descriptors, passed by value.
  SmallVector<Type> paramTypes;
  for (BlockArgument arg : body.getArguments()) {
    auto param = parameterOf(k, arg);
    if (failed(param))
      return failure();
    info.params.push_back(param->first);
    paramTypes.push_back(param->second);
  }
  auto output = [&](unsigned i, rt::ParamKind kind, int64_t hidden,
                    int64_t heads, ArrayRef<int64_t> shape) {
    Type outElem = getElementTypeOrSelf(plan.group.getResult(i).getType());
    info.params.push_back(abiParam("output" + std::to_string(i),
                                   rt::ParamRole::Output, kind, outElem, hidden,
                                   heads));
    paramTypes.push_back(MemRefType::get(shape, outElem));
  };
  if (plan.rope) {
    // q [B, Hq, T, D] and k [B, Hkv, T, D], head-major.
    for (auto [i, result] : llvm::enumerate(plan.rope->getResults())) {
      auto type = cast<RankedTensorType>(result.getType());
      output(i, rt::ParamKind::Heads, plan.headDim, type.getDimSize(1),
             type.getShape());
    }
  } else if (plan.body == MatmulBody::GradWeight) {
    output(0, rt::ParamKind::Matrix, n, m, {m, n});
  } else {
    // Each result [rows, N] (analyzeMatmulGroup's readOutputs).
    for (unsigned i = 0; i < plan.numOutputs(); ++i)
      output(i, rt::ParamKind::Rows, n, 0, {ShapedType::kDynamic, n});
  }
  if (handsOffLoRAProduct(plan, config)) {
    // The rows' x · Aᵀ [rows, r] and a flag per 64-row block, f32 scratch
    // the launch zero-fills (emitWgmmaLoRA).
    Type f32 = Float32Type::get(ctx);
    int64_t dyn = ShapedType::kDynamic;
    info.params.push_back(abiParam("workspace0", rt::ParamRole::Workspace,
                                   rt::ParamKind::Rows, f32, plan.loraRank,
                                   0));
    paramTypes.push_back(MemRefType::get({dyn, plan.loraRank}, f32));
    info.params.push_back(abiParam("workspace1", rt::ParamRole::Workspace,
                                   rt::ParamKind::RowScalars, f32, 0, 0));
    paramTypes.push_back(MemRefType::get({dyn}, f32));
  }
  auto argNumber = [](Value v) -> int64_t {
    return cast<BlockArgument>(v).getArgNumber();
  };
  // A tensor map of parameter `param`: boxes of rows x cols, swizzled in
  // spans of `swizzleBytes` (checkBody admits only the spans TMA has).
  auto tensorMap = [](int64_t param, int64_t rows, int64_t cols,
                      int64_t swizzleBytes = 128) {
    ::liger::runtime::KernelTensorMap map;
    map.param = static_cast<size_t>(param);
    map.boxRows = rows;
    map.boxCols = cols;
    bool span = ::liger::runtime::parseSwizzleBytes(swizzleBytes, &map.swizzle);
    assert(span && "checkBody admits TMA's swizzle spans only");
    (void)span;
    return map;
  };
  // The wgmma template's operands arrive through TMA descriptors; mma.sync
  // copies them with cp.async and takes none.
  if (config.wgmma && plan.bMNMajor()) {
    // MN-major tiles arrive as [tile_k rows, 64 columns] boxes: tile_m / 64
    // of them for dy (dW), tile_n / 64 for W or x.
    bool aMN = plan.aMNMajor();
    info.tensorMaps.push_back(tensorMap(argNumber(plan.x),
                                        aMN ? config.tileK : config.tileM,
                                        aMN ? 64 : config.tileK));
    info.tensorMaps.push_back(tensorMap(
        argNumber(plan.projections.front().weight), config.tileK, 64));
  } else if (config.wgmma) {
    info.tensorMaps.push_back(
        tensorMap(argNumber(plan.x), config.tileM, config.tileK));
    // (In a cluster each CTA loads its part of the weight tile's rows.)
    for (const MatmulProjection &l : plan.projections)
      info.tensorMaps.push_back(tensorMap(argNumber(l.weight),
                                          config.clusterPartRows(config.tileN),
                                          config.tileK));
  }
  if (config.wgmma) {
    if (plan.lora) {
      // A's [r, 64] slices ride along with W's; B's [tile_n, r] tile is
      // read once, swizzled by its r * 2-byte rows.
      int64_t r = plan.loraRank;
      info.tensorMaps.push_back(
          tensorMap(argNumber(plan.lora.getLoraA()), r, config.tileK));
      info.tensorMaps.push_back(tensorMap(argNumber(plan.lora.getLoraB()),
                                          config.tileN, r,
                                          r * k.elementBytes()));
    }
    // Each output's map (64 x 64 boxes, 128-byte swizzle) for TMA stores.
    // (A 16-bit dW buffer's old tile comes in through a map of its own.)
    // verifyMatmulKernelConfig keeps a gradient product's tile_n a
    // multiple of 64.
    assert((!k.layout.hasOldTile() || k.layout.storesWithTma()) &&
           "a 16-bit dW buffer stores with TMA");
    if (k.layout.hasOldTile())
      info.tensorMaps.push_back(tensorMap(argNumber(plan.accumulator), 64, 64));
    if (k.layout.storesWithTma())
      for (unsigned i = 0; i < plan.numOutputs(); ++i)
        info.tensorMaps.push_back(tensorMap(
            static_cast<int64_t>(body.getNumArguments() + i), 64, 64));
    // What the epilogue reads at each row, prefetched into L2 in boxes of
    // tile_m rows x 128 bytes.
    for (const EpiloguePrefetch &p : getEpiloguePrefetches(plan, k.layout))
      info.tensorMaps.push_back(
          tensorMap(argNumber(p.arg), config.tileM, p.boxCols));
    paramTypes.append(info.tensorMaps.size(), LLVM::LLVMPointerType::get(ctx));
  }
  // The ops the kernel computes (not the constants and sizes its layout
  // ops read).
  for (Operation &op : body.without_terminator())
    if (!op.hasTrait<OpTrait::ConstantLike>() && !isa<tensor::DimOp>(op))
      info.ops +=
          (info.ops.empty() ? "" : ", ") + op.getName().getStringRef().str();
  return std::pair<rt::KernelSpec, SmallVector<Type>>(std::move(info),
                                                      std::move(paramTypes));
}

/// Tile `pid`'s row and column tile (index) among `numM` x `numN` tiles in
/// groups of `groupM` row tiles (setTileOrigin).
static std::pair<Value, Value> groupedTile(GpuBuilder &b, Value pid, Value numM,
                                           int64_t groupM, int64_t numN) {
  Value inGroup = b.rem(pid, groupM * numN);
  Value firstM = b.mul(b.div(pid, groupM * numN), groupM);
  Value groupRows = b.min(b.sub(numM, firstM), groupM);
  return {b.add(firstM, b.rem(inGroup, groupRows)), b.div(inGroup, groupRows)};
}

/// Sets m0 and n0 to the origin of tile `pid` of `numM` x ceil(N / tile_n)
/// tiles, in groups of `groupM` row tiles: CTAs running together take
/// groupM row tiles times a run of column tiles, so that the weight tiles
/// they share stay in L2 (row-major order streams all of W from memory once
/// per row tile). The mma.sync kernels keep row-major order (groupM = 1):
/// the remapping's registers tip the gate/up kernel into spills there.
static void setTileOrigin(GpuBuilder &b, MatmulKernel &k, Value pid, Value numM,
                          int64_t groupM) {
  auto [tileM, tileN] =
      groupedTile(b, pid, numM, groupM, columnTiles(k.plan, k.config));
  k.m0 = b.mul(tileM, k.config.tileM);
  k.n0 = b.mul(tileN, k.config.tileN);
}

void mlir::liger::forEachCtaTile(
    GpuBuilder &b, const MatmulKernel &k, Value first, int64_t step,
    function_ref<void(GpuBuilder &, const MatmulKernel &, Value i)> body) {
  auto loop = scf::ForOp::create(b, first, k.ctaTiles, b.index(step));
  GpuBuilder lb = b.atStart(loop.getBody());
  Value i = loop.getInductionVar();
  Value tile = lb.add(lb.blockId(gpu::Dimension::x),
                      lb.mul(i, lb.gridDim(gpu::Dimension::x)));
  MatmulKernel tk(k);
  // Groups of 1024 rows, as the data-parallel kernels' 8 tiles of 128.
  setTileOrigin(lb, tk, tile, k.rowTiles,
                std::max<int64_t>(1024 / k.config.tileM, 1));
  body(lb, tk, i);
}

/// Creates gpu.func `name` of `paramTypes` at the end of `module`, binds its
/// parameters in `k`, emits the thread index, the rows, the K loop's trip
/// count and the tile origin, and returns a builder after them.
static GpuBuilder beginMatmulKernel(MatmulKernel &k, gpu::GPUModuleOp module,
                                    StringRef name, const rt::KernelSpec &info,
                                    ArrayRef<Type> paramTypes) {
  const MatmulPlan &plan = k.plan;
  const MatmulKernelConfig &config = k.config;
  MLIRContext *ctx = plan.group.getContext();
  Block &body = plan.group.getBody().front();
  GpuBuilder b(plan.group.getLoc(), OpBuilder(ctx));
  gpu::GPUFuncOp kernel =
      b.beginKernel(module, name, paramTypes, config.threads());
  k.function = kernel;
  if (config.wgmma)
    kernel->setAttr("liger.tensor_maps",
                    b.getI64IntegerAttr(info.tensorMaps.size()));
  // The cluster's shape is the kernel's own (.reqnctapercluster): the
  // driver launches the grid, a multiple of it, in clusters.
  if (config.cluster > 1)
    kernel->setAttr(
        NVVM::NVVMDialect::getClusterDimAttrName(),
        b.getDenseI32ArrayAttr({static_cast<int32_t>(config.cluster), 1, 1}));
  Block &entry = kernel.getBody().front();

  using Role = MatmulOperandRole;
  k.weights.assign(plan.projections.size(), Value());
  k.biases.assign(plan.projections.size(), Value());
  // The parameters with one value each (weights and biases are bound per
  // projection below, RoPE's tables by the plan's values, as one input may
  // be both; the rest are the epilogue's).
  constexpr std::pair<Role, Value MatmulKernel::*> slots[] = {
      {Role::X, &MatmulKernel::x},
      {Role::NormWeight, &MatmulKernel::normWeight},
      {Role::LoRAA, &MatmulKernel::loraA},
      {Role::LoRAB, &MatmulKernel::loraB},
      {Role::Accumulator, &MatmulKernel::accumulator}};
  for (BlockArgument arg : body.getArguments()) {
    Value param = entry.getArgument(arg.getArgNumber());
    const MatmulOperand &operand = plan.operandOf(arg);
    const auto *slot = llvm::find_if(
        slots, [&](const auto &s) { return s.first == operand.role; });
    if (slot != std::end(slots))
      k.*(slot->second) = param;
    else if (operand.inEpilogue())
      k.epilogueInputs[arg] = param;
  }
  auto paramOf = [&](Value arg) {
    return entry.getArgument(cast<BlockArgument>(arg).getArgNumber());
  };
  for (auto [p, l] : llvm::enumerate(plan.projections)) {
    k.weights[p] = paramOf(l.weight);
    if (l.bias)
      k.biases[p] = paramOf(l.bias);
  }
  if (plan.rope) {
    k.cos = paramOf(plan.cos);
    k.sin = paramOf(plan.sin);
  }
  for (unsigned i = 0; i < plan.numOutputs(); ++i)
    k.outputs.push_back(entry.getArgument(body.getNumArguments() + i));
  if (handsOffLoRAProduct(plan, config)) {
    unsigned next = body.getNumArguments() + plan.numOutputs();
    k.loraProducts = entry.getArgument(next);
    k.loraFlags = entry.getArgument(next + 1);
  }
  if (config.wgmma) {
    // The descriptors, in getMatmulKernelSignature's order.
    ValueRange maps = entry.getArguments().take_back(info.tensorMaps.size());
    unsigned next = 0;
    k.xMap = maps[next++];
    for (size_t p = 0; p < plan.projections.size(); ++p)
      k.weightMaps.push_back(maps[next++]);
    if (plan.lora) {
      k.loraAMap = maps[next++];
      k.loraBMap = maps[next++];
    }
    if (k.layout.hasOldTile())
      k.oldTileMap = maps[next++];
    if (k.layout.storesWithTma())
      for (unsigned i = 0; i < plan.numOutputs(); ++i)
        k.outputMaps.push_back(maps[next++]);
    for (size_t i = 0, e = getEpiloguePrefetches(plan, k.layout).size(); i < e;
         ++i)
      k.prefetchMaps.push_back(maps[next++]);
  }

  k.tid = b.threadId();
  if (plan.body == MatmulBody::GradWeight) {
    // The output rows are dy's features; K runs over the tokens.
    k.rows = b.index(plan.m);
    k.kRows = memref::DimOp::create(b, k.x, 0);
    // At least one K step (the runtime launches no dW over zero tokens):
    // LLVM then drops the loops' zero-trip path, whose copies of the zero
    // accumulators into the wgmmas' registers ptxas would see while they
    // run and serialize every wgmma for (C7515).
    k.kTiles =
        b.max(b.div(b.add(k.kRows, config.tileK - 1), config.tileK), 1);
  } else {
    k.rows = memref::DimOp::create(b, k.x, 0);
    k.kRows = b.index(plan.k);
    k.kTiles = b.index((plan.k + config.tileK - 1) / config.tileK);
  }
  int64_t numN = columnTiles(plan, config);
  if (config.loopsOverTiles()) {
    // The CTA takes tiles blockIdx.x + i · gridDim.x; the loops set the
    // origin (forEachCtaTile).
    k.rowTiles = plan.body == MatmulBody::GradWeight
                     ? b.index(staticRowTiles(plan, config))
                     : b.div(b.add(k.rows, config.tileM - 1), config.tileM);
    Value ctas = b.gridDim(gpu::Dimension::x);
    Value rest = b.sub(b.add(b.mul(k.rowTiles, numN), ctas),
                       b.add(b.blockId(gpu::Dimension::x), 1));
    k.ctaTiles = b.div(rest, ctas);
    return b;
  }
  Value numM = b.gridDim(gpu::Dimension::y);
  Value blockX = b.blockId(gpu::Dimension::x);
  Value blockY = b.blockId(gpu::Dimension::y);
  if (config.cluster > 1) {
    // Cluster (blockIdx.x / cluster, blockIdx.y) takes the group of row
    // tiles y of its column tile, CTA r (%cluster_ctaid.x) the group's r-th
    // (the grid's x holds the clusters' CTAs side by side; the grouped order is
    // the clusters').
    int64_t cluster = config.cluster;
    k.clusterRank = b.clusterBlockId();
    Value pid = b.add(b.mul(blockY, numN), b.div(blockX, cluster));
    setTileOrigin(b, k, pid, numM, std::max<int64_t>(8 / cluster, 1));
    k.m0 = b.add(b.mul(k.m0, cluster), b.mul(k.clusterRank, config.tileM));
    return b;
  }
  Value pid = b.add(b.mul(blockY, numN), blockX);
  if (!handsOffLoRAProduct(plan, config)) {
    setTileOrigin(b, k, pid, numM, config.wgmma ? 8 : 1);
    return b;
  }
  // LoRA: the first numM CTAs take column tile 0 of each row tile (they
  // publish the rows' x · Aᵀ); the rest the other columns, grouped.
  Value leads = b.lessThan(pid, numM);
  auto [tileM, tileN] = groupedTile(
      b, b.select(leads, b.index(0), b.sub(pid, numM)), numM, 8, numN - 1);
  k.m0 = b.mul(b.select(leads, pid, tileM), config.tileM);
  k.n0 = b.select(leads, b.index(0), b.mul(b.add(tileN, 1), config.tileN));
  return b;
}

FailureOr<rt::KernelSpec>
mlir::liger::buildMatmulKernel(const MatmulPlan &plan, gpu::GPUModuleOp module,
                               StringRef name,
                               const MatmulKernelConfig &config) {
  return buildMatmulKernel(
      plan, module, name, config, [&](GpuBuilder &b, MatmulKernel &k) {
        return config.wgmma ? emitWgmmaKernel(b, k) : emitMmaSyncKernel(b, k);
      });
}

FailureOr<rt::KernelSpec>
mlir::liger::buildMatmulKernel(const MatmulPlan &plan, gpu::GPUModuleOp module,
                               StringRef name, const MatmulKernelConfig &config,
                               MatmulKernelBody body) {
  if (failed(checkMatmulTemplate(plan, config)))
    return failure();
  FailureOr<MatmulEpilogue> epilogue;
  if (!plan.rope) {
    epilogue = lowerMatmulEpilogue(plan);
    if (failed(epilogue))
      return failure();
  }
  MatmulLayout layout(plan, config);
  MatmulKernel k(plan, config, layout);
  k.epilogue = plan.rope ? nullptr : &*epilogue;
  auto signature = getMatmulKernelSignature(k, name);
  if (failed(signature))
    return failure();
  auto &[info, paramTypes] = *signature;
  GpuBuilder b = beginMatmulKernel(k, module, name, info, paramTypes);
  if (failed(body(b, k))) {
    k.function.erase();
    return failure();
  }
  gpu::ReturnOp::create(b);
  return info;
}
