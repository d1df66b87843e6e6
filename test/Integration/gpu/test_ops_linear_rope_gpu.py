"""liger.ops.linear_rope on the GPU: the forward kernel (the matmul
template's: the q/k projections with RoPE in the epilogue, q and k stored
head-major) of each configuration of kernels.linear_rope_cases() at the
(batch, sequence) shapes of kernels.LINEAR_ROPE_SHAPES (4 x 4096 too for
Llama-3-8B's): q and k written over NaN, every element, against float64
(Hugging Face's apply_rotary_pos_emb of the split projections); and
liger.ops.linear_rope with autograd, q, k and the gradients of x, Wq, Wk
(and the biases) against float64 autograd, the kernels checked to be the
ones that ran (the forward's, then RoPE's gradient kernel before PyTorch's
GEMMs). The tables are a real RoPE's (cos and sin of position x inverse
frequency, the halves duplicated), per batch different positions where the
case's tables are [B, T, D]. The bundles are the ones
scripts/build-gpu-bundles.sh precompiled (LIGER_OPS_BUNDLES). Skips cleanly
without torch, a GPU, the runtime or the bundles."""

import dataclasses
import zlib

import pytest

import kernels

torch = pytest.importorskip("torch", reason="needs PyTorch")
if not torch.cuda.is_available():
    pytest.skip("no CUDA GPU on this machine", allow_module_level=True)
from liger import bundles, ops  # noqa: E402

# Max |error| over max |float64's|: q and k, the projection rounds once (its
# GEMM accumulates in f32) and the rotation runs in f32 and rounds once;
# the gradients, RoPE's gradient kernel rounds dq and dk once and PyTorch's
# GEMMs accumulate in f32.
TOL = {"bf16": 2e-2, "f16": 3e-3}
CASES = kernels.linear_rope_cases()
LLAMA = "llama3_bf16_4096_q32_k8_d128"
RUNS = [pytest.param(name, b, t, id="%s-%dx%d" % (name, b, t))
        for name in sorted(CASES) for b, t in kernels.LINEAR_ROPE_SHAPES] + [
    pytest.param(LLAMA, 4, 4096, id="%s-4x4096" % LLAMA)]
DEVICE = torch.device("cuda")

pytestmark = pytest.mark.usefixtures("ops_bundles")


def _seed(what, name, b, t):
    """A seed of its own for each test and case."""
    return zlib.crc32(("%s %s %dx%d" % (what, name, b, t)).encode())


def _operands(spec, b, t, seed):
    """x [B, T, H], Wq, bq (or None), Wk, bk (or None) of the spec, random,
    on the GPU: the weights scaled by H^-1/2, so that q and k are of order
    one."""
    g = torch.Generator(device=DEVICE).manual_seed(seed)
    dt = kernels.torch_dtype(spec.dtype)
    h, d = spec.hidden, spec.head_dim

    def rand(*shape, scale=1.0):
        return (torch.randn(*shape, device=DEVICE, generator=g) * scale).to(dt)
    x = rand(b, t, h)
    wq, wk = rand(spec.q_heads * d, h, scale=h ** -0.5), rand(spec.k_heads * d, h, scale=h ** -0.5)
    if not spec.bias:
        return x, wq, None, wk, None
    return x, wq, rand(spec.q_heads * d), wk, rand(spec.k_heads * d)


def _tables(spec, b, t, seed):
    """cos and sin [1, T, D] (broadcast tables) or [B, T, D] in the dtype, as
    Hugging Face's rotary embedding makes them: position x inverse frequency
    (base 10000) in f32, the halves duplicated; the positions start at a
    random offset, another one for each batch of per-batch tables."""
    g = torch.Generator(device=DEVICE).manual_seed(seed)
    d, rows = spec.head_dim, 1 if spec.broadcast_tables else b
    inv_freq = 1.0 / 10000.0 ** (torch.arange(0, d, 2, device=DEVICE, dtype=torch.float32) / d)
    start = torch.randint(0, 1000, (1,), device=DEVICE, generator=g)
    offsets = start + 37 * torch.arange(rows, device=DEVICE)  # distinct per batch
    positions = (offsets[:, None] + torch.arange(t, device=DEVICE)[None, :]).float()
    freqs = positions[:, :, None] * inv_freq[None, None, :]
    emb = torch.cat((freqs, freqs), dim=-1)
    dt = kernels.torch_dtype(spec.dtype)
    return emb.cos().to(dt), emb.sin().to(dt)


def _rotate_half(t):
    half = t.shape[-1] // 2
    return torch.cat((-t[..., half:], t[..., :half]), dim=-1)


def _reference(x, wq, bq, wk, bk, cos, sin):
    """Hugging Face's q and k: the projections, the head split [B, T, H·D]
    -> [B, H, T, D], apply_rotary_pos_emb (tables unsqueezed at dim 1)."""
    b, t, d = x.shape[0], x.shape[1], cos.shape[-1]
    q = torch.nn.functional.linear(x, wq, bq).view(b, t, -1, d).transpose(1, 2)
    k = torch.nn.functional.linear(x, wk, bk).view(b, t, -1, d).transpose(1, 2)
    cos, sin = cos.unsqueeze(1), sin.unsqueeze(1)
    return q * cos + _rotate_half(q) * sin, k * cos + _rotate_half(k) * sin


def _double(t):
    return None if t is None else t.detach().double()


def _err(got, want):
    return ((got.double() - want).abs().max() / want.abs().max().clamp_min(1e-30)).item()


def _record_loads(monkeypatch, name):
    """The specs liger.bundles.`name` (a kernel loader) is called with from
    here on, in a list that fills as it is called."""
    loaded = []
    load = getattr(bundles, name)
    monkeypatch.setattr(bundles, name, lambda spec: (loaded.append(spec), load(spec))[1])
    return loaded


@pytest.mark.parametrize("name,b,t", RUNS)
def test_the_kernel_writes_every_output_element(name, b, t):
    spec = CASES[name].with_target(bundles.device_target(DEVICE))
    x, wq, bq, wk, bk = _operands(spec, b, t, _seed("kernel", name, b, t))
    cos, sin = _tables(spec, b, t, _seed("kernel tables", name, b, t))
    kernel = bundles.matmul_kernel(spec)
    d = spec.head_dim
    q = torch.full((b, spec.q_heads, t, d), float("nan"), dtype=x.dtype, device=DEVICE)
    k = torch.full((b, spec.k_heads, t, d), float("nan"), dtype=x.dtype, device=DEVICE)
    # The kernel's operands in the group's order: x, Wq, [bq], Wk, [bk],
    # cos, sin.
    args = [x, wq] + ([bq] if bq is not None else []) + [wk] + \
        ([bk] if bk is not None else []) + [cos, sin]
    kernel(*args, out=[q, k])
    torch.cuda.synchronize()
    want_q, want_k = _reference(*[_double(a) for a in (x, wq, bq, wk, bk, cos, sin)])
    for what, got, want in (("q", q, want_q), ("k", k, want_k)):
        assert torch.isfinite(got).all(), "%s, %dx%d: a %s element not written" % (
            name, b, t, what)
        err = _err(got, want)
        assert err < TOL[spec.dtype], "%s, %dx%d: %s max error %.3g" % (name, b, t, what, err)


@pytest.mark.parametrize("name,b,t", RUNS)
def test_linear_rope_and_its_gradients(name, b, t, monkeypatch):
    """Every operand but the tables trainable: q, k and the gradients
    against float64 autograd for random dq and dk; the forward kernel of
    the call's configuration and RoPE's gradient kernel are the ones
    loaded (tables [1, T, D] at B = 1 take the broadcast tables' kernels)."""
    spec = CASES[name]
    target = bundles.device_target(DEVICE)
    ops.clear_caches()  # every kernel loads again, through the recorders
    matmul_loads = _record_loads(monkeypatch, "matmul_kernel")
    row_loads = _record_loads(monkeypatch, "kernels")
    operands = _operands(spec, b, t, _seed("ops", name, b, t))
    leaves = [a.requires_grad_() if a is not None else None for a in operands]
    x, wq, bq, wk, bk = leaves
    cos, sin = _tables(spec, b, t, _seed("ops tables", name, b, t))
    q, k = ops.linear_rope(x, wq, wk, cos, sin, bq, bk)
    d = spec.head_dim
    assert q.shape == (b, spec.q_heads, t, d) and q.dtype == x.dtype, (name, q.shape)
    assert k.shape == (b, spec.k_heads, t, d) and k.dtype == x.dtype, (name, k.shape)
    g = torch.Generator(device=DEVICE).manual_seed(_seed("ops grads", name, b, t))
    dq = torch.randn(q.shape, device=DEVICE, generator=g).to(q.dtype)
    dk = torch.randn(k.shape, device=DEVICE, generator=g).to(k.dtype)
    torch.autograd.backward([q, k], [dq, dk])
    ran = dataclasses.replace(spec, broadcast_tables=spec.broadcast_tables or b == 1,
                              target=target)
    # (However often the op asks for them: the loaders remember them.)
    assert set(matmul_loads) == {ran}, (name, [str(s) for s in matmul_loads])
    assert set(row_loads) == {ran.rope_spec()}, (name, [str(s) for s in row_loads])

    exact = [a.detach().double().requires_grad_() if a is not None else None for a in leaves]
    want_q, want_k = _reference(*exact[:5], cos.double(), sin.double())
    torch.autograd.backward([want_q, want_k], [dq.double(), dk.double()])
    for what, got, want in (("q", q, want_q), ("k", k, want_k)):
        err = _err(got.detach(), want.detach())
        assert err < TOL[spec.dtype], "%s, %dx%d: %s max error %.3g" % (name, b, t, what, err)
    for what, got, ref in zip(("dx", "dWq", "dbq", "dWk", "dbk"), leaves, exact):
        if got is None:
            continue
        assert got.grad is not None and got.grad.dtype == got.dtype, (name, what)
        assert torch.isfinite(got.grad).all(), "%s, %dx%d: %s not finite" % (name, b, t, what)
        err = _err(got.grad, ref.grad)
        assert err < TOL[spec.dtype], "%s, %dx%d: %s max error %.3g" % (name, b, t, what, err)
