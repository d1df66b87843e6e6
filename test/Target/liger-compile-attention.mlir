// The attention template (sm_90a): liger.attention as one persistent
// kernel (grid: one CTA per SM), a producer warpgroup loading q once per
// tile and k/v blocks into a ring with TMA through 3-D maps of the heads
// tensors, two consumer warpgroups with wgmma (S = q·kᵀ from shared memory,
// O += P·v with P from registers and v MN-major, trans-b 1) and an online
// softmax in f32 (ex2.approx.ftz). On sm_80 (no wgmma, no TMA) the op waits for a template; head
// sizes the template does not take are left with a warning naming why.
// REQUIRES: ptxas
// RUN: rm -rf %t.bundle
// RUN: liger-compile %s -o %t.bundle | FileCheck %s --check-prefix=OUT
// RUN: FileCheck %s --check-prefix=MANIFEST < %t.bundle/manifest.json
// RUN: FileCheck %s --check-prefix=PTX < %t.bundle/liger_kernels.sm_90a.ptx
// RUN: ptxas -arch=sm_90a -v %t.bundle/liger_kernels.sm_90a.ptx -o %t.cubin 2>&1 | FileCheck %s --check-prefix=PTXAS
// RUN: ptxas -arch=sm_90a -v %t.bundle/liger_kernels.sm_90a.ptx -o %t.cubin 2>&1 | FileCheck %s --check-prefix=SPILLS
// RUN: rm -rf %t.sm80 && not liger-compile %s --target=sm_80 -o %t.sm80 2>&1 | FileCheck %s --check-prefix=SM80

// OUT: liger-compile: 4 kernels for sm_90a

// Llama's: blocks of 128 keys, three stages: 1024 bytes of barriers, q's
// 128 x 128 tile and three stages of k's and v's 128 x 128 tiles.
// MANIFEST: "block": [
// MANIFEST-NEXT: 384,
// MANIFEST: "dynamic_shared_memory_bytes": 230400,
// MANIFEST: "grid": [
// MANIFEST-NEXT: "sms",
// MANIFEST: "name": "gqa_causal_attention_0",
// MANIFEST: "kind": "heads",
// MANIFEST: "shape": [
// MANIFEST-NEXT: "batch",
// MANIFEST-NEXT: 32,
// MANIFEST-NEXT: "seq",
// MANIFEST-NEXT: 128
// MANIFEST: "kind": "heads",
// MANIFEST: "shape": [
// MANIFEST-NEXT: "batch",
// MANIFEST-NEXT: 8,
// MANIFEST: "kind": "heads",
// MANIFEST: "role": "output",
// MANIFEST: "template": "attention",
// MANIFEST: "tensor_maps": [
// MANIFEST: "box": [
// MANIFEST-NEXT: 128,
// MANIFEST-NEXT: 64
// MANIFEST: "param": "input0",
// MANIFEST-NEXT: "swizzle": 128
// MANIFEST: "box": [
// MANIFEST-NEXT: 128,
// MANIFEST-NEXT: 64
// MANIFEST: "param": "input1",
// MANIFEST: "box": [
// MANIFEST-NEXT: 128,
// MANIFEST-NEXT: 64
// MANIFEST: "param": "input2",
// D 256: key/value blocks of 64 rows (q's 128 x 256 tile, two stages of
// 64 x 256 k and v tiles).
// MANIFEST: "dynamic_shared_memory_bytes": 197632,
// MANIFEST: "name": "wide_attention_0",
// MANIFEST: "tensor_maps": [
// MANIFEST: "box": [
// MANIFEST-NEXT: 128,
// MANIFEST: "box": [
// MANIFEST-NEXT: 64,
// MANIFEST-NEXT: 64
// MANIFEST: "param": "input1",
// MANIFEST: "box": [
// MANIFEST-NEXT: 64,
// MANIFEST-NEXT: 64
// MANIFEST: "param": "input2",

// PTX-LABEL: .entry gqa_causal_attention_0(
// PTX: .param .align 64 .b8 gqa_causal_attention_0_param_{{[0-9]+}}[128]
// PTX: setmaxnreg.dec.sync.aligned.u32 40
// PTX: cp.async.bulk.tensor.3d.shared::cta.global.tile.mbarrier::complete_tx::bytes
// PTX: setmaxnreg.inc.sync.aligned.u32 232
// The consumers' turns: warpgroup 0 arrives at its own barrier once, then
// each waits at its own and passes to the other's.
// PTX: bar.arrive {{.*}}, 256;
// PTX: bar.sync {{.*}}, 256;
// PTX: bar.arrive {{.*}}, 256;
// S = q·kᵀ (both K-major: trans-a 0, trans-b 0), P·v (A from registers,
// v MN-major: trans-b 1), the softmax's exponentials:
// PTX-DAG: wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16 {{.*}}, p, 1, 1, 0, 0;
// PTX-DAG: wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16 {{.*}}}, %rd{{[0-9]+}}, p, 1, 1, 1;
// PTX-DAG: ex2.approx.ftz.f32
// PTX-LABEL: .entry plain_attention_0(

// PTXAS-NOT: {{[1-9][0-9]*}} bytes spill
// PTXAS-DAG: Compiling entry function 'gqa_causal_attention_0'
// PTXAS-DAG: Compiling entry function 'plain_attention_0'
// PTXAS-DAG: Compiling entry function 'wide_attention_0'
// PTXAS-DAG: Compiling entry function 'half_attention_0'
// No kernel spills, causal ones and D 256 included (q's descriptor passes
// through GpuBuilder::inLoop: its k slices' descriptors, hoisted out of the
// block loop, spilled 12 bytes at D 128 and 96 at D 256).
// SPILLS-NOT: {{[1-9][0-9]*}} bytes spill
// SPILLS-COUNT-4: 0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads
// SPILLS-NOT: {{[1-9][0-9]*}} bytes spill

// SM80: liger-compile: no kernel to compile in {{.*}} (not compiled yet, no kernel template: 4 liger.attention)

// Llama's attention: 32 query heads over 8 key/value heads, causal.
func.func @gqa_causal(%q: tensor<?x32x?x128xbf16>, %k: tensor<?x8x?x128xbf16>,
                      %v: tensor<?x8x?x128xbf16>) -> tensor<?x32x?x128xbf16> {
  %o = liger.attention %q, %k, %v causal
      : tensor<?x32x?x128xbf16>, tensor<?x8x?x128xbf16>, tensor<?x8x?x128xbf16>
  return %o : tensor<?x32x?x128xbf16>
}

// Not causal, D 64, a scale of its own.
func.func @plain(%q: tensor<?x4x?x64xbf16>, %k: tensor<?x4x?x64xbf16>,
                 %v: tensor<?x4x?x64xbf16>) -> tensor<?x4x?x64xbf16> {
  %o = liger.attention %q, %k, %v scale = 0.25
      : tensor<?x4x?x64xbf16>, tensor<?x4x?x64xbf16>, tensor<?x4x?x64xbf16>
  return %o : tensor<?x4x?x64xbf16>
}

// D 256 (Gemma's): blocks of 64 keys keep S and O in registers.
func.func @wide(%q: tensor<?x8x?x256xbf16>, %k: tensor<?x1x?x256xbf16>,
                %v: tensor<?x1x?x256xbf16>) -> tensor<?x8x?x256xbf16> {
  %o = liger.attention %q, %k, %v causal
      : tensor<?x8x?x256xbf16>, tensor<?x1x?x256xbf16>, tensor<?x1x?x256xbf16>
  return %o : tensor<?x8x?x256xbf16>
}

// f16.
func.func @half(%q: tensor<?x2x?x128xf16>, %k: tensor<?x2x?x128xf16>,
                %v: tensor<?x2x?x128xf16>) -> tensor<?x2x?x128xf16> {
  %o = liger.attention %q, %k, %v causal
      : tensor<?x2x?x128xf16>, tensor<?x2x?x128xf16>, tensor<?x2x?x128xf16>
  return %o : tensor<?x2x?x128xf16>
}
