// RUN: liger-opt %s --liger-select-kernel-config=chip=sm_80 -verify-diagnostics --split-input-file

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

// -----

// mma.sync's warps take 64-row tiles.
func.func @mma_tile_m(%x: tensor<?x64xbf16>, %w: tensor<64x64xbf16>) -> tensor<?x64xbf16> {
  // expected-error @+1 {{has an invalid matmul 'liger.kernel_config': tile_m must be a multiple of 64 up to 256, got 32}}
  %y = liger.fusion matmul(%x, %w) attributes {liger.kernel_config = #liger.kernel_config<kernel_template = matmul_mma_sync, tile_m = 32, tile_n = 64, tile_k = 32, stages = 3>} : (tensor<?x64xbf16>, tensor<64x64xbf16>) -> tensor<?x64xbf16> {
  ^bb0(%a: tensor<?x64xbf16>, %b: tensor<64x64xbf16>):
    %l = liger.linear %a, %b : tensor<?x64xbf16>, tensor<64x64xbf16>
    liger.yield %l : tensor<?x64xbf16>
  }
  return %y : tensor<?x64xbf16>
}

// -----

// k16 MMA steps over whole 32-, 64- or 128-byte slices of K.
func.func @mma_tile_k(%x: tensor<?x64xbf16>, %w: tensor<64x64xbf16>) -> tensor<?x64xbf16> {
  // expected-error @+1 {{has an invalid matmul 'liger.kernel_config': tile_k must be a multiple of 16 spanning 32, 64 or 128 bytes of K, got 24}}
  %y = liger.fusion matmul(%x, %w) attributes {liger.kernel_config = #liger.kernel_config<kernel_template = matmul_mma_sync, tile_m = 64, tile_n = 64, tile_k = 24, stages = 3>} : (tensor<?x64xbf16>, tensor<64x64xbf16>) -> tensor<?x64xbf16> {
  ^bb0(%a: tensor<?x64xbf16>, %b: tensor<64x64xbf16>):
    %l = liger.linear %a, %b : tensor<?x64xbf16>, tensor<64x64xbf16>
    liger.yield %l : tensor<?x64xbf16>
  }
  return %y : tensor<?x64xbf16>
}

// -----

// 8 warps of a 128-row tile: 2 x 4, each 64 rows by tile_n / 4 columns, a multiple of 8.
func.func @mma_warp_split(%x: tensor<?x64xbf16>, %w: tensor<64x64xbf16>) -> tensor<?x64xbf16> {
  // expected-error @+1 {{has an invalid matmul 'liger.kernel_config': tile 128x40 does not split over 8 warps (64 rows by a multiple of 8 columns each)}}
  %y = liger.fusion matmul(%x, %w) attributes {liger.kernel_config = #liger.kernel_config<kernel_template = matmul_mma_sync, tile_m = 128, tile_n = 40, tile_k = 32, stages = 3>} : (tensor<?x64xbf16>, tensor<64x64xbf16>) -> tensor<?x64xbf16> {
  ^bb0(%a: tensor<?x64xbf16>, %b: tensor<64x64xbf16>):
    %l = liger.linear %a, %b : tensor<?x64xbf16>, tensor<64x64xbf16>
    liger.yield %l : tensor<?x64xbf16>
  }
  return %y : tensor<?x64xbf16>
}

// -----

// Thread-block clusters came with sm_90: a row program pinned to one is
// refused on sm_80.
func.func @row_cluster_on_sm80(%x: tensor<?x128256xbf16>) -> tensor<?x128256xbf16> {
  // expected-error @+1 {{'liger.fusion' op has an invalid 'liger.kernel_config': a cluster of 4 CTAs needs sm_90 or later; the target is sm_80}}
  %y = liger.fusion rowwise(%x) attributes {liger.kernel_config = #liger.kernel_config<kernel_template = rowwise, threads = 512, vector_width = 8, cluster = 4>} : (tensor<?x128256xbf16>) -> tensor<?x128256xbf16> {
  ^bb0(%a: tensor<?x128256xbf16>):
    %s = liger.softmax %a : tensor<?x128256xbf16>
    liger.yield %s : tensor<?x128256xbf16>
  }
  return %y : tensor<?x128256xbf16>
}
