// RUN: liger-opt %s --liger-fuse-add-rms-norm --split-input-file | FileCheck %s
// RUN: liger-opt %s --liger-fuse-add-rms-norm=report=true --split-input-file -o /dev/null | FileCheck %s --check-prefix=REPORT

// The residual add and the norm of the sum become one add_rms_norm in a
// rowwise group; the sum (the next residual) is its second result.
// CHECK-LABEL: func.func @add_then_norm
//  CHECK-SAME:   (%[[H:.+]]: tensor<?x64xbf16>, %[[R:.+]]: tensor<?x64xbf16>, %[[W:.+]]: tensor<64xbf16>)
//       CHECK:   %[[G:.+]]:2 = liger.fusion rowwise(%[[H]], %[[R]], %[[W]])
//       CHECK:     %[[N:.+]], %[[S:.+]] = liger.add_rms_norm %{{.+}}, %{{.+}}, %{{.+}} eps = 9.99999974E-6 casting = gemma
//       CHECK:     liger.yield %[[N]], %[[S]]
//       CHECK:   return %[[G]]#0, %[[G]]#1
// REPORT: [liger-fuse-add-rms-norm] fused liger.add, liger.rms_norm into a rowwise group at fuse-add-rms-norm.mlir:{{[0-9]+}}:{{[0-9]+}}
func.func @add_then_norm(%h: tensor<?x64xbf16>, %r: tensor<?x64xbf16>, %w: tensor<64xbf16>) -> (tensor<?x64xbf16>, tensor<?x64xbf16>) {
  %s = liger.add %h, %r : tensor<?x64xbf16>
  %n = liger.rms_norm %s, %w eps = 1.0e-5 casting = gemma : tensor<?x64xbf16>, tensor<64xbf16>
  return %n, %s : tensor<?x64xbf16>, tensor<?x64xbf16>
}

// -----

// rstd survives the rewrite.
// CHECK-LABEL: func.func @keeps_rstd
//       CHECK:   liger.fusion rowwise
//       CHECK:     liger.add_rms_norm %{{.+}}, %{{.+}}, %{{.+}} rstd
//       CHECK:     liger.yield %{{.+}}, %{{.+}} : tensor<?x64xf32>, tensor<?xf32>
func.func @keeps_rstd(%h: tensor<?x64xf32>, %r: tensor<?x64xf32>, %w: tensor<64xf32>) -> (tensor<?x64xf32>, tensor<?xf32>) {
  %s = liger.add %h, %r : tensor<?x64xf32>
  %n, %rstd = liger.rms_norm %s, %w rstd : tensor<?x64xf32>, tensor<64xf32>
  return %n, %rstd : tensor<?x64xf32>, tensor<?xf32>
}

// -----

// An add_rms_norm written as such gets its group.
// CHECK-LABEL: func.func @wraps_add_rms_norm
//       CHECK:   liger.fusion rowwise
//  CHECK-NEXT:   ^bb0
//  CHECK-NEXT:     liger.add_rms_norm
// REPORT: [liger-fuse-add-rms-norm] fused liger.add_rms_norm into a rowwise group
func.func @wraps_add_rms_norm(%h: tensor<?x64xf32>, %r: tensor<?x64xf32>, %w: tensor<64xf32>) -> tensor<?x64xf32> {
  %n, %s = liger.add_rms_norm %h, %r, %w : tensor<?x64xf32>, tensor<64xf32>
  return %n : tensor<?x64xf32>
}

// -----

// Near-miss: the sum is read before the norm, where the fused op cannot be.
// CHECK-LABEL: func.func @sum_read_before_norm
//   CHECK-NOT:   liger.fusion
//       CHECK:   liger.add
//       CHECK:   liger.silu
//       CHECK:   liger.rms_norm
// REPORT: [liger-fuse-add-rms-norm] left alone liger.rms_norm at fuse-add-rms-norm.mlir:{{[0-9]+}}:{{[0-9]+}}: 'liger.silu' reads the sum before the norm
func.func @sum_read_before_norm(%h: tensor<?x64xf32>, %r: tensor<?x64xf32>, %w: tensor<64xf32>) -> (tensor<?x64xf32>, tensor<?x64xf32>) {
  %s = liger.add %h, %r : tensor<?x64xf32>
  %a = liger.silu %s : tensor<?x64xf32>
  %n = liger.rms_norm %s, %w : tensor<?x64xf32>, tensor<64xf32>
  return %n, %a : tensor<?x64xf32>, tensor<?x64xf32>
}

// -----

// Near-miss: a norm of something other than an add is not this pass's.
// CHECK-LABEL: func.func @norm_of_mul
//   CHECK-NOT:   liger.fusion
//       CHECK:   liger.rms_norm
func.func @norm_of_mul(%h: tensor<?x64xf32>, %r: tensor<?x64xf32>, %w: tensor<64xf32>) -> tensor<?x64xf32> {
  %m = liger.mul %h, %r : tensor<?x64xf32>
  %n = liger.rms_norm %m, %w : tensor<?x64xf32>, tensor<64xf32>
  return %n : tensor<?x64xf32>
}

// -----

// A value added to itself: the fused op reads it as input and residual, the
// group takes it once.
// CHECK-LABEL: func.func @add_to_itself
//  CHECK-SAME:   (%[[H:.+]]: tensor<?x64xf32>, %[[W:.+]]: tensor<64xf32>)
//       CHECK:   liger.fusion rowwise(%[[H]], %[[W]])
//       CHECK:     ^bb0(%[[A:.+]]: tensor<?x64xf32>, %[[B:.+]]: tensor<64xf32>):
//       CHECK:     liger.add_rms_norm %[[A]], %[[A]], %[[B]]
// REPORT: [liger-fuse-add-rms-norm] fused liger.add, liger.rms_norm into a rowwise group at fuse-add-rms-norm.mlir:{{[0-9]+}}:{{[0-9]+}}
func.func @add_to_itself(%h: tensor<?x64xf32>, %w: tensor<64xf32>) -> (tensor<?x64xf32>, tensor<?x64xf32>) {
  %s = liger.add %h, %h : tensor<?x64xf32>
  %n = liger.rms_norm %s, %w : tensor<?x64xf32>, tensor<64xf32>
  return %n, %s : tensor<?x64xf32>, tensor<?x64xf32>
}
