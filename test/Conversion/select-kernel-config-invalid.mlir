// RUN: liger-opt %s --liger-select-kernel-config --split-input-file -verify-diagnostics
// RUN: not liger-opt %s --liger-select-kernel-config=chip=sm_90 -o /dev/null 2>&1 | FileCheck %s --check-prefix=CHIP

// CHIP: error: liger-select-kernel-config: unsupported GPU target 'sm_90' (supported: sm_80, sm_86, sm_90a)

// Every rule of a pinned matmul configuration, one case each.

func.func @tile_m(%x: tensor<?x64xbf16>, %w: tensor<64x64xbf16>) -> tensor<?x64xbf16> {
  // expected-error @+1 {{'liger.fusion' op has an invalid matmul 'liger.kernel_config': tile_m must be 64 or 128, got 96}}
  %y = liger.fusion matmul(%x, %w) attributes {liger.kernel_config = #liger.kernel_config<kernel_template = matmul_wgmma, tile_m = 96, tile_n = 64, tile_k = 64, stages = 3>} : (tensor<?x64xbf16>, tensor<64x64xbf16>) -> tensor<?x64xbf16> {
  ^bb0(%a: tensor<?x64xbf16>, %b: tensor<64x64xbf16>):
    %l = liger.linear %a, %b : tensor<?x64xbf16>, tensor<64x64xbf16>
    liger.yield %l : tensor<?x64xbf16>
  }
  return %y : tensor<?x64xbf16>
}

// -----

func.func @tile_n(%x: tensor<?x64xbf16>, %w: tensor<64x64xbf16>) -> tensor<?x64xbf16> {
  // expected-error @+1 {{tile_n must be a multiple of 8 in [8, 256], got 260}}
  %y = liger.fusion matmul(%x, %w) attributes {liger.kernel_config = #liger.kernel_config<kernel_template = matmul_wgmma, tile_m = 64, tile_n = 260, tile_k = 64, stages = 3>} : (tensor<?x64xbf16>, tensor<64x64xbf16>) -> tensor<?x64xbf16> {
  ^bb0(%a: tensor<?x64xbf16>, %b: tensor<64x64xbf16>):
    %l = liger.linear %a, %b : tensor<?x64xbf16>, tensor<64x64xbf16>
    liger.yield %l : tensor<?x64xbf16>
  }
  return %y : tensor<?x64xbf16>
}

// -----

func.func @tile_k(%x: tensor<?x64xbf16>, %w: tensor<64x64xbf16>) -> tensor<?x64xbf16> {
  // expected-error @+1 {{tile_k must span 128 bytes of K on the wgmma template (64 elements), got 24}}
  %y = liger.fusion matmul(%x, %w) attributes {liger.kernel_config = #liger.kernel_config<kernel_template = matmul_wgmma, tile_m = 64, tile_n = 64, tile_k = 24, stages = 3>} : (tensor<?x64xbf16>, tensor<64x64xbf16>) -> tensor<?x64xbf16> {
  ^bb0(%a: tensor<?x64xbf16>, %b: tensor<64x64xbf16>):
    %l = liger.linear %a, %b : tensor<?x64xbf16>, tensor<64x64xbf16>
    liger.yield %l : tensor<?x64xbf16>
  }
  return %y : tensor<?x64xbf16>
}

// -----

func.func @stages(%x: tensor<?x64xbf16>, %w: tensor<64x64xbf16>) -> tensor<?x64xbf16> {
  // expected-error @+1 {{stages must be in [2, 8], got 1}}
  %y = liger.fusion matmul(%x, %w) attributes {liger.kernel_config = #liger.kernel_config<kernel_template = matmul_wgmma, tile_m = 64, tile_n = 64, tile_k = 64, stages = 1>} : (tensor<?x64xbf16>, tensor<64x64xbf16>) -> tensor<?x64xbf16> {
  ^bb0(%a: tensor<?x64xbf16>, %b: tensor<64x64xbf16>):
    %l = liger.linear %a, %b : tensor<?x64xbf16>, tensor<64x64xbf16>
    liger.yield %l : tensor<?x64xbf16>
  }
  return %y : tensor<?x64xbf16>
}

// -----

func.func @shared_memory(%x: tensor<?x64xbf16>, %w: tensor<64x64xbf16>) -> tensor<?x64xbf16> {
  // expected-error @+1 {{it needs 394240 bytes of shared memory, sm_90a has 231424 beside the kernel's 1024 static bytes}}
  %y = liger.fusion matmul(%x, %w) attributes {liger.kernel_config = #liger.kernel_config<kernel_template = matmul_wgmma, tile_m = 128, tile_n = 256, tile_k = 64, stages = 8>} : (tensor<?x64xbf16>, tensor<64x64xbf16>) -> tensor<?x64xbf16> {
  ^bb0(%a: tensor<?x64xbf16>, %b: tensor<64x64xbf16>):
    %l = liger.linear %a, %b : tensor<?x64xbf16>, tensor<64x64xbf16>
    liger.yield %l : tensor<?x64xbf16>
  }
  return %y : tensor<?x64xbf16>
}

// -----

// A matmul group pinned to a row template.
func.func @matmul_group_row_template(%x: tensor<?x64xbf16>, %w: tensor<64x64xbf16>) -> tensor<?x64xbf16> {
  // expected-error @+1 {{'liger.fusion' op has a 'liger.kernel_config' of the rowwise template; its ops are built by the matmul_wgmma or matmul_mma_sync template}}
  %y = liger.fusion matmul(%x, %w) attributes {liger.kernel_config = #liger.kernel_config<kernel_template = rowwise, threads = 256, vector_width = 8>} : (tensor<?x64xbf16>, tensor<64x64xbf16>) -> tensor<?x64xbf16> {
  ^bb0(%a: tensor<?x64xbf16>, %b: tensor<64x64xbf16>):
    %l = liger.linear %a, %b : tensor<?x64xbf16>, tensor<64x64xbf16>
    liger.yield %l : tensor<?x64xbf16>
  }
  return %y : tensor<?x64xbf16>
}

// -----

// A cross-entropy group pinned to the rowwise template.
func.func @cross_entropy_group_rowwise_template(%x: tensor<?x1000xf32>, %t: tensor<?xi64>) -> tensor<f32> {
  // expected-error @+1 {{'liger.fusion' op has a 'liger.kernel_config' of the rowwise template; its ops are built by the cross_entropy template}}
  %l = liger.fusion rowwise(%x, %t) attributes {liger.kernel_config = #liger.kernel_config<kernel_template = rowwise, threads = 256, vector_width = 4>} : (tensor<?x1000xf32>, tensor<?xi64>) -> tensor<f32> {
  ^bb0(%a: tensor<?x1000xf32>, %b: tensor<?xi64>):
    %c = liger.cross_entropy %a, %b : tensor<?x1000xf32>, tensor<?xi64>
    liger.yield %c : tensor<f32>
  }
  return %l : tensor<f32>
}

// -----

func.func @threads(%x: tensor<?x64xbf16>, %w: tensor<64x64xbf16>) -> tensor<?x64xbf16> {
  // expected-error @+1 {{has 'threads' = 256 in its matmul 'liger.kernel_config', but the tile needs 384}}
  %y = liger.fusion matmul(%x, %w) attributes {liger.kernel_config = #liger.kernel_config<kernel_template = matmul_wgmma, threads = 256, tile_m = 128, tile_n = 64, tile_k = 64, stages = 3>} : (tensor<?x64xbf16>, tensor<64x64xbf16>) -> tensor<?x64xbf16> {
  ^bb0(%a: tensor<?x64xbf16>, %b: tensor<64x64xbf16>):
    %l = liger.linear %a, %b : tensor<?x64xbf16>, tensor<64x64xbf16>
    liger.yield %l : tensor<?x64xbf16>
  }
  return %y : tensor<?x64xbf16>
}

// -----

// A gradient product reads its B operand N-major, in 64-column TMA boxes.
func.func @grad_tile_n(%dy: tensor<?x64xbf16>, %w: tensor<64x128xbf16>) -> tensor<?x128xbf16> {
  // expected-error @+1 {{'liger.fusion' op has an invalid matmul 'liger.kernel_config': tile_n must be a multiple of 64 where B is read N-major (a gradient product's operand or a transposed weight, in 64-column boxes), got 96}}
  %y = liger.fusion matmul(%dy, %w) attributes {liger.kernel_config = #liger.kernel_config<kernel_template = matmul_wgmma, tile_m = 64, tile_n = 96, tile_k = 64, stages = 3>} : (tensor<?x64xbf16>, tensor<64x128xbf16>) -> tensor<?x128xbf16> {
  ^bb0(%a: tensor<?x64xbf16>, %b: tensor<64x128xbf16>):
    %g = liger.linear_grad_input %a, %b : tensor<?x64xbf16>, tensor<64x128xbf16>
    liger.yield %g : tensor<?x128xbf16>
  }
  return %y : tensor<?x128xbf16>
}

// -----

// A pinned rowwise configuration is checked by the rule the default follows
// (checkRowVectorWidth): a chunk of 16 bf16 is more than one 16-byte load.
// (A width that does not divide the row is legal: the row is peeled.)
func.func @row_width_too_wide(%x: tensor<?x1001xbf16>) -> tensor<?x1001xbf16> {
  // expected-error @+1 {{'liger.fusion' op has an invalid 'liger.kernel_config': vector_width 16 spans 32 bytes of bf16, more than one 16-byte load}}
  %y = liger.fusion rowwise(%x) attributes {liger.kernel_config = #liger.kernel_config<kernel_template = rowwise, threads = 256, vector_width = 16>} : (tensor<?x1001xbf16>) -> tensor<?x1001xbf16> {
  ^bb0(%a: tensor<?x1001xbf16>):
    %s = liger.silu %a : tensor<?x1001xbf16>
    liger.yield %s : tensor<?x1001xbf16>
  }
  return %y : tensor<?x1001xbf16>
}

// -----

// A width that does not divide the row peels each row to its first chunk
// boundary, a column that differs from row to row (checkRowPeel): an
// operand indexed by column alone (RMSNorm's weight) would be read there
// unaligned.
func.func @peeled_row_with_a_weight(%x: tensor<?x66xf32>, %w: tensor<66xf32>) -> tensor<?x66xf32> {
  // expected-error @+1 {{'liger.fusion' op has an invalid 'liger.kernel_config': vector_width 4 does not divide the row length 66, so each row is peeled to its first chunk boundary, where an operand indexed by column alone would be read unaligned}}
  %y = liger.fusion rowwise(%x, %w) attributes {liger.kernel_config = #liger.kernel_config<kernel_template = rowwise, threads = 32, vector_width = 4>} : (tensor<?x66xf32>, tensor<66xf32>) -> tensor<?x66xf32> {
  ^bb0(%a: tensor<?x66xf32>, %b: tensor<66xf32>):
    %s = liger.rms_norm %a, %b : tensor<?x66xf32>, tensor<66xf32>
    liger.yield %s : tensor<?x66xf32>
  }
  return %y : tensor<?x66xf32>
}

// -----

// So would a value reduced across rows (RMSNorm's dW, summed over the rows
// by column; the dialect's ops that reduce across rows all read a weight
// too, so the rule's two clauses are apart only in the unit test of
// checkRowPeel, test/Unit/Conversion/RowRulesTest.cpp).
func.func @peeled_row_reducing_across_rows(%dy: tensor<?x1001xbf16>, %x: tensor<?x1001xbf16>, %w: tensor<1001xbf16>, %r: tensor<?xf32>) -> (tensor<?x1001xbf16>, tensor<1001xbf16>) {
  // expected-error @+1 {{'liger.fusion' op has an invalid 'liger.kernel_config': vector_width 8 does not divide the row length 1001, so each row is peeled to its first chunk boundary, where an operand indexed by column alone would be read unaligned}}
  %dx, %dw = liger.fusion rowwise(%dy, %x, %w, %r) attributes {liger.kernel_config = #liger.kernel_config<kernel_template = rowwise, threads = 256, vector_width = 8>} : (tensor<?x1001xbf16>, tensor<?x1001xbf16>, tensor<1001xbf16>, tensor<?xf32>) -> (tensor<?x1001xbf16>, tensor<1001xbf16>) {
  ^bb0(%a: tensor<?x1001xbf16>, %b: tensor<?x1001xbf16>, %c: tensor<1001xbf16>, %d: tensor<?xf32>):
    %0, %1 = liger.rms_norm_grad %a, %b, %c, %d : tensor<?x1001xbf16>, tensor<1001xbf16>, tensor<?xf32>
    liger.yield %0, %1 : tensor<?x1001xbf16>, tensor<1001xbf16>
  }
  return %dx, %dw : tensor<?x1001xbf16>, tensor<1001xbf16>
}

// -----

// Nor is a peeled row split over a cluster.
func.func @peeled_row_in_a_cluster(%x: tensor<?x50257xbf16>) -> tensor<?x50257xbf16> {
  // expected-error @+1 {{'liger.fusion' op has an invalid 'liger.kernel_config': vector_width 8 does not divide the row length 50257, so each row is peeled to its first chunk boundary, and a peeled row is not split over a cluster}}
  %y = liger.fusion rowwise(%x) attributes {liger.kernel_config = #liger.kernel_config<kernel_template = rowwise, threads = 256, vector_width = 8, cluster = 2>} : (tensor<?x50257xbf16>) -> tensor<?x50257xbf16> {
  ^bb0(%a: tensor<?x50257xbf16>):
    %s = liger.softmax %a : tensor<?x50257xbf16>
    liger.yield %s : tensor<?x50257xbf16>
  }
  return %y : tensor<?x50257xbf16>
}

// -----

// A pinned cluster is checked by the rule the selection follows
// (checkRowCluster): every CTA of it takes a part of the row. A row of 24
// bf16 in 8-element chunks gives 4 CTAs one chunk each, and the fourth
// none.
func.func @row_cluster_leaves_a_cta_none(%x: tensor<?x24xbf16>) -> tensor<?x24xbf16> {
  // expected-error @+1 {{'liger.fusion' op has an invalid 'liger.kernel_config': a cluster of 4 CTAs splits a row of 24 into parts of 8 columns, which leaves its last CTA none}}
  %y = liger.fusion rowwise(%x) attributes {liger.kernel_config = #liger.kernel_config<kernel_template = rowwise, threads = 32, vector_width = 8, cluster = 4>} : (tensor<?x24xbf16>) -> tensor<?x24xbf16> {
  ^bb0(%a: tensor<?x24xbf16>):
    %s = liger.softmax %a : tensor<?x24xbf16>
    liger.yield %s : tensor<?x24xbf16>
  }
  return %y : tensor<?x24xbf16>
}

// -----

// The pingpong schedule's limits (pingpongLimit), one case each.
func.func @pingpong_tile_m(%x: tensor<?x64xbf16>, %w: tensor<64x64xbf16>) -> tensor<?x64xbf16> {
  // expected-error @+1 {{'liger.fusion' op has an invalid matmul 'liger.kernel_config': tile_m must be 64 or 128, got 192}}
  %y = liger.fusion matmul(%x, %w) attributes {liger.kernel_config = #liger.kernel_config<kernel_template = matmul_wgmma, tile_m = 192, tile_n = 64, tile_k = 64, stages = 3, schedule = pingpong>} : (tensor<?x64xbf16>, tensor<64x64xbf16>) -> tensor<?x64xbf16> {
  ^bb0(%a: tensor<?x64xbf16>, %b: tensor<64x64xbf16>):
    %l = liger.linear %a, %b : tensor<?x64xbf16>, tensor<64x64xbf16>
    liger.yield %l : tensor<?x64xbf16>
  }
  return %y : tensor<?x64xbf16>
}

// -----

func.func @pingpong_accumulators(%x: tensor<?x64xbf16>, %g: tensor<256x64xbf16>, %u: tensor<256x64xbf16>) -> tensor<?x256xbf16> {
  // expected-error @+1 {{the pingpong schedule does not take this group: its consumer threads would hold 256 f32 accumulators each (a warpgroup's 64-row blocks x tile_n / 2 per projection), more than 128}}
  %y = liger.fusion matmul(%x, %g, %u) attributes {liger.kernel_config = #liger.kernel_config<kernel_template = matmul_wgmma, tile_m = 128, tile_n = 128, tile_k = 64, stages = 3, schedule = pingpong>} : (tensor<?x64xbf16>, tensor<256x64xbf16>, tensor<256x64xbf16>) -> tensor<?x256xbf16> {
  ^bb0(%a: tensor<?x64xbf16>, %b: tensor<256x64xbf16>, %c: tensor<256x64xbf16>):
    %lg = liger.linear %a, %b : tensor<?x64xbf16>, tensor<256x64xbf16>
    %lu = liger.linear %a, %c : tensor<?x64xbf16>, tensor<256x64xbf16>
    %s = liger.swiglu %lg, %lu : tensor<?x256xbf16>
    liger.yield %s : tensor<?x256xbf16>
  }
  return %y : tensor<?x256xbf16>
}

// -----

// A data-parallel gate/up tile 256 wide a projection: 256 accumulators a
// consumer thread (ptxas spills them); 128 wide is the widest.
func.func @data_parallel_accumulators(%x: tensor<?x64xbf16>, %g: tensor<256x64xbf16>, %u: tensor<256x64xbf16>) -> tensor<?x256xbf16> {
  // expected-error @+1 {{'liger.fusion' op has an invalid matmul 'liger.kernel_config': its consumer threads would hold 256 f32 accumulators each (a warpgroup's 64-row blocks x tile_n / 2 per projection), more than 128}}
  %y = liger.fusion matmul(%x, %g, %u) attributes {liger.kernel_config = #liger.kernel_config<kernel_template = matmul_wgmma, tile_m = 128, tile_n = 256, tile_k = 64, stages = 2>} : (tensor<?x64xbf16>, tensor<256x64xbf16>, tensor<256x64xbf16>) -> tensor<?x256xbf16> {
  ^bb0(%a: tensor<?x64xbf16>, %b: tensor<256x64xbf16>, %c: tensor<256x64xbf16>):
    %lg = liger.linear %a, %b : tensor<?x64xbf16>, tensor<256x64xbf16>
    %lu = liger.linear %a, %c : tensor<?x64xbf16>, tensor<256x64xbf16>
    %s = liger.swiglu %lg, %lu : tensor<?x256xbf16>
    liger.yield %s : tensor<?x256xbf16>
  }
  return %y : tensor<?x256xbf16>
}

// -----

// mma.sync: 128 x 256 over 256 threads is 128 a thread, twice that for a
// pair.
func.func @mma_sync_accumulators(%x: tensor<?x64xbf16>, %g: tensor<256x64xbf16>, %u: tensor<256x64xbf16>) -> tensor<?x256xbf16> {
  // expected-error @+1 {{its threads would hold 256 f32 accumulators each (tile_m x tile_n / threads per projection), more than 128}}
  %y = liger.fusion matmul(%x, %g, %u) attributes {liger.kernel_config = #liger.kernel_config<kernel_template = matmul_mma_sync, tile_m = 128, tile_n = 256, tile_k = 32, stages = 2>} : (tensor<?x64xbf16>, tensor<256x64xbf16>, tensor<256x64xbf16>) -> tensor<?x256xbf16> {
  ^bb0(%a: tensor<?x64xbf16>, %b: tensor<256x64xbf16>, %c: tensor<256x64xbf16>):
    %lg = liger.linear %a, %b : tensor<?x64xbf16>, tensor<256x64xbf16>
    %lu = liger.linear %a, %c : tensor<?x64xbf16>, tensor<256x64xbf16>
    %s = liger.swiglu %lg, %lu : tensor<?x256xbf16>
    liger.yield %s : tensor<?x256xbf16>
  }
  return %y : tensor<?x256xbf16>
}

// -----

func.func @pingpong_lora(%x: tensor<?x64xbf16>, %w: tensor<64x64xbf16>, %la: tensor<16x64xbf16>, %lb: tensor<64x16xbf16>) -> tensor<?x64xbf16> {
  // expected-error @+1 {{the pingpong schedule does not take this group: LoRA's B tile is read once per CTA}}
  %y = liger.fusion matmul(%x, %w, %la, %lb) attributes {liger.kernel_config = #liger.kernel_config<kernel_template = matmul_wgmma, tile_m = 64, tile_n = 64, tile_k = 64, stages = 3, schedule = pingpong>} : (tensor<?x64xbf16>, tensor<64x64xbf16>, tensor<16x64xbf16>, tensor<64x16xbf16>) -> tensor<?x64xbf16> {
  ^bb0(%a: tensor<?x64xbf16>, %b: tensor<64x64xbf16>, %c: tensor<16x64xbf16>, %d: tensor<64x16xbf16>):
    %l = liger.lora_linear %a, %b, %c, %d scale = 2.0 : tensor<?x64xbf16>, tensor<64x64xbf16>, tensor<16x64xbf16>, tensor<64x16xbf16>
    liger.yield %l : tensor<?x64xbf16>
  }
  return %y : tensor<?x64xbf16>
}

// -----

func.func @persistent_lora(%x: tensor<?x64xbf16>, %w: tensor<64x64xbf16>, %la: tensor<16x64xbf16>, %lb: tensor<64x16xbf16>) -> tensor<?x64xbf16> {
  // expected-error @+1 {{the persistent schedule does not take this group: LoRA's B tile is read once per CTA}}
  %y = liger.fusion matmul(%x, %w, %la, %lb) attributes {liger.kernel_config = #liger.kernel_config<kernel_template = matmul_wgmma, tile_m = 64, tile_n = 64, tile_k = 64, stages = 3, schedule = persistent>} : (tensor<?x64xbf16>, tensor<64x64xbf16>, tensor<16x64xbf16>, tensor<64x16xbf16>) -> tensor<?x64xbf16> {
  ^bb0(%a: tensor<?x64xbf16>, %b: tensor<64x64xbf16>, %c: tensor<16x64xbf16>, %d: tensor<64x16xbf16>):
    %l = liger.lora_linear %a, %b, %c, %d scale = 2.0 : tensor<?x64xbf16>, tensor<64x64xbf16>, tensor<16x64xbf16>, tensor<64x16xbf16>
    liger.yield %l : tensor<?x64xbf16>
  }
  return %y : tensor<?x64xbf16>
}

// -----

// The persistent schedule's output boxes sit beside the ring: 5 stages of a
// 128 x 256 tile do not fit beside them (4 do).
func.func @persistent_smem(%x: tensor<?x4096xbf16>, %w: tensor<4096x4096xbf16>) -> tensor<?x4096xbf16> {
  // expected-error @+1 {{it needs 279552 bytes of shared memory, sm_90a has 231424 beside the kernel's 1024 static bytes}}
  %y = liger.fusion matmul(%x, %w) attributes {liger.kernel_config = #liger.kernel_config<kernel_template = matmul_wgmma, tile_m = 128, tile_n = 256, tile_k = 64, stages = 5, schedule = persistent>} : (tensor<?x4096xbf16>, tensor<4096x4096xbf16>) -> tensor<?x4096xbf16> {
  ^bb0(%a: tensor<?x4096xbf16>, %b: tensor<4096x4096xbf16>):
    %l = liger.linear %a, %b : tensor<?x4096xbf16>, tensor<4096x4096xbf16>
    liger.yield %l : tensor<?x4096xbf16>
  }
  return %y : tensor<?x4096xbf16>
}

// -----

// Every rule of a pinned attention configuration, one case each.

func.func @attention_tile_n(%q: tensor<?x4x?x128xbf16>) -> tensor<?x4x?x128xbf16> {
  // expected-error @+1 {{'liger.fusion' op has a 'liger.kernel_config' the attention template cannot take: 'tile_n' must be 64, 96 or 128, got 80}}
  %o = liger.fusion attention(%q) attributes {liger.kernel_config = #liger.kernel_config<kernel_template = attention, tile_n = 80, stages = 2>} : (tensor<?x4x?x128xbf16>) -> tensor<?x4x?x128xbf16> {
  ^bb0(%a: tensor<?x4x?x128xbf16>):
    %r = liger.attention %a, %a, %a causal : tensor<?x4x?x128xbf16>, tensor<?x4x?x128xbf16>, tensor<?x4x?x128xbf16>
    liger.yield %r : tensor<?x4x?x128xbf16>
  }
  return %o : tensor<?x4x?x128xbf16>
}

// -----

func.func @attention_stages(%q: tensor<?x4x?x128xbf16>) -> tensor<?x4x?x128xbf16> {
  // expected-error @+1 {{'stages' must be 2 to 4, got 5}}
  %o = liger.fusion attention(%q) attributes {liger.kernel_config = #liger.kernel_config<kernel_template = attention, tile_n = 64, stages = 5>} : (tensor<?x4x?x128xbf16>) -> tensor<?x4x?x128xbf16> {
  ^bb0(%a: tensor<?x4x?x128xbf16>):
    %r = liger.attention %a, %a, %a causal : tensor<?x4x?x128xbf16>, tensor<?x4x?x128xbf16>, tensor<?x4x?x128xbf16>
    liger.yield %r : tensor<?x4x?x128xbf16>
  }
  return %o : tensor<?x4x?x128xbf16>
}

// -----

func.func @attention_registers(%q: tensor<?x4x?x256xbf16>) -> tensor<?x4x?x256xbf16> {
  // expected-error @+1 {{'tile_n' 128 with head dimension 256 holds more accumulators than a consumer thread's registers (tile_n / 2 + D / 2 must be at most 160)}}
  %o = liger.fusion attention(%q) attributes {liger.kernel_config = #liger.kernel_config<kernel_template = attention, tile_n = 128, stages = 2>} : (tensor<?x4x?x256xbf16>) -> tensor<?x4x?x256xbf16> {
  ^bb0(%a: tensor<?x4x?x256xbf16>):
    %r = liger.attention %a, %a, %a : tensor<?x4x?x256xbf16>, tensor<?x4x?x256xbf16>, tensor<?x4x?x256xbf16>
    liger.yield %r : tensor<?x4x?x256xbf16>
  }
  return %o : tensor<?x4x?x256xbf16>
}

// -----

func.func @attention_shared_memory(%q: tensor<?x4x?x128xbf16>) -> tensor<?x4x?x128xbf16> {
  // expected-error @+1 {{'tile_n' 128 and 4 stages take 295936 bytes of shared memory, over the 231424 a kernel may take beside its 1024 static bytes on sm_90a}}
  %o = liger.fusion attention(%q) attributes {liger.kernel_config = #liger.kernel_config<kernel_template = attention, tile_n = 128, stages = 4>} : (tensor<?x4x?x128xbf16>) -> tensor<?x4x?x128xbf16> {
  ^bb0(%a: tensor<?x4x?x128xbf16>):
    %r = liger.attention %a, %a, %a : tensor<?x4x?x128xbf16>, tensor<?x4x?x128xbf16>, tensor<?x4x?x128xbf16>
    liger.yield %r : tensor<?x4x?x128xbf16>
  }
  return %o : tensor<?x4x?x128xbf16>
}

// -----

func.func @attention_grad_tile_n(%q: tensor<?x4x?x128xbf16>, %l: tensor<?x4x?xf32>) -> tensor<?x4x?x128xbf16> {
  // expected-error @+1 {{'liger.fusion' op has a 'liger.kernel_config' the attention template cannot take: the backward's 'tile_n' (its key rows a tile) must be 128, got 64}}
  %o:3 = liger.fusion attention(%q, %l) attributes {liger.kernel_config = #liger.kernel_config<kernel_template = attention, tile_n = 64, stages = 2>} : (tensor<?x4x?x128xbf16>, tensor<?x4x?xf32>) -> (tensor<?x4x?x128xbf16>, tensor<?x4x?x128xbf16>, tensor<?x4x?x128xbf16>) {
  ^bb0(%a: tensor<?x4x?x128xbf16>, %b: tensor<?x4x?xf32>):
    %r:3 = liger.attention_grad %a, %a, %a, %a saved(%a, %b : tensor<?x4x?x128xbf16>, tensor<?x4x?xf32>) causal : tensor<?x4x?x128xbf16>, tensor<?x4x?x128xbf16>, tensor<?x4x?x128xbf16>, tensor<?x4x?x128xbf16>
    liger.yield %r#0, %r#1, %r#2 : tensor<?x4x?x128xbf16>, tensor<?x4x?x128xbf16>, tensor<?x4x?x128xbf16>
  }
  return %o#0 : tensor<?x4x?x128xbf16>
}

// -----

func.func @attention_grad_shared_memory(%q: tensor<?x4x?x128xbf16>, %l: tensor<?x4x?xf32>) -> tensor<?x4x?x128xbf16> {
  // expected-error @+1 {{'tile_n' 128 and 4 stages take 250880 bytes of shared memory, over the 231424 a kernel may take beside its 1024 static bytes on sm_90a}}
  %o:3 = liger.fusion attention(%q, %l) attributes {liger.kernel_config = #liger.kernel_config<kernel_template = attention, tile_n = 128, stages = 4>} : (tensor<?x4x?x128xbf16>, tensor<?x4x?xf32>) -> (tensor<?x4x?x128xbf16>, tensor<?x4x?x128xbf16>, tensor<?x4x?x128xbf16>) {
  ^bb0(%a: tensor<?x4x?x128xbf16>, %b: tensor<?x4x?xf32>):
    %r:3 = liger.attention_grad %a, %a, %a, %a saved(%a, %b : tensor<?x4x?x128xbf16>, tensor<?x4x?xf32>) : tensor<?x4x?x128xbf16>, tensor<?x4x?x128xbf16>, tensor<?x4x?x128xbf16>, tensor<?x4x?x128xbf16>
    liger.yield %r#0, %r#1, %r#2 : tensor<?x4x?x128xbf16>, tensor<?x4x?x128xbf16>, tensor<?x4x?x128xbf16>
  }
  return %o#0 : tensor<?x4x?x128xbf16>
}

// -----

func.func @attention_template_on_rowwise(%x: tensor<?x64xbf16>) -> tensor<?x64xbf16> {
  // expected-error @+1 {{'liger.fusion' op has a 'liger.kernel_config' of the attention template; its ops are built by the rowwise template}}
  %y = liger.fusion rowwise(%x) attributes {liger.kernel_config = #liger.kernel_config<kernel_template = attention, tile_n = 64, stages = 2>} : (tensor<?x64xbf16>) -> tensor<?x64xbf16> {
  ^bb0(%a: tensor<?x64xbf16>):
    %s = liger.silu %a : tensor<?x64xbf16>
    liger.yield %s : tensor<?x64xbf16>
  }
  return %y : tensor<?x64xbf16>
}

// -----

func.func @rowwise_template_on_attention(%q: tensor<?x4x?x64xbf16>) -> tensor<?x4x?x64xbf16> {
  // expected-error @+1 {{'liger.fusion' op has a 'liger.kernel_config' of the rowwise template; its ops are built by the attention template}}
  %o = liger.fusion attention(%q) attributes {liger.kernel_config = #liger.kernel_config<kernel_template = rowwise, threads = 256, vector_width = 8>} : (tensor<?x4x?x64xbf16>) -> tensor<?x4x?x64xbf16> {
  ^bb0(%a: tensor<?x4x?x64xbf16>):
    %r = liger.attention %a, %a, %a : tensor<?x4x?x64xbf16>, tensor<?x4x?x64xbf16>, tensor<?x4x?x64xbf16>
    liger.yield %r : tensor<?x4x?x64xbf16>
  }
  return %o : tensor<?x4x?x64xbf16>
}

// -----

// A cluster: the data-parallel wgmma schedule only, no LoRA, and a weight
// tile that splits into the CTAs' 64-row (or 64-column) parts.

func.func @cluster_pingpong(%x: tensor<?x256xbf16>, %w: tensor<256x256xbf16>) -> tensor<?x256xbf16> {
  // expected-error @+1 {{the pingpong schedule takes no cluster (the data-parallel one does)}}
  %y = liger.fusion matmul(%x, %w) attributes {liger.kernel_config = #liger.kernel_config<kernel_template = matmul_wgmma, tile_m = 128, tile_n = 128, tile_k = 64, stages = 3, schedule = pingpong, cluster = 2>} : (tensor<?x256xbf16>, tensor<256x256xbf16>) -> tensor<?x256xbf16> {
  ^bb0(%a: tensor<?x256xbf16>, %b: tensor<256x256xbf16>):
    %l = liger.linear %a, %b : tensor<?x256xbf16>, tensor<256x256xbf16>
    liger.yield %l : tensor<?x256xbf16>
  }
  return %y : tensor<?x256xbf16>
}

// -----

func.func @cluster_lora(%x: tensor<?x256xbf16>, %w: tensor<256x256xbf16>, %la: tensor<16x256xbf16>, %lb: tensor<256x16xbf16>) -> tensor<?x256xbf16> {
  // expected-error @+1 {{a cluster does not take a LoRA group (its CTAs of column tile 0 hand x · Aᵀ over to the others)}}
  %y = liger.fusion matmul(%x, %w, %la, %lb) attributes {liger.kernel_config = #liger.kernel_config<kernel_template = matmul_wgmma, tile_m = 128, tile_n = 128, tile_k = 64, stages = 3, cluster = 2>} : (tensor<?x256xbf16>, tensor<256x256xbf16>, tensor<16x256xbf16>, tensor<256x16xbf16>) -> tensor<?x256xbf16> {
  ^bb0(%a: tensor<?x256xbf16>, %b: tensor<256x256xbf16>, %c: tensor<16x256xbf16>, %d: tensor<256x16xbf16>):
    %l = liger.lora_linear %a, %b, %c, %d scale = 2.0 : tensor<?x256xbf16>, tensor<256x256xbf16>, tensor<16x256xbf16>, tensor<256x16xbf16>
    liger.yield %l : tensor<?x256xbf16>
  }
  return %y : tensor<?x256xbf16>
}

// -----

func.func @cluster_narrow_tile(%x: tensor<?x256xbf16>, %w: tensor<256x256xbf16>) -> tensor<?x256xbf16> {
  // expected-error @+1 {{tile_n must be a multiple of 128 in a cluster of 2 (each CTA multicasts its part of the weight tile), got 64}}
  %y = liger.fusion matmul(%x, %w) attributes {liger.kernel_config = #liger.kernel_config<kernel_template = matmul_wgmma, tile_m = 128, tile_n = 64, tile_k = 64, stages = 3, cluster = 2>} : (tensor<?x256xbf16>, tensor<256x256xbf16>) -> tensor<?x256xbf16> {
  ^bb0(%a: tensor<?x256xbf16>, %b: tensor<256x256xbf16>):
    %l = liger.linear %a, %b : tensor<?x256xbf16>, tensor<256x256xbf16>
    liger.yield %l : tensor<?x256xbf16>
  }
  return %y : tensor<?x256xbf16>
}

// -----

// A group's liger.spill_fallback is checked like a pinned configuration.
func.func @fallback_not_config(%x: tensor<?x128256xbf16>) -> tensor<?x128256xbf16> {
  // expected-error @+1 {{'liger.fusion' op has a 'liger.spill_fallback' that is not a #liger.kernel_config: 256 : i64}}
  %y = liger.fusion rowwise(%x) attributes {liger.spill_fallback = 256} : (tensor<?x128256xbf16>) -> tensor<?x128256xbf16> {
  ^bb0(%a: tensor<?x128256xbf16>):
    %s = liger.softmax %a : tensor<?x128256xbf16>
    liger.yield %s : tensor<?x128256xbf16>
  }
  return %y : tensor<?x128256xbf16>
}

// -----

func.func @fallback_template(%x: tensor<?x128256xbf16>) -> tensor<?x128256xbf16> {
  // expected-error @+1 {{'liger.fusion' op has a 'liger.spill_fallback' that does not fit it: 'liger.fusion' op has a 'liger.kernel_config' of the cross_entropy template; its ops are built by the rowwise template}}
  %y = liger.fusion rowwise(%x) attributes {liger.spill_fallback = #liger.kernel_config<kernel_template = cross_entropy, threads = 256, vector_width = 8>} : (tensor<?x128256xbf16>) -> tensor<?x128256xbf16> {
  ^bb0(%a: tensor<?x128256xbf16>):
    %s = liger.softmax %a : tensor<?x128256xbf16>
    liger.yield %s : tensor<?x128256xbf16>
  }
  return %y : tensor<?x128256xbf16>
}

// -----

func.func @fallback_width(%x: tensor<?x50257xbf16>) -> tensor<?x50257xbf16> {
  // expected-error @+1 {{'liger.fusion' op has a 'liger.spill_fallback' that does not fit it: 'liger.fusion' op has an invalid 'liger.kernel_config': vector_width 16 spans 32 bytes of bf16, more than one 16-byte load}}
  %y = liger.fusion rowwise(%x) attributes {liger.spill_fallback = #liger.kernel_config<kernel_template = rowwise, threads = 256, vector_width = 16>} : (tensor<?x50257xbf16>) -> tensor<?x50257xbf16> {
  ^bb0(%a: tensor<?x50257xbf16>):
    %s = liger.softmax %a : tensor<?x50257xbf16>
    liger.yield %s : tensor<?x50257xbf16>
  }
  return %y : tensor<?x50257xbf16>
}

// -----

// Only a row group takes one: a matmul kernel's configuration is its tile,
// which liger-compile does not check for spills.
func.func @fallback_matmul(%x: tensor<?x256xbf16>, %w: tensor<256x256xbf16>) -> tensor<?x256xbf16> {
  // expected-error @+1 {{'liger.fusion' op has a 'liger.spill_fallback', which only a rowwise group takes}}
  %y = liger.fusion matmul(%x, %w) attributes {liger.spill_fallback = #liger.kernel_config<kernel_template = matmul_wgmma, tile_m = 128, tile_n = 128, tile_k = 64, stages = 3>} : (tensor<?x256xbf16>, tensor<256x256xbf16>) -> tensor<?x256xbf16> {
  ^bb0(%a: tensor<?x256xbf16>, %b: tensor<256x256xbf16>):
    %l = liger.linear %a, %b : tensor<?x256xbf16>, tensor<256x256xbf16>
    liger.yield %l : tensor<?x256xbf16>
  }
  return %y : tensor<?x256xbf16>
}
