// RUN: liger-opt %s --liger-fuse-qkv-rope --split-input-file | FileCheck %s
// RUN: liger-opt %s --liger-fuse-qkv-rope=report=true --split-input-file -o /dev/null | FileCheck %s --check-prefix=REPORT

// q and k projections, their head splits and RoPE: one matmul group. The v
// path (sharing the transpose destination) stays outside with its own. The
// group's inputs are tensors only: the head split's batch and sequence
// sizes are read inside (tensor.dim of the projection and of the split, with
// the index constants copied in), not passed as index operands.
// CHECK-LABEL: func.func @qk_rope
//  CHECK-SAME:   (%[[X:[a-z0-9]+]]: tensor<?x?x64xbf16>, %[[WQ:[a-z0-9]+]]: tensor<64x64xbf16>, %[[WK:[a-z0-9]+]]: tensor<32x64xbf16>, %{{[a-z0-9]+}}: tensor<32x64xbf16>, %[[COS:[a-z0-9]+]]: tensor<1x?x16xbf16>, %[[SIN:[a-z0-9]+]]: tensor<1x?x16xbf16>)
//       CHECK:   %[[V:.+]] = liger.linear %[[X]]
//       CHECK:   %[[VE:.+]] = tensor.expand_shape %[[V]]
//       CHECK:   %[[VT:.+]] = linalg.transpose ins(%[[VE]]
//       CHECK:   %[[R:.+]]:2 = liger.fusion matmul(%[[X]], %[[WQ]], %[[WK]], %[[COS]], %[[SIN]])
//       CHECK:     ^bb0(%{{[a-z0-9]+}}: tensor<?x?x64xbf16>, %{{[a-z0-9]+}}: tensor<64x64xbf16>, %{{[a-z0-9]+}}: tensor<32x64xbf16>, %{{[a-z0-9]+}}: tensor<1x?x16xbf16>, %{{[a-z0-9]+}}: tensor<1x?x16xbf16>):
//   CHECK-DAG:     %[[C0:.+]] = arith.constant 0 : index
//   CHECK-DAG:     %[[C1:.+]] = arith.constant 1 : index
//       CHECK:     %[[Q:.+]] = liger.linear
//       CHECK:     liger.linear
//       CHECK:     %[[QB:.+]] = tensor.dim %[[Q]], %[[C0]]
//       CHECK:     %[[QT:.+]] = tensor.dim %[[Q]], %[[C1]]
//       CHECK:     %[[QE:.+]] = tensor.expand_shape %[[Q]] {{\[}}[0], [1], [2, 3]] output_shape [%[[QB]], %[[QT]], 4, 16]
//       CHECK:     tensor.expand_shape
//       CHECK:     %[[EB:.+]] = tensor.dim %[[QE]], %[[C0]]
//       CHECK:     %[[ET:.+]] = tensor.dim %[[QE]], %[[C1]]
//       CHECK:     tensor.empty(%[[EB]], %[[ET]]) : tensor<?x4x?x16xbf16>
//       CHECK:     linalg.transpose
//       CHECK:     tensor.empty
//       CHECK:     linalg.transpose
//       CHECK:     liger.rope
//       CHECK:     liger.yield
//       CHECK:   liger.attention %[[R]]#0, %[[R]]#1, %[[VT]]
// REPORT: [liger-fuse-qkv-rope] fused liger.linear, liger.linear, tensor.expand_shape, tensor.expand_shape, linalg.transpose, linalg.transpose, liger.rope into a matmul group at fuse-qkv-rope.mlir:{{[0-9]+}}:{{[0-9]+}}
func.func @qk_rope(%x: tensor<?x?x64xbf16>, %wq: tensor<64x64xbf16>, %wk: tensor<32x64xbf16>, %wv: tensor<32x64xbf16>,
                   %cos: tensor<1x?x16xbf16>, %sin: tensor<1x?x16xbf16>) -> tensor<?x4x?x16xbf16> {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %b = tensor.dim %x, %c0 : tensor<?x?x64xbf16>
  %t = tensor.dim %x, %c1 : tensor<?x?x64xbf16>
  %q = liger.linear %x, %wq : tensor<?x?x64xbf16>, tensor<64x64xbf16>
  %k = liger.linear %x, %wk : tensor<?x?x64xbf16>, tensor<32x64xbf16>
  %v = liger.linear %x, %wv : tensor<?x?x64xbf16>, tensor<32x64xbf16>
  %q4 = tensor.expand_shape %q [[0], [1], [2, 3]] output_shape [%b, %t, 4, 16] : tensor<?x?x64xbf16> into tensor<?x?x4x16xbf16>
  %k4 = tensor.expand_shape %k [[0], [1], [2, 3]] output_shape [%b, %t, 2, 16] : tensor<?x?x32xbf16> into tensor<?x?x2x16xbf16>
  %v4 = tensor.expand_shape %v [[0], [1], [2, 3]] output_shape [%b, %t, 2, 16] : tensor<?x?x32xbf16> into tensor<?x?x2x16xbf16>
  %qi = tensor.empty(%b, %t) : tensor<?x4x?x16xbf16>
  %kvi = tensor.empty(%b, %t) : tensor<?x2x?x16xbf16>
  %qh = linalg.transpose ins(%q4 : tensor<?x?x4x16xbf16>) outs(%qi : tensor<?x4x?x16xbf16>) permutation = [0, 2, 1, 3]
  %kh = linalg.transpose ins(%k4 : tensor<?x?x2x16xbf16>) outs(%kvi : tensor<?x2x?x16xbf16>) permutation = [0, 2, 1, 3]
  %vh = linalg.transpose ins(%v4 : tensor<?x?x2x16xbf16>) outs(%kvi : tensor<?x2x?x16xbf16>) permutation = [0, 2, 1, 3]
  %qr, %kr = liger.rope %qh, %kh, %cos, %sin : tensor<?x4x?x16xbf16>, tensor<?x2x?x16xbf16>, tensor<1x?x16xbf16>
  %o = liger.attention %qr, %kr, %vh causal : tensor<?x4x?x16xbf16>, tensor<?x2x?x16xbf16>, tensor<?x2x?x16xbf16>
  return %o : tensor<?x4x?x16xbf16>
}

// -----

// Near-miss: q and k project different activations.
// CHECK-LABEL: func.func @different_activations
//   CHECK-NOT:   liger.fusion
// REPORT: [liger-fuse-qkv-rope] left alone liger.rope at fuse-qkv-rope.mlir:{{[0-9]+}}:{{[0-9]+}}: q and k project different activations
func.func @different_activations(%x: tensor<2x3x64xf32>, %y: tensor<2x3x64xf32>, %wq: tensor<64x64xf32>, %wk: tensor<64x64xf32>,
                                 %cos: tensor<1x3x16xf32>) -> (tensor<2x4x3x16xf32>, tensor<2x4x3x16xf32>) {
  %q = liger.linear %x, %wq : tensor<2x3x64xf32>, tensor<64x64xf32>
  %k = liger.linear %y, %wk : tensor<2x3x64xf32>, tensor<64x64xf32>
  %q4 = tensor.expand_shape %q [[0], [1], [2, 3]] output_shape [2, 3, 4, 16] : tensor<2x3x64xf32> into tensor<2x3x4x16xf32>
  %k4 = tensor.expand_shape %k [[0], [1], [2, 3]] output_shape [2, 3, 4, 16] : tensor<2x3x64xf32> into tensor<2x3x4x16xf32>
  %i = tensor.empty() : tensor<2x4x3x16xf32>
  %qh = linalg.transpose ins(%q4 : tensor<2x3x4x16xf32>) outs(%i : tensor<2x4x3x16xf32>) permutation = [0, 2, 1, 3]
  %kh = linalg.transpose ins(%k4 : tensor<2x3x4x16xf32>) outs(%i : tensor<2x4x3x16xf32>) permutation = [0, 2, 1, 3]
  %qr, %kr = liger.rope %qh, %kh, %cos, %cos : tensor<2x4x3x16xf32>, tensor<2x4x3x16xf32>, tensor<1x3x16xf32>
  return %qr, %kr : tensor<2x4x3x16xf32>, tensor<2x4x3x16xf32>
}

// -----

// Near-miss: the q projection is also returned.
// CHECK-LABEL: func.func @q_returned
//   CHECK-NOT:   liger.fusion
// REPORT: [liger-fuse-qkv-rope] left alone liger.rope at fuse-qkv-rope.mlir:{{[0-9]+}}:{{[0-9]+}}: a projection or its head split is also read outside the chain
func.func @q_returned(%x: tensor<2x3x64xf32>, %wq: tensor<64x64xf32>, %wk: tensor<64x64xf32>,
                      %cos: tensor<1x3x16xf32>) -> (tensor<2x4x3x16xf32>, tensor<2x3x64xf32>) {
  %q = liger.linear %x, %wq : tensor<2x3x64xf32>, tensor<64x64xf32>
  %k = liger.linear %x, %wk : tensor<2x3x64xf32>, tensor<64x64xf32>
  %q4 = tensor.expand_shape %q [[0], [1], [2, 3]] output_shape [2, 3, 4, 16] : tensor<2x3x64xf32> into tensor<2x3x4x16xf32>
  %k4 = tensor.expand_shape %k [[0], [1], [2, 3]] output_shape [2, 3, 4, 16] : tensor<2x3x64xf32> into tensor<2x3x4x16xf32>
  %i = tensor.empty() : tensor<2x4x3x16xf32>
  %qh = linalg.transpose ins(%q4 : tensor<2x3x4x16xf32>) outs(%i : tensor<2x4x3x16xf32>) permutation = [0, 2, 1, 3]
  %kh = linalg.transpose ins(%k4 : tensor<2x3x4x16xf32>) outs(%i : tensor<2x4x3x16xf32>) permutation = [0, 2, 1, 3]
  %qr, %kr = liger.rope %qh, %kh, %cos, %cos : tensor<2x4x3x16xf32>, tensor<2x4x3x16xf32>, tensor<1x3x16xf32>
  return %qr, %q : tensor<2x4x3x16xf32>, tensor<2x3x64xf32>
}

// -----

// Near-miss: q and k given in head layout (no projection to fuse).
// CHECK-LABEL: func.func @rope_of_arguments
//   CHECK-NOT:   liger.fusion
func.func @rope_of_arguments(%q: tensor<1x4x3x16xf32>, %k: tensor<1x2x3x16xf32>, %cos: tensor<1x3x16xf32>) -> tensor<1x4x3x16xf32> {
  %qr, %kr = liger.rope %q, %k, %cos, %cos : tensor<1x4x3x16xf32>, tensor<1x2x3x16xf32>, tensor<1x3x16xf32>
  return %qr : tensor<1x4x3x16xf32>
}

// -----

// cos and sin are one table: the group takes it once and RoPE reads it
// twice.
// CHECK-LABEL: func.func @one_table
//  CHECK-SAME:   (%[[X:[a-z0-9]+]]: tensor<2x3x64xf32>, %[[WQ:[a-z0-9]+]]: tensor<64x64xf32>, %[[WK:[a-z0-9]+]]: tensor<32x64xf32>, %[[CS:[a-z0-9]+]]: tensor<1x3x16xf32>)
//       CHECK:   liger.fusion matmul(%[[X]], %[[WQ]], %[[WK]], %[[CS]])
//       CHECK:     ^bb0(%{{[a-z0-9]+}}: tensor<2x3x64xf32>, %{{[a-z0-9]+}}: tensor<64x64xf32>, %{{[a-z0-9]+}}: tensor<32x64xf32>, %[[T:[a-z0-9]+]]: tensor<1x3x16xf32>):
//       CHECK:     liger.rope %{{.+}}, %{{.+}}, %[[T]], %[[T]]
// REPORT: [liger-fuse-qkv-rope] fused liger.linear, liger.linear, tensor.expand_shape, tensor.expand_shape, linalg.transpose, linalg.transpose, liger.rope into a matmul group at fuse-qkv-rope.mlir:{{[0-9]+}}:{{[0-9]+}}
func.func @one_table(%x: tensor<2x3x64xf32>, %wq: tensor<64x64xf32>, %wk: tensor<32x64xf32>,
                     %cs: tensor<1x3x16xf32>) -> (tensor<2x4x3x16xf32>, tensor<2x2x3x16xf32>) {
  %q = liger.linear %x, %wq : tensor<2x3x64xf32>, tensor<64x64xf32>
  %k = liger.linear %x, %wk : tensor<2x3x64xf32>, tensor<32x64xf32>
  %q4 = tensor.expand_shape %q [[0], [1], [2, 3]] output_shape [2, 3, 4, 16] : tensor<2x3x64xf32> into tensor<2x3x4x16xf32>
  %k4 = tensor.expand_shape %k [[0], [1], [2, 3]] output_shape [2, 3, 2, 16] : tensor<2x3x32xf32> into tensor<2x3x2x16xf32>
  %qi = tensor.empty() : tensor<2x4x3x16xf32>
  %ki = tensor.empty() : tensor<2x2x3x16xf32>
  %qh = linalg.transpose ins(%q4 : tensor<2x3x4x16xf32>) outs(%qi : tensor<2x4x3x16xf32>) permutation = [0, 2, 1, 3]
  %kh = linalg.transpose ins(%k4 : tensor<2x3x2x16xf32>) outs(%ki : tensor<2x2x3x16xf32>) permutation = [0, 2, 1, 3]
  %qr, %kr = liger.rope %qh, %kh, %cs, %cs : tensor<2x4x3x16xf32>, tensor<2x2x3x16xf32>, tensor<1x3x16xf32>
  return %qr, %kr : tensor<2x4x3x16xf32>, tensor<2x2x3x16xf32>
}

// -----

// Near-miss: one head split rotated as both q and k has one projection,
// where the epilogue writes q and k from two.
// CHECK-LABEL: func.func @q_is_k
//   CHECK-NOT:   liger.fusion
// REPORT: [liger-fuse-qkv-rope] left alone liger.rope at fuse-qkv-rope.mlir:{{[0-9]+}}:{{[0-9]+}}: q and k are one value
func.func @q_is_k(%x: tensor<2x3x64xf32>, %wq: tensor<64x64xf32>, %cos: tensor<1x3x16xf32>,
                  %sin: tensor<1x3x16xf32>) -> (tensor<2x4x3x16xf32>, tensor<2x4x3x16xf32>) {
  %q = liger.linear %x, %wq : tensor<2x3x64xf32>, tensor<64x64xf32>
  %q4 = tensor.expand_shape %q [[0], [1], [2, 3]] output_shape [2, 3, 4, 16] : tensor<2x3x64xf32> into tensor<2x3x4x16xf32>
  %i = tensor.empty() : tensor<2x4x3x16xf32>
  %qh = linalg.transpose ins(%q4 : tensor<2x3x4x16xf32>) outs(%i : tensor<2x4x3x16xf32>) permutation = [0, 2, 1, 3]
  %qr, %kr = liger.rope %qh, %qh, %cos, %sin : tensor<2x4x3x16xf32>, tensor<2x4x3x16xf32>, tensor<1x3x16xf32>
  return %qr, %kr : tensor<2x4x3x16xf32>, tensor<2x4x3x16xf32>
}

// -----

// Must not crash: one argument as q and k, one as cos and sin.
// CHECK-LABEL: func.func @rope_of_one_argument
//   CHECK-NOT:   liger.fusion
func.func @rope_of_one_argument(%q: tensor<1x4x3x16xf32>, %c: tensor<1x3x16xf32>) -> (tensor<1x4x3x16xf32>, tensor<1x4x3x16xf32>) {
  %qr, %kr = liger.rope %q, %q, %c, %c : tensor<1x4x3x16xf32>, tensor<1x4x3x16xf32>, tensor<1x3x16xf32>
  return %qr, %kr : tensor<1x4x3x16xf32>, tensor<1x4x3x16xf32>
}
