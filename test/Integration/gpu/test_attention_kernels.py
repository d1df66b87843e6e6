"""The attention template's kernel (liger-compile of liger.attention) on the
GPU against a float64 reference (float32 past 2048 tokens): GQA, multi-head,
multi-query, head dimensions 64, 128 and 256, causal and not, sliding
windows and softcaps (against PyTorch's softcapped math in f32), a scale of
its own, bf16 and f16, batch 1 and 3, sequences 1 to 8192 (every block
size's tail), the output poisoned with NaN. The kernel's error is held to
at most twice that of PyTorch's own scaled_dot_product_attention in the
same dtype (and at most 4e-3 where that is smaller), both measured
against the reference on the same inputs. The same for the forward's
log-sum-exp (return_lse) and for the backward kernel (liger.attention_grad
from the forward's saved output and lse: dq, dk, dv against the float64
gradients, beside PyTorch's own backward in the same dtype)."""

import zlib

import pytest

import kernels

torch = pytest.importorskip("torch", reason="the GPU suite needs PyTorch")
if not torch.cuda.is_available():
    pytest.skip("no CUDA GPU on this machine", allow_module_level=True)
import torch.nn.functional as F  # noqa: E402

from liger import operators  # noqa: E402

CASES = [(name, b, t) for name in kernels.ATTENTION for b, t in kernels.ATTENTION_SHAPES]
GRAD_CASES = [(name, b, t) for name in kernels.ATTENTION_GRAD
              for b, t in kernels.ATTENTION_SHAPES]


def _seed(*case):
    """A seed of its own for each case, the same in every run (Python's
    hash of a string is not)."""
    return zlib.crc32(repr(case).encode())


def _inputs(hq, hkv, d, dt, b, t, seed):
    gen = torch.Generator(device="cuda").manual_seed(seed)
    dtype = kernels.torch_dtype(dt)

    def randn(h):
        return torch.randn(b, h, t, d, device="cuda", generator=gen).to(dtype)
    return randn(hq), randn(hkv), randn(hkv)


def _sdpa(q, k, v, causal, scale, window=None, softcap=None):
    """PyTorch's attention in the operands' dtype: SDPA, or with a softcap
    (which SDPA has none of) its math with the scores and the softmax in
    f32, the output rounded once."""
    g = q.shape[1] // k.shape[1]
    k, v = k.repeat_interleave(g, dim=1), v.repeat_interleave(g, dim=1)
    if softcap:  # (liger's softcapped math, in f32)
        masked = kernels.attention_masked(q.shape[2], k.shape[2], causal, window, q.device)
        return operators.softcapped_attention(
            q.float(), k.float(), v.float(), None if masked is None else ~masked, scale,
            softcap).to(q.dtype)
    if window:  # (an explicit mask: SDPA has no window of its own)
        keep = ~kernels.attention_masked(q.shape[2], k.shape[2], True, window, q.device)
        return F.scaled_dot_product_attention(q, k, v, attn_mask=keep, scale=scale)
    return F.scaled_dot_product_attention(q, k, v, is_causal=causal, scale=scale)


@pytest.mark.parametrize("name,b,t", CASES, ids=["%s-b%d-t%d" % c for c in CASES])
def test_attention_kernel(bundles_dir, name, b, t):
    hq, hkv, d, causal, scale, dt, window, softcap = kernels.ATTENTION[name]
    kernel = kernels.load_bundle(bundles_dir, "attention")[name + "_attention_0"]
    q, k, v = _inputs(hq, hkv, d, dt, b, t, seed=_seed(name, b, t))
    out = torch.full_like(q, float("nan"))
    o = kernel(q, k, v, out=[out])
    torch.cuda.synchronize()
    assert o.data_ptr() == out.data_ptr()
    assert not torch.isnan(o).any(), "an output element was not written"
    ref_dtype = torch.float64 if t <= 2048 else torch.float32
    ref = kernels.attention_reference(q, k, v, causal, scale, ref_dtype, window, softcap)
    err = (o.to(ref_dtype) - ref).abs().max().item()
    torch_err = (_sdpa(q, k, v, causal, scale, window, softcap).to(ref_dtype) - ref) \
        .abs().max().item()
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


def _max_err(x, ref):
    return (x.to(ref.dtype) - ref).abs().max().item() if ref.numel() else 0.0


@pytest.mark.parametrize("name,b,t", GRAD_CASES, ids=["%s-b%d-t%d" % c for c in GRAD_CASES])
def test_attention_grad_kernel(bundles_dir, name, b, t):
    hq, hkv, d, causal, scale, dt, window, softcap = kernels.ATTENTION[name]
    bundle = kernels.load_bundle(bundles_dir, "attention")
    forward = bundle[name + "_lse_attention_0"]
    backward = bundle[name + "_grad_attention_0"]
    q, k, v = _inputs(hq, hkv, d, dt, b, t, seed=_seed(name, b, t, "grad"))
    grad = torch.randn_like(q)
    o = torch.full_like(q, float("nan"))
    lse = torch.full((b, hq, t), float("nan"), device="cuda")
    forward(q, k, v, out=[o, lse])
    outs = [torch.full_like(q, float("nan")), torch.full_like(k, float("nan")),
            torch.full_like(v, float("nan"))]
    dq, dk, dv = backward(grad, q, k, v, o, lse, out=outs)
    torch.cuda.synchronize()
    for x, what in ((lse, "lse"), (dq, "dq"), (dk, "dk"), (dv, "dv")):
        assert not torch.isnan(x).any(), "an element of %s was not written" % what
    ref_dtype = torch.float64 if t <= 2048 else torch.float32
    refs = kernels.attention_grad_reference(q, k, v, grad, causal, scale, ref_dtype, window,
                                            softcap)
    # The forward's lse: f32 arithmetic on the rounded inputs.
    assert _max_err(lse, refs[3]) <= 2e-3 * max(1.0, refs[3].abs().max().item())
    # PyTorch's own backward in the operands' dtype, against the same
    # reference.
    leaves = [x.clone().requires_grad_() for x in (q, k, v)]
    _sdpa(*leaves, causal, scale, window, softcap).backward(grad)
    # Both round to the dtype where the largest gradients are, so the
    # largest error may be a whole unit in the last place there for one and
    # half of one for the other: the bound adds that unit, and f32 rounding
    # where the exact gradient is 0 (dq and dk of a single key: the
    # kernel's dP - D is a difference of two f32 sums, about 2e-6; SDPA's
    # own is of that size, PyTorch's softcapped math gets 0 exactly: 1e-5
    # with a softcap, else 1e-6). The error's norm (relative to the
    # gradient's) is held to twice PyTorch's. A softcap adds twice
    # tanh.approx.f32's relative error (2^-11) to both: the kernels'
    # capped scores carry it, PyTorch's f32 math does not (measured: up to
    # about 3 times f16's rounding of dq at 7 tokens).
    eps = torch.finfo(q.dtype).eps
    cap = 2.0 ** -10 if softcap else 0.0
    for x, leaf, ref, what in zip((dq, dk, dv), leaves, refs, ("dq", "dk", "dv")):
        scale_of = ref.abs().max().item() if ref.numel() else 0.0
        err, torch_err = _max_err(x, ref), _max_err(leaf.grad, ref)
        assert err <= 2 * torch_err + (eps + cap) * scale_of + (1e-5 if softcap else 1e-6), \
            "%s: max error %.3g; PyTorch's backward in %s: %.3g (largest |gradient| %.3g)" % (
                what, err, dt, torch_err, scale_of)
        norm = ref.norm().item()
        if norm:
            rel = (x.to(ref.dtype) - ref).norm().item() / norm
            torch_rel = (leaf.grad.to(ref.dtype) - ref).norm().item() / norm
            assert rel <= 2 * torch_rel + 1e-4 + cap, \
                "%s: relative error %.3g; PyTorch's backward in %s: %.3g" % (
                    what, rel, dt, torch_rel)


def test_attention_grad_kernel_one_token(bundles_dir):
    # T = 1: 127 rows of the only key tile and 63 of the only query block
    # are past the sequence.
    name = "attn_d64_scale"
    hq, hkv, d, causal, scale, dt, *_ = kernels.ATTENTION[name]
    bundle = kernels.load_bundle(bundles_dir, "attention")
    q, k, v = _inputs(hq, hkv, d, dt, 2, 1, seed=7)
    o, lse = bundle[name + "_lse_attention_0"](q, k, v)
    dq, dk, dv = bundle[name + "_grad_attention_0"](torch.ones_like(q), q, k, v, o, lse)
    torch.cuda.synchronize()
    # One key: p = 1, so dv sums the gradient over the group's query heads
    # and dq, dk vanish up to f32 rounding (ds = p (dp - rowsum(dO o)), o
    # = v).
    g = hq // hkv
    assert torch.equal(dv.float(), torch.full_like(dv, float(g)).float())
    assert dq.abs().max().item() < 1e-3 and dk.abs().max().item() < 1e-3
