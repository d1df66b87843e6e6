// One decoder layer of Llama-3-8B in the liger dialect, for a dynamic batch
// (B) and sequence length (T): hidden 4096, 32 query heads and 8 key/value
// heads of dimension 128 (grouped-query attention), MLP width 14336,
// RMSNorm eps 1e-5, bf16 throughout. The layout ops between the liger ops
// (splitting and merging heads) are upstream tensor/linalg ops.
//
//   h   = x + o_proj(attention(rope(q_proj(n1), k_proj(n1)), v_proj(n1)))
//         with n1 = rms_norm(x)
//   out = h + down_proj(swiglu(gate_proj(n2), up_proj(n2)))
//         with n2 = rms_norm(h)       (add + norm fused as liger.add_rms_norm)

func.func @llama3_8b_decoder_layer(
    %x: tensor<?x?x4096xbf16>,               // [B, T, hidden] residual stream
    %cos: tensor<1x?x128xbf16>,              // rotary tables [1, T, head_dim]
    %sin: tensor<1x?x128xbf16>,
    %input_norm_w: tensor<4096xbf16>,
    %wq: tensor<4096x4096xbf16>,
    %wk: tensor<1024x4096xbf16>,
    %wv: tensor<1024x4096xbf16>,
    %wo: tensor<4096x4096xbf16>,
    %post_norm_w: tensor<4096xbf16>,
    %w_gate: tensor<14336x4096xbf16>,
    %w_up: tensor<14336x4096xbf16>,
    %w_down: tensor<4096x14336xbf16>) -> tensor<?x?x4096xbf16> {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %b = tensor.dim %x, %c0 : tensor<?x?x4096xbf16>
  %t = tensor.dim %x, %c1 : tensor<?x?x4096xbf16>

  // --- self-attention block --------------------------------------------------
  %n1 = liger.rms_norm %x, %input_norm_w eps = 1.0e-5 : tensor<?x?x4096xbf16>, tensor<4096xbf16>
  %q = liger.linear %n1, %wq : tensor<?x?x4096xbf16>, tensor<4096x4096xbf16>
  %k = liger.linear %n1, %wk : tensor<?x?x4096xbf16>, tensor<1024x4096xbf16>
  %v = liger.linear %n1, %wv : tensor<?x?x4096xbf16>, tensor<1024x4096xbf16>

  // [B, T, H*D] -> [B, T, H, D] -> [B, H, T, D]
  %q4 = tensor.expand_shape %q [[0], [1], [2, 3]] output_shape [%b, %t, 32, 128]
      : tensor<?x?x4096xbf16> into tensor<?x?x32x128xbf16>
  %k4 = tensor.expand_shape %k [[0], [1], [2, 3]] output_shape [%b, %t, 8, 128]
      : tensor<?x?x1024xbf16> into tensor<?x?x8x128xbf16>
  %v4 = tensor.expand_shape %v [[0], [1], [2, 3]] output_shape [%b, %t, 8, 128]
      : tensor<?x?x1024xbf16> into tensor<?x?x8x128xbf16>
  %q_init = tensor.empty(%b, %t) : tensor<?x32x?x128xbf16>
  %kv_init = tensor.empty(%b, %t) : tensor<?x8x?x128xbf16>
  %qh = linalg.transpose ins(%q4 : tensor<?x?x32x128xbf16>) outs(%q_init : tensor<?x32x?x128xbf16>) permutation = [0, 2, 1, 3]
  %kh = linalg.transpose ins(%k4 : tensor<?x?x8x128xbf16>) outs(%kv_init : tensor<?x8x?x128xbf16>) permutation = [0, 2, 1, 3]
  %vh = linalg.transpose ins(%v4 : tensor<?x?x8x128xbf16>) outs(%kv_init : tensor<?x8x?x128xbf16>) permutation = [0, 2, 1, 3]

  %qr, %kr = liger.rope %qh, %kh, %cos, %sin
      : tensor<?x32x?x128xbf16>, tensor<?x8x?x128xbf16>, tensor<1x?x128xbf16>
  %attn = liger.attention %qr, %kr, %vh causal
      : tensor<?x32x?x128xbf16>, tensor<?x8x?x128xbf16>, tensor<?x8x?x128xbf16>

  // [B, H, T, D] -> [B, T, H, D] -> [B, T, H*D]
  %o_init = tensor.empty(%b, %t) : tensor<?x?x32x128xbf16>
  %o4 = linalg.transpose ins(%attn : tensor<?x32x?x128xbf16>) outs(%o_init : tensor<?x?x32x128xbf16>) permutation = [0, 2, 1, 3]
  %o = tensor.collapse_shape %o4 [[0], [1], [2, 3]] : tensor<?x?x32x128xbf16> into tensor<?x?x4096xbf16>
  %attn_out = liger.linear %o, %wo : tensor<?x?x4096xbf16>, tensor<4096x4096xbf16>

  // --- MLP block -------------------------------------------------------------
  %n2, %h = liger.add_rms_norm %attn_out, %x, %post_norm_w eps = 1.0e-5
      : tensor<?x?x4096xbf16>, tensor<4096xbf16>
  %gate = liger.linear %n2, %w_gate : tensor<?x?x4096xbf16>, tensor<14336x4096xbf16>
  %up = liger.linear %n2, %w_up : tensor<?x?x4096xbf16>, tensor<14336x4096xbf16>
  %act = liger.swiglu %gate, %up : tensor<?x?x14336xbf16>
  %down = liger.linear %act, %w_down : tensor<?x?x14336xbf16>, tensor<4096x14336xbf16>
  %out = liger.add %down, %h : tensor<?x?x4096xbf16>
  return %out : tensor<?x?x4096xbf16>
}
