"""The chunked preference losses (Liger-Kernel's liger_kernel.chunked_loss):
DPO, ORPO, SimPO, CPO and KTO of an lm_head, never holding the [tokens, vocab] logits.

    from liger import preference
    loss, aux = preference.fused_linear_dpo(h, lm_head_weight, target, ref_input=ref_h,
                                            ref_weight=ref_lm_head_weight)
    loss, aux = preference.fused_linear_orpo(h, lm_head_weight, target)
    loss, aux = preference.fused_linear_simpo(h, lm_head_weight, target, gamma=0.5)
    loss, aux = preference.fused_linear_cpo(h, lm_head_weight, target)
    loss, aux = preference.fused_linear_kto(h, lm_head_weight, target, preference_labels,
                                            ref_input=ref_h, ref_weight=ref_lm_head_weight)

A batch holds B chosen sequences then their B rejected ones, as
Liger-Kernel's: `input` [2B, T, H], `target` [2B, T]. A sequence's
log-probability of its labels is minus the sum of its tokens'
cross-entropies (its tokens whose target is not `ignore_index`), and a
pair's loss depends on its two sequences alone: so the loss runs the
kernels of liger.ops.fused_linear_cross_entropy(reduction="none") over
chunks of whole pairs (liger::fused_linear_preference,
loss_plan.chunked_sequences), each chunk's gradient over its logits known as
soon as its tokens' losses are, and forms dx and dW in the forward, one
logits matmul per chunk (as the fused loss's mean does; the backward
scales them). The NLL term over the chosen sequences is the same
per-token losses (or, with `nll_target`, the fused loss's mean).
Each returns (loss, aux) as Liger-Kernel does: aux = (chosen_logps,
rejected_logps, chosen_logits_mean, rejected_logits_mean, nll_loss, *the
loss's own outputs), none of them differentiable. The logits means are
(Σ_tokens x) · (Σ_vocab W) over the half's tokens and vocabulary (the
logits are linear in x: no logits needed), in f32.

Not computed (refused by name): an lm_head bias (their chunk loop over
whole sequences adds none, nor the logits means), DPO's loss_type "ipo"
(Liger-Kernel refuses it too).
"""

import functools
from typing import List, Optional, Tuple

import torch
import torch.nn.functional as F
from torch import Tensor

from . import bundles, ops, specs
from .errors import LigerError, LigerTypeError, LigerValueError
from .loss_plan import chunked_sequences, plan_chunks
from .operators import _like, _scaled_in_place, _spec, grads_dropped

DPO_LOSS_TYPES = ("sigmoid", "hinge", "exo_pair", "nca_pair", "robust", "bco_pair",
                  "sppo_hard", "apo_zero", "apo_down", "discopop")


# --- attributes: one check each, for the functions and liger.nn's modules --

# The least |beta| whose sppo_hard targets +-0.5 / beta square to a finite
# f32 (the losses' arithmetic) with room for a log-ratio as large beside
# them: 0.5 / sqrt(f32's largest finite value / 4).
_SPPO_LEAST_BETA = 0.5 / (3.4028234663852886e38 / 4) ** 0.5


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
    if loss_type == "exo_pair" and not 0.0 < label_smoothing < 1.0:
        raise LigerValueError("label_smoothing must be in (0, 1) for loss_type='exo_pair' "
                              "(its reference distribution is [1 - label_smoothing, "
                              "label_smoothing]; the EXO paper recommends 1e-3), got %r"
                              % label_smoothing)
    if loss_type == "robust" and not 0.0 <= label_smoothing < 0.5:
        raise LigerValueError("label_smoothing must be in [0, 0.5) for loss_type='robust', "
                              "got %r" % label_smoothing)
    common = _common(ignore_index, beta, compute_nll_loss, memory_budget)
    if loss_type == "sppo_hard" and not abs(common["beta"]) >= _SPPO_LEAST_BETA:
        raise LigerValueError("beta must be nonzero for loss_type='sppo_hard' (its targets "
                              "are +-0.5 / beta, squared in f32: |beta| >= %.3g), got %r"
                              % (_SPPO_LEAST_BETA, common["beta"]))
    return dict(common,
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


def check_cpo(ignore_index=-100, beta=0.1, alpha=1.0, label_smoothing=0.0,
              compute_nll_loss=True, average_log_prob=False, memory_budget=2 ** 29):
    """CPO's attributes, canonical: SimPO's without the margin gamma, its
    log-probabilities summed unless `average_log_prob` (Liger-Kernel's)."""
    return dict(_common(ignore_index, beta, compute_nll_loss, memory_budget),
                alpha=specs.check_float("alpha", alpha),
                label_smoothing=specs.check_float("label_smoothing", label_smoothing, 0.0,
                                                  1.0),
                average_log_prob=specs.check_bool("average_log_prob", average_log_prob))


def check_kto(ignore_index=-100, beta=0.1, use_ref_model=True, average_log_prob=False,
              memory_budget=2 ** 29):
    """KTO's attributes, canonical (it has no NLL term)."""
    attrs = _common(ignore_index, beta, False, memory_budget)
    del attrs["compute_nll_loss"]
    return dict(attrs, use_ref_model=specs.check_bool("use_ref_model", use_ref_model),
                average_log_prob=specs.check_bool("average_log_prob", average_log_prob))


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
    """Refuses an lm_head bias: the preference losses' chunk loop
    (chunked_sequences) and logits means add none."""
    if bias is not None:
        raise LigerValueError(
            "%s: %s is not supported (liger's preference losses take an lm_head without a "
            "bias), got %s" % (where, name, "a tensor of shape %s" % list(bias.shape)
                               if isinstance(bias, torch.Tensor) else repr(bias)))


# --- the per-sequence sums ------------------------------------------------

def _sequences(where, name, input, target, target_name="target", paired=True):
    """The number of pairs of input [2B, T, H] and target [2B, T] (B chosen
    sequences, then their B rejected ones), or without `paired` the number
    of sequences of input [B, T, H] and target [B, T]."""
    for what, t in ((name, input), (target_name, target)):
        if not isinstance(t, torch.Tensor):
            raise LigerTypeError("%s: %s must be a torch.Tensor, got %s"
                                  % (where, what, type(t).__name__))
    if input.dim() != 3 or input.shape[0] == 0 or (paired and input.shape[0] % 2) or \
            tuple(target.shape) != tuple(input.shape[:2]):
        raise LigerValueError(
            "%s: %s must be %s and %s %s, got %s and %s" % (
                where, name, "[2B, T, H] (B chosen sequences, then their B rejected ones)"
                if paired else "[B, T, H] (B sequences)", target_name,
                "[2B, T]" if paired else "[B, T]", list(input.shape), list(target.shape)))
    return input.shape[0] // 2 if paired else input.shape[0]


def _pairs(where, name, input, target, target_name="target"):
    """B, the number of pairs, of input [2B, T, H] and target [2B, T]."""
    return _sequences(where, name, input, target, target_name)


def _every_sequence_counted(where, target, ignore_index, name):
    """A sequence with no counted token has no average log-probability:
    LigerValueError naming the first (looked at only while not traced)."""
    empty = ((target != ignore_index).sum(-1) == 0).nonzero()
    if empty.numel():
        raise LigerValueError(
            "%s: sequence %d of %s has no token whose target is not ignore_index (%d): its "
            "average log-probability is undefined" % (where, empty[0, 0].item(), name,
                                                      ignore_index))


def sequence_logps(where, input, weight, target, ignore_index, average_log_prob,
                   memory_budget, name="input", paired=True):
    """(logps [2B], token_losses [2B, T] f32, counted [2B]): each sequence's
    log-probability of its labels (averaged over its counted tokens with
    `average_log_prob`), its tokens' cross-entropies (0 where ignored) and
    its counted tokens, through liger.ops.fused_linear_cross_entropy
    (reduction "none"; differentiable, at one more logits matmul per chunk
    in the backward: the reference model's, under no_grad, needs none)."""
    _sequences(where, name, input, target, paired=paired)
    _lm_head(where, input, weight)
    losses = ops.fused_linear_cross_entropy(input, weight, target, ignore_index=ignore_index,
                                            reduction="none", memory_budget=memory_budget)
    counted = (target != ignore_index).sum(-1)
    logps = -losses.sum(-1)
    if average_log_prob:
        if not torch.compiler.is_compiling():
            _every_sequence_counted(where, target, ignore_index, name)
        logps = logps / counted
    return logps, losses, counted


def _logit_sums(input, weight):
    """Each sequence's sum of its logits, f32: the logits are linear in x,
    so it is (Σ_tokens x) · (Σ_v W_v)."""
    with torch.no_grad():
        return input.sum(1, dtype=torch.float32) @ weight.sum(0, dtype=torch.float32)


def _logits_means(input, weight, pairs):
    """The mean logit of the chosen half and of the rejected half."""
    per_sequence = _logit_sums(input, weight)
    size = pairs * input.shape[1] * weight.shape[0]
    return per_sequence[:pairs].sum() / size, per_sequence[pairs:].sum() / size


def _nll_of(where, input, weight, nll_target, cfg):
    """The NLL term of `nll_target` [2B, T]: the fused loss's mean over the
    chosen half's counted tokens."""
    _pairs(where, "input", input, nll_target, "nll_target")
    pairs = input.shape[0] // 2
    return ops.fused_linear_cross_entropy(input[:pairs], weight, nll_target[:pairs],
                                          ignore_index=cfg["ignore_index"],
                                          memory_budget=cfg["memory_budget"])


# --- the pairs' loss, chunk by chunk of whole pairs ------------------------

def _orpo_log_odds(chosen, rejected):
    """ORPO's log odds ratio of each pair's average log-probabilities."""
    return (chosen - rejected) - (torch.log1p(-torch.exp(chosen))
                                  - torch.log1p(-torch.exp(rejected)))


def pair_losses(loss, loss_type, attrs, chosen, rejected, ref_chosen, ref_rejected):
    """Each pair's term of `loss` ("dpo", "orpo" or "simpo"; the loss is
    their mean plus the weighted NLL term) from its sequences'
    log-probabilities (DPO's against the reference's). attrs: (beta, gamma,
    label_smoothing, discopop_tau)."""
    beta, gamma, smoothing, tau = attrs
    if loss == "dpo":
        clr, rlr = chosen - ref_chosen, rejected - ref_rejected
        return dpo_pair_losses(beta * (clr - rlr), beta * clr, beta * rlr, clr, rlr, beta,
                               loss_type, smoothing, tau)
    if loss == "orpo":
        return -beta * F.logsigmoid(_orpo_log_odds(chosen, rejected))
    margin = beta * (chosen - rejected) - gamma
    return -F.logsigmoid(margin) * (1 - smoothing) - F.logsigmoid(-margin) * smoothing


def pair_loss_grads(loss, loss_type, attrs, chosen, rejected, ref_chosen, ref_rejected):
    """The derivatives of each pair's term (pair_losses) by its chosen and
    its rejected sequence's log-probability, written out (the loss plan
    forms them inside an operator, where autograd records nothing); the
    tests hold them to autograd's for every loss and DPO loss_type."""
    beta, gamma, smoothing, tau = attrs
    sig = torch.sigmoid
    if loss == "orpo":
        dlog_odds = -beta * sig(-_orpo_log_odds(chosen, rejected))
        return dlog_odds / -torch.expm1(chosen), dlog_odds / torch.expm1(rejected)
    if loss == "simpo":
        margin = beta * (chosen - rejected) - gamma
        dm = beta * (-(1 - smoothing) * sig(-margin) + smoothing * sig(margin))
        return dm, -dm
    clr, rlr = chosen - ref_chosen, rejected - ref_rejected
    d, cr, rr = beta * (clr - rlr), beta * clr, beta * rlr
    zero = torch.zeros_like(d)
    # (∂/∂d, ∂/∂chosen_rewards, ∂/∂rejected_rewards, ∂/∂clr, ∂/∂rlr)
    if loss_type == "sigmoid":
        parts = (-sig(-d), zero, zero, zero, zero)
    elif loss_type == "hinge":
        parts = (-(1 - d > 0).to(d.dtype), zero, zero, zero, zero)
    elif loss_type == "exo_pair":
        eps = torch.tensor(smoothing, device=d.device)  # (as dpo_pair_losses takes it)
        parts = (sig(d) * sig(-d) * ((F.logsigmoid(d) - torch.log1p(-eps))
                                     - (F.logsigmoid(-d) - torch.log(eps))),
                 zero, zero, zero, zero)
    elif loss_type == "nca_pair":
        parts = (zero, -sig(-cr) + 0.5 * sig(cr), 0.5 * sig(rr), zero, zero)
    elif loss_type == "robust":
        parts = ((-(1 - smoothing) * sig(-d) - smoothing * sig(d)) / (1 - 2 * smoothing),
                 zero, zero, zero, zero)
    elif loss_type == "bco_pair":
        parts = (zero, -sig(-cr), sig(rr), zero, zero)
    elif loss_type == "sppo_hard":
        parts = (zero, zero, zero, 2 * (clr - 0.5 / beta), 2 * (rlr + 0.5 / beta))
    elif loss_type == "apo_zero":
        parts = (zero, -sig(cr) * sig(-cr), sig(rr) * sig(-rr), zero, zero)
    elif loss_type == "apo_down":
        parts = (-sig(d) * sig(-d), sig(cr) * sig(-cr), zero, zero, zero)
    else:  # discopop
        m = sig(d / tau)
        dm = m * sig(-d / tau) / tau
        parts = (-sig(-d) * (1 - m) - torch.exp(-d) * m + dm * (F.logsigmoid(d) + torch.exp(-d)),
                 zero, zero, zero, zero)
    fd, fcr, frr, fclr, frlr = parts
    return beta * (fd + fcr) + fclr, beta * (frr - fd) + frlr


def _kto_margin(logratios, chosen, kl, beta):
    """(β · (logratio − kl) · sign, sign): sign 1 for a chosen sequence, −1
    for a rejected one."""
    sign = torch.where(chosen, 1.0, -1.0).to(logratios.dtype)
    return beta * (logratios if kl is None else logratios - kl) * sign, sign


def kto_losses(logratios, chosen, kl, beta):
    """Each sequence's KTO term (Liger-Kernel's): 1 − σ(β · (logratio − kl))
    for a chosen sequence, 1 − σ(β · (kl − logratio)) for a rejected one
    (`chosen` a bool per sequence; kl None for 0)."""
    return 1 - torch.sigmoid(_kto_margin(logratios, chosen, kl, beta)[0])


def kto_loss_grads(logratios, chosen, kl, beta):
    """The derivative of each sequence's KTO term by its log-probability."""
    z, sign = _kto_margin(logratios, chosen, kl, beta)
    return -torch.sigmoid(z) * torch.sigmoid(-z) * beta * sign


F32 = torch.float32


def _spec_of(input, weight, target, ignore_index):
    """The per-token fused linear cross-entropy's spec whose plan (and
    @scale) a preference loss runs, built when called (the backward keeps
    it without keeping the tensors)."""
    v, h = weight.shape
    return functools.partial(_spec, specs.fused_linear_cross_entropy_spec, (
        v, h, input.dtype, target.dtype, ignore_index, 0.0, "none"), input.device)


@torch.library.custom_op("liger::fused_linear_preference", mutates_args=())
def fused_linear_preference(input: Tensor, weight: Tensor, target: Tensor,
                            ref_logps: Optional[Tensor], labels: Optional[Tensor],
                            kl: Optional[Tensor], loss: str, loss_type: str, attrs: List[float],
                            ignore_index: int, average_log_prob: bool, nll: bool,
                            nll_weight: float, memory_budget: int, want_dx: bool,
                            want_dw: bool) -> Tuple[Tensor, Tensor, Tensor, Tensor, Tensor]:
    """(loss, logps [S], nll, dx, dW) of a preference `loss` through the
    lm_head `weight`, by chunked_sequences in chunks of the sequences (the
    pairs) whose logits `memory_budget` holds (at least one). "dpo",
    "orpo", "simpo": input [2B, T, H] holds B chosen sequences, then their
    B rejected ones; the loss is the mean of pair_losses plus nll_weight
    times the chosen tokens' mean cross-entropy (computed where `nll`,
    else 0). "kto": input [B, T, H], `labels` [B] (bool: chosen), `kl`
    (None, one value or [B]); the loss is the mean of kto_losses.
    `ref_logps` [S]: the reference model's sequences' log-probabilities."""
    groups = 1 if loss == "kto" else 2
    count, t = input.shape[0] // groups, input.shape[1]
    v, h = weight.shape
    spec = _spec_of(input, weight, target, ignore_index)()
    chunk = plan_chunks(input.shape[0] * t, v, spec.dtype, memory_budget)["chunk_tokens"]
    counted = (target != ignore_index).sum(-1).to(F32)
    chosen_tokens = counted[:count].sum()
    kl = None if kl is None else kl.to(F32)

    def objective(losses, s0, k):
        # The chunk's share of the loss and its gradient over each token's loss.
        parts = [slice(g * count + s0, g * count + s0 + k) for g in range(groups)]
        seq = -losses.sum(-1)
        per_token = -torch.ones(groups * k, dtype=F32, device=losses.device)
        if average_log_prob:
            per_token = per_token / torch.cat([counted[part] for part in parts])
            seq = -seq * per_token
        ref = None if ref_logps is None else torch.cat([ref_logps[part] for part in parts])
        if loss == "kto":
            ratios = seq if ref is None else seq - ref
            shift = None if kl is None else kl.reshape(()) if kl.numel() == 1 else kl[s0:s0 + k]
            value = kto_losses(ratios, labels[s0:s0 + k], shift, attrs[0]).sum() / count
            dseq = kto_loss_grads(ratios, labels[s0:s0 + k], shift, attrs[0]) / count
        else:
            pair = (seq[:k], seq[k:]) + ((0.0, 0.0) if ref is None else (ref[:k], ref[k:]))
            value = pair_losses(loss, loss_type, attrs, *pair).sum() / count
            dseq = torch.cat(pair_loss_grads(loss, loss_type, attrs, *pair)) / count
        grads = (dseq * per_token)[:, None].expand(groups * k, t).clone()
        part = losses[:k].sum() / chosen_tokens
        if nll:
            value = value + nll_weight * part
            grads[:k] += nll_weight / chosen_tokens
        return value, grads, (seq, part)

    total, dx, dw, reports = chunked_sequences(
        bundles.loss_plan_kernels(spec), input.contiguous(), weight.contiguous(),
        target.contiguous(), max(1, chunk // (groups * t)), objective, groups, want_dx, want_dw)
    logps = torch.empty(input.shape[0], dtype=F32, device=input.device)
    nll_total = torch.zeros((), dtype=F32, device=input.device)
    for s0, k, (seq, part) in reports:
        for g in range(groups):
            logps[g * count + s0:g * count + s0 + k] = seq[g * k:(g + 1) * k]
        if nll:
            nll_total += part
    return (total, logps, nll_total, dx if want_dx else input.new_empty(0),
            dw if want_dw else weight.new_empty(0))


@fused_linear_preference.register_fake
def _(input, weight, target, ref_logps, labels, kl, loss, loss_type, attrs, ignore_index,
      average_log_prob, nll, nll_weight, memory_budget, want_dx, want_dw):
    return (input.new_empty((), dtype=F32), input.new_empty((input.shape[0],), dtype=F32),
            input.new_empty((), dtype=F32),
            _like(input) if want_dx else input.new_empty(0),
            _like(weight) if want_dw else weight.new_empty(0))


def _preference_setup(ctx, inputs, output):
    ctx.want = tuple(inputs[-2:])
    ctx.scale_spec = _spec_of(*inputs[:3], inputs[9])
    ctx.save_for_backward(output[3], output[4])
    ctx.mark_non_differentiable(*output[1:])


def _preference_grad(ctx, dloss, *_):
    dx, dw = ctx.saved_tensors
    return tuple(_scaled_in_place(g, dloss, ctx.scale_spec, ctx) if want else None
                 for g, want in zip((dx, dw), ctx.want)) + (None,) * 14


fused_linear_preference.register_autograd(_preference_grad, setup_context=_preference_setup)


def _lm_head(where, input, weight):
    """An lm_head whose dtype and sizes the fused cross-entropy's kernels
    take (specs.lm_head_problem), named as the loss `where`; the rest of
    its checks are the fused cross-entropy's."""
    if isinstance(weight, torch.Tensor) and weight.dim() == 2 and \
            input.dtype in (torch.float32, torch.bfloat16, torch.float16):
        specs.raise_problem(specs.lm_head_problem(
            weight.shape[0], weight.shape[1], input.dtype, where,
            "a loss on the materialized logits in PyTorch"))


def _check_policy(where, input, weight, target, bias, cfg, average_log_prob):
    """The policy's operands checked as the fused loss checks them."""
    no_bias(where, "bias", bias)
    _pairs(where, "input", input, target)
    _lm_head(where, input, weight)
    ops.check_fused_linear_cross_entropy(input, weight, target, ignore_index=cfg["ignore_index"],
                                         reduction="none", memory_budget=cfg["memory_budget"])
    if average_log_prob and not torch.compiler.is_compiling():
        _every_sequence_counted(where, target, cfg["ignore_index"], "input")


def _reference_logps(where, ref_input, ref_weight, ref_bias, target, cfg, average,
                     paired=True):
    """The reference model's sequences' log-probabilities (use_ref_model),
    under no_grad."""
    if ref_input is None or ref_weight is None:
        raise LigerValueError("%s: use_ref_model=True needs ref_input and ref_weight (the "
                              "reference model's hidden states and lm_head), got %s" % (
                                  where, "neither" if ref_input is None and
                                  ref_weight is None else "ref_input=None"
                                  if ref_input is None else "ref_weight=None"))
    no_bias(where, "ref_bias", ref_bias)
    with torch.no_grad():
        return sequence_logps(where, ref_input, ref_weight, target, cfg["ignore_index"], average,
                              cfg["memory_budget"], name="ref_input", paired=paired)[0]


def _pair_loss(where, loss, input, weight, target, nll_target, cfg, attrs, nll_weight,
               average_log_prob=True, loss_type="", ref_logps=None):
    """(loss, chosen_logps, rejected_logps, nll, logits means) of the
    checked policy (_check_policy): liger::fused_linear_preference, plus
    the NLL term of `nll_target` (where given) by the fused loss's mean."""
    separate = cfg["compute_nll_loss"] and nll_target is not None
    grad = torch.is_grad_enabled()
    value, logps, nll, _, _ = fused_linear_preference(
        input, weight, target, ref_logps, None, None, loss, loss_type, [float(a) for a in attrs],
        cfg["ignore_index"], average_log_prob, cfg["compute_nll_loss"] and not separate,
        float(nll_weight), cfg["memory_budget"], grad and input.requires_grad,
        grad and weight.requires_grad)
    grads_dropped(value)
    if separate:
        nll = _nll_of(where, input, weight, nll_target, cfg)
        value = value + nll_weight * nll
    pairs = input.shape[0] // 2
    return value, logps[:pairs], logps[pairs:], nll, _logits_means(input, weight, pairs)


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
    average = cfg["average_log_prob"]
    _check_policy(where, input, weight, target, bias, cfg, average)
    ref = _reference_logps(where, ref_input, ref_weight, ref_bias, target, cfg, average) \
        if cfg["use_ref_model"] else None
    beta = cfg["beta"]
    loss, chosen, rejected, nll, means = _pair_loss(
        where, "dpo", input, weight, target, None, cfg,
        (beta, 0.0, cfg["label_smoothing"], cfg["discopop_tau"]), cfg["alpha"], average,
        cfg["loss_type"], ref)
    pairs = chosen.shape[0]
    if ref is not None:
        chosen_rewards, rejected_rewards = beta * (chosen - ref[:pairs]), \
            beta * (rejected - ref[pairs:])
    else:
        chosen_rewards, rejected_rewards = beta * chosen, beta * rejected
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
    _check_policy(where, input, weight, target, bias, cfg, True)
    loss, chosen, rejected, nll, means = _pair_loss(
        where, "orpo", input, weight, target, nll_target, cfg, (cfg["beta"], 0.0, 0.0, 0.0), 1.0)
    pairs = chosen.shape[0]
    log_odds = _orpo_log_odds(chosen, rejected)
    ratio = F.logsigmoid(log_odds)
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
    _check_policy(where, input, weight, target, bias, cfg, True)
    loss, chosen, rejected, nll, means = _pair_loss(
        where, "simpo", input, weight, target, None, cfg,
        (cfg["beta"], cfg["gamma"], cfg["label_smoothing"], 0.0), cfg["alpha"])
    return _result(loss, chosen, rejected, means, nll, cfg["beta"] * chosen,
                   cfg["beta"] * rejected)


def fused_linear_cpo(input, weight, target, bias=None, ignore_index=-100, beta=0.1, alpha=1.0,
                     label_smoothing=0.0, compute_nll_loss=True, average_log_prob=False,
                     memory_budget=2 ** 29):
    """Liger-Kernel's LigerFusedLinearCPOFunction (its argument order and
    defaults, without `compiled` and `chunk_size`): −log σ(β · (chosen −
    rejected)) of the sequences' log-probabilities (summed, or averaged
    with `average_log_prob`; label smoothing as SimPO's), plus alpha times
    the chosen half's NLL with `compute_nll_loss`: SimPO with no margin.
    Returns (loss, (chosen_logps, rejected_logps, chosen_logits_mean,
    rejected_logits_mean, nll_loss, chosen_rewards, rejected_rewards))."""
    where = "liger.preference.fused_linear_cpo"
    cfg = _checked("fused_linear_cpo", check_cpo, ignore_index=ignore_index, beta=beta,
                   alpha=alpha, label_smoothing=label_smoothing,
                   compute_nll_loss=compute_nll_loss, average_log_prob=average_log_prob,
                   memory_budget=memory_budget)
    average = cfg["average_log_prob"]
    _check_policy(where, input, weight, target, bias, cfg, average)
    loss, chosen, rejected, nll, means = _pair_loss(
        where, "simpo", input, weight, target, None, cfg,
        (cfg["beta"], 0.0, cfg["label_smoothing"], 0.0), cfg["alpha"], average)
    return _result(loss, chosen, rejected, means, nll, cfg["beta"] * chosen,
                   cfg["beta"] * rejected)


def _kto_labels(where, preference_labels, b, device):
    if not isinstance(preference_labels, torch.Tensor):
        raise LigerTypeError("%s: preference_labels must be a torch.Tensor of B bools (True: "
                             "chosen), got %s" % (where, type(preference_labels).__name__))
    if preference_labels.dtype != torch.bool or tuple(preference_labels.shape) != (b,) or \
            preference_labels.device != device:
        raise LigerValueError("%s: preference_labels must be [B] = [%d] bool on %s (True: "
                              "chosen), got %s %s on %s" % (
                                  where, b, device, list(preference_labels.shape),
                                  preference_labels.dtype, preference_labels.device))
    return preference_labels


def _kto_kl(where, kl, b, device):
    """kl as None or an f32 tensor of one value (of any shape, for any B)
    or [B]."""
    if kl is None:
        return None
    if isinstance(kl, (int, float)) and not isinstance(kl, bool):
        return torch.tensor(float(kl), dtype=F32, device=device)
    if not isinstance(kl, torch.Tensor) or not kl.is_floating_point() or \
            kl.numel() not in (1, b) or (kl.numel() != 1 and kl.dim() != 1) or kl.device != device:
        raise LigerValueError("%s: kl must be None, a number, or a float tensor of one value or "
                              "[B] = [%d] on %s, got %s" % (
                                  where, b, device, "a tensor of shape %s %s on %s" % (
                                      list(kl.shape), kl.dtype, kl.device)
                                  if isinstance(kl, torch.Tensor) else repr(kl)))
    return kl.detach()


def fused_linear_kto(input, weight, target, preference_labels, bias=None, ref_input=None,
                     ref_weight=None, ref_bias=None, kl=None, ignore_index=-100, beta=0.1,
                     use_ref_model=True, average_log_prob=False, memory_budget=2 ** 29):
    """Liger-Kernel's LigerFusedLinearKTOFunction (its argument order and
    defaults, without `compiled` and `chunk_size`): the mean over input's
    B sequences [B, T, H] (target [B, T]; unpaired) of 1 − σ(β · (logratio −
    kl)) for a chosen sequence and 1 − σ(β · (kl − logratio)) for a
    rejected one (`preference_labels` [B] bool, True: chosen), logratio
    the sequence's log-probability (summed, or averaged with
    `average_log_prob`) less the reference model's (`ref_input`,
    `ref_weight`, with `use_ref_model`), kl a number or a tensor of one
    value or [B] (not differentiated; None: 0). Returns (loss,
    (chosen_logps_sum, rejected_logps_sum, chosen_logits_sum,
    rejected_logits_sum, chosen_rewards_sum, rejected_rewards_sum)), the
    rewards β · logratio."""
    where = "liger.preference.fused_linear_kto"
    cfg = _checked("fused_linear_kto", check_kto, ignore_index=ignore_index, beta=beta,
                   use_ref_model=use_ref_model, average_log_prob=average_log_prob,
                   memory_budget=memory_budget)
    no_bias(where, "bias", bias)
    b = _sequences(where, "input", input, target, paired=False)
    _lm_head(where, input, weight)
    ops.check_fused_linear_cross_entropy(input, weight, target, ignore_index=cfg["ignore_index"],
                                         reduction="none", memory_budget=cfg["memory_budget"])
    average = cfg["average_log_prob"]
    if average and not torch.compiler.is_compiling():
        _every_sequence_counted(where, target, cfg["ignore_index"], "input")
    labels = _kto_labels(where, preference_labels, b, input.device)
    kl = _kto_kl(where, kl, b, input.device)
    ref = _reference_logps(where, ref_input, ref_weight, ref_bias, target, cfg, average,
                           paired=False) if cfg["use_ref_model"] else None
    grad = torch.is_grad_enabled()
    loss, logps, _, _, _ = fused_linear_preference(
        input, weight, target, ref, labels, kl, "kto", "", [cfg["beta"], 0.0, 0.0, 0.0],
        cfg["ignore_index"], average, False, 0.0, cfg["memory_budget"],
        grad and input.requires_grad, grad and weight.requires_grad)
    grads_dropped(loss)
    rewards = cfg["beta"] * (logps if ref is None else logps - ref)
    per_sequence = _logit_sums(input, weight)
    sums = [(t * labels).sum() for t in (logps, per_sequence, rewards)] + \
        [(t * ~labels).sum() for t in (logps, per_sequence, rewards)]
    chosen_logps, chosen_logits, chosen_rewards, rejected_logps, rejected_logits, \
        rejected_rewards = (t.detach() for t in sums)
    return loss, (chosen_logps, rejected_logps, chosen_logits, rejected_logits, chosen_rewards,
                  rejected_rewards)
