"""The bundled Llama-3-8B decoder layer, scaled down, on the CPU oracle.

The example file is rewritten to hidden 64, 4 query heads and 2 key/value
heads of dimension 16 and MLP width 96 (same ops, same layout ops), run on
random bf16 weights through liger-cpu-runner, and compared with a float64
NumPy transcription of the layer that rounds to bf16 wherever an op returns
bf16. This is the whole-graph check later fusion passes reuse: a fused layer
must give what this one gives.
"""

import os
import re

import numpy as np
import pytest

import refs
from liger.reference import assert_close, round_to, run_cpu, to_bf16

EXAMPLE = os.path.join(os.path.dirname(__file__), "..", "..", "examples",
                       "llama3_8b_decoder_layer.mlir")
HIDDEN, HEADS, KV_HEADS, HEAD_DIM, MLP = 64, 4, 2, 16, 96


def tiny_layer() -> str:
    text = open(EXAMPLE).read()
    # Sizes as they appear in types (between 'x'/'<' and 'x') and in
    # output_shape lists; longest first so 14336 is not read as 1433 + 6.
    sizes = {"14336": MLP, "4096": HIDDEN, "1024": KV_HEADS * HEAD_DIM, "128": HEAD_DIM,
             "32": HEADS, "8": KV_HEADS}
    # Zero-width context, so adjacent sizes (x32x128x) match in one pass and
    # no replaced size is replaced again.
    text = re.sub(r"(?<=[<x\[ ])(14336|4096|1024|128|32|8)(?=[x,\]])",
                  lambda m: str(sizes[m.group(1)]), text)
    assert "4096" not in text and "14336" not in text
    return text


def bf(x):
    return round_to(x, "bf16")


def reference_layer(x, cos, sin, wn1, wq, wk, wv, wo, wn2, wg, wu, wd):
    b, t, _ = x.shape
    n1 = refs.rms_norm(x, wn1, 1e-5, 0.0, "llama", "bf16", "bf16")[0]
    n1 = bf(n1)
    q, k, v = bf(n1 @ wq.T), bf(n1 @ wk.T), bf(n1 @ wv.T)
    heads = lambda m, h: m.reshape(b, t, h, HEAD_DIM).transpose(0, 2, 1, 3)
    qh, kh, vh = heads(q, HEADS), heads(k, KV_HEADS), heads(v, KV_HEADS)
    qr, kr = bf(refs.rope(qh, cos, sin)), bf(refs.rope(kh, cos, sin))
    attn = bf(refs.attention(qr, kr, vh, causal=True))
    o = attn.transpose(0, 2, 1, 3).reshape(b, t, HIDDEN)
    attn_out = bf(o @ wo.T)
    h = bf(attn_out + x)
    n2 = bf(refs.rms_norm(h, wn2, 1e-5, 0.0, "llama", "bf16", "bf16")[0])
    act = bf(refs.silu(bf(n2 @ wg.T)) * bf(n2 @ wu.T))
    down = bf(act @ wd.T)
    return down + h


@pytest.mark.parametrize("batch,seq,specialize", [(1, 1, False), (2, 3, False), (1, 7, False),
                                                   (2, 5, True)])
def test_tiny_llama_layer_matches_float64(rng, batch, seq, specialize):
    def weight(shape, fan_in):
        b = to_bf16((rng.standard_normal(shape) * fan_in ** -0.5).astype(np.float32))
        return b, b.to_f32().astype(np.float64)

    x, x64 = weight((batch, seq, HIDDEN), 1)
    angles = rng.uniform(0, 2 * np.pi, size=(1, seq, HEAD_DIM // 2))
    angles = np.concatenate([angles, angles], axis=-1)
    cos = to_bf16(np.cos(angles).astype(np.float32))
    sin = to_bf16(np.sin(angles).astype(np.float32))
    cos64, sin64 = cos.to_f32().astype(np.float64), sin.to_f32().astype(np.float64)
    wn1, wn1_64 = weight((HIDDEN,), 1)
    wq, wq64 = weight((HIDDEN, HIDDEN), HIDDEN)
    wk, wk64 = weight((KV_HEADS * HEAD_DIM, HIDDEN), HIDDEN)
    wv, wv64 = weight((KV_HEADS * HEAD_DIM, HIDDEN), HIDDEN)
    wo, wo64 = weight((HIDDEN, HIDDEN), HIDDEN)
    wn2, wn2_64 = weight((HIDDEN,), 1)
    wg, wg64 = weight((MLP, HIDDEN), HIDDEN)
    wu, wu64 = weight((MLP, HIDDEN), HIDDEN)
    wd, wd64 = weight((HIDDEN, MLP), MLP)

    (out,) = run_cpu(tiny_layer(), "llama3_8b_decoder_layer",
                     [x, cos, sin, wn1, wq, wk, wv, wo, wn2, wg, wu, wd],
                     specialize_shapes=specialize)
    expected = reference_layer(x64, cos64, sin64, wn1_64, wq64, wk64, wv64, wo64, wn2_64,
                               wg64, wu64, wd64)
    assert out.shape == (batch, seq, HIDDEN)
    assert_close(out, expected, "bf16", "layer output")
