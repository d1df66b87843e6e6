// The rowwise kernels benchmarked by bench/rowwise.py, at Llama-3-8B sizes
// (hidden 4096, MLP width 14336), bf16. bench/build-bundles.sh compiles them.

func.func @rms_norm(%x: tensor<?x4096xbf16>, %w: tensor<4096xbf16>) -> tensor<?x4096xbf16> {
  %y = liger.rms_norm %x, %w eps = 1.0e-6 : tensor<?x4096xbf16>, tensor<4096xbf16>
  return %y : tensor<?x4096xbf16>
}

func.func @add_rms_norm(%x: tensor<?x4096xbf16>, %r: tensor<?x4096xbf16>, %w: tensor<4096xbf16>)
    -> (tensor<?x4096xbf16>, tensor<?x4096xbf16>) {
  %y, %s = liger.add_rms_norm %x, %r, %w eps = 1.0e-6 : tensor<?x4096xbf16>, tensor<4096xbf16>
  return %y, %s : tensor<?x4096xbf16>, tensor<?x4096xbf16>
}

func.func @swiglu(%g: tensor<?x14336xbf16>, %u: tensor<?x14336xbf16>) -> tensor<?x14336xbf16> {
  %y = liger.swiglu %g, %u : tensor<?x14336xbf16>
  return %y : tensor<?x14336xbf16>
}

func.func @swiglu_grad(%dy: tensor<?x14336xbf16>, %g: tensor<?x14336xbf16>, %u: tensor<?x14336xbf16>)
    -> (tensor<?x14336xbf16>, tensor<?x14336xbf16>) {
  %dg, %du = liger.swiglu_grad %dy, %g, %u : tensor<?x14336xbf16>
  return %dg, %du : tensor<?x14336xbf16>, tensor<?x14336xbf16>
}

func.func @geglu(%g: tensor<?x14336xbf16>, %u: tensor<?x14336xbf16>) -> tensor<?x14336xbf16> {
  %y = liger.geglu %g, %u approximate = tanh : tensor<?x14336xbf16>
  return %y : tensor<?x14336xbf16>
}

func.func @geglu_grad(%dy: tensor<?x14336xbf16>, %g: tensor<?x14336xbf16>, %u: tensor<?x14336xbf16>)
    -> (tensor<?x14336xbf16>, tensor<?x14336xbf16>) {
  %dg, %du = liger.geglu_grad %dy, %g, %u approximate = tanh : tensor<?x14336xbf16>
  return %dg, %du : tensor<?x14336xbf16>, tensor<?x14336xbf16>
}

func.func @rope(%q: tensor<?x32x?x128xbf16>, %k: tensor<?x8x?x128xbf16>, %c: tensor<1x?x128xbf16>, %s: tensor<1x?x128xbf16>)
    -> (tensor<?x32x?x128xbf16>, tensor<?x8x?x128xbf16>) {
  %a, %b = liger.rope %q, %k, %c, %s : tensor<?x32x?x128xbf16>, tensor<?x8x?x128xbf16>, tensor<1x?x128xbf16>
  return %a, %b : tensor<?x32x?x128xbf16>, tensor<?x8x?x128xbf16>
}

func.func @rms_norm_rstd(%x: tensor<?x4096xbf16>, %w: tensor<4096xbf16>) -> (tensor<?x4096xbf16>, tensor<?xf32>) {
  %y, %r = liger.rms_norm %x, %w eps = 1.0e-6 rstd : tensor<?x4096xbf16>, tensor<4096xbf16>
  return %y, %r : tensor<?x4096xbf16>, tensor<?xf32>
}

func.func @rms_norm_grad(%dy: tensor<?x4096xbf16>, %x: tensor<?x4096xbf16>, %w: tensor<4096xbf16>, %r: tensor<?xf32>)
    -> (tensor<?x4096xbf16>, tensor<4096xbf16>) {
  %dx, %dw = liger.rms_norm_grad %dy, %x, %w, %r : tensor<?x4096xbf16>, tensor<4096xbf16>, tensor<?xf32>
  return %dx, %dw : tensor<?x4096xbf16>, tensor<4096xbf16>
}

// A/B of the kernel configuration's reuse_loads (on by default): the same
// kernels reading x again after the row reduction.
func.func @rms_norm_noreuse(%x: tensor<?x4096xbf16>, %w: tensor<4096xbf16>) -> tensor<?x4096xbf16> {
  %y = liger.fusion rowwise(%x, %w) attributes {liger.kernel_config = #liger.kernel_config<kernel_template = rowwise, threads = 256, vector_width = 8, reuse_loads = false>} : (tensor<?x4096xbf16>, tensor<4096xbf16>) -> tensor<?x4096xbf16> {
  ^bb0(%a: tensor<?x4096xbf16>, %b: tensor<4096xbf16>):
    %n = liger.rms_norm %a, %b eps = 1.0e-6 : tensor<?x4096xbf16>, tensor<4096xbf16>
    liger.yield %n : tensor<?x4096xbf16>
  }
  return %y : tensor<?x4096xbf16>
}

func.func @rms_norm_grad_noreuse(%dy: tensor<?x4096xbf16>, %x: tensor<?x4096xbf16>, %w: tensor<4096xbf16>, %r: tensor<?xf32>)
    -> (tensor<?x4096xbf16>, tensor<4096xbf16>) {
  %g:2 = liger.fusion rowwise(%dy, %x, %w, %r) attributes {liger.kernel_config = #liger.kernel_config<kernel_template = rowwise, threads = 256, vector_width = 8, reuse_loads = false>} : (tensor<?x4096xbf16>, tensor<?x4096xbf16>, tensor<4096xbf16>, tensor<?xf32>) -> (tensor<?x4096xbf16>, tensor<4096xbf16>) {
  ^bb0(%a: tensor<?x4096xbf16>, %b: tensor<?x4096xbf16>, %c: tensor<4096xbf16>, %d: tensor<?xf32>):
    %dx, %dw = liger.rms_norm_grad %a, %b, %c, %d : tensor<?x4096xbf16>, tensor<4096xbf16>, tensor<?xf32>
    liger.yield %dx, %dw : tensor<?x4096xbf16>, tensor<4096xbf16>
  }
  return %g#0, %g#1 : tensor<?x4096xbf16>, tensor<4096xbf16>
}

// Long and odd rows (bench/rowwise.py's "long" cases): softmax over GPT-2's
// vocabulary (50257 bf16: one-element chunks), over Gemma's (256000 bf16)
// and over 262147 f32, and RMSNorm over 256000 bf16; the last three loop
// over their chunks (two passes over the row).
func.func @softmax_50257(%x: tensor<?x50257xbf16>) -> tensor<?x50257xbf16> {
  %y = liger.softmax %x : tensor<?x50257xbf16>
  return %y : tensor<?x50257xbf16>
}

func.func @softmax_256000(%x: tensor<?x256000xbf16>) -> tensor<?x256000xbf16> {
  %y = liger.softmax %x : tensor<?x256000xbf16>
  return %y : tensor<?x256000xbf16>
}

func.func @softmax_262147(%x: tensor<?x262147xf32>) -> tensor<?x262147xf32> {
  %y = liger.softmax %x : tensor<?x262147xf32>
  return %y : tensor<?x262147xf32>
}

func.func @rms_norm_256000(%x: tensor<?x256000xbf16>, %w: tensor<256000xbf16>) -> tensor<?x256000xbf16> {
  %y = liger.rms_norm %x, %w eps = 1.0e-6 : tensor<?x256000xbf16>, tensor<256000xbf16>
  return %y : tensor<?x256000xbf16>
}
