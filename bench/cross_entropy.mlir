// Cross-entropy at Llama-3's vocabulary (128256, bf16 logits, int64
// targets, mean): the loss kernel and the gradient kernel, for
// bench/cross_entropy.py.
func.func @ce(%x: tensor<?x128256xbf16>, %t: tensor<?xi64>) -> tensor<f32> {
  %l = liger.cross_entropy %x, %t : tensor<?x128256xbf16>, tensor<?xi64>
  return %l : tensor<f32>
}

func.func @ce_grad(%x: tensor<?x128256xbf16>, %t: tensor<?xi64>, %g: tensor<f32>) -> tensor<?x128256xbf16> {
  %d = liger.cross_entropy_grad %x, %t, %g : tensor<?x128256xbf16>, tensor<?xi64>, tensor<f32>
  return %d : tensor<?x128256xbf16>
}

// The loss and its gradient in one kernel (liger-fuse-cross-entropy-grad).
func.func @ce_fused(%x: tensor<?x128256xbf16>, %t: tensor<?xi64>, %g: tensor<f32>) -> (tensor<f32>, tensor<?x128256xbf16>) {
  %l = liger.cross_entropy %x, %t : tensor<?x128256xbf16>, tensor<?xi64>
  %d = liger.cross_entropy_grad %x, %t, %g : tensor<?x128256xbf16>, tensor<?xi64>, tensor<f32>
  return %l, %d : tensor<f32>, tensor<?x128256xbf16>
}

// The same at a pinned configuration: 1024 threads and one CTA per SM, so
// that the 132 rows in flight (32 MiB) stay in L2 for the gradient pass
// (liger-select-kernel-config's default for such a group since it measured
// faster; pinned here so that a change of the default shows against it).
func.func @ce_fused_1024(%x: tensor<?x128256xbf16>, %t: tensor<?xi64>, %g: tensor<f32>) -> (tensor<f32>, tensor<?x128256xbf16>) {
  %r:2 = liger.fusion rowwise(%x, %t, %g) attributes {liger.kernel_config = #liger.kernel_config<kernel_template = cross_entropy, threads = 1024, vector_width = 8, ctas_per_sm = 1>} : (tensor<?x128256xbf16>, tensor<?xi64>, tensor<f32>) -> (tensor<f32>, tensor<?x128256xbf16>) {
  ^bb0(%a: tensor<?x128256xbf16>, %b: tensor<?xi64>, %c: tensor<f32>):
    %l = liger.cross_entropy %a, %b : tensor<?x128256xbf16>, tensor<?xi64>
    %d = liger.cross_entropy_grad %a, %b, %c : tensor<?x128256xbf16>, tensor<?xi64>, tensor<f32>
    liger.yield %l, %d : tensor<f32>, tensor<?x128256xbf16>
  }
  return %r#0, %r#1 : tensor<f32>, tensor<?x128256xbf16>
}

// The default configuration with reuse_loads = false: pass 2 reads the row
// from memory again instead of from shared memory (the A/B of the staging).
func.func @ce_fused_reread(%x: tensor<?x128256xbf16>, %t: tensor<?xi64>, %g: tensor<f32>) -> (tensor<f32>, tensor<?x128256xbf16>) {
  %r:2 = liger.fusion rowwise(%x, %t, %g) attributes {liger.kernel_config = #liger.kernel_config<kernel_template = cross_entropy, threads = 1024, vector_width = 8, reuse_loads = false, ctas_per_sm = 1>} : (tensor<?x128256xbf16>, tensor<?xi64>, tensor<f32>) -> (tensor<f32>, tensor<?x128256xbf16>) {
  ^bb0(%a: tensor<?x128256xbf16>, %b: tensor<?xi64>, %c: tensor<f32>):
    %l = liger.cross_entropy %a, %b : tensor<?x128256xbf16>, tensor<?xi64>
    %d = liger.cross_entropy_grad %a, %b, %c : tensor<?x128256xbf16>, tensor<?xi64>, tensor<f32>
    liger.yield %l, %d : tensor<f32>, tensor<?x128256xbf16>
  }
  return %r#0, %r#1 : tensor<f32>, tensor<?x128256xbf16>
}

// Two CTAs of 512 threads per SM, each staging what fits in half the SM's
// shared memory: one CTA's pass 1 can overlap the other's pass 2.
func.func @ce_fused_512x2(%x: tensor<?x128256xbf16>, %t: tensor<?xi64>, %g: tensor<f32>) -> (tensor<f32>, tensor<?x128256xbf16>) {
  %r:2 = liger.fusion rowwise(%x, %t, %g) attributes {liger.kernel_config = #liger.kernel_config<kernel_template = cross_entropy, threads = 512, vector_width = 8, ctas_per_sm = 2>} : (tensor<?x128256xbf16>, tensor<?xi64>, tensor<f32>) -> (tensor<f32>, tensor<?x128256xbf16>) {
  ^bb0(%a: tensor<?x128256xbf16>, %b: tensor<?xi64>, %c: tensor<f32>):
    %l = liger.cross_entropy %a, %b : tensor<?x128256xbf16>, tensor<?xi64>
    %d = liger.cross_entropy_grad %a, %b, %c : tensor<?x128256xbf16>, tensor<?xi64>, tensor<f32>
    liger.yield %l, %d : tensor<f32>, tensor<?x128256xbf16>
  }
  return %r#0, %r#1 : tensor<f32>, tensor<?x128256xbf16>
}

// Four CTAs of 256 threads per SM, a quarter of the shared memory each.
func.func @ce_fused_256x4(%x: tensor<?x128256xbf16>, %t: tensor<?xi64>, %g: tensor<f32>) -> (tensor<f32>, tensor<?x128256xbf16>) {
  %r:2 = liger.fusion rowwise(%x, %t, %g) attributes {liger.kernel_config = #liger.kernel_config<kernel_template = cross_entropy, threads = 256, vector_width = 8, ctas_per_sm = 4>} : (tensor<?x128256xbf16>, tensor<?xi64>, tensor<f32>) -> (tensor<f32>, tensor<?x128256xbf16>) {
  ^bb0(%a: tensor<?x128256xbf16>, %b: tensor<?xi64>, %c: tensor<f32>):
    %l = liger.cross_entropy %a, %b : tensor<?x128256xbf16>, tensor<?xi64>
    %d = liger.cross_entropy_grad %a, %b, %c : tensor<?x128256xbf16>, tensor<?xi64>, tensor<f32>
    liger.yield %l, %d : tensor<f32>, tensor<?x128256xbf16>
  }
  return %r#0, %r#1 : tensor<f32>, tensor<?x128256xbf16>
}

// Other vocabularies (bench/cross_entropy.py --vocab V): GPT-2's 50257
// (rows peeled to their first 16-byte chunk), Gemma's 256000 and 262147.
func.func @ce_50257(%x: tensor<?x50257xbf16>, %t: tensor<?xi64>) -> tensor<f32> {
  %l = liger.cross_entropy %x, %t : tensor<?x50257xbf16>, tensor<?xi64>
  return %l : tensor<f32>
}

func.func @ce_grad_50257(%x: tensor<?x50257xbf16>, %t: tensor<?xi64>, %g: tensor<f32>) -> tensor<?x50257xbf16> {
  %d = liger.cross_entropy_grad %x, %t, %g : tensor<?x50257xbf16>, tensor<?xi64>, tensor<f32>
  return %d : tensor<?x50257xbf16>
}

func.func @ce_fused_50257(%x: tensor<?x50257xbf16>, %t: tensor<?xi64>, %g: tensor<f32>) -> (tensor<f32>, tensor<?x50257xbf16>) {
  %l = liger.cross_entropy %x, %t : tensor<?x50257xbf16>, tensor<?xi64>
  %d = liger.cross_entropy_grad %x, %t, %g : tensor<?x50257xbf16>, tensor<?xi64>, tensor<f32>
  return %l, %d : tensor<f32>, tensor<?x50257xbf16>
}

func.func @ce_256000(%x: tensor<?x256000xbf16>, %t: tensor<?xi64>) -> tensor<f32> {
  %l = liger.cross_entropy %x, %t : tensor<?x256000xbf16>, tensor<?xi64>
  return %l : tensor<f32>
}

func.func @ce_grad_256000(%x: tensor<?x256000xbf16>, %t: tensor<?xi64>, %g: tensor<f32>) -> tensor<?x256000xbf16> {
  %d = liger.cross_entropy_grad %x, %t, %g : tensor<?x256000xbf16>, tensor<?xi64>, tensor<f32>
  return %d : tensor<?x256000xbf16>
}

func.func @ce_fused_256000(%x: tensor<?x256000xbf16>, %t: tensor<?xi64>, %g: tensor<f32>) -> (tensor<f32>, tensor<?x256000xbf16>) {
  %l = liger.cross_entropy %x, %t : tensor<?x256000xbf16>, tensor<?xi64>
  %d = liger.cross_entropy_grad %x, %t, %g : tensor<?x256000xbf16>, tensor<?xi64>, tensor<f32>
  return %l, %d : tensor<f32>, tensor<?x256000xbf16>
}

func.func @ce_262147(%x: tensor<?x262147xbf16>, %t: tensor<?xi64>) -> tensor<f32> {
  %l = liger.cross_entropy %x, %t : tensor<?x262147xbf16>, tensor<?xi64>
  return %l : tensor<f32>
}

func.func @ce_grad_262147(%x: tensor<?x262147xbf16>, %t: tensor<?xi64>, %g: tensor<f32>) -> tensor<?x262147xbf16> {
  %d = liger.cross_entropy_grad %x, %t, %g : tensor<?x262147xbf16>, tensor<?xi64>, tensor<f32>
  return %d : tensor<?x262147xbf16>
}

func.func @ce_fused_262147(%x: tensor<?x262147xbf16>, %t: tensor<?xi64>, %g: tensor<f32>) -> (tensor<f32>, tensor<?x262147xbf16>) {
  %l = liger.cross_entropy %x, %t : tensor<?x262147xbf16>, tensor<?xi64>
  %d = liger.cross_entropy_grad %x, %t, %g : tensor<?x262147xbf16>, tensor<?xi64>, tensor<f32>
  return %l, %d : tensor<f32>, tensor<?x262147xbf16>
}
