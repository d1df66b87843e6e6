"""liger.ops.attention on the GPU: the attention template's forward kernel
(with the lse) and backward kernel of each configuration of
ops_attention_cases.CASES at the (batch, sequence) shapes of
ops_attention_cases.SHAPES, written over NaN (every element), and
liger.ops.attention with autograd, the output and the gradients of q, k
and v against float64 autograd of attention written out. The error is held
to twice PyTorch's own (scaled_dot_product_attention in the same dtype,
forward and backward, against the same float64) plus one unit in the last
place of the largest value (both round there). The kernels that ran are
checked to be the configuration's; D 256 runs liger's forward without
autograd and PyTorch's SDPA (one warning) with it; keys of another length
than the queries (decoding) and head dimensions the template has no tiles
for run SDPA, warned, with the bottom-right causal mask; torch.compile
traces the op with no graph break. The bundles are the ones
scripts/build-gpu-bundles.sh precompiled (LIGER_OPS_BUNDLES). Skips cleanly
without torch, a GPU, the runtime or the bundles."""

import math
import warnings
import zlib

import pytest

import kernels
import ops_attention_cases

torch = pytest.importorskip("torch", reason="needs PyTorch")
if not torch.cuda.is_available():
    pytest.skip("no CUDA GPU on this machine", allow_module_level=True)
import torch.nn.functional as F  # noqa: E402

from liger import bundles, operators, ops  # noqa: E402
from liger.errors import LigerFallbackWarning  # noqa: E402

CASES = ops_attention_cases.CASES
RUNS = [pytest.param(name, b, t, id="%s-%dx%d" % (name, b, t))
        for name in sorted(CASES) for b, t in ops_attention_cases.SHAPES]
GRAD_RUNS = [run for run in RUNS if CASES[run.values[0]][2] <= 128]
DEVICE = torch.device("cuda")
DTYPES = {"bf16": torch.bfloat16, "f16": torch.float16}

pytestmark = pytest.mark.usefixtures("ops_bundles")


def _seed(*what):
    """A seed of its own for each test and case (Python's hash of a string
    changes between runs)."""
    return zlib.crc32(repr(what).encode())


def _operands(hq, hkv, d, dtype, b, t, seed, s=None):
    """q [B, Hq, T, D], k and v [B, Hkv, S, D] (S = T unless given), of
    order one."""
    g = torch.Generator(device=DEVICE).manual_seed(seed)

    def rand(h, n):
        return torch.randn(b, h, n, d, device=DEVICE, generator=g).to(dtype)
    return rand(hq, t), rand(hkv, t if s is None else s), rand(hkv, t if s is None else s)


def _keep(t, s, causal, window, device):
    """The keys each query sees, [T, S], or None (all): the complement of
    the GPU suite's mask (kernels.attention_masked)."""
    masked = kernels.attention_masked(t, s, causal, window, device)
    return None if masked is None else ~masked


def _reference(q, k, v, causal, scale, window=None, softcap=None):
    """Attention written out in the operands' dtype (float64 here): the
    key/value heads repeated for their query heads, the scores capped
    (softcap c: c tanh(s / c)), the keys _keep drops masked; and each row's
    log-sum-exp of its scores."""
    group = q.shape[1] // k.shape[1]
    k, v = k.repeat_interleave(group, 1), v.repeat_interleave(group, 1)
    t, s = q.shape[2], k.shape[2]
    scores = q.matmul(k.mT) * (scale or 1 / math.sqrt(q.shape[-1]))
    if softcap:
        scores = scores.div(softcap).tanh() * softcap
    keep = _keep(t, s, causal, window, q.device)
    if keep is not None:
        scores = scores.masked_fill(~keep, float("-inf"))
    return scores.softmax(-1).matmul(v), scores.logsumexp(-1)


def _sdpa(q, k, v, causal, scale, window=None, softcap=None):
    """PyTorch's own attention in the operands' dtype (S = T: its causal
    mask is liger's; a window an explicit mask; a softcap, which SDPA has
    none of, the same math in PyTorch: operators.softcapped_attention)."""
    if softcap:
        return operators.softcapped_attention(
            q, k, v, _keep(q.shape[2], k.shape[2], causal, window, q.device), scale, softcap)
    if window:
        return F.scaled_dot_product_attention(
            q, k, v, attn_mask=_keep(q.shape[2], k.shape[2], True, window, q.device),
            scale=scale, enable_gqa=True)
    return F.scaled_dot_product_attention(q, k, v, is_causal=causal, scale=scale,
                                          enable_gqa=True)


def _err(got, want):
    return (got.double() - want).abs().max().item()


def _check(what, got, want, torch_got, dtype):
    """got's max |error| against float64's at most twice PyTorch's
    (torch_got) plus one unit in the last place of the largest |value|
    (and 1e-5: f32 rounding where the exact value is 0, as dq and dk of a
    single key)."""
    largest = want.abs().max().item()
    ulp = torch.finfo(dtype).eps * 2.0 ** math.floor(math.log2(largest)) if largest else 0.0
    err, torch_err = _err(got, want), _err(torch_got, want)
    assert err <= 2 * torch_err + ulp + 1e-5, \
        "%s: max error %.3g; PyTorch's in %s: %.3g (largest |value| %.3g)" % (
            what, err, dtype, torch_err, largest)


def _record_loads(monkeypatch):
    """The specs bundles.attention_kernels is called with from here on."""
    loaded = []
    load = bundles.attention_kernels
    monkeypatch.setattr(bundles, "attention_kernels",
                        lambda spec: (loaded.append(spec), load(spec))[1])
    return loaded


@pytest.mark.parametrize("name,b,t", RUNS)
def test_the_forward_kernel_writes_every_element(name, b, t):
    hq, hkv, d, causal, scale, dt, window, softcap = CASES[name]
    spec = ops_attention_cases.spec(name, bundles.device_target(DEVICE))
    fwd, bwd = bundles.attention_kernels(spec)
    assert (bwd is None) == (d > 128), name
    q, k, v = _operands(hq, hkv, d, DTYPES[dt], b, t, _seed("forward", name, b, t))
    out = torch.full_like(q, float("nan"))
    lse = torch.full((b, hq, t), float("nan"), device=DEVICE)
    fwd(q, k, v, out=[out, lse])
    torch.cuda.synchronize()
    for what, x in (("out", out), ("lse", lse)):
        assert not torch.isnan(x).any(), "%s, %dx%d: an element of %s not written" % (
            name, b, t, what)
    want, want_lse = _reference(*[x.double() for x in (q, k, v)], causal, scale, window,
                                softcap)
    _check("%s, %dx%d: out" % (name, b, t), out, want,
           _sdpa(q, k, v, causal, scale, window, softcap), DTYPES[dt])
    # The lse: f32 arithmetic on the operands (no rounding to the dtype);
    # a softcap c adds twice tanh.approx.f32's error on a capped score (at
    # most c 2^-11).
    assert _err(lse, want_lse) <= 1e-4 * max(1.0, want_lse.abs().max().item()) + \
        (softcap or 0.0) * 2.0 ** -10


@pytest.mark.parametrize("name,b,t", GRAD_RUNS)
def test_the_backward_kernel_writes_every_element(name, b, t):
    hq, hkv, d, causal, scale, dt, window, softcap = CASES[name]
    spec = ops_attention_cases.spec(name, bundles.device_target(DEVICE))
    fwd, bwd = bundles.attention_kernels(spec)
    q, k, v = _operands(hq, hkv, d, DTYPES[dt], b, t, _seed("backward", name, b, t))
    g = torch.Generator(device=DEVICE).manual_seed(_seed("incoming", name, b, t))
    dout = torch.randn(q.shape, device=DEVICE, generator=g).to(q.dtype)
    out, lse = fwd(q, k, v)
    grads = [torch.full_like(x, float("nan")) for x in (q, k, v)]
    bwd(dout, q, k, v, out, lse, out=grads)
    torch.cuda.synchronize()
    for what, x in zip(("dq", "dk", "dv"), grads):
        assert not torch.isnan(x).any(), "%s, %dx%d: an element of %s not written" % (
            name, b, t, what)


@pytest.mark.parametrize("name,b,t", RUNS)
def test_attention_and_its_gradients(name, b, t, monkeypatch):
    """ops.attention with q, k and v trainable: the output and the
    gradients against float64 autograd, beside PyTorch's SDPA and its
    backward in the dtype; the configuration's kernels ran (D 64 and 128),
    or PyTorch's SDPA with one warning (D 256: the template has no backward
    for it)."""
    hq, hkv, d, causal, scale, dt, window, softcap = CASES[name]
    dtype = DTYPES[dt]
    ops.clear_caches()  # every kernel loads again, through the recorder
    loaded = _record_loads(monkeypatch)
    operands = _operands(hq, hkv, d, dtype, b, t, _seed("ops", name, b, t))
    leaves = [x.clone().requires_grad_() for x in operands]
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", LigerFallbackWarning)
        out = ops.attention(*leaves, causal=causal, scale=scale, window=window, softcap=softcap)
    fallbacks = [str(w.message) for w in caught if w.category is LigerFallbackWarning]
    assert out.shape == operands[0].shape and out.dtype == dtype
    g = torch.Generator(device=DEVICE).manual_seed(_seed("ops incoming", name, b, t))
    dout = torch.randn(out.shape, device=DEVICE, generator=g).to(dtype)
    out.backward(dout)
    if d <= 128:
        assert fallbacks == [], fallbacks
        assert set(loaded) == {ops_attention_cases.spec(name)}, [str(s) for s in loaded]
    else:
        assert fallbacks == ["liger: attention: head dimension %d with a backward: the "
                             "attention template's backward takes 64 or 128 (it holds dk and "
                             "dv of 64 key rows in registers); using PyTorch's "
                             "scaled_dot_product_attention" % d], fallbacks
        assert loaded == []
    exact = [x.detach().double().requires_grad_() for x in operands]
    want, _ = _reference(*exact, causal, scale, window, softcap)
    want.backward(dout.double())
    mine = [x.clone().requires_grad_() for x in operands]
    theirs = _sdpa(*mine, causal, scale, window, softcap)
    theirs.backward(dout)
    case = "%s, %dx%d" % (name, b, t)
    _check(case + ": out", out.detach(), want.detach(), theirs.detach(), dtype)
    for what, got, ref, torch_got in zip(("dq", "dk", "dv"), leaves, exact, mine):
        assert got.grad is not None and got.grad.dtype == dtype, (case, what)
        assert torch.isfinite(got.grad).all(), "%s: %s not finite" % (case, what)
        _check("%s: %s" % (case, what), got.grad, ref.grad, torch_got.grad, dtype)


@pytest.mark.parametrize("t", [1, 77, 1000])
def test_head_dimension_256_without_autograd_runs_liger(t, monkeypatch):
    """D 256: the template takes the forward alone; under torch.no_grad the
    call runs it (no warning), its output checked as above."""
    name = "gqa4_causal_d256_bf16"
    hq, hkv, d, causal, scale, dt, window, softcap = CASES[name]
    ops.clear_caches()
    loaded = _record_loads(monkeypatch)
    q, k, v = _operands(hq, hkv, d, DTYPES[dt], 1, t, _seed("no_grad", t))
    with warnings.catch_warnings():
        warnings.simplefilter("error", LigerFallbackWarning)
        with torch.no_grad():
            out = ops.attention(q.requires_grad_(), k, v, causal=causal, scale=scale)
    assert loaded == [ops_attention_cases.spec(name)], [str(s) for s in loaded]
    want, _ = _reference(*[x.detach().double() for x in (q, k, v)], causal, scale)
    _check("no_grad, T %d: out" % t, out, want, _sdpa(q.detach(), k, v, causal, scale),
           DTYPES[dt])


# name -> (Hq, Hkv, D, dtype, T, S, the reason warned).
FALLBACKS = {
    "decoding": (32, 8, 128, torch.bfloat16, 1, 77,
                 "keys and queries of different lengths: the attention template's kernels "
                 "take one sequence length (their launcher binds it once)"),
    "prefill_with_cache": (8, 2, 64, torch.float16, 33, 77,
                           "keys and queries of different lengths: the attention template's "
                           "kernels take one sequence length (their launcher binds it once)"),
    "head_dim_96": (8, 2, 96, torch.bfloat16, 77, 77,
                    "head dimension 96: the attention template takes multiples of 64 up to "
                    "256 (its tiles' 128-byte rows)"),
    "f32": (4, 4, 64, torch.float32, 77, 77,
            "the attention template takes bf16 or f16 (wgmma's operands), got f32"),
}


@pytest.mark.parametrize("name", sorted(FALLBACKS))
def test_a_call_the_template_does_not_take_runs_pytorchs_sdpa(name, monkeypatch):
    """Causal calls the template does not take: PyTorch's SDPA with liger's
    bottom-right mask (decoding: the one query sees every key), one warning
    naming the reason, no kernel loaded; the output and gradients against
    float64."""
    hq, hkv, d, dtype, t, s, reason = FALLBACKS[name]
    ops.clear_caches()
    loaded = _record_loads(monkeypatch)
    operands = _operands(hq, hkv, d, dtype, 2, t, _seed("fallback", name), s)
    leaves = [x.clone().requires_grad_() for x in operands]
    with pytest.warns(LigerFallbackWarning) as caught:
        out = ops.attention(*leaves, causal=True)
    assert [str(w.message) for w in caught] == [
        "liger: attention: %s; using PyTorch's scaled_dot_product_attention" % reason]
    out.backward(torch.ones_like(out))
    assert loaded == []
    exact = [x.detach().double().requires_grad_() for x in operands]
    want, _ = _reference(*exact, True, None)
    want.backward(torch.ones_like(want))
    tol = {torch.bfloat16: 2e-2, torch.float16: 3e-3, torch.float32: 1e-4}[dtype]
    for what, got, ref in (("out", out, want), ("dq", leaves[0].grad, exact[0].grad),
                           ("dk", leaves[1].grad, exact[1].grad),
                           ("dv", leaves[2].grad, exact[2].grad)):
        err = _err(got.detach(), ref.detach()) / ref.abs().max().clamp_min(1e-30).item()
        assert err < tol, "%s: %s relative error %.3g" % (name, what, err)


def test_torch_compile_with_no_graph_break():
    """liger.ops.attention under torch.compile(fullgraph=True, dynamic=True)
    on the GPU, forward and backward: the eager call's output and
    gradients."""
    def step(q, k, v):
        return ops.attention(q, k, v, causal=True).float().square().sum()
    torch._dynamo.reset()
    try:
        compiled = torch.compile(step, fullgraph=True, dynamic=True)
        for b, t in ((1, 77), (2, 130)):
            # (Llama's heads: a configuration the suite's bundles hold.)
            operands = _operands(32, 8, 128, torch.bfloat16, b, t, _seed("compile", b, t))
            results = []
            for fn in (compiled, step):
                leaves = [x.clone().requires_grad_() for x in operands]
                loss = fn(*leaves)
                loss.backward()
                results.append([loss] + [x.grad for x in leaves])
            # (Inductor's sums may round otherwise; dq's atomics add in any
            # order.)
            for a, e in zip(*results):
                torch.testing.assert_close(a, e)
    finally:
        torch._dynamo.reset()
