"""liger.cross_entropy and liger.cross_entropy_grad on the GPU against
PyTorch: F.cross_entropy on the capped logits plus the z-loss, its gradient
by autograd, in float64 where the logits are small enough (else float32),
on fresh random logits and targets (some ignored, and with reduction = none
one out of range, which must give NaN), outputs poisoned with NaN. Three
ways: the loss and gradient kernels apart, the fused kernel (the loss and
its gradient in one pass; also at a pinned configuration for two cases),
and the fused kernel writing the gradient over its own logits (in place)."""

import pytest

import kernels

torch = pytest.importorskip("torch", reason="the GPU suite needs PyTorch")
if not torch.cuda.is_available():
    pytest.skip("no CUDA GPU on this machine", allow_module_level=True)
import torch.nn.functional as F  # noqa: E402

# Relative error bounds: the loss is f32 math in both; a 16-bit gradient
# is rounded once.
LOSS_TOL = 2e-5
GRAD_TOL = {"bf16": 1e-2, "f16": 2e-3, "f32": 2e-5}


def reference(x, t, w, attrs, vocab):
    """(loss, z_loss) with the op's semantics (docs/Reference/Semantics.md),
    from PyTorch's own cross-entropy on the capped logits."""
    ignore = attrs.get("ignore_index", -100)
    cap = attrs.get("softcap")
    z = cap * torch.tanh(x / cap) if cap else x
    red = attrs["reduction"]
    ce = F.cross_entropy(z, t, weight=w, ignore_index=ignore, reduction="none",
                         label_smoothing=attrs.get("label_smoothing", 0.0))
    counted = (t != ignore).to(z.dtype)
    lse = torch.logsumexp(z, dim=-1)
    zl = attrs.get("lse_square_scale", 0.0) * lse * lse * counted
    if red == "none":
        return ce + zl, zl
    if red == "sum":
        return ce.sum() + zl.sum(), zl.sum()
    wt = (w[t.clamp(min=0)] if w is not None else torch.ones_like(z[:, 0])) * counted
    zmean = zl.sum() / counted.sum()
    return ce.sum() / wt.sum() + zmean, zmean


CASES = [(name, n) for name, case in kernels.CROSS_ENTROPY.items()
         for n in kernels.cross_entropy_tokens(case[0])]


def grad_error(dx, want, dtype, rows=1024):
    """|dx - best| / |want| in float64, `best` the reference rounded to the
    logits' dtype, the nearest a gradient in that dtype can be (f16 flushes
    gradients below 2^-24 to zero: 1 / (50257 * 8192 tokens) is far below);
    a block of rows at a time, so that the float64 copies of a
    [8192, 151936] gradient are never all in memory at once."""
    diff = norm = 0.0
    for i in range(0, dx.shape[0], rows):
        d, w = dx[i:i + rows].double(), want[i:i + rows].double()
        diff += (d - w.to(dtype).double()).pow(2).sum().item()
        norm += w.pow(2).sum().item()
    return (diff / norm) ** 0.5


@pytest.mark.parametrize("name,tokens", [
    pytest.param(name, n, id="%s-n%d" % (name, n), marks=[pytest.mark.large_memory]
                 if n * kernels.CROSS_ENTROPY[name][0] >= 2**28 else [])
    for name, n in CASES])
def test_cross_entropy_kernel(bundles_dir, name, tokens):
    vocab, dt, tdt, attrs, weighted, zloss = kernels.CROSS_ENTROPY[name]
    bundle = kernels.load_bundle(bundles_dir, "cross_entropy")
    fwd, grad = bundle["ce_%s_rowwise_0" % name], bundle["ceg_%s_rowwise_0" % name]
    gen = torch.Generator(device="cuda").manual_seed(torch.seed() % 2**31)
    x = (torch.randn(tokens, vocab, device="cuda", generator=gen) * 3).to(kernels.torch_dtype(dt))
    t = torch.randint(0, vocab, (tokens,), device="cuda", generator=gen)
    ignore = attrs.get("ignore_index", -100)
    if tokens > 1:
        t[::7] = ignore  # some ignored tokens
    invalid = None
    if attrs["reduction"] == "none" and tokens > 1:
        invalid = 3
        t[invalid] = vocab + 5  # out of range: NaN for that token
    t = t.to({"i64": torch.int64, "i32": torch.int32}[tdt])
    w = (torch.rand(vocab, device="cuda", generator=gen) + 0.5) if weighted else None
    none = attrs["reduction"] == "none"
    g = (torch.rand(tokens, device="cuda", generator=gen) + 0.5 if none
         else torch.tensor(0.75, device="cuda"))

    wl = [w] if weighted else []
    lshape = (tokens,) if none else ()

    def poisoned_losses():
        return [torch.full(lshape, float("nan"), device="cuda") for _ in range(2 if zloss else 1)]

    results = {}  # way -> (losses, gradient)
    res = fwd(x, t, *wl, out=poisoned_losses())
    dx = grad(x, t, g, *wl, out=[torch.full_like(x, float("nan"))])
    results["apart"] = (list(res) if isinstance(res, tuple) else [res], dx)
    fused = bundle["cef_%s_rowwise_0" % name]
    res = fused(x, t, *wl, g, out=poisoned_losses() + [torch.full_like(x, float("nan"))])
    results["fused"] = (list(res[:-1]), res[-1])
    if name in kernels.CROSS_ENTROPY_PINNED:
        pinned = bundle["cefp_%s_rowwise_0" % name]
        res = pinned(x, t, *wl, g, out=poisoned_losses() + [torch.full_like(x, float("nan"))])
        results["fused, pinned configuration"] = (list(res[:-1]), res[-1])
    xc = x.clone()  # the gradient over its own logits
    res = fused(xc, t, *wl, g, out=poisoned_losses() + [xc])
    results["fused in place"] = (list(res[:-1]), xc)
    torch.cuda.synchronize()

    # The reference in float64 when it fits comfortably, else float32.
    rdt = torch.float64 if tokens * vocab <= 2**27 else torch.float32
    xr = x.to(rdt).requires_grad_(True)
    tr = t.long().clone()
    if invalid is not None:
        tr[invalid] = ignore  # F.cross_entropy rejects it; NaN checked apart
    wr = w.to(rdt) if weighted else None
    loss, zl = reference(xr, tr, wr, attrs, vocab)
    (loss * g.to(rdt)).sum().backward()
    ref_grad = xr.grad

    for way, (losses, dx) in results.items():
        for got, want in zip(losses, [loss, zl]):
            got, want = got.double(), want.detach().double()
            if invalid is not None:
                assert torch.isnan(got[invalid]), "%s: an out-of-range target must give NaN" % way
                keep = torch.arange(tokens, device="cuda") != invalid
                got, want = got[keep], want[keep]
            assert not torch.isnan(got).any(), "%s: a loss was not written (or is NaN)" % way
            err = (got - want).abs().max().item() / max(want.abs().max().item(), 1e-30)
            assert err < LOSS_TOL, "%s: loss rel err %.3g" % (way, err)
        want = ref_grad
        if invalid is not None:
            assert torch.isnan(dx[invalid]).all(), (
                "%s: an out-of-range target's gradient must be NaN" % way)
            keep = torch.arange(tokens, device="cuda") != invalid
            dx, want = dx[keep], want[keep]
        assert not torch.isnan(dx).any(), "%s: a gradient element was not written" % way
        err = grad_error(dx, want, x.dtype)
        assert err < GRAD_TOL[dt], "%s: grad rel err %.3g" % (way, err)
