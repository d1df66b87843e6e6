// The lm_head forward and backward of a training step: one loss group,
// which only the matmul templates plan (liger-plan-loss); with
// --no-matmul-kernels nothing compiles it (liger-compile.mlir, NOKERNEL).
func.func @train_step(%h: tensor<?x64xbf16>, %w: tensor<1000x64xbf16>, %t: tensor<?xi64>, %g: tensor<f32>) -> (tensor<f32>, tensor<?x64xbf16>, tensor<1000x64xbf16>) {
  %l = liger.fused_linear_cross_entropy %h, %w, %t : tensor<?x64xbf16>, tensor<1000x64xbf16>, tensor<?xi64>
  %dh, %dw = liger.fused_linear_cross_entropy_grad %h, %w, %t, %g : tensor<?x64xbf16>, tensor<1000x64xbf16>, tensor<?xi64>, tensor<f32>
  return %l, %dh, %dw : tensor<f32>, tensor<?x64xbf16>, tensor<1000x64xbf16>
}
