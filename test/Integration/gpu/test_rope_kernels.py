"""RoPE and its backward on the GPU against float64 torch: Llama-3-8B heads
(32 q, 8 kv, head dim 128), batch 1 and 2, sequence 1, 7 and 33, tables
broadcast over the batch or per batch, bf16 and f32, outputs poisoned."""

import os

import pytest

import kernels

torch = pytest.importorskip("torch", reason="the GPU suite needs PyTorch")
if not torch.cuda.is_available():
    pytest.skip("no CUDA GPU on this machine", allow_module_level=True)
from liger import runtime  # noqa: E402

TOL = {"bf16": 1e-2, "f32": 2e-5}


def rotate_half(x):
    h = x.shape[-1] // 2
    return torch.cat([-x[..., h:], x[..., :h]], dim=-1)


def rotate_half_t(y):
    h = y.shape[-1] // 2
    return torch.cat([y[..., h:], -y[..., :h]], dim=-1)


CASES = [(dt, op, b, t, batched) for dt in kernels.DTYPES for op in ["rope", "rope_grad"]
         for b in [1, 2] for t in [1, 7, 33] for batched in [False, True]]


@pytest.mark.parametrize("dt,op,b,t,batched", CASES,
                         ids=["%s-%s-b%d-t%d-%s" % (c[0], c[1], c[2], c[3],
                                                    "batched" if c[4] else "bcast")
                              for c in CASES])
def test_rope_kernel(bundles_dir, dt, op, b, t, batched):
    path = os.path.join(bundles_dir, "rope_%s" % dt)
    if not os.path.isdir(path):
        pytest.skip("bundle %s not built (run scripts/build-gpu-bundles.sh)" % path)
    bundle = runtime.load(path)
    kernel = bundle[op + ("_batched" if batched else "") + "_rowwise_0"]
    hq, hkv, d = kernels.ROPE["hq"], kernels.ROPE["hkv"], kernels.ROPE["d"]
    dtype = {"bf16": torch.bfloat16, "f32": torch.float32}[dt]
    q = torch.randn(b, hq, t, d, device="cuda").to(dtype)
    k = torch.randn(b, hkv, t, d, device="cuda").to(dtype)
    tb = b if batched else 1
    # Independent (not half-duplicated) tables, so a wrong partner shows.
    cos = torch.randn(tb, t, d, device="cuda").to(dtype)
    sin = torch.randn(tb, t, d, device="cuda").to(dtype)
    out = [torch.full_like(q, float("nan")), torch.full_like(k, float("nan"))]
    qo, ko = kernel(q, k, cos, sin, out=out)
    torch.cuda.synchronize()
    c, s = cos.double()[:, None], sin.double()[:, None]
    for x, o in [(q, qo), (k, ko)]:
        x = x.double()
        ref = x * c + rotate_half(x) * s if op == "rope" else x * c + rotate_half_t(x * s)
        o = o.double()
        assert not torch.isnan(o).any(), "an output element was not written"
        err = (o - ref).abs().max().item() / ref.abs().max().item()
        assert err <= TOL[dt], "max error %.3g exceeds %.3g" % (err, TOL[dt])


@pytest.mark.parametrize("dt", kernels.DTYPES)
def test_rope_in_place(bundles_dir, dt):
    # Each thread reads a chunk and its rotate-half partner before writing
    # both, and no two threads share one: q and k may be their own outputs.
    path = os.path.join(bundles_dir, "rope_%s" % dt)
    if not os.path.isdir(path):
        pytest.skip("bundle %s not built (run scripts/build-gpu-bundles.sh)" % path)
    kernel = runtime.load(path)["rope_rowwise_0"]
    hq, hkv, d = kernels.ROPE["hq"], kernels.ROPE["hkv"], kernels.ROPE["d"]
    dtype = {"bf16": torch.bfloat16, "f32": torch.float32}[dt]
    q = torch.randn(2, hq, 33, d, device="cuda").to(dtype)
    k = torch.randn(2, hkv, 33, d, device="cuda").to(dtype)
    cos = torch.randn(1, 33, d, device="cuda").to(dtype)
    sin = torch.randn(1, 33, d, device="cuda").to(dtype)
    expected = kernel(q, k, cos, sin)
    qo, ko = kernel(q, k, cos, sin, out=[q, k])
    torch.cuda.synchronize()
    assert qo.data_ptr() == q.data_ptr() and ko.data_ptr() == k.data_ptr()
    assert torch.equal(q, expected[0]) and torch.equal(k, expected[1])


def test_rope_argument_checks(bundles_dir):
    path = os.path.join(bundles_dir, "rope_f32")
    if not os.path.isdir(path):
        pytest.skip("bundle not built")
    kernel = runtime.load(path)["rope_rowwise_0"]
    q = torch.randn(2, 32, 5, 128, device="cuda")
    k = torch.randn(2, 8, 5, 128, device="cuda")
    cos = torch.randn(1, 5, 128, device="cuda")
    with pytest.raises(RuntimeError, match=r"must have shape \[batch, 8, seq, 128\]"):
        kernel(q, torch.randn(2, 4, 5, 128, device="cuda"), cos, cos)
    with pytest.raises(RuntimeError, match="has batch and sequence"):
        kernel(q, torch.randn(2, 8, 6, 128, device="cuda"), cos, cos)
    with pytest.raises(RuntimeError, match="must have batch 1"):
        kernel(q, k, torch.randn(2, 5, 128, device="cuda"), cos)
    batched = runtime.load(path)["rope_batched_rowwise_0"]
    with pytest.raises(RuntimeError, match=r"must have shape \[1 or 2, 5, 128\]"):
        batched(q, k, torch.randn(3, 5, 128, device="cuda"), cos)
