"""Causal masks that a trace makes explicit become `is_causal=True`
(liger.frontend.masks): the masks that are causal, a sliding window wider
than the traced length (causal there, the length guarded), and the
near-misses left alone (a mask from a graph input, a sliding window
narrower than the traced length, a mask causal only at the traced size or
up to a size its ops hold, keys longer than queries), each with its
numerics."""

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


# Sliding windows of 4 and 20 keys, constants of the graph as a model's
# configuration makes them (an argument, even a closure's, is a size input
# of a dynamic graph: a window that changes with the sizes).
def sliding(q, k, v):
    t = q.shape[-2]
    i = torch.arange(t, device=q.device)
    mask = (i[None, :] <= i[:, None]) & (i[:, None] - i[None, :] < 4)
    return F.scaled_dot_product_attention(q, k, v, attn_mask=mask)


def sliding20(q, k, v):
    t = q.shape[-2]
    i = torch.arange(t, device=q.device)
    mask = (i[None, :] <= i[:, None]) & (i[:, None] - i[None, :] < 20)
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


def causal_unmasked(q, k, v):
    """An additive causal mask compared with its own lowest value (Hugging
    Face's _unmask_unattended): in f16 that value, -65504, reaches an
    equality, and is a fill value still, not a window."""
    t = q.shape[-2]
    i = torch.arange(t, device=q.device)
    low = torch.finfo(q.dtype).min
    mask = torch.zeros(t, t, dtype=q.dtype, device=q.device).masked_fill(
        i[None, :] > i[:, None], low)
    mask = mask.mul(~torch.all(mask == low, dim=-1, keepdim=True))
    return F.scaled_dot_product_attention(q, k, v, attn_mask=mask)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16])
def test_an_additive_mask_compared_with_its_fill_value_becomes_is_causal(dtype):
    gm, lines = rewritten_matches(causal_unmasked, *[t.to(dtype) for t in qkv()])
    assert lines == ["[recognise-causal-mask] causal mask -> is_causal at "
                     "scaled_dot_product_attention (" + masks.REACHED % 4096 + ")"], lines


@pytest.mark.parametrize("dynamic", [True, False])
@pytest.mark.parametrize("fn", [causal_bool, causal_additive])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float16])
def test_a_causal_mask_from_sizes_becomes_is_causal(fn, dynamic, dtype):
    """(f16: the additive mask's lowest value, -65504, is a fill value, not
    a window to probe past: only the integers and the floats that positions
    are compared with or shifted by are.)"""
    gm, lines = rewritten_matches(fn, *[t.to(dtype) for t in qkv()], dynamic=dynamic)
    assert len(lines) == 1 and "causal mask -> is_causal" in lines[0], lines
    (call,) = sdpa_calls(gm)
    assert masks.G.arg(call, 3, "attn_mask") is None
    assert masks.G.arg(call, 5, "is_causal") is True
    # The mask's subgraph is gone with it.
    assert not [n for n in gm.graph.nodes if n.op == "call_function" and
                n.target in (aten.le.Tensor, aten.gt.Tensor, aten.masked_fill.Scalar)]


def test_a_sliding_window_keeps_its_mask_and_says_its_width():
    gm, lines = rewritten_matches(sliding, *qkv())
    assert lines == [lines[0]] and lines[0].endswith(
        ": a causal mask with a sliding window of 4 keys (is_causal cannot say it)"), lines
    (call,) = sdpa_calls(gm)
    assert masks.G.arg(call, 3, "attn_mask") is not None
    # (liger.attention's window, recognise-attention's)
    assert call.meta[masks.WINDOW_META] == 4


def rewritten_compiled(fn, dynamic=True):
    """fn compiled by a backend that rewrites its masks (as the liger
    backend does, then runs the graph as it is); the report lines of each
    graph it compiled."""
    reports = []

    def backend(gm, example_inputs):
        fake_mode, fake_args = lb._fake_inputs(gm)
        with fake_mode, fx_traceback.preserve_node_meta():
            aten_gm = make_fx(torch.fx.Interpreter(gm).run, pre_dispatch=True,
                              tracing_mode="fake")(*fake_args)
        masks.note_strict_sizes(gm)
        reports.append([str(line) for line in masks.causal_masks(aten_gm)])
        return lambda *args: aten_gm(*args)
    return torch.compile(fn, backend=backend, dynamic=dynamic, fullgraph=True), reports


def served(fn, lengths):
    """The report lines of each graph rewritten_compiled(fn) compiled over
    `lengths` tokens, after checking each call against fn."""
    compiled, reports = rewritten_compiled(fn)
    for t in lengths:
        args = qkv(t=t)
        assert torch.allclose(compiled(*args), fn(*args), atol=1e-6, rtol=1e-5), t
    return reports


def diagonal20(q, k, v):
    """A window of 20 keys by a negative diagonal (ones.tril() & ~ones.tril(-20)):
    the graph holds -20, not 20."""
    t = q.shape[-2]
    ones = torch.ones(t, t, dtype=torch.bool, device=q.device)
    return F.scaled_dot_product_attention(q, k, v, attn_mask=ones.tril() & ~ones.tril(-20))


def triu20(q, k, v):
    """The same window as triu(1 - W) writes it: the graph holds -19."""
    t = q.shape[-2]
    mask = torch.ones(t, t, dtype=torch.bool, device=q.device).tril().triu(-19)
    return F.scaled_dot_product_attention(q, k, v, attn_mask=mask)


def tensor20(q, k, v):
    """The window held in a tensor the forward makes (a tensor constant of
    the graph, not an integer of its ops' arguments)."""
    t = q.shape[-2]
    i = torch.arange(t, device=q.device)
    mask = (i[None, :] <= i[:, None]) & (i[:, None] - i[None, :] < torch.tensor(20))
    return F.scaled_dot_product_attention(q, k, v, attn_mask=mask)


def float20(q, k, v):
    """The window compared with as a float."""
    t = q.shape[-2]
    i = torch.arange(t, device=q.device)
    mask = (i[None, :] <= i[:, None]) & ((i[:, None] - i[None, :]).float() < 20.0)
    return F.scaled_dot_product_attention(q, k, v, attn_mask=mask)


def _window_by(name, limit):
    """The causal mask narrowed by `limit()` (a window of 20 keys however
    the forward spells it)."""
    def fn(q, k, v):
        t = q.shape[-2]
        i = torch.arange(t, device=q.device)
        mask = (i[None, :] <= i[:, None]) & (i[:, None] - i[None, :] < limit())
        return F.scaled_dot_product_attention(q, k, v, attn_mask=mask)
    fn.__name__ = name
    return fn


# A float through torch.full, a table of per-layer windows, a window
# computed from constants, a float between integers.
full20 = _window_by("full20", lambda: torch.full((), 20.0))
table20 = _window_by("table20", lambda: torch.tensor([20, 4])[0])
computed20 = _window_by("computed20", lambda: torch.tensor(10) * 2)
half20 = _window_by("half20", lambda: 19.5)


def derived20(q, k, v):
    """A window of 20 keys that no constant states (the positions' distance
    scaled, then compared with 5): found at the reach, not by a probe."""
    t = q.shape[-2]
    i = torch.arange(t, device=q.device)
    mask = (i[None, :] <= i[:, None]) & ((i[:, None] - i[None, :]) * 0.25 < 5)
    return F.scaled_dot_product_attention(q, k, v, attn_mask=mask)


@pytest.mark.parametrize("fn", [diagonal20, triu20, tensor20, float20, full20, table20,
                                computed20, half20, derived20])
def test_a_window_by_a_negative_diagonal_is_probed_too(fn):
    """The magnitudes of negative integers, of integral floats and of the
    integers of small tensor constants are probed past too: traced at 16 tokens, the window
    of 20 keys written as a diagonal or held in a tensor guards the length,
    and 32 tokens compile again with the mask kept (without the probe, the
    graph for 16 served 32 as causal)."""
    reports = served(fn, (16, 32))
    assert [line.split(" at scaled_dot_product_attention")[-1] for (line,) in reports] == [
        " (" + masks.GUARDED % 20 + ")",
        ": a causal mask with a sliding window of 20 keys (is_causal cannot say it)"], reports


def test_a_window_narrower_than_the_traced_length_serves_shorter_ones():
    """Traced at 16 tokens under a window of 4 keys, the mask is kept and
    the graph serves 3 tokens too, with no guard and no second graph."""
    reports = served(sliding, (16, 3, 5))
    assert len(reports) == 1, reports


def chunked(q, k, v):
    """Llama 4's chunked attention: causal within chunks of 20 keys."""
    t = q.shape[-2]
    i = torch.arange(t, device=q.device)
    mask = (i[None, :] <= i[:, None]) & (i[None, :] // 20 == i[:, None] // 20)
    return F.scaled_dot_product_attention(q, k, v, attn_mask=mask)


def test_a_window_wider_than_the_traced_length_guards_the_length():
    """A window of 20 keys traced at 16 tokens (and every probe size below
    it): causal there, so is_causal with the length guarded to 20; 32
    tokens compile again and keep the mask. Each call computes fn's
    result (without the guard, the graph for 16 served 32 as causal)."""
    fn = sliding20
    reports = served(fn, (16, 20, 32, 24))
    assert reports == [
        ["[recognise-causal-mask] causal mask -> is_causal at scaled_dot_product_attention (its "
         "sliding window of 20 keys is wider than the traced length: the graph serves lengths "
         "up to it)"],
        ["[recognise-causal-mask] left alone scaled_dot_product_attention at "
         "scaled_dot_product_attention: a causal mask with a sliding window of 20 keys "
         "(is_causal cannot say it)"]], reports


def test_a_mask_causal_up_to_a_size_its_ops_hold_is_left_alone():
    """Chunks of 20 keys: causal at the traced 16 tokens and every small
    probe size; evaluated one past the 20 its ops hold, it is not."""
    gm, lines = rewritten_matches(chunked, *qkv(t=16))
    assert len(lines) == 1 and ": the mask is not causal at probe sizes [21]" in lines[0], lines
    assert masks.G.arg(sdpa_calls(gm)[0], 3, "attn_mask") is not None
    compiled, reports = rewritten_compiled(chunked)
    args = qkv(t=32)
    assert torch.allclose(compiled(*qkv(t=16)), chunked(*qkv(t=16)), atol=1e-6, rtol=1e-5)
    assert torch.allclose(compiled(*args), chunked(*args), atol=1e-6, rtol=1e-5)
    assert len(reports) == 1


def test_a_window_that_changes_with_the_length_is_left_alone():
    def half(q, k, v):
        t = q.shape[-2]
        i = torch.arange(t, device=q.device)
        mask = (i[None, :] <= i[:, None]) & (i[:, None] - i[None, :] < (t + 1) // 2)
        return F.scaled_dot_product_attention(q, k, v, attn_mask=mask)
    gm, lines = rewritten_matches(half, *qkv(t=16))
    assert len(lines) == 1 and ": the mask's sliding window changes with the sizes (" \
        in lines[0], lines


def test_a_mask_causal_beyond_its_window_is_left_alone():
    """A window of 20 keys from 31 tokens on, none below: causal at 21 and
    22 tokens (past the 20 its ops hold), narrowed at 31 and 1001."""
    def late(q, k, v):
        t = q.shape[-2]
        i = torch.arange(t, device=q.device)
        limit = torch.where(torch.tensor(t) > 30, 20, 1000)
        mask = (i[None, :] <= i[:, None]) & (i[:, None] - i[None, :] < limit)
        return F.scaled_dot_product_attention(q, k, v, attn_mask=mask)
    gm, lines = rewritten_matches(late, *qkv(t=16))
    assert len(lines) == 1 and lines[0].endswith(
        ": the mask is causal at q length 22 but narrowed to a window of 20 keys at "
        "others"), lines


def test_a_size_its_ops_hold_past_what_is_evaluated_guards_the_length(monkeypatch):
    """A window of 20 keys whose probes (21, 22 tokens) have more elements
    than may be evaluated: the mask is causal up to the longest length
    evaluated (17), the graph's length guarded to it; 32 tokens compile
    again, too large to evaluate, and keep the mask. Exact at each."""
    monkeypatch.setattr(masks, "MAX_ELEMENTS", 300)  # 17 x 17 tokens, not 21 x 21
    reports = served(sliding20, (16, 17, 32))
    assert [line.split(" at scaled_dot_product_attention")[-1] for (line,) in reports] == [
        " (" + masks.REACHED % 17 + ")",
        ": the mask has 1024 elements at the traced sizes (evaluated up to 300)"], reports


def derived36(q, k, v):
    """derived20's form with a window of 36 keys."""
    t = q.shape[-2]
    i = torch.arange(t, device=q.device)
    mask = (i[None, :] <= i[:, None]) & ((i[:, None] - i[None, :]) * 0.25 < 9)
    return F.scaled_dot_product_attention(q, k, v, attn_mask=mask)


def test_a_window_beyond_the_reach_compiles_again_and_shows(monkeypatch):
    """A reach of 32 tokens (twice the traced 16) under a derived window of
    36 keys: causal there, the graph's length guarded to 32; 48 tokens
    compile again, evaluated at 48 and at their reach, 50 tokens (at most
    2500 elements), where the window shows, and keep the mask (without
    the guard, the graph for 16 served 48 as causal)."""
    monkeypatch.setattr(masks, "REACH_ELEMENTS", 24 * 24)
    monkeypatch.setattr(masks, "MAX_ELEMENTS", 50 * 50)
    reports = served(derived36, (16, 32, 48, 24))
    assert [line.split(" at scaled_dot_product_attention")[-1] for (line,) in reports] == [
        " (" + masks.REACHED % 32 + ")",
        ": a causal mask with a sliding window of 36 keys (is_causal cannot say it)"], reports


def test_no_probe_past_the_reach_is_evaluated(monkeypatch):
    """A window of 10000 keys traced at 16 tokens: its probes (10001 and
    10002 tokens, 10^8 elements each) are not evaluated; the mask is
    causal up to the reach, 4096 tokens (2^24 elements), and the verdict
    says so."""
    lengths = []
    band = masks._band
    monkeypatch.setattr(masks, "_band", lambda m, rows: lengths.append(rows) or band(m, rows))

    def sliding10000(q, k, v):
        t = q.shape[-2]
        i = torch.arange(t, device=q.device)
        mask = (i[None, :] <= i[:, None]) & (i[:, None] - i[None, :] < 10000)
        return F.scaled_dot_product_attention(q, k, v, attn_mask=mask)
    gm, lines = rewritten_matches(sliding10000, *qkv(t=16))
    assert lines[0].endswith(" (" + masks.REACHED % 4096 + ")"), lines
    assert max(lengths) == 4096, sorted(set(lengths))


@pytest.mark.parametrize("mask,rows,want", [
    (torch.ones(5, 5, dtype=torch.bool).tril(), 5, 0),
    (torch.ones(5, 5, dtype=torch.bool).tril().triu(-1), 5, 2),
    (torch.zeros(5, 5).masked_fill(~torch.ones(5, 5, dtype=torch.bool).tril().triu(-2),
                                   float("-inf"))[None, None].expand(2, 1, 5, 5), 5, 3),
    (torch.ones(5, 5, dtype=torch.bool).tril().triu(-1), 4, None),     # another length
    (torch.ones(5, 5, dtype=torch.bool).tril(1), 5, None),             # one key ahead
    (torch.eye(5, dtype=torch.bool) | (torch.arange(5)[:, None] == 4), 5, None),
    (torch.zeros(5, 5, dtype=torch.bool), 5, None),                    # no key
    (torch.ones(5, 5).tril(), 5, None)], ids=[                         # 1 where attended
        "causal", "window2", "additive_window3", "length", "ahead", "not_a_band", "empty",
        "ones"])
def test_a_band_is_read_from_an_evaluated_mask(mask, rows, want):
    assert masks._band(mask, rows) == want


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


def test_a_windowed_call_is_liger_attention_over_the_unrepeated_heads():
    """SDPA under a sliding window of 4 keys over k and v repeated per
    query head (Hugging Face's masked call): recognise-attention makes it
    liger.attention with the window, reading the 2 key/value heads; a
    call with a mask that is no window stays SDPA, with the reason."""
    from liger.frontend.recognize import recognize

    def repeated(x):
        b, h, s, d = x.shape
        return x[:, :, None].expand(b, h, 2, s, d).reshape(b, 2 * h, s, d)

    def grouped(q, k, v):
        t = q.shape[-2]
        i = torch.arange(t, device=q.device)
        window = (i[None, :] <= i[:, None]) & (i[:, None] - i[None, :] < 4)
        h = F.scaled_dot_product_attention(q, repeated(k), repeated(v), attn_mask=window)
        ahead = i[None, :] <= i[:, None] + 1
        return F.scaled_dot_product_attention(h, repeated(k), repeated(v), attn_mask=ahead)
    q = qkv(heads=4)[0]
    _, k, v = qkv(heads=2, seed=1)
    # (static: liger's ops take static head sizes)
    gm, lines = rewritten_matches(grouped, q, k, v, dynamic=False)
    assert [line.split(": ")[-1] for line in lines] == [
        "a causal mask with a sliding window of 4 keys (is_causal cannot say it)",
        "the mask is not causal"], lines
    found = recognize(gm)
    attention = [r for r in found.records if r.op == "attention"]
    assert [(r.attrs, [tuple(masks.G.shape(x)) for x in r.operands.values()])
            for r in attention] == [({"causal": True, "window": 4},
                                     [(2, 4, 16, 8), (2, 2, 16, 8), (2, 2, 16, 8)])]
    (missed,) = [line for line in found.lines() if line.startswith("[recognise-attention] left")]
    assert missed.endswith(": an explicit attention mask (liger.attention masks causally, with a "
                           "sliding window or not at all)"), missed


class BufferWindow(torch.nn.Module):
    """A sliding window of 20 keys held in a module buffer."""

    def __init__(self):
        super().__init__()
        self.register_buffer("window", torch.tensor(20))

    def forward(self, q, k, v):
        t = q.shape[-2]
        i = torch.arange(t, device=q.device)
        mask = (i[None, :] <= i[:, None]) & (i[:, None] - i[None, :] < self.window)
        return F.scaled_dot_product_attention(q, k, v, attn_mask=mask)


def test_a_window_in_a_module_buffer_is_a_graph_input_left_alone():
    """dynamo lifts the buffer to a graph input: the mask is one computed
    from an input, kept at every length (exact at 16 and 32 tokens)."""
    model = BufferWindow()
    reports = served(model, (16, 32))
    assert len(reports) == 1 and len(reports[0]) == 1 and \
        ": the mask is computed from the graph input" in reports[0][0], reports


def test_a_windowed_liger_attention_holds_up_to_the_reach():
    """recognise-attention's liger.attention drops a dynamic graph's mask
    of a sliding window of 4 keys: its record holds the q length up to the
    reach (4096 tokens), and taking it guards the graph's length to that."""
    from liger.frontend.recognize import recognize
    args = qkv()
    for x in args:
        torch._dynamo.mark_dynamic(x, 2)
    gm, _ = traced(sliding, *args, dynamic=None)
    masks.causal_masks(gm)
    (call,) = sdpa_calls(gm)
    t = masks.G.shape(masks.G.strip(call.args[0]))[2]
    assert isinstance(t, torch.SymInt)
    shape_env = t.node.shape_env
    before = [str(g.expr) for g in shape_env.guards]
    (record,) = [r for r in recognize(gm).records if r.op == "attention"]
    assert record.attrs == {"causal": True, "window": 4}
    assert [(str(masks.G.size_expr(size)), n) for size, n in record.bounds] == [
        (str(masks.G.size_expr(t)), 4096)]
    added = [str(g.expr) for g in shape_env.guards][len(before):]
    assert added == ["%s <= 4096" % masks.G.size_expr(t)], added


def with_image(q, k, v):
    """64 image tokens before the text (a vision-language model's): the q
    length is the text's plus 64, no size input of its own."""
    image = torch.ones(q.shape[0], q.shape[1], 64, q.shape[-1])
    return causal_bool(*(torch.cat([image, x], 2) for x in (q, k, v)))


def test_a_q_length_of_several_terms_has_a_reach_too():
    """The reach grows the size the q length grows with (the text's): one
    graph serves 100, 200 and 300 tokens, as far as 4096."""
    reports = served(with_image, (36, 136, 236, 16))
    assert reports == [["[recognise-causal-mask] causal mask -> is_causal at "
                        "scaled_dot_product_attention (" + masks.REACHED % 4096 + ")"]], reports


def _marked(upper, t=16):
    """q, k, v of `t` tokens, their length marked dynamic from 2 up to
    `upper` (None: no max)."""
    args = qkv(t=t)
    for x in args:
        torch._dynamo.mark_dynamic(x, 2, min=2, max=upper)
    return args


def test_a_length_marked_dynamic_with_a_min_only_keeps_its_mask():
    """mark_dynamic(..., min=2): a strict range to dynamo, with no max the
    reach can evaluate to, so no guard may hold the length: the mask
    stays, exact at 16 and 40 tokens (before, the reach's guard failed the
    compile with a ConstraintViolationError)."""
    compiled, reports = rewritten_compiled(causal_bool, dynamic=None)
    for t in (16, 40):
        args = _marked(None, t)
        assert torch.allclose(compiled(*args), causal_bool(*args), atol=1e-6, rtol=1e-5), t
    assert [line.split(": ", 1)[-1] for (line,) in reports] == [
        masks.SHORT_OF_BOUND % 2896], reports  # (2 x 2896^2 <= 2^24: the batch is static)


def test_a_length_marked_dynamic_up_to_a_bound_is_evaluated_to_it():
    """mark_dynamic(..., max=5000): the reach is the bound, so every length
    the graph may take is evaluated and no guard narrows the range (dynamo
    refuses a guard that does: a ConstraintViolationError)."""
    compiled, reports = rewritten_compiled(causal_bool, dynamic=None)
    for t in (16, 40):
        args = _marked(5000, t)
        assert torch.allclose(compiled(*args), causal_bool(*args), atol=1e-6, rtol=1e-5), t
    assert reports == [["[recognise-causal-mask] causal mask -> is_causal at "
                        "scaled_dot_product_attention (" + masks.REACHED % 5000 + ")"]], reports


def test_a_bound_past_what_can_be_evaluated_keeps_the_mask(monkeypatch):
    monkeypatch.setattr(masks, "MAX_ELEMENTS", 2 * 50 * 50)  # (the mask is [2, 1, T, T])
    compiled, reports = rewritten_compiled(causal_bool, dynamic=None)
    args = _marked(100)
    assert torch.allclose(compiled(*args), causal_bool(*args), atol=1e-6, rtol=1e-5)
    assert [line.split(": ", 1)[-1] for (line,) in reports] == [
        "its q length may be up to 100 (the bound it was marked dynamic with), and the mask is "
        "evaluated up to 5000 elements (50 tokens)"], reports


def test_growing_lengths_compile_a_few_graphs(monkeypatch):
    """Each graph serves twice its traced length (a reach made small), up to
    the longest whose mask may be evaluated (141 tokens: 141^2 elements,
    the other sizes at 1), and past what may be evaluated the mask stays:
    eight growing lengths, four graphs."""
    monkeypatch.setattr(masks, "REACH_ELEMENTS", 24 * 24)
    monkeypatch.setattr(masks, "MAX_ELEMENTS", 2 * 100 * 100)
    reports = served(causal_bool, (16, 24, 40, 70, 90, 120, 150, 160))
    assert [line.split(" at scaled_dot_product_attention")[-1] for (line,) in reports] == [
        " (" + masks.REACHED % 32 + ")", " (" + masks.REACHED % 80 + ")",
        " (" + masks.REACHED % 141 + ")",
        ": the mask has 45000 elements at the traced sizes (evaluated up to 20000)"], reports


def with_prefix(p, q, k, v):
    """A prefix of its own length (p's) before q, k and v, causal over the
    whole: the q length is the sum of two sizes."""
    return causal_bool(*(torch.cat([p, x], 2) for x in (q, k, v)))


def test_a_q_length_of_two_sizes_is_left_alone():
    """The lengths the two sizes' sums make cannot all be evaluated (a
    mask may depend on where the prefix ends): the mask stays, exact."""
    args = qkv(t=16)
    prefix = torch.randn(2, 2, 8, 8)
    gm, lines = rewritten_matches(with_prefix, prefix, *args)
    assert len(lines) == 1 and lines[0].endswith(
        "grows with several sizes: the lengths their sums make are not all evaluated"), lines
    assert masks.G.arg(sdpa_calls(gm)[0], 3, "attn_mask") is not None


def strided(q, k, v):
    """Every fourth token: the q length (T + 3) // 4."""
    return causal_bool(q[:, :, ::4], k[:, :, ::4], v[:, :, ::4])


def test_a_q_length_that_grows_in_steps_has_a_reach_too():
    """Every fourth token: the reach is the q length of 4093 tokens (the
    size whose square is REACH_ELEMENTS, as a mask built at the full
    length and sliced holds), 1024."""
    reports = served(strided, (16, 40, 64, 101))
    assert reports == [["[recognise-causal-mask] causal mask -> is_causal at "
                        "scaled_dot_product_attention (" + masks.REACHED % 1024 + ")"]], reports


def sliced_causal(q, k, v):
    """The first min(T, 24) tokens (torch.sym_min), their causal mask
    sliced from positions of the full length: the q length stops growing
    at 24."""
    t = q.shape[-2]
    first = torch.sym_min(t, 24)
    q, k, v = (x[:, :, :first] for x in (q, k, v))
    i = torch.arange(t, device=q.device)[:first]
    mask = i[None, :] <= i[:, None]
    return F.scaled_dot_product_attention(q, k, v, attn_mask=mask)


def test_a_q_length_that_stops_growing_is_reached_where_it_stops(monkeypatch):
    """The reach's size is the least that makes the q length its reach:
    here 24 (the longest the q length takes), not 2^31 (where the q length
    is 24 too, but the arange is not)."""
    sizes = []
    function = masks._mask_function

    def recorded(gm, mask):
        made = function(gm, mask)
        forward = made[0].forward
        made[0].forward = lambda *v: sizes.append(v) or forward(*v)
        return made
    monkeypatch.setattr(masks, "_mask_function", recorded)
    gm, lines = rewritten_matches(sliced_causal, *qkv(t=20))
    assert lines[0].endswith("(" + masks.REACHED % 24 + ")"), lines
    assert max(max(v) for v in sizes) < 4096, sizes


def other_size(p, q, k, v):
    """A window of 20 keys among the first p tokens (p: another input's
    length), causal beyond: the mask reads a size the q length does not."""
    t, n = q.shape[-2], p.shape[-1]
    i = torch.arange(t, device=q.device)
    first = (i[:, None] < n) & (i[None, :] < n)
    mask = (i[None, :] <= i[:, None]) & (~first | ((i[:, None] - i[None, :]) * 0.25 < 5))
    return F.scaled_dot_product_attention(q, k, v, attn_mask=mask)


def test_a_mask_reading_another_size_is_evaluated_with_it_at_the_reach():
    """The other size at the reach's value too: the window shows there, so
    the mask is not the causal one (before, it was judged causal and 100
    tokens with p of 50 were served causally)."""
    q, k, v = qkv(t=16)
    gm, lines = rewritten_matches(other_size, torch.randn(8), q, k, v)
    assert len(lines) == 1 and "left alone" in lines[0], lines
    assert masks.G.arg(sdpa_calls(gm)[0], 3, "attn_mask") is not None


def test_a_window_within_a_bound_keeps_its_mask():
    """A window of 20 keys wider than the traced 16 tokens, the length
    marked dynamic up to 100: no guard may hold it to 20 (the user's range
    goes to 100), so the mask stays, with its window, at every length."""
    compiled, reports = rewritten_compiled(sliding20, dynamic=None)
    for t in (16, 40):
        args = _marked(100, t)
        assert torch.allclose(compiled(*args), sliding20(*args), atol=1e-6, rtol=1e-5), t
    assert [line.split(": ", 1)[-1] for (line,) in reports] == [
        "a causal mask with a sliding window of 20 keys (is_causal cannot say it)"], reports
