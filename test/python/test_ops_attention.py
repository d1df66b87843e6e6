"""liger.ops.attention and its operators liger::attention and
liger::attention_backward on the CPU: the output, the lse and the gradients
of q, k and v against float64 attention written out (softmax of the
scaled, masked scores), through the spec's module (the reference lowering,
LIGER_OPS_CPU_REFERENCE=1): one query token, odd lengths (7, 33), keys
longer and shorter than the queries, grouped-query ratios 1, 2 and 4,
causal (bottom-right aligned) and not, a scale of its own, f32, bf16 and
f16, head dimensions the GPU template has no tiles for (the reference takes
them); that the forward and the backward run the spec's functions and the
backward leaves what it saved; a non-contiguous q as Hugging Face forms it;
which calls run PyTorch's scaled_dot_product_attention instead on a GPU
target, with one warning per reason (the targets faked: nothing launches);
every argument rule; torch.compile with dynamic batch and lengths, with no
graph break, the fallback too; the spec's text and module, and the module
as liger-compile makes it for sm_90a: one kernel per function taking the
function's parameters in order."""

import json
import math
import os
import warnings

import pytest
from ops_helpers import module_command, needs_compiler, record_loads, rel

torch = pytest.importorskip("torch")

from liger import bundles, driver, operators, ops, specs  # noqa: E402
from liger.errors import (LigerError, LigerFallbackWarning, LigerTypeError,  # noqa: E402
                          LigerValueError)

F = torch.nn.functional
DTYPES = {"bf16": torch.bfloat16, "f16": torch.float16, "f32": torch.float32}
# Max |error| over max |float64's|: the scores, the softmax and both
# products in f32, the output (and dq, dk, dv) rounded once to the dtype:
# measured at most about one unit of the last place (3.9e-3 in bf16, 4.9e-4
# in f16; f32 a few 1e-7), the bounds about four times that.
TOL = {"bf16": 2e-2, "f16": 3e-3, "f32": 1e-5}
# (dtype, B, Hq, Hkv, T, S, D, causal, scale): one query token (alone, and
# decoding over 9 keys: causal sees them all), odd lengths 7 and 33, keys
# longer than the queries (causal bottom-right: row i sees i + 5 keys) and
# shorter (no mask), GQA 1, 2 and 4, a scale of its own, D 16, 24, 40 and 96
# (not the template's: the reference takes any) and 64.
CASES = {
    "f32_t1_mha": ("f32", 2, 2, 2, 1, 1, 16, False, None),
    "f16_t1_s9_gqa4_causal_d64": ("f16", 2, 4, 1, 1, 9, 64, True, None),
    "f32_t7_gqa4_causal_d24": ("f32", 1, 4, 1, 7, 7, 24, True, None),
    "bf16_t7_mha_d16": ("bf16", 2, 3, 3, 7, 7, 16, False, None),
    "f32_t7_s12_gqa2_causal_scale": ("f32", 1, 4, 2, 7, 12, 16, True, 0.3),
    "bf16_t33_gqa4_causal_scale_d40": ("bf16", 2, 8, 2, 33, 33, 40, True, 0.2),
    "bf16_t33_s20_gqa4_d96": ("bf16", 1, 4, 1, 33, 20, 96, False, None),
}


def _operands(b, hq, hkv, t, s, d, dtype, seed):
    """q [B, Hq, T, D], k and v [B, Hkv, S, D], of order one."""
    gen = torch.Generator().manual_seed(seed)

    def rand(*size):
        return torch.randn(*size, generator=gen).to(dtype)
    return rand(b, hq, t, d), rand(b, hkv, s, d), rand(b, hkv, s, d)


def _case_operands(name, seed):
    dt, b, hq, hkv, t, s, d = CASES[name][:7]
    return _operands(b, hq, hkv, t, s, d, DTYPES[dt], seed)


def _reference(q, k, v, causal, scale, window=None, softcap=None):
    """Attention written out, in the operands' dtype (float64 here): the
    key/value heads repeated for their query heads, the scores scaled (and
    capped: c · tanh(s / c)), causal keys j > i + S - T masked (with a
    window W also j <= i + S - T - W, each key tested one by one), the
    softmax, its product with v; and each row's log-sum-exp of its
    scores."""
    group = q.shape[1] // k.shape[1]
    k, v = k.repeat_interleave(group, 1), v.repeat_interleave(group, 1)
    t, s = q.shape[2], k.shape[2]
    scores = q.matmul(k.transpose(-1, -2)) * (scale or 1 / math.sqrt(q.shape[-1]))
    if softcap:
        scores = torch.tanh(scores / softcap) * softcap
    if causal:
        keep = torch.tensor([[j <= i + s - t and (not window or j > i + s - t - window)
                              for j in range(s)] for i in range(t)])
        scores = scores.masked_fill(~keep, float("-inf"))
    return scores.softmax(-1).matmul(v), scores.logsumexp(-1)


def _exact(tensors):
    return [t.detach().double().requires_grad_() for t in tensors]


def _incoming(out, seed):
    gen = torch.Generator().manual_seed(seed)
    return torch.randn(out.shape, generator=gen).to(out.dtype)


@pytest.mark.parametrize("name", sorted(CASES))
def test_the_output_and_the_gradients_against_float64(cpu_reference, monkeypatch, name):
    """The forward through the spec's @fwd, the backward through its @bwd
    (from the saved output and lse), against float64 attention and its
    autograd, for a random incoming gradient; the lse (the operator's
    second result) against float64's."""
    dt, b, hq, hkv, t, s, d, causal, scale = CASES[name]
    loaded = record_loads(monkeypatch, bundles, "attention_kernels")
    q, k, v = [x.requires_grad_() for x in _case_operands(name, 1)]
    with warnings.catch_warnings():
        warnings.simplefilter("error", LigerFallbackWarning)  # the reference takes every call
        out = ops.attention(q, k, v, causal=causal, scale=scale)
    assert out.shape == q.shape and out.dtype == q.dtype and out.is_contiguous()
    assert type(out.grad_fn).__name__ == "Liger_attentionBackward", type(out.grad_fn)
    spec = specs.attention_spec(hq, hkv, d, dt, causal, scale, target="cpu")
    assert loaded == [spec], loaded
    dout = _incoming(out, 2)
    out.backward(dout)
    assert loaded == [spec, spec], loaded  # (the backward's: the same module)
    exact = _exact((q, k, v))
    want, want_lse = _reference(*exact, causal, scale)
    want.backward(dout.double())
    assert rel(out, want) < TOL[dt], (name, rel(out, want))
    for what, got, ref in zip(("dq", "dk", "dv"), (q, k, v), exact):
        assert got.grad.dtype == got.dtype and got.grad.shape == got.shape, (name, what)
        assert rel(got.grad, ref.grad) < TOL[dt], (name, what, rel(got.grad, ref.grad))
    _, lse = torch.ops.liger.attention(q.detach(), k.detach(), v.detach(), causal, scale or 0.0)
    assert lse.shape == (b, hq, t) and lse.dtype == torch.float32
    assert rel(lse, want_lse) < 1e-5, (name, rel(lse, want_lse))


# (dtype, B, Hq, Hkv, T, S, D, scale, window), causal: a window shorter than
# the rows (3 of 7), one query decoding over 9 keys (it sees the last 4),
# keys longer than the queries (33 over 40: the window counts from each
# row's diagonal, i + 7), a window of 1 (each row its diagonal key alone)
# and one longer than the sequence (causal's own mask).
WINDOW_CASES = {
    "f32_t7_w3_gqa2": ("f32", 1, 4, 2, 7, 7, 16, None, 3),
    "f32_t1_s9_w4": ("f32", 2, 2, 1, 1, 9, 24, None, 4),
    "bf16_t33_s40_w8_gqa4_scale": ("bf16", 2, 8, 2, 33, 40, 40, 0.2, 8),
    "f16_t9_w1": ("f16", 1, 2, 2, 9, 9, 16, None, 1),
    "bf16_t7_w100": ("bf16", 1, 2, 1, 7, 7, 16, None, 100),
}


@pytest.mark.parametrize("name", sorted(WINDOW_CASES))
def test_a_sliding_window_against_float64(cpu_reference, monkeypatch, name):
    """window=W: the forward and the backward of the spec with the window
    (liger.attention ... window = W) against float64 attention masking the
    keys outside each row's window, the lse too."""
    dt, b, hq, hkv, t, s, d, scale, window = WINDOW_CASES[name]
    loaded = record_loads(monkeypatch, bundles, "attention_kernels")
    q, k, v = [x.requires_grad_() for x in _operands(b, hq, hkv, t, s, d, DTYPES[dt], 5)]
    with warnings.catch_warnings():
        warnings.simplefilter("error", LigerFallbackWarning)
        out = ops.attention(q, k, v, causal=True, scale=scale, window=window)
    spec = specs.attention_spec(hq, hkv, d, dt, True, scale, window, target="cpu")
    assert loaded == [spec] and " window = %d " % window in spec.module_text(), loaded
    dout = _incoming(out, 6)
    out.backward(dout)
    exact = _exact((q, k, v))
    want, want_lse = _reference(*exact, True, scale, window)
    want.backward(dout.double())
    assert rel(out, want) < TOL[dt], (name, rel(out, want))
    for what, got, ref in zip(("dq", "dk", "dv"), (q, k, v), exact):
        assert rel(got.grad, ref.grad) < TOL[dt], (name, what, rel(got.grad, ref.grad))
    _, lse = torch.ops.liger.attention(q.detach(), k.detach(), v.detach(), True, scale or 0.0,
                                       window)
    assert rel(lse, want_lse) < 1e-5, (name, rel(lse, want_lse))
    # The window matters where it is shorter than the keys a row sees.
    plain, _ = _reference(*exact, True, scale)
    assert (rel(plain, want) > 1e-3) == (window < s), name


# (dtype, B, Hq, Hkv, T, S, D, causal, scale, window, softcap): caps below
# the scores' spread (about 1 at these sizes: the cap bends them) and one
# far above it (50: nearly none), causal and not, one query decoding over 9
# keys, keys longer than the queries with a window, GQA 1, 2 and 4, a scale.
SOFTCAP_CASES = {
    "f32_t7_gqa2_causal_cap2": ("f32", 1, 4, 2, 7, 7, 16, True, None, None, 2.0),
    "f32_t9_mha_cap0.5": ("f32", 2, 2, 2, 9, 9, 24, False, None, None, 0.5),
    "f16_t1_s9_gqa4_cap1": ("f16", 2, 4, 1, 1, 9, 16, True, None, None, 1.0),
    "bf16_t33_s40_gqa4_w8_scale_cap1.5": ("bf16", 2, 8, 2, 33, 40, 40, True, 0.2, 8, 1.5),
    "bf16_t17_gqa2_causal_cap50": ("bf16", 1, 4, 2, 17, 17, 64, True, None, None, 50.0),
}


@pytest.mark.parametrize("name", sorted(SOFTCAP_CASES))
def test_a_softcap_against_float64(cpu_reference, monkeypatch, name):
    """softcap=c: the forward and the backward of the spec with the cap
    (liger.attention ... softcap = c) against float64 attention capping
    its scores before the mask, the lse too; the cap changes the result
    where it is below the scores' spread."""
    dt, b, hq, hkv, t, s, d, causal, scale, window, softcap = SOFTCAP_CASES[name]
    loaded = record_loads(monkeypatch, bundles, "attention_kernels")
    q, k, v = [x.requires_grad_() for x in _operands(b, hq, hkv, t, s, d, DTYPES[dt], 11)]
    with warnings.catch_warnings():
        warnings.simplefilter("error", LigerFallbackWarning)
        out = ops.attention(q, k, v, causal=causal, scale=scale, window=window, softcap=softcap)
    spec = specs.attention_spec(hq, hkv, d, dt, causal, scale, window, softcap, target="cpu")
    assert loaded == [spec] and " softcap = %.9e " % softcap in spec.module_text(), loaded
    dout = _incoming(out, 12)
    out.backward(dout)
    assert loaded == [spec, spec], loaded
    exact = _exact((q, k, v))
    want, want_lse = _reference(*exact, causal, scale, window, softcap)
    want.backward(dout.double())
    assert rel(out, want) < TOL[dt], (name, rel(out, want))
    for what, got, ref in zip(("dq", "dk", "dv"), (q, k, v), exact):
        assert rel(got.grad, ref.grad) < TOL[dt], (name, what, rel(got.grad, ref.grad))
    _, lse = torch.ops.liger.attention(q.detach(), k.detach(), v.detach(), causal, scale or 0.0,
                                       window or 0, softcap)
    assert rel(lse, want_lse) < 1e-5, (name, rel(lse, want_lse))
    plain, _ = _reference(*exact, causal, scale, window)
    assert (rel(plain, want) > 1e-3) == (softcap < 10), (name, rel(plain, want))


def test_the_softcap_rules(cpu_reference):
    """softcap: None or 0 (none), else a finite number > 0; the spec holds
    the same rules and writes no softcap for none."""
    q, k, v = _operands(1, 2, 1, 4, 4, 16, torch.float32, 7)
    for softcap, error, message in [
            (-1.0, LigerValueError, r"softcap must be None, 0 \(no softcap\) or > 0, got -1.0"),
            (float("inf"), LigerValueError, r"softcap must be finite, got inf"),
            (float("nan"), LigerValueError, r"softcap must be finite, got nan"),
            ("30", LigerTypeError, r"softcap must be a number, got '30'"),
            (True, LigerTypeError, r"softcap must be a number, got True")]:
        with pytest.raises(error, match=message):
            ops.attention(q, k, v, causal=True, softcap=softcap)
        with pytest.raises(error, match=message):
            ops.attention_spec(4, 1, 64, "bf16", True, softcap=softcap)
    assert ops.attention_spec(4, 1, 64, "bf16", True, softcap=0) == \
        ops.attention_spec(4, 1, 64, "bf16", True, softcap=None)
    assert "softcap" not in ops.attention_spec(4, 1, 64, "bf16", True, softcap=0).module_text()


def test_a_softcapped_call_the_template_does_not_take_runs_its_math(monkeypatch):
    """SDPA has no softcap: a softcapped call the template does not take
    (D 256 with autograd, f32, keys longer than the queries) runs the same
    math in PyTorch (operators.softcapped_attention) and its autograd,
    warned once with the reason, against float64."""
    _fake_target(monkeypatch, "sm_90a")
    loaded = record_loads(monkeypatch, bundles, "attention_kernels")
    for dt, d, (t, s), window in (("bf16", 256, (5, 5), None), ("f32", 64, (5, 5), 2),
                                  ("f16", 128, (3, 9), None)):
        q, k, v = [x.requires_grad_() for x in _operands(2, 4, 2, t, s, d, DTYPES[dt], d + t)]
        with pytest.warns(LigerFallbackWarning) as caught:
            out = ops.attention(q, k, v, causal=True, window=window, softcap=1.0)
        messages = [str(w.message) for w in caught]
        assert len(messages) == 1 and messages[0].startswith("liger: attention: ") and \
            messages[0].endswith("; using PyTorch's attention math (a softcap)"), messages
        exact = _exact((q, k, v))
        want, _ = _reference(*exact, True, None, window, 1.0)
        assert rel(out, want) < TOL[dt], (dt, d, rel(out, want))
        dout = _incoming(out, 3)
        out.backward(dout)
        want.backward(dout.double())
        for got, ref in zip((q, k, v), exact):
            assert rel(got.grad, ref.grad) < TOL[dt], (dt, d, rel(got.grad, ref.grad))
    assert loaded == []


def test_softcapped_attention_takes_any_mask():
    """operators.softcapped_attention, the softcapped fallback's math: a
    boolean mask broadcast over the scores (a padded batch: one row per
    batch entry of its own), against float64 written out; a row whose keys
    are all masked averages v (Hugging Face's eager attention's padding
    rows), not NaN."""
    q, k, v = _operands(2, 4, 2, 6, 6, 16, torch.float64, 13)
    keep = torch.ones(2, 1, 6, 6, dtype=torch.bool).tril()
    keep[1, :, :, :2] = False  # (batch entry 1: its first two keys are padding)
    got = operators.softcapped_attention(q, k, v, keep, 0.5, 3.0)
    group = 2
    scores = q @ k.repeat_interleave(group, 1).transpose(-1, -2) * 0.5
    scores = (torch.tanh(scores / 3.0) * 3.0).masked_fill(~keep, float("-inf"))
    want = scores.softmax(-1) @ v.repeat_interleave(group, 1)
    assert torch.allclose(got[0], want[0], rtol=0, atol=1e-6)
    assert torch.allclose(got[1, :, 2:], want[1, :, 2:], rtol=0, atol=1e-6)
    vg = v.repeat_interleave(group, 1).float()
    assert torch.allclose(got[1, :, :2], vg[1].mean(-2, keepdim=True).expand(4, 2, 16).double(),
                          rtol=0, atol=1e-6)


def test_the_window_rules(cpu_reference):
    """window: an int >= 1 (None: none), with causal only; the spec holds
    the same rules."""
    q, k, v = _operands(1, 2, 1, 4, 4, 16, torch.float32, 7)
    for window, error, message in [
            (0, LigerValueError, r"window must be in \[1, "),
            (-3, LigerValueError, r"window must be in \[1, "),
            (2.0, LigerTypeError, r"window must be an int, got 2.0"),
            (True, LigerTypeError, r"window must be an int, got True")]:
        with pytest.raises(error, match=message):
            ops.attention(q, k, v, causal=True, window=window)
    with pytest.raises(LigerValueError, match=r"liger.ops.attention: window=2 needs "
                       r"causal=True \(a sliding window bounds the keys below each query's "
                       r"diagonal\)"):
        ops.attention(q, k, v, window=2)
    with pytest.raises(LigerValueError, match=r"window=2 needs causal=True"):
        ops.attention_spec(4, 1, 64, "bf16", window=2)
    with pytest.raises(LigerValueError, match=r"window must be in \[0, "):
        ops.attention_spec(4, 1, 64, "bf16", True, window=-1)


def test_the_backward_leaves_what_it_saved(cpu_reference):
    """The backward reads the saved q, k, v, output and lse and writes fresh
    gradients: a second backward through the graph (retain_graph) gives the
    same gradients, and the operands are unchanged."""
    operands = _operands(2, 4, 2, 5, 5, 16, torch.bfloat16, 3)
    saved = [t.clone() for t in operands]
    q, k, v = [t.requires_grad_() for t in operands]
    out = ops.attention(q, k, v, causal=True)
    dout = _incoming(out, 4)
    out.backward(dout, retain_graph=True)
    first = [t.grad.clone() for t in (q, k, v)]
    for t in (q, k, v):
        t.grad = None
    out.backward(dout)
    assert all(torch.equal(a, t.grad) for a, t in zip(first, (q, k, v)))
    assert all(torch.equal(a, t) for a, t in zip(saved, operands))


def test_a_non_contiguous_q_is_copied(cpu_reference):
    """q, k and v as Hugging Face's attention forms them, transposes of [B,
    T, H, D] projections: the same output and gradients as contiguous
    copies."""
    gen = torch.Generator().manual_seed(5)
    q, k, v = [torch.randn(2, 7, h, 16, generator=gen).to(torch.bfloat16)
               for h in (4, 2, 2)]
    results = []
    for views in (True, False):
        leaves = [t.clone().requires_grad_() for t in (q, k, v)]
        args = [t.transpose(1, 2) for t in leaves]
        if not views:
            args = [a.contiguous() for a in args]
        else:
            assert not any(a.is_contiguous() for a in args)
        out = ops.attention(*args, causal=True)
        out.backward(_incoming(out, 6))
        results.append([out] + [t.grad for t in leaves])
    assert all(torch.equal(a, b) for a, b in zip(*results))


# --- where PyTorch's scaled_dot_product_attention runs instead -----------------

def _fake_target(monkeypatch, target):
    """CPU tensors have the GPU target `target` (the decisions only: what
    would launch a kernel cannot run here)."""
    monkeypatch.setenv("LIGER_OPS_CPU_REFERENCE", "1")
    ops.clear_caches()
    monkeypatch.setitem(bundles._TARGETS, ("cpu", None), target)


SDPA = "; using PyTorch's scaled_dot_product_attention"
# name -> (target, dtype, D, (T, S), whether q requires grad, the reason).
FALLBACKS = {
    "sm_80": ("sm_80", "bf16", 64, (5, 5), False,
              "the attention template needs wgmma and TMA (sm_90a), the target is sm_80"),
    "sm_86": ("sm_86", "f16", 128, (5, 5), True,
              "the attention template needs wgmma and TMA (sm_90a), the target is sm_86"),
    "f32": ("sm_90a", "f32", 64, (5, 5), False,
            "the attention template takes bf16 or f16 (wgmma's operands), got f32"),
    "head_dim_96": ("sm_90a", "bf16", 96, (5, 5), False,
                    "head dimension 96: the attention template takes multiples of 64 up to 256 "
                    "(its tiles' 128-byte rows)"),
    "head_dim_320": ("sm_90a", "bf16", 320, (5, 5), False,
                     "head dimension 320: the attention template takes multiples of 64 up to "
                     "256 (its tiles' 128-byte rows)"),
    "head_dim_256_grad": ("sm_90a", "bf16", 256, (5, 5), True,
                          "head dimension 256 with a backward: the attention template's "
                          "backward takes 64 or 128 (it holds dk and dv of 64 key rows in "
                          "registers)"),
    "decoding": ("sm_90a", "f16", 128, (1, 9), True,
                 "keys and queries of different lengths: the attention template's kernels "
                 "take one sequence length (their launcher binds it once)"),
}


@pytest.mark.parametrize("name", sorted(FALLBACKS))
def test_a_call_the_template_does_not_take_runs_pytorchs_sdpa(monkeypatch, name):
    """On a GPU target, a call the attention template does not take runs
    PyTorch's scaled_dot_product_attention (causal bottom-right, as liger's)
    and its autograd, with one LigerFallbackWarning naming the reason, once;
    no kernel is loaded."""
    target, dt, d, (t, s), grad, reason = FALLBACKS[name]
    _fake_target(monkeypatch, target)
    loaded = record_loads(monkeypatch, bundles, "attention_kernels")
    q, k, v = _operands(2, 4, 2, t, s, d, DTYPES[dt], 7)
    q.requires_grad_(grad)
    with pytest.warns(LigerFallbackWarning) as caught:
        out = ops.attention(q, k, v, causal=True)
    assert [str(w.message) for w in caught] == ["liger: attention: " + reason + SDPA]
    assert torch.equal(out, F.scaled_dot_product_attention(
        q, k, v, is_causal=t == s, scale=None, enable_gqa=True))
    want, _ = _reference(*_exact((q, k, v)), True, None)
    assert rel(out, want) < TOL[dt], rel(out, want)
    if grad:
        out.backward(_incoming(out, 8))
        assert q.grad is not None and q.grad.shape == q.shape
    with warnings.catch_warnings():
        warnings.simplefilter("error", LigerFallbackWarning)  # (warned once)
        ops.attention(q, k, v, causal=True)
    assert loaded == []


def test_the_sdpa_fallback_masks_causal_calls_bottom_right():
    """attention_reference, the fallback's computation: SDPA with liger's
    causal mask where the lengths differ (SDPA's is_causal is aligned
    top-left), against float64 written out; one query sees every key."""
    for t, s in ((1, 9), (4, 9), (9, 9)):
        q, k, v = _operands(1, 4, 2, t, s, 16, torch.float64, t * s)
        want, _ = _reference(q, k, v, True, 0.5)
        got = operators.attention_reference(q, k, v, True, 0.5)
        assert torch.allclose(got, want, rtol=0, atol=1e-12), (t, s)
    want, _ = _reference(q, k, v, False, None)
    assert torch.allclose(operators.attention_reference(q, k, v, False, 0.0), want, rtol=0,
                          atol=1e-12)
    # A sliding window: an explicit mask, whatever the lengths.
    for t, s, window in ((1, 9, 4), (6, 9, 2), (9, 9, 3), (9, 9, 20)):
        q, k, v = _operands(1, 4, 2, t, s, 16, torch.float64, t * s + window)
        want, _ = _reference(q, k, v, True, None, window)
        got = operators.attention_reference(q, k, v, True, 0.0, window)
        assert torch.allclose(got, want, rtol=0, atol=1e-12), (t, s, window)


def test_a_head_dimension_of_256_without_autograd_runs_liger(monkeypatch):
    """D 256 (and 192): the template takes the forward, not the backward;
    a call that needs no gradient (its inputs need none, or under
    torch.no_grad) runs liger's forward kernel, of a spec whose module has
    no @bwd; one that needs one falls back whole (above)."""
    _fake_target(monkeypatch, "sm_90a")
    loaded = []

    def kernels(spec):
        loaded.append(spec)
        return (lambda q, k, v: (torch.zeros_like(q), q.new_zeros(q.shape[:3],
                                                                  dtype=torch.float32)), None)
    monkeypatch.setattr(bundles, "attention_kernels", kernels)
    for d in (256, 192):
        q, k, v = _operands(1, 4, 1, 3, 3, d, torch.bfloat16, 9)
        with warnings.catch_warnings():
            warnings.simplefilter("error", LigerFallbackWarning)
            ops.attention(q, k, v)
            with torch.no_grad():
                ops.attention(q.requires_grad_(), k, v)
        spec = specs.attention_spec(4, 1, d, "bf16")
        assert loaded[-2:] == [spec, spec] and "@bwd" not in spec.module_text()
    # The operator's backward (liger.ops.attention never calls it here)
    # names what is missing.
    with pytest.raises(LigerError, match=r"have no backward: head dimension 192 with a "
                       r"backward"):
        torch.ops.liger.attention_backward(q, q, k, v, q, q[..., 0].float(), False, 0.0)


def test_what_the_template_takes():
    """specs.attention_unsupported, the one rule (attentionTemplateProblem's
    mirror): sm_90a, bf16 or f16, D a multiple of 64 up to 256 and 64 or
    128 with the backward, one length for queries and keys; the reference
    lowering takes everything."""
    unsupported = specs.attention_unsupported
    for d in (64, 128, 192, 256):
        for dt in ("bf16", "f16"):
            assert unsupported("sm_90a", dt, d) is None
            assert unsupported("sm_90a", dt, d, False, 7, 7) is None
    for d in (64, 128):
        assert unsupported("sm_90a", "bf16", d, True, 33, 33) is None
    for d in (192, 256):
        assert "with a backward" in unsupported("sm_90a", "bf16", d, True)
    for d in (16, 32, 96, 320):
        assert unsupported("sm_90a", "bf16", d).startswith("head dimension %d:" % d)
    assert "bf16 or f16" in unsupported("sm_90a", "f32", 64)
    assert "different lengths" in unsupported("sm_90a", "bf16", 64, False, 1, 9)
    for target in ("sm_80", "sm_86"):
        assert unsupported(target, "bf16", 64).endswith("the target is " + target)
    for args in (("f32", 96, True, 1, 9), ("bf16", 7, True, 3, 2)):
        assert unsupported("cpu", *args) is None


# --- argument rules --------------------------------------------------------------

@pytest.fixture
def cpu_target(monkeypatch):
    """CPU tensors have the target "cpu" (checks only: nothing runs)."""
    monkeypatch.setenv("LIGER_OPS_CPU_REFERENCE", "1")

    def never(*args, **kwargs):
        raise AssertionError("an invalid call reached the kernels")
    monkeypatch.setattr(bundles, "attention_kernels", never)
    ops.clear_caches()
    yield
    ops.clear_caches()


def _bf16(*shape):
    return torch.zeros(*shape, dtype=torch.bfloat16)


# q [2, 4, 5, 16], k and v [2, 2, 5, 16], bf16.
VALID = dict(q=_bf16(2, 4, 5, 16), k=_bf16(2, 2, 5, 16), v=_bf16(2, 2, 5, 16), causal=False,
             scale=None)
# (name, error, the whole message (a pattern), the changes to VALID).
INVALID = [
    ("q_not_a_tensor", LigerTypeError, r"liger.ops.attention: q must be a torch.Tensor, got list",
     dict(q=[[0.0]])),
    ("v_none", LigerTypeError, r"liger.ops.attention: v must be a torch.Tensor, got NoneType",
     dict(v=None)),
    ("devices", LigerValueError, r"liger.ops.attention: q is on cpu and k on meta",
     dict(k=torch.zeros(2, 2, 5, 16, dtype=torch.bfloat16, device="meta"))),
    ("q_3d", LigerValueError, r"liger.ops.attention: q, k and v must be \[B, Hq, T, D\], \[B, "
     r"Hkv, S, D\] and \[B, Hkv, S, D\], got \[4, 5, 16\], \[2, 2, 5, 16\] and \[2, 2, 5, 16\]",
     dict(q=_bf16(4, 5, 16))),
    ("k_5d", LigerValueError, r"q, k and v must be \[B, Hq, T, D\].*got \[2, 4, 5, 16\], "
     r"\[1, 2, 2, 5, 16\] and", dict(k=_bf16(1, 2, 2, 5, 16))),
    ("q_no_queries", LigerValueError, r"liger.ops.attention: q and k must not be empty, got "
     r"\[2, 4, 0, 16\] and \[2, 2, 5, 16\]", dict(q=_bf16(2, 4, 0, 16))),
    ("k_no_keys", LigerValueError, r"q and k must not be empty, got \[2, 4, 5, 16\] and "
     r"\[2, 2, 0, 16\]", dict(k=_bf16(2, 2, 0, 16), v=_bf16(2, 2, 0, 16))),
    ("no_batch", LigerValueError, r"q and k must not be empty",
     dict(q=_bf16(0, 4, 5, 16), k=_bf16(0, 2, 5, 16), v=_bf16(0, 2, 5, 16))),
    ("k_batch", LigerValueError, r"liger.ops.attention: k must be \[2, Hkv, S, 16\] \(B and D "
     r"of q\), got \[1, 2, 5, 16\]", dict(k=_bf16(1, 2, 5, 16))),
    ("k_head_dim", LigerValueError, r"k must be \[2, Hkv, S, 16\] \(B and D of q\), got "
     r"\[2, 2, 5, 32\]", dict(k=_bf16(2, 2, 5, 32))),
    ("v_head_dim", LigerValueError, r"liger.ops.attention: v must have the shape of k "
     r"\[2, 2, 5, 16\], got \[2, 2, 5, 32\]", dict(v=_bf16(2, 2, 5, 32))),
    ("v_length", LigerValueError, r"v must have the shape of k \[2, 2, 5, 16\], got "
     r"\[2, 2, 6, 16\]", dict(v=_bf16(2, 2, 6, 16))),
    ("heads", LigerValueError, r"liger.ops.attention: q's heads \(4\) must be a multiple of "
     r"k's \(3\): each key/value head serves a group of query heads",
     dict(k=_bf16(2, 3, 5, 16), v=_bf16(2, 3, 5, 16))),
    ("k_dtype", LigerTypeError, r"liger.ops.attention: k must have the dtype of q "
     r"\(torch.bfloat16\), got torch.float16", dict(k=torch.zeros(2, 2, 5, 16).half())),
    ("v_dtype", LigerTypeError, r"v must have the dtype of q \(torch.bfloat16\), got "
     r"torch.float32", dict(v=torch.zeros(2, 2, 5, 16))),
    ("f64", LigerTypeError, r"liger.ops.attention: q's dtype must be bf16 or f16 or f32, got "
     r"torch.float64", dict(q=torch.zeros(2, 4, 5, 16).double(),
                            k=torch.zeros(2, 2, 5, 16).double(),
                            v=torch.zeros(2, 2, 5, 16).double())),
    ("causal_int", LigerTypeError, r"^causal must be a bool, got 1$", dict(causal=1)),
    ("causal_fewer_keys", LigerValueError, r"liger.ops.attention: the causal mask is aligned "
     r"bottom-right \(query i sees the keys j <= i \+ S - T\): it needs at least as many keys "
     r"as queries, got T = 5 and S = 3", dict(k=_bf16(2, 2, 3, 16), v=_bf16(2, 2, 3, 16),
                                           causal=True)),
    ("scale_zero", LigerValueError, r"^scale must be > 0.0, got 0.0$", dict(scale=0)),
    ("scale_negative", LigerValueError, r"^scale must be > 0.0, got -0.5$", dict(scale=-0.5)),
    ("scale_inf", LigerValueError, r"^scale must be finite, got inf$", dict(scale=math.inf)),
    ("scale_nan", LigerValueError, r"^scale must be finite, got nan$", dict(scale=math.nan)),
    ("scale_bool", LigerTypeError, r"^scale must be a number, got True$", dict(scale=True)),
    ("scale_str", LigerTypeError, r"^scale must be a number, got '0.5'$", dict(scale="0.5")),
    ("scale_f32_overflow", LigerValueError, r"^scale must be an f32", dict(scale=1e39)),
]


@pytest.mark.parametrize("name,error,message,changes", INVALID, ids=[c[0] for c in INVALID])
def test_each_rule_is_checked(cpu_target, name, error, message, changes):
    with pytest.raises(error, match=message):
        ops.attention(**dict(VALID, **changes))


def test_cpu_tensors_without_the_reference_are_refused(monkeypatch):
    monkeypatch.delenv("LIGER_OPS_CPU_REFERENCE", raising=False)
    ops.clear_caches()
    with pytest.raises(LigerError, match=r"^liger.ops runs on CUDA tensors, got tensors on cpu"):
        ops.attention(VALID["q"], VALID["k"], VALID["v"])


def test_the_call_is_checked_after_its_configuration_is_remembered(cpu_reference):
    """A configuration's static facts are checked once; the batch and the
    lengths of each call still are (k's batch, v's length, a causal call's
    keys)."""
    q, k, v = _operands(2, 4, 2, 5, 5, 16, torch.bfloat16, 10)
    out = ops.attention(q, k, v, causal=True)
    assert out.shape == q.shape
    with pytest.raises(LigerValueError, match=r"k must be \[2, Hkv, S, 16\]"):
        ops.attention(q, k[:1], v[:1], causal=True)
    with pytest.raises(LigerValueError, match=r"v must have the shape of k"):
        ops.attention(q, k, v[:, :, :4], causal=True)
    with pytest.raises(LigerValueError, match=r"got T = 5 and S = 4"):
        ops.attention(q, k[:, :, :4], v[:, :, :4], causal=True)
    with pytest.raises(LigerValueError, match=r"must not be empty"):
        ops.attention(q[:, :, :0], k, v, causal=True)
    # Fewer keys than queries without the mask: every query sees them all.
    assert ops.attention(q, k[:, :, :4], v[:, :, :4]).shape == q.shape


# --- torch.compile ----------------------------------------------------------------

def _step(q, k, v):
    out = ops.attention(q, k, v, causal=True, scale=0.25)
    return (out.float() * out.float()).sum()


def test_torch_compile_with_dynamic_shapes_and_no_graph_break(cpu_reference):
    """liger.ops.attention under torch.compile(fullgraph=True, dynamic=True),
    forward and backward traced (aot_eager), two batch and length sizes
    (keys longer than the queries in the second): the loss and gradients
    of the eager call."""
    torch._dynamo.reset()
    compiled = torch.compile(_step, backend="aot_eager", fullgraph=True, dynamic=True)
    try:
        for b, t, s in ((2, 3, 3), (3, 5, 7)):
            operands = _operands(b, 4, 2, t, s, 16, torch.bfloat16, 11)
            results = []
            for fn in (compiled, _step):
                leaves = [x.clone().requires_grad_() for x in operands]
                loss = fn(*leaves)
                loss.backward()
                results.append([loss] + [x.grad for x in leaves])
            assert all(torch.equal(a, e) for a, e in zip(*results)), (b, t, s)
    finally:
        torch._dynamo.reset()


def test_the_fallback_compiles_with_no_graph_break(monkeypatch):
    """A call that falls back (D 96 on sm_90a) under
    torch.compile(fullgraph=True): decided and warned while the graph is
    traced (once), PyTorch's SDPA in the graph, the eager call's output."""
    _fake_target(monkeypatch, "sm_90a")
    q, k, v = _operands(1, 4, 1, 6, 6, 96, torch.bfloat16, 12)
    torch._dynamo.reset()
    try:
        with pytest.warns(LigerFallbackWarning, match=r"head dimension 96"):
            explained = torch._dynamo.explain(_step)(q, k, v)
        assert explained.graph_break_count == 0, [r.reason for r in explained.break_reasons]
        ops.clear_caches()
        monkeypatch.setitem(bundles._TARGETS, ("cpu", None), "sm_90a")
        compiled = torch.compile(_step, backend="aot_eager", fullgraph=True)
        with pytest.warns(LigerFallbackWarning, match=r"head dimension 96"):
            got = compiled(q, k, v)
        with warnings.catch_warnings():
            warnings.simplefilter("error", LigerFallbackWarning)
            assert torch.equal(got, _step(q, k, v))
    finally:
        torch._dynamo.reset()


# --- the spec ---------------------------------------------------------------------

def test_the_spec_text_round_trips():
    spec = ops.attention_spec(32, 8, 128, torch.bfloat16, causal=True)
    assert str(spec) == "attention:causal=1,dtype=bf16,head_dim=128,kv_heads=8,q_heads=32"
    assert ops.parse_spec(str(spec)) == spec
    scaled = ops.attention_spec(12, 2, 64, "f16", scale=0.125)
    assert str(scaled) == "attention:causal=0,dtype=f16,head_dim=64,kv_heads=2,q_heads=12," \
        "scale=0.125"
    assert ops.parse_spec(str(scaled)) == scaled
    windowed = ops.attention_spec(32, 8, 128, "bf16", True, window=4096)
    assert str(windowed) == "attention:causal=1,dtype=bf16,head_dim=128,kv_heads=8," \
        "q_heads=32,window=4096"
    assert ops.parse_spec(str(windowed)) == windowed
    capped = ops.attention_spec(8, 4, 256, "bf16", True, softcap=50.0)
    assert str(capped) == "attention:causal=1,dtype=bf16,head_dim=256,kv_heads=4," \
        "q_heads=8,softcap=50.0"
    assert ops.parse_spec(str(capped)) == capped
    assert ops.attention_spec(8, 4, 256, "bf16", True, softcap=30.0).key() != capped.key()
    # The default scale (None or 0) and no window (None or 0) are written
    # as no attribute; a scale, the mask, the window and the target are
    # each part of the key.
    assert ops.attention_spec(32, 8, 128, "bf16", True, 0, 0) == spec
    keys = {s.key() for s in (spec, scaled, ops.attention_spec(32, 8, 128, "bf16"),
                              ops.attention_spec(32, 8, 128, "bf16", True, 0.125),
                              spec.with_target("cpu"), windowed,
                              ops.attention_spec(32, 8, 128, "bf16", True, window=4095))}
    assert len(keys) == 7
    assert spec.compile_options() == dict(target="sm_90a", matmul_kernels=False)


def test_the_module_is_the_forward_with_lse_and_the_saved_backward():
    spec = ops.attention_spec(32, 8, 128, "bf16", causal=True, scale=0.125)
    text = module_command(spec)
    assert text == spec.module_text()
    Q, K = "tensor<?x32x?x128xbf16>", "tensor<?x8x?x128xbf16>"
    L = "tensor<?x32x?xf32>"
    assert "func.func @fwd(%%q: %s, %%k: %s, %%v: %s) -> (%s, %s)" % (Q, K, K, Q, L) in text
    assert "liger.attention %q, %k, %v causal scale = 1.250000000e-01 return_lse" in text
    assert "func.func @bwd(%%do: %s, %%q: %s, %%k: %s, %%v: %s, %%o: %s, %%lse: %s) -> " \
        "(%s, %s, %s)" % (Q, Q, K, K, Q, L, Q, K, K) in text
    assert "liger.attention_grad %%do, %%q, %%k, %%v saved(%%o, %%lse : %s, %s) causal " \
        "scale = 1.250000000e-01 :" % (Q, L) in text
    verified = driver.run_opt(text)
    assert "func.func @fwd" in verified and "func.func @bwd" in verified
    # Without the template's backward (D 256 on sm_90a) no @bwd; the
    # reference keeps it, and takes any head dimension and f32.
    wide = ops.attention_spec(8, 1, 256, "bf16")
    assert "@bwd" not in wide.module_text() and "return_lse" in wide.module_text()
    assert "@bwd" in wide.with_target("cpu").module_text()
    driver.run_opt(ops.attention_spec(4, 4, 24, "f32", target="cpu").module_text())


def test_the_spec_refuses_what_the_template_cannot_make():
    for args, target, message in [
            ((4, 1, 64, "f32"), "sm_90a", r"no attention kernel on sm_90a: the attention "
             r"template takes bf16 or f16 \(wgmma's operands\), got f32; liger.ops.attention "
             r"runs PyTorch's scaled_dot_product_attention there"),
            ((4, 1, 96, "bf16"), "sm_90a", r"head dimension 96: the attention template takes "
             r"multiples of 64 up to 256"),
            ((4, 1, 64, "bf16"), "sm_80", r"no attention kernel on sm_80: the attention "
             r"template needs wgmma and TMA \(sm_90a\), the target is sm_80"),
            ((4, 3, 64, "bf16"), "cpu", r"q_heads must be a multiple of kv_heads \(each "
             r"key/value head serves a group of query heads\), got 4 and 3"),
            ((4, 0, 64, "bf16"), "cpu", r"kv_heads must be in \[1, 2147483647\], got 0")]:
        with pytest.raises(LigerValueError, match=message):
            ops.attention_spec(*args, target=target)
    with pytest.raises(LigerValueError, match=r"scale must be >= 0.0, got -1.0"):
        ops.parse_spec("attention:causal=0,dtype=bf16,head_dim=64,kv_heads=1,q_heads=4,"
                       "scale=-1")


@needs_compiler
@pytest.mark.parametrize("d", [64, 256])
def test_each_function_is_one_kernel_of_its_parameters_in_order(tmp_path, d):
    """liger-compile makes @fwd and @bwd one kernel each of the attention
    template (bundles.attention_kernels loads them by these names), whose
    parameters are the function's, in order, and its results: what the
    reference (which runs the functions) and the GPU (which runs the
    kernels) hand the operators alike. D 256: the forward's kernel alone."""
    spec = ops.attention_spec(4, 2, d, "bf16", causal=True)
    (path,) = ops.precompile(str(tmp_path), [spec])
    with open(os.path.join(path, "manifest.json")) as f:
        (module,) = json.load(f)["modules"]
    kernels = {k["function"]: k for k in module["kernels"]}
    assert sorted(kernels) == (["bwd", "fwd"] if d == 64 else ["fwd"])
    Q, K, L = ["batch", 4, "seq", d], ["batch", 2, "seq", d], ["batch", 4, "seq"]
    want = {"fwd": [("input", Q), ("input", K), ("input", K), ("output", Q), ("output", L)],
            "bwd": [("input", Q), ("input", Q), ("input", K), ("input", K), ("input", Q),
                    ("input", L), ("output", Q), ("output", K), ("output", K)]}
    for function, kernel in kernels.items():
        assert kernel["name"] == function + "_attention_0"
        params = [(p["role"], p["shape"]) for p in kernel["params"] if p["role"] != "workspace"]
        assert params == want[function], (function, params)
