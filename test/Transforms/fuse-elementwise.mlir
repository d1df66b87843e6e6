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
