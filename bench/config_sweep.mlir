// Rowwise kernels at pinned configurations (threads, vector width; for the
// loop form's staging, the CTAs an SM it aims at and reuse_loads), timed by
// bench/config_sweep.py to choose the default configuration.

func.func @swiglu_t128_v8(%g: tensor<?x14336xbf16>, %u: tensor<?x14336xbf16>) -> tensor<?x14336xbf16> {
  %y = liger.fusion rowwise(%g, %u) attributes {liger.kernel_config = #liger.kernel_config<kernel_template = rowwise, threads = 128, vector_width = 8>} : (tensor<?x14336xbf16>, tensor<?x14336xbf16>) -> tensor<?x14336xbf16> {
  ^bb0(%a: tensor<?x14336xbf16>, %b: tensor<?x14336xbf16>):
    %s = liger.swiglu %a, %b : tensor<?x14336xbf16>
    liger.yield %s : tensor<?x14336xbf16>
  }
  return %y : tensor<?x14336xbf16>
}
func.func @rms_t128_v8(%x: tensor<?x4096xbf16>, %w: tensor<4096xbf16>) -> tensor<?x4096xbf16> {
  %y = liger.fusion rowwise(%x, %w) attributes {liger.kernel_config = #liger.kernel_config<kernel_template = rowwise, threads = 128, vector_width = 8>} : (tensor<?x4096xbf16>, tensor<4096xbf16>) -> tensor<?x4096xbf16> {
  ^bb0(%a: tensor<?x4096xbf16>, %b: tensor<4096xbf16>):
    %s = liger.rms_norm %a, %b eps = 1.0e-6 : tensor<?x4096xbf16>, tensor<4096xbf16>
    liger.yield %s : tensor<?x4096xbf16>
  }
  return %y : tensor<?x4096xbf16>
}

func.func @swiglu_t256_v8(%g: tensor<?x14336xbf16>, %u: tensor<?x14336xbf16>) -> tensor<?x14336xbf16> {
  %y = liger.fusion rowwise(%g, %u) attributes {liger.kernel_config = #liger.kernel_config<kernel_template = rowwise, threads = 256, vector_width = 8>} : (tensor<?x14336xbf16>, tensor<?x14336xbf16>) -> tensor<?x14336xbf16> {
  ^bb0(%a: tensor<?x14336xbf16>, %b: tensor<?x14336xbf16>):
    %s = liger.swiglu %a, %b : tensor<?x14336xbf16>
    liger.yield %s : tensor<?x14336xbf16>
  }
  return %y : tensor<?x14336xbf16>
}
func.func @rms_t256_v8(%x: tensor<?x4096xbf16>, %w: tensor<4096xbf16>) -> tensor<?x4096xbf16> {
  %y = liger.fusion rowwise(%x, %w) attributes {liger.kernel_config = #liger.kernel_config<kernel_template = rowwise, threads = 256, vector_width = 8>} : (tensor<?x4096xbf16>, tensor<4096xbf16>) -> tensor<?x4096xbf16> {
  ^bb0(%a: tensor<?x4096xbf16>, %b: tensor<4096xbf16>):
    %s = liger.rms_norm %a, %b eps = 1.0e-6 : tensor<?x4096xbf16>, tensor<4096xbf16>
    liger.yield %s : tensor<?x4096xbf16>
  }
  return %y : tensor<?x4096xbf16>
}

func.func @swiglu_t512_v8(%g: tensor<?x14336xbf16>, %u: tensor<?x14336xbf16>) -> tensor<?x14336xbf16> {
  %y = liger.fusion rowwise(%g, %u) attributes {liger.kernel_config = #liger.kernel_config<kernel_template = rowwise, threads = 512, vector_width = 8>} : (tensor<?x14336xbf16>, tensor<?x14336xbf16>) -> tensor<?x14336xbf16> {
  ^bb0(%a: tensor<?x14336xbf16>, %b: tensor<?x14336xbf16>):
    %s = liger.swiglu %a, %b : tensor<?x14336xbf16>
    liger.yield %s : tensor<?x14336xbf16>
  }
  return %y : tensor<?x14336xbf16>
}
func.func @rms_t512_v8(%x: tensor<?x4096xbf16>, %w: tensor<4096xbf16>) -> tensor<?x4096xbf16> {
  %y = liger.fusion rowwise(%x, %w) attributes {liger.kernel_config = #liger.kernel_config<kernel_template = rowwise, threads = 512, vector_width = 8>} : (tensor<?x4096xbf16>, tensor<4096xbf16>) -> tensor<?x4096xbf16> {
  ^bb0(%a: tensor<?x4096xbf16>, %b: tensor<4096xbf16>):
    %s = liger.rms_norm %a, %b eps = 1.0e-6 : tensor<?x4096xbf16>, tensor<4096xbf16>
    liger.yield %s : tensor<?x4096xbf16>
  }
  return %y : tensor<?x4096xbf16>
}

func.func @swiglu_t1024_v8(%g: tensor<?x14336xbf16>, %u: tensor<?x14336xbf16>) -> tensor<?x14336xbf16> {
  %y = liger.fusion rowwise(%g, %u) attributes {liger.kernel_config = #liger.kernel_config<kernel_template = rowwise, threads = 1024, vector_width = 8>} : (tensor<?x14336xbf16>, tensor<?x14336xbf16>) -> tensor<?x14336xbf16> {
  ^bb0(%a: tensor<?x14336xbf16>, %b: tensor<?x14336xbf16>):
    %s = liger.swiglu %a, %b : tensor<?x14336xbf16>
    liger.yield %s : tensor<?x14336xbf16>
  }
  return %y : tensor<?x14336xbf16>
}
func.func @rms_t1024_v8(%x: tensor<?x4096xbf16>, %w: tensor<4096xbf16>) -> tensor<?x4096xbf16> {
  %y = liger.fusion rowwise(%x, %w) attributes {liger.kernel_config = #liger.kernel_config<kernel_template = rowwise, threads = 1024, vector_width = 8>} : (tensor<?x4096xbf16>, tensor<4096xbf16>) -> tensor<?x4096xbf16> {
  ^bb0(%a: tensor<?x4096xbf16>, %b: tensor<4096xbf16>):
    %s = liger.rms_norm %a, %b eps = 1.0e-6 : tensor<?x4096xbf16>, tensor<4096xbf16>
    liger.yield %s : tensor<?x4096xbf16>
  }
  return %y : tensor<?x4096xbf16>
}

func.func @swiglu_t256_v4(%g: tensor<?x14336xbf16>, %u: tensor<?x14336xbf16>) -> tensor<?x14336xbf16> {
  %y = liger.fusion rowwise(%g, %u) attributes {liger.kernel_config = #liger.kernel_config<kernel_template = rowwise, threads = 256, vector_width = 4>} : (tensor<?x14336xbf16>, tensor<?x14336xbf16>) -> tensor<?x14336xbf16> {
  ^bb0(%a: tensor<?x14336xbf16>, %b: tensor<?x14336xbf16>):
    %s = liger.swiglu %a, %b : tensor<?x14336xbf16>
    liger.yield %s : tensor<?x14336xbf16>
  }
  return %y : tensor<?x14336xbf16>
}
func.func @rms_t256_v4(%x: tensor<?x4096xbf16>, %w: tensor<4096xbf16>) -> tensor<?x4096xbf16> {
  %y = liger.fusion rowwise(%x, %w) attributes {liger.kernel_config = #liger.kernel_config<kernel_template = rowwise, threads = 256, vector_width = 4>} : (tensor<?x4096xbf16>, tensor<4096xbf16>) -> tensor<?x4096xbf16> {
  ^bb0(%a: tensor<?x4096xbf16>, %b: tensor<4096xbf16>):
    %s = liger.rms_norm %a, %b eps = 1.0e-6 : tensor<?x4096xbf16>, tensor<4096xbf16>
    liger.yield %s : tensor<?x4096xbf16>
  }
  return %y : tensor<?x4096xbf16>
}

func.func @swiglu_t512_v4(%g: tensor<?x14336xbf16>, %u: tensor<?x14336xbf16>) -> tensor<?x14336xbf16> {
  %y = liger.fusion rowwise(%g, %u) attributes {liger.kernel_config = #liger.kernel_config<kernel_template = rowwise, threads = 512, vector_width = 4>} : (tensor<?x14336xbf16>, tensor<?x14336xbf16>) -> tensor<?x14336xbf16> {
  ^bb0(%a: tensor<?x14336xbf16>, %b: tensor<?x14336xbf16>):
    %s = liger.swiglu %a, %b : tensor<?x14336xbf16>
    liger.yield %s : tensor<?x14336xbf16>
  }
  return %y : tensor<?x14336xbf16>
}
func.func @rms_t512_v4(%x: tensor<?x4096xbf16>, %w: tensor<4096xbf16>) -> tensor<?x4096xbf16> {
  %y = liger.fusion rowwise(%x, %w) attributes {liger.kernel_config = #liger.kernel_config<kernel_template = rowwise, threads = 512, vector_width = 4>} : (tensor<?x4096xbf16>, tensor<4096xbf16>) -> tensor<?x4096xbf16> {
  ^bb0(%a: tensor<?x4096xbf16>, %b: tensor<4096xbf16>):
    %s = liger.rms_norm %a, %b eps = 1.0e-6 : tensor<?x4096xbf16>, tensor<4096xbf16>
    liger.yield %s : tensor<?x4096xbf16>
  }
  return %y : tensor<?x4096xbf16>
}

// The divergences' losses per token over Llama-3's vocabulary: 128 threads
// loop over each thread's chunks, 256 and more unroll the row.
func.func @kl_t128_v8(%x: tensor<?x128256xbf16>, %y: tensor<?x128256xbf16>) -> tensor<?xf32> {
  %r = liger.fusion rowwise(%x, %y) attributes {liger.kernel_config = #liger.kernel_config<kernel_template = rowwise, threads = 128, vector_width = 8>} : (tensor<?x128256xbf16>, tensor<?x128256xbf16>) -> tensor<?xf32> {
  ^bb0(%a: tensor<?x128256xbf16>, %b: tensor<?x128256xbf16>):
    %s = liger.kl_div %a, %b reduction = sum per_token : tensor<?x128256xbf16>
    liger.yield %s : tensor<?xf32>
  }
  return %r : tensor<?xf32>
}
func.func @jsdloss_t128_v8(%x: tensor<?x128256xbf16>, %y: tensor<?x128256xbf16>) -> tensor<?xf32> {
  %r = liger.fusion rowwise(%x, %y) attributes {liger.kernel_config = #liger.kernel_config<kernel_template = rowwise, threads = 128, vector_width = 8>} : (tensor<?x128256xbf16>, tensor<?x128256xbf16>) -> tensor<?xf32> {
  ^bb0(%a: tensor<?x128256xbf16>, %b: tensor<?x128256xbf16>):
    %s = liger.jsd %a, %b beta = 0.5 per_token : tensor<?x128256xbf16>
    liger.yield %s : tensor<?xf32>
  }
  return %r : tensor<?xf32>
}
func.func @kl_t256_v8(%x: tensor<?x128256xbf16>, %y: tensor<?x128256xbf16>) -> tensor<?xf32> {
  %r = liger.fusion rowwise(%x, %y) attributes {liger.kernel_config = #liger.kernel_config<kernel_template = rowwise, threads = 256, vector_width = 8>} : (tensor<?x128256xbf16>, tensor<?x128256xbf16>) -> tensor<?xf32> {
  ^bb0(%a: tensor<?x128256xbf16>, %b: tensor<?x128256xbf16>):
    %s = liger.kl_div %a, %b reduction = sum per_token : tensor<?x128256xbf16>
    liger.yield %s : tensor<?xf32>
  }
  return %r : tensor<?xf32>
}
func.func @jsdloss_t256_v8(%x: tensor<?x128256xbf16>, %y: tensor<?x128256xbf16>) -> tensor<?xf32> {
  %r = liger.fusion rowwise(%x, %y) attributes {liger.kernel_config = #liger.kernel_config<kernel_template = rowwise, threads = 256, vector_width = 8>} : (tensor<?x128256xbf16>, tensor<?x128256xbf16>) -> tensor<?xf32> {
  ^bb0(%a: tensor<?x128256xbf16>, %b: tensor<?x128256xbf16>):
    %s = liger.jsd %a, %b beta = 0.5 per_token : tensor<?x128256xbf16>
    liger.yield %s : tensor<?xf32>
  }
  return %r : tensor<?xf32>
}
func.func @kl_t512_v8(%x: tensor<?x128256xbf16>, %y: tensor<?x128256xbf16>) -> tensor<?xf32> {
  %r = liger.fusion rowwise(%x, %y) attributes {liger.kernel_config = #liger.kernel_config<kernel_template = rowwise, threads = 512, vector_width = 8>} : (tensor<?x128256xbf16>, tensor<?x128256xbf16>) -> tensor<?xf32> {
  ^bb0(%a: tensor<?x128256xbf16>, %b: tensor<?x128256xbf16>):
    %s = liger.kl_div %a, %b reduction = sum per_token : tensor<?x128256xbf16>
    liger.yield %s : tensor<?xf32>
  }
  return %r : tensor<?xf32>
}
func.func @jsdloss_t512_v8(%x: tensor<?x128256xbf16>, %y: tensor<?x128256xbf16>) -> tensor<?xf32> {
  %r = liger.fusion rowwise(%x, %y) attributes {liger.kernel_config = #liger.kernel_config<kernel_template = rowwise, threads = 512, vector_width = 8>} : (tensor<?x128256xbf16>, tensor<?x128256xbf16>) -> tensor<?xf32> {
  ^bb0(%a: tensor<?x128256xbf16>, %b: tensor<?x128256xbf16>):
    %s = liger.jsd %a, %b beta = 0.5 per_token : tensor<?x128256xbf16>
    liger.yield %s : tensor<?xf32>
  }
  return %r : tensor<?xf32>
}
func.func @kl_t1024_v8(%x: tensor<?x128256xbf16>, %y: tensor<?x128256xbf16>) -> tensor<?xf32> {
  %r = liger.fusion rowwise(%x, %y) attributes {liger.kernel_config = #liger.kernel_config<kernel_template = rowwise, threads = 1024, vector_width = 8>} : (tensor<?x128256xbf16>, tensor<?x128256xbf16>) -> tensor<?xf32> {
  ^bb0(%a: tensor<?x128256xbf16>, %b: tensor<?x128256xbf16>):
    %s = liger.kl_div %a, %b reduction = sum per_token : tensor<?x128256xbf16>
    liger.yield %s : tensor<?xf32>
  }
  return %r : tensor<?xf32>
}
func.func @jsdloss_t1024_v8(%x: tensor<?x128256xbf16>, %y: tensor<?x128256xbf16>) -> tensor<?xf32> {
  %r = liger.fusion rowwise(%x, %y) attributes {liger.kernel_config = #liger.kernel_config<kernel_template = rowwise, threads = 1024, vector_width = 8>} : (tensor<?x128256xbf16>, tensor<?x128256xbf16>) -> tensor<?xf32> {
  ^bb0(%a: tensor<?x128256xbf16>, %b: tensor<?x128256xbf16>):
    %s = liger.jsd %a, %b beta = 0.5 per_token : tensor<?x128256xbf16>
    liger.yield %s : tensor<?xf32>
  }
  return %r : tensor<?xf32>
}
// The fused linear JSD's row kernel (logits at a temperature, the loss and
// the student's gradient: three passes over both rows), in the loop form.
func.func @jsdlogits_t256_c2(%x: tensor<?x128256xbf16>, %y: tensor<?x128256xbf16>, %g: tensor<?xf32>, %l: tensor<?xi64>) -> (tensor<?xf32>, tensor<?x128256xbf16>) {
  %r, %d = liger.fusion rowwise(%x, %y, %g, %l) attributes {liger.kernel_config = #liger.kernel_config<kernel_template = rowwise, threads = 256, vector_width = 8, ctas_per_sm = 2>} : (tensor<?x128256xbf16>, tensor<?x128256xbf16>, tensor<?xf32>, tensor<?xi64>) -> (tensor<?xf32>, tensor<?x128256xbf16>) {
  ^bb0(%a: tensor<?x128256xbf16>, %b: tensor<?x128256xbf16>, %c: tensor<?xf32>, %e: tensor<?xi64>):
    %0 = liger.jsd %a, %b labels(%e : tensor<?xi64>) beta = 5.000000000e-01 ignore_index = -100 temperature = 1.000000000e+00 per_token : tensor<?x128256xbf16>
    %1 = liger.jsd_grad %a, %b, %c labels(%e : tensor<?xi64>) beta = 5.000000000e-01 ignore_index = -100 temperature = 1.000000000e+00 per_token : tensor<?x128256xbf16>, tensor<?xf32>
    liger.yield %0, %1 : tensor<?xf32>, tensor<?x128256xbf16>
  }
  return %r, %d : tensor<?xf32>, tensor<?x128256xbf16>
}
func.func @jsdlogits_t256_c2_noreuse(%x: tensor<?x128256xbf16>, %y: tensor<?x128256xbf16>, %g: tensor<?xf32>, %l: tensor<?xi64>) -> (tensor<?xf32>, tensor<?x128256xbf16>) {
  %r, %d = liger.fusion rowwise(%x, %y, %g, %l) attributes {liger.kernel_config = #liger.kernel_config<kernel_template = rowwise, threads = 256, vector_width = 8, reuse_loads = false, ctas_per_sm = 2>} : (tensor<?x128256xbf16>, tensor<?x128256xbf16>, tensor<?xf32>, tensor<?xi64>) -> (tensor<?xf32>, tensor<?x128256xbf16>) {
  ^bb0(%a: tensor<?x128256xbf16>, %b: tensor<?x128256xbf16>, %c: tensor<?xf32>, %e: tensor<?xi64>):
    %0 = liger.jsd %a, %b labels(%e : tensor<?xi64>) beta = 5.000000000e-01 ignore_index = -100 temperature = 1.000000000e+00 per_token : tensor<?x128256xbf16>
    %1 = liger.jsd_grad %a, %b, %c labels(%e : tensor<?xi64>) beta = 5.000000000e-01 ignore_index = -100 temperature = 1.000000000e+00 per_token : tensor<?x128256xbf16>, tensor<?xf32>
    liger.yield %0, %1 : tensor<?xf32>, tensor<?x128256xbf16>
  }
  return %r, %d : tensor<?xf32>, tensor<?x128256xbf16>
}
func.func @jsdlogits_t512_c2(%x: tensor<?x128256xbf16>, %y: tensor<?x128256xbf16>, %g: tensor<?xf32>, %l: tensor<?xi64>) -> (tensor<?xf32>, tensor<?x128256xbf16>) {
  %r, %d = liger.fusion rowwise(%x, %y, %g, %l) attributes {liger.kernel_config = #liger.kernel_config<kernel_template = rowwise, threads = 512, vector_width = 8, ctas_per_sm = 2>} : (tensor<?x128256xbf16>, tensor<?x128256xbf16>, tensor<?xf32>, tensor<?xi64>) -> (tensor<?xf32>, tensor<?x128256xbf16>) {
  ^bb0(%a: tensor<?x128256xbf16>, %b: tensor<?x128256xbf16>, %c: tensor<?xf32>, %e: tensor<?xi64>):
    %0 = liger.jsd %a, %b labels(%e : tensor<?xi64>) beta = 5.000000000e-01 ignore_index = -100 temperature = 1.000000000e+00 per_token : tensor<?x128256xbf16>
    %1 = liger.jsd_grad %a, %b, %c labels(%e : tensor<?xi64>) beta = 5.000000000e-01 ignore_index = -100 temperature = 1.000000000e+00 per_token : tensor<?x128256xbf16>, tensor<?xf32>
    liger.yield %0, %1 : tensor<?xf32>, tensor<?x128256xbf16>
  }
  return %r, %d : tensor<?xf32>, tensor<?x128256xbf16>
}
func.func @jsdlogits_t512_c2_noreuse(%x: tensor<?x128256xbf16>, %y: tensor<?x128256xbf16>, %g: tensor<?xf32>, %l: tensor<?xi64>) -> (tensor<?xf32>, tensor<?x128256xbf16>) {
  %r, %d = liger.fusion rowwise(%x, %y, %g, %l) attributes {liger.kernel_config = #liger.kernel_config<kernel_template = rowwise, threads = 512, vector_width = 8, reuse_loads = false, ctas_per_sm = 2>} : (tensor<?x128256xbf16>, tensor<?x128256xbf16>, tensor<?xf32>, tensor<?xi64>) -> (tensor<?xf32>, tensor<?x128256xbf16>) {
  ^bb0(%a: tensor<?x128256xbf16>, %b: tensor<?x128256xbf16>, %c: tensor<?xf32>, %e: tensor<?xi64>):
    %0 = liger.jsd %a, %b labels(%e : tensor<?xi64>) beta = 5.000000000e-01 ignore_index = -100 temperature = 1.000000000e+00 per_token : tensor<?x128256xbf16>
    %1 = liger.jsd_grad %a, %b, %c labels(%e : tensor<?xi64>) beta = 5.000000000e-01 ignore_index = -100 temperature = 1.000000000e+00 per_token : tensor<?x128256xbf16>, tensor<?xf32>
    liger.yield %0, %1 : tensor<?xf32>, tensor<?x128256xbf16>
  }
  return %r, %d : tensor<?xf32>, tensor<?x128256xbf16>
}
func.func @jsdlogits_t256_c1(%x: tensor<?x128256xbf16>, %y: tensor<?x128256xbf16>, %g: tensor<?xf32>, %l: tensor<?xi64>) -> (tensor<?xf32>, tensor<?x128256xbf16>) {
  %r, %d = liger.fusion rowwise(%x, %y, %g, %l) attributes {liger.kernel_config = #liger.kernel_config<kernel_template = rowwise, threads = 256, vector_width = 8, ctas_per_sm = 1>} : (tensor<?x128256xbf16>, tensor<?x128256xbf16>, tensor<?xf32>, tensor<?xi64>) -> (tensor<?xf32>, tensor<?x128256xbf16>) {
  ^bb0(%a: tensor<?x128256xbf16>, %b: tensor<?x128256xbf16>, %c: tensor<?xf32>, %e: tensor<?xi64>):
    %0 = liger.jsd %a, %b labels(%e : tensor<?xi64>) beta = 5.000000000e-01 ignore_index = -100 temperature = 1.000000000e+00 per_token : tensor<?x128256xbf16>
    %1 = liger.jsd_grad %a, %b, %c labels(%e : tensor<?xi64>) beta = 5.000000000e-01 ignore_index = -100 temperature = 1.000000000e+00 per_token : tensor<?x128256xbf16>, tensor<?xf32>
    liger.yield %0, %1 : tensor<?xf32>, tensor<?x128256xbf16>
  }
  return %r, %d : tensor<?xf32>, tensor<?x128256xbf16>
}
func.func @jsdlogits_t512_c1(%x: tensor<?x128256xbf16>, %y: tensor<?x128256xbf16>, %g: tensor<?xf32>, %l: tensor<?xi64>) -> (tensor<?xf32>, tensor<?x128256xbf16>) {
  %r, %d = liger.fusion rowwise(%x, %y, %g, %l) attributes {liger.kernel_config = #liger.kernel_config<kernel_template = rowwise, threads = 512, vector_width = 8, ctas_per_sm = 1>} : (tensor<?x128256xbf16>, tensor<?x128256xbf16>, tensor<?xf32>, tensor<?xi64>) -> (tensor<?xf32>, tensor<?x128256xbf16>) {
  ^bb0(%a: tensor<?x128256xbf16>, %b: tensor<?x128256xbf16>, %c: tensor<?xf32>, %e: tensor<?xi64>):
    %0 = liger.jsd %a, %b labels(%e : tensor<?xi64>) beta = 5.000000000e-01 ignore_index = -100 temperature = 1.000000000e+00 per_token : tensor<?x128256xbf16>
    %1 = liger.jsd_grad %a, %b, %c labels(%e : tensor<?xi64>) beta = 5.000000000e-01 ignore_index = -100 temperature = 1.000000000e+00 per_token : tensor<?x128256xbf16>, tensor<?xf32>
    liger.yield %0, %1 : tensor<?xf32>, tensor<?x128256xbf16>
  }
  return %r, %d : tensor<?xf32>, tensor<?x128256xbf16>
}
func.func @jsdlogits_t1024_c1(%x: tensor<?x128256xbf16>, %y: tensor<?x128256xbf16>, %g: tensor<?xf32>, %l: tensor<?xi64>) -> (tensor<?xf32>, tensor<?x128256xbf16>) {
  %r, %d = liger.fusion rowwise(%x, %y, %g, %l) attributes {liger.kernel_config = #liger.kernel_config<kernel_template = rowwise, threads = 1024, vector_width = 8, ctas_per_sm = 1>} : (tensor<?x128256xbf16>, tensor<?x128256xbf16>, tensor<?xf32>, tensor<?xi64>) -> (tensor<?xf32>, tensor<?x128256xbf16>) {
  ^bb0(%a: tensor<?x128256xbf16>, %b: tensor<?x128256xbf16>, %c: tensor<?xf32>, %e: tensor<?xi64>):
    %0 = liger.jsd %a, %b labels(%e : tensor<?xi64>) beta = 5.000000000e-01 ignore_index = -100 temperature = 1.000000000e+00 per_token : tensor<?x128256xbf16>
    %1 = liger.jsd_grad %a, %b, %c labels(%e : tensor<?xi64>) beta = 5.000000000e-01 ignore_index = -100 temperature = 1.000000000e+00 per_token : tensor<?x128256xbf16>, tensor<?xf32>
    liger.yield %0, %1 : tensor<?xf32>, tensor<?x128256xbf16>
  }
  return %r, %d : tensor<?xf32>, tensor<?x128256xbf16>
}

// The loop form split over a thread-block cluster (cluster = K): each CTA
// keeps its part of both rows on chip, read from memory once.
func.func @jsdlogits_t512_c2_k8(%x: tensor<?x128256xbf16>, %y: tensor<?x128256xbf16>, %g: tensor<?xf32>, %l: tensor<?xi64>) -> (tensor<?xf32>, tensor<?x128256xbf16>) {
  %r, %d = liger.fusion rowwise(%x, %y, %g, %l) attributes {liger.kernel_config = #liger.kernel_config<kernel_template = rowwise, threads = 512, vector_width = 8, ctas_per_sm = 2, cluster = 8>} : (tensor<?x128256xbf16>, tensor<?x128256xbf16>, tensor<?xf32>, tensor<?xi64>) -> (tensor<?xf32>, tensor<?x128256xbf16>) {
  ^bb0(%a: tensor<?x128256xbf16>, %b: tensor<?x128256xbf16>, %c: tensor<?xf32>, %e: tensor<?xi64>):
    %0 = liger.jsd %a, %b labels(%e : tensor<?xi64>) beta = 5.000000000e-01 ignore_index = -100 temperature = 1.000000000e+00 per_token : tensor<?x128256xbf16>
    %1 = liger.jsd_grad %a, %b, %c labels(%e : tensor<?xi64>) beta = 5.000000000e-01 ignore_index = -100 temperature = 1.000000000e+00 per_token : tensor<?x128256xbf16>, tensor<?xf32>
    liger.yield %0, %1 : tensor<?xf32>, tensor<?x128256xbf16>
  }
  return %r, %d : tensor<?xf32>, tensor<?x128256xbf16>
}
func.func @jsdlogits_t256_c2_k8(%x: tensor<?x128256xbf16>, %y: tensor<?x128256xbf16>, %g: tensor<?xf32>, %l: tensor<?xi64>) -> (tensor<?xf32>, tensor<?x128256xbf16>) {
  %r, %d = liger.fusion rowwise(%x, %y, %g, %l) attributes {liger.kernel_config = #liger.kernel_config<kernel_template = rowwise, threads = 256, vector_width = 8, ctas_per_sm = 2, cluster = 8>} : (tensor<?x128256xbf16>, tensor<?x128256xbf16>, tensor<?xf32>, tensor<?xi64>) -> (tensor<?xf32>, tensor<?x128256xbf16>) {
  ^bb0(%a: tensor<?x128256xbf16>, %b: tensor<?x128256xbf16>, %c: tensor<?xf32>, %e: tensor<?xi64>):
    %0 = liger.jsd %a, %b labels(%e : tensor<?xi64>) beta = 5.000000000e-01 ignore_index = -100 temperature = 1.000000000e+00 per_token : tensor<?x128256xbf16>
    %1 = liger.jsd_grad %a, %b, %c labels(%e : tensor<?xi64>) beta = 5.000000000e-01 ignore_index = -100 temperature = 1.000000000e+00 per_token : tensor<?x128256xbf16>, tensor<?xf32>
    liger.yield %0, %1 : tensor<?xf32>, tensor<?x128256xbf16>
  }
  return %r, %d : tensor<?xf32>, tensor<?x128256xbf16>
}
func.func @jsdlogits_t512_c1_k4(%x: tensor<?x128256xbf16>, %y: tensor<?x128256xbf16>, %g: tensor<?xf32>, %l: tensor<?xi64>) -> (tensor<?xf32>, tensor<?x128256xbf16>) {
  %r, %d = liger.fusion rowwise(%x, %y, %g, %l) attributes {liger.kernel_config = #liger.kernel_config<kernel_template = rowwise, threads = 512, vector_width = 8, ctas_per_sm = 1, cluster = 4>} : (tensor<?x128256xbf16>, tensor<?x128256xbf16>, tensor<?xf32>, tensor<?xi64>) -> (tensor<?xf32>, tensor<?x128256xbf16>) {
  ^bb0(%a: tensor<?x128256xbf16>, %b: tensor<?x128256xbf16>, %c: tensor<?xf32>, %e: tensor<?xi64>):
    %0 = liger.jsd %a, %b labels(%e : tensor<?xi64>) beta = 5.000000000e-01 ignore_index = -100 temperature = 1.000000000e+00 per_token : tensor<?x128256xbf16>
    %1 = liger.jsd_grad %a, %b, %c labels(%e : tensor<?xi64>) beta = 5.000000000e-01 ignore_index = -100 temperature = 1.000000000e+00 per_token : tensor<?x128256xbf16>, tensor<?xf32>
    liger.yield %0, %1 : tensor<?xf32>, tensor<?x128256xbf16>
  }
  return %r, %d : tensor<?xf32>, tensor<?x128256xbf16>
}
func.func @jsdlogits_t1024_c1_k4(%x: tensor<?x128256xbf16>, %y: tensor<?x128256xbf16>, %g: tensor<?xf32>, %l: tensor<?xi64>) -> (tensor<?xf32>, tensor<?x128256xbf16>) {
  %r, %d = liger.fusion rowwise(%x, %y, %g, %l) attributes {liger.kernel_config = #liger.kernel_config<kernel_template = rowwise, threads = 1024, vector_width = 8, ctas_per_sm = 1, cluster = 4>} : (tensor<?x128256xbf16>, tensor<?x128256xbf16>, tensor<?xf32>, tensor<?xi64>) -> (tensor<?xf32>, tensor<?x128256xbf16>) {
  ^bb0(%a: tensor<?x128256xbf16>, %b: tensor<?x128256xbf16>, %c: tensor<?xf32>, %e: tensor<?xi64>):
    %0 = liger.jsd %a, %b labels(%e : tensor<?xi64>) beta = 5.000000000e-01 ignore_index = -100 temperature = 1.000000000e+00 per_token : tensor<?x128256xbf16>
    %1 = liger.jsd_grad %a, %b, %c labels(%e : tensor<?xi64>) beta = 5.000000000e-01 ignore_index = -100 temperature = 1.000000000e+00 per_token : tensor<?x128256xbf16>, tensor<?xf32>
    liger.yield %0, %1 : tensor<?xf32>, tensor<?x128256xbf16>
  }
  return %r, %d : tensor<?xf32>, tensor<?x128256xbf16>
}
func.func @jsdlogits_t256_c4_k8(%x: tensor<?x128256xbf16>, %y: tensor<?x128256xbf16>, %g: tensor<?xf32>, %l: tensor<?xi64>) -> (tensor<?xf32>, tensor<?x128256xbf16>) {
  %r, %d = liger.fusion rowwise(%x, %y, %g, %l) attributes {liger.kernel_config = #liger.kernel_config<kernel_template = rowwise, threads = 256, vector_width = 8, ctas_per_sm = 4, cluster = 8>} : (tensor<?x128256xbf16>, tensor<?x128256xbf16>, tensor<?xf32>, tensor<?xi64>) -> (tensor<?xf32>, tensor<?x128256xbf16>) {
  ^bb0(%a: tensor<?x128256xbf16>, %b: tensor<?x128256xbf16>, %c: tensor<?xf32>, %e: tensor<?xi64>):
    %0 = liger.jsd %a, %b labels(%e : tensor<?xi64>) beta = 5.000000000e-01 ignore_index = -100 temperature = 1.000000000e+00 per_token : tensor<?x128256xbf16>
    %1 = liger.jsd_grad %a, %b, %c labels(%e : tensor<?xi64>) beta = 5.000000000e-01 ignore_index = -100 temperature = 1.000000000e+00 per_token : tensor<?x128256xbf16>, tensor<?xf32>
    liger.yield %0, %1 : tensor<?xf32>, tensor<?x128256xbf16>
  }
  return %r, %d : tensor<?xf32>, tensor<?x128256xbf16>
}

// Softmax over 128256 bf16 (read twice by the loop form) whole-row, and
// split over clusters of 2 (partly staged) and 4 (staged whole).
func.func @softmax_t512_c2(%x: tensor<?x128256xbf16>) -> tensor<?x128256xbf16> {
  %y = liger.fusion rowwise(%x) attributes {liger.kernel_config = #liger.kernel_config<kernel_template = rowwise, threads = 512, vector_width = 8, ctas_per_sm = 2>} : (tensor<?x128256xbf16>) -> tensor<?x128256xbf16> {
  ^bb0(%a: tensor<?x128256xbf16>):
    %s = liger.softmax %a : tensor<?x128256xbf16>
    liger.yield %s : tensor<?x128256xbf16>
  }
  return %y : tensor<?x128256xbf16>
}
func.func @softmax_t512_c2_k2(%x: tensor<?x128256xbf16>) -> tensor<?x128256xbf16> {
  %y = liger.fusion rowwise(%x) attributes {liger.kernel_config = #liger.kernel_config<kernel_template = rowwise, threads = 512, vector_width = 8, ctas_per_sm = 2, cluster = 2>} : (tensor<?x128256xbf16>) -> tensor<?x128256xbf16> {
  ^bb0(%a: tensor<?x128256xbf16>):
    %s = liger.softmax %a : tensor<?x128256xbf16>
    liger.yield %s : tensor<?x128256xbf16>
  }
  return %y : tensor<?x128256xbf16>
}
func.func @softmax_t512_c2_k4(%x: tensor<?x128256xbf16>) -> tensor<?x128256xbf16> {
  %y = liger.fusion rowwise(%x) attributes {liger.kernel_config = #liger.kernel_config<kernel_template = rowwise, threads = 512, vector_width = 8, ctas_per_sm = 2, cluster = 4>} : (tensor<?x128256xbf16>) -> tensor<?x128256xbf16> {
  ^bb0(%a: tensor<?x128256xbf16>):
    %s = liger.softmax %a : tensor<?x128256xbf16>
    liger.yield %s : tensor<?x128256xbf16>
  }
  return %y : tensor<?x128256xbf16>
}

// Rows of 50257 (GPT-2's vocabulary, odd): one-element chunks (the widest
// width dividing the row) against 8- and 16-byte chunks with each row
// peeled to its first chunk boundary (vector widths 4 and 8).
func.func @kl50k_t512_v1(%x: tensor<?x50257xbf16>, %y: tensor<?x50257xbf16>) -> tensor<?xf32> {
  %r0 = liger.fusion rowwise(%x, %y) attributes {liger.kernel_config = #liger.kernel_config<kernel_template = rowwise, threads = 512, vector_width = 1, ctas_per_sm = 2>} : (tensor<?x50257xbf16>, tensor<?x50257xbf16>) -> tensor<?xf32> {
  ^bb0(%a0: tensor<?x50257xbf16>, %a1: tensor<?x50257xbf16>):
    %0 = liger.kl_div %a0, %a1 reduction = sum eps = 1.000000000e-10 per_token : tensor<?x50257xbf16>
    liger.yield %0 : tensor<?xf32>
  }
  return %r0 : tensor<?xf32>
}
func.func @kl50k_t512_v4(%x: tensor<?x50257xbf16>, %y: tensor<?x50257xbf16>) -> tensor<?xf32> {
  %r0 = liger.fusion rowwise(%x, %y) attributes {liger.kernel_config = #liger.kernel_config<kernel_template = rowwise, threads = 512, vector_width = 4, ctas_per_sm = 2>} : (tensor<?x50257xbf16>, tensor<?x50257xbf16>) -> tensor<?xf32> {
  ^bb0(%a0: tensor<?x50257xbf16>, %a1: tensor<?x50257xbf16>):
    %0 = liger.kl_div %a0, %a1 reduction = sum eps = 1.000000000e-10 per_token : tensor<?x50257xbf16>
    liger.yield %0 : tensor<?xf32>
  }
  return %r0 : tensor<?xf32>
}
func.func @kl50k_t512_v8(%x: tensor<?x50257xbf16>, %y: tensor<?x50257xbf16>) -> tensor<?xf32> {
  %r0 = liger.fusion rowwise(%x, %y) attributes {liger.kernel_config = #liger.kernel_config<kernel_template = rowwise, threads = 512, vector_width = 8, ctas_per_sm = 2>} : (tensor<?x50257xbf16>, tensor<?x50257xbf16>) -> tensor<?xf32> {
  ^bb0(%a0: tensor<?x50257xbf16>, %a1: tensor<?x50257xbf16>):
    %0 = liger.kl_div %a0, %a1 reduction = sum eps = 1.000000000e-10 per_token : tensor<?x50257xbf16>
    liger.yield %0 : tensor<?xf32>
  }
  return %r0 : tensor<?xf32>
}
func.func @kllg50k_t512_v1(%x: tensor<?x50257xbf16>, %y: tensor<?x50257xbf16>, %g: tensor<?xf32>) -> (tensor<?xf32>, tensor<?x50257xbf16>) {
  %r0, %r1 = liger.fusion rowwise(%x, %y, %g) attributes {liger.kernel_config = #liger.kernel_config<kernel_template = rowwise, threads = 512, vector_width = 1, ctas_per_sm = 2>} : (tensor<?x50257xbf16>, tensor<?x50257xbf16>, tensor<?xf32>) -> (tensor<?xf32>, tensor<?x50257xbf16>) {
  ^bb0(%a0: tensor<?x50257xbf16>, %a1: tensor<?x50257xbf16>, %a2: tensor<?xf32>):
    %0 = liger.kl_div %a0, %a1 reduction = sum eps = 1.000000000e-10 per_token : tensor<?x50257xbf16>
    %1 = liger.kl_div_grad %a1, %a2 reduction = sum per_token : tensor<?x50257xbf16>, tensor<?xf32>
    liger.yield %0, %1 : tensor<?xf32>, tensor<?x50257xbf16>
  }
  return %r0, %r1 : tensor<?xf32>, tensor<?x50257xbf16>
}
func.func @kllg50k_t512_v4(%x: tensor<?x50257xbf16>, %y: tensor<?x50257xbf16>, %g: tensor<?xf32>) -> (tensor<?xf32>, tensor<?x50257xbf16>) {
  %r0, %r1 = liger.fusion rowwise(%x, %y, %g) attributes {liger.kernel_config = #liger.kernel_config<kernel_template = rowwise, threads = 512, vector_width = 4, ctas_per_sm = 2>} : (tensor<?x50257xbf16>, tensor<?x50257xbf16>, tensor<?xf32>) -> (tensor<?xf32>, tensor<?x50257xbf16>) {
  ^bb0(%a0: tensor<?x50257xbf16>, %a1: tensor<?x50257xbf16>, %a2: tensor<?xf32>):
    %0 = liger.kl_div %a0, %a1 reduction = sum eps = 1.000000000e-10 per_token : tensor<?x50257xbf16>
    %1 = liger.kl_div_grad %a1, %a2 reduction = sum per_token : tensor<?x50257xbf16>, tensor<?xf32>
    liger.yield %0, %1 : tensor<?xf32>, tensor<?x50257xbf16>
  }
  return %r0, %r1 : tensor<?xf32>, tensor<?x50257xbf16>
}
func.func @kllg50k_t512_v8(%x: tensor<?x50257xbf16>, %y: tensor<?x50257xbf16>, %g: tensor<?xf32>) -> (tensor<?xf32>, tensor<?x50257xbf16>) {
  %r0, %r1 = liger.fusion rowwise(%x, %y, %g) attributes {liger.kernel_config = #liger.kernel_config<kernel_template = rowwise, threads = 512, vector_width = 8, ctas_per_sm = 2>} : (tensor<?x50257xbf16>, tensor<?x50257xbf16>, tensor<?xf32>) -> (tensor<?xf32>, tensor<?x50257xbf16>) {
  ^bb0(%a0: tensor<?x50257xbf16>, %a1: tensor<?x50257xbf16>, %a2: tensor<?xf32>):
    %0 = liger.kl_div %a0, %a1 reduction = sum eps = 1.000000000e-10 per_token : tensor<?x50257xbf16>
    %1 = liger.kl_div_grad %a1, %a2 reduction = sum per_token : tensor<?x50257xbf16>, tensor<?xf32>
    liger.yield %0, %1 : tensor<?xf32>, tensor<?x50257xbf16>
  }
  return %r0, %r1 : tensor<?xf32>, tensor<?x50257xbf16>
}
func.func @jsdloss50k_t512_v1(%x: tensor<?x50257xbf16>, %y: tensor<?x50257xbf16>, %l: tensor<?xi64>) -> tensor<?xf32> {
  %r0 = liger.fusion rowwise(%x, %y, %l) attributes {liger.kernel_config = #liger.kernel_config<kernel_template = rowwise, threads = 512, vector_width = 1, ctas_per_sm = 2>} : (tensor<?x50257xbf16>, tensor<?x50257xbf16>, tensor<?xi64>) -> tensor<?xf32> {
  ^bb0(%a0: tensor<?x50257xbf16>, %a1: tensor<?x50257xbf16>, %a2: tensor<?xi64>):
    %0 = liger.jsd %a0, %a1 labels(%a2 : tensor<?xi64>) beta = 5.000000000e-01 ignore_index = -100 per_token : tensor<?x50257xbf16>
    liger.yield %0 : tensor<?xf32>
  }
  return %r0 : tensor<?xf32>
}
func.func @jsdloss50k_t512_v4(%x: tensor<?x50257xbf16>, %y: tensor<?x50257xbf16>, %l: tensor<?xi64>) -> tensor<?xf32> {
  %r0 = liger.fusion rowwise(%x, %y, %l) attributes {liger.kernel_config = #liger.kernel_config<kernel_template = rowwise, threads = 512, vector_width = 4, ctas_per_sm = 2>} : (tensor<?x50257xbf16>, tensor<?x50257xbf16>, tensor<?xi64>) -> tensor<?xf32> {
  ^bb0(%a0: tensor<?x50257xbf16>, %a1: tensor<?x50257xbf16>, %a2: tensor<?xi64>):
    %0 = liger.jsd %a0, %a1 labels(%a2 : tensor<?xi64>) beta = 5.000000000e-01 ignore_index = -100 per_token : tensor<?x50257xbf16>
    liger.yield %0 : tensor<?xf32>
  }
  return %r0 : tensor<?xf32>
}
func.func @jsdloss50k_t512_v8(%x: tensor<?x50257xbf16>, %y: tensor<?x50257xbf16>, %l: tensor<?xi64>) -> tensor<?xf32> {
  %r0 = liger.fusion rowwise(%x, %y, %l) attributes {liger.kernel_config = #liger.kernel_config<kernel_template = rowwise, threads = 512, vector_width = 8, ctas_per_sm = 2>} : (tensor<?x50257xbf16>, tensor<?x50257xbf16>, tensor<?xi64>) -> tensor<?xf32> {
  ^bb0(%a0: tensor<?x50257xbf16>, %a1: tensor<?x50257xbf16>, %a2: tensor<?xi64>):
    %0 = liger.jsd %a0, %a1 labels(%a2 : tensor<?xi64>) beta = 5.000000000e-01 ignore_index = -100 per_token : tensor<?x50257xbf16>
    liger.yield %0 : tensor<?xf32>
  }
  return %r0 : tensor<?xf32>
}
func.func @jsdlg50k_t512_v1(%x: tensor<?x50257xbf16>, %y: tensor<?x50257xbf16>, %g: tensor<?xf32>, %l: tensor<?xi64>) -> (tensor<?xf32>, tensor<?x50257xbf16>) {
  %r0, %r1 = liger.fusion rowwise(%x, %y, %g, %l) attributes {liger.kernel_config = #liger.kernel_config<kernel_template = rowwise, threads = 512, vector_width = 1, ctas_per_sm = 2>} : (tensor<?x50257xbf16>, tensor<?x50257xbf16>, tensor<?xf32>, tensor<?xi64>) -> (tensor<?xf32>, tensor<?x50257xbf16>) {
  ^bb0(%a0: tensor<?x50257xbf16>, %a1: tensor<?x50257xbf16>, %a2: tensor<?xf32>, %a3: tensor<?xi64>):
    %0 = liger.jsd %a0, %a1 labels(%a3 : tensor<?xi64>) beta = 5.000000000e-01 ignore_index = -100 per_token : tensor<?x50257xbf16>
    %1 = liger.jsd_grad %a0, %a1, %a2 labels(%a3 : tensor<?xi64>) beta = 5.000000000e-01 ignore_index = -100 per_token : tensor<?x50257xbf16>, tensor<?xf32>
    liger.yield %0, %1 : tensor<?xf32>, tensor<?x50257xbf16>
  }
  return %r0, %r1 : tensor<?xf32>, tensor<?x50257xbf16>
}
func.func @jsdlg50k_t512_v4(%x: tensor<?x50257xbf16>, %y: tensor<?x50257xbf16>, %g: tensor<?xf32>, %l: tensor<?xi64>) -> (tensor<?xf32>, tensor<?x50257xbf16>) {
  %r0, %r1 = liger.fusion rowwise(%x, %y, %g, %l) attributes {liger.kernel_config = #liger.kernel_config<kernel_template = rowwise, threads = 512, vector_width = 4, ctas_per_sm = 2>} : (tensor<?x50257xbf16>, tensor<?x50257xbf16>, tensor<?xf32>, tensor<?xi64>) -> (tensor<?xf32>, tensor<?x50257xbf16>) {
  ^bb0(%a0: tensor<?x50257xbf16>, %a1: tensor<?x50257xbf16>, %a2: tensor<?xf32>, %a3: tensor<?xi64>):
    %0 = liger.jsd %a0, %a1 labels(%a3 : tensor<?xi64>) beta = 5.000000000e-01 ignore_index = -100 per_token : tensor<?x50257xbf16>
    %1 = liger.jsd_grad %a0, %a1, %a2 labels(%a3 : tensor<?xi64>) beta = 5.000000000e-01 ignore_index = -100 per_token : tensor<?x50257xbf16>, tensor<?xf32>
    liger.yield %0, %1 : tensor<?xf32>, tensor<?x50257xbf16>
  }
  return %r0, %r1 : tensor<?xf32>, tensor<?x50257xbf16>
}
func.func @jsdlg50k_t512_v8(%x: tensor<?x50257xbf16>, %y: tensor<?x50257xbf16>, %g: tensor<?xf32>, %l: tensor<?xi64>) -> (tensor<?xf32>, tensor<?x50257xbf16>) {
  %r0, %r1 = liger.fusion rowwise(%x, %y, %g, %l) attributes {liger.kernel_config = #liger.kernel_config<kernel_template = rowwise, threads = 512, vector_width = 8, ctas_per_sm = 2>} : (tensor<?x50257xbf16>, tensor<?x50257xbf16>, tensor<?xf32>, tensor<?xi64>) -> (tensor<?xf32>, tensor<?x50257xbf16>) {
  ^bb0(%a0: tensor<?x50257xbf16>, %a1: tensor<?x50257xbf16>, %a2: tensor<?xf32>, %a3: tensor<?xi64>):
    %0 = liger.jsd %a0, %a1 labels(%a3 : tensor<?xi64>) beta = 5.000000000e-01 ignore_index = -100 per_token : tensor<?x50257xbf16>
    %1 = liger.jsd_grad %a0, %a1, %a2 labels(%a3 : tensor<?xi64>) beta = 5.000000000e-01 ignore_index = -100 per_token : tensor<?x50257xbf16>, tensor<?xf32>
    liger.yield %0, %1 : tensor<?xf32>, tensor<?x50257xbf16>
  }
  return %r0, %r1 : tensor<?xf32>, tensor<?x50257xbf16>
}
