// RUN: liger-opt %s --liger-fuse-lora --split-input-file | FileCheck %s
// RUN: liger-opt %s --liger-fuse-lora=report=true --split-input-file -o /dev/null | FileCheck %s --check-prefix=REPORT

// LoRA projection, activation and residual add: one matmul group.
// CHECK-LABEL: func.func @lora_act_residual
//       CHECK:   %[[G:.+]] = liger.fusion matmul
//       CHECK:     liger.lora_linear
//       CHECK:     liger.silu
//       CHECK:     liger.add
//       CHECK:   return %[[G]]
// REPORT: [liger-fuse-lora] fused liger.lora_linear, liger.silu, liger.add into a matmul group
func.func @lora_act_residual(%x: tensor<?x64xbf16>, %w: tensor<64x64xbf16>, %a: tensor<8x64xbf16>, %b: tensor<64x8xbf16>, %r: tensor<?x64xbf16>) -> tensor<?x64xbf16> {
  %p = liger.lora_linear %x, %w, %a, %b scale = 2.0 : tensor<?x64xbf16>, tensor<64x64xbf16>, tensor<8x64xbf16>, tensor<64x8xbf16>
  %s = liger.silu %p : tensor<?x64xbf16>
  %o = liger.add %s, %r : tensor<?x64xbf16>
  return %o : tensor<?x64xbf16>
}

// -----

// A LoRA projection alone is a group of its own (both products in one kernel).
// CHECK-LABEL: func.func @lora_alone
//       CHECK:   liger.fusion matmul
//  CHECK-NEXT:   ^bb0
//  CHECK-NEXT:     liger.lora_linear
//  CHECK-NEXT:     liger.yield
func.func @lora_alone(%x: tensor<?x64xf32>, %w: tensor<32x64xf32>, %a: tensor<4x64xf32>, %b: tensor<32x4xf32>) -> tensor<?x32xf32> {
  %p = liger.lora_linear %x, %w, %a, %b : tensor<?x64xf32>, tensor<32x64xf32>, tensor<4x64xf32>, tensor<32x4xf32>
  return %p : tensor<?x32xf32>
}

// -----

// Near-miss: the projection is read twice, so the activation stays outside.
// CHECK-LABEL: func.func @two_readers
//       CHECK:   %[[G:.+]] = liger.fusion matmul
//       CHECK:     liger.lora_linear
//   CHECK-NOT:     liger.silu
//       CHECK:     liger.yield
//       CHECK:   liger.silu %[[G]]
//       CHECK:   liger.gelu %[[G]]
func.func @two_readers(%x: tensor<?x64xf32>, %w: tensor<32x64xf32>, %a: tensor<4x64xf32>, %b: tensor<32x4xf32>) -> (tensor<?x32xf32>, tensor<?x32xf32>) {
  %p = liger.lora_linear %x, %w, %a, %b : tensor<?x64xf32>, tensor<32x64xf32>, tensor<4x64xf32>, tensor<32x4xf32>
  %s = liger.silu %p : tensor<?x32xf32>
  %g = liger.gelu %p : tensor<?x32xf32>
  return %s, %g : tensor<?x32xf32>, tensor<?x32xf32>
}

// -----

// Near-miss: a plain projection is not LoRA.
// CHECK-LABEL: func.func @plain_linear
//   CHECK-NOT:   liger.fusion
func.func @plain_linear(%x: tensor<?x64xf32>, %w: tensor<32x64xf32>) -> tensor<?x32xf32> {
  %p = liger.linear %x, %w : tensor<?x64xf32>, tensor<32x64xf32>
  %s = liger.silu %p : tensor<?x32xf32>
  return %s : tensor<?x32xf32>
}

// -----

// The residual is the projection's own input: the group takes it once.
// CHECK-LABEL: func.func @residual_is_the_input
//  CHECK-SAME:   (%[[X:[a-z0-9]+]]: tensor<?x64xf32>, %[[W:[a-z0-9]+]]: tensor<64x64xf32>, %[[A:[a-z0-9]+]]: tensor<4x64xf32>, %[[B:[a-z0-9]+]]: tensor<64x4xf32>)
//       CHECK:   liger.fusion matmul(%[[X]], %[[W]], %[[A]], %[[B]])
//       CHECK:     ^bb0(%[[XA:[a-z0-9]+]]: tensor<?x64xf32>,
//       CHECK:     %[[P:.+]] = liger.lora_linear %[[XA]],
//       CHECK:     liger.add %[[P]], %[[XA]]
// REPORT: [liger-fuse-lora] fused liger.lora_linear, liger.add into a matmul group at fuse-lora.mlir:{{[0-9]+}}:{{[0-9]+}}
func.func @residual_is_the_input(%x: tensor<?x64xf32>, %w: tensor<64x64xf32>, %a: tensor<4x64xf32>, %b: tensor<64x4xf32>) -> tensor<?x64xf32> {
  %p = liger.lora_linear %x, %w, %a, %b : tensor<?x64xf32>, tensor<64x64xf32>, tensor<4x64xf32>, tensor<64x4xf32>
  %y = liger.add %p, %x : tensor<?x64xf32>
  return %y : tensor<?x64xf32>
}

// -----

// The projection's one reader reads it twice (its only user all the same):
// the activation and the add join the group.
// CHECK-LABEL: func.func @one_reader_reads_twice
//       CHECK:   liger.fusion matmul
//       CHECK:     %[[P:.+]] = liger.lora_linear
//       CHECK:     %[[S:.+]] = liger.silu %[[P]]
//       CHECK:     liger.add %[[S]], %[[S]]
//       CHECK:     liger.yield
//   CHECK-NOT:   liger.add
func.func @one_reader_reads_twice(%x: tensor<?x64xf32>, %w: tensor<32x64xf32>, %a: tensor<4x64xf32>, %b: tensor<32x4xf32>) -> tensor<?x32xf32> {
  %p = liger.lora_linear %x, %w, %a, %b : tensor<?x64xf32>, tensor<32x64xf32>, tensor<4x64xf32>, tensor<32x4xf32>
  %s = liger.silu %p : tensor<?x32xf32>
  %y = liger.add %s, %s : tensor<?x32xf32>
  return %y : tensor<?x32xf32>
}

// -----

// The two LoRA factors are one value (a square adapter of rank = hidden):
// the group takes it once.
// CHECK-LABEL: func.func @factors_are_one_value
//  CHECK-SAME:   (%[[X:[a-z0-9]+]]: tensor<?x8xf32>, %[[W:[a-z0-9]+]]: tensor<8x8xf32>, %[[F:[a-z0-9]+]]: tensor<8x8xf32>)
//       CHECK:   liger.fusion matmul(%[[X]], %[[W]], %[[F]])
//       CHECK:     ^bb0(%{{[a-z0-9]+}}: tensor<?x8xf32>, %{{[a-z0-9]+}}: tensor<8x8xf32>, %[[FA:[a-z0-9]+]]: tensor<8x8xf32>):
//       CHECK:     liger.lora_linear %{{.+}}, %{{.+}}, %[[FA]], %[[FA]]
func.func @factors_are_one_value(%x: tensor<?x8xf32>, %w: tensor<8x8xf32>, %f: tensor<8x8xf32>) -> tensor<?x8xf32> {
  %p = liger.lora_linear %x, %w, %f, %f : tensor<?x8xf32>, tensor<8x8xf32>, tensor<8x8xf32>, tensor<8x8xf32>
  return %p : tensor<?x8xf32>
}

// -----

// The LoRA dx, dy · W + s · (dy · B) · A, as liger.lora_linear of dy, Wᵀ,
// Bᵀ and Aᵀ: the transpose of W (and the tensor.empty it writes into) joins
// the group, which takes W itself.
// CHECK-LABEL: func.func @transposed_weight
//  CHECK-SAME:   (%[[DY:[a-z0-9]+]]: tensor<?x32xbf16>, %[[W:[a-z0-9]+]]: tensor<32x64xbf16>, %[[BT:[a-z0-9]+]]: tensor<16x32xbf16>, %[[AT:[a-z0-9]+]]: tensor<64x16xbf16>)
//   CHECK-NOT:   linalg.transpose
//       CHECK:   %[[G:.+]] = liger.fusion matmul(%[[W]], %[[DY]], %[[BT]], %[[AT]])
//       CHECK:     ^bb0(%[[WA:[a-z0-9]+]]: tensor<32x64xbf16>, %[[DYA:[a-z0-9]+]]: tensor<?x32xbf16>,
//       CHECK:     %[[E:.+]] = tensor.empty() : tensor<64x32xbf16>
//       CHECK:     %[[WT:.+]] = linalg.transpose ins(%[[WA]] : tensor<32x64xbf16>) outs(%[[E]] : tensor<64x32xbf16>) permutation = [1, 0]
//       CHECK:     liger.lora_linear %[[DYA]], %[[WT]],
//       CHECK:   return %[[G]]
// REPORT: [liger-fuse-lora] fused tensor.empty, linalg.transpose, liger.lora_linear into a matmul group
func.func @transposed_weight(%dy: tensor<?x32xbf16>, %w: tensor<32x64xbf16>, %bt: tensor<16x32xbf16>, %at: tensor<64x16xbf16>) -> tensor<?x64xbf16> {
  %e = tensor.empty() : tensor<64x32xbf16>
  %wt = linalg.transpose ins(%w : tensor<32x64xbf16>) outs(%e : tensor<64x32xbf16>) permutation = [1, 0]
  %dx = liger.lora_linear %dy, %wt, %bt, %at scale = 2.0 : tensor<?x32xbf16>, tensor<64x32xbf16>, tensor<16x32xbf16>, tensor<64x16xbf16>
  return %dx : tensor<?x64xbf16>
}

// -----

// Near-miss: the transposed weight is read elsewhere too, so the transpose
// stays outside and the group takes its result.
// CHECK-LABEL: func.func @transposed_weight_read_twice
//       CHECK:   %[[WT:.+]] = linalg.transpose
//       CHECK:   liger.fusion matmul(%{{.+}}, %[[WT]],
//   CHECK-NOT:     linalg.transpose
//       CHECK:     liger.yield
func.func @transposed_weight_read_twice(%dy: tensor<?x32xbf16>, %w: tensor<32x64xbf16>, %bt: tensor<16x32xbf16>, %at: tensor<64x16xbf16>) -> (tensor<?x64xbf16>, tensor<64x32xbf16>) {
  %e = tensor.empty() : tensor<64x32xbf16>
  %wt = linalg.transpose ins(%w : tensor<32x64xbf16>) outs(%e : tensor<64x32xbf16>) permutation = [1, 0]
  %dx = liger.lora_linear %dy, %wt, %bt, %at scale = 2.0 : tensor<?x32xbf16>, tensor<64x32xbf16>, tensor<16x32xbf16>, tensor<64x16xbf16>
  return %dx, %wt : tensor<?x64xbf16>, tensor<64x32xbf16>
}

// -----

// Near-miss: the transpose writes into a tensor another op reads, so it
// stays outside.
// CHECK-LABEL: func.func @transpose_into_a_shared_tensor
//       CHECK:   %[[WT:.+]] = linalg.transpose
//       CHECK:   liger.fusion matmul(%{{.+}}, %[[WT]],
//   CHECK-NOT:     linalg.transpose
//       CHECK:     liger.yield
func.func @transpose_into_a_shared_tensor(%dy: tensor<?x32xbf16>, %w: tensor<32x64xbf16>, %bt: tensor<16x32xbf16>, %at: tensor<64x16xbf16>) -> (tensor<?x64xbf16>, tensor<64x32xbf16>) {
  %e = tensor.empty() : tensor<64x32xbf16>
  %wt = linalg.transpose ins(%w : tensor<32x64xbf16>) outs(%e : tensor<64x32xbf16>) permutation = [1, 0]
  %dx = liger.lora_linear %dy, %wt, %bt, %at scale = 2.0 : tensor<?x32xbf16>, tensor<64x32xbf16>, tensor<16x32xbf16>, tensor<64x16xbf16>
  return %dx, %e : tensor<?x64xbf16>, tensor<64x32xbf16>
}
