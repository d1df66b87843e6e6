"""liger.ops as PyTorch operators, on the CPU through the reference
lowering: torch.library.opcheck over every operator (schema and mutation,
fake kernels exact about shapes, dtypes and strides, registered autograd,
AOT dispatch with dynamic shapes), and a patched tiny Llama under
torch.compile(fullgraph=True) with no graph break, training as it does
eagerly."""

import os
import sys
import warnings

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

from liger import ops  # noqa: E402
from liger import transformers as lt  # noqa: E402

sys.path.insert(0, os.path.dirname(__file__))
from test_transformers import tiny_model, tokens  # noqa: E402


@pytest.fixture(autouse=True)
def reference(cpu_reference):
    lt.revert()
    lt._DECIDED.clear()
    yield
    lt.revert()
    lt._DECIDED.clear()


def _randn(*shape, dtype=torch.float32, grad=False):
    g = torch.Generator().manual_seed(sum(shape))
    return torch.randn(*shape, generator=g).to(dtype).requires_grad_(grad)


def _stats(x, eps=1e-5):
    """LayerNorm's saved statistics of x: the mean and rstd of each row, f32."""
    x = x.detach().double()
    mean = x.mean(-1)
    rstd = (((x - mean[..., None]) ** 2).mean(-1) + eps).rsqrt()
    return mean.float(), rstd.float()


def _cases():
    x, w = _randn(2, 3, 16, grad=True), (torch.rand(16) + 0.5).requires_grad_(True)
    g, u = _randn(5, 8, grad=True), _randn(5, 8, grad=True)
    q, k = _randn(2, 4, 3, 8, grad=True), _randn(2, 2, 3, 8, grad=True)
    angle = torch.rand(1, 3, 8) * 6.3
    logits, t = _randn(6, 16, grad=True), torch.tensor([1, 0, -100, 15, 3, 7])
    logits3 = _randn(2, 3, 16, grad=True)
    cw = torch.rand(16) + 0.5
    h, lw = _randn(6, 16, dtype=torch.bfloat16, grad=True), \
        _randn(24, 16, dtype=torch.bfloat16, grad=True)
    lb = _randn(24, dtype=torch.bfloat16, grad=True)
    rstd = torch.rand(2, 3) + 0.5
    res, b = _randn(2, 3, 16, grad=True), _randn(16, grad=True)
    total = (x + res).detach()
    L = torch.ops.liger
    return {
        "rms_norm": (L.rms_norm, (x, w, 1e-6, 0.0, "llama")),
        "rms_norm_backward": (L.rms_norm_backward,
                              (_randn(2, 3, 16), x.detach(), w.detach(), rstd, 1e-6, 1.0,
                               "gemma")),
        # The norm with two projections, biased and not.
        "rms_norm_linear": (L.rms_norm_linear, (x, w, 1e-6, 0.0, "llama",
                                                [_randn(8, 16, grad=True),
                                                 _randn(4, 16, grad=True)], [])),
        "rms_norm_linear_biased": (L.rms_norm_linear, (
            x, w, 1e-6, 1.0, "gemma", [_randn(8, 16, grad=True), _randn(4, 16, grad=True)],
            [_randn(8, grad=True), _randn(4, grad=True)])),
        "add_rms_norm": (L.add_rms_norm, (x, res, w, 1e-6, 1.0, "gemma")),
        "add_rms_norm_backward": (L.add_rms_norm_backward, (
            _randn(2, 3, 16), _randn(3, 2, 16).transpose(0, 1), total, w.detach(),
            total.pow(2).mean(-1).add(1e-6).rsqrt(), 1e-6, 0.0, "llama")),
        "layer_norm": (L.layer_norm, (x, w, b, 1e-5)),
        # (bias None: no dbias)
        "layer_norm_none": (L.layer_norm, (g, _randn(8, grad=True), None, 1e-6)),
        "layer_norm_backward": (L.layer_norm_backward, (_randn(2, 3, 16), x.detach(),
                                                        w.detach(), *_stats(x), 1e-5, True)),
        "layer_norm_backward_none": (L.layer_norm_backward, (_randn(5, 8), g.detach(),
                                                             w.detach()[:8], *_stats(g), 1e-5,
                                                             False)),
        "swiglu": (L.swiglu, (g, u)),
        "swiglu_backward": (L.swiglu_backward, (_randn(5, 8), g.detach(), u.detach())),
        "geglu": (L.geglu, (g, u, "tanh")),
        "geglu_backward": (L.geglu_backward, (_randn(5, 8), g.detach(), u.detach(), "none")),
        # In place (the backend's form where gate and up die at it).
        "swiglu_backward_": (L.swiglu_backward_, (_randn(5, 8), _randn(5, 8), _randn(5, 8))),
        "geglu_backward_": (L.geglu_backward_, (_randn(5, 8), _randn(5, 8), _randn(5, 8),
                                                "tanh")),
        "softmax": (L.softmax, (g,)),
        "softmax_backward": (L.softmax_backward, (_randn(5, 8), torch.softmax(u.detach(), -1))),
        "rope": (L.rope, (q, k, angle.cos(), angle.sin())),
        "rope_backward": (L.rope_backward, (_randn(2, 4, 3, 8), _randn(2, 2, 3, 8),
                                            angle.cos(), angle.sin())),
        # (logits, target, weight, ignore_index, label_smoothing, reduction,
        # softcap, lse_square_scale, return_z_loss)
        "cross_entropy": (L.cross_entropy, (logits, t, cw, -100, 0.1, "mean", 30.0, 1e-4,
                                            False)),
        "cross_entropy_none": (L.cross_entropy, (logits, t, None, -100, 0.0, "none", 0.0, 0.0,
                                                 False)),
        # Logits [B, T, V] against targets [B, T] or [B * T]: the loss takes
        # the target's shape, and so does its incoming gradient.
        "cross_entropy_none_rank3": (L.cross_entropy, (logits3, t.view(2, 3), None, -100, 0.0,
                                                       "none", 0.0, 0.0, False)),
        "cross_entropy_none_rank3_flat": (L.cross_entropy, (logits3, t, None, -100, 0.0, "none",
                                                            0.0, 0.0, False)),
        "cross_entropy_": (L.cross_entropy_, (logits.detach().clone(), t, None, -100, 0.0,
                                              "sum", 0.0, 0.0, False)),
        # The z-loss apart (no gradient of its own): reduced, per token in
        # the target's shape, and in place.
        "cross_entropy_zloss": (L.cross_entropy, (logits, t, cw, -100, 0.1, "mean", 30.0, 1e-3,
                                                  True)),
        "cross_entropy_none_rank3_zloss": (L.cross_entropy, (logits3, t.view(2, 3), None, -100,
                                                             0.0, "none", 0.0, 1e-3, True)),
        "cross_entropy__zloss": (L.cross_entropy_, (logits.detach().clone(), t, cw, -100, 0.0,
                                                    "none", 0.0, 1e-3, True)),
        # (hidden, weight, target, bias, class_weight, ignore_index,
        # label_smoothing, reduction, softcap, lse_square_scale,
        # return_z_loss, memory_budget, dw_f32, want_dx, want_dw, want_db)
        "fused_linear_cross_entropy": (L.fused_linear_cross_entropy, (
            h, lw, t, None, None, -100, 0.0, "mean", 0.0, 0.0, False, 2 * 24 * 2, False, True,
            True, False)),
        "fused_linear_cross_entropy_frozen": (L.fused_linear_cross_entropy, (
            h, lw.detach(), t, None, torch.rand(24) + 0.5, -100, 0.0, "sum", 0.0, 0.0, False,
            2 ** 20, True, True, False, False)),
        # A bias (its gradient the column sums of G) and the z-loss apart
        # (no gradient of its own); a frozen bias gets none.
        "fused_linear_cross_entropy_bias_zloss": (L.fused_linear_cross_entropy, (
            h, lw, t, lb, None, -100, 0.1, "mean", 0.0, 1e-3, True, 2 * 24 * 2, False, True,
            True, True)),
        "fused_linear_cross_entropy_frozen_bias": (L.fused_linear_cross_entropy, (
            h, lw, t, lb.detach(), None, -100, 0.0, "sum", 5.0, 0.0, False, 3 * 24 * 2, True,
            True, True, False)),
        # Per token: the forward gives the losses alone, the backward runs
        # the chunks again with the incoming gradient of each token.
        "fused_linear_cross_entropy_none": (L.fused_linear_cross_entropy, (
            h, lw, t, None, torch.rand(24) + 0.5, -100, 0.1, "none", 5.0, 1e-3, False,
            2 * 24 * 2, False, True, True, False)),
        "fused_linear_cross_entropy_none_bias_zloss": (L.fused_linear_cross_entropy, (
            h, lw, t, lb, None, -100, 0.0, "none", 0.0, 1e-3, True, 2 * 24 * 2, False, True,
            True, True)),
        "fused_linear_cross_entropy_backward": (L.fused_linear_cross_entropy_backward, (
            h.detach(), lw.detach(), t, None, None, torch.rand(6) - 0.5, -100, 0.0, 0.0, 0.0,
            False, 3 * 24 * 2, True, True, True, False)),
        "fused_linear_cross_entropy_backward_none_bias": (
            L.fused_linear_cross_entropy_backward, (
                h.detach(), lw.detach(), t, lb.detach(), None, torch.rand(6) - 0.5, -100, 0.0,
                0.0, 1e-3, True, 3 * 24 * 2, False, True, False, True)),
        **_divergence_cases(),
        **_lora_cases(),
        **_gated_mlp_cases(),
        **_linear_rope_cases(),
        **_attention_cases(),
    }


def _attention_cases():
    """liger::attention: bf16, causal, 4 query heads over 2 key/value heads
    of 16, keys longer than the queries, the default scale; and f32 without
    the mask, keys shorter than the queries, a scale of its own ("_none");
    liger::attention_backward: bf16, from the forward's output and lse."""
    bf = dict(dtype=torch.bfloat16, grad=True)

    def other(t):  # (_randn repeats its values for a repeated shape)
        return t.detach().flip(-1).requires_grad_(t.requires_grad)
    L = torch.ops.liger
    q, k = _randn(2, 4, 3, 16, **bf), _randn(2, 2, 5, 16, **bf)
    k32 = _randn(1, 1, 3, 8, grad=True)
    # The forward's output and lse (scale 1/sqrt(16); query i sees keys j <= i + 2).
    scores = q.detach().float().matmul(k.detach().float().repeat_interleave(2, 1).mT) / 4
    scores = scores.masked_fill(~torch.ones(3, 5, dtype=torch.bool).tril(2), float("-inf"))
    lse = scores.logsumexp(-1)
    out = scores.softmax(-1).matmul(other(k).detach().float().repeat_interleave(2, 1))
    return {
        "attention": (L.attention, (q, k, other(k), True, 0.0)),
        "attention_none": (L.attention, (_randn(1, 2, 4, 8, grad=True), k32, other(k32), False,
                                         0.5)),
        "attention_backward": (L.attention_backward, (
            _randn(2, 4, 3, 16, dtype=torch.bfloat16), q.detach(), k.detach(),
            other(k).detach(), out.bfloat16(), lse, True, 0.0)),
    }


def _linear_rope_cases():
    """liger::linear_rope: bf16 with biases, x [2, 3, 64] through q/k
    projections of 2 and 1 heads of 16 with per-batch tables (the kernel's
    module), and f32 with frozen weights, no biases and broadcast tables (no
    kernel: PyTorch's ops, "_frozen")."""
    bf = dict(dtype=torch.bfloat16, grad=True)
    L = torch.ops.liger
    angle = torch.rand(2, 3, 16) * 6.3
    flat = torch.rand(1, 5, 8) * 6.3
    return {
        "linear_rope": (L.linear_rope, (
            _randn(2, 3, 64, **bf), _randn(32, 64, **bf), _randn(16, 64, **bf),
            angle.cos().bfloat16(), angle.sin().bfloat16(), _randn(32, **bf), _randn(16, **bf))),
        "linear_rope_frozen": (L.linear_rope, (
            _randn(1, 5, 24, grad=True), _randn(24, 24), _randn(8, 24), flat.cos(), flat.sin(),
            None, None)),
    }


def _gated_mlp_cases():
    """liger::gated_mlp: bf16 SwiGLU, x [2, 3, 64] through an MLP of 40
    gated features (the kernels' module), and f32 GeGLU with frozen gate
    and down weights (no kernel: PyTorch's ops, "_frozen");
    liger::gated_mlp_backward: f16 GeGLU (tanh), 5 rows."""
    bf, hf = dict(dtype=torch.bfloat16, grad=True), dict(dtype=torch.float16)

    def other(t):  # (_randn repeats its values for a repeated shape)
        return t.detach().flip(0).requires_grad_(t.requires_grad)
    L = torch.ops.liger
    wg, g16 = _randn(40, 64, **bf), _randn(5, 40, **hf)
    return {
        "gated_mlp": (L.gated_mlp, (
            _randn(2, 3, 64, **bf), wg, other(wg), _randn(64, 40, **bf), "swiglu", "tanh")),
        "gated_mlp_frozen": (L.gated_mlp, (
            _randn(7, 24, grad=True), _randn(16, 24), other(_randn(16, 24, grad=True)),
            _randn(24, 16), "geglu", "none")),
        "gated_mlp_backward": (L.gated_mlp_backward, (
            _randn(5, 64, **hf), _randn(64, 40, **hf), g16, other(g16), "geglu", "tanh")),
    }


def _lora_cases():
    """liger::lora_linear: bf16 with a bias, x [2, 3, 64] (the kernel of a
    rank-16 [48, 64] projection), the same keeping x·Aᵀ ("_keep_mid"), and f32 with a frozen weight and no bias
    (a configuration with no kernel: PyTorch's ops, "_frozen");
    liger::lora_linear_backward of the first's configuration."""
    bf = dict(dtype=torch.bfloat16, grad=True)
    L = torch.ops.liger
    return {
        "lora_linear": (L.lora_linear, (
            _randn(2, 3, 64, **bf), _randn(48, 64, **bf), _randn(48, **bf),
            _randn(16, 64, **bf), _randn(48, 16, **bf), 2.0)),
        "lora_linear_keep_mid": (L.lora_linear, (
            _randn(5, 64, **bf), _randn(48, 64, **bf), _randn(48, **bf), _randn(16, 64, **bf),
            _randn(48, 16, **bf), 2.0, True)),
        "lora_linear_frozen": (L.lora_linear, (
            _randn(5, 24, grad=True), _randn(40, 24), None, _randn(4, 24, grad=True),
            _randn(40, 4, grad=True), 0.5)),
        # (dx's kernel of the first one's spec: dy [2, 3, 48].)
        "lora_linear_backward": (L.lora_linear_backward, (
            _randn(2, 3, 48, dtype=torch.bfloat16), _randn(48, 64, dtype=torch.bfloat16),
            _randn(16, 64, dtype=torch.bfloat16), _randn(48, 16, dtype=torch.bfloat16), 2.0,
            True)),
    }


def _divergence_cases():
    """liger::kl_div (reduced, pointwise: "_none", and without a gradient:
    "_loss_only") with its backward,
    liger::jsd (with int32 shift labels, and without labels or gradient:
    "_none") and liger::fused_linear_jsd (and with a frozen student lm_head
    and no labels: "_frozen")."""
    x = _randn(4, 7, grad=True).log_softmax(-1).detach().requires_grad_(True)
    p = _randn(4, 7).softmax(-1)
    y = _randn(4, 7).log_softmax(-1)
    lab = torch.tensor([1, -100, 6, 0], dtype=torch.int32)
    L = torch.ops.liger
    return {
        # Student [4, 16] and teacher [4, 24] lm_heads of a vocabulary of 8.
        "fused_linear_jsd": (L.fused_linear_jsd, (
            _randn(4, 16, dtype=torch.bfloat16, grad=True),
            _randn(8, 16, dtype=torch.bfloat16, grad=True), _randn(4, 24, dtype=torch.bfloat16),
            _randn(8, 24, dtype=torch.bfloat16), lab, 0.3, -100, 2.0, 2 * 8 * 20, True, True,
            True)),
        "fused_linear_jsd_frozen": (L.fused_linear_jsd, (
            _randn(4, 16, dtype=torch.bfloat16, grad=True),
            _randn(8, 16, dtype=torch.bfloat16), _randn(4, 24, dtype=torch.bfloat16),
            _randn(8, 24, dtype=torch.bfloat16), None, 1.0, -100, 1.0, 2 ** 20, False, True,
            False)),
        # The gradient formed in the forward (reduced), or by the backward
        # (pointwise, or no gradient wanted: "_loss_only").
        "kl_div": (L.kl_div, (x, p, "batchmean", False, 1e-10, True)),
        "kl_div_none": (L.kl_div, (x, y, "none", True, 1e-10, True)),
        "kl_div_loss_only": (L.kl_div, (x.detach(), p, "sum", False, 1e-10, False)),
        "kl_div_backward": (L.kl_div_backward, (p, torch.tensor(0.7), "mean", False, 1e-10)),
        "jsd": (L.jsd, (x, y, lab, 0.3, -100, True)),
        # No gradient wanted (no_grad, or an input that needs none): the
        # loss-only kernel.
        "jsd_none": (L.jsd, (x.detach(), y, None, 1.0, -100, False)),
    }


OPS = sorted(_cases())
# The operators that write over an input (opcheck checks what they say).
MUTATING = ("cross_entropy_", "swiglu_backward_", "geglu_backward_")


def _operator(case):
    """The operator a case checks: its name before a variant's suffix."""
    for suffix in ("_none", "_frozen", "_bias", "_zloss", "_keep_mid", "_loss_only"):
        case = case.split(suffix)[0]
    return case


@pytest.mark.parametrize("name", OPS)
def test_opcheck(name):
    op, args = _cases()[name]
    torch.library.opcheck(op, args)


def test_every_operator_is_checked():
    """Every liger:: operator has an opcheck case (and registered autograd
    where it is functional)."""
    from liger import operators
    defined = {name for name, value in vars(operators).items()
               if isinstance(value, torch._library.custom_ops.CustomOpDef)}
    assert defined == {_operator(c) for c in OPS}
    assert "cross_entropy_none_rank3_flat" in OPS


def test_the_fake_kernels_are_exact():
    """Under FakeTensorMode each op gives the shapes, dtypes and strides
    it gives when it runs."""
    from torch._subclasses.fake_tensor import FakeTensorMode
    for name, (op, args) in _cases().items():
        if _operator(name) in MUTATING:
            continue  # (mutates its input: checked by opcheck)
        real = op(*[a.detach() if isinstance(a, torch.Tensor) else a for a in args])
        with FakeTensorMode(allow_non_fake_inputs=True) as mode:
            fake = op(*[mode.from_tensor(a.detach()) if isinstance(a, torch.Tensor) else a
                        for a in args])
        real, fake = (real, fake) if isinstance(real, tuple) else ((real,), (fake,))
        # (A list of results, rms_norm_linear's projections: each of them.)
        real, fake = ([t for r in out for t in (r if isinstance(r, list) else [r])]
                      for out in (real, fake))
        assert len(real) == len(fake), name
        for r, f in zip(real, fake):
            assert (f.shape, f.dtype, f.stride()) == (r.shape, r.dtype, r.stride()), name


def test_a_patched_llama_compiles_with_no_graph_break():
    model = tiny_model("llama", 0, torch.bfloat16)
    lt.apply_liger_kernel(model)
    model.train()
    ids = tokens(1)
    explained = torch._dynamo.explain(model)(input_ids=ids, labels=ids)
    assert explained.graph_break_count == 0, [r.reason for r in explained.break_reasons]
    assert explained.graph_count == 1


def test_a_patched_llama_trains_compiled_as_it_does_eagerly():
    """torch.compile(fullgraph=True) through AOTAutograd (the fake kernels
    and the registered backward): the same loss and gradients as the
    patched model run eagerly."""
    ids = tokens(2)
    eager, compiled = tiny_model("llama", 1, torch.bfloat16), tiny_model("llama", 1,
                                                                           torch.bfloat16)
    for m in (eager, compiled):
        lt.apply_liger_kernel(m)
        m.train()
    torch._dynamo.reset()
    out = torch.compile(compiled, fullgraph=True, backend="aot_eager")(input_ids=ids,
                                                                        labels=ids)
    out.loss.backward()
    ref = eager(input_ids=ids, labels=ids)
    ref.loss.backward()
    assert torch.equal(out.loss, ref.loss)
    grads = dict(compiled.named_parameters())
    for name, p in eager.named_parameters():
        assert torch.equal(grads[name].grad, p.grad), name


@pytest.mark.parametrize("sequences", [(6, 9, 4)])
def test_a_patched_llama_compiles_with_dynamic_shapes(sequences):
    """torch.compile(fullgraph=True, dynamic=True): the fallback decision
    takes static facts (a module's float attributes and activation sizes,
    symbols under dynamic shapes, are specialized), so the graph has no
    break and serves every sequence length; losses and gradients are the
    eager patched model's."""
    eager = tiny_model("llama", 1, torch.bfloat16)
    compiled = tiny_model("llama", 1, torch.bfloat16)
    for m in (eager, compiled):
        lt.apply_liger_kernel(m)
        m.train()
    torch._dynamo.reset()
    run = torch.compile(compiled, fullgraph=True, dynamic=True, backend="aot_eager")
    for seq in sequences:
        ids = tokens(seq, batch=2, seq=seq)
        for m in (eager, compiled):
            m.zero_grad(set_to_none=True)
        with warnings.catch_warnings():
            warnings.simplefilter("error", lt.LigerFallbackWarning)
            out = run(input_ids=ids, labels=ids)
        out.loss.backward()
        ref = eager(input_ids=ids, labels=ids)
        ref.loss.backward()
        assert torch.equal(out.loss, ref.loss), seq
        grads = dict(compiled.named_parameters())
        for name, p in eager.named_parameters():
            assert torch.equal(grads[name].grad, p.grad), (seq, name)


def _norms(x, res, w, lw, lb):
    """add + RMSNorm, then LayerNorm of the normalized sum, the sum going on
    as the residual stream."""
    y, total = ops.add_rms_norm(x, res, w, 1e-6, 1.0, "gemma")
    return ops.layer_norm(y, lw, lb, 1e-5) * total


def _norm_inputs(seed):
    g = torch.Generator().manual_seed(seed)
    return [torch.randn(*shape, generator=g).to(torch.bfloat16).requires_grad_(True)
            for shape in ((2, 3, 16), (2, 3, 16), (16,), (16,), (16,))]


def test_the_norms_compile_with_no_graph_break():
    explained = torch._dynamo.explain(_norms)(*_norm_inputs(0))
    assert explained.graph_break_count == 0, [r.reason for r in explained.break_reasons]
    assert explained.graph_count == 1


def test_the_norms_train_compiled_as_they_do_eagerly():
    """torch.compile(fullgraph=True) through AOTAutograd (the fake kernels
    and the registered backwards of add_rms_norm and layer_norm): the
    outputs and every gradient are the eager call's."""
    torch._dynamo.reset()
    compiled = torch.compile(_norms, fullgraph=True, backend="aot_eager")
    a, b = _norm_inputs(1), _norm_inputs(1)
    out, ref = compiled(*a), _norms(*b)
    dy = torch.randn(out.shape, generator=torch.Generator().manual_seed(2)).to(out.dtype)
    out.backward(dy)
    ref.backward(dy)
    assert torch.equal(out, ref)
    for i, (p, q) in enumerate(zip(a, b)):
        assert torch.equal(p.grad, q.grad), i


def test_cross_entropy_in_place_compiles():
    """The in-place cross-entropy (an autograd.Function around the mutating
    operator) under torch.compile(fullgraph=True): the loss and the
    gradient reaching the leaf are the eager call's."""
    t = torch.tensor([1, 0, -100, 15, 3, 7])

    def loss_of(leaf):
        return ops.cross_entropy(leaf * 2, t, inplace=True, reduction="sum")
    torch._dynamo.reset()
    compiled = torch.compile(loss_of, fullgraph=True, backend="aot_eager")
    a, b = _randn(6, 16, grad=True), _randn(6, 16, grad=True)
    loss = compiled(a)
    loss.backward(torch.tensor(0.5))
    ref = loss_of(b)
    ref.backward(torch.tensor(0.5))
    assert torch.equal(loss, ref)
    assert torch.equal(a.grad, b.grad)


def test_cross_entropy_in_place_writes_the_gradient_over_the_logits():
    leaf = _randn(6, 16, grad=True)
    t = torch.tensor([1, 0, -100, 15, 3, 7])
    logits = leaf * 1
    loss = ops.cross_entropy(logits, t, inplace=True)
    loss.backward(torch.tensor(2.0))
    ref = leaf.detach().requires_grad_(True)
    expected = torch.nn.functional.cross_entropy(ref, t)
    (expected * 2).backward()
    assert torch.allclose(loss, expected, rtol=1e-5)
    assert torch.allclose(leaf.grad, ref.grad, atol=1e-6)
    # The logits now hold the gradient: the forward's for a unit incoming
    # gradient, scaled over itself by the backward (no [N, V] buffer
    # beside them).
    assert torch.allclose(logits.detach(), ref.grad, atol=1e-6)


@pytest.mark.parametrize("inplace", [False, True], ids=["fresh", "inplace"])
def test_a_per_token_loss_of_rank_3_logits_and_flat_targets_backpropagates(inplace):
    """reduction="none" over logits [B, T, V] with targets [B * T]: the loss
    is [B * T] and each token's incoming gradient scales its row."""
    leaf = _randn(2, 3, 16, grad=True)
    t = torch.tensor([1, 0, -100, 15, 3, 7])
    dloss = torch.rand(6) + 0.5
    logits = leaf * 1 if inplace else leaf
    loss = ops.cross_entropy(logits, t, reduction="none", inplace=inplace)
    assert loss.shape == (6,)
    loss.backward(dloss)
    ref = leaf.detach().requires_grad_(True)
    expected = torch.nn.functional.cross_entropy(ref.view(6, 16), t, reduction="none")
    expected.backward(dloss)
    assert torch.allclose(loss, expected.detach(), rtol=1e-5)
    assert torch.allclose(leaf.grad, ref.grad, atol=1e-6)


def test_rows_of_any_rank_run_on_the_cpu_as_on_the_gpu():
    """[B, T, H] (and [H]) inputs are flattened into rows by the operators,
    the same on both paths: the reference lowering takes what the GPU
    takes."""
    x, w = _randn(2, 3, 16), torch.rand(16) + 0.5
    expected = x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-6) * w
    assert torch.allclose(ops.rms_norm(x, w), expected, atol=1e-6)
    assert torch.allclose(ops.rms_norm(x[0, 0], w), expected[0, 0], atol=1e-6)
    g, u = _randn(2, 3, 8), _randn(2, 3, 8)
    assert torch.allclose(ops.swiglu(g, u), torch.nn.functional.silu(g) * u, atol=1e-6)


def test_the_divergences_compile_with_no_graph_break():
    """liger.ops.kl_div and liger.ops.jsd under torch.compile(fullgraph=True)
    with their backward: no graph break, and the gradients of eager."""
    g = torch.Generator().manual_seed(5)
    x = torch.randn(3, 11, generator=g).log_softmax(-1).requires_grad_(True)
    p, y = torch.randn(3, 11, generator=g).softmax(-1), torch.randn(3, 11, generator=g)
    lab = torch.tensor([2, -100, 4])

    def loss_of(x, p, y, lab):
        return ops.kl_div(x, p) + 2 * ops.jsd(x, y.log_softmax(-1), lab, beta=0.25)

    explained = torch._dynamo.explain(loss_of)(x, p, y, lab)
    assert explained.graph_break_count == 0, [r.reason for r in explained.break_reasons]
    eager = torch.autograd.grad(loss_of(x, p, y, lab), x)[0]
    compiled = torch.compile(loss_of, fullgraph=True, backend="aot_eager")
    torch.testing.assert_close(torch.autograd.grad(compiled(x, p, y, lab), x)[0], eager)


def _eager_cases():
    """liger.ops calls with an eager path: name -> (call, its leaves)."""
    x, w, b = _randn(2, 3, 16, grad=True), (torch.rand(16) + 0.5).requires_grad_(True), \
        _randn(16, grad=True)
    res = _randn(2, 3, 16, grad=True)
    g, u = _randn(5, 8, grad=True), _randn(5, 8, grad=True)
    q, k = _randn(2, 4, 3, 8, grad=True), _randn(2, 2, 3, 8, grad=True)
    angle = torch.rand(1, 3, 8) * 6.3
    return {
        "rms_norm": (lambda: ops.rms_norm(x, w), (x, w)),
        "add_rms_norm": (lambda: ops.add_rms_norm(x, res, w), (x, res, w)),
        "layer_norm": (lambda: ops.layer_norm(x, w, b), (x, w, b)),
        "swiglu": (lambda: ops.swiglu(g, u), (g, u)),
        "geglu": (lambda: ops.geglu(g, u), (g, u)),
        "softmax": (lambda: ops.softmax(x), (x,)),
        "rope": (lambda: ops.rope(q, k, angle.cos(), angle.sin()), (q, k)),
        "attention": (lambda: ops.attention(q, k, k.detach().flip(-1), causal=True), (q, k)),
    }


def _outputs(out):
    return out if isinstance(out, tuple) else (out,)


def _run(f, leaves):
    """f's outputs and the gradients of its leaves under a fixed incoming
    gradient (each output's elements 0, 1/7, 2/7, ...)."""
    for t in leaves:
        t.grad = None
    outs = _outputs(f())
    torch.autograd.backward(outs, [torch.arange(o.numel(), dtype=o.dtype).view(o.shape) / 7
                                   for o in outs])
    return [o.detach() for o in outs], [t.grad for t in leaves]


class _Seen(torch.utils._python_dispatch.TorchDispatchMode):
    def __init__(self):
        super().__init__()
        self.ops = []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        self.ops.append(str(func))
        return func(*args, **(kwargs or {}))


@pytest.mark.parametrize("name", sorted(_eager_cases()))
def test_eager_path_is_the_operator_without_the_dispatcher(name):
    """Outside torch.compile, on plain tensors, liger.ops runs the op's own
    implementation, setup and backward in a plain autograd.Function (its
    grad_fn says so), with the outputs and gradients of the PyTorch
    operator; under a dispatch mode (FakeTensorMode, a selective
    checkpoint's policy) the call is the operator, which the mode sees, in
    the forward and the backward alike."""
    f, leaves = _eager_cases()[name]
    outs = _outputs(f())
    assert type(outs[0].grad_fn).__name__.startswith("Liger_"), type(outs[0].grad_fn)
    eager = _run(f, leaves)
    seen = _Seen()
    with seen:
        outs = _outputs(f())
        assert not type(outs[0].grad_fn).__name__.startswith("Liger_"), name
        dispatched = _run(f, leaves)
    assert "liger.%s.default" % name in seen.ops, seen.ops
    assert "liger.%s_backward.default" % name in seen.ops, seen.ops
    for a, b in zip(eager[0] + eager[1], dispatched[0] + dispatched[1]):
        assert torch.equal(a, b), name
