// The projections of a Llama-3-8B layer through the matmul
// templates (bench/matmul.py): pinned to mma.sync, and (the *_wg functions)
// with the configuration liger-select-kernel-config picks for sm_90a (wgmma). bench/build-bundles.sh compiles them
// with liger-compile (matmul groups compile by default).

func.func @o_proj(%x: tensor<?x4096xbf16>, %w: tensor<4096x4096xbf16>) -> tensor<?x4096xbf16> {
  %y = liger.fusion matmul(%x, %w) attributes {liger.kernel_config = #liger.kernel_config<kernel_template = matmul_mma_sync, tile_m = 128, tile_n = 128, tile_k = 32, stages = 4>} : (tensor<?x4096xbf16>, tensor<4096x4096xbf16>) -> tensor<?x4096xbf16> {
  ^bb0(%a: tensor<?x4096xbf16>, %b: tensor<4096x4096xbf16>):
    %l = liger.linear %a, %b : tensor<?x4096xbf16>, tensor<4096x4096xbf16>
    liger.yield %l : tensor<?x4096xbf16>
  }
  return %y : tensor<?x4096xbf16>
}

func.func @up_proj(%x: tensor<?x4096xbf16>, %w: tensor<14336x4096xbf16>) -> tensor<?x14336xbf16> {
  %y = liger.fusion matmul(%x, %w) attributes {liger.kernel_config = #liger.kernel_config<kernel_template = matmul_mma_sync, tile_m = 128, tile_n = 128, tile_k = 32, stages = 4>} : (tensor<?x4096xbf16>, tensor<14336x4096xbf16>) -> tensor<?x14336xbf16> {
  ^bb0(%a: tensor<?x4096xbf16>, %b: tensor<14336x4096xbf16>):
    %l = liger.linear %a, %b : tensor<?x4096xbf16>, tensor<14336x4096xbf16>
    liger.yield %l : tensor<?x14336xbf16>
  }
  return %y : tensor<?x14336xbf16>
}

func.func @down_proj(%x: tensor<?x14336xbf16>, %w: tensor<4096x14336xbf16>) -> tensor<?x4096xbf16> {
  %y = liger.fusion matmul(%x, %w) attributes {liger.kernel_config = #liger.kernel_config<kernel_template = matmul_mma_sync, tile_m = 128, tile_n = 128, tile_k = 32, stages = 4>} : (tensor<?x14336xbf16>, tensor<4096x14336xbf16>) -> tensor<?x4096xbf16> {
  ^bb0(%a: tensor<?x14336xbf16>, %b: tensor<4096x14336xbf16>):
    %l = liger.linear %a, %b : tensor<?x14336xbf16>, tensor<4096x14336xbf16>
    liger.yield %l : tensor<?x4096xbf16>
  }
  return %y : tensor<?x4096xbf16>
}

func.func @gate_up_proj(%x: tensor<?x4096xbf16>, %g: tensor<14336x4096xbf16>, %u: tensor<14336x4096xbf16>) -> tensor<?x14336xbf16> {
  %y = liger.fusion matmul(%x, %g, %u) attributes {liger.kernel_config = #liger.kernel_config<kernel_template = matmul_mma_sync, tile_m = 128, tile_n = 64, tile_k = 32, stages = 4>} : (tensor<?x4096xbf16>, tensor<14336x4096xbf16>, tensor<14336x4096xbf16>) -> tensor<?x14336xbf16> {
  ^bb0(%a: tensor<?x4096xbf16>, %b: tensor<14336x4096xbf16>, %c: tensor<14336x4096xbf16>):
    %lg = liger.linear %a, %b : tensor<?x4096xbf16>, tensor<14336x4096xbf16>
    %lu = liger.linear %a, %c : tensor<?x4096xbf16>, tensor<14336x4096xbf16>
    %s = liger.swiglu %lg, %lu : tensor<?x14336xbf16>
    liger.yield %s : tensor<?x14336xbf16>
  }
  return %y : tensor<?x14336xbf16>
}

func.func @o_proj_wg(%x: tensor<?x4096xbf16>, %w: tensor<4096x4096xbf16>) -> tensor<?x4096xbf16> {
  %y = liger.fusion matmul(%x, %w) : (tensor<?x4096xbf16>, tensor<4096x4096xbf16>) -> tensor<?x4096xbf16> {
  ^bb0(%a: tensor<?x4096xbf16>, %b: tensor<4096x4096xbf16>):
    %l = liger.linear %a, %b : tensor<?x4096xbf16>, tensor<4096x4096xbf16>
    liger.yield %l : tensor<?x4096xbf16>
  }
  return %y : tensor<?x4096xbf16>
}

func.func @up_proj_wg(%x: tensor<?x4096xbf16>, %w: tensor<14336x4096xbf16>) -> tensor<?x14336xbf16> {
  %y = liger.fusion matmul(%x, %w) : (tensor<?x4096xbf16>, tensor<14336x4096xbf16>) -> tensor<?x14336xbf16> {
  ^bb0(%a: tensor<?x4096xbf16>, %b: tensor<14336x4096xbf16>):
    %l = liger.linear %a, %b : tensor<?x4096xbf16>, tensor<14336x4096xbf16>
    liger.yield %l : tensor<?x14336xbf16>
  }
  return %y : tensor<?x14336xbf16>
}

func.func @down_proj_wg(%x: tensor<?x14336xbf16>, %w: tensor<4096x14336xbf16>) -> tensor<?x4096xbf16> {
  %y = liger.fusion matmul(%x, %w) : (tensor<?x14336xbf16>, tensor<4096x14336xbf16>) -> tensor<?x4096xbf16> {
  ^bb0(%a: tensor<?x14336xbf16>, %b: tensor<4096x14336xbf16>):
    %l = liger.linear %a, %b : tensor<?x14336xbf16>, tensor<4096x14336xbf16>
    liger.yield %l : tensor<?x4096xbf16>
  }
  return %y : tensor<?x4096xbf16>
}

func.func @gate_up_proj_wg(%x: tensor<?x4096xbf16>, %g: tensor<14336x4096xbf16>, %u: tensor<14336x4096xbf16>) -> tensor<?x14336xbf16> {
  %y = liger.fusion matmul(%x, %g, %u) : (tensor<?x4096xbf16>, tensor<14336x4096xbf16>, tensor<14336x4096xbf16>) -> tensor<?x14336xbf16> {
  ^bb0(%a: tensor<?x4096xbf16>, %b: tensor<14336x4096xbf16>, %c: tensor<14336x4096xbf16>):
    %lg = liger.linear %a, %b : tensor<?x4096xbf16>, tensor<14336x4096xbf16>
    %lu = liger.linear %a, %c : tensor<?x4096xbf16>, tensor<14336x4096xbf16>
    %s = liger.swiglu %lg, %lu : tensor<?x14336xbf16>
    liger.yield %s : tensor<?x14336xbf16>
  }
  return %y : tensor<?x14336xbf16>
}

// RMSNorm folded into the projection that follows it (wgmma only).
func.func @norm_proj_wg(%x: tensor<?x4096xbf16>, %g: tensor<4096xbf16>, %w: tensor<4096x4096xbf16>) -> tensor<?x4096xbf16> {
  %y = liger.fusion matmul(%x, %g, %w) : (tensor<?x4096xbf16>, tensor<4096xbf16>, tensor<4096x4096xbf16>) -> tensor<?x4096xbf16> {
  ^bb0(%a: tensor<?x4096xbf16>, %b: tensor<4096xbf16>, %c: tensor<4096x4096xbf16>):
    %n = liger.rms_norm %a, %b eps = 1.0e-5 : tensor<?x4096xbf16>, tensor<4096xbf16>
    %l = liger.linear %n, %c : tensor<?x4096xbf16>, tensor<4096x4096xbf16>
    liger.yield %l : tensor<?x4096xbf16>
  }
  return %y : tensor<?x4096xbf16>
}

// A rank-16 LoRA projection (PEFT's scale 2) in one kernel (wgmma only).
func.func @lora_proj_wg(%x: tensor<?x4096xbf16>, %w: tensor<4096x4096xbf16>, %a: tensor<16x4096xbf16>, %b: tensor<4096x16xbf16>) -> tensor<?x4096xbf16> {
  %y = liger.fusion matmul(%x, %w, %a, %b) : (tensor<?x4096xbf16>, tensor<4096x4096xbf16>, tensor<16x4096xbf16>, tensor<4096x16xbf16>) -> tensor<?x4096xbf16> {
  ^bb0(%i: tensor<?x4096xbf16>, %j: tensor<4096x4096xbf16>, %k: tensor<16x4096xbf16>, %l: tensor<4096x16xbf16>):
    %p = liger.lora_linear %i, %j, %k, %l scale = 2.0 : tensor<?x4096xbf16>, tensor<4096x4096xbf16>, tensor<16x4096xbf16>, tensor<4096x16xbf16>
    liger.yield %p : tensor<?x4096xbf16>
  }
  return %y : tensor<?x4096xbf16>
}

// The down projection's backward (wgmma only): dx = dy · W [M, 14336], and
// dW = dyᵀ · x [4096, 14336] over the tokens, in bf16 and into an f32
// buffer. Lone ops: liger-lower-to-gpu makes each a matmul group.
func.func @down_dx_wg(%dy: tensor<?x4096xbf16>, %w: tensor<4096x14336xbf16>) -> tensor<?x14336xbf16> {
  %dx = liger.linear_grad_input %dy, %w : tensor<?x4096xbf16>, tensor<4096x14336xbf16>
  return %dx : tensor<?x14336xbf16>
}

// The 4096 x 4096 projection's dx (the LoRA dx row's plain product).
func.func @o_dx_wg(%dy: tensor<?x4096xbf16>, %w: tensor<4096x4096xbf16>) -> tensor<?x4096xbf16> {
  %dx = liger.linear_grad_input %dy, %w : tensor<?x4096xbf16>, tensor<4096x4096xbf16>
  return %dx : tensor<?x4096xbf16>
}

func.func @down_dw_wg(%dy: tensor<?x4096xbf16>, %x: tensor<?x14336xbf16>) -> tensor<4096x14336xbf16> {
  %dw = liger.linear_grad_weight %dy, %x : tensor<?x4096xbf16>, tensor<?x14336xbf16>
  return %dw : tensor<4096x14336xbf16>
}

func.func @down_dw_acc_wg(%dy: tensor<?x4096xbf16>, %x: tensor<?x14336xbf16>, %acc: tensor<4096x14336xf32>) -> tensor<4096x14336xf32> {
  %dw = liger.linear_grad_weight %dy, %x accumulate %acc : tensor<?x4096xbf16>, tensor<?x14336xbf16>, tensor<4096x14336xf32>
  return %dw : tensor<4096x14336xf32>
}

// Llama's q/k projections after the input RMSNorm with RoPE (one kernel
// through liger-fuse-qkv-rope and, with --norm-prologue, which
// bench/build-bundles.sh passes, liger-fuse-norm-linear), and the plain q|k projection of the same
// width ([Wq; Wk], 5120 columns) for the issue's "≤ 1.05× the plain QKV
// matmul" comparison.
func.func @qk_rope_wg(%x: tensor<?x?x4096xbf16>, %g: tensor<4096xbf16>, %wq: tensor<4096x4096xbf16>,
                      %wk: tensor<1024x4096xbf16>, %cos: tensor<1x?x128xbf16>, %sin: tensor<1x?x128xbf16>)
    -> (tensor<?x32x?x128xbf16>, tensor<?x8x?x128xbf16>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %b = tensor.dim %x, %c0 : tensor<?x?x4096xbf16>
  %t = tensor.dim %x, %c1 : tensor<?x?x4096xbf16>
  %n = liger.rms_norm %x, %g eps = 1.0e-5 : tensor<?x?x4096xbf16>, tensor<4096xbf16>
  %q = liger.linear %n, %wq : tensor<?x?x4096xbf16>, tensor<4096x4096xbf16>
  %k = liger.linear %n, %wk : tensor<?x?x4096xbf16>, tensor<1024x4096xbf16>
  %q4 = tensor.expand_shape %q [[0], [1], [2, 3]] output_shape [%b, %t, 32, 128] : tensor<?x?x4096xbf16> into tensor<?x?x32x128xbf16>
  %k4 = tensor.expand_shape %k [[0], [1], [2, 3]] output_shape [%b, %t, 8, 128] : tensor<?x?x1024xbf16> into tensor<?x?x8x128xbf16>
  %qi = tensor.empty(%b, %t) : tensor<?x32x?x128xbf16>
  %ki = tensor.empty(%b, %t) : tensor<?x8x?x128xbf16>
  %qh = linalg.transpose ins(%q4 : tensor<?x?x32x128xbf16>) outs(%qi : tensor<?x32x?x128xbf16>) permutation = [0, 2, 1, 3]
  %kh = linalg.transpose ins(%k4 : tensor<?x?x8x128xbf16>) outs(%ki : tensor<?x8x?x128xbf16>) permutation = [0, 2, 1, 3]
  %qr, %kr = liger.rope %qh, %kh, %cos, %sin : tensor<?x32x?x128xbf16>, tensor<?x8x?x128xbf16>, tensor<1x?x128xbf16>
  return %qr, %kr : tensor<?x32x?x128xbf16>, tensor<?x8x?x128xbf16>
}

func.func @qk_plain_wg(%x: tensor<?x4096xbf16>, %w: tensor<5120x4096xbf16>) -> tensor<?x5120xbf16> {
  %y = liger.linear %x, %w : tensor<?x4096xbf16>, tensor<5120x4096xbf16>
  return %y : tensor<?x5120xbf16>
}

// What liger-compile emits without --norm-prologue, measured against the
// fold: our rowwise RMSNorm kernel writes the normalized x, then the plain
// projection (o_proj_wg) or the q/k projection with RoPE and no norm reads
// it.
func.func @norm_pre(%x: tensor<?x4096xbf16>, %g: tensor<4096xbf16>) -> tensor<?x4096xbf16> {
  %y = liger.rms_norm %x, %g eps = 1.0e-5 : tensor<?x4096xbf16>, tensor<4096xbf16>
  return %y : tensor<?x4096xbf16>
}

func.func @qk_rope_only_wg(%x: tensor<?x?x4096xbf16>, %wq: tensor<4096x4096xbf16>,
                           %wk: tensor<1024x4096xbf16>, %cos: tensor<1x?x128xbf16>, %sin: tensor<1x?x128xbf16>)
    -> (tensor<?x32x?x128xbf16>, tensor<?x8x?x128xbf16>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %b = tensor.dim %x, %c0 : tensor<?x?x4096xbf16>
  %t = tensor.dim %x, %c1 : tensor<?x?x4096xbf16>
  %q = liger.linear %x, %wq : tensor<?x?x4096xbf16>, tensor<4096x4096xbf16>
  %k = liger.linear %x, %wk : tensor<?x?x4096xbf16>, tensor<1024x4096xbf16>
  %q4 = tensor.expand_shape %q [[0], [1], [2, 3]] output_shape [%b, %t, 32, 128] : tensor<?x?x4096xbf16> into tensor<?x?x32x128xbf16>
  %k4 = tensor.expand_shape %k [[0], [1], [2, 3]] output_shape [%b, %t, 8, 128] : tensor<?x?x1024xbf16> into tensor<?x?x8x128xbf16>
  %qi = tensor.empty(%b, %t) : tensor<?x32x?x128xbf16>
  %ki = tensor.empty(%b, %t) : tensor<?x8x?x128xbf16>
  %qh = linalg.transpose ins(%q4 : tensor<?x?x32x128xbf16>) outs(%qi : tensor<?x32x?x128xbf16>) permutation = [0, 2, 1, 3]
  %kh = linalg.transpose ins(%k4 : tensor<?x?x8x128xbf16>) outs(%ki : tensor<?x8x?x128xbf16>) permutation = [0, 2, 1, 3]
  %qr, %kr = liger.rope %qh, %kh, %cos, %sin : tensor<?x32x?x128xbf16>, tensor<?x8x?x128xbf16>, tensor<1x?x128xbf16>
  return %qr, %kr : tensor<?x32x?x128xbf16>, tensor<?x8x?x128xbf16>
}

// The gated MLP's backward in one kernel: dh = dy · W_down with SwiGLU's
// gradient in the epilogue, writing dgate and dup (liger-compile fuses
// them by default: liger-fuse's gradient epilogues).
func.func @mlp_bwd_wg(%dy: tensor<?x4096xbf16>, %w: tensor<4096x14336xbf16>, %g: tensor<?x14336xbf16>,
                      %u: tensor<?x14336xbf16>) -> (tensor<?x14336xbf16>, tensor<?x14336xbf16>) {
  %dh = liger.linear_grad_input %dy, %w : tensor<?x4096xbf16>, tensor<4096x14336xbf16>
  %dg, %du = liger.swiglu_grad %dh, %g, %u : tensor<?x14336xbf16>
  return %dg, %du : tensor<?x14336xbf16>, tensor<?x14336xbf16>
}

// The gate/up pair of a training step: gate and up kept for the backward,
// written beside the activation (one kernel of three results).
func.func @gate_up_keeps_wg(%x: tensor<?x4096xbf16>, %wg: tensor<14336x4096xbf16>, %wu: tensor<14336x4096xbf16>)
    -> (tensor<?x14336xbf16>, tensor<?x14336xbf16>, tensor<?x14336xbf16>) {
  %g = liger.linear %x, %wg : tensor<?x4096xbf16>, tensor<14336x4096xbf16>
  %u = liger.linear %x, %wu : tensor<?x4096xbf16>, tensor<14336x4096xbf16>
  %h = liger.swiglu %g, %u : tensor<?x14336xbf16>
  return %g, %u, %h : tensor<?x14336xbf16>, tensor<?x14336xbf16>, tensor<?x14336xbf16>
}
