// RUN: liger-opt %s --liger-fuse-norm-linear --split-input-file | FileCheck %s
// RUN: liger-opt %s --liger-fuse-norm-linear=max-consumers=1 --split-input-file | FileCheck %s --check-prefix=ONE
// RUN: liger-opt %s --liger-fuse-norm-linear=report=true --split-input-file -o /dev/null | FileCheck %s --check-prefix=REPORT
// fold=false (what liger-fuse passes unless norm-prologue=true): every
// match is reported and left a rowwise op; the near-misses keep their own
// reasons.
// RUN: liger-opt %s '--liger-fuse-norm-linear=fold=false' --split-input-file | FileCheck %s --check-prefix=NOFOLD
// RUN: liger-opt %s '--liger-fuse-norm-linear=fold=false report=true' --split-input-file -o /dev/null | FileCheck %s --check-prefix=NOFOLD-REPORT

// A norm read by one projection: its prologue.
// CHECK-LABEL: func.func @norm_then_linear
//  CHECK-SAME:   (%[[X:.+]]: tensor<?x64xbf16>, %[[G:.+]]: tensor<64xbf16>, %[[W:.+]]: tensor<32x64xbf16>)
//       CHECK:   liger.fusion matmul(%[[X]], %[[G]], %[[W]])
//       CHECK:     %[[N:.+]] = liger.rms_norm
//       CHECK:     liger.linear %[[N]]
// REPORT: [liger-fuse-norm-linear] fused liger.rms_norm, liger.linear into a matmul group at fuse-norm-linear.mlir:{{[0-9]+}}:{{[0-9]+}}
// NOFOLD-LABEL: func.func @norm_then_linear
//   NOFOLD-NOT:   liger.fusion
//       NOFOLD:   %[[N:.+]] = liger.rms_norm
//  NOFOLD-NEXT:   liger.linear %[[N]]
// NOFOLD-REPORT: [liger-fuse-norm-linear] left alone liger.rms_norm at fuse-norm-linear.mlir:{{[0-9]+}}:{{[0-9]+}}: kept as a rowwise kernel before its projections (fold=false; liger-fuse folds it with norm-prologue=true, liger-compile with --norm-prologue)
func.func @norm_then_linear(%x: tensor<?x64xbf16>, %g: tensor<64xbf16>, %w: tensor<32x64xbf16>) -> tensor<?x32xbf16> {
  %n = liger.rms_norm %x, %g eps = 1.0e-5 : tensor<?x64xbf16>, tensor<64xbf16>
  %y = liger.linear %n, %w : tensor<?x64xbf16>, tensor<32x64xbf16>
  return %y : tensor<?x32xbf16>
}

// -----

// Read by three projections: one copy of the norm per group (the row
// statistics are recomputed, the normed activation is never written).
// max-consumers=1 leaves it alone.
// CHECK-LABEL: func.func @qkv
//  CHECK-SAME:   (%[[X:[a-z0-9]+]]: tensor<?x64xf32>, %[[G:[a-z0-9]+]]: tensor<64xf32>
//   CHECK-COUNT-3:   liger.fusion matmul(%[[X]], %[[G]],
// ONE-LABEL: func.func @qkv
//   ONE-NOT:   liger.fusion
// ONE-LABEL: func.func @into_group
// REPORT: [liger-fuse-norm-linear] fused liger.rms_norm, liger.linear into a matmul group
// REPORT: [liger-fuse-norm-linear] fused liger.rms_norm, liger.linear into a matmul group
// REPORT: [liger-fuse-norm-linear] fused liger.rms_norm, liger.linear into a matmul group
// NOFOLD-LABEL: func.func @qkv
//   NOFOLD-NOT:   liger.fusion
// NOFOLD-REPORT: [liger-fuse-norm-linear] left alone liger.rms_norm at {{.*}}: kept as a rowwise kernel before its projections
func.func @qkv(%x: tensor<?x64xf32>, %g: tensor<64xf32>, %wq: tensor<64x64xf32>, %wk: tensor<16x64xf32>, %wv: tensor<16x64xf32>)
    -> (tensor<?x64xf32>, tensor<?x16xf32>, tensor<?x16xf32>) {
  %n = liger.rms_norm %x, %g : tensor<?x64xf32>, tensor<64xf32>
  %q = liger.linear %n, %wq : tensor<?x64xf32>, tensor<64x64xf32>
  %k = liger.linear %n, %wk : tensor<?x64xf32>, tensor<16x64xf32>
  %v = liger.linear %n, %wv : tensor<?x64xf32>, tensor<16x64xf32>
  return %q, %k, %v : tensor<?x64xf32>, tensor<?x16xf32>, tensor<?x16xf32>
}

// -----

// Into an existing matmul group whose projections read the normed value.
// CHECK-LABEL: func.func @into_group
//       CHECK:   liger.fusion matmul
//       CHECK:     %[[N:.+]] = liger.rms_norm
//       CHECK:     liger.linear %[[N]]
//       CHECK:     liger.linear %[[N]]
//       CHECK:     liger.swiglu
// REPORT: [liger-fuse-norm-linear] fused liger.rms_norm, liger.fusion matmul into a matmul group
// NOFOLD-LABEL: func.func @into_group
//       NOFOLD:   %[[N:.+]] = liger.rms_norm
//  NOFOLD-NEXT:   liger.fusion matmul(%[[N]],
//   NOFOLD-NOT:     liger.rms_norm
//       NOFOLD:     liger.swiglu
// NOFOLD-REPORT: [liger-fuse-norm-linear] left alone liger.rms_norm at {{.*}}: kept as a rowwise kernel before its projections
// NOFOLD-REPORT: [liger-fuse-norm-linear] left alone liger.rms_norm at {{.*}}: the normed value is also read by 'func.return'
func.func @into_group(%x: tensor<?x64xf32>, %g: tensor<64xf32>, %wg: tensor<96x64xf32>, %wu: tensor<96x64xf32>) -> tensor<?x96xf32> {
  %n = liger.rms_norm %x, %g : tensor<?x64xf32>, tensor<64xf32>
  %h = liger.fusion matmul(%n, %wg, %wu) : (tensor<?x64xf32>, tensor<96x64xf32>, tensor<96x64xf32>) -> tensor<?x96xf32> {
  ^bb0(%a: tensor<?x64xf32>, %b: tensor<96x64xf32>, %c: tensor<96x64xf32>):
    %gate = liger.linear %a, %b : tensor<?x64xf32>, tensor<96x64xf32>
    %up = liger.linear %a, %c : tensor<?x64xf32>, tensor<96x64xf32>
    %act = liger.swiglu %gate, %up : tensor<?x96xf32>
    liger.yield %act : tensor<?x96xf32>
  }
  return %h : tensor<?x96xf32>
}

// -----

// Near-miss: the normed value is also returned.
// CHECK-LABEL: func.func @normed_returned
//   CHECK-NOT:   liger.fusion
// REPORT: [liger-fuse-norm-linear] left alone liger.rms_norm at fuse-norm-linear.mlir:{{[0-9]+}}:{{[0-9]+}}: the normed value is also read by 'func.return', which is not a projection
func.func @normed_returned(%x: tensor<?x64xf32>, %g: tensor<64xf32>, %w: tensor<32x64xf32>) -> (tensor<?x32xf32>, tensor<?x64xf32>) {
  %n = liger.rms_norm %x, %g : tensor<?x64xf32>, tensor<64xf32>
  %y = liger.linear %n, %w : tensor<?x64xf32>, tensor<32x64xf32>
  return %y, %n : tensor<?x32xf32>, tensor<?x64xf32>
}

// -----

// Near-miss: rstd is read (by a backward op).
// CHECK-LABEL: func.func @rstd_read
//   CHECK-NOT:   liger.fusion
// REPORT: [liger-fuse-norm-linear] left alone liger.rms_norm at fuse-norm-linear.mlir:{{[0-9]+}}:{{[0-9]+}}: its rstd result is read (by 'func.return')
func.func @rstd_read(%x: tensor<?x64xf32>, %g: tensor<64xf32>, %w: tensor<32x64xf32>) -> (tensor<?x32xf32>, tensor<?xf32>) {
  %n, %r = liger.rms_norm %x, %g rstd : tensor<?x64xf32>, tensor<64xf32>
  %y = liger.linear %n, %w : tensor<?x64xf32>, tensor<32x64xf32>
  return %y, %r : tensor<?x32xf32>, tensor<?xf32>
}

// -----

// Near-miss: the normed value is a projection's weight, not its activation.
// CHECK-LABEL: func.func @normed_as_weight
//   CHECK-NOT:   liger.fusion
func.func @normed_as_weight(%x: tensor<32x64xf32>, %g: tensor<64xf32>, %a: tensor<?x64xf32>) -> tensor<?x32xf32> {
  %n = liger.rms_norm %x, %g : tensor<32x64xf32>, tensor<64xf32>
  %y = liger.linear %a, %n : tensor<?x64xf32>, tensor<32x64xf32>
  return %y : tensor<?x32xf32>
}

// -----

// Near-miss reported: an add + RMSNorm in front of projections stays rowwise.
// REPORT: [liger-fuse-norm-linear] left alone liger.add_rms_norm at fuse-norm-linear.mlir:{{[0-9]+}}:{{[0-9]+}}: an add + RMSNorm also writes the new residual, so it stays a rowwise kernel before the projections
func.func @add_norm_then_linear(%x: tensor<?x64xf32>, %r: tensor<?x64xf32>, %g: tensor<64xf32>, %w: tensor<32x64xf32>) -> (tensor<?x32xf32>, tensor<?x64xf32>) {
  %n, %s = liger.add_rms_norm %x, %r, %g : tensor<?x64xf32>, tensor<64xf32>
  %y = liger.linear %n, %w : tensor<?x64xf32>, tensor<32x64xf32>
  return %y, %s : tensor<?x32xf32>, tensor<?x64xf32>
}

// -----

// Two projections of the normed value with one weight: a group each, the
// weight an input of both.
// CHECK-LABEL: func.func @two_projections_one_weight
//  CHECK-SAME:   (%[[X:.+]]: tensor<?x64xf32>, %[[G:.+]]: tensor<64xf32>, %[[W:.+]]: tensor<32x64xf32>)
//   CHECK-COUNT-2:   liger.fusion matmul(%[[X]], %[[G]], %[[W]])
// ONE-LABEL: func.func @two_projections_one_weight
//   ONE-NOT:   liger.fusion
func.func @two_projections_one_weight(%x: tensor<?x64xf32>, %g: tensor<64xf32>, %w: tensor<32x64xf32>) -> (tensor<?x32xf32>, tensor<?x32xf32>) {
  %n = liger.rms_norm %x, %g : tensor<?x64xf32>, tensor<64xf32>
  %y = liger.linear %n, %w : tensor<?x64xf32>, tensor<32x64xf32>
  %z = liger.linear %n, %w : tensor<?x64xf32>, tensor<32x64xf32>
  return %y, %z : tensor<?x32xf32>, tensor<?x32xf32>
}

// -----

// Near-miss: a projection of the normed value by itself (its activation and
// its weight): a prologue would have to normalize the weight too.
// CHECK-LABEL: func.func @normed_value_is_the_weight
//   CHECK-NOT:   liger.fusion
// REPORT: [liger-fuse-norm-linear] left alone liger.rms_norm at fuse-norm-linear.mlir:{{[0-9]+}}:{{[0-9]+}}: 'liger.linear' reads the normed value as more than its activation
// NOFOLD-REPORT: [liger-fuse-norm-linear] left alone liger.rms_norm at fuse-norm-linear.mlir:{{[0-9]+}}:{{[0-9]+}}: 'liger.linear' reads the normed value as more than its activation
func.func @normed_value_is_the_weight(%x: tensor<8x8xf32>, %g: tensor<8xf32>) -> tensor<8x8xf32> {
  %n = liger.rms_norm %x, %g : tensor<8x8xf32>, tensor<8xf32>
  %y = liger.linear %n, %n : tensor<8x8xf32>, tensor<8x8xf32>
  return %y : tensor<8x8xf32>
}
