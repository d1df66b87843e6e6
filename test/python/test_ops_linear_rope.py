"""liger.ops.linear_rope and its operator liger::linear_rope on the CPU: q
and k and every gradient (x, both weights, both biases) against float64
autograd of Hugging Face's attention up to its attention function
(projections, head split, apply_rotary_pos_emb), in bf16 and f16 through
the kernel's module (the reference lowering, LIGER_OPS_CPU_REFERENCE=1),
with and without biases, tables [1, T, D] and [B, T, D], one token and odd
B and T, GQA, head sizes 16, 32 and 64, a hidden size not a multiple of
64; that the backward runs RoPE's gradient kernel, forms only what
autograd asks for and leaves what it saved; the backward against float64
finite differences (float64 has no kernel: PyTorch's ops) and
torch.library's checks; torch.compile with dynamic batch and sequence;
which path a configuration takes; every argument rule; the spec's text
and module, and the module as liger-compile makes it: one kernel whose
parameters are the operator's operands in order and whose results are q
and k head-major."""

import json
import math
import os
import re
import subprocess

import pytest
from ops_helpers import module_command, needs_compiler, record_loads, rel

torch = pytest.importorskip("torch")

from liger import bundles, operators, ops, specs  # noqa: E402
from liger.driver import find_tool  # noqa: E402
from liger.errors import LigerTypeError, LigerValueError  # noqa: E402

F = torch.nn.functional
DTYPES = {"bf16": torch.bfloat16, "f16": torch.float16, "f32": torch.float32}
# Max |error| over max |float64's|: q and k round once in the kernel (the
# projections accumulate in f32, RoPE in the epilogue), dq and dk once in
# RoPE's gradient kernel, then the GEMMs accumulate in f32 and round their
# results (dx sums the q and k products): measured at most 1.5 units of
# the last place (5.4e-3 in bf16, 6.5e-4 in f16), the bounds about four
# times that. f32 (PyTorch's ops only) rounds its GEMMs' sums.
TOL = {"bf16": 2e-2, "f16": 3e-3, "f32": 1e-5}
# (dtype, biases, tables' batch ("1" or "B"), (B, T), H, Hq, Hk, D): one
# token, odd B and T, MHA and GQA (Hq/Hk 2, 3, 4), D 16, 32 and 64, H 72
# and 40 (not multiples of 64), f16, [B, T, D] tables with B > 1.
CASES = {
    "bf16_1x1_mha_d16": ("bf16", False, "1", (1, 1), 64, 2, 2, 16),
    "bf16_bias_2x7_gqa_d32_batched": ("bf16", True, "B", (2, 7), 72, 4, 2, 32),
    "bf16_3x5_gqa_d64_batched": ("bf16", False, "B", (3, 5), 64, 4, 1, 64),
    "f16_bias_3x5_gqa_d64": ("f16", True, "1", (3, 5), 72, 3, 1, 64),
    "f16_2x7_gqa_d16_batched": ("f16", False, "B", (2, 7), 40, 3, 1, 16),
    "f16_bias_1x1_d32_batched": ("f16", True, "B", (1, 1), 72, 2, 1, 32),
}


def _operands(b, t, h, hq, hk, d, dtype, bias, table_batch, seed):
    """x [B, T, H], q_weight [Hq·D, H], k_weight [Hk·D, H], cos and sin
    [table_batch, T, D], q_bias and k_bias (None without biases), scaled so
    that the projections are of order one. The tables are cos and sin of
    random angles per entry: Hugging Face's repeat their two halves, these
    do not, so that a kernel reading one half's entries for both fails."""
    gen = torch.Generator().manual_seed(seed)

    def rand(*size, scale=1.0):
        return (torch.randn(*size, generator=gen) * scale).to(dtype)
    x = rand(b, t, h)
    wq, wk = rand(hq * d, h, scale=h ** -0.5), rand(hk * d, h, scale=h ** -0.5)
    angle = (torch.rand(table_batch, t, d, generator=gen) * 2 - 1) * math.pi
    cos, sin = angle.cos().to(dtype), angle.sin().to(dtype)
    bq, bk = (rand(hq * d, scale=0.5), rand(hk * d, scale=0.5)) if bias else (None, None)
    return x, wq, wk, cos, sin, bq, bk


def _case_operands(name, seed):
    dt, bias, tables, (b, t), h, hq, hk, d = CASES[name]
    return _operands(b, t, h, hq, hk, d, DTYPES[dt], bias, 1 if tables == "1" else b, seed)


def _rotate_half(v):
    """Hugging Face's rotate_half."""
    v1 = v[..., : v.shape[-1] // 2]
    v2 = v[..., v.shape[-1] // 2:]
    return torch.cat((-v2, v1), dim=-1)


def _reference(x, wq, wk, cos, sin, bq=None, bk=None):
    """Hugging Face's attention up to its attention function, in the
    operands' dtype: the projections, the head split view(B, T, -1,
    D).transpose(1, 2) and apply_rotary_pos_emb (unsqueeze_dim=1)."""
    b, t, _ = x.shape
    d = cos.shape[-1]
    q = F.linear(x, wq, bq).view(b, t, -1, d).transpose(1, 2)
    k = F.linear(x, wk, bk).view(b, t, -1, d).transpose(1, 2)
    cos, sin = cos.unsqueeze(1), sin.unsqueeze(1)
    return q * cos + _rotate_half(q) * sin, k * cos + _rotate_half(k) * sin


def _exact(tensors, grad=True):
    """Float64 copies (leaves where `grad` and the original is one)."""
    return [None if t is None else
            t.detach().double().requires_grad_(grad and t.requires_grad) for t in tensors]


def _incoming(q, k, seed):
    gen = torch.Generator().manual_seed(seed)
    return (torch.randn(q.shape, generator=gen).to(q.dtype),
            torch.randn(k.shape, generator=gen).to(k.dtype))


@pytest.mark.parametrize("name", sorted(CASES))
def test_q_k_and_their_gradients_against_float64(cpu_reference, monkeypatch, name):
    """The forward through the kernel's module, the backward through
    RoPE's gradient kernel and PyTorch's GEMMs, against float64 autograd of
    Hugging Face's composition, for the incoming dq and dk."""
    dt, bias, tables, (b, t), h, hq, hk, d = CASES[name]
    loaded = record_loads(monkeypatch, bundles, "matmul_kernel")
    rope_loaded = record_loads(monkeypatch, bundles, "kernels")
    operands = _case_operands(name, 3)
    x, wq, wk, cos, sin, bq, bk = operands
    trained = [x, wq, wk] + ([bq, bk] if bias else [])
    for v in trained:
        v.requires_grad_()
    q, k = ops.linear_rope(x, wq, wk, cos, sin, bq, bk)
    assert q.shape == (b, hq, t, d) and k.shape == (b, hk, t, d), (name, q.shape, k.shape)
    assert q.dtype == k.dtype == DTYPES[dt] and q.is_contiguous() and k.is_contiguous()
    spec = specs.linear_rope_spec(h, hq, hk, d, dt, bias, tables == "1" or b == 1,
                                  target="cpu")
    # The kernel's module ran, once configured (RoPE's kernels may load with
    # it: those of spec.rope_spec(), none other).
    assert loaded == [spec], (loaded, spec)
    assert set(rope_loaded) <= {spec.rope_spec()}, rope_loaded
    del rope_loaded[:]
    dq, dk = _incoming(q, k, 4)
    torch.autograd.backward((q, k), (dq, dk))
    # The backward ran RoPE's gradient kernel (liger::rope_backward's, of
    # the spec's rope_spec).
    assert rope_loaded == [spec.rope_spec()], rope_loaded
    exact = _exact(operands)
    want_q, want_k = _reference(*exact)
    torch.autograd.backward((want_q, want_k), (dq.double(), dk.double()))
    assert rel(q, want_q) < TOL[dt], (name, rel(q, want_q))
    assert rel(k, want_k) < TOL[dt], (name, rel(k, want_k))
    names = ("dx", "dW_q", "dW_k", "db_q", "db_k")
    for what, got, ref in zip(names, trained, [v for v in exact if v is not None and
                                               v.requires_grad]):
        assert got.grad is not None and got.grad.dtype == got.dtype, (name, what)
        assert got.grad.shape == got.shape, (name, what)
        assert rel(got.grad, ref.grad) < TOL[dt], (name, what, rel(got.grad, ref.grad))
    assert loaded == [spec], loaded


def test_only_what_autograd_asks_for_is_formed(cpu_reference, monkeypatch):
    """The backward forms only the gradients autograd asks for: with none of
    x, the weights and the biases (the tables get none), no RoPE gradient
    kernel runs and every gradient is None; with the one it asks for, the
    others are None."""
    x, wq, wk, cos, sin, bq, bk = _operands(2, 3, 64, 2, 1, 16, torch.bfloat16, True, 1, 5)
    q, k = operators.linear_rope(x, wq, wk, cos, sin, bq, bk)
    dq, dk = _incoming(q, k, 6)
    called = []
    call = operators.call
    monkeypatch.setattr(operators, "call", lambda op, *a: (called.append(op), call(op, *a))[1])

    class Ctx:
        saved_tensors = (x, wq, wk, cos, sin)
        biases = (True, True)
        fit = True  # (one dtype: the kernel path)
    Ctx.needs_input_grad = (False, False, False, True, True, False, False)
    assert operators._linear_rope_grad(Ctx, dq, dk) == (None,) * 7
    assert called == []
    for i in (0, 1, 2, 5, 6):
        Ctx.needs_input_grad = tuple(j == i for j in range(7))
        grads = operators._linear_rope_grad(Ctx, dq, dk)
        assert [g is not None for g in grads] == list(Ctx.needs_input_grad), i
    assert called == [operators.rope_backward] * 5
    # An output with no incoming gradient (None) counts as zeros.
    Ctx.needs_input_grad = (True, True, True, False, False, True, True)
    for zeros_q in (True, False):
        got = operators._linear_rope_grad(Ctx, None if zeros_q else dq,
                                          dk if zeros_q else None)
        want = operators._linear_rope_grad(Ctx, torch.zeros_like(dq) if zeros_q else dq,
                                           dk if zeros_q else torch.zeros_like(dk))
        for g, w in zip(got, want):
            assert (g is None and w is None) or torch.equal(g, w)
    # Through autograd: frozen weights (and biases) get no gradient, x
    # without grad gets none.
    x.requires_grad_()
    q, k = ops.linear_rope(x, wq, wk, cos, sin, bq, bk)
    (q.sum() + k.sum()).backward()
    assert x.grad is not None
    assert all(v.grad is None for v in (wq, wk, bq, bk))
    x.requires_grad_(False)
    x.grad = None
    for v in (wq, wk):
        v.requires_grad_()
    q, k = ops.linear_rope(x, wq, wk, cos, sin, bq, bk)
    (q.sum() + k.sum()).backward()
    assert x.grad is None and bq.grad is None and bk.grad is None
    assert wq.grad is not None and wk.grad is not None


@pytest.mark.parametrize("used", ["q", "k"])
def test_the_gradient_of_one_output_alone(cpu_reference, used):
    """Only q used (k unused), or only k: the gradients are float64's of
    that output; the other projection's weight and bias get zeros (or
    none)."""
    operands = _operands(3, 5, 72, 4, 2, 32, torch.bfloat16, True, 3, 7)
    for v in operands[:3] + operands[5:]:
        v.requires_grad_()
    x, wq, wk, cos, sin, bq, bk = operands
    out = dict(zip("qk", ops.linear_rope(*operands)))[used]
    dy = torch.randn(out.shape, generator=torch.Generator().manual_seed(8)).to(out.dtype)
    out.backward(dy)
    exact = _exact(operands)
    dict(zip("qk", _reference(*exact)))[used].backward(dy.double())
    mine, other = ((wq, bq), (wk, bk)) if used == "q" else ((wk, bk), (wq, bq))
    mine_exact = (exact[1], exact[5]) if used == "q" else (exact[2], exact[6])
    for got, ref in zip((x,) + mine, (exact[0],) + mine_exact):
        assert rel(got.grad, ref.grad) < TOL["bf16"], (used, rel(got.grad, ref.grad))
    for v in other:
        assert v.grad is None or not v.grad.any(), used


def test_the_backward_leaves_what_it_saved(cpu_reference):
    """The backward reads the saved x, weights and tables and writes fresh
    gradients: a second backward through the graph (retain_graph) gives the
    same gradients."""
    operands = _operands(2, 5, 72, 2, 1, 32, torch.bfloat16, True, 2, 9)
    leaves = [operands[i].requires_grad_() for i in (0, 1, 2, 5, 6)]
    q, k = ops.linear_rope(*operands)
    dq, dk = _incoming(q, k, 10)
    saved = [t.detach().clone() for t in operands]
    torch.autograd.backward((q, k), (dq, dk), retain_graph=True)
    first = [t.grad.clone() for t in leaves]
    for t in leaves:
        t.grad = None
    torch.autograd.backward((q, k), (dq, dk))
    assert all(torch.equal(a, t.grad) for a, t in zip(first, leaves))
    assert all(torch.equal(a, t) for a, t in zip(saved, operands))


@pytest.mark.parametrize("table_batch", [1, 2], ids=["tables_1", "tables_B"])
@pytest.mark.parametrize("bias", [False, True], ids=["no_bias", "bias"])
def test_the_backward_is_the_forwards_derivative(bias, table_batch):
    """liger::linear_rope's backward (PyTorch's RoPE gradient, then the
    GEMMs) against float64 finite differences, and torch.library's checks
    of the operator."""
    x, wq, wk, cos, sin, bq, bk = _operands(2, 3, 6, 2, 1, 4, torch.float64, bias, table_batch,
                                            0)
    leaves = [v.requires_grad_() for v in (x, wq, wk, bq, bk) if v is not None]

    def op(x, wq, wk, *biases):
        return operators.linear_rope(x, wq, wk, cos, sin, *(biases or (None, None)))
    assert torch.autograd.gradcheck(op, leaves)
    torch.library.opcheck(operators.linear_rope, (x, wq, wk, cos, sin, bq, bk))


@pytest.mark.parametrize("tables", ["1", "B"])
def test_torch_compile_with_dynamic_shapes(cpu_reference, tables):
    """liger.ops.linear_rope under torch.compile(dynamic=True), forward and
    backward traced (aot_eager), two batch and sequence sizes: the same q,
    k and gradients as the eager call."""
    torch._dynamo.reset()
    compiled = torch.compile(ops.linear_rope, backend="aot_eager", dynamic=True)
    try:
        for b, t in ((2, 3), (3, 5)):
            operands = _operands(b, t, 64, 2, 1, 16, torch.bfloat16, True,
                                 1 if tables == "1" else b, 14)
            results = []
            for fn in (compiled, ops.linear_rope):
                leaves = [v.detach().requires_grad_(i in (0, 1, 2, 5, 6))
                          for i, v in enumerate(operands)]
                q, k = fn(*leaves)
                torch.autograd.backward((q, k), _incoming(q, k, 15))
                results.append([q, k] + [leaves[i].grad for i in (0, 1, 2, 5, 6)])
            assert all(torch.equal(a, e) for a, e in zip(*results)), (b, t)
    finally:
        torch._dynamo.reset()


def test_the_operator_takes_no_tokens(cpu_reference):
    """The operator (liger.ops.linear_rope refuses them) on x of no tokens:
    empty q and k, zero gradients (the operator's "no rows: no launch")."""
    x, wq, wk, cos, sin, bq, bk = _operands(2, 3, 64, 2, 1, 16, torch.bfloat16, True, 1, 16)
    x = x[:0].requires_grad_()
    wq.requires_grad_()
    q, k = torch.ops.liger.linear_rope(x, wq, wk, cos, sin, bq, bk)
    assert q.shape == (0, 2, 3, 16) and k.shape == (0, 1, 3, 16)
    (q.sum() + k.sum()).backward()
    assert x.grad.shape == x.shape and not wq.grad.any()


# (dtype, H, D, whether the reference lowering is on): f32 (the template's
# are bf16 and f16), D 24 and H 60 (sm_90a's rules: D a multiple of 16, H of
# 8), CPU tensors without the reference lowering.
WITHOUT_KERNELS = {
    "f32": ("f32", 64, 16, True),
    "head_dim_24": ("bf16", 64, 24, True),
    "hidden_60": ("f16", 60, 16, True),
    "no_reference_lowering": ("bf16", 64, 16, False),
}


@pytest.mark.parametrize("name", sorted(WITHOUT_KERNELS))
def test_a_configuration_without_kernels_runs_pytorchs_ops(monkeypatch, name):
    """The operator where no kernel takes the call (liger.ops.linear_rope
    refuses these; the operator takes them): PyTorch's ops as Hugging Face
    computes them, exactly, and their gradients; no kernel loaded, RoPE's
    gradient kernel neither."""
    dt, h, d, reference = WITHOUT_KERNELS[name]
    loaded = record_loads(monkeypatch, bundles, "matmul_kernel")
    rope_loaded = record_loads(monkeypatch, bundles, "kernels")
    if reference:
        monkeypatch.setenv("LIGER_OPS_CPU_REFERENCE", "1")
    else:
        monkeypatch.delenv("LIGER_OPS_CPU_REFERENCE", raising=False)
    ops.clear_caches()
    try:
        for bias, table_batch in ((False, 1), (True, 3)):
            operands = _operands(3, 5, h, 2, 1, d, DTYPES[dt], bias, table_batch, 11)
            leaves = [operands[i].requires_grad_() for i in (0, 1, 2, 5, 6)
                      if operands[i] is not None]
            q, k = torch.ops.liger.linear_rope(*operands)
            want_q, want_k = _reference(*operands)
            assert torch.equal(q, want_q) and torch.equal(k, want_k), (name, bias)
            same_q, same_k = operators.linear_rope_reference(*operands)
            assert torch.equal(q, same_q) and torch.equal(k, same_k), (name, bias)
            assert q.is_contiguous() and k.is_contiguous()
            dq, dk = _incoming(q, k, 12)
            torch.autograd.backward((q, k), (dq, dk))
            exact = _exact(operands)
            torch.autograd.backward(_reference(*exact), (dq.double(), dk.double()))
            for got, ref in zip(leaves, [v for v in exact if v is not None and
                                         v.requires_grad]):
                assert got.grad.dtype == got.dtype
                assert rel(got.grad, ref.grad) < TOL[dt], (name, bias, rel(got.grad, ref.grad))
    finally:
        ops.clear_caches()
    assert loaded == [] and rope_loaded == []


@pytest.fixture
def cpu_target(monkeypatch):
    """CPU tensors have the target "cpu" (checks only: nothing runs)."""
    monkeypatch.setenv("LIGER_OPS_CPU_REFERENCE", "1")
    ops.clear_caches()
    yield
    ops.clear_caches()


def _valid(dtype=torch.bfloat16, bias=False):
    """x [3, 5, 64], Hq 2, Hk 1 of D 16, tables [1, 5, 16]."""
    return _operands(3, 5, 64, 2, 1, 16, dtype, bias, 1, 13)


def _replaced(operands, **changes):
    names = ("x", "q_weight", "k_weight", "cos", "sin", "q_bias", "k_bias")
    args = dict(zip(names, operands))
    args.update(changes)
    return [args[n] for n in names]


def _bf16(*shape):
    return torch.zeros(*shape, dtype=torch.bfloat16)


# (name, error, message's pattern, the changes to _valid(bias=True)).
INVALID = [
    ("x_2d", LigerValueError, r"x must be \[B, T, H\] with at least one token, got shape "
     r"\[5, 64\]", dict(x=_bf16(5, 64))),
    ("x_4d", LigerValueError, r"x must be \[B, T, H\]", dict(x=_bf16(1, 3, 5, 64))),
    ("x_empty_batch", LigerValueError, r"x must be \[B, T, H\] with at least one token, got "
     r"shape \[0, 5, 64\]", dict(x=_bf16(0, 5, 64))),
    ("x_empty_seq", LigerValueError, r"at least one token, got shape \[3, 0, 64\]",
     dict(x=_bf16(3, 0, 64))),
    ("x_not_a_tensor", LigerTypeError, r"x must be a torch.Tensor, got list",
     dict(x=[[0.0]])),
    ("cos_batch", LigerValueError, r"cos must be \[1 or 3, 5, D\] \(B and T of x, D the even "
     r"head size\), got \[2, 5, 16\]", dict(cos=_bf16(2, 5, 16), sin=_bf16(2, 5, 16))),
    ("cos_seq", LigerValueError, r"cos must be \[1 or 3, 5, D\].*got \[1, 4, 16\]",
     dict(cos=_bf16(1, 4, 16), sin=_bf16(1, 4, 16))),
    ("cos_odd_d", LigerValueError, r"cos must be \[1 or 3, 5, D\].*even head size.*got "
     r"\[1, 5, 15\]", dict(cos=_bf16(1, 5, 15), sin=_bf16(1, 5, 15))),
    ("cos_2d", LigerValueError, r"cos must be \[1 or 3, 5, D\].*got \[5, 16\]",
     dict(cos=_bf16(5, 16), sin=_bf16(5, 16))),
    ("sin_shape", LigerValueError, r"sin must have the shape of cos \[1, 5, 16\], got "
     r"\[3, 5, 16\]", dict(sin=_bf16(3, 5, 16))),
    ("q_weight_partial_head", LigerValueError, r"q_weight must be \[heads \* 16, 64\] \(whole "
     r"heads of the tables' D, x's H\), got \[40, 64\]",
     dict(q_weight=_bf16(40, 64), q_bias=_bf16(40))),
    ("q_weight_no_rows", LigerValueError, r"q_weight must be \[heads \* 16, 64\]",
     dict(q_weight=_bf16(0, 64), q_bias=_bf16(0))),
    ("k_weight_in_features", LigerValueError, r"k_weight must be \[heads \* 16, 64\].*got "
     r"\[16, 72\]", dict(k_weight=_bf16(16, 72))),
    ("k_weight_1d", LigerValueError, r"k_weight must be \[heads \* 16, 64\]",
     dict(k_weight=_bf16(16 * 64))),
    ("q_bias_shape", LigerValueError, r"q_bias must be \[32\] \(q_weight's rows\), got \[16\]",
     dict(q_bias=_bf16(16))),
    ("k_bias_shape", LigerValueError, r"k_bias must be \[16\] \(k_weight's rows\), got "
     r"\[1, 16\]", dict(k_bias=_bf16(1, 16))),
    ("q_bias_alone", LigerValueError, r"q_bias and k_bias must be given together",
     dict(k_bias=None)),
    ("k_bias_alone", LigerValueError, r"q_bias and k_bias must be given together",
     dict(q_bias=None)),
    ("k_weight_dtype", LigerTypeError, r"k_weight must have the dtype of x \(torch.bfloat16\), "
     r"got torch.float16", dict(k_weight=torch.zeros(16, 64, dtype=torch.float16))),
    ("cos_dtype", LigerTypeError, r"cos must have the dtype of x \(torch.bfloat16\), got "
     r"torch.float32", dict(cos=torch.zeros(1, 5, 16), sin=torch.zeros(1, 5, 16))),
    ("k_bias_dtype", LigerTypeError, r"k_bias must have the dtype of x",
     dict(k_bias=torch.zeros(16))),
    ("head_dim_24", LigerValueError, r"head_dim must be a multiple of 16 of at most 256 on "
     r"sm_90a.*got 24", dict(q_weight=_bf16(48, 64), k_weight=_bf16(24, 64),
                             q_bias=_bf16(48), k_bias=_bf16(24), cos=_bf16(1, 5, 24),
                             sin=_bf16(1, 5, 24))),
    ("head_dim_272", LigerValueError, r"head_dim must be a multiple of 16 of at most 256",
     dict(q_weight=_bf16(272, 64), k_weight=_bf16(272, 64), q_bias=_bf16(272),
          k_bias=_bf16(272), cos=_bf16(1, 5, 272), sin=_bf16(1, 5, 272))),
    ("hidden_60", LigerValueError, r"hidden must be a multiple of 8 on sm_90a.*got 60",
     dict(x=_bf16(3, 5, 60), q_weight=_bf16(32, 60), k_weight=_bf16(16, 60))),
]


@pytest.mark.parametrize("name,error,message,changes", INVALID, ids=[c[0] for c in INVALID])
def test_each_rule_is_checked(cpu_target, name, error, message, changes):
    with pytest.raises(error, match=message):
        ops.linear_rope(*_replaced(_valid(bias=True), **changes))


def test_f32_is_refused(cpu_target):
    """The template's kernels are bf16 and f16 (the operator itself takes
    f32: PyTorch's ops)."""
    with pytest.raises(LigerTypeError, match=r"liger.ops.linear_rope takes bf16 or f16 .*got "
                       r"f32"):
        ops.linear_rope(*_valid(torch.float32))


def test_the_call_is_checked_after_its_configuration_is_remembered(cpu_reference):
    """A configuration's static facts are checked once; the batch and the
    sequence of each call still are, against the tables (of another T or
    B) and sin's shape against cos'."""
    operands = _valid()
    q, _ = ops.linear_rope(*operands)
    assert q.shape == (3, 2, 5, 16)
    with pytest.raises(LigerValueError, match=r"cos must be \[1 or 3, 4, D\].*got \[1, 5, 16\]"):
        ops.linear_rope(*_replaced(operands, x=operands[0][:, :4]))
    with pytest.raises(LigerValueError, match=r"sin must have the shape of cos"):
        ops.linear_rope(*_replaced(operands, sin=operands[4].expand(3, 5, 16)))
    tables = [t.expand(3, 5, 16).contiguous() for t in operands[3:5]]
    batched = _replaced(operands, cos=tables[0], sin=tables[1])
    assert torch.equal(ops.linear_rope(*batched)[0], q)
    with pytest.raises(LigerValueError, match=r"cos must be \[1 or 2, 5, D\].*got \[3, 5, 16\]"):
        ops.linear_rope(*_replaced(batched, x=operands[0][:2]))


def test_the_spec_text_round_trips_and_names_its_kernel_options():
    spec = ops.linear_rope_spec(4096, 32, 8, 128, torch.bfloat16)
    assert str(spec) == ("linear_rope:bias=0,broadcast_tables=1,dtype=bf16,head_dim=128,"
                         "hidden=4096,k_heads=8,q_heads=32")
    assert ops.parse_spec(str(spec)) == spec
    qwen = ops.linear_rope_spec(3584, 28, 4, 128, "f16", bias=True, broadcast_tables=False)
    assert str(qwen) == ("linear_rope:bias=1,broadcast_tables=0,dtype=f16,head_dim=128,"
                         "hidden=3584,k_heads=4,q_heads=28")
    assert ops.parse_spec(str(qwen)) == qwen
    assert ops.parse_spec(str(qwen), target="sm_80") == qwen.with_target("sm_80")
    assert spec.compile_options() == dict(target="sm_90a", matmul_kernels=True)
    assert qwen.with_target("sm_80").compile_options() == dict(target="sm_80",
                                                               matmul_kernels=True)
    text = module_command(qwen)
    assert text == qwen.module_text()
    assert "liger.linear %x, %wq, %bq" in text and "liger.linear %x, %wk, %bk" in text
    assert "liger.rope %qh, %kh, %cos, %sin" in text
    assert "%cos: tensor<?x?x128xf16>" in text
    plain = module_command(spec)
    assert plain == spec.module_text()
    assert "%bq" not in plain and "%cos: tensor<1x?x128xbf16>" in plain
    # The backward's RoPE gradient kernel: RoPESpec of the same heads, dtype,
    # tables and target.
    assert spec.rope_spec() == ops.rope_spec(32, 8, 128, "bf16", broadcast_tables=True)
    assert qwen.with_target("sm_80").rope_spec() == ops.rope_spec(
        28, 4, 128, "f16", broadcast_tables=False, target="sm_80")


def test_the_spec_refuses_what_the_template_cannot_make():
    for args, target, error, message in [
            (("f32",), "sm_90a", LigerTypeError, r"takes bf16 or f16"),
            (("bf16", 64, 24), "sm_90a", LigerValueError, r"multiple of 16 of at most 256"),
            (("bf16", 64, 272), "sm_90a", LigerValueError, r"multiple of 16 of at most 256"),
            (("bf16", 64, 16), "sm_80", LigerValueError, r"multiple of 32 of at most 128 on "
             r"sm_80"),
            (("bf16", 64, 160), "sm_80", LigerValueError, r"multiple of 32 of at most 128"),
            (("bf16", 72, 32), "sm_80", LigerValueError, r"hidden must be a multiple of 32"),
            (("bf16", 60, 16), "cpu", LigerValueError, r"hidden must be a multiple of 8")]:
        dtype, h, d = (args + (64, 16))[:3]
        with pytest.raises(error, match=message):
            ops.linear_rope_spec(h, 2, 1, d, dtype, target=target)
    # The widest heads each target takes.
    ops.linear_rope_spec(64, 2, 1, 256, "bf16")
    ops.linear_rope_spec(64, 2, 1, 128, "f16", target="sm_80")


@needs_compiler
@pytest.mark.parametrize("broadcast", [True, False], ids=["tables_1", "tables_B"])
@pytest.mark.parametrize("bias", [True, False], ids=["bias", "no_bias"])
@pytest.mark.parametrize("target", ["sm_90a", "sm_80"])
def test_the_spec_compiles_to_one_kernel_of_the_operators_operands(
        tmp_path, target, bias, broadcast):
    """The matmul template makes @fwd one kernel (the one
    bundles.matmul_kernel loads): it reads x, W_q[, b_q], W_k[, b_k], cos,
    sin (the operator's order of its operands) and writes q and k
    head-major; @fwd returns the group's results in the group's order, so
    that the reference (which runs the function) and the GPU (which runs
    the kernel) give the operator the same tensors."""
    h, hq, hk, d = 512, 4, 2, 64
    spec = ops.linear_rope_spec(h, hq, hk, d, "bf16", bias, broadcast, target=target)
    (path,) = ops.precompile(str(tmp_path), [spec])
    with open(os.path.join(path, "manifest.json")) as f:
        (module,) = json.load(f)["modules"]
    (kernel,) = module["kernels"]
    assert kernel["name"] == "fwd_matmul_0"
    table = [1 if broadcast else "table_batch", "seq", d]
    want = [("input", ["rows", h]), ("input", [hq * d, h])]
    want += [("input", [hq * d])] if bias else []
    want += [("input", [hk * d, h])]
    want += [("input", [hk * d])] if bias else []
    want += [("input", table)] * 2
    want += [("output", ["batch", hq, "seq", d]), ("output", ["batch", hk, "seq", d])]
    assert [(p["role"], p["shape"]) for p in kernel["params"]] == want
    assert kernel["ops"].count("liger.linear,") == 2 and kernel["ops"].endswith("liger.rope")
    fused = subprocess.run(
        [find_tool("liger-compile"), "-", "--matmul-kernels", "--target=" + target,
         "--emit=fused", "-o", "-"], input=spec.module_text(), capture_output=True, text=True)
    assert fused.returncode == 0, fused.stderr
    returns = re.findall(r"^\s*return (.*?) :", fused.stdout, re.M)
    assert returns == ["%0#0, %0#1"], fused.stdout
