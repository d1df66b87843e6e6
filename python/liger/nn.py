"""Liger-Kernel's modules over liger.ops: switch by changing an import.

    from liger.nn import LigerRMSNorm, LigerSwiGLUMLP, LigerCrossEntropyLoss
    norm = LigerRMSNorm(4096, eps=1e-5)                  # liger.ops.rms_norm
    y, residual = LigerFusedAddRMSNorm(4096)(h, residual)  # liger.ops.add_rms_norm
    y = LigerLayerNorm(1024, eps=1e-5)(x)                # liger.ops.layer_norm
    mlp = LigerSwiGLUMLP(config)                         # gate/up/down + ops.swiglu
    loss = LigerCrossEntropyLoss(ignore_index=-100)(logits, target)
    out = LigerCrossEntropyLoss(lse_square_scale=1e-4, return_z_loss=True)(logits, target)
    loss = LigerFusedLinearCrossEntropyLoss()(lm_head.weight, hidden, target)
    out = LigerFusedLinearCrossEntropyLoss(lse_square_scale=1e-4, return_z_loss=True)(
        lm_head.weight, hidden, target, lm_head.bias)      # out.loss, out.z_loss
    loss = LigerJSD(beta=0.5)(student_logp, teacher_logp)   # also LigerKLDIVLoss
    loss, aux = LigerFusedLinearDPOLoss(beta=0.1)(lm_head.weight, h, target,
                                                  ref_input=ref_h, ref_weight=ref_w)
    # also LigerFusedLinearORPOLoss, LigerFusedLinearSimPOLoss, LigerFusedLinearCPOLoss,
    # LigerFusedLinearKTOLoss (liger.preference)
    loss = LigerFusedLinearJSD(temperature=2.0)(h, lm_head.weight, h_teacher, w_teacher)

Each class takes the constructor arguments of its namesake in
liger_kernel.transformers (0.8), in its order and with its defaults, and
its forward takes the same arguments (the fused loss: lin_weight, _input,
target, bias). Every option liger.ops computes maps to its argument; an
option it does not compute is refused with a LigerValueError (or
LigerTypeError) naming the option and the value — at construction, or at
forward where it comes with the input (a preference loss's bias) — never
ignored. The
attribute options are checked at construction by the rules of the ops'
specs (liger.specs), the same rules each call meets. One default differs:
LigerRMSNorm's `in_place` is False, the only value liger computes (its
backward writes its own dx; LigerFusedAddRMSNorm's default is False
already). Beyond Liger-Kernel's arguments, the losses
take liger.ops' own options as keywords (`inplace`, `memory_budget`).

docs/transformers.md ("Modules") lists the options and what each maps to.
"""

import dataclasses
from typing import Optional

import torch
from torch import nn

from . import ops, preference, specs
from .errors import LigerError, LigerValueError
from .transformers import _ACTIVATIONS


def _checked(module, check, *args, renamed=(), **kwargs):
    """check(*args, **kwargs) (a spec builder or an argument check), its
    error named as the module's, a spec field `renamed` ((field, option)
    pairs) by the module's name for it."""
    try:
        return check(*args, **kwargs)
    except LigerError as e:
        message = str(e)
        for field, option in renamed:
            if message.startswith(field + " "):
                message = option + message[len(field):]
        raise type(e)("liger.nn.%s: %s" % (module, message)) from None


def _only(module, name, value, supported, why):
    """Refuses an option `value` other than the one value liger computes,
    `supported` (a bool, checked as one, or None)."""
    if isinstance(supported, bool):
        _checked(module, specs.check_bool, name, value)
    if value is not supported:
        raise LigerValueError("liger.nn.%s: %s=%r is not supported (%s)"
                              % (module, name, value, why))


def _no_extra_outputs(module, **flags):
    """Liger-Kernel's return_* flags that liger.ops computes nothing for
    (the cross-entropy losses return the z-loss: not among them)."""
    for name, value in flags.items():
        _only(module, name, value, False, "liger.ops returns the loss and the z-loss alone")


def _accum_dtype(module, accum_dtype):
    """Whether dW is summed in f32: accum_dtype None (in the weight's
    dtype) or torch.float32."""
    if accum_dtype is not None and accum_dtype != torch.float32:
        raise LigerValueError("liger.nn.%s: accum_dtype=%r is not supported (None sums the "
                              "weight gradient in the weight's dtype, torch.float32 in f32)"
                              % (module, accum_dtype))
    return accum_dtype is not None


def _norm_weight(module, hidden_size, init_fn, make_spec, **attrs):
    """A norm's weight [hidden_size], all ones or all zeros as init_fn
    says, once the op's spec takes the size and the attributes (the dtype
    comes with the input)."""
    init_fn = _checked(module, specs.check_choice, "init_fn", init_fn, ("ones", "zeros"))
    _checked(module, make_spec, hidden_size, "f32", **attrs,
             renamed=(("hidden", "hidden_size"), ("casting", "casting_mode")))
    return nn.Parameter(getattr(torch, init_fn)(hidden_size))


class LigerRMSNorm(nn.Module):
    """RMSNorm over the last dimension with a weight [hidden_size]
    (liger.ops.rms_norm; casting_mode "llama", "gemma" or "none";
    y = x_hat * (offset + weight)). init_fn: "ones" or "zeros".
    Refused: in_place=True, row_mode other than None,
    elementwise_affine=False."""

    def __init__(self, hidden_size, eps=1e-6, offset=0.0, casting_mode="llama", init_fn="ones",
                 in_place=False, row_mode=None, elementwise_affine=True):
        super().__init__()
        name = type(self).__name__
        _only(name, "in_place", in_place, False,
              "liger's RMSNorm backward writes its own dx, not over the incoming gradient")
        _only(name, "row_mode", row_mode, None, "liger chooses the kernel's row layout")
        _only(name, "elementwise_affine", elementwise_affine, True,
              "liger.ops.rms_norm scales by a weight")
        self.weight = _norm_weight(name, hidden_size, init_fn, ops.rms_norm_spec, eps=eps,
                                   offset=offset, casting=casting_mode)
        self.variance_epsilon, self.offset, self.casting_mode = eps, offset, casting_mode
        self.in_place, self.row_mode, self.elementwise_affine = in_place, row_mode, True

    def forward(self, hidden_states):
        return ops.rms_norm(hidden_states, self.weight, self.variance_epsilon, self.offset,
                            self.casting_mode)

    def extra_repr(self):
        return "weight_shape=%s, eps=%s, offset=%s, casting_mode=%s" % (
            tuple(self.weight.shape), self.variance_epsilon, self.offset, self.casting_mode)


class LigerFusedAddRMSNorm(nn.Module):
    """The residual add and the RMSNorm of the sum, with a weight
    [hidden_size] (liger.ops.add_rms_norm; the options of LigerRMSNorm):
    forward(hidden_states, residual) returns (the normalized sum, the sum),
    the sum being the next residual stream. init_fn: "ones" or "zeros".
    Refused: in_place=True."""

    def __init__(self, hidden_size, eps=1e-6, offset=0.0, casting_mode="llama", init_fn="ones",
                 in_place=False):
        super().__init__()
        name = type(self).__name__
        _only(name, "in_place", in_place, False,
              "liger's add + RMSNorm backward writes its own gradient, not over the incoming "
              "one")
        self.weight = _norm_weight(name, hidden_size, init_fn, ops.add_rms_norm_spec, eps=eps,
                                   offset=offset, casting=casting_mode)
        self.variance_epsilon, self.offset, self.casting_mode = eps, offset, casting_mode
        self.in_place = in_place

    def forward(self, hidden_states, residual):
        return ops.add_rms_norm(hidden_states, residual, self.weight, self.variance_epsilon,
                                self.offset, self.casting_mode)

    def extra_repr(self):
        return "%s, eps=%s, offset=%s, in_place=%s" % (
            tuple(self.weight.shape), self.variance_epsilon, self.offset, self.in_place)


class LigerLayerNorm(nn.Module):
    """LayerNorm over the last dimension with a weight and a bias
    [hidden_size] (liger.ops.layer_norm), as Liger-Kernel's: the bias is a
    parameter either way, zeros without `bias` and drawn from a normal
    distribution with it; init_fn ("ones" or "zeros") sets the weight.
    Refused: impl, mode and backend other than None (liger chooses its
    kernels)."""

    def __init__(self, hidden_size, eps=1e-6, bias=False, init_fn="ones", impl=None, mode=None,
                 backend=None):
        super().__init__()
        name = type(self).__name__
        for option, value in (("impl", impl), ("mode", mode), ("backend", backend)):
            _only(name, option, value, None, "liger chooses its kernels")
        _checked(name, specs.check_bool, "bias", bias)
        self.weight = _norm_weight(name, hidden_size, init_fn, ops.layer_norm_spec, eps=eps)
        self.bias = nn.Parameter(torch.randn(hidden_size) if bias else torch.zeros(hidden_size))
        self.hidden_size, self.eps, self.variance_epsilon = hidden_size, eps, eps
        self.impl = self.mode = None

    def forward(self, hidden_states):
        return ops.layer_norm(hidden_states, self.weight, self.bias, self.variance_epsilon)

    def extra_repr(self):
        return "%s, eps=%s" % (self.hidden_size, self.eps)


def _config_field(module, config, field):
    if not hasattr(config, field):
        raise LigerValueError("liger.nn.%s: the config (%s) has no %s"
                              % (module, type(config).__name__, field))
    return getattr(config, field)


class _GatedMLP(nn.Module):
    """down_proj(act(gate_proj(x)) * up_proj(x)) with the projections of a
    Hugging Face config (hidden_size, intermediate_size, mlp_bias) and the
    gated op `OP` of liger.ops for the config's activation
    (hidden_activation, else hidden_act; the op's own where it names none)."""

    OP = ""

    def _build(self, config, intermediate_size):
        name = type(self).__name__
        act = getattr(config, "hidden_activation", None) or getattr(config, "hidden_act", None) \
            or next(iter(_ACTIVATIONS[self.OP]))
        attrs = _ACTIVATIONS[self.OP].get(act) if isinstance(act, str) else None
        if attrs is None:
            raise LigerValueError("liger.nn.%s: the config's activation %r is not supported "
                                  "(liger.ops.%s computes %s)" % (
                                      name, act, self.OP, " or ".join(_ACTIVATIONS[self.OP])))
        self.config, self._attrs = config, attrs
        self.hidden_size = _checked(name, specs.check_int, "hidden_size",
                                    _config_field(name, config, "hidden_size"), 1)
        if intermediate_size is None:
            intermediate_size = _config_field(name, config, "intermediate_size")
        # The gated op's rules for its row length (the dtype comes with the
        # input).
        _checked(name, getattr(ops, self.OP + "_spec"), intermediate_size, "f32", *attrs,
                 renamed=(("hidden", "intermediate_size"),))
        self.intermediate_size = intermediate_size
        bias = getattr(config, "mlp_bias", False)
        self.gate_proj = nn.Linear(self.hidden_size, self.intermediate_size, bias=bias)
        self.up_proj = nn.Linear(self.hidden_size, self.intermediate_size, bias=bias)
        self.down_proj = nn.Linear(self.intermediate_size, self.hidden_size, bias=bias)

    def forward(self, x):
        gated = getattr(ops, self.OP)(self.gate_proj(x), self.up_proj(x), *self._attrs)
        return self.down_proj(gated)


class LigerSwiGLUMLP(_GatedMLP):
    """A Llama-style MLP with liger.ops.swiglu (activation silu or swish);
    `intermediate_size` overrides the config's."""

    OP = "swiglu"

    def __init__(self, config, intermediate_size=None):
        super().__init__()
        self._build(config, intermediate_size)


class LigerGEGLUMLP(_GatedMLP):
    """A Gemma-style MLP with liger.ops.geglu: gelu_pytorch_tanh (tanh
    approximation, Liger-Kernel's only one) or gelu (exact)."""

    OP = "geglu"

    def __init__(self, config):
        super().__init__()
        self._build(config, None)


@dataclasses.dataclass
class CrossEntropyOutput:
    """What Liger-Kernel's losses return when asked for more than the loss
    (liger_kernel.transformers.functional.CrossEntropyOutput): the loss and,
    where asked for, the z-loss; liger computes no token accuracy and no
    predicted tokens (None)."""

    loss: torch.Tensor
    z_loss: Optional[torch.Tensor] = None
    token_accuracy: Optional[torch.Tensor] = None
    predicted_tokens: Optional[torch.Tensor] = None


class LigerCrossEntropyLoss(nn.Module):
    """liger.ops.cross_entropy of logits [..., V] against targets [...]:
    class `weight` [V], ignore_index, lse_square_scale (z-loss added to the
    loss), label_smoothing, reduction ("mean", "sum" or "none"), softcap.
    With return_z_loss the forward returns a CrossEntropyOutput of the loss
    and the z-loss term (lse_square_scale · lse², reduced as the loss; f32,
    without a gradient of its own: its term is in the loss), as
    Liger-Kernel 0.8 does. Refused: return_token_accuracy,
    return_predicted_tokens. liger's own: `inplace` (the gradient written
    over the logits)."""

    def __init__(self, weight=None, ignore_index=-100, lse_square_scale=0.0,
                 label_smoothing=0.0, reduction="mean", softcap=None, return_z_loss=False,
                 return_token_accuracy=False, return_predicted_tokens=False, *, inplace=False):
        super().__init__()
        name = type(self).__name__
        _no_extra_outputs(name, return_token_accuracy=return_token_accuracy,
                          return_predicted_tokens=return_predicted_tokens)
        _checked(name, specs.check_bool, "inplace", inplace)
        # The spec's rules for the attributes (the vocabulary and the dtypes
        # come with the input).
        _checked(name, ops.cross_entropy_spec, 1, "f32", ignore_index=ignore_index,
                 label_smoothing=label_smoothing, reduction=reduction, softcap=softcap,
                 lse_square_scale=lse_square_scale, weighted=weight is not None,
                 return_z_loss=return_z_loss)
        self.weight, self.ignore_index, self.lse_square_scale = weight, ignore_index, \
            lse_square_scale
        self.label_smoothing, self.reduction, self.softcap = label_smoothing, reduction, softcap
        self.return_z_loss = return_z_loss
        self.return_token_accuracy = self.return_predicted_tokens = False
        self.inplace = inplace

    def forward(self, _input, target):
        out = ops.cross_entropy(_input, target, self.weight, self.ignore_index,
                                self.label_smoothing, self.reduction, self.softcap,
                                self.lse_square_scale, self.inplace, self.return_z_loss)
        if not self.return_z_loss:
            return out
        return CrossEntropyOutput(loss=out[0], z_loss=out[1])


class LigerFusedLinearCrossEntropyLoss(nn.Module):
    """liger.ops.fused_linear_cross_entropy: the loss of _input [..., H]
    times lin_weight [V, H]ᵀ (plus the forward's `bias` [V], whose gradient
    it gives) against targets [...], without the logits in memory; the
    options of LigerCrossEntropyLoss (class weights are `ce_weight`;
    reduction "mean", "sum" or "none": each token's loss, the backward
    running the chunks again), accum_dtype None (dW summed in the weight's
    dtype) or torch.float32. With return_z_loss the forward returns a
    CrossEntropyOutput of the loss and the z-loss term (lse_square_scale ·
    lse², reduced as the loss; f32, without a gradient of its own: its term
    is in the loss), as Liger-Kernel 0.8 does. Refused:
    return_token_accuracy, return_predicted_tokens, use_token_scaling.
    liger's own: `memory_budget` (bytes of one chunk's logits)."""

    def __init__(self, ce_weight=None, ignore_index=-100, lse_square_scale=0.0,
                 label_smoothing=0.0, reduction="mean", softcap=None, return_z_loss=False,
                 accum_dtype=None, use_token_scaling=False, return_token_accuracy=False,
                 return_predicted_tokens=False, *, memory_budget=2 ** 29):
        super().__init__()
        name = type(self).__name__
        _no_extra_outputs(name, return_token_accuracy=return_token_accuracy,
                          return_predicted_tokens=return_predicted_tokens)
        _only(name, "use_token_scaling", use_token_scaling, False,
              "liger.ops.fused_linear_cross_entropy weighs every token alike")
        dw_f32 = _accum_dtype(name, accum_dtype)
        # The spec's rules for the attributes, with a stand-in lm_head
        # [8, 8] of bf16 (the sizes and the dtype come with the input).
        _checked(name, ops.fused_linear_cross_entropy_spec, 8, 8, "bf16",
                 ignore_index=ignore_index, label_smoothing=label_smoothing,
                 reduction=reduction, softcap=softcap, lse_square_scale=lse_square_scale,
                 weighted=ce_weight is not None, dw_f32=dw_f32, return_z_loss=return_z_loss)
        self.memory_budget = _checked(name, specs.check_int, "memory_budget", memory_budget, 1)
        self.ce_weight, self.ignore_index, self.lse_square_scale = ce_weight, ignore_index, \
            lse_square_scale
        self.label_smoothing, self.reduction, self.softcap = label_smoothing, reduction, softcap
        self.return_z_loss = return_z_loss
        self.return_token_accuracy = self.return_predicted_tokens = False
        self.accum_dtype, self.use_token_scaling = accum_dtype, False

    def forward(self, lin_weight, _input, target, bias=None):
        out = ops.fused_linear_cross_entropy(
            _input, lin_weight, target, self.ce_weight, self.ignore_index,
            self.label_smoothing, self.reduction, self.softcap, self.lse_square_scale,
            self.memory_budget, self.accum_dtype is not None, bias, self.return_z_loss)
        if not self.return_z_loss:
            return out
        return CrossEntropyOutput(loss=out[0], z_loss=out[1])


class LigerKLDIVLoss(nn.KLDivLoss):
    """liger.ops.kl_div of log-probabilities y_pred [tokens, vocab] from
    y_true (probabilities, or log-probabilities with log_target): Liger-
    Kernel's LigerKLDIVLoss, `eps` first, then torch.nn.KLDivLoss's
    arguments (size_average, reduce, reduction — "mean" by default, as
    there —, log_target), each computed. The reduction, log_target and eps
    are checked at construction by the rules every call meets."""

    def __init__(self, eps: float = 1e-10, *args, **kwargs):
        super().__init__(*args, **kwargs)
        name = type(self).__name__
        _checked(name, specs.check_choice, "reduction", self.reduction, specs.KL_REDUCTIONS)
        _checked(name, specs.kl_div_spec, 1, "f32", log_target=self.log_target, eps=eps)
        self.eps = eps

    def forward(self, y_pred, y_true):
        return ops.kl_div(y_pred, y_true, self.reduction, self.log_target, self.eps)


class LigerJSD(nn.Module):
    """liger.ops.jsd: Liger-Kernel's generalized Jensen-Shannon divergence
    of the student's log-probabilities log_q [tokens, vocab] from the
    teacher's log_p, beta in [0, 1] (0: forward KL, 1: reverse KL), the
    tokens whose shift label is ignore_index skipped. Both arguments are
    checked at construction."""

    def __init__(self, beta: float = 0.5, ignore_index: int = -100):
        super().__init__()
        _checked(type(self).__name__, specs.jsd_spec, 1, "f32", beta=beta,
                 ignore_index=ignore_index)
        self.beta, self.ignore_index = beta, ignore_index

    def forward(self, log_q, log_p, shift_labels=None):
        return ops.jsd(log_q, log_p, shift_labels, self.beta, self.ignore_index)


# --- the chunked preference losses (liger.preference) -----------------------

class _PreferenceLoss(nn.Module):
    """A preference loss of liger.preference: its attributes checked at
    construction by the function's own rules; Liger-Kernel's `compiled`
    (a bool) and `chunk_size` (an int >= 1) are taken and not used (the
    chunks are what `memory_budget` holds)."""

    def _configure(self, check, compiled, chunk_size, **attrs):
        name = type(self).__name__
        self.config = _checked(name, check, **attrs)
        self.compiled = _checked(name, specs.check_bool, "compiled", compiled)
        self.chunk_size = _checked(name, preference.check_chunk_size, chunk_size)
        for key, value in self.config.items():
            setattr(self, key, value)


class LigerFusedLinearDPOLoss(_PreferenceLoss):
    """liger.preference.fused_linear_dpo: Liger-Kernel's DPO of the lm_head
    lin_weight over _input [2B, T, H] (chosen, then rejected) and target
    [2B, T], against the reference lm_head (ref_input, ref_weight) with
    use_ref_model. Returns (loss, (chosen_logps, rejected_logps,
    chosen_logits_mean, rejected_logits_mean, nll_loss, chosen_rewards,
    rejected_rewards)). Refused: a bias (or ref_bias), loss_type "ipo"."""

    def __init__(self, ignore_index=-100, beta=0.1, alpha=1.0, compute_nll_loss=False,
                 compiled=True, use_ref_model=True, average_log_prob=False, chunk_size=1,
                 loss_type="sigmoid", label_smoothing=0.0, discopop_tau=0.05, *,
                 memory_budget=2 ** 29):
        super().__init__()
        self._configure(preference.check_dpo, compiled, chunk_size, ignore_index=ignore_index,
                        beta=beta, alpha=alpha, compute_nll_loss=compute_nll_loss,
                        use_ref_model=use_ref_model, average_log_prob=average_log_prob,
                        loss_type=loss_type, label_smoothing=label_smoothing,
                        discopop_tau=discopop_tau, memory_budget=memory_budget)

    def forward(self, lin_weight, _input, target, bias=None, ref_input=None, ref_weight=None,
                ref_bias=None):
        return preference.fused_linear_dpo(_input, lin_weight, target, bias, ref_input,
                                           ref_weight, ref_bias, **self.config)


class LigerFusedLinearORPOLoss(_PreferenceLoss):
    """liger.preference.fused_linear_orpo: Liger-Kernel's ORPO (odds ratio
    of the average log-probabilities, plus the chosen half's NLL, of
    nll_target where given). Returns (loss, (chosen_logps, rejected_logps,
    chosen_logits_mean, rejected_logits_mean, nll_loss, chosen_rewards,
    rejected_rewards, log_odds_ratio, log_odds_chosen)). Refused: a bias."""

    def __init__(self, ignore_index=-100, beta=0.1, compute_nll_loss=True, compiled=True,
                 chunk_size=1, *, memory_budget=2 ** 29):
        super().__init__()
        self._configure(preference.check_orpo, compiled, chunk_size, ignore_index=ignore_index,
                        beta=beta, compute_nll_loss=compute_nll_loss,
                        memory_budget=memory_budget)

    def forward(self, lin_weight, _input, target, bias=None, nll_target=None):
        return preference.fused_linear_orpo(
            _input, lin_weight, target, bias, self.ignore_index, self.beta,
            self.compute_nll_loss, nll_target, self.memory_budget)


class LigerFusedLinearSimPOLoss(_PreferenceLoss):
    """liger.preference.fused_linear_simpo: Liger-Kernel's SimPO (the
    length-normalized log-probabilities' margin less gamma, label
    smoothing, plus alpha times the chosen half's NLL). Returns (loss,
    (chosen_logps, rejected_logps, chosen_logits_mean, rejected_logits_mean,
    nll_loss, chosen_rewards, rejected_rewards)). Refused: a bias."""

    def __init__(self, ignore_index=-100, beta=0.1, alpha=1.0, label_smoothing=0.0,
                 compute_nll_loss=True, compiled=True, gamma=0.5, chunk_size=1, *,
                 memory_budget=2 ** 29):
        super().__init__()
        self._configure(preference.check_simpo, compiled, chunk_size,
                        ignore_index=ignore_index, beta=beta, alpha=alpha,
                        label_smoothing=label_smoothing, compute_nll_loss=compute_nll_loss,
                        gamma=gamma, memory_budget=memory_budget)

    def forward(self, lin_weight, _input, target, bias=None):
        return preference.fused_linear_simpo(_input, lin_weight, target, bias, **self.config)


class LigerFusedLinearCPOLoss(_PreferenceLoss):
    """liger.preference.fused_linear_cpo: Liger-Kernel's CPO (SimPO's loss
    with no margin over summed log-probabilities, averaged with
    average_log_prob; plus alpha times the chosen half's NLL). Returns
    (loss, (chosen_logps, rejected_logps, chosen_logits_mean,
    rejected_logits_mean, nll_loss, chosen_rewards, rejected_rewards)).
    Refused: a bias."""

    def __init__(self, ignore_index=-100, beta=0.1, alpha=1.0, label_smoothing=0.0,
                 compute_nll_loss=True, compiled=True, average_log_prob=False, chunk_size=1, *,
                 memory_budget=2 ** 29):
        super().__init__()
        self._configure(preference.check_cpo, compiled, chunk_size, ignore_index=ignore_index,
                        beta=beta, alpha=alpha, label_smoothing=label_smoothing,
                        compute_nll_loss=compute_nll_loss, average_log_prob=average_log_prob,
                        memory_budget=memory_budget)

    def forward(self, lin_weight, _input, target, bias=None):
        return preference.fused_linear_cpo(_input, lin_weight, target, bias, **self.config)


class LigerFusedLinearKTOLoss(_PreferenceLoss):
    """liger.preference.fused_linear_kto: Liger-Kernel's KTO over B unpaired
    sequences (preference_labels [B] bool, True: chosen), against the
    reference lm_head with use_ref_model (off by default, as Liger-Kernel's
    module), kl a number or a tensor of one value or [B]. Its forward takes
    _input first, as Liger-Kernel's. Returns (loss, (chosen_logps_sum,
    rejected_logps_sum, chosen_logits_sum, rejected_logits_sum,
    chosen_rewards_sum, rejected_rewards_sum)). Refused: a bias (or
    ref_bias)."""

    def __init__(self, ignore_index=-100, beta=0.1, compiled=True, use_ref_model=False,
                 average_log_prob=False, chunk_size=1, *, memory_budget=2 ** 29):
        super().__init__()
        self._configure(preference.check_kto, compiled, chunk_size, ignore_index=ignore_index,
                        beta=beta, use_ref_model=use_ref_model,
                        average_log_prob=average_log_prob, memory_budget=memory_budget)

    def forward(self, _input, lin_weight, target, bias=None, preference_labels=None,
                ref_input=None, ref_weight=None, ref_bias=None, kl=None):
        return preference.fused_linear_kto(_input, lin_weight, target, preference_labels, bias,
                                           ref_input, ref_weight, ref_bias, kl, **self.config)


class LigerFusedLinearJSD(nn.Module):
    """liger.ops.fused_linear_jsd: Liger-Kernel's LigerFusedLinearJSD, the
    generalized JSD of the student's and the teacher's lm_heads at
    `temperature`, chunked, no logits in memory; forward(student_input,
    student_weight, teacher_input, teacher_weight, shift_labels=None).
    accum_dtype None (dW summed in the weight's dtype) or torch.float32.
    jsd_beta, ignore_index and temperature are checked at construction;
    liger's own: `memory_budget` (bytes of one chunk's buffers)."""

    def __init__(self, jsd_beta=0.5, ignore_index=-100, temperature=1.0, accum_dtype=None, *,
                 memory_budget=2 ** 29):
        super().__init__()
        name = type(self).__name__
        _checked(name, specs.jsd_spec, 8, "f32", beta=jsd_beta, ignore_index=ignore_index,
                 renamed=(("beta", "jsd_beta"),))
        temperature = _checked(name, ops.check_temperature, temperature)
        _accum_dtype(name, accum_dtype)
        self.memory_budget = _checked(name, specs.check_int, "memory_budget", memory_budget, 1)
        self.jsd_beta, self.ignore_index, self.temperature = jsd_beta, ignore_index, temperature
        self.accum_dtype = accum_dtype

    def forward(self, student_input, student_weight, teacher_input, teacher_weight,
                shift_labels=None):
        return ops.fused_linear_jsd(student_input, student_weight, teacher_input,
                                    teacher_weight, shift_labels, self.jsd_beta,
                                    self.ignore_index, self.temperature, self.memory_budget,
                                    self.accum_dtype is not None)
