// The projections of a Llama-3-8B layer through the experimental matmul
// templates (bench/matmul.py): pinned to mma.sync, and (the *_wg functions)
// with the configuration liger-select-kernel-config picks for sm_90a (wgmma). bench/build-bundles.sh compiles them
// with liger-compile --matmul-kernels.

func.func @o_proj(%x: tensor<?x4096xbf16>, %w: tensor<4096x4096xbf16>) -> tensor<?x4096xbf16> {
  %y = liger.fusion matmul(%x, %w) attributes {liger.kernel_config = {mma = "mma_sync", stages = 4 : i64, tile_k = 32 : i64, tile_m = 128 : i64, tile_n = 128 : i64}} : (tensor<?x4096xbf16>, tensor<4096x4096xbf16>) -> tensor<?x4096xbf16> {
  ^bb0(%a: tensor<?x4096xbf16>, %b: tensor<4096x4096xbf16>):
    %l = liger.linear %a, %b : tensor<?x4096xbf16>, tensor<4096x4096xbf16>
    liger.yield %l : tensor<?x4096xbf16>
  }
  return %y : tensor<?x4096xbf16>
}

func.func @up_proj(%x: tensor<?x4096xbf16>, %w: tensor<14336x4096xbf16>) -> tensor<?x14336xbf16> {
  %y = liger.fusion matmul(%x, %w) attributes {liger.kernel_config = {mma = "mma_sync", stages = 4 : i64, tile_k = 32 : i64, tile_m = 128 : i64, tile_n = 128 : i64}} : (tensor<?x4096xbf16>, tensor<14336x4096xbf16>) -> tensor<?x14336xbf16> {
  ^bb0(%a: tensor<?x4096xbf16>, %b: tensor<14336x4096xbf16>):
    %l = liger.linear %a, %b : tensor<?x4096xbf16>, tensor<14336x4096xbf16>
    liger.yield %l : tensor<?x14336xbf16>
  }
  return %y : tensor<?x14336xbf16>
}

func.func @down_proj(%x: tensor<?x14336xbf16>, %w: tensor<4096x14336xbf16>) -> tensor<?x4096xbf16> {
  %y = liger.fusion matmul(%x, %w) attributes {liger.kernel_config = {mma = "mma_sync", stages = 4 : i64, tile_k = 32 : i64, tile_m = 128 : i64, tile_n = 128 : i64}} : (tensor<?x14336xbf16>, tensor<4096x14336xbf16>) -> tensor<?x4096xbf16> {
  ^bb0(%a: tensor<?x14336xbf16>, %b: tensor<4096x14336xbf16>):
    %l = liger.linear %a, %b : tensor<?x14336xbf16>, tensor<4096x14336xbf16>
    liger.yield %l : tensor<?x4096xbf16>
  }
  return %y : tensor<?x4096xbf16>
}

func.func @gate_up_proj(%x: tensor<?x4096xbf16>, %g: tensor<14336x4096xbf16>, %u: tensor<14336x4096xbf16>) -> tensor<?x14336xbf16> {
  %y = liger.fusion matmul(%x, %g, %u) attributes {liger.kernel_config = {mma = "mma_sync", stages = 4 : i64, tile_k = 32 : i64, tile_m = 128 : i64, tile_n = 64 : i64}} : (tensor<?x4096xbf16>, tensor<14336x4096xbf16>, tensor<14336x4096xbf16>) -> tensor<?x14336xbf16> {
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

func.func @down_dw_wg(%dy: tensor<?x4096xbf16>, %x: tensor<?x14336xbf16>) -> tensor<4096x14336xbf16> {
  %dw = liger.linear_grad_weight %dy, %x : tensor<?x4096xbf16>, tensor<?x14336xbf16>
  return %dw : tensor<4096x14336xbf16>
}

func.func @down_dw_acc_wg(%dy: tensor<?x4096xbf16>, %x: tensor<?x14336xbf16>, %acc: tensor<4096x14336xf32>) -> tensor<4096x14336xf32> {
  %dw = liger.linear_grad_weight %dy, %x accumulate %acc : tensor<?x4096xbf16>, tensor<?x14336xbf16>, tensor<4096x14336xf32>
  return %dw : tensor<4096x14336xf32>
}
