// mma.sync gradient products (dx = dy·W, dW = dyᵀ·x): their cubins take
// no tensor maps, and their manifests must list none (test/Runtime/cubin-checks.mlir).
func.func @ms_dx_512_1000(%dy: tensor<?x512xbf16>, %w: tensor<512x1000xbf16>) -> tensor<?x1000xbf16> {
  %y = liger.fusion matmul(%dy, %w) attributes {liger.kernel_config = #liger.kernel_config<kernel_template = matmul_mma_sync, tile_m = 128, tile_n = 64, tile_k = 32, stages = 3>} : (tensor<?x512xbf16>, tensor<512x1000xbf16>) -> tensor<?x1000xbf16> {
  ^bb0(%bdy: tensor<?x512xbf16>, %bw: tensor<512x1000xbf16>):
    %g = liger.linear_grad_input %bdy, %bw : tensor<?x512xbf16>, tensor<512x1000xbf16>
    liger.yield %g : tensor<?x1000xbf16>
  }
  return %y : tensor<?x1000xbf16>
}

func.func @ms_dw_1000_520(%dy: tensor<?x1000xbf16>, %x: tensor<?x520xbf16>) -> tensor<1000x520xbf16> {
  %y = liger.fusion matmul(%dy, %x) attributes {liger.kernel_config = #liger.kernel_config<kernel_template = matmul_mma_sync, tile_m = 128, tile_n = 64, tile_k = 32, stages = 4>} : (tensor<?x1000xbf16>, tensor<?x520xbf16>) -> tensor<1000x520xbf16> {
  ^bb0(%bdy: tensor<?x1000xbf16>, %bx: tensor<?x520xbf16>):
    %g = liger.linear_grad_weight %bdy, %bx : tensor<?x1000xbf16>, tensor<?x520xbf16>
    liger.yield %g : tensor<1000x520xbf16>
  }
  return %y : tensor<1000x520xbf16>
}
