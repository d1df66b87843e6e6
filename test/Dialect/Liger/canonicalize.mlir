// Canonicalizations of liger ops, with the near-misses they must leave alone.
// RUN: liger-opt %s --canonicalize --split-input-file | FileCheck %s

// An rstd nobody reads is not computed.
// CHECK-LABEL: func.func @rms_norm_drops_unused_rstd
// CHECK: %[[Y:.+]] = liger.rms_norm %{{.*}}, %{{.*}} eps = 9.99999974E-6 casting = gemma : tensor<?x64xbf16>, tensor<64xbf16>
// CHECK-NOT: rstd
// CHECK: return %[[Y]]
func.func @rms_norm_drops_unused_rstd(%x: tensor<?x64xbf16>, %w: tensor<64xbf16>) -> tensor<?x64xbf16> {
  %y, %r = liger.rms_norm %x, %w eps = 1.0e-5 casting = gemma rstd : tensor<?x64xbf16>, tensor<64xbf16>
  return %y : tensor<?x64xbf16>
}

// -----

// Near-miss: the rstd is returned, so it stays.
// CHECK-LABEL: func.func @rms_norm_keeps_used_rstd
// CHECK: %[[Y:.+]], %[[R:.+]] = liger.rms_norm %{{.*}}, %{{.*}} rstd
// CHECK: return %[[Y]], %[[R]]
func.func @rms_norm_keeps_used_rstd(%x: tensor<?x64xbf16>, %w: tensor<64xbf16>) -> (tensor<?x64xbf16>, tensor<?xf32>) {
  %y, %r = liger.rms_norm %x, %w rstd : tensor<?x64xbf16>, tensor<64xbf16>
  return %y, %r : tensor<?x64xbf16>, tensor<?xf32>
}

// -----

// CHECK-LABEL: func.func @add_rms_norm_drops_unused_rstd
// CHECK: %[[Y:.+]], %[[S:.+]] = liger.add_rms_norm %{{.*}}, %{{.*}}, %{{.*}} : tensor<8x64xf32>, tensor<64xf32>
// CHECK: return %[[Y]], %[[S]]
func.func @add_rms_norm_drops_unused_rstd(%x: tensor<8x64xf32>, %r: tensor<8x64xf32>, %w: tensor<64xf32>) -> (tensor<8x64xf32>, tensor<8x64xf32>) {
  %y, %s, %rstd = liger.add_rms_norm %x, %r, %w rstd : tensor<8x64xf32>, tensor<64xf32>
  return %y, %s : tensor<8x64xf32>, tensor<8x64xf32>
}

// -----

// Near-miss: only the residual sum is unused; add_rms_norm has no form
// without it, so nothing changes.
// CHECK-LABEL: func.func @add_rms_norm_keeps_sum
// CHECK: liger.add_rms_norm %{{.*}}, %{{.*}}, %{{.*}} rstd
func.func @add_rms_norm_keeps_sum(%x: tensor<8x64xf32>, %r: tensor<8x64xf32>, %w: tensor<64xf32>) -> (tensor<8x64xf32>, tensor<8xf32>) {
  %y, %s, %rstd = liger.add_rms_norm %x, %r, %w rstd : tensor<8x64xf32>, tensor<64xf32>
  return %y, %rstd : tensor<8x64xf32>, tensor<8xf32>
}

// -----

// The z-loss term stays in the loss (lse_square_scale is kept); only its
// separate result goes.
// CHECK-LABEL: func.func @cross_entropy_drops_unused_z_loss
// CHECK: %[[L:.+]] = liger.cross_entropy %{{.*}}, %{{.*}} lse_square_scale = 9.99999974E-5 : tensor<?x32000xf32>, tensor<?xi64>
// CHECK: return %[[L]]
func.func @cross_entropy_drops_unused_z_loss(%l: tensor<?x32000xf32>, %t: tensor<?xi64>) -> tensor<f32> {
  %loss, %z = liger.cross_entropy %l, %t lse_square_scale = 1.0e-4 z_loss : tensor<?x32000xf32>, tensor<?xi64>
  return %loss : tensor<f32>
}

// -----

// Near-miss: z_loss is used.
// CHECK-LABEL: func.func @cross_entropy_keeps_used_z_loss
// CHECK: liger.cross_entropy %{{.*}}, %{{.*}} lse_square_scale = 9.99999974E-5 z_loss
func.func @cross_entropy_keeps_used_z_loss(%l: tensor<?x32000xf32>, %t: tensor<?xi64>) -> (tensor<f32>, tensor<f32>) {
  %loss, %z = liger.cross_entropy %l, %t lse_square_scale = 1.0e-4 z_loss : tensor<?x32000xf32>, tensor<?xi64>
  return %loss, %z : tensor<f32>, tensor<f32>
}

// -----

// CHECK-LABEL: func.func @flce_drops_unused_z_loss
// CHECK: %[[L:.+]] = liger.fused_linear_cross_entropy %{{.*}}, %{{.*}}, %{{.*}} reduction = sum : tensor<?x64xbf16>, tensor<100x64xbf16>, tensor<?xi64>
// CHECK: return %[[L]]
func.func @flce_drops_unused_z_loss(%h: tensor<?x64xbf16>, %w: tensor<100x64xbf16>, %t: tensor<?xi64>) -> tensor<f32> {
  %loss, %z = liger.fused_linear_cross_entropy %h, %w, %t reduction = sum z_loss : tensor<?x64xbf16>, tensor<100x64xbf16>, tensor<?xi64>
  return %loss : tensor<f32>
}

// -----

// A LoRA branch scaled by zero contributes nothing; the bias stays.
// CHECK-LABEL: func.func @lora_zero_scale_is_linear
// CHECK: %[[Y:.+]] = liger.linear %{{.*}}, %{{.*}}, %{{.*}} : tensor<?x64xbf16>, tensor<32x64xbf16>, tensor<32xbf16>
// CHECK-NOT: liger.lora_linear
// CHECK: return %[[Y]]
func.func @lora_zero_scale_is_linear(%x: tensor<?x64xbf16>, %w: tensor<32x64xbf16>, %a: tensor<8x64xbf16>, %b: tensor<32x8xbf16>, %bias: tensor<32xbf16>) -> tensor<?x32xbf16> {
  %y = liger.lora_linear %x, %w, %a, %b, %bias scale = 0.0 : tensor<?x64xbf16>, tensor<32x64xbf16>, tensor<8x64xbf16>, tensor<32x8xbf16>, tensor<32xbf16>
  return %y : tensor<?x32xbf16>
}

// -----

// Near-miss: a non-zero scale keeps the LoRA branch.
// CHECK-LABEL: func.func @lora_nonzero_scale_stays
// CHECK: liger.lora_linear %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}} scale = 5.000000e-01
func.func @lora_nonzero_scale_stays(%x: tensor<?x64xbf16>, %w: tensor<32x64xbf16>, %a: tensor<8x64xbf16>, %b: tensor<32x8xbf16>) -> tensor<?x32xbf16> {
  %y = liger.lora_linear %x, %w, %a, %b scale = 0.5 : tensor<?x64xbf16>, tensor<32x64xbf16>, tensor<8x64xbf16>, tensor<32x8xbf16>
  return %y : tensor<?x32xbf16>
}

// -----

// Pure ops without users are erased.
// CHECK-LABEL: func.func @dead_ops_are_erased
// CHECK-NOT: liger.
// CHECK: return
func.func @dead_ops_are_erased(%x: tensor<?x64xbf16>, %w: tensor<64xbf16>) {
  %y = liger.rms_norm %x, %w : tensor<?x64xbf16>, tensor<64xbf16>
  %z = liger.silu %y : tensor<?x64xbf16>
  return
}

// -----

// An attention lse nobody reads is not computed.
// CHECK-LABEL: func.func @attention_drops_unused_lse
// CHECK: %[[O:.+]] = liger.attention %{{.*}}, %{{.*}}, %{{.*}} causal : tensor<?x4x?x64xbf16>, tensor<?x2x?x64xbf16>, tensor<?x2x?x64xbf16>
// CHECK-NOT: return_lse
// CHECK: return %[[O]]
func.func @attention_drops_unused_lse(%q: tensor<?x4x?x64xbf16>, %k: tensor<?x2x?x64xbf16>, %v: tensor<?x2x?x64xbf16>) -> tensor<?x4x?x64xbf16> {
  %o, %lse = liger.attention %q, %k, %v causal return_lse : tensor<?x4x?x64xbf16>, tensor<?x2x?x64xbf16>, tensor<?x2x?x64xbf16>
  return %o : tensor<?x4x?x64xbf16>
}

// -----

// Near-miss: the lse is returned, so it stays.
// CHECK-LABEL: func.func @attention_keeps_used_lse
// CHECK: %[[O:.+]], %[[LSE:.+]] = liger.attention %{{.*}}, %{{.*}}, %{{.*}} return_lse
// CHECK: return %[[O]], %[[LSE]]
func.func @attention_keeps_used_lse(%q: tensor<?x4x?x64xbf16>, %k: tensor<?x2x?x64xbf16>, %v: tensor<?x2x?x64xbf16>) -> (tensor<?x4x?x64xbf16>, tensor<?x4x?xf32>) {
  %o, %lse = liger.attention %q, %k, %v return_lse : tensor<?x4x?x64xbf16>, tensor<?x2x?x64xbf16>, tensor<?x2x?x64xbf16>
  return %o, %lse : tensor<?x4x?x64xbf16>, tensor<?x4x?xf32>
}
