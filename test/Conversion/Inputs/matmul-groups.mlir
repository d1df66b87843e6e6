// Matmul groups for the liger-test-matmul-* passes (test-matmul-plan.mlir,
// test-matmul-part.mlir): one of each body, prologue and epilogue the
// templates implement, and one they do not.

// A gate/up pair with SwiGLU.
func.func @gated(%x: tensor<?x512xbf16>, %g: tensor<1024x512xbf16>, %u: tensor<1024x512xbf16>) -> tensor<?x1024xbf16> {
  %y = liger.fusion matmul(%x, %g, %u) : (tensor<?x512xbf16>, tensor<1024x512xbf16>, tensor<1024x512xbf16>) -> tensor<?x1024xbf16> {
  ^bb0(%a: tensor<?x512xbf16>, %b: tensor<1024x512xbf16>, %c: tensor<1024x512xbf16>):
    %lg = liger.linear %a, %b : tensor<?x512xbf16>, tensor<1024x512xbf16>
    %lu = liger.linear %a, %c : tensor<?x512xbf16>, tensor<1024x512xbf16>
    %s = liger.swiglu %lg, %lu : tensor<?x1024xbf16>
    liger.yield %s : tensor<?x1024xbf16>
  }
  return %y : tensor<?x1024xbf16>
}

// An RMSNorm prologue, a bias and a residual add.
func.func @normed_residual(%x: tensor<?x512xbf16>, %g: tensor<512xbf16>, %w: tensor<1024x512xbf16>, %bias: tensor<1024xbf16>, %r: tensor<?x1024xbf16>) -> tensor<?x1024xbf16> {
  %y = liger.fusion matmul(%x, %g, %w, %bias, %r) : (tensor<?x512xbf16>, tensor<512xbf16>, tensor<1024x512xbf16>, tensor<1024xbf16>, tensor<?x1024xbf16>) -> tensor<?x1024xbf16> {
  ^bb0(%a: tensor<?x512xbf16>, %b: tensor<512xbf16>, %c: tensor<1024x512xbf16>, %d: tensor<1024xbf16>, %e: tensor<?x1024xbf16>):
    %n = liger.rms_norm %a, %b eps = 1.0e-5 : tensor<?x512xbf16>, tensor<512xbf16>
    %l = liger.linear %n, %c, %d : tensor<?x512xbf16>, tensor<1024x512xbf16>, tensor<1024xbf16>
    %s = liger.add %l, %e : tensor<?x1024xbf16>
    liger.yield %s : tensor<?x1024xbf16>
  }
  return %y : tensor<?x1024xbf16>
}

// LoRA, rank 16.
func.func @lora(%x: tensor<?x512xbf16>, %w: tensor<1024x512xbf16>, %a: tensor<16x512xbf16>, %b: tensor<1024x16xbf16>) -> tensor<?x1024xbf16> {
  %y = liger.fusion matmul(%x, %w, %a, %b) : (tensor<?x512xbf16>, tensor<1024x512xbf16>, tensor<16x512xbf16>, tensor<1024x16xbf16>) -> tensor<?x1024xbf16> {
  ^bb0(%i: tensor<?x512xbf16>, %j: tensor<1024x512xbf16>, %k: tensor<16x512xbf16>, %l: tensor<1024x16xbf16>):
    %p = liger.lora_linear %i, %j, %k, %l scale = 2.0 : tensor<?x512xbf16>, tensor<1024x512xbf16>, tensor<16x512xbf16>, tensor<1024x16xbf16>
    liger.yield %p : tensor<?x1024xbf16>
  }
  return %y : tensor<?x1024xbf16>
}

// The LoRA dx, dy · W + 2 · (dy · B) · A, as lora_linear of dy, Wᵀ, Bᵀ, Aᵀ:
// W [1024, 512] read MN-major from the group's input.
func.func @lora_dx(%w: tensor<1024x512xbf16>, %dy: tensor<?x1024xbf16>, %bt: tensor<16x1024xbf16>, %at: tensor<512x16xbf16>) -> tensor<?x512xbf16> {
  %y = liger.fusion matmul(%w, %dy, %bt, %at) : (tensor<1024x512xbf16>, tensor<?x1024xbf16>, tensor<16x1024xbf16>, tensor<512x16xbf16>) -> tensor<?x512xbf16> {
  ^bb0(%i: tensor<1024x512xbf16>, %j: tensor<?x1024xbf16>, %k: tensor<16x1024xbf16>, %l: tensor<512x16xbf16>):
    %e = tensor.empty() : tensor<512x1024xbf16>
    %t = linalg.transpose ins(%i : tensor<1024x512xbf16>) outs(%e : tensor<512x1024xbf16>) permutation = [1, 0]
    %p = liger.lora_linear %j, %t, %k, %l scale = 2.0 : tensor<?x1024xbf16>, tensor<512x1024xbf16>, tensor<16x1024xbf16>, tensor<512x16xbf16>
    liger.yield %p : tensor<?x512xbf16>
  }
  return %y : tensor<?x512xbf16>
}

// dW added into a bf16 buffer (the wgmma kernel's old tile).
func.func @dw_acc_bf16(%dy: tensor<?x512xbf16>, %x: tensor<?x1024xbf16>, %acc: tensor<512x1024xbf16>) -> tensor<512x1024xbf16> {
  %y = liger.fusion matmul(%dy, %x, %acc) : (tensor<?x512xbf16>, tensor<?x1024xbf16>, tensor<512x1024xbf16>) -> tensor<512x1024xbf16> {
  ^bb0(%a: tensor<?x512xbf16>, %b: tensor<?x1024xbf16>, %c: tensor<512x1024xbf16>):
    %dw = liger.linear_grad_weight %a, %b accumulate %c : tensor<?x512xbf16>, tensor<?x1024xbf16>, tensor<512x1024xbf16>
    liger.yield %dw : tensor<512x1024xbf16>
  }
  return %y : tensor<512x1024xbf16>
}

// dx = dy · W (W read N-major).
func.func @dx(%dy: tensor<?x1024xbf16>, %w: tensor<1024x512xbf16>) -> tensor<?x512xbf16> {
  %y = liger.fusion matmul(%dy, %w) : (tensor<?x1024xbf16>, tensor<1024x512xbf16>) -> tensor<?x512xbf16> {
  ^bb0(%a: tensor<?x1024xbf16>, %b: tensor<1024x512xbf16>):
    %dx = liger.linear_grad_input %a, %b : tensor<?x1024xbf16>, tensor<1024x512xbf16>
    liger.yield %dx : tensor<?x512xbf16>
  }
  return %y : tensor<?x512xbf16>
}

// Three projections: left for a later template.
func.func @three(%x: tensor<?x512xbf16>, %w: tensor<1024x512xbf16>) -> tensor<?x1024xbf16> {
  %y = liger.fusion matmul(%x, %w) : (tensor<?x512xbf16>, tensor<1024x512xbf16>) -> tensor<?x1024xbf16> {
  ^bb0(%a: tensor<?x512xbf16>, %b: tensor<1024x512xbf16>):
    %l1 = liger.linear %a, %b : tensor<?x512xbf16>, tensor<1024x512xbf16>
    %l2 = liger.linear %a, %b : tensor<?x512xbf16>, tensor<1024x512xbf16>
    %l3 = liger.linear %a, %b : tensor<?x512xbf16>, tensor<1024x512xbf16>
    %s = liger.add %l1, %l2 : tensor<?x1024xbf16>
    %t = liger.add %s, %l3 : tensor<?x1024xbf16>
    liger.yield %t : tensor<?x1024xbf16>
  }
  return %y : tensor<?x1024xbf16>
}

// q/k projections with RoPE after an RMSNorm (head_dim 16).
func.func @qk_rope(%x: tensor<?x?x64xbf16>, %g: tensor<64xbf16>, %wq: tensor<64x64xbf16>, %wk: tensor<32x64xbf16>, %cos: tensor<1x?x16xbf16>, %sin: tensor<1x?x16xbf16>) -> (tensor<?x4x?x16xbf16>, tensor<?x2x?x16xbf16>) {
  %r:2 = liger.fusion matmul(%x, %g, %wq, %wk, %cos, %sin) : (tensor<?x?x64xbf16>, tensor<64xbf16>, tensor<64x64xbf16>, tensor<32x64xbf16>, tensor<1x?x16xbf16>, tensor<1x?x16xbf16>) -> (tensor<?x4x?x16xbf16>, tensor<?x2x?x16xbf16>) {
  ^bb0(%bx: tensor<?x?x64xbf16>, %bg: tensor<64xbf16>, %bwq: tensor<64x64xbf16>, %bwk: tensor<32x64xbf16>, %bcos: tensor<1x?x16xbf16>, %bsin: tensor<1x?x16xbf16>):
    %c0 = arith.constant 0 : index
    %c1 = arith.constant 1 : index
    %n = liger.rms_norm %bx, %bg eps = 1.0e-5 : tensor<?x?x64xbf16>, tensor<64xbf16>
    %q = liger.linear %n, %bwq : tensor<?x?x64xbf16>, tensor<64x64xbf16>
    %k = liger.linear %n, %bwk : tensor<?x?x64xbf16>, tensor<32x64xbf16>
    %qb = tensor.dim %q, %c0 : tensor<?x?x64xbf16>
    %qt = tensor.dim %q, %c1 : tensor<?x?x64xbf16>
    %q4 = tensor.expand_shape %q [[0], [1], [2, 3]] output_shape [%qb, %qt, 4, 16] : tensor<?x?x64xbf16> into tensor<?x?x4x16xbf16>
    %k4 = tensor.expand_shape %k [[0], [1], [2, 3]] output_shape [%qb, %qt, 2, 16] : tensor<?x?x32xbf16> into tensor<?x?x2x16xbf16>
    %qi = tensor.empty(%qb, %qt) : tensor<?x4x?x16xbf16>
    %ki = tensor.empty(%qb, %qt) : tensor<?x2x?x16xbf16>
    %qh = linalg.transpose ins(%q4 : tensor<?x?x4x16xbf16>) outs(%qi : tensor<?x4x?x16xbf16>) permutation = [0, 2, 1, 3]
    %kh = linalg.transpose ins(%k4 : tensor<?x?x2x16xbf16>) outs(%ki : tensor<?x2x?x16xbf16>) permutation = [0, 2, 1, 3]
    %qr, %kr = liger.rope %qh, %kh, %bcos, %bsin : tensor<?x4x?x16xbf16>, tensor<?x2x?x16xbf16>, tensor<1x?x16xbf16>
    liger.yield %qr, %kr : tensor<?x4x?x16xbf16>, tensor<?x2x?x16xbf16>
  }
  return %r#0, %r#1 : tensor<?x4x?x16xbf16>, tensor<?x2x?x16xbf16>
}

// dh = dy · W_down with SwiGLU's gradient in the epilogue: gate and up
// read at each element, dgate and dup written (two results).
func.func @dx_swiglu_grad(%dy: tensor<?x1024xbf16>, %w: tensor<1024x512xbf16>, %g: tensor<?x512xbf16>, %u: tensor<?x512xbf16>) -> (tensor<?x512xbf16>, tensor<?x512xbf16>) {
  %r:2 = liger.fusion matmul(%dy, %w, %g, %u) : (tensor<?x1024xbf16>, tensor<1024x512xbf16>, tensor<?x512xbf16>, tensor<?x512xbf16>) -> (tensor<?x512xbf16>, tensor<?x512xbf16>) {
  ^bb0(%a: tensor<?x1024xbf16>, %b: tensor<1024x512xbf16>, %c: tensor<?x512xbf16>, %d: tensor<?x512xbf16>):
    %dh = liger.linear_grad_input %a, %b : tensor<?x1024xbf16>, tensor<1024x512xbf16>
    %dg, %du = liger.swiglu_grad %dh, %c, %d : tensor<?x512xbf16>
    liger.yield %dg, %du : tensor<?x512xbf16>, tensor<?x512xbf16>
  }
  return %r#0, %r#1 : tensor<?x512xbf16>, tensor<?x512xbf16>
}
