"""Repeated key/value heads become `enable_gqa=True` (liger.frontend.gqa):
the calls that read Hugging Face's repeat_kv, with their numerics (the
output and every gradient), and the near-misses left alone: a masked
call, heads tiled rather than repeated in place, k and v repeated by
different factors, a head dimension the fused kernels do not group, a
repeat that something else reads too."""

import os
import sys

import pytest

torch = pytest.importorskip("torch")
import torch.nn.functional as F  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from liger.frontend import gqa  # noqa: E402
from liger.frontend import masks  # noqa: E402
from liger.frontend.graph import aten  # noqa: E402
from test_masks import _fresh, sdpa_calls, traced  # noqa: E402,F401

pytestmark = pytest.mark.skipif(not gqa.supported(), reason="this torch's SDPA has no enable_gqa")


def repeat_kv(x, n):
    """Hugging Face's repeat_kv: each head n times in place."""
    b, h, s, d = x.shape
    return x[:, :, None, :, :].expand(b, h, n, s, d).reshape(b, h * n, s, d)


def tile_kv(x, n):
    """The heads tiled (head h reads h % H): not grouped-query attention."""
    b, h, s, d = x.shape
    return x[:, None].expand(b, n, h, s, d).reshape(b, n * h, s, d)


def causal(q, k, v):
    t = q.shape[-2]
    i = torch.arange(t, device=q.device)
    return (i[None, :] <= i[:, None])[None, None].expand(q.shape[0], 1, t, t)


def masked_repeat(q, k, v):
    n = q.shape[1] // k.shape[1]
    return F.scaled_dot_product_attention(q, repeat_kv(k, n), repeat_kv(v, n),
                                          attn_mask=causal(q, k, v))


def unmasked_repeat(q, k, v):
    n = q.shape[1] // k.shape[1]
    return F.scaled_dot_product_attention(q, repeat_kv(k, n), repeat_kv(v, n), is_causal=True,
                                          scale=0.3)


def sliding_repeat(q, k, v):
    n = q.shape[1] // k.shape[1]
    t = q.shape[-2]
    i = torch.arange(t)
    window = (i[None, :] <= i[:, None]) & (i[:, None] - i[None, :] < 4)
    return F.scaled_dot_product_attention(q, repeat_kv(k, n), repeat_kv(v, n), attn_mask=window)


def tiled(q, k, v):
    n = q.shape[1] // k.shape[1]
    return F.scaled_dot_product_attention(q, tile_kv(k, n), tile_kv(v, n), is_causal=True)


def uneven(q, k, v):
    # k from 2 heads x4, v from 4 heads x2: both 8 heads, not one grouping.
    return F.scaled_dot_product_attention(q, repeat_kv(k, 4), repeat_kv(v[:, :4].contiguous(), 2),
                                          is_causal=True)


def also_read(q, k, v):
    n = q.shape[1] // k.shape[1]
    wide = repeat_kv(k, n)
    return F.scaled_dot_product_attention(q, wide, repeat_kv(v, n), is_causal=True) + wide


def inputs(heads=8, kv=2, t=11, d=8, seed=0):
    g = torch.Generator().manual_seed(seed)
    q = torch.randn(3, heads, t, d, generator=g)
    k = torch.randn(3, kv, t, d, generator=g)
    v = torch.randn(3, kv, t, d, generator=g)
    return q, k, v


def rewrite(fn, *args, dynamic=False):
    gm, ins = traced(fn, *args, dynamic=dynamic)
    lines = [str(line) for line in masks.causal_masks(gm)]
    grouped = gqa.grouped_kv(gm)
    return gm, ins, lines, grouped


def shape(node):
    return tuple(node.meta["val"].shape)


def values_and_grads(fn, args):
    args = [a.clone().requires_grad_() for a in args]
    out = fn(*args)
    out.backward(torch.ones_like(out))
    return [out.detach()] + [a.grad for a in args]


@pytest.mark.parametrize("fn", [masked_repeat, unmasked_repeat])
@pytest.mark.parametrize("dynamic", [False, True])
def test_repeated_heads_become_a_grouped_query_call(fn, dynamic):
    args = inputs()
    if dynamic:  # the tokens dynamic, the heads and head dimension not
        for a in args:
            torch._dynamo.mark_dynamic(a, 2)
    gm, ins, _, grouped = rewrite(fn, *args)
    assert [(g.rewritten, g.repeats) for g in grouped] == [(True, 4)], [str(g) for g in grouped]
    assert " k/v heads repeated 4x -> enable_gqa at " in str(grouped[0])
    (call,) = sdpa_calls(gm)
    assert call.kwargs.get("enable_gqa") is True
    assert shape(call.args[1])[1] == 2 and shape(call.args[2])[1] == 2
    # The repeats are gone from the graph.
    assert not [n for n in gm.graph.nodes if n.target is aten.expand.default and
                len(shape(n)) == 5]
    # The same attention: the output and the gradients of q, k and v.
    expected = values_and_grads(fn, args)
    tensors = [a.clone().requires_grad_() for a in args]
    out = gm(*_match_inputs(ins, args, tensors))[0]
    out.backward(torch.ones_like(out))
    for e, g in zip(expected, [out.detach()] + [t.grad for t in tensors]):
        torch.testing.assert_close(g, e, rtol=1e-5, atol=1e-5)


def _match_inputs(ins, args, tensors):
    """dynamo's example inputs (the graph's order) with each of `args`
    replaced by its copy in `tensors`."""
    out = []
    for x in ins:
        if isinstance(x, torch.Tensor):
            (i,) = [i for i, a in enumerate(args) if a is x]
            out.append(tensors[i])
        else:
            out.append(x)
    return out


def test_a_masked_call_keeps_its_repeats():
    gm, _, lines, grouped = rewrite(sliding_repeat, *inputs())
    assert lines[0].endswith(": a causal mask with a sliding window of 4 keys (is_causal cannot "
                             "say it)")
    assert [g.rewritten for g in grouped] == [False]
    assert str(grouped[0]).endswith(": the call has a mask (SDPA's fused kernels take "
                                    "grouped heads only without one)")
    (call,) = sdpa_calls(gm)
    assert "enable_gqa" not in call.kwargs and shape(call.args[1])[1] == 8


def test_tiled_heads_are_no_grouped_query_attention():
    """x[:, None].expand(B, n, H, S, D): query head h reads key head h % H,
    not h / n; nothing to rewrite (and no line: no repeat in place)."""
    gm, _, _, grouped = rewrite(tiled, *inputs())
    assert grouped == []
    (call,) = sdpa_calls(gm)
    assert "enable_gqa" not in call.kwargs and shape(call.args[1])[1] == 8


def test_k_and_v_repeated_by_different_factors_are_left_alone():
    q, k, _ = inputs()
    v = torch.randn(3, 4, q.shape[2], q.shape[3])
    gm, _, _, grouped = rewrite(uneven, q, k, torch.cat([v, v], 1))
    assert [g.rewritten for g in grouped] == [False]
    assert str(grouped[0]).endswith(": k and v are repeated 4x and 2x")


def test_a_head_dimension_above_the_fused_kernels_bound_is_left_alone():
    gm, _, _, grouped = rewrite(unmasked_repeat, *inputs(d=gqa.MAX_HEAD_DIM + 8, t=3))
    assert [g.rewritten for g in grouped] == [False]
    assert "head dimensions k %d, v %d" % ((gqa.MAX_HEAD_DIM + 8,) * 2) in str(grouped[0])


def test_a_repeat_read_elsewhere_stays_for_that_reader():
    args = inputs()
    gm, ins, _, grouped = rewrite(also_read, *args)
    assert [g.rewritten for g in grouped] == [True]
    (call,) = sdpa_calls(gm)
    assert call.kwargs.get("enable_gqa") is True
    # The k repeat stays (the addition reads it), v's is gone.
    wide = [n for n in gm.graph.nodes if n.target is aten.expand.default]
    assert len(wide) == 1
    torch.testing.assert_close(gm(*ins)[0], also_read(*args), rtol=1e-5, atol=1e-5)
