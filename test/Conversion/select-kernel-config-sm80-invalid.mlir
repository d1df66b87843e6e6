// RUN: liger-opt %s --liger-select-kernel-config=chip=sm_80 -verify-diagnostics

// wgmma is Hopper's: a configuration pinned for it is refused on sm_80.
func.func @wgmma_on_sm80(%x: tensor<?x64xbf16>, %w: tensor<64x64xbf16>) -> tensor<?x64xbf16> {
  // expected-error @+1 {{has an invalid matmul 'liger.kernel_config': the matmul_wgmma template needs sm_90a, the target is sm_80}}
  %y = liger.fusion matmul(%x, %w) attributes {liger.kernel_config = #liger.kernel_config<kernel_template = matmul_wgmma, tile_m = 64, tile_n = 64, tile_k = 64, stages = 3>} : (tensor<?x64xbf16>, tensor<64x64xbf16>) -> tensor<?x64xbf16> {
  ^bb0(%a: tensor<?x64xbf16>, %b: tensor<64x64xbf16>):
    %l = liger.linear %a, %b : tensor<?x64xbf16>, tensor<64x64xbf16>
    liger.yield %l : tensor<?x64xbf16>
  }
  return %y : tensor<?x64xbf16>
}
