"""liger.ops.lora_linear on the GPU: the LoRA kernel (the matmul template's)
of each configuration of
kernels.lora_cases() (Llama's 4096 x 4096 and an odd 520 -> 1000
projection; ranks 16, 32 and 64; bf16, and f16 with a bias) at 1, 7, 77,
4096 and 16384 rows, against float64: its output written over NaN, every
element; and through liger.ops.lora_linear with autograd, the output and
the gradients of x, the base weight and bias, A and B (the backward is
the template's dx kernel, the rest PyTorch's matmuls, dB from the x·Aᵀ
the forward's kernel left in its products workspace, kept). The dx kernel
(the spec's @bwd: dy · W + s · (dy · B) · A, W read MN-major) the same way
against float64, with the dy · B it leaves in its products workspace. The
bundles are the ones scripts/build-gpu-bundles.sh precompiled
(LIGER_OPS_BUNDLES). And the hand-over of the rank-r product between
column tiles: the same bits whether a CTA read it or computed it, forward
and dx. Skips cleanly without torch, a GPU, the runtime or the bundles."""

import pytest

import kernels

torch = pytest.importorskip("torch", reason="needs PyTorch")
if not torch.cuda.is_available():
    pytest.skip("no CUDA GPU on this machine", allow_module_level=True)
from liger import bundles, operators, ops  # noqa: E402

# Max |error| over max |float64's|: the output rounds once (both products
# accumulate in f32); the gradients are PyTorch's matmuls in the dtype.
TOL = {"bf16": 1e-2, "f16": 2e-3}
CASES = kernels.lora_cases()

pytestmark = pytest.mark.usefixtures("ops_bundles")


def _operands(spec, rows, seed):
    """x [rows, K], W, bias (or None), A, B of the spec, random, on the GPU:
    the factors scaled so that the adapter's term is the size of the base
    layer's."""
    g = torch.Generator(device="cuda").manual_seed(seed)
    dt = kernels.torch_dtype(spec.dtype)
    k, n, r = spec.in_features, spec.out_features, spec.rank

    def rand(*shape, scale=1.0):
        return (torch.randn(*shape, device="cuda", generator=g) * scale).to(dt)
    return (rand(rows, k), rand(n, k, scale=k ** -0.5), rand(n) if spec.bias else None,
            rand(r, k, scale=k ** -0.5), rand(n, r, scale=r ** -0.5))


def _reference(spec, x, w, c, a, b):
    """The op in float64 (differentiable), x · Aᵀ rounded to the dtype
    before its product with B, as the kernel and PEFT round it."""
    t = (x @ a.t()).to(kernels.torch_dtype(spec.dtype)).double()
    y = x @ w.t() + (t @ b.t()) * spec.scale
    return y + c if c is not None else y


def _err(got, want):
    return ((got.double() - want).abs().max() / want.abs().max().clamp_min(1e-30)).item()


@pytest.mark.parametrize("rows", kernels.LORA_ROWS)
@pytest.mark.parametrize("name", sorted(CASES))
def test_the_kernel_writes_every_output_element(name, rows):
    spec = CASES[name].with_target(bundles.device_target(torch.device("cuda")))
    x, w, c, a, b = _operands(spec, rows, rows)
    kernel = bundles.matmul_kernels(spec)[0]
    out = torch.full((rows, spec.out_features), float("nan"), dtype=x.dtype, device="cuda")
    args = [x, w, a, b] + ([c] if c is not None else [])
    kernel(*args, out=[out])
    torch.cuda.synchronize()
    assert not torch.isnan(out).any(), "%s, %d rows: an output element not written" % (
        name, rows)
    want = _reference(spec, *[t.double() if t is not None else None for t in (x, w, c, a, b)])
    err = _err(out, want)
    assert err < TOL[spec.dtype], "%s, %d rows: max error %.3g" % (name, rows, err)


@pytest.mark.parametrize("rows", kernels.LORA_ROWS)
@pytest.mark.parametrize("name", sorted(CASES))
def test_the_operator_keeps_x_at_from_the_kernel(name, rows):
    """liger::lora_linear keeping x·Aᵀ for the backward (keep_mid): the
    output the same bits as without, and x·Aᵀ, every row, against float64
    rounded to the dtype (the kernel's products workspace where it hands
    the product between column tiles, PyTorch's product otherwise)."""
    spec = CASES[name].with_target(bundles.device_target(torch.device("cuda")))
    x, w, c, a, b = _operands(spec, rows, 3000 + rows)
    y, none = operators.lora_linear(x, w, c, a, b, spec.scale, False)
    kept, mid = operators.lora_linear(x, w, c, a, b, spec.scale, True)
    assert none.numel() == 0 and torch.equal(y, kept), name
    assert mid.shape == (rows, spec.rank) and mid.dtype == x.dtype, name
    assert not torch.isnan(mid).any(), "%s, %d rows: x·Aᵀ not kept for every row" % (name, rows)
    want = x.double() @ a.double().t()
    err = _err(mid, want)
    assert err < TOL[spec.dtype], "%s, %d rows: x·Aᵀ max error %.3g" % (name, rows, err)


def _dx_reference(spec, dy, w, a, b):
    """dx and dy·B in float64, dy·B rounded to the dtype before its product
    with A, as the kernel rounds it."""
    t = dy @ b
    dx = dy @ w + (t.to(kernels.torch_dtype(spec.dtype)).double() @ a) * spec.scale
    return dx, t


def _dx_operands(spec, rows, seed):
    """W, dy [rows, N], Bᵀ, Aᵀ: the dx kernel's inputs, and A and B."""
    _, w, _, a, b = _operands(spec, rows, seed)
    g = torch.Generator(device="cuda").manual_seed(seed + 1)
    dy = torch.randn(rows, spec.out_features, device="cuda", generator=g).to(w.dtype)
    return (w, dy, b.t().contiguous(), a.t().contiguous()), a, b


@pytest.mark.parametrize("rows", kernels.LORA_ROWS)
@pytest.mark.parametrize("name", sorted(CASES))
def test_the_dx_kernel_writes_every_element_and_hands_over_dy_b(name, rows):
    """The backward's kernel: dx written over NaN, every element, against
    float64; where it hands dy·B between column tiles (both workspaces),
    the products workspace, poisoned too, holds dy·B in f32 for every
    row."""
    spec = CASES[name].with_target(bundles.device_target(torch.device("cuda")))
    kernel = bundles.matmul_kernels(spec)[1]
    assert kernel is not None, name
    inputs, a, b = _dx_operands(spec, rows, 2000 + rows)
    w, dy = inputs[0], inputs[1]
    out = torch.full((rows, spec.in_features), float("nan"), dtype=w.dtype, device="cuda")
    spaces = [torch.full(shape, float("nan"), dtype=torch.float32, device="cuda")
              for shape in kernel.workspace_shapes(inputs)]
    kernel(*inputs, out=[out], workspaces=spaces)
    torch.cuda.synchronize()
    assert not torch.isnan(out).any(), "%s, %d rows: a dx element not written" % (name, rows)
    want, dyb = _dx_reference(spec, dy.double(), w.double(), a.double(), b.double())
    err = _err(out, want)
    assert err < TOL[spec.dtype], "%s, %d rows: dx max error %.3g" % (name, rows, err)
    # (More than one column tile of the in_features: the hand-over.)
    assert len(spaces) == (2 if spec.in_features > 256 else 0), name
    if spaces:
        assert not torch.isnan(spaces[0]).any(), name
        err = _err(spaces[0], dyb)
        assert err < 1e-5, "%s, %d rows: dy·B max error %.3g" % (name, rows, err)


@pytest.mark.parametrize("name", sorted(CASES))
def test_the_dx_kernels_hand_over_gives_the_same_bits(name):
    """dx at 16384 rows (most column tiles read the published dy·B) and
    128 rows at a time (one row tile, whose CTAs start together: which of
    them read the product and which compute it is a race): the same
    bits."""
    spec = CASES[name].with_target(bundles.device_target(torch.device("cuda")))
    kernel = bundles.matmul_kernels(spec)[1]
    (w, dy, bt, at), _, _ = _dx_operands(spec, 16384, 6)
    whole = [kernel(w, dy, bt, at) for _ in range(2)]
    parts = torch.cat([kernel(w, dy[i:i + 128], bt, at) for i in range(0, 16384, 128)])
    assert torch.equal(whole[0], whole[1]), name
    assert torch.equal(whole[0], parts), "%s: %d of %d elements differ" % (
        name, (whole[0] != parts).sum().item(), parts.numel())


@pytest.mark.parametrize("name", sorted(CASES))
def test_the_handed_over_product_gives_the_same_bits(name):
    """At 16384 rows most column tiles start after column 0 has published
    its rows' x·Aᵀ and read it (docs/Design/GPU-Lowering.md, the hand-over);
    launched 128 rows at a time, each launch's CTAs start together and
    compute it themselves. The two give the same bits, and so do repeated
    launches (whichever CTAs found it published)."""
    spec = CASES[name].with_target(bundles.device_target(torch.device("cuda")))
    rows = 16384
    x, w, c, a, b = _operands(spec, rows, 5)
    kernel = bundles.matmul_kernels(spec)[0]
    args = [w, a, b] + ([c] if c is not None else [])
    whole = [kernel(x, *args) for _ in range(3)]
    parts = torch.cat([kernel(x[i:i + 128], *args) for i in range(0, rows, 128)])
    for again in whole[1:]:
        assert torch.equal(whole[0], again), name
    assert torch.equal(whole[0], parts), "%s: %d of %d elements differ" % (
        name, (whole[0] != parts).sum().item(), parts.numel())


@pytest.mark.parametrize("rows", kernels.LORA_ROWS)
@pytest.mark.parametrize("name", sorted(CASES))
def test_lora_linear_and_its_gradients(name, rows, monkeypatch):
    """x [rows, K] as [1, rows, K] (3-D, as a model calls it), every operand
    trainable: the output and the five gradients against float64
    autograd, dx by the backward's kernel (PyTorch's form of it refused)."""
    spec = CASES[name]
    assert bundles.matmul_kernels(spec.with_target(
        bundles.device_target(torch.device("cuda"))))[1] is not None, name

    def refused(*args):
        raise AssertionError("dx took PyTorch's form, not the kernel")
    monkeypatch.setattr(operators, "lora_grad_reference", refused)
    operands = _operands(spec, rows, 1000 + rows)
    leaves = [t.requires_grad_() if t is not None else None for t in operands]
    x, w, c, a, b = leaves
    linear = torch.nn.functional.linear
    hands_over = bool(bundles.matmul_kernels(spec.with_target(
        bundles.device_target(torch.device("cuda"))))[0].workspace_shapes(
            [x, w, a, b] + ([c] if c is not None else [])))

    def kept(inp, weight, bias=None):  # (x·Aᵀ: the forward kernel's, where it hands it over)
        assert not (hands_over and weight is a), "x·Aᵀ formed by PyTorch, not kept"
        return linear(inp, weight, bias)
    monkeypatch.setattr(torch.nn.functional, "linear", kept)
    y = ops.lora_linear(x.unsqueeze(0), w, c, a, b, spec.scale)
    assert y.shape == (1, rows, spec.out_features) and y.dtype == x.dtype
    g = torch.Generator(device="cuda").manual_seed(7)
    dy = torch.randn(y.shape, device="cuda", generator=g).to(y.dtype)
    y.backward(dy)
    monkeypatch.setattr(torch.nn.functional, "linear", linear)
    exact = [t.detach().double().requires_grad_() if t is not None else None for t in leaves]
    want = _reference(spec, *exact)
    want.backward(dy[0].double())
    assert _err(y[0], want.detach()) < TOL[spec.dtype], name
    for what, got, ref in zip(("dx", "dW", "dbias", "dA", "dB"), leaves, exact):
        if got is None:
            continue
        assert got.grad is not None and not torch.isnan(got.grad).any(), (name, what)
        rel = ((got.grad.double() - ref.grad).norm() / ref.grad.norm().clamp_min(1e-30)).item()
        assert rel < TOL[spec.dtype], "%s, %d rows: %s rel err %.3g" % (name, rows, what, rel)
