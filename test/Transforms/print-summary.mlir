// liger-print-summary: counts per op kind, shared weights once, FLOPs of
// projections; leaves the IR unchanged.
// RUN: liger-opt %s --liger-print-summary -o /dev/null | FileCheck %s
// RUN: liger-opt %s --liger-print-summary | FileCheck %s --check-prefix=IR

// CHECK-LABEL: liger summary of @two_projections_shared_weight
// CHECK-NEXT:   kernels: 3 (one per liger op; no fusion groups)
// CHECK-NEXT:   liger ops: 3
// CHECK-NEXT:     liger.linear                 2   weights 2,048 elements   FLOP/token 4,096
// CHECK-NEXT:     liger.silu                   1
// CHECK-NEXT:   other ops: 0
// The weight read by both projections is counted once: 1,024 bf16 elements.
// CHECK-NEXT:   weights: 1,024 elements, 0.00 MiB
// CHECK-NEXT:   projection FLOP/token: 4,096
func.func @two_projections_shared_weight(%x: tensor<?x64xbf16>, %w: tensor<16x64xbf16>) -> (tensor<?x16xbf16>, tensor<?x16xbf16>) {
  %a = liger.linear %x, %w : tensor<?x64xbf16>, tensor<16x64xbf16>
  %b = liger.linear %x, %w : tensor<?x64xbf16>, tensor<16x64xbf16>
  %c = liger.silu %b : tensor<?x16xbf16>
  return %a, %c : tensor<?x16xbf16>, tensor<?x16xbf16>
}

// LoRA adds 2·r·(K + N) FLOPs per token: 2·(32·64) + 2·(4·64) + 2·(32·4).
// CHECK-LABEL: liger summary of @lora
// CHECK:     liger.lora_linear            1   weights 2,432 elements   FLOP/token 4,864
// CHECK:   weights: 2,432 elements, 0.01 MiB
func.func @lora(%x: tensor<?x64xf32>, %w: tensor<32x64xf32>, %a: tensor<4x64xf32>, %b: tensor<32x4xf32>) -> tensor<?x32xf32> {
  %y = liger.lora_linear %x, %w, %a, %b scale = 2.0 : tensor<?x64xf32>, tensor<32x64xf32>, tensor<4x64xf32>, tensor<32x4xf32>
  return %y : tensor<?x32xf32>
}

// The lm_head and its backward share the weight (counted once): the
// forward 2·V·H, the backward three times that (logits, G·W, Gᵀ·h).
// CHECK-LABEL: liger summary of @lm_head_forward_backward
// CHECK:     liger.fused_linear_cross_entropy   1   weights 6,400 elements   FLOP/token 12,800
// CHECK:     liger.fused_linear_cross_entropy_grad   1   weights 6,400 elements   FLOP/token 38,400
// CHECK:   weights: 6,400 elements, 0.01 MiB
// CHECK:   projection FLOP/token: 51,200
func.func @lm_head_forward_backward(%h: tensor<?x64xbf16>, %w: tensor<100x64xbf16>, %t: tensor<?xi64>, %g: tensor<f32>) -> (tensor<f32>, tensor<?x64xbf16>, tensor<100x64xbf16>) {
  %l = liger.fused_linear_cross_entropy %h, %w, %t : tensor<?x64xbf16>, tensor<100x64xbf16>, tensor<?xi64>
  %dh, %dw = liger.fused_linear_cross_entropy_grad %h, %w, %t, %g : tensor<?x64xbf16>, tensor<100x64xbf16>, tensor<?xi64>, tensor<f32>
  return %l, %dh, %dw : tensor<f32>, tensor<?x64xbf16>, tensor<100x64xbf16>
}

// Near-miss: a function without liger ops still gets a (zero) report, and
// ops of other dialects are listed by name.
// CHECK-LABEL: liger summary of @no_liger_ops
// CHECK-NEXT:   kernels: 0 (one per liger op; no fusion groups)
// CHECK-NEXT:   liger ops: 0
// CHECK-NEXT:   other ops: 1 (arith.addf x1)
// CHECK-NEXT:   weights: 0 elements, 0.00 MiB
// CHECK-NEXT:   projection FLOP/token: 0
func.func @no_liger_ops(%a: f32) -> f32 {
  %b = arith.addf %a, %a : f32
  return %b : f32
}

// External declarations have no body and no report.
// CHECK-NOT: liger summary of @external
func.func private @external(tensor<4xf32>) -> tensor<4xf32>

// IR-LABEL: func.func @two_projections_shared_weight
// IR-COUNT-2: liger.linear
// IR: liger.silu


// Kernels are the fusion groups plus the liger ops outside them; a weight
// read inside a group is the group's input, counted once however many
// groups read it.
// CHECK-LABEL: liger summary of @grouped
// CHECK-NEXT:   kernels: 3 (fusion groups: 1 matmul, 1 rowwise; liger ops outside groups: 1)
// CHECK-NEXT:   liger ops: 4
// CHECK-NEXT:     liger.linear                 2   weights 2,048 elements   FLOP/token 4,096
// CHECK:        weights: 1,024 elements, 0.00 MiB
func.func @grouped(%x: tensor<?x32xf32>, %w: tensor<32x32xf32>) -> (tensor<?x32xf32>, tensor<?x32xf32>) {
  %a = liger.fusion matmul(%x, %w) : (tensor<?x32xf32>, tensor<32x32xf32>) -> tensor<?x32xf32> {
  ^bb0(%xa: tensor<?x32xf32>, %wa: tensor<32x32xf32>):
    %p = liger.linear %xa, %wa : tensor<?x32xf32>, tensor<32x32xf32>
    liger.yield %p : tensor<?x32xf32>
  }
  %b = liger.fusion rowwise(%a) : (tensor<?x32xf32>) -> tensor<?x32xf32> {
  ^bb0(%ab: tensor<?x32xf32>):
    %s = liger.silu %ab : tensor<?x32xf32>
    %m = liger.mul %s, %ab : tensor<?x32xf32>
    liger.yield %m : tensor<?x32xf32>
  }
  %c = liger.linear %b, %w : tensor<?x32xf32>, tensor<32x32xf32>
  return %b, %c : tensor<?x32xf32>, tensor<?x32xf32>
}
