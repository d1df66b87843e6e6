// RUN: liger-opt %s --liger-fuse-elementwise --split-input-file | FileCheck %s
// RUN: liger-opt %s --liger-fuse-elementwise="allow-extra-outputs=false into-matmul=false" --split-input-file | FileCheck %s --check-prefix=STRICT
// RUN: liger-opt %s --liger-fuse-elementwise="report=true allow-extra-outputs=false" --split-input-file -o /dev/null | FileCheck %s --check-prefix=REPORT

// A norm -> mul -> silu chain becomes one rowwise group, grown one consumer
// at a time.
// CHECK-LABEL: func.func @norm_mul_silu
//  CHECK-SAME:   (%[[X:.+]]: tensor<?x64xf32>, %[[W:.+]]: tensor<64xf32>, %[[Y:.+]]: tensor<?x64xf32>)
//       CHECK:   %[[G:.+]] = liger.fusion rowwise(%[[X]], %[[W]], %[[Y]])
//       CHECK:     liger.rms_norm
//       CHECK:     liger.mul
//       CHECK:     liger.silu
//       CHECK:     liger.yield
//   CHECK-NOT:   liger.fusion
//       CHECK:   return %[[G]]
// STRICT-LABEL: func.func @norm_mul_silu
//       STRICT:   liger.fusion rowwise
func.func @norm_mul_silu(%x: tensor<?x64xf32>, %w: tensor<64xf32>, %y: tensor<?x64xf32>) -> tensor<?x64xf32> {
  %n = liger.rms_norm %x, %w : tensor<?x64xf32>, tensor<64xf32>
  %m = liger.mul %n, %y : tensor<?x64xf32>
  %s = liger.silu %m : tensor<?x64xf32>
  return %s : tensor<?x64xf32>
}

// -----

// An intermediate the function also returns becomes an extra result, or,
// with allow-extra-outputs=false, blocks the fusion.
// CHECK-LABEL: func.func @intermediate_returned
//       CHECK:   %[[G:.+]]:2 = liger.fusion rowwise
//       CHECK:     %[[A:.+]] = liger.silu
//       CHECK:     %[[B:.+]] = liger.gelu %[[A]]
//       CHECK:     liger.yield %[[A]], %[[B]]
//       CHECK:   return %[[G]]#1, %[[G]]#0
// STRICT-LABEL: func.func @intermediate_returned
//   STRICT-NOT:   liger.fusion
// REPORT: [liger-fuse-elementwise] left alone liger.gelu at fuse-elementwise.mlir:{{[0-9]+}}:{{[0-9]+}}: an intermediate is read outside the group and extra results are off (allow-extra-outputs=false)
func.func @intermediate_returned(%x: tensor<?x64xf32>) -> (tensor<?x64xf32>, tensor<?x64xf32>) {
  %a = liger.silu %x : tensor<?x64xf32>
  %b = liger.gelu %a : tensor<?x64xf32>
  return %b, %a : tensor<?x64xf32>, tensor<?x64xf32>
}

// -----

// A residual add after a projection joins it as the matmul epilogue
// (into-matmul, the default).
// CHECK-LABEL: func.func @residual_into_projection
//       CHECK:   liger.fusion matmul
//       CHECK:     liger.linear
//       CHECK:     liger.add
// STRICT-LABEL: func.func @residual_into_projection
//   STRICT-NOT:   liger.fusion
// REPORT: [liger-fuse-elementwise] fused liger.linear, liger.add into a matmul group
func.func @residual_into_projection(%x: tensor<?x64xf32>, %w: tensor<64x64xf32>, %r: tensor<?x64xf32>) -> tensor<?x64xf32> {
  %p = liger.linear %x, %w : tensor<?x64xf32>, tensor<64x64xf32>
  %o = liger.add %p, %r : tensor<?x64xf32>
  return %o : tensor<?x64xf32>
}

// -----

// Near-miss: no producer to join (both operands are arguments).
// CHECK-LABEL: func.func @lone_op
//   CHECK-NOT:   liger.fusion
func.func @lone_op(%x: tensor<?x64xf32>, %y: tensor<?x64xf32>) -> tensor<?x64xf32> {
  %s = liger.mul %x, %y : tensor<?x64xf32>
  return %s : tensor<?x64xf32>
}

// -----

// Near-miss: attention is neither rowwise nor a projection.
// CHECK-LABEL: func.func @after_attention
//   CHECK-NOT:   liger.fusion
func.func @after_attention(%q: tensor<1x2x4x8xf32>) -> tensor<1x2x4x8xf32> {
  %o = liger.attention %q, %q, %q : tensor<1x2x4x8xf32>, tensor<1x2x4x8xf32>, tensor<1x2x4x8xf32>
  %s = liger.silu %o : tensor<1x2x4x8xf32>
  return %s : tensor<1x2x4x8xf32>
}

// -----

// add + RMSNorm backward: the residual's gradient is dx plus the gradient
// that reached the residual stream, in the kernel that computes dx; dW (read
// outside) becomes an extra result, or blocks the fusion when those are off.
// CHECK-LABEL: func.func @rms_norm_grad_then_residual
//       CHECK:   %[[G:.+]]:2 = liger.fusion rowwise
//       CHECK:     %[[DX:.+]], %[[DW:.+]] = liger.rms_norm_grad
//       CHECK:     %[[D:.+]] = liger.add %[[DX]], %{{.+}}
//       CHECK:     liger.yield %[[DW]], %[[D]]
//       CHECK:   return %[[G]]#1, %[[G]]#0
// STRICT-LABEL: func.func @rms_norm_grad_then_residual
//   STRICT-NOT:   liger.fusion
func.func @rms_norm_grad_then_residual(%dy: tensor<?x64xbf16>, %s: tensor<?x64xbf16>, %w: tensor<64xbf16>, %r: tensor<?xf32>, %dres: tensor<?x64xbf16>) -> (tensor<?x64xbf16>, tensor<64xbf16>) {
  %dx, %dw = liger.rms_norm_grad %dy, %s, %w, %r : tensor<?x64xbf16>, tensor<64xbf16>, tensor<?xf32>
  %d = liger.add %dx, %dres : tensor<?x64xbf16>
  return %d, %dw : tensor<?x64xbf16>, tensor<64xbf16>
}

// -----

// LayerNorm with its statistics: the mean and rstd (read outside, for the
// backward) are extra results of the group the residual add joins, or
// block the fusion when those are off.
// CHECK-LABEL: func.func @layer_norm_stats_then_residual
//       CHECK:   %[[G:.+]]:3 = liger.fusion rowwise
//       CHECK:     %[[Y:.+]], %[[S:.+]]:2 = liger.layer_norm %{{.+}}, %{{.+}}, %{{.+}} stats
//       CHECK:     %[[D:.+]] = liger.add %[[Y]], %{{.+}}
//       CHECK:     liger.yield %[[S]]#0, %[[S]]#1, %[[D]]
//       CHECK:   return %[[G]]#2, %[[G]]#0, %[[G]]#1
// STRICT-LABEL: func.func @layer_norm_stats_then_residual
//   STRICT-NOT:   liger.fusion
func.func @layer_norm_stats_then_residual(%x: tensor<?x64xbf16>, %w: tensor<64xbf16>, %b: tensor<64xbf16>, %res: tensor<?x64xbf16>) -> (tensor<?x64xbf16>, tensor<?xf32>, tensor<?xf32>) {
  %y, %m, %r = liger.layer_norm %x, %w, %b stats : tensor<?x64xbf16>, tensor<64xbf16>, tensor<64xbf16>
  %d = liger.add %y, %res : tensor<?x64xbf16>
  return %d, %m, %r : tensor<?x64xbf16>, tensor<?xf32>, tensor<?xf32>
}

// -----

// Its backward from the saved statistics: the residual's gradient joins dx
// as RMSNorm's does; dW and db become extra results.
// CHECK-LABEL: func.func @layer_norm_grad_then_residual
//  CHECK-SAME:   (%{{.+}}: tensor<?x64xbf16>, %{{.+}}: tensor<?x64xbf16>, %{{.+}}: tensor<64xbf16>, %[[M:.+]]: tensor<?xf32>, %[[R:.+]]: tensor<?xf32>, %{{.+}}: tensor<?x64xbf16>)
//       CHECK:   %[[G:.+]]:3 = liger.fusion rowwise(%{{.+}}, %{{.+}}, %{{.+}}, %[[M]], %[[R]], %{{.+}})
//       CHECK:     %[[DX:.+]], %[[DW:.+]], %[[DB:.+]] = liger.layer_norm_grad
//       CHECK:     %[[D:.+]] = liger.add %[[DX]], %{{.+}}
//       CHECK:     liger.yield %[[DW]], %[[DB]], %[[D]]
//       CHECK:   return %[[G]]#2, %[[G]]#0, %[[G]]#1
// STRICT-LABEL: func.func @layer_norm_grad_then_residual
//   STRICT-NOT:   liger.fusion
func.func @layer_norm_grad_then_residual(%dy: tensor<?x64xbf16>, %x: tensor<?x64xbf16>, %w: tensor<64xbf16>, %m: tensor<?xf32>, %r: tensor<?xf32>, %dres: tensor<?x64xbf16>) -> (tensor<?x64xbf16>, tensor<64xbf16>, tensor<64xbf16>) {
  %dx, %dw, %db = liger.layer_norm_grad %dy, %x, %w, %m, %r : tensor<?x64xbf16>, tensor<64xbf16>, tensor<?xf32>
  %d = liger.add %dx, %dres : tensor<?x64xbf16>
  return %d, %dw, %db : tensor<?x64xbf16>, tensor<64xbf16>, tensor<64xbf16>
}

// -----

// Near-miss: a cross-entropy gradient is a loss's row program (it gathers
// the target), not a producer elementwise ops join.
// CHECK-LABEL: func.func @loss_grad_then_mul
//   CHECK-NOT:   liger.fusion
func.func @loss_grad_then_mul(%l: tensor<?x10xf32>, %t: tensor<?xi64>, %g: tensor<f32>, %m: tensor<?x10xf32>) -> tensor<?x10xf32> {
  %d = liger.cross_entropy_grad %l, %t, %g : tensor<?x10xf32>, tensor<?xi64>, tensor<f32>
  %y = liger.mul %d, %m : tensor<?x10xf32>
  return %y : tensor<?x10xf32>
}

// -----

// A norm's result read twice by one op: the op joins the norm's group.
// CHECK-LABEL: func.func @norm_squared
//  CHECK-SAME:   (%[[X:.+]]: tensor<?x64xf32>, %[[W:.+]]: tensor<64xf32>)
//       CHECK:   liger.fusion rowwise(%[[X]], %[[W]])
//       CHECK:     %[[N:.+]] = liger.rms_norm
//       CHECK:     liger.mul %[[N]], %[[N]]
// STRICT-LABEL: func.func @norm_squared
//       STRICT:   liger.fusion rowwise
// REPORT: [liger-fuse-elementwise] fused liger.rms_norm, liger.mul into a rowwise group at fuse-elementwise.mlir:{{[0-9]+}}:{{[0-9]+}}
func.func @norm_squared(%x: tensor<?x64xf32>, %w: tensor<64xf32>) -> tensor<?x64xf32> {
  %n = liger.rms_norm %x, %w : tensor<?x64xf32>, tensor<64xf32>
  %y = liger.mul %n, %n : tensor<?x64xf32>
  return %y : tensor<?x64xf32>
}

// -----

// A gated activation of one value (silu(s) * s, s = silu(x)) joins the
// group of the SiLU that makes it.
// CHECK-LABEL: func.func @swiglu_of_one_value
//       CHECK:   liger.fusion rowwise
//       CHECK:     %[[S:.+]] = liger.silu
//       CHECK:     liger.swiglu %[[S]], %[[S]]
// STRICT-LABEL: func.func @swiglu_of_one_value
//       STRICT:   liger.fusion rowwise
func.func @swiglu_of_one_value(%x: tensor<?x64xf32>) -> tensor<?x64xf32> {
  %s = liger.silu %x : tensor<?x64xf32>
  %y = liger.swiglu %s, %s : tensor<?x64xf32>
  return %y : tensor<?x64xf32>
}

// -----

// A projection whose input is also the residual: the group reads the
// activation once, for the projection and the add.
// CHECK-LABEL: func.func @residual_is_the_input
//  CHECK-SAME:   (%[[X:.+]]: tensor<?x64xf32>, %[[W:.+]]: tensor<64x64xf32>)
//       CHECK:   liger.fusion matmul(%[[X]], %[[W]])
//       CHECK:     ^bb0(%[[A:.+]]: tensor<?x64xf32>, %[[B:.+]]: tensor<64x64xf32>):
//       CHECK:     %[[P:.+]] = liger.linear %[[A]], %[[B]]
//       CHECK:     liger.add %[[P]], %[[A]]
// STRICT-LABEL: func.func @residual_is_the_input
//   STRICT-NOT:   liger.fusion
func.func @residual_is_the_input(%x: tensor<?x64xf32>, %w: tensor<64x64xf32>) -> tensor<?x64xf32> {
  %p = liger.linear %x, %w : tensor<?x64xf32>, tensor<64x64xf32>
  %y = liger.add %p, %x : tensor<?x64xf32>
  return %y : tensor<?x64xf32>
}

// -----

// A projection added to itself: one group, the projection in it once.
// CHECK-LABEL: func.func @projection_doubled
//       CHECK:   liger.fusion matmul
//       CHECK:     %[[P:.+]] = liger.linear
//       CHECK:     liger.add %[[P]], %[[P]]
// STRICT-LABEL: func.func @projection_doubled
//   STRICT-NOT:   liger.fusion
func.func @projection_doubled(%x: tensor<?x64xf32>, %w: tensor<32x64xf32>) -> tensor<?x32xf32> {
  %p = liger.linear %x, %w : tensor<?x64xf32>, tensor<32x64xf32>
  %y = liger.add %p, %p : tensor<?x32xf32>
  return %y : tensor<?x32xf32>
}

// -----

// Must not crash: an argument added to itself has no producer to join.
// CHECK-LABEL: func.func @argument_doubled
//   CHECK-NOT:   liger.fusion
// STRICT-LABEL: func.func @argument_doubled
//   STRICT-NOT:   liger.fusion
func.func @argument_doubled(%x: tensor<?x64xf32>) -> tensor<?x64xf32> {
  %y = liger.add %x, %x : tensor<?x64xf32>
  return %y : tensor<?x64xf32>
}
