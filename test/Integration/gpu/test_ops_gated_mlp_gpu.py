"""liger.ops.gated_mlp on the GPU: the kernels (the matmul template's) of
each configuration of
kernels.gated_mlp_cases() at 1, 7, 77 and 4096 rows (16384 for the
Llama-3-8B MLP): the forward kernel's gate, up and h and the backward
kernel's dgate and dup written over NaN, every element, against float64;
and liger.ops.gated_mlp with autograd, the output and the gradients of x
and of the three weights against float64 autograd. The bundles are the
ones scripts/build-gpu-bundles.sh precompiled (LIGER_OPS_BUNDLES). Skips
cleanly without torch, a GPU, the runtime or the bundles."""

import pytest

import kernels

torch = pytest.importorskip("torch", reason="needs PyTorch")
if not torch.cuda.is_available():
    pytest.skip("no CUDA GPU on this machine", allow_module_level=True)
from liger import bundles, ops  # noqa: E402

# Max |error| over max |float64's|: gate, up, h and dh round once each in
# the kernels; the GEMMs accumulate in f32.
TOL = {"bf16": 2e-2, "f16": 3e-3}
CASES = kernels.gated_mlp_cases()
RUNS = [(name, rows) for name in sorted(CASES) for rows in kernels.GATED_MLP_ROWS] + [
    ("swiglu_bf16_4096x14336", 16384)]

pytestmark = pytest.mark.usefixtures("ops_bundles")


def _operands(spec, rows, seed):
    """x [rows, H] and the gate, up and down weights, scaled so that gate,
    up and y are of order one, on the GPU."""
    g = torch.Generator(device="cuda").manual_seed(seed)
    dt = kernels.torch_dtype(spec.dtype)
    h, i = spec.hidden, spec.intermediate

    def rand(*shape, scale=1.0):
        return (torch.randn(*shape, device="cuda", generator=g) * scale).to(dt)
    return rand(rows, h), rand(i, h, scale=h ** -0.5), rand(i, h, scale=h ** -0.5), \
        rand(h, i, scale=i ** -0.5)


def _act(gate, spec):
    if spec.activation == "swiglu":
        return torch.nn.functional.silu(gate)
    return torch.nn.functional.gelu(gate, approximate=spec.approximate)


def _err(got, want):
    return ((got.double() - want).abs().max() / want.abs().max().clamp_min(1e-30)).item()


def _poisoned(rows, width, like):
    return torch.full((rows, width), float("nan"), dtype=like.dtype, device="cuda")


@pytest.mark.parametrize("name,rows", RUNS)
def test_the_kernels_write_every_output_element(name, rows):
    spec = CASES[name].with_target(bundles.device_target(torch.device("cuda")))
    x, wg, wu, wd = _operands(spec, rows, rows)
    fwd, bwd = bundles.matmul_kernels(spec)
    i = spec.intermediate
    out = [_poisoned(rows, i, x) for _ in range(3)]
    fwd(x, wg, wu, out=out)
    gate, up, h = out
    dy = _operands(spec, rows, rows + 1)[0]
    grads = [_poisoned(rows, i, x) for _ in range(2)]
    bwd(dy, wd, gate, up, out=grads)
    torch.cuda.synchronize()
    for what, t in zip(("gate", "up", "h", "dgate", "dup"), out + grads):
        assert not torch.isnan(t).any(), "%s, %d rows: a %s element not written" % (
            name, rows, what)
    xd = x.double()
    want_gate, want_up = xd @ wg.double().t(), xd @ wu.double().t()
    # h and the gradients from the kernel's own rounded gate and up (their
    # rounding is checked above): float64 from there.
    g, u = gate.double().requires_grad_(), up.double().requires_grad_()
    want_h = _act(g, spec) * u
    dh = (dy.double() @ wd.double()).to(x.dtype).double()  # dh rounds as liger rounds it
    want_h.backward(dh)
    for what, got, want in (("gate", gate, want_gate), ("up", up, want_up),
                            ("h", h, want_h.detach()), ("dgate", grads[0], g.grad),
                            ("dup", grads[1], u.grad)):
        err = _err(got, want)
        assert err < TOL[spec.dtype], "%s, %d rows: %s max error %.3g" % (name, rows, what, err)


@pytest.mark.parametrize("name,rows", RUNS)
def test_gated_mlp_and_its_gradients(name, rows):
    """x [rows, H] as [1, rows, H] (3-D, as a model calls it), every weight
    trainable: the output and the four gradients against float64
    autograd."""
    spec = CASES[name]
    leaves = [t.requires_grad_() for t in _operands(spec, rows, 1000 + rows)]
    x, wg, wu, wd = leaves
    y = ops.gated_mlp(x.unsqueeze(0), wg, wu, wd, spec.activation, spec.approximate)
    assert y.shape == (1, rows, spec.hidden) and y.dtype == x.dtype
    g = torch.Generator(device="cuda").manual_seed(7)
    dy = torch.randn(y.shape, device="cuda", generator=g).to(y.dtype)
    y.backward(dy)
    exact = [t.detach().double().requires_grad_() for t in leaves]
    xd, wgd, wud, wdd = exact
    want = (_act(xd @ wgd.t(), spec) * (xd @ wud.t())) @ wdd.t()
    want.backward(dy[0].double())
    assert _err(y[0], want.detach()) < TOL[spec.dtype], name
    for what, got, ref in zip(("dx", "dW_gate", "dW_up", "dW_down"), leaves, exact):
        assert got.grad is not None and not torch.isnan(got.grad).any(), (name, what)
        rel = ((got.grad.double() - ref.grad).norm() / ref.grad.norm().clamp_min(1e-30)).item()
        assert rel < TOL[spec.dtype], "%s, %d rows: %s rel err %.3g" % (name, rows, what, rel)
