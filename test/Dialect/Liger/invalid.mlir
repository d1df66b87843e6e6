// Negative tests of the liger dialect: one case per verifier rule, each with
// the full message. Every rule of Verification.cpp, every ODS constraint and
// the dialect-wide trait appears here.
// RUN: liger-opt %s -split-input-file -verify-diagnostics

// Element types outside bf16/f16/f32 (dialect-wide trait).
func.func @f64_input(%x: tensor<4xf64>) -> tensor<4xf64> {
  // expected-error @+1 {{'liger.silu' op operand #0 has element type 'f64'; liger supports bf16, f16 and f32 floats}}
  %y = liger.silu %x : tensor<4xf64>
  return %y : tensor<4xf64>
}
// -----
func.func @i16_target(%l: tensor<4x10xf32>, %t: tensor<4xi16>) -> tensor<f32> {
  // expected-error @+1 {{'liger.cross_entropy' op operand #1 has element type 'i16'; liger supports i32 and i64 indices}}
  %y = liger.cross_entropy %l, %t : tensor<4x10xf32>, tensor<4xi16>
  return %y : tensor<f32>
}
// -----
// ignore_index is compared with each label in the labels' type: one out of
// i32's range would wrap (2^32 to 0) and drop real labels.
func.func @ignore_index_beyond_i32_target(%l: tensor<4x10xf32>, %t: tensor<4xi32>) -> tensor<f32> {
  // expected-error @+1 {{'liger.cross_entropy' op expects 'ignore_index' to fit the i32 labels of 'target' (in [-2147483648, 2147483647]: they are compared with it in that type), got 4294967296}}
  %y = liger.cross_entropy %l, %t ignore_index = 4294967296 : tensor<4x10xf32>, tensor<4xi32>
  return %y : tensor<f32>
}
// -----
func.func @ignore_index_beyond_i32_linear(%h: tensor<4x64xbf16>, %w: tensor<10x64xbf16>, %t: tensor<4xi32>, %g: tensor<f32>) -> tensor<4x64xbf16> {
  // expected-error @+1 {{'liger.fused_linear_cross_entropy_grad' op expects 'ignore_index' to fit the i32 labels of 'target' (in [-2147483648, 2147483647]: they are compared with it in that type), got 2147483648}}
  %dh, %dw = liger.fused_linear_cross_entropy_grad %h, %w, %t, %g ignore_index = 2147483648 : tensor<4x64xbf16>, tensor<10x64xbf16>, tensor<4xi32>, tensor<f32>
  return %dh : tensor<4x64xbf16>
}
// -----
func.func @ignore_index_beyond_i32_shift_labels(%p: tensor<4x10xf32>, %q: tensor<4x10xf32>, %lab: tensor<4xi32>) -> tensor<f32> {
  // expected-error @+1 {{'liger.jsd' op expects 'ignore_index' to fit the i32 labels of 'shift_labels' (in [-2147483648, 2147483647]: they are compared with it in that type), got -2147483649}}
  %y = liger.jsd %p, %q labels(%lab : tensor<4xi32>) ignore_index = -2147483649 : tensor<4x10xf32>
  return %y : tensor<f32>
}
// -----
// A misspelled attribute is not silently kept as metadata.
func.func @unknown_attribute(%x: tensor<4x64xf32>, %w: tensor<64xf32>) -> tensor<4x64xf32> {
  // expected-error @+1 {{'liger.rms_norm' op has unknown attribute 'epsilon'; extra attributes need a dialect prefix (e.g. 'liger.epsilon')}}
  %y = liger.rms_norm %x, %w {epsilon = 1.0e-5 : f32} : tensor<4x64xf32>, tensor<64xf32>
  return %y : tensor<4x64xf32>
}
// -----
func.func @unknown_enum_word(%x: tensor<4x64xf32>, %w: tensor<64xf32>) -> tensor<4x64xf32> {
  // expected-error @+1 {{custom op 'liger.rms_norm' expected one of llama, gemma, none, got 'llama3'}}
  %y = liger.rms_norm %x, %w casting = llama3 : tensor<4x64xf32>, tensor<64xf32>
  return %y : tensor<4x64xf32>
}
// -----
func.func @non_tensor_operand(%x: f32, %w: tensor<64xf32>) {
  // expected-error @+1 {{custom op 'liger.rms_norm' invalid kind of type specified: expected builtin.tensor, but found 'f32'}}
  %y = liger.rms_norm %x, %w : f32, tensor<64xf32>
  return
}
// -----
func.func @unranked_operand_generic(%x: tensor<*xf32>, %w: tensor<64xf32>) {
  // expected-error @+1 {{'liger.rms_norm' op operand #0 must be ranked tensor of floating-point values, but got 'tensor<*xf32>'}}
  %y = "liger.rms_norm"(%x, %w) : (tensor<*xf32>, tensor<64xf32>) -> tensor<*xf32>
  return
}
// -----
// Attribute constraints (ODS).
func.func @eps_not_positive(%x: tensor<4x64xf32>, %w: tensor<64xf32>) -> tensor<4x64xf32> {
  // expected-error @+1 {{'liger.rms_norm' op attribute 'eps' failed to satisfy constraint: 32-bit float attribute whose value is positive}}
  %y = liger.rms_norm %x, %w eps = 0.0 : tensor<4x64xf32>, tensor<64xf32>
  return %y : tensor<4x64xf32>
}
// -----
func.func @offset_not_finite(%x: tensor<4x64xf32>, %w: tensor<64xf32>) -> tensor<4x64xf32> {
  // expected-error @+1 {{'liger.rms_norm' op attribute 'offset' failed to satisfy constraint: 32-bit float attribute whose value is finite}}
  %y = liger.rms_norm %x, %w offset = 0x7F800000 : tensor<4x64xf32>, tensor<64xf32>
  return %y : tensor<4x64xf32>
}
// -----
func.func @label_smoothing_above_one(%l: tensor<4x10xf32>, %t: tensor<4xi64>) -> tensor<f32> {
  // expected-error @+1 {{'liger.cross_entropy' op attribute 'label_smoothing' failed to satisfy constraint: 32-bit float attribute whose value is in [0, 1]}}
  %y = liger.cross_entropy %l, %t label_smoothing = 1.5 : tensor<4x10xf32>, tensor<4xi64>
  return %y : tensor<f32>
}
// -----
func.func @softcap_zero(%l: tensor<4x10xf32>, %t: tensor<4xi64>) -> tensor<f32> {
  // expected-error @+1 {{'liger.cross_entropy' op attribute 'softcap' failed to satisfy constraint: 32-bit float attribute whose value is positive, finite and not subnormal}}
  %y = liger.cross_entropy %l, %t softcap = 0.0 : tensor<4x10xf32>, tensor<4xi64>
  return %y : tensor<f32>
}
// -----
// An infinite softcap would make every logit inf * tanh(0) = NaN.
func.func @softcap_infinite(%l: tensor<4x10xf32>, %t: tensor<4xi64>) -> tensor<f32> {
  // expected-error @+1 {{'liger.cross_entropy' op attribute 'softcap' failed to satisfy constraint: 32-bit float attribute whose value is positive, finite and not subnormal}}
  %y = liger.cross_entropy %l, %t softcap = 0x7F800000 : tensor<4x10xf32>, tensor<4xi64>
  return %y : tensor<f32>
}
// -----
func.func @z_loss_scale_negative(%l: tensor<4x10xf32>, %t: tensor<4xi64>) -> tensor<f32> {
  // expected-error @+1 {{'liger.cross_entropy' op attribute 'lse_square_scale' failed to satisfy constraint: 32-bit float attribute whose value is non-negative}}
  %y = liger.cross_entropy %l, %t lse_square_scale = -1.0 : tensor<4x10xf32>, tensor<4xi64>
  return %y : tensor<f32>
}
// -----
func.func @jsd_beta_above_one(%p: tensor<4x10xf32>, %q: tensor<4x10xf32>) -> tensor<f32> {
  // expected-error @+1 {{'liger.jsd' op attribute 'beta' failed to satisfy constraint: 32-bit float attribute whose value is in [0, 1]}}
  %y = liger.jsd %p, %q beta = 2.0 : tensor<4x10xf32>
  return %y : tensor<f32>
}
// -----
func.func @jsd_temperature_zero(%p: tensor<4x10xbf16>, %q: tensor<4x10xbf16>) -> tensor<f32> {
  // expected-error @+1 {{'liger.jsd' op attribute 'temperature' failed to satisfy constraint: 32-bit float attribute whose value is positive, finite and not subnormal}}
  %y = liger.jsd %p, %q temperature = 0.0 : tensor<4x10xbf16>
  return %y : tensor<f32>
}
// -----
func.func @jsd_grad_temperature_infinite(%p: tensor<4x10xbf16>, %g: tensor<f32>) -> tensor<4x10xbf16> {
  // expected-error @+1 {{'liger.jsd_grad' op attribute 'temperature' failed to satisfy constraint: 32-bit float attribute whose value is positive, finite and not subnormal}}
  %y = liger.jsd_grad %p, %p, %g temperature = 0x7F800000 : tensor<4x10xbf16>, tensor<f32>
  return %y : tensor<4x10xbf16>
}
// -----
// A subnormal temperature's reciprocal, taken in f32, is inf.
func.func @jsd_temperature_subnormal(%p: tensor<4x10xbf16>, %q: tensor<4x10xbf16>) -> tensor<f32> {
  // expected-error @+1 {{'liger.jsd' op attribute 'temperature' failed to satisfy constraint: 32-bit float attribute whose value is positive, finite and not subnormal}}
  %y = liger.jsd %p, %q temperature = 1.0e-40 : tensor<4x10xbf16>
  return %y : tensor<f32>
}
// -----
func.func @attention_scale_negative(%q: tensor<1x2x3x8xf32>, %k: tensor<1x2x3x8xf32>, %v: tensor<1x2x3x8xf32>) -> tensor<1x2x3x8xf32> {
  // expected-error @+1 {{'liger.attention' op attribute 'scale' failed to satisfy constraint: 32-bit float attribute whose value is positive}}
  %y = liger.attention %q, %k, %v scale = -1.0 : tensor<1x2x3x8xf32>, tensor<1x2x3x8xf32>, tensor<1x2x3x8xf32>
  return %y : tensor<1x2x3x8xf32>
}
// -----
func.func @attention_window_zero(%q: tensor<1x2x3x8xf32>, %k: tensor<1x2x3x8xf32>, %v: tensor<1x2x3x8xf32>) -> tensor<1x2x3x8xf32> {
  // expected-error @+1 {{'liger.attention' op attribute 'window' failed to satisfy constraint: 64-bit signless integer attribute whose minimum value is 1}}
  %y = liger.attention %q, %k, %v causal window = 0 : tensor<1x2x3x8xf32>, tensor<1x2x3x8xf32>, tensor<1x2x3x8xf32>
  return %y : tensor<1x2x3x8xf32>
}
// -----
func.func @attention_window_not_causal(%q: tensor<1x2x3x8xf32>, %k: tensor<1x2x3x8xf32>, %v: tensor<1x2x3x8xf32>) -> tensor<1x2x3x8xf32> {
  // expected-error @+1 {{'liger.attention' op expects 'causal' with 'window' (a sliding window bounds the keys below each query's diagonal), got window = 16 without it}}
  %y = liger.attention %q, %k, %v window = 16 : tensor<1x2x3x8xf32>, tensor<1x2x3x8xf32>, tensor<1x2x3x8xf32>
  return %y : tensor<1x2x3x8xf32>
}
// -----
func.func @attention_grad_window_not_causal(%do: tensor<1x2x3x8xf32>, %q: tensor<1x2x3x8xf32>, %k: tensor<1x2x3x8xf32>, %v: tensor<1x2x3x8xf32>) {
  // expected-error @+1 {{'liger.attention_grad' op expects 'causal' with 'window' (a sliding window bounds the keys below each query's diagonal), got window = 2 without it}}
  %d:3 = liger.attention_grad %do, %q, %k, %v window = 2 : tensor<1x2x3x8xf32>, tensor<1x2x3x8xf32>, tensor<1x2x3x8xf32>, tensor<1x2x3x8xf32>
  return
}
// -----
func.func @attention_softcap_zero(%q: tensor<1x2x3x8xf32>, %k: tensor<1x2x3x8xf32>, %v: tensor<1x2x3x8xf32>) -> tensor<1x2x3x8xf32> {
  // expected-error @+1 {{'liger.attention' op attribute 'softcap' failed to satisfy constraint: 32-bit float attribute whose value is positive, finite and not subnormal}}
  %y = liger.attention %q, %k, %v softcap = 0.0 : tensor<1x2x3x8xf32>, tensor<1x2x3x8xf32>, tensor<1x2x3x8xf32>
  return %y : tensor<1x2x3x8xf32>
}
// -----
func.func @attention_softcap_infinite(%q: tensor<1x2x3x8xf32>, %k: tensor<1x2x3x8xf32>, %v: tensor<1x2x3x8xf32>) -> tensor<1x2x3x8xf32> {
  // expected-error @+1 {{'liger.attention' op attribute 'softcap' failed to satisfy constraint: 32-bit float attribute whose value is positive, finite and not subnormal}}
  %y = liger.attention %q, %k, %v causal softcap = 0x7F800000 : tensor<1x2x3x8xf32>, tensor<1x2x3x8xf32>, tensor<1x2x3x8xf32>
  return %y : tensor<1x2x3x8xf32>
}
// -----
func.func @attention_grad_softcap_negative(%do: tensor<1x2x3x8xf32>, %q: tensor<1x2x3x8xf32>, %k: tensor<1x2x3x8xf32>, %v: tensor<1x2x3x8xf32>) {
  // expected-error @+1 {{'liger.attention_grad' op attribute 'softcap' failed to satisfy constraint: 32-bit float attribute whose value is positive, finite and not subnormal}}
  %d:3 = liger.attention_grad %do, %q, %k, %v softcap = -30.0 : tensor<1x2x3x8xf32>, tensor<1x2x3x8xf32>, tensor<1x2x3x8xf32>, tensor<1x2x3x8xf32>
  return
}
// -----
// Type-matching traits (ODS), reachable through the generic form.
func.func @add_rms_norm_residual_type(%x: tensor<4x64xf32>, %r: tensor<4x64xf16>, %w: tensor<64xf32>) {
  // expected-error @+1 {{'liger.add_rms_norm' op failed to verify that all of {input, residual} have same type}}
  %y:2 = "liger.add_rms_norm"(%x, %r, %w) : (tensor<4x64xf32>, tensor<4x64xf16>, tensor<64xf32>) -> (tensor<4x64xf32>, tensor<4x64xf32>)
  return
}
// -----
func.func @rope_sin_type(%q: tensor<1x4x8x16xf32>, %k: tensor<1x2x8x16xf32>, %c: tensor<1x8x16xf32>, %s: tensor<1x8x16xf16>) {
  // expected-error @+1 {{'liger.rope' op failed to verify that all of {cos, sin} have same type}}
  %y:2 = "liger.rope"(%q, %k, %c, %s) : (tensor<1x4x8x16xf32>, tensor<1x2x8x16xf32>, tensor<1x8x16xf32>, tensor<1x8x16xf16>) -> (tensor<1x4x8x16xf32>, tensor<1x2x8x16xf32>)
  return
}
// -----
func.func @rope_k_element_type(%q: tensor<1x4x8x16xf32>, %k: tensor<1x2x8x16xf16>, %c: tensor<1x8x16xf32>) {
  // expected-error @+1 {{'liger.rope' op failed to verify that all of {q, k} have same element type}}
  %y:2 = liger.rope %q, %k, %c, %c : tensor<1x4x8x16xf32>, tensor<1x2x8x16xf16>, tensor<1x8x16xf32>
  return
}
// -----
func.func @linear_weight_element_type(%x: tensor<4x64xf32>, %w: tensor<32x64xbf16>) {
  // expected-error @+1 {{'liger.linear' op failed to verify that all of {input, weight} have same element type}}
  %y = liger.linear %x, %w : tensor<4x64xf32>, tensor<32x64xbf16>
  return
}
// -----
func.func @lora_factor_element_type(%x: tensor<4x64xbf16>, %w: tensor<32x64xbf16>, %a: tensor<8x64xf32>, %b: tensor<32x8xbf16>) {
  // expected-error @+1 {{'liger.lora_linear' op failed to verify that all of {input, weight, lora_a, lora_b} have same element type}}
  %y = liger.lora_linear %x, %w, %a, %b : tensor<4x64xbf16>, tensor<32x64xbf16>, tensor<8x64xf32>, tensor<32x8xbf16>
  return
}
// -----
func.func @swiglu_operand_types(%g: tensor<4x64xbf16>, %u: tensor<4x64xf32>) {
  // expected-error @+1 {{'liger.swiglu' op requires the same type for all operands and results}}
  %y = "liger.swiglu"(%g, %u) : (tensor<4x64xbf16>, tensor<4x64xf32>) -> tensor<4x64xbf16>
  return
}
// -----
func.func @kl_div_target_type(%p: tensor<4x10xf32>, %q: tensor<4x10xf16>) {
  // expected-error @+1 {{'liger.kl_div' op failed to verify that all of {input, target} have same type}}
  %y = "liger.kl_div"(%p, %q) : (tensor<4x10xf32>, tensor<4x10xf16>) -> tensor<f32>
  return
}
// -----
func.func @swiglu_grad_types(%d: tensor<4x64xf32>, %g: tensor<4x64xf32>, %u: tensor<4x32xf32>) {
  // expected-error @+1 {{'liger.swiglu_grad' op failed to verify that all of {grad, gate, up} have same type}}
  %y:2 = "liger.swiglu_grad"(%d, %g, %u) : (tensor<4x64xf32>, tensor<4x64xf32>, tensor<4x32xf32>) -> (tensor<4x64xf32>, tensor<4x64xf32>)
  return
}
// -----
func.func @rms_norm_grad_grad_type(%d: tensor<4x64xf16>, %x: tensor<4x64xf32>, %w: tensor<64xf32>, %r: tensor<4xf32>) {
  // expected-error @+1 {{'liger.rms_norm_grad' op failed to verify that all of {grad, input} have same type}}
  %y:2 = "liger.rms_norm_grad"(%d, %x, %w, %r) : (tensor<4x64xf16>, tensor<4x64xf32>, tensor<64xf32>, tensor<4xf32>) -> (tensor<4x64xf32>, tensor<64xf32>)
  return
}
// -----
// Inferred result types must match the ones a generic op spells.
func.func @result_type_mismatch(%x: tensor<4x64xf32>, %w: tensor<32x64xf32>) {
  // expected-error @+2 {{'liger.linear' op inferred type(s) 'tensor<4x32xf32>' are incompatible with return type(s) of operation 'tensor<4x64xf32>'}}
  // expected-error @+1 {{'liger.linear' op failed to infer returned types}}
  %y = "liger.linear"(%x, %w) : (tensor<4x64xf32>, tensor<32x64xf32>) -> tensor<4x64xf32>
  return
}
// -----
// Norm rules.
func.func @norm_input_rank_zero(%x: tensor<f32>, %w: tensor<64xf32>) {
  // expected-error @+1 {{'liger.rms_norm' op expects 'input' to have rank >= 1, got 'tensor<f32>'}}
  %y = liger.rms_norm %x, %w : tensor<f32>, tensor<64xf32>
  return
}
// -----
func.func @norm_hidden_dynamic(%x: tensor<4x?xf32>, %w: tensor<64xf32>) {
  // expected-error @+1 {{'liger.rms_norm' op expects the last (hidden) dimension of 'input' to be static, got 'tensor<4x?xf32>'}}
  %y = liger.rms_norm %x, %w : tensor<4x?xf32>, tensor<64xf32>
  return
}
// -----
func.func @norm_weight_size(%x: tensor<4x64xf32>, %w: tensor<32xf32>) {
  // expected-error @+1 {{'liger.rms_norm' op expects 'weight' to have shape [64] (the hidden size of 'input'), got 'tensor<32xf32>'}}
  %y = liger.rms_norm %x, %w : tensor<4x64xf32>, tensor<32xf32>
  return
}
// -----
func.func @norm_weight_rank(%x: tensor<4x64xf32>, %w: tensor<1x64xf32>) {
  // expected-error @+1 {{'liger.add_rms_norm' op expects 'weight' to have shape [64] (the hidden size of 'input'), got 'tensor<1x64xf32>'}}
  %y, %s = liger.add_rms_norm %x, %x, %w : tensor<4x64xf32>, tensor<1x64xf32>
  return
}
// -----
func.func @layer_norm_grad_weight_size(%d: tensor<4x64xf32>, %w: tensor<32xf32>, %s: tensor<4xf32>) {
  // expected-error @+1 {{'liger.layer_norm_grad' op expects 'weight' to have shape [64] (the hidden size of 'input'), got 'tensor<32xf32>'}}
  %y:3 = liger.layer_norm_grad %d, %d, %w, %s, %s : tensor<4x64xf32>, tensor<32xf32>, tensor<4xf32>
  return
}
// -----
func.func @layer_norm_grad_grad_type(%d: tensor<4x64xf16>, %x: tensor<4x64xf32>, %w: tensor<64xf32>, %s: tensor<4xf32>) {
  // expected-error @+1 {{'liger.layer_norm_grad' op failed to verify that all of {grad, input} have same type}}
  %y:3 = "liger.layer_norm_grad"(%d, %x, %w, %s, %s) : (tensor<4x64xf16>, tensor<4x64xf32>, tensor<64xf32>, tensor<4xf32>, tensor<4xf32>) -> (tensor<4x64xf32>, tensor<64xf32>, tensor<64xf32>)
  return
}
// -----
func.func @layer_norm_grad_mean_shape(%d: tensor<4x64xf32>, %w: tensor<64xf32>, %s: tensor<5xf32>) {
  // expected-error @+1 {{'liger.layer_norm_grad' op expects 'mean' to be 'tensor<4xf32>' (the rows of 'input' in f32), got 'tensor<5xf32>'}}
  %y:3 = liger.layer_norm_grad %d, %d, %w, %s, %s : tensor<4x64xf32>, tensor<64xf32>, tensor<5xf32>
  return
}
// -----
func.func @layer_norm_grad_mean_dtype(%d: tensor<4x64xbf16>, %w: tensor<64xbf16>, %s: tensor<4xbf16>) {
  // expected-error @+1 {{'liger.layer_norm_grad' op expects 'mean' to be 'tensor<4xf32>' (the rows of 'input' in f32), got 'tensor<4xbf16>'}}
  %y:3 = liger.layer_norm_grad %d, %d, %w, %s, %s : tensor<4x64xbf16>, tensor<64xbf16>, tensor<4xbf16>
  return
}
// -----
// rstd has mean's type (the custom form spells one for both): a wrong rstd
// beside a right mean, through the generic form.
func.func @layer_norm_grad_rstd_dtype(%d: tensor<4x64xf32>, %w: tensor<64xf32>, %m: tensor<4xf32>, %r: tensor<4xbf16>) {
  // expected-error @+1 {{'liger.layer_norm_grad' op failed to verify that all of {mean, rstd} have same type}}
  %y:3 = "liger.layer_norm_grad"(%d, %d, %w, %m, %r) : (tensor<4x64xf32>, tensor<4x64xf32>, tensor<64xf32>, tensor<4xf32>, tensor<4xbf16>) -> (tensor<4x64xf32>, tensor<64xf32>, tensor<64xf32>)
  return
}
// -----
// Both statistics fit the rows (one dynamic), but are not of one type.
func.func @layer_norm_grad_stats_types(%d: tensor<4x64xf32>, %w: tensor<64xf32>, %m: tensor<4xf32>, %r: tensor<?xf32>) {
  // expected-error @+1 {{'liger.layer_norm_grad' op failed to verify that all of {mean, rstd} have same type}}
  %y:3 = "liger.layer_norm_grad"(%d, %d, %w, %m, %r) : (tensor<4x64xf32>, tensor<4x64xf32>, tensor<64xf32>, tensor<4xf32>, tensor<?xf32>) -> (tensor<4x64xf32>, tensor<64xf32>, tensor<64xf32>)
  return
}
// -----
func.func @layer_norm_bias_type(%x: tensor<4x64xf32>, %w: tensor<64xf32>, %b: tensor<64xf16>) {
  // expected-error @+1 {{'liger.layer_norm' op expects 'bias' to have the type of 'weight' ('tensor<64xf32>'), got 'tensor<64xf16>'}}
  %y = liger.layer_norm %x, %w, %b : tensor<4x64xf32>, tensor<64xf32>, tensor<64xf16>
  return
}
// -----
// The statistics come with `stats` and only then: a generic op that spells
// them without it (or with it, spells none) does not verify.
func.func @layer_norm_stats_without_flag(%x: tensor<4x64xf32>, %w: tensor<64xf32>) {
  // expected-error @+2 {{'liger.layer_norm' op inferred type(s) 'tensor<4x64xf32>' are incompatible with return type(s) of operation 'tensor<4x64xf32>', 'tensor<4xf32>', 'tensor<4xf32>'}}
  // expected-error @+1 {{'liger.layer_norm' op failed to infer returned types}}
  %y:3 = "liger.layer_norm"(%x, %w) : (tensor<4x64xf32>, tensor<64xf32>) -> (tensor<4x64xf32>, tensor<4xf32>, tensor<4xf32>)
  return
}
// -----
func.func @layer_norm_flag_without_stats(%x: tensor<4x64xf32>, %w: tensor<64xf32>) {
  // expected-error @+2 {{'liger.layer_norm' op inferred type(s) 'tensor<4x64xf32>', 'tensor<4xf32>', 'tensor<4xf32>' are incompatible with return type(s) of operation 'tensor<4x64xf32>'}}
  // expected-error @+1 {{'liger.layer_norm' op failed to infer returned types}}
  %y = "liger.layer_norm"(%x, %w) <{with_stats}> : (tensor<4x64xf32>, tensor<64xf32>) -> tensor<4x64xf32>
  return
}
// -----
func.func @rms_norm_grad_rstd_shape(%d: tensor<4x64xf32>, %w: tensor<64xf32>, %r: tensor<5xf32>) {
  // expected-error @+1 {{'liger.rms_norm_grad' op expects 'rstd' to be 'tensor<4xf32>' (the rows of 'input' in f32), got 'tensor<5xf32>'}}
  %y:2 = liger.rms_norm_grad %d, %d, %w, %r : tensor<4x64xf32>, tensor<64xf32>, tensor<5xf32>
  return
}
// -----
func.func @rms_norm_grad_rstd_dtype(%d: tensor<4x64xbf16>, %w: tensor<64xbf16>, %r: tensor<4xbf16>) {
  // expected-error @+1 {{'liger.rms_norm_grad' op expects 'rstd' to be 'tensor<4xf32>' (the rows of 'input' in f32), got 'tensor<4xbf16>'}}
  %y:2 = liger.rms_norm_grad %d, %d, %w, %r : tensor<4x64xbf16>, tensor<64xbf16>, tensor<4xbf16>
  return
}
// -----
func.func @softmax_dynamic_last_dim(%x: tensor<4x?xf32>) {
  // expected-error @+1 {{'liger.softmax' op expects the last (hidden) dimension of 'input' to be static, got 'tensor<4x?xf32>'}}
  %y = liger.softmax %x : tensor<4x?xf32>
  return
}
// -----
// RoPE rules.
func.func @rope_q_rank(%q: tensor<4x8x16xf32>, %k: tensor<1x2x8x16xf32>, %c: tensor<1x8x16xf32>) {
  // expected-error @+1 {{'liger.rope' op expects 'q' to have rank 4 ([batch, heads, seq, head_dim]), got 'tensor<4x8x16xf32>'}}
  %y:2 = liger.rope %q, %k, %c, %c : tensor<4x8x16xf32>, tensor<1x2x8x16xf32>, tensor<1x8x16xf32>
  return
}
// -----
func.func @rope_k_rank(%q: tensor<1x4x8x16xf32>, %k: tensor<2x8x16xf32>, %c: tensor<1x8x16xf32>) {
  // expected-error @+1 {{'liger.rope' op expects 'k' to have rank 4 ([batch, heads, seq, head_dim]), got 'tensor<2x8x16xf32>'}}
  %y:2 = liger.rope %q, %k, %c, %c : tensor<1x4x8x16xf32>, tensor<2x8x16xf32>, tensor<1x8x16xf32>
  return
}
// -----
func.func @rope_cos_rank(%q: tensor<1x4x8x16xf32>, %k: tensor<1x2x8x16xf32>, %c: tensor<8x16xf32>) {
  // expected-error @+1 {{'liger.rope' op expects 'cos' to have rank 3 ([batch or 1, seq, head_dim]), got 'tensor<8x16xf32>'}}
  %y:2 = liger.rope %q, %k, %c, %c : tensor<1x4x8x16xf32>, tensor<1x2x8x16xf32>, tensor<8x16xf32>
  return
}
// -----
func.func @rope_dynamic_heads(%q: tensor<1x?x8x16xf32>, %k: tensor<1x2x8x16xf32>, %c: tensor<1x8x16xf32>) {
  // expected-error @+1 {{'liger.rope' op expects the head count (dimension 1) of 'q' to be static, got 'tensor<1x?x8x16xf32>'}}
  %y:2 = liger.rope %q, %k, %c, %c : tensor<1x?x8x16xf32>, tensor<1x2x8x16xf32>, tensor<1x8x16xf32>
  return
}
// -----
func.func @rope_odd_head_dim(%q: tensor<1x4x8x15xf32>, %k: tensor<1x2x8x15xf32>, %c: tensor<1x8x15xf32>) {
  // expected-error @+1 {{'liger.rope' op expects the head dimension (dimension 3) of 'q' to be static and even, got 'tensor<1x4x8x15xf32>'}}
  %y:2 = liger.rope %q, %k, %c, %c : tensor<1x4x8x15xf32>, tensor<1x2x8x15xf32>, tensor<1x8x15xf32>
  return
}
// -----
func.func @rope_k_seq(%q: tensor<1x4x8x16xf32>, %k: tensor<1x2x9x16xf32>, %c: tensor<1x8x16xf32>) {
  // expected-error @+1 {{'liger.rope' op expects 'k' to match 'q' in dimension 2 (seq): 9 vs 8}}
  %y:2 = liger.rope %q, %k, %c, %c : tensor<1x4x8x16xf32>, tensor<1x2x9x16xf32>, tensor<1x8x16xf32>
  return
}
// -----
func.func @rope_cos_batch(%q: tensor<2x4x8x16xf32>, %k: tensor<2x2x8x16xf32>, %c: tensor<3x8x16xf32>) {
  // expected-error @+1 {{'liger.rope' op expects dimension 0 of 'cos' to be 1 or the batch size of 'q' (2), got 3}}
  %y:2 = liger.rope %q, %k, %c, %c : tensor<2x4x8x16xf32>, tensor<2x2x8x16xf32>, tensor<3x8x16xf32>
  return
}
// -----
func.func @rope_cos_seq(%q: tensor<1x4x8x16xf32>, %k: tensor<1x2x8x16xf32>, %c: tensor<1x7x16xf32>) {
  // expected-error @+1 {{'liger.rope' op expects dimension 1 of 'cos' to be the sequence length of 'q' (8), got 7}}
  %y:2 = liger.rope %q, %k, %c, %c : tensor<1x4x8x16xf32>, tensor<1x2x8x16xf32>, tensor<1x7x16xf32>
  return
}
// -----
func.func @rope_cos_head_dim(%q: tensor<1x4x8x16xf32>, %k: tensor<1x2x8x16xf32>, %c: tensor<1x8x8xf32>) {
  // expected-error @+1 {{'liger.rope' op expects dimension 2 of 'cos' to be the head dimension of 'q' (16), got 8}}
  %y:2 = liger.rope %q, %k, %c, %c : tensor<1x4x8x16xf32>, tensor<1x2x8x16xf32>, tensor<1x8x8xf32>
  return
}
// -----
func.func @rope_grad_names_its_operands(%q: tensor<1x4x8x16xf32>, %k: tensor<1x2x8x14xf32>, %c: tensor<1x8x16xf32>) {
  // expected-error @+1 {{'liger.rope_grad' op expects 'grad_k' to match 'grad_q' in dimension 3 (head_dim): 14 vs 16}}
  %y:2 = liger.rope_grad %q, %k, %c, %c : tensor<1x4x8x16xf32>, tensor<1x2x8x14xf32>, tensor<1x8x16xf32>
  return
}
// -----
// Projection rules.
func.func @linear_weight_rank(%x: tensor<4x64xf32>, %w: tensor<64xf32>) {
  // expected-error @+1 {{'liger.linear' op expects 'weight' to have rank 2 ([out_features, in_features]), got 'tensor<64xf32>'}}
  %y = liger.linear %x, %w : tensor<4x64xf32>, tensor<64xf32>
  return
}
// -----
func.func @linear_weight_dynamic(%x: tensor<4x64xf32>, %w: tensor<?x64xf32>) {
  // expected-error @+1 {{'liger.linear' op expects 'weight' to have a static shape, got 'tensor<?x64xf32>'}}
  %y = liger.linear %x, %w : tensor<4x64xf32>, tensor<?x64xf32>
  return
}
// -----
func.func @linear_in_features(%x: tensor<4x64xf32>, %w: tensor<32x48xf32>) {
  // expected-error @+1 {{'liger.linear' op expects dimension 1 (in_features) of 'weight' to be 64 (the last dimension of 'input'), got 48}}
  %y = liger.linear %x, %w : tensor<4x64xf32>, tensor<32x48xf32>
  return
}
// -----
func.func @linear_input_hidden_dynamic(%x: tensor<4x?xf32>, %w: tensor<32x64xf32>) {
  // expected-error @+1 {{'liger.linear' op expects the last (hidden) dimension of 'input' to be static, got 'tensor<4x?xf32>'}}
  %y = liger.linear %x, %w : tensor<4x?xf32>, tensor<32x64xf32>
  return
}
// -----
func.func @linear_bias_shape(%x: tensor<4x64xf32>, %w: tensor<32x64xf32>, %b: tensor<64xf32>) {
  // expected-error @+1 {{'liger.linear' op expects 'bias' to have shape [32] (out_features), got 'tensor<64xf32>'}}
  %y = liger.linear %x, %w, %b : tensor<4x64xf32>, tensor<32x64xf32>, tensor<64xf32>
  return
}
// -----
func.func @linear_bias_element_type(%x: tensor<4x64xbf16>, %w: tensor<32x64xbf16>, %b: tensor<32xf32>) {
  // expected-error @+1 {{'liger.linear' op expects 'bias' to have the element type of 'input' ('bf16'), got 'f32'}}
  %y = liger.linear %x, %w, %b : tensor<4x64xbf16>, tensor<32x64xbf16>, tensor<32xf32>
  return
}
// -----
func.func @lora_a_rank(%x: tensor<4x64xf32>, %w: tensor<32x64xf32>, %a: tensor<64xf32>, %b: tensor<32x8xf32>) {
  // expected-error @+1 {{'liger.lora_linear' op expects 'lora_a' to have rank 2 ([rank, in_features]), got 'tensor<64xf32>'}}
  %y = liger.lora_linear %x, %w, %a, %b : tensor<4x64xf32>, tensor<32x64xf32>, tensor<64xf32>, tensor<32x8xf32>
  return
}
// -----
func.func @lora_a_in_features(%x: tensor<4x64xf32>, %w: tensor<32x64xf32>, %a: tensor<8x32xf32>, %b: tensor<32x8xf32>) {
  // expected-error @+1 {{'liger.lora_linear' op expects dimension 1 of 'lora_a' to be 64 (the last dimension of 'input'), got 32}}
  %y = liger.lora_linear %x, %w, %a, %b : tensor<4x64xf32>, tensor<32x64xf32>, tensor<8x32xf32>, tensor<32x8xf32>
  return
}
// -----
func.func @lora_rank_zero(%x: tensor<4x64xf32>, %w: tensor<32x64xf32>, %a: tensor<0x64xf32>, %b: tensor<32x0xf32>) {
  // expected-error @+1 {{'liger.lora_linear' op expects the rank (dimension 0) of 'lora_a' to be >= 1, got 0}}
  %y = liger.lora_linear %x, %w, %a, %b : tensor<4x64xf32>, tensor<32x64xf32>, tensor<0x64xf32>, tensor<32x0xf32>
  return
}
// -----
func.func @lora_b_shape(%x: tensor<4x64xf32>, %w: tensor<32x64xf32>, %a: tensor<8x64xf32>, %b: tensor<32x4xf32>) {
  // expected-error @+1 {{'liger.lora_linear' op expects 'lora_b' to have shape [32, 8] ([out_features, rank]), got 'tensor<32x4xf32>'}}
  %y = liger.lora_linear %x, %w, %a, %b : tensor<4x64xf32>, tensor<32x64xf32>, tensor<8x64xf32>, tensor<32x4xf32>
  return
}
// -----
func.func @lora_b_dynamic(%x: tensor<4x64xf32>, %w: tensor<32x64xf32>, %a: tensor<8x64xf32>, %b: tensor<32x?xf32>) {
  // expected-error @+1 {{'liger.lora_linear' op expects 'lora_b' to have a static shape, got 'tensor<32x?xf32>'}}
  %y = liger.lora_linear %x, %w, %a, %b : tensor<4x64xf32>, tensor<32x64xf32>, tensor<8x64xf32>, tensor<32x?xf32>
  return
}
// -----
// Loss rules.
func.func @ce_logits_rank(%l: tensor<2x4x10xf32>, %t: tensor<4xi64>) {
  // expected-error @+1 {{'liger.cross_entropy' op expects 'logits' to have rank 2 ([tokens, vocab]), got 'tensor<2x4x10xf32>'}}
  %y = liger.cross_entropy %l, %t : tensor<2x4x10xf32>, tensor<4xi64>
  return
}
// -----
func.func @ce_vocab_dynamic(%l: tensor<4x?xf32>, %t: tensor<4xi64>) {
  // expected-error @+1 {{'liger.cross_entropy' op expects dimension 1 of 'logits' to be static, got 'tensor<4x?xf32>'}}
  %y = liger.cross_entropy %l, %t : tensor<4x?xf32>, tensor<4xi64>
  return
}
// -----
func.func @ce_target_rank(%l: tensor<4x10xf32>, %t: tensor<4x1xi64>) {
  // expected-error @+1 {{'liger.cross_entropy' op expects 'target' to have rank 1 ([tokens]), got 'tensor<4x1xi64>'}}
  %y = liger.cross_entropy %l, %t : tensor<4x10xf32>, tensor<4x1xi64>
  return
}
// -----
func.func @ce_target_tokens(%l: tensor<4x10xf32>, %t: tensor<5xi64>) {
  // expected-error @+1 {{'liger.cross_entropy' op expects 'target' to have one entry per token (4), got 5}}
  %y = liger.cross_entropy %l, %t : tensor<4x10xf32>, tensor<5xi64>
  return
}
// -----
func.func @ce_class_weight_shape(%l: tensor<4x10xf32>, %t: tensor<4xi64>, %w: tensor<11xf32>) {
  // expected-error @+1 {{'liger.cross_entropy' op expects 'weight' to have shape [10] (one weight per class), got 'tensor<11xf32>'}}
  %y = liger.cross_entropy %l, %t weight(%w : tensor<11xf32>) : tensor<4x10xf32>, tensor<4xi64>
  return
}
// -----
func.func @flce_hidden_rank(%h: tensor<2x4x64xbf16>, %w: tensor<100x64xbf16>, %t: tensor<4xi64>) {
  // expected-error @+1 {{'liger.fused_linear_cross_entropy' op expects 'hidden' to have rank 2 ([tokens, hidden]), got 'tensor<2x4x64xbf16>'}}
  %y = liger.fused_linear_cross_entropy %h, %w, %t : tensor<2x4x64xbf16>, tensor<100x64xbf16>, tensor<4xi64>
  return
}
// -----
func.func @flce_weight_hidden_size(%h: tensor<4x64xbf16>, %w: tensor<100x32xbf16>, %t: tensor<4xi64>) {
  // expected-error @+1 {{'liger.fused_linear_cross_entropy' op expects dimension 1 (in_features) of 'weight' to be 64 (the last dimension of 'hidden'), got 32}}
  %y = liger.fused_linear_cross_entropy %h, %w, %t : tensor<4x64xbf16>, tensor<100x32xbf16>, tensor<4xi64>
  return
}
// -----
func.func @flce_bias_shape(%h: tensor<4x64xbf16>, %w: tensor<100x64xbf16>, %t: tensor<4xi64>, %b: tensor<64xbf16>) {
  // expected-error @+1 {{'liger.fused_linear_cross_entropy' op expects 'bias' to have shape [100] (out_features), got 'tensor<64xbf16>'}}
  %y = liger.fused_linear_cross_entropy %h, %w, %t bias(%b : tensor<64xbf16>) : tensor<4x64xbf16>, tensor<100x64xbf16>, tensor<4xi64>
  return
}
// -----
func.func @flce_target_tokens(%h: tensor<4x64xbf16>, %w: tensor<100x64xbf16>, %t: tensor<3xi64>) {
  // expected-error @+1 {{'liger.fused_linear_cross_entropy' op expects 'target' to have one entry per token (4), got 3}}
  %y = liger.fused_linear_cross_entropy %h, %w, %t : tensor<4x64xbf16>, tensor<100x64xbf16>, tensor<3xi64>
  return
}
// -----
func.func @flce_class_weight_shape(%h: tensor<4x64xbf16>, %w: tensor<100x64xbf16>, %t: tensor<4xi64>, %cw: tensor<64xf32>) {
  // expected-error @+1 {{'liger.fused_linear_cross_entropy' op expects 'class_weight' to have shape [100] (one weight per class), got 'tensor<64xf32>'}}
  %y = liger.fused_linear_cross_entropy %h, %w, %t class_weight(%cw : tensor<64xf32>) : tensor<4x64xbf16>, tensor<100x64xbf16>, tensor<4xi64>
  return
}

// -----

// The backward of fused_linear_cross_entropy: the forward's rules plus the
// incoming gradient's.
func.func @flce_grad_loss_shape(%h: tensor<4x8xf32>, %w: tensor<12x8xf32>, %t: tensor<4xi64>, %g: tensor<4xf32>) {
  // expected-error @+1 {{'liger.fused_linear_cross_entropy_grad' op expects 'grad_loss' to be 'tensor<f32>' (a scalar for a reduced loss), got 'tensor<4xf32>'}}
  %dh, %dw = liger.fused_linear_cross_entropy_grad %h, %w, %t, %g : tensor<4x8xf32>, tensor<12x8xf32>, tensor<4xi64>, tensor<4xf32>
  return
}

// -----

func.func @flce_grad_loss_per_token(%h: tensor<4x8xf32>, %w: tensor<12x8xf32>, %t: tensor<4xi64>, %g: tensor<f32>) {
  // expected-error @+1 {{'liger.fused_linear_cross_entropy_grad' op expects 'grad_loss' to be 'tensor<4xf32>' (one f32 gradient per token), got 'tensor<f32>'}}
  %dh, %dw = liger.fused_linear_cross_entropy_grad %h, %w, %t, %g reduction = none : tensor<4x8xf32>, tensor<12x8xf32>, tensor<4xi64>, tensor<f32>
  return
}

// -----

func.func @flce_grad_weight_columns(%h: tensor<4x8xf32>, %w: tensor<12x9xf32>, %t: tensor<4xi64>, %g: tensor<f32>) {
  // expected-error @+1 {{'liger.fused_linear_cross_entropy_grad' op expects dimension 1 (in_features) of 'weight' to be 8 (the last dimension of 'hidden'), got 9}}
  %dh, %dw = liger.fused_linear_cross_entropy_grad %h, %w, %t, %g : tensor<4x8xf32>, tensor<12x9xf32>, tensor<4xi64>, tensor<f32>
  return
}

// -----

func.func @flce_grad_targets(%h: tensor<4x8xf32>, %w: tensor<12x8xf32>, %t: tensor<5xi64>, %g: tensor<f32>) {
  // expected-error @+1 {{'liger.fused_linear_cross_entropy_grad' op expects 'target' to have one entry per token (4), got 5}}
  %dh, %dw = liger.fused_linear_cross_entropy_grad %h, %w, %t, %g : tensor<4x8xf32>, tensor<12x8xf32>, tensor<5xi64>, tensor<f32>
  return
}

// -----

func.func @flce_grad_class_weight_rank(%h: tensor<4x8xf32>, %w: tensor<12x8xf32>, %t: tensor<4xi64>, %g: tensor<f32>, %cw: tensor<1x12xf32>) {
  // expected-error @+1 {{'liger.fused_linear_cross_entropy_grad' op expects 'class_weight' to have shape [12] (one weight per class), got 'tensor<1x12xf32>'}}
  %dh, %dw = liger.fused_linear_cross_entropy_grad %h, %w, %t, %g class_weight(%cw : tensor<1x12xf32>) : tensor<4x8xf32>, tensor<12x8xf32>, tensor<4xi64>, tensor<f32>
  return
}

// -----

func.func @flce_grad_hidden_rank(%h: tensor<2x4x8xf32>, %w: tensor<12x8xf32>, %t: tensor<4xi64>, %g: tensor<f32>) {
  // expected-error @+1 {{'liger.fused_linear_cross_entropy_grad' op expects 'hidden' to have rank 2 ([tokens, hidden]), got 'tensor<2x4x8xf32>'}}
  %dh, %dw = liger.fused_linear_cross_entropy_grad %h, %w, %t, %g : tensor<2x4x8xf32>, tensor<12x8xf32>, tensor<4xi64>, tensor<f32>
  return
}
// -----
func.func @ce_grad_loss_mean_needs_scalar(%l: tensor<4x10xf32>, %t: tensor<4xi64>, %g: tensor<4xf32>) {
  // expected-error @+1 {{'liger.cross_entropy_grad' op expects 'grad_loss' to be 'tensor<f32>' (a scalar for a reduced loss), got 'tensor<4xf32>'}}
  %y = liger.cross_entropy_grad %l, %t, %g : tensor<4x10xf32>, tensor<4xi64>, tensor<4xf32>
  return
}
// -----
func.func @ce_grad_loss_none_needs_per_token(%l: tensor<4x10xf32>, %t: tensor<4xi64>, %g: tensor<f32>) {
  // expected-error @+1 {{'liger.cross_entropy_grad' op expects 'grad_loss' to be 'tensor<4xf32>' (one f32 gradient per token), got 'tensor<f32>'}}
  %y = liger.cross_entropy_grad %l, %t, %g reduction = none : tensor<4x10xf32>, tensor<4xi64>, tensor<f32>
  return
}
// -----
func.func @kl_div_rank(%p: tensor<10xf32>) {
  // expected-error @+1 {{'liger.kl_div' op expects 'input' to have rank 2 ([tokens, vocab]), got 'tensor<10xf32>'}}
  %y = liger.kl_div %p, %p : tensor<10xf32>
  return
}
// -----
func.func @jsd_labels_tokens(%p: tensor<4x10xf32>, %lab: tensor<5xi64>) {
  // expected-error @+1 {{'liger.jsd' op expects 'shift_labels' to be 'tensor<4xi64>' (one label per token), got 'tensor<5xi64>'}}
  %y = liger.jsd %p, %p labels(%lab : tensor<5xi64>) : tensor<4x10xf32>
  return
}
// -----
func.func @kl_div_per_token_none(%p: tensor<4x10xf32>) {
  // expected-error @+1 {{'liger.kl_div' op expects 'per_token' with a reduction over tokens (sum, mean or batchmean), got reduction = none}}
  %y = liger.kl_div %p, %p reduction = none per_token : tensor<4x10xf32>
  return
}
// -----
func.func @kl_div_grad_per_token_none(%p: tensor<4x10xf32>, %g: tensor<4x10xf32>) {
  // expected-error @+1 {{'liger.kl_div_grad' op expects 'per_token' with a reduction over tokens (sum, mean or batchmean), got reduction = none}}
  %y = liger.kl_div_grad %p, %g reduction = none per_token : tensor<4x10xf32>, tensor<4x10xf32>
  return
}
// -----
func.func @kl_div_grad_target_rank(%p: tensor<10xf32>, %g: tensor<f32>) {
  // expected-error @+1 {{'liger.kl_div_grad' op expects 'target' to have rank 2 ([tokens, vocab]), got 'tensor<10xf32>'}}
  %y = liger.kl_div_grad %p, %g : tensor<10xf32>, tensor<f32>
  return
}
// -----
func.func @kl_div_grad_loss_reduced(%p: tensor<4x10xbf16>, %g: tensor<4xf32>) {
  // expected-error @+1 {{'liger.kl_div_grad' op expects 'grad_loss' to be 'tensor<f32>' (a scalar for a reduced loss), got 'tensor<4xf32>'}}
  %y = liger.kl_div_grad %p, %g : tensor<4x10xbf16>, tensor<4xf32>
  return
}
// -----
func.func @kl_div_grad_loss_pointwise(%p: tensor<4x10xbf16>, %g: tensor<4x10xbf16>) {
  // expected-error @+1 {{'liger.kl_div_grad' op expects 'grad_loss' to be 'tensor<4x10xf32>' (one f32 per element), got 'tensor<4x10xbf16>'}}
  %y = liger.kl_div_grad %p, %g reduction = none : tensor<4x10xbf16>, tensor<4x10xbf16>
  return
}
// -----
func.func @kl_div_grad_loss_per_token(%p: tensor<4x10xbf16>, %g: tensor<5xf32>) {
  // expected-error @+1 {{'liger.kl_div_grad' op expects 'grad_loss' to be 'tensor<4xf32>' (one f32 per token), got 'tensor<5xf32>'}}
  %y = liger.kl_div_grad %p, %g reduction = sum per_token : tensor<4x10xbf16>, tensor<5xf32>
  return
}
// -----
func.func @jsd_grad_target_type(%p: tensor<4x10xf32>, %q: tensor<4x10xbf16>, %g: tensor<f32>) {
  // expected-error @+1 {{'liger.jsd_grad' op failed to verify that all of {input, target} have same type}}
  %y = "liger.jsd_grad"(%p, %q, %g) : (tensor<4x10xf32>, tensor<4x10xbf16>, tensor<f32>) -> tensor<4x10xf32>
  return
}
// -----
func.func @jsd_grad_labels_tokens(%p: tensor<4x10xf32>, %g: tensor<f32>, %lab: tensor<3xi64>) {
  // expected-error @+1 {{'liger.jsd_grad' op expects 'shift_labels' to be 'tensor<4xi64>' (one label per token), got 'tensor<3xi64>'}}
  %y = liger.jsd_grad %p, %p, %g labels(%lab : tensor<3xi64>) : tensor<4x10xf32>, tensor<f32>
  return
}
// -----
func.func @jsd_grad_loss_per_token(%p: tensor<4x10xf32>, %g: tensor<f32>) {
  // expected-error @+1 {{'liger.jsd_grad' op expects 'grad_loss' to be 'tensor<4xf32>' (one f32 per token), got 'tensor<f32>'}}
  %y = liger.jsd_grad %p, %p, %g per_token : tensor<4x10xf32>, tensor<f32>
  return
}
// -----
func.func @jsd_grad_beta_above_one(%p: tensor<4x10xf32>, %g: tensor<f32>) {
  // expected-error @+1 {{'liger.jsd_grad' op attribute 'beta' failed to satisfy constraint: 32-bit float attribute whose value is in [0, 1]}}
  %y = liger.jsd_grad %p, %p, %g beta = 1.5 : tensor<4x10xf32>, tensor<f32>
  return
}
// -----
// Attention rules.
func.func @attention_v_rank(%q: tensor<1x4x8x16xf32>, %k: tensor<1x2x8x16xf32>, %v: tensor<2x8x16xf32>) {
  // expected-error @+1 {{'liger.attention' op expects 'v' to have rank 4 ([batch, heads, seq, head_dim]), got 'tensor<2x8x16xf32>'}}
  %y = liger.attention %q, %k, %v : tensor<1x4x8x16xf32>, tensor<1x2x8x16xf32>, tensor<2x8x16xf32>
  return
}
// -----
func.func @attention_dynamic_heads(%q: tensor<1x?x8x16xf32>, %k: tensor<1x2x8x16xf32>, %v: tensor<1x2x8x16xf32>) {
  // expected-error @+1 {{'liger.attention' op expects the head count and head dimension of 'q' to be static, got 'tensor<1x?x8x16xf32>'}}
  %y = liger.attention %q, %k, %v : tensor<1x?x8x16xf32>, tensor<1x2x8x16xf32>, tensor<1x2x8x16xf32>
  return
}
// -----
func.func @attention_gqa_ratio(%q: tensor<1x6x8x16xf32>, %k: tensor<1x4x8x16xf32>, %v: tensor<1x4x8x16xf32>) {
  // expected-error @+1 {{'liger.attention' op expects the head count of 'q' (6) to be a multiple of that of 'k' (4)}}
  %y = liger.attention %q, %k, %v : tensor<1x6x8x16xf32>, tensor<1x4x8x16xf32>, tensor<1x4x8x16xf32>
  return
}
// -----
func.func @attention_v_heads(%q: tensor<1x4x8x16xf32>, %k: tensor<1x2x8x16xf32>, %v: tensor<1x1x8x16xf32>) {
  // expected-error @+1 {{'liger.attention' op expects 'v' to have the head count of 'k' (2), got 1}}
  %y = liger.attention %q, %k, %v : tensor<1x4x8x16xf32>, tensor<1x2x8x16xf32>, tensor<1x1x8x16xf32>
  return
}
// -----
func.func @attention_k_head_dim(%q: tensor<1x4x8x16xf32>, %k: tensor<1x2x8x32xf32>, %v: tensor<1x2x8x16xf32>) {
  // expected-error @+1 {{'liger.attention' op expects 'k' to have the head dimension of 'q' (16), got 32}}
  %y = liger.attention %q, %k, %v : tensor<1x4x8x16xf32>, tensor<1x2x8x32xf32>, tensor<1x2x8x16xf32>
  return
}
// -----
func.func @attention_v_seq(%q: tensor<1x4x8x16xf32>, %k: tensor<1x2x8x16xf32>, %v: tensor<1x2x9x16xf32>) {
  // expected-error @+1 {{'liger.attention' op expects 'v' to have the sequence length of 'k' (8), got 9}}
  %y = liger.attention %q, %k, %v : tensor<1x4x8x16xf32>, tensor<1x2x8x16xf32>, tensor<1x2x9x16xf32>
  return
}
// -----
func.func @attention_batch(%q: tensor<2x4x8x16xf32>, %k: tensor<1x2x8x16xf32>, %v: tensor<1x2x8x16xf32>) {
  // expected-error @+1 {{'liger.attention' op expects 'k' to have the batch size of 'q' (2), got 1}}
  %y = liger.attention %q, %k, %v : tensor<2x4x8x16xf32>, tensor<1x2x8x16xf32>, tensor<1x2x8x16xf32>
  return
}

// -----
// liger.attention_grad: the attention's rules, and the incoming gradient of
// the output's shape and type.
func.func @attention_grad_gqa_ratio(%do: tensor<1x6x8x16xf32>, %q: tensor<1x6x8x16xf32>, %k: tensor<1x4x8x16xf32>, %v: tensor<1x4x8x16xf32>) {
  // expected-error @+1 {{'liger.attention_grad' op expects the head count of 'q' (6) to be a multiple of that of 'k' (4)}}
  %dq, %dk, %dv = liger.attention_grad %do, %q, %k, %v : tensor<1x6x8x16xf32>, tensor<1x6x8x16xf32>, tensor<1x4x8x16xf32>, tensor<1x4x8x16xf32>
  return
}
// -----
func.func @attention_grad_no_heads(%do: tensor<1x0x8x16xf32>, %q: tensor<1x0x8x16xf32>, %k: tensor<1x0x8x16xf32>, %v: tensor<1x0x8x16xf32>) {
  // expected-error @+1 {{'liger.attention_grad' op expects at least one head and one head dimension in 'q', got 'tensor<1x0x8x16xf32>'}}
  %dq, %dk, %dv = liger.attention_grad %do, %q, %k, %v : tensor<1x0x8x16xf32>, tensor<1x0x8x16xf32>, tensor<1x0x8x16xf32>, tensor<1x0x8x16xf32>
  return
}
// -----
func.func @attention_no_kv_heads(%q: tensor<1x4x8x16xf32>, %k: tensor<1x0x8x16xf32>, %v: tensor<1x0x8x16xf32>) {
  // expected-error @+1 {{'liger.attention' op expects at least one head and one head dimension in 'k', got 'tensor<1x0x8x16xf32>'}}
  %y = liger.attention %q, %k, %v : tensor<1x4x8x16xf32>, tensor<1x0x8x16xf32>, tensor<1x0x8x16xf32>
  return
}
// -----
func.func @attention_grad_shape(%do: tensor<1x4x8x32xf32>, %q: tensor<1x4x8x16xf32>, %k: tensor<1x2x8x16xf32>, %v: tensor<1x2x8x16xf32>) {
  // expected-error @+1 {{'liger.attention_grad' op expects 'grad' to be 'tensor<1x4x8x16xf32>' (the attention's output), got 'tensor<1x4x8x32xf32>'}}
  %dq, %dk, %dv = liger.attention_grad %do, %q, %k, %v : tensor<1x4x8x32xf32>, tensor<1x4x8x16xf32>, tensor<1x2x8x16xf32>, tensor<1x2x8x16xf32>
  return
}
// -----
func.func @attention_grad_seq(%do: tensor<1x4x7x16xf32>, %q: tensor<1x4x8x16xf32>, %k: tensor<1x2x8x16xf32>, %v: tensor<1x2x8x16xf32>) {
  // expected-error @+1 {{'liger.attention_grad' op expects 'grad' to be 'tensor<1x4x8x16xf32>' (the attention's output), got 'tensor<1x4x7x16xf32>'}}
  %dq, %dk, %dv = liger.attention_grad %do, %q, %k, %v : tensor<1x4x7x16xf32>, tensor<1x4x8x16xf32>, tensor<1x2x8x16xf32>, tensor<1x2x8x16xf32>
  return
}
// -----
func.func @attention_grad_scale_negative(%do: tensor<1x2x3x8xf32>, %q: tensor<1x2x3x8xf32>, %k: tensor<1x2x3x8xf32>, %v: tensor<1x2x3x8xf32>) {
  // expected-error @+1 {{'liger.attention_grad' op attribute 'scale' failed to satisfy constraint: 32-bit float attribute whose value is positive}}
  %dq, %dk, %dv = liger.attention_grad %do, %q, %k, %v scale = -1.0 : tensor<1x2x3x8xf32>, tensor<1x2x3x8xf32>, tensor<1x2x3x8xf32>, tensor<1x2x3x8xf32>
  return
}
// -----
func.func @attention_grad_types(%do: tensor<1x2x3x8xbf16>, %q: tensor<1x2x3x8xf32>, %k: tensor<1x2x3x8xf32>, %v: tensor<1x2x3x8xf32>) {
  // expected-error @+1 {{'liger.attention_grad' op failed to verify that all of {grad, q, k, v} have same element type}}
  %r:3 = "liger.attention_grad"(%do, %q, %k, %v) <{operandSegmentSizes = array<i32: 1, 1, 1, 1, 0, 0>}> : (tensor<1x2x3x8xbf16>, tensor<1x2x3x8xf32>, tensor<1x2x3x8xf32>, tensor<1x2x3x8xf32>) -> (tensor<1x2x3x8xf32>, tensor<1x2x3x8xf32>, tensor<1x2x3x8xf32>)
  return
}

// -----
// liger.attention's lse comes with `return_lse` and only then: a generic op
// that spells it without the flag (or the flag without it, or another type)
// does not verify.
func.func @attention_lse_without_flag(%q: tensor<1x4x8x16xf32>, %k: tensor<1x2x8x16xf32>, %v: tensor<1x2x8x16xf32>) {
  // expected-error @+2 {{'liger.attention' op inferred type(s) 'tensor<1x4x8x16xf32>' are incompatible with return type(s) of operation 'tensor<1x4x8x16xf32>', 'tensor<1x4x8xf32>'}}
  // expected-error @+1 {{'liger.attention' op failed to infer returned types}}
  %o:2 = "liger.attention"(%q, %k, %v) : (tensor<1x4x8x16xf32>, tensor<1x2x8x16xf32>, tensor<1x2x8x16xf32>) -> (tensor<1x4x8x16xf32>, tensor<1x4x8xf32>)
  return
}
// -----
func.func @attention_flag_without_lse(%q: tensor<1x4x8x16xf32>, %k: tensor<1x2x8x16xf32>, %v: tensor<1x2x8x16xf32>) {
  // expected-error @+2 {{'liger.attention' op inferred type(s) 'tensor<1x4x8x16xf32>', 'tensor<1x4x8xf32>' are incompatible with return type(s) of operation 'tensor<1x4x8x16xf32>'}}
  // expected-error @+1 {{'liger.attention' op failed to infer returned types}}
  %o = "liger.attention"(%q, %k, %v) <{return_lse}> : (tensor<1x4x8x16xf32>, tensor<1x2x8x16xf32>, tensor<1x2x8x16xf32>) -> tensor<1x4x8x16xf32>
  return
}
// -----
func.func @attention_lse_type(%q: tensor<1x4x8x16xf32>, %k: tensor<1x2x8x16xf32>, %v: tensor<1x2x8x16xf32>) {
  // expected-error @+2 {{'liger.attention' op inferred type(s) 'tensor<1x4x8x16xf32>', 'tensor<1x4x8xf32>' are incompatible with return type(s) of operation 'tensor<1x4x8x16xf32>', 'tensor<1x4x8xbf16>'}}
  // expected-error @+1 {{'liger.attention' op failed to infer returned types}}
  %o:2 = "liger.attention"(%q, %k, %v) <{return_lse}> : (tensor<1x4x8x16xf32>, tensor<1x2x8x16xf32>, tensor<1x2x8x16xf32>) -> (tensor<1x4x8x16xf32>, tensor<1x4x8xbf16>)
  return
}
// -----
// attention_grad's saved forward values: out and lse together (a custom
// form that leaves lse out parses, and is refused here).
func.func @attention_grad_saved_out_only(%do: tensor<1x4x8x16xf32>, %q: tensor<1x4x8x16xf32>, %k: tensor<1x2x8x16xf32>, %v: tensor<1x2x8x16xf32>) {
  // expected-error @+1 {{'liger.attention_grad' op expects the saved 'out' and 'lse' together (the forward's output and log-sum-exp), got only 'out'}}
  %dq, %dk, %dv = liger.attention_grad %do, %q, %k, %v saved(%do, : tensor<1x4x8x16xf32>, ) : tensor<1x4x8x16xf32>, tensor<1x4x8x16xf32>, tensor<1x2x8x16xf32>, tensor<1x2x8x16xf32>
  return
}
// -----
func.func @attention_grad_saved_lse_only(%do: tensor<1x4x8x16xf32>, %q: tensor<1x4x8x16xf32>, %k: tensor<1x2x8x16xf32>, %v: tensor<1x2x8x16xf32>, %lse: tensor<1x4x8xf32>) {
  // expected-error @+2 {{'liger.attention_grad' op expects the saved 'out' and 'lse' together (the forward's output and log-sum-exp), got only 'lse'}}
  // expected-error @+1 {{'liger.attention_grad' op failed to infer returned types}}
  %r:3 = "liger.attention_grad"(%do, %q, %k, %v, %lse) <{operandSegmentSizes = array<i32: 1, 1, 1, 1, 0, 1>}> : (tensor<1x4x8x16xf32>, tensor<1x4x8x16xf32>, tensor<1x2x8x16xf32>, tensor<1x2x8x16xf32>, tensor<1x4x8xf32>) -> (tensor<1x4x8x16xf32>, tensor<1x2x8x16xf32>, tensor<1x2x8x16xf32>)
  return
}
// -----
func.func @attention_grad_saved_out_element_type(%do: tensor<1x4x8x16xf32>, %q: tensor<1x4x8x16xf32>, %k: tensor<1x2x8x16xf32>, %v: tensor<1x2x8x16xf32>, %o: tensor<1x4x8x16xbf16>, %lse: tensor<1x4x8xf32>) {
  // expected-error @+1 {{'liger.attention_grad' op expects 'out' to have the type of 'grad' ('tensor<1x4x8x16xf32>'), got 'tensor<1x4x8x16xbf16>'}}
  %dq, %dk, %dv = liger.attention_grad %do, %q, %k, %v saved(%o, %lse : tensor<1x4x8x16xbf16>, tensor<1x4x8xf32>) : tensor<1x4x8x16xf32>, tensor<1x4x8x16xf32>, tensor<1x2x8x16xf32>, tensor<1x2x8x16xf32>
  return
}
// -----
// out has grad's type exactly: a compatible but less static one is refused.
func.func @attention_grad_saved_out_dynamic(%do: tensor<1x4x8x16xf32>, %q: tensor<1x4x8x16xf32>, %k: tensor<1x2x8x16xf32>, %v: tensor<1x2x8x16xf32>, %o: tensor<1x4x?x16xf32>, %lse: tensor<1x4x8xf32>) {
  // expected-error @+1 {{'liger.attention_grad' op expects 'out' to have the type of 'grad' ('tensor<1x4x8x16xf32>'), got 'tensor<1x4x?x16xf32>'}}
  %dq, %dk, %dv = liger.attention_grad %do, %q, %k, %v saved(%o, %lse : tensor<1x4x?x16xf32>, tensor<1x4x8xf32>) : tensor<1x4x8x16xf32>, tensor<1x4x8x16xf32>, tensor<1x2x8x16xf32>, tensor<1x2x8x16xf32>
  return
}
// -----
func.func @attention_grad_saved_lse_element_type(%do: tensor<1x4x8x16xf32>, %q: tensor<1x4x8x16xf32>, %k: tensor<1x2x8x16xf32>, %v: tensor<1x2x8x16xf32>, %lse: tensor<1x4x8xbf16>) {
  // expected-error @+1 {{'liger.attention_grad' op expects 'lse' to be 'tensor<1x4x8xf32>' (the forward's log-sum-exp: f32 [batch, heads, seq] of 'q'), got 'tensor<1x4x8xbf16>'}}
  %dq, %dk, %dv = liger.attention_grad %do, %q, %k, %v saved(%do, %lse : tensor<1x4x8x16xf32>, tensor<1x4x8xbf16>) : tensor<1x4x8x16xf32>, tensor<1x4x8x16xf32>, tensor<1x2x8x16xf32>, tensor<1x2x8x16xf32>
  return
}
// -----
func.func @attention_grad_saved_lse_rank(%do: tensor<1x4x8x16xf32>, %q: tensor<1x4x8x16xf32>, %k: tensor<1x2x8x16xf32>, %v: tensor<1x2x8x16xf32>, %lse: tensor<4x8xf32>) {
  // expected-error @+1 {{'liger.attention_grad' op expects 'lse' to be 'tensor<1x4x8xf32>' (the forward's log-sum-exp: f32 [batch, heads, seq] of 'q'), got 'tensor<4x8xf32>'}}
  %dq, %dk, %dv = liger.attention_grad %do, %q, %k, %v saved(%do, %lse : tensor<1x4x8x16xf32>, tensor<4x8xf32>) : tensor<1x4x8x16xf32>, tensor<1x4x8x16xf32>, tensor<1x2x8x16xf32>, tensor<1x2x8x16xf32>
  return
}
// -----
func.func @attention_grad_saved_lse_heads(%do: tensor<1x4x8x16xf32>, %q: tensor<1x4x8x16xf32>, %k: tensor<1x2x8x16xf32>, %v: tensor<1x2x8x16xf32>, %lse: tensor<1x2x8xf32>) {
  // expected-error @+1 {{'liger.attention_grad' op expects 'lse' to be 'tensor<1x4x8xf32>' (the forward's log-sum-exp: f32 [batch, heads, seq] of 'q'), got 'tensor<1x2x8xf32>'}}
  %dq, %dk, %dv = liger.attention_grad %do, %q, %k, %v saved(%do, %lse : tensor<1x4x8x16xf32>, tensor<1x2x8xf32>) : tensor<1x4x8x16xf32>, tensor<1x4x8x16xf32>, tensor<1x2x8x16xf32>, tensor<1x2x8x16xf32>
  return
}
// -----
// q's sequence length is dynamic, grad's is 8: lse's 7 is refused against
// grad's.
func.func @attention_grad_saved_lse_seq_of_grad(%do: tensor<1x4x8x16xf32>, %q: tensor<1x4x?x16xf32>, %k: tensor<1x2x8x16xf32>, %v: tensor<1x2x8x16xf32>, %lse: tensor<1x4x7xf32>) {
  // expected-error @+1 {{'liger.attention_grad' op expects 'lse' to be 'tensor<1x4x8xf32>' (the forward's log-sum-exp: f32 [batch, heads, seq] of 'q'), got 'tensor<1x4x7xf32>'}}
  %dq, %dk, %dv = liger.attention_grad %do, %q, %k, %v saved(%do, %lse : tensor<1x4x8x16xf32>, tensor<1x4x7xf32>) : tensor<1x4x8x16xf32>, tensor<1x4x?x16xf32>, tensor<1x2x8x16xf32>, tensor<1x2x8x16xf32>
  return
}

// -----

func.func @geglu_grad_types(%d: tensor<4x64xf32>, %g: tensor<4x64xf32>, %u: tensor<4x64xbf16>) {
  // expected-error @+1 {{'liger.geglu_grad' op failed to verify that all of {grad, gate, up} have same type}}
  %y:2 = "liger.geglu_grad"(%d, %g, %u) : (tensor<4x64xf32>, tensor<4x64xf32>, tensor<4x64xbf16>) -> (tensor<4x64xf32>, tensor<4x64xf32>)
  return
}

// -----

func.func @softmax_grad_types(%d: tensor<4x64xf32>, %y: tensor<4x64xbf16>) {
  // expected-error @+1 {{'liger.softmax_grad' op failed to verify that all of {grad, output} have same type}}
  %x = "liger.softmax_grad"(%d, %y) : (tensor<4x64xf32>, tensor<4x64xbf16>) -> tensor<4x64xbf16>
  return
}

// -----

func.func @softmax_grad_dynamic_row(%d: tensor<4x?xf32>) {
  // expected-error @+1 {{'liger.softmax_grad' op expects the last (hidden) dimension of 'output' to be static, got 'tensor<4x?xf32>'}}
  %x = liger.softmax_grad %d, %d : tensor<4x?xf32>
  return
}
// -----
func.func @linear_grad_input_element_types(%dy: tensor<4x32xf32>, %w: tensor<32x64xbf16>) {
  // expected-error @+1 {{'liger.linear_grad_input' op failed to verify that all of {grad, weight} have same element type}}
  %dx = liger.linear_grad_input %dy, %w : tensor<4x32xf32>, tensor<32x64xbf16>
  return
}
// -----
func.func @linear_grad_input_dynamic_hidden(%dy: tensor<4x?xf32>, %w: tensor<32x64xf32>) {
  // expected-error @+1 {{'liger.linear_grad_input' op expects the last (hidden) dimension of 'grad' to be static, got 'tensor<4x?xf32>'}}
  %dx = liger.linear_grad_input %dy, %w : tensor<4x?xf32>, tensor<32x64xf32>
  return
}
// -----
func.func @linear_grad_input_weight_dynamic(%dy: tensor<4x32xf32>, %w: tensor<32x?xf32>) {
  // expected-error @+1 {{'liger.linear_grad_input' op expects 'weight' to have a static shape, got 'tensor<32x?xf32>'}}
  %dx = liger.linear_grad_input %dy, %w : tensor<4x32xf32>, tensor<32x?xf32>
  return
}
// -----
func.func @linear_grad_input_out_features(%dy: tensor<4x32xf32>, %w: tensor<64x32xf32>) {
  // expected-error @+1 {{'liger.linear_grad_input' op expects dimension 0 (out_features) of 'weight' to be 32 (the last dimension of 'grad'), got 64}}
  %dx = liger.linear_grad_input %dy, %w : tensor<4x32xf32>, tensor<64x32xf32>
  return
}
// -----
func.func @linear_grad_weight_element_types(%dy: tensor<4x32xf32>, %x: tensor<4x64xbf16>) {
  // expected-error @+1 {{'liger.linear_grad_weight' op failed to verify that all of {grad, input} have same element type}}
  %dw = liger.linear_grad_weight %dy, %x : tensor<4x32xf32>, tensor<4x64xbf16>
  return
}
// -----
func.func @linear_grad_weight_grad_rank(%dy: tensor<2x4x32xf32>, %x: tensor<8x64xf32>) {
  // expected-error @+1 {{'liger.linear_grad_weight' op expects 'grad' to have rank 2 ([tokens, out_features]), got 'tensor<2x4x32xf32>'}}
  %dw = liger.linear_grad_weight %dy, %x : tensor<2x4x32xf32>, tensor<8x64xf32>
  return
}
// -----
func.func @linear_grad_weight_input_features(%dy: tensor<4x32xf32>, %x: tensor<4x?xf32>) {
  // expected-error @+1 {{'liger.linear_grad_weight' op expects dimension 1 of 'input' to be static, got 'tensor<4x?xf32>'}}
  %dw = liger.linear_grad_weight %dy, %x : tensor<4x32xf32>, tensor<4x?xf32>
  return
}
// -----
func.func @linear_grad_weight_tokens(%dy: tensor<4x32xf32>, %x: tensor<5x64xf32>) {
  // expected-error @+1 {{'liger.linear_grad_weight' op expects 'grad' and 'input' to have the same tokens, got 4 and 5}}
  %dw = liger.linear_grad_weight %dy, %x : tensor<4x32xf32>, tensor<5x64xf32>
  return
}
// -----
func.func @linear_grad_weight_accumulate_type(%dy: tensor<4x32xbf16>, %x: tensor<4x64xbf16>, %acc: tensor<32x64xf16>) {
  // expected-error @+1 {{'liger.linear_grad_weight' op expects 'accumulate' to be 'tensor<32x64xf32>' (an f32 [out_features, in_features] buffer, or one of the input's dtype), got 'tensor<32x64xf16>'}}
  %dw = liger.linear_grad_weight %dy, %x accumulate %acc : tensor<4x32xbf16>, tensor<4x64xbf16>, tensor<32x64xf16>
  return
}
// -----
func.func @linear_grad_weight_accumulate_shape(%dy: tensor<4x32xf32>, %x: tensor<4x64xf32>, %acc: tensor<64x32xf32>) {
  // expected-error @+1 {{'liger.linear_grad_weight' op expects 'accumulate' to be 'tensor<32x64xf32>' (an f32 [out_features, in_features] buffer, or one of the input's dtype), got 'tensor<64x32xf32>'}}
  %dw = liger.linear_grad_weight %dy, %x accumulate %acc : tensor<4x32xf32>, tensor<4x64xf32>, tensor<64x32xf32>
  return
}
// -----
func.func @scale_input_rank(%d: tensor<10xbf16>, %g: tensor<f32>) {
  // expected-error @+1 {{'liger.scale' op expects 'input' to have rank 2 ([rows, hidden]), got 'tensor<10xbf16>'}}
  %y = liger.scale %d, %g : tensor<10xbf16>, tensor<f32>
  return
}
// -----
func.func @scale_input_dynamic_hidden(%d: tensor<4x?xbf16>, %g: tensor<f32>) {
  // expected-error @+1 {{'liger.scale' op expects dimension 1 of 'input' to be static, got 'tensor<4x?xbf16>'}}
  %y = liger.scale %d, %g : tensor<4x?xbf16>, tensor<f32>
  return
}
// -----
func.func @scale_factor_rows(%d: tensor<4x10xbf16>, %g: tensor<5xf32>) {
  // expected-error @+1 {{'liger.scale' op expects 'factor' to be 'tensor<4xf32>' (one f32 per row, or tensor<f32> for every row), got 'tensor<5xf32>'}}
  %y = liger.scale %d, %g : tensor<4x10xbf16>, tensor<5xf32>
  return
}
// -----
func.func @scale_factor_dtype(%d: tensor<4x10xbf16>, %g: tensor<bf16>) {
  // expected-error @+1 {{'liger.scale' op expects 'factor' to be 'tensor<4xf32>' (one f32 per row, or tensor<f32> for every row), got 'tensor<bf16>'}}
  %y = liger.scale %d, %g : tensor<4x10xbf16>, tensor<bf16>
  return
}
// -----
func.func @scale_factor_per_element(%d: tensor<?x10xf32>, %g: tensor<?x10xf32>) {
  // expected-error @+1 {{'liger.scale' op expects 'factor' to be 'tensor<?xf32>' (one f32 per row, or tensor<f32> for every row), got 'tensor<?x10xf32>'}}
  %y = liger.scale %d, %g : tensor<?x10xf32>, tensor<?x10xf32>
  return
}
// -----
func.func @scale_factor_rows_dtype(%d: tensor<4x10xbf16>, %g: tensor<4xbf16>) {
  // expected-error @+1 {{'liger.scale' op expects 'factor' to be 'tensor<4xf32>' (one f32 per row, or tensor<f32> for every row), got 'tensor<4xbf16>'}}
  %y = liger.scale %d, %g : tensor<4x10xbf16>, tensor<4xbf16>
  return
}
// -----
func.func @scale_factor_column(%d: tensor<4x10xf32>, %g: tensor<4x1xf32>) {
  // expected-error @+1 {{'liger.scale' op expects 'factor' to be 'tensor<4xf32>' (one f32 per row, or tensor<f32> for every row), got 'tensor<4x1xf32>'}}
  %y = liger.scale %d, %g : tensor<4x10xf32>, tensor<4x1xf32>
  return
}
