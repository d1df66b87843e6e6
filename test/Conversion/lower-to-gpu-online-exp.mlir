// RUN: liger-compile %s --target=sm_90a --emit=gpu -o - | FileCheck %s

// A row of 128256 runs in the looped form, where a max and a sum of
// exp(a - max) over the same row are one online pass: a running max and a
// running sum rescaled as it grows. Its exponentials take the fast-math
// flags of the sum's own exp, as the register form (which clones the
// body) does: the JSD's log-sum-exp is fast (afn: ex2.approx.ftz of
// x log2 e, the running sum's rescale and each element's), a softmax's
// stays exact.
// CHECK-LABEL: gpu.func @jsd_rowwise_0(
//       CHECK:   scf.for
//   CHECK-NOT:     math.exp
//       CHECK:     %[[S:.+]] = arith.mulf %{{.+}}, %{{.+}} fastmath<contract> : f32
//  CHECK-NEXT:     llvm.call_intrinsic "llvm.nvvm.ex2.approx.ftz.f32"(%[[S]]) : (f32) -> f32
//   CHECK-NOT:     math.exp
//       CHECK:     scf.yield
// A logarithm keeps its form (an input below 2^-126 flushed would be -inf).
//       CHECK:     math.log %{{.+}} fastmath<afn> : vector<8xf32>
// CHECK-LABEL: gpu.func @softmax_rowwise_0(
//       CHECK:   scf.for
//   CHECK-NOT:     ex2
//   CHECK-NOT:     afn
//       CHECK:     math.exp %{{.+}} : f32
//   CHECK-NOT:     afn
//       CHECK:     math.exp %{{.+}} : vector<8xf32>
//   CHECK-NOT:     afn
//       CHECK:   gpu.return
func.func @jsd(%s: tensor<?x128256xbf16>, %t: tensor<?x128256xbf16>) -> tensor<?xf32> {
  %l = liger.jsd %s, %t beta = 5.0e-01 ignore_index = -100 temperature = 1.0 per_token : tensor<?x128256xbf16>
  return %l : tensor<?xf32>
}
func.func @softmax(%x: tensor<?x128256xbf16>) -> tensor<?x128256xbf16> {
  %y = liger.softmax %x : tensor<?x128256xbf16>
  return %y : tensor<?x128256xbf16>
}
