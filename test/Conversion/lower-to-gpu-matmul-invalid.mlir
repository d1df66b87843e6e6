// RUN: liger-opt %s --liger-lower-to-gpu=matmul-kernels=true --split-input-file -verify-diagnostics
// RUN: liger-opt %S/Inputs/wgmma-ptx80.mlir --liger-lower-to-gpu="matmul-kernels=true features=+ptx80" -verify-diagnostics

// What the first matmul template does not implement yet is a warning on the
// group, which stays uncompiled (never a wrong kernel); the rest compiles.

// The wgmma template reads K in 128-byte slices (tile_k = 64 for bf16): a
// configuration of another is invalid (the verifier's rule, before any
// template runs).
func.func @wgmma_tile_k(%x: tensor<?x64xbf16>, %w: tensor<64x64xbf16>) -> tensor<?x64xbf16> {
  // expected-error @+1 {{has an invalid matmul 'liger.kernel_config': tile_k must span 128 bytes of K on the wgmma template (64 elements), got 32}}
  %y = liger.fusion matmul(%x, %w) attributes {liger.kernel_config = #liger.kernel_config<kernel_template = matmul_wgmma, tile_m = 128, tile_n = 64, tile_k = 32, stages = 3>} : (tensor<?x64xbf16>, tensor<64x64xbf16>) -> tensor<?x64xbf16> {
  ^bb0(%a: tensor<?x64xbf16>, %b: tensor<64x64xbf16>):
    %l = liger.linear %a, %b : tensor<?x64xbf16>, tensor<64x64xbf16>
    liger.yield %l : tensor<?x64xbf16>
  }
  return %y : tensor<?x64xbf16>
}

// -----

// TMA needs rows of a multiple of 16 bytes: K = 100 bf16 is 200 bytes.
func.func @wgmma_k_rows(%x: tensor<?x100xbf16>, %w: tensor<64x100xbf16>) -> tensor<?x64xbf16> {
  // expected-warning @+1 {{K = 100 is not a multiple of 8 (TMA needs 16-byte rows)}}
  %y = liger.fusion matmul(%x, %w) attributes {liger.kernel_config = #liger.kernel_config<kernel_template = matmul_wgmma, tile_m = 128, tile_n = 64, tile_k = 64, stages = 3>} : (tensor<?x100xbf16>, tensor<64x100xbf16>) -> tensor<?x64xbf16> {
  ^bb0(%a: tensor<?x100xbf16>, %b: tensor<64x100xbf16>):
    %l = liger.linear %a, %b : tensor<?x100xbf16>, tensor<64x100xbf16>
    liger.yield %l : tensor<?x64xbf16>
  }
  return %y : tensor<?x64xbf16>
}

// -----

// A bias computed inside the group is not among the group's inputs.
func.func @bias_computed(%x: tensor<?x64xbf16>, %w: tensor<64x64xbf16>, %b: tensor<64xbf16>) -> tensor<?x64xbf16> {
  // expected-warning @+1 {{the matmul templates implement one liger.linear or liger.lora_linear (weight and bias among the group's inputs) on the group's inputs (or a gate/up pair on one input, optionally after an RMSNorm of it), with an elementwise epilogue; other prologues come with the next templates}}
  %y = liger.fusion matmul(%x, %w, %b) attributes {liger.kernel_config = #liger.kernel_config<kernel_template = matmul_mma_sync, tile_m = 128, tile_n = 64, tile_k = 32, stages = 3>} : (tensor<?x64xbf16>, tensor<64x64xbf16>, tensor<64xbf16>) -> tensor<?x64xbf16> {
  ^bb0(%a: tensor<?x64xbf16>, %c: tensor<64x64xbf16>, %d: tensor<64xbf16>):
    %e = liger.add %d, %d : tensor<64xbf16>
    %l = liger.linear %a, %c, %e : tensor<?x64xbf16>, tensor<64x64xbf16>, tensor<64xbf16>
    liger.yield %l : tensor<?x64xbf16>
  }
  return %y : tensor<?x64xbf16>
}

// -----

// Near-miss for the prologue: the normalized x is also read by the
// epilogue, so the norm cannot be folded into the x tiles.
func.func @prologue_reused(%x: tensor<?x64xbf16>, %g: tensor<64xbf16>, %w: tensor<64x64xbf16>) -> tensor<?x64xbf16> {
  // expected-warning @+1 {{optionally after an RMSNorm of it}}
  %y = liger.fusion matmul(%x, %g, %w) : (tensor<?x64xbf16>, tensor<64xbf16>, tensor<64x64xbf16>) -> tensor<?x64xbf16> {
  ^bb0(%a: tensor<?x64xbf16>, %b: tensor<64xbf16>, %c: tensor<64x64xbf16>):
    %n = liger.rms_norm %a, %b : tensor<?x64xbf16>, tensor<64xbf16>
    %l = liger.linear %n, %c : tensor<?x64xbf16>, tensor<64x64xbf16>
    %s = liger.add %l, %n : tensor<?x64xbf16>
    liger.yield %s : tensor<?x64xbf16>
  }
  return %y : tensor<?x64xbf16>
}

// -----

// The same rule on mma.sync: its second product is k16 MMAs over r too.
func.func @lora_rank8_mma_sync(%x: tensor<?x64xbf16>, %w: tensor<64x64xbf16>, %a: tensor<8x64xbf16>, %b: tensor<64x8xbf16>) -> tensor<?x64xbf16> {
  // expected-warning @+1 {{LoRA rank 8 is not a multiple of 16 up to 64 (the second product is k16 MMAs over r}}
  %y = liger.fusion matmul(%x, %w, %a, %b) attributes {liger.kernel_config = #liger.kernel_config<kernel_template = matmul_mma_sync, tile_m = 128, tile_n = 64, tile_k = 32, stages = 3>} : (tensor<?x64xbf16>, tensor<64x64xbf16>, tensor<8x64xbf16>, tensor<64x8xbf16>) -> tensor<?x64xbf16> {
  ^bb0(%i: tensor<?x64xbf16>, %j: tensor<64x64xbf16>, %k: tensor<8x64xbf16>, %l: tensor<64x8xbf16>):
    %p = liger.lora_linear %i, %j, %k, %l : tensor<?x64xbf16>, tensor<64x64xbf16>, tensor<8x64xbf16>, tensor<64x8xbf16>
    liger.yield %p : tensor<?x64xbf16>
  }
  return %y : tensor<?x64xbf16>
}

// -----

// The second product runs k16 MMAs over r.
func.func @lora_rank8(%x: tensor<?x64xbf16>, %w: tensor<64x64xbf16>, %a: tensor<8x64xbf16>, %b: tensor<64x8xbf16>) -> tensor<?x64xbf16> {
  // expected-warning @+1 {{LoRA rank 8 is not a multiple of 16 up to 64}}
  %y = liger.fusion matmul(%x, %w, %a, %b) attributes {liger.kernel_config = #liger.kernel_config<kernel_template = matmul_wgmma, tile_m = 128, tile_n = 64, tile_k = 64, stages = 3>} : (tensor<?x64xbf16>, tensor<64x64xbf16>, tensor<8x64xbf16>, tensor<64x8xbf16>) -> tensor<?x64xbf16> {
  ^bb0(%i: tensor<?x64xbf16>, %j: tensor<64x64xbf16>, %k: tensor<8x64xbf16>, %l: tensor<64x8xbf16>):
    %p = liger.lora_linear %i, %j, %k, %l : tensor<?x64xbf16>, tensor<64x64xbf16>, tensor<8x64xbf16>, tensor<64x8xbf16>
    liger.yield %p : tensor<?x64xbf16>
  }
  return %y : tensor<?x64xbf16>
}

// -----

// Two projections of different widths (a QK pair) are not a gate/up pair.
func.func @unequal_pair(%x: tensor<?x64xbf16>, %wq: tensor<64x64xbf16>, %wk: tensor<32x64xbf16>) -> (tensor<?x64xbf16>, tensor<?x32xbf16>) {
  // expected-warning @+1 {{(or a gate/up pair on one input, optionally after an RMSNorm of it)}}
  %y:2 = liger.fusion matmul(%x, %wq, %wk) attributes {liger.kernel_config = #liger.kernel_config<kernel_template = matmul_mma_sync, tile_m = 128, tile_n = 32, tile_k = 32, stages = 3>} : (tensor<?x64xbf16>, tensor<64x64xbf16>, tensor<32x64xbf16>) -> (tensor<?x64xbf16>, tensor<?x32xbf16>) {
  ^bb0(%i: tensor<?x64xbf16>, %j: tensor<64x64xbf16>, %k: tensor<32x64xbf16>):
    %q = liger.linear %i, %j : tensor<?x64xbf16>, tensor<64x64xbf16>
    %r = liger.linear %i, %k : tensor<?x64xbf16>, tensor<32x64xbf16>
    liger.yield %q, %r : tensor<?x64xbf16>, tensor<?x32xbf16>
  }
  return %y#0, %y#1 : tensor<?x64xbf16>, tensor<?x32xbf16>
}

// -----

func.func @k_not_multiple(%x: tensor<?x48xbf16>, %w: tensor<64x48xbf16>) -> tensor<?x64xbf16> {
  // expected-warning @+1 {{K = 48 is not a multiple of tile_k = 32}}
  %y = liger.fusion matmul(%x, %w) attributes {liger.kernel_config = #liger.kernel_config<kernel_template = matmul_mma_sync, tile_m = 128, tile_n = 64, tile_k = 32, stages = 3>} : (tensor<?x48xbf16>, tensor<64x48xbf16>) -> tensor<?x64xbf16> {
  ^bb0(%a: tensor<?x48xbf16>, %b: tensor<64x48xbf16>):
    %l = liger.linear %a, %b : tensor<?x48xbf16>, tensor<64x48xbf16>
    liger.yield %l : tensor<?x64xbf16>
  }
  return %y : tensor<?x64xbf16>
}

// -----

func.func @f32(%x: tensor<?x64xf32>, %w: tensor<64x64xf32>) -> tensor<?x64xf32> {
  // expected-warning @+1 {{mma.sync takes bf16 or f16 inputs}}
  %y = liger.fusion matmul(%x, %w) attributes {liger.kernel_config = #liger.kernel_config<kernel_template = matmul_mma_sync, tile_m = 128, tile_n = 64, tile_k = 32, stages = 3>} : (tensor<?x64xf32>, tensor<64x64xf32>) -> tensor<?x64xf32> {
  ^bb0(%a: tensor<?x64xf32>, %b: tensor<64x64xf32>):
    %l = liger.linear %a, %b : tensor<?x64xf32>, tensor<64x64xf32>
    liger.yield %l : tensor<?x64xf32>
  }
  return %y : tensor<?x64xf32>
}

// -----

func.func @n_not_multiple_of_8(%x: tensor<?x64xbf16>, %w: tensor<60x64xbf16>) -> tensor<?x60xbf16> {
  // expected-warning @+1 {{N = 60 is not a multiple of 8}}
  %y = liger.fusion matmul(%x, %w) attributes {liger.kernel_config = #liger.kernel_config<kernel_template = matmul_mma_sync, tile_m = 128, tile_n = 64, tile_k = 32, stages = 3>} : (tensor<?x64xbf16>, tensor<60x64xbf16>) -> tensor<?x60xbf16> {
  ^bb0(%a: tensor<?x64xbf16>, %b: tensor<60x64xbf16>):
    %l = liger.linear %a, %b : tensor<?x64xbf16>, tensor<60x64xbf16>
    liger.yield %l : tensor<?x60xbf16>
  }
  return %y : tensor<?x60xbf16>
}

// -----

// Gradient products: bf16/f16, 16-byte rows (TMA or cp.async), 128-byte K
// slices on wgmma; on mma.sync, dx's dy (read K-major) in whole slices.
func.func @grad_mma_sync_k(%dy: tensor<?x48xbf16>, %w: tensor<48x128xbf16>) -> tensor<?x128xbf16> {
  // expected-warning @+1 {{left for a later matmul template: K = 48 is not a multiple of tile_k = 32}}
  %y = liger.fusion matmul(%dy, %w) attributes {liger.kernel_config = #liger.kernel_config<kernel_template = matmul_mma_sync, tile_m = 64, tile_n = 64, tile_k = 32, stages = 3>} : (tensor<?x48xbf16>, tensor<48x128xbf16>) -> tensor<?x128xbf16> {
  ^bb0(%a: tensor<?x48xbf16>, %b: tensor<48x128xbf16>):
    %g = liger.linear_grad_input %a, %b : tensor<?x48xbf16>, tensor<48x128xbf16>
    liger.yield %g : tensor<?x128xbf16>
  }
  return %y : tensor<?x128xbf16>
}

// -----

func.func @grad_mma_sync_rows(%dy: tensor<?x64xbf16>, %w: tensor<64x100xbf16>) -> tensor<?x100xbf16> {
  // expected-warning @+1 {{left for a later matmul template: a row of 100 elements is not a multiple of 16 bytes (cp.async)}}
  %y = liger.fusion matmul(%dy, %w) attributes {liger.kernel_config = #liger.kernel_config<kernel_template = matmul_mma_sync, tile_m = 64, tile_n = 64, tile_k = 32, stages = 3>} : (tensor<?x64xbf16>, tensor<64x100xbf16>) -> tensor<?x100xbf16> {
  ^bb0(%a: tensor<?x64xbf16>, %b: tensor<64x100xbf16>):
    %g = liger.linear_grad_input %a, %b : tensor<?x64xbf16>, tensor<64x100xbf16>
    liger.yield %g : tensor<?x100xbf16>
  }
  return %y : tensor<?x100xbf16>
}

// -----

func.func @grad_f32(%dy: tensor<?x64xf32>, %x: tensor<?x128xf32>) -> tensor<64x128xf32> {
  // expected-warning @+1 {{left for a later matmul template: wgmma takes bf16 or f16 inputs}}
  %y = liger.fusion matmul(%dy, %x) attributes {liger.kernel_config = #liger.kernel_config<kernel_template = matmul_wgmma, tile_m = 64, tile_n = 128, tile_k = 32, stages = 3>} : (tensor<?x64xf32>, tensor<?x128xf32>) -> tensor<64x128xf32> {
  ^bb0(%a: tensor<?x64xf32>, %b: tensor<?x128xf32>):
    %g = liger.linear_grad_weight %a, %b : tensor<?x64xf32>, tensor<?x128xf32>
    liger.yield %g : tensor<64x128xf32>
  }
  return %y : tensor<64x128xf32>
}

// -----

func.func @grad_tile_k(%dy: tensor<?x64xbf16>, %x: tensor<?x128xbf16>) -> tensor<64x128xbf16> {
  // expected-error @+1 {{has an invalid matmul 'liger.kernel_config': tile_k must span 128 bytes of K on the wgmma template (64 elements), got 32}}
  %y = liger.fusion matmul(%dy, %x) attributes {liger.kernel_config = #liger.kernel_config<kernel_template = matmul_wgmma, tile_m = 64, tile_n = 128, tile_k = 32, stages = 3>} : (tensor<?x64xbf16>, tensor<?x128xbf16>) -> tensor<64x128xbf16> {
  ^bb0(%a: tensor<?x64xbf16>, %b: tensor<?x128xbf16>):
    %g = liger.linear_grad_weight %a, %b : tensor<?x64xbf16>, tensor<?x128xbf16>
    liger.yield %g : tensor<64x128xbf16>
  }
  return %y : tensor<64x128xbf16>
}

// -----

// dy's rows of 100 bf16 are 200 bytes.
func.func @grad_rows(%dy: tensor<?x100xbf16>, %x: tensor<?x128xbf16>) -> tensor<100x128xbf16> {
  // expected-warning @+1 {{left for a later matmul template: a row of 100 elements is not a multiple of 16 bytes (TMA)}}
  %y = liger.fusion matmul(%dy, %x) attributes {liger.kernel_config = #liger.kernel_config<kernel_template = matmul_wgmma, tile_m = 64, tile_n = 128, tile_k = 64, stages = 3>} : (tensor<?x100xbf16>, tensor<?x128xbf16>) -> tensor<100x128xbf16> {
  ^bb0(%a: tensor<?x100xbf16>, %b: tensor<?x128xbf16>):
    %g = liger.linear_grad_weight %a, %b : tensor<?x100xbf16>, tensor<?x128xbf16>
    liger.yield %g : tensor<100x128xbf16>
  }
  return %y : tensor<100x128xbf16>
}

// -----

// q/k projections with RoPE (wgmma): whole heads per column tile, one
// input, only the chain's ops, bf16/f16.
func.func @rope_tile_heads(%x: tensor<?x?x64xbf16>, %y: tensor<?x?x64xbf16>, %wq: tensor<64x64xbf16>, %wk: tensor<32x64xbf16>, %cos: tensor<1x?x16xbf16>, %sin: tensor<1x?x16xbf16>) -> (tensor<?x4x?x16xbf16>, tensor<?x2x?x16xbf16>) {
  // expected-warning @+1 {{left for a later matmul template: tile_n = 24 must hold whole heads (head_dim 16, a multiple of 16) and divide both projections (64 and 32)}}
  %r:2 = liger.fusion matmul(%x, %y, %wq, %wk, %cos, %sin) attributes {liger.kernel_config = #liger.kernel_config<kernel_template = matmul_wgmma, tile_m = 128, tile_n = 24, tile_k = 64, stages = 3>} : (tensor<?x?x64xbf16>, tensor<?x?x64xbf16>, tensor<64x64xbf16>, tensor<32x64xbf16>, tensor<1x?x16xbf16>, tensor<1x?x16xbf16>) -> (tensor<?x4x?x16xbf16>, tensor<?x2x?x16xbf16>) {
  ^bb0(%bx: tensor<?x?x64xbf16>, %by: tensor<?x?x64xbf16>, %bwq: tensor<64x64xbf16>, %bwk: tensor<32x64xbf16>, %bcos: tensor<1x?x16xbf16>, %bsin: tensor<1x?x16xbf16>):
    %c0 = arith.constant 0 : index
    %c1 = arith.constant 1 : index
    %q = liger.linear %bx, %bwq : tensor<?x?x64xbf16>, tensor<64x64xbf16>
    %k = liger.linear %bx, %bwk : tensor<?x?x64xbf16>, tensor<32x64xbf16>
    %qb = tensor.dim %q, %c0 : tensor<?x?x64xbf16>
    %qt = tensor.dim %q, %c1 : tensor<?x?x64xbf16>
    %q4 = tensor.expand_shape %q [[0], [1], [2, 3]] output_shape [%qb, %qt, 4, 16] : tensor<?x?x64xbf16> into tensor<?x?x4x16xbf16>
    %k4 = tensor.expand_shape %k [[0], [1], [2, 3]] output_shape [%qb, %qt, 2, 16] : tensor<?x?x32xbf16> into tensor<?x?x2x16xbf16>
    %qi = tensor.empty(%qb, %qt) : tensor<?x4x?x16xbf16>
    %ki = tensor.empty(%qb, %qt) : tensor<?x2x?x16xbf16>
    %qh = linalg.transpose ins(%q4 : tensor<?x?x4x16xbf16>) outs(%qi : tensor<?x4x?x16xbf16>) permutation = [0, 2, 1, 3]
    %kh = linalg.transpose ins(%k4 : tensor<?x?x2x16xbf16>) outs(%ki : tensor<?x2x?x16xbf16>) permutation = [0, 2, 1, 3]
    %qr, %kr = liger.rope %qh, %kh, %bcos, %bsin : tensor<?x4x?x16xbf16>, tensor<?x2x?x16xbf16>, tensor<1x?x16xbf16>
    liger.yield %qr, %kr : tensor<?x4x?x16xbf16>, tensor<?x2x?x16xbf16>
  }
  return %r#0, %r#1 : tensor<?x4x?x16xbf16>, tensor<?x2x?x16xbf16>
}

// -----

func.func @rope_computed_table(%x: tensor<?x?x64xbf16>, %y: tensor<?x?x64xbf16>, %wq: tensor<64x64xbf16>, %wk: tensor<32x64xbf16>, %cos: tensor<1x?x16xbf16>, %sin: tensor<1x?x16xbf16>) -> (tensor<?x4x?x16xbf16>, tensor<?x2x?x16xbf16>) {
  // expected-warning @+1 {{left for a later matmul template: a RoPE epilogue takes liger.rope of the head splits ([B, T, H*D] -> [B, H, T, D]) of two liger.linear on one input, weights, biases and tables among the group's inputs, yielding the rotated q and k}}
  %r:2 = liger.fusion matmul(%x, %y, %wq, %wk, %cos, %sin) attributes {liger.kernel_config = #liger.kernel_config<kernel_template = matmul_wgmma, tile_m = 128, tile_n = 128, tile_k = 64, stages = 3>} : (tensor<?x?x64xbf16>, tensor<?x?x64xbf16>, tensor<64x64xbf16>, tensor<32x64xbf16>, tensor<1x?x16xbf16>, tensor<1x?x16xbf16>) -> (tensor<?x4x?x16xbf16>, tensor<?x2x?x16xbf16>) {
  ^bb0(%bx: tensor<?x?x64xbf16>, %by: tensor<?x?x64xbf16>, %bwq: tensor<64x64xbf16>, %bwk: tensor<32x64xbf16>, %bcos: tensor<1x?x16xbf16>, %bsin: tensor<1x?x16xbf16>):
    %c0 = arith.constant 0 : index
    %c1 = arith.constant 1 : index
    %q = liger.linear %bx, %bwq : tensor<?x?x64xbf16>, tensor<64x64xbf16>
    %k = liger.linear %bx, %bwk : tensor<?x?x64xbf16>, tensor<32x64xbf16>
    %qb = tensor.dim %q, %c0 : tensor<?x?x64xbf16>
    %qt = tensor.dim %q, %c1 : tensor<?x?x64xbf16>
    %q4 = tensor.expand_shape %q [[0], [1], [2, 3]] output_shape [%qb, %qt, 4, 16] : tensor<?x?x64xbf16> into tensor<?x?x4x16xbf16>
    %k4 = tensor.expand_shape %k [[0], [1], [2, 3]] output_shape [%qb, %qt, 2, 16] : tensor<?x?x32xbf16> into tensor<?x?x2x16xbf16>
    %qi = tensor.empty(%qb, %qt) : tensor<?x4x?x16xbf16>
    %ki = tensor.empty(%qb, %qt) : tensor<?x2x?x16xbf16>
    %qh = linalg.transpose ins(%q4 : tensor<?x?x4x16xbf16>) outs(%qi : tensor<?x4x?x16xbf16>) permutation = [0, 2, 1, 3]
    %kh = linalg.transpose ins(%k4 : tensor<?x?x2x16xbf16>) outs(%ki : tensor<?x2x?x16xbf16>) permutation = [0, 2, 1, 3]
    %cs = liger.mul %bcos, %bsin : tensor<1x?x16xbf16>
    %qr, %kr = liger.rope %qh, %kh, %cs, %bsin : tensor<?x4x?x16xbf16>, tensor<?x2x?x16xbf16>, tensor<1x?x16xbf16>
    liger.yield %qr, %kr : tensor<?x4x?x16xbf16>, tensor<?x2x?x16xbf16>
  }
  return %r#0, %r#1 : tensor<?x4x?x16xbf16>, tensor<?x2x?x16xbf16>
}

// -----

func.func @rope_extra_op(%x: tensor<?x?x64xbf16>, %y: tensor<?x?x64xbf16>, %wq: tensor<64x64xbf16>, %wk: tensor<32x64xbf16>, %cos: tensor<1x?x16xbf16>, %sin: tensor<1x?x16xbf16>) -> (tensor<?x4x?x16xbf16>, tensor<?x2x?x16xbf16>) {
  // expected-warning @+1 {{left for a later matmul template: 'liger.silu' is not part of a q/k projection pair with RoPE}}
  %r:2 = liger.fusion matmul(%x, %y, %wq, %wk, %cos, %sin) attributes {liger.kernel_config = #liger.kernel_config<kernel_template = matmul_wgmma, tile_m = 128, tile_n = 128, tile_k = 64, stages = 3>} : (tensor<?x?x64xbf16>, tensor<?x?x64xbf16>, tensor<64x64xbf16>, tensor<32x64xbf16>, tensor<1x?x16xbf16>, tensor<1x?x16xbf16>) -> (tensor<?x4x?x16xbf16>, tensor<?x2x?x16xbf16>) {
  ^bb0(%bx: tensor<?x?x64xbf16>, %by: tensor<?x?x64xbf16>, %bwq: tensor<64x64xbf16>, %bwk: tensor<32x64xbf16>, %bcos: tensor<1x?x16xbf16>, %bsin: tensor<1x?x16xbf16>):
    %c0 = arith.constant 0 : index
    %c1 = arith.constant 1 : index
    %q = liger.linear %bx, %bwq : tensor<?x?x64xbf16>, tensor<64x64xbf16>
    %k = liger.linear %bx, %bwk : tensor<?x?x64xbf16>, tensor<32x64xbf16>
    %s = liger.silu %q : tensor<?x?x64xbf16>
    %qb = tensor.dim %q, %c0 : tensor<?x?x64xbf16>
    %qt = tensor.dim %q, %c1 : tensor<?x?x64xbf16>
    %q4 = tensor.expand_shape %q [[0], [1], [2, 3]] output_shape [%qb, %qt, 4, 16] : tensor<?x?x64xbf16> into tensor<?x?x4x16xbf16>
    %k4 = tensor.expand_shape %k [[0], [1], [2, 3]] output_shape [%qb, %qt, 2, 16] : tensor<?x?x32xbf16> into tensor<?x?x2x16xbf16>
    %qi = tensor.empty(%qb, %qt) : tensor<?x4x?x16xbf16>
    %ki = tensor.empty(%qb, %qt) : tensor<?x2x?x16xbf16>
    %qh = linalg.transpose ins(%q4 : tensor<?x?x4x16xbf16>) outs(%qi : tensor<?x4x?x16xbf16>) permutation = [0, 2, 1, 3]
    %kh = linalg.transpose ins(%k4 : tensor<?x?x2x16xbf16>) outs(%ki : tensor<?x2x?x16xbf16>) permutation = [0, 2, 1, 3]
    %qr, %kr = liger.rope %qh, %kh, %bcos, %bsin : tensor<?x4x?x16xbf16>, tensor<?x2x?x16xbf16>, tensor<1x?x16xbf16>
    liger.yield %qr, %kr : tensor<?x4x?x16xbf16>, tensor<?x2x?x16xbf16>
  }
  return %r#0, %r#1 : tensor<?x4x?x16xbf16>, tensor<?x2x?x16xbf16>
}

// -----

func.func @rope_f32(%x: tensor<?x?x64xf32>, %y: tensor<?x?x64xf32>, %wq: tensor<64x64xf32>, %wk: tensor<32x64xf32>, %cos: tensor<1x?x16xf32>, %sin: tensor<1x?x16xf32>) -> (tensor<?x4x?x16xf32>, tensor<?x2x?x16xf32>) {
  // expected-warning @+1 {{left for a later matmul template: wgmma takes bf16 or f16 inputs}}
  %r:2 = liger.fusion matmul(%x, %y, %wq, %wk, %cos, %sin) attributes {liger.kernel_config = #liger.kernel_config<kernel_template = matmul_wgmma, tile_m = 128, tile_n = 128, tile_k = 32, stages = 3>} : (tensor<?x?x64xf32>, tensor<?x?x64xf32>, tensor<64x64xf32>, tensor<32x64xf32>, tensor<1x?x16xf32>, tensor<1x?x16xf32>) -> (tensor<?x4x?x16xf32>, tensor<?x2x?x16xf32>) {
  ^bb0(%bx: tensor<?x?x64xf32>, %by: tensor<?x?x64xf32>, %bwq: tensor<64x64xf32>, %bwk: tensor<32x64xf32>, %bcos: tensor<1x?x16xf32>, %bsin: tensor<1x?x16xf32>):
    %c0 = arith.constant 0 : index
    %c1 = arith.constant 1 : index
    %q = liger.linear %bx, %bwq : tensor<?x?x64xf32>, tensor<64x64xf32>
    %k = liger.linear %bx, %bwk : tensor<?x?x64xf32>, tensor<32x64xf32>
    %qb = tensor.dim %q, %c0 : tensor<?x?x64xf32>
    %qt = tensor.dim %q, %c1 : tensor<?x?x64xf32>
    %q4 = tensor.expand_shape %q [[0], [1], [2, 3]] output_shape [%qb, %qt, 4, 16] : tensor<?x?x64xf32> into tensor<?x?x4x16xf32>
    %k4 = tensor.expand_shape %k [[0], [1], [2, 3]] output_shape [%qb, %qt, 2, 16] : tensor<?x?x32xf32> into tensor<?x?x2x16xf32>
    %qi = tensor.empty(%qb, %qt) : tensor<?x4x?x16xf32>
    %ki = tensor.empty(%qb, %qt) : tensor<?x2x?x16xf32>
    %qh = linalg.transpose ins(%q4 : tensor<?x?x4x16xf32>) outs(%qi : tensor<?x4x?x16xf32>) permutation = [0, 2, 1, 3]
    %kh = linalg.transpose ins(%k4 : tensor<?x?x2x16xf32>) outs(%ki : tensor<?x2x?x16xf32>) permutation = [0, 2, 1, 3]
    %qr, %kr = liger.rope %qh, %kh, %bcos, %bsin : tensor<?x4x?x16xf32>, tensor<?x2x?x16xf32>, tensor<1x?x16xf32>
    liger.yield %qr, %kr : tensor<?x4x?x16xf32>, tensor<?x2x?x16xf32>
  }
  return %r#0, %r#1 : tensor<?x4x?x16xf32>, tensor<?x2x?x16xf32>
}

// -----

// On wgmma B's [tile_n, r] tile arrives by TMA swizzled by its rows: rank 48
// (96-byte rows) is no swizzle span, though a multiple of 16.
func.func @lora_rank48_wgmma(%x: tensor<?x64xbf16>, %w: tensor<64x64xbf16>, %a: tensor<48x64xbf16>, %b: tensor<64x48xbf16>) -> tensor<?x64xbf16> {
  // expected-warning @+1 {{LoRA rank 48 makes B's rows 96 bytes, not a TMA swizzle span (32, 64 or 128 bytes: rank 16, 32 or 64 on wgmma)}}
  %y = liger.fusion matmul(%x, %w, %a, %b) attributes {liger.kernel_config = #liger.kernel_config<kernel_template = matmul_wgmma, tile_m = 128, tile_n = 64, tile_k = 64, stages = 3>} : (tensor<?x64xbf16>, tensor<64x64xbf16>, tensor<48x64xbf16>, tensor<64x48xbf16>) -> tensor<?x64xbf16> {
  ^bb0(%i: tensor<?x64xbf16>, %j: tensor<64x64xbf16>, %k: tensor<48x64xbf16>, %l: tensor<64x48xbf16>):
    %p = liger.lora_linear %i, %j, %k, %l : tensor<?x64xbf16>, tensor<64x64xbf16>, tensor<48x64xbf16>, tensor<64x48xbf16>
    liger.yield %p : tensor<?x64xbf16>
  }
  return %y : tensor<?x64xbf16>
}

// -----

// Every result is written per element of the product: one that is not
// [rows, N] (here the bias, [N]) is left for a later template.
func.func @result_not_rows(%x: tensor<?x64xbf16>, %w: tensor<64x64xbf16>, %b: tensor<64xbf16>) -> (tensor<?x64xbf16>, tensor<64xbf16>) {
  // expected-warning @+1 {{result #1 (tensor<64xbf16>) is not [rows, N] like the product: the kernel writes its results per element of the product}}
  %y:2 = liger.fusion matmul(%x, %w, %b) attributes {liger.kernel_config = #liger.kernel_config<kernel_template = matmul_wgmma, tile_m = 128, tile_n = 64, tile_k = 64, stages = 3>} : (tensor<?x64xbf16>, tensor<64x64xbf16>, tensor<64xbf16>) -> (tensor<?x64xbf16>, tensor<64xbf16>) {
  ^bb0(%a: tensor<?x64xbf16>, %c: tensor<64x64xbf16>, %d: tensor<64xbf16>):
    %l = liger.linear %a, %c, %d : tensor<?x64xbf16>, tensor<64x64xbf16>, tensor<64xbf16>
    %e = liger.add %d, %d : tensor<64xbf16>
    liger.yield %l, %e : tensor<?x64xbf16>, tensor<64xbf16>
  }
  return %y#0, %y#1 : tensor<?x64xbf16>, tensor<64xbf16>
}

// -----

// A group input returned as it is (x, here [rows, N] since K = N) is not
// computed per element of the product: left, warned, no invalid epilogue.
func.func @result_is_x(%x: tensor<?x64xbf16>, %w: tensor<64x64xbf16>) -> (tensor<?x64xbf16>, tensor<?x64xbf16>) {
  // expected-warning @+1 {{result #1 is the group's input #0 as it is, which the kernel does not read per element of the product}}
  %y:2 = liger.fusion matmul(%x, %w) attributes {liger.kernel_config = #liger.kernel_config<kernel_template = matmul_wgmma, tile_m = 128, tile_n = 64, tile_k = 64, stages = 3>} : (tensor<?x64xbf16>, tensor<64x64xbf16>) -> (tensor<?x64xbf16>, tensor<?x64xbf16>) {
  ^bb0(%a: tensor<?x64xbf16>, %c: tensor<64x64xbf16>):
    %l = liger.linear %a, %c : tensor<?x64xbf16>, tensor<64x64xbf16>
    liger.yield %l, %a : tensor<?x64xbf16>, tensor<?x64xbf16>
  }
  return %y#0, %y#1 : tensor<?x64xbf16>, tensor<?x64xbf16>
}

// -----

// A lone projection whose value nothing reads (liger-lower-to-gpu before
// any canonicalization): its group would have no result to write.
func.func @dead_projection(%x: tensor<?x7x64xbf16>, %w: tensor<64x64xbf16>) {
  // expected-error @+1 {{'liger.fusion' op is a matmul group with no results: nothing reads its projections' values (canonicalize first to drop dead ops)}}
  %y = liger.linear %x, %w : tensor<?x7x64xbf16>, tensor<64x64xbf16>
  return
}

// -----

// A transposed weight is read MN-major by a lone projection: in a gate/up
// pair it is left for a later template.
func.func @transposed_weight_in_a_pair(%x: tensor<?x64xbf16>, %wg: tensor<64x128xbf16>, %wu: tensor<128x64xbf16>) -> tensor<?x128xbf16> {
  // expected-warning @+1 {{a transposed weight is read MN-major by one projection alone, as linalg.transpose [1, 0] of a group input that is not also a LoRA factor, into a tensor.empty, read by the projection only}}
  %y = liger.fusion matmul(%x, %wg, %wu) : (tensor<?x64xbf16>, tensor<64x128xbf16>, tensor<128x64xbf16>) -> tensor<?x128xbf16> {
  ^bb0(%a: tensor<?x64xbf16>, %b: tensor<64x128xbf16>, %c: tensor<128x64xbf16>):
    %e = tensor.empty() : tensor<128x64xbf16>
    %t = linalg.transpose ins(%b : tensor<64x128xbf16>) outs(%e : tensor<128x64xbf16>) permutation = [1, 0]
    %g = liger.linear %a, %t : tensor<?x64xbf16>, tensor<128x64xbf16>
    %u = liger.linear %a, %c : tensor<?x64xbf16>, tensor<128x64xbf16>
    %h = liger.swiglu %g, %u : tensor<?x128xbf16>
    liger.yield %h : tensor<?x128xbf16>
  }
  return %y : tensor<?x128xbf16>
}

// -----

// The transposed weight is also a result of the group: the transpose would
// be an op of the kernel's, which reads W in place instead.
func.func @transposed_weight_read_twice(%dy: tensor<?x64xbf16>, %w: tensor<64x128xbf16>) -> (tensor<?x128xbf16>, tensor<128x64xbf16>) {
  // expected-warning @+1 {{a transposed weight is read MN-major by one projection alone}}
  %y:2 = liger.fusion matmul(%w, %dy) : (tensor<64x128xbf16>, tensor<?x64xbf16>) -> (tensor<?x128xbf16>, tensor<128x64xbf16>) {
  ^bb0(%a: tensor<64x128xbf16>, %b: tensor<?x64xbf16>):
    %e = tensor.empty() : tensor<128x64xbf16>
    %t = linalg.transpose ins(%a : tensor<64x128xbf16>) outs(%e : tensor<128x64xbf16>) permutation = [1, 0]
    %l = liger.linear %b, %t : tensor<?x64xbf16>, tensor<128x64xbf16>
    liger.yield %l, %t : tensor<?x128xbf16>, tensor<128x64xbf16>
  }
  return %y#0, %y#1 : tensor<?x128xbf16>, tensor<128x64xbf16>
}
