"""The chunked preference losses (liger.preference, liger.nn's DPO, ORPO and
SimPO modules) on the CPU through the reference lowering, against plain
float64 PyTorch that holds every logit (the logits rounded to bf16, as the
fused loss's meaning says): the loss, every output beside it, and the
gradients of the input and the lm_head; odd sequence lengths, ignored
tokens, Liger-Kernel's signatures, and each refused call with its
message."""

import inspect

import pytest

torch = pytest.importorskip("torch")
F = torch.nn.functional

from liger import nn, preference  # noqa: E402
from liger.errors import LigerTypeError, LigerValueError  # noqa: E402

B, T, H, V = 2, 7, 16, 24  # two pairs of sequences of 7 tokens


@pytest.fixture(autouse=True)
def reference(cpu_reference):
    yield


def _inputs(seed, scale=0.5):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(2 * B, T, H, generator=g).to(torch.bfloat16)
    w = (torch.randn(V, H, generator=g) * scale).to(torch.bfloat16)
    t = torch.randint(0, V, (2 * B, T), generator=g)
    t[:, :2] = -100  # the prompt
    t[1, 5:] = -100  # a shorter completion
    return x, w, t


def _leaves(*ts):
    return [t.detach().clone().requires_grad_(True) for t in ts]


def _reference_logps(x, w, t, average, ignore_index=-100):
    """Each sequence's log-probability of its labels from every logit."""
    logp = (x.double() @ w.double().T).to(torch.bfloat16).double().log_softmax(-1)
    counted = t != ignore_index
    tokens = logp.gather(-1, t.clamp(min=0).unsqueeze(-1)).squeeze(-1) * counted
    total = tokens.sum(-1)
    nll = -tokens[:B].sum() / counted[:B].sum()
    return (total / counted.sum(-1) if average else total), nll


def _logits_means(x, w):
    z = (x.double() @ w.double().T).to(torch.bfloat16).double()
    return z[:B].mean(), z[B:].mean()


def _close(got, want, tol):
    torch.testing.assert_close(got.double(), want.detach().double(), rtol=tol, atol=tol)


def _check(loss, aux, want_loss, want_aux, leaves, plain_leaves, tol=2e-3):
    """The loss and its outputs against the plain ones (the logits means
    within the bf16 rounding of the logits), then the gradients."""
    _close(loss, want_loss, tol)
    assert len(aux) == len(want_aux)
    for i, (got, want) in enumerate(zip(aux, want_aux)):
        assert not got.requires_grad, i
        _close(got, want, 2e-2 if i in (2, 3) else tol)
    loss.backward()
    want_loss.backward()
    for got, want in zip(leaves, plain_leaves):
        assert got.grad.dtype == torch.bfloat16
        err = ((got.grad.double() - want.grad).norm() / want.grad.norm()).item()
        assert err < 2e-2, err


# --- DPO -------------------------------------------------------------------

def _dpo_pair_losses(d, cr, rr, clr, rlr, beta, loss_type, ls, tau):
    """Each pair's loss of Liger-Kernel's DPO variants, written out."""
    return {
        "sigmoid": lambda: -F.logsigmoid(d),
        "hinge": lambda: torch.clamp(1 - d, min=0),
        "exo_pair": lambda: torch.sigmoid(d) * (F.logsigmoid(d) - torch.log(torch.tensor(1 - ls)))
        + torch.sigmoid(-d) * (F.logsigmoid(-d) - torch.log(torch.tensor(ls))),
        "nca_pair": lambda: -F.logsigmoid(cr) - (F.logsigmoid(-cr) + F.logsigmoid(-rr)) / 2,
        "robust": lambda: ((ls - 1) * F.logsigmoid(d) + ls * F.logsigmoid(-d)) / (1 - 2 * ls),
        "bco_pair": lambda: -F.logsigmoid(cr) - F.logsigmoid(-rr),
        "sppo_hard": lambda: (clr - 1 / (2 * beta)) ** 2 + (rlr + 1 / (2 * beta)) ** 2,
        "apo_zero": lambda: torch.sigmoid(-cr) + torch.sigmoid(rr),
        "apo_down": lambda: torch.sigmoid(cr) + torch.sigmoid(-d),
        "discopop": lambda: torch.lerp(-F.logsigmoid(d), torch.exp(-d),
                                       torch.sigmoid(d / tau)),
    }[loss_type]()


@pytest.mark.parametrize("loss_type", preference.DPO_LOSS_TYPES)
def test_dpo_pair_losses_are_liger_kernels(loss_type):
    g = torch.Generator().manual_seed(1)
    clr, rlr = torch.randn(5, generator=g, dtype=torch.float64), \
        torch.randn(5, generator=g, dtype=torch.float64)
    beta, ls, tau = 0.3, 0.2 if loss_type in ("robust", "exo_pair") else 0.0, 0.05
    args = (beta * (clr - rlr), beta * clr, beta * rlr, clr, rlr)
    _close(preference.dpo_pair_losses(*args, beta, loss_type, ls, tau),
           _dpo_pair_losses(*args, beta, loss_type, ls, tau), 1e-6)


DPO_CASES = {
    # Liger-Kernel's defaults: a reference model, summed log-probabilities.
    "reference_model": dict(),
    "averaged_nll_hinge": dict(average_log_prob=True, compute_nll_loss=True, alpha=0.5,
                               loss_type="hinge", beta=0.5),
    "no_reference_robust": dict(use_ref_model=False, loss_type="robust", label_smoothing=0.1),
}


@pytest.mark.parametrize("case", list(DPO_CASES))
def test_dpo_is_plain_pytorchs(case):
    kw = DPO_CASES[case]
    x, w, t = _inputs(2)
    rx, rw, _ = _inputs(3)
    module = nn.LigerFusedLinearDPOLoss(**kw, memory_budget=3 * V * 2)  # chunks of 3 tokens
    lx, lw = _leaves(x, w)
    loss, aux = module(lw, lx, t, ref_input=rx, ref_weight=rw)

    px, pw = (v.double().requires_grad_(True) for v in (x, w))
    average, beta = kw.get("average_log_prob", False), kw.get("beta", 0.1)
    logps, nll = _reference_logps(px, pw, t, average)
    ref = _reference_logps(rx, rw, t, average)[0] if kw.get("use_ref_model", True) else \
        torch.zeros(2 * B, dtype=torch.float64)
    clr, rlr = logps[:B] - ref[:B], logps[B:] - ref[B:]
    per_pair = _dpo_pair_losses(beta * (clr - rlr), beta * clr, beta * rlr, clr, rlr, beta,
                                kw.get("loss_type", "sigmoid"), kw.get("label_smoothing", 0.0),
                                0.05)
    nll = nll if kw.get("compute_nll_loss") else torch.zeros((), dtype=torch.float64)
    want = kw.get("alpha", 1.0) * nll + per_pair.mean()
    _check(loss, aux, want, (logps[:B], logps[B:], *_logits_means(px, pw), nll, beta * clr,
                             beta * rlr), (lx, lw), (px, pw))


# --- ORPO ------------------------------------------------------------------

@pytest.mark.parametrize("nll_target", [False, True], ids=["target", "nll_target"])
def test_orpo_is_plain_pytorchs(nll_target):
    x, w, t = _inputs(4, scale=0.25)
    other = t.clone()
    other[0, 2:4] = -100
    other[2, 3] = 5
    module = nn.LigerFusedLinearORPOLoss(beta=0.2)
    lx, lw = _leaves(x, w)
    loss, aux = module(lw, lx, t, nll_target=other if nll_target else None)

    px, pw = (v.double().requires_grad_(True) for v in (x, w))
    logps, nll = _reference_logps(px, pw, t, True)
    if nll_target:
        nll = _reference_logps(px, pw, other, True)[1]
    c, r = logps[:B], logps[B:]
    log_odds = (c - r) - (torch.log(1 - torch.exp(c)) - torch.log(1 - torch.exp(r)))
    ratio = F.logsigmoid(log_odds)
    want = nll - 0.2 * ratio.mean()
    _check(loss, aux, want, (c, r, *_logits_means(px, pw), nll, 0.2 * c, 0.2 * r,
                             ratio.mean(), log_odds.mean()), (lx, lw), (px, pw))


# --- SimPO -----------------------------------------------------------------

def test_simpo_is_plain_pytorchs():
    x, w, t = _inputs(5)
    module = nn.LigerFusedLinearSimPOLoss(beta=2.0, gamma=0.3, alpha=0.7, label_smoothing=0.1,
                                          memory_budget=5 * V * 2)
    lx, lw = _leaves(x, w)
    loss, aux = module(lw, lx, t)

    px, pw = (v.double().requires_grad_(True) for v in (x, w))
    logps, nll = _reference_logps(px, pw, t, True)
    c, r = logps[:B], logps[B:]
    margin = 2.0 * (c - r) - 0.3
    want = 0.7 * nll + (-0.9 * F.logsigmoid(margin) - 0.1 * F.logsigmoid(-margin)).mean()
    _check(loss, aux, want, (c, r, *_logits_means(px, pw), nll, 2.0 * c, 2.0 * r),
           (lx, lw), (px, pw))


# --- CPO -------------------------------------------------------------------

@pytest.mark.parametrize("average", [False, True], ids=["summed", "averaged"])
def test_cpo_is_plain_pytorchs(average):
    x, w, t = _inputs(13, scale=0.25)
    module = nn.LigerFusedLinearCPOLoss(beta=0.5, alpha=0.4, label_smoothing=0.2,
                                        average_log_prob=average, memory_budget=3 * V * 2)
    lx, lw = _leaves(x, w)
    loss, aux = module(lw, lx, t)

    px, pw = (v.double().requires_grad_(True) for v in (x, w))
    logps, nll = _reference_logps(px, pw, t, average)
    c, r = logps[:B], logps[B:]
    margin = 0.5 * (c - r)
    want = 0.4 * nll + (-0.8 * F.logsigmoid(margin) - 0.2 * F.logsigmoid(-margin)).mean()
    _check(loss, aux, want, (c, r, *_logits_means(px, pw), nll, 0.5 * c, 0.5 * r),
           (lx, lw), (px, pw))


def _spy_on_logits(monkeypatch):
    """The row counts of every call of the loss plan's logits kernel."""
    from liger import bundles
    calls, real = [], bundles.loss_plan_kernels

    def spied(spec):
        kernels = dict(real(spec))
        logits = kernels["logits"]

        def counted(x, w, out):
            calls.append(x.shape[0])
            return logits(x, w, out=out)
        kernels["logits"] = counted
        return kernels
    monkeypatch.setattr(bundles, "loss_plan_kernels", spied)
    return calls


@pytest.mark.parametrize("budget,pairs_per_chunk", [(3 * V * 2, 1), (4 * T * V * 2, 2)],
                         ids=["under_a_pair", "two_pairs"])
def test_each_chunk_of_pairs_computes_its_logits_once(monkeypatch, budget, pairs_per_chunk):
    """The gradients are formed in the forward: over forward and backward
    together the logits kernel runs once per chunk, each chunk whole pairs
    (a budget under one pair still takes one)."""
    calls = _spy_on_logits(monkeypatch)
    x, w, t = _inputs(8)
    lx, lw = _leaves(x, w)
    loss, _ = preference.fused_linear_simpo(lx, lw, t, memory_budget=budget)
    loss.backward()
    assert calls == [2 * T * pairs_per_chunk] * (B // pairs_per_chunk)
    assert lx.grad.abs().sum() > 0 and lw.grad.abs().sum() > 0


def test_the_chunks_do_not_change_the_loss_or_its_gradients():
    """One pair per chunk and every pair in one chunk: the same loss, outputs
    and gradients (within the f32 sums' order and bf16's rounding of dW
    accumulated per chunk)."""
    x, w, t = _inputs(9)
    results = []
    for budget in (3 * V * 2, 2 ** 20):
        lx, lw = _leaves(x, w)
        loss, aux = preference.fused_linear_dpo(lx, lw, t, use_ref_model=False,
                                                compute_nll_loss=True, memory_budget=budget)
        loss.backward()
        results.append((loss.detach(), aux, lx.grad, lw.grad))
    (l1, a1, dx1, dw1), (l2, a2, dx2, dw2) = results
    _close(l1, l2, 1e-6)
    for g1, g2 in zip(a1, a2):
        _close(g1, g2, 1e-6)
    _close(dx1, dx2, 1e-2)
    _close(dw1, dw2, 1e-2)


def test_a_frozen_lm_head_gets_no_gradient():
    """Only what autograd asks for: a frozen lm_head's weight none, the
    input's through the per-token backward."""
    x, w, t = _inputs(6)
    lx = x.clone().requires_grad_(True)
    loss, _ = preference.fused_linear_simpo(lx, w, t)
    loss.backward()
    assert w.grad is None and lx.grad is not None and lx.grad.abs().sum() > 0


# --- signatures: Liger-Kernel 0.8.5's (liger_kernel.chunked_loss) ---------

SIGNATURES = {
    nn.LigerFusedLinearDPOLoss: (
        ["ignore_index", "beta", "alpha", "compute_nll_loss", "compiled", "use_ref_model",
         "average_log_prob", "chunk_size", "loss_type", "label_smoothing", "discopop_tau"],
        [-100, 0.1, 1.0, False, True, True, False, 1, "sigmoid", 0.0, 0.05],
        ["lin_weight", "_input", "target", "bias", "ref_input", "ref_weight", "ref_bias"]),
    nn.LigerFusedLinearORPOLoss: (
        ["ignore_index", "beta", "compute_nll_loss", "compiled", "chunk_size"],
        [-100, 0.1, True, True, 1],
        ["lin_weight", "_input", "target", "bias", "nll_target"]),
    nn.LigerFusedLinearSimPOLoss: (
        ["ignore_index", "beta", "alpha", "label_smoothing", "compute_nll_loss", "compiled",
         "gamma", "chunk_size"],
        [-100, 0.1, 1.0, 0.0, True, True, 0.5, 1],
        ["lin_weight", "_input", "target", "bias"]),
    nn.LigerFusedLinearKTOLoss: (
        ["ignore_index", "beta", "compiled", "use_ref_model", "average_log_prob", "chunk_size"],
        [-100, 0.1, True, False, False, 1],
        ["_input", "lin_weight", "target", "bias", "preference_labels", "ref_input",
         "ref_weight", "ref_bias", "kl"]),
    nn.LigerFusedLinearCPOLoss: (
        ["ignore_index", "beta", "alpha", "label_smoothing", "compute_nll_loss", "compiled",
         "average_log_prob", "chunk_size"],
        [-100, 0.1, 1.0, 0.0, True, True, False, 1],
        ["lin_weight", "_input", "target", "bias"]),
}


@pytest.mark.parametrize("cls", list(SIGNATURES), ids=lambda c: c.__name__)
def test_the_signatures_are_liger_kernels(cls):
    names, defaults, forward = SIGNATURES[cls]
    params = list(inspect.signature(cls.__init__).parameters.values())[1:]
    positional = [p for p in params if p.kind == p.POSITIONAL_OR_KEYWORD]
    assert [p.name for p in positional] == names
    assert [p.default for p in positional] == defaults
    assert [p.name for p in params if p.kind == p.KEYWORD_ONLY] == ["memory_budget"]
    assert list(inspect.signature(cls.forward).parameters)[1:] == forward


# --- refused, with the whole message ---------------------------------------

X, W, TG = _inputs(7)
REFUSED = {
    "ipo": (lambda: nn.LigerFusedLinearDPOLoss(loss_type="ipo"), LigerValueError,
            "liger.nn.LigerFusedLinearDPOLoss: loss_type='ipo' is not supported (its squared "
            "margin is normalized by each sequence's completion length; Liger-Kernel refuses "
            "it too)"),
    "unknown_loss_type": (
        lambda: nn.LigerFusedLinearDPOLoss(loss_type="kto"), LigerValueError,
        "liger.nn.LigerFusedLinearDPOLoss: loss_type must be one of 'sigmoid', 'hinge', "
        "'exo_pair', 'nca_pair', 'robust', 'bco_pair', 'sppo_hard', 'apo_zero', 'apo_down', "
        "'discopop', got 'kto'"),
    "exo_pair_unsmoothed": (
        lambda: nn.LigerFusedLinearDPOLoss(loss_type="exo_pair"), LigerValueError,
        "liger.nn.LigerFusedLinearDPOLoss: label_smoothing must be in (0, 1) for "
        "loss_type='exo_pair' (its reference distribution is [1 - label_smoothing, "
        "label_smoothing]; the EXO paper recommends 1e-3), got 0.0"),
    # (log1p(-1) and log(1 - eps) of eps > 1: an infinite or NaN loss)
    "exo_pair_smoothing_one": (
        lambda: preference.fused_linear_dpo(X, W, TG, use_ref_model=False, loss_type="exo_pair",
                                            label_smoothing=1.0), LigerValueError,
        "liger.preference.fused_linear_dpo: label_smoothing must be in (0, 1) for "
        "loss_type='exo_pair' (its reference distribution is [1 - label_smoothing, "
        "label_smoothing]; the EXO paper recommends 1e-3), got 1.0"),
    # (0.5 / beta: a ZeroDivisionError from the loss's own arithmetic)
    "sppo_hard_beta_zero": (
        lambda: preference.fused_linear_dpo(X, W, TG, use_ref_model=False, beta=0.0,
                                            loss_type="sppo_hard"), LigerValueError,
        "liger.preference.fused_linear_dpo: beta must be nonzero for loss_type='sppo_hard' "
        "(its targets are +-0.5 / beta, squared in f32: |beta| >= 5.42e-20), got 0.0"),
    # (a tiny beta: (0.5 / beta)^2 overflows f32 and the loss was silently inf)
    "sppo_hard_beta_tiny": (
        lambda: preference.fused_linear_dpo(X, W, TG, use_ref_model=False, beta=-1e-30,
                                            loss_type="sppo_hard"), LigerValueError,
        "liger.preference.fused_linear_dpo: beta must be nonzero for loss_type='sppo_hard' "
        "(its targets are +-0.5 / beta, squared in f32: |beta| >= 5.42e-20), got -1e-30"),
    "robust_half": (
        lambda: nn.LigerFusedLinearDPOLoss(loss_type="robust", label_smoothing=0.5),
        LigerValueError, "liger.nn.LigerFusedLinearDPOLoss: label_smoothing must be in "
        "[0, 0.5) for loss_type='robust', got 0.5"),
    "beta_infinite": (
        lambda: nn.LigerFusedLinearSimPOLoss(beta=float("inf")), LigerValueError,
        "liger.nn.LigerFusedLinearSimPOLoss: beta must be finite, got inf"),
    "simpo_smoothing": (
        lambda: nn.LigerFusedLinearSimPOLoss(label_smoothing=1.5), LigerValueError,
        "liger.nn.LigerFusedLinearSimPOLoss: label_smoothing must be <= 1.0, got 1.5"),
    "cpo_average_not_bool": (
        lambda: nn.LigerFusedLinearCPOLoss(average_log_prob="yes"), LigerTypeError,
        "liger.nn.LigerFusedLinearCPOLoss: average_log_prob must be a bool, got 'yes'"),
    "chunk_size": (
        lambda: nn.LigerFusedLinearORPOLoss(chunk_size=0), LigerValueError,
        "liger.nn.LigerFusedLinearORPOLoss: chunk_size must be in [1, 9223372036854775807], "
        "got 0"),
    "compiled_not_bool": (
        lambda: nn.LigerFusedLinearORPOLoss(compiled=1), LigerTypeError,
        "liger.nn.LigerFusedLinearORPOLoss: compiled must be a bool, got 1"),
    "bias": (
        lambda: nn.LigerFusedLinearSimPOLoss()(W, X, TG, torch.zeros(V)), LigerValueError,
        "liger.preference.fused_linear_simpo: bias is not supported "
        "(liger's preference losses take an lm_head without a bias), got a "
        "tensor of shape [24]"),
    "ref_bias": (
        lambda: nn.LigerFusedLinearDPOLoss()(W, X, TG, ref_input=X, ref_weight=W,
                                             ref_bias=torch.zeros(V)), LigerValueError,
        "liger.preference.fused_linear_dpo: ref_bias is not supported "
        "(liger's preference losses take an lm_head without a bias), got a "
        "tensor of shape [24]"),
    "no_reference": (
        lambda: nn.LigerFusedLinearDPOLoss()(W, X, TG), LigerValueError,
        "liger.preference.fused_linear_dpo: use_ref_model=True needs ref_input and "
        "ref_weight (the reference model's hidden states and lm_head), got neither"),
    "odd_batch": (
        lambda: preference.fused_linear_orpo(X[:3], W, TG[:3]), LigerValueError,
        "liger.preference.fused_linear_orpo: input must be [2B, T, H] (B chosen sequences, "
        "then their B rejected ones) and target [2B, T], got [3, 7, 16] and [3, 7]"),
    "flat_input": (
        lambda: preference.fused_linear_simpo(X.view(-1, H), W, TG.view(-1)), LigerValueError,
        "liger.preference.fused_linear_simpo: input must be [2B, T, H] (B chosen sequences, "
        "then their B rejected ones) and target [2B, T], got [28, 16] and [28]"),
    "nll_target_shape": (
        lambda: preference.fused_linear_orpo(X, W, TG, nll_target=TG[:, :5]), LigerValueError,
        "liger.preference.fused_linear_orpo: input must be [2B, T, H] (B chosen sequences, "
        "then their B rejected ones) and nll_target [2B, T], got [4, 7, 16] and [4, 5]"),
    "target_not_tensor": (
        lambda: preference.fused_linear_simpo(X, W, TG.tolist()), LigerTypeError,
        "liger.preference.fused_linear_simpo: target must be a torch.Tensor, got list"),
    # The lm_head's rules are the fused cross-entropy's kernels', named as
    # the loss that was called (the reference model's lm_head too).
    "f32": (
        lambda: preference.fused_linear_cpo(X.float(), W.float(), TG), LigerTypeError,
        "liger.preference.fused_linear_cpo takes bf16 or f16 (its matmul kernels are wgmma's "
        "and mma.sync's); for f32 use a loss on the materialized logits in PyTorch"),
    "vocab_not_multiple_of_8": (
        lambda: preference.fused_linear_kto(X, W[:20], TG % 20, torch.ones(2 * B, dtype=torch.bool),
                                            use_ref_model=False), LigerValueError,
        "liger.preference.fused_linear_kto needs an lm_head whose vocabulary and hidden sizes "
        "are multiples of 8 (its matmul kernels move 16-byte rows), got [20, 16]; use a loss "
        "on the materialized logits in PyTorch"),
    "reference_hidden_not_multiple_of_8": (
        lambda: preference.fused_linear_dpo(X, W, TG, ref_input=X[..., :12],
                                            ref_weight=W[:, :12]), LigerValueError,
        "liger.preference.fused_linear_dpo needs an lm_head whose vocabulary and hidden sizes "
        "are multiples of 8 (its matmul kernels move 16-byte rows), got [24, 12]; use a loss "
        "on the materialized logits in PyTorch"),
    # An average over no token: Liger-Kernel gives NaN; liger says which.
    "fully_ignored_sequence": (
        lambda: preference.fused_linear_simpo(X, W, torch.where(
            torch.arange(2 * B).unsqueeze(1) == 3, -100, TG)), LigerValueError,
        "liger.preference.fused_linear_simpo: sequence 3 of input has no token whose target "
        "is not ignore_index (-100): its average log-probability is undefined"),
}


@pytest.mark.parametrize("name", list(REFUSED))
def test_refused_with_its_message(name):
    call, error, message = REFUSED[name]
    with pytest.raises(error) as e:
        call()
    assert str(e.value) == message


def test_a_fully_ignored_sequence_sums_to_zero():
    """Summed (DPO's default), a sequence with no counted token has
    log-probability 0, as in Liger-Kernel."""
    x, w, t = _inputs(8)
    t[2] = -100
    _, aux = preference.fused_linear_dpo(x, w, t, use_ref_model=False)
    assert aux[1][0].item() == 0.0 and torch.isfinite(aux[0]).all()


@pytest.mark.parametrize("case", ["dpo_reference", "orpo_frozen_head", "simpo_no_grad",
                                  "kto_kl_per_sequence"])
def test_the_operator_passes_opcheck(case):
    """liger::fused_linear_preference as a PyTorch operator: schema, fake
    kernel exact about shapes, dtypes and strides, registered autograd, AOT
    dispatch."""
    x, w, t = _inputs(10)
    ref = torch.randn(2 * B, generator=torch.Generator().manual_seed(11))
    loss, ref_logps, attrs, want = {
        "dpo_reference": ("dpo", ref, [0.1, 0.0, 0.0, 0.05], (True, True)),
        "orpo_frozen_head": ("orpo", None, [0.2, 0.0, 0.0, 0.0], (True, False)),
        "simpo_no_grad": ("simpo", None, [2.0, 0.3, 0.1, 0.0], (False, False)),
        "kto_kl_per_sequence": ("kto", ref, [0.1, 0.0, 0.0, 0.0], (True, True)),
    }[case]
    lx = x.clone().requires_grad_(want[0])
    lw = w.clone().requires_grad_(want[1])
    kto = loss == "kto"
    labels = torch.tensor([True, False, False, True]) if kto else None
    kl = torch.rand(2 * B, generator=torch.Generator().manual_seed(12)) if kto else None
    torch.library.opcheck(preference.fused_linear_preference, (
        lx, lw, t, ref_logps, labels, kl, loss, "sigmoid", attrs, -100, loss != "dpo",
        not kto, 1.0, 3 * V * 2, *want))


GRAD_CASES = [("dpo", lt) for lt in preference.DPO_LOSS_TYPES] + [("orpo", ""), ("simpo", "")]


@pytest.mark.parametrize("loss,loss_type", GRAD_CASES, ids=[c[0] + "_" + c[1] for c in GRAD_CASES])
def test_the_pair_gradients_are_autograds(loss, loss_type):
    """pair_loss_grads, written out for the operator, against autograd's
    derivatives of pair_losses, float64, random log-probabilities (below 0,
    as ORPO's odds need) and reference."""
    g = torch.Generator().manual_seed(12)
    chosen, rejected = (-torch.rand(9, generator=g, dtype=torch.float64) * 3 - 0.05
                        for _ in range(2))
    ref_c, ref_r = (torch.randn(9, generator=g, dtype=torch.float64) for _ in range(2))
    smoothing = 0.2 if loss_type in ("robust", "exo_pair") else 0.1
    attrs = (0.7, 0.3, smoothing, 0.05)
    c, r = chosen.clone().requires_grad_(True), rejected.clone().requires_grad_(True)
    preference.pair_losses(loss, loss_type, attrs, c, r, ref_c, ref_r).sum().backward()
    got_c, got_r = preference.pair_loss_grads(loss, loss_type, attrs, chosen, rejected,
                                              ref_c, ref_r)
    torch.testing.assert_close(got_c, c.grad, rtol=1e-10, atol=1e-12)
    torch.testing.assert_close(got_r, r.grad, rtol=1e-10, atol=1e-12)


# --- KTO -------------------------------------------------------------------

KTO_CASES = {
    # Liger-Kernel's module defaults: no reference model, summed, no kl.
    "defaults": dict(),
    "reference_kl": dict(use_ref_model=True, kl=0.3, beta=0.5),
    "averaged_kl_per_sequence": dict(average_log_prob=True, kl="per_sequence"),
}


@pytest.mark.parametrize("case", list(KTO_CASES))
def test_kto_is_plain_pytorchs(case):
    kw = dict(KTO_CASES[case])
    s = 2 * B + 1  # unpaired: any number of sequences
    g = torch.Generator().manual_seed(14)
    x = torch.randn(s, T, H, generator=g).to(torch.bfloat16)
    w = (torch.randn(V, H, generator=g) * 0.5).to(torch.bfloat16)
    t = torch.randint(0, V, (s, T), generator=g)
    t[:, :2] = -100
    rx = torch.randn(s, T, H, generator=g).to(torch.bfloat16)
    rw = (torch.randn(V, H, generator=g) * 0.5).to(torch.bfloat16)
    labels = torch.tensor([True, False, True, True, False])
    kl = kw.pop("kl", None)
    if kl == "per_sequence":
        kl = torch.rand(s, generator=g)
    module = nn.LigerFusedLinearKTOLoss(**kw, memory_budget=3 * V * 2)
    lx, lw = _leaves(x, w)
    loss, aux = module(lx, lw, t, preference_labels=labels, ref_input=rx, ref_weight=rw, kl=kl)

    average, beta = kw.get("average_log_prob", False), kw.get("beta", 0.1)
    px, pw = (v.double().requires_grad_(True) for v in (x, w))

    def logps(xx, ww):
        logp = (xx.double() @ ww.double().T).to(torch.bfloat16).double().log_softmax(-1)
        counted = t != -100
        tok = (logp.gather(-1, t.clamp(min=0).unsqueeze(-1)).squeeze(-1) * counted).sum(-1)
        return tok / counted.sum(-1) if average else tok
    ratio = logps(px, pw)
    if kw.get("use_ref_model"):
        ratio = ratio - logps(rx, rw)
    sign = labels.double() * 2 - 1
    shift = ratio if kl is None else ratio - torch.as_tensor(kl, dtype=torch.float64)
    want = (1 - torch.sigmoid(beta * shift * sign)).mean()
    logits = (px.double() @ pw.double().T).to(torch.bfloat16).double().sum((1, 2))
    p = logps(px, pw)
    want_aux = ((p * labels).sum(), (p * ~labels).sum(), (logits * labels).sum(),
                (logits * ~labels).sum(), (beta * ratio * labels).sum(),
                (beta * ratio * ~labels).sum())
    _close(loss, want, 2e-3)
    for i, (got, ref) in enumerate(zip(aux, want_aux)):
        assert not got.requires_grad, i
        _close(got, ref, 2e-2 if i in (2, 3) else 2e-3)
    loss.backward()
    want.backward()
    for got, ref in ((lx, px), (lw, pw)):
        err = ((got.grad.double() - ref.grad).norm() / ref.grad.norm()).item()
        assert err < 2e-2, err


def test_the_kto_gradients_are_autograds():
    g = torch.Generator().manual_seed(15)
    ratios = torch.randn(9, generator=g, dtype=torch.float64)
    chosen = torch.rand(9, generator=g) > 0.5
    for kl in (None, torch.tensor(0.4, dtype=torch.float64),
               torch.rand(9, generator=g, dtype=torch.float64)):
        r = ratios.clone().requires_grad_(True)
        preference.kto_losses(r, chosen, kl, 0.7).sum().backward()
        torch.testing.assert_close(preference.kto_loss_grads(ratios, chosen, kl, 0.7), r.grad,
                                   rtol=1e-10, atol=1e-12)


KTO_REFUSED = {
    "no_labels": (dict(preference_labels=None), LigerTypeError,
                  "liger.preference.fused_linear_kto: preference_labels must be a torch.Tensor "
                  "of B bools (True: chosen), got NoneType"),
    "int_labels": (dict(preference_labels=torch.ones(2 * B, dtype=torch.long)), LigerValueError,
                   "liger.preference.fused_linear_kto: preference_labels must be [B] = [4] bool "
                   "on cpu (True: chosen), got [4] torch.int64 on cpu"),
    "kl_shape": (dict(kl=torch.zeros(3)), LigerValueError,
                 "liger.preference.fused_linear_kto: kl must be None, a number, or a float tensor "
                 "of one value or [B] = [4] on cpu, got a tensor of shape [3] torch.float32 on "
                 "cpu"),
    "no_reference": (dict(use_ref_model=True), LigerValueError,
                     "liger.preference.fused_linear_kto: use_ref_model=True needs ref_input and "
                     "ref_weight (the reference model's hidden states and lm_head), got "
                     "neither"),
    "flat_input": (dict(input=X.reshape(-1, H)), LigerValueError,
                   "liger.preference.fused_linear_kto: input must be [B, T, H] (B sequences) and "
                   "target [B, T], got [28, 16] and [4, 7]"),
}


def test_kto_takes_one_kl_value_of_any_shape_for_any_batch():
    """kl of one value is that value whatever its shape, with one sequence
    as with several (one sequence's [[0.5]] was refused as a misshapen [B]);
    B values must be [B]."""
    cpu = torch.device("cpu")
    for b in (1, 4):
        for kl in (torch.tensor(0.5), torch.tensor([0.5]), torch.tensor([[0.5]])):
            got = preference._kto_kl("kto", kl, b, cpu)
            assert got.numel() == 1 and got.item() == 0.5
    assert preference._kto_kl("kto", torch.zeros(4), 4, cpu).shape == (4,)
    with pytest.raises(LigerValueError, match=r"got a tensor of shape \[2, 2\]"):
        preference._kto_kl("kto", torch.zeros(2, 2), 4, cpu)


@pytest.mark.parametrize("case", list(KTO_REFUSED))
def test_kto_refuses_with_its_message(case):
    kw, error, message = KTO_REFUSED[case]
    args = dict(input=X, weight=W, target=TG, preference_labels=torch.ones(2 * B, dtype=bool))
    args.update(kw)
    with pytest.raises(error) as info:
        preference.fused_linear_kto(**args)
    assert str(info.value) == message
