"""Fused ops on torch tensors, compiled by liger, with autograd.

    from liger import ops
    y = ops.rms_norm(x, w, eps=1e-6)          # backward: liger.rms_norm_grad
    y, s = ops.add_rms_norm(x, r, w)          # s = x + r; backward: rms_norm_grad + add
    y = ops.layer_norm(x, w, b, eps=1e-5)     # backward: liger.layer_norm_grad
    y = ops.swiglu(gate, up)                  # backward: liger.swiglu_grad
    y = ops.geglu(gate, up, approximate="tanh")
    p = ops.softmax(x)                        # backward: liger.softmax_grad
    q, k = ops.rope(q, k, cos, sin)           # backward: liger.rope_grad
    loss = ops.cross_entropy(logits, target)  # the gradient written forward
    loss, z_loss = ops.cross_entropy(logits, target, lse_square_scale=1e-4, return_z_loss=True)
    loss = ops.fused_linear_cross_entropy(h, lm_head_weight, target)  # no logits kept
    per_token = ops.fused_linear_cross_entropy(h, lm_head_weight, target, reduction="none")
    loss, z_loss = ops.fused_linear_cross_entropy(h, w, target, bias=b, lse_square_scale=1e-4,
                                                  return_z_loss=True)
    loss = ops.kl_div(student_logp, teacher_p, reduction="batchmean")
    loss = ops.jsd(student_logp, teacher_logp, beta=0.5)
    loss = ops.fused_linear_jsd(h_student, w_student, h_teacher, w_teacher)  # no logits kept
    y = ops.lora_linear(x, w, b, lora_a, lora_b, scale=2.0)  # PEFT's LoRA layer, one kernel
    y = ops.gated_mlp(x, w_gate, w_up, w_down, "swiglu")  # gate/up+SwiGLU in one kernel,
                                              # backward: dh = dy·W_down + swiglu_grad in one
    q, k = ops.linear_rope(x, w_q, w_k, cos, sin)  # q/k projections + RoPE in one kernel
    o = ops.attention(q, k, v, causal=True)   # SDPA's meaning (causal bottom-right), GQA;
                                              # backward: liger.attention_grad from out, lse

Each function validates every argument (types, ranges, finite floats,
enums, shapes, dtypes, devices) before anything is compiled or launched,
then calls its PyTorch operator (`torch.ops.liger.*`, liger.operators:
custom ops with fake implementations and autograd, so `torch.compile`
traces them with no graph break). The configuration (the op, its
attributes, the feature size, the dtypes and the target of the tensors'
device) is a spec (liger.specs) naming a small liger module, whose bundle
comes from a precompiled cache ($LIGER_OPS_BUNDLES), the user's bundle
cache, or liger-compile on first use (liger.bundles), once per process.

Tensors: CUDA tensors of one device (the target from its compute
capability: sm_90a on Hopper, sm_80 or sm_86 on Ampere and Ada), or CPU
tensors with LIGER_OPS_CPU_REFERENCE=1 (the compiler's reference lowering,
slow, for tests). Row ops take [..., H] and flatten the
leading dimensions into rows, on both. A non-contiguous input is copied
(`.contiguous()`), for every op; only `cross_entropy(inplace=True)` refuses
non-contiguous logits, since a copy would not be in place.

A call a kernel cannot take is refused, naming the rule, but for
attention's: where the attention template does not take a call (sm_80 and
sm_86, f32, head dimensions it has no tiles for, keys of another length
than the queries; a backward of D 192 or 256), liger.ops.attention runs
PyTorch's scaled_dot_product_attention instead (a softcapped call, the
same math as Hugging Face's eager attention), with one
LigerFallbackWarning per reason.

The forwards save what their backward kernels read (RMSNorm's rstd,
add + RMSNorm's sum and rstd, LayerNorm's mean and rstd, softmax's
output); cross-entropy's forward keeps the gradient of a unit
incoming gradient (the logits' size, as Liger-Kernel does) and its backward
scales it by the incoming gradient; the fused linear cross-entropy forms
dx and dW in its forward. The LoRA projection's backward forms dx by the
template's kernel (dy·W + s·(dy·B)·A, W read in place), dA from the dy·B
that kernel leaves and dB with x·Aᵀ recomputed (PyTorch's matmuls). The gated
MLP saves x, gate, up and act(gate) * up; its weight gradients and dx are
PyTorch's matmuls. The q/k projections with RoPE save x, the weights and
the tables; their backward is RoPE's gradient kernel, then PyTorch's
matmuls. Attention saves q, k, v, its output and each row's log-sum-exp
(the forward kernel's second result); its backward is one kernel.
"""

import importlib.util
import operator
import sys
import warnings

from . import bundles, specs
from .errors import LigerError, LigerFallbackWarning, LigerTypeError, LigerValueError
from .loss_plan import plan_chunks, plan_jsd_chunks
from .specs import (DEFAULT_TARGET, add_rms_norm_spec, attention_spec,  # noqa: F401
                    check_bool, check_int, check_temperature, cross_entropy_spec, fused_linear_cross_entropy_spec,
                    fused_linear_cross_entropy_unsupported_shape, gated_mlp_spec, geglu_spec,
                    layer_norm_spec, lm_head_problem, linear_rope_spec, lora_linear_spec, module_text,
                    parse_spec, rms_norm_spec, rope_spec, softmax_spec, swiglu_spec)

if importlib.util.find_spec("torch") is not None:
    import torch

    from . import operators
else:  # the command line (precompile, module, plan) needs no torch
    torch = operators = None

TARGET = DEFAULT_TARGET
bundle_path = bundles.bundle_path
cpu_reference_enabled = bundles.cpu_reference_enabled
fused_linear_cross_entropy_plan = plan_chunks


def bundle_key(spec, target=None):
    """The cache key of `spec` (a Spec, or its text for `target`)."""
    spec = specs.as_spec(spec, target or DEFAULT_TARGET)
    return (spec if target is None else spec.with_target(target)).key()


def precompile(out_dir, spec_list, target=None):
    """Compiles each spec into the bundle cache `out_dir` (needs
    liger-compile), for `target` where given; point LIGER_OPS_BUNDLES at it
    where no compiler is. Returns the bundle paths."""
    return bundles.precompile(out_dir, spec_list, target)


def compiler_identity():
    """The identity (liger-compile's sha256, ptxas' version) that precompile
    records in each entry it makes."""
    from .compiler import compiler_identity as identity
    return identity()


# --- argument checks (before any spec, compile or launch) ------------------
#
# Each op checks its call in two parts. What is fixed for a configuration
# (tensor types, devices and the device's target, dtypes, static sizes,
# the attributes and their types) is checked once: its result, the
# operator's canonical arguments, is remembered under the call's static
# facts (`_once`), so a configuration already seen costs one dictionary
# lookup. What changes from call to call (the token dimensions: targets
# against the rows, RoPE's batch and sequence) is a few comparisons, made
# every call. While torch.compile traces, everything is checked (once per
# graph) and static sizes are specialized.

_SEEN = {}


def clear_caches():
    """Forgets every checked configuration, loaded spec, bundle and kernel,
    and the fallbacks already warned of."""
    _SEEN.clear()
    _WARNED.clear()
    if operators is not None:
        operators.clear()
    bundles.clear()


def _once(key, check, *args):
    """check(*args) (raising for a bad call; else the operator's canonical
    arguments), computed once per `key()`: the call's static facts, each
    scalar with its type (True and 1.0 are equal keys, not equal calls)."""
    if torch.compiler.is_compiling():
        return check(*args)
    try:
        facts = key()
        return _SEEN[facts]
    except KeyError:
        pass
    except (AttributeError, IndexError, TypeError):  # not tensors, no dimension, unhashable
        return check(*args)
    checked = _SEEN[facts] = check(*args)
    return checked


def one_device(op, devices):
    """The device of `devices` ((name, torch.device) pairs) when they are
    all on one, else LigerValueError naming two that are not."""
    first_name, first = devices[0]
    for name, device in devices[1:]:
        if device != first:
            raise LigerValueError("liger.ops.%s: %s is on %s and %s on %s"
                                  % (op, first_name, first, name, device))
    return first


def _tensors(op, tensors, optional=()):
    """The device of `tensors` (name -> value): each a torch.Tensor (those
    named in `optional` may be None), all on one device liger has kernels
    for (bundles.device_target)."""
    devices = []
    for name, t in tensors.items():
        if t is None and name in optional:
            continue
        if not isinstance(t, torch.Tensor):
            raise LigerTypeError("liger.ops.%s: %s must be a torch.Tensor, got %s"
                                 % (op, name, type(t).__name__))
        devices.append((name, t.device))
    device = one_device(op, devices)
    bundles.device_target(device)
    return device


def static(value):
    """`value` as the Python constant it is: a size or a float attribute
    that torch.compile(dynamic=True) made a symbol is specialized (guarded
    on its value: operator.index and the value's own __float__ specialize;
    dynamo 2.11 cannot trace float.__float__ of a symbol). Sizes,
    vocabularies and attributes are static in liger: only the token count
    is dynamic."""
    if isinstance(value, (int, torch.SymInt)) and not isinstance(value, bool):
        return operator.index(value)
    if isinstance(value, (float, torch.SymFloat)):
        return value.__float__()
    return value


def _spec(make, args, device):
    """The spec `make(*args)` of the call's values (checked as they are,
    not through the operators' cache of canonical ones, where True is 1.0)
    for `device`'s target."""
    return make(*[static(a) for a in args], target=bundles.device_target(device))


_size = static


def _feature_size(op, name, t):
    """The feature size H of [..., H] rows."""
    if t.dim() < 1:
        raise LigerValueError("liger.ops.%s: %s must be [..., H] with at least one row, got "
                              "shape %s" % (op, name, list(t.shape)))
    return _size(t.shape[-1])


def _rows(op, name, t):
    """[..., H] has at least one row."""
    if t.numel() == 0:
        raise LigerValueError("liger.ops.%s: %s must be [..., H] with at least one row, got "
                              "shape %s" % (op, name, list(t.shape)))


def _same_shape(op, name, t, other_name, other):
    if t.shape != other.shape:
        raise LigerValueError("liger.ops.%s: %s must have the shape of %s %s, got %s" % (
            op, name, other_name, list(other.shape), list(t.shape)))


_raise = specs.raise_problem


def _dtype_problem(op, name, t, other_name, other):
    if t.dtype != other.dtype:
        return LigerTypeError, "liger.ops.%s: %s must have the dtype of %s (%s), got %s" % (
            op, name, other_name, other.dtype, t.dtype)
    return None


def _same_dtype(op, name, t, other_name, other):
    _raise(_dtype_problem(op, name, t, other_name, other))


def _class_weight(op, name, w, vocab):
    if w is not None and (not w.is_floating_point() or list(w.shape) != [vocab]):
        raise LigerValueError("liger.ops.%s: %s must be a float tensor of shape [%d] (the "
                              "vocabulary), got %s %s" % (op, name, vocab, w.dtype,
                                                          list(w.shape)))


def _target_dtype(op, target):
    """The class indices' dtype (the spec's rule, named as the call's)."""
    specs.dtype_name(target.dtype, "liger.ops.%s: target's dtype" % op, specs.TARGET_DTYPES)


def _targets(op, target, rows):
    """One class per row: target [...] of the rows' leading shape, or [N]
    over their N rows."""
    if target.shape != rows and (target.dim() != 1 or target.shape[0] != rows.numel()):
        shapes = "%s or [%d]" % (list(rows), rows.numel()) if len(rows) > 1 else \
            str(list(rows))
        raise LigerValueError("liger.ops.%s: target must have shape %s (one class per row), "
                              "got %s" % (op, shapes, list(target.shape)))


def rope_problem(q, k, cos, sin):
    """Why liger.rope cannot take q [B, Hq, T, D], k [B, Hk, T, D] and
    tables cos, sin [1 or B, T, D] of their dtype, as (exception class,
    message), or None. (The spec adds its rules: an even D.)"""
    if q.dim() != 4 or k.dim() != 4 or k.shape[0] != q.shape[0] or k.shape[2:] != q.shape[2:]:
        return LigerValueError, "liger.ops.rope: q and k must be [B, Hq, T, D] and [B, Hk, " \
            "T, D], got %s and %s" % (list(q.shape), list(k.shape))
    b, _, t, d = q.shape
    if cos.dim() != 3 or cos.shape[0] not in (1, b) or cos.shape[1:] != (t, d):
        return LigerValueError, "liger.ops.rope: cos must be [1 or %d, %d, %d] (B, T, D of " \
            "q), got %s" % (b, t, d, list(cos.shape))
    if sin.shape != cos.shape:
        return LigerValueError, "liger.ops.rope: sin must have the shape of cos %s, got %s" % (
            list(cos.shape), list(sin.shape))
    for name, other in (("k", k), ("cos", cos), ("sin", sin)):
        if other.dtype != q.dtype:
            return LigerTypeError, "liger.ops.rope: %s must have the dtype of q (%s), got " \
                "%s" % (name, q.dtype, other.dtype)
    if q.numel() == 0 or k.numel() == 0:
        return LigerValueError, "liger.ops.rope: q and k must not be empty, got %s and %s" % (
            list(q.shape), list(k.shape))
    return tables_problem("rope", cos, sin)


def constants_problem(op, names, tensors, why):
    """Inputs `tensors` (None for absent ones; `names` names them in the
    message) that the op's backward gives no gradient: ones that require
    grad where autograd records are refused, as (exception class,
    message), since their gradient would silently be missing (`why` says
    whose they are); else None."""
    if torch.is_grad_enabled() and any(t is not None and t.requires_grad for t in tensors):
        return LigerValueError, "liger.ops.%s: %s must not require grad (%s: detach %s)" % (
            op, names, why, "them" if len(tensors) > 1 else "it")
    return None


# Whose inputs a loss's backward gives no gradient (constants_problem's `why`).
_CLASS_WEIGHTS = "class weights get no gradient, as in PyTorch"
_TEACHER = "the teacher gets no gradient here, as in Liger-Kernel"


def tables_problem(op, cos, sin):
    """RoPE's tables are constants (constants_problem)."""
    return constants_problem(op, "cos and sin", (cos, sin), "RoPE's tables get no gradient here")


def lm_head_bias_problem(bias, weight):
    """Why liger.ops.fused_linear_cross_entropy cannot take `bias` for the
    lm_head `weight` [V, H] (it takes None, or [V] of the weight's dtype),
    as (exception class, message), or None."""
    op = "fused_linear_cross_entropy"
    if bias is None:
        return None
    if bias.dim() != 1 or bias.shape[0] != weight.shape[0]:
        return LigerValueError, "liger.ops.%s: bias must be [V] = [%d] (weight's V), got " \
            "%s" % (op, weight.shape[0], list(bias.shape))
    return _dtype_problem(op, "bias", bias, "weight", weight)


# --- the ops ---------------------------------------------------------------

def _feature_vector(op, name, t, h):
    """A norm's weight (or bias) [H] for rows [..., H]."""
    if list(t.shape) != [h]:
        raise LigerValueError("liger.ops.%s: %s must have shape [%d] (the hidden size of x), "
                              "got %s" % (op, name, h, list(t.shape)))


def _rms_norm_checked(x, weight, eps, offset, casting, op="rms_norm", make=rms_norm_spec):
    device = _tensors(op, dict(x=x, weight=weight))
    h = _feature_size(op, "x", x)
    _feature_vector(op, "weight", weight, h)
    spec = _spec(make, (h, x.dtype, weight.dtype, eps, offset, casting), device)
    return spec.eps, spec.offset, spec.casting


def rms_norm(x, weight, eps=1e-6, offset=0.0, casting="llama"):
    """RMSNorm over the last dimension of x [..., H] with weight [H]
    (liger.rms_norm; casting "llama", "gemma" or "none" as Hugging Face's
    Llama and Gemma modules; y = x_hat * (offset + weight))."""
    config = _once(lambda: (
        "rms_norm", type(x), type(weight), x.device, weight.device, x.dtype, weight.dtype,
        x.shape[-1], weight.shape, type(eps), eps, type(offset), offset, type(casting),
        casting), _rms_norm_checked, x, weight, eps, offset, casting)
    _rows("rms_norm", "x", x)
    return operators.call(operators.rms_norm, x, weight, *config)[0]


def rms_norm_linear_problem(x, weight, weights, biases=None):
    """Why liger.ops.rms_norm_linear cannot take x [..., H] (a tensor), the
    norm's weight [H], the projections' `weights` (a list of [N_i, H], one
    at least) and `biases` (None, or one [N_i] per weight; a list of Nones
    is None), every projection tensor of x's dtype and device, as
    (exception class, message), or None: the rules of the projections (the
    norm's are liger.ops.rms_norm's)."""
    op = "rms_norm_linear"
    biases = _no_biases(biases)
    if not isinstance(weights, (list, tuple)) or not weights:
        return LigerValueError, "liger.ops.%s: weights must be a list of one projection " \
            "weight [N, H] or more, got %s" % (op, "an empty list" if isinstance(
                weights, (list, tuple)) else type(weights).__name__)
    if biases is not None and (not isinstance(biases, (list, tuple)) or
                               len(biases) != len(weights)):
        return LigerValueError, "liger.ops.%s: biases must be None or a list of one bias per " \
            "weight (%d), got %s" % (op, len(weights), "%d" % len(biases) if isinstance(
                biases, (list, tuple)) else type(biases).__name__)
    named = []
    for i, w in enumerate(weights):
        if not isinstance(w, torch.Tensor):
            return LigerTypeError, "liger.ops.%s: weights[%d] must be a torch.Tensor, got %s" % (
                op, i, type(w).__name__)
        if w.dim() != 2 or w.shape[1] != x.shape[-1]:
            return LigerValueError, "liger.ops.%s: weights[%d] must be [N, H] with H = %s (the " \
                "features of x), got %s" % (op, i, x.shape[-1], list(w.shape))
        named.append(("weights[%d]" % i, w))
        if biases is None:
            continue
        b = biases[i]
        if b is None:
            return LigerValueError, "liger.ops.%s: biases must be one per weight or none, got " \
                "biases[%d] None beside %d others" % (op, i, sum(c is not None for c in biases))
        if not isinstance(b, torch.Tensor):
            return LigerTypeError, "liger.ops.%s: biases[%d] must be a torch.Tensor, got %s" % (
                op, i, type(b).__name__)
        if list(b.shape) != [w.shape[0]]:
            return LigerValueError, "liger.ops.%s: biases[%d] must be [N] = [%d] (weights[%d]'s " \
                "N), got %s" % (op, i, w.shape[0], i, list(b.shape))
        named.append(("biases[%d]" % i, b))
    for name, t in named:
        problem = _dtype_problem(op, name, t, "x", x)
        if problem:
            return problem
    try:
        one_device(op, [("x", x.device)] + [(name, t.device) for name, t in named])
    except LigerError as e:
        return type(e), str(e)
    return None


def _no_biases(biases):
    """None for a list of biases that are all None, else the list."""
    if isinstance(biases, (list, tuple)) and biases and all(b is None for b in biases):
        return None
    return biases


def _rms_norm_linear_checked(x, weight, weights, biases, eps, offset, casting):
    config = _rms_norm_checked(x, weight, eps, offset, casting, op="rms_norm_linear")
    _raise(rms_norm_linear_problem(x, weight, weights, biases))
    return config


def rms_norm_linear(x, weight, weights, biases=None, eps=1e-6, offset=0.0, casting="llama"):
    """(xn, [y_i]): RMSNorm of x [..., H] with weight [H] (liger.ops.rms_norm's
    eps, offset and casting), and the projections that read it, y_i = xn ·
    W_iᵀ (+ b_i) for `weights` [N_i, H] (and `biases` [N_i], one per weight,
    or None), as one autograd op (the attention's q/k/v after its norm, the
    MLP's gate/up after its). The forward is the norm's kernel and each
    projection; the backward accumulates the projections' input gradients
    into one buffer (no add per reader of xn), adds that of xn's other
    readers, and runs the norm's backward kernel with the forward's rstd.
    Every projection tensor has x's dtype and device, and the op computes
    in that dtype whatever autocast says (autocast is off inside it)."""
    weights = list(weights) if isinstance(weights, tuple) else weights
    biases = _no_biases(list(biases) if isinstance(biases, tuple) else biases)
    config = _once(lambda: (
        "rms_norm_linear", type(x), type(weight), x.device, weight.device, x.dtype,
        weight.dtype, x.shape[-1], weight.shape, type(eps), eps, type(offset), offset,
        type(casting), casting) + tuple(
            (type(w), w.device, w.dtype, w.shape) for w in weights) + (
            biases is None,) + tuple((type(b), b.device, b.dtype, b.shape) for b in biases or ()),
        _rms_norm_linear_checked, x, weight, weights, biases, eps, offset, casting)
    _rows("rms_norm_linear", "x", x)
    with torch.autocast(x.device.type, enabled=False):
        xn, _, ys = operators.rms_norm_linear(x, weight, *config, weights, biases or [])
    return xn, ys


def _add_rms_norm_checked(x, residual, weight, eps, offset, casting):
    op = "add_rms_norm"
    _tensors(op, dict(x=x, residual=residual, weight=weight))
    _same_dtype(op, "residual", residual, "x", x)
    return _rms_norm_checked(x, weight, eps, offset, casting, op, add_rms_norm_spec)


def add_rms_norm(x, residual, weight, eps=1e-6, offset=0.0, casting="llama"):
    """The residual add and the RMSNorm of the sum, over the last dimension
    of x and residual [..., H] (one shape and dtype) with weight [H]
    (liger.add_rms_norm; the attributes as rms_norm's). Returns (y, x +
    residual) as Hugging Face's fused add + norm does: the normalized sum
    and the sum, the next residual stream, rounded to x's dtype. The
    backward is RMSNorm's over the saved sum, with the sum's own incoming
    gradient added to its dx in the same kernel; x and residual get that
    gradient alike."""
    config = _once(lambda: (
        "add_rms_norm", type(x), type(residual), type(weight), x.device, residual.device,
        weight.device, x.dtype, residual.dtype, weight.dtype, x.shape[-1], weight.shape,
        type(eps), eps, type(offset), offset, type(casting), casting),
        _add_rms_norm_checked, x, residual, weight, eps, offset, casting)
    _same_shape("add_rms_norm", "residual", residual, "x", x)
    _rows("add_rms_norm", "x", x)
    y, total, _ = operators.call(operators.add_rms_norm, x, residual, weight, *config)
    return y, total


def _layer_norm_checked(x, weight, bias, eps):
    op = "layer_norm"
    device = _tensors(op, dict(x=x, weight=weight, bias=bias), ("bias",))
    h = _feature_size(op, "x", x)
    _feature_vector(op, "weight", weight, h)
    if bias is not None:
        _feature_vector(op, "bias", bias, h)
        _same_dtype(op, "bias", bias, "weight", weight)
    spec = _spec(layer_norm_spec, (h, x.dtype, weight.dtype, eps, bias is not None), device)
    return (spec.eps,)


def layer_norm(x, weight, bias, eps=1e-5):
    """LayerNorm over the last dimension of x [..., H] with weight [H] and
    bias [H] of the weight's dtype, or None (liger.layer_norm: mean and
    biased variance in f32, as F.layer_norm). The forward saves each row's
    mean and rstd (f32) for the backward (liger.layer_norm_grad); dbias
    only where there is a bias."""
    config = _once(lambda: (
        "layer_norm", type(x), type(weight), type(bias), x.device, weight.device,
        bias is not None and bias.device, x.dtype, weight.dtype, bias is not None and bias.dtype,
        x.shape[-1], weight.shape, bias is not None and bias.shape, type(eps), eps),
        _layer_norm_checked, x, weight, bias, eps)
    _rows("layer_norm", "x", x)
    return operators.call(operators.layer_norm, x, weight, bias, *config)[0]


def _gated_checked(op, gate, up, *attrs):
    device = _tensors(op, dict(gate=gate, up=up))
    _same_dtype(op, "up", up, "gate", gate)
    h = _feature_size(op, "gate", gate)
    _gated_shapes(op, gate, up)
    spec = _spec(getattr(specs, op + "_spec"), (h, gate.dtype) + attrs, device)
    return (spec.approximate,) if op == "geglu" else ()


def _gated_shapes(op, gate, up):
    _same_shape(op, "up", up, "gate", gate)
    _rows(op, "gate", gate)


def _gated_key(op, gate, up, *attrs):
    return lambda: (op, type(gate), type(up), gate.device, up.device, gate.dtype, up.dtype,
                    gate.shape[-1]) + tuple((type(a), a) for a in attrs)


def swiglu(gate, up):
    """silu(gate) * up over [..., H] (liger.swiglu)."""
    _once(_gated_key("swiglu", gate, up), _gated_checked, "swiglu", gate, up)
    _gated_shapes("swiglu", gate, up)
    return operators.call(operators.swiglu, gate, up)


def geglu(gate, up, approximate="tanh"):
    """gelu(gate) * up over [..., H] (liger.geglu; approximate "tanh" or
    "none")."""
    config = _once(_gated_key("geglu", gate, up, approximate), _gated_checked, "geglu", gate,
                   up, approximate)
    _gated_shapes("geglu", gate, up)
    return operators.call(operators.geglu, gate, up, *config)


def _softmax_checked(x):
    device = _tensors("softmax", dict(x=x))
    _spec(softmax_spec, (_feature_size("softmax", "x", x), x.dtype), device)
    return ()


def softmax(x):
    """Softmax over the last dimension of x [..., H] (liger.softmax)."""
    _once(lambda: ("softmax", type(x), x.device, x.dtype, x.shape[-1]), _softmax_checked, x)
    _rows("softmax", "x", x)
    return operators.call(operators.softmax, x)


def _rope_shapes(q, k, cos, sin):
    problem = rope_problem(q, k, cos, sin)
    if problem:
        kind, message = problem
        raise kind(message)


def _rope_checked(q, k, cos, sin):
    device = _tensors("rope", dict(q=q, k=k, cos=cos, sin=sin))
    _rope_shapes(q, k, cos, sin)
    _spec(rope_spec, (_size(q.shape[1]), _size(k.shape[1]), _size(q.shape[3]),
                                   q.dtype, True if cos.shape[0] == 1 else False), device)
    return ()


def rope(q, k, cos, sin):
    """Rotary embedding of q [B, Hq, T, D] and k [B, Hk, T, D] with tables
    cos, sin [1 or B, T, D] of their dtype (liger.rope, rotate-half
    convention). The tables are constants: ones that require grad are
    refused (the backward gives them none)."""
    _once(lambda: ("rope", type(q), type(k), type(cos), type(sin), q.device, k.device,
                   cos.device, sin.device, q.dtype, k.dtype, cos.dtype, sin.dtype, q.shape[1],
                   k.shape[1], q.shape[3], cos.shape[0] == 1),
          _rope_checked, q, k, cos, sin)
    _rope_shapes(q, k, cos, sin)
    return operators.call(operators.rope, q, k, cos, sin)


def _cross_entropy_checked(logits, target, weight, ignore_index, label_smoothing, reduction,
                           softcap, lse_square_scale, inplace, return_z_loss):
    op = "cross_entropy"
    device = _tensors(op, dict(logits=logits, target=target, weight=weight), ("weight",))
    v = _feature_size(op, "logits", logits)
    _target_dtype(op, target)
    _targets(op, target, logits.shape[:-1])
    _class_weight(op, "weight", weight, v)
    spec = _spec(cross_entropy_spec, (
        v, logits.dtype, target.dtype, ignore_index, label_smoothing, reduction, softcap,
        lse_square_scale, weight is not None, return_z_loss), device)
    check_bool("inplace", inplace)
    return (spec.ignore_index, spec.label_smoothing, spec.reduction, spec.softcap,
            spec.lse_square_scale, spec.return_z_loss)


def cross_entropy(logits, target, weight=None, ignore_index=-100, label_smoothing=0.0,
                  reduction="mean", softcap=None, lse_square_scale=0.0, inplace=False,
                  return_z_loss=False):
    """Cross-entropy of logits [..., V] against targets [...] (int32 or
    int64; liger.cross_entropy: PyTorch's F.cross_entropy semantics plus
    Liger-Kernel's softcap and z-loss, f32 math): one kernel computes the
    loss and writes its gradient, which backward scales by the incoming
    gradient. `weight`: class weights [V] (f32; not differentiated: one that
    requires grad is refused).
    `softcap`: None or 0 for none, else > 0. With `inplace=True` the
    gradient is written over the logits (no second [N, V] buffer): only for
    contiguous logits nothing else reads afterwards, as a loss's usually
    are. With `return_z_loss=True` returns (loss, z_loss): the z-loss term
    lse_square_scale · lse² alone (Liger-Kernel's; 0 without a scale),
    reduced as the loss (for "mean" over the counted tokens, unweighted),
    f32, from the same kernel; it is already in the loss and carries no
    gradient of its own (as Liger-Kernel, which drops its incoming
    gradient)."""
    config = _once(lambda: (
        "cross_entropy", type(logits), type(target), type(weight), logits.device,
        target.device, weight is not None and weight.device, logits.dtype, target.dtype,
        weight is not None and weight.dtype, logits.shape[-1],
        weight is not None and weight.shape, type(ignore_index), ignore_index,
        type(label_smoothing), label_smoothing, type(reduction), reduction, type(softcap),
        softcap, type(lse_square_scale), lse_square_scale, type(inplace), inplace,
        type(return_z_loss), return_z_loss),
        _cross_entropy_checked, logits, target, weight, ignore_index, label_smoothing,
        reduction, softcap, lse_square_scale, inplace, return_z_loss)
    _targets("cross_entropy", target, logits.shape[:-1])
    _rows("cross_entropy", "logits", logits)
    _raise(constants_problem("cross_entropy", "weight", (weight,), _CLASS_WEIGHTS))
    weight = weight.float() if weight is not None else None  # (the kernels read f32)
    if inplace:
        if not logits.is_contiguous():
            raise LigerValueError("liger.ops.cross_entropy(inplace=True) needs contiguous "
                                  "logits (a copy would not be in place)")
        base = logits._base if logits._base is not None else logits  # (traceable)
        if torch.is_grad_enabled() and logits.requires_grad and base.is_leaf:
            raise LigerValueError("liger.ops.cross_entropy(inplace=True) would write the "
                                  "gradient over a leaf that requires grad (or a view of one), "
                                  "which PyTorch does not write in place: pass logits computed "
                                  "from it, or inplace=False")
        loss, z_loss = operators.CrossEntropyInPlace.apply(logits, target, weight, *config)
    else:
        loss, z_loss, _ = operators.cross_entropy(logits, target, weight, *config)
        operators.grads_dropped(loss)
    return (loss, z_loss) if config[5] else loss


def _flce_checked(hidden, weight, target, class_weight, ignore_index, label_smoothing,
                  reduction, softcap, lse_square_scale, memory_budget, dw_f32, bias,
                  return_z_loss):
    op = "fused_linear_cross_entropy"
    device = _tensors(op, dict(hidden=hidden, weight=weight, target=target, bias=bias,
                               class_weight=class_weight), ("bias", "class_weight"))
    h = _feature_size(op, "hidden", hidden)
    if weight.dim() != 2 or weight.shape[1] != h:
        raise LigerValueError("liger.ops.fused_linear_cross_entropy takes hidden [..., H] and "
                              "weight [V, H], got %s and %s" % (list(hidden.shape),
                                                                list(weight.shape)))
    _same_dtype(op, "weight", weight, "hidden", hidden)
    _raise(lm_head_bias_problem(bias, weight))
    _target_dtype(op, target)
    _targets(op, target, hidden.shape[:-1])
    v = _size(weight.shape[0])
    _class_weight(op, "class_weight", class_weight, v)
    spec = _spec(fused_linear_cross_entropy_spec, (
        v, h, hidden.dtype, target.dtype, ignore_index, label_smoothing, reduction, softcap,
        lse_square_scale, class_weight is not None, dw_f32, bias is not None, return_z_loss),
        device)
    memory_budget = check_int("memory_budget", memory_budget, 1)
    plan_chunks(1, spec.vocab, spec.dtype, memory_budget)  # (a budget of at least a row)
    return (spec.ignore_index, spec.label_smoothing, spec.reduction, spec.softcap,
            spec.lse_square_scale, spec.return_z_loss, memory_budget, spec.dw_f32)


def check_fused_linear_cross_entropy(hidden, weight, target, class_weight=None,
                                     ignore_index=-100, label_smoothing=0.0, reduction="mean",
                                     softcap=None, lse_square_scale=0.0, memory_budget=2 ** 29,
                                     dw_f32=False, bias=None, return_z_loss=False):
    """What fused_linear_cross_entropy checks of its arguments (raising as it
    does), for callers that run its kernels themselves (liger.preference);
    returns the canonical (ignore_index, label_smoothing, reduction, softcap,
    lse_square_scale, return_z_loss, memory_budget, dw_f32)."""
    op = "fused_linear_cross_entropy"
    config = _once(lambda: (
        op, type(hidden), type(weight), type(target), type(bias), type(class_weight),
        hidden.device, weight.device, target.device, bias is not None and bias.device,
        class_weight is not None and class_weight.device, hidden.dtype, weight.dtype,
        target.dtype, bias is not None and bias.dtype,
        class_weight is not None and class_weight.dtype, hidden.shape[-1], weight.shape,
        bias is not None and bias.shape, class_weight is not None and class_weight.shape,
        type(ignore_index), ignore_index, type(label_smoothing), label_smoothing,
        type(reduction), reduction, type(softcap), softcap, type(lse_square_scale),
        lse_square_scale, type(memory_budget), memory_budget, type(dw_f32), dw_f32,
        type(return_z_loss), return_z_loss),
        _flce_checked, hidden, weight, target, class_weight, ignore_index, label_smoothing,
        reduction, softcap, lse_square_scale, memory_budget, dw_f32, bias, return_z_loss)
    _targets(op, target, hidden.shape[:-1])
    _rows(op, "hidden", hidden)
    return config


def fused_linear_cross_entropy(hidden, weight, target, class_weight=None, ignore_index=-100,
                               label_smoothing=0.0, reduction="mean", softcap=None,
                               lse_square_scale=0.0, memory_budget=2 ** 29, dw_f32=False,
                               bias=None, return_z_loss=False):
    """cross_entropy(hidden · weightᵀ + bias, target) for hidden [..., H],
    weight [V, H] (bf16 or f16, both sizes multiples of 8), the optional
    bias [V] (the weight's dtype), target [...], without the [tokens,
    vocab] logits in memory (liger.fused_linear_cross_entropy's meaning):
    the tokens go in chunks whose logits fit `memory_budget` bytes
    (fused_linear_cross_entropy_plan); per chunk one matmul kernel writes
    the logits (the bias added in its epilogue), one kernel their loss and,
    over them, their gradient G, then dx = G · W and dW += Gᵀ · x
    (accumulated in W's dtype, as Liger-Kernel does; with `dw_f32=True`
    into an f32 buffer of W's shape, rounded once at the end: exact sums
    for 4 bytes per weight of memory) and db += the column sums of G (in
    f32, rounded once). The forward computes the gradients autograd will
    ask for (none under torch.no_grad, none for a frozen lm_head's weight
    or bias); backward scales them by the incoming gradient. reduction:
    mean, sum or "none" (each token's loss, f32 in the target's shape; an
    ignored token's is 0). With "none" each token's incoming gradient is
    known only in the backward, so the forward runs the chunk loop for the
    losses alone (one logits matmul per chunk; the forward keeps its inputs,
    nothing of [tokens, vocab]) and the backward runs it again with those
    gradients: each chunk's logits recomputed, then G, dx, dW and db — one
    logits matmul more than mean/sum, memory as theirs. With
    `return_z_loss=True` returns (loss, z_loss): the z-loss term
    lse_square_scale · lse² alone (Liger-Kernel's), reduced as the loss
    (for "mean" over the counted tokens, unweighted), f32; it is already in
    the loss and carries no gradient of its own (as Liger-Kernel, which
    drops its incoming gradient)."""
    config = check_fused_linear_cross_entropy(
        hidden, weight, target, class_weight, ignore_index, label_smoothing, reduction, softcap,
        lse_square_scale, memory_budget, dw_f32, bias, return_z_loss)
    _raise(constants_problem("fused_linear_cross_entropy", "class_weight", (class_weight,),
                             _CLASS_WEIGHTS))
    class_weight = class_weight.float() if class_weight is not None else None
    grad = torch.is_grad_enabled()
    loss, z_loss, _, _, _ = operators.fused_linear_cross_entropy(
        hidden, weight, target, bias, class_weight, *config, grad and hidden.requires_grad,
        grad and weight.requires_grad, grad and bias is not None and bias.requires_grad)
    operators.grads_dropped(loss)
    return (loss, z_loss) if config[5] else loss


# --- KL divergence, JSD (distillation losses) -------------------------------

def _token_matrix(op, name, t):
    """[tokens, vocab] with at least one token (Liger-Kernel's [BT, V])."""
    if t.dim() != 2 or t.numel() == 0:
        raise LigerValueError("liger.ops.%s: %s must be [tokens, vocab] with at least one "
                              "token, got shape %s" % (op, name, list(t.shape)))


def _divergence_operands(op, input, target):
    _token_matrix(op, "input", input)
    _same_shape(op, "target", target, "input", input)


def _kl_div_checked(input, target, reduction, log_target, eps):
    op = "kl_div"
    device = _tensors(op, dict(input=input, target=target))
    _same_dtype(op, "target", target, "input", input)
    _divergence_operands(op, input, target)
    reduction = specs.check_choice("reduction", reduction, specs.KL_REDUCTIONS)
    spec = _spec(specs.kl_div_spec, (_size(input.shape[1]), input.dtype, log_target, eps,
                                     reduction == "none"), device)
    return reduction, spec.log_target, spec.eps


def kl_div(input, target, reduction="batchmean", log_target=False, eps=1e-10):
    """KL divergence of log-probabilities input [tokens, vocab] from target
    (probabilities, or log-probabilities with `log_target`) of its shape and
    dtype, as Liger-Kernel's LigerKLDivLossFunction: pointwise
    target · (log(max(target, eps)) − input) (exp(target) · (target − input)
    with log_target); reduction "none" ([tokens, vocab]), "sum", "mean" (over
    every element) or "batchmean" (over the tokens). The result is f32. One
    kernel writes each token's sum (each element for "none") and, where
    input needs a gradient, the reduction is not "none" and the dtype is
    not f16, in the same pass −target (−exp(target)) over the divisor,
    kept for backward, which scales it by the incoming gradient (else
    backward writes −target times the incoming gradient's share, formed in
    f32: in f16, −target / divisor alone would underflow before a loss
    scaler's factor lifts it). The target is not differentiated
    (Liger-Kernel's neither): one that requires grad is refused."""
    config = _once(lambda: (
        "kl_div", type(input), type(target), input.device, target.device, input.dtype,
        target.dtype, input.dim(), input.shape[-1], target.shape[-1], type(reduction),
        reduction, type(log_target), log_target, type(eps), eps),
        _kl_div_checked, input, target, reduction, log_target, eps)
    _divergence_operands("kl_div", input, target)
    _raise(constants_problem("kl_div", "target", (target,),
                             "the target gets no gradient here, as in Liger-Kernel"))
    want_grad = torch.is_grad_enabled() and input.requires_grad
    return operators.grads_dropped(operators.kl_div(input, target, *config, want_grad)[0])


def _shift_labels(op, shift_labels, tokens):
    if shift_labels is None:
        return
    specs.dtype_name(shift_labels.dtype, "liger.ops.%s: shift_labels' dtype" % op,
                     specs.TARGET_DTYPES)
    if list(shift_labels.shape) != [tokens]:
        raise LigerValueError("liger.ops.%s: shift_labels must have shape [%d] (one label per "
                              "token), got %s" % (op, tokens, list(shift_labels.shape)))


def _jsd_checked(input, target, shift_labels, beta, ignore_index):
    op = "jsd"
    device = _tensors(op, dict(input=input, target=target, shift_labels=shift_labels),
                      ("shift_labels",))
    _same_dtype(op, "target", target, "input", input)
    _divergence_operands(op, input, target)
    _shift_labels(op, shift_labels, input.shape[0])
    spec = _spec(specs.jsd_spec, (_size(input.shape[1]), input.dtype, beta, ignore_index,
                                  None if shift_labels is None else shift_labels.dtype), device)
    return spec.beta, spec.ignore_index


def jsd(input, target, shift_labels=None, beta=0.5, ignore_index=-100):
    """Liger-Kernel's generalized Jensen-Shannon divergence of the student's
    log-probabilities input [tokens, vocab] from the teacher's, target, of
    its shape and dtype: beta · KL(P ‖ M) + (1 − beta) · KL(Q ‖ M) per token
    with M = beta · P + (1 − beta) · Q (beta 0: the forward KL(P ‖ Q), 1: the
    reverse KL(Q ‖ P)), averaged over the tokens whose shift label (int32 or
    int64 [tokens], optional) is not `ignore_index` (0 when none is); the
    result has input's dtype. One kernel reads each row once and writes
    its token's loss and the gradient of a unit incoming gradient (kept for
    backward, as Liger-Kernel keeps it; none under torch.no_grad or for an
    input that needs none), which backward scales by the incoming gradient.
    The target is not differentiated: one that requires grad is refused."""
    config = _once(lambda: (
        "jsd", type(input), type(target), type(shift_labels), input.device, target.device,
        shift_labels is not None and shift_labels.device, input.dtype, target.dtype,
        shift_labels is not None and shift_labels.dtype, input.dim(), input.shape[-1],
        target.shape[-1], type(beta), beta, type(ignore_index), ignore_index),
        _jsd_checked, input, target, shift_labels, beta, ignore_index)
    _divergence_operands("jsd", input, target)
    _raise(constants_problem("jsd", "target", (target,), _TEACHER))
    _shift_labels("jsd", shift_labels, input.shape[0])
    want_grad = torch.is_grad_enabled() and input.requires_grad
    return operators.grads_dropped(
        operators.jsd(input, target, shift_labels, *config, want_grad)[0])


def _lm_head(op, input_name, x, weight_name, w, instead):
    """x [tokens, H] (at least one) and an lm_head w [V, H] of its dtype
    that the matmul kernels take (specs.lm_head_problem, `instead` naming
    what to use otherwise)."""
    if x.dim() != 2 or x.shape[0] == 0 or w.dim() != 2 or w.shape[1] != x.shape[1]:
        raise LigerValueError("liger.ops.%s: %s must be [tokens, H] with at least one token "
                              "and %s [V, H], got %s and %s" % (
                                  op, input_name, weight_name, list(x.shape), list(w.shape)))
    _same_dtype(op, weight_name, w, input_name, x)
    _raise(lm_head_problem(w.shape[0], w.shape[1], x.dtype, "liger.ops." + op, instead))


def _fljsd_shapes(student_input, student_weight, teacher_input, teacher_weight,
                  shift_labels):
    op = "fused_linear_jsd"
    instead = "liger.ops.jsd on the logits"
    _lm_head(op, "student_input", student_input, "student_weight", student_weight, instead)
    _lm_head(op, "teacher_input", teacher_input, "teacher_weight", teacher_weight, instead)
    if teacher_input.shape[0] != student_input.shape[0] or \
            teacher_weight.shape[0] != student_weight.shape[0]:
        raise LigerValueError("liger.ops.%s: the teacher must have the student's tokens (%d) "
                              "and vocabulary (%d), got %d and %d" % (
                                  op, student_input.shape[0], student_weight.shape[0],
                                  teacher_input.shape[0], teacher_weight.shape[0]))
    _shift_labels(op, shift_labels, student_input.shape[0])


def _fljsd_checked(student_input, student_weight, teacher_input, teacher_weight,
                   shift_labels, jsd_beta, ignore_index, temperature, memory_budget, dw_f32):
    op = "fused_linear_jsd"
    device = _tensors(op, dict(student_input=student_input, student_weight=student_weight,
                               teacher_input=teacher_input, teacher_weight=teacher_weight,
                               shift_labels=shift_labels), ("shift_labels",))
    _fljsd_shapes(student_input, student_weight, teacher_input, teacher_weight, shift_labels)
    _same_dtype(op, "teacher_input", teacher_input, "student_input", student_input)
    dw_f32 = check_bool("dw_f32", dw_f32)
    # The rules of the kernels it runs (fused_linear_jsd_specs).
    student, _, jsd = _spec(fused_linear_jsd_specs, (
        _size(student_weight.shape[0]), _size(student_weight.shape[1]),
        _size(teacher_weight.shape[1]), student_input.dtype, jsd_beta, ignore_index,
        None if shift_labels is None else shift_labels.dtype, temperature, dw_f32), device)
    memory_budget = check_int("memory_budget", memory_budget, 1)
    plan_jsd_chunks(1, student.vocab, student_input.dtype, memory_budget)  # (at least a row)
    return jsd.beta, jsd.ignore_index, jsd.temperature, memory_budget, dw_f32


def fused_linear_jsd_specs(vocab, student_hidden, teacher_hidden, dtype, jsd_beta=0.5,
                           ignore_index=-100, labels=None, temperature=1.0, dw_f32=False,
                           target=DEFAULT_TARGET):
    """The kernels fused_linear_jsd runs (for precompile): the student's and
    the teacher's lm_head matmuls (the fused loss's plans) and the JSD's row
    kernels of their logits at `temperature`, with shift labels of dtype
    `labels` (None for none)."""
    return [fused_linear_cross_entropy_spec(vocab, student_hidden, dtype, dw_f32=dw_f32,
                                            target=target),
            fused_linear_cross_entropy_spec(vocab, teacher_hidden, dtype, target=target),
            specs.jsd_spec(vocab, dtype, jsd_beta, ignore_index, labels, temperature, target)]


def fused_linear_jsd(student_input, student_weight, teacher_input, teacher_weight,
                     shift_labels=None, jsd_beta=0.5, ignore_index=-100, temperature=1.0,
                     memory_budget=2 ** 29, dw_f32=False):
    """Liger-Kernel's fused linear JSD (distillation): jsd(log_softmax(x_s ·
    W_sᵀ / T), log_softmax(x_t · W_tᵀ / T)) of the student's tokens
    student_input [tokens, H_s] through its lm_head student_weight [V, H_s]
    and the teacher's teacher_input [tokens, H_t], teacher_weight [V, H_t]
    (bf16 or f16, one dtype; sizes multiples of 8), averaged over the tokens
    whose shift label is not `ignore_index` (0 when none is); the result is
    f32. Without the [tokens, vocab] logits in memory: per chunk of tokens
    (what `memory_budget` bytes hold: plan_jsd_chunks) the fused
    cross-entropy's matmul kernels write both logits (rounded to the inputs'
    dtype, where Liger-Kernel keeps them in f32), liger.jsd's row kernel
    reads them, takes both log-softmaxes at the temperature in f32 and
    writes the loss per token and, over the student's logits, their
    gradient G, then dx = G · W_s and dW_s += Gᵀ · x_s (in W's dtype, or
    with `dw_f32` in f32, rounded once). The forward
    forms the gradients autograd will ask for; backward scales them. The
    teacher is not differentiated: teacher tensors that require grad are
    refused."""
    op = "fused_linear_jsd"
    config = _once(lambda: (
        op, type(student_input), type(student_weight), type(teacher_input),
        type(teacher_weight), type(shift_labels), student_input.device, student_weight.device,
        teacher_input.device, teacher_weight.device,
        shift_labels is not None and shift_labels.device, student_input.dtype,
        student_weight.dtype, teacher_input.dtype, teacher_weight.dtype,
        shift_labels is not None and shift_labels.dtype, student_input.dim(),
        student_input.shape[-1], student_weight.shape, teacher_input.dim(),
        teacher_input.shape[-1], teacher_weight.shape, type(jsd_beta), jsd_beta,
        type(ignore_index), ignore_index, type(temperature), temperature,
        type(memory_budget), memory_budget, type(dw_f32), dw_f32),
        _fljsd_checked, student_input, student_weight, teacher_input, teacher_weight,
        shift_labels, jsd_beta, ignore_index, temperature, memory_budget, dw_f32)
    _fljsd_shapes(student_input, student_weight, teacher_input, teacher_weight, shift_labels)
    _raise(constants_problem(op, "teacher_input and teacher_weight",
                             (teacher_input, teacher_weight), _TEACHER))
    grad = torch.is_grad_enabled()
    return operators.grads_dropped(operators.fused_linear_jsd(
        student_input, student_weight, teacher_input, teacher_weight, shift_labels, *config,
        grad and student_input.requires_grad, grad and student_weight.requires_grad)[0])


# --- LoRA projection ---------------------------------------------------------

def _lora_checked(x, weight, bias, lora_a, lora_b, scale):
    op = "lora_linear"
    device = _tensors(op, dict(x=x, weight=weight, bias=bias, lora_a=lora_a, lora_b=lora_b),
                      ("bias",))
    k = _feature_size(op, "x", x)
    if weight.dim() != 2 or weight.shape[1] != k:
        raise LigerValueError("liger.ops.%s: weight must be [N, K] with K = %d (the features "
                              "of x), got %s" % (op, k, list(weight.shape)))
    n = _size(weight.shape[0])
    if lora_a.dim() != 2 or lora_a.shape[1] != k:
        raise LigerValueError("liger.ops.%s: lora_a must be [r, K] with K = %d (the features "
                              "of x), got %s" % (op, k, list(lora_a.shape)))
    r = _size(lora_a.shape[0])
    if list(lora_b.shape) != [n, r]:
        raise LigerValueError("liger.ops.%s: lora_b must be [N, r] = [%d, %d] (weight's N, "
                              "lora_a's r), got %s" % (op, n, r, list(lora_b.shape)))
    if bias is not None and list(bias.shape) != [n]:
        raise LigerValueError("liger.ops.%s: bias must be [N] = [%d] (weight's N), got %s"
                              % (op, n, list(bias.shape)))
    for name, t in (("weight", weight), ("lora_a", lora_a), ("lora_b", lora_b), ("bias", bias)):
        if t is not None:
            _same_dtype(op, name, t, "x", x)
    spec = _spec(lora_linear_spec, (k, n, r, x.dtype, scale, bias is not None), device)
    return (spec.scale,)


def lora_linear(x, weight, bias, lora_a, lora_b, scale=1.0):
    """PEFT's LoRA projection x · Wᵀ + b + (x · Aᵀ) · Bᵀ · scale of x [..., K]
    with weight [N, K], bias [N] or None, lora_a [r, K] and lora_b [N, r],
    all of one dtype (liger.lora_linear; scale: PEFT's lora_alpha / r). The
    forward is one kernel of the matmul template (both products accumulate
    in f32; x · Aᵀ is rounded to the dtype before its product with B, as
    PEFT rounds it), which takes bf16 or f16, rank 16, 32 or 64, N a
    multiple of 8 and K of 8 (sm_90a) or 32 (sm_80, sm_86); anything else is
    refused, naming the rule. The backward's dx = dy · W + ((dy · B) · A) ·
    scale is the template's kernel too (the projection of dy with Wᵀ, Bᵀ
    and Aᵀ, W read in place; PyTorch's matmuls where the configuration has
    no such kernel, e.g. N not a multiple of 32 on sm_80), and the rest
    PyTorch's matmuls: dW = dyᵀ · x, db, dA = ((dy · B) · scale)ᵀ · x (dy · B
    as the dx kernel leaves it), dB = dyᵀ · (x · Aᵀ) · scale (x · Aᵀ as the
    forward's kernel leaves it, kept where B takes a gradient), each where
    autograd asks for it."""
    config = _once(lambda: (
        "lora_linear", type(x), type(weight), type(bias), type(lora_a), type(lora_b), x.device,
        weight.device, bias is not None and bias.device, lora_a.device, lora_b.device, x.dtype,
        weight.dtype, bias is not None and bias.dtype, lora_a.dtype, lora_b.dtype, x.dim(),
        x.shape[-1], weight.shape, bias is not None and bias.shape, lora_a.shape, lora_b.shape,
        type(scale), scale),
        _lora_checked, x, weight, bias, lora_a, lora_b, scale)
    _rows("lora_linear", "x", x)
    return operators.call(operators.lora_linear, x, weight, bias, lora_a, lora_b, *config,
                          operators.lora_keeps_mid(lora_b))[0]


# --- q/k projections with RoPE ------------------------------------------------

def linear_rope_problem(x, q_weight, k_weight, cos, sin, q_bias, k_bias):
    """Why liger.ops.linear_rope cannot take x [B, T, H], q_weight [Hq·D,
    H], k_weight [Hk·D, H], tables [1 or B, T, D] and biases [Hq·D], [Hk·D]
    (both or neither), all of x's dtype, as (exception class, message), or
    None: the rules of the call's tensors (the batch and sequence vary per
    call; the spec adds its own)."""
    op = "liger.ops.linear_rope"
    if x.dim() != 3 or x.numel() == 0:
        return LigerValueError, "%s: x must be [B, T, H] with at least one token, got shape " \
            "%s" % (op, list(x.shape))
    b, t, h = x.shape
    if cos.dim() != 3 or cos.shape[0] not in (1, b) or cos.shape[1] != t or cos.shape[2] < 2 \
            or cos.shape[2] % 2:
        return LigerValueError, "%s: cos must be [1 or %d, %d, D] (B and T of x, D the even " \
            "head size), got %s" % (op, b, t, list(cos.shape))
    if sin.shape != cos.shape:
        return LigerValueError, "%s: sin must have the shape of cos %s, got %s" % (
            op, list(cos.shape), list(sin.shape))
    d = cos.shape[2]
    for name, w, bias_name, bias in (("q_weight", q_weight, "q_bias", q_bias),
                                     ("k_weight", k_weight, "k_bias", k_bias)):
        if w.dim() != 2 or w.shape[1] != h or w.shape[0] % d or w.shape[0] == 0:
            return LigerValueError, "%s: %s must be [heads * %d, %d] (whole heads of the " \
                "tables' D, x's H), got %s" % (op, name, d, h, list(w.shape))
        if bias is not None and list(bias.shape) != [w.shape[0]]:
            return LigerValueError, "%s: %s must be [%d] (%s's rows), got %s" % (
                op, bias_name, w.shape[0], name, list(bias.shape))
    if (q_bias is None) != (k_bias is None):
        return LigerValueError, "%s: q_bias and k_bias must be given together (the kernel " \
            "adds both or neither)" % op
    for name, other in (("q_weight", q_weight), ("k_weight", k_weight), ("cos", cos),
                        ("sin", sin), ("q_bias", q_bias), ("k_bias", k_bias)):
        if other is not None and other.dtype != x.dtype:
            return _dtype_problem("linear_rope", name, other, "x", x)
    return tables_problem("linear_rope", cos, sin)


def _linear_rope_checked(x, q_weight, k_weight, cos, sin, q_bias, k_bias):
    device = _tensors("linear_rope", dict(
        x=x, q_weight=q_weight, k_weight=k_weight, cos=cos, sin=sin, q_bias=q_bias,
        k_bias=k_bias), ("q_bias", "k_bias"))
    _raise(linear_rope_problem(x, q_weight, k_weight, cos, sin, q_bias, k_bias))
    _spec(linear_rope_spec, operators.linear_rope_args(x, q_weight, k_weight, cos,
                                                       q_bias is not None), device)
    return ()


def linear_rope(x, q_weight, k_weight, cos, sin, q_bias=None, k_bias=None):
    """The attention's q and k of x [B, T, H] with RoPE, as Hugging Face's
    attention forms them before its attention function:
    apply_rotary_pos_emb(split(x · Wqᵀ + bq), split(x · Wkᵀ + bk), cos, sin)
    with q_weight [Hq · D, H], k_weight [Hk · D, H], biases [Hq · D] and [Hk ·
    D] (both or neither) and tables cos, sin [1 or B, T, D]; returns q [B,
    Hq, T, D] and k [B, Hk, T, D] (rotate-half convention), all of one
    dtype. The forward is one kernel of the matmul template (the q/k
    projections with RoPE in the epilogue, stored head-major: liger-fuse-
    qkv-rope's group); the backward is RoPE's gradient kernel on dq and dk,
    then dx, dWq, dWk and the biases' gradients as GEMMs. It takes bf16 or
    f16, H a multiple of 8 (sm_90a) or 32 (sm_80, sm_86), D a multiple of
    16 up to 256 (sm_90a) or of 32 up to 128; anything else is refused,
    naming the rule. Saves x, the weights and the tables."""
    _once(lambda: (
        "linear_rope", type(x), type(q_weight), type(k_weight), type(cos), type(sin),
        type(q_bias), type(k_bias), x.device, q_weight.device, k_weight.device, cos.device,
        sin.device, q_bias is not None and q_bias.device, k_bias is not None and k_bias.device,
        x.dtype, q_weight.dtype, k_weight.dtype, cos.dtype, sin.dtype,
        q_bias is not None and q_bias.dtype, k_bias is not None and k_bias.dtype, x.dim(),
        x.shape[-1], q_weight.shape, k_weight.shape, cos.dim(), cos.shape[0] == 1,
        cos.shape[-1], q_bias is not None and q_bias.shape,
        k_bias is not None and k_bias.shape),
        _linear_rope_checked, x, q_weight, k_weight, cos, sin, q_bias, k_bias)
    _raise(linear_rope_problem(x, q_weight, k_weight, cos, sin, q_bias, k_bias))
    return operators.call(operators.linear_rope, x, q_weight, k_weight, cos, sin, q_bias,
                          k_bias)


# --- gated MLP ---------------------------------------------------------------

def _gated_mlp_checked(x, gate_weight, up_weight, down_weight, activation, approximate):
    op = "gated_mlp"
    device = _tensors(op, dict(x=x, gate_weight=gate_weight, up_weight=up_weight,
                               down_weight=down_weight))
    h = _feature_size(op, "x", x)
    if gate_weight.dim() != 2 or gate_weight.shape[1] != h:
        raise LigerValueError("liger.ops.%s: gate_weight must be [I, H] with H = %d (the "
                              "features of x), got %s" % (op, h, list(gate_weight.shape)))
    i = _size(gate_weight.shape[0])
    _same_shape(op, "up_weight", up_weight, "gate_weight", gate_weight)
    if list(down_weight.shape) != [h, i]:
        raise LigerValueError("liger.ops.%s: down_weight must be [H, I] = [%d, %d] (x's H, "
                              "gate_weight's I), got %s" % (op, h, i, list(down_weight.shape)))
    for name, t in (("gate_weight", gate_weight), ("up_weight", up_weight),
                    ("down_weight", down_weight)):
        _same_dtype(op, name, t, "x", x)
    spec = _spec(gated_mlp_spec, (h, i, x.dtype, activation, approximate), device)
    return spec.activation, spec.approximate


def gated_mlp(x, gate_weight, up_weight, down_weight, activation="swiglu", approximate="tanh"):
    """A gated MLP, down(act(x · W_gateᵀ) * (x · W_upᵀ)), of x [..., H] with
    gate_weight and up_weight [I, H] and down_weight [H, I], all of one
    dtype (Hugging Face's LlamaMLP without biases; liger.nn.LigerSwiGLUMLP's
    computation): `activation` "swiglu" (SiLU) or "geglu" (GELU, its
    `approximate` "tanh" or "none"). The forward is the matmul template's
    gate/up kernel with the activation in its epilogue (gate and up kept
    for the backward), then the down projection; the backward is the
    template's kernel of dh = dy · W_down with the activation's gradient in
    its epilogue (dgate and dup; dh is never stored), then dx, dW_gate,
    dW_up and dW_down as GEMMs. It takes bf16 or f16, I a multiple of 8 and
    H of 8 (sm_90a) or 32 (sm_80, sm_86); anything else is refused, naming
    the rule. Saves x, gate, up and act(gate) * up for the backward."""
    config = _once(lambda: (
        "gated_mlp", type(x), type(gate_weight), type(up_weight), type(down_weight), x.device,
        gate_weight.device, up_weight.device, down_weight.device, x.dtype, gate_weight.dtype,
        up_weight.dtype, down_weight.dtype, x.dim(), x.shape[-1], gate_weight.shape,
        up_weight.shape, down_weight.shape, type(activation), activation, type(approximate),
        approximate),
        _gated_mlp_checked, x, gate_weight, up_weight, down_weight, activation, approximate)
    _rows("gated_mlp", "x", x)
    return operators.call(operators.gated_mlp, x, gate_weight, up_weight, down_weight,
                          *config)[0]


# --- attention -----------------------------------------------------------------

def attention_problem(q, k, v, causal):
    """Why liger.ops.attention cannot take q [B, Hq, T, D] over k and v [B,
    Hkv, S, D] (Hq a multiple of Hkv) of q's dtype, with a causal mask or
    not, as (exception class, message), or None: the rules of the call's
    tensors (the batch and the lengths vary per call; the dtype's own rule
    is checked once)."""
    op = "liger.ops.attention"
    if q.dim() != 4 or k.dim() != 4 or v.dim() != 4:
        return LigerValueError, "%s: q, k and v must be [B, Hq, T, D], [B, Hkv, S, D] and " \
            "[B, Hkv, S, D], got %s, %s and %s" % (op, list(q.shape), list(k.shape),
                                                   list(v.shape))
    if q.numel() == 0 or k.numel() == 0:
        return LigerValueError, "%s: q and k must not be empty, got %s and %s" % (
            op, list(q.shape), list(k.shape))
    b, hq, t, d = q.shape
    if k.shape[0] != b or k.shape[3] != d:
        return LigerValueError, "%s: k must be [%d, Hkv, S, %d] (B and D of q), got %s" % (
            op, b, d, list(k.shape))
    if v.shape != k.shape:
        return LigerValueError, "%s: v must have the shape of k %s, got %s" % (
            op, list(k.shape), list(v.shape))
    if hq % k.shape[1]:
        return LigerValueError, "%s: q's heads (%d) must be a multiple of k's (%d): each " \
            "key/value head serves a group of query heads" % (op, hq, k.shape[1])
    for name, other in (("k", k), ("v", v)):
        problem = _dtype_problem("attention", name, other, "q", q)
        if problem:
            return problem
    if causal and k.shape[2] < t:
        return LigerValueError, "%s: the causal mask is aligned bottom-right (query i sees " \
            "the keys j <= i + S - T): it needs at least as many keys as queries, got T = %d " \
            "and S = %d" % (op, t, k.shape[2])
    return None


def _attention_checked(q, k, v, causal, scale, window, softcap):
    device = _tensors("attention", dict(q=q, k=k, v=v))
    causal = check_bool("causal", causal)
    _raise(attention_problem(q, k, v, causal))
    dtype = specs.dtype_name(q.dtype, "liger.ops.attention: q's dtype")
    scale = 0.0 if scale is None else specs.check_float("scale", static(scale), 0.0,
                                                         lo_open=True)
    window = 0 if window is None else specs.check_int("window", static(window), 1)
    if window and not causal:
        raise LigerValueError("liger.ops.attention: window=%d needs causal=True (a sliding "
                              "window bounds the keys below each query's diagonal)" % window)
    softcap = specs.check_softcap(static(softcap))
    return causal, scale, window, softcap, bundles.device_target(device), dtype, \
        _size(q.shape[3])


_WARNED = set()


@bundles.trace_constant
def _warn_fallback(message):
    """A LigerFallbackWarning "liger: <message>", once per message (under
    torch.compile: while the graph is traced, a constant of it)."""
    if message not in _WARNED:
        _WARNED.add(message)
        warnings.warn("liger: " + message, LigerFallbackWarning, stacklevel=3)


def attention(q, k, v, causal=False, scale=None, window=None, softcap=None):
    """Scaled dot-product attention, softmax(scale · q · kᵀ + mask) · v, of
    q [B, Hq, T, D] over k and v [B, Hkv, S, D], all of one dtype (bf16,
    f16 or f32), Hq a multiple of Hkv (grouped-query heads: query head h
    reads key/value head h // (Hq / Hkv)); returns out [B, Hq, T, D] in q's
    dtype (liger.attention: the scores and the softmax in f32). `scale`:
    None for 1/sqrt(D), else a finite number > 0. It is
    torch.nn.functional.scaled_dot_product_attention(q, k, v,
    is_causal=causal, scale=scale, enable_gqa=True) but for the causal
    mask, which is aligned bottom-right as FlashAttention's and liger's:
    query i sees the keys j <= i + S - T (SDPA's is aligned top-left; the
    two agree where T = S, as in training), so a query of a decoding step
    (T = 1) sees every key; a causal call needs S >= T (no query left
    without keys). `window`: None, or with `causal` a sliding window of W
    >= 1 keys: query i sees the keys i + S - T - W < j <= i + S - T (the W
    keys up to its diagonal: Hugging Face's `sliding_window`, whose mask
    keeps key j for query i where i - W < j <= i when S = T); the kernels
    skip the key blocks below every row's window. `softcap`: None (or 0),
    or c > 0 capping the scaled scores s to c · tanh(s / c) before the mask
    and the softmax (Gemma 2's attn_logit_softcapping); SDPA has no
    softcap, so a softcapped call that falls back runs the same math in
    PyTorch as Hugging Face's eager attention does (operators.
    softcapped_attention: the scores in the operands' dtype, the softmax in
    f32).

    The forward is the attention template's kernel (sm_90a), which also
    writes each row's log-sum-exp; out and the lse are saved with q, k and
    v, and the backward is the template's kernel of liger.attention_grad
    from them (no scores kept, none recomputed but from the lse). Where the
    template does not take the call on its tensors' target, the call runs
    PyTorch's scaled_dot_product_attention instead (with the mask above;
    with a softcap, operators.softcapped_attention),
    with one LigerFallbackWarning per reason (specs.attention_unsupported:
    sm_80 and sm_86, which have no attention template; f32; a head
    dimension not a multiple of 64 up to 256; keys of another length than
    the queries, as in decoding with a cache). The backward's kernel takes
    head dimensions 64 and 128: a call of D 192 or 256 whose inputs need
    gradients (autograd recording) runs PyTorch's SDPA (or softcapped
    math) for the forward and the backward alike (its backward reads what its own forward saves: a
    liger forward would be work on top), and one that needs none
    (inference, torch.no_grad) runs liger's forward kernel. CPU tensors with LIGER_OPS_CPU_REFERENCE=1
    run the reference lowering of the same functions, which takes every
    configuration (no fallback)."""
    config = _once(lambda: (
        "attention", type(q), type(k), type(v), q.device, k.device, v.device, q.dtype, k.dtype,
        v.dtype, q.dim(), k.dim(), v.dim(), q.shape[1], k.shape[1], v.shape[1], q.shape[3],
        k.shape[3], v.shape[3], type(causal), causal, type(scale), scale, type(window), window,
        type(softcap), softcap),
        _attention_checked, q, k, v, causal, scale, window, softcap)
    causal, scale, window, softcap, target, dtype, d = config
    _raise(attention_problem(q, k, v, causal))
    grad = torch.is_grad_enabled() and (q.requires_grad or k.requires_grad or v.requires_grad)
    why = specs.attention_unsupported(target, dtype, d, grad, q.shape[2], k.shape[2])
    if why:
        _warn_fallback("attention: %s; using PyTorch's %s" % (
            why, "attention math (a softcap)" if softcap else "scaled_dot_product_attention"))
        return operators.attention_reference(q, k, v, causal, scale, window, softcap)
    return operators.call(operators.attention, q, k, v, causal, scale, window, softcap)[0]


def add_precompile_targets(parser):
    """`--target`, repeatable, of the precompile commands (this one and
    liger.transformers'): each target's bundles go into the one directory,
    side by side (a bundle's cache key holds its target); without it,
    DEFAULT_TARGET. argparse refuses a target liger has no kernels for,
    naming those it has. `args.targets` lists the targets, once each, in
    the order given."""
    import argparse

    class Targets(argparse.Action):
        def __call__(self, parser, namespace, value, option_string=None):
            targets = getattr(namespace, self.dest)
            if targets is parser.get_default(self.dest):
                targets = []
            if value not in targets:
                targets.append(value)
            setattr(namespace, self.dest, targets)

    parser.add_argument("--target", dest="targets", action=Targets, default=[TARGET],
                        choices=specs.GPU_TARGETS, metavar="TARGET",
                        help="a GPU target to compile for (repeatable: each target's kernels "
                             "go side by side into DIR; default %s), by compute capability: %s"
                             % (TARGET, specs.targets_text()))


def main(argv=None):
    import argparse
    ap = argparse.ArgumentParser(
        prog="python -m liger.ops",
        description="Precompile the kernels of liger.ops configurations into a directory "
                    "that LIGER_OPS_BUNDLES points at (for machines without the compiler), "
                    "or show what a configuration compiles and how the fused linear "
                    "cross-entropy chunks its tokens.")
    sub = ap.add_subparsers(dest="command", required=True)
    pre = sub.add_parser("precompile", help="compile SPECs into DIR")
    pre.add_argument("dir")
    pre.add_argument("specs", nargs="+", metavar="SPEC",
                     help="op:key=value,... as a liger.ops error names it, e.g. "
                          "swiglu:dtype=bf16,hidden=14336")
    add_precompile_targets(pre)
    mod = sub.add_parser("module", help="print the liger module a SPEC compiles")
    mod.add_argument("spec", metavar="SPEC")
    plan = sub.add_parser("plan", help="print fused_linear_cross_entropy's chunking (JSON)")
    plan.add_argument("--tokens", type=int, required=True)
    plan.add_argument("--vocab", type=int, required=True)
    plan.add_argument("--dtype", default="bf16")
    plan.add_argument("--memory-budget", type=int, default=2 ** 29, help="bytes")
    args = ap.parse_args(argv)
    try:
        if args.command == "module":
            sys.stdout.write(module_text(parse_spec(args.spec)))
        elif args.command == "plan":
            import json
            print(json.dumps(fused_linear_cross_entropy_plan(
                args.tokens, args.vocab, args.dtype, args.memory_budget), sort_keys=True))
        else:
            for target in args.targets:
                for spec, path in zip(args.specs, precompile(args.dir, args.specs, target)):
                    print("%s (%s) -> %s" % (spec, target, path))
    except (LigerError, OSError) as e:
        print("liger.ops: %s" % e, file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
