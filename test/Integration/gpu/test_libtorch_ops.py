"""The LibTorch adapter: torch.ops.liger.call / launch (C++), their
TORCH_CHECK errors, and their meta implementations under torch.compile."""

import os

import pytest

torch = pytest.importorskip("torch", reason="needs PyTorch")
if not torch.cuda.is_available():
    pytest.skip("no CUDA GPU on this machine", allow_module_level=True)
from liger import torch_ops  # noqa: E402


@pytest.fixture(scope="module")
def bundle(bundles_dir):
    path = os.path.join(bundles_dir, "h4096_bf16")
    if not os.path.isdir(path):
        pytest.skip("bundle %s not built (run scripts/build-gpu-bundles.sh)" % path)
    try:
        torch_ops.load_library()
    except ImportError as e:
        pytest.skip(str(e))
    return path


def reference(x, w):
    xf = x.float()
    return (xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + 1e-6)).to(x.dtype).float() * w.float()


def test_call_and_launch(bundle):
    x = torch.randn(9, 4096, device="cuda", dtype=torch.bfloat16)
    w = torch.randn(4096, device="cuda", dtype=torch.bfloat16)
    y, rstd = torch.ops.liger.call(bundle, "rms_llama_rowwise_0", [x, w])
    ref = reference(x, w)
    assert (y.float() - ref).abs().max() <= 1e-2 * ref.abs().max()
    outs = [torch.full_like(y, float("nan")), torch.full_like(rstd, float("nan"))]
    torch.ops.liger.launch(bundle, "rms_llama_rowwise_0", [x, w], outs)
    assert torch.equal(outs[0], y) and torch.equal(outs[1], rstd)


def test_torch_check_errors(bundle):
    x = torch.randn(9, 4096, device="cuda", dtype=torch.bfloat16)
    w = torch.randn(4096, device="cuda", dtype=torch.bfloat16)
    with pytest.raises(RuntimeError, match="must be bf16, got f32"):
        torch.ops.liger.call(bundle, "rms_llama_rowwise_0", [x.float(), w])
    with pytest.raises(RuntimeError, match="must be contiguous"):
        torch.ops.liger.call(bundle, "rms_llama_rowwise_0",
                             [torch.randn(4096, 9, device="cuda", dtype=torch.bfloat16).t(), w])
    with pytest.raises(RuntimeError, match="has no kernel 'nope'"):
        torch.ops.liger.call(bundle, "nope", [x, w])
    with pytest.raises(RuntimeError, match="cannot read"):
        torch.ops.liger.call(bundle + "-missing", "rms_llama_rowwise_0", [x, w])


def test_a_bundle_for_another_gpu_is_refused_at_open(bundle):
    path = os.path.join(os.path.dirname(bundle), "sm80_h1000_f32")
    if not os.path.isdir(path):
        pytest.skip("bundle %s not built (run scripts/build-gpu-bundles.sh)" % path)
    if torch.cuda.get_device_capability()[0] == 8:
        pytest.skip("this GPU runs sm_80 code")
    x = torch.randn(4, 1000, device="cuda")
    with pytest.raises(RuntimeError, match="is compiled for sm_80, but device"):
        torch.ops.liger.call(path, "rms_llama_rowwise_0", [x, torch.randn(1000, device="cuda")])


def test_compile_traces_the_meta_implementation(bundle):
    def f(x, w):
        y, _ = torch.ops.liger.call(bundle, "rms_llama_rowwise_0", [x, w])
        return y * 2

    x = torch.randn(5, 4096, device="cuda", dtype=torch.bfloat16)
    w = torch.randn(4096, device="cuda", dtype=torch.bfloat16)
    assert torch.equal(torch.compile(f, fullgraph=True)(x, w), f(x, w))


def test_compile_with_a_dynamic_token_count(bundle):
    """The meta implementation sizes its outputs from the runtime's rule over
    symbolic sizes: one graph for every token count."""
    def f(x, w):
        y, _ = torch.ops.liger.call(bundle, "rms_llama_rowwise_0", [x, w])
        return y * 2

    g = torch.compile(f, fullgraph=True, dynamic=True)
    w = torch.randn(4096, device="cuda", dtype=torch.bfloat16)
    for n in (5, 9, 33):
        x = torch.randn(n, 4096, device="cuda", dtype=torch.bfloat16)
        assert torch.equal(g(x, w), f(x, w))


def test_weight_gradient_through_the_cpp_path(bundle):
    # RMSNorm backward: C++ allocates the f32 workspace and launches both
    # kernels; the result equals the Python runtime's, and meta gives dW [H].
    from liger import runtime
    dy, x = (torch.randn(33, 4096, device="cuda", dtype=torch.bfloat16) for _ in range(2))
    w = torch.randn(4096, device="cuda", dtype=torch.bfloat16)
    rstd = torch.rsqrt(x.float().pow(2).mean(-1) + 1e-6)
    dx, dw = torch.ops.liger.call(bundle, "rms_grad_rowwise_0", [dy, x, w, rstd])
    assert dx.shape == (33, 4096) and dw.shape == (4096,)
    pdx, pdw = runtime.load(bundle)["rms_grad_rowwise_0"](dy, x, w, rstd)
    torch.cuda.synchronize()
    assert torch.equal(dx, pdx) and torch.equal(dw, pdw)
    with torch.device("meta"):
        m = torch.ops.liger.call(bundle, "rms_grad_rowwise_0",
                                 [torch.empty(5, 4096, dtype=torch.bfloat16)] * 2
                                 + [torch.empty(4096, dtype=torch.bfloat16),
                                    torch.empty(5)])
    assert [tuple(t.shape) for t in m] == [(5, 4096), (4096,)]
