"""liger's losses form their gradients in the forward, with no graph
through their inputs: a backward that is itself differentiated
(create_graph=True) is refused with one message, where it once returned a
gradient whose second-order terms were silently 0. A plain backward, and
one that keeps the graph (retain_graph), still run. The KL divergence is
linear in its input (its gradient does not depend on it), so its
differentiated backward is exact and is not refused. Every loss whose
forward forms its gradient is here (CPU reference)."""

import pytest

torch = pytest.importorskip("torch")

from liger import ops, preference  # noqa: E402
from liger.errors import LigerError  # noqa: E402

BF16 = torch.bfloat16
MESSAGE = ("liger's losses are differentiable once (as Liger-Kernel's): their forward forms "
           "the gradient, with no graph through the inputs, so a backward with "
           "create_graph=True would lose every second-order term; use the PyTorch loss "
           "where higher-order gradients are needed")


@pytest.fixture(autouse=True)
def reference(cpu_reference):
    yield


def _randn(*shape, dtype=torch.float32, seed=0, scale=1.0):
    g = torch.Generator().manual_seed(seed)
    return (torch.randn(*shape, generator=g) * scale).to(dtype)


def _cross_entropy(inplace=False, reduction="mean"):
    def loss():
        x = _randn(5, 11).requires_grad_()
        logits = x * 1.0 if inplace else x  # (in place: over a non-leaf)
        return ops.cross_entropy(logits, torch.tensor([1, 2, -100, 4, 10]),
                                 reduction=reduction, inplace=inplace), x
    return loss


def _fused_linear_cross_entropy():
    x = _randn(5, 16, dtype=BF16).requires_grad_()
    return ops.fused_linear_cross_entropy(x, _randn(24, 16, dtype=BF16, seed=1, scale=0.3),
                                          torch.tensor([1, 2, -100, 4, 23])), x


def _log_probs(seed):
    return _randn(5, 11, seed=seed, scale=2.0).log_softmax(-1)


def _kl_div():
    x = _log_probs(0).requires_grad_()
    return ops.kl_div(x, _log_probs(1).exp()), x


def _jsd():
    x = _log_probs(0).requires_grad_()
    return ops.jsd(x, _log_probs(1), torch.tensor([1, -100, 3, 4, 5]), beta=0.3), x


def _fused_linear_cross_entropy_bias_only():
    # (x and W constants: only the bias's gradient, formed apart)
    b = torch.zeros(24, dtype=BF16, requires_grad=True)
    return ops.fused_linear_cross_entropy(_randn(5, 16, dtype=BF16),
                                          _randn(24, 16, dtype=BF16, seed=1, scale=0.3),
                                          torch.tensor([1, 2, -100, 4, 23]), bias=b), b


def _fused_linear_jsd():
    x = _randn(5, 16, dtype=BF16).requires_grad_()
    return ops.fused_linear_jsd(x, _randn(24, 16, dtype=BF16, seed=1, scale=0.3),
                                _randn(5, 8, dtype=BF16, seed=2),
                                _randn(24, 8, dtype=BF16, seed=3, scale=0.3)), x


def _orpo():
    x = _randn(2, 7, 16, dtype=BF16).requires_grad_()
    t = torch.randint(0, 24, (2, 7), generator=torch.Generator().manual_seed(4))
    t[:, :2] = -100
    return preference.fused_linear_orpo(x, _randn(24, 16, dtype=BF16, seed=1, scale=0.5),
                                        t)[0], x


LOSSES = {
    "cross_entropy": _cross_entropy(),
    "cross_entropy_none": _cross_entropy(reduction="none"),
    "cross_entropy_inplace": _cross_entropy(inplace=True),
    "fused_linear_cross_entropy": _fused_linear_cross_entropy,
    "fused_linear_cross_entropy_bias_only": _fused_linear_cross_entropy_bias_only,
    "jsd": _jsd,
    "fused_linear_jsd": _fused_linear_jsd,
    "fused_linear_orpo": _orpo,
}


def _total(loss):
    return loss.sum() if loss.dim() else loss


@pytest.mark.parametrize("name", sorted(LOSSES))
def test_a_differentiated_backward_is_refused(name):
    loss, x = LOSSES[name]()
    with pytest.raises(LigerError) as e:
        torch.autograd.grad(_total(loss), x, create_graph=True)
    assert str(e.value) == MESSAGE


@pytest.mark.parametrize("name", sorted(LOSSES) + ["kl_div"])
def test_plain_and_kept_graph_backwards_still_run(name):
    loss, x = (LOSSES.get(name) or _kl_div)()
    (kept,) = torch.autograd.grad(_total(loss), x, retain_graph=True)
    (last,) = torch.autograd.grad(_total(loss), x)
    assert torch.isfinite(kept.float()).all() and kept.abs().sum() > 0
    assert torch.equal(kept, last)


@pytest.mark.parametrize("reduction", ["batchmean", "sum", "mean"])
def test_the_kl_divergence_is_differentiated_twice_exactly(reduction):
    """A gradient penalty through liger.ops.kl_div: its gradient −target
    over the divisor does not depend on the input, so the second-order
    term through the loss is 0 and the penalty's gradient is PyTorch's
    (a cubic term supplies one that is not 0)."""
    t = _log_probs(1).exp()

    def penalty_grad(kl_div):
        x = _log_probs(0).requires_grad_()
        loss = kl_div(x, t) + (x ** 3).sum() * 1e-2
        (g,) = torch.autograd.grad(loss, x, create_graph=True)
        (g ** 2).sum().backward()
        return x.grad
    got = penalty_grad(lambda x, t: ops.kl_div(x, t, reduction=reduction))
    want = penalty_grad(lambda x, t: torch.nn.functional.kl_div(x, t, reduction=reduction))
    assert torch.allclose(got, want, rtol=1e-5, atol=1e-7), (got - want).abs().max()
