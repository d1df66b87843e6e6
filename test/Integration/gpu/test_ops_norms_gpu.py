"""liger.ops.layer_norm and liger.ops.add_rms_norm on the GPU, with the
bundles precompiled on the build machine (LIGER_OPS_BUNDLES): each
configuration of kernels.ops_norm_cases (odd and long rows, bf16, f16, f32,
an f32 weight, no bias, every casting) on fresh random inputs against
float64 autograd, through the ops (forward and every gradient) and through
their kernels with every output filled with NaN before the launch (an
element a kernel forgets to write fails; LayerNorm's forward writes each
row's mean and rstd too, and its backward reads them). Skips cleanly without torch, a
GPU, the runtime or the bundles."""

import pytest

import kernels

torch = pytest.importorskip("torch", reason="needs PyTorch")
if not torch.cuda.is_available():
    pytest.skip("no CUDA GPU on this machine", allow_module_level=True)
from liger import bundles, ops  # noqa: E402
from test_ops_autograd import TOL  # noqa: E402

CASES = kernels.ops_norm_cases()
pytestmark = pytest.mark.usefixtures("ops_bundles")


def _generator():
    gen = torch.Generator(device="cuda")
    gen.manual_seed(torch.seed())
    return gen


def _call(spec, args):
    if spec.op == "layer_norm":
        return (ops.layer_norm(args[0], args[1], args[2] if spec.bias else None, spec.eps),)
    return ops.add_rms_norm(*args, spec.eps, spec.offset, spec.casting)


def check(actual, expected, dt, what, floor=1e-3):
    """`actual` against float64 `expected`, relative to the largest
    expected magnitude, or `floor` where that is less: 1e-3 (a row of one
    feature: dx and dW are 0, which float64 gives as rounding noise), or
    for a gradient summed over rows (dW, dbias) its largest term, since a
    sum's rounding error is relative to its terms, not to a result that
    cancels."""
    actual = actual.detach().to(torch.float64)
    assert actual.shape == expected.shape, what
    assert not torch.isnan(actual).any(), "%s: NaN (unwritten or wrong)" % what
    scale = max(expected.abs().max().item(), floor)
    err = (actual - expected).abs().max().item() / scale
    assert err <= TOL[dt], "%s: max error %.3g (of %.3g) exceeds %g" % (what, err, scale, TOL[dt])


def _check_all(got, want, spec, what, term=0.0):
    """Each of `got` against float64 `want`: at the tolerance of its dtype
    (an f32 weight's gradient, a sum of products of the rows' dtype: at
    the rows'); a weight-shaped gradient ([H]) relative to at least `term`,
    the largest term of its sum over rows."""
    assert len(got) == len(want), what
    for i, (g, w) in enumerate(zip(got, want)):
        dt = spec.dtype if g.dtype == torch.float32 and spec.weight_dtype == "f32" \
            else {torch.bfloat16: "bf16", torch.float16: "f16", torch.float32: "f32"}[g.dtype]
        check(g, w, dt, "%s %d" % (what, i), max(1e-3, term if g.dim() == 1 else 0.0))


def _largest_term(spec, dy, inputs):
    """The largest term of a weight gradient's sum over rows, in float64:
    |dy| (dbias) or |dy · x_hat| (dW), x_hat the normalized rows (the sum
    of x and the residual for add + RMSNorm)."""
    x = inputs[0].double()
    if spec.op == "layer_norm":
        centered = x - x.mean(-1, keepdim=True)
        x_hat = centered * torch.rsqrt(centered.pow(2).mean(-1, keepdim=True) + spec.eps)
    else:
        x = x + inputs[1].double()
        x_hat = x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + spec.eps)
    dy = dy.double().reshape(x_hat.shape)
    return max(dy.abs().max().item(), (dy * x_hat).abs().max().item())


@pytest.mark.parametrize("name", sorted(CASES))
def test_op_and_its_gradients(name):
    spec, shape = CASES[name]
    gen = _generator()
    inputs = kernels.norm_inputs(spec, shape, gen)
    leaves = [t.clone().requires_grad_(True) for t in inputs]
    leaves64 = [t.double().requires_grad_(True) for t in inputs]
    out, want = _call(spec, leaves), kernels.norm_reference(spec, leaves64)
    if spec.op == "add_rms_norm":  # the sum is the rounded sum, exactly
        assert torch.equal(out[1], (inputs[0].double() + inputs[1].double()).to(out[1].dtype))
    _check_all(out, [w.detach() for w in want], spec, name + " output")
    dys = [torch.randn(o.shape, generator=gen, device="cuda").to(o.dtype) for o in out]
    torch.autograd.backward(out, dys)
    torch.autograd.backward(want, [d.double() for d in dys])
    _check_all([t.grad for t in leaves], [t.grad for t in leaves64], spec,
               name + " gradient of input", _largest_term(spec, dys[0], inputs))


def _poisoned(kernel, inputs):
    return [torch.full(shape, float("nan"), dtype=kernels.torch_dtype(p["dtype"]),
                       device="cuda")
            for p, shape in zip(kernel.outputs, kernel.output_shapes(inputs))]


def _launch(kernel, inputs):
    out = kernel(*inputs, out=_poisoned(kernel, inputs))
    torch.cuda.synchronize()
    return out if isinstance(out, tuple) else (out,)


@pytest.mark.parametrize("name", sorted(CASES))
def test_the_kernels_write_every_output(name):
    """@fwd's and @bwd's kernels as liger.ops launches them (rows [N, H]),
    every output NaN before the launch."""
    spec, shape = CASES[name]
    fwd, bwd = bundles.kernels(spec.with_target(bundles.device_target(torch.device("cuda"))))
    gen = _generator()
    inputs = [t.reshape(-1, t.shape[-1]) if t.dim() > 1 else t
              for t in kernels.norm_inputs(spec, shape, gen)]
    inputs64 = [t.double().requires_grad_(True) for t in inputs]
    want = kernels.norm_reference(spec, inputs64)
    got = _launch(fwd, inputs)
    dys = [torch.randn(w.shape, generator=gen, device="cuda").to(inputs[0].dtype) for w in want]
    torch.autograd.backward(want, [d.double() for d in dys])
    if spec.op == "layer_norm":
        # y, then each row's mean and rstd (f32), which the backward reads.
        y, mean, rstd = got
        _check_all([y], [want[0].detach()], spec, name + " forward")
        x64 = inputs[0].double()
        m64 = x64.mean(-1)
        check(mean, m64, "f32", name + " mean")
        check(rstd, torch.rsqrt((x64 - m64[:, None]).pow(2).mean(-1) + spec.eps), "f32",
              name + " rstd")
        grads = _launch(bwd, [dys[0], inputs[0], inputs[1], mean, rstd])
        expected = [inputs64[0].grad, inputs64[1].grad] + (
            [inputs64[2].grad] if spec.bias else [])
        _check_all(grads, expected, spec, name + " backward",
                   _largest_term(spec, dys[0], inputs))
        return
    y, total, rstd = got
    _check_all([y, total], [w.detach() for w in want], spec, name + " forward")
    r64 = torch.rsqrt(total.double().pow(2).mean(-1) + spec.eps)
    check(rstd, r64, "f32", name + " rstd")
    # dW, then the residual stream's gradient (x's and the residual's).
    dw, dres = _launch(bwd, [dys[0], total, inputs[2], rstd, dys[1]])
    _check_all([dres, dw], [inputs64[0].grad, inputs64[2].grad], spec, name + " backward",
               _largest_term(spec, dys[0], inputs))
