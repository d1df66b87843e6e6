"""torch.library.opcheck over every liger operator on CUDA tensors, with
the kernels precompiled on the build machine (LIGER_OPS_BUNDLES): the
schema and what it says about mutation, the fake kernels exact about the
real kernels' shapes, dtypes and strides, the registered autograd, and AOT
dispatch with dynamic shapes. The configurations are those of
test_ops_autograd.py (kernels.py), so their bundles exist. Skips cleanly
without torch, a GPU, the runtime or the bundles."""

import pytest

import kernels

torch = pytest.importorskip("torch", reason="needs PyTorch")
if not torch.cuda.is_available():
    pytest.skip("no CUDA GPU on this machine", allow_module_level=True)
from liger import operators  # noqa: E402
from torch._subclasses.fake_tensor import FakeTensorMode  # noqa: E402

pytestmark = pytest.mark.usefixtures("ops_bundles")

DTYPES = {"bf16": torch.bfloat16, "f16": torch.float16, "f32": torch.float32}
TARGET_DTYPES = {"i32": torch.int32, "i64": torch.int64}


def _randn(shape, dtype, grad=False):
    return torch.randn(shape, device="cuda").to(dtype).requires_grad_(grad)


def _row_cases(L):
    out = {}
    for name, (spec, op, shapes, dt, kw) in kernels.ops_cases().items():
        dtype = DTYPES[dt]
        if op == "rms_norm":
            x, w = _randn(shapes[0], dtype, True), _randn(shapes[1], dtype, True)
            attrs = (spec.eps, spec.offset, spec.casting)
            rstd = torch.rand(shapes[0][:-1], device="cuda") + 0.5
            out[name] = (L.rms_norm, (x, w) + attrs)
            out[name + "_backward"] = (L.rms_norm_backward, (
                _randn(shapes[0], dtype), x.detach(), w.detach(), rstd) + attrs)
            # The norm with the projections that read it (fuse_norm_linear):
            # two of them, biased and not.
            h = shapes[0][-1]
            projections = [_randn((n, h), dtype, True) for n in (24, 8)]
            out[name + "_linear"] = (L.rms_norm_linear, (x, w) + attrs + (projections, []))
            out[name + "_linear_biased"] = (L.rms_norm_linear, (x, w) + attrs + (
                projections, [_randn(24, dtype, True), _randn(8, dtype, True)]))
        elif op in ("swiglu", "geglu"):
            g, u = _randn(shapes[0], dtype, True), _randn(shapes[1], dtype, True)
            attrs = (spec.approximate,) if op == "geglu" else ()
            out[name] = (getattr(L, op), (g, u) + attrs)
            out[name + "_backward"] = (getattr(L, op + "_backward"), (
                _randn(shapes[0], dtype), g.detach(), u.detach()) + attrs)
            # In place: dgate over gate, dup over up (the schema says so).
            out[name + "_backward_"] = (getattr(L, op + "_backward_"), (
                _randn(shapes[0], dtype), g.detach().clone(), u.detach().clone()) + attrs)
        elif op == "softmax":
            x = _randn(shapes[0], dtype, True)
            out[name] = (L.softmax, (x,))
            out[name + "_backward"] = (L.softmax_backward, (
                _randn(shapes[0], dtype), torch.softmax(x.detach().float(), -1).to(dtype)))
        elif op == "rope":
            q, k = _randn(shapes[0], dtype, True), _randn(shapes[1], dtype, True)
            angle = torch.rand(shapes[2], device="cuda") * 6.3
            cos, sin = angle.cos().to(dtype), angle.sin().to(dtype)
            out[name] = (L.rope, (q, k, cos, sin))
            out[name + "_backward"] = (L.rope_backward, (
                _randn(shapes[0], dtype), _randn(shapes[1], dtype), cos, sin))
        else:
            raise AssertionError("no opcheck case for %s" % op)
    return out


def _norm_cases(L):
    out = {}
    gen = torch.Generator(device="cuda")
    gen.manual_seed(torch.seed())
    for name, (spec, shape) in kernels.ops_norm_cases().items():
        args = [t.requires_grad_(True) for t in kernels.norm_inputs(spec, shape, gen)]
        dy = _randn(shape, args[0].dtype)
        if spec.op == "layer_norm":
            bias = args[2] if spec.bias else None
            out[name] = (L.layer_norm, (args[0], args[1], bias, spec.eps))
            x = args[0].detach()
            mean = x.float().mean(-1)
            rstd = torch.rsqrt((x.float() - mean[..., None]).pow(2).mean(-1) + spec.eps)
            out[name + "_backward"] = (L.layer_norm_backward, (
                dy, x, args[1].detach(), mean, rstd, spec.eps, spec.bias))
            continue
        attrs = (spec.eps, spec.offset, spec.casting)
        out[name] = (L.add_rms_norm, tuple(args) + attrs)
        total = (args[0] + args[1]).detach()
        rstd = torch.rsqrt(total.float().pow(2).mean(-1) + spec.eps)
        out[name + "_backward"] = (L.add_rms_norm_backward, (
            dy, _randn(shape, args[0].dtype), total, args[2].detach(), rstd) + attrs)
    return out


def _ce_cases(L):
    out = {}
    for name, (spec, vocab, dt, tokens, kw) in kernels.ops_ce_cases().items():
        dtype = DTYPES[dt]
        target = torch.randint(0, vocab, (tokens,), device="cuda",
                               dtype=TARGET_DTYPES[spec.target_dtype])
        target[::3] = spec.ignore_index
        weight = torch.rand(vocab, device="cuda") + 0.5 if spec.weighted else None
        attrs = (spec.ignore_index, spec.label_smoothing, spec.reduction, spec.softcap,
                 spec.lse_square_scale, spec.return_z_loss)
        logits = _randn((tokens, vocab), dtype, True)
        out[name] = (L.cross_entropy, (logits, target, weight) + attrs)
        out[name + "_inplace"] = (L.cross_entropy_, (
            logits.detach().clone(), target, weight) + attrs)
        if spec.reduction == "none" and tokens % 3 == 0:
            # Logits [B, T, V] against targets [B, T] and [B * T].
            rank3 = _randn((3, tokens // 3, vocab), dtype, True)
            out[name + "_rank3"] = (L.cross_entropy, (
                rank3, target.view(3, -1), weight) + attrs)
            out[name + "_rank3_flat"] = (L.cross_entropy, (rank3, target, weight) + attrs)
    return out


def _flce_cases(L):
    out = {}
    for name, (spec, (n, h, v), budget, kw) in kernels.ops_flce_cases().items():
        dtype = DTYPES[spec.dtype]
        target = torch.randint(0, v, (n,), device="cuda",
                               dtype=TARGET_DTYPES[spec.target_dtype])
        target[1::5] = spec.ignore_index  # (the first token counts: one token's case)
        cw = torch.rand(v, device="cuda") + 0.5 if spec.weighted else None
        hidden = _randn((n, h), dtype, True)
        weight = (torch.randn((v, h), device="cuda") * 3 / h ** 0.5).to(dtype).requires_grad_()
        want_db = spec.bias and not kw.get("frozen_bias")
        bias = _randn((v,), dtype, want_db) if spec.bias else None
        out[name] = (L.fused_linear_cross_entropy, (
            hidden, weight, target, bias, cw, spec.ignore_index, spec.label_smoothing,
            spec.reduction, spec.softcap, spec.lse_square_scale, spec.return_z_loss, budget,
            spec.dw_f32, True, True, want_db))
        if spec.reduction == "none":  # (its backward: the chunks again, per token)
            out[name + "_backward"] = (L.fused_linear_cross_entropy_backward, (
                hidden.detach(), weight.detach(), target,
                None if bias is None else bias.detach(), cw,
                torch.rand(n, device="cuda") - 0.5, spec.ignore_index, spec.label_smoothing,
                spec.softcap, spec.lse_square_scale, spec.return_z_loss, budget, spec.dw_f32,
                True, True, want_db))
    return out


def _fljsd_cases(L):
    out = {}
    for name, (n, hs, ht, v, dt, budget, kw) in kernels.fused_linear_jsd_cases().items():
        dtype = DTYPES[dt]
        labels = None
        if kw.get("labels"):
            labels = torch.randint(0, v, (n,), device="cuda", dtype=TARGET_DTYPES[kw["labels"]])
            labels[::4] = -100
        out[name] = (L.fused_linear_jsd, (
            _randn((n, hs), dtype, True),
            (torch.randn((v, hs), device="cuda") / hs ** 0.5).to(dtype).requires_grad_(),
            _randn((n, ht), dtype, False), (torch.randn((v, ht), device="cuda") /
                                            ht ** 0.5).to(dtype),
            labels, kw.get("jsd_beta", 0.5), -100, kw.get("temperature", 1.0), budget,
            kw.get("dw_f32", False), True, True))
    return out


def _divergence_cases(L):
    out = {}
    for name, (spec, op, (tokens, vocab), kw) in kernels.ops_divergence_cases().items():
        dtype = DTYPES[spec.dtype]
        x = torch.randn((tokens, vocab), device="cuda").log_softmax(-1).to(dtype) \
            .requires_grad_()
        t = torch.randn((tokens, vocab), device="cuda").log_softmax(-1).to(dtype)
        if op == "kl_div":
            attrs = (kw["reduction"], spec.log_target, spec.eps)
            dloss = torch.rand(x.shape if spec.pointwise else (), device="cuda")
            target = t if spec.log_target else t.exp()
            out[name] = (L.kl_div, (x, target) + attrs + (True,))
            out[name + "_loss_only"] = (L.kl_div, (x.detach(), target) + attrs + (False,))
            out[name + "_backward"] = (L.kl_div_backward, (t, dloss) + attrs)
        else:
            labels = None
            if spec.labels != "none":
                labels = torch.randint(0, vocab, (tokens,), device="cuda",
                                       dtype=TARGET_DTYPES[spec.labels])
                labels[::3] = spec.ignore_index
            attrs = (spec.beta, spec.ignore_index)
            out[name] = (L.jsd, (x, t, labels) + attrs + (True,))
            out[name + "_loss_only"] = (L.jsd, (x.detach(), t, labels) + attrs + (False,))
    return out


def _lora_cases(L):
    """liger::lora_linear at the first LoRA configuration of
    test_ops_lora_gpu.py (kernels.lora_cases()), 7 rows, every operand
    trainable; liger::lora_linear_backward (its dx kernel) of the same."""
    out = {}
    name, spec = sorted(kernels.lora_cases().items())[0]
    dtype = DTYPES[spec.dtype]
    k, n, r = spec.in_features, spec.out_features, spec.rank
    out[name] = (L.lora_linear, (
        _randn((7, k), dtype, True), _randn((n, k), dtype, True),
        _randn((n,), dtype, True) if spec.bias else None,
        _randn((r, k), dtype, True), _randn((n, r), dtype, True), spec.scale))
    # x·Aᵀ kept for the backward (the products workspace, rounded).
    out[name + "_keep_mid"] = (L.lora_linear, out[name][1] + (True,))
    out[name + "_backward"] = (L.lora_linear_backward, (
        _randn((7, n), dtype, False), _randn((n, k), dtype, False),
        _randn((r, k), dtype, False), _randn((n, r), dtype, False), spec.scale, spec.bias))
    return out


def _gated_mlp_cases(L):
    """liger::gated_mlp and liger::gated_mlp_backward at the odd
    configuration of test_ops_gated_mlp_gpu.py (520 -> 1000, GeGLU), 7
    rows, every weight trainable."""
    spec = kernels.gated_mlp_cases()["geglu_none_bf16_520x1000"]
    dtype = DTYPES[spec.dtype]
    h, i, attrs = spec.hidden, spec.intermediate, (spec.activation, spec.approximate)
    return {
        "gated_mlp": (L.gated_mlp, (
            _randn((7, h), dtype, True), _randn((i, h), dtype, True), _randn((i, h), dtype, True),
            _randn((h, i), dtype, True)) + attrs),
        "gated_mlp_backward": (L.gated_mlp_backward, (
            _randn((7, h), dtype), _randn((h, i), dtype), _randn((7, i), dtype),
            _randn((7, i), dtype)) + attrs),
    }


def _linear_rope_cases(L):
    """liger::linear_rope at the odd configuration of
    test_ops_linear_rope_gpu.py (520 -> 5 and 1 heads of 64, f16, per-batch
    tables), 2 x 7 tokens, with and without biases' gradients (x and the
    weights trainable)."""
    spec = kernels.linear_rope_cases()["odd_f16_520_q5_k1_d64_batched"]
    dtype = DTYPES[spec.dtype]
    h, d = spec.hidden, spec.head_dim
    return {"linear_rope": (L.linear_rope, (
        _randn((2, 7, h), dtype, True), _randn((spec.q_heads * d, h), dtype, True),
        _randn((spec.k_heads * d, h), dtype, True), _randn((2, 7, d), dtype),
        _randn((2, 7, d), dtype), None, None))}


def _attention_cases(L):
    """liger::attention and its backward at test_ops_attention_gpu.py's GQA 4,
    D 64, f16 configuration (ops_attention_cases), 2 x 77 tokens; the
    backward from a random output and lse (nothing launches while the
    cases are collected)."""
    import ops_attention_cases
    name = "gqa4_d64_f16"
    hq, hkv, d, _, _, dt, *_ = ops_attention_cases.CASES[name]
    spec = ops_attention_cases.spec(name)
    dtype = DTYPES[dt]
    q = _randn((2, hq, 77, d), dtype, True)
    k, v = _randn((2, hkv, 77, d), dtype, True), _randn((2, hkv, 77, d), dtype, True)
    out = _randn(q.shape, dtype)
    lse = torch.rand(q.shape[:3], device="cuda") + 1.0
    return {"attention": (L.attention, (q, k, v, spec.causal, spec.scale)),
            "attention_backward": (L.attention_backward, (
                _randn(q.shape, dtype), q.detach(), k.detach(), v.detach(), out, lse,
                spec.causal, spec.scale))}


def _names(cases):
    """The names of a family's cases, from the family built on fake tensors:
    nothing is allocated on the GPU while the tests are collected. (Every
    pytest worker collects every module; with real tensors each one held
    the families' 6.7 GiB, and twelve workers on an 80 GB GPU ran out of
    memory before any test ran.)"""
    with FakeTensorMode():
        return sorted(cases(torch.ops.liger))


@pytest.mark.parametrize("name", _names(_row_cases) + _names(_norm_cases) + _names(_ce_cases))
def test_opcheck_on_cuda(name):
    L = torch.ops.liger
    cases = dict(_row_cases(L), **_norm_cases(L), **_ce_cases(L))
    op, args = cases[name]
    torch.library.opcheck(op, args)


@pytest.mark.parametrize("name", _names(_divergence_cases))
def test_opcheck_of_the_divergences_on_cuda(name):
    op, args = _divergence_cases(torch.ops.liger)[name]
    torch.library.opcheck(op, args)


@pytest.mark.parametrize("name", _names(_lora_cases))
def test_opcheck_of_lora_linear_on_cuda(name):
    op, args = _lora_cases(torch.ops.liger)[name]
    torch.library.opcheck(op, args)


@pytest.mark.parametrize("name", _names(_gated_mlp_cases))
def test_opcheck_of_gated_mlp_on_cuda(name):
    op, args = _gated_mlp_cases(torch.ops.liger)[name]
    torch.library.opcheck(op, args)


@pytest.mark.parametrize("name", _names(_linear_rope_cases))
def test_opcheck_of_linear_rope_on_cuda(name):
    op, args = _linear_rope_cases(torch.ops.liger)[name]
    torch.library.opcheck(op, args)


@pytest.mark.parametrize("name", _names(_flce_cases))
def test_opcheck_of_the_fused_loss_on_cuda(name):
    op, args = _flce_cases(torch.ops.liger)[name]
    torch.library.opcheck(op, args)


@pytest.mark.parametrize("name", _names(_fljsd_cases))
def test_opcheck_of_the_fused_linear_jsd_on_cuda(name):
    op, args = _fljsd_cases(torch.ops.liger)[name]
    torch.library.opcheck(op, args)


def test_every_operator_has_a_case():
    defined = {name for name, value in vars(operators).items()
               if isinstance(value, torch._library.custom_ops.CustomOpDef)}
    L = torch.ops.liger
    checked = {op._qualified_op_name.split("::")[1] for op, _ in list(_row_cases(L).values()) +
               list(_norm_cases(L).values()) + list(_ce_cases(L).values()) +
               list(_flce_cases(L).values()) + list(_divergence_cases(L).values()) +
               list(_fljsd_cases(L).values()) + list(_lora_cases(L).values()) +
               list(_gated_mlp_cases(L).values()) + list(_linear_rope_cases(L).values()) +
               list(_attention_cases(L).values())}
    assert checked == defined


@pytest.mark.parametrize("name", _names(_attention_cases))
def test_opcheck_of_attention_on_cuda(name):
    op, args = _attention_cases(torch.ops.liger)[name]
    torch.library.opcheck(op, args)
