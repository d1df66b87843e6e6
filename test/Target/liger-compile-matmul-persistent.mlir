// The persistent schedule (liger-compile --matmul-schedule=persistent): one
// CTA per SM ("sms" in the manifest's grid), looping over the tiles
// blockIdx.x + i · gridDim.x with the data-parallel tile (two consumer
// warpgroups of 64 rows, 128 x 256) and one set of them; the producer
// counts the stage ring's fills across the tiles, so it fills the next
// tile's stages while the consumers run the epilogue. Every consumer
// thread releases a stage (a branch around one thread's arrive in a tile
// loop makes ptxas serialize the wgmmas), the last stage of each tile
// too. A one-result projection stores its tiles with TMA, box by box,
// from two 64 x 64 boxes per consumer warpgroup beside the ring (4 stages
// of 128 x 256 fit beside them); the gated backward (two results) stores
// from registers. LoRA keeps the data-parallel schedule.
// REQUIRES: ptxas
// RUN: rm -rf %t.bundle
// RUN: liger-compile %s --matmul-schedule=persistent -o %t.bundle 2>&1 | FileCheck %s --check-prefix=OUT
// RUN: FileCheck %s --check-prefix=MANIFEST < %t.bundle/manifest.json
// RUN: FileCheck %s --check-prefix=PTX < %t.bundle/liger_kernels.sm_90a.ptx
// RUN: ptxas -arch=sm_90a -v %t.bundle/liger_kernels.sm_90a.ptx -o %t.cubin 2>&1 | FileCheck %s --check-prefix=PTXAS

// OUT-NOT: warning
// OUT: liger-compile: 3 kernels for sm_90a

// 4 stages of 48 KiB, two warpgroups' two 8 KiB boxes, the barriers' 1 KiB.
// MANIFEST: "dynamic_shared_memory_bytes": 230400,
// MANIFEST-NEXT: "function": "proj",
// MANIFEST-NEXT: "grid": [
// MANIFEST-NEXT: "sms",
// MANIFEST-NEXT: 1,
// MANIFEST-NEXT: 1
// MANIFEST: "name": "proj_matmul_0",
// MANIFEST: "function": "lora",
// MANIFEST-NEXT: "grid": [
// MANIFEST-NEXT: 16,
// MANIFEST-NEXT: "rows/128",
// MANIFEST: "function": "mlp_backward",
// MANIFEST-NEXT: "grid": [
// MANIFEST-NEXT: "sms",

// PTX-LABEL: .entry proj_matmul_0(
// The CTA's tiles (gridDim.x); the producer's and the consumers' register
// shares; the 128 x 256 tile's wgmmas; no set from lane 0 and no turns
// (one set).
//   PTX-DAG: mov.u32 %r{{[0-9]+}}, %nctaid.x;
//   PTX-DAG: setmaxnreg.dec.sync.aligned.u32 40;
//   PTX-DAG: setmaxnreg.inc.sync.aligned.u32 232;
//   PTX-DAG: wgmma.mma_async.sync.aligned.m64n256k16.f32.bf16.bf16
//   PTX-NOT: shfl.sync.idx.b32
//   PTX-NOT: bar.arrive
// After the last wgmma, the last stage is released by every thread (no
// branch around it); then each warpgroup's first thread waits until the
// previous tile's stores have read its boxes, and the warpgroup meets
// (128 threads) before it writes them again. Each of its four 64-column
// boxes is written, fenced and stored (committed without a wait); before
// the third and fourth are written over the first two boxes, the first
// thread waits until all but the last store have been read, and the
// warpgroup meets. After the loop, the first thread waits for the last
// tile's stores.
//       PTX: wgmma.wait_group.sync.aligned 0;
//   PTX-NOT: bra
//       PTX: mbarrier.arrive.shared.b64
//  PTX-NEXT: @%p{{[0-9]+}} bra
//  PTX-NEXT: cp.async.bulk.wait_group.read 0;
//  PTX-NEXT: $L__BB
//  PTX-NEXT: bar.sync [[WG:%r[0-9]+]], 128;
//   PTX-NOT: cp.async.bulk.wait_group
//       PTX: fence.proxy.async.shared::cta;
//  PTX-NEXT: bar.sync [[WG]], 128;
//       PTX: cp.async.bulk.tensor.2d.global.shared::cta.tile.bulk_group [%rd{{[0-9]+}}, {{.*}}], [[[BOX0:%rd[0-9]+]]];
//  PTX-NEXT: cp.async.bulk.commit_group;
//   PTX-NOT: cp.async.bulk.wait_group
//       PTX: fence.proxy.async.shared::cta;
//  PTX-NEXT: bar.sync [[WG]], 128;
//       PTX: cp.async.bulk.tensor.2d.global.shared::cta.tile.bulk_group [%rd{{[0-9]+}}, {{.*}}], [[[BOX1:%rd[0-9]+]]];
//  PTX-NEXT: cp.async.bulk.commit_group;
//  PTX-NEXT: cp.async.bulk.wait_group.read 1;
//       PTX: bar.sync [[WG]], 128;
//       PTX: fence.proxy.async.shared::cta;
//  PTX-NEXT: bar.sync [[WG]], 128;
//       PTX: cp.async.bulk.tensor.2d.global.shared::cta.tile.bulk_group [%rd{{[0-9]+}}, {{.*}}], [[[BOX0]]];
//  PTX-NEXT: cp.async.bulk.commit_group;
//  PTX-NEXT: cp.async.bulk.wait_group.read 1;
//       PTX: bar.sync [[WG]], 128;
//       PTX: fence.proxy.async.shared::cta;
//  PTX-NEXT: bar.sync [[WG]], 128;
//       PTX: cp.async.bulk.tensor.2d.global.shared::cta.tile.bulk_group [%rd{{[0-9]+}}, {{.*}}], [[[BOX1]]];
//  PTX-NEXT: cp.async.bulk.commit_group;
//   PTX-NOT: cp.async.bulk.wait_group
//       PTX: bra.uni
//       PTX: cp.async.bulk.wait_group.read 0;
//  PTX-NEXT: $L__BB
//  PTX-NEXT: ret;
// LoRA stays data-parallel: no loop over gridDim.x's tiles.
// PTX-LABEL: .entry lora_matmul_0(
//   PTX-NOT: %nctaid.x
// PTX-LABEL: .entry mlp_backward_matmul_0(
//       PTX: %nctaid.x
//   PTX-NOT: cp.async.bulk.tensor.2d.global.shared
//       PTX: st.global.b32
//   PTX-NOT: cp.async.bulk.tensor.2d.global.shared

// PTXAS-NOT: serialized
// PTXAS: 0 bytes spill stores, 0 bytes spill loads
// PTXAS-NOT: serialized
// PTXAS: 0 bytes spill stores, 0 bytes spill loads
// PTXAS-NOT: serialized
// PTXAS: 0 bytes spill stores, 0 bytes spill loads
// PTXAS-NOT: serialized

func.func @proj(%x: tensor<?x4096xbf16>, %w: tensor<1024x4096xbf16>) -> tensor<?x1024xbf16> {
  %y = liger.linear %x, %w : tensor<?x4096xbf16>, tensor<1024x4096xbf16>
  return %y : tensor<?x1024xbf16>
}

func.func @lora(%x: tensor<?x4096xbf16>, %w: tensor<4096x4096xbf16>, %la: tensor<16x4096xbf16>, %lb: tensor<4096x16xbf16>) -> tensor<?x4096xbf16> {
  %y = liger.lora_linear %x, %w, %la, %lb scale = 2.0 : tensor<?x4096xbf16>, tensor<4096x4096xbf16>, tensor<16x4096xbf16>, tensor<4096x16xbf16>
  return %y : tensor<?x4096xbf16>
}

func.func @mlp_backward(%dy: tensor<?x4096xbf16>, %w: tensor<4096x14336xbf16>, %g: tensor<?x14336xbf16>, %u: tensor<?x14336xbf16>) -> (tensor<?x14336xbf16>, tensor<?x14336xbf16>) {
  %dh = liger.linear_grad_input %dy, %w : tensor<?x4096xbf16>, tensor<4096x14336xbf16>
  %dg, %du = liger.swiglu_grad %dh, %g, %u : tensor<?x14336xbf16>
  return %dg, %du : tensor<?x14336xbf16>, tensor<?x14336xbf16>
}
