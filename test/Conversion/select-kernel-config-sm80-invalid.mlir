// RUN: liger-opt %s --liger-select-kernel-config=chip=sm_80 -verify-diagnostics

// wgmma is Hopper's: a configuration pinned for it is refused on sm_80.
func.func @wgmma_on_sm80(%x: tensor<?x64xbf16>, %w: tensor<64x64xbf16>) -> tensor<?x64xbf16> {
  // expected-error @+1 {{has an invalid matmul 'liger.kernel_config': mma = wgmma needs sm_90a, the target is sm_80}}
  %y = liger.fusion matmul(%x, %w) attributes {liger.kernel_config = {mma = "wgmma", stages = 3 : i64, tile_k = 64 : i64, tile_m = 64 : i64, tile_n = 64 : i64}} : (tensor<?x64xbf16>, tensor<64x64xbf16>) -> tensor<?x64xbf16> {
  ^bb0(%a: tensor<?x64xbf16>, %b: tensor<64x64xbf16>):
    %l = liger.linear %a, %b : tensor<?x64xbf16>, tensor<64x64xbf16>
    liger.yield %l : tensor<?x64xbf16>
  }
  return %y : tensor<?x64xbf16>
}
