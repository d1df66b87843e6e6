// Attention the template does not take stays uncompiled, with a warning on
// its group naming the rule, and liger-compile says it was left by the
// template: a head dimension that is not a multiple of 64, v's head
// dimension unlike q's, f32; a backward without the forward's saved output
// and lse, a backward at head dimension 256.
// RUN: rm -rf %t.bundle
// RUN: not liger-compile %s -o %t.bundle 2>&1 | FileCheck %s
// RUN: not test -e %t.bundle

// CHECK: warning: left for a later attention template: the attention template takes a head dimension that is a multiple of 64 up to 256 (its tiles' 128-byte rows), got 96
// CHECK: warning: left for a later attention template: the attention template needs v's head dimension equal to q's (v's is 64, q's 128)
// CHECK: warning: left for a later attention template: the attention template takes bf16 or f16 (wgmma's operands)
// CHECK: warning: left for a later attention template: the attention template's backward takes the forward's output and lse (liger.attention_grad's saved operands; liger.attention return_lse gives the lse)
// CHECK: warning: left for a later attention template: the attention template's backward holds dk and dv of 64 key rows in registers: head dimension 64 or 128, got 256
// CHECK: liger-compile: no kernel to compile in {{.*}} (left by their templates, see the warnings: 5 attention groups)

func.func @d96(%q: tensor<?x4x?x96xbf16>, %k: tensor<?x4x?x96xbf16>,
               %v: tensor<?x4x?x96xbf16>) -> tensor<?x4x?x96xbf16> {
  %o = liger.attention %q, %k, %v causal
      : tensor<?x4x?x96xbf16>, tensor<?x4x?x96xbf16>, tensor<?x4x?x96xbf16>
  return %o : tensor<?x4x?x96xbf16>
}

func.func @dv(%q: tensor<?x4x?x128xbf16>, %k: tensor<?x4x?x128xbf16>,
              %v: tensor<?x4x?x64xbf16>) -> tensor<?x4x?x64xbf16> {
  %o = liger.attention %q, %k, %v
      : tensor<?x4x?x128xbf16>, tensor<?x4x?x128xbf16>, tensor<?x4x?x64xbf16>
  return %o : tensor<?x4x?x64xbf16>
}

func.func @f32(%q: tensor<?x4x?x64xf32>, %k: tensor<?x4x?x64xf32>,
               %v: tensor<?x4x?x64xf32>) -> tensor<?x4x?x64xf32> {
  %o = liger.attention %q, %k, %v
      : tensor<?x4x?x64xf32>, tensor<?x4x?x64xf32>, tensor<?x4x?x64xf32>
  return %o : tensor<?x4x?x64xf32>
}

func.func @grad_unsaved(%do: tensor<?x4x?x64xbf16>, %q: tensor<?x4x?x64xbf16>)
    -> (tensor<?x4x?x64xbf16>, tensor<?x4x?x64xbf16>, tensor<?x4x?x64xbf16>) {
  %dq, %dk, %dv = liger.attention_grad %do, %q, %q, %q causal
      : tensor<?x4x?x64xbf16>, tensor<?x4x?x64xbf16>, tensor<?x4x?x64xbf16>, tensor<?x4x?x64xbf16>
  return %dq, %dk, %dv : tensor<?x4x?x64xbf16>, tensor<?x4x?x64xbf16>, tensor<?x4x?x64xbf16>
}

func.func @grad_d256(%do: tensor<?x4x?x256xbf16>, %q: tensor<?x4x?x256xbf16>,
                     %lse: tensor<?x4x?xf32>)
    -> (tensor<?x4x?x256xbf16>, tensor<?x4x?x256xbf16>, tensor<?x4x?x256xbf16>) {
  %dq, %dk, %dv = liger.attention_grad %do, %q, %q, %q
      saved(%q, %lse : tensor<?x4x?x256xbf16>, tensor<?x4x?xf32>)
      : tensor<?x4x?x256xbf16>, tensor<?x4x?x256xbf16>, tensor<?x4x?x256xbf16>, tensor<?x4x?x256xbf16>
  return %dq, %dk, %dv : tensor<?x4x?x256xbf16>, tensor<?x4x?x256xbf16>, tensor<?x4x?x256xbf16>
}
