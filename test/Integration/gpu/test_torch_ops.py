"""Compiled kernels as torch operators: torch.ops.liger.*, their fake
implementations under torch.compile, and autograd through a backward
kernel. Skips cleanly without torch, a GPU, the runtime or the bundles."""

import os

import pytest

torch = pytest.importorskip("torch", reason="needs PyTorch")
if not torch.cuda.is_available():
    pytest.skip("no CUDA GPU on this machine", allow_module_level=True)
from liger import runtime, torch_ops  # noqa: E402


@pytest.fixture(scope="module")
def ops(bundles_dir):
    path = os.path.join(bundles_dir, "h1000_f32")
    if not os.path.isdir(path):
        pytest.skip("bundle %s not built (run scripts/build-gpu-bundles.sh)" % path)
    try:
        bundle = runtime.load(path)
    except ImportError as e:
        pytest.skip(str(e))
    torch_ops.register(bundle, namespace="liger_test")
    torch_ops.register_autograd("swiglu_rowwise_0", "swiglu_grad_rowwise_0",
                                namespace="liger_test")
    return torch.ops.liger_test


def test_op_matches_reference(ops):
    x = torch.randn(5, 1000, device="cuda")
    w = torch.randn(1000, device="cuda")
    y, rstd = ops.rms_llama_rowwise_0(x, w)
    ref_rstd = torch.rsqrt(x.double().pow(2).mean(-1) + 1e-6)
    ref = x.double() * ref_rstd[:, None] * w.double()
    assert (y.double() - ref).abs().max() <= 2e-5 * ref.abs().max()
    assert (rstd.double() - ref_rstd).abs().max() <= 2e-5 * ref_rstd.abs().max()


def test_torch_compile_traces_through_the_fake(ops):
    def f(g, u):
        return ops.swiglu_rowwise_0(g, u) * 2.0

    compiled = torch.compile(f, fullgraph=True)
    g = torch.randn(7, 1000, device="cuda")
    u = torch.randn(7, 1000, device="cuda")
    expected = f(g, u)
    assert torch.allclose(compiled(g, u), expected, rtol=1e-5, atol=1e-6)


def test_autograd_through_the_backward_kernel(ops):
    g = torch.randn(3, 1000, device="cuda", requires_grad=True)
    u = torch.randn(3, 1000, device="cuda", requires_grad=True)
    dy = torch.randn(3, 1000, device="cuda")
    ops.swiglu_rowwise_0(g, u).backward(dy)
    g64 = g.detach().double().requires_grad_(True)
    u64 = u.detach().double().requires_grad_(True)
    (torch.nn.functional.silu(g64) * u64).backward(dy.double())
    for ours, ref in [(g.grad, g64.grad), (u.grad, u64.grad)]:
        assert (ours.double() - ref).abs().max() <= 2e-5 * ref.abs().max()
