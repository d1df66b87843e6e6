"""The cross-entropy's z-loss returned apart (liger.ops.cross_entropy's
`return_z_loss`, liger.nn.LigerCrossEntropyLoss's) on the CPU through the
reference lowering, against float64 PyTorch: the loss, the z-loss and the
gradient of the logits for each reduction, with ignored tokens, class
weights, label smoothing and a softcap, logits [B, T, V], int32 targets,
in place and not; the z-loss is in the loss and carries no gradient of its
own, and is 0 without a scale (Liger-Kernel 0.8.5's); Liger-Kernel's module
arguments and output; each refused call with its message."""

import dataclasses

import pytest

torch = pytest.importorskip("torch")

from liger import nn, ops  # noqa: E402
from liger.errors import LigerTypeError, LigerValueError  # noqa: E402

V = 11


@pytest.fixture(autouse=True)
def reference(cpu_reference):
    yield


def _inputs(n, seed, ignore_index=-100, weighted=False):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(n, V, generator=g) * 3
    t = torch.randint(0, V, (n,), generator=g)
    t[1::4] = ignore_index
    w = torch.rand(V, generator=g) + 0.5 if weighted else None
    return x, t, w


def losses_of_logits(x, t, w, ignore_index=-100, label_smoothing=0.0, reduction="mean",
                     softcap=None, lse_square_scale=0.0):
    """(loss, z_loss) in float64: F.cross_entropy of the capped logits plus
    the z-loss lse_square_scale · lse² of the counted tokens (for "mean"
    over their number, unweighted: Liger-Kernel's). The fused linear
    cross-entropy's tests hold their logits to it too."""
    z = x.double()
    if softcap:
        z = softcap * torch.tanh(z / softcap)
    z = z.reshape(-1, z.shape[-1])
    t = t.reshape(-1).long()
    counted = (t != ignore_index).double()
    ce = torch.nn.functional.cross_entropy(
        z, t, reduction="none", ignore_index=ignore_index, label_smoothing=label_smoothing,
        weight=None if w is None else w.double())
    zl = lse_square_scale * torch.logsumexp(z, -1) ** 2 * counted
    if reduction == "none":
        return ce + zl, zl
    if reduction == "sum":
        return ce.sum() + zl.sum(), zl.sum()
    total = counted.sum() if w is None else (w.double()[t.clamp(min=0)] * counted).sum()
    return ce.sum() / total + zl.sum() / counted.sum(), zl.sum() / counted.sum()


# name -> (tokens, options; `weighted`, `inplace`, `rank3` (logits [B, T,
# V], targets [B, T]) and `i32` (int32 targets) are the test's).
CASES = {
    "mean": (9, dict(lse_square_scale=1e-2)),
    "mean_in_place": (9, dict(lse_square_scale=1e-2, inplace=True)),
    # Class weights with the mean: the weighted terms over the counted
    # tokens' total weight, the z-loss over their number.
    "mean_weighted_smoothed": (13, dict(lse_square_scale=1e-2, weighted=True,
                                        label_smoothing=0.1)),
    "sum_weighted_smoothed_softcap": (13, dict(reduction="sum", lse_square_scale=1e-3,
                                               weighted=True, label_smoothing=0.1,
                                               softcap=5.0)),
    "none_weighted_in_place": (7, dict(reduction="none", lse_square_scale=1e-2, weighted=True,
                                       inplace=True)),
    "none_rank3_i32_ignore_index": (12, dict(reduction="none", lse_square_scale=1e-2,
                                             ignore_index=3, rank3=True, i32=True)),
    "mean_one_token": (1, dict(lse_square_scale=1e-2)),
}


@pytest.mark.parametrize("case", list(CASES))
def test_the_loss_z_loss_and_gradient_are_plain_pytorchs(case):
    n, kw = CASES[case]
    kw = dict(kw)
    weighted, inplace, rank3, i32 = (kw.pop(k, False)
                                     for k in ("weighted", "inplace", "rank3", "i32"))
    x, t, w = _inputs(n, len(case), kw.get("ignore_index", -100), weighted)
    if rank3:
        x, t = x.view(3, n // 3, V), t.view(3, n // 3)
    if i32:
        t = t.int()
    leaf = x.clone().requires_grad_(True)
    # In place, the gradient is written over the logits: an intermediate.
    loss, z_loss = ops.cross_entropy(leaf * 1 if inplace else leaf, t, w, inplace=inplace,
                                     return_z_loss=True, **kw)
    x64 = x.double().requires_grad_(True)
    want, want_z = losses_of_logits(x64, t, w, **kw)
    want_shape = t.shape if kw.get("reduction") == "none" else ()
    assert loss.dtype == z_loss.dtype == torch.float32
    assert loss.shape == z_loss.shape == want_shape
    assert not z_loss.requires_grad
    torch.testing.assert_close(loss.double(), want.detach().view(want_shape), rtol=1e-5,
                               atol=1e-6)
    torch.testing.assert_close(z_loss.double(), want_z.detach().view(want_shape), rtol=1e-5,
                               atol=1e-7)
    assert z_loss.sum().item() > 0
    # A scalar's incoming gradient, or one per token of both signs (the
    # ignored tokens' too).
    dl = torch.tensor(0.75) if loss.dim() == 0 else \
        torch.linspace(-1.0, 2.0, n).view(want_shape)
    loss.backward(dl)
    want.view(want_shape).backward(dl.double())
    torch.testing.assert_close(leaf.grad.double(), x64.grad, rtol=1e-5, atol=1e-6)


def test_the_z_loss_is_in_the_loss_and_has_no_gradient_of_its_own():
    """As Liger-Kernel's (its incoming gradient dropped: the z-loss is for
    logging): the loss already holds the z-loss term, and summing the two
    gives the loss's gradient; without `return_z_loss` the loss is the
    same; under no_grad both come."""
    x, t, _ = _inputs(9, 3)
    leaf = x.clone().requires_grad_(True)
    loss, z_loss = ops.cross_entropy(leaf, t, lse_square_scale=1e-2, return_z_loss=True)
    alone = ops.cross_entropy(leaf, t, lse_square_scale=1e-2)
    torch.testing.assert_close(loss, alone)
    assert z_loss.item() > 0 and not z_loss.requires_grad
    (loss + z_loss).backward()
    grad = leaf.grad.clone()
    leaf.grad = None
    alone.backward()
    torch.testing.assert_close(grad, leaf.grad)
    with torch.no_grad():
        quiet, quiet_z = ops.cross_entropy(leaf, t, lse_square_scale=1e-2, return_z_loss=True)
    torch.testing.assert_close((quiet, quiet_z), (loss.detach(), z_loss))


@pytest.mark.parametrize("reduction", ["mean", "none"])
def test_no_z_loss_scale_is_a_z_loss_of_zero(reduction):
    """return_z_loss with lse_square_scale 0 is no error: the z-loss is 0
    (Liger-Kernel 0.8.5 returns its zeros), the loss the plain one."""
    x, t, _ = _inputs(5, 4)
    loss, z_loss = ops.cross_entropy(x, t, reduction=reduction, return_z_loss=True)
    assert torch.equal(z_loss, torch.zeros_like(z_loss))
    torch.testing.assert_close(loss.double(),
                               losses_of_logits(x, t, None, reduction=reduction)[0],
                               rtol=1e-5, atol=1e-6)


# --- Liger-Kernel's module ------------------------------------------------------

def test_the_module_takes_liger_kernels_arguments_and_gives_its_output():
    """LigerCrossEntropyLoss(...)(_input, target) as Liger-Kernel 0.8 calls
    it; with return_z_loss a CrossEntropyOutput of Liger-Kernel's fields
    (no token accuracy, no predicted tokens); without, the loss alone."""
    x, t, w = _inputs(6, 5, weighted=True)
    module = nn.LigerCrossEntropyLoss(w, -100, 1e-2, 0.1, "sum", None, True)
    leaf = x.clone().requires_grad_(True)
    out = module(leaf, t)
    assert isinstance(out, nn.CrossEntropyOutput)
    assert [f.name for f in dataclasses.fields(out)] == [
        "loss", "z_loss", "token_accuracy", "predicted_tokens"]
    assert out.token_accuracy is None and out.predicted_tokens is None
    want, want_z = ops.cross_entropy(x, t, w, label_smoothing=0.1, reduction="sum",
                                     lse_square_scale=1e-2, return_z_loss=True)
    torch.testing.assert_close((out.loss, out.z_loss), (want, want_z))
    out.loss.backward()
    assert leaf.grad is not None and leaf.grad.abs().sum() > 0
    plain = nn.LigerCrossEntropyLoss(w, lse_square_scale=1e-2, label_smoothing=0.1,
                                     reduction="sum")(x, t)
    torch.testing.assert_close(plain, want)
    assert module.return_z_loss is True
    # In place too.
    out = nn.LigerCrossEntropyLoss(w, -100, 1e-2, 0.1, "sum", None, True, inplace=True)(
        x.clone(), t)
    torch.testing.assert_close((out.loss, out.z_loss), (want, want_z))


# --- refused, with the whole message ----------------------------------------

X, T, _ = _inputs(3, 11)

REFUSED = {
    "return_z_loss_not_bool": (
        lambda: ops.cross_entropy(X, T, return_z_loss=1), LigerTypeError,
        "return_z_loss must be a bool, got 1"),
    "return_z_loss_none": (
        lambda: ops.cross_entropy(X, T, return_z_loss=None), LigerTypeError,
        "return_z_loss must be a bool, got None"),
    "module_return_z_loss_not_bool": (
        lambda: nn.LigerCrossEntropyLoss(return_z_loss="yes"), LigerTypeError,
        "liger.nn.LigerCrossEntropyLoss: return_z_loss must be a bool, got 'yes'"),
    "module_token_accuracy": (
        lambda: nn.LigerCrossEntropyLoss(return_z_loss=True, return_token_accuracy=True),
        LigerValueError,
        "liger.nn.LigerCrossEntropyLoss: return_token_accuracy=True is not supported "
        "(liger.ops returns the loss and the z-loss alone)"),
}


@pytest.mark.parametrize("case", list(REFUSED))
def test_a_bad_flag_is_refused(case):
    make, kind, message = REFUSED[case]
    with pytest.raises(kind) as e:
        make()
    assert str(e.value) == message


@pytest.mark.parametrize("reduction", ["mean", "none"])
@pytest.mark.parametrize("inplace", [False, True])
def test_each_backward_of_a_kept_graph_gets_its_own_gradient(reduction, inplace):
    """The gradient the forward formed is scaled over itself (liger.scale
    in place) only in a backward that releases the graph: with the graph
    kept each backward forms its own product. Each is PyTorch's for its
    incoming gradient (a scalar, or one per token for reduction "none"),
    1 and 0 included."""
    x, t, _ = _inputs(9, 21)
    leaf = x.clone().requires_grad_()
    loss = ops.cross_entropy(leaf.clone() if inplace else leaf, t, reduction=reduction,
                             inplace=inplace)
    x64 = x.double().requires_grad_()
    want, _ = losses_of_logits(x64, t, None, reduction=reduction)
    gen = torch.Generator().manual_seed(22)
    dlosses = [2.5, 1.0, 0.0, None, 1.0]
    for i, dloss in enumerate(dlosses):
        last = i == len(dlosses) - 1
        g = torch.full(loss.shape, dloss) if dloss is not None else \
            torch.randn(loss.shape, generator=gen)
        (dx,) = torch.autograd.grad(loss, leaf, g, retain_graph=not last)
        (want_dx,) = torch.autograd.grad(want, x64, g.double(), retain_graph=True)
        err = (dx.double() - want_dx).abs().max().item()
        assert err <= 1e-5 * max(want_dx.abs().max().item(), 1e-3), \
            "dloss %s: max error %.3g" % (dloss, err)


@pytest.mark.parametrize("inplace", [False, True])
@pytest.mark.parametrize("keep_graph", [False, True])
def test_one_row_of_logits_with_a_per_token_loss_backpropagates(inplace, keep_graph):
    """Logits [V] with a 0-dim target and reduction "none": the loss and
    its incoming gradient are 0-dim, one value for the one row, which the
    backward scales that row by (in place, or apart with the graph kept)."""
    x, t, _ = _inputs(1, 23)
    leaf = x[0].clone().requires_grad_()
    loss = ops.cross_entropy(leaf.clone() if inplace else leaf, t[0].clamp(min=0),
                             reduction="none", inplace=inplace)
    assert loss.shape == ()
    (dx,) = torch.autograd.grad(loss * 2.5, leaf, retain_graph=keep_graph)
    x64 = x[0].double().requires_grad_()
    want = torch.nn.functional.cross_entropy(x64, t[0].clamp(min=0), reduction="none")
    (want_dx,) = torch.autograd.grad(want * 2.5, x64)
    assert (dx.double() - want_dx).abs().max().item() <= 1e-5 * want_dx.abs().max().item()


@pytest.mark.parametrize("reduction", ["mean", "none"])
@pytest.mark.parametrize("dropped", [False, True])
def test_the_gradient_output_changes_only_where_the_caller_dropped_it(reduction, dropped):
    """torch.ops.liger.cross_entropy returns the gradient its forward formed
    (for a unit incoming gradient) beside the loss. The backward scales it
    over itself only where the caller said it dropped it
    (operators.grads_dropped, which liger.ops.cross_entropy calls): a
    caller holding it sees it unchanged, and gets the same gradient apart."""
    from liger import operators
    x, t, _ = _inputs(9, 24)
    leaf = x.clone().requires_grad_()
    loss, _, grad = torch.ops.liger.cross_entropy(leaf, t, None, -100, 0.0, reduction, 0.0,
                                                  0.0, False)
    unit = grad.clone()
    if dropped:
        operators.grads_dropped(loss)
    g = torch.rand(loss.shape, generator=torch.Generator().manual_seed(25)) + 0.5
    (dx,) = torch.autograd.grad(loss, leaf, g)
    x64 = x.double().requires_grad_()
    want, _ = losses_of_logits(x64, t, None, reduction=reduction)
    (want_dx,) = torch.autograd.grad(want, x64, g.double())
    err = (dx.double() - want_dx).abs().max().item()
    assert err <= 1e-5 * want_dx.abs().max().item(), "max error %.3g" % err
    assert (dx.data_ptr() == grad.data_ptr()) == dropped
    if not dropped:
        assert torch.equal(grad, unit), "the caller's gradient output changed"
