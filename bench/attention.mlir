// The attention shapes of bench/attention.py: Llama-3-8B's (32 query heads
// over 8 key/value heads, head dimension 128, causal), the same without
// the mask, with a sliding window of 1024 keys (Gemma 3's local layers'
// window; bench/attention.py's WINDOW) and causal with Gemma 2's logit
// softcap of 50 (bench/attention.py's SOFTCAP), bf16: the forward, and for training
// the forward with its lse and the backward.
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

// Training: the forward with its lse, and the backward from the saved
// output and lse.
func.func @llama_causal_lse(%q: tensor<?x32x?x128xbf16>, %k: tensor<?x8x?x128xbf16>,
                            %v: tensor<?x8x?x128xbf16>)
    -> (tensor<?x32x?x128xbf16>, tensor<?x32x?xf32>) {
  %o, %lse = liger.attention %q, %k, %v causal return_lse
      : tensor<?x32x?x128xbf16>, tensor<?x8x?x128xbf16>, tensor<?x8x?x128xbf16>
  return %o, %lse : tensor<?x32x?x128xbf16>, tensor<?x32x?xf32>
}

func.func @llama_full_lse(%q: tensor<?x32x?x128xbf16>, %k: tensor<?x8x?x128xbf16>,
                          %v: tensor<?x8x?x128xbf16>)
    -> (tensor<?x32x?x128xbf16>, tensor<?x32x?xf32>) {
  %o, %lse = liger.attention %q, %k, %v return_lse
      : tensor<?x32x?x128xbf16>, tensor<?x8x?x128xbf16>, tensor<?x8x?x128xbf16>
  return %o, %lse : tensor<?x32x?x128xbf16>, tensor<?x32x?xf32>
}

func.func @llama_causal_grad(%do: tensor<?x32x?x128xbf16>, %q: tensor<?x32x?x128xbf16>,
                             %k: tensor<?x8x?x128xbf16>, %v: tensor<?x8x?x128xbf16>,
                             %o: tensor<?x32x?x128xbf16>, %lse: tensor<?x32x?xf32>)
    -> (tensor<?x32x?x128xbf16>, tensor<?x8x?x128xbf16>, tensor<?x8x?x128xbf16>) {
  %dq, %dk, %dv = liger.attention_grad %do, %q, %k, %v
      saved(%o, %lse : tensor<?x32x?x128xbf16>, tensor<?x32x?xf32>) causal
      : tensor<?x32x?x128xbf16>, tensor<?x32x?x128xbf16>, tensor<?x8x?x128xbf16>, tensor<?x8x?x128xbf16>
  return %dq, %dk, %dv : tensor<?x32x?x128xbf16>, tensor<?x8x?x128xbf16>, tensor<?x8x?x128xbf16>
}

func.func @llama_full_grad(%do: tensor<?x32x?x128xbf16>, %q: tensor<?x32x?x128xbf16>,
                           %k: tensor<?x8x?x128xbf16>, %v: tensor<?x8x?x128xbf16>,
                           %o: tensor<?x32x?x128xbf16>, %lse: tensor<?x32x?xf32>)
    -> (tensor<?x32x?x128xbf16>, tensor<?x8x?x128xbf16>, tensor<?x8x?x128xbf16>) {
  %dq, %dk, %dv = liger.attention_grad %do, %q, %k, %v
      saved(%o, %lse : tensor<?x32x?x128xbf16>, tensor<?x32x?xf32>)
      : tensor<?x32x?x128xbf16>, tensor<?x32x?x128xbf16>, tensor<?x8x?x128xbf16>, tensor<?x8x?x128xbf16>
  return %dq, %dk, %dv : tensor<?x32x?x128xbf16>, tensor<?x8x?x128xbf16>, tensor<?x8x?x128xbf16>
}

func.func @llama_window(%q: tensor<?x32x?x128xbf16>, %k: tensor<?x8x?x128xbf16>,
                        %v: tensor<?x8x?x128xbf16>) -> tensor<?x32x?x128xbf16> {
  %o = liger.attention %q, %k, %v causal window = 1024
      : tensor<?x32x?x128xbf16>, tensor<?x8x?x128xbf16>, tensor<?x8x?x128xbf16>
  return %o : tensor<?x32x?x128xbf16>
}

func.func @llama_window_lse(%q: tensor<?x32x?x128xbf16>, %k: tensor<?x8x?x128xbf16>,
                            %v: tensor<?x8x?x128xbf16>)
    -> (tensor<?x32x?x128xbf16>, tensor<?x32x?xf32>) {
  %o, %lse = liger.attention %q, %k, %v causal window = 1024 return_lse
      : tensor<?x32x?x128xbf16>, tensor<?x8x?x128xbf16>, tensor<?x8x?x128xbf16>
  return %o, %lse : tensor<?x32x?x128xbf16>, tensor<?x32x?xf32>
}

func.func @llama_window_grad(%do: tensor<?x32x?x128xbf16>, %q: tensor<?x32x?x128xbf16>,
                             %k: tensor<?x8x?x128xbf16>, %v: tensor<?x8x?x128xbf16>,
                             %o: tensor<?x32x?x128xbf16>, %lse: tensor<?x32x?xf32>)
    -> (tensor<?x32x?x128xbf16>, tensor<?x8x?x128xbf16>, tensor<?x8x?x128xbf16>) {
  %dq, %dk, %dv = liger.attention_grad %do, %q, %k, %v
      saved(%o, %lse : tensor<?x32x?x128xbf16>, tensor<?x32x?xf32>) causal window = 1024
      : tensor<?x32x?x128xbf16>, tensor<?x32x?x128xbf16>, tensor<?x8x?x128xbf16>, tensor<?x8x?x128xbf16>
  return %dq, %dk, %dv : tensor<?x32x?x128xbf16>, tensor<?x8x?x128xbf16>, tensor<?x8x?x128xbf16>
}

// Gemma 2's logit softcap (c = 50) over Llama's heads, causal.
func.func @llama_softcap(%q: tensor<?x32x?x128xbf16>, %k: tensor<?x8x?x128xbf16>,
                         %v: tensor<?x8x?x128xbf16>) -> tensor<?x32x?x128xbf16> {
  %o = liger.attention %q, %k, %v causal softcap = 50.0
      : tensor<?x32x?x128xbf16>, tensor<?x8x?x128xbf16>, tensor<?x8x?x128xbf16>
  return %o : tensor<?x32x?x128xbf16>
}

func.func @llama_softcap_lse(%q: tensor<?x32x?x128xbf16>, %k: tensor<?x8x?x128xbf16>,
                             %v: tensor<?x8x?x128xbf16>)
    -> (tensor<?x32x?x128xbf16>, tensor<?x32x?xf32>) {
  %o, %lse = liger.attention %q, %k, %v causal softcap = 50.0 return_lse
      : tensor<?x32x?x128xbf16>, tensor<?x8x?x128xbf16>, tensor<?x8x?x128xbf16>
  return %o, %lse : tensor<?x32x?x128xbf16>, tensor<?x32x?xf32>
}

func.func @llama_softcap_grad(%do: tensor<?x32x?x128xbf16>, %q: tensor<?x32x?x128xbf16>,
                              %k: tensor<?x8x?x128xbf16>, %v: tensor<?x8x?x128xbf16>,
                              %o: tensor<?x32x?x128xbf16>, %lse: tensor<?x32x?xf32>)
    -> (tensor<?x32x?x128xbf16>, tensor<?x8x?x128xbf16>, tensor<?x8x?x128xbf16>) {
  %dq, %dk, %dv = liger.attention_grad %do, %q, %k, %v
      saved(%o, %lse : tensor<?x32x?x128xbf16>, tensor<?x32x?xf32>) causal softcap = 50.0
      : tensor<?x32x?x128xbf16>, tensor<?x32x?x128xbf16>, tensor<?x8x?x128xbf16>, tensor<?x8x?x128xbf16>
  return %dq, %dk, %dv : tensor<?x32x?x128xbf16>, tensor<?x8x?x128xbf16>, tensor<?x8x?x128xbf16>
}
