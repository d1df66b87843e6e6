// RUN: liger-compile %s --target=sm_90a --emit=gpu -o - | FileCheck %s

// A row of 128256 runs in the looped form, where a max and a sum of
// exp(a - max) over the same row are one online pass: a running max and a
// running sum rescaled as it grows. Its exponentials take the fast-math
// flags of the sum's own exp, as the register form (which clones the
// body) does: the JSD's log-sum-exp is fast (afn, __nv_fast_expf), a
// softmax's stays exact.
// CHECK-LABEL: gpu.func @jsd_rowwise_0(
//       CHECK:   scf.for
//       CHECK:     math.exp %{{.+}} fastmath<afn> : f32
//       CHECK:     math.exp %{{.+}} fastmath<afn> : vector<8xf32>
// CHECK-LABEL: gpu.func @softmax_rowwise_0(
//       CHECK:   scf.for
//   CHECK-NOT:     fastmath
//       CHECK:     math.exp %{{.+}} : f32
//   CHECK-NOT:     fastmath
//       CHECK:     math.exp %{{.+}} : vector<8xf32>
//   CHECK-NOT:     fastmath
//       CHECK:   gpu.return
func.func @jsd(%s: tensor<?x128256xbf16>, %t: tensor<?x128256xbf16>) -> tensor<?xf32> {
  %l = liger.jsd %s, %t beta = 5.0e-01 ignore_index = -100 temperature = 1.0 per_token : tensor<?x128256xbf16>
  return %l : tensor<?xf32>
}
func.func @softmax(%x: tensor<?x128256xbf16>) -> tensor<?x128256xbf16> {
  %y = liger.softmax %x : tensor<?x128256xbf16>
  return %y : tensor<?x128256xbf16>
}
