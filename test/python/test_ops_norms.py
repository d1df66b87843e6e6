"""liger.ops.layer_norm and liger.ops.add_rms_norm on the CPU through the
reference lowering: forward and gradients against float64 (F.layer_norm's
and an add + RMSNorm's autograd on the same inputs), on fresh random inputs,
at row lengths no vector width divides (1, 7, 4097) and common ones (1000),
in bf16, f16 and f32; LayerNorm's saved statistics (each row's mean and
rstd) and its backward's use of them."""

import pytest

torch = pytest.importorskip("torch")
F = torch.nn.functional

from liger import ops  # noqa: E402

# Errors relative to the largest reference magnitude: f32 near its
# rounding, bf16 and f16 a few units of their last place (each output is
# rounded once; the weight gradients are sums over the rows).
TOL = {torch.float32: 2e-5, torch.float16: 2e-3, torch.bfloat16: 1e-2}
DTYPES = [torch.bfloat16, torch.float16, torch.float32]
HIDDENS = [1, 7, 1000, 4097]


@pytest.fixture(autouse=True)
def reference(cpu_reference):
    yield


def _gen(rng):
    return torch.Generator().manual_seed(int(rng.integers(2 ** 31)))


def _randn(gen, *shape, dtype, scale=1.0, shift=0.0):
    return (torch.randn(*shape, generator=gen) * scale + shift).to(dtype)


def _close(got, want, dtype, what, terms=None):
    """`terms`: for a sum over tokens (a weight's gradient), its float64
    terms [..., H]. The sum's rounding error grows with their magnitudes,
    not with the sum, which may cancel to near 0 (a row of one feature:
    six terms of about 1 summing to 0.003), so the error is measured
    against the largest sum of a feature's |terms|."""
    assert got.dtype == dtype, what
    got, want = got.detach().double(), want.detach().double()
    assert got.shape == want.shape, what
    assert torch.isfinite(got).all(), "%s: not finite" % what
    # (At least 1e-3: a row of one feature has dx = 0, which float64 gives
    # as rounding noise.)
    size = want.abs() if terms is None else \
        terms.detach().double().abs().reshape(-1, want.shape[-1]).sum(0)
    scale = max(size.max().item(), 1e-3)
    err = (got - want).abs().max().item() / scale
    assert err <= TOL[dtype], "%s: max error %.3g (of %.3g) exceeds %g" % (
        what, err, scale, TOL[dtype])


def _leaves(tensors):
    return [t.clone().requires_grad_(True) for t in tensors], \
        [t.double().requires_grad_(True) for t in tensors]


def _round(t, dtype):
    """float64 `t` rounded to `dtype` (where the op rounds), still
    differentiable (the rounding is not)."""
    return t + (t.detach().to(dtype).double() - t.detach())


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("hidden", HIDDENS)
@pytest.mark.parametrize("bias", [True, False], ids=["bias", "no_bias"])
def test_layer_norm_is_pytorchs(rng, hidden, dtype, bias):
    gen = _gen(rng)
    # Rows with a mean far from 0 (LayerNorm subtracts it).
    x = _randn(gen, 2, 3, hidden, dtype=dtype, scale=2.0, shift=3.0)
    w = _randn(gen, hidden, dtype=dtype, scale=0.5, shift=1.0)
    b = _randn(gen, hidden, dtype=dtype) if bias else None
    inputs = [x, w] + ([b] if bias else [])
    leaves, leaves64 = _leaves(inputs)
    y = ops.layer_norm(leaves[0], leaves[1], leaves[2] if bias else None, 1e-5)
    want = F.layer_norm(leaves64[0], (hidden,), leaves64[1], leaves64[2] if bias else None,
                        1e-5)
    _close(y, want, dtype, "y")
    dy = _randn(gen, *y.shape, dtype=dtype)
    y.backward(dy)
    want.backward(dy.double())
    mean, rstd = _stats64(x, 1e-5)
    x_hat = (x.double() - mean[..., None]) * rstd[..., None]
    terms = {"dx": None, "dweight": dy.double() * x_hat, "dbias": dy.double()}
    for name, leaf, leaf64 in zip(("dx", "dweight", "dbias"), leaves, leaves64):
        _close(leaf.grad, leaf64.grad, dtype, name, terms[name])


def test_layer_norm_takes_an_f32_weight_over_half_rows(rng):
    """Mixed precision: bf16 rows, an f32 weight and bias (their gradients
    f32)."""
    gen = _gen(rng)
    x = _randn(gen, 5, 1000, dtype=torch.bfloat16, scale=3.0)
    w, b = _randn(gen, 1000, dtype=torch.float32, shift=1.0), _randn(gen, 1000,
                                                                    dtype=torch.float32)
    leaves, leaves64 = _leaves([x, w, b])
    y = ops.layer_norm(*leaves, eps=1e-6)
    want = F.layer_norm(leaves64[0], (1000,), leaves64[1], leaves64[2], 1e-6)
    _close(y, want, torch.bfloat16, "y")
    dy = _randn(gen, 5, 1000, dtype=torch.bfloat16)
    y.backward(dy)
    want.backward(dy.double())
    _close(leaves[0].grad, leaves64[0].grad, torch.bfloat16, "dx")
    # The weight gradients are sums of bf16 products: bf16's tolerance.
    for name, leaf, leaf64 in zip(("dweight", "dbias"), leaves[1:], leaves64[1:]):
        assert leaf.grad.dtype == torch.float32
        _close(leaf.grad.bfloat16(), leaf64.grad, torch.bfloat16, name)


def _stats64(x, eps):
    """The mean and rstd of each row of x in float64 (biased variance)."""
    x = x.double()
    mean = x.mean(-1)
    return mean, (((x - mean[..., None]) ** 2).mean(-1) + eps).rsqrt()


@pytest.mark.parametrize("hidden", [1, 7, 1000])
def test_layer_norm_saves_each_rows_mean_and_rstd(rng, hidden):
    """The operator returns, beside y, the f32 mean and rstd of each row
    ([..., H] -> [...]), what its backward reads."""
    gen = _gen(rng)
    x = _randn(gen, 2, 3, hidden, dtype=torch.bfloat16, scale=2.0, shift=3.0)
    w, b = _randn(gen, hidden, dtype=torch.bfloat16), _randn(gen, hidden, dtype=torch.bfloat16)
    y, mean, rstd = torch.ops.liger.layer_norm(x, w, b, 1e-5)
    assert mean.dtype == rstd.dtype == torch.float32
    assert mean.shape == rstd.shape == (2, 3)
    want_mean, want_rstd = _stats64(x, 1e-5)
    _close(mean, want_mean, torch.float32, "mean")
    _close(rstd, want_rstd, torch.float32, "rstd")
    assert torch.equal(y, ops.layer_norm(x, w, b, 1e-5))


def test_layer_norm_backward_reads_the_statistics_it_is_given(rng):
    """The backward takes x_hat = (x - mean) * rstd from the statistics it
    is given, not from x: with others than x's (shifted, scaled), dx, dW
    and db are the formulas' on those."""
    gen = _gen(rng)
    x, dy = _randn(gen, 5, 33, dtype=torch.float32), _randn(gen, 5, 33, dtype=torch.float32)
    w = _randn(gen, 33, dtype=torch.float32, shift=1.0)
    mean, rstd = (s.float() for s in _stats64(x, 1e-5))
    mean, rstd = mean + 0.25, rstd * 1.5
    dx, dw, db = torch.ops.liger.layer_norm_backward(dy, x, w, mean, rstd, 1e-5, True)
    x64, dy64, w64 = x.double(), dy.double(), w.double()
    r = rstd.double()[:, None]
    x_hat = (x64 - mean.double()[:, None]) * r
    g = dy64 * w64
    want_dx = r * (g - g.mean(-1, keepdim=True) - x_hat * (g * x_hat).mean(-1, keepdim=True))
    _close(dx, want_dx, torch.float32, "dx")
    _close(dw, (dy64 * x_hat).sum(0), torch.float32, "dweight", dy64 * x_hat)
    _close(db, dy64.sum(0), torch.float32, "dbias", dy64)


def _add_rms_norm64(x, res, w, eps, offset, casting, dtype):
    """Hugging Face's add + RMSNorm in float64: the sum rounded to the
    rows' dtype (it is a returned tensor), its RMSNorm with `casting`'s
    rounding of x_hat (llama: to the rows' dtype before the weight)."""
    total = _round(x + res, dtype)
    x_hat = total * torch.rsqrt(total.pow(2).mean(-1, keepdim=True) + eps)
    if casting == "llama":
        x_hat = _round(x_hat, dtype)
    return x_hat * (offset + w), total


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("hidden", HIDDENS)
def test_add_rms_norm_is_an_add_and_pytorchs_rms_norm(rng, hidden, dtype):
    _check_add_rms_norm(rng, hidden, dtype, 1e-6, 0.0, "llama")


@pytest.mark.parametrize("offset,casting", [(1.0, "gemma"), (0.0, "none")])
def test_add_rms_norm_castings(rng, offset, casting):
    _check_add_rms_norm(rng, 1000, torch.bfloat16, 1e-5, offset, casting)


def _check_add_rms_norm(rng, hidden, dtype, eps, offset, casting):
    gen = _gen(rng)
    x, res = _randn(gen, 2, 3, hidden, dtype=dtype), _randn(gen, 2, 3, hidden, dtype=dtype)
    w = _randn(gen, hidden, dtype=dtype, scale=0.5, shift=1.0 - offset)
    leaves, leaves64 = _leaves([x, res, w])
    y, total = ops.add_rms_norm(*leaves, eps, offset, casting)
    want_y, want_total = _add_rms_norm64(*leaves64, eps, offset, casting, dtype)
    # The sum is exactly the rounded sum.
    assert torch.equal(total, (x.double() + res.double()).to(dtype))
    _close(y, want_y, dtype, "y")
    # Both outputs get an incoming gradient: the sum's (the residual
    # stream's) adds to the norm's dx.
    dy, dtotal = _randn(gen, *y.shape, dtype=dtype), _randn(gen, *y.shape, dtype=dtype)
    torch.autograd.backward((y, total), (dy, dtotal))
    torch.autograd.backward((want_y, want_total), (dy.double(), dtotal.double()))
    total64 = x.double() + res.double()
    x_hat = total64 * torch.rsqrt(total64.pow(2).mean(-1, keepdim=True) + eps)
    terms = {"dx": None, "dresidual": None, "dweight": dy.double() * x_hat}
    for name, leaf, leaf64 in zip(("dx", "dresidual", "dweight"), leaves, leaves64):
        _close(leaf.grad, leaf64.grad, dtype, name, terms[name])
    assert torch.equal(leaves[0].grad, leaves[1].grad)


def test_add_rms_norm_without_a_gradient_of_the_sum(rng):
    """Only the normalized sum used: the sum's incoming gradient is zero
    and x's gradient is RMSNorm's alone (rms_norm's own, on the sum)."""
    gen = _gen(rng)
    x, res = _randn(gen, 4, 7, dtype=torch.float32), _randn(gen, 4, 7, dtype=torch.float32)
    w = _randn(gen, 7, dtype=torch.float32, shift=1.0)
    leaves = [t.clone().requires_grad_(True) for t in (x, res, w)]
    dy = _randn(gen, 4, 7, dtype=torch.float32)
    ops.add_rms_norm(*leaves)[0].backward(dy)
    total = (x + res).requires_grad_(True)
    w2 = w.clone().requires_grad_(True)
    ops.rms_norm(total, w2).backward(dy)
    torch.testing.assert_close(leaves[0].grad, total.grad, rtol=1e-6, atol=1e-6)
    torch.testing.assert_close(leaves[2].grad, w2.grad, rtol=1e-6, atol=1e-6)
