"""The attention template's kernel (liger-compile of liger.attention) on the
GPU against a float64 reference (float32 past 2048 tokens): GQA, multi-head,
multi-query, head dimensions 64, 128 and 256, causal and not, a scale of
its own, bf16 and f16, batch 1 and 3, sequences 1 to 8192 (every block
size's tail), the output poisoned with NaN. The kernel's error is held to
at most twice that of PyTorch's own scaled_dot_product_attention in the
same dtype (and at most 4e-3 where that is smaller), both measured
against the reference on the same inputs."""

import os

import pytest

import kernels

torch = pytest.importorskip("torch", reason="the GPU suite needs PyTorch")
if not torch.cuda.is_available():
    pytest.skip("no CUDA GPU on this machine", allow_module_level=True)
import torch.nn.functional as F  # noqa: E402

CASES = [(name, b, t) for name in kernels.ATTENTION for b, t in kernels.ATTENTION_SHAPES]


def _inputs(hq, hkv, d, dt, b, t, seed):
    gen = torch.Generator(device="cuda").manual_seed(seed)
    dtype = kernels.torch_dtype(dt)

    def randn(h):
        return torch.randn(b, h, t, d, device="cuda", generator=gen).to(dtype)
    return randn(hq), randn(hkv), randn(hkv)


def _sdpa(q, k, v, causal, scale):
    g = q.shape[1] // k.shape[1]
    k, v = k.repeat_interleave(g, dim=1), v.repeat_interleave(g, dim=1)
    return F.scaled_dot_product_attention(q, k, v, is_causal=causal, scale=scale)


@pytest.mark.parametrize("name,b,t", CASES, ids=["%s-b%d-t%d" % c for c in CASES])
def test_attention_kernel(bundles_dir, name, b, t):
    hq, hkv, d, causal, scale, dt = kernels.ATTENTION[name]
    kernel = kernels.load_bundle(bundles_dir, "attention")[name + "_attention_0"]
    q, k, v = _inputs(hq, hkv, d, dt, b, t, seed=hash((name, b, t)) % 2**31)
    out = torch.full_like(q, float("nan"))
    o = kernel(q, k, v, out=[out])
    torch.cuda.synchronize()
    assert o.data_ptr() == out.data_ptr()
    assert not torch.isnan(o).any(), "an output element was not written"
    ref_dtype = torch.float64 if t <= 2048 else torch.float32
    ref = kernels.attention_reference(q, k, v, causal, scale, ref_dtype)
    err = (o.to(ref_dtype) - ref).abs().max().item()
    torch_err = (_sdpa(q, k, v, causal, scale).to(ref_dtype) - ref).abs().max().item()
    assert err <= max(2 * torch_err, 4e-3), \
        "max error %.3g; PyTorch's SDPA in %s: %.3g" % (err, dt, torch_err)


def test_attention_kernel_refuses_non_contiguous_views(bundles_dir):
    # q, k and v as HF forms them: transposes of one [B, T, H, D] projection
    # output are not contiguous; the runtime refuses them by name rather
    # than reading the wrong rows.
    kernel = kernels.load_bundle(bundles_dir, "attention")["attn_mha_attention_0"]
    x = torch.randn(2, 77, 3 * 4, 128, device="cuda", dtype=torch.bfloat16)
    q, k, v = x.transpose(1, 2).split(4, dim=1)
    with pytest.raises(Exception, match="contiguous|stride"):
        kernel(q, k, v)


def test_attention_kernel_refuses_other_key_lengths(bundles_dir):
    # The template's tensors share one sequence length (the launcher binds
    # `seq` once): keys longer than the queries are refused, not misread.
    kernel = kernels.load_bundle(bundles_dir, "attention")["attn_mha_attention_0"]
    q = torch.randn(1, 4, 7, 128, device="cuda", dtype=torch.bfloat16)
    k = torch.randn(1, 4, 9, 128, device="cuda", dtype=torch.bfloat16)
    with pytest.raises(Exception, match="seq|sequence"):
        kernel(q, k, k)


def test_attention_kernel_zero_tokens(bundles_dir):
    kernel = kernels.load_bundle(bundles_dir, "attention")["attn_gqa_causal_attention_0"]
    q = torch.empty(2, 32, 0, 128, device="cuda", dtype=torch.bfloat16)
    k = torch.empty(2, 8, 0, 128, device="cuda", dtype=torch.bfloat16)
    o = kernel(q, k, k)
    torch.cuda.synchronize()
    assert o.shape == (2, 32, 0, 128)
