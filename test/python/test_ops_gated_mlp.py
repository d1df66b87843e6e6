"""liger.ops.gated_mlp and its operators liger::gated_mlp and
liger::gated_mlp_backward on the CPU: the output and every gradient (x and
the three weights) against float64 autograd, in bf16 and f16 through the
kernels' module (the reference lowering, LIGER_OPS_CPU_REFERENCE=1), both
activations, odd row counts; the backward against float64 finite
differences (float64 has no kernel: PyTorch's ops); which path a
configuration takes; the spec's module as liger-compile makes it two
kernels whose parameters are the operators' operands in order and whose
results are the functions' (the reference runs the functions, the GPU the
kernels: they must agree)."""

import json
import os
import re
import subprocess

import pytest
from ops_helpers import module_command, needs_compiler, record_loads, rel

torch = pytest.importorskip("torch")

from liger import bundles, operators, ops, specs  # noqa: E402
from liger.driver import find_tool  # noqa: E402

DTYPES = {"bf16": torch.bfloat16, "f16": torch.float16}
# Max |error| over max |float64's|: gate, up and h round once each in the
# kernel, dh once before the activation's gradient; the GEMMs accumulate in
# f32 and round their results.
TOL = {"bf16": 2e-2, "f16": 3e-3}
# (activation, approximate, dtype, x's shape, H, I): both activations, GELU's
# two forms, f16, one row, 7 rows, [B, T, H], I not a multiple of 16.
CASES = {
    "swiglu_bf16_1": ("swiglu", "tanh", "bf16", (1, 64), 64, 40),
    "swiglu_bf16_2x3": ("swiglu", "tanh", "bf16", (2, 3, 72), 72, 48),
    "geglu_tanh_f16_7": ("geglu", "tanh", "f16", (7, 64), 64, 40),
    "geglu_none_bf16_7": ("geglu", "none", "bf16", (7, 32), 32, 24),
}


def _operands(shape, h, i, dtype, seed):
    """x and the gate, up and down weights, scaled so that gate, up and y
    are of order one."""
    gen = torch.Generator().manual_seed(seed)

    def rand(*size, scale=1.0):
        return (torch.randn(*size, generator=gen) * scale).to(dtype)
    return rand(*shape), rand(i, h, scale=h ** -0.5), rand(i, h, scale=h ** -0.5), \
        rand(h, i, scale=i ** -0.5)


def _act(gate, activation, approximate):
    if activation == "swiglu":
        return torch.nn.functional.silu(gate)
    return torch.nn.functional.gelu(gate, approximate=approximate)


def _reference(x, wg, wu, wd, activation, approximate):
    """Hugging Face's LlamaMLP (no biases) in float64."""
    return (_act(x @ wg.t(), activation, approximate) * (x @ wu.t())) @ wd.t()


@pytest.mark.parametrize("name", sorted(CASES))
def test_gated_mlp_and_its_gradients_against_float64(cpu_reference, monkeypatch, name):
    activation, approximate, dt, shape, h, i = CASES[name]
    loaded = record_loads(monkeypatch, bundles, "matmul_kernels")
    leaves = [t.requires_grad_() for t in _operands(shape, h, i, DTYPES[dt], 3)]
    y = ops.gated_mlp(*leaves, activation, approximate)
    assert y.shape == shape and y.dtype == DTYPES[dt]
    dy = torch.randn(shape, generator=torch.Generator().manual_seed(4)).to(y.dtype)
    y.backward(dy)
    exact = [t.detach().double().requires_grad_() for t in leaves]
    want = _reference(*exact, activation, approximate)
    want.backward(dy.double())
    assert rel(y, want) < TOL[dt], (name, rel(y, want))
    for what, got, ref in zip(("dx", "dW_gate", "dW_up", "dW_down"), leaves, exact):
        assert got.grad is not None and got.grad.dtype == got.dtype, (name, what)
        assert rel(got.grad, ref.grad) < TOL[dt], (name, what, rel(got.grad, ref.grad))
    # The kernels' module ran, both functions, once configured.
    assert loaded == [specs.gated_mlp_spec(h, i, dt, activation, approximate, target="cpu")]


def test_frozen_weights_get_no_gradient_and_no_product(cpu_reference, monkeypatch):
    """The backward forms only what autograd asks for: with dW_down alone,
    no dh kernel runs; with dx and dW_up, no dW_gate or dW_down."""
    x, wg, wu, wd = _operands((5, 64), 64, 40, torch.bfloat16, 5)
    y, h, gate, up = operators.gated_mlp(x, wg, wu, wd, "swiglu", "tanh")
    dy = torch.randn_like(y)
    called = []
    call = operators.call
    monkeypatch.setattr(operators, "call", lambda op, *a: (called.append(op), call(op, *a))[1])

    class Ctx:
        saved_tensors = (x, wg, wu, wd, h, gate, up)
        config = ("swiglu", "tanh")
    Ctx.needs_input_grad = (False, False, False, True, False, False)
    grads = operators._gated_mlp_grad(Ctx, dy, None, None, None)
    assert [g is None for g in grads] == [True, True, True, False, True, True]
    assert called == []  # no dgate, dup
    Ctx.needs_input_grad = (True, False, True, False, False, False)
    grads = operators._gated_mlp_grad(Ctx, dy, None, None, None)
    assert [g is None for g in grads] == [False, True, False, True, True, True]
    assert called == [operators.gated_mlp_backward]
    # Through autograd: frozen weights get no gradient.
    x.requires_grad_()
    wu.requires_grad_()
    ops.gated_mlp(x, wg, wu, wd).sum().backward()
    assert x.grad is not None and wu.grad is not None
    assert wg.grad is None and wd.grad is None


def test_the_backward_leaves_what_it_saved(cpu_reference):
    """The backward reads the saved gate, up and h and writes fresh
    gradients: a second backward through the graph (retain_graph) gives the
    same gradients."""
    x, wg, wu, wd = (t.requires_grad_() for t in _operands((3, 64), 64, 40, torch.bfloat16, 8))
    y = ops.gated_mlp(x, wg, wu, wd)
    dy = torch.randn_like(y)
    y.backward(dy, retain_graph=True)
    first = [t.grad.clone() for t in (x, wg, wu, wd)]
    for t in (x, wg, wu, wd):
        t.grad = None
    y.backward(dy)
    assert all(torch.equal(a, t.grad) for a, t in zip(first, (x, wg, wu, wd)))


@pytest.mark.parametrize("activation,approximate", [("swiglu", "tanh"), ("geglu", "tanh"),
                                                    ("geglu", "none")])
def test_the_backward_is_the_forwards_derivative(activation, approximate):
    """liger::gated_mlp's backward (liger::gated_mlp_backward's PyTorch form
    of the activations' gradients, then the GEMMs) against float64 finite
    differences, and torch.library's checks of both operators."""
    gen = torch.Generator().manual_seed(0)

    def leaf(*shape):
        return torch.randn(*shape, dtype=torch.float64, generator=gen).requires_grad_()
    x, wg, wu, wd = leaf(2, 3, 6), leaf(4, 6), leaf(4, 6), leaf(6, 4)
    op = operators.gated_mlp
    assert torch.autograd.gradcheck(
        lambda x, wg, wu, wd: op(x, wg, wu, wd, activation, approximate)[0], (x, wg, wu, wd))
    torch.library.opcheck(op, (x, wg, wu, wd, activation, approximate))
    g, u = leaf(3, 4).detach(), leaf(3, 4).detach()
    torch.library.opcheck(operators.gated_mlp_backward,
                          (leaf(3, 6).detach(), wd.detach(), g, u, activation, approximate))


def test_a_configuration_without_kernels_runs_pytorchs_ops(monkeypatch):
    """The operator where no kernel takes the call (f32, a size the
    template refuses, CPU tensors without the reference lowering):
    PyTorch's ops as Hugging Face's MLP computes them, no kernel loaded."""
    loaded = record_loads(monkeypatch, bundles, "matmul_kernels")
    monkeypatch.delenv("LIGER_OPS_CPU_REFERENCE", raising=False)
    ops.clear_caches()
    try:
        _without_kernels(monkeypatch, loaded)
    finally:
        ops.clear_caches()


def _without_kernels(monkeypatch, loaded):
    x, wg, wu, wd = _operands((4, 64), 64, 40, torch.bfloat16, 6)
    L = torch.ops.liger
    y, h, gate, up = L.gated_mlp(x, wg, wu, wd, "swiglu", "tanh")
    assert torch.equal(gate, torch.nn.functional.linear(x, wg))
    assert torch.equal(h, torch.nn.functional.silu(gate) * up)
    assert torch.equal(y, torch.nn.functional.linear(h, wd))
    monkeypatch.setenv("LIGER_OPS_CPU_REFERENCE", "1")
    xf = x[:, :60].float()
    y = L.gated_mlp(xf, wg[:, :60].float(), wu[:, :60].float(), wd[:60].float(), "geglu",
                    "none")[0]
    want = _reference(*[t.double() for t in (xf, wg[:, :60], wu[:, :60], wd[:60])], "geglu",
                      "none")
    assert rel(y, want) < 1e-5
    assert loaded == []


@pytest.mark.parametrize("approximate", ["tanh", "none"])
def test_the_reference_gradient_of_the_activation_is_autograds(approximate):
    """operators.gated_grad_reference (what a call without kernels
    computes) against autograd through PyTorch's own activations."""
    gen = torch.Generator().manual_seed(1)
    g, u, dh = (torch.randn(50, dtype=torch.float64, generator=gen) * 3 for _ in range(3))
    for activation in ("swiglu", "geglu"):
        gl, ul = g.clone().requires_grad_(), u.clone().requires_grad_()
        (_act(gl, activation, approximate) * ul).backward(dh)
        dg, du = operators.gated_grad_reference(dh, g, u, activation, approximate)
        assert torch.allclose(dg, gl.grad, rtol=1e-12, atol=1e-12), activation
        assert torch.allclose(du, ul.grad, rtol=1e-12, atol=1e-12), activation


def test_the_spec_text_round_trips_and_names_its_kernel_options():
    spec = ops.gated_mlp_spec(4096, 14336, torch.bfloat16)
    assert str(spec) == "gated_mlp:activation=swiglu,dtype=bf16,hidden=4096,intermediate=14336"
    assert ops.parse_spec(str(spec)) == spec
    # SiLU has no approximation: one spec whatever is passed.
    assert ops.gated_mlp_spec(4096, 14336, "bf16", approximate="none") == spec
    geglu = ops.gated_mlp_spec(2048, 16384, "f16", "geglu", "none")
    assert str(geglu) == ("gated_mlp:activation=geglu,approximate=none,dtype=f16,hidden=2048,"
                          "intermediate=16384")
    assert ops.parse_spec(str(geglu)) == geglu
    assert spec.compile_options() == dict(target="sm_90a", matmul_kernels=True)
    text = module_command(geglu)
    assert text == geglu.module_text()
    assert "liger.geglu_grad %dh, %g, %u approximate = none" in text


@needs_compiler
@pytest.mark.parametrize("target", ["sm_90a", "sm_80"])
@pytest.mark.parametrize("activation", ["swiglu", "geglu"])
def test_the_spec_compiles_to_two_kernels_of_the_operators_operands(tmp_path, target,
                                                                     activation):
    """The matmul template makes each function one kernel (the
    pair bundles.matmul_kernels loads): @fwd reads x, W_gate, W_up and
    writes gate, up, h; @bwd reads dy, W_down, gate, up and writes dgate,
    dup. Each function returns its group's results in the group's order,
    so that the reference (which runs the functions) and the GPU (which
    runs the kernels) give the operator the same tensors."""
    spec = ops.gated_mlp_spec(512, 1000, "bf16", activation, target=target)
    (path,) = ops.precompile(str(tmp_path), [spec])
    with open(os.path.join(path, "manifest.json")) as f:
        (module,) = json.load(f)["modules"]
    kernels = {k["name"]: k for k in module["kernels"]}
    assert sorted(kernels) == ["bwd_matmul_0", "fwd_matmul_0"]
    shapes = {name: [(p["role"], p["shape"]) for p in k["params"]]
              for name, k in kernels.items()}
    rows, inner = ["rows", 512], ["rows", 1000]
    assert shapes["fwd_matmul_0"] == [("input", rows), ("input", [1000, 512]),
                                      ("input", [1000, 512])] + [("output", inner)] * 3
    assert shapes["bwd_matmul_0"] == [("input", rows), ("input", [512, 1000]),
                                      ("input", inner), ("input", inner)] + [
                                          ("output", inner)] * 2
    assert kernels["bwd_matmul_0"]["ops"] == "liger.linear_grad_input, liger.%s_grad" % activation
    fused = subprocess.run(
        [find_tool("liger-compile"), "-", "--matmul-kernels", "--target=" + target,
         "--emit=fused", "-o", "-"], input=spec.module_text(), capture_output=True, text=True)
    assert fused.returncode == 0, fused.stderr
    returns = re.findall(r"^\s*return (.*?) :", fused.stdout, re.M)
    assert returns == ["%0#0, %0#1, %0#2", "%0#0, %0#1"], fused.stdout
