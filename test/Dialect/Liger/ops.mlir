// Round trip of every liger op in its custom form: print, re-parse, print.
// RUN: liger-opt %s | liger-opt | FileCheck %s
// The generic form must round-trip to the same custom form.
// RUN: liger-opt %s --mlir-print-op-generic | liger-opt | FileCheck %s

// CHECK-LABEL: func.func @rms_norm_defaults
// CHECK: liger.rms_norm %{{.*}}, %{{.*}} : tensor<?x4096xbf16>, tensor<4096xbf16>
func.func @rms_norm_defaults(%x: tensor<?x4096xbf16>, %w: tensor<4096xbf16>) -> tensor<?x4096xbf16> {
  %y = liger.rms_norm %x, %w : tensor<?x4096xbf16>, tensor<4096xbf16>
  return %y : tensor<?x4096xbf16>
}

// CHECK-LABEL: func.func @rms_norm_gemma
// CHECK: %[[Y:.+]], %[[R:.+]] = liger.rms_norm %{{.*}}, %{{.*}} eps = 9.99999974E-6 offset = 1.000000e+00 casting = gemma rstd : tensor<2x3x1000xf16>, tensor<1000xf32>
// CHECK: return %[[Y]], %[[R]] : tensor<2x3x1000xf16>, tensor<2x3xf32>
func.func @rms_norm_gemma(%x: tensor<2x3x1000xf16>, %w: tensor<1000xf32>) -> (tensor<2x3x1000xf16>, tensor<2x3xf32>) {
  %y, %r = liger.rms_norm %x, %w eps = 1.0e-5 offset = 1.0 casting = gemma rstd : tensor<2x3x1000xf16>, tensor<1000xf32>
  return %y, %r : tensor<2x3x1000xf16>, tensor<2x3xf32>
}

// The default eps is elided when printing.
// CHECK-LABEL: func.func @rms_norm_default_eps_elided
// CHECK: liger.rms_norm %{{.*}}, %{{.*}} offset = 1.000000e+00 : tensor<8x64xf32>, tensor<64xf32>
func.func @rms_norm_default_eps_elided(%x: tensor<8x64xf32>, %w: tensor<64xf32>) -> tensor<8x64xf32> {
  %y = liger.rms_norm %x, %w eps = 1.0e-6 offset = 1.0 : tensor<8x64xf32>, tensor<64xf32>
  return %y : tensor<8x64xf32>
}

// CHECK-LABEL: func.func @rms_norm_none
// CHECK: liger.rms_norm %{{.*}}, %{{.*}} casting = none : tensor<1x64xf32>, tensor<64xf32>
func.func @rms_norm_none(%x: tensor<1x64xf32>, %w: tensor<64xf32>) -> tensor<1x64xf32> {
  %y = liger.rms_norm %x, %w casting = none : tensor<1x64xf32>, tensor<64xf32>
  return %y : tensor<1x64xf32>
}

// CHECK-LABEL: func.func @add_rms_norm
// CHECK: %{{.+}}, %{{.+}}, %{{.+}} = liger.add_rms_norm %{{.*}}, %{{.*}}, %{{.*}} eps = 9.99999974E-6 rstd : tensor<?x4096xbf16>, tensor<4096xbf16>
func.func @add_rms_norm(%h: tensor<?x4096xbf16>, %r: tensor<?x4096xbf16>, %w: tensor<4096xbf16>) -> (tensor<?x4096xbf16>, tensor<?x4096xbf16>, tensor<?xf32>) {
  %y, %sum, %rstd = liger.add_rms_norm %h, %r, %w eps = 1.0e-5 rstd : tensor<?x4096xbf16>, tensor<4096xbf16>
  return %y, %sum, %rstd : tensor<?x4096xbf16>, tensor<?x4096xbf16>, tensor<?xf32>
}

// CHECK-LABEL: func.func @layer_norm
// CHECK: liger.layer_norm %{{.*}}, %{{.*}}, %{{.*}} : tensor<?x1024xf16>, tensor<1024xf16>, tensor<1024xf16>
// CHECK: liger.layer_norm %{{.*}}, %{{.*}} eps = 9.99999997E-7 : tensor<?x1024xf16>, tensor<1024xf16>
// CHECK: %{{.+}}, %{{.+}}:2 = liger.layer_norm %{{.*}}, %{{.*}}, %{{.*}} stats : tensor<?x1024xf16>, tensor<1024xf16>, tensor<1024xf16>
// (The default eps is elided.)
// CHECK: %{{.+}}, %{{.+}}:2 = liger.layer_norm %{{.*}}, %{{.*}} stats : tensor<?x1024xf16>, tensor<1024xf16>
func.func @layer_norm(%x: tensor<?x1024xf16>, %w: tensor<1024xf16>, %b: tensor<1024xf16>) -> (tensor<?x1024xf16>, tensor<?x1024xf16>, tensor<?xf32>, tensor<?xf32>) {
  %y = liger.layer_norm %x, %w, %b : tensor<?x1024xf16>, tensor<1024xf16>, tensor<1024xf16>
  %z = liger.layer_norm %x, %w eps = 1.0e-6 : tensor<?x1024xf16>, tensor<1024xf16>
  %s, %mean, %rstd = liger.layer_norm %x, %w, %b stats : tensor<?x1024xf16>, tensor<1024xf16>, tensor<1024xf16>
  %t:3 = liger.layer_norm %x, %w eps = 1.0e-5 stats : tensor<?x1024xf16>, tensor<1024xf16>
  return %y, %z, %mean, %rstd : tensor<?x1024xf16>, tensor<?x1024xf16>, tensor<?xf32>, tensor<?xf32>
}

// CHECK-LABEL: func.func @rope_gqa
// CHECK: liger.rope %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}} : tensor<?x32x?x128xbf16>, tensor<?x8x?x128xbf16>, tensor<1x?x128xbf16>
func.func @rope_gqa(%q: tensor<?x32x?x128xbf16>, %k: tensor<?x8x?x128xbf16>, %cos: tensor<1x?x128xbf16>, %sin: tensor<1x?x128xbf16>) -> (tensor<?x32x?x128xbf16>, tensor<?x8x?x128xbf16>) {
  %qr, %kr = liger.rope %q, %k, %cos, %sin : tensor<?x32x?x128xbf16>, tensor<?x8x?x128xbf16>, tensor<1x?x128xbf16>
  return %qr, %kr : tensor<?x32x?x128xbf16>, tensor<?x8x?x128xbf16>
}

// CHECK-LABEL: func.func @linear
// CHECK: liger.linear %{{.*}}, %{{.*}} : tensor<?x4096xbf16>, tensor<1024x4096xbf16>
// CHECK: liger.linear %{{.*}}, %{{.*}}, %{{.*}} : tensor<3x64xf32>, tensor<32x64xf32>, tensor<32xf32>
func.func @linear(%x: tensor<?x4096xbf16>, %w: tensor<1024x4096xbf16>, %x2: tensor<3x64xf32>, %w2: tensor<32x64xf32>, %b2: tensor<32xf32>) -> (tensor<?x1024xbf16>, tensor<3x32xf32>) {
  %y = liger.linear %x, %w : tensor<?x4096xbf16>, tensor<1024x4096xbf16>
  %z = liger.linear %x2, %w2, %b2 : tensor<3x64xf32>, tensor<32x64xf32>, tensor<32xf32>
  return %y, %z : tensor<?x1024xbf16>, tensor<3x32xf32>
}

// CHECK-LABEL: func.func @linear_grads
// CHECK: liger.linear_grad_input %{{.*}}, %{{.*}} : tensor<?x?x4096xbf16>, tensor<4096x1024xbf16>
// CHECK: liger.linear_grad_weight %{{.*}}, %{{.*}} : tensor<?x4096xbf16>, tensor<?x1024xbf16>
// CHECK: liger.linear_grad_weight %{{.*}}, %{{.*}} accumulate %{{.*}} : tensor<?x4096xbf16>, tensor<?x1024xbf16>, tensor<4096x1024xf32>
func.func @linear_grads(%dy3: tensor<?x?x4096xbf16>, %dy: tensor<?x4096xbf16>, %x: tensor<?x1024xbf16>, %w: tensor<4096x1024xbf16>, %acc: tensor<4096x1024xf32>) -> (tensor<?x?x1024xbf16>, tensor<4096x1024xbf16>, tensor<4096x1024xf32>) {
  %dx = liger.linear_grad_input %dy3, %w : tensor<?x?x4096xbf16>, tensor<4096x1024xbf16>
  %dw = liger.linear_grad_weight %dy, %x : tensor<?x4096xbf16>, tensor<?x1024xbf16>
  %dw32 = liger.linear_grad_weight %dy, %x accumulate %acc : tensor<?x4096xbf16>, tensor<?x1024xbf16>, tensor<4096x1024xf32>
  return %dx, %dw, %dw32 : tensor<?x?x1024xbf16>, tensor<4096x1024xbf16>, tensor<4096x1024xf32>
}

// CHECK-LABEL: func.func @lora_linear
// CHECK: liger.lora_linear %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}} scale = 2.000000e+00 : tensor<?x?x4096xbf16>, tensor<4096x4096xbf16>, tensor<16x4096xbf16>, tensor<4096x16xbf16>
// CHECK: liger.lora_linear %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}} : tensor<?x?x4096xbf16>, tensor<4096x4096xbf16>, tensor<16x4096xbf16>, tensor<4096x16xbf16>, tensor<4096xbf16>
func.func @lora_linear(%x: tensor<?x?x4096xbf16>, %w: tensor<4096x4096xbf16>, %a: tensor<16x4096xbf16>, %b: tensor<4096x16xbf16>, %bias: tensor<4096xbf16>) -> (tensor<?x?x4096xbf16>, tensor<?x?x4096xbf16>) {
  %y = liger.lora_linear %x, %w, %a, %b scale = 2.0 : tensor<?x?x4096xbf16>, tensor<4096x4096xbf16>, tensor<16x4096xbf16>, tensor<4096x16xbf16>
  %z = liger.lora_linear %x, %w, %a, %b, %bias : tensor<?x?x4096xbf16>, tensor<4096x4096xbf16>, tensor<16x4096xbf16>, tensor<4096x16xbf16>, tensor<4096xbf16>
  return %y, %z : tensor<?x?x4096xbf16>, tensor<?x?x4096xbf16>
}

// CHECK-LABEL: func.func @activations
// CHECK: liger.silu %{{.*}} : tensor<?x14336xbf16>
// CHECK: liger.gelu %{{.*}} : tensor<?x14336xbf16>
// CHECK: liger.gelu %{{.*}} approximate = tanh : tensor<?x14336xbf16>
// CHECK: liger.swiglu %{{.*}}, %{{.*}} : tensor<?x14336xbf16>
// CHECK: liger.geglu %{{.*}}, %{{.*}} approximate = tanh : tensor<?x14336xbf16>
// CHECK: liger.add %{{.*}}, %{{.*}} : tensor<?x14336xbf16>
// CHECK: liger.mul %{{.*}}, %{{.*}} : tensor<?x14336xbf16>
// CHECK: liger.softmax %{{.*}} : tensor<?x14336xbf16>
func.func @activations(%g: tensor<?x14336xbf16>, %u: tensor<?x14336xbf16>) -> tensor<?x14336xbf16> {
  %0 = liger.silu %g : tensor<?x14336xbf16>
  %1 = liger.gelu %0 : tensor<?x14336xbf16>
  %2 = liger.gelu %1 approximate = tanh : tensor<?x14336xbf16>
  %3 = liger.swiglu %2, %u : tensor<?x14336xbf16>
  %4 = liger.geglu %3, %u approximate = tanh : tensor<?x14336xbf16>
  %5 = liger.add %4, %u : tensor<?x14336xbf16>
  %6 = liger.mul %5, %u : tensor<?x14336xbf16>
  %7 = liger.softmax %6 : tensor<?x14336xbf16>
  return %7 : tensor<?x14336xbf16>
}

// CHECK-LABEL: func.func @cross_entropy_defaults
// CHECK: liger.cross_entropy %{{.*}}, %{{.*}} : tensor<?x128256xbf16>, tensor<?xi64>
func.func @cross_entropy_defaults(%l: tensor<?x128256xbf16>, %t: tensor<?xi64>) -> tensor<f32> {
  %loss = liger.cross_entropy %l, %t : tensor<?x128256xbf16>, tensor<?xi64>
  return %loss : tensor<f32>
}

// CHECK-LABEL: func.func @cross_entropy_all_attributes
// CHECK: liger.cross_entropy %{{.*}}, %{{.*}} weight(%{{.*}} : tensor<32000xf32>) ignore_index = -1 label_smoothing = 1.000000e-01 reduction = none softcap = 3.000000e+01 lse_square_scale = 9.99999974E-5 z_loss : tensor<8x32000xf32>, tensor<8xi32>
func.func @cross_entropy_all_attributes(%l: tensor<8x32000xf32>, %t: tensor<8xi32>, %cw: tensor<32000xf32>) -> (tensor<8xf32>, tensor<8xf32>) {
  %loss, %z = liger.cross_entropy %l, %t weight(%cw : tensor<32000xf32>) ignore_index = -1 label_smoothing = 0.1 reduction = none softcap = 30.0 lse_square_scale = 1.0e-4 z_loss : tensor<8x32000xf32>, tensor<8xi32>
  return %loss, %z : tensor<8xf32>, tensor<8xf32>
}

// CHECK-LABEL: func.func @fused_linear_cross_entropy
// CHECK: liger.fused_linear_cross_entropy %{{.*}}, %{{.*}}, %{{.*}} : tensor<?x4096xbf16>, tensor<128256x4096xbf16>, tensor<?xi64>
// CHECK: liger.fused_linear_cross_entropy %{{.*}}, %{{.*}}, %{{.*}} bias(%{{.*}} : tensor<128256xbf16>) reduction = sum z_loss : tensor<?x4096xbf16>, tensor<128256x4096xbf16>, tensor<?xi64>
// CHECK: liger.fused_linear_cross_entropy %{{.*}}, %{{.*}}, %{{.*}} class_weight(%{{.*}} : tensor<128256xf32>) label_smoothing = 1.000000e-01 : tensor<?x4096xbf16>, tensor<128256x4096xbf16>, tensor<?xi64>
// CHECK: liger.fused_linear_cross_entropy %{{.*}}, %{{.*}}, %{{.*}} bias(%{{.*}} : tensor<128256xbf16>) class_weight(%{{.*}} : tensor<128256xf32>) : tensor<?x4096xbf16>, tensor<128256x4096xbf16>, tensor<?xi64>
func.func @fused_linear_cross_entropy(%h: tensor<?x4096xbf16>, %w: tensor<128256x4096xbf16>, %t: tensor<?xi64>, %b: tensor<128256xbf16>, %cw: tensor<128256xf32>) -> (tensor<f32>, tensor<f32>, tensor<f32>, tensor<f32>, tensor<f32>) {
  %0 = liger.fused_linear_cross_entropy %h, %w, %t : tensor<?x4096xbf16>, tensor<128256x4096xbf16>, tensor<?xi64>
  %1, %2 = liger.fused_linear_cross_entropy %h, %w, %t bias(%b : tensor<128256xbf16>) reduction = sum z_loss : tensor<?x4096xbf16>, tensor<128256x4096xbf16>, tensor<?xi64>
  %3 = liger.fused_linear_cross_entropy %h, %w, %t class_weight(%cw : tensor<128256xf32>) label_smoothing = 0.1 : tensor<?x4096xbf16>, tensor<128256x4096xbf16>, tensor<?xi64>
  %4 = liger.fused_linear_cross_entropy %h, %w, %t bias(%b : tensor<128256xbf16>) class_weight(%cw : tensor<128256xf32>) : tensor<?x4096xbf16>, tensor<128256x4096xbf16>, tensor<?xi64>
  return %0, %1, %2, %3, %4 : tensor<f32>, tensor<f32>, tensor<f32>, tensor<f32>, tensor<f32>
}

// CHECK-LABEL: func.func @fused_linear_cross_entropy_grad
// CHECK: %{{.*}}, %{{.*}} = liger.fused_linear_cross_entropy_grad %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}} : tensor<?x4096xbf16>, tensor<128256x4096xbf16>, tensor<?xi64>, tensor<f32>
// CHECK: %{{.*}}, %{{.*}}, %{{.*}} = liger.fused_linear_cross_entropy_grad %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}} bias(%{{.*}} : tensor<128256xbf16>) reduction = none softcap = 3.000000e+01 : tensor<?x4096xbf16>, tensor<128256x4096xbf16>, tensor<?xi64>, tensor<?xf32>
// CHECK: %{{.*}}, %{{.*}} = liger.fused_linear_cross_entropy_grad %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}} class_weight(%{{.*}} : tensor<128256xf32>) : tensor<?x4096xbf16>, tensor<128256x4096xbf16>, tensor<?xi64>, tensor<f32>
func.func @fused_linear_cross_entropy_grad(%h: tensor<?x4096xbf16>, %w: tensor<128256x4096xbf16>, %t: tensor<?xi64>, %g: tensor<f32>, %gt: tensor<?xf32>, %b: tensor<128256xbf16>, %cw: tensor<128256xf32>) -> (tensor<?x4096xbf16>, tensor<128256x4096xbf16>, tensor<128256xbf16>) {
  %dh, %dw = liger.fused_linear_cross_entropy_grad %h, %w, %t, %g : tensor<?x4096xbf16>, tensor<128256x4096xbf16>, tensor<?xi64>, tensor<f32>
  %dh2, %dw2, %db = liger.fused_linear_cross_entropy_grad %h, %w, %t, %gt bias(%b : tensor<128256xbf16>) reduction = none softcap = 30.0 : tensor<?x4096xbf16>, tensor<128256x4096xbf16>, tensor<?xi64>, tensor<?xf32>
  %dh3, %dw3 = liger.fused_linear_cross_entropy_grad %h, %w, %t, %g class_weight(%cw : tensor<128256xf32>) : tensor<?x4096xbf16>, tensor<128256x4096xbf16>, tensor<?xi64>, tensor<f32>
  return %dh, %dw, %db : tensor<?x4096xbf16>, tensor<128256x4096xbf16>, tensor<128256xbf16>
}

// CHECK-LABEL: func.func @divergences
// CHECK: liger.kl_div %{{.*}}, %{{.*}} : tensor<?x32000xf32>
// CHECK: liger.kl_div %{{.*}}, %{{.*}} reduction = none log_target eps = 9.99999996E-13 : tensor<?x32000xf32>
// CHECK: liger.jsd %{{.*}}, %{{.*}} labels(%{{.*}} : tensor<?xi64>) beta = 1.000000e-01 ignore_index = 0 : tensor<?x32000xf32>
func.func @divergences(%p: tensor<?x32000xf32>, %q: tensor<?x32000xf32>, %lab: tensor<?xi64>) -> (tensor<f32>, tensor<?x32000xf32>, tensor<f32>) {
  %0 = liger.kl_div %p, %q : tensor<?x32000xf32>
  %1 = liger.kl_div %p, %q reduction = none log_target eps = 1.0e-12 : tensor<?x32000xf32>
  %2 = liger.jsd %p, %q labels(%lab : tensor<?xi64>) beta = 0.1 ignore_index = 0 : tensor<?x32000xf32>
  return %0, %1, %2 : tensor<f32>, tensor<?x32000xf32>, tensor<f32>
}

// The ends of i32's range with i32 labels, and beyond it with i64 labels.
// CHECK-LABEL: func.func @ignore_index_range
// CHECK: liger.cross_entropy %{{.*}}, %{{.*}} ignore_index = 2147483647 : tensor<4x10xf32>, tensor<4xi32>
// CHECK: liger.cross_entropy %{{.*}}, %{{.*}} ignore_index = 4294967296 : tensor<4x10xf32>, tensor<4xi64>
// CHECK: liger.jsd %{{.*}}, %{{.*}} labels(%{{.*}} : tensor<4xi32>) ignore_index = -2147483648 : tensor<4x10xf32>
func.func @ignore_index_range(%l: tensor<4x10xf32>, %t32: tensor<4xi32>, %t64: tensor<4xi64>) -> (tensor<f32>, tensor<f32>, tensor<f32>) {
  %0 = liger.cross_entropy %l, %t32 ignore_index = 2147483647 : tensor<4x10xf32>, tensor<4xi32>
  %1 = liger.cross_entropy %l, %t64 ignore_index = 4294967296 : tensor<4x10xf32>, tensor<4xi64>
  %2 = liger.jsd %l, %l labels(%t32 : tensor<4xi32>) ignore_index = -2147483648 : tensor<4x10xf32>
  return %0, %1, %2 : tensor<f32>, tensor<f32>, tensor<f32>
}

// CHECK-LABEL: func.func @divergences_per_token
// CHECK: liger.kl_div %{{.*}}, %{{.*}} reduction = sum per_token : tensor<?x7xbf16>
// CHECK: liger.jsd %{{.*}}, %{{.*}} labels(%{{.*}} : tensor<?xi32>) per_token : tensor<?x7xbf16>
// CHECK: liger.jsd %{{.*}}, %{{.*}} beta = 3.000000e-01 temperature = 2.000000e+00 per_token : tensor<?x7xbf16>
func.func @divergences_per_token(%p: tensor<?x7xbf16>, %lab: tensor<?xi32>) -> (tensor<?xf32>, tensor<?xf32>, tensor<?xf32>) {
  %0 = liger.kl_div %p, %p reduction = sum per_token : tensor<?x7xbf16>
  %1 = liger.jsd %p, %p labels(%lab : tensor<?xi32>) per_token : tensor<?x7xbf16>
  %2 = liger.jsd %p, %p beta = 0.3 temperature = 2.0 per_token : tensor<?x7xbf16>
  return %0, %1, %2 : tensor<?xf32>, tensor<?xf32>, tensor<?xf32>
}

// CHECK-LABEL: func.func @divergence_grads
// CHECK: liger.kl_div_grad %{{.*}}, %{{.*}} : tensor<?x32000xbf16>, tensor<f32>
// CHECK: liger.kl_div_grad %{{.*}}, %{{.*}} reduction = none log_target : tensor<?x32000xbf16>, tensor<?x32000xf32>
// CHECK: liger.kl_div_grad %{{.*}}, %{{.*}} reduction = mean per_token : tensor<?x32000xbf16>, tensor<?xf32>
// CHECK: liger.jsd_grad %{{.*}}, %{{.*}}, %{{.*}} beta = 1.000000e-01 : tensor<?x32000xbf16>, tensor<f32>
// CHECK: liger.jsd_grad %{{.*}}, %{{.*}}, %{{.*}} labels(%{{.*}} : tensor<?xi64>) ignore_index = 0 per_token : tensor<?x32000xbf16>, tensor<?xf32>
// CHECK: liger.jsd_grad %{{.*}}, %{{.*}}, %{{.*}} temperature = 5.000000e-01 : tensor<?x32000xbf16>, tensor<f32>
func.func @divergence_grads(%p: tensor<?x32000xbf16>, %g: tensor<f32>, %gp: tensor<?x32000xf32>, %gt: tensor<?xf32>, %lab: tensor<?xi64>) {
  %0 = liger.kl_div_grad %p, %g : tensor<?x32000xbf16>, tensor<f32>
  %1 = liger.kl_div_grad %p, %gp reduction = none log_target : tensor<?x32000xbf16>, tensor<?x32000xf32>
  %2 = liger.kl_div_grad %p, %gt reduction = mean per_token : tensor<?x32000xbf16>, tensor<?xf32>
  %3 = liger.jsd_grad %p, %p, %g beta = 0.1 : tensor<?x32000xbf16>, tensor<f32>
  %4 = liger.jsd_grad %p, %p, %gt labels(%lab : tensor<?xi64>) ignore_index = 0 per_token : tensor<?x32000xbf16>, tensor<?xf32>
  %5 = liger.jsd_grad %p, %p, %g temperature = 0.5 : tensor<?x32000xbf16>, tensor<f32>
  return
}

// CHECK-LABEL: func.func @scales
// CHECK: liger.scale %{{.*}}, %{{.*}} : tensor<?x50257xbf16>, tensor<f32>
// CHECK: liger.scale %{{.*}}, %{{.*}} : tensor<?x50257xbf16>, tensor<?xf32>
func.func @scales(%d: tensor<?x50257xbf16>, %g: tensor<f32>, %rows: tensor<?xf32>) -> (tensor<?x50257xbf16>, tensor<?x50257xbf16>) {
  %0 = liger.scale %d, %g : tensor<?x50257xbf16>, tensor<f32>
  %1 = liger.scale %d, %rows : tensor<?x50257xbf16>, tensor<?xf32>
  return %0, %1 : tensor<?x50257xbf16>, tensor<?x50257xbf16>
}

// CHECK-LABEL: func.func @attention
// CHECK: liger.attention %{{.*}}, %{{.*}}, %{{.*}} causal : tensor<?x32x?x128xbf16>, tensor<?x8x?x128xbf16>, tensor<?x8x?x128xbf16>
// CHECK: liger.attention %{{.*}}, %{{.*}}, %{{.*}} scale = 1.250000e-01 : tensor<?x32x?x128xbf16>, tensor<?x8x?x128xbf16>, tensor<?x8x?x128xbf16>
func.func @attention(%q: tensor<?x32x?x128xbf16>, %k: tensor<?x8x?x128xbf16>, %v: tensor<?x8x?x128xbf16>) -> (tensor<?x32x?x128xbf16>, tensor<?x32x?x128xbf16>) {
  %0 = liger.attention %q, %k, %v causal : tensor<?x32x?x128xbf16>, tensor<?x8x?x128xbf16>, tensor<?x8x?x128xbf16>
  %1 = liger.attention %q, %k, %v scale = 0.125 : tensor<?x32x?x128xbf16>, tensor<?x8x?x128xbf16>, tensor<?x8x?x128xbf16>
  return %0, %1 : tensor<?x32x?x128xbf16>, tensor<?x32x?x128xbf16>
}

// CHECK-LABEL: func.func @attention_return_lse
// CHECK: %{{.*}}, %[[LSE:.+]] = liger.attention %{{.*}}, %{{.*}}, %{{.*}} causal scale = 1.250000e-01 return_lse : tensor<?x32x?x128xbf16>, tensor<?x8x?x128xbf16>, tensor<?x8x?x128xbf16>
// CHECK: return %{{.*}}, %[[LSE]]
func.func @attention_return_lse(%q: tensor<?x32x?x128xbf16>, %k: tensor<?x8x?x128xbf16>, %v: tensor<?x8x?x128xbf16>) -> (tensor<?x32x?x128xbf16>, tensor<?x32x?xf32>) {
  %o, %lse = liger.attention %q, %k, %v causal scale = 0.125 return_lse : tensor<?x32x?x128xbf16>, tensor<?x8x?x128xbf16>, tensor<?x8x?x128xbf16>
  return %o, %lse : tensor<?x32x?x128xbf16>, tensor<?x32x?xf32>
}

// A sliding window, printed between causal and scale.
// CHECK-LABEL: func.func @attention_window
// CHECK: %{{.*}}, %{{.*}} = liger.attention %{{.*}}, %{{.*}}, %{{.*}} causal window = 4096 scale = 1.250000e-01 return_lse : tensor<?x32x?x128xbf16>, tensor<?x8x?x128xbf16>, tensor<?x8x?x128xbf16>
// CHECK: liger.attention_grad %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}} saved(%{{.*}}, %{{.*}} : tensor<?x32x?x128xbf16>, tensor<?x32x?xf32>) causal window = 1 : tensor<?x32x?x128xbf16>, tensor<?x32x?x128xbf16>, tensor<?x8x?x128xbf16>, tensor<?x8x?x128xbf16>
func.func @attention_window(%q: tensor<?x32x?x128xbf16>, %k: tensor<?x8x?x128xbf16>, %v: tensor<?x8x?x128xbf16>, %do: tensor<?x32x?x128xbf16>) -> (tensor<?x32x?x128xbf16>, tensor<?x32x?x128xbf16>) {
  %o, %lse = liger.attention %q, %k, %v causal window = 4096 scale = 0.125 return_lse : tensor<?x32x?x128xbf16>, tensor<?x8x?x128xbf16>, tensor<?x8x?x128xbf16>
  %dq, %dk, %dv = liger.attention_grad %do, %q, %k, %v saved(%o, %lse : tensor<?x32x?x128xbf16>, tensor<?x32x?xf32>) causal window = 1 : tensor<?x32x?x128xbf16>, tensor<?x32x?x128xbf16>, tensor<?x8x?x128xbf16>, tensor<?x8x?x128xbf16>
  return %o, %dq : tensor<?x32x?x128xbf16>, tensor<?x32x?x128xbf16>
}

// A softcap, printed between the window and the scale.
// CHECK-LABEL: func.func @attention_softcap
// CHECK: liger.attention %{{.*}}, %{{.*}}, %{{.*}} causal window = 16 softcap = 5.000000e+01 scale = 1.250000e-01 return_lse : tensor<?x32x?x128xbf16>, tensor<?x8x?x128xbf16>, tensor<?x8x?x128xbf16>
// CHECK: liger.attention_grad %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}} saved(%{{.*}}, %{{.*}} : tensor<?x32x?x128xbf16>, tensor<?x32x?xf32>) softcap = 2.500000e-01 : tensor<?x32x?x128xbf16>, tensor<?x32x?x128xbf16>, tensor<?x8x?x128xbf16>, tensor<?x8x?x128xbf16>
func.func @attention_softcap(%q: tensor<?x32x?x128xbf16>, %k: tensor<?x8x?x128xbf16>, %v: tensor<?x8x?x128xbf16>, %do: tensor<?x32x?x128xbf16>) -> (tensor<?x32x?x128xbf16>, tensor<?x32x?x128xbf16>) {
  %o, %lse = liger.attention %q, %k, %v causal window = 16 softcap = 50.0 scale = 0.125 return_lse : tensor<?x32x?x128xbf16>, tensor<?x8x?x128xbf16>, tensor<?x8x?x128xbf16>
  %dq, %dk, %dv = liger.attention_grad %do, %q, %k, %v saved(%o, %lse : tensor<?x32x?x128xbf16>, tensor<?x32x?xf32>) softcap = 0.25 : tensor<?x32x?x128xbf16>, tensor<?x32x?x128xbf16>, tensor<?x8x?x128xbf16>, tensor<?x8x?x128xbf16>
  return %o, %dq : tensor<?x32x?x128xbf16>, tensor<?x32x?x128xbf16>
}

// CHECK-LABEL: func.func @attention_grad
// CHECK: liger.attention_grad %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}} causal scale = 1.250000e-01 : tensor<?x32x?x64xbf16>, tensor<?x32x?x128xbf16>, tensor<?x8x?x128xbf16>, tensor<?x8x?x64xbf16>
func.func @attention_grad(%do: tensor<?x32x?x64xbf16>, %q: tensor<?x32x?x128xbf16>, %k: tensor<?x8x?x128xbf16>, %v: tensor<?x8x?x64xbf16>) -> (tensor<?x32x?x128xbf16>, tensor<?x8x?x128xbf16>, tensor<?x8x?x64xbf16>) {
  %dq, %dk, %dv = liger.attention_grad %do, %q, %k, %v causal scale = 0.125 : tensor<?x32x?x64xbf16>, tensor<?x32x?x128xbf16>, tensor<?x8x?x128xbf16>, tensor<?x8x?x64xbf16>
  return %dq, %dk, %dv : tensor<?x32x?x128xbf16>, tensor<?x8x?x128xbf16>, tensor<?x8x?x64xbf16>
}

// CHECK-LABEL: func.func @attention_grad_saved
// CHECK-SAME: (%[[DO:.+]]: tensor<?x32x?x64xbf16>, %{{.*}}: tensor<?x32x?x128xbf16>, %{{.*}}: tensor<?x8x?x128xbf16>, %{{.*}}: tensor<?x8x?x64xbf16>, %[[O:.+]]: tensor<?x32x?x64xbf16>, %[[LSE:.+]]: tensor<?x32x?xf32>)
// CHECK: liger.attention_grad %[[DO]], %{{.*}}, %{{.*}}, %{{.*}} saved(%[[O]], %[[LSE]] : tensor<?x32x?x64xbf16>, tensor<?x32x?xf32>) causal : tensor<?x32x?x64xbf16>, tensor<?x32x?x128xbf16>, tensor<?x8x?x128xbf16>, tensor<?x8x?x64xbf16>
func.func @attention_grad_saved(%do: tensor<?x32x?x64xbf16>, %q: tensor<?x32x?x128xbf16>, %k: tensor<?x8x?x128xbf16>, %v: tensor<?x8x?x64xbf16>, %o: tensor<?x32x?x64xbf16>, %lse: tensor<?x32x?xf32>) -> (tensor<?x32x?x128xbf16>, tensor<?x8x?x128xbf16>, tensor<?x8x?x64xbf16>) {
  %dq, %dk, %dv = liger.attention_grad %do, %q, %k, %v saved(%o, %lse : tensor<?x32x?x64xbf16>, tensor<?x32x?xf32>) causal : tensor<?x32x?x64xbf16>, tensor<?x32x?x128xbf16>, tensor<?x8x?x128xbf16>, tensor<?x8x?x64xbf16>
  return %dq, %dk, %dv : tensor<?x32x?x128xbf16>, tensor<?x8x?x128xbf16>, tensor<?x8x?x64xbf16>
}

// CHECK-LABEL: func.func @backward_ops
// CHECK: liger.rms_norm_grad %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}} casting = gemma : tensor<?x4096xbf16>, tensor<4096xf32>, tensor<?xf32>
// CHECK: liger.rope_grad %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}} : tensor<2x32x?x128xbf16>, tensor<2x8x?x128xbf16>, tensor<2x?x128xbf16>
// CHECK: liger.swiglu_grad %{{.*}}, %{{.*}}, %{{.*}} : tensor<?x14336xbf16>
// CHECK: liger.cross_entropy_grad %{{.*}}, %{{.*}}, %{{.*}} label_smoothing = 1.000000e-01 : tensor<?x32000xbf16>, tensor<?xi64>, tensor<f32>
// CHECK: liger.cross_entropy_grad %{{.*}}, %{{.*}}, %{{.*}} reduction = none : tensor<?x32000xbf16>, tensor<?xi64>, tensor<?xf32>
// CHECK: liger.layer_norm_grad %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}} : tensor<?x4096xbf16>, tensor<4096xf32>, tensor<?xf32>
func.func @backward_ops(%dy: tensor<?x4096xbf16>, %x: tensor<?x4096xbf16>, %w: tensor<4096xf32>, %rstd: tensor<?xf32>,
                        %gq: tensor<2x32x?x128xbf16>, %gk: tensor<2x8x?x128xbf16>, %cos: tensor<2x?x128xbf16>, %sin: tensor<2x?x128xbf16>,
                        %dh: tensor<?x14336xbf16>, %g: tensor<?x14336xbf16>, %u: tensor<?x14336xbf16>,
                        %l: tensor<?x32000xbf16>, %t: tensor<?xi64>, %dl: tensor<f32>, %dln: tensor<?xf32>,
                        %mean: tensor<?xf32>) {
  %dx, %dw = liger.rms_norm_grad %dy, %x, %w, %rstd casting = gemma : tensor<?x4096xbf16>, tensor<4096xf32>, tensor<?xf32>
  %dq, %dk = liger.rope_grad %gq, %gk, %cos, %sin : tensor<2x32x?x128xbf16>, tensor<2x8x?x128xbf16>, tensor<2x?x128xbf16>
  %dg, %du = liger.swiglu_grad %dh, %g, %u : tensor<?x14336xbf16>
  %dlogits = liger.cross_entropy_grad %l, %t, %dl label_smoothing = 0.1 : tensor<?x32000xbf16>, tensor<?xi64>, tensor<f32>
  %dlogits2 = liger.cross_entropy_grad %l, %t, %dln reduction = none : tensor<?x32000xbf16>, tensor<?xi64>, tensor<?xf32>
  %lx:3 = liger.layer_norm_grad %dy, %x, %w, %mean, %rstd : tensor<?x4096xbf16>, tensor<4096xf32>, tensor<?xf32>
  return
}

// CHECK-LABEL: func.func @fusion_groups
// CHECK: %[[R:.+]]:2 = liger.fusion rowwise(%{{.*}}, %{{.*}}, %{{.*}}) : (tensor<?x64xbf16>, tensor<?x64xbf16>, tensor<64xbf16>) -> (tensor<?x64xbf16>, tensor<?x64xbf16>) {
// CHECK-NEXT: ^bb0(%{{.*}}: tensor<?x64xbf16>, %{{.*}}: tensor<?x64xbf16>, %{{.*}}: tensor<64xbf16>):
// CHECK-NEXT:   liger.add_rms_norm
// CHECK-NEXT:   liger.yield %{{.*}}, %{{.*}} : tensor<?x64xbf16>, tensor<?x64xbf16>
// CHECK: liger.fusion matmul(%[[R]]#0, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}})
// CHECK: liger.fusion loss(
func.func @fusion_groups(%h: tensor<?x64xbf16>, %res: tensor<?x64xbf16>, %w: tensor<64xbf16>,
                         %wg: tensor<96x64xbf16>, %wu: tensor<96x64xbf16>, %idx: index,
                         %lm: tensor<128x64xbf16>, %t: tensor<?xi64>) -> (tensor<?x96xbf16>, tensor<f32>) {
  %y, %s = liger.fusion rowwise(%h, %res, %w)
      : (tensor<?x64xbf16>, tensor<?x64xbf16>, tensor<64xbf16>) -> (tensor<?x64xbf16>, tensor<?x64xbf16>) {
  ^bb0(%a: tensor<?x64xbf16>, %b: tensor<?x64xbf16>, %g: tensor<64xbf16>):
    %n, %sum = liger.add_rms_norm %a, %b, %g eps = 1.0e-5 : tensor<?x64xbf16>, tensor<64xbf16>
    liger.yield %n, %sum : tensor<?x64xbf16>, tensor<?x64xbf16>
  }
  // Inputs need not be tensors (a size used by a layout op in the body).
  %m = liger.fusion matmul(%y, %wg, %wu, %idx, %s)
      : (tensor<?x64xbf16>, tensor<96x64xbf16>, tensor<96x64xbf16>, index, tensor<?x64xbf16>) -> tensor<?x96xbf16> {
  ^bb0(%a: tensor<?x64xbf16>, %b: tensor<96x64xbf16>, %c: tensor<96x64xbf16>, %i: index, %unused: tensor<?x64xbf16>):
    %gate = liger.linear %a, %b : tensor<?x64xbf16>, tensor<96x64xbf16>
    %up = liger.linear %a, %c : tensor<?x64xbf16>, tensor<96x64xbf16>
    %act = liger.swiglu %gate, %up : tensor<?x96xbf16>
    liger.yield %act : tensor<?x96xbf16>
  }
  %l = liger.fusion loss(%s, %lm, %t) : (tensor<?x64xbf16>, tensor<128x64xbf16>, tensor<?xi64>) -> tensor<f32> {
  ^bb0(%a: tensor<?x64xbf16>, %b: tensor<128x64xbf16>, %c: tensor<?xi64>):
    %0 = liger.fused_linear_cross_entropy %a, %b, %c : tensor<?x64xbf16>, tensor<128x64xbf16>, tensor<?xi64>
    liger.yield %0 : tensor<f32>
  }
  return %m, %l : tensor<?x96xbf16>, tensor<f32>
}

// CHECK-LABEL: func.func @activation_backward_ops
// CHECK: liger.geglu_grad %{{.*}}, %{{.*}}, %{{.*}} approximate = tanh : tensor<?x16384xbf16>
// CHECK: liger.geglu_grad %{{.*}}, %{{.*}}, %{{.*}} : tensor<?x16384xbf16>
// CHECK: liger.softmax_grad %{{.*}}, %{{.*}} : tensor<?x32000xf32>
func.func @activation_backward_ops(%dh: tensor<?x16384xbf16>, %g: tensor<?x16384xbf16>, %u: tensor<?x16384xbf16>,
                                   %dy: tensor<?x32000xf32>, %y: tensor<?x32000xf32>) {
  %a, %b = liger.geglu_grad %dh, %g, %u approximate = tanh : tensor<?x16384xbf16>
  %c, %d = liger.geglu_grad %dh, %g, %u : tensor<?x16384xbf16>
  %e = liger.softmax_grad %dy, %y : tensor<?x32000xf32>
  return
}

// A gradient product with an epilogue: dh = dy · W_down, then the gated
// activation's gradient, two results.
// CHECK-LABEL: func.func @gradient_group
// CHECK: %{{.*}}:2 = liger.fusion matmul(%{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}) : (tensor<?x64xbf16>, tensor<64x96xbf16>, tensor<?x96xbf16>, tensor<?x96xbf16>) -> (tensor<?x96xbf16>, tensor<?x96xbf16>) {
// CHECK:   liger.linear_grad_input
// CHECK-NEXT:   liger.swiglu_grad
// CHECK-NEXT:   liger.yield
func.func @gradient_group(%dy: tensor<?x64xbf16>, %wd: tensor<64x96xbf16>, %g: tensor<?x96xbf16>,
                          %u: tensor<?x96xbf16>) -> (tensor<?x96xbf16>, tensor<?x96xbf16>) {
  %dg, %du = liger.fusion matmul(%dy, %wd, %g, %u)
      : (tensor<?x64xbf16>, tensor<64x96xbf16>, tensor<?x96xbf16>, tensor<?x96xbf16>) -> (tensor<?x96xbf16>, tensor<?x96xbf16>) {
  ^bb0(%a: tensor<?x64xbf16>, %w: tensor<64x96xbf16>, %gate: tensor<?x96xbf16>, %up: tensor<?x96xbf16>):
    %dh = liger.linear_grad_input %a, %w : tensor<?x64xbf16>, tensor<64x96xbf16>
    %0, %1 = liger.swiglu_grad %dh, %gate, %up : tensor<?x96xbf16>
    liger.yield %0, %1 : tensor<?x96xbf16>, tensor<?x96xbf16>
  }
  return %dg, %du : tensor<?x96xbf16>, tensor<?x96xbf16>
}
