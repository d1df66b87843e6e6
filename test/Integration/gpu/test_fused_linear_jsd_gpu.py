"""liger.ops.fused_linear_jsd on the GPU: the loss and the student's
gradients against float64 PyTorch holding every logit (rounded to the
inputs' dtype, as the op's meaning says), at odd sizes, in f16, and for a
Llama-3.2-1B student of a Llama-3-8B teacher, with the bundles
precompiled on the build machine (LIGER_OPS_BUNDLES). The gradients'
buffers come from the chunk loop's torch.empty: a NaN or a stale value
there fails the comparison. Skips cleanly without torch, a GPU, the
runtime or the bundles."""

import pytest

import kernels

torch = pytest.importorskip("torch", reason="needs PyTorch")
if not torch.cuda.is_available():
    pytest.skip("no CUDA GPU on this machine", allow_module_level=True)
from liger import ops  # noqa: E402

pytestmark = pytest.mark.usefixtures("ops_bundles")


def _plain(xs, ws, xt, wt, labels, beta, temperature, dtype):
    def logp(x, w):
        return ((x @ w.T).to(dtype).double() / temperature).log_softmax(-1)
    q, p = logp(xs, ws), logp(xt, wt)
    if beta == 0:
        per_token = (p.exp() * (p - q)).sum(-1)
    elif beta == 1:
        per_token = (q.exp() * (q - p)).sum(-1)
    else:
        m = (beta * p.exp() + (1 - beta) * q.exp()).log()
        per_token = beta * (p.exp() * (p - m)).sum(-1) + (1 - beta) * (q.exp() * (q - m)).sum(-1)
    if labels is None:
        return per_token.mean()
    counted = labels != -100
    return (per_token * counted).sum() / counted.sum().clamp(min=1)


@pytest.mark.parametrize("name", sorted(kernels.fused_linear_jsd_cases()))
def test_the_loss_and_the_students_gradients(name):
    n, hs, ht, v, dt, budget, kw = kernels.fused_linear_jsd_cases()[name]
    kw = dict(kw)
    dtype = kernels.torch_dtype(dt)
    gen = torch.Generator(device="cuda")
    gen.manual_seed(torch.seed())
    xs = torch.randn(n, hs, generator=gen, device="cuda").to(dtype)
    ws = (torch.randn(v, hs, generator=gen, device="cuda") * 2 / hs ** 0.5).to(dtype)
    xt = torch.randn(n, ht, generator=gen, device="cuda").to(dtype)
    wt = (torch.randn(v, ht, generator=gen, device="cuda") * 2 / ht ** 0.5).to(dtype)
    labels = None
    if kw.pop("labels", None):
        labels = torch.randint(0, v, (n,), generator=gen, device="cuda")
        labels[::4] = -100
    beta, temperature = kw.get("jsd_beta", 0.5), kw.get("temperature", 1.0)
    lx, lw = xs.clone().requires_grad_(True), ws.clone().requires_grad_(True)
    loss = ops.fused_linear_jsd(lx, lw, xt, wt, labels, memory_budget=budget, **kw)
    x64, w64 = xs.double().requires_grad_(True), ws.double().requires_grad_(True)
    want = _plain(x64, w64, xt.double(), wt.double(), labels, beta, temperature, dtype)
    err = abs(loss.item() - want.item()) / abs(want.item())
    assert err < 1e-3, "%s: loss rel err %.3g" % (name, err)
    loss.backward(torch.tensor(0.75, device="cuda"))
    want.backward(torch.tensor(0.75, dtype=torch.float64, device="cuda"))
    for what, got, ref in (("dx", lx.grad, x64.grad), ("dW", lw.grad, w64.grad)):
        assert got is not None and torch.isfinite(got).all(), "%s: %s" % (name, what)
        rel = ((got.double() - ref).norm() / ref.norm()).item()
        assert rel < 2e-2, "%s: %s rel err %.3g" % (name, what, rel)
