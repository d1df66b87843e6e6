// The attention shapes of bench/attention.py: Llama-3-8B's (32 query heads
// over 8 key/value heads, head dimension 128, causal) and the same
// without the mask, bf16.
func.func @llama_causal(%q: tensor<?x32x?x128xbf16>, %k: tensor<?x8x?x128xbf16>,
                        %v: tensor<?x8x?x128xbf16>) -> tensor<?x32x?x128xbf16> {
  %o = liger.attention %q, %k, %v causal
      : tensor<?x32x?x128xbf16>, tensor<?x8x?x128xbf16>, tensor<?x8x?x128xbf16>
  return %o : tensor<?x32x?x128xbf16>
}

func.func @llama_full(%q: tensor<?x32x?x128xbf16>, %k: tensor<?x8x?x128xbf16>,
                      %v: tensor<?x8x?x128xbf16>) -> tensor<?x32x?x128xbf16> {
  %o = liger.attention %q, %k, %v
      : tensor<?x32x?x128xbf16>, tensor<?x8x?x128xbf16>, tensor<?x8x?x128xbf16>
  return %o : tensor<?x32x?x128xbf16>
}
