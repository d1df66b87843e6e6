"""Causal masks that a trace makes explicit become `is_causal=True`
(liger.frontend.masks): the masks that are causal, and the near-misses left
alone (a mask from a graph input, a sliding window, a mask causal only at
the traced size, keys longer than queries), each with its numerics."""

import os
import sys

import pytest

torch = pytest.importorskip("torch")
import torch.fx.traceback as fx_traceback  # noqa: E402
import torch.nn.functional as F  # noqa: E402
from torch.fx.experimental.proxy_tensor import make_fx  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from liger.frontend import backend as lb  # noqa: E402
from liger.frontend import masks  # noqa: E402
from liger.frontend.graph import aten  # noqa: E402


@pytest.fixture(autouse=True)
def _fresh():
    torch._dynamo.reset()
    yield
    torch._dynamo.reset()


def traced(fn, *args, dynamic=True):
    """fn's graph as the liger backend traces it (dynamo, then aten before
    autograd) and the inputs dynamo gives it."""
    out = {}

    def backend(gm, example_inputs):
        fake_mode, fake_args = lb._fake_inputs(gm)
        with fake_mode, fx_traceback.preserve_node_meta():
            out["aten"] = make_fx(torch.fx.Interpreter(gm).run, pre_dispatch=True,
                                  tracing_mode="fake")(*fake_args)
        out["inputs"] = [int(x.node.hint) if isinstance(x, torch.SymInt) else x
                         for x in example_inputs]
        return gm
    torch.compile(fn, backend=backend, dynamic=dynamic, fullgraph=True)(*args)
    return out["aten"], out["inputs"]


def sdpa_calls(gm):
    return [n for n in gm.graph.nodes if n.op == "call_function" and
            n.target is aten.scaled_dot_product_attention.default]


def qkv(t=16, s=None, heads=2, d=8, seed=0):
    g = torch.Generator().manual_seed(seed)
    q = torch.randn(2, heads, t, d, generator=g)
    kv = [torch.randn(2, heads, s or t, d, generator=g) for _ in range(2)]
    return q, *kv


def causal_bool(q, k, v):
    t = q.shape[-2]
    i = torch.arange(t, device=q.device)
    mask = (i[None, :] <= i[:, None])[None, None].expand(q.shape[0], 1, t, t)
    return F.scaled_dot_product_attention(q, k, v, attn_mask=mask)


def causal_additive(q, k, v):
    t = q.shape[-2]
    i = torch.arange(t, device=q.device)
    mask = torch.zeros(t, t, dtype=q.dtype, device=q.device).masked_fill(
        i[None, :] > i[:, None], torch.finfo(q.dtype).min)
    return F.scaled_dot_product_attention(q, k, v, attn_mask=mask, scale=0.3)


def sliding(q, k, v, window=4):
    t = q.shape[-2]
    i = torch.arange(t, device=q.device)
    mask = (i[None, :] <= i[:, None]) & (i[:, None] - i[None, :] < window)
    return F.scaled_dot_product_attention(q, k, v, attn_mask=mask)


def causal_at_16_only(q, k, v):
    """Causal at T = 16, full attention to the first 16 - T keys below it."""
    t = q.shape[-2]
    i = torch.arange(t, device=q.device)
    mask = (i[None, :] <= i[:, None]) | (i[None, :] < 16 - t)
    return F.scaled_dot_product_attention(q, k, v, attn_mask=mask)


def from_input(q, k, v, keep):
    return F.scaled_dot_product_attention(q, k, v, attn_mask=keep)


def rewritten_matches(fn, *args, dynamic=True):
    """Rewrites fn's traced graph; returns its report lines after checking
    that the graph still computes fn's result."""
    gm, inputs = traced(fn, *args, dynamic=dynamic)
    lines = masks.causal_masks(gm)
    want = fn(*args)
    got = gm(*inputs)
    got = got[0] if isinstance(got, (tuple, list)) else got
    assert torch.allclose(got, want, atol=1e-6, rtol=1e-5), (got - want).abs().max()
    return gm, [str(line) for line in lines]


@pytest.mark.parametrize("dynamic", [True, False])
@pytest.mark.parametrize("fn", [causal_bool, causal_additive])
def test_a_causal_mask_from_sizes_becomes_is_causal(fn, dynamic):
    gm, lines = rewritten_matches(fn, *qkv(), dynamic=dynamic)
    assert len(lines) == 1 and "causal mask -> is_causal" in lines[0], lines
    (call,) = sdpa_calls(gm)
    assert masks.G.arg(call, 3, "attn_mask") is None
    assert masks.G.arg(call, 5, "is_causal") is True
    # The mask's subgraph is gone with it.
    assert not [n for n in gm.graph.nodes if n.op == "call_function" and
                n.target in (aten.le.Tensor, aten.gt.Tensor, aten.masked_fill.Scalar)]


def test_a_sliding_window_is_left_alone():
    gm, lines = rewritten_matches(sliding, *qkv())
    assert lines == [lines[0]] and lines[0].endswith(": the mask is not causal"), lines
    (call,) = sdpa_calls(gm)
    assert masks.G.arg(call, 3, "attn_mask") is not None


def test_a_mask_causal_only_at_the_traced_size_is_left_alone():
    gm, lines = rewritten_matches(causal_at_16_only, *qkv(t=16))
    assert len(lines) == 1 and ": the mask is not causal at probe sizes [" in lines[0], lines
    assert masks.G.arg(sdpa_calls(gm)[0], 3, "attn_mask") is not None
    # Traced at a static T = 16 the graph holds only for T = 16 (dynamo
    # guards it), where the mask is causal.
    gm, lines = rewritten_matches(causal_at_16_only, *qkv(t=16), dynamic=False)
    assert "causal mask -> is_causal" in lines[0], lines


def test_a_mask_given_as_an_input_is_left_alone():
    q, k, v = qkv()
    keep = torch.ones(16, 16, dtype=torch.bool).tril()
    gm, lines = rewritten_matches(from_input, q, k, v, keep)
    assert len(lines) == 1 and ": the mask is computed from the graph input " in lines[0], lines


def test_keys_longer_than_queries_are_left_alone():
    def end_aligned(q, k, v):
        t, s = q.shape[-2], k.shape[-2]
        i, j = torch.arange(t), torch.arange(s)
        mask = j[None, :] <= i[:, None] + (s - t)
        return F.scaled_dot_product_attention(q, k, v, attn_mask=mask)
    gm, lines = rewritten_matches(end_aligned, *qkv(t=8, s=12), dynamic=False)
    assert lines[0].endswith(": q and k have different lengths (a mask aligned to the end "
                             "of the keys)"), lines


def test_a_mask_too_large_to_evaluate_is_left_alone(monkeypatch):
    monkeypatch.setattr(masks, "MAX_ELEMENTS", 100)
    gm, lines = rewritten_matches(causal_bool, *qkv())
    assert lines[0].endswith(": the mask has 512 elements at the traced sizes "
                             "(evaluated up to 100)"), lines


def test_a_mask_every_layer_shares_is_evaluated_once(monkeypatch):
    def two_layers(q, k, v):
        t = q.shape[-2]
        i = torch.arange(t, device=q.device)
        mask = i[None, :] <= i[:, None]
        h = F.scaled_dot_product_attention(q, k, v, attn_mask=mask)
        return F.scaled_dot_product_attention(h, k, v, attn_mask=mask)
    calls = []
    verdict = masks._verdict
    monkeypatch.setattr(masks, "_verdict", lambda *a: calls.append(a) or verdict(*a))
    gm, lines = rewritten_matches(two_layers, *qkv())
    assert len(lines) == 2 and all("causal mask -> is_causal" in line for line in lines), lines
    assert len(calls) == 1
    assert all(masks.G.arg(n, 3, "attn_mask") is None for n in sdpa_calls(gm))
