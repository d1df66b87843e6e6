// The pingpong schedule (liger-compile --matmul-schedule=pingpong): one CTA
// per SM ("sms" in the manifest's grid), looping over the tiles blockIdx.x
// + i · gridDim.x; its two consumer warpgroups take turns (set s takes
// tiles i = s, s + 2, ...; one warpgroup a set, 128 x 128 tiles as two
// 64-row blocks), the stage ring's fills counted across the
// tiles, so that one set's epilogue runs under the other's main loop. The
// set comes from lane 0 (shfl.sync.idx): ptxas then knows the tile loop
// around the wgmmas is warp-uniform and does not serialize them; every
// consumer thread releases a stage (a branch around one thread's arrive
// after the last wgmma made ptxas serialize them too). A one-result
// projection stores its tiles with TMA box by box, from two 64 x 64 boxes
// per warpgroup beside the ring (each 128-row tile's eight boxes through
// them in turn); the gated backward (two results) stores from registers. LoRA keeps the
// data-parallel schedule.
// REQUIRES: ptxas
// RUN: rm -rf %t.bundle
// RUN: liger-compile %s --matmul-schedule=pingpong -o %t.bundle 2>&1 | FileCheck %s --check-prefix=OUT
// RUN: FileCheck %s --check-prefix=MANIFEST < %t.bundle/manifest.json
// RUN: FileCheck %s --check-prefix=PTX < %t.bundle/liger_kernels.sm_90a.ptx
// RUN: ptxas -arch=sm_90a -v %t.bundle/liger_kernels.sm_90a.ptx -o %t.cubin 2>&1 | FileCheck %s --check-prefix=PTXAS
// The option is checked, and needs the matmul templates:
// RUN: not liger-compile %s --matmul-schedule=fastest -o %t.bad 2>&1 | FileCheck %s --check-prefix=BAD
// RUN: not liger-compile %s --matmul-schedule=pingpong --no-matmul-kernels -o %t.bad 2>&1 | FileCheck %s --check-prefix=OFF

// OUT-NOT: warning
// OUT: liger-compile: 3 kernels for sm_90a
// BAD: --matmul-schedule must be auto, data-parallel, pingpong or persistent, got 'fastest'
// OFF: --matmul-schedule chooses how matmul groups compile, which --no-matmul-kernels leaves uncompiled

// MANIFEST: "function": "proj",
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
// shares; the set from lane 0; a set's turn to start its main loop (the
// other set's bar.arrive, 256 threads), the wgmmas.
//   PTX-DAG: mov.u32 %r{{[0-9]+}}, %nctaid.x;
//   PTX-DAG: setmaxnreg.dec.sync.aligned.u32 40;
//   PTX-DAG: setmaxnreg.inc.sync.aligned.u32 232;
//   PTX-DAG: shfl.sync.idx.b32
//   PTX-DAG: bar.sync %r{{[0-9]+}}, 256;
//   PTX-DAG: wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16
// After the last wgmma, the last stage is released by every thread (no
// branch around it); then the other set's turn and the set's TMA store.
//       PTX: wgmma.wait_group.sync.aligned 0;
//   PTX-NOT: bra
//       PTX: mbarrier.arrive.shared.b64
//   PTX-DAG: bar.arrive %r{{[0-9]+}}, 256;
//   PTX-DAG: cp.async.bulk.tensor.2d.global.shared::cta.tile.bulk_group
//   PTX-DAG: cp.async.bulk.wait_group.read 0;
// From the third box on, the warpgroup's first thread waits until all but
// its latest store have been read, and the warpgroup (128 threads) meets.
//       PTX: cp.async.bulk.commit_group;
//       PTX: cp.async.bulk.wait_group.read 1;
//  PTX-NEXT: $L__BB
//  PTX-NEXT: bar.sync %r{{[0-9]+}}, 128;
// LoRA stays data-parallel: no loop over gridDim.x's tiles.
// PTX-LABEL: .entry lora_matmul_0(
//   PTX-NOT: %nctaid.x
// PTX-LABEL: .entry mlp_backward_matmul_0(
//       PTX: shfl.sync.idx.b32
//   PTX-NOT: cp.async.bulk.tensor.2d.global.shared
//       PTX: st.global.b32
//   PTX-NOT: cp.async.bulk.tensor.2d.global.shared

// PTXAS-NOT: C7520
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
