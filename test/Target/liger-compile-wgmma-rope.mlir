// The q/k projections with RoPE in the epilogue (wgmma + TMA, sm_90a;
// liger-compile fuses the chain with liger-fuse-qkv-rope): one kernel over
// the concatenation [Wq; Wk], each column tile inside one of them (its TMA
// copies read Wq or Wk), the rotation done in registers (a thread holds
// both halves of its heads' rotations) and q, k stored head-major
// [B, H, T, D]. Tensor inputs only (x, the norm weight, Wq, Wk, cos, sin):
// the head split's sizes are read inside the group. ptxas accepts it
// without spills. On sm_80 the mma.sync template computes the same group,
// exchanging each rotation's partner column through shared memory. The
// input norm is the group's prologue with --norm-prologue; without it, a
// rowwise kernel before the projections (DEFAULT).
// REQUIRES: ptxas
// RUN: rm -rf %t.bundle
// RUN: liger-compile %s --norm-prologue -o %t.bundle | FileCheck %s --check-prefix=OUT
// RUN: FileCheck %s --check-prefix=MANIFEST < %t.bundle/manifest.json
// RUN: FileCheck %s --check-prefix=PTX < %t.bundle/liger_kernels.sm_90a.ptx
// RUN: FileCheck %s --check-prefix=REDUCE < %t.bundle/liger_kernels.sm_90a.ptx
// RUN: ptxas -arch=sm_90a -v %t.bundle/liger_kernels.sm_90a.ptx -o %t.cubin 2>&1 | FileCheck %s --check-prefix=PTXAS
// RUN: rm -rf %t.sm80 && liger-compile %s --norm-prologue --target=sm_80 -o %t.sm80 2>&1 | FileCheck %s --check-prefix=SM80
// RUN: rm -rf %t.default && liger-compile %s -o %t.default | FileCheck %s --check-prefix=DEFAULT
// RUN: FileCheck %s --check-prefix=DEFAULT-MANIFEST < %t.default/manifest.json
// RUN: FileCheck %s --check-prefix=PTX80 < %t.sm80/liger_kernels.sm_80.ptx
// RUN: ptxas -arch=sm_80 -v %t.sm80/liger_kernels.sm_80.ptx -o %t.sm80.cubin 2>&1 | FileCheck %s --check-prefix=PTXAS

// OUT: liger-compile: 2 kernels for sm_90a
// DEFAULT: liger-compile: 3 kernels for sm_90a
// DEFAULT-MANIFEST: "name": "qkv_rowwise_0",
// DEFAULT-MANIFEST: "ops": "liger.rms_norm",
// DEFAULT-MANIFEST: "name": "qkv_matmul_1",
// DEFAULT-MANIFEST: "ops": "liger.linear",
// DEFAULT-MANIFEST: "name": "qkv_matmul_2",
// DEFAULT-MANIFEST: "ops": "liger.linear, liger.linear, tensor.expand_shape, tensor.expand_shape, tensor.empty, linalg.transpose, tensor.empty, linalg.transpose, liger.rope",

// The q/k group (after the v projection's kernel): 4096 + 1024 columns in
// 256-wide tiles (two heads of 128).
// MANIFEST: "name": "qkv_matmul_0",
// MANIFEST: "dynamic_shared_memory_bytes": 197632,
// MANIFEST: "grid": [
// MANIFEST-NEXT: 20,
// MANIFEST-NEXT: "rows/128",
// MANIFEST: "name": "qkv_matmul_1",
// MANIFEST: "ops": "liger.rms_norm, liger.linear, liger.linear, tensor.expand_shape, tensor.expand_shape, tensor.empty, linalg.transpose, tensor.empty, linalg.transpose, liger.rope",
// MANIFEST: "kind": "rows",
// MANIFEST-NEXT: "name": "input0",
// MANIFEST: "kind": "feature",
// MANIFEST-NEXT: "name": "input1",
// MANIFEST: "kind": "matrix",
// MANIFEST-NEXT: "name": "input2",
// MANIFEST: "kind": "matrix",
// MANIFEST-NEXT: "name": "input3",
// MANIFEST: "kind": "tables",
// MANIFEST-NEXT: "name": "input4",
// MANIFEST: "kind": "tables",
// MANIFEST-NEXT: "name": "input5",
// MANIFEST: "kind": "heads",
// MANIFEST-NEXT: "name": "output0",
// MANIFEST-NEXT: "role": "output",
// MANIFEST-NEXT: "shape": [
// MANIFEST-NEXT: "batch",
// MANIFEST-NEXT: 32,
// MANIFEST: "kind": "heads",
// MANIFEST-NEXT: "name": "output1",
// MANIFEST-NEXT: "role": "output",
// MANIFEST-NEXT: "shape": [
// MANIFEST-NEXT: "batch",
// MANIFEST-NEXT: 8,
// x's map, then one per weight.
// MANIFEST: "tensor_maps": [
// MANIFEST: "param": "input0",
// MANIFEST: "box": [
// MANIFEST-NEXT: 256,
// MANIFEST-NEXT: 64
// MANIFEST: "param": "input2",
// MANIFEST: "box": [
// MANIFEST-NEXT: 256,
// MANIFEST-NEXT: 64
// MANIFEST: "param": "input3",

// The producer picks Wq's or Wk's map by the tile's columns; one wgmma per
// 16-wide K slice; the epilogue loads a row's table pairs, cos and sin at
// each of the head's 16 offsets of a thread (32 loads, shared by the
// tile's two heads), before it writes the row's 32 bf16 pairs.
// The norm prologue sums a row's squares over the four lanes of a quad
// with the one warp reduction of every template: XOR butterfly, widest
// offset first (2, then 1).
// REDUCE-LABEL: .entry qkv_matmul_1(
// REDUCE: shfl.sync.bfly.b32 [[A:%r[0-9]+]], [[X:%r[0-9]+]], 2, 31, -1;
// REDUCE-NEXT: add.rn.f32 [[S:%r[0-9]+]], [[X]], [[A]];
// REDUCE-NEXT: shfl.sync.bfly.b32 {{%r[0-9]+}}, [[S]], 1, 31, -1;
// PTX-LABEL: .entry qkv_matmul_1(
// PTX-COUNT-2: cp.async.bulk.tensor.2d.shared::cta.global.tile.mbarrier::complete_tx::bytes
// PTX: wgmma.mma_async.sync.aligned.m64n256k16.f32.bf16.bf16
// PTX-COUNT-32: ld.global.v2.b16
// PTX-NOT: ld.global
// PTX-COUNT-32: st.global.b32

// PTXAS: Compiling entry function 'qkv_matmul_1'
// PTXAS-NOT: {{[1-9][0-9]*}} bytes spill
// PTXAS: Used

// SM80-NOT: warning
// SM80: liger-compile: 2 kernels for sm_80
// PTX80-LABEL: .entry qkv_matmul_1(
// PTX80: mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32
// PTX80: st.shared.b32
// PTX80: bar.sync 0;
// PTX80: ld.shared.v2.b16
// PTX80: st.global.b32

func.func @qkv(%x: tensor<?x?x4096xbf16>, %g: tensor<4096xbf16>, %wq: tensor<4096x4096xbf16>,
               %wk: tensor<1024x4096xbf16>, %wv: tensor<1024x4096xbf16>,
               %cos: tensor<1x?x128xbf16>, %sin: tensor<1x?x128xbf16>)
    -> (tensor<?x32x?x128xbf16>, tensor<?x8x?x128xbf16>, tensor<?x?x1024xbf16>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %b = tensor.dim %x, %c0 : tensor<?x?x4096xbf16>
  %t = tensor.dim %x, %c1 : tensor<?x?x4096xbf16>
  %n = liger.rms_norm %x, %g eps = 1.0e-5 : tensor<?x?x4096xbf16>, tensor<4096xbf16>
  %q = liger.linear %n, %wq : tensor<?x?x4096xbf16>, tensor<4096x4096xbf16>
  %k = liger.linear %n, %wk : tensor<?x?x4096xbf16>, tensor<1024x4096xbf16>
  %v = liger.linear %n, %wv : tensor<?x?x4096xbf16>, tensor<1024x4096xbf16>
  %q4 = tensor.expand_shape %q [[0], [1], [2, 3]] output_shape [%b, %t, 32, 128] : tensor<?x?x4096xbf16> into tensor<?x?x32x128xbf16>
  %k4 = tensor.expand_shape %k [[0], [1], [2, 3]] output_shape [%b, %t, 8, 128] : tensor<?x?x1024xbf16> into tensor<?x?x8x128xbf16>
  %qi = tensor.empty(%b, %t) : tensor<?x32x?x128xbf16>
  %ki = tensor.empty(%b, %t) : tensor<?x8x?x128xbf16>
  %qh = linalg.transpose ins(%q4 : tensor<?x?x32x128xbf16>) outs(%qi : tensor<?x32x?x128xbf16>) permutation = [0, 2, 1, 3]
  %kh = linalg.transpose ins(%k4 : tensor<?x?x8x128xbf16>) outs(%ki : tensor<?x8x?x128xbf16>) permutation = [0, 2, 1, 3]
  %qr, %kr = liger.rope %qh, %kh, %cos, %sin : tensor<?x32x?x128xbf16>, tensor<?x8x?x128xbf16>, tensor<1x?x128xbf16>
  return %qr, %kr, %v : tensor<?x32x?x128xbf16>, tensor<?x8x?x128xbf16>, tensor<?x?x1024xbf16>
}
