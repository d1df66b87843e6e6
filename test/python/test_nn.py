"""liger.nn, Liger-Kernel's modules over liger.ops, on the CPU through the
reference lowering: each module against its plain-PyTorch equivalent
(forward, and the gradients of its inputs and parameters), constructor
signatures equal to Liger-Kernel 0.8.5's, and every refused option refused
with its message."""

import inspect
import types

import pytest

torch = pytest.importorskip("torch")
F = torch.nn.functional

from liger import nn  # noqa: E402
from liger.errors import LigerTypeError, LigerValueError  # noqa: E402


@pytest.fixture(autouse=True)
def reference(cpu_reference):
    yield


def _randn(*shape, dtype=torch.float32, scale=1.0):
    g = torch.Generator().manual_seed(sum(shape) * 7 + len(shape))
    return (torch.randn(*shape, generator=g) * scale).to(dtype).requires_grad_(True)


def _close(got, want, tol=1e-5):
    torch.testing.assert_close(got.float(), want.float(), rtol=tol, atol=tol)


def _leaves(module):
    """Detached copies of the module's parameters, for the plain version."""
    return {k: v.detach().clone().requires_grad_(True) for k, v in module.named_parameters()}


# --- the signatures: Liger-Kernel 0.8.5's (liger_kernel.transformers) -----

LIGER_KERNEL_0_8_5 = {
    nn.LigerRMSNorm: ["hidden_size", "eps", "offset", "casting_mode", "init_fn", "in_place",
                      "row_mode", "elementwise_affine"],
    nn.LigerFusedAddRMSNorm: ["hidden_size", "eps", "offset", "casting_mode", "init_fn",
                              "in_place"],
    nn.LigerLayerNorm: ["hidden_size", "eps", "bias", "init_fn", "impl", "mode", "backend"],
    nn.LigerSwiGLUMLP: ["config", "intermediate_size"],
    nn.LigerGEGLUMLP: ["config"],
    nn.LigerCrossEntropyLoss: ["weight", "ignore_index", "lse_square_scale", "label_smoothing",
                               "reduction", "softcap", "return_z_loss",
                               "return_token_accuracy", "return_predicted_tokens"],
    nn.LigerFusedLinearCrossEntropyLoss: [
        "ce_weight", "ignore_index", "lse_square_scale", "label_smoothing", "reduction",
        "softcap", "return_z_loss", "accum_dtype", "use_token_scaling",
        "return_token_accuracy", "return_predicted_tokens"],
}
LIGER_KERNEL_DEFAULTS = {
    nn.LigerRMSNorm: [1e-6, 0.0, "llama", "ones", True, None, True],
    nn.LigerFusedAddRMSNorm: [1e-6, 0.0, "llama", "ones", False],
    nn.LigerLayerNorm: [1e-6, False, "ones", None, None, None],
    nn.LigerSwiGLUMLP: [None],
    nn.LigerGEGLUMLP: [],
    nn.LigerCrossEntropyLoss: [None, -100, 0.0, 0.0, "mean", None, False, False, False],
    nn.LigerFusedLinearCrossEntropyLoss: [None, -100, 0.0, 0.0, "mean", None, False, None,
                                          False, False, False],
}
# liger.ops' options beyond Liger-Kernel's, keyword-only after them.
LIGER_KEYWORDS = {nn.LigerCrossEntropyLoss: ["inplace"],
                  nn.LigerFusedLinearCrossEntropyLoss: ["memory_budget"]}
FORWARDS = {nn.LigerRMSNorm: ["hidden_states"],
            nn.LigerFusedAddRMSNorm: ["hidden_states", "residual"],
            nn.LigerLayerNorm: ["hidden_states"], nn.LigerSwiGLUMLP: ["x"],
            nn.LigerGEGLUMLP: ["x"], nn.LigerCrossEntropyLoss: ["_input", "target"],
            nn.LigerFusedLinearCrossEntropyLoss: ["lin_weight", "_input", "target", "bias"]}


@pytest.mark.parametrize("cls", list(LIGER_KERNEL_0_8_5), ids=lambda c: c.__name__)
def test_the_signatures_are_liger_kernels(cls):
    params = list(inspect.signature(cls.__init__).parameters.values())[1:]
    positional = [p for p in params if p.kind == p.POSITIONAL_OR_KEYWORD]
    assert [p.name for p in positional] == LIGER_KERNEL_0_8_5[cls]
    assert [p.name for p in params if p.kind == p.KEYWORD_ONLY] == LIGER_KEYWORDS.get(cls, [])
    assert len(positional) + len(LIGER_KEYWORDS.get(cls, [])) == len(params)
    defaults = [p.default for p in positional if p.default is not p.empty]
    want = list(LIGER_KERNEL_DEFAULTS[cls])
    if cls is nn.LigerRMSNorm:
        want[4] = False  # in_place: the one value liger computes
    assert defaults == want
    assert list(inspect.signature(cls.forward).parameters)[1:] == FORWARDS[cls]


# --- RMSNorm ---------------------------------------------------------------

def _rms_norm(x, w, eps, offset):
    """RMSNorm in f32 (the three castings agree there)."""
    return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps) * (offset + w)


@pytest.mark.parametrize("kwargs", [
    dict(),
    dict(eps=1e-5, casting_mode="none"),
    dict(offset=1.0, casting_mode="gemma", init_fn="zeros"),
], ids=["llama", "none", "gemma"])
def test_rms_norm_is_pytorchs(kwargs):
    m = nn.LigerRMSNorm(7, **kwargs)
    assert torch.equal(m.weight, torch.full((7,), 1.0 if kwargs.get("init_fn", "ones") ==
                                            "ones" else 0.0))
    with torch.no_grad():
        m.weight.copy_(torch.rand(7) + 0.5)
    w = _leaves(m)["weight"]
    x = _randn(3, 5, 7)
    x2 = x.detach().clone().requires_grad_(True)
    dy = _randn(3, 5, 7).detach()
    y = m(x)
    want = _rms_norm(x2, w, kwargs.get("eps", 1e-6), kwargs.get("offset", 0.0))
    _close(y, want)
    y.backward(dy)
    want.backward(dy)
    _close(x.grad, x2.grad)
    _close(m.weight.grad, w.grad)


@pytest.mark.parametrize("kwargs", [
    dict(),
    dict(eps=1e-5, offset=1.0, casting_mode="gemma", init_fn="zeros"),
], ids=["llama", "gemma"])
def test_fused_add_rms_norm_is_an_add_and_pytorchs_rms_norm(kwargs):
    """forward(hidden_states, residual) -> (the RMSNorm of the sum, the
    sum), as Liger-Kernel's module returns them; both outputs carry
    gradients back to both inputs."""
    m = nn.LigerFusedAddRMSNorm(7, **kwargs)
    assert torch.equal(m.weight, torch.full((7,), 1.0 if kwargs.get("init_fn", "ones") ==
                                            "ones" else 0.0))
    with torch.no_grad():
        m.weight.copy_(torch.rand(7) + 0.5)
    w = _leaves(m)["weight"]
    x, res = _randn(3, 5, 7), _randn(5, 7).expand(3, 5, 7).detach().requires_grad_(True)
    x2, res2 = (t.detach().clone().requires_grad_(True) for t in (x, res))
    y, total = m(x, res)
    want_total = x2 + res2
    want = _rms_norm(want_total, w, kwargs.get("eps", 1e-6), kwargs.get("offset", 0.0))
    _close(total, want_total)
    _close(y, want)
    dy, dtotal = _randn(3, 5, 7).detach(), _randn(5, 3, 7).detach().transpose(0, 1)
    torch.autograd.backward((y, total), (dy, dtotal))
    torch.autograd.backward((want, want_total), (dy, dtotal))
    _close(x.grad, x2.grad)
    _close(res.grad, res2.grad)
    _close(m.weight.grad, w.grad)


@pytest.mark.parametrize("bias", [False, True])
def test_layer_norm_is_pytorchs(bias):
    """Liger-Kernel's parameters: a bias parameter either way (zeros
    without `bias`, trained all the same), the weight as init_fn says."""
    torch.manual_seed(0)
    m = nn.LigerLayerNorm(7, eps=1e-5, bias=bias, init_fn="zeros")
    assert torch.equal(m.weight, torch.zeros(7))
    assert torch.equal(m.bias, torch.zeros(7)) != bias
    assert sorted(m.state_dict()) == ["bias", "weight"]
    with torch.no_grad():
        m.weight.copy_(torch.rand(7) + 0.5)
    p = _leaves(m)
    x = _randn(3, 5, 7, scale=3.0)
    x2 = x.detach().clone().requires_grad_(True)
    y = m(x)
    want = F.layer_norm(x2, (7,), p["weight"], p["bias"], 1e-5)
    _close(y, want)
    dy = _randn(3, 5, 7).detach()
    y.backward(dy)
    want.backward(dy)
    _close(x.grad, x2.grad)
    _close(m.weight.grad, p["weight"].grad)
    _close(m.bias.grad, p["bias"].grad)


def test_layer_norm_takes_pytorchs_weights():
    plain = torch.nn.LayerNorm(8, eps=1e-5)
    with torch.no_grad():
        plain.weight.uniform_(0.5, 1.5)
        plain.bias.normal_()
    m = nn.LigerLayerNorm(8, eps=1e-5)
    m.load_state_dict(plain.state_dict())  # (strict: the same parameters)
    x = _randn(4, 8).detach()
    _close(m(x), plain(x))


# --- the gated MLPs --------------------------------------------------------

def _config(act, **extra):
    return types.SimpleNamespace(**dict(dict(hidden_size=5, intermediate_size=9,
                                             hidden_act=act), **extra))


def _check_mlp(m, act):
    p = _leaves(m)
    x = _randn(2, 3, 5)
    x2 = x.detach().clone().requires_grad_(True)

    def linear(name, v):
        return F.linear(v, p[name + ".weight"], p.get(name + ".bias"))
    want = linear("down_proj", act(linear("gate_proj", x2)) * linear("up_proj", x2))
    y = m(x)
    _close(y, want)
    dy = _randn(2, 3, 5).detach()
    y.backward(dy)
    want.backward(dy)
    _close(x.grad, x2.grad)
    for name, param in m.named_parameters():
        _close(param.grad, p[name].grad)


@pytest.mark.parametrize("act", ["silu", "swish"])
def test_swiglu_mlp_is_pytorchs(act):
    m = nn.LigerSwiGLUMLP(_config(act))
    assert (m.hidden_size, m.intermediate_size) == (5, 9)
    _check_mlp(m, F.silu)


def test_swiglu_mlp_takes_an_intermediate_size_and_the_configs_bias():
    m = nn.LigerSwiGLUMLP(_config("silu", mlp_bias=True), intermediate_size=11)
    assert m.gate_proj.weight.shape == (11, 5) and m.down_proj.bias.shape == (5,)
    _check_mlp(m, F.silu)


@pytest.mark.parametrize("act,approximate", [("gelu_pytorch_tanh", "tanh"), ("gelu", "none")])
def test_geglu_mlp_is_pytorchs(act, approximate):
    # Gemma's configs name the activation hidden_activation; it wins.
    m = nn.LigerGEGLUMLP(_config("silu", hidden_activation=act))
    _check_mlp(m, lambda v: F.gelu(v, approximate=approximate))


@pytest.mark.parametrize("family", ["llama", "gemma"])
def test_the_mlps_take_hugging_faces_configs_and_weights(family):
    transformers = pytest.importorskip("transformers")
    config = getattr(transformers, family.capitalize() + "Config")(
        hidden_size=8, intermediate_size=12, num_attention_heads=2, num_key_value_heads=1,
        head_dim=4)
    module = __import__("transformers.models.%s.modeling_%s" % (family, family),
                        fromlist=["_"])
    hf = getattr(module, family.capitalize() + "MLP")(config)
    m = (nn.LigerSwiGLUMLP if family == "llama" else nn.LigerGEGLUMLP)(config)
    m.load_state_dict(hf.state_dict())  # (strict: the same parameters)
    x = _randn(3, 8).detach()
    _close(m(x), hf(x))


# --- the losses ------------------------------------------------------------

def _cross_entropy(z, t, weight=None, ignore_index=-100, lse_square_scale=0.0,
                   label_smoothing=0.0, reduction="mean", softcap=None):
    """F.cross_entropy with Liger-Kernel's softcap and z-loss."""
    if softcap:
        z = softcap * torch.tanh(z / softcap)
    ce = F.cross_entropy(z, t, weight, ignore_index=ignore_index, reduction=reduction,
                         label_smoothing=label_smoothing)
    counted = t != ignore_index
    zl = lse_square_scale * torch.logsumexp(z, -1).pow(2) * counted
    return ce + {"none": zl, "sum": zl.sum(), "mean": zl.sum() / counted.sum()}[reduction]


TARGETS = torch.tensor([1, 0, -100, 10, 3, 7, 2])
CE_CASES = {
    "default": dict(),
    "weighted_smoothed_sum": dict(weight=torch.rand(11) + 0.5, label_smoothing=0.1,
                                  reduction="sum"),
    "softcap_zloss_mean": dict(softcap=3.0, lse_square_scale=1e-2),
    "none_ignore_index": dict(reduction="none", ignore_index=3),
}


@pytest.mark.parametrize("case", list(CE_CASES))
@pytest.mark.parametrize("inplace", [False, True])
def test_cross_entropy_loss_is_pytorchs(case, inplace):
    kwargs = CE_CASES[case]
    m = nn.LigerCrossEntropyLoss(**kwargs, inplace=inplace)
    x = _randn(7, 11, scale=2.0)
    x2 = x.detach().clone().requires_grad_(True)
    t = TARGETS.where(TARGETS != -100, kwargs.get("ignore_index", -100))
    want = _cross_entropy(x2, t, **kwargs)
    # In place, the gradient is written over the logits: give it a copy.
    loss = m(x.clone() if inplace else x, t)
    _close(loss, want)
    dl = torch.rand(want.shape) + 0.5
    loss.backward(dl)
    want.backward(dl)
    _close(x.grad, x2.grad)


FLCE_CASES = {
    "default": dict(),
    "weighted_smoothed_softcap_sum": dict(ce_weight=torch.rand(24) + 0.5, label_smoothing=0.1,
                                          reduction="sum", softcap=5.0),
    "zloss_f32_accumulation": dict(lse_square_scale=1e-2, accum_dtype=torch.float32),
    # Per token: the backward runs the chunks again with each token's
    # incoming gradient.
    "none_weighted_smoothed_zloss": dict(reduction="none", ce_weight=torch.rand(24) + 0.5,
                                         label_smoothing=0.1, lse_square_scale=1e-2),
    "none_f32_accumulation_softcap": dict(reduction="none", accum_dtype=torch.float32,
                                          softcap=5.0),
}


@pytest.mark.parametrize("case", list(FLCE_CASES))
def test_fused_linear_cross_entropy_loss_is_pytorchs(case):
    kwargs = FLCE_CASES[case]
    # A memory budget of two rows of logits: the tokens go in four chunks.
    m = nn.LigerFusedLinearCrossEntropyLoss(**kwargs, memory_budget=2 * 24 * 2)
    h, w = _randn(7, 16, dtype=torch.bfloat16), _randn(24, 16, dtype=torch.bfloat16)
    h2, w2 = (v.detach().clone().requires_grad_(True) for v in (h, w))
    ref = {k.replace("ce_weight", "weight"): v for k, v in kwargs.items() if k != "accum_dtype"}
    want = _cross_entropy((h2.float() @ w2.float().T), TARGETS, **ref)
    loss = m(w, h, TARGETS)
    assert loss.shape == want.shape
    _close(loss, want, 2e-2)
    # A scalar's incoming gradient, or one per token (ignored ones too).
    dl = torch.tensor(0.75) if want.dim() == 0 else torch.linspace(-1.0, 2.0, 7)
    loss.backward(dl)
    want.backward(dl)
    _close(h.grad, h2.grad, 2e-2)
    _close(w.grad, w2.grad, 2e-2)


# --- what liger does not compute: refused, with the whole message ----------

def _refused(module, option, value, why):
    return LigerValueError, "liger.nn.%s: %s=%r is not supported (%s)" % (
        module, option, value, why)


REFUSED = {
    "rms_norm_in_place": (lambda: nn.LigerRMSNorm(7, in_place=True), *_refused(
        "LigerRMSNorm", "in_place", True,
        "liger's RMSNorm backward writes its own dx, not over the incoming gradient")),
    "rms_norm_row_mode": (lambda: nn.LigerRMSNorm(7, row_mode=True), *_refused(
        "LigerRMSNorm", "row_mode", True, "liger chooses the kernel's row layout")),
    "rms_norm_no_affine": (lambda: nn.LigerRMSNorm(7, elementwise_affine=False), *_refused(
        "LigerRMSNorm", "elementwise_affine", False, "liger.ops.rms_norm scales by a weight")),
    "rms_norm_in_place_not_bool": (
        lambda: nn.LigerRMSNorm(7, in_place=0), LigerTypeError,
        "liger.nn.LigerRMSNorm: in_place must be a bool, got 0"),
    "rms_norm_init_fn": (
        lambda: nn.LigerRMSNorm(7, init_fn="normal"), LigerValueError,
        "liger.nn.LigerRMSNorm: init_fn must be one of 'ones', 'zeros', got 'normal'"),
    "rms_norm_casting_mode": (
        lambda: nn.LigerRMSNorm(7, casting_mode="llama3"), LigerValueError,
        "liger.nn.LigerRMSNorm: casting_mode must be one of 'llama', 'gemma', 'none', got 'llama3'"),
    "rms_norm_eps": (
        lambda: nn.LigerRMSNorm(7, eps=0.0), LigerValueError,
        "liger.nn.LigerRMSNorm: eps must be > 0.0, got 0.0"),
    "rms_norm_hidden_size": (
        lambda: nn.LigerRMSNorm(0), LigerValueError,
        "liger.nn.LigerRMSNorm: hidden_size must be in [1, 2147483647], got 0"),
    "add_rms_norm_in_place": (lambda: nn.LigerFusedAddRMSNorm(7, in_place=True), *_refused(
        "LigerFusedAddRMSNorm", "in_place", True,
        "liger's add + RMSNorm backward writes its own gradient, not over the incoming one")),
    "add_rms_norm_in_place_not_bool": (
        lambda: nn.LigerFusedAddRMSNorm(7, in_place=None), LigerTypeError,
        "liger.nn.LigerFusedAddRMSNorm: in_place must be a bool, got None"),
    "add_rms_norm_init_fn": (
        lambda: nn.LigerFusedAddRMSNorm(7, init_fn="ones_"), LigerValueError,
        "liger.nn.LigerFusedAddRMSNorm: init_fn must be one of 'ones', 'zeros', got 'ones_'"),
    "add_rms_norm_casting_mode": (
        lambda: nn.LigerFusedAddRMSNorm(7, casting_mode="fp32"), LigerValueError,
        "liger.nn.LigerFusedAddRMSNorm: casting_mode must be one of 'llama', 'gemma', 'none', "
        "got 'fp32'"),
    "add_rms_norm_offset": (
        lambda: nn.LigerFusedAddRMSNorm(7, offset=float("inf")), LigerValueError,
        "liger.nn.LigerFusedAddRMSNorm: offset must be finite, got inf"),
    "add_rms_norm_hidden_size": (
        lambda: nn.LigerFusedAddRMSNorm(2 ** 31), LigerValueError,
        "liger.nn.LigerFusedAddRMSNorm: hidden_size must be in [1, 2147483647], got "
        "2147483648"),
    "add_rms_norm_residual_shape": (
        lambda: nn.LigerFusedAddRMSNorm(7)(torch.ones(3, 7), torch.ones(7)), LigerValueError,
        "liger.ops.add_rms_norm: residual must have the shape of x [3, 7], got [7]"),
    "layer_norm_impl": (lambda: nn.LigerLayerNorm(7, impl="triton"), *_refused(
        "LigerLayerNorm", "impl", "triton", "liger chooses its kernels")),
    "layer_norm_mode": (lambda: nn.LigerLayerNorm(7, mode="fast"), *_refused(
        "LigerLayerNorm", "mode", "fast", "liger chooses its kernels")),
    "layer_norm_backend": (lambda: nn.LigerLayerNorm(7, backend="triton"), *_refused(
        "LigerLayerNorm", "backend", "triton", "liger chooses its kernels")),
    "layer_norm_bias_not_bool": (
        lambda: nn.LigerLayerNorm(7, bias=1), LigerTypeError,
        "liger.nn.LigerLayerNorm: bias must be a bool, got 1"),
    "layer_norm_init_fn": (
        lambda: nn.LigerLayerNorm(7, init_fn="normal"), LigerValueError,
        "liger.nn.LigerLayerNorm: init_fn must be one of 'ones', 'zeros', got 'normal'"),
    "layer_norm_eps": (
        lambda: nn.LigerLayerNorm(7, eps=-1e-5), LigerValueError,
        "liger.nn.LigerLayerNorm: eps must be > 0.0, got -1e-05"),
    "layer_norm_hidden_size": (
        lambda: nn.LigerLayerNorm(1.5), LigerTypeError,
        "liger.nn.LigerLayerNorm: hidden_size must be an int, got 1.5"),
    "layer_norm_input_size": (
        lambda: nn.LigerLayerNorm(7)(torch.ones(3, 8)), LigerValueError,
        "liger.ops.layer_norm: weight must have shape [8] (the hidden size of x), got [7]"),
    "swiglu_activation": (
        lambda: nn.LigerSwiGLUMLP(_config("gelu")), LigerValueError,
        "liger.nn.LigerSwiGLUMLP: the config's activation 'gelu' is not supported "
        "(liger.ops.swiglu computes silu or swish)"),
    "geglu_activation": (
        lambda: nn.LigerGEGLUMLP(_config("relu")), LigerValueError,
        "liger.nn.LigerGEGLUMLP: the config's activation 'relu' is not supported "
        "(liger.ops.geglu computes gelu_pytorch_tanh or gelu)"),
    "swiglu_activation_not_a_name": (
        lambda: nn.LigerSwiGLUMLP(_config(["silu"])), LigerValueError,
        "liger.nn.LigerSwiGLUMLP: the config's activation ['silu'] is not supported "
        "(liger.ops.swiglu computes silu or swish)"),
    "mlp_no_hidden_size": (
        lambda: nn.LigerSwiGLUMLP(types.SimpleNamespace(intermediate_size=9)), LigerValueError,
        "liger.nn.LigerSwiGLUMLP: the config (SimpleNamespace) has no hidden_size"),
    "mlp_hidden_size": (
        lambda: nn.LigerGEGLUMLP(_config("gelu", hidden_size=-5)), LigerValueError,
        "liger.nn.LigerGEGLUMLP: hidden_size must be in [1, 9223372036854775807], got -5"),
    "mlp_intermediate_size": (
        lambda: nn.LigerSwiGLUMLP(_config("silu"), intermediate_size=0), LigerValueError,
        "liger.nn.LigerSwiGLUMLP: intermediate_size must be in [1, 2147483647], got 0"),
    "ce_label_smoothing": (
        lambda: nn.LigerCrossEntropyLoss(label_smoothing=1.5), LigerValueError,
        "liger.nn.LigerCrossEntropyLoss: label_smoothing must be <= 1.0, got 1.5"),
    "ce_reduction": (
        lambda: nn.LigerCrossEntropyLoss(reduction="avg"), LigerValueError,
        "liger.nn.LigerCrossEntropyLoss: reduction must be one of 'mean', 'sum', 'none', "
        "got 'avg'"),
    "ce_softcap": (
        lambda: nn.LigerCrossEntropyLoss(softcap=-1.0), LigerValueError,
        "liger.nn.LigerCrossEntropyLoss: softcap must be None, 0 (no softcap) or > 0, "
        "got -1.0"),
    "ce_inplace_not_bool": (
        lambda: nn.LigerCrossEntropyLoss(inplace=1), LigerTypeError,
        "liger.nn.LigerCrossEntropyLoss: inplace must be a bool, got 1"),
    "flce_use_token_scaling": (
        lambda: nn.LigerFusedLinearCrossEntropyLoss(use_token_scaling=True), *_refused(
            "LigerFusedLinearCrossEntropyLoss", "use_token_scaling", True,
            "liger.ops.fused_linear_cross_entropy weighs every token alike")),
    "flce_accum_dtype": (
        lambda: nn.LigerFusedLinearCrossEntropyLoss(accum_dtype=torch.bfloat16),
        LigerValueError,
        "liger.nn.LigerFusedLinearCrossEntropyLoss: accum_dtype=torch.bfloat16 is not "
        "supported (None sums the weight gradient in the weight's dtype, torch.float32 in "
        "f32)"),
    "flce_reduction": (
        lambda: nn.LigerFusedLinearCrossEntropyLoss(reduction="avg"), LigerValueError,
        "liger.nn.LigerFusedLinearCrossEntropyLoss: reduction must be one of 'mean', 'sum', "
        "'none', got 'avg'"),
    "flce_weighted_zloss_mean": (
        lambda: nn.LigerFusedLinearCrossEntropyLoss(ce_weight=torch.ones(8),
                                                    lse_square_scale=1e-4),
        LigerValueError,
        "liger.nn.LigerFusedLinearCrossEntropyLoss: liger.ops.fused_linear_cross_entropy: "
        "class weights with a z-loss and reduction=mean divide the two terms by different "
        "totals; use liger.ops.cross_entropy on materialized logits"),
    "flce_memory_budget": (
        lambda: nn.LigerFusedLinearCrossEntropyLoss(memory_budget=0), LigerValueError,
        "liger.nn.LigerFusedLinearCrossEntropyLoss: memory_budget must be in "
        "[1, 9223372036854775807], got 0"),
}

# Liger-Kernel's extra outputs that liger does not compute (both losses
# return the z-loss: test_cross_entropy.py, test_fused_linear_cross_entropy.py).
for _loss in (nn.LigerCrossEntropyLoss, nn.LigerFusedLinearCrossEntropyLoss):
    for _flag in ("return_token_accuracy", "return_predicted_tokens"):
        REFUSED["%s_%s" % (_loss.__name__, _flag)] = (
            lambda loss=_loss, flag=_flag: loss(**{flag: True}),
            *_refused(_loss.__name__, _flag, True,
                      "liger.ops returns the loss and the z-loss alone"))


@pytest.mark.parametrize("case", list(REFUSED))
def test_an_option_liger_does_not_compute_is_refused(case):
    make, kind, message = REFUSED[case]
    with pytest.raises(kind) as e:
        make()
    assert str(e.value) == message
