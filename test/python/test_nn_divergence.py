"""liger.nn.LigerKLDIVLoss and liger.nn.LigerJSD, Liger-Kernel's
distillation losses over liger.ops, on the CPU through the reference
lowering: their signatures are Liger-Kernel 0.8.5's, each computes what
PyTorch (float64) does for its options, and a bad option is refused at
construction with its message."""

import inspect

import pytest

torch = pytest.importorskip("torch")
F = torch.nn.functional

import refs  # noqa: E402
from liger import nn  # noqa: E402
from liger.errors import LigerTypeError, LigerValueError  # noqa: E402


@pytest.fixture(autouse=True)
def reference(cpu_reference):
    yield


def _log_probs(rows, vocab, seed):
    g = torch.Generator().manual_seed(seed)
    return torch.randn(rows, vocab, generator=g, dtype=torch.float64).log_softmax(-1)


def test_the_signatures_are_liger_kernels():
    kl = inspect.signature(nn.LigerKLDIVLoss.__init__).parameters
    assert [(p.name, p.kind, p.default) for p in list(kl.values())[1:]] == [
        ("eps", inspect.Parameter.POSITIONAL_OR_KEYWORD, 1e-10),
        ("args", inspect.Parameter.VAR_POSITIONAL, inspect.Parameter.empty),
        ("kwargs", inspect.Parameter.VAR_KEYWORD, inspect.Parameter.empty)]
    assert list(inspect.signature(nn.LigerKLDIVLoss.forward).parameters)[1:] == \
        ["y_pred", "y_true"]
    assert issubclass(nn.LigerKLDIVLoss, torch.nn.KLDivLoss)
    jsd = inspect.signature(nn.LigerJSD.__init__).parameters
    assert [(p.name, p.default) for p in list(jsd.values())[1:]] == \
        [("beta", 0.5), ("ignore_index", -100)]
    assert list(inspect.signature(nn.LigerJSD.forward).parameters)[1:] == \
        ["log_q", "log_p", "shift_labels"]
    assert inspect.signature(nn.LigerJSD.forward).parameters["shift_labels"].default is None


@pytest.mark.parametrize("args,kwargs", [
    ((), {}),  # reduction "mean", torch.nn.KLDivLoss's default
    ((1e-6,), dict(reduction="batchmean")),
    ((), dict(reduction="sum", log_target=True)),
    ((), dict(reduction="none")),
    ((1e-10, None, None, "batchmean", True), {}),  # torch's arguments by position
], ids=["default", "batchmean", "sum_log_target", "none", "positional"])
def test_kl_div_loss_is_pytorchs(args, kwargs):
    module = nn.LigerKLDIVLoss(*args, **kwargs)
    x = _log_probs(4, 9, 1).float().requires_grad_()
    t = _log_probs(4, 9, 2).float()
    t = t if module.log_target else t.exp()
    loss = module(x, t)
    x64 = x.detach().double().requires_grad_()
    want = F.kl_div(x64, t.double(), reduction=module.reduction, log_target=module.log_target)
    torch.testing.assert_close(loss.double(), want, rtol=1e-5, atol=1e-6)
    loss.sum().backward()
    want.sum().backward()
    torch.testing.assert_close(x.grad.double(), x64.grad, rtol=1e-5, atol=1e-7)


@pytest.mark.parametrize("beta", [0.0, 0.1, 1.0])
def test_jsd_is_liger_kernels(beta):
    module = nn.LigerJSD(beta=beta, ignore_index=3)
    x = _log_probs(5, 8, 3).float().requires_grad_()
    y = _log_probs(5, 8, 4).float()
    labels = torch.tensor([3, 1, 3, 0, 7])
    loss = module(x, y, labels)
    x64, y64 = x.detach().double().requires_grad_(), y.double()
    want = refs.jsd(x64, y64, beta, labels, ignore_index=3)
    torch.testing.assert_close(loss.double(), want, rtol=1e-5, atol=1e-7)
    loss.backward()
    want.backward()
    torch.testing.assert_close(x.grad.double(), x64.grad, rtol=1e-5, atol=1e-7)
    # Without labels every token counts.
    torch.testing.assert_close(module(x, y).double(), refs.jsd(x64, y64, beta), rtol=1e-5,
                               atol=1e-7)


@pytest.mark.parametrize("make,kind,message", [
    (lambda: nn.LigerKLDIVLoss(reduction="avg"), LigerValueError,
     "liger.nn.LigerKLDIVLoss: reduction must be one of 'none', 'sum', 'mean', 'batchmean', "
     "got 'avg'"),
    (lambda: nn.LigerKLDIVLoss(eps=-1.0), LigerValueError,
     "liger.nn.LigerKLDIVLoss: eps must be > 0.0, got -1.0"),
    (lambda: nn.LigerKLDIVLoss(log_target=1), LigerTypeError,
     "liger.nn.LigerKLDIVLoss: log_target must be a bool, got 1"),
    (lambda: nn.LigerJSD(beta=-0.5), LigerValueError,
     "liger.nn.LigerJSD: beta must be >= 0.0, got -0.5"),
    (lambda: nn.LigerJSD(ignore_index=1.5), LigerTypeError,
     "liger.nn.LigerJSD: ignore_index must be an int, got 1.5"),
], ids=["reduction", "eps", "log_target", "beta", "ignore_index"])
def test_a_bad_option_is_refused_at_construction(make, kind, message):
    with pytest.raises(kind) as e:
        make()
    assert str(e.value) == message
