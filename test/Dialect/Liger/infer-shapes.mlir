// Result types are inferred from operands and attributes: the custom form
// spells none, and the generic form shows what inference produced.
// RUN: liger-opt %s --mlir-print-op-generic | FileCheck %s

// CHECK-LABEL: sym_name = "rstd_drops_hidden_dim"
// CHECK: "liger.rms_norm"{{.*}} -> (tensor<2x?x1000xbf16>, tensor<2x?xf32>)
func.func @rstd_drops_hidden_dim(%x: tensor<2x?x1000xbf16>, %w: tensor<1000xbf16>) {
  %y, %r = liger.rms_norm %x, %w rstd : tensor<2x?x1000xbf16>, tensor<1000xbf16>
  return
}

// LayerNorm's statistics: mean and rstd, each the rows in f32; none
// without `stats`.
// CHECK-LABEL: sym_name = "layer_norm_stats_drop_hidden_dim"
// CHECK: "liger.layer_norm"{{.*}} -> (tensor<2x?x1000xbf16>, tensor<2x?xf32>, tensor<2x?xf32>)
// CHECK: "liger.layer_norm"{{.*}} -> tensor<2x?x1000xbf16>
func.func @layer_norm_stats_drop_hidden_dim(%x: tensor<2x?x1000xbf16>, %w: tensor<1000xf32>) {
  %y, %m, %r = liger.layer_norm %x, %w stats : tensor<2x?x1000xbf16>, tensor<1000xf32>
  %z = liger.layer_norm %x, %w : tensor<2x?x1000xbf16>, tensor<1000xf32>
  return
}

// CHECK-LABEL: sym_name = "add_rms_norm_three_results"
// CHECK: "liger.add_rms_norm"{{.*}} -> (tensor<?x64xf16>, tensor<?x64xf16>, tensor<?xf32>)
func.func @add_rms_norm_three_results(%x: tensor<?x64xf16>, %w: tensor<64xf16>) {
  %y, %s, %r = liger.add_rms_norm %x, %x, %w rstd : tensor<?x64xf16>, tensor<64xf16>
  return
}

// The norm result keeps the input dtype even when the weight is f32.
// CHECK-LABEL: sym_name = "norm_result_has_input_dtype"
// CHECK: "liger.rms_norm"{{.*}} -> tensor<3x64xbf16>
func.func @norm_result_has_input_dtype(%x: tensor<3x64xbf16>, %w: tensor<64xf32>) {
  %y = liger.rms_norm %x, %w : tensor<3x64xbf16>, tensor<64xf32>
  return
}

// CHECK-LABEL: sym_name = "linear_replaces_last_dim"
// CHECK: "liger.linear"{{.*}} -> tensor<?x7x1024xbf16>
func.func @linear_replaces_last_dim(%x: tensor<?x7x4096xbf16>, %w: tensor<1024x4096xbf16>) {
  %y = liger.linear %x, %w : tensor<?x7x4096xbf16>, tensor<1024x4096xbf16>
  return
}

// CHECK-LABEL: sym_name = "lora_result_is_out_features"
// CHECK: "liger.lora_linear"{{.*}} -> tensor<1x48xf32>
func.func @lora_result_is_out_features(%x: tensor<1x64xf32>, %w: tensor<48x64xf32>, %a: tensor<4x64xf32>, %b: tensor<48x4xf32>) {
  %y = liger.lora_linear %x, %w, %a, %b : tensor<1x64xf32>, tensor<48x64xf32>, tensor<4x64xf32>, tensor<48x4xf32>
  return
}

// CHECK-LABEL: sym_name = "rope_keeps_q_and_k_types"
// CHECK: "liger.rope"{{.*}} -> (tensor<?x32x?x128xbf16>, tensor<?x8x?x128xbf16>)
func.func @rope_keeps_q_and_k_types(%q: tensor<?x32x?x128xbf16>, %k: tensor<?x8x?x128xbf16>, %c: tensor<?x?x128xbf16>) {
  %qr, %kr = liger.rope %q, %k, %c, %c : tensor<?x32x?x128xbf16>, tensor<?x8x?x128xbf16>, tensor<?x?x128xbf16>
  return
}

// Loss shapes follow the reduction: a scalar for mean/sum, one per token for none.
// CHECK-LABEL: sym_name = "loss_shape_follows_reduction"
// CHECK: "liger.cross_entropy"{{.*}} -> tensor<f32>
// CHECK: "liger.cross_entropy"{{.*}} -> tensor<f32>
// CHECK: "liger.cross_entropy"{{.*}} -> (tensor<?xf32>, tensor<?xf32>)
// CHECK: "liger.fused_linear_cross_entropy"{{.*}} -> tensor<3xf32>
func.func @loss_shape_follows_reduction(%l: tensor<?x10xbf16>, %t: tensor<?xi32>, %h: tensor<3x8xbf16>, %w: tensor<10x8xbf16>, %t3: tensor<3xi64>) {
  %0 = liger.cross_entropy %l, %t : tensor<?x10xbf16>, tensor<?xi32>
  %1 = liger.cross_entropy %l, %t reduction = sum : tensor<?x10xbf16>, tensor<?xi32>
  %2, %3 = liger.cross_entropy %l, %t reduction = none z_loss : tensor<?x10xbf16>, tensor<?xi32>
  %4 = liger.fused_linear_cross_entropy %h, %w, %t3 reduction = none : tensor<3x8xbf16>, tensor<10x8xbf16>, tensor<3xi64>
  return
}

// CHECK-LABEL: sym_name = "kl_div_shapes"
// CHECK: "liger.kl_div"{{.*}} -> tensor<f32>
// CHECK: "liger.kl_div"{{.*}} -> tensor<?x10xf32>
func.func @kl_div_shapes(%p: tensor<?x10xbf16>) {
  %0 = liger.kl_div %p, %p : tensor<?x10xbf16>
  %1 = liger.kl_div %p, %p reduction = none : tensor<?x10xbf16>
  return
}

// The per-token forms and the gradients: [N] f32 per token, the input's
// type for a gradient.
// CHECK-LABEL: sym_name = "divergence_shapes"
// CHECK: "liger.kl_div"{{.*}} -> tensor<3xf32>
// CHECK: "liger.jsd"{{.*}} -> tensor<3xf32>
// CHECK: "liger.kl_div_grad"{{.*}} -> tensor<3x10xbf16>
// CHECK: "liger.jsd_grad"{{.*}} -> tensor<3x10xbf16>
func.func @divergence_shapes(%p: tensor<3x10xbf16>, %g: tensor<3xf32>) {
  %0 = liger.kl_div %p, %p reduction = mean per_token : tensor<3x10xbf16>
  %1 = liger.jsd %p, %p per_token : tensor<3x10xbf16>
  %2 = liger.kl_div_grad %p, %g reduction = mean per_token : tensor<3x10xbf16>, tensor<3xf32>
  %3 = liger.jsd_grad %p, %p, %g per_token : tensor<3x10xbf16>, tensor<3xf32>
  return
}

// liger.scale: the input's type, whichever factor.
// CHECK-LABEL: sym_name = "scale_shapes"
// CHECK: "liger.scale"{{.*}} -> tensor<3x10xbf16>
// CHECK: "liger.scale"{{.*}} -> tensor<?x10xf32>
func.func @scale_shapes(%p: tensor<3x10xbf16>, %g: tensor<f32>, %q: tensor<?x10xf32>, %r: tensor<?xf32>) {
  %0 = liger.scale %p, %g : tensor<3x10xbf16>, tensor<f32>
  %1 = liger.scale %q, %r : tensor<?x10xf32>, tensor<?xf32>
  return
}

// Attention output: q's batch/heads/seq with v's head dimension.
// CHECK-LABEL: sym_name = "attention_output_shape"
// CHECK: "liger.attention"{{.*}} -> tensor<2x8x?x32xf16>
func.func @attention_output_shape(%q: tensor<2x8x?x64xf16>, %k: tensor<2x2x100x64xf16>, %v: tensor<2x2x100x32xf16>) {
  %0 = liger.attention %q, %k, %v causal : tensor<2x8x?x64xf16>, tensor<2x2x100x64xf16>, tensor<2x2x100x32xf16>
  return
}

// return_lse adds the f32 [B, Hq, T] of q, its dynamic sizes kept.
// CHECK-LABEL: sym_name = "attention_lse_shape"
// CHECK: "liger.attention"{{.*}} -> (tensor<?x8x?x32xf16>, tensor<?x8x?xf32>)
func.func @attention_lse_shape(%q: tensor<?x8x?x64xf16>, %k: tensor<?x2x100x64xf16>, %v: tensor<?x2x100x32xf16>) {
  %0, %1 = liger.attention %q, %k, %v causal return_lse : tensor<?x8x?x64xf16>, tensor<?x2x100x64xf16>, tensor<?x2x100x32xf16>
  return
}

// Attention gradients: each of q's, k's and v's type (the incoming gradient
// has the output's [B, Hq, T, Dv]).
// CHECK-LABEL: sym_name = "attention_grad_shapes"
// CHECK: "liger.attention_grad"{{.*}} -> (tensor<2x8x?x64xf16>, tensor<2x2x100x64xf16>, tensor<2x2x100x32xf16>)
func.func @attention_grad_shapes(%do: tensor<2x8x?x32xf16>, %q: tensor<2x8x?x64xf16>, %k: tensor<2x2x100x64xf16>, %v: tensor<2x2x100x32xf16>) {
  %0:3 = liger.attention_grad %do, %q, %k, %v causal : tensor<2x8x?x32xf16>, tensor<2x8x?x64xf16>, tensor<2x2x100x64xf16>, tensor<2x2x100x32xf16>
  return
}

// The saved forward values change no result type.
// CHECK-LABEL: sym_name = "attention_grad_saved_shapes"
// CHECK: "liger.attention_grad"{{.*}} -> (tensor<2x8x?x64xf16>, tensor<2x2x100x64xf16>, tensor<2x2x100x32xf16>)
func.func @attention_grad_saved_shapes(%do: tensor<2x8x?x32xf16>, %q: tensor<2x8x?x64xf16>, %k: tensor<2x2x100x64xf16>, %v: tensor<2x2x100x32xf16>, %lse: tensor<2x8x?xf32>) {
  %0:3 = liger.attention_grad %do, %q, %k, %v saved(%do, %lse : tensor<2x8x?x32xf16>, tensor<2x8x?xf32>) causal : tensor<2x8x?x32xf16>, tensor<2x8x?x64xf16>, tensor<2x2x100x64xf16>, tensor<2x2x100x32xf16>
  return
}

// CHECK-LABEL: sym_name = "grad_shapes"
// CHECK: "liger.rms_norm_grad"{{.*}} -> (tensor<?x64xbf16>, tensor<64xf32>)
// CHECK: "liger.swiglu_grad"{{.*}} -> (tensor<?x64xbf16>, tensor<?x64xbf16>)
// CHECK: "liger.cross_entropy_grad"{{.*}} -> tensor<?x10xbf16>
// CHECK: "liger.layer_norm_grad"{{.*}} -> (tensor<?x64xbf16>, tensor<64xf32>, tensor<64xf32>)
func.func @grad_shapes(%dy: tensor<?x64xbf16>, %w: tensor<64xf32>, %r: tensor<?xf32>, %l: tensor<?x10xbf16>, %t: tensor<?xi64>, %g: tensor<f32>) {
  %0:2 = liger.rms_norm_grad %dy, %dy, %w, %r : tensor<?x64xbf16>, tensor<64xf32>, tensor<?xf32>
  %1:2 = liger.swiglu_grad %dy, %dy, %dy : tensor<?x64xbf16>
  %2 = liger.cross_entropy_grad %l, %t, %g : tensor<?x10xbf16>, tensor<?xi64>, tensor<f32>
  %3:3 = liger.layer_norm_grad %dy, %dy, %w, %r, %r : tensor<?x64xbf16>, tensor<64xf32>, tensor<?xf32>
  return
}
