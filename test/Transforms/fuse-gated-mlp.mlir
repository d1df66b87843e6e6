// RUN: liger-opt %s --liger-fuse-gated-mlp --split-input-file | FileCheck %s
// RUN: liger-opt %s --liger-fuse-gated-mlp=allow-extra-outputs=false --split-input-file | FileCheck %s --check-prefix=STRICT
// RUN: liger-opt %s --liger-fuse-gated-mlp=report=true --split-input-file -o /dev/null | FileCheck %s --check-prefix=REPORT

// Gate and up projections of one activation and the SwiGLU: one matmul
// group; the down projection stays outside.
// CHECK-LABEL: func.func @swiglu_mlp
//  CHECK-SAME:   (%[[X:.+]]: tensor<?x64xbf16>, %[[WG:.+]]: tensor<96x64xbf16>, %[[WU:.+]]: tensor<96x64xbf16>, %[[WD:.+]]: tensor<64x96xbf16>)
//       CHECK:   %[[H:.+]] = liger.fusion matmul(%[[X]], %[[WG]], %[[WU]])
//       CHECK:     %[[G:.+]] = liger.linear %[[A:.+]], %{{.+}}
//       CHECK:     %[[U:.+]] = liger.linear %[[A]], %{{.+}}
//       CHECK:     liger.swiglu %[[G]], %[[U]]
//       CHECK:   liger.linear %[[H]], %[[WD]]
// REPORT: [liger-fuse-gated-mlp] fused liger.linear, liger.linear, liger.swiglu into a matmul group at fuse-gated-mlp.mlir:{{[0-9]+}}:{{[0-9]+}}
func.func @swiglu_mlp(%x: tensor<?x64xbf16>, %wg: tensor<96x64xbf16>, %wu: tensor<96x64xbf16>, %wd: tensor<64x96xbf16>) -> tensor<?x64xbf16> {
  %g = liger.linear %x, %wg : tensor<?x64xbf16>, tensor<96x64xbf16>
  %u = liger.linear %x, %wu : tensor<?x64xbf16>, tensor<96x64xbf16>
  %h = liger.swiglu %g, %u : tensor<?x96xbf16>
  %d = liger.linear %h, %wd : tensor<?x96xbf16>, tensor<64x96xbf16>
  return %d : tensor<?x64xbf16>
}

// -----

// GeGLU (Gemma) the same way.
// CHECK-LABEL: func.func @geglu_mlp
//       CHECK:   liger.fusion matmul
//       CHECK:     liger.geglu %{{.+}}, %{{.+}} approximate = tanh
func.func @geglu_mlp(%x: tensor<?x64xf32>, %wg: tensor<96x64xf32>, %wu: tensor<96x64xf32>) -> tensor<?x96xf32> {
  %g = liger.linear %x, %wg : tensor<?x64xf32>, tensor<96x64xf32>
  %u = liger.linear %x, %wu : tensor<?x64xf32>, tensor<96x64xf32>
  %h = liger.geglu %g, %u approximate = tanh : tensor<?x96xf32>
  return %h : tensor<?x96xf32>
}

// -----

// The gate projection is also returned: an extra result by default, no
// fusion with allow-extra-outputs=false.
// CHECK-LABEL: func.func @gate_also_returned
//       CHECK:   %[[G:.+]]:2 = liger.fusion matmul
//       CHECK:   return %[[G]]#1, %[[G]]#0
// STRICT-LABEL: func.func @gate_also_returned
//   STRICT-NOT:   liger.fusion
// REPORT: [liger-fuse-gated-mlp] fused liger.linear, liger.linear, liger.swiglu into a matmul group (1 extra result)
func.func @gate_also_returned(%x: tensor<?x64xf32>, %wg: tensor<96x64xf32>, %wu: tensor<96x64xf32>) -> (tensor<?x96xf32>, tensor<?x96xf32>) {
  %g = liger.linear %x, %wg : tensor<?x64xf32>, tensor<96x64xf32>
  %u = liger.linear %x, %wu : tensor<?x64xf32>, tensor<96x64xf32>
  %h = liger.swiglu %g, %u : tensor<?x96xf32>
  return %h, %g : tensor<?x96xf32>, tensor<?x96xf32>
}

// -----

// Near-miss: gate and up project different activations.
// CHECK-LABEL: func.func @different_activations
//   CHECK-NOT:   liger.fusion
// REPORT: [liger-fuse-gated-mlp] left alone liger.swiglu at fuse-gated-mlp.mlir:{{[0-9]+}}:{{[0-9]+}}: gate and up project different activations
func.func @different_activations(%x: tensor<?x64xf32>, %y: tensor<?x64xf32>, %wg: tensor<96x64xf32>, %wu: tensor<96x64xf32>) -> tensor<?x96xf32> {
  %g = liger.linear %x, %wg : tensor<?x64xf32>, tensor<96x64xf32>
  %u = liger.linear %y, %wu : tensor<?x64xf32>, tensor<96x64xf32>
  %h = liger.swiglu %g, %u : tensor<?x96xf32>
  return %h : tensor<?x96xf32>
}

// -----

// Near-miss: up is not a projection.
// CHECK-LABEL: func.func @up_not_projected
//   CHECK-NOT:   liger.fusion
// REPORT: [liger-fuse-gated-mlp] left alone liger.swiglu at fuse-gated-mlp.mlir:{{[0-9]+}}:{{[0-9]+}}: its up operand is not a liger.linear
func.func @up_not_projected(%x: tensor<?x64xf32>, %u: tensor<?x96xf32>, %wg: tensor<96x64xf32>) -> tensor<?x96xf32> {
  %g = liger.linear %x, %wg : tensor<?x64xf32>, tensor<96x64xf32>
  %h = liger.swiglu %g, %u : tensor<?x96xf32>
  return %h : tensor<?x96xf32>
}

// -----

// One projection read as both gate and up (silu(g) * g): a group of the
// projection and the activation, the projection in it once.
// CHECK-LABEL: func.func @gate_is_up
//  CHECK-SAME:   (%[[X:.+]]: tensor<?x64xf32>, %[[W:.+]]: tensor<96x64xf32>)
//       CHECK:   liger.fusion matmul(%[[X]], %[[W]])
//       CHECK:     %[[G:.+]] = liger.linear
//   CHECK-NOT:     liger.linear
//       CHECK:     liger.swiglu %[[G]], %[[G]]
// STRICT-LABEL: func.func @gate_is_up
//       STRICT:   liger.fusion matmul
// REPORT: [liger-fuse-gated-mlp] fused liger.linear, liger.swiglu into a matmul group at fuse-gated-mlp.mlir:{{[0-9]+}}:{{[0-9]+}}
func.func @gate_is_up(%x: tensor<?x64xf32>, %w: tensor<96x64xf32>) -> tensor<?x96xf32> {
  %g = liger.linear %x, %w : tensor<?x64xf32>, tensor<96x64xf32>
  %h = liger.swiglu %g, %g : tensor<?x96xf32>
  return %h : tensor<?x96xf32>
}

// -----

// The same for GeGLU, with the projection also returned (an extra result).
// CHECK-LABEL: func.func @geglu_gate_is_up
//       CHECK:   %[[R:.+]]:2 = liger.fusion matmul
//       CHECK:     %[[G:.+]] = liger.linear
//       CHECK:     %[[H:.+]] = liger.geglu %[[G]], %[[G]]
//       CHECK:     liger.yield %[[G]], %[[H]]
//       CHECK:   return %[[R]]#1, %[[R]]#0
// STRICT-LABEL: func.func @geglu_gate_is_up
//   STRICT-NOT:   liger.fusion
func.func @geglu_gate_is_up(%x: tensor<?x64xf32>, %w: tensor<96x64xf32>) -> (tensor<?x96xf32>, tensor<?x96xf32>) {
  %g = liger.linear %x, %w : tensor<?x64xf32>, tensor<96x64xf32>
  %h = liger.geglu %g, %g : tensor<?x96xf32>
  return %h, %g : tensor<?x96xf32>, tensor<?x96xf32>
}

// -----

// Gate and up are two projections with one weight: both stay, the weight is
// one input of the group.
// CHECK-LABEL: func.func @gate_and_up_share_a_weight
//  CHECK-SAME:   (%[[X:.+]]: tensor<?x64xf32>, %[[W:.+]]: tensor<96x64xf32>)
//       CHECK:   liger.fusion matmul(%[[X]], %[[W]])
//       CHECK:     ^bb0(%[[A:.+]]: tensor<?x64xf32>, %[[B:.+]]: tensor<96x64xf32>):
//       CHECK:     %[[G:.+]] = liger.linear %[[A]], %[[B]]
//       CHECK:     %[[U:.+]] = liger.linear %[[A]], %[[B]]
//       CHECK:     liger.swiglu %[[G]], %[[U]]
// STRICT-LABEL: func.func @gate_and_up_share_a_weight
//       STRICT:   liger.fusion matmul
func.func @gate_and_up_share_a_weight(%x: tensor<?x64xf32>, %w: tensor<96x64xf32>) -> tensor<?x96xf32> {
  %g = liger.linear %x, %w : tensor<?x64xf32>, tensor<96x64xf32>
  %u = liger.linear %x, %w : tensor<?x64xf32>, tensor<96x64xf32>
  %h = liger.swiglu %g, %u : tensor<?x96xf32>
  return %h : tensor<?x96xf32>
}
