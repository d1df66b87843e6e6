// The mma.sync matmul template (liger-compile compiles matmul groups by default):
// one liger.linear group pinned to the matmul_mma_sync template becomes one kernel with
// cp.async staging, ldmatrix, bf16 m16n8k16 MMAs and a tiled grid; ptxas
// accepts it for sm_90a and sm_80 without spills. Without the flag, the
// group is left for later, as before.
// REQUIRES: ptxas
// RUN: rm -rf %t.bundle
// RUN: liger-compile %s -o %t.bundle | FileCheck %s --check-prefix=OUT
// RUN: FileCheck %s --check-prefix=MANIFEST < %t.bundle/manifest.json
// RUN: FileCheck %s --check-prefix=PTX < %t.bundle/liger_kernels.sm_90a.ptx
// RUN: ptxas -arch=sm_90a -v %t.bundle/liger_kernels.sm_90a.ptx -o %t.cubin 2>&1 | FileCheck %s --check-prefix=PTXAS
// RUN: liger-compile %s --target=sm_80 --emit=ptx -o %t.sm80.ptx
// RUN: ptxas -arch=sm_80 -v %t.sm80.ptx -o %t.sm80.cubin 2>&1 | FileCheck %s --check-prefix=PTXAS
// RUN: liger-compile %s --no-matmul-kernels --emit=gpu -o - | FileCheck %s --check-prefix=OFF
// RUN: liger-compile %s --emit=gpu -o - | FileCheck %s --check-prefix=GPU
// RUN: rm -rf %t.llama && liger-compile %liger_src_root/examples/llama3_8b_decoder_layer.mlir --target=sm_80 -o %t.llama 2>&1 | FileCheck %s --check-prefix=LLAMA
// RUN: rm -rf %t.llama-prologue && liger-compile %liger_src_root/examples/llama3_8b_decoder_layer.mlir --norm-prologue --target=sm_80 -o %t.llama-prologue 2>&1 | FileCheck %s --check-prefix=LLAMA-PROLOGUE

// The Llama-3-8B layer on sm_80 (mma.sync by default there): every
// projection becomes a matmul kernel — q/k with the norm and RoPE, v with
// the norm, o_proj, the gate/up pair with SwiGLU, the down projection with
// its residual add; attention waits.
// LLAMA-NOT: warning
// LLAMA: liger-compile: 7 kernels for sm_80 in {{.*}} (not compiled yet, no kernel template: 1 liger.attention)
// LLAMA-PROLOGUE-NOT: warning
// LLAMA-PROLOGUE: liger-compile: 6 kernels for sm_80 in {{.*}} (not compiled yet, no kernel template: 1 liger.attention)

// OUT: liger-compile: 6 kernels for sm_90a

// MANIFEST: "block": [
// MANIFEST-NEXT: 256,
// MANIFEST: "dynamic_shared_memory_bytes": 61440,
// MANIFEST: "grid": [
// MANIFEST-NEXT: 8,
// MANIFEST-NEXT: "rows/128",
// MANIFEST-NEXT: 1
// MANIFEST: "name": "proj_matmul_0",
// MANIFEST: "kind": "matrix",
// MANIFEST-NEXT: "name": "input1",
// MANIFEST-NEXT: "role": "input",
// MANIFEST-NEXT: "shape": [
// MANIFEST-NEXT: 1024,
// MANIFEST-NEXT: 4096
// MANIFEST: "template": "matmul",

// PTX: .entry proj_matmul_0(
// PTX: cp.async.cg.shared.global [{{.*}}], [{{.*}}], 16, %r{{[0-9]+}};
// PTX: cp.async.commit_group;
// PTX: cp.async.wait_group 1;
// PTX: bar.sync 0;
// PTX: ldmatrix.sync.aligned.m8n8.x4.shared.b16
// PTX: ldmatrix.sync.aligned.m8n8.x2.shared.b16
// PTX: mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32
// PTX: cp.async.wait_group 0;
// PTX: st.global.b32
// PTX: .entry half_matmul_0(
// PTX: mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32

// An RMSNorm prologue: each slice's x tile is rescaled in place (x * g),
// the rows' sums of squares gathered with shared-memory atomics, a barrier
// before ldmatrix; the epilogue scales rows by rstd.
// PTX: .entry normed_matmul_0(
// PTX: cp.async.wait_group 1;
// PTX: bar.sync 0;
// PTX: atom.shared.add.f32
// PTX: st.shared.v4.b32
// PTX: bar.sync 0;
// PTX: ldmatrix.sync.aligned.m8n8.x4.shared.b16
// PTX: rsqrt.approx

// A LoRA projection (r = 16): A's slice rides in each stage (one more
// ldmatrix.x2 and MMA per n8 tile of r), B's tile arrives once; after the
// loop t = round(x · Aᵀ) goes from the accumulators straight into the A
// fragments of MMAs against B's tile.
// PTX: .entry lora_matmul_0(
// PTX: ldmatrix.sync.aligned.m8n8.x4.shared.b16
// PTX: ldmatrix.sync.aligned.m8n8.x2.shared.b16
// PTX: mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32
// PTX: bar.sync 0;
// PTX: ldmatrix.sync.aligned.m8n8.x2.shared.b16
// PTX: cvt.rn.bf16x2.f32
// PTX: mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32
// PTX: st.global.b32

// PTXAS-NOT: {{[1-9][0-9]*}} bytes spill
// PTXAS: 0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads
// No kernel after the last one matched spills either.
// PTXAS-NOT: {{[1-9][0-9]*}} bytes spill

// OFF-NOT: gpu.func @proj_matmul_0
// OFF: liger.fusion matmul
// OFF-NOT: liger.kernel =

// GPU: liger.fusion matmul{{.*}}liger.kernel = @liger_kernels::@proj_matmul_0
// GPU: gpu.func @proj_matmul_0(%{{.+}}: memref<?x4096xbf16>, %{{.+}}: memref<1024x4096xbf16>, %{{.+}}: memref<?x1024xbf16>) kernel
// GPU-SAME: known_block_size = array<i32: 256, 1, 1>
// GPU-SAME: grid = [8, "rows/128", 1]
// GPU: scf.for {{.*}} iter_args({{.*}}) -> (f32,
// GPU: nvvm.cp.async.wait.group 1
// GPU: gpu.barrier
// GPU: nvgpu.device_async_copy {{.*}} {bypassL1} : memref<?x4096xbf16> to memref<3x128x40xbf16, #gpu.address_space<workgroup>>
// GPU: nvgpu.ldmatrix {{.*}} {numTiles = 4 : i32, transpose = false} : memref<3x128x40xbf16, #gpu.address_space<workgroup>> -> vector<4x2xbf16>
// GPU: nvvm.mma.sync A[{{.*}}] B[{{.*}}] C[{{.*}}] {layoutA = #nvvm.mma_layout<row>, layoutB = #nvvm.mma_layout<col>, multiplicandAPtxType = #nvvm.mma_type<bf16>, multiplicandBPtxType = #nvvm.mma_type<bf16>, shape = #nvvm.shape<m = 16, n = 8, k = 16>}
// GPU: vector.store {{.*}} {alignment = 4 : i64} : memref<?x1024xbf16>, vector<2xbf16>

// The residual's epilogue: the residual pair loaded (with the batch's
// other pairs, before their stores), then the projection rounded to bf16,
// added in f32, rounded, stored.
// GPU: gpu.func @down_residual_matmul_0(%{{.+}}: memref<?x512xbf16>, %{{.+}}: memref<256x512xbf16>, %[[RES:.+]]: memref<?x256xbf16>, %[[DST:.+]]: memref<?x256xbf16>) kernel
// GPU-SAME: ops = "liger.linear, liger.add, liger.silu"
// GPU: %[[R:.+]] = vector.load %[[RES]][%{{.+}}, %{{.+}}] {alignment = 4 : i64} : memref<?x256xbf16>, vector<2xbf16>
// GPU: scf.if
// GPU-NEXT: %[[PAIR:.+]] = vector.from_elements
// GPU-NEXT: %[[ACC:.+]] = arith.truncf %[[PAIR]] : vector<2xf32> to vector<2xbf16>
// GPU: arith.extf %[[ACC]]
// GPU: arith.extf %[[R]]
// GPU: arith.addf
// GPU: math.exp
// GPU: vector.store %{{.+}}, %[[DST]]

// A gate/up pair: both weights' slices ride the same cp.async groups, one
// accumulator set each from the same x fragments (2 K steps x 4 row tiles x
// 2 column tiles x 2 projections = 32 MMAs per slice), SwiGLU in the
// epilogue.
// GPU: gpu.func @gated_matmul_0(%{{.+}}: memref<?x512xbf16>, %{{.+}}: memref<1024x512xbf16>, %{{.+}}: memref<1024x512xbf16>, %{{.+}}: memref<?x1024xbf16>) kernel
// GPU-SAME: ops = "liger.linear, liger.linear, liger.swiglu"
// GPU-SAME: shared_memory_bytes = 61440
// GPU: memref.view {{.*}}[%c30720{{.*}}] : memref<?xi8, #gpu.address_space<workgroup>> to memref<3x64x40xbf16, #gpu.address_space<workgroup>>
// GPU: memref.view {{.*}}[%c46080{{.*}}] : memref<?xi8, #gpu.address_space<workgroup>> to memref<3x64x40xbf16, #gpu.address_space<workgroup>>
// GPU-COUNT-32: nvvm.mma.sync
// GPU: math.exp

func.func @proj(%x: tensor<?x4096xbf16>, %w: tensor<1024x4096xbf16>) -> tensor<?x1024xbf16> {
  %y = liger.fusion matmul(%x, %w) attributes {liger.kernel_config = #liger.kernel_config<kernel_template = matmul_mma_sync, tile_m = 128, tile_n = 128, tile_k = 32, stages = 3>} : (tensor<?x4096xbf16>, tensor<1024x4096xbf16>) -> tensor<?x1024xbf16> {
  ^bb0(%a: tensor<?x4096xbf16>, %b: tensor<1024x4096xbf16>):
    %l = liger.linear %a, %b : tensor<?x4096xbf16>, tensor<1024x4096xbf16>
    liger.yield %l : tensor<?x1024xbf16>
  }
  return %y : tensor<?x1024xbf16>
}

// f16 operands go to the MMA as f16 pairs; a 64-row tile runs 4 warps.
func.func @half(%x: tensor<?x256xf16>, %w: tensor<128x256xf16>) -> tensor<?x128xf16> {
  %y = liger.fusion matmul(%x, %w) attributes {liger.kernel_config = #liger.kernel_config<kernel_template = matmul_mma_sync, tile_m = 64, tile_n = 64, tile_k = 32, stages = 2>} : (tensor<?x256xf16>, tensor<128x256xf16>) -> tensor<?x128xf16> {
  ^bb0(%a: tensor<?x256xf16>, %b: tensor<128x256xf16>):
    %l = liger.linear %a, %b : tensor<?x256xf16>, tensor<128x256xf16>
    liger.yield %l : tensor<?x128xf16>
  }
  return %y : tensor<?x128xf16>
}

// A projection with a residual add and an activation after it.
func.func @down_residual(%x: tensor<?x512xbf16>, %w: tensor<256x512xbf16>, %r: tensor<?x256xbf16>) -> tensor<?x256xbf16> {
  %y = liger.fusion matmul(%x, %w, %r) attributes {liger.kernel_config = #liger.kernel_config<kernel_template = matmul_mma_sync, tile_m = 128, tile_n = 64, tile_k = 32, stages = 3>} : (tensor<?x512xbf16>, tensor<256x512xbf16>, tensor<?x256xbf16>) -> tensor<?x256xbf16> {
  ^bb0(%a: tensor<?x512xbf16>, %b: tensor<256x512xbf16>, %c: tensor<?x256xbf16>):
    %l = liger.linear %a, %b : tensor<?x512xbf16>, tensor<256x512xbf16>
    %s = liger.add %l, %c : tensor<?x256xbf16>
    %t = liger.silu %s : tensor<?x256xbf16>
    liger.yield %t : tensor<?x256xbf16>
  }
  return %y : tensor<?x256xbf16>
}

// Llama's gate/up projections with SwiGLU, as liger-fuse-gated-mlp groups them.
func.func @gated(%x: tensor<?x512xbf16>, %g: tensor<1024x512xbf16>, %u: tensor<1024x512xbf16>) -> tensor<?x1024xbf16> {
  %y = liger.fusion matmul(%x, %g, %u) attributes {liger.kernel_config = #liger.kernel_config<kernel_template = matmul_mma_sync, tile_m = 128, tile_n = 64, tile_k = 32, stages = 3>} : (tensor<?x512xbf16>, tensor<1024x512xbf16>, tensor<1024x512xbf16>) -> tensor<?x1024xbf16> {
  ^bb0(%a: tensor<?x512xbf16>, %b: tensor<1024x512xbf16>, %c: tensor<1024x512xbf16>):
    %lg = liger.linear %a, %b : tensor<?x512xbf16>, tensor<1024x512xbf16>
    %lu = liger.linear %a, %c : tensor<?x512xbf16>, tensor<1024x512xbf16>
    %s = liger.swiglu %lg, %lu : tensor<?x1024xbf16>
    liger.yield %s : tensor<?x1024xbf16>
  }
  return %y : tensor<?x1024xbf16>
}

// RMSNorm folded into the projection.
func.func @normed(%x: tensor<?x512xbf16>, %g: tensor<512xbf16>, %w: tensor<256x512xbf16>) -> tensor<?x256xbf16> {
  %y = liger.fusion matmul(%x, %g, %w) attributes {liger.kernel_config = #liger.kernel_config<kernel_template = matmul_mma_sync, tile_m = 128, tile_n = 64, tile_k = 32, stages = 3>} : (tensor<?x512xbf16>, tensor<512xbf16>, tensor<256x512xbf16>) -> tensor<?x256xbf16> {
  ^bb0(%a: tensor<?x512xbf16>, %b: tensor<512xbf16>, %c: tensor<256x512xbf16>):
    %n = liger.rms_norm %a, %b eps = 1.0e-5 : tensor<?x512xbf16>, tensor<512xbf16>
    %l = liger.linear %n, %c : tensor<?x512xbf16>, tensor<256x512xbf16>
    liger.yield %l : tensor<?x256xbf16>
  }
  return %y : tensor<?x256xbf16>
}

// A LoRA projection on mma.sync.
func.func @lora(%x: tensor<?x512xbf16>, %w: tensor<256x512xbf16>, %a: tensor<16x512xbf16>, %b: tensor<256x16xbf16>) -> tensor<?x256xbf16> {
  %y = liger.fusion matmul(%x, %w, %a, %b) attributes {liger.kernel_config = #liger.kernel_config<kernel_template = matmul_mma_sync, tile_m = 128, tile_n = 64, tile_k = 32, stages = 3>} : (tensor<?x512xbf16>, tensor<256x512xbf16>, tensor<16x512xbf16>, tensor<256x16xbf16>) -> tensor<?x256xbf16> {
  ^bb0(%i: tensor<?x512xbf16>, %j: tensor<256x512xbf16>, %k: tensor<16x512xbf16>, %l: tensor<256x16xbf16>):
    %p = liger.lora_linear %i, %j, %k, %l scale = 2.0 : tensor<?x512xbf16>, tensor<256x512xbf16>, tensor<16x512xbf16>, tensor<256x16xbf16>
    liger.yield %p : tensor<?x256xbf16>
  }
  return %y : tensor<?x256xbf16>
}
