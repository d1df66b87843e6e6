// The wgmma + TMA matmul template (sm_90a, liger-compile by default
// with the configuration liger-select-kernel-config picks): a producer
// warpgroup issues TMA copies of x and W tiles into a ring of stages
// guarded by full/empty mbarriers, consumer warpgroups issue wgmma on them
// with f32 accumulators in registers; the descriptors are kernel
// parameters passed by value (__grid_constant__), which the manifest lists
// for the launcher to encode. ptxas accepts it without spills.
// REQUIRES: ptxas
// RUN: rm -rf %t.bundle
// RUN: liger-compile %s -o %t.bundle | FileCheck %s --check-prefix=OUT
// RUN: FileCheck %s --check-prefix=MANIFEST < %t.bundle/manifest.json
// RUN: FileCheck %s --check-prefix=PTX < %t.bundle/liger_kernels.sm_90a.ptx
// RUN: ptxas -arch=sm_90a -v %t.bundle/liger_kernels.sm_90a.ptx -o %t.cubin 2>&1 | FileCheck %s --check-prefix=PTXAS
// RUN: liger-compile %s --emit=gpu -o - | FileCheck %s --check-prefix=GPU
// RUN: liger-compile %s --emit=llvm -o - | FileCheck %s --check-prefix=LLVM
// RUN: rm -rf %t.llama && liger-compile %liger_src_root/examples/llama3_8b_decoder_layer.mlir -o %t.llama 2>&1 | FileCheck %s --check-prefix=LLAMA
// RUN: rm -rf %t.llama-prologue && liger-compile %liger_src_root/examples/llama3_8b_decoder_layer.mlir --norm-prologue -o %t.llama-prologue 2>&1 | FileCheck %s --check-prefix=LLAMA-PROLOGUE

// The Llama layer: every group compiles — the v projection with its
// RMSNorm prologue, the q/k projections with the norm and RoPE, the
// attention (liger-compile-attention.mlir has its template).
// LLAMA-NOT: warning
// LLAMA: liger-compile: 8 kernels for sm_90a in {{[^ ]*}}{{$}}
// LLAMA-PROLOGUE-NOT: warning
// LLAMA-PROLOGUE: liger-compile: 7 kernels for sm_90a in {{[^ ]*}}{{$}}

// OUT: liger-compile: 7 kernels for sm_90a

// 128 x 256 tiles, 4 stages of (128 + 256) rows x 128 bytes after 1024
// bytes of barriers: 3 warpgroups.
// MANIFEST: "block": [
// MANIFEST-NEXT: 384,
// MANIFEST: "dynamic_shared_memory_bytes": 197632,
// MANIFEST: "grid": [
// MANIFEST-NEXT: 4,
// MANIFEST-NEXT: "rows/128",
// MANIFEST: "name": "proj_matmul_0",
// MANIFEST: "tensor_maps": [
// MANIFEST: "box": [
// MANIFEST-NEXT: 128,
// MANIFEST-NEXT: 64
// MANIFEST: "param": "input0",
// MANIFEST-NEXT: "swizzle": 128
// MANIFEST: "box": [
// MANIFEST-NEXT: 256,
// MANIFEST-NEXT: 64
// MANIFEST: "param": "input1",
// A gate/up pair: one x map, two weight maps of 128-row tiles.
// MANIFEST: "name": "gated_matmul_0",
// MANIFEST: "tensor_maps": [
// MANIFEST: "param": "input0",
// MANIFEST: "param": "input1",
// MANIFEST: "param": "input2",

// PTX: .entry proj_matmul_0(
// PTX: .param .align 64 .b8 proj_matmul_0_param_{{[0-9]+}}[128],
// PTX-NEXT: .param .align 64 .b8 proj_matmul_0_param_{{[0-9]+}}[128]
// PTX: mbarrier.init.shared.b64
// PTX: fence.mbarrier_init.release.cluster;
// PTX: setmaxnreg.dec.sync.aligned.u32 40;
// PTX: mbarrier.try_wait.parity.shared.b64
// PTX: mbarrier.arrive.expect_tx.shared.b64
// PTX: cp.async.bulk.tensor.2d.shared::cta.global.tile.mbarrier::complete_tx::bytes
// PTX: setmaxnreg.inc.sync.aligned.u32 232;
// PTX: wgmma.fence.sync.aligned;
// PTX-COUNT-4: wgmma.mma_async.sync.aligned.m64n256k16.f32.bf16.bf16
// PTX: wgmma.commit_group.sync.aligned;
// PTX: wgmma.wait_group.sync.aligned 1;
// PTX: mbarrier.arrive.shared.b64
// PTX: wgmma.wait_group.sync.aligned 0;
// PTX: .entry gated_matmul_0(
// PTX-COUNT-8: wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16

// An RMSNorm prologue: per stage, each consumer thread rescales its 4
// swizzled 16-byte chunks of the x tile in place (x * g, summing x^2),
// fences them for the async proxy and meets its warpgroup at a named
// barrier; stage 0 before the loop, stage k + 1 while stage k's wgmmas run
// (after the release of stage k - 1). The epilogue scales rows by rstd.
// PTX: .entry normed_matmul_0(
// PTX: mbarrier.try_wait.parity.shared.b64
// PTX-COUNT-4: st.shared.v4.b32
// PTX: fence.proxy.async.shared::cta;
// PTX: bar.sync {{%r[0-9]+}}, 128;
// PTX: wgmma.fence.sync.aligned;
// PTX: wgmma.commit_group.sync.aligned;
// PTX: wgmma.wait_group.sync.aligned 1;
// PTX: mbarrier.arrive.shared.b64
// PTX: mbarrier.try_wait.parity.shared.b64
// PTX-COUNT-4: st.shared.v4.b32
// PTX: fence.proxy.async.shared::cta;
// PTX: wgmma.wait_group.sync.aligned 0;
// PTX: shfl.sync.bfly.b32
// PTX: rsqrt.approx

// A LoRA projection (r = 16): x · Aᵀ accumulates alongside (m64n16k16
// from the same x descriptor), then t = round(x · Aᵀ) goes from registers
// into a k16 wgmma against B's tile (32-byte swizzle) onto the scaled main
// accumulators. With 4 column tiles it hands x · Aᵀ over: each consumer
// thread acquires its 64-row block's flag, the warpgroup agrees
// (bar.red.and, made warp-uniform by a shuffle) and, where published,
// runs the main loop without the m64n16k16 wgmmas; column tile 0 stores
// its rows' products (f32 pairs) and releases the flag; a published
// block's products are read back.
// PTX: .entry lora_matmul_0(
// PTX: ld.acquire.gpu.global.b32
// PTX: bar.red.and.pred q, %r{{[0-9]+}}, 128, p;
// PTX: shfl.sync.idx.b32
// The published branch's loop: main wgmmas only, up to its last commit.
// PTX: wgmma.fence.sync.aligned;
// PTX-NOT: m64n16k16
// PTX: wgmma.commit_group.sync.aligned;
// PTX: wgmma.mma_async.sync.aligned.m64n16k16.f32.bf16.bf16
// PTX: wgmma.wait_group.sync.aligned 0;
// PTX: st.global.v2.b32
// PTX: bar.sync %r{{[0-9]+}}, 128;
// PTX: st.release.gpu.global.b32
// PTX: ld.global.v2.b32
// PTX: wgmma.mma_async.sync.aligned.m64n256k16.f32.bf16.bf16 {{{.*}}}, {{{%r[0-9]+, %r[0-9]+, %r[0-9]+, %r[0-9]+}}}, %rd{{[0-9]+}}, p, 1, 1, 0;
// The norm prologue's hand-over: the same protocol, rank 64.
// PTX: .entry rms_lora_matmul_0(
// PTX: ld.acquire.gpu.global.b32
// PTX: bar.red.and.pred
// PTX: wgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16
// PTX: st.release.gpu.global.b32
// The LoRA dx: the main wgmmas read B (W) transposed (trans-b 1), the
// rank-r ones B (Bᵀ's slice) K-major, in both loops of the hand-over.
// PTX: .entry lora_dx_matmul_0(
// PTX: ld.acquire.gpu.global.b32
// PTX: bar.red.and.pred
// PTX: wgmma.mma_async.sync.aligned.m64n256k16.f32.bf16.bf16 {{{.*}}}, %rd{{[0-9]+}}, %rd{{[0-9]+}}, p, 1, 1, 0, 1;
// PTX-NOT: m64n16k16
// PTX: wgmma.commit_group.sync.aligned;
// PTX: wgmma.mma_async.sync.aligned.m64n16k16.f32.bf16.bf16 {{{.*}}}, %rd{{[0-9]+}}, %rd{{[0-9]+}}, p, 1, 1, 0, 0;
// PTX: st.release.gpu.global.b32
// MANIFEST: "name": "lora_matmul_0",
// MANIFEST: "name": "workspace0",
// MANIFEST-NEXT: "role": "workspace",
// MANIFEST-NEXT: "shape": [
// MANIFEST-NEXT: "rows",
// MANIFEST-NEXT: 16
// MANIFEST: "kind": "row_scalars",
// MANIFEST-NEXT: "name": "workspace1",
// MANIFEST-NEXT: "role": "workspace",
// MANIFEST: "param": "input1",
// MANIFEST: "box": [
// MANIFEST-NEXT: 16,
// MANIFEST-NEXT: 64
// MANIFEST: "param": "input2",
// MANIFEST-NEXT: "swizzle": 128
// MANIFEST: "box": [
// MANIFEST-NEXT: 256,
// MANIFEST-NEXT: 16
// MANIFEST: "param": "input3",
// MANIFEST-NEXT: "swizzle": 32
// The LoRA dx reads W (input0) in MN-major boxes of 64 rows of K x 64
// columns, the factors' tiles as the forward's; dy · B is handed over.
// MANIFEST: "name": "lora_dx_matmul_0",
// MANIFEST: "name": "input0",
// MANIFEST-NEXT: "role": "input",
// MANIFEST-NEXT: "shape": [
// MANIFEST-NEXT: 1024,
// MANIFEST-NEXT: 512
// MANIFEST: "name": "workspace0",
// MANIFEST: "tensor_maps": [
// MANIFEST: "box": [
// MANIFEST-NEXT: 128,
// MANIFEST-NEXT: 64
// MANIFEST-NEXT: ],
// MANIFEST-NEXT: "oob": "zero",
// MANIFEST-NEXT: "param": "input1",
// MANIFEST: "box": [
// MANIFEST-NEXT: 64,
// MANIFEST-NEXT: 64
// MANIFEST-NEXT: ],
// MANIFEST-NEXT: "oob": "zero",
// MANIFEST-NEXT: "param": "input0",
// MANIFEST: "box": [
// MANIFEST-NEXT: 16,
// MANIFEST-NEXT: 64
// MANIFEST-NEXT: ],
// MANIFEST-NEXT: "oob": "zero",
// MANIFEST-NEXT: "param": "input2",
// MANIFEST: "box": [
// MANIFEST-NEXT: 256,
// MANIFEST-NEXT: 16
// MANIFEST-NEXT: ],
// MANIFEST-NEXT: "oob": "zero",
// MANIFEST-NEXT: "param": "input3",
// MANIFEST-NEXT: "swizzle": 32

// No kernel's wgmmas are serialized (the hand-over's two loops included).
// PTXAS-NOT: serialized
// PTXAS-NOT: {{[1-9][0-9]*}} bytes spill
// PTXAS: 0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads
// No kernel after the last one matched spills either.
// PTXAS-NOT: {{[1-9][0-9]*}} bytes spill

// Three descriptors: x, W and the output (TMA stores).
// GPU: gpu.func @proj_matmul_0(%{{.+}}: memref<?x512xbf16>, %{{.+}}: memref<1024x512xbf16>, %{{.+}}: memref<?x1024xbf16>, %{{.+}}: !llvm.ptr, %{{.+}}: !llvm.ptr, %{{.+}}: !llvm.ptr) kernel
// GPU-SAME: known_block_size = array<i32: 384, 1, 1>
// GPU-SAME: liger.tensor_maps = 3
// GPU: nvvm.mbarrier.init
// GPU: nvvm.fence.mbarrier.init
// GPU: gpu.barrier
// GPU: nvvm.cp.async.bulk.tensor.shared.cluster.global {{.*}} box[{{.*}}] {isCTAOnly = true}
// GPU: nvvm.wgmma.mma_async {{.*}}, <m = 64, n = 256, k = 16>, D[<f32>, <one>], A[<bf16>, <one>, <row>], B[<bf16>, <one>, <col>]
// The epilogue: the consumers meet (named barrier 8), write the swizzled
// result tile to shared memory, fence it for the async proxy, and one
// thread per warpgroup stores its 64-column boxes with TMA.
// GPU: nvvm.barrier id = %{{.+}} number_of_threads = %{{.+}}
// GPU: llvm.store {{.*}} {alignment = 4 : i64} : vector<2xbf16>, !llvm.ptr<3>
// GPU: nvvm.fence.proxy {kind = #nvvm.proxy_kind<async.shared>, space = #nvvm.shared_space<cta>}
// GPU-COUNT-4: nvvm.cp.async.bulk.tensor.global.shared.cta
// GPU: nvvm.cp.async.bulk.commit.group
// GPU: nvvm.cp.async.bulk.wait_group 0 {read}

// A bias: loaded at the column pair (before the batch's stores) and added in
// f32 before the rounding.
// GPU: gpu.func @biased_matmul_0(%{{.+}}: memref<?x512xbf16>, %{{.+}}: memref<1024x512xbf16>, %[[B:.+]]: memref<1024xbf16>, %{{.+}}: memref<?x1024xbf16>, %{{.+}}: !llvm.ptr, %{{.+}}: !llvm.ptr, %{{.+}}: !llvm.ptr) kernel
// GPU: %[[BV:.+]] = vector.load %[[B]][%{{.+}}] {alignment = 4 : i64} : memref<1024xbf16>, vector<2xbf16>
// GPU: %[[BF:.+]] = arith.extf %[[BV]] : vector<2xbf16> to vector<2xf32>
// GPU-NEXT: %[[SUM:.+]] = arith.addf %{{.+}}, %[[BF]] : vector<2xf32>
// GPU-NEXT: arith.truncf %[[SUM]] : vector<2xf32> to vector<2xbf16>

// The descriptors become by-value grid constants.
// LLVM: llvm.func @proj_matmul_0(
// LLVM-SAME: !llvm.ptr {llvm.align = 64 : i64, llvm.byval = !llvm.array<16 x i64>, nvvm.grid_constant}, %{{.+}}: !llvm.ptr {llvm.align = 64 : i64, llvm.byval = !llvm.array<16 x i64>, nvvm.grid_constant}, %{{.+}}: !llvm.ptr {llvm.align = 64 : i64, llvm.byval = !llvm.array<16 x i64>, nvvm.grid_constant})

func.func @proj(%x: tensor<?x512xbf16>, %w: tensor<1024x512xbf16>) -> tensor<?x1024xbf16> {
  %y = liger.fusion matmul(%x, %w) : (tensor<?x512xbf16>, tensor<1024x512xbf16>) -> tensor<?x1024xbf16> {
  ^bb0(%a: tensor<?x512xbf16>, %b: tensor<1024x512xbf16>):
    %l = liger.linear %a, %b : tensor<?x512xbf16>, tensor<1024x512xbf16>
    liger.yield %l : tensor<?x1024xbf16>
  }
  return %y : tensor<?x1024xbf16>
}

func.func @gated(%x: tensor<?x512xbf16>, %g: tensor<1024x512xbf16>, %u: tensor<1024x512xbf16>) -> tensor<?x1024xbf16> {
  %y = liger.fusion matmul(%x, %g, %u) : (tensor<?x512xbf16>, tensor<1024x512xbf16>, tensor<1024x512xbf16>) -> tensor<?x1024xbf16> {
  ^bb0(%a: tensor<?x512xbf16>, %b: tensor<1024x512xbf16>, %c: tensor<1024x512xbf16>):
    %lg = liger.linear %a, %b : tensor<?x512xbf16>, tensor<1024x512xbf16>
    %lu = liger.linear %a, %c : tensor<?x512xbf16>, tensor<1024x512xbf16>
    %s = liger.swiglu %lg, %lu : tensor<?x1024xbf16>
    liger.yield %s : tensor<?x1024xbf16>
  }
  return %y : tensor<?x1024xbf16>
}

func.func @normed(%x: tensor<?x512xbf16>, %g: tensor<512xbf16>, %w: tensor<1024x512xbf16>) -> tensor<?x1024xbf16> {
  %y = liger.fusion matmul(%x, %g, %w) : (tensor<?x512xbf16>, tensor<512xbf16>, tensor<1024x512xbf16>) -> tensor<?x1024xbf16> {
  ^bb0(%a: tensor<?x512xbf16>, %b: tensor<512xbf16>, %c: tensor<1024x512xbf16>):
    %n = liger.rms_norm %a, %b eps = 1.0e-5 : tensor<?x512xbf16>, tensor<512xbf16>
    %l = liger.linear %n, %c : tensor<?x512xbf16>, tensor<1024x512xbf16>
    liger.yield %l : tensor<?x1024xbf16>
  }
  return %y : tensor<?x1024xbf16>
}

func.func @biased(%x: tensor<?x512xbf16>, %w: tensor<1024x512xbf16>, %b: tensor<1024xbf16>) -> tensor<?x1024xbf16> {
  %y = liger.fusion matmul(%x, %w, %b) : (tensor<?x512xbf16>, tensor<1024x512xbf16>, tensor<1024xbf16>) -> tensor<?x1024xbf16> {
  ^bb0(%a: tensor<?x512xbf16>, %c: tensor<1024x512xbf16>, %d: tensor<1024xbf16>):
    %l = liger.linear %a, %c, %d : tensor<?x512xbf16>, tensor<1024x512xbf16>, tensor<1024xbf16>
    liger.yield %l : tensor<?x1024xbf16>
  }
  return %y : tensor<?x1024xbf16>
}

func.func @lora(%x: tensor<?x512xbf16>, %w: tensor<1024x512xbf16>, %a: tensor<16x512xbf16>, %b: tensor<1024x16xbf16>) -> tensor<?x1024xbf16> {
  %y = liger.fusion matmul(%x, %w, %a, %b) : (tensor<?x512xbf16>, tensor<1024x512xbf16>, tensor<16x512xbf16>, tensor<1024x16xbf16>) -> tensor<?x1024xbf16> {
  ^bb0(%i: tensor<?x512xbf16>, %j: tensor<1024x512xbf16>, %k: tensor<16x512xbf16>, %l: tensor<1024x16xbf16>):
    %p = liger.lora_linear %i, %j, %k, %l scale = 2.0 : tensor<?x512xbf16>, tensor<1024x512xbf16>, tensor<16x512xbf16>, tensor<1024x16xbf16>
    liger.yield %p : tensor<?x1024xbf16>
  }
  return %y : tensor<?x1024xbf16>
}

// RMSNorm before a rank-64 LoRA projection of 4 column tiles: the hand-over
// with the norm prologue (the products stored rstd-scaled).
func.func @rms_lora(%x: tensor<?x512xbf16>, %g: tensor<512xbf16>, %w: tensor<1024x512xbf16>, %a: tensor<64x512xbf16>, %b: tensor<1024x64xbf16>) -> tensor<?x1024xbf16> {
  %y = liger.fusion matmul(%x, %g, %w, %a, %b) : (tensor<?x512xbf16>, tensor<512xbf16>, tensor<1024x512xbf16>, tensor<64x512xbf16>, tensor<1024x64xbf16>) -> tensor<?x1024xbf16> {
  ^bb0(%i: tensor<?x512xbf16>, %h: tensor<512xbf16>, %j: tensor<1024x512xbf16>, %k: tensor<64x512xbf16>, %l: tensor<1024x64xbf16>):
    %n = liger.rms_norm %i, %h eps = 1.0e-5 : tensor<?x512xbf16>, tensor<512xbf16>
    %p = liger.lora_linear %n, %j, %k, %l scale = 0.5 : tensor<?x512xbf16>, tensor<1024x512xbf16>, tensor<64x512xbf16>, tensor<1024x64xbf16>
    liger.yield %p : tensor<?x1024xbf16>
  }
  return %y : tensor<?x1024xbf16>
}

// The LoRA dx, dy · W + 2 · (dy · B) · A, as liger.lora_linear of dy, Wᵀ,
// Bᵀ and Aᵀ: liger-fuse-lora brings W's transpose into the group, whose
// kernel reads W [1024, 512] itself MN-major (2 column tiles of 256: dy · B
// handed over).
func.func @lora_dx(%w: tensor<1024x512xbf16>, %dy: tensor<?x1024xbf16>, %bt: tensor<16x1024xbf16>, %at: tensor<512x16xbf16>) -> tensor<?x512xbf16> {
  %e = tensor.empty() : tensor<512x1024xbf16>
  %wt = linalg.transpose ins(%w : tensor<1024x512xbf16>) outs(%e : tensor<512x1024xbf16>) permutation = [1, 0]
  %dx = liger.lora_linear %dy, %wt, %bt, %at scale = 2.0 : tensor<?x1024xbf16>, tensor<512x1024xbf16>, tensor<16x1024xbf16>, tensor<512x16xbf16>
  return %dx : tensor<?x512xbf16>
}
