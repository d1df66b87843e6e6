"""The fused linear cross-entropy's bias and z-loss (liger.ops.fused_linear_
cross_entropy's `bias` and `return_z_loss`, liger.nn.LigerFusedLinearCross
EntropyLoss's) on the CPU through the reference lowering, against float64
PyTorch holding every logit (x · Wᵀ + b rounded to bf16, as the op's meaning
says): the loss, the z-loss and the gradients of hidden, weight and bias, in
several chunks (a small memory budget; the last chunk partial), at odd token
counts, with ignored tokens, for each reduction, with a bias that requires
its gradient and one that does not; the z-loss carries no gradient of its
own; Liger-Kernel's module arguments and output; each refused call with its
message."""

import dataclasses
import os
import sys

import pytest

torch = pytest.importorskip("torch")

from liger import nn, ops  # noqa: E402
from liger.errors import LigerTypeError, LigerValueError  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from test_cross_entropy import losses_of_logits  # noqa: E402

H, V = 16, 40  # (V: not a multiple of the chunk's rows, nor of 16)


@pytest.fixture(autouse=True)
def reference(cpu_reference):
    yield


def _inputs(n, seed, weighted=False):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(n, H, generator=g).to(torch.bfloat16)
    w = (torch.randn(V, H, generator=g) / 2).to(torch.bfloat16)
    b = torch.randn(V, generator=g).to(torch.bfloat16)
    t = torch.randint(0, V, (n,), generator=g)
    t[1::4] = -100
    cw = torch.rand(V, generator=g) + 0.5 if weighted else None
    return x, w, b, t, cw


def _plain(x, w, b, t, cw, **kw):
    """(loss, z_loss) in float64 from the logits held whole, rounded to bf16
    as the op's meaning says: the cross-entropy on logits' reference."""
    z = x @ w.T
    if b is not None:
        z = z + b
    return losses_of_logits(z.to(torch.bfloat16).double(), t, cw, **kw)


# name -> (tokens, rows of one chunk, options). A chunk of `rows` rows of
# logits: memory_budget = rows · V · 2 bytes.
CASES = {
    "bias_mean_77_tokens_smoothed": (77, 32, dict(label_smoothing=0.1, lse_square_scale=1e-2)),
    "frozen_bias_sum_300_tokens_weighted_softcap_f32_dw": (
        300, 128, dict(reduction="sum", softcap=5.0, weighted=True, dw_f32=True,
                       lse_square_scale=1e-3, frozen_bias=True)),
    "bias_none_7_tokens": (7, 2, dict(reduction="none", lse_square_scale=1e-2)),
    "bias_mean_one_token": (1, 1, dict(lse_square_scale=1e-2)),
    "frozen_bias_none_77_tokens_weighted": (77, 32, dict(reduction="none", weighted=True,
                                                         frozen_bias=True)),
    "no_bias_sum_77_tokens": (77, 32, dict(reduction="sum", lse_square_scale=1e-2,
                                           no_bias=True)),
}


@pytest.mark.parametrize("case", list(CASES))
def test_the_loss_z_loss_and_gradients_are_plain_pytorchs(case):
    n, rows, kw = CASES[case]
    kw = dict(kw)
    frozen, no_bias, weighted = (kw.pop(k, False) for k in ("frozen_bias", "no_bias", "weighted"))
    x, w, b, t, cw = _inputs(n, len(case), weighted)
    b = None if no_bias else b
    lx, lw = x.clone().requires_grad_(True), w.clone().requires_grad_(True)
    lb = None if b is None else b.clone().requires_grad_(not frozen)
    loss, z_loss = ops.fused_linear_cross_entropy(lx, lw, t, cw, memory_budget=rows * V * 2,
                                                  bias=lb, return_z_loss=True, **kw)
    px, pw = x.double().requires_grad_(True), w.double().requires_grad_(True)
    pb = None if b is None else b.double().requires_grad_(not frozen)
    kw.pop("dw_f32", None)
    want, want_z = _plain(px, pw, pb, t, cw, **kw)
    assert loss.dtype == z_loss.dtype == torch.float32
    assert loss.shape == z_loss.shape == want.shape
    assert not z_loss.requires_grad
    torch.testing.assert_close(loss.double(), want.detach(), rtol=1e-4, atol=1e-5)
    torch.testing.assert_close(z_loss.double(), want_z.detach(), rtol=1e-4, atol=1e-6)
    # A scalar's incoming gradient, or one per token of both signs (the
    # ignored tokens' too).
    dl = torch.tensor(0.75) if want.dim() == 0 else torch.linspace(-1.0, 2.0, n)
    loss.backward(dl)
    want.backward(dl.double())
    grads = [(lx.grad, px.grad), (lw.grad, pw.grad)]
    if b is not None and not frozen:
        assert lb.grad.dtype == torch.bfloat16 and lb.grad.shape == (V,)
        grads.append((lb.grad, pb.grad))
    elif b is not None:
        assert lb.grad is None
    for got, plain in grads:
        assert got.dtype == torch.bfloat16
        err = ((got.double() - plain).norm() / plain.norm()).item()
        assert err < 2e-2, err


def test_the_bias_gradient_alone():
    """A frozen lm_head weight and hidden states that need no gradient:
    the bias's alone, dbias = Σ_tokens G, in two chunks."""
    x, w, b, t, _ = _inputs(5, 7)
    lb = b.clone().requires_grad_(True)
    loss = ops.fused_linear_cross_entropy(x, w, t, memory_budget=3 * V * 2, bias=lb)
    loss.backward()
    pb = b.double().requires_grad_(True)
    _plain(x.double(), w.double(), pb, t, None)[0].backward()
    err = ((lb.grad.double() - pb.grad).norm() / pb.grad.norm()).item()
    assert err < 2e-2, err
    assert w.grad is None and x.grad is None


def test_the_z_loss_is_in_the_loss_and_has_no_gradient_of_its_own():
    """As Liger-Kernel's (its incoming gradient dropped: the z-loss is for
    logging): the loss already holds the z-loss term, and summing the two
    gives the loss's gradients; without `return_z_loss` the loss is the
    same; under no_grad both come."""
    x, w, b, t, _ = _inputs(9, 3)
    lx = x.clone().requires_grad_(True)
    kw = dict(bias=b, lse_square_scale=1e-2, memory_budget=4 * V * 2)
    loss, z_loss = ops.fused_linear_cross_entropy(lx, w, t, return_z_loss=True, **kw)
    alone = ops.fused_linear_cross_entropy(lx, w, t, **kw)
    torch.testing.assert_close(loss, alone)
    assert z_loss.item() > 0 and not z_loss.requires_grad
    (loss + z_loss).backward()
    grad = lx.grad.clone()
    lx.grad = None
    alone.backward()
    torch.testing.assert_close(grad, lx.grad)
    with torch.no_grad():
        quiet, quiet_z = ops.fused_linear_cross_entropy(lx, w, t, return_z_loss=True, **kw)
    torch.testing.assert_close((quiet, quiet_z), (loss.detach(), z_loss))
    # No z-loss scale: a z-loss of 0.
    _, none = ops.fused_linear_cross_entropy(x, w, t, return_z_loss=True)
    assert none.item() == 0.0


# --- Liger-Kernel's module ------------------------------------------------------

def test_the_module_takes_liger_kernels_arguments_and_gives_its_output():
    """LigerFusedLinearCrossEntropyLoss(...)(lin_weight, _input, target,
    bias) as Liger-Kernel 0.8 calls it; with return_z_loss a
    CrossEntropyOutput of Liger-Kernel's fields (no token accuracy, no
    predicted tokens); without, the loss alone."""
    x, w, b, t, _ = _inputs(6, 5)
    module = nn.LigerFusedLinearCrossEntropyLoss(None, -100, 1e-2, 0.0, "sum", None, True,
                                                 memory_budget=4 * V * 2)
    lb = b.clone().requires_grad_(True)
    out = module(w, x, t, lb)
    assert isinstance(out, nn.CrossEntropyOutput)
    assert [f.name for f in dataclasses.fields(out)] == [
        "loss", "z_loss", "token_accuracy", "predicted_tokens"]
    assert out.token_accuracy is None and out.predicted_tokens is None
    want, want_z = ops.fused_linear_cross_entropy(x, w, t, reduction="sum", bias=b,
                                                  lse_square_scale=1e-2,
                                                  memory_budget=4 * V * 2, return_z_loss=True)
    torch.testing.assert_close((out.loss, out.z_loss), (want, want_z))
    out.loss.backward()
    assert lb.grad is not None and lb.grad.abs().sum() > 0
    plain = nn.LigerFusedLinearCrossEntropyLoss(lse_square_scale=1e-2, reduction="sum",
                                                memory_budget=4 * V * 2)(w, x, t, bias=b)
    torch.testing.assert_close(plain, want)
    assert plain.requires_grad is False and module.return_z_loss is True


# --- refused, with the whole message ----------------------------------------

X, W, B, T, _ = _inputs(3, 11)

REFUSED = {
    "bias_shape": (
        lambda: ops.fused_linear_cross_entropy(X, W, T, bias=B[:8]), LigerValueError,
        "liger.ops.fused_linear_cross_entropy: bias must be [V] = [40] (weight's V), got [8]"),
    "bias_rank": (
        lambda: ops.fused_linear_cross_entropy(X, W, T, bias=B.view(1, V)), LigerValueError,
        "liger.ops.fused_linear_cross_entropy: bias must be [V] = [40] (weight's V), got "
        "[1, 40]"),
    "bias_dtype": (
        lambda: ops.fused_linear_cross_entropy(X, W, T, bias=B.float()), LigerTypeError,
        "liger.ops.fused_linear_cross_entropy: bias must have the dtype of weight "
        "(torch.bfloat16), got torch.float32"),
    "bias_not_a_tensor": (
        lambda: ops.fused_linear_cross_entropy(X, W, T, bias=0.0), LigerTypeError,
        "liger.ops.fused_linear_cross_entropy: bias must be a torch.Tensor, got float"),
    "bias_on_the_meta_device": (
        lambda: ops.fused_linear_cross_entropy(X, W, T, bias=B.to("meta")), LigerValueError,
        "liger.ops.fused_linear_cross_entropy: hidden is on cpu and bias on meta"),
    "return_z_loss_not_bool": (
        lambda: ops.fused_linear_cross_entropy(X, W, T, return_z_loss=1), LigerTypeError,
        "return_z_loss must be a bool, got 1"),
    "module_return_z_loss_not_bool": (
        lambda: nn.LigerFusedLinearCrossEntropyLoss(return_z_loss="yes"), LigerTypeError,
        "liger.nn.LigerFusedLinearCrossEntropyLoss: return_z_loss must be a bool, got 'yes'"),
    "module_bias_shape": (
        lambda: nn.LigerFusedLinearCrossEntropyLoss()(W, X, T, B[:-8]), LigerValueError,
        "liger.ops.fused_linear_cross_entropy: bias must be [V] = [40] (weight's V), got [32]"),
}


@pytest.mark.parametrize("case", list(REFUSED))
def test_a_bad_bias_or_flag_is_refused(case):
    make, kind, message = REFUSED[case]
    with pytest.raises(kind) as e:
        make()
    assert str(e.value) == message


def test_the_per_token_backward_runs_the_forwards_kernels(monkeypatch):
    """reduction "none" runs the chunks again in the backward: with the
    forward's spec (its return_z_loss too), so the bundle the forward ran
    (precompiled, on a machine without the compiler) serves the backward."""
    from liger import bundles
    seen = []
    loader = bundles.loss_plan_kernels

    def recorded(spec):
        seen.append(spec.key())
        return loader(spec)
    monkeypatch.setattr(bundles, "loss_plan_kernels", recorded)
    x, w, b, t, _ = _inputs(9, 11)
    x.requires_grad_(True)
    loss, z_loss = ops.fused_linear_cross_entropy(x, w, t, bias=b, reduction="none",
                                                  lse_square_scale=1e-3, return_z_loss=True,
                                                  memory_budget=4 * V * 2)
    loss.sum().backward()
    assert x.grad is not None and len(seen) == 2 and seen[0] == seen[1], seen


def test_the_operator_gives_no_bias_gradient_without_a_bias():
    """torch.ops.liger.fused_linear_cross_entropy called directly with
    want_db and no bias: no bias gradient (an empty result), no error."""
    x, w, _, t, _ = _inputs(5, 12)
    out = torch.ops.liger.fused_linear_cross_entropy(
        x, w, t, None, None, -100, 0.0, "mean", 0.0, 0.0, False, 2 ** 20, False, True, True,
        True)
    assert out[4].numel() == 0 and out[2].shape == x.shape


@pytest.mark.parametrize("dropped", [False, True])
def test_the_gradient_outputs_change_only_where_the_caller_dropped_them(dropped):
    """torch.ops.liger.fused_linear_cross_entropy returns the gradients its
    forward formed (dx, dW, db for a unit incoming gradient) beside the
    loss. The backward scales dx and dW over themselves only where the
    caller said it dropped them (operators.grads_dropped, which liger.ops
    calls): a caller holding them sees them unchanged, and gets the same
    gradients apart."""
    from liger import operators
    x, w, b, t, _ = _inputs(9, 26)
    lx, lw, lb = (v.clone().requires_grad_(True) for v in (x, w, b))
    loss, _, dx0, dw0, db0 = torch.ops.liger.fused_linear_cross_entropy(
        lx, lw, t, lb, None, -100, 0.0, "mean", 0.0, 0.0, False, 4 * V * 2, False, True, True,
        True)
    units = [g.clone() for g in (dx0, dw0, db0)]
    if dropped:
        operators.grads_dropped(loss)
    dx, dw, db = torch.autograd.grad(loss, (lx, lw, lb), torch.tensor(2.5))
    px, pw, pb = (v.double().requires_grad_(True) for v in (x, w, b))
    want = _plain(px, pw, pb, t, None)[0]
    for got, plain in zip((dx, dw, db), torch.autograd.grad(want, (px, pw, pb),
                                                            torch.tensor(2.5).double())):
        err = ((got.double() - plain).norm() / plain.norm()).item()
        assert err < 2e-2, err
    assert (dx.data_ptr() == dx0.data_ptr()) == dropped
    assert (dw.data_ptr() == dw0.data_ptr()) == dropped
    if not dropped:
        for got, unit in zip((dx0, dw0, db0), units):
            assert torch.equal(got, unit), "the caller's gradient output changed"
