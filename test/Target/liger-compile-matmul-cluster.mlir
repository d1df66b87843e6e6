// Clusters of two CTAs (a table entry's "cluster": 2): the kernel states
// its cluster's shape (.reqnctapercluster), the grid's x holds each
// cluster's two CTAs side by side (twice the column tiles) and its y the
// pairs of row tiles ("rows/256"; a dW's 3 row tiles of 128 in 2 pairs,
// the last pair's second CTA past the rows). Each CTA loads its own x
// tile and its part of the weight tiles (a 128-row box of a 256-wide
// K-major tile; 64-column boxes of an MN-major one, every other one) for
// both CTAs with a TMA multicast; a stage is released in both CTAs' rings
// (mapa + an arrive on each, its release at CTA scope: a cluster-scope
// release fences each arrival); the barriers' initialization
// and the kernel's end are cluster barriers. A cluster takes no RoPE or
// LoRA group: an entry that matches one is an error on the group.
// REQUIRES: ptxas
// RUN: rm -rf %t && split-file %s %t
// RUN: liger-compile %t/proj.mlir --matmul-config-table=%t/table.json -o %t/out.bundle 2>&1 | FileCheck %s --check-prefix=OUT
// RUN: FileCheck %s --check-prefix=MANIFEST < %t/out.bundle/manifest.json
// RUN: FileCheck %s --check-prefix=PTX < %t/out.bundle/liger_kernels.sm_90a.ptx
// RUN: ptxas -arch=sm_90a -v %t/out.bundle/liger_kernels.sm_90a.ptx -o %t/out.cubin 2>&1 | FileCheck %s --check-prefix=PTXAS
// Without a table the same groups take no cluster.
// RUN: liger-compile %t/proj.mlir -o %t/plain.bundle
// RUN: FileCheck %s --check-prefix=PLAIN --implicit-check-not=.reqnctapercluster --implicit-check-not=barrier.cluster --implicit-check-not=multicast::cluster --implicit-check-not=mapa --implicit-check-not=%cluster_ctaid < %t/plain.bundle/liger_kernels.sm_90a.ptx
// RUN: not liger-compile %t/lora.mlir --matmul-config-table=%t/table.json -o %t/lora.bundle 2>&1 | FileCheck %s --check-prefix=LORA
// RUN: not liger-compile %t/rope.mlir --matmul-config-table=%t/table.json -o %t/rope.bundle 2>&1 | FileCheck %s --check-prefix=ROPE
// RUN: not ls %t/lora.bundle %t/rope.bundle

// OUT-NOT: warning
// OUT: liger-compile: 4 kernels for sm_90a

// MANIFEST: "function": "o",
// MANIFEST-NEXT: "grid": [
// MANIFEST-NEXT: 32,
// MANIFEST-NEXT: "rows/256",
// The weight's box: half the 256-row tile.
// MANIFEST: "tensor_maps": [
// MANIFEST: "param": "input0",
// MANIFEST: "box": [
// MANIFEST-NEXT: 128,
// MANIFEST-NEXT: 64
// MANIFEST: "param": "input1",
// MANIFEST: "function": "gate_up",
// MANIFEST-NEXT: "grid": [
// MANIFEST-NEXT: 224,
// MANIFEST-NEXT: "rows/256",
// MANIFEST: "function": "dx",
// MANIFEST-NEXT: "grid": [
// MANIFEST-NEXT: 112,
// MANIFEST-NEXT: "rows/256",
// MANIFEST: "function": "dw_acc",
// MANIFEST-NEXT: "grid": [
// MANIFEST-NEXT: 8,
// MANIFEST-NEXT: 2,

// PTX-LABEL: .entry o_matmul_0(
//       PTX: .reqnctapercluster 2, 1, 1
// The CTA's rank in its cluster is the hardware's, not the block index's.
//       PTX: mov.u32 {{%r[0-9]+}}, %cluster_ctaid.x;
// A stage's empty barrier counts both CTAs' two consumer warpgroups.
//       PTX: mov.b32 [[FOUR:%r[0-9]+]], 4;
//  PTX-NEXT: mbarrier.init.shared.b64 [liger_matmul_smem+32], [[FOUR]];
//       PTX: fence.mbarrier_init.release.cluster;
//   PTX-NOT: bar.sync 0;
//       PTX: barrier.cluster.arrive;
//  PTX-NEXT: barrier.cluster.wait;
// Each CTA's full barrier expects the whole stage (x 16 KiB, the weight's
// 32 KiB: half its own copy's, half the other CTA's); the x tile for this
// CTA alone, the weight's part for both (mask 0b11).
//       PTX: mov.b32 [[STAGE:%r[0-9]+]], 49152;
//  PTX-NEXT: mbarrier.arrive.expect_tx.shared.b64 {{.*}}, [[STAGE]];
//       PTX: cp.async.bulk.tensor.2d.shared::cta.global.tile.mbarrier::complete_tx::bytes [
//       PTX: mov.b16 [[MASK:%rs[0-9]+]], 3;
//  PTX-NEXT: cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes.multicast::cluster {{.*}}, [[MASK]];
//   PTX-NOT: mbarrier.arrive.release.cluster
//       PTX: mapa.shared::cluster.u64 [[B0:%rd[0-9]+]], [[BAR:%rd[0-9]+]], 0;
//       PTX: mbarrier.arrive.shared::cluster.b64 _, [[[B0]]]
//       PTX: mapa.shared::cluster.u64 [[B1:%rd[0-9]+]], [[BAR]], 1;
//       PTX: mbarrier.arrive.shared::cluster.b64 _, [[[B1]]]
//       PTX: barrier.cluster.arrive;
//  PTX-NEXT: barrier.cluster.wait;
//  PTX-NEXT: ret;
// The gated pair: each CTA's part of both weights.
// PTX-LABEL: .entry gate_up_matmul_0(
//       PTX: .reqnctapercluster 2, 1, 1
//       PTX: shared::cta.global.tile.mbarrier::complete_tx::bytes [
//       PTX: multicast::cluster
//       PTX: multicast::cluster
// dx reads W N-major, in 64-column boxes: two of the tile's four a CTA.
// PTX-LABEL: .entry dx_matmul_0(
//       PTX: .reqnctapercluster 2, 1, 1
//       PTX: shared::cta.global.tile.mbarrier::complete_tx::bytes [
//       PTX: multicast::cluster
//       PTX: multicast::cluster
// PTX-LABEL: .entry dw_acc_matmul_0(
//       PTX: .reqnctapercluster 2, 1, 1
//       PTX: multicast::cluster

// PTXAS-NOT: serialized
// PTXAS: 0 bytes spill stores, 0 bytes spill loads
// PTXAS-NOT: serialized
// PTXAS: 0 bytes spill stores, 0 bytes spill loads
// PTXAS-NOT: serialized
// PTXAS: 0 bytes spill stores, 0 bytes spill loads
// PTXAS-NOT: serialized
// PTXAS: 0 bytes spill stores, 0 bytes spill loads
// PTXAS-NOT: serialized

// PLAIN-LABEL: .entry o_matmul_0(
// PLAIN: fence.mbarrier_init.release.cluster;
// PLAIN: bar.sync 0;
// PLAIN-LABEL: .entry gate_up_matmul_0(
// PLAIN-LABEL: .entry dx_matmul_0(
// PLAIN-LABEL: .entry dw_acc_matmul_0(

// LORA: error: 'liger.fusion' op matches entry 0 of the matmul configuration table {{.*}}table.json, whose configuration does not fit it: a cluster does not take a LoRA group

// ROPE: error: 'liger.fusion' op matches entry 0 of the matmul configuration table {{.*}}table.json, whose configuration does not fit it: a cluster does not take a RoPE group (a column tile reads q's or k's weight)

//--- table.json
{"version": 1,
 "entries": [{"match": {"chip": "sm_90a"}, "config": {"cluster": 2}}]}
//--- proj.mlir
func.func @o(%x: tensor<?x4096xbf16>, %w: tensor<4096x4096xbf16>) -> tensor<?x4096xbf16> {
  %y = liger.linear %x, %w : tensor<?x4096xbf16>, tensor<4096x4096xbf16>
  return %y : tensor<?x4096xbf16>
}
func.func @gate_up(%x: tensor<?x4096xbf16>, %wg: tensor<14336x4096xbf16>, %wu: tensor<14336x4096xbf16>) -> tensor<?x14336xbf16> {
  %g = liger.linear %x, %wg : tensor<?x4096xbf16>, tensor<14336x4096xbf16>
  %u = liger.linear %x, %wu : tensor<?x4096xbf16>, tensor<14336x4096xbf16>
  %h = liger.swiglu %g, %u : tensor<?x14336xbf16>
  return %h : tensor<?x14336xbf16>
}
func.func @dx(%dy: tensor<?x4096xbf16>, %w: tensor<4096x14336xbf16>) -> tensor<?x14336xbf16> {
  %dx = liger.linear_grad_input %dy, %w : tensor<?x4096xbf16>, tensor<4096x14336xbf16>
  return %dx : tensor<?x14336xbf16>
}
func.func @dw_acc(%dy: tensor<?x384xbf16>, %x: tensor<?x1024xbf16>, %acc: tensor<384x1024xf32>) -> tensor<384x1024xf32> {
  %dw = liger.linear_grad_weight %dy, %x accumulate %acc : tensor<?x384xbf16>, tensor<?x1024xbf16>, tensor<384x1024xf32>
  return %dw : tensor<384x1024xf32>
}
//--- lora.mlir
func.func @lora(%x: tensor<?x4096xbf16>, %w: tensor<4096x4096xbf16>, %la: tensor<16x4096xbf16>, %lb: tensor<4096x16xbf16>) -> tensor<?x4096xbf16> {
  %y = liger.lora_linear %x, %w, %la, %lb scale = 2.0 : tensor<?x4096xbf16>, tensor<4096x4096xbf16>, tensor<16x4096xbf16>, tensor<4096x16xbf16>
  return %y : tensor<?x4096xbf16>
}
//--- rope.mlir
func.func @qk(%x: tensor<?x?x4096xbf16>, %wq: tensor<4096x4096xbf16>, %wk: tensor<1024x4096xbf16>,
              %cos: tensor<1x?x128xbf16>, %sin: tensor<1x?x128xbf16>)
    -> (tensor<?x32x?x128xbf16>, tensor<?x8x?x128xbf16>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %b = tensor.dim %x, %c0 : tensor<?x?x4096xbf16>
  %t = tensor.dim %x, %c1 : tensor<?x?x4096xbf16>
  %q = liger.linear %x, %wq : tensor<?x?x4096xbf16>, tensor<4096x4096xbf16>
  %k = liger.linear %x, %wk : tensor<?x?x4096xbf16>, tensor<1024x4096xbf16>
  %q4 = tensor.expand_shape %q [[0], [1], [2, 3]] output_shape [%b, %t, 32, 128] : tensor<?x?x4096xbf16> into tensor<?x?x32x128xbf16>
  %k4 = tensor.expand_shape %k [[0], [1], [2, 3]] output_shape [%b, %t, 8, 128] : tensor<?x?x1024xbf16> into tensor<?x?x8x128xbf16>
  %qi = tensor.empty(%b, %t) : tensor<?x32x?x128xbf16>
  %ki = tensor.empty(%b, %t) : tensor<?x8x?x128xbf16>
  %qh = linalg.transpose ins(%q4 : tensor<?x?x32x128xbf16>) outs(%qi : tensor<?x32x?x128xbf16>) permutation = [0, 2, 1, 3]
  %kh = linalg.transpose ins(%k4 : tensor<?x?x8x128xbf16>) outs(%ki : tensor<?x8x?x128xbf16>) permutation = [0, 2, 1, 3]
  %qr, %kr = liger.rope %qh, %kh, %cos, %sin : tensor<?x32x?x128xbf16>, tensor<?x8x?x128xbf16>, tensor<1x?x128xbf16>
  return %qr, %kr : tensor<?x32x?x128xbf16>, tensor<?x8x?x128xbf16>
}
