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
