"""The fused linear JSD (liger.ops.fused_linear_jsd, liger.nn.LigerFusedLinearJSD)
on the CPU through the reference lowering, against float64 PyTorch holding
every logit (rounded to bf16, as the op's meaning says): the loss and the
student's gradients, in several chunks, with and without shift labels, at
beta 0, 1 and between, at temperatures; what autograd does not ask for is
not formed; Liger-Kernel's signature; each refused call with its
message."""

import inspect

import pytest

torch = pytest.importorskip("torch")

from liger import nn, ops  # noqa: E402
from liger.errors import LigerTypeError, LigerValueError  # noqa: E402

N, HS, HT, V = 11, 16, 24, 32  # the teacher is wider than the student


@pytest.fixture(autouse=True)
def reference(cpu_reference):
    yield


def _inputs(seed, dtype=torch.bfloat16):
    g = torch.Generator().manual_seed(seed)
    xs = torch.randn(N, HS, generator=g).to(dtype)
    ws = (torch.randn(V, HS, generator=g) / 2).to(dtype)
    xt = torch.randn(N, HT, generator=g).to(dtype)
    wt = (torch.randn(V, HT, generator=g) / 2).to(dtype)
    labels = torch.randint(0, V, (N,), generator=g)
    labels[::3] = -100
    return xs, ws, xt, wt, labels


def _plain(xs, ws, xt, wt, labels, beta, temperature, ignore_index=-100):
    """Liger-Kernel's generalized JSD of the two lm_heads, in float64:
    beta·KL(P‖M) + (1−beta)·KL(Q‖M), M = beta·P + (1−beta)·Q, P the
    teacher's, Q the student's (beta 0 and 1: the two KL divergences)."""
    def logp(x, w):
        return ((x @ w.T).to(torch.bfloat16).double() / temperature).log_softmax(-1)
    q, p = logp(xs, ws), logp(xt.double(), wt.double())
    if beta == 0:
        per_token = (p.exp() * (p - q)).sum(-1)
    elif beta == 1:
        per_token = (q.exp() * (q - p)).sum(-1)
    else:
        m = (beta * p.exp() + (1 - beta) * q.exp()).log()
        per_token = beta * (p.exp() * (p - m)).sum(-1) + (1 - beta) * (q.exp() * (q - m)).sum(-1)
    if labels is None:
        return per_token.mean()
    counted = labels != ignore_index
    return (per_token * counted).sum() / counted.sum().clamp(min=1)


CASES = {
    "labels_beta_0_3_temperature_2": dict(beta=0.3, temperature=2.0, labels=True),
    "forward_kl_no_labels": dict(beta=0.0, temperature=1.0, labels=False),
    "reverse_kl_f32_weight_gradient": dict(beta=1.0, temperature=0.5, labels=True,
                                           dw_f32=True),
}


@pytest.mark.parametrize("case", list(CASES))
def test_the_loss_and_the_students_gradients_are_plain_pytorchs(case):
    kw = CASES[case]
    xs, ws, xt, wt, labels = _inputs(1)
    labels = labels if kw["labels"] else None
    lx, lw = (t.clone().requires_grad_(True) for t in (xs, ws))
    # Chunks of 2 tokens (a budget of 2 tokens' buffers): 6 chunks, the last partial.
    module = nn.LigerFusedLinearJSD(kw["beta"], -100, kw["temperature"],
                                    torch.float32 if kw.get("dw_f32") else None,
                                    memory_budget=2 * V * 20)
    loss = module(lx, lw, xt, wt, labels)
    px, pw = xs.double().requires_grad_(True), ws.double().requires_grad_(True)
    want = _plain(px, pw, xt, wt, labels, kw["beta"], kw["temperature"])
    assert loss.dtype == torch.float32 and loss.shape == ()
    torch.testing.assert_close(loss.double(), want.detach(), rtol=1e-4, atol=1e-6)
    loss.backward(torch.tensor(0.6))
    want.backward(torch.tensor(0.6, dtype=torch.float64))
    for got, plain in ((lx.grad, px.grad), (lw.grad, pw.grad)):
        assert got.dtype == torch.bfloat16
        err = ((got.double() - plain).norm() / plain.norm()).item()
        assert err < 2e-2, err


def test_only_what_autograd_asks_for():
    """A frozen student lm_head gets no gradient; under no_grad the loss
    alone (the loss-only JSD kernel), equal to the loss with gradients."""
    xs, ws, xt, wt, labels = _inputs(2)
    lx = xs.clone().requires_grad_(True)
    loss = ops.fused_linear_jsd(lx, ws, xt, wt, labels)
    loss.backward()
    assert ws.grad is None and lx.grad is not None and lx.grad.abs().sum() > 0
    with torch.no_grad():
        alone = ops.fused_linear_jsd(lx, ws, xt, wt, labels)
    torch.testing.assert_close(alone, loss.detach())


def test_no_counted_token_is_a_zero_loss():
    """Every shift label ignored: 0, as liger.ops.jsd (no division by 0)."""
    xs, ws, xt, wt, _ = _inputs(3)
    lx = xs.clone().requires_grad_(True)
    loss = ops.fused_linear_jsd(lx, ws, xt, wt, torch.full((N,), -100))
    loss.backward()
    assert loss.item() == 0.0 and torch.count_nonzero(lx.grad) == 0


def test_the_signature_is_liger_kernels():
    params = list(inspect.signature(nn.LigerFusedLinearJSD.__init__).parameters.values())[1:]
    positional = [p for p in params if p.kind == p.POSITIONAL_OR_KEYWORD]
    assert [(p.name, p.default) for p in positional] == [
        ("jsd_beta", 0.5), ("ignore_index", -100), ("temperature", 1.0), ("accum_dtype", None)]
    assert [p.name for p in params if p.kind == p.KEYWORD_ONLY] == ["memory_budget"]
    assert list(inspect.signature(nn.LigerFusedLinearJSD.forward).parameters)[1:] == [
        "student_input", "student_weight", "teacher_input", "teacher_weight", "shift_labels"]


XS, WS, XT, WT, LABELS = _inputs(4)
REFUSED = {
    "temperature_0": (lambda: nn.LigerFusedLinearJSD(temperature=0), LigerValueError,
                      "liger.nn.LigerFusedLinearJSD: temperature must be > 0 (the logits "
                      "are divided by it), got 0.0"),
    "temperature_negative": (lambda: nn.LigerFusedLinearJSD(temperature=-2.0), LigerValueError,
                             "liger.nn.LigerFusedLinearJSD: temperature must be > 0 (the "
                             "logits are divided by it), got -2.0"),
    "beta": (lambda: nn.LigerFusedLinearJSD(jsd_beta=1.5), LigerValueError,
             "liger.nn.LigerFusedLinearJSD: jsd_beta must be <= 1.0, got 1.5"),
    "accum_dtype": (lambda: nn.LigerFusedLinearJSD(accum_dtype=torch.float16), LigerValueError,
                    "liger.nn.LigerFusedLinearJSD: accum_dtype=torch.float16 is not supported "
                    "(None sums the weight gradient in the weight's dtype, torch.float32 in "
                    "f32)"),
    "ops_temperature": (lambda: ops.fused_linear_jsd(XS, WS, XT, WT, temperature=0.0),
                        LigerValueError,
                        "temperature must be > 0 (the logits are divided by it), got 0.0"),
    "rank": (lambda: ops.fused_linear_jsd(XS.view(1, N, HS), WS, XT, WT), LigerValueError,
             "liger.ops.fused_linear_jsd: student_input must be [tokens, H] with at least one "
             "token and student_weight [V, H], got [1, 11, 16] and [32, 16]"),
    "teacher_hidden": (lambda: ops.fused_linear_jsd(XS, WS, XT, WS), LigerValueError,
                       "liger.ops.fused_linear_jsd: teacher_input must be [tokens, H] with at "
                       "least one token and teacher_weight [V, H], got [11, 24] and [32, 16]"),
    "teacher_tokens": (lambda: ops.fused_linear_jsd(XS, WS, XT[:5], WT), LigerValueError,
                       "liger.ops.fused_linear_jsd: the teacher must have the student's tokens "
                       "(11) and vocabulary (32), got 5 and 32"),
    "teacher_vocab": (lambda: ops.fused_linear_jsd(XS, WS, XT, WT[:24]), LigerValueError,
                      "liger.ops.fused_linear_jsd: the teacher must have the student's tokens "
                      "(11) and vocabulary (32), got 11 and 24"),
    "teacher_dtype": (lambda: ops.fused_linear_jsd(XS, WS, XT.half(), WT.half()),
                      LigerTypeError,
                      "liger.ops.fused_linear_jsd: teacher_input must have the dtype of "
                      "student_input (torch.bfloat16), got torch.float16"),
    "weight_dtype": (lambda: ops.fused_linear_jsd(XS, WS.half(), XT, WT), LigerTypeError,
                     "liger.ops.fused_linear_jsd: student_weight must have the dtype of "
                     "student_input (torch.bfloat16), got torch.float16"),
    "f32": (lambda: ops.fused_linear_jsd(XS.float(), WS.float(), XT.float(), WT.float()),
            LigerTypeError,
            "liger.ops.fused_linear_jsd takes bf16 or f16 (its matmul kernels are "
            "wgmma's and mma.sync's); for f32 use liger.ops.jsd on the logits"),
    "teacher_hidden_not_multiple_of_8": (
        lambda: ops.fused_linear_jsd(XS, WS, XT[:, :20], WT[:, :20]), LigerValueError,
        "liger.ops.fused_linear_jsd needs an lm_head whose vocabulary and hidden sizes are "
        "multiples of 8 (its matmul kernels move 16-byte rows), got [32, 20]; use "
        "liger.ops.jsd on the logits"),
    "labels_shape": (lambda: ops.fused_linear_jsd(XS, WS, XT, WT, LABELS[:4]), LigerValueError,
                     "liger.ops.fused_linear_jsd: shift_labels must have shape [11] (one label "
                     "per token), got [4]"),
    "labels_type": (lambda: ops.fused_linear_jsd(XS, WS, XT, WT, LABELS.tolist()),
                    LigerTypeError,
                    "liger.ops.fused_linear_jsd: shift_labels must be a torch.Tensor, got "
                    "list"),
    "budget": (lambda: ops.fused_linear_jsd(XS, WS, XT, WT, memory_budget=100),
               LigerValueError,
               "memory_budget of 100 bytes holds no token's two rows of logits, the "
               "student's and the teacher's (128 bytes)"),
}


@pytest.mark.parametrize("name", list(REFUSED))
def test_refused_with_its_message(name):
    call, error, message = REFUSED[name]
    with pytest.raises(error) as e:
        call()
    assert str(e.value) == message
