"""Every rowwise kernel on the GPU against a float64 torch reference.

Kernels come from bundles compiled on the build machine
(scripts/build-gpu-bundles.sh) and run through the runtime
(python/liger/runtime.py over _liger_runtime). Each case draws fresh random
inputs, fills the outputs with NaN before the launch (so an element the
kernel forgets to write fails), and compares with the reference at the
tolerance of the output dtype, relative to the largest reference value.
Skips cleanly, saying why, without torch, a GPU, the runtime or the bundles.
"""

import os

import pytest

import kernels

torch = pytest.importorskip("torch", reason="the GPU suite needs PyTorch")
if not torch.cuda.is_available():
    pytest.skip("no CUDA GPU on this machine", allow_module_level=True)
from liger import runtime  # noqa: E402

TOL = {"bf16": 1e-2, "f16": 2e-3, "f32": 2e-5}


def load(bundles_dir, hidden, dt):
    return kernels.load_bundle(bundles_dir, "h%d_%s" % (hidden, dt))


def check(actual, expected, dt, what):
    actual = actual.to(torch.float64)
    assert not torch.isnan(actual).any(), "%s: NaN in the output (unwritten or wrong)" % what
    scale = expected.abs().max().item() or 1.0
    err = (actual - expected).abs().max().item() / scale
    assert err <= TOL[dt], "%s: max error %.3g (relative to %.3g) exceeds %.3g" % (
        what, err, scale, TOL[dt])


# Every op at every (hidden, dtype, tokens) of kernels.rowwise_shapes():
# Llama-sized rows, and rows of odd and long lengths (7 to 262147) in bf16,
# f16 and f32.
CASES = [(h, dt, name, tokens) for h, dt, tokens in kernels.rowwise_shapes()
         for name in kernels.references(dt)]


@pytest.mark.parametrize("hidden,dt,name,tokens", CASES,
                         ids=["h%d-%s-%s-t%d" % c for c in CASES])
def test_rowwise_kernel(bundles_dir, hidden, dt, name, tokens):
    bundle = load(bundles_dir, hidden, dt)
    run_against_reference(bundle[name + "_rowwise_0"], name, hidden, dt, tokens)


# Row programs pinned to thread-block clusters (kernels.CLUSTER_CASES), at
# one row, a few, and more rows than one wave of clusters.
CLUSTER = [(case, tokens) for case in kernels.CLUSTER_CASES for tokens in (1, 7, 1333)]


@pytest.mark.parametrize("case,tokens", CLUSTER,
                         ids=["%s-t%d" % (kernels.cluster_function(*c), t) for c, t in CLUSTER])
def test_cluster_kernel(bundles_dir, case, tokens):
    if torch.cuda.get_device_capability()[0] < 9:
        pytest.skip("thread-block clusters need sm_90")
    bundle = kernels.load_bundle(bundles_dir, "cluster")
    name, hidden, dt, _, _ = case
    run_against_reference(bundle[kernels.cluster_function(*case) + "_rowwise_0"],
                          name, hidden, dt, tokens)


# Row programs whose rows are peeled (kernels.PEEL_CASES): one row, a few
# (every head from 0 to 7 among them), and many.
PEEL = [(case, tokens) for case in kernels.PEEL_CASES for tokens in (1, 9, 1333)]


@pytest.mark.parametrize("case,tokens", PEEL,
                         ids=["%s-t%d" % (kernels.peel_function(*c), t) for c, t in PEEL])
def test_peeled_kernel(bundles_dir, case, tokens):
    bundle = kernels.load_bundle(bundles_dir, "peel")
    name, hidden, dt, _ = case
    run_against_reference(bundle[kernels.peel_function(*case) + "_rowwise_0"],
                          name, hidden, dt, tokens)


def run_against_reference(kernel, name, hidden, dt, tokens):
    """`kernel` (op `name` of kernels.references) on fresh random inputs,
    its outputs poisoned with NaN, against the float64 reference."""
    specs, reference = kernels.references(dt)[name]
    gen = torch.Generator(device="cuda")
    gen.manual_seed(torch.seed())
    inputs = kernels.make_inputs(specs, tokens, hidden, dt, gen)
    out = []
    for p, shape in zip(kernel.outputs, kernel.output_shapes(inputs)):
        dtype = kernels.torch_dtype(p["dtype"])
        out.append(torch.full(shape, float("nan"), dtype=dtype, device="cuda"))
    result = kernel(*inputs, out=out)
    torch.cuda.synchronize()
    result = result if isinstance(result, tuple) else (result,)
    expected = reference(*[t.to(torch.float64) for t in inputs])
    assert len(result) == len(expected)
    for i, (a, e, p) in enumerate(zip(result, expected, kernel.outputs)):
        check(a, e, p["dtype"], "%s output %d" % (name, i))


def test_errors_are_clear(bundles_dir):
    bundle = load(bundles_dir, 1000, "f32")
    k = bundle["rms_llama_rowwise_0"]
    x = torch.randn(4, 1000, device="cuda")
    w = torch.randn(1000, device="cuda")
    # A launch first: the shapes it remembers neither skip the checks of
    # other shapes nor give another call's outputs their shape.
    assert k(x, w)[0].shape == (4, 1000) and k(x[:3], w)[0].shape == (3, 1000)
    with pytest.raises(TypeError, match="input1 must be a torch.Tensor"):
        k(x, [1.0] * 1000)
    with pytest.raises(ValueError, match="must be contiguous"):
        k(torch.randn(1000, 4, device="cuda").t(), w)
    with pytest.raises(ValueError, match="liger kernels run on CUDA tensors"):
        k(x.cpu(), w)
    with pytest.raises(RuntimeError, match="must be f32, got bf16"):
        k(x.to(torch.bfloat16), w)
    with pytest.raises(RuntimeError, match=r"must have shape \[1000\], got \[999\]"):
        k(x, w[:999])
    with pytest.raises(KeyError, match="has no kernel"):
        bundle["nope"]
    # Zero rows: nothing to launch, empty outputs.
    y, r = k(torch.empty(0, 1000, device="cuda"), w)
    assert y.shape == (0, 1000) and r.shape == (0,)
    # Zero rows of a weight gradient: dW is written, and is zero.
    e = torch.empty(0, 1000, device="cuda")
    dw = torch.full((1000,), float("nan"), device="cuda")
    bundle["rms_grad_rowwise_0"](e, e, w, torch.empty(0, device="cuda"),
                                 out=[torch.empty(0, 1000, device="cuda"), dw])
    torch.cuda.synchronize()
    assert (dw == 0).all()


@pytest.mark.parametrize("arch", ["sm_80", "sm_86"])
def test_bundle_for_another_arch_is_refused(bundles_dir, arch):
    """At load, not at the first launch: the runtime compares every kernel
    with the current GPU."""
    path = os.path.join(bundles_dir, "%s_h1000_f32" % arch.replace("_", ""))
    if not os.path.isdir(path):
        pytest.skip("bundle %s not built (run scripts/build-gpu-bundles.sh)" % path)
    major, minor = torch.cuda.get_device_capability()
    lowest = int(arch[-1])
    if major == 8 and minor >= lowest:
        pytest.skip("this GPU runs %s code" % arch)
    with pytest.raises(RuntimeError, match=r"kernel '\w+' of module 'liger_kernels' is compiled "
                                           r"for %s, but device %d has compute capability "
                                           r"%d\.%d \(%s runs on 8\.%d to 8\.x\); rebuild the "
                                           r"bundle for this GPU"
                                           % (arch, torch.cuda.current_device(), major, minor,
                                              arch, lowest)):
        runtime.load(path)
