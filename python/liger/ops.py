"""Fused ops on torch tensors, compiled by liger, with autograd.

    from liger import ops
    y = ops.rms_norm(x, w, eps=1e-6)          # backward: liger.rms_norm_grad
    y = ops.swiglu(gate, up)                  # backward: liger.swiglu_grad
    y = ops.geglu(gate, up, approximate="tanh")
    p = ops.softmax(x)                        # backward: liger.softmax_grad
    q, k = ops.rope(q, k, cos, sin)           # backward: liger.rope_grad
    loss = ops.cross_entropy(logits, target)  # the gradient written forward
    loss = ops.fused_linear_cross_entropy(h, lm_head_weight, target)  # no logits kept

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

The forwards save what their backward kernels read (RMSNorm's rstd,
softmax's output); cross-entropy's forward keeps the gradient of a unit
incoming gradient (the logits' size, as Liger-Kernel does) and its backward
scales it by the incoming gradient; the fused linear cross-entropy forms
dx and dW in its forward.
"""

import importlib.util
import sys

from . import bundles, specs
from .errors import LigerError, LigerTypeError, LigerValueError
from .loss_plan import plan_chunks
from .specs import (DEFAULT_TARGET, check_bool, check_int, cross_entropy_spec,  # noqa: F401
                    fused_linear_cross_entropy_spec,
                    fused_linear_cross_entropy_unsupported_shape, geglu_spec, module_text,
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


def clear_caches():
    """Forgets every loaded spec, bundle and kernel."""
    if operators is not None:
        operators.clear()
    bundles.clear()


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

def _tensors(op, **tensors):
    """Every tensor a torch.Tensor, all on one device liger runs on."""
    device = None
    for name, t in tensors.items():
        if t is None:
            continue
        if not isinstance(t, torch.Tensor):
            raise LigerTypeError("liger.ops.%s: %s must be a torch.Tensor, got %s"
                                 % (op, name, type(t).__name__))
        if device is None:
            device, first = t.device, name
        elif t.device != device:
            raise LigerValueError("liger.ops.%s: %s is on %s and %s on %s"
                                  % (op, first, device, name, t.device))
    if device.type != "cuda" and not (device.type == "cpu" and cpu_reference_enabled()):
        raise LigerError("liger.ops runs on CUDA tensors, got tensors on %s%s" % (
            device, " (LIGER_OPS_CPU_REFERENCE=1 runs CPU tensors through the slow reference "
            "lowering, for tests)" if device.type == "cpu" else ""))


def _rows_of(op, name, t):
    """The feature size of [..., H] rows (at least one row)."""
    if t.dim() < 1 or t.numel() == 0:
        raise LigerValueError("liger.ops.%s: %s must be [..., H] with at least one row, got "
                              "shape %s" % (op, name, list(t.shape)))
    return t.shape[-1]


def _same_shape(op, name, t, other_name, other):
    if t.shape != other.shape:
        raise LigerValueError("liger.ops.%s: %s must have the shape of %s %s, got %s" % (
            op, name, other_name, list(other.shape), list(t.shape)))


def _same_dtype(op, name, t, other_name, other):
    if t.dtype != other.dtype:
        raise LigerTypeError("liger.ops.%s: %s must have the dtype of %s (%s), got %s" % (
            op, name, other_name, other.dtype, t.dtype))


def _class_weight(op, name, w, vocab):
    if w is None:
        return None
    if not w.is_floating_point() or list(w.shape) != [vocab]:
        raise LigerValueError("liger.ops.%s: %s must be a float tensor of shape [%d] (the "
                              "vocabulary), got %s %s" % (op, name, vocab, w.dtype,
                                                          list(w.shape)))
    return w.float()  # (the kernels read f32 class weights: a copy otherwise)


def _targets(op, target, rows):
    """One class per row: target [...] of the rows' leading shape, or [N]
    over their N rows."""
    specs.dtype_name(target.dtype, "liger.ops.%s: target's dtype" % op, specs.TARGET_DTYPES)
    n = 1
    for d in rows:
        n *= d
    if target.shape != rows and list(target.shape) != [n]:
        shapes = "%s or [%d]" % (list(rows), n) if len(rows) > 1 else str(list(rows))
        raise LigerValueError("liger.ops.%s: target must have shape %s (one class per row), "
                              "got %s" % (op, shapes, list(target.shape)))


# --- the ops ---------------------------------------------------------------

def rms_norm(x, weight, eps=1e-6, offset=0.0, casting="llama"):
    """RMSNorm over the last dimension of x [..., H] with weight [H]
    (liger.rms_norm; casting "llama", "gemma" or "none" as Hugging Face's
    Llama and Gemma modules; y = x_hat * (offset + weight))."""
    _tensors("rms_norm", x=x, weight=weight)
    h = _rows_of("rms_norm", "x", x)
    if list(weight.shape) != [h]:
        raise LigerValueError("liger.ops.rms_norm: weight must have shape [%d] (the hidden "
                              "size of x), got %s" % (h, list(weight.shape)))
    spec = rms_norm_spec(h, x.dtype, weight.dtype, eps, offset, casting)
    return operators.rms_norm(x, weight, spec.eps, spec.offset, spec.casting)[0]


def _gated(op, gate, up):
    _tensors(op, gate=gate, up=up)
    _same_shape(op, "up", up, "gate", gate)
    _same_dtype(op, "up", up, "gate", gate)
    return _rows_of(op, "gate", gate)


def swiglu(gate, up):
    """silu(gate) * up over [..., H] (liger.swiglu)."""
    swiglu_spec(_gated("swiglu", gate, up), gate.dtype)
    return operators.swiglu(gate, up)


def geglu(gate, up, approximate="tanh"):
    """gelu(gate) * up over [..., H] (liger.geglu; approximate "tanh" or
    "none")."""
    spec = geglu_spec(_gated("geglu", gate, up), gate.dtype, approximate)
    return operators.geglu(gate, up, spec.approximate)


def softmax(x):
    """Softmax over the last dimension of x [..., H] (liger.softmax)."""
    _tensors("softmax", x=x)
    softmax_spec(_rows_of("softmax", "x", x), x.dtype)
    return operators.softmax(x)


def rope(q, k, cos, sin):
    """Rotary embedding of q [B, Hq, T, D] and k [B, Hk, T, D] with tables
    cos, sin [1 or B, T, D] of their dtype (liger.rope, rotate-half
    convention)."""
    _tensors("rope", q=q, k=k, cos=cos, sin=sin)
    if q.dim() != 4 or k.dim() != 4 or k.shape[0] != q.shape[0] or k.shape[2:] != q.shape[2:]:
        raise LigerValueError("liger.ops.rope: q and k must be [B, Hq, T, D] and [B, Hk, T, D], "
                              "got %s and %s" % (list(q.shape), list(k.shape)))
    b, _, t, d = q.shape
    if cos.dim() != 3 or cos.shape[0] not in (1, b) or cos.shape[1:] != (t, d):
        raise LigerValueError("liger.ops.rope: cos must be [1 or %d, %d, %d] (B, T, D of q), got "
                              "%s" % (b, t, d, list(cos.shape)))
    _same_shape("rope", "sin", sin, "cos", cos)
    for name, other in (("k", k), ("cos", cos), ("sin", sin)):
        _same_dtype("rope", name, other, "q", q)
    if q.numel() == 0 or k.numel() == 0:
        raise LigerValueError("liger.ops.rope: q and k must not be empty, got %s and %s"
                              % (list(q.shape), list(k.shape)))
    rope_spec(q.shape[1], k.shape[1], d, q.dtype, cos.shape[0] == 1)
    return operators.rope(q, k, cos, sin)


def cross_entropy(logits, target, weight=None, ignore_index=-100, label_smoothing=0.0,
                  reduction="mean", softcap=None, lse_square_scale=0.0, inplace=False):
    """Cross-entropy of logits [..., V] against targets [...] (int32 or
    int64; liger.cross_entropy: PyTorch's F.cross_entropy semantics plus
    Liger-Kernel's softcap and z-loss, f32 math): one kernel computes the
    loss and writes its gradient, which backward scales by the incoming
    gradient. `weight`: class weights [V] (f32; not differentiated).
    `softcap`: None or 0 for none, else > 0. With `inplace=True` the
    gradient is written over the logits (no second [N, V] buffer): only for
    contiguous logits nothing else reads afterwards, as a loss's usually
    are."""
    _tensors("cross_entropy", logits=logits, target=target, weight=weight)
    v = _rows_of("cross_entropy", "logits", logits)
    _targets("cross_entropy", target, logits.shape[:-1])
    weight = _class_weight("cross_entropy", "weight", weight, v)
    spec = cross_entropy_spec(v, logits.dtype, target.dtype, ignore_index, label_smoothing,
                              reduction, softcap, lse_square_scale, weight is not None)
    config = (spec.ignore_index, spec.label_smoothing, spec.reduction, spec.softcap,
              spec.lse_square_scale)
    if check_bool("inplace", inplace):
        if not logits.is_contiguous():
            raise LigerValueError("liger.ops.cross_entropy(inplace=True) needs contiguous "
                                  "logits (a copy would not be in place)")
        return operators.CrossEntropyInPlace.apply(logits, target, weight, *config)
    return operators.cross_entropy(logits, target, weight, *config)[0]


def fused_linear_cross_entropy(hidden, weight, target, class_weight=None, ignore_index=-100,
                               label_smoothing=0.0, reduction="mean", softcap=None,
                               lse_square_scale=0.0, memory_budget=2 ** 29, dw_f32=False):
    """cross_entropy(hidden · weightᵀ, target) for hidden [..., H], weight
    [V, H] (bf16 or f16, both sizes multiples of 8), target [...], without
    the [tokens, vocab] logits in memory (liger.fused_linear_cross_entropy's
    meaning): the tokens go in chunks whose logits fit `memory_budget` bytes
    (fused_linear_cross_entropy_plan); per chunk one matmul kernel writes the
    logits, one kernel their loss and, over them, their gradient G, then
    dx = G · W and dW += Gᵀ · x (accumulated in W's dtype, as Liger-Kernel
    does; with `dw_f32=True` into an f32 buffer of W's shape, rounded once at
    the end: exact sums for 4 bytes per weight of memory). The forward
    computes the gradients autograd will ask for (none for a frozen
    lm_head's weight); backward scales them by the incoming gradient.
    reduction: mean or sum."""
    op = "fused_linear_cross_entropy"
    _tensors(op, hidden=hidden, weight=weight, target=target, class_weight=class_weight)
    h = _rows_of(op, "hidden", hidden)
    if weight.dim() != 2 or weight.shape[1] != h:
        raise LigerValueError("liger.ops.fused_linear_cross_entropy takes hidden [..., H] and "
                              "weight [V, H], got %s and %s" % (list(hidden.shape),
                                                                list(weight.shape)))
    _same_dtype(op, "weight", weight, "hidden", hidden)
    _targets(op, target, hidden.shape[:-1])
    class_weight = _class_weight(op, "class_weight", class_weight, weight.shape[0])
    spec = fused_linear_cross_entropy_spec(
        weight.shape[0], h, hidden.dtype, target.dtype, ignore_index, label_smoothing,
        reduction, softcap, lse_square_scale, class_weight is not None, dw_f32)
    memory_budget = check_int("memory_budget", memory_budget, 1)
    plan_chunks(1, spec.vocab, spec.dtype, memory_budget)  # (a budget of at least a row)
    return operators.fused_linear_cross_entropy(
        hidden, weight, target, class_weight, spec.ignore_index, spec.label_smoothing,
        spec.reduction, spec.softcap, spec.lse_square_scale, memory_budget, spec.dw_f32,
        hidden.requires_grad, weight.requires_grad)[0]


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
    pre.add_argument("--target", default=TARGET, choices=specs.GPU_TARGETS,
                     help="the GPU's target, by compute capability: " + specs.targets_text())
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
            for spec, path in zip(args.specs, precompile(args.dir, args.specs, args.target)):
                print("%s -> %s" % (spec, path))
    except (LigerError, OSError) as e:
        print("liger.ops: %s" % e, file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
