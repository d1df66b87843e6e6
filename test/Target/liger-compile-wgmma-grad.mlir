// The gradient products through the wgmma + TMA template (sm_90a,
// liger-compile): dx = dy · W reads W [N, K] N-major
// (64-column TMA boxes, wgmma's transposed B), dW = dyᵀ · x reads both
// operands MN-major with K = the tokens (a dynamic trip count) and a
// constant grid over dW's tiles; with an f32 buffer the epilogue adds into
// it, with a 16-bit buffer it adds in shared memory (the old tile
// TMA-loaded while the product runs) and stores with TMA. ptxas accepts every kernel without spills. On sm_80 the mma.sync
// template computes them with cp.async into [tile_k, columns] tiles and
// transposing ldmatrix.
// REQUIRES: ptxas
// RUN: rm -rf %t.bundle
// RUN: liger-compile %s -o %t.bundle | FileCheck %s --check-prefix=OUT
// RUN: FileCheck %s --check-prefix=MANIFEST < %t.bundle/manifest.json
// RUN: FileCheck %s --check-prefix=PTX < %t.bundle/liger_kernels.sm_90a.ptx
// RUN: ptxas -arch=sm_90a -v %t.bundle/liger_kernels.sm_90a.ptx -o %t.cubin 2>&1 | FileCheck %s --check-prefix=PTXAS
// RUN: rm -rf %t.sm80 && liger-compile %s --target=sm_80 -o %t.sm80 2>&1 | FileCheck %s --check-prefix=SM80
// RUN: FileCheck %s --check-prefix=PTX80 < %t.sm80/liger_kernels.sm_80.ptx
// RUN: FileCheck %s --check-prefix=MANIFEST80 < %t.sm80/manifest.json
// RUN: ptxas -arch=sm_80 -v %t.sm80/liger_kernels.sm_80.ptx -o %t.sm80.cubin 2>&1 | FileCheck %s --check-prefix=PTXAS

// OUT: liger-compile: 4 kernels for sm_90a

// dx [T, 14336] of Llama's down projection: 128 x 256 tiles, 4 stages.
// MANIFEST: "dynamic_shared_memory_bytes": 197632,
// MANIFEST: "grid": [
// MANIFEST-NEXT: 56,
// MANIFEST-NEXT: "rows/128",
// MANIFEST: "name": "dx_matmul_0",
// MANIFEST: "kind": "matrix",
// MANIFEST-NEXT: "name": "input1",
// MANIFEST: "shape": [
// MANIFEST-NEXT: 4096,
// MANIFEST-NEXT: 14336
// dy's [128, 64] K-major box, then W's [64, 64] N-major boxes.
// MANIFEST: "tensor_maps": [
// MANIFEST: "box": [
// MANIFEST-NEXT: 128,
// MANIFEST-NEXT: 64
// MANIFEST: "param": "input0",
// MANIFEST: "box": [
// MANIFEST-NEXT: 64,
// MANIFEST-NEXT: 64
// MANIFEST: "param": "input1",
// dW [4096, 1024]: a constant grid of 4 x 32 tiles, the output a matrix.
// MANIFEST: "grid": [
// MANIFEST-NEXT: 4,
// MANIFEST-NEXT: 32,
// MANIFEST: "name": "dw_matmul_0",
// MANIFEST: "kind": "matrix",
// MANIFEST-NEXT: "name": "output0",
// MANIFEST: "box": [
// MANIFEST-NEXT: 64,
// MANIFEST-NEXT: 64
// MANIFEST: "param": "input0",
// MANIFEST: "box": [
// MANIFEST-NEXT: 64,
// MANIFEST-NEXT: 64
// MANIFEST: "param": "input1",
// The accumulating form reads and writes f32 matrices.
// MANIFEST: "name": "dw_acc_matmul_0",
// MANIFEST: "dtype": "f32",
// MANIFEST-NEXT: "kind": "matrix",
// MANIFEST-NEXT: "name": "input2",
// MANIFEST: "dtype": "f32",
// MANIFEST-NEXT: "kind": "matrix",
// MANIFEST-NEXT: "name": "output0",
// Into a buffer of the input's dtype: bf16 matrices, 3 stages and the old
// tile's 64 KiB region (1024 + 3 x 48 KiB + 64 KiB), the buffer read
// through a tensor map of its own.
// MANIFEST: "dynamic_shared_memory_bytes": 214016,
// MANIFEST: "name": "dw_acc_bf16_matmul_0",
// MANIFEST: "name": "input1",
// MANIFEST: {
// MANIFEST-NEXT: "dtype": "bf16",
// MANIFEST-NEXT: "kind": "matrix",
// MANIFEST-NEXT: "name": "input2",
// MANIFEST: {
// MANIFEST-NEXT: "dtype": "bf16",
// MANIFEST-NEXT: "kind": "matrix",
// MANIFEST-NEXT: "name": "output0",
// MANIFEST: "tensor_maps": [
// MANIFEST: "param": "input0",
// MANIFEST: "param": "input1",
// MANIFEST: "param": "input2",
// MANIFEST: "param": "output0",

// The trailing immediates are scale-a, scale-b, trans-a, trans-b: dx
// transposes B only, dW both.
// PTX-LABEL: .entry dx_matmul_0(
// PTX: cp.async.bulk.tensor.2d.shared::cta.global.tile.mbarrier::complete_tx::bytes
// PTX: wgmma.mma_async.sync.aligned.m64n256k16.f32.bf16.bf16 {{.*}}, p, 1, 1, 0, 1;
// PTX-NOT: wgmma.mma_async{{.*}}, p, 1, 1, 1, {{[01]}};
// PTX-LABEL: .entry dw_matmul_0(
// PTX: wgmma.mma_async.sync.aligned.m64n256k16.f32.bf16.bf16 {{.*}}, p, 1, 1, 1, 1;
// PTX-LABEL: .entry dw_acc_matmul_0(
// PTX: wgmma.mma_async.sync.aligned.m64n256k16.f32.bf16.bf16 {{.*}}, p, 1, 1, 1, 1;
// PTX: ld.global.v2.b32
// PTX: add.rn.f32
// PTX: st.global.v2.b32
// The bf16 buffer: the producer's first copies are the old tile's eight
// 64 x 64 boxes (two warpgroups x four column boxes) into the region after
// the three stages, on the mbarrier at byte 768, before the K loop's; each
// consumer waits for them after its last wgmma, reads a pair, widens, adds,
// rounds once and writes it back in place, then the boxes go out with TMA
// stores from the same region; no global loads or stores of dW.
// PTX-LABEL: .entry dw_acc_bf16_matmul_0(
// PTX: cp.async.bulk.tensor.2d.shared::cta.global.tile.mbarrier::complete_tx::bytes [liger_matmul_smem+148480], {{.*}}[liger_matmul_smem+768];
// PTX-COUNT-7: cp.async.bulk.tensor.2d.shared::cta.global.tile.mbarrier::complete_tx::bytes [liger_matmul_smem+{{[0-9]+}}], {{.*}}[liger_matmul_smem+768];
// PTX: wgmma.mma_async.sync.aligned.m64n256k16.f32.bf16.bf16 {{.*}}, p, 1, 1, 1, 1;
// PTX: mbarrier.try_wait.parity.shared.b64 {{.*}}, 0,
// PTX-NOT: ld.global
// PTX: ld.shared.{{(v2.b16|b32)}}
// PTX: cvt.f32.bf16
// PTX: add.rn.f32
// PTX: cvt.rn.bf16x2.f32
// PTX: st.shared.b32
// PTX-NOT: st.global
// PTX: fence.proxy.async.shared::cta;
// PTX: cp.async.bulk.tensor.2d.global.shared::cta.tile.bulk_group [{{.*}}], [{{.*}}+148480];
// PTX-NOT: st.global
// PTX: ret;

// No kernel's wgmmas are serialized: the dW loops' trip count (the tokens,
// dynamic) is at least one, so no zero-trip path copies the zero
// accumulators into the registers of running wgmmas (ptxas's C7515).
// PTXAS-NOT: serialized
// PTXAS-NOT: {{[1-9][0-9]*}} bytes spill
// PTXAS: Compiling entry function 'dw_acc_{{(bf16_)?}}matmul_0'
// PTXAS-NOT: {{[1-9][0-9]*}} bytes spill
// PTXAS: Compiling entry function 'dw_matmul_0'
// PTXAS-NOT: {{[1-9][0-9]*}} bytes spill
// PTXAS: Compiling entry function 'dx_matmul_0'
// PTXAS-NOT: {{[1-9][0-9]*}} bytes spill

// SM80-NOT: warning
// SM80: liger-compile: 4 kernels for sm_80

// The mma.sync kernels copy their operands with cp.async: no tensor maps
// for the launcher to encode.
// MANIFEST80: "name": "dx_matmul_0"
// MANIFEST80-NOT: "tensor_maps"
// MANIFEST80: "name": "dw_acc_bf16_matmul_0"
// MANIFEST80-NOT: "tensor_maps"

// dx transposes W's fragments on load (B), dW both operands'.
// PTX80-LABEL: .entry dx_matmul_0(
// PTX80: cp.async.cg.shared.global
// PTX80-NOT: ldmatrix.sync.aligned.m8n8.x4.trans
// PTX80: ldmatrix.sync.aligned.m8n8.x2.trans.shared.b16
// PTX80: mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32
// PTX80-LABEL: .entry dw_matmul_0(
// PTX80: ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16
// PTX80: ldmatrix.sync.aligned.m8n8.x2.trans.shared.b16
// PTX80: mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32

func.func @dx(%dy: tensor<?x4096xbf16>, %w: tensor<4096x14336xbf16>) -> tensor<?x14336xbf16> {
  %dx = liger.linear_grad_input %dy, %w : tensor<?x4096xbf16>, tensor<4096x14336xbf16>
  return %dx : tensor<?x14336xbf16>
}

func.func @dw(%dy: tensor<?x4096xbf16>, %x: tensor<?x1024xbf16>) -> tensor<4096x1024xbf16> {
  %dw = liger.linear_grad_weight %dy, %x : tensor<?x4096xbf16>, tensor<?x1024xbf16>
  return %dw : tensor<4096x1024xbf16>
}

func.func @dw_acc(%dy: tensor<?x512xbf16>, %x: tensor<?x1024xbf16>, %acc: tensor<512x1024xf32>) -> tensor<512x1024xf32> {
  %dw = liger.linear_grad_weight %dy, %x accumulate %acc : tensor<?x512xbf16>, tensor<?x1024xbf16>, tensor<512x1024xf32>
  return %dw : tensor<512x1024xf32>
}

func.func @dw_acc_bf16(%dy: tensor<?x512xbf16>, %x: tensor<?x1024xbf16>, %acc: tensor<512x1024xbf16>) -> tensor<512x1024xbf16> {
  %dw = liger.linear_grad_weight %dy, %x accumulate %acc : tensor<?x512xbf16>, tensor<?x1024xbf16>, tensor<512x1024xbf16>
  return %dw : tensor<512x1024xbf16>
}
