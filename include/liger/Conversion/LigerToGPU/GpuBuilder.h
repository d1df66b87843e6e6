//===- GpuBuilder.h - building blocks of the GPU kernel templates -*- C++ -*-===//
//
// The pieces every kernel template builds its gpu.func from, on an
// ImplicitLocOpBuilder: the kernel function itself, index and i32
// arithmetic, structured control flow, the warp and the block reduction,
// RoPE's rotate-half, cp.async copies, mbarriers, TMA copies, proxy fences
// and named barriers, the extern shared-memory buffer, and wgmma
// shared-memory descriptors. A template (rowwise, RoPE, cross-entropy,
// matmul) keeps what is its own (its plan, its shared-memory layout, its
// emitters); what two templates can share lives here, written once, so
// that no template exports helpers for another.
//
//===----------------------------------------------------------------------===//

#ifndef LIGER_CONVERSION_LIGERTOGPU_GPUBUILDER_H
#define LIGER_CONVERSION_LIGERTOGPU_GPUBUILDER_H

#include "liger/Target/GpuTarget.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/IR/ImplicitLocOpBuilder.h"

namespace mlir::liger {

/// An ImplicitLocOpBuilder with the arithmetic and GPU operations of the
/// kernel templates. Integer helpers work on index or i32 values (a
/// constant operand takes the other operand's type); division, remainder,
/// minimum and comparison are unsigned, as every index a kernel computes is
/// a non-negative offset.
class GpuBuilder : public ImplicitLocOpBuilder {
public:
  GpuBuilder(Location loc, const OpBuilder &builder)
      : ImplicitLocOpBuilder(loc, builder) {}

  /// A builder of the same location at `builder`'s insertion point (the
  /// body builders of scf.if).
  GpuBuilder with(const OpBuilder &builder) const {
    return GpuBuilder(getLoc(), builder);
  }
  /// A builder at the start of `block`.
  GpuBuilder atStart(Block *block) const;

  /// Creates kernel `name` taking `params` at the end of `module`, launched
  /// with blocks of `threads` threads (its known block size, and the one it
  /// requires: `nvvm.reqntid`, .reqntid in its PTX), and moves the builder
  /// to the start of its body.
  gpu::GPUFuncOp beginKernel(gpu::GPUModuleOp module, StringRef name,
                             TypeRange params, int64_t threads);
  /// Marks `kernel` as warp-specialized with setmaxnreg: at least one CTA
  /// an SM (`nvvm.minctasm` 1, .minnctapersm in its PTX), so that ptxas
  /// fixes the register count at entry (65536 / threads) that setmaxnreg
  /// moves between warpgroups; without it ptxas may ignore setmaxnreg
  /// (advisory C7508).
  void markWarpSpecialized(gpu::GPUFuncOp kernel);
  /// `if (cond)` without results: a builder inside its `then` block.
  GpuBuilder ifThen(Value cond);
  /// `if (cond) ... else ...` without results: builders of both blocks.
  std::pair<GpuBuilder, GpuBuilder> ifThenElse(Value cond);

  // Constants.
  Value index(int64_t value);
  Value i32(int64_t value);
  Value i64(int64_t value);
  Value f32(double value);
  /// The integer `value` of `type` (index or an integer type).
  Value constant(Type type, int64_t value);
  /// A vector<`width` x f32> of `value` in every lane.
  Value f32Splat(int64_t width, double value);

  /// An integer operand: a value, or a constant that takes the other
  /// operand's type (index or i32).
  class IntOperand {
  public:
    /// A Value, or an op of one result.
    template <typename T, typename = std::enable_if_t<
                              std::is_convertible_v<T, Value>>>
    IntOperand(T value) : value(value) {}
    IntOperand(int64_t constant) : constant(constant) {}
    /// The operand, its constant created (of `type`) at `b` if need be.
    Value get(GpuBuilder &b, Type type) const {
      return value ? value : b.constant(type, constant);
    }

  private:
    Value value;
    int64_t constant = 0;
  };

  // Integer arithmetic on index or i32.
  Value add(Value a, IntOperand b) { return binary<arith::AddIOp>(a, b); }
  Value sub(Value a, IntOperand b) { return binary<arith::SubIOp>(a, b); }
  Value mul(Value a, IntOperand b) { return binary<arith::MulIOp>(a, b); }
  Value div(Value a, IntOperand b) { return binary<arith::DivUIOp>(a, b); }
  Value rem(Value a, IntOperand b) { return binary<arith::RemUIOp>(a, b); }
  Value min(Value a, IntOperand b) { return binary<arith::MinUIOp>(a, b); }
  Value max(Value a, IntOperand b) { return binary<arith::MaxUIOp>(a, b); }
  Value bitAnd(Value a, IntOperand b) { return binary<arith::AndIOp>(a, b); }
  Value bitXor(Value a, IntOperand b) { return binary<arith::XOrIOp>(a, b); }
  Value lessThan(Value a, IntOperand b) {
    return compare(arith::CmpIPredicate::ult, a, b);
  }
  Value equal(Value a, IntOperand b) {
    return compare(arith::CmpIPredicate::eq, a, b);
  }
  Value select(Value cond, Value a, Value b);
  /// An index value as i32 (the byte offsets of shared memory pointers).
  Value toI32(Value index);
  /// `base + index * stride`, the add left out when `base` is 0: the byte
  /// offset of entry `index` of an array of `stride`-byte entries.
  Value offsetOf(Value index, int64_t stride, int64_t base);

  // Thread and block indices (x unless said).
  Value threadId();
  Value blockId(gpu::Dimension dim);
  Value gridDim(gpu::Dimension dim);
  /// The CTA's index in its thread-block cluster along x (%cluster_ctaid.x).
  Value clusterBlockId();
  /// Lane 0's `index` value, which ptxas then knows is the same across the
  /// warp (a warpgroup's role computed from the thread index: a loop
  /// bounded by it that holds wgmma stays warp-uniform, so that ptxas does
  /// not serialize the wgmmas).
  Value warpUniform(Value index);

  // Reductions: the one warp reduction and the one block reduction of
  // every template.
  /// Combines two tuples of per-lane values into one (a reduction's step).
  using Combine =
      function_ref<SmallVector<Value>(GpuBuilder &, ValueRange, ValueRange)>;
  /// Reduces `values` across each group of `lanes` consecutive lanes of a
  /// warp (a power of two up to 32) with an XOR butterfly, `combine` at
  /// every step; each lane gets its group's result. The steps take the
  /// offsets lanes / 2, lanes / 4, ..., 1 in that order, widest first (the
  /// order fixes the rounding of a floating-point result).
  SmallVector<Value> warpAllReduce(ValueRange values, int64_t lanes,
                                   Combine combine);
  /// warpAllReduce of one f32 value with addition.
  Value warpAllReduceSum(Value value, int64_t lanes);
  /// The f32 slots of shared memory a blockAllReduce of `values` values
  /// among `threads` threads takes in an area of `maxValues` result slots:
  /// the result slots, then each warp's partials.
  static int64_t blockReduceSlots(int64_t threads, int64_t values,
                                  int64_t maxValues);
  /// Reduces `values` (at most `maxValues`) across the `threads` threads of
  /// the CTA (a multiple of 32; `tid` is the thread index) with `combine`:
  /// warpAllReduce in each warp; lane 0 of each warp writes its partials
  /// into the area of blockReduceSlots(threads, values.size(), maxValues)
  /// f32 slots at `byteOffset` of the workgroup buffer `smem`
  /// (gpu.dynamic_shared_memory; warp w's partial of value j at slot
  /// maxValues + w k + j, k values, a warp's
  /// partials contiguous); warp 0 combines them (its lanes past the warps
  /// with the identities `neutral`) and lane 0 writes the results (value
  /// j's at slot j); every thread reads them. Two barriers. A result slot
  /// is never a partial's, so one area can serve every reduction of a
  /// kernel of at most `maxValues` values: a warp running ahead into the
  /// next reduction writes partials, never a result another warp still
  /// reads. One warp needs no area.
  SmallVector<Value> blockAllReduce(Value smem, int64_t byteOffset,
                                    int64_t maxValues, Value tid,
                                    int64_t threads, ValueRange values,
                                    ArrayRef<double> neutral, Combine combine);

  /// Combines `values` (f32, each the same in every thread of the CTA)
  /// across the `ctas` CTAs of the thread-block cluster: thread `tid` 0
  /// writes them into the `values.size()` f32 slots at `byteOffset` of
  /// `smem` (gpu.dynamic_shared_memory), the cluster meets (clusterBarrier),
  /// and every thread reads each CTA's slots through distributed shared
  /// memory (mapa, ld.shared::cluster) and combines them in rank order, so
  /// that every CTA gets the same result, bit for bit. The slots are read
  /// by the other CTAs after the call: they are not written again, and the
  /// kernel meets its cluster once more before it exits.
  SmallVector<Value> clusterAllReduce(Value smem, int64_t byteOffset,
                                      int64_t ctas, Value tid,
                                      ValueRange values, Combine combine);

  /// One output of RoPE's rotate-half in f32 (scalars or vectors of the
  /// same type): x ⊙ cos − partner ⊙ sin with `subtract`, else x ⊙ cos +
  /// partner ⊙ sin, `partner` the element half a head away
  /// (docs/Reference/Semantics.md).
  Value ropeTerm(Value x, Value cos, Value partner, Value sin, bool subtract);

  // cp.async (sm_80 and later).
  /// Copies `elements` elements (16 bytes) of `src` at `srcIndices` (global
  /// memory) into `dst` at `dstIndices` (shared memory), bypassing L1; with
  /// `valid` false the copy reads nothing and zero-fills its 16 bytes
  /// (`src` at `srcIndices` must still be a readable address).
  void asyncCopy16(Value dst, ValueRange dstIndices, Value src,
                   ValueRange srcIndices, int64_t elements,
                   Value valid = Value());
  /// Commits the thread's copies so far as one group.
  void asyncCopyCommit();
  /// Waits until at most `pending` of the thread's groups are in flight
  /// (its own copies of the others are then visible to it).
  void asyncCopyWait(int64_t pending);

  // mbarriers, addressed by !llvm.ptr<3>.
  void mbarrierInit(Value barrier, int64_t count);
  /// Makes the barrier initializations visible to the async proxy.
  void mbarrierInitFence();
  /// One arrival that also expects `bytes` of asynchronous copies.
  void mbarrierArriveExpectTx(Value barrier, int64_t bytes);
  /// The same with `bytes` (i32) known at run time.
  void mbarrierArriveExpectTx(Value barrier, Value bytes);
  void mbarrierArrive(Value barrier);
  /// One arrival (release at CTA scope) on the barrier at
  /// `barrier`'s offset in the shared memory of the cluster's CTA `rank`
  /// (i32; mapa).
  void mbarrierArriveInCta(Value barrier, Value rank);
  /// Waits for the phase of parity `parity` (i32) to complete; `ticks` is
  /// the suspend-time hint in nanoseconds (i32).
  void mbarrierWaitParity(Value barrier, Value parity, Value ticks);

  // TMA (sm_90a): tensor maps are by-value kernel parameters.
  /// Copies the box at `coordinates` (innermost first, i32) of `tensorMap`
  /// into shared memory at `dst`, completing on `barrier`.
  void tmaLoad(Value dst, Value tensorMap, ValueRange coordinates,
               Value barrier);
  /// The same copy into the shared memory of each CTA of the cluster whose
  /// bit is set in `ctaMask`, at `dst`'s offset there, completing on the
  /// barrier at `barrier`'s offset in each (multicast::cluster).
  void tmaLoadMulticast(Value dst, Value tensorMap, ValueRange coordinates,
                        Value barrier, int64_t ctaMask);
  /// Every thread of the cluster meets (barrier.cluster arrive, with
  /// release, then wait, with acquire).
  void clusterBarrier();
  /// Stores the box at `src` to `coordinates` of `tensorMap`.
  void tmaStore(Value tensorMap, Value src, ValueRange coordinates);
  /// Copies `bytes` (i32, a multiple of 16) from global memory at `src`
  /// (16-byte aligned) into shared memory at `dst`, completing on
  /// `barrier` (cp.async.bulk, no tensor map).
  void bulkLoad(Value dst, Value src, Value bytes, Value barrier);
  /// Adds the box at `src` (f32) to `coordinates` of `tensorMap`'s tensor
  /// (cp.reduce.async.bulk.tensor .add; out-of-range parts are skipped),
  /// in the thread's current bulk group.
  void tmaReduceAdd(Value tensorMap, Value src, ValueRange coordinates);
  /// Prefetches the box at `coordinates` of `tensorMap` into L2
  /// (cp.async.bulk.prefetch.tensor; out-of-range parts are skipped).
  void tmaPrefetchL2(Value tensorMap, ValueRange coordinates);
  /// Commits the thread's TMA stores (and reductions) as one bulk group.
  void tmaStoreCommit();
  /// Waits until the shared-memory source of every bulk group the thread
  /// committed has been read, but for the `pending` most recent ones.
  void tmaStoreWaitRead(int64_t pending = 0);
  /// Both: the stores committed, their source read.
  void tmaStoreCommitAndWaitRead();

  // Barriers and fences.
  /// bar.sync on barrier `id` (i32) among `threads` threads.
  void namedBarrier(Value id, int64_t threads);
  /// bar.arrive: counts the calling threads at named barrier `id` of
  /// `threads` without waiting for the others.
  void namedBarrierArrive(Value id, int64_t threads);
  /// bar.red.and on barrier `id` among `threads` threads: whether `pred`
  /// (i1) holds in every one of them (i1, the same in all).
  Value namedBarrierAll(Value id, int64_t threads, Value pred);
  /// Orders the thread's generic-proxy shared-memory writes before
  /// async-proxy reads (wgmma, TMA stores) of them.
  void fenceProxyAsyncShared();
  /// ld.acquire.gpu of the 32-bit word at global `ptr` (i32): what other
  /// CTAs wrote before their release of it is visible after.
  Value loadAcquireGpu(Value ptr);
  /// st.release.gpu of `value` (i32) to global `ptr`: what this thread
  /// wrote, or saw at a barrier before it, is visible to an acquire that
  /// reads it.
  void storeReleaseGpu(Value ptr, Value value);

  // Shared memory as gpu.dynamic_shared_memory (the row templates,
  // mma.sync).
  /// The kernel's dynamic shared memory, memref<?xi8, workgroup>.
  Value dynamicSharedMemory();
  /// The workgroup memref of `shape` x `elementType` at `byteOffset` of
  /// `smem` (dynamicSharedMemory).
  Value sharedView(Value smem, int64_t byteOffset, ArrayRef<int64_t> shape,
                   Type elementType);

  // Shared memory as one extern buffer (wgmma kernels).
  /// The dynamic shared memory a kernel with a 1024-aligned extern buffer
  /// may take on `target`: ptxas gives such a kernel a 1024-byte static
  /// section (.nv.shared.<kernel> in the cubin), which the driver (and the
  /// runtime's check) counts with the dynamic bytes.
  static int64_t externSharedBudget(const GpuTargetInfo &target) {
    return target.maxSharedMemoryBytes - 1024;
  }
  /// The address of `module`'s extern, `alignment`-aligned dynamic shared
  /// buffer `name`, declared on first use.
  Value externSharedBuffer(gpu::GPUModuleOp module, StringRef name,
                           int64_t alignment);
  /// `base` + `byteOffset` (i32) as a shared-memory pointer.
  Value sharedPtr(Value base, Value byteOffset);
  /// The byte offset (i32) of byte `byte` of 16-byte chunk `chunk` of row
  /// `row` in a box of 128-byte rows as TMA's and wgmma's 128-byte swizzle
  /// lays it out (the chunk XOR-ed with row % 8; index operands).
  Value swizzle128Offset(Value row, Value chunk, Value byte);
  /// The global-memory pointer (!llvm.ptr<1>) `byteOffset` (index) bytes
  /// into the buffer of `memref`, a kernel parameter (the ABI's
  /// descriptors have offset 0).
  Value globalPtr(Value memref, Value byteOffset);
  /// A 2 x T vector loaded from or stored to a shared-memory pointer,
  /// `alignment`-byte aligned.
  Value loadShared(Type type, Value ptr, unsigned alignment);
  void storeShared(Value value, Value ptr, unsigned alignment);

  // Tensor Core operands.
  /// A bf16/f16 pair as an MMA operand register: an i32 (bf16 always; f16
  /// with `asI32`, as inline PTX takes it) or vector<2xf16> (nvvm.mma.sync's
  /// f16 operands).
  Value mmaOperand(Value pair, bool asI32 = false);
  /// The f32 pair (lo, hi), times `scale` if given, rounded to `type` as an
  /// MMA operand register.
  Value packMmaOperand(Value lo, Value hi, Type type, Value scale,
                       bool asI32 = false);

  // wgmma shared-memory matrix descriptors.
  /// The descriptor of the tile at `byteOffset` (i32) from the shared
  /// buffer whose address is `baseAddress` (i64): the start address >> 4
  /// with the fixed `fields` (leading and stride offsets, swizzle mode).
  Value wgmmaDescriptor(Value baseAddress, Value byteOffset, uint64_t fields);
  /// The descriptor of the tile `bytes` (a multiple of 16) past
  /// `descriptor`'s: one add to its start address field (shared addresses
  /// stay below its 2^18-byte reach), so that a product's k slices share
  /// one base descriptor.
  Value wgmmaDescriptorAdvance(Value descriptor, int64_t bytes);
  /// acc + a · B by one wgmma.mma_async m64n`n`k16 whose A comes from
  /// registers: `a` is four `elementType` pairs as i32 (an m64n16 slice of
  /// an accumulator, rounded: the accumulator fragment is A's), B the
  /// shared-memory tile of `bDescriptor`, K-major or (`bMNMajor`)
  /// MN-major. `acc` is the struct of n / 2 f32. Inline PTX: NVVM's op
  /// takes A from shared memory only. The caller fences, commits and waits.
  Value wgmmaRegisterA(Value acc, int64_t n, Type elementType,
                       ArrayRef<Value> a, Value bDescriptor, bool bMNMajor);
  /// acc + A · B (or A · B where not `accumulate`: `acc` may then be
  /// undef) by one wgmma.mma_async m64n`n`k16 of `elementType` (bf16 or
  /// f16) with both operands in shared memory, each K-major or MN-major
  /// (transposed). `acc` is the struct of n / 2 f32. The caller fences,
  /// commits and waits.
  Value wgmmaShared(Value acc, int64_t n, Type elementType, Value aDescriptor,
                    Value bDescriptor, bool accumulate, bool aMNMajor = false,
                    bool bMNMajor = false);

  /// `values` (f32, i32 or i64 registers) through an empty asm statement that
  /// claims to change them (CUTLASS's fence_operand): placed after a
  /// wgmma.wait_group, it keeps every read of the registers below the
  /// wait, and keeps an in-flight wgmma's A registers live until then (else
  /// ptxas may reuse them while the product still reads them, and
  /// serializes every wgmma to stay correct: its C7513 advisory).
  SmallVector<Value> fenceRegisters(ValueRange values);
  /// A struct of f32 (a wgmma accumulator) through fenceRegisters.
  Value fenceOperands(Value values);
  /// `value` (index, i32 or i64) through fenceRegisters where it is used in
  /// a loop: what is computed from it stays in the loop. Else LLVM hoists
  /// every loop-invariant value derived from it (each k slice's descriptor,
  /// each register's mask offset) and the loop holds them all in registers,
  /// which a kernel near its register limit spills.
  Value inLoop(Value value);
  /// 2^x as one ex2.approx.ftz.f32 (math.exp2 with afn gives the non-ftz
  /// form, which ptxas brackets with a range test and two multiplies): for
  /// a softmax, whose arguments are at most 0 and whose denormal results
  /// round to 0 in a 16-bit operand anyway.
  Value ex2Approx(Value x);
  /// tanh(x) as one tanh.approx.f32 (relative error about 2^-11; MUFU.TANH
  /// on sm_75 and later): a logit softcap's, whose result is rounded to a
  /// 16-bit operand or feeds a softmax.
  Value tanhApprox(Value x);

private:
  template <typename OpTy> Value binary(Value a, IntOperand b) {
    return OpTy::create(*this, a, b.get(*this, a.getType()));
  }
  Value compare(arith::CmpIPredicate predicate, Value a, IntOperand b);
};

/// The fixed fields of the wgmma descriptor of a K-major tile whose rows
/// are swizzled in spans of `swizzleBytes` (128, 64 or 32): leading offset
/// 16 bytes (unused when swizzled), stride 8 rows x the span between 8-row
/// atoms, the swizzle mode.
uint64_t wgmmaKMajorDescriptorFields(int64_t swizzleBytes);
/// The fixed fields of the wgmma descriptor of an MN-major tile stored as
/// boxes of 128-byte swizzled rows (64 elements of M or N each) side by
/// side, `boxBytes` apart: leading offset = the bytes between boxes along
/// MN, stride = 8 rows (1024 bytes) along K, the 128-byte swizzle.
uint64_t wgmmaMNMajorDescriptorFields(int64_t boxBytes);

} // namespace mlir::liger

#endif // LIGER_CONVERSION_LIGERTOGPU_GPUBUILDER_H
