"""liger.ops.lora_linear and its operators liger::lora_linear and
liger::lora_linear_backward on the CPU: against PEFT's LoRA Linear, output
and every gradient (x, the base weight and bias, A, B), in bf16 through the
kernels' module (the reference lowering, LIGER_OPS_CPU_REFERENCE=1: the
forward's @fwd, dx's @bwd) and in f32 (a configuration with no kernel:
PyTorch's ops, the layer's own); the backward against float64 finite
differences; which path a configuration takes; the spec's module as
liger-compile makes it two kernels whose parameters are the operators'
operands in order."""

import json
import os

import pytest
from ops_helpers import module_command, needs_compiler, record_loads, rel

torch = pytest.importorskip("torch")
peft = pytest.importorskip("peft")

from liger import bundles, operators, ops, specs  # noqa: E402
from liger.driver import LigerError, find_tool  # noqa: E402

DTYPES = {"f32": torch.float32, "bf16": torch.bfloat16}
# Output and gradients against PEFT's layer, max |difference| over max
# |PEFT's|: f32 runs the same ops (the gradients in another order); bf16
# rounds once in the kernel where PyTorch rounds between its ops.
TOL = {"f32": 1e-6, "bf16": 1e-2}


def peft_layer(k, n, r, alpha, bias, dtype, seed=0):
    """PEFT's LoRA Linear over a Linear [n, k] (trainable too), adapter
    "default" of rank r with random A and B (B is 0 by PEFT's default)."""
    torch.manual_seed(seed)
    holder = torch.nn.Module()
    holder.proj = torch.nn.Linear(k, n, bias=bias).to(dtype)
    model = peft.get_peft_model(holder, peft.LoraConfig(
        r=r, lora_alpha=alpha, lora_dropout=0.0, init_lora_weights=False,
        target_modules=["proj"]), autocast_adapter_dtype=False)
    layer = model.base_model.model.proj
    layer.base_layer.requires_grad_(True)
    return layer


def _operands(layer):
    """x's partners in liger::lora_linear's order: weight, bias, A, B, scale."""
    return (layer.base_layer.weight, layer.base_layer.bias, layer.lora_A["default"].weight,
            layer.lora_B["default"].weight, layer.scaling["default"])


def _grads(layer, x):
    return [x.grad] + [t.grad for t in _operands(layer)[:4] if t is not None]


@pytest.mark.parametrize("bias", [True, False], ids=["bias", "no_bias"])
@pytest.mark.parametrize("dtype", ["f32", "bf16"])
def test_the_operator_is_pefts_layer(cpu_reference, monkeypatch, dtype, bias):
    """x [2, 5, 64] through a [48, 64] projection of rank 16, scale 2
    (lora_alpha 32): bf16 through liger.ops.lora_linear (the kernel's
    module), f32 through the operator (PyTorch's ops: f32 has no kernel),
    every gradient of a trainable base and adapter."""
    loaded = record_loads(monkeypatch, bundles, "matmul_kernels")
    dt = DTYPES[dtype]
    layer = peft_layer(64, 48, 16, 32, bias, dt)
    gen = torch.Generator().manual_seed(1)
    x = torch.randn(2, 5, 64, generator=gen).to(dt).requires_grad_()
    dy = torch.randn(2, 5, 48, generator=gen).to(dt)
    want = layer(x)
    want.backward(dy)
    wanted = [g.clone() for g in _grads(layer, x)]
    layer.zero_grad()
    x.grad = None
    # (f32: the operator keeping x·Aᵀ for dB, as liger.ops does where B trains)
    call = ops.lora_linear if dtype == "bf16" else \
        (lambda *args: torch.ops.liger.lora_linear(*args, True)[0])
    assert layer.scaling["default"] == 2.0
    y = call(x, *_operands(layer))
    y.backward(dy)
    assert y.shape == want.shape and y.dtype == want.dtype
    if dtype == "f32":
        assert torch.equal(y, want)  # PEFT's ops, in its order
        assert loaded == []
    else:
        assert rel(y, want) < TOL[dtype]
        assert loaded == [specs.lora_linear_spec(64, 48, 16, "bf16", 2.0, bias, target="cpu")]
    got = _grads(layer, x)
    assert len(got) == len(wanted) == (5 if bias else 4)
    for name, g, w in zip(("x", "weight", "bias", "A", "B") if bias else
                          ("x", "weight", "A", "B"), got, wanted):
        assert g is not None and g.dtype == w.dtype, name
        assert rel(g, w) < TOL[dtype], (name, rel(g, w))


def test_a_frozen_base_gets_no_gradient(cpu_reference):
    """As under PEFT: the base weight frozen, only x and the adapter get
    gradients (autograd asks for no dW)."""
    layer = peft_layer(64, 48, 16, 32, False, torch.bfloat16)
    layer.base_layer.weight.requires_grad_(False)
    x = torch.randn(7, 64, dtype=torch.bfloat16, requires_grad=True)
    ops.lora_linear(x, *_operands(layer)).sum().backward()
    w, _, a, b, _ = _operands(layer)
    assert w.grad is None and x.grad is not None and a.grad is not None and b.grad is not None


@pytest.mark.parametrize("bias", [True, False], ids=["bias", "no_bias"])
def test_the_backward_is_the_forwards_derivative(bias):
    """liger::lora_linear's backward (the scale on the rank-r products)
    against float64 finite differences (float64 has no kernel: PyTorch's
    ops), and torch.library's checks."""
    gen = torch.Generator().manual_seed(0)

    def leaf(*shape):
        return torch.randn(*shape, dtype=torch.float64, generator=gen).requires_grad_()
    x, w, a, b = leaf(3, 5, 7), leaf(6, 7), leaf(2, 7), leaf(6, 2)
    c = leaf(6) if bias else None
    for keep_mid in (False, True):  # x·Aᵀ recomputed, or kept by the forward
        def op(x, w, c, a, b):
            return operators.lora_linear(x, w, c, a, b, 0.75, keep_mid)[0]
        assert torch.autograd.gradcheck(lambda x, w, a, b: op(x, w, c, a, b), (x, w, a, b))
        if bias:
            assert torch.autograd.gradcheck(lambda c: op(x, w, c, a, b), (c,))
        # A differentiated backward (create_graph) keeps PyTorch's form.
        assert torch.autograd.gradgradcheck(lambda x, a, b: op(x, w, c, a, b), (x, a, b))
        torch.library.opcheck(operators.lora_linear, (x, w, c, a, b, 0.75, keep_mid))


def test_the_backward_operator_is_dx_and_the_scaled_rank_r_gradient(cpu_reference):
    """liger::lora_linear_backward: dx = dy·W + s·(dy·B)·A and dmid =
    s·dy·B, by the spec's @bwd (the projection of dy with Wᵀ, Bᵀ, Aᵀ)
    against float64 on odd rows and widths, the bias flag only naming the
    forward's spec; PyTorch's form (f32: no kernel) against float64 too;
    torch.library's checks."""
    gen = torch.Generator().manual_seed(3)
    for rows, k, n, r, bias in ((7, 72, 40, 16, False), (3, 64, 48, 32, True)):
        dy = torch.randn(rows, n, generator=gen).bfloat16()
        w, a, b = (torch.randn(n, k, generator=gen).bfloat16(),
                   torch.randn(r, k, generator=gen).bfloat16(),
                   torch.randn(n, r, generator=gen).bfloat16())
        d, w64, a64, b64 = (t.double() for t in (dy, w, a, b))
        want_mid = 0.5 * d @ b64
        want_dx = d @ w64 + want_mid @ a64
        dx, dmid = operators.lora_linear_backward(dy, w, a, b, 0.5, bias)
        assert dx.shape == (rows, k) and dmid.shape == (rows, r)
        assert dx.dtype == dmid.dtype == torch.bfloat16
        assert rel(dx, want_dx) < TOL["bf16"] and rel(dmid, want_mid) < TOL["bf16"]
        # f32: PyTorch's matmuls.
        dx32, dmid32 = operators.lora_linear_backward(dy.float(), w.float(), a.float(),
                                                      b.float(), 0.5, bias)
        assert rel(dx32, want_dx) < 1e-5 and rel(dmid32, want_mid) < 1e-5
    torch.library.opcheck(operators.lora_linear_backward,
                          (dy.float(), w.float(), a.float(), b.float(), 0.5, True))


class _HandingOverKernel:
    """A stand-in for a GPU dx kernel that hands dy·B between its column
    tiles: two workspaces, the first left holding dy·B in f32 (the
    runtime's Kernel's interface); with `hands_over` False, one of a
    single column tile: no workspaces."""

    def __init__(self, hands_over=True):
        self.calls, self.hands_over = [], hands_over

    def workspace_shapes(self, inputs):
        w, dy, bt, at = inputs
        return [[dy.shape[0], bt.shape[0]], [dy.shape[0]]] if self.hands_over else []

    def __call__(self, w, dy, bt, at, workspaces=None):
        self.calls.append([t.shape for t in (w, dy, bt, at)])
        if self.hands_over:
            products, flags = workspaces
            products.copy_(dy.float() @ bt.float().t())
            flags.fill_(1.0)
        else:
            assert workspaces == []
        return (dy.float() @ w.float() + 2.0 * (dy @ bt.t()).float() @ at.float().t()).to(dy.dtype)


def test_the_backward_operator_takes_dmid_from_the_kernels_products(monkeypatch):
    """Where the dx kernel hands dy·B over, liger::lora_linear_backward
    passes it W, dy as rows, Bᵀ and Aᵀ, and forms dmid = scale·dy·B from
    the products workspace (no PyTorch product of dy and B), shaped as
    dy's rows."""
    kernel = _HandingOverKernel()
    monkeypatch.setattr(operators, "_lora_kernels", lambda *args: (None, kernel))
    monkeypatch.setattr(torch.Tensor, "matmul", None)  # dy·B by PyTorch: refused
    gen = torch.Generator().manual_seed(4)
    dy, w = torch.randn(2, 3, 40, generator=gen).bfloat16(), torch.randn(40, 24, generator=gen)
    a, b = torch.randn(16, 24, generator=gen), torch.randn(40, 16, generator=gen)
    w, a, b = w.bfloat16(), a.bfloat16(), b.bfloat16()
    dx, dmid = operators.lora_linear_backward(dy, w, a, b, 2.0, False)
    assert kernel.calls == [[(40, 24), (6, 40), (16, 40), (24, 16)]]
    assert dx.shape == (2, 3, 24) and dmid.shape == (2, 3, 16) and dmid.dtype == torch.bfloat16
    want = 2.0 * dy.double().reshape(6, 40) @ b.double()
    assert rel(dmid.reshape(6, 16), want) < TOL["bf16"]


def test_without_a_hand_over_the_backward_operator_forms_dmid(monkeypatch):
    """A dx kernel of one column tile leaves no products: dx is still the
    kernel's, dmid PyTorch's scale·dy·B."""
    kernel = _HandingOverKernel(hands_over=False)
    monkeypatch.setattr(operators, "_lora_kernels", lambda *args: (None, kernel))
    gen = torch.Generator().manual_seed(5)
    dy, w = torch.randn(7, 40, generator=gen).bfloat16(), torch.randn(40, 24, generator=gen)
    a, b = torch.randn(16, 24, generator=gen).bfloat16(), torch.randn(40, 16, generator=gen)
    dx, dmid = operators.lora_linear_backward(dy, w.bfloat16(), a, b.bfloat16(), 0.5, True)
    assert len(kernel.calls) == 1 and dx.shape == (7, 24) and dmid.shape == (7, 16)
    assert rel(dmid, 0.5 * dy.double() @ b.bfloat16().double()) < TOL["bf16"]


class _ForwardKernel:
    """A stand-in for a GPU LoRA forward kernel that hands x·Aᵀ between its
    column tiles: two workspaces (the runtime allocates them where the
    caller gives none), the first left holding x·Aᵀ in f32."""

    def __init__(self):
        self.given = []

    def workspace_shapes(self, inputs):
        x, w, a, b = inputs[:4]
        return [[x.shape[0], a.shape[0]], [x.shape[0]]]

    def __call__(self, x, w, a, b, *bias, workspaces=None):
        self.given.append(workspaces is not None)
        products = (x.float() @ a.float().t())
        if workspaces is not None:
            workspaces[0].copy_(products)
            workspaces[1].fill_(1.0)
        t = products.to(x.dtype).float()
        return (x.float() @ w.float().t() + 2.0 * t @ b.float().t()).to(x.dtype)


def test_the_forward_keeps_x_at_from_the_kernels_products(cpu_reference, monkeypatch):
    """Where B trains, liger.ops.lora_linear's forward keeps x·Aᵀ as its
    kernel leaves it (the products workspace, rounded to the dtype) and
    its backward forms dB from that, recomputing nothing (F.linear of x
    and A refused once the forward has run); where nothing trains B (or
    autograd is off) the kernel's workspaces are the runtime's and
    nothing is kept."""
    kernel = _ForwardKernel()
    monkeypatch.setattr(operators, "_lora_kernels", lambda *args: (kernel, None))
    gen = torch.Generator().manual_seed(6)
    x, w = torch.randn(2, 3, 24, generator=gen), torch.randn(40, 24, generator=gen)
    a, b = torch.randn(16, 24, generator=gen), torch.randn(40, 16, generator=gen)
    x, w, a, b = (t.bfloat16().requires_grad_() for t in (x, w, a, b))
    linear = torch.nn.functional.linear

    def no_recompute(inp, weight, bias=None):
        assert weight is not a, "x·Aᵀ formed by PyTorch, not kept from the kernel"
        return linear(inp, weight, bias)
    monkeypatch.setattr(torch.nn.functional, "linear", no_recompute)
    y = ops.lora_linear(x, w, None, a, b, 2.0)
    assert kernel.given == [True]
    dy = torch.randn(2, 3, 40, generator=gen).bfloat16()
    y.backward(dy)
    monkeypatch.setattr(torch.nn.functional, "linear", linear)
    x64, w64, a64, b64 = (t.detach().double().requires_grad_() for t in (x, w, a, b))
    want = x64 @ w64.t() + 2.0 * (x64 @ a64.t()) @ b64.t()
    want.backward(dy.double())
    assert rel(y, want) < TOL["bf16"]
    for name, got, ref in (("x", x, x64), ("W", w, w64), ("A", a, a64), ("B", b, b64)):
        assert rel(got.grad, ref.grad) < TOL["bf16"], name
    # B frozen, or no autograd: the runtime's workspaces, nothing kept.
    b.requires_grad_(False)
    ops.lora_linear(x, w, None, a, b, 2.0)
    with torch.no_grad():
        ops.lora_linear(x, w, None, a, b.requires_grad_(), 2.0)
    assert kernel.given == [True, False, False]


def test_a_configuration_without_a_kernel_runs_pytorchs_ops(monkeypatch):
    """What the torch.compile backend's operator computes where no kernel
    takes the layer (a rank of 8, f32, or CPU tensors without the reference
    lowering): PyTorch's ops in PEFT's order, no kernel loaded; with a
    kernel, the kernel."""
    loaded = record_loads(monkeypatch, bundles, "matmul_kernels")
    monkeypatch.delenv("LIGER_OPS_CPU_REFERENCE", raising=False)
    ops.clear_caches()
    gen = torch.Generator().manual_seed(2)
    bf = dict(dtype=torch.bfloat16)
    x, w, a, b = (torch.randn(4, 64, generator=gen, **bf), torch.randn(48, 64, generator=gen, **bf),
                  torch.randn(16, 64, generator=gen, **bf), torch.randn(48, 16, generator=gen,
                                                                         **bf))
    want = operators.lora_reference(x, w, None, a, b, 2.0)
    y, mid = torch.ops.liger.lora_linear(x, w, None, a, b, 2.0)
    assert torch.equal(y, want) and mid.numel() == 0
    y, mid = torch.ops.liger.lora_linear(x, w, None, a, b, 2.0, True)
    assert torch.equal(y, want) and torch.equal(mid, torch.nn.functional.linear(x, a))
    monkeypatch.setenv("LIGER_OPS_CPU_REFERENCE", "1")
    assert torch.equal(torch.ops.liger.lora_linear(x, w, None, a[:8], b[:, :8], 2.0)[0],
                       operators.lora_reference(x, w, None, a[:8], b[:, :8], 2.0))
    assert loaded == []
    try:
        find_tool("liger-cpu-runner")
    except LigerError:
        return
    y, mid = torch.ops.liger.lora_linear(x, w, None, a, b, 2.0, True)
    assert [s.op for s in loaded] == ["lora_linear"] and rel(y, want) < TOL["bf16"]
    # (The reference lowering's kernel has no workspace: mid is PyTorch's.)
    assert torch.equal(mid, torch.nn.functional.linear(x, a))
    # No rows (the backend's operator on an empty batch): no launch.
    empty, mid = torch.ops.liger.lora_linear(x[:0], w, None, a, b, 2.0, True)
    assert empty.shape == (0, 48) and empty.dtype == torch.bfloat16 and mid.shape == (0, 16)
    ops.clear_caches()


def test_the_spec_text_round_trips_and_names_its_kernel_options():
    spec = ops.lora_linear_spec(4096, 1024, 32, torch.float16, scale=0.5, bias=True)
    assert str(spec) == ("lora_linear:bias=1,dtype=f16,in_features=4096,out_features=1024,"
                         "rank=32,scale=0.5")
    assert ops.parse_spec(str(spec)) == spec
    assert spec.compile_options() == dict(target="sm_90a", matmul_kernels=True)
    text = module_command(spec)
    assert text == spec.module_text()
    assert "liger.lora_linear %x, %w, %a, %b, %c scale = 5.000000000e-01" in text


@needs_compiler
@pytest.mark.parametrize("bias", [True, False], ids=["bias", "no_bias"])
def test_the_spec_compiles_to_one_kernel_of_the_operators_operands(tmp_path, bias):
    """The matmul template makes the module two kernels, the ones
    bundles.matmul_kernels loads: the forward reading x, W, A, B and the
    bias in the operator's order, and dx reading W (MN-major, in place),
    dy, Bᵀ and Aᵀ."""
    spec = ops.lora_linear_spec(520, 1000, 16, "bf16", scale=2.0, bias=bias)
    (path,) = ops.precompile(str(tmp_path), [spec])
    with open(os.path.join(path, "manifest.json")) as f:
        (module,) = json.load(f)["modules"]
    fwd, bwd = module["kernels"]
    assert fwd["name"] == "fwd_matmul_0" and fwd["ops"] == "liger.lora_linear"
    assert bwd["name"] == "bwd_matmul_0"
    assert bwd["ops"] == "tensor.empty, linalg.transpose, liger.lora_linear"
    shapes = [(p["role"], p["shape"]) for p in fwd["params"]]
    # (4 column tiles: the rows' x·Aᵀ and its flags are handed over
    # through two workspaces the runtime allocates.)
    hand_over = [("workspace", ["rows", 16]), ("workspace", ["rows"])]
    assert shapes == [("input", ["rows", 520]), ("input", [1000, 520]), ("input", [16, 520]),
                      ("input", [1000, 16])] + ([("input", [1000])] if bias else []) + [
                          ("output", ["rows", 1000])] + hand_over
    # dx: 3 column tiles of 256 (W's 64-column boxes), dy·B handed over.
    assert [(p["role"], p["shape"]) for p in bwd["params"]] == [
        ("input", [1000, 520]), ("input", ["rows", 1000]), ("input", [16, 1000]),
        ("input", [520, 16]), ("output", ["rows", 520])] + hand_over
