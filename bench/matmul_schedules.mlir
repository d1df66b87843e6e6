// The up projection (4096 -> 14336) and the gate/up pair with SwiGLU of
// Llama-3-8B, each pinned to the wgmma template's schedules and tiles
// (bench/matmul_schedules.py): data-parallel 128 x 256 (the default) and
// 64-row tiles, pingpong 64- and 128-row tiles, persistent at the default
// tile; what separates the pingpong schedule from its tile shape. bench/build-bundles.sh compiles it into
// bench-bundles/matmul-schedules.

func.func @up_dp128(%x: tensor<?x4096xbf16>, %w: tensor<14336x4096xbf16>) -> tensor<?x14336xbf16> {
  %y = liger.fusion matmul(%x, %w) attributes {liger.kernel_config = #liger.kernel_config<kernel_template = matmul_wgmma, tile_m = 128, tile_n = 256, tile_k = 64, stages = 4>} : (tensor<?x4096xbf16>, tensor<14336x4096xbf16>) -> tensor<?x14336xbf16> {
  ^bb0(%a: tensor<?x4096xbf16>, %b: tensor<14336x4096xbf16>):
    %l = liger.linear %a, %b : tensor<?x4096xbf16>, tensor<14336x4096xbf16>
    liger.yield %l : tensor<?x14336xbf16>
  }
  return %y : tensor<?x14336xbf16>
}

func.func @up_dp64(%x: tensor<?x4096xbf16>, %w: tensor<14336x4096xbf16>) -> tensor<?x14336xbf16> {
  %y = liger.fusion matmul(%x, %w) attributes {liger.kernel_config = #liger.kernel_config<kernel_template = matmul_wgmma, tile_m = 64, tile_n = 256, tile_k = 64, stages = 5>} : (tensor<?x4096xbf16>, tensor<14336x4096xbf16>) -> tensor<?x14336xbf16> {
  ^bb0(%a: tensor<?x4096xbf16>, %b: tensor<14336x4096xbf16>):
    %l = liger.linear %a, %b : tensor<?x4096xbf16>, tensor<14336x4096xbf16>
    liger.yield %l : tensor<?x14336xbf16>
  }
  return %y : tensor<?x14336xbf16>
}

func.func @up_pp64(%x: tensor<?x4096xbf16>, %w: tensor<14336x4096xbf16>) -> tensor<?x14336xbf16> {
  %y = liger.fusion matmul(%x, %w) attributes {liger.kernel_config = #liger.kernel_config<kernel_template = matmul_wgmma, tile_m = 64, tile_n = 256, tile_k = 64, stages = 4, schedule = pingpong>} : (tensor<?x4096xbf16>, tensor<14336x4096xbf16>) -> tensor<?x14336xbf16> {
  ^bb0(%a: tensor<?x4096xbf16>, %b: tensor<14336x4096xbf16>):
    %l = liger.linear %a, %b : tensor<?x4096xbf16>, tensor<14336x4096xbf16>
    liger.yield %l : tensor<?x14336xbf16>
  }
  return %y : tensor<?x14336xbf16>
}

func.func @up_pp64_n128(%x: tensor<?x4096xbf16>, %w: tensor<14336x4096xbf16>) -> tensor<?x14336xbf16> {
  %y = liger.fusion matmul(%x, %w) attributes {liger.kernel_config = #liger.kernel_config<kernel_template = matmul_wgmma, tile_m = 64, tile_n = 128, tile_k = 64, stages = 6, schedule = pingpong>} : (tensor<?x4096xbf16>, tensor<14336x4096xbf16>) -> tensor<?x14336xbf16> {
  ^bb0(%a: tensor<?x4096xbf16>, %b: tensor<14336x4096xbf16>):
    %l = liger.linear %a, %b : tensor<?x4096xbf16>, tensor<14336x4096xbf16>
    liger.yield %l : tensor<?x14336xbf16>
  }
  return %y : tensor<?x14336xbf16>
}

func.func @up_dp64_n128(%x: tensor<?x4096xbf16>, %w: tensor<14336x4096xbf16>) -> tensor<?x14336xbf16> {
  %y = liger.fusion matmul(%x, %w) attributes {liger.kernel_config = #liger.kernel_config<kernel_template = matmul_wgmma, tile_m = 64, tile_n = 128, tile_k = 64, stages = 8>} : (tensor<?x4096xbf16>, tensor<14336x4096xbf16>) -> tensor<?x14336xbf16> {
  ^bb0(%a: tensor<?x4096xbf16>, %b: tensor<14336x4096xbf16>):
    %l = liger.linear %a, %b : tensor<?x4096xbf16>, tensor<14336x4096xbf16>
    liger.yield %l : tensor<?x14336xbf16>
  }
  return %y : tensor<?x14336xbf16>
}

func.func @gu_dp128(%x: tensor<?x4096xbf16>, %g: tensor<14336x4096xbf16>, %u: tensor<14336x4096xbf16>) -> tensor<?x14336xbf16> {
  %y = liger.fusion matmul(%x, %g, %u) attributes {liger.kernel_config = #liger.kernel_config<kernel_template = matmul_wgmma, tile_m = 128, tile_n = 128, tile_k = 64, stages = 4>} : (tensor<?x4096xbf16>, tensor<14336x4096xbf16>, tensor<14336x4096xbf16>) -> tensor<?x14336xbf16> {
  ^bb0(%a: tensor<?x4096xbf16>, %b: tensor<14336x4096xbf16>, %c: tensor<14336x4096xbf16>):
    %lg = liger.linear %a, %b : tensor<?x4096xbf16>, tensor<14336x4096xbf16>
    %lu = liger.linear %a, %c : tensor<?x4096xbf16>, tensor<14336x4096xbf16>
    %s = liger.swiglu %lg, %lu : tensor<?x14336xbf16>
    liger.yield %s : tensor<?x14336xbf16>
  }
  return %y : tensor<?x14336xbf16>
}

func.func @gu_dp64(%x: tensor<?x4096xbf16>, %g: tensor<14336x4096xbf16>, %u: tensor<14336x4096xbf16>) -> tensor<?x14336xbf16> {
  %y = liger.fusion matmul(%x, %g, %u) attributes {liger.kernel_config = #liger.kernel_config<kernel_template = matmul_wgmma, tile_m = 64, tile_n = 128, tile_k = 64, stages = 5>} : (tensor<?x4096xbf16>, tensor<14336x4096xbf16>, tensor<14336x4096xbf16>) -> tensor<?x14336xbf16> {
  ^bb0(%a: tensor<?x4096xbf16>, %b: tensor<14336x4096xbf16>, %c: tensor<14336x4096xbf16>):
    %lg = liger.linear %a, %b : tensor<?x4096xbf16>, tensor<14336x4096xbf16>
    %lu = liger.linear %a, %c : tensor<?x4096xbf16>, tensor<14336x4096xbf16>
    %s = liger.swiglu %lg, %lu : tensor<?x14336xbf16>
    liger.yield %s : tensor<?x14336xbf16>
  }
  return %y : tensor<?x14336xbf16>
}

func.func @gu_pp64(%x: tensor<?x4096xbf16>, %g: tensor<14336x4096xbf16>, %u: tensor<14336x4096xbf16>) -> tensor<?x14336xbf16> {
  %y = liger.fusion matmul(%x, %g, %u) attributes {liger.kernel_config = #liger.kernel_config<kernel_template = matmul_wgmma, tile_m = 64, tile_n = 128, tile_k = 64, stages = 4, schedule = pingpong>} : (tensor<?x4096xbf16>, tensor<14336x4096xbf16>, tensor<14336x4096xbf16>) -> tensor<?x14336xbf16> {
  ^bb0(%a: tensor<?x4096xbf16>, %b: tensor<14336x4096xbf16>, %c: tensor<14336x4096xbf16>):
    %lg = liger.linear %a, %b : tensor<?x4096xbf16>, tensor<14336x4096xbf16>
    %lu = liger.linear %a, %c : tensor<?x4096xbf16>, tensor<14336x4096xbf16>
    %s = liger.swiglu %lg, %lu : tensor<?x14336xbf16>
    liger.yield %s : tensor<?x14336xbf16>
  }
  return %y : tensor<?x14336xbf16>
}

func.func @up_pp128(%x: tensor<?x4096xbf16>, %w: tensor<14336x4096xbf16>) -> tensor<?x14336xbf16> {
  %y = liger.fusion matmul(%x, %w) attributes {liger.kernel_config = #liger.kernel_config<kernel_template = matmul_wgmma, tile_m = 128, tile_n = 128, tile_k = 64, stages = 6, schedule = pingpong>} : (tensor<?x4096xbf16>, tensor<14336x4096xbf16>) -> tensor<?x14336xbf16> {
  ^bb0(%a: tensor<?x4096xbf16>, %b: tensor<14336x4096xbf16>):
    %l = liger.linear %a, %b : tensor<?x4096xbf16>, tensor<14336x4096xbf16>
    liger.yield %l : tensor<?x14336xbf16>
  }
  return %y : tensor<?x14336xbf16>
}

func.func @gu_pp128(%x: tensor<?x4096xbf16>, %g: tensor<14336x4096xbf16>, %u: tensor<14336x4096xbf16>) -> tensor<?x14336xbf16> {
  %y = liger.fusion matmul(%x, %g, %u) attributes {liger.kernel_config = #liger.kernel_config<kernel_template = matmul_wgmma, tile_m = 128, tile_n = 64, tile_k = 64, stages = 6, schedule = pingpong>} : (tensor<?x4096xbf16>, tensor<14336x4096xbf16>, tensor<14336x4096xbf16>) -> tensor<?x14336xbf16> {
  ^bb0(%a: tensor<?x4096xbf16>, %b: tensor<14336x4096xbf16>, %c: tensor<14336x4096xbf16>):
    %lg = liger.linear %a, %b : tensor<?x4096xbf16>, tensor<14336x4096xbf16>
    %lu = liger.linear %a, %c : tensor<?x4096xbf16>, tensor<14336x4096xbf16>
    %s = liger.swiglu %lg, %lu : tensor<?x14336xbf16>
    liger.yield %s : tensor<?x14336xbf16>
  }
  return %y : tensor<?x14336xbf16>
}

func.func @up_ps128(%x: tensor<?x4096xbf16>, %w: tensor<14336x4096xbf16>) -> tensor<?x14336xbf16> {
  %y = liger.fusion matmul(%x, %w) attributes {liger.kernel_config = #liger.kernel_config<kernel_template = matmul_wgmma, tile_m = 128, tile_n = 256, tile_k = 64, stages = 4, schedule = persistent>} : (tensor<?x4096xbf16>, tensor<14336x4096xbf16>) -> tensor<?x14336xbf16> {
  ^bb0(%a: tensor<?x4096xbf16>, %b: tensor<14336x4096xbf16>):
    %l = liger.linear %a, %b : tensor<?x4096xbf16>, tensor<14336x4096xbf16>
    liger.yield %l : tensor<?x14336xbf16>
  }
  return %y : tensor<?x14336xbf16>
}

func.func @up_ps128s3(%x: tensor<?x4096xbf16>, %w: tensor<14336x4096xbf16>) -> tensor<?x14336xbf16> {
  %y = liger.fusion matmul(%x, %w) attributes {liger.kernel_config = #liger.kernel_config<kernel_template = matmul_wgmma, tile_m = 128, tile_n = 256, tile_k = 64, stages = 3, schedule = persistent>} : (tensor<?x4096xbf16>, tensor<14336x4096xbf16>) -> tensor<?x14336xbf16> {
  ^bb0(%a: tensor<?x4096xbf16>, %b: tensor<14336x4096xbf16>):
    %l = liger.linear %a, %b : tensor<?x4096xbf16>, tensor<14336x4096xbf16>
    liger.yield %l : tensor<?x14336xbf16>
  }
  return %y : tensor<?x14336xbf16>
}

func.func @gu_ps128(%x: tensor<?x4096xbf16>, %g: tensor<14336x4096xbf16>, %u: tensor<14336x4096xbf16>) -> tensor<?x14336xbf16> {
  %y = liger.fusion matmul(%x, %g, %u) attributes {liger.kernel_config = #liger.kernel_config<kernel_template = matmul_wgmma, tile_m = 128, tile_n = 128, tile_k = 64, stages = 4, schedule = persistent>} : (tensor<?x4096xbf16>, tensor<14336x4096xbf16>, tensor<14336x4096xbf16>) -> tensor<?x14336xbf16> {
  ^bb0(%a: tensor<?x4096xbf16>, %b: tensor<14336x4096xbf16>, %c: tensor<14336x4096xbf16>):
    %lg = liger.linear %a, %b : tensor<?x4096xbf16>, tensor<14336x4096xbf16>
    %lu = liger.linear %a, %c : tensor<?x4096xbf16>, tensor<14336x4096xbf16>
    %s = liger.swiglu %lg, %lu : tensor<?x14336xbf16>
    liger.yield %s : tensor<?x14336xbf16>
  }
  return %y : tensor<?x14336xbf16>
}
