// liger.attention_grad has its reference lowering (the CPU oracle) but no
// GPU kernel template yet: liger-compile says so and writes no bundle (exit
// 1, like any module without a kernel).
// RUN: rm -rf %t.bundle
// RUN: not liger-compile %s -o %t.bundle 2>&1 | FileCheck %s
// RUN: not test -e %t.bundle

// CHECK: liger-compile: no kernel to compile in {{.*}} (not compiled yet, no kernel template: 1 liger.attention_grad)
func.func @alone(%do: tensor<?x4x?x16xbf16>, %q: tensor<?x4x?x16xbf16>, %k: tensor<?x2x?x16xbf16>, %v: tensor<?x2x?x16xbf16>)
    -> (tensor<?x4x?x16xbf16>, tensor<?x2x?x16xbf16>, tensor<?x2x?x16xbf16>) {
  %dq, %dk, %dv = liger.attention_grad %do, %q, %k, %v causal : tensor<?x4x?x16xbf16>, tensor<?x4x?x16xbf16>, tensor<?x2x?x16xbf16>, tensor<?x2x?x16xbf16>
  return %dq, %dk, %dv : tensor<?x4x?x16xbf16>, tensor<?x2x?x16xbf16>, tensor<?x2x?x16xbf16>
}
