// RUN: liger-opt %s --liger-fuse-gated-mlp --split-input-file | FileCheck %s
// RUN: liger-opt %s --liger-fuse-gated-mlp=allow-extra-outputs=false --split-input-file | FileCheck %s --check-prefix=STRICT
// RUN: liger-opt %s --liger-fuse-gated-mlp=report=true --split-input-file -o /dev/null | FileCheck %s --check-prefix=REPORT
// The gradients (gradients=true is the pass's default): off, the pass
// leaves them alone, and so does liger-fuse unless gradient-epilogues is on
// (liger-compile sets it, unless --no-matmul-kernels).
// RUN: liger-opt %s --liger-fuse-gated-mlp=gradients=false --split-input-file | FileCheck %s --check-prefix=OFF
// RUN: liger-opt %s --liger-fuse --split-input-file | FileCheck %s --check-prefix=OFF
// RUN: liger-opt %s --liger-fuse=gradient-epilogues=true --split-input-file | FileCheck %s --check-prefix=GRAD

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

// -----

// The MLP's backward: dh = dy · W_down, then SwiGLU's gradient: one matmul
// group writing dgate and dup; the gate/up products' own gradients stay
// outside.
// CHECK-LABEL: func.func @swiglu_backward
//  CHECK-SAME:   (%[[DY:.+]]: tensor<?x64xbf16>, %[[WD:.+]]: tensor<64x96xbf16>, %[[G:.+]]: tensor<?x96xbf16>, %[[U:.+]]: tensor<?x96xbf16>, %[[WG:.+]]: tensor<96x64xbf16>)
//       CHECK:   %[[R:.+]]:2 = liger.fusion matmul(%[[DY]], %[[WD]], %[[G]], %[[U]])
//  CHECK-SAME:     -> (tensor<?x96xbf16>, tensor<?x96xbf16>)
//       CHECK:     %[[DH:.+]] = liger.linear_grad_input %{{.+}}, %{{.+}}
//       CHECK:     %[[DG:.+]], %[[DU:.+]] = liger.swiglu_grad %[[DH]], %{{.+}}, %{{.+}}
//       CHECK:     liger.yield %[[DG]], %[[DU]]
//       CHECK:   liger.linear_grad_input %[[R]]#0, %[[WG]]
//   OFF-LABEL: func.func @swiglu_backward
//   OFF-NOT:   liger.fusion matmul
//  GRAD-LABEL: func.func @swiglu_backward
//       GRAD:   liger.fusion matmul
//       GRAD:     liger.linear_grad_input
//  GRAD-NEXT:     liger.swiglu_grad
// REPORT: [liger-fuse-gated-mlp] fused liger.linear_grad_input, liger.swiglu_grad into a matmul group at fuse-gated-mlp.mlir:{{[0-9]+}}:{{[0-9]+}}
func.func @swiglu_backward(%dy: tensor<?x64xbf16>, %wd: tensor<64x96xbf16>, %g: tensor<?x96xbf16>,
                           %u: tensor<?x96xbf16>, %wg: tensor<96x64xbf16>) -> (tensor<?x64xbf16>, tensor<?x96xbf16>) {
  %dh = liger.linear_grad_input %dy, %wd : tensor<?x64xbf16>, tensor<64x96xbf16>
  %dg, %du = liger.swiglu_grad %dh, %g, %u : tensor<?x96xbf16>
  %dx = liger.linear_grad_input %dg, %wg : tensor<?x96xbf16>, tensor<96x64xbf16>
  return %dx, %du : tensor<?x64xbf16>, tensor<?x96xbf16>
}

// -----

// GeGLU's gradient (Gemma) the same way, its approximation kept; a
// [B, T, H] gradient too.
// CHECK-LABEL: func.func @geglu_backward
//       CHECK:   liger.fusion matmul
//       CHECK:     liger.linear_grad_input
//       CHECK:     liger.geglu_grad %{{.+}}, %{{.+}}, %{{.+}} approximate = tanh
// REPORT: [liger-fuse-gated-mlp] fused liger.linear_grad_input, liger.geglu_grad into a matmul group
func.func @geglu_backward(%dy: tensor<2x?x64xf16>, %wd: tensor<64x96xf16>, %g: tensor<2x?x96xf16>,
                          %u: tensor<2x?x96xf16>) -> (tensor<2x?x96xf16>, tensor<2x?x96xf16>) {
  %dh = liger.linear_grad_input %dy, %wd : tensor<2x?x64xf16>, tensor<64x96xf16>
  %dg, %du = liger.geglu_grad %dh, %g, %u approximate = tanh : tensor<2x?x96xf16>
  return %dg, %du : tensor<2x?x96xf16>, tensor<2x?x96xf16>
}

// -----

// dh is read elsewhere too: an extra result by default (three results),
// no fusion with allow-extra-outputs=false.
// CHECK-LABEL: func.func @dh_also_returned
//       CHECK:   %{{.+}}:3 = liger.fusion matmul
//  GRAD-LABEL: func.func @dh_also_returned
//       GRAD:   %{{.+}}:3 = liger.fusion matmul
//  STRICT-LABEL: func.func @dh_also_returned
//   STRICT-NOT:  liger.fusion
// REPORT: [liger-fuse-gated-mlp] fused liger.linear_grad_input, liger.swiglu_grad into a matmul group (1 extra result)
func.func @dh_also_returned(%dy: tensor<?x64xbf16>, %wd: tensor<64x96xbf16>, %g: tensor<?x96xbf16>,
                            %u: tensor<?x96xbf16>) -> (tensor<?x96xbf16>, tensor<?x96xbf16>, tensor<?x96xbf16>) {
  %dh = liger.linear_grad_input %dy, %wd : tensor<?x64xbf16>, tensor<64x96xbf16>
  %dg, %du = liger.swiglu_grad %dh, %g, %u : tensor<?x96xbf16>
  return %dh, %dg, %du : tensor<?x96xbf16>, tensor<?x96xbf16>, tensor<?x96xbf16>
}

// -----

// Near miss: the incoming gradient is not a dx product (a function
// argument: the down projection's gradient came from elsewhere).
// CHECK-LABEL: func.func @grad_not_a_product
//   CHECK-NOT:   liger.fusion
// REPORT: [liger-fuse-gated-mlp] left alone liger.swiglu_grad at fuse-gated-mlp.mlir:{{[0-9]+}}:{{[0-9]+}}: its incoming gradient is not a liger.linear_grad_input (the down projection's dx)
func.func @grad_not_a_product(%dh: tensor<?x96xbf16>, %g: tensor<?x96xbf16>,
                              %u: tensor<?x96xbf16>) -> (tensor<?x96xbf16>, tensor<?x96xbf16>) {
  %dg, %du = liger.swiglu_grad %dh, %g, %u : tensor<?x96xbf16>
  return %dg, %du : tensor<?x96xbf16>, tensor<?x96xbf16>
}

// -----

// Near miss: the incoming gradient is a sum (dh + a residual's gradient),
// not the product itself.
// CHECK-LABEL: func.func @grad_is_a_sum
//   CHECK-NOT:   liger.fusion matmul
// REPORT: [liger-fuse-gated-mlp] left alone liger.swiglu_grad at fuse-gated-mlp.mlir:{{[0-9]+}}:{{[0-9]+}}: its incoming gradient is not a liger.linear_grad_input
func.func @grad_is_a_sum(%dy: tensor<?x64xbf16>, %wd: tensor<64x96xbf16>, %r: tensor<?x96xbf16>,
                         %g: tensor<?x96xbf16>, %u: tensor<?x96xbf16>) -> (tensor<?x96xbf16>, tensor<?x96xbf16>) {
  %dh = liger.linear_grad_input %dy, %wd : tensor<?x64xbf16>, tensor<64x96xbf16>
  %s = liger.add %dh, %r : tensor<?x96xbf16>
  %dg, %du = liger.swiglu_grad %s, %g, %u : tensor<?x96xbf16>
  return %dg, %du : tensor<?x96xbf16>, tensor<?x96xbf16>
}

// -----

// Near miss: f32, which the matmul templates do not take (the gradient
// keeps its own kernel).
// CHECK-LABEL: func.func @f32_backward
//   CHECK-NOT:   liger.fusion matmul
// REPORT: [liger-fuse-gated-mlp] left alone liger.swiglu_grad at fuse-gated-mlp.mlir:{{[0-9]+}}:{{[0-9]+}}: the matmul templates take bf16 or f16: the gradient stays a kernel of its own
func.func @f32_backward(%dy: tensor<?x64xf32>, %wd: tensor<64x96xf32>, %g: tensor<?x96xf32>,
                        %u: tensor<?x96xf32>) -> (tensor<?x96xf32>, tensor<?x96xf32>) {
  %dh = liger.linear_grad_input %dy, %wd : tensor<?x64xf32>, tensor<64x96xf32>
  %dg, %du = liger.swiglu_grad %dh, %g, %u : tensor<?x96xf32>
  return %dg, %du : tensor<?x96xf32>, tensor<?x96xf32>
}
