// The attention template's backward (sm_90a): liger.attention_grad with the
// forward's saved output and lse (liger.attention return_lse) as a
// persistent kernel over 128-row key tiles between a prepare kernel (each
// query row's lse · log2 e and D = rowsum(dO ∘ out), once) and a finishing
// kernel (dq rounded). The manifest: two f32 workspaces (heads,
// zero-filled by the launcher): dq's accumulator and the rows' statistics
// [B, H, T, 4]; the 'prepare' and 'finish' kernels; lse as head scalars;
// five tensor maps (q and dO in 64-row blocks, k and v in 128-row tiles,
// the accumulator in 64 x 32 f32 boxes). In the PTX, the statistics by a
// bulk copy, Sᵀ = K·qᵀ and dPᵀ = V·dOᵀ K-major, dV and dK from registers
// with dO and q MN-major, dQ = dS·K with both operands transposed, added
// to the accumulator by TMA reductions (no atomics). The forward with
// return_lse writes lse (f32) beside the output.
// REQUIRES: ptxas
// RUN: rm -rf %t.bundle
// RUN: liger-compile %s -o %t.bundle | FileCheck %s --check-prefix=OUT
// RUN: FileCheck %s --check-prefix=MANIFEST < %t.bundle/manifest.json
// RUN: FileCheck %s --check-prefix=PTX < %t.bundle/liger_kernels.sm_90a.ptx
// RUN: ptxas -arch=sm_90a -v %t.bundle/liger_kernels.sm_90a.ptx -o %t.cubin 2>&1 | FileCheck %s --check-prefix=PTXAS
// RUN: rm -rf %t.sm80 && not liger-compile %s --target=sm_80 -o %t.sm80 2>&1 | FileCheck %s --check-prefix=SM80

// OUT: liger-compile: 3 kernels for sm_90a

// MANIFEST: "name": "forward_attention_0",
// MANIFEST: "name": "output1",
// MANIFEST-NEXT: "role": "output",
// MANIFEST-NEXT: "shape": [
// MANIFEST-NEXT: "batch",
// MANIFEST-NEXT: 32,
// MANIFEST-NEXT: "seq"
// Llama's backward: three stages of q and dO (64 x 128 each) and their
// rows' statistics (64 x 16 bytes) beside k's and v's 128 x 128 tiles,
// dSᵀ and the two warpgroups' 64 x 64 f32 dQ parts:
// 1024 + 2·32768 + 3·(2·16384 + 1024) + 16384 + 2·16384 = 217088.
// MANIFEST: "block": [
// MANIFEST-NEXT: 384,
// MANIFEST: "ctas_per_sm": 1,
// MANIFEST: "dynamic_shared_memory_bytes": 217088,
// MANIFEST: "finish": {
// MANIFEST-NEXT: "block": [
// MANIFEST-NEXT: 256,
// MANIFEST: "name": "gqa_causal_attention_0_finish"
// MANIFEST: "grid": [
// MANIFEST-NEXT: "sms",
// MANIFEST: "name": "gqa_causal_attention_0",
// MANIFEST: "ops": "liger.attention_grad",
// The inputs: dO, q, k, v, out, then lse as head scalars.
// MANIFEST: "name": "input5",
// MANIFEST-NEXT: "role": "input",
// MANIFEST-NEXT: "shape": [
// MANIFEST-NEXT: "batch",
// MANIFEST-NEXT: 32,
// MANIFEST-NEXT: "seq"
// dq (32 heads), dk and dv (8), dq's f32 accumulator.
// MANIFEST: "name": "output0",
// MANIFEST: "name": "output2",
// MANIFEST: "dtype": "f32",
// MANIFEST-NEXT: "kind": "heads",
// MANIFEST-NEXT: "name": "workspace0",
// MANIFEST-NEXT: "role": "workspace",
// MANIFEST-NEXT: "shape": [
// MANIFEST-NEXT: "batch",
// MANIFEST-NEXT: 32,
// MANIFEST-NEXT: "seq",
// MANIFEST-NEXT: 128
// MANIFEST: "name": "workspace1",
// MANIFEST-NEXT: "role": "workspace",
// MANIFEST-NEXT: "shape": [
// MANIFEST-NEXT: "batch",
// MANIFEST-NEXT: 32,
// MANIFEST-NEXT: "seq",
// MANIFEST-NEXT: 4
// MANIFEST: "prepare": {
// MANIFEST-NEXT: "block": [
// MANIFEST-NEXT: 256,
// MANIFEST: "name": "gqa_causal_attention_0_prepare"
// MANIFEST: "tensor_maps": [
// MANIFEST: "box": [
// MANIFEST-NEXT: 64,
// MANIFEST-NEXT: 64
// MANIFEST: "param": "input1",
// MANIFEST: "param": "input0",
// MANIFEST: "box": [
// MANIFEST-NEXT: 128,
// MANIFEST-NEXT: 64
// MANIFEST: "param": "input2",
// MANIFEST: "param": "input3",
// MANIFEST: "box": [
// MANIFEST-NEXT: 64,
// MANIFEST-NEXT: 32
// MANIFEST: "param": "workspace0",
// MANIFEST-NOT: "param": "input4",
// MANIFEST: "name": "d64_attention_0_prepare"

// PTX-LABEL: .entry forward_attention_0(
// PTX: st.global.b32
// The register split (24 for the producer, 240 for each consumer) holds
// because the kernel declares one CTA an SM (.minnctapersm 1: ptxas ignored
// setmaxnreg at D 64 without it, advisory C7508).
// PTX-LABEL: .entry gqa_causal_attention_0(
// PTX: .minnctapersm 1
// PTX: setmaxnreg.dec.sync.aligned.u32 24
// PTX: cp.async.bulk.tensor.3d.shared::cta.global.tile.mbarrier::complete_tx::bytes
// PTX: cp.async.bulk.shared::cta.global.mbarrier::complete_tx::bytes
// PTX: setmaxnreg.inc.sync.aligned.u32 240
// Sᵀ and dPᵀ (K-major: trans-a 0, trans-b 0), P·dO and dS·q (A from
// registers, B MN-major: trans-b 1), dS·K (trans-a 1, trans-b 1):
// PTX-DAG: wgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16 {{.*}}, %rd{{[0-9]+}}, %rd{{[0-9]+}}, p, 1, 1, 0, 0;
// PTX-DAG: wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16 {{.*}}}, %rd{{[0-9]+}}, p, 1, 1, 1;
// PTX-DAG: wgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16 {{.*}}, %rd{{[0-9]+}}, %rd{{[0-9]+}}, p, 1, 1, 1, 1;
// PTX-DAG: ex2.approx.ftz.f32
// PTX-DAG: cp.reduce.async.bulk.tensor.3d.global.shared::cta.add.tile.bulk_group
// PTX-DAG: cp.async.bulk.wait_group.read 0
// PTX-DAG: bar.sync 1, 256;
// PTX-DAG: bar.sync %r{{[0-9]+}}, 128;
// PTX-NOT: atom.global.add.f32
// PTX-LABEL: .entry gqa_causal_attention_0_finish(
// PTX: mul.rn.f32
// PTX: cvt.rn.bf16x2.f32

// PTXAS-NOT: C7508
// RUN: ptxas -arch=sm_90a -v %t.bundle/liger_kernels.sm_90a.ptx -o %t.cubin 2>&1 | FileCheck %s --check-prefix=SPILLS
// The D 128 backward keeps its step loop in registers: under 100 bytes of
// spills, outside the loop (the values the loop derives from the thread's
// and the tile's invariants, every k slice's wgmma descriptor and every
// register's mask bound, go through GpuBuilder::inLoop; hoisted and held
// across the loop, they spilled 384 bytes, reloaded in every step).
// SPILLS-LABEL: Compiling entry function 'gqa_causal_attention_0'
// SPILLS-NEXT: Function properties for gqa_causal_attention_0
// SPILLS-NEXT: {{ [0-9]?[0-9]}} bytes stack frame,{{ [0-9]?[0-9]}} bytes spill stores
// PTXAS-DAG: Compiling entry function 'forward_attention_0'
// PTXAS-DAG: Compiling entry function 'd64_attention_0'
// PTXAS-DAG: Compiling entry function 'gqa_causal_attention_0'
// PTXAS-DAG: Compiling entry function 'gqa_causal_attention_0_finish'
// PTXAS-DAG: Compiling entry function 'gqa_causal_attention_0_prepare'

// SM80: liger-compile: no kernel to compile in {{.*}} (not compiled yet, no kernel template: 1 liger.attention, 2 liger.attention_grad)

// The forward with its lse.
func.func @forward(%q: tensor<?x32x?x128xbf16>, %k: tensor<?x8x?x128xbf16>,
                   %v: tensor<?x8x?x128xbf16>)
    -> (tensor<?x32x?x128xbf16>, tensor<?x32x?xf32>) {
  %o, %lse = liger.attention %q, %k, %v causal return_lse
      : tensor<?x32x?x128xbf16>, tensor<?x8x?x128xbf16>, tensor<?x8x?x128xbf16>
  return %o, %lse : tensor<?x32x?x128xbf16>, tensor<?x32x?xf32>
}

// Llama's attention backward: 32 query heads over 8 key/value heads.
func.func @gqa_causal(%do: tensor<?x32x?x128xbf16>, %q: tensor<?x32x?x128xbf16>,
                      %k: tensor<?x8x?x128xbf16>, %v: tensor<?x8x?x128xbf16>,
                      %o: tensor<?x32x?x128xbf16>, %lse: tensor<?x32x?xf32>)
    -> (tensor<?x32x?x128xbf16>, tensor<?x8x?x128xbf16>, tensor<?x8x?x128xbf16>) {
  %dq, %dk, %dv = liger.attention_grad %do, %q, %k, %v
      saved(%o, %lse : tensor<?x32x?x128xbf16>, tensor<?x32x?xf32>) causal
      : tensor<?x32x?x128xbf16>, tensor<?x32x?x128xbf16>, tensor<?x8x?x128xbf16>, tensor<?x8x?x128xbf16>
  return %dq, %dk, %dv : tensor<?x32x?x128xbf16>, tensor<?x8x?x128xbf16>, tensor<?x8x?x128xbf16>
}

// D 64, not causal, a scale of its own: four stages.
func.func @d64(%do: tensor<?x6x?x64xbf16>, %q: tensor<?x6x?x64xbf16>,
               %k: tensor<?x2x?x64xbf16>, %v: tensor<?x2x?x64xbf16>,
               %o: tensor<?x6x?x64xbf16>, %lse: tensor<?x6x?xf32>)
    -> (tensor<?x6x?x64xbf16>, tensor<?x2x?x64xbf16>, tensor<?x2x?x64xbf16>) {
  %dq, %dk, %dv = liger.attention_grad %do, %q, %k, %v
      saved(%o, %lse : tensor<?x6x?x64xbf16>, tensor<?x6x?xf32>) scale = 0.3
      : tensor<?x6x?x64xbf16>, tensor<?x6x?x64xbf16>, tensor<?x2x?x64xbf16>, tensor<?x2x?x64xbf16>
  return %dq, %dk, %dv : tensor<?x6x?x64xbf16>, tensor<?x2x?x64xbf16>, tensor<?x2x?x64xbf16>
}
