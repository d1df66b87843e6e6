// RUN: liger-opt %s --liger-fuse-linear-cross-entropy --split-input-file | FileCheck %s
// RUN: liger-opt %s --liger-fuse-linear-cross-entropy=report=true --split-input-file -o /dev/null | FileCheck %s --check-prefix=REPORT

// lm_head + cross-entropy: one fused_linear_cross_entropy with the loss's
// attributes (and the projection's bias) in a loss group.
// CHECK-LABEL: func.func @lm_head_loss
//  CHECK-SAME:   (%[[H:.+]]: tensor<?x64xbf16>, %[[W:.+]]: tensor<1000x64xbf16>, %[[B:.+]]: tensor<1000xbf16>, %[[T:.+]]: tensor<?xi64>)
//       CHECK:   %[[L:.+]]:2 = liger.fusion loss(%[[H]], %[[W]], %[[T]], %[[B]])
//       CHECK:     liger.fused_linear_cross_entropy %{{.+}}, %{{.+}}, %{{.+}} bias(%{{.+}} : tensor<1000xbf16>) ignore_index = -1 label_smoothing = 1.000000e-01 reduction = sum softcap = 3.000000e+01 lse_square_scale = 9.99999974E-5 z_loss
//   CHECK-NOT:   liger.linear
//       CHECK:   return %[[L]]#0, %[[L]]#1
// REPORT: [liger-fuse-linear-cross-entropy] fused liger.linear, liger.cross_entropy into a loss group at fuse-linear-cross-entropy.mlir:{{[0-9]+}}:{{[0-9]+}}
func.func @lm_head_loss(%h: tensor<?x64xbf16>, %w: tensor<1000x64xbf16>, %b: tensor<1000xbf16>, %t: tensor<?xi64>) -> (tensor<f32>, tensor<f32>) {
  %logits = liger.linear %h, %w, %b : tensor<?x64xbf16>, tensor<1000x64xbf16>, tensor<1000xbf16>
  %l, %z = liger.cross_entropy %logits, %t ignore_index = -1 label_smoothing = 0.1 reduction = sum softcap = 30.0 lse_square_scale = 1.0e-4 z_loss : tensor<?x1000xbf16>, tensor<?xi64>
  return %l, %z : tensor<f32>, tensor<f32>
}

// -----

// A fused_linear_cross_entropy written as such gets its group.
// CHECK-LABEL: func.func @wraps_flce
//       CHECK:   liger.fusion loss
func.func @wraps_flce(%h: tensor<?x64xf32>, %w: tensor<100x64xf32>, %t: tensor<?xi32>) -> tensor<f32> {
  %l = liger.fused_linear_cross_entropy %h, %w, %t : tensor<?x64xf32>, tensor<100x64xf32>, tensor<?xi32>
  return %l : tensor<f32>
}

// -----

// Near-miss: the logits are returned too; fusing would still store them.
// CHECK-LABEL: func.func @logits_returned
//   CHECK-NOT:   liger.fusion
//       CHECK:   liger.cross_entropy
// REPORT: [liger-fuse-linear-cross-entropy] left alone liger.cross_entropy at fuse-linear-cross-entropy.mlir:{{[0-9]+}}:{{[0-9]+}}: the logits are also read by 'func.return', so they would be stored anyway
func.func @logits_returned(%h: tensor<?x64xf32>, %w: tensor<100x64xf32>, %t: tensor<?xi64>) -> (tensor<f32>, tensor<?x100xf32>) {
  %logits = liger.linear %h, %w : tensor<?x64xf32>, tensor<100x64xf32>
  %l = liger.cross_entropy %logits, %t : tensor<?x100xf32>, tensor<?xi64>
  return %l, %logits : tensor<f32>, tensor<?x100xf32>
}

// -----

// Class weights go along, as the fused op's class_weight (after the bias).
// CHECK-LABEL: func.func @class_weights
//  CHECK-SAME:   (%[[H:.+]]: tensor<?x64xf32>, %[[W:.+]]: tensor<100x64xf32>, %[[B:.+]]: tensor<100xf32>, %[[T:.+]]: tensor<?xi64>, %[[CW:.+]]: tensor<100xf32>)
//       CHECK:   liger.fusion loss(%[[H]], %[[W]], %[[T]], %[[B]], %[[CW]])
//       CHECK:     liger.fused_linear_cross_entropy %{{.+}}, %{{.+}}, %{{.+}} bias(%{{.+}} : tensor<100xf32>) class_weight(%{{.+}} : tensor<100xf32>) label_smoothing
// REPORT: [liger-fuse-linear-cross-entropy] fused liger.linear, liger.cross_entropy into a loss group
func.func @class_weights(%h: tensor<?x64xf32>, %w: tensor<100x64xf32>, %b: tensor<100xf32>, %t: tensor<?xi64>, %cw: tensor<100xf32>) -> tensor<f32> {
  %logits = liger.linear %h, %w, %b : tensor<?x64xf32>, tensor<100x64xf32>, tensor<100xf32>
  %l = liger.cross_entropy %logits, %t weight(%cw : tensor<100xf32>) label_smoothing = 0.1 : tensor<?x100xf32>, tensor<?xi64>
  return %l : tensor<f32>
}

// -----

// A weighted loss's backward joins it when it has the same class weights.
// CHECK-LABEL: func.func @weighted_forward_and_backward
//       CHECK:   %[[R:.+]]:3 = liger.fusion loss(
//       CHECK:     liger.fused_linear_cross_entropy_grad {{.*}} class_weight(
// REPORT: [liger-fuse-linear-cross-entropy] fused liger.fusion loss, liger.fused_linear_cross_entropy_grad into a loss group
func.func @weighted_forward_and_backward(%h: tensor<?x64xf32>, %w: tensor<100x64xf32>, %t: tensor<?xi64>, %cw: tensor<100xf32>, %g: tensor<f32>) -> (tensor<f32>, tensor<?x64xf32>, tensor<100x64xf32>) {
  %l = liger.fused_linear_cross_entropy %h, %w, %t class_weight(%cw : tensor<100xf32>) : tensor<?x64xf32>, tensor<100x64xf32>, tensor<?xi64>
  %dh, %dw = liger.fused_linear_cross_entropy_grad %h, %w, %t, %g class_weight(%cw : tensor<100xf32>) : tensor<?x64xf32>, tensor<100x64xf32>, tensor<?xi64>, tensor<f32>
  return %l, %dh, %dw : tensor<f32>, tensor<?x64xf32>, tensor<100x64xf32>
}

// -----

// Near-miss: the backward of a loss with other class weights (or none).
// CHECK-LABEL: func.func @backward_other_class_weights
//       CHECK:   liger.yield
//       CHECK:   liger.fused_linear_cross_entropy_grad
// REPORT: [liger-fuse-linear-cross-entropy] left alone liger.fused_linear_cross_entropy_grad at {{.*}}: the loss of this lm_head has other class weights
func.func @backward_other_class_weights(%h: tensor<?x64xf32>, %w: tensor<100x64xf32>, %t: tensor<?xi64>, %cw: tensor<100xf32>, %g: tensor<f32>) -> (tensor<f32>, tensor<?x64xf32>, tensor<100x64xf32>) {
  %l = liger.fused_linear_cross_entropy %h, %w, %t class_weight(%cw : tensor<100xf32>) : tensor<?x64xf32>, tensor<100x64xf32>, tensor<?xi64>
  %dh, %dw = liger.fused_linear_cross_entropy_grad %h, %w, %t, %g : tensor<?x64xf32>, tensor<100x64xf32>, tensor<?xi64>, tensor<f32>
  return %l, %dh, %dw : tensor<f32>, tensor<?x64xf32>, tensor<100x64xf32>
}

// -----

// Near-miss: logits that are an argument, not a projection.
// CHECK-LABEL: func.func @logits_given
//   CHECK-NOT:   liger.fusion
func.func @logits_given(%logits: tensor<?x100xf32>, %t: tensor<?xi64>) -> tensor<f32> {
  %l = liger.cross_entropy %logits, %t : tensor<?x100xf32>, tensor<?xi64>
  return %l : tensor<f32>
}

// -----

// The lm_head's backward joins its forward's loss group: one plan for the
// loss and both gradients.
// CHECK-LABEL: func.func @forward_and_backward
//       CHECK:   %[[R:.+]]:3 = liger.fusion loss(
//       CHECK:     liger.fused_linear_cross_entropy %
//       CHECK:     liger.fused_linear_cross_entropy_grad
//       CHECK:   return %[[R]]#0, %[[R]]#1, %[[R]]#2
// REPORT: [liger-fuse-linear-cross-entropy] fused liger.fused_linear_cross_entropy into a loss group
// REPORT: [liger-fuse-linear-cross-entropy] fused liger.fusion loss, liger.fused_linear_cross_entropy_grad into a loss group
func.func @forward_and_backward(%h: tensor<?x64xbf16>, %w: tensor<1000x64xbf16>, %t: tensor<?xi64>, %g: tensor<f32>) -> (tensor<f32>, tensor<?x64xbf16>, tensor<1000x64xbf16>) {
  %l = liger.fused_linear_cross_entropy %h, %w, %t label_smoothing = 0.1 : tensor<?x64xbf16>, tensor<1000x64xbf16>, tensor<?xi64>
  %dh, %dw = liger.fused_linear_cross_entropy_grad %h, %w, %t, %g label_smoothing = 0.1 : tensor<?x64xbf16>, tensor<1000x64xbf16>, tensor<?xi64>, tensor<f32>
  return %l, %dh, %dw : tensor<f32>, tensor<?x64xbf16>, tensor<1000x64xbf16>
}

// -----

// From the projection and its loss: the forward is rewritten first, then
// the backward (with the bias) joins it.
// CHECK-LABEL: func.func @linear_loss_and_backward
//       CHECK:   %[[R:.+]]:4 = liger.fusion loss(
//   CHECK-NOT:   liger.linear
// REPORT: [liger-fuse-linear-cross-entropy] fused liger.linear, liger.cross_entropy into a loss group
// REPORT: [liger-fuse-linear-cross-entropy] fused liger.fusion loss, liger.fused_linear_cross_entropy_grad into a loss group
func.func @linear_loss_and_backward(%h: tensor<?x64xf32>, %w: tensor<100x64xf32>, %b: tensor<100xf32>, %t: tensor<?xi64>, %g: tensor<f32>) -> (tensor<f32>, tensor<?x64xf32>, tensor<100x64xf32>, tensor<100xf32>) {
  %logits = liger.linear %h, %w, %b : tensor<?x64xf32>, tensor<100x64xf32>, tensor<100xf32>
  %l = liger.cross_entropy %logits, %t : tensor<?x100xf32>, tensor<?xi64>
  %dh, %dw, %db = liger.fused_linear_cross_entropy_grad %h, %w, %t, %g bias(%b : tensor<100xf32>) : tensor<?x64xf32>, tensor<100x64xf32>, tensor<?xi64>, tensor<f32>
  return %l, %dh, %dw, %db : tensor<f32>, tensor<?x64xf32>, tensor<100x64xf32>, tensor<100xf32>
}

// -----

// Near-miss: the backward of a loss with other attributes.
// CHECK-LABEL: func.func @backward_other_attributes
//       CHECK:   liger.fusion loss
//       CHECK:   liger.yield
//       CHECK:   liger.fused_linear_cross_entropy_grad
// REPORT: [liger-fuse-linear-cross-entropy] left alone liger.fused_linear_cross_entropy_grad at {{.*}}: the loss of this lm_head has another reduction
func.func @backward_other_attributes(%h: tensor<?x64xf32>, %w: tensor<100x64xf32>, %t: tensor<?xi64>, %g: tensor<f32>) -> (tensor<f32>, tensor<?x64xf32>, tensor<100x64xf32>) {
  %l = liger.fused_linear_cross_entropy %h, %w, %t reduction = sum : tensor<?x64xf32>, tensor<100x64xf32>, tensor<?xi64>
  %dh, %dw = liger.fused_linear_cross_entropy_grad %h, %w, %t, %g : tensor<?x64xf32>, tensor<100x64xf32>, tensor<?xi64>, tensor<f32>
  return %l, %dh, %dw : tensor<f32>, tensor<?x64xf32>, tensor<100x64xf32>
}

// -----

// Near-miss: other targets.
// CHECK-LABEL: func.func @backward_other_targets
//       CHECK:   liger.yield
//       CHECK:   liger.fused_linear_cross_entropy_grad
// REPORT: [liger-fuse-linear-cross-entropy] left alone liger.fused_linear_cross_entropy_grad at {{.*}}: the loss of this lm_head reads other targets
func.func @backward_other_targets(%h: tensor<?x64xf32>, %w: tensor<100x64xf32>, %t: tensor<?xi64>, %u: tensor<?xi64>, %g: tensor<f32>) -> (tensor<f32>, tensor<?x64xf32>, tensor<100x64xf32>) {
  %l = liger.fused_linear_cross_entropy %h, %w, %t : tensor<?x64xf32>, tensor<100x64xf32>, tensor<?xi64>
  %dh, %dw = liger.fused_linear_cross_entropy_grad %h, %w, %u, %g : tensor<?x64xf32>, tensor<100x64xf32>, tensor<?xi64>, tensor<f32>
  return %l, %dh, %dw : tensor<f32>, tensor<?x64xf32>, tensor<100x64xf32>
}

// -----

// Near-miss: the incoming gradient is computed from the loss in between,
// so the group could not be one plan.
// CHECK-LABEL: func.func @backward_grad_from_loss
//       CHECK:   liger.yield
//       CHECK:   liger.mul
//       CHECK:   liger.fused_linear_cross_entropy_grad
// REPORT: [liger-fuse-linear-cross-entropy] left alone liger.fused_linear_cross_entropy_grad at {{.*}}: 'liger.mul' reads an intermediate before the last fused op
func.func @backward_grad_from_loss(%h: tensor<?x64xf32>, %w: tensor<100x64xf32>, %t: tensor<?xi64>) -> (tensor<?x64xf32>, tensor<100x64xf32>) {
  %l = liger.fused_linear_cross_entropy %h, %w, %t : tensor<?x64xf32>, tensor<100x64xf32>, tensor<?xi64>
  %g = liger.mul %l, %l : tensor<f32>
  %dh, %dw = liger.fused_linear_cross_entropy_grad %h, %w, %t, %g : tensor<?x64xf32>, tensor<100x64xf32>, tensor<?xi64>, tensor<f32>
  return %dh, %dw : tensor<?x64xf32>, tensor<100x64xf32>
}

// -----

// A backward alone is not touched (and not reported).
// CHECK-LABEL: func.func @backward_alone
//   CHECK-NOT:   liger.fusion
func.func @backward_alone(%h: tensor<?x64xf32>, %w: tensor<100x64xf32>, %t: tensor<?xi64>, %g: tensor<f32>) -> (tensor<?x64xf32>, tensor<100x64xf32>) {
  %dh, %dw = liger.fused_linear_cross_entropy_grad %h, %w, %t, %g : tensor<?x64xf32>, tensor<100x64xf32>, tensor<?xi64>, tensor<f32>
  return %dh, %dw : tensor<?x64xf32>, tensor<100x64xf32>
}

// -----

// An lm_head that projects the hidden states by themselves (a square
// [64, 64] case): the fused op reads them as hidden and weight, the group
// takes them once.
// CHECK-LABEL: func.func @hidden_is_the_weight
//  CHECK-SAME:   (%[[H:.+]]: tensor<64x64xf32>, %[[T:.+]]: tensor<64xi64>)
//       CHECK:   liger.fusion loss(%[[H]], %[[T]])
//       CHECK:     ^bb0(%[[A:.+]]: tensor<64x64xf32>, %[[B:.+]]: tensor<64xi64>):
//       CHECK:     liger.fused_linear_cross_entropy %[[A]], %[[A]], %[[B]]
// REPORT: [liger-fuse-linear-cross-entropy] fused liger.linear, liger.cross_entropy into a loss group at fuse-linear-cross-entropy.mlir:{{[0-9]+}}:{{[0-9]+}}
func.func @hidden_is_the_weight(%h: tensor<64x64xf32>, %t: tensor<64xi64>) -> tensor<f32> {
  %logits = liger.linear %h, %h : tensor<64x64xf32>, tensor<64x64xf32>
  %l = liger.cross_entropy %logits, %t : tensor<64x64xf32>, tensor<64xi64>
  return %l : tensor<f32>
}
