// RUN: liger-opt %s -split-input-file -verify-diagnostics

func.func @argument_count(%x: tensor<4x8xf32>) -> tensor<4x8xf32> {
  // expected-error @+1 {{'liger.fusion' op expects the body to take one argument per input (1), got 2}}
  %y = liger.fusion rowwise(%x) : (tensor<4x8xf32>) -> tensor<4x8xf32> {
  ^bb0(%a: tensor<4x8xf32>, %b: tensor<4x8xf32>):
    %s = liger.silu %a : tensor<4x8xf32>
    liger.yield %s : tensor<4x8xf32>
  }
  return %y : tensor<4x8xf32>
}

// -----

func.func @argument_type(%x: tensor<4x8xf32>) -> tensor<4x8xf32> {
  // expected-error @+1 {{'liger.fusion' op expects body argument #0 to have the type of input #0 ('tensor<4x8xf32>'), got 'tensor<4x8xbf16>'}}
  %y = liger.fusion rowwise(%x) : (tensor<4x8xf32>) -> tensor<4x8xf32> {
  ^bb0(%a: tensor<4x8xbf16>):
    %s = liger.silu %a : tensor<4x8xbf16>
    %t = arith.extf %s : tensor<4x8xbf16> to tensor<4x8xf32>
    liger.yield %t : tensor<4x8xf32>
  }
  return %y : tensor<4x8xf32>
}

// -----

func.func @yield_types(%x: tensor<4x8xf32>) -> tensor<4x8xf32> {
  // expected-error @+1 {{'liger.fusion' op expects 'liger.yield' to return the result types of the group}}
  %y = liger.fusion rowwise(%x) : (tensor<4x8xf32>) -> tensor<4x8xf32> {
  ^bb0(%a: tensor<4x8xf32>):
    %s = liger.softmax %a : tensor<4x8xf32>
    %l = liger.kl_div %s, %a : tensor<4x8xf32>
    liger.yield %l : tensor<f32>
  }
  return %y : tensor<4x8xf32>
}

// -----

func.func @rowwise_with_projection(%x: tensor<4x8xf32>, %w: tensor<8x8xf32>) -> tensor<4x8xf32> {
  // expected-error @+1 {{'liger.fusion' op of kind rowwise cannot contain 'liger.linear': a rowwise kernel computes row-local ops only (no matrix product, no layout change)}}
  %y = liger.fusion rowwise(%x, %w) : (tensor<4x8xf32>, tensor<8x8xf32>) -> tensor<4x8xf32> {
  ^bb0(%a: tensor<4x8xf32>, %b: tensor<8x8xf32>):
    %p = liger.linear %a, %b : tensor<4x8xf32>, tensor<8x8xf32>
    liger.yield %p : tensor<4x8xf32>
  }
  return %y : tensor<4x8xf32>
}

// -----

func.func @nested(%x: tensor<4x8xf32>) -> tensor<4x8xf32> {
  // expected-error @+1 {{'liger.fusion' op of kind rowwise cannot contain 'liger.fusion': fusion groups do not nest}}
  %y = liger.fusion rowwise(%x) : (tensor<4x8xf32>) -> tensor<4x8xf32> {
  ^bb0(%a: tensor<4x8xf32>):
    %i = liger.fusion rowwise(%a) : (tensor<4x8xf32>) -> tensor<4x8xf32> {
    ^bb0(%b: tensor<4x8xf32>):
      %s = liger.silu %b : tensor<4x8xf32>
      liger.yield %s : tensor<4x8xf32>
    }
    liger.yield %i : tensor<4x8xf32>
  }
  return %y : tensor<4x8xf32>
}

// -----

func.func @matmul_with_attention(%q: tensor<1x2x4x8xf32>, %w: tensor<8x8xf32>) -> tensor<1x2x4x8xf32> {
  // expected-error @+1 {{'liger.fusion' op of kind matmul cannot contain 'liger.attention': a matmul kernel takes projections, an RMSNorm prologue and an elementwise, RoPE or layout epilogue}}
  %y = liger.fusion matmul(%q, %w) : (tensor<1x2x4x8xf32>, tensor<8x8xf32>) -> tensor<1x2x4x8xf32> {
  ^bb0(%a: tensor<1x2x4x8xf32>, %b: tensor<8x8xf32>):
    %p = liger.linear %a, %b : tensor<1x2x4x8xf32>, tensor<8x8xf32>
    %o = liger.attention %p, %p, %p : tensor<1x2x4x8xf32>, tensor<1x2x4x8xf32>, tensor<1x2x4x8xf32>
    liger.yield %o : tensor<1x2x4x8xf32>
  }
  return %y : tensor<1x2x4x8xf32>
}

// -----

func.func @matmul_without_projection(%x: tensor<4x8xf32>) -> tensor<4x8xf32> {
  // expected-error @+1 {{'liger.fusion' op of kind matmul expects at least one projection ('liger.linear' or 'liger.lora_linear') or one gradient product}}
  %y = liger.fusion matmul(%x) : (tensor<4x8xf32>) -> tensor<4x8xf32> {
  ^bb0(%a: tensor<4x8xf32>):
    %s = liger.silu %a : tensor<4x8xf32>
    liger.yield %s : tensor<4x8xf32>
  }
  return %y : tensor<4x8xf32>
}

// -----

func.func @matmul_two_activations(%x: tensor<4x8xf32>, %z: tensor<4x8xf32>, %w: tensor<8x8xf32>) -> tensor<4x8xf32> {
  // expected-error @+1 {{'liger.fusion' op of kind matmul expects every projection to read the same activation (one GEMM over concatenated weights)}}
  %y = liger.fusion matmul(%x, %z, %w) : (tensor<4x8xf32>, tensor<4x8xf32>, tensor<8x8xf32>) -> tensor<4x8xf32> {
  ^bb0(%a: tensor<4x8xf32>, %c: tensor<4x8xf32>, %b: tensor<8x8xf32>):
    %p = liger.linear %a, %b : tensor<4x8xf32>, tensor<8x8xf32>
    %q = liger.linear %c, %b : tensor<4x8xf32>, tensor<8x8xf32>
    %s = liger.add %p, %q : tensor<4x8xf32>
    liger.yield %s : tensor<4x8xf32>
  }
  return %y : tensor<4x8xf32>
}

// -----

func.func @matmul_two_norms(%x: tensor<4x8xf32>, %g: tensor<8xf32>, %w: tensor<8x8xf32>) -> tensor<4x8xf32> {
  // expected-error @+1 {{'liger.fusion' op of kind matmul expects at most one RMSNorm prologue, got 2}}
  %y = liger.fusion matmul(%x, %g, %w) : (tensor<4x8xf32>, tensor<8xf32>, tensor<8x8xf32>) -> tensor<4x8xf32> {
  ^bb0(%a: tensor<4x8xf32>, %c: tensor<8xf32>, %b: tensor<8x8xf32>):
    %n = liger.rms_norm %a, %c : tensor<4x8xf32>, tensor<8xf32>
    %m = liger.rms_norm %n, %c : tensor<4x8xf32>, tensor<8xf32>
    %p = liger.linear %m, %b : tensor<4x8xf32>, tensor<8x8xf32>
    liger.yield %p : tensor<4x8xf32>
  }
  return %y : tensor<4x8xf32>
}

// -----

func.func @matmul_norm_not_the_activation(%x: tensor<4x8xf32>, %g: tensor<8xf32>, %w: tensor<8x8xf32>) -> tensor<4x8xf32> {
  // expected-error @+1 {{'liger.fusion' op of kind matmul expects its RMSNorm to produce the activation of the projections}}
  %y = liger.fusion matmul(%x, %g, %w) : (tensor<4x8xf32>, tensor<8xf32>, tensor<8x8xf32>) -> tensor<4x8xf32> {
  ^bb0(%a: tensor<4x8xf32>, %c: tensor<8xf32>, %b: tensor<8x8xf32>):
    %p = liger.linear %a, %b : tensor<4x8xf32>, tensor<8x8xf32>
    %n = liger.rms_norm %p, %c : tensor<4x8xf32>, tensor<8xf32>
    liger.yield %n : tensor<4x8xf32>
  }
  return %y : tensor<4x8xf32>
}

// -----

func.func @matmul_norm_of_intermediate(%x: tensor<4x8xf32>, %g: tensor<8xf32>, %w: tensor<8x8xf32>) -> tensor<4x8xf32> {
  // expected-error @+1 {{'liger.fusion' op of kind matmul expects its RMSNorm prologue to read a group input}}
  %y = liger.fusion matmul(%x, %g, %w) : (tensor<4x8xf32>, tensor<8xf32>, tensor<8x8xf32>) -> tensor<4x8xf32> {
  ^bb0(%a: tensor<4x8xf32>, %c: tensor<8xf32>, %b: tensor<8x8xf32>):
    %s = liger.silu %a : tensor<4x8xf32>
    %n = liger.rms_norm %s, %c : tensor<4x8xf32>, tensor<8xf32>
    %p = liger.linear %n, %b : tensor<4x8xf32>, tensor<8x8xf32>
    liger.yield %p : tensor<4x8xf32>
  }
  return %y : tensor<4x8xf32>
}

// -----

func.func @loss_with_other_ops(%h: tensor<4x8xf32>, %w: tensor<16x8xf32>, %t: tensor<4xi64>) -> tensor<f32> {
  // expected-error @+1 {{'liger.fusion' op of kind loss cannot contain 'liger.silu': a loss kernel implements one liger.fused_linear_cross_entropy (and its liger.fused_linear_cross_entropy_grad)}}
  %l = liger.fusion loss(%h, %w, %t) : (tensor<4x8xf32>, tensor<16x8xf32>, tensor<4xi64>) -> tensor<f32> {
  ^bb0(%a: tensor<4x8xf32>, %b: tensor<16x8xf32>, %c: tensor<4xi64>):
    %s = liger.silu %a : tensor<4x8xf32>
    %0 = liger.fused_linear_cross_entropy %s, %b, %c : tensor<4x8xf32>, tensor<16x8xf32>, tensor<4xi64>
    liger.yield %0 : tensor<f32>
  }
  return %l : tensor<f32>
}

// -----

func.func @loss_two_backwards(%h: tensor<4x8xf32>, %w: tensor<16x8xf32>, %t: tensor<4xi64>, %g: tensor<f32>) -> tensor<f32> {
  // expected-error @+1 {{'liger.fusion' op of kind loss expects at most one 'liger.fused_linear_cross_entropy_grad', got 2}}
  %l = liger.fusion loss(%h, %w, %t, %g) : (tensor<4x8xf32>, tensor<16x8xf32>, tensor<4xi64>, tensor<f32>) -> tensor<f32> {
  ^bb0(%a: tensor<4x8xf32>, %b: tensor<16x8xf32>, %c: tensor<4xi64>, %d: tensor<f32>):
    %0 = liger.fused_linear_cross_entropy %a, %b, %c : tensor<4x8xf32>, tensor<16x8xf32>, tensor<4xi64>
    %1:2 = liger.fused_linear_cross_entropy_grad %a, %b, %c, %d : tensor<4x8xf32>, tensor<16x8xf32>, tensor<4xi64>, tensor<f32>
    %2:2 = liger.fused_linear_cross_entropy_grad %a, %b, %c, %d : tensor<4x8xf32>, tensor<16x8xf32>, tensor<4xi64>, tensor<f32>
    liger.yield %0 : tensor<f32>
  }
  return %l : tensor<f32>
}

// -----

// A backward without its forward is not a loss kernel either.
func.func @loss_backward_alone(%h: tensor<4x8xf32>, %w: tensor<16x8xf32>, %t: tensor<4xi64>, %g: tensor<f32>) -> tensor<4x8xf32> {
  // expected-error @+1 {{'liger.fusion' op of kind loss expects exactly one 'liger.fused_linear_cross_entropy', got 0}}
  %l = liger.fusion loss(%h, %w, %t, %g) : (tensor<4x8xf32>, tensor<16x8xf32>, tensor<4xi64>, tensor<f32>) -> tensor<4x8xf32> {
  ^bb0(%a: tensor<4x8xf32>, %b: tensor<16x8xf32>, %c: tensor<4xi64>, %d: tensor<f32>):
    %1:2 = liger.fused_linear_cross_entropy_grad %a, %b, %c, %d : tensor<4x8xf32>, tensor<16x8xf32>, tensor<4xi64>, tensor<f32>
    liger.yield %1#0 : tensor<4x8xf32>
  }
  return %l : tensor<4x8xf32>
}

// -----

func.func @loss_empty(%h: tensor<f32>) -> tensor<f32> {
  // expected-error @+1 {{'liger.fusion' op of kind loss expects exactly one 'liger.fused_linear_cross_entropy', got 0}}
  %l = liger.fusion loss(%h) : (tensor<f32>) -> tensor<f32> {
  ^bb0(%a: tensor<f32>):
    liger.yield %a : tensor<f32>
  }
  return %l : tensor<f32>
}

// -----

func.func @bad_kind(%x: tensor<4x8xf32>) -> tensor<4x8xf32> {
  // expected-error @+1 {{expected one of rowwise, matmul, loss, attention, got 'elementwise'}}
  %y = liger.fusion elementwise(%x) : (tensor<4x8xf32>) -> tensor<4x8xf32> {
  ^bb0(%a: tensor<4x8xf32>):
    liger.yield %a : tensor<4x8xf32>
  }
  return %y : tensor<4x8xf32>
}

// -----

func.func @yield_outside(%x: tensor<4x8xf32>) {
  // expected-error @+1 {{'liger.yield' op expects parent op 'liger.fusion'}}
  liger.yield %x : tensor<4x8xf32>
}

// -----

func.func @matmul_weight_gradient_with_epilogue(%dy: tensor<4x8xf32>, %x: tensor<4x16xf32>) -> tensor<8x16xf32> {
  // expected-error @+1 {{'liger.fusion' op of kind matmul computes a gradient product ('liger.linear_grad_weight') alone: one op, no prologue or epilogue}}
  %y = liger.fusion matmul(%dy, %x) : (tensor<4x8xf32>, tensor<4x16xf32>) -> tensor<8x16xf32> {
  ^bb0(%a: tensor<4x8xf32>, %b: tensor<4x16xf32>):
    %g = liger.linear_grad_weight %a, %b : tensor<4x8xf32>, tensor<4x16xf32>
    %s = liger.silu %g : tensor<8x16xf32>
    liger.yield %s : tensor<8x16xf32>
  }
  return %y : tensor<8x16xf32>
}

// -----

func.func @matmul_input_gradient_with_projection(%dy: tensor<4x8xf32>, %w: tensor<8x16xf32>, %v: tensor<16x16xf32>) -> tensor<4x16xf32> {
  // expected-error @+1 {{'liger.fusion' op of kind matmul computes one gradient product ('liger.linear_grad_input') with at most an elementwise epilogue: no other product, no prologue}}
  %y = liger.fusion matmul(%dy, %w, %v) : (tensor<4x8xf32>, tensor<8x16xf32>, tensor<16x16xf32>) -> tensor<4x16xf32> {
  ^bb0(%a: tensor<4x8xf32>, %b: tensor<8x16xf32>, %c: tensor<16x16xf32>):
    %g = liger.linear_grad_input %a, %b : tensor<4x8xf32>, tensor<8x16xf32>
    %p = liger.linear %g, %c : tensor<4x16xf32>, tensor<16x16xf32>
    liger.yield %p : tensor<4x16xf32>
  }
  return %y : tensor<4x16xf32>
}

// -----

func.func @matmul_two_input_gradients(%dy: tensor<4x8xf32>, %w: tensor<8x16xf32>) -> tensor<4x16xf32> {
  // expected-error @+1 {{'liger.fusion' op of kind matmul computes one gradient product ('liger.linear_grad_input') with at most an elementwise epilogue: no other product, no prologue}}
  %y = liger.fusion matmul(%dy, %w) : (tensor<4x8xf32>, tensor<8x16xf32>) -> tensor<4x16xf32> {
  ^bb0(%a: tensor<4x8xf32>, %b: tensor<8x16xf32>):
    %g = liger.linear_grad_input %a, %b : tensor<4x8xf32>, tensor<8x16xf32>
    %h = liger.linear_grad_input %a, %b : tensor<4x8xf32>, tensor<8x16xf32>
    %s = liger.add %g, %h : tensor<4x16xf32>
    liger.yield %s : tensor<4x16xf32>
  }
  return %y : tensor<4x16xf32>
}

// -----

func.func @attention_group_other_op(%x: tensor<4x8xf32>) -> tensor<4x8xf32> {
  // expected-error @+1 {{'liger.fusion' op of kind attention cannot contain 'liger.silu': an attention kernel implements one liger.attention or one liger.attention_grad}}
  %y = liger.fusion attention(%x) : (tensor<4x8xf32>) -> tensor<4x8xf32> {
  ^bb0(%a: tensor<4x8xf32>):
    %s = liger.silu %a : tensor<4x8xf32>
    liger.yield %s : tensor<4x8xf32>
  }
  return %y : tensor<4x8xf32>
}

// -----

func.func @attention_group_two_ops(%q: tensor<1x2x4x64xbf16>) -> tensor<1x2x4x64xbf16> {
  // expected-error @+1 {{'liger.fusion' op of kind attention expects exactly one 'liger.attention' or 'liger.attention_grad', got 2}}
  %y = liger.fusion attention(%q) : (tensor<1x2x4x64xbf16>) -> tensor<1x2x4x64xbf16> {
  ^bb0(%a: tensor<1x2x4x64xbf16>):
    %o = liger.attention %a, %a, %a : tensor<1x2x4x64xbf16>, tensor<1x2x4x64xbf16>, tensor<1x2x4x64xbf16>
    %p = liger.attention %o, %a, %a : tensor<1x2x4x64xbf16>, tensor<1x2x4x64xbf16>, tensor<1x2x4x64xbf16>
    liger.yield %p : tensor<1x2x4x64xbf16>
  }
  return %y : tensor<1x2x4x64xbf16>
}

// -----

// The forward and its backward are two kernels, not one group.
func.func @attention_group_forward_and_grad(%q: tensor<1x2x4x64xbf16>) -> tensor<1x2x4x64xbf16> {
  // expected-error @+1 {{'liger.fusion' op of kind attention expects exactly one 'liger.attention' or 'liger.attention_grad', got 2}}
  %y = liger.fusion attention(%q) : (tensor<1x2x4x64xbf16>) -> tensor<1x2x4x64xbf16> {
  ^bb0(%a: tensor<1x2x4x64xbf16>):
    %o = liger.attention %a, %a, %a : tensor<1x2x4x64xbf16>, tensor<1x2x4x64xbf16>, tensor<1x2x4x64xbf16>
    %g:3 = liger.attention_grad %o, %a, %a, %a : tensor<1x2x4x64xbf16>, tensor<1x2x4x64xbf16>, tensor<1x2x4x64xbf16>, tensor<1x2x4x64xbf16>
    liger.yield %g#0 : tensor<1x2x4x64xbf16>
  }
  return %y : tensor<1x2x4x64xbf16>
}
