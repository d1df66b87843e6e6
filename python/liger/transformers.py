"""Hugging Face models patched with liger's kernels, one call per family.

    from liger.transformers import apply_liger_kernel_to_llama
    apply_liger_kernel_to_llama()                # the classes, before loading
    model = AutoModelForCausalLM.from_pretrained(...)
    # or a model already built (PEFT models too):
    apply_liger_kernel_to_llama(model=model)

The entry points take Liger-Kernel's flag names, so existing configurations
work: `rope`, `rms_norm`, `swiglu` (`geglu` for Gemma), `cross_entropy`,
`fused_linear_cross_entropy` (default; the two losses exclude each other).
What each flag replaces, with the liger.ops function that runs it:

    rms_norm     the family's RMSNorm forward    ops.rms_norm (Gemma: 1 + w, cast after)
    rope         apply_rotary_pos_emb            ops.rope
    swiglu/geglu the MLP's act(gate) * up        ops.swiglu / ops.geglu
    fused_linear_cross_entropy
                 the causal LM's lm_head + loss  ops.fused_linear_cross_entropy
                 while training with labels: no [tokens, vocab] logits kept
    cross_entropy the loss on the logits         ops.cross_entropy

A class patch changes the family's classes (every model built afterwards);
a model patch changes that model's modules only. RoPE is a function of the
family's modeling module, so either way it is patched there. Every patched
forward falls back to the original, with one warning per reason, where
liger has no kernel for the call: tensors not on a CUDA device, dtypes
other than bf16/f16/f32, shapes the kernels do not take (partial rotary,
tables of another layout), or no compiled kernels for the configuration
and no compiler to make them.

Kernels come from `liger.ops`: precompiled for a model configuration with
`precompile(DIR, config)` (or `python -m liger.transformers precompile DIR
CONFIG...`) and found through `LIGER_OPS_BUNDLES=DIR`, or compiled on first
use and cached where the compiler is installed.

`loss_memory_budget` (bytes) bounds the fused loss's chunk of logits
(liger.ops.fused_linear_cross_entropy's `memory_budget`; 0.5 GiB by
default): smaller chunks, less memory, more passes over the weight gradient.

`lora`, `fuse_norm_linear` and `fuse_qkv_rope` name the fusions liger's
compiler makes beyond Liger-Kernel's set (LoRA projections, the norm folded
into its projections, q/k projections with RoPE in their epilogue). liger.ops
has no autograd op for them yet: set, they warn and leave those layers as
they are.
"""

import importlib
import sys
import types
import warnings

from . import ops
from .driver import LigerError


class LigerFallbackWarning(UserWarning):
    """A patched module ran its original forward (the message says why)."""


# family -> (modeling module, RMSNorm class, MLP class, causal LM class,
#            RMSNorm casting, RMSNorm weight offset, gated activation)
_FAMILIES = {
    "llama": ("llama", "LlamaRMSNorm", "LlamaMLP", "LlamaForCausalLM", "llama", 0.0, "swiglu"),
    "mistral": ("mistral", "MistralRMSNorm", "MistralMLP", "MistralForCausalLM", "llama", 0.0,
                "swiglu"),
    "qwen2": ("qwen2", "Qwen2RMSNorm", "Qwen2MLP", "Qwen2ForCausalLM", "llama", 0.0, "swiglu"),
    "qwen3": ("qwen3", "Qwen3RMSNorm", "Qwen3MLP", "Qwen3ForCausalLM", "llama", 0.0, "swiglu"),
    "gemma": ("gemma", "GemmaRMSNorm", "GemmaMLP", "GemmaForCausalLM", "gemma", 1.0, "geglu"),
}
# The activations each gated op computes (Hugging Face's ACT2FN names).
_ACTIVATIONS = {"swiglu": ("silu", "swish"), "geglu": ("gelu_pytorch_tanh", "gelu")}

_WARNED = set()
_FAILED_SPECS = {}
_MISSING = object()
# (owner, attribute) -> the value before liger patched it, for revert().
_ORIGINALS = {}


def _warn_once(message):
    if message not in _WARNED:
        _WARNED.add(message)
        warnings.warn("liger: " + message, LigerFallbackWarning, stacklevel=3)


def _modeling(family):
    return importlib.import_module("transformers.models.%s.modeling_%s"
                                   % (_FAMILIES[family][0], _FAMILIES[family][0]))


def _patch(owner, name, value):
    """Sets owner.name = value, remembering the value first replaced."""
    _ORIGINALS.setdefault((owner, name), vars(owner).get(name, _MISSING))
    setattr(owner, name, value)


def revert():
    """Undoes every class and module patch (model patches stay with their
    models)."""
    for (owner, name), value in _ORIGINALS.items():
        if value is _MISSING:
            delattr(owner, name)
        else:
            setattr(owner, name, value)
    _ORIGINALS.clear()


def _original(cls, name):
    """The class's `name` before liger patched it."""
    for klass in cls.__mro__:
        if (klass, name) in _ORIGINALS:
            value = _ORIGINALS[(klass, name)]
            if value is not _MISSING:
                return value
            continue  # patched where the class had inherited it
        if name in klass.__dict__:
            return klass.__dict__[name]
    raise AttributeError(name)


def _unsupported(what, *tensors):
    """Why liger cannot run `what` on these tensors, or None."""
    for t in tensors:
        if t.device.type != "cuda" and not (t.device.type == "cpu"
                                            and ops.cpu_reference_enabled()):
            return "%s on %s runs its original forward (liger kernels run on CUDA tensors)" % (
                what, t.device)
        if str(t.dtype) not in ("torch.bfloat16", "torch.float16", "torch.float32"):
            return "%s in %s runs its original forward (liger kernels take bf16, f16 or " \
                   "f32)" % (what, t.dtype)
    return None


def _run(what, spec, device, call):
    """call(), or None (with a warning) where the kernels of `spec` cannot be
    had: checked before any kernel runs, so the caller can fall back."""
    if spec in _FAILED_SPECS:
        _warn_once(_FAILED_SPECS[spec])
        return None
    try:
        ops._bundle(spec, device)
    except LigerError as e:
        _FAILED_SPECS[spec] = "%s runs its original forward: %s" % (what, e)
        _warn_once(_FAILED_SPECS[spec])
        return None
    return call()


def _rms_norm_forward(self, hidden_states):
    family = getattr(self, "_liger_family")
    _, _, _, _, casting, offset, _ = _FAMILIES[family]
    original = _original(type(self), "forward")
    what = type(self).__name__
    why = _unsupported(what, hidden_states, self.weight)
    if why:
        _warn_once(why)
        return original(self, hidden_states)
    eps = getattr(self, "variance_epsilon", getattr(self, "eps", 1e-6))
    shape = hidden_states.shape
    spec = ops.rms_norm_spec(shape[-1], hidden_states.dtype, self.weight.dtype, eps, offset,
                             casting)
    y = _run(what, spec, hidden_states.device,
             lambda: ops.rms_norm(hidden_states.reshape(-1, shape[-1]), self.weight, eps,
                                  offset, casting))
    return original(self, hidden_states) if y is None else y.reshape(shape)


def _mlp_forward(self, x):
    family = getattr(self, "_liger_family")
    gated = _FAMILIES[family][6]
    original = _original(type(self), "forward")
    what = type(self).__name__
    act = getattr(getattr(self, "config", None), "hidden_activation", None) or \
        getattr(getattr(self, "config", None), "hidden_act", None)
    if act not in _ACTIVATIONS[gated]:
        _warn_once("%s with activation %r runs its original forward (liger.ops.%s computes "
                   "%s)" % (what, act, gated, " or ".join(_ACTIVATIONS[gated])))
        return original(self, x)
    why = _unsupported(what, x)
    if why:
        _warn_once(why)
        return original(self, x)
    gate, up = self.gate_proj(x), self.up_proj(x)
    width = gate.shape[-1]
    spec = ops.swiglu_spec(width, gate.dtype) if gated == "swiglu" else \
        ops.geglu_spec(width, gate.dtype, "tanh")
    fn = ops.swiglu if gated == "swiglu" else (lambda g, u: ops.geglu(g, u, "tanh"))
    h = _run(what, spec, gate.device,
             lambda: fn(gate.reshape(-1, width), up.reshape(-1, width)).reshape(gate.shape))
    if h is None:
        h = self.act_fn(gate) * up
    return self.down_proj(h)


def _rope_function(family):
    original = getattr(_modeling(family), "apply_rotary_pos_emb")
    original = _ORIGINALS.get((_modeling(family), "apply_rotary_pos_emb"), original)

    def apply_rotary_pos_emb(q, k, cos, sin, position_ids=None, unsqueeze_dim=1):
        what = "apply_rotary_pos_emb"
        if (unsqueeze_dim != 1 or q.dim() != 4 or k.dim() != 4 or cos.dim() != 3
                or cos.shape != sin.shape or cos.shape[-1] != q.shape[-1]
                or k.shape[-1] != q.shape[-1] or cos.shape[0] not in (1, q.shape[0])
                or cos.shape[1] != q.shape[2] or q.dtype != cos.dtype or k.dtype != q.dtype):
            _warn_once("%s with q %s, k %s, cos %s runs the original (liger.rope takes q, k "
                       "[B, H, T, D] and tables [1 or B, T, D] of their dtype)" % (
                           what, tuple(q.shape), tuple(k.shape), tuple(cos.shape)))
            return original(q, k, cos, sin, unsqueeze_dim=unsqueeze_dim)
        why = _unsupported(what, q, k)
        if why:
            _warn_once(why)
            return original(q, k, cos, sin, unsqueeze_dim=unsqueeze_dim)
        spec = ops.rope_spec(q.shape[1], k.shape[1], q.shape[-1], q.dtype, cos.shape[0] == 1)
        out = _run(what, spec, q.device, lambda: ops.rope(q, k, cos, sin))
        return original(q, k, cos, sin, unsqueeze_dim=unsqueeze_dim) if out is None else out

    apply_rotary_pos_emb._liger = True
    return apply_rotary_pos_emb


def _shifted_labels(labels, kwargs):
    """The next-token targets as Hugging Face's causal LM loss forms them
    (labels shifted left, -100 last), or the caller's `shift_labels`."""
    import torch.nn.functional as F
    shift = kwargs.pop("shift_labels", None)
    if shift is None:
        shift = F.pad(labels, (0, 1), value=-100)[..., 1:]
    return shift.reshape(-1)


def _causal_lm_forward(self, *args, **kwargs):
    import torch
    from transformers.modeling_outputs import CausalLMOutputWithPast
    original = _original(type(self), "forward")
    mode = getattr(self, "_liger_loss", None)
    labels = kwargs.get("labels")
    if args or labels is None or mode is None:
        return original(self, *args, **kwargs)
    what = type(self).__name__ + "'s loss"
    softcap = getattr(self.config, "final_logit_softcapping", None)
    num_items = kwargs.get("num_items_in_batch")
    reduction = "mean" if num_items is None else "sum"
    if mode == "cross_entropy":
        kw = dict(kwargs, labels=None)
        out = original(self, **kw)
        logits = out.logits
        why = _unsupported(what, logits)
        if why or softcap:
            _warn_once(why or "%s with final_logit_softcapping computes its loss as the "
                       "model does (liger.ops.cross_entropy's softcap is the "
                       "fused_linear_cross_entropy path's)" % what)
            return original(self, **kwargs)
        shift = _shifted_labels(labels, dict(kwargs))
        v = logits.shape[-1]
        spec = ops.cross_entropy_spec(v, logits.dtype, shift.dtype, reduction=reduction)
        loss = _run(what, spec, logits.device,
                    lambda: ops.cross_entropy(logits.reshape(-1, v), shift, reduction=reduction))
        if loss is None:
            return original(self, **kwargs)
        if num_items is not None:
            loss = loss / num_items
        fields = {k: v for k, v in out.items() if k != "loss"}
        return CausalLMOutputWithPast(loss=loss, **fields)
    # fused_linear_cross_entropy: while training, the loss without logits.
    head = self.lm_head
    if not (self.training and torch.is_grad_enabled()) or getattr(head, "bias", None) \
            is not None or not hasattr(head, "weight"):
        return original(self, **kwargs)
    why = _unsupported(what, head.weight) or ops.fused_linear_cross_entropy_unsupported_shape(
        *head.weight.shape)
    if why:
        _warn_once(why)
        return original(self, **kwargs)
    kw = dict(kwargs)
    kw.pop("labels")
    kw.pop("logits_to_keep", None)
    shift = _shifted_labels(labels, kw)
    outputs = self.model(**kw)
    hidden = outputs[0]
    if hidden.dtype != head.weight.dtype or hidden.dtype == torch.float32:
        # (Computed again as the model does: the decoder ran for nothing.)
        _warn_once("%s: hidden states in %s and lm_head in %s: the loss is computed as the "
                   "model does (liger's fused linear cross-entropy takes bf16 or f16 for "
                   "both; in f32 patch with cross_entropy=True)" % (
                       what, hidden.dtype, head.weight.dtype))
        return original(self, **kwargs)
    spec = ops.fused_linear_cross_entropy_spec(
        head.weight.shape[0], head.weight.shape[1], hidden.dtype, shift.dtype,
        reduction=reduction, softcap=softcap)
    budget = getattr(self, "_liger_loss_budget", None)
    loss = _run(what, spec, hidden.device,
                lambda: ops.fused_linear_cross_entropy(
                    hidden, head.weight, shift, reduction=reduction, softcap=softcap,
                    **({} if budget is None else dict(memory_budget=budget))))
    if loss is None:
        return original(self, **kwargs)
    if num_items is not None:
        loss = loss / num_items
    fields = {k: getattr(outputs, k) for k in CausalLMOutputWithPast.__dataclass_fields__
              if k not in ("loss", "logits") and getattr(outputs, k, None) is not None}
    return CausalLMOutputWithPast(loss=loss, logits=None, **fields)


def _apply(family, rope, cross_entropy, fused_linear_cross_entropy, rms_norm, gated, model,
           lora, fuse_norm_linear, fuse_qkv_rope, loss_memory_budget):
    if cross_entropy and fused_linear_cross_entropy:
        raise ValueError("cross_entropy and fused_linear_cross_entropy cannot both be True "
                         "(the fused loss replaces the plain one)")
    for flag, value in (("lora", lora), ("fuse_norm_linear", fuse_norm_linear),
                        ("fuse_qkv_rope", fuse_qkv_rope)):
        if value:
            _warn_once("%s=True: liger.ops has no autograd op for this fusion yet; those "
                       "layers stay as they are" % flag)
    mod = _modeling(family)
    _, norm_name, mlp_name, lm_name, _, _, _ = _FAMILIES[family]
    norm_cls, mlp_cls, lm_cls = (getattr(mod, n) for n in (norm_name, mlp_name, lm_name))
    loss = "fused_linear_cross_entropy" if fused_linear_cross_entropy else \
        "cross_entropy" if cross_entropy else None
    targets = []
    if model is not None:
        targets = [(m, cls, fn) for m in model.modules()
                   for flag, cls, fn in ((rms_norm, norm_cls, _rms_norm_forward),
                                         (gated, mlp_cls, _mlp_forward),
                                         (loss, lm_cls, _causal_lm_forward))
                   if flag and isinstance(m, cls)]
        if not targets and (rms_norm or gated or loss):
            raise LigerError("apply_liger_kernel_to_%s: %s has no %s, %s or %s module to "
                             "patch (is it a %s model?)" % (
                                 family, type(model).__name__, norm_name, mlp_name, lm_name,
                                 family))
    if rope:
        _patch(mod, "apply_rotary_pos_emb", _rope_function(family))
    if model is None:
        if loss and loss_memory_budget is not None:
            _patch(lm_cls, "_liger_loss_budget", int(loss_memory_budget))
        for flag, cls, fn in ((rms_norm, norm_cls, _rms_norm_forward),
                              (gated, mlp_cls, _mlp_forward)):
            if flag:
                _patch(cls, "_liger_family", family)
                _patch(cls, "forward", fn)
        if loss:
            _patch(lm_cls, "_liger_loss", loss)
            _patch(lm_cls, "forward", _causal_lm_forward)
        return None
    for m, cls, fn in targets:
        m._liger_family = family
        if cls is lm_cls:
            m._liger_loss = loss
            if loss_memory_budget is not None:
                m._liger_loss_budget = int(loss_memory_budget)
        m.forward = types.MethodType(fn, m)
    return len(targets)


def apply_liger_kernel_to_llama(rope=True, cross_entropy=False, fused_linear_cross_entropy=True,
                                rms_norm=True, swiglu=True, model=None, lora=False,
                                fuse_norm_linear=False, fuse_qkv_rope=False,
                                loss_memory_budget=None):
    """Patches Llama (the classes, or `model`'s modules); returns the count
    of modules patched on a model, None for a class patch."""
    return _apply("llama", rope, cross_entropy, fused_linear_cross_entropy, rms_norm, swiglu,
                  model, lora, fuse_norm_linear, fuse_qkv_rope, loss_memory_budget)


def apply_liger_kernel_to_mistral(rope=True, cross_entropy=False, fused_linear_cross_entropy=True,
                                  rms_norm=True, swiglu=True, model=None, lora=False,
                                  fuse_norm_linear=False, fuse_qkv_rope=False,
                                loss_memory_budget=None):
    """Patches Mistral, as apply_liger_kernel_to_llama."""
    return _apply("mistral", rope, cross_entropy, fused_linear_cross_entropy, rms_norm, swiglu,
                  model, lora, fuse_norm_linear, fuse_qkv_rope, loss_memory_budget)


def apply_liger_kernel_to_qwen2(rope=True, cross_entropy=False, fused_linear_cross_entropy=True,
                                rms_norm=True, swiglu=True, model=None, lora=False,
                                fuse_norm_linear=False, fuse_qkv_rope=False,
                                loss_memory_budget=None):
    """Patches Qwen2, as apply_liger_kernel_to_llama."""
    return _apply("qwen2", rope, cross_entropy, fused_linear_cross_entropy, rms_norm, swiglu,
                  model, lora, fuse_norm_linear, fuse_qkv_rope, loss_memory_budget)


def apply_liger_kernel_to_qwen3(rope=True, cross_entropy=False, fused_linear_cross_entropy=True,
                                rms_norm=True, swiglu=True, model=None, lora=False,
                                fuse_norm_linear=False, fuse_qkv_rope=False,
                                loss_memory_budget=None):
    """Patches Qwen3 (its q/k norms too), as apply_liger_kernel_to_llama."""
    return _apply("qwen3", rope, cross_entropy, fused_linear_cross_entropy, rms_norm, swiglu,
                  model, lora, fuse_norm_linear, fuse_qkv_rope, loss_memory_budget)


def apply_liger_kernel_to_gemma(rope=True, cross_entropy=False, fused_linear_cross_entropy=True,
                                rms_norm=True, geglu=True, model=None, lora=False,
                                fuse_norm_linear=False, fuse_qkv_rope=False,
                                loss_memory_budget=None):
    """Patches Gemma (RMSNorm with 1 + w, GeGLU with tanh), as
    apply_liger_kernel_to_llama."""
    return _apply("gemma", rope, cross_entropy, fused_linear_cross_entropy, rms_norm, geglu,
                  model, lora, fuse_norm_linear, fuse_qkv_rope, loss_memory_budget)


_APPLY = {"llama": apply_liger_kernel_to_llama, "mistral": apply_liger_kernel_to_mistral,
          "qwen2": apply_liger_kernel_to_qwen2, "qwen3": apply_liger_kernel_to_qwen3,
          "gemma": apply_liger_kernel_to_gemma}


def _model_type(config):
    family = getattr(config, "model_type", None)
    if family not in _FAMILIES:
        raise LigerError("liger.transformers patches %s, not model_type %r"
                         % (", ".join(sorted(_FAMILIES)), family))
    return family


def apply_liger_kernel(model, **flags):
    """Patches `model` by its config's model_type (PEFT models: their base)."""
    return _APPLY[_model_type(model.config)](model=model, **flags)


def kernel_specs(config, dtype=None):
    """The liger.ops specs a patched model of `config` calls (training, with
    the fused linear cross-entropy, mean and summed losses): what
    `precompile` compiles for a machine without the compiler."""
    family = _model_type(config)
    _, _, _, _, casting, offset, gated = _FAMILIES[family]
    dt = dtype or getattr(config, "dtype", None) or getattr(config, "torch_dtype", None) \
        or "f32"
    dt = {"bfloat16": "bf16", "float16": "f16", "float32": "f32"}.get(
        str(dt).replace("torch.", ""), dt)
    h, inter, vocab = config.hidden_size, config.intermediate_size, config.vocab_size
    heads, kv = config.num_attention_heads, config.num_key_value_heads or \
        config.num_attention_heads
    head_dim = getattr(config, "head_dim", None) or h // heads
    eps = config.rms_norm_eps
    specs = [ops.rms_norm_spec(h, dt, dt, eps, offset, casting)]
    if family == "qwen3":
        specs.append(ops.rms_norm_spec(head_dim, dt, dt, eps, offset, casting))
    specs.append(ops.swiglu_spec(inter, dt) if gated == "swiglu" else
                 ops.geglu_spec(inter, dt, "tanh"))
    specs += [ops.rope_spec(heads, kv, head_dim, dt, batch) for batch in (True, False)]
    softcap = getattr(config, "final_logit_softcapping", None)
    # The losses, mean and summed: the fused linear cross-entropy (bf16 and
    # f16) and cross-entropy on the logits (cross_entropy=True).
    fused = dt != "f32" and not ops.fused_linear_cross_entropy_unsupported_shape(vocab, h)
    for r in ("mean", "sum"):
        if fused:
            specs.append(ops.fused_linear_cross_entropy_spec(vocab, h, dt, "i64", reduction=r,
                                                             softcap=softcap))
        specs.append(ops.cross_entropy_spec(vocab, dt, "i64", reduction=r))
    return specs


def precompile(out_dir, config, dtype=None):
    """Compiles the kernels a patched model of `config` calls into `out_dir`
    (needs liger-compile); point LIGER_OPS_BUNDLES at it where the model
    trains. Returns the bundle paths."""
    return ops.precompile(out_dir, kernel_specs(config, dtype))


def main(argv=None):
    import argparse
    ap = argparse.ArgumentParser(
        prog="python -m liger.transformers",
        description="Precompile the kernels a patched Hugging Face model calls into a "
                    "directory that LIGER_OPS_BUNDLES points at.")
    sub = ap.add_subparsers(dest="command", required=True)
    pre = sub.add_parser("precompile", help="compile the kernels of CONFIGs into DIR")
    pre.add_argument("dir")
    pre.add_argument("configs", nargs="+", metavar="CONFIG",
                     help="a model directory or config.json (read by transformers.AutoConfig)")
    pre.add_argument("--dtype", default=None, help="bf16, f16 or f32 (default: the config's)")
    args = ap.parse_args(argv)
    try:
        from transformers import AutoConfig
    except ImportError:
        print("liger.transformers: needs the transformers package", file=sys.stderr)
        return 1
    try:
        for path in args.configs:
            config = AutoConfig.from_pretrained(path)
            for bundle in precompile(args.dir, config, args.dtype):
                print("%s -> %s" % (path, bundle))
    except (LigerError, OSError, ValueError) as e:
        print("liger.transformers: %s" % e, file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
