"""The chunked preference losses (Liger-Kernel's liger_kernel.chunked_loss):
DPO, ORPO and SimPO of an lm_head, never holding the [tokens, vocab] logits.

    from liger import preference
    loss, aux = preference.fused_linear_dpo(h, lm_head_weight, target, ref_input=ref_h,
                                            ref_weight=ref_lm_head_weight)
    loss, aux = preference.fused_linear_orpo(h, lm_head_weight, target)
    loss, aux = preference.fused_linear_simpo(h, lm_head_weight, target, gamma=0.5)

A batch holds B chosen sequences then their B rejected ones, as
Liger-Kernel's: `input` [2B, T, H], `target` [2B, T]. A sequence's
log-probability of its labels is minus the sum of its tokens'
cross-entropies (its tokens whose target is not `ignore_index`), so each
loss is a few tensor ops over per-sequence sums of
liger.ops.fused_linear_cross_entropy(reduction="none"): its kernels give
each token's loss chunk by chunk, and autograd brings each token's incoming
gradient back to them (the backward runs the chunks again: dx and dW
through the same kernels). The NLL term over the chosen sequences is the
same per-token losses (or, with `nll_target`, the fused loss's mean).
Each returns (loss, aux) as Liger-Kernel does: aux = (chosen_logps,
rejected_logps, chosen_logits_mean, rejected_logits_mean, nll_loss, *the
loss's own outputs), none of them differentiable. The logits means are
(Σ_tokens x) · (Σ_vocab W) over the half's tokens and vocabulary (the
logits are linear in x: no logits needed), in f32.

Not computed (refused by name): an lm_head bias (the fused loss takes
none), DPO's loss_type "ipo" (Liger-Kernel refuses it too).
"""

import torch
import torch.nn.functional as F

from . import ops, specs
from .errors import LigerError, LigerTypeError, LigerValueError

DPO_LOSS_TYPES = ("sigmoid", "hinge", "exo_pair", "nca_pair", "robust", "bco_pair",
                  "sppo_hard", "apo_zero", "apo_down", "discopop")


# --- attributes: one check each, for the functions and liger.nn's modules --

def check_dpo(ignore_index=-100, beta=0.1, alpha=1.0, compute_nll_loss=False,
              use_ref_model=True, average_log_prob=False, loss_type="sigmoid",
              label_smoothing=0.0, discopop_tau=0.05, memory_budget=2 ** 29):
    """DPO's attributes, canonical (LigerValueError / LigerTypeError naming
    the one that is not): Liger-Kernel's rules for loss_type and
    label_smoothing."""
    if loss_type == "ipo":
        raise LigerValueError("loss_type='ipo' is not supported (its squared margin is "
                              "normalized by each sequence's completion length; Liger-Kernel "
                              "refuses it too)")
    loss_type = specs.check_choice("loss_type", loss_type, DPO_LOSS_TYPES)
    label_smoothing = specs.check_float("label_smoothing", label_smoothing)
    if loss_type == "exo_pair" and label_smoothing <= 0.0:
        raise LigerValueError("label_smoothing must be > 0 for loss_type='exo_pair' (the EXO "
                              "paper recommends 1e-3), got %r" % label_smoothing)
    if loss_type == "robust" and not 0.0 <= label_smoothing < 0.5:
        raise LigerValueError("label_smoothing must be in [0, 0.5) for loss_type='robust', "
                              "got %r" % label_smoothing)
    return dict(_common(ignore_index, beta, compute_nll_loss, memory_budget),
                alpha=specs.check_float("alpha", alpha),
                use_ref_model=specs.check_bool("use_ref_model", use_ref_model),
                average_log_prob=specs.check_bool("average_log_prob", average_log_prob),
                loss_type=loss_type, label_smoothing=label_smoothing,
                discopop_tau=specs.check_float("discopop_tau", discopop_tau, 0.0,
                                               lo_open=True))


def check_orpo(ignore_index=-100, beta=0.1, compute_nll_loss=True, memory_budget=2 ** 29):
    """ORPO's attributes, canonical (its log-probabilities are averaged, its
    NLL term weighs 1, as Liger-Kernel's)."""
    return _common(ignore_index, beta, compute_nll_loss, memory_budget)


def check_simpo(ignore_index=-100, beta=0.1, alpha=1.0, label_smoothing=0.0,
                compute_nll_loss=True, gamma=0.5, memory_budget=2 ** 29):
    """SimPO's attributes, canonical (its log-probabilities are averaged
    over each sequence's counted tokens, as Liger-Kernel's)."""
    return dict(_common(ignore_index, beta, compute_nll_loss, memory_budget),
                alpha=specs.check_float("alpha", alpha),
                label_smoothing=specs.check_float("label_smoothing", label_smoothing, 0.0,
                                                  1.0),
                gamma=specs.check_float("gamma", gamma))


def check_chunk_size(chunk_size):
    """Liger-Kernel's sequences per chunk: an int >= 1, taken and not used
    (liger's chunks are what `memory_budget` holds)."""
    return specs.check_int("chunk_size", chunk_size, 1)


def _common(ignore_index, beta, compute_nll_loss, memory_budget):
    return dict(ignore_index=specs.check_int("ignore_index", ignore_index),
                beta=specs.check_float("beta", beta),
                compute_nll_loss=specs.check_bool("compute_nll_loss", compute_nll_loss),
                memory_budget=specs.check_int("memory_budget", memory_budget, 1))


def _checked(op, check, **attrs):
    try:
        return check(**attrs)
    except LigerError as e:
        raise type(e)("liger.preference.%s: %s" % (op, e)) from None


def no_bias(where, name, bias):
    """Refuses an lm_head bias: the fused loss's matmul kernels add none."""
    if bias is not None:
        raise LigerValueError(
            "%s: %s is not supported (liger.ops.fused_linear_cross_entropy takes an lm_head "
            "without a bias), got %s" % (where, name, "a tensor of shape %s" % list(bias.shape)
                                         if isinstance(bias, torch.Tensor) else repr(bias)))


# --- the per-sequence sums ------------------------------------------------

def _pairs(where, name, input, target, target_name="target"):
    """B, the number of pairs, of input [2B, T, H] and target [2B, T]."""
    for what, t in ((name, input), (target_name, target)):
        if not isinstance(t, torch.Tensor):
            raise LigerTypeError("%s: %s must be a torch.Tensor, got %s"
                                  % (where, what, type(t).__name__))
    if input.dim() != 3 or input.shape[0] == 0 or input.shape[0] % 2 or \
            tuple(target.shape) != tuple(input.shape[:2]):
        raise LigerValueError(
            "%s: %s must be [2B, T, H] (B chosen sequences, then their B rejected ones) and "
            "%s [2B, T], got %s and %s" % (where, name, target_name, list(input.shape),
                                          list(target.shape)))
    return input.shape[0] // 2


def sequence_logps(where, input, weight, target, ignore_index, average_log_prob,
                   memory_budget, name="input"):
    """(logps [2B], token_losses [2B, T] f32, counted [2B]): each sequence's
    log-probability of its labels (averaged over its counted tokens with
    `average_log_prob`), its tokens' cross-entropies (0 where ignored) and
    its counted tokens. A sequence with no counted token has no average:
    LigerValueError (looked at only while not traced)."""
    _pairs(where, name, input, target)
    losses = ops.fused_linear_cross_entropy(input, weight, target, ignore_index=ignore_index,
                                            reduction="none", memory_budget=memory_budget)
    counted = (target != ignore_index).sum(-1)
    logps = -losses.sum(-1)
    if average_log_prob:
        if not torch.compiler.is_compiling():
            empty = (counted == 0).nonzero()
            if empty.numel():
                raise LigerValueError(
                    "%s: sequence %d of %s has no token whose target is not ignore_index "
                    "(%d): its average log-probability is undefined"
                    % (where, empty[0, 0].item(), name, ignore_index))
        logps = logps / counted
    return logps, losses, counted


def _logits_means(input, weight, pairs):
    """The mean logit of the chosen half and of the rejected half: the
    logits are linear in x, so a half's sum is (Σ x) · (Σ_v W_v)."""
    with torch.no_grad():
        per_sequence = input.sum(1, dtype=torch.float32) @ weight.sum(0, dtype=torch.float32)
        size = pairs * input.shape[1] * weight.shape[0]
        return per_sequence[:pairs].sum() / size, per_sequence[pairs:].sum() / size


def _nll(where, input, weight, target, nll_target, losses, counted, pairs, cfg):
    """The NLL term over the chosen sequences: their tokens' summed
    cross-entropy over their counted tokens (of `nll_target`'s where
    given: the fused loss's mean over them)."""
    if not cfg["compute_nll_loss"]:
        return torch.zeros((), dtype=torch.float32, device=input.device)
    if nll_target is None:
        return losses[:pairs].sum() / counted[:pairs].sum()
    _pairs(where, "input", input, nll_target, "nll_target")
    return ops.fused_linear_cross_entropy(input[:pairs], weight, nll_target[:pairs],
                                          ignore_index=cfg["ignore_index"],
                                          memory_budget=cfg["memory_budget"])


def _policy(where, input, weight, target, bias, nll_target, cfg, average_log_prob=True):
    """The policy's chosen and rejected log-probabilities, its NLL term and
    its logits means (averaged log-probabilities unless DPO says not)."""
    no_bias(where, "bias", bias)
    logps, losses, counted = sequence_logps(where, input, weight, target, cfg["ignore_index"],
                                            average_log_prob, cfg["memory_budget"])
    pairs = input.shape[0] // 2
    nll = _nll(where, input, weight, target, nll_target, losses, counted, pairs, cfg)
    return logps[:pairs], logps[pairs:], nll, _logits_means(input, weight, pairs)


def _result(loss, chosen, rejected, means, nll, *aux):
    """Liger-Kernel's (loss, (chosen_logps, rejected_logps,
    chosen_logits_mean, rejected_logits_mean, nll_loss, *aux)), the
    outputs beside the loss not differentiable."""
    return loss, tuple(t.detach() for t in (chosen, rejected, *means, nll, *aux))


# --- the losses -----------------------------------------------------------

def dpo_pair_losses(logits_diff, chosen_rewards, rejected_rewards, chosen_logratios,
                    rejected_logratios, beta, loss_type, label_smoothing, discopop_tau):
    """Each pair's DPO loss of `loss_type` (Liger-Kernel's variants), from
    the policy's and the reference's log-ratios."""
    if loss_type == "sigmoid":
        return -F.logsigmoid(logits_diff)
    if loss_type == "hinge":
        return torch.relu(1 - logits_diff)
    if loss_type == "exo_pair":  # KL(p_theta || p_rh) with p_rh = [1 - eps, eps]
        eps = torch.tensor(label_smoothing, device=logits_diff.device)
        return torch.sigmoid(logits_diff) * (F.logsigmoid(logits_diff) - torch.log1p(-eps)) + \
            torch.sigmoid(-logits_diff) * (F.logsigmoid(-logits_diff) - torch.log(eps))
    if loss_type == "nca_pair":
        return -F.logsigmoid(chosen_rewards) - 0.5 * F.logsigmoid(-chosen_rewards) \
            - 0.5 * F.logsigmoid(-rejected_rewards)
    if loss_type == "robust":  # a fraction label_smoothing of the labels flipped
        return (-(1 - label_smoothing) * F.logsigmoid(logits_diff)
                + label_smoothing * F.logsigmoid(-logits_diff)) / (1 - 2 * label_smoothing)
    if loss_type == "bco_pair":
        return -F.logsigmoid(chosen_rewards) - F.logsigmoid(-rejected_rewards)
    if loss_type == "sppo_hard":
        return (chosen_logratios - 0.5 / beta) ** 2 + (rejected_logratios + 0.5 / beta) ** 2
    if loss_type == "apo_zero":
        return 1 - torch.sigmoid(chosen_rewards) + torch.sigmoid(rejected_rewards)
    if loss_type == "apo_down":
        return torch.sigmoid(chosen_rewards) + 1 - torch.sigmoid(logits_diff)
    # discopop
    modulation = torch.sigmoid(logits_diff / discopop_tau)
    return -F.logsigmoid(logits_diff) * (1 - modulation) + torch.exp(-logits_diff) * modulation


def fused_linear_dpo(input, weight, target, bias=None, ref_input=None, ref_weight=None,
                     ref_bias=None, ignore_index=-100, beta=0.1, compute_nll_loss=False,
                     use_ref_model=True, average_log_prob=False, loss_type="sigmoid",
                     label_smoothing=0.0, discopop_tau=0.05, alpha=1.0,
                     memory_budget=2 ** 29):
    """Liger-Kernel's LigerFusedLinearDPOFunction (its argument order and
    defaults, without `compiled` and `chunk_size`): the DPO loss of the
    policy lm_head `weight` [V, H] over input [2B, T, H] (chosen, then
    rejected) and target [2B, T], against the reference model's lm_head
    (`ref_input`, `ref_weight`: its log-probabilities under no_grad) with
    `use_ref_model`, else against 0; plus alpha times the chosen half's
    NLL with `compute_nll_loss`. Returns (loss, (chosen_logps,
    rejected_logps, chosen_logits_mean, rejected_logits_mean, nll_loss,
    chosen_rewards, rejected_rewards))."""
    where = "liger.preference.fused_linear_dpo"
    cfg = _checked("fused_linear_dpo", check_dpo, ignore_index=ignore_index, beta=beta,
                   alpha=alpha, compute_nll_loss=compute_nll_loss, use_ref_model=use_ref_model,
                   average_log_prob=average_log_prob, loss_type=loss_type,
                   label_smoothing=label_smoothing, discopop_tau=discopop_tau,
                   memory_budget=memory_budget)
    chosen, rejected, nll, means = _policy(where, input, weight, target, bias, None, cfg,
                                           cfg["average_log_prob"])
    ref_chosen = ref_rejected = torch.zeros((), dtype=torch.float32, device=input.device)
    if cfg["use_ref_model"]:
        if ref_input is None or ref_weight is None:
            raise LigerValueError("%s: use_ref_model=True needs ref_input and ref_weight (the "
                                  "reference model's hidden states and lm_head), got %s" % (
                                      where, "neither" if ref_input is None and
                                      ref_weight is None else "ref_input=None"
                                      if ref_input is None else "ref_weight=None"))
        no_bias(where, "ref_bias", ref_bias)
        with torch.no_grad():
            ref, _, _ = sequence_logps(where, ref_input, ref_weight, target,
                                       cfg["ignore_index"], cfg["average_log_prob"],
                                       cfg["memory_budget"], name="ref_input")
        ref_chosen, ref_rejected = ref[:chosen.shape[0]], ref[chosen.shape[0]:]
    beta = cfg["beta"]
    chosen_logratios, rejected_logratios = chosen - ref_chosen, rejected - ref_rejected
    chosen_rewards, rejected_rewards = beta * chosen_logratios, beta * rejected_logratios
    logits_diff = beta * (chosen_logratios - rejected_logratios)
    per_pair = dpo_pair_losses(logits_diff, chosen_rewards, rejected_rewards, chosen_logratios,
                               rejected_logratios, beta, cfg["loss_type"],
                               cfg["label_smoothing"], cfg["discopop_tau"])
    loss = cfg["alpha"] * nll + per_pair.sum() / chosen.shape[0]
    return _result(loss, chosen, rejected, means, nll, chosen_rewards, rejected_rewards)


def fused_linear_orpo(input, weight, target, bias=None, ignore_index=-100, beta=0.1,
                      compute_nll_loss=True, nll_target=None, memory_budget=2 ** 29):
    """Liger-Kernel's LigerFusedLinearORPOFunction (its argument order and
    defaults, without `compiled` and `chunk_size`): the odds-ratio loss of
    the chosen and rejected sequences' average log-probabilities, plus the
    chosen half's NLL (of `nll_target` [2B, T] where given). Returns (loss,
    (chosen_logps, rejected_logps, chosen_logits_mean, rejected_logits_mean,
    nll_loss, chosen_rewards, rejected_rewards, log_odds_ratio,
    log_odds_chosen))."""
    where = "liger.preference.fused_linear_orpo"
    cfg = _checked("fused_linear_orpo", check_orpo, ignore_index=ignore_index, beta=beta,
                   compute_nll_loss=compute_nll_loss, memory_budget=memory_budget)
    chosen, rejected, nll, means = _policy(where, input, weight, target, bias, nll_target, cfg)
    pairs = chosen.shape[0]
    log_odds = (chosen - rejected) - (torch.log1p(-torch.exp(chosen))
                                      - torch.log1p(-torch.exp(rejected)))
    ratio = F.logsigmoid(log_odds)
    loss = nll - cfg["beta"] * ratio.sum() / pairs
    return _result(loss, chosen, rejected, means, nll, cfg["beta"] * chosen,
                   cfg["beta"] * rejected, ratio.sum() / pairs, log_odds.sum() / pairs)


def fused_linear_simpo(input, weight, target, bias=None, ignore_index=-100, beta=0.1,
                       alpha=1.0, label_smoothing=0.0, compute_nll_loss=False, gamma=0.5,
                       memory_budget=2 ** 29):
    """Liger-Kernel's LigerFusedLinearSimPOFunction (its argument order and
    defaults, without `compiled` and `chunk_size`): −log σ(β · (chosen −
    rejected) − γ) of the length-normalized log-probabilities (label
    smoothing as there), plus alpha times the chosen half's NLL with
    `compute_nll_loss`. Returns (loss, (chosen_logps, rejected_logps,
    chosen_logits_mean, rejected_logits_mean, nll_loss, chosen_rewards,
    rejected_rewards))."""
    where = "liger.preference.fused_linear_simpo"
    cfg = _checked("fused_linear_simpo", check_simpo, ignore_index=ignore_index, beta=beta,
                   alpha=alpha, label_smoothing=label_smoothing,
                   compute_nll_loss=compute_nll_loss, gamma=gamma, memory_budget=memory_budget)
    chosen, rejected, nll, means = _policy(where, input, weight, target, bias, None, cfg)
    margin = cfg["beta"] * (chosen - rejected) - cfg["gamma"]
    smoothing = cfg["label_smoothing"]
    per_pair = -F.logsigmoid(margin) * (1 - smoothing) - F.logsigmoid(-margin) * smoothing
    loss = cfg["alpha"] * nll + per_pair.sum() / chosen.shape[0]
    return _result(loss, chosen, rejected, means, nll, cfg["beta"] * chosen,
                   cfg["beta"] * rejected)
