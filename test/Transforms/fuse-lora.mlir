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
