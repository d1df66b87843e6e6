// RUN: liger-opt %s --liger-fuse-cross-entropy-grad --split-input-file | FileCheck %s
// RUN: liger-opt %s --liger-fuse-cross-entropy-grad=report=true --split-input-file -o /dev/null | FileCheck %s --check-prefix=REPORT

// A loss and its gradient: one rowwise group, inputs (logits, target,
// grad_loss), results (loss, gradient).
// CHECK-LABEL: func.func @loss_and_grad
//  CHECK-SAME:   (%[[X:.+]]: tensor<?x1000xbf16>, %[[T:.+]]: tensor<?xi64>, %[[G:.+]]: tensor<f32>)
//       CHECK:   %[[R:.+]]:2 = liger.fusion rowwise(%[[X]], %[[T]], %[[G]])
//       CHECK:     %[[L:.+]] = liger.cross_entropy %{{.*}}, %{{.*}} label_smoothing
//       CHECK:     %[[D:.+]] = liger.cross_entropy_grad
//       CHECK:     liger.yield %[[L]], %[[D]]
//       CHECK:   return %[[R]]#0, %[[R]]#1
// REPORT: [liger-fuse-cross-entropy-grad] fused liger.cross_entropy, liger.cross_entropy_grad into a rowwise group
func.func @loss_and_grad(%x: tensor<?x1000xbf16>, %t: tensor<?xi64>, %g: tensor<f32>) -> (tensor<f32>, tensor<?x1000xbf16>) {
  %l = liger.cross_entropy %x, %t label_smoothing = 0.1 : tensor<?x1000xbf16>, tensor<?xi64>
  %d = liger.cross_entropy_grad %x, %t, %g label_smoothing = 0.1 : tensor<?x1000xbf16>, tensor<?xi64>, tensor<f32>
  return %l, %d : tensor<f32>, tensor<?x1000xbf16>
}

// -----

// With class weights, z-loss and reduction none: the weight joins the
// inputs once, every result of the loss is a result of the group.
// CHECK-LABEL: func.func @weighted_none
//       CHECK:   %[[R:.+]]:3 = liger.fusion rowwise(%{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}) : (tensor<?x64xf32>, tensor<?xi32>, tensor<64xf32>, tensor<?xf32>)
// REPORT: [liger-fuse-cross-entropy-grad] fused liger.cross_entropy, liger.cross_entropy_grad into a rowwise group
func.func @weighted_none(%x: tensor<?x64xf32>, %t: tensor<?xi32>, %w: tensor<64xf32>, %g: tensor<?xf32>) -> (tensor<?xf32>, tensor<?xf32>, tensor<?x64xf32>) {
  %l, %z = liger.cross_entropy %x, %t weight(%w : tensor<64xf32>) reduction = none lse_square_scale = 1.0e-4 z_loss : tensor<?x64xf32>, tensor<?xi32>
  %d = liger.cross_entropy_grad %x, %t, %g weight(%w : tensor<64xf32>) reduction = none lse_square_scale = 1.0e-4 : tensor<?x64xf32>, tensor<?xi32>, tensor<?xf32>
  return %l, %z, %d : tensor<?xf32>, tensor<?xf32>, tensor<?x64xf32>
}

// -----

// Near-miss: the gradient of a loss with another label smoothing.
// CHECK-LABEL: func.func @other_attribute
//   CHECK-NOT:   liger.fusion
// REPORT: [liger-fuse-cross-entropy-grad] left alone liger.cross_entropy_grad at {{.*}}: the loss on these logits has another label_smoothing
func.func @other_attribute(%x: tensor<?x64xf32>, %t: tensor<?xi64>, %g: tensor<f32>) -> (tensor<f32>, tensor<?x64xf32>) {
  %l = liger.cross_entropy %x, %t label_smoothing = 0.1 : tensor<?x64xf32>, tensor<?xi64>
  %d = liger.cross_entropy_grad %x, %t, %g : tensor<?x64xf32>, tensor<?xi64>, tensor<f32>
  return %l, %d : tensor<f32>, tensor<?x64xf32>
}

// -----

// Near-miss: other targets.
// CHECK-LABEL: func.func @other_targets
//   CHECK-NOT:   liger.fusion
// REPORT: [liger-fuse-cross-entropy-grad] left alone liger.cross_entropy_grad at {{.*}}: the loss on these logits reads other targets
func.func @other_targets(%x: tensor<?x64xf32>, %t: tensor<?xi64>, %u: tensor<?xi64>, %g: tensor<f32>) -> (tensor<f32>, tensor<?x64xf32>) {
  %l = liger.cross_entropy %x, %t : tensor<?x64xf32>, tensor<?xi64>
  %d = liger.cross_entropy_grad %x, %u, %g : tensor<?x64xf32>, tensor<?xi64>, tensor<f32>
  return %l, %d : tensor<f32>, tensor<?x64xf32>
}

// -----

// Near-miss: other class weights.
// CHECK-LABEL: func.func @other_weights
//   CHECK-NOT:   liger.fusion
// REPORT: [liger-fuse-cross-entropy-grad] left alone liger.cross_entropy_grad at {{.*}}: the loss on these logits has other class weights
func.func @other_weights(%x: tensor<?x64xf32>, %t: tensor<?xi64>, %w: tensor<64xf32>, %g: tensor<f32>) -> (tensor<f32>, tensor<?x64xf32>) {
  %l = liger.cross_entropy %x, %t weight(%w : tensor<64xf32>) : tensor<?x64xf32>, tensor<?xi64>
  %d = liger.cross_entropy_grad %x, %t, %g : tensor<?x64xf32>, tensor<?xi64>, tensor<f32>
  return %l, %d : tensor<f32>, tensor<?x64xf32>
}

// -----

// Near-miss: the incoming gradient is computed from the loss between the
// two ops, so the group could not be one kernel.
// CHECK-LABEL: func.func @grad_from_loss
//   CHECK-NOT:   liger.fusion
// REPORT: [liger-fuse-cross-entropy-grad] left alone liger.cross_entropy_grad at {{.*}}: 'liger.mul' reads an intermediate before the last fused op
func.func @grad_from_loss(%x: tensor<?x64xf32>, %t: tensor<?xi64>) -> tensor<?x64xf32> {
  %l = liger.cross_entropy %x, %t : tensor<?x64xf32>, tensor<?xi64>
  %g = liger.mul %l, %l : tensor<f32>
  %d = liger.cross_entropy_grad %x, %t, %g : tensor<?x64xf32>, tensor<?xi64>, tensor<f32>
  return %d : tensor<?x64xf32>
}

// -----

// Near-miss: the z-loss result is not read (the kernel writes every result
// of the loss; canonicalization would drop it first).
// CHECK-LABEL: func.func @z_loss_unread
//   CHECK-NOT:   liger.fusion
// REPORT: [liger-fuse-cross-entropy-grad] left alone liger.cross_entropy_grad at {{.*}}: a result of the loss is not read (the kernel writes every result)
func.func @z_loss_unread(%x: tensor<?x64xf32>, %t: tensor<?xi64>, %g: tensor<f32>) -> (tensor<f32>, tensor<?x64xf32>) {
  %l, %z = liger.cross_entropy %x, %t lse_square_scale = 1.0e-4 z_loss : tensor<?x64xf32>, tensor<?xi64>
  %d = liger.cross_entropy_grad %x, %t, %g lse_square_scale = 1.0e-4 : tensor<?x64xf32>, tensor<?xi64>, tensor<f32>
  return %l, %d : tensor<f32>, tensor<?x64xf32>
}

// -----

// A gradient alone is not touched (and not reported).
// CHECK-LABEL: func.func @grad_alone
//   CHECK-NOT:   liger.fusion
func.func @grad_alone(%x: tensor<?x64xf32>, %t: tensor<?xi64>, %g: tensor<f32>) -> tensor<?x64xf32> {
  %d = liger.cross_entropy_grad %x, %t, %g : tensor<?x64xf32>, tensor<?xi64>, tensor<f32>
  return %d : tensor<?x64xf32>
}

// -----

// Near-miss: the incoming gradient is the loss itself, which one pass over
// the rows cannot know before it has read them all.
// CHECK-LABEL: func.func @grad_of_its_own_loss
//   CHECK-NOT:   liger.fusion
// REPORT: [liger-fuse-cross-entropy-grad] left alone liger.cross_entropy_grad at fuse-cross-entropy-grad.mlir:{{[0-9]+}}:{{[0-9]+}}: the gradient reads a result of the loss
func.func @grad_of_its_own_loss(%x: tensor<?x64xf32>, %t: tensor<?xi64>) -> (tensor<f32>, tensor<?x64xf32>) {
  %l = liger.cross_entropy %x, %t : tensor<?x64xf32>, tensor<?xi64>
  %d = liger.cross_entropy_grad %x, %t, %l : tensor<?x64xf32>, tensor<?xi64>, tensor<f32>
  return %l, %d : tensor<f32>, tensor<?x64xf32>
}

// -----

// The class weights are the incoming gradient's shape too ([N] with
// reduction none, N = V): one value read as both joins the inputs once.
// CHECK-LABEL: func.func @weight_is_grad_loss
//  CHECK-SAME:   (%[[X:.+]]: tensor<8x8xf32>, %[[T:.+]]: tensor<8xi64>, %[[W:.+]]: tensor<8xf32>)
//       CHECK:   liger.fusion rowwise(%[[X]], %[[T]], %[[W]])
func.func @weight_is_grad_loss(%x: tensor<8x8xf32>, %t: tensor<8xi64>, %w: tensor<8xf32>) -> (tensor<8xf32>, tensor<8x8xf32>) {
  %l = liger.cross_entropy %x, %t weight(%w : tensor<8xf32>) reduction = none : tensor<8x8xf32>, tensor<8xi64>
  %d = liger.cross_entropy_grad %x, %t, %w weight(%w : tensor<8xf32>) reduction = none : tensor<8x8xf32>, tensor<8xi64>, tensor<8xf32>
  return %l, %d : tensor<8xf32>, tensor<8x8xf32>
}
