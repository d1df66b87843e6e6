// An f32 projection beside a row kernel: the matmul templates take bf16
// and f16 only, so its group is left, with a warning (liger-compile.mlir,
// TEMPLATE).
func.func @f32_layer(%x: tensor<?x256xf32>, %g: tensor<256xf32>, %w: tensor<512x256xf32>) -> tensor<?x512xf32> {
  %n = liger.rms_norm %x, %g eps = 1.0e-5 : tensor<?x256xf32>, tensor<256xf32>
  %y = liger.linear %n, %w : tensor<?x256xf32>, tensor<512x256xf32>
  return %y : tensor<?x512xf32>
}
