"""The liger.ops.attention configurations of test_ops_attention_gpu.py, which
scripts/build-gpu-bundles.sh precompiles (LIGER_OPS_BUNDLES): importable
without torch or a GPU."""

from liger import ops

# name -> (query heads, key/value heads, head dimension, causal, scale or
# None, dtype, sliding window or None, softcap or None): Llama-3-8B's heads (GQA 4, D 128,
# causal), GQA 4 at D 64 in f16 without the mask, multi-head causal with a
# scale of its own, D 256 (Gemma's), whose backward the template does not
# take (a call that needs gradients runs PyTorch's SDPA; one that needs
# none, liger's forward), and a sliding window of 300 keys (Gemma 3's local
# layers' kind) over Llama's heads, and a softcap of 2 (Gemma 2's kind,
# below the scores' spread on these inputs) with a scale at D 64.
CASES = {
    "llama_gqa4_causal_d128_bf16": (32, 8, 128, True, None, "bf16", None, None),
    "gqa4_d64_f16": (8, 2, 64, False, None, "f16", None, None),
    "mha_causal_scale_d64_bf16": (4, 4, 64, True, 0.1, "bf16", None, None),
    "gqa4_causal_d256_bf16": (8, 2, 256, True, None, "bf16", None, None),
    "gqa4_window300_d128_bf16": (32, 8, 128, True, None, "bf16", 300, None),
    "gqa2_softcap2_scale_d64_bf16": (8, 4, 64, True, 0.2, "bf16", None, 2.0),
}
# (batch, sequence): one token, an odd length (a partial 128-row tile and a
# partial key block), 1000 (several tiles, a partial last one).
SHAPES = [(1, 1), (2, 77), (1, 1000)]


def spec(name, target="sm_90a"):
    hq, hkv, d, causal, scale, dt, window, softcap = CASES[name]
    return ops.attention_spec(hq, hkv, d, dt, causal, scale, window, softcap, target=target)


def specs():
    """Every case's spec (sm_90a): what the GPU suite loads by key."""
    return [spec(name) for name in sorted(CASES)]
