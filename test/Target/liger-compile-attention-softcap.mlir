// The attention template with a logit softcap c (Gemma 2's
// attn_logit_softcapping): each score becomes tanh(S · scale / c) (one
// tanh.approx.f32 a score) before the mask, and the softmax's log2 factor
// is c · log2 e in place of scale · log2 e; the backward recomputes the
// same tanh and multiplies dS by 1 - tanh². A kernel without a softcap
// has no tanh. The softcap spills nothing the kernels without it do not:
// the forward kernels none, the backward the same bytes as the uncapped
// one (test/Target/liger-compile-attention-grad.mlir).
// REQUIRES: ptxas
// RUN: rm -rf %t.bundle
// RUN: liger-compile %s -o %t.bundle | FileCheck %s --check-prefix=OUT
// RUN: FileCheck %s --check-prefix=PTX < %t.bundle/liger_kernels.sm_90a.ptx
// RUN: ptxas -arch=sm_90a -v %t.bundle/liger_kernels.sm_90a.ptx -o %t.cubin 2>&1 | FileCheck %s --check-prefix=PTXAS
// RUN: ptxas -arch=sm_90a -v %t.bundle/liger_kernels.sm_90a.ptx -o %t.cubin 2>&1 | FileCheck %s --check-prefix=ZERO

// OUT: liger-compile: 4 kernels for sm_90a

// Llama's heads, c = 2: the tanh's argument S · 2^-3.5 / 2 (0f3D3504F3),
// the softmax's factor 2 log2 e (0f4038AA3B).
// PTX-LABEL: .entry capped_attention_0(
// PTX: mul.rn.f32 {{.*}}, 0f3D3504F3;
// PTX-NEXT: // begin inline asm
// PTX-NEXT: tanh.approx.f32
// PTX: ex2.approx.ftz.f32
// PTX: 0f4038AA3B
// PTX-LABEL: .entry capped_grad_attention_0(
// PTX: mul.rn.f32 {{.*}}, 0f3D3504F3;
// PTX-NEXT: // begin inline asm
// PTX-NEXT: tanh.approx.f32
// PTX: 0f4038AA3B
// PTX: ex2.approx.ftz.f32
// PTX-LABEL: .entry capped_grad_attention_0_prepare(
// Gemma 2's heads (D 256, scale 1/16, c = 50, its sliding window):
// 0.00125 (0f3AA3D70A) and 50 log2 e (0f429044FE).
// PTX-LABEL: .entry gemma2_attention_0(
// PTX: mul.rn.f32 {{.*}}, 0f3AA3D70A;
// PTX-NEXT: // begin inline asm
// PTX-NEXT: tanh.approx.f32
// PTX: 0f429044FE
// PTX-LABEL: .entry uncapped_attention_0(
// PTX-NOT: tanh
// PTX: ex2.approx.ftz.f32
// PTX-NOT: tanh

// The forward kernels (and the backward's prepare and finish) spill
// nothing; the backward's spill stores stay under 100 bytes, as without a
// softcap.
// PTXAS-NOT: {{[1-9][0-9]*}} bytes spill
// PTXAS-LABEL: Compiling entry function 'capped_grad_attention_0'
// PTXAS-NEXT: Function properties for capped_grad_attention_0
// PTXAS-NEXT: {{ [0-9]?[0-9]}} bytes stack frame,{{ [0-9]?[0-9]}} bytes spill stores
// ZERO-COUNT-5: 0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads

func.func @capped(%q: tensor<?x32x?x128xbf16>, %k: tensor<?x8x?x128xbf16>,
                  %v: tensor<?x8x?x128xbf16>)
    -> (tensor<?x32x?x128xbf16>, tensor<?x32x?xf32>) {
  %o, %lse = liger.attention %q, %k, %v causal softcap = 2.0 return_lse
      : tensor<?x32x?x128xbf16>, tensor<?x8x?x128xbf16>, tensor<?x8x?x128xbf16>
  return %o, %lse : tensor<?x32x?x128xbf16>, tensor<?x32x?xf32>
}

func.func @capped_grad(%do: tensor<?x32x?x128xbf16>, %q: tensor<?x32x?x128xbf16>,
                       %k: tensor<?x8x?x128xbf16>, %v: tensor<?x8x?x128xbf16>,
                       %o: tensor<?x32x?x128xbf16>, %lse: tensor<?x32x?xf32>)
    -> (tensor<?x32x?x128xbf16>, tensor<?x8x?x128xbf16>, tensor<?x8x?x128xbf16>) {
  %dq, %dk, %dv = liger.attention_grad %do, %q, %k, %v
      saved(%o, %lse : tensor<?x32x?x128xbf16>, tensor<?x32x?xf32>) causal softcap = 2.0
      : tensor<?x32x?x128xbf16>, tensor<?x32x?x128xbf16>, tensor<?x8x?x128xbf16>,
        tensor<?x8x?x128xbf16>
  return %dq, %dk, %dv
      : tensor<?x32x?x128xbf16>, tensor<?x8x?x128xbf16>, tensor<?x8x?x128xbf16>
}

func.func @gemma2(%q: tensor<?x8x?x256xbf16>, %k: tensor<?x4x?x256xbf16>,
                  %v: tensor<?x4x?x256xbf16>) -> tensor<?x8x?x256xbf16> {
  %o = liger.attention %q, %k, %v causal window = 4096 softcap = 50.0
      : tensor<?x8x?x256xbf16>, tensor<?x4x?x256xbf16>, tensor<?x4x?x256xbf16>
  return %o : tensor<?x8x?x256xbf16>
}

func.func @uncapped(%q: tensor<?x32x?x128xbf16>, %k: tensor<?x8x?x128xbf16>,
                    %v: tensor<?x8x?x128xbf16>) -> tensor<?x32x?x128xbf16> {
  %o = liger.attention %q, %k, %v causal
      : tensor<?x32x?x128xbf16>, tensor<?x8x?x128xbf16>, tensor<?x8x?x128xbf16>
  return %o : tensor<?x32x?x128xbf16>
}
