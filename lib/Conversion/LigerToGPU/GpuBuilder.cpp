//===- GpuBuilder.cpp - building blocks of the GPU kernel templates -------===//
//
// The one translation unit that spells the NVGPU and NVVM operations the
// templates share (cp.async, mbarriers, TMA, fences, named barriers, wgmma
// descriptors), and the one warp and block reduction.
//
//===----------------------------------------------------------------------===//

#include "liger/Conversion/LigerToGPU/GpuBuilder.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/LLVMIR/NVVMDialect.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/NVGPU/IR/NVGPUDialect.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"
#include "mlir/IR/TypeUtilities.h"

using namespace mlir;
using namespace mlir::liger;

GpuBuilder GpuBuilder::atStart(Block *block) const {
  return GpuBuilder(getLoc(), OpBuilder::atBlockBegin(block));
}

gpu::GPUFuncOp GpuBuilder::beginKernel(gpu::GPUModuleOp module,
                                       StringRef name, TypeRange params,
                                       int64_t threads) {
  setInsertionPointToEnd(module.getBody());
  auto kernel = gpu::GPUFuncOp::create(
      *this, name, FunctionType::get(getContext(), params, {}));
  kernel->setAttr(gpu::GPUDialect::getKernelFuncAttrName(), getUnitAttr());
  // The block size is known (thread indices get their ranges) and
  // required: the driver refuses a launch with any other (.reqntid).
  DenseI32ArrayAttr block =
      getDenseI32ArrayAttr({static_cast<int32_t>(threads), 1, 1});
  kernel.setKnownBlockSizeAttr(block);
  kernel->setAttr(NVVM::NVVMDialect::getReqntidAttrName(), block);
  setInsertionPointToStart(&kernel.getBody().front());
  return kernel;
}

void GpuBuilder::markWarpSpecialized(gpu::GPUFuncOp kernel) {
  kernel->setAttr(NVVM::NVVMDialect::getMinctasmAttrName(),
                  getI32IntegerAttr(1));
}

GpuBuilder GpuBuilder::ifThen(Value cond) {
  auto op = scf::IfOp::create(*this, cond, /*withElseRegion=*/false);
  return with(op.getThenBodyBuilder());
}

std::pair<GpuBuilder, GpuBuilder> GpuBuilder::ifThenElse(Value cond) {
  auto op = scf::IfOp::create(*this, cond, /*withElseRegion=*/true);
  return {with(op.getThenBodyBuilder()), with(op.getElseBodyBuilder())};
}

Value GpuBuilder::index(int64_t value) {
  return arith::ConstantIndexOp::create(*this, value);
}

Value GpuBuilder::i32(int64_t value) { return constant(getI32Type(), value); }

Value GpuBuilder::i64(int64_t value) { return constant(getI64Type(), value); }

Value GpuBuilder::f32(double value) {
  return arith::ConstantOp::create(*this, getF32FloatAttr(value));
}

Value GpuBuilder::constant(Type type, int64_t value) {
  if (type.isIndex())
    return index(value);
  return arith::ConstantIntOp::create(*this, type, value);
}

Value GpuBuilder::f32Splat(int64_t width, double value) {
  return arith::ConstantOp::create(
      *this, DenseElementsAttr::get(VectorType::get({width}, getF32Type()),
                                    getF32FloatAttr(value)));
}

Value GpuBuilder::compare(arith::CmpIPredicate predicate, Value a,
                          IntOperand b) {
  return arith::CmpIOp::create(*this, predicate, a, b.get(*this, a.getType()));
}

Value GpuBuilder::select(Value cond, Value a, Value b) {
  return arith::SelectOp::create(*this, cond, a, b);
}

Value GpuBuilder::toI32(Value index) {
  return arith::IndexCastOp::create(*this, getI32Type(), index);
}

Value GpuBuilder::offsetOf(Value index, int64_t stride, int64_t base) {
  Value offset = mul(index, stride);
  return base ? add(offset, base) : offset;
}

Value GpuBuilder::threadId() {
  return gpu::ThreadIdOp::create(*this, gpu::Dimension::x);
}
Value GpuBuilder::blockId(gpu::Dimension dim) {
  return gpu::BlockIdOp::create(*this, dim);
}
Value GpuBuilder::gridDim(gpu::Dimension dim) {
  return gpu::GridDimOp::create(*this, dim);
}
Value GpuBuilder::clusterBlockId() {
  return gpu::ClusterBlockIdOp::create(*this, gpu::Dimension::x);
}

Value GpuBuilder::warpUniform(Value index) {
  Value lane0 =
      gpu::ShuffleOp::create(*this, toI32(index), 0, 32, gpu::ShuffleMode::IDX)
          .getShuffleResult();
  return arith::IndexCastOp::create(*this, getIndexType(), lane0);
}

SmallVector<Value> GpuBuilder::warpAllReduce(ValueRange values, int64_t lanes,
                                             Combine combine) {
  SmallVector<Value> acc = llvm::to_vector(values);
  for (int64_t offset = lanes / 2; offset >= 1; offset /= 2) {
    SmallVector<Value> other;
    for (Value v : acc)
      other.push_back(gpu::ShuffleOp::create(*this, v,
                                             static_cast<int32_t>(offset), 32,
                                             gpu::ShuffleMode::XOR)
                          .getShuffleResult());
    acc = combine(*this, acc, other);
  }
  return acc;
}

Value GpuBuilder::warpAllReduceSum(Value value, int64_t lanes) {
  return warpAllReduce(
      value, lanes, [](GpuBuilder &b, ValueRange x, ValueRange y) {
        return SmallVector<Value>{arith::AddFOp::create(b, x[0], y[0])};
      })[0];
}

int64_t GpuBuilder::blockReduceSlots(int64_t threads, int64_t values,
                                     int64_t maxValues) {
  return maxValues + threads / 32 * values;
}

SmallVector<Value> GpuBuilder::blockAllReduce(Value smem, int64_t byteOffset,
                                              int64_t maxValues, Value tid,
                                              int64_t threads,
                                              ValueRange values,
                                              ArrayRef<double> neutral,
                                              Combine combine) {
  SmallVector<Value> warpValues = warpAllReduce(values, 32, combine);
  int64_t warps = threads / 32;
  if (warps == 1)
    return warpValues;
  int64_t k = values.size();
  assert(k <= maxValues && "more values than the area's result slots");
  Value area = sharedView(smem, byteOffset,
                          {blockReduceSlots(threads, k, maxValues)},
                          getF32Type());
  Value lane = rem(tid, 32);
  Value warp = div(tid, 32);
  Value isLane0 = equal(lane, 0);
  {
    // Warp w's partials, contiguous after the result slots.
    GpuBuilder b = ifThen(isLane0);
    Value base = b.add(b.mul(warp, k), maxValues);
    for (auto [j, v] : llvm::enumerate(warpValues))
      memref::StoreOp::create(b, v, area,
                              ValueRange{b.add(base, static_cast<int64_t>(j))});
  }
  gpu::BarrierOp::create(*this);
  Value isWarp0 = equal(warp, 0);
  {
    GpuBuilder b = ifThen(isWarp0);
    // Lanes past the warps read warp 0's partials (in bounds, no branch)
    // and replace them with the identities.
    Value has = b.lessThan(lane, warps);
    Value from = b.select(has, lane, b.index(0));
    Value base = b.add(b.mul(from, k), maxValues);
    SmallVector<Value> loaded;
    for (int64_t j = 0; j < k; ++j)
      loaded.push_back(
          memref::LoadOp::create(b, area, ValueRange{b.add(base, j)}));
    SmallVector<Value> partials;
    for (auto [j, v] : llvm::enumerate(loaded))
      partials.push_back(b.select(has, v, b.f32(neutral[j])));
    SmallVector<Value> total =
        b.warpAllReduce(partials, llvm::PowerOf2Ceil(warps), combine);
    GpuBuilder pb = b.ifThen(isLane0);
    for (int64_t j = 0; j < k; ++j)
      memref::StoreOp::create(pb, total[j], area, ValueRange{pb.index(j)});
  }
  gpu::BarrierOp::create(*this);
  SmallVector<Value> results;
  for (int64_t j = 0; j < k; ++j)
    results.push_back(
        memref::LoadOp::create(*this, area, ValueRange{index(j)}));
  return results;
}

SmallVector<Value> GpuBuilder::clusterAllReduce(Value smem, int64_t byteOffset,
                                                int64_t ctas, Value tid,
                                                ValueRange values,
                                                Combine combine) {
  int64_t k = values.size();
  Value area = sharedView(smem, byteOffset, {k}, getF32Type());
  {
    GpuBuilder b = ifThen(equal(tid, 0));
    for (auto [j, v] : llvm::enumerate(values))
      memref::StoreOp::create(b, v, area,
                              ValueRange{b.index(static_cast<int64_t>(j))});
  }
  // Release of the slots by the CTA's threads, acquire by the cluster's.
  clusterBarrier();
  Value address = arith::IndexCastOp::create(
      *this, getI64Type(),
      memref::ExtractAlignedPointerAsIndexOp::create(*this, smem));
  Value slots = sharedPtr(
      LLVM::IntToPtrOp::create(
          *this, LLVM::LLVMPointerType::get(getContext(), /*shared=*/3),
          address),
      i32(byteOffset));
  SmallVector<Value> total;
  for (int64_t rank = 0; rank < ctas; ++rank) {
    Value remote = NVVM::MapaOp::create(
        *this, LLVM::LLVMPointerType::get(getContext(), /*shared::cluster=*/7),
        slots, i32(rank));
    SmallVector<Value> theirs;
    for (int64_t j = 0; j < k; ++j)
      theirs.push_back(LLVM::LoadOp::create(
          *this, getF32Type(),
          j ? LLVM::GEPOp::create(
                  *this, remote.getType(), getF32Type(), remote,
                  ArrayRef<LLVM::GEPArg>{static_cast<int32_t>(j)})
                  .getResult()
            : remote));
    total = rank == 0 ? theirs : combine(*this, total, theirs);
  }
  return total;
}

Value GpuBuilder::ropeTerm(Value x, Value cos, Value partner, Value sin,
                           bool subtract) {
  Value sinTerm = arith::MulFOp::create(*this, partner, sin);
  Value cosTerm = arith::MulFOp::create(*this, x, cos);
  if (subtract)
    return arith::SubFOp::create(*this, cosTerm, sinTerm);
  return arith::AddFOp::create(*this, cosTerm, sinTerm);
}

void GpuBuilder::asyncCopy16(Value dst, ValueRange dstIndices, Value src,
                             ValueRange srcIndices, int64_t elements,
                             Value valid) {
  Value srcElements =
      valid ? select(valid, index(elements), index(0)) : Value();
  nvgpu::DeviceAsyncCopyOp::create(
      *this, nvgpu::DeviceAsyncTokenType::get(getContext()), dst, dstIndices,
      src, srcIndices, getIndexAttr(elements), srcElements,
      /*bypassL1=*/getUnitAttr());
}

void GpuBuilder::asyncCopyCommit() {
  NVVM::CpAsyncCommitGroupOp::create(*this);
}

void GpuBuilder::asyncCopyWait(int64_t pending) {
  NVVM::CpAsyncWaitGroupOp::create(*this, static_cast<uint32_t>(pending));
}

void GpuBuilder::mbarrierInit(Value barrier, int64_t count) {
  NVVM::MBarrierInitOp::create(*this, barrier, i32(count), Value());
}

void GpuBuilder::mbarrierInitFence() {
  NVVM::FenceMbarrierInitOp::create(*this);
}

void GpuBuilder::mbarrierArriveExpectTx(Value barrier, int64_t bytes) {
  NVVM::MBarrierArriveExpectTxOp::create(*this, Type(), barrier, i32(bytes),
                                         NVVM::MemScopeKind::CTA,
                                         /*relaxed=*/false, Value());
}

void GpuBuilder::mbarrierArriveExpectTx(Value barrier, Value bytes) {
  NVVM::MBarrierArriveExpectTxOp::create(*this, Type(), barrier, bytes,
                                         NVVM::MemScopeKind::CTA,
                                         /*relaxed=*/false, Value());
}

void GpuBuilder::mbarrierArrive(Value barrier) {
  NVVM::MBarrierArriveOp::create(*this, Type(), barrier, Value());
}

void GpuBuilder::mbarrierArriveInCta(Value barrier, Value rank) {
  Value remote = NVVM::MapaOp::create(
      *this, LLVM::LLVMPointerType::get(getContext(), /*shared::cluster=*/7),
      barrier, rank);
  // Release at CTA scope (the default), as a local arrive: what the
  // arrival publishes is that this CTA's reads of a stage are done, which
  // the releasing thread has waited for; a cluster-scope release would
  // fence every arrival (measured: twice the kernel's time).
  NVVM::MBarrierArriveOp::create(*this, Type(), remote, Value(),
                                 NVVM::MemScopeKind::CTA);
}

void GpuBuilder::mbarrierWaitParity(Value barrier, Value parity, Value ticks) {
  NVVM::MBarrierTryWaitParityOp::create(*this, barrier, parity, ticks);
}

void GpuBuilder::tmaLoad(Value dst, Value tensorMap, ValueRange coordinates,
                         Value barrier) {
  NVVM::CpAsyncBulkTensorGlobalToSharedClusterOp::create(
      *this, dst, tensorMap, coordinates, barrier, ValueRange{}, Value(),
      Value(), NVVM::TMALoadMode::TILE, /*isCTAOnly=*/true,
      NVVM::CTAGroupKindAttr(), Value());
}

void GpuBuilder::tmaLoadMulticast(Value dst, Value tensorMap,
                                  ValueRange coordinates, Value barrier,
                                  int64_t ctaMask) {
  // (The destination as a shared::cluster address: this CTA's offset.)
  Value clusterDst = LLVM::AddrSpaceCastOp::create(
      *this, LLVM::LLVMPointerType::get(getContext(), /*shared::cluster=*/7),
      dst);
  NVVM::CpAsyncBulkTensorGlobalToSharedClusterOp::create(
      *this, clusterDst, tensorMap, coordinates, barrier, ValueRange{},
      arith::ConstantOp::create(*this, getI16IntegerAttr(ctaMask)), Value(),
      NVVM::TMALoadMode::TILE, /*isCTAOnly=*/false, NVVM::CTAGroupKindAttr(),
      Value());
}

void GpuBuilder::clusterBarrier() {
  NVVM::ClusterArriveOp::create(*this, UnitAttr());
  NVVM::ClusterWaitOp::create(*this, UnitAttr());
}

void GpuBuilder::tmaStore(Value tensorMap, Value src, ValueRange coordinates) {
  NVVM::CpAsyncBulkTensorSharedCTAToGlobalOp::create(
      *this, tensorMap, src, coordinates, Value(), NVVM::TMAStoreMode::TILE,
      Value());
}

void GpuBuilder::bulkLoad(Value dst, Value src, Value bytes, Value barrier) {
  NVVM::CpAsyncBulkGlobalToSharedClusterOp::create(*this, dst, src, barrier,
                                                   bytes, Value(), Value());
}

void GpuBuilder::tmaReduceAdd(Value tensorMap, Value src,
                              ValueRange coordinates) {
  NVVM::CpAsyncBulkTensorReduceOp::create(
      *this, tensorMap, src, NVVM::TMAReduxKind::ADD, NVVM::TMAStoreMode::TILE,
      coordinates, Value());
}

void GpuBuilder::tmaPrefetchL2(Value tensorMap, ValueRange coordinates) {
  NVVM::CpAsyncBulkTensorPrefetchOp::create(*this, tensorMap, coordinates,
                                            ValueRange{},
                                            NVVM::TMALoadMode::TILE, Value());
}

void GpuBuilder::tmaStoreCommit() {
  NVVM::CpAsyncBulkCommitGroupOp::create(*this);
}

void GpuBuilder::tmaStoreWaitRead(int64_t pending) {
  NVVM::CpAsyncBulkWaitGroupOp::create(*this, pending, /*read=*/getUnitAttr());
}

void GpuBuilder::tmaStoreCommitAndWaitRead() {
  tmaStoreCommit();
  tmaStoreWaitRead();
}

void GpuBuilder::namedBarrier(Value id, int64_t threads) {
  NVVM::BarrierOp::create(*this, Type(), id, i32(threads),
                          NVVM::BarrierReductionAttr(), Value());
}

void GpuBuilder::namedBarrierArrive(Value id, int64_t threads) {
  NVVM::BarrierArriveOp::create(*this, id, i32(threads));
}

/// Inline PTX that synchronizes or accesses global memory: with side
/// effects and a memory clobber, so that LLVM keeps the thread's other
/// accesses on their side of it.
static Value memoryAsm(GpuBuilder &b, Type result, ValueRange operands,
                       StringRef ptx, StringRef constraints) {
  auto op = LLVM::InlineAsmOp::create(
      b, result ? TypeRange(result) : TypeRange(), operands, ptx,
      (constraints + ",~{memory}").str(), /*has_side_effects=*/true,
      /*is_align_stack=*/false, LLVM::tailcallkind::TailCallKind::None,
      LLVM::AsmDialectAttr::get(b.getContext(), LLVM::AsmDialect::AD_ATT),
      ArrayAttr());
  return result ? op.getResult(0) : Value();
}

Value GpuBuilder::namedBarrierAll(Value id, int64_t threads, Value pred) {
  // (nvvm.barrier reduces on barrier 0 only.)
  std::string ptx = "{\n.reg .pred p, q;\nsetp.ne.u32 p, $1, 0;\n"
                    "bar.red.and.pred q, $2, " +
                    std::to_string(threads) + ", p;\nselp.u32 $0, 1, 0, q;\n}";
  Value all = memoryAsm(
      *this, getI32Type(),
      ValueRange{arith::ExtUIOp::create(*this, getI32Type(), pred), id}, ptx,
      "=r,r,r");
  return arith::CmpIOp::create(*this, arith::CmpIPredicate::ne, all, i32(0));
}

Value GpuBuilder::loadAcquireGpu(Value ptr) {
  return memoryAsm(*this, getI32Type(), ptr,
                   "ld.acquire.gpu.global.b32 $0, [$1];", "=r,l");
}

void GpuBuilder::storeReleaseGpu(Value ptr, Value value) {
  memoryAsm(*this, Type(), ValueRange{ptr, value},
            "st.release.gpu.global.b32 [$0], $1;", "l,r");
}

void GpuBuilder::fenceProxyAsyncShared() {
  NVVM::FenceProxyOp::create(
      *this, NVVM::ProxyKind::async_shared,
      NVVM::SharedSpaceAttr::get(getContext(), NVVM::SharedSpace::shared_cta));
}

/// The workgroup memref type of `shape` x `elementType`.
static MemRefType workgroupMemRef(ArrayRef<int64_t> shape, Type elementType) {
  MLIRContext *ctx = elementType.getContext();
  return MemRefType::get(
      shape, elementType, MemRefLayoutAttrInterface(),
      gpu::AddressSpaceAttr::get(ctx, gpu::AddressSpace::Workgroup));
}

Value GpuBuilder::dynamicSharedMemory() {
  return gpu::DynamicSharedMemoryOp::create(
      *this, workgroupMemRef({ShapedType::kDynamic}, getI8Type()));
}

Value GpuBuilder::sharedView(Value smem, int64_t byteOffset,
                             ArrayRef<int64_t> shape, Type elementType) {
  return memref::ViewOp::create(*this, workgroupMemRef(shape, elementType),
                                smem, index(byteOffset), ValueRange{});
}

Value GpuBuilder::externSharedBuffer(gpu::GPUModuleOp module, StringRef name,
                                     int64_t alignment) {
  if (!module.lookupSymbol(name)) {
    OpBuilder mb = OpBuilder::atBlockBegin(module.getBody());
    LLVM::GlobalOp::create(mb, getLoc(),
                           LLVM::LLVMArrayType::get(getI8Type(), 0),
                           /*isConstant=*/false, LLVM::Linkage::External, name,
                           Attribute(), alignment, /*addrSpace=*/3);
  }
  return LLVM::AddressOfOp::create(
      *this, LLVM::LLVMPointerType::get(getContext(), 3), name);
}

Value GpuBuilder::sharedPtr(Value base, Value byteOffset) {
  return LLVM::GEPOp::create(*this, base.getType(), getI8Type(), base,
                             ArrayRef<LLVM::GEPArg>{byteOffset});
}

Value GpuBuilder::swizzle128Offset(Value row, Value chunk, Value byte) {
  Value slot = bitXor(chunk, rem(row, 8));
  return toI32(add(add(mul(row, 128), mul(slot, 16)), byte));
}

Value GpuBuilder::globalPtr(Value memref, Value byteOffset) {
  Value base = memref::ExtractAlignedPointerAsIndexOp::create(*this, memref);
  Value address =
      arith::IndexCastUIOp::create(*this, getI64Type(), add(base, byteOffset));
  return LLVM::IntToPtrOp::create(
      *this, LLVM::LLVMPointerType::get(getContext(), /*addressSpace=*/1),
      address);
}

Value GpuBuilder::loadShared(Type type, Value ptr, unsigned alignment) {
  return LLVM::LoadOp::create(*this, type, ptr, alignment);
}

void GpuBuilder::storeShared(Value value, Value ptr, unsigned alignment) {
  LLVM::StoreOp::create(*this, value, ptr, alignment);
}

Value GpuBuilder::mmaOperand(Value pair, bool asI32) {
  if (getElementTypeOrSelf(pair.getType()).isF16() && !asI32)
    return pair;
  Value packed = vector::BitCastOp::create(
      *this, VectorType::get({1}, getI32Type()), pair);
  return vector::ExtractOp::create(*this, packed, 0);
}

Value GpuBuilder::packMmaOperand(Value lo, Value hi, Type type, Value scale,
                                 bool asI32) {
  if (scale) {
    lo = arith::MulFOp::create(*this, lo, scale);
    hi = arith::MulFOp::create(*this, hi, scale);
  }
  Value pair = arith::TruncFOp::create(
      *this, VectorType::get({2}, type),
      vector::FromElementsOp::create(*this, VectorType::get({2}, getF32Type()),
                                     ValueRange{lo, hi}));
  return mmaOperand(pair, asI32);
}

Value GpuBuilder::wgmmaDescriptor(Value baseAddress, Value byteOffset,
                                  uint64_t fields) {
  Type i64Type = getI64Type();
  Value address =
      add(baseAddress, arith::ExtUIOp::create(*this, i64Type, byteOffset));
  Value start =
      bitAnd(arith::ShRUIOp::create(*this, address, i64(4)), i64(0x3FFF));
  return arith::OrIOp::create(*this, start, i64(static_cast<int64_t>(fields)));
}

Value GpuBuilder::wgmmaDescriptorAdvance(Value descriptor, int64_t bytes) {
  assert(bytes % 16 == 0 && "a descriptor's start address is in 16 bytes");
  return add(descriptor, i64(bytes / 16));
}

Value GpuBuilder::wgmmaShared(Value acc, int64_t n, Type elementType,
                              Value aDescriptor, Value bDescriptor,
                              bool accumulate, bool aMNMajor, bool bMNMajor) {
  auto type =
      elementType.isBF16() ? NVVM::WGMMATypes::bf16 : NVVM::WGMMATypes::f16;
  return NVVM::WgmmaMmaAsyncOp::create(
      *this, acc.getType(), acc, aDescriptor, bDescriptor,
      NVVM::MMAShapeAttr::get(getContext(), 64, n, 16), type, type,
      NVVM::WGMMATypes::f32,
      accumulate ? NVVM::WGMMAScaleOut::one : NVVM::WGMMAScaleOut::zero,
      NVVM::WGMMAScaleIn::one, NVVM::WGMMAScaleIn::one,
      aMNMajor ? NVVM::MMALayout::col : NVVM::MMALayout::row,
      bMNMajor ? NVVM::MMALayout::row : NVVM::MMALayout::col,
      NVVM::MMAIntOverflowAttr());
}

Value GpuBuilder::wgmmaRegisterA(Value acc, int64_t n, Type elementType,
                                 ArrayRef<Value> a, Value bDescriptor,
                                 bool bMNMajor) {
  assert(a.size() == 4 && "an m64k16 A fragment is four registers");
  int64_t regs = n / 2;
  std::string dtype = elementType.isBF16() ? "bf16" : "f16";
  std::string ptx = "{\n.reg .pred p;\nsetp.ne.b32 p, 1, 0;\nwgmma."
                    "mma_async.sync.aligned.m64n" +
                    std::to_string(n) + "k16.f32." + dtype + "." + dtype + " {";
  std::string constraints;
  for (int64_t i = 0; i < regs; ++i) {
    ptx += (i ? ", $" : "$") + std::to_string(i);
    constraints += (i ? ",=f" : "=f");
  }
  ptx += "}, {";
  for (int64_t i = 0; i < 4; ++i)
    ptx += (i ? ", $" : "$") + std::to_string(2 * regs + i);
  // scale-d from p (accumulate), A and B unscaled, B transposed when
  // MN-major.
  ptx += "}, $" + std::to_string(2 * regs + 4) + ", p, 1, 1, " +
         (bMNMajor ? "1" : "0") + ";\n}";
  for (int64_t i = 0; i < regs; ++i)
    constraints += "," + std::to_string(i);
  constraints += ",r,r,r,r,l";
  SmallVector<Value> operands;
  for (int64_t i = 0; i < regs; ++i)
    operands.push_back(LLVM::ExtractValueOp::create(*this, acc, i));
  operands.append(a.begin(), a.end());
  operands.push_back(bDescriptor);
  return LLVM::InlineAsmOp::create(
             *this, acc.getType(), operands, ptx, constraints,
             /*has_side_effects=*/true, /*is_align_stack=*/false,
             LLVM::tailcallkind::TailCallKind::None,
             LLVM::AsmDialectAttr::get(getContext(), LLVM::AsmDialect::AD_ATT),
             ArrayAttr())
      .getResult(0);
}

SmallVector<Value> GpuBuilder::fenceRegisters(ValueRange values) {
  std::string constraints;
  SmallVector<Type> types;
  for (Value v : values) {
    constraints += std::string(constraints.empty() ? "" : ",") +
                   (v.getType().isF32()         ? "=f"
                    : v.getType().isInteger(64) ? "=l"
                                                : "=r");
    types.push_back(v.getType());
  }
  for (size_t i = 0; i < values.size(); ++i)
    constraints += "," + std::to_string(i);
  Type result = types.size() == 1
                    ? types.front()
                    : LLVM::LLVMStructType::getLiteral(getContext(), types);
  Value fenced =
      LLVM::InlineAsmOp::create(
          *this, result, values, "", constraints, /*has_side_effects=*/true,
          /*is_align_stack=*/false, LLVM::tailcallkind::TailCallKind::None,
          LLVM::AsmDialectAttr::get(getContext(), LLVM::AsmDialect::AD_ATT),
          ArrayAttr())
          .getResult(0);
  if (types.size() == 1)
    return {fenced};
  SmallVector<Value> out;
  for (size_t i = 0; i < values.size(); ++i)
    out.push_back(LLVM::ExtractValueOp::create(*this, fenced, i));
  return out;
}

Value GpuBuilder::fenceOperands(Value values) {
  auto type = cast<LLVM::LLVMStructType>(values.getType());
  SmallVector<Value> fields;
  for (int64_t i = 0, e = type.getBody().size(); i < e; ++i)
    fields.push_back(LLVM::ExtractValueOp::create(*this, values, i));
  Value out = LLVM::UndefOp::create(*this, type);
  for (auto [i, v] : llvm::enumerate(fenceRegisters(fields)))
    out = LLVM::InsertValueOp::create(*this, out, v, i);
  return out;
}

Value GpuBuilder::inLoop(Value value) {
  if (!value.getType().isIndex())
    return fenceRegisters(value).front();
  Value wide = arith::IndexCastOp::create(*this, getI64Type(), value);
  return arith::IndexCastOp::create(*this, getIndexType(),
                                    fenceRegisters(wide).front());
}

/// One f32 -> f32 PTX instruction `mnemonic` as inline assembly.
static Value unaryAsm(GpuBuilder &b, StringRef mnemonic, Value x) {
  return LLVM::InlineAsmOp::create(
             b, b.getF32Type(), ValueRange{x}, (mnemonic + " $0, $1;").str(),
             "=f,f", /*has_side_effects=*/false, /*is_align_stack=*/false,
             LLVM::tailcallkind::TailCallKind::None,
             LLVM::AsmDialectAttr::get(b.getContext(),
                                       LLVM::AsmDialect::AD_ATT),
             ArrayAttr())
      .getResult(0);
}

Value GpuBuilder::ex2Approx(Value x) {
  return unaryAsm(*this, "ex2.approx.ftz.f32", x);
}

Value GpuBuilder::tanhApprox(Value x) {
  return unaryAsm(*this, "tanh.approx.f32", x);
}

uint64_t mlir::liger::wgmmaKMajorDescriptorFields(int64_t swizzleBytes) {
  uint64_t mode = swizzleBytes == 128 ? 1 : swizzleBytes == 64 ? 2 : 3;
  return (1ull << 16) | (uint64_t(8 * swizzleBytes / 16) << 32) | (mode << 62);
}

uint64_t mlir::liger::wgmmaMNMajorDescriptorFields(int64_t boxBytes) {
  return (uint64_t(boxBytes / 16) << 16) | (uint64_t(1024 / 16) << 32) |
         (1ull << 62);
}
