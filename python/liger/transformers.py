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
liger has no kernel for the call: tensors not on a CUDA device or on a GPU
liger has no target for (one warning for the whole model, at its first
forward: patching touches no GPU), tensors on several devices, dtypes
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
import inspect
import sys
import types
import warnings

import torch

from . import bundles, ops, specs
from .errors import LigerError, LigerFallbackWarning  # noqa: F401 (liger.transformers' API)


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
# (what, op, arguments, devices) -> why liger cannot run it, or None.
_DECIDED = {}
_MISSING = object()
# (owner, attribute) -> the value before liger patched it, for revert().
_ORIGINALS = {}


@torch._dynamo.assume_constant_result
def _warn_once(message):
    """A LigerFallbackWarning, once per message (under torch.compile: while
    the graph is traced)."""
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


def _patch_forward(cls, fn):
    """Patches cls.forward with `fn`, which finds the forward it replaced as
    `self._liger_original_forward`: an attribute set here (and on each
    module a model patch patches), so that the patched forward looks
    nothing up in liger's own tables while torch.compile traces it (whose
    keys include modules, which dynamo cannot hash)."""
    _patch(cls, "_liger_original_forward", staticmethod(_original(cls, "forward")))
    _patch(cls, "forward", fn)


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


def _fallback(what, op, args, devices):
    """Why liger cannot run `what` (the liger.ops op `op`, its spec builder
    taking `args` and the target) on its tensors (`devices`: (name, device)
    pairs), warned once per reason; None where it can: the kernels are
    loaded (compiled, if need be) here, before any of them runs. Decided
    once per configuration from static facts (sizes and attributes as
    Python constants, dtypes and devices as strings), so under
    torch.compile, dynamic shapes too, it runs while the graph is traced
    and is a constant of the graph, with no graph break."""
    # (A float of a module or of a global table, and an activation's size,
    # is a symbol under torch.compile(dynamic=True): specialized here.)
    return _decided(what, op, tuple(ops.static(a) for a in args), devices)


@torch._dynamo.assume_constant_result
def _decided(what, op, args, devices):
    key = (what, op, args, devices)
    if key not in _DECIDED:
        _DECIDED[key] = _decide(what, op, args, devices)
    if _DECIDED[key]:
        _warn_once(_DECIDED[key])
    return _DECIDED[key]


def _decide(what, op, args, devices):
    """The reason of _fallback, by liger.ops' own rules: one device
    (ops.one_device), a device liger has kernels for (bundles.device_target:
    a reason of the machine, the same for every module, so warned once),
    the spec's rules (dtypes, sizes, attributes), kernels that load."""
    try:
        device = ops.one_device(op, [(name, torch.device(d)) for name, d in devices])
    except LigerError as e:
        return "%s runs its original forward: %s" % (what, e)
    try:
        target = bundles.device_target(device)
    except LigerError as e:
        return "patched modules run their original forward: %s" % e
    try:
        spec = getattr(specs, op + "_spec")(*args, target=target)
        if op == "fused_linear_cross_entropy":
            bundles.loss_plan_kernels(spec)
        else:
            bundles.kernels(spec)
    except LigerError as e:
        return "%s runs its original forward: %s" % (what, e)
    return None


def _rms_norm_forward(self, hidden_states):
    family = getattr(self, "_liger_family")
    _, _, _, _, casting, offset, _ = _FAMILIES[family]
    original = self._liger_original_forward
    eps = getattr(self, "variance_epsilon", getattr(self, "eps", 1e-6))
    x, w = hidden_states, self.weight
    if _fallback(type(self).__name__, "rms_norm",
                 (x.shape[-1], str(x.dtype), str(w.dtype), eps, offset, casting),
                 (("hidden_states", str(x.device)), ("weight", str(w.device)))):
        return original(self, hidden_states)
    return ops.rms_norm(x, w, eps, offset, casting)


def _mlp_forward(self, x):
    family = getattr(self, "_liger_family")
    gated = _FAMILIES[family][6]
    original = self._liger_original_forward
    what = type(self).__name__
    act = getattr(getattr(self, "config", None), "hidden_activation", None) or \
        getattr(getattr(self, "config", None), "hidden_act", None)
    if act not in _ACTIVATIONS[gated]:
        _warn_once("%s with activation %r runs its original forward (liger.ops.%s computes "
                   "%s)" % (what, act, gated, " or ".join(_ACTIVATIONS[gated])))
        return original(self, x)
    gate, up = self.gate_proj(x), self.up_proj(x)
    args = (gate.shape[-1], str(gate.dtype)) + (("tanh",) if gated == "geglu" else ())
    if _fallback(what, gated, args, (("gate", str(gate.device)), ("up", str(up.device)))):
        h = self.act_fn(gate) * up
    elif gated == "swiglu":
        h = ops.swiglu(gate, up)
    else:
        h = ops.geglu(gate, up, "tanh")
    return self.down_proj(h)


def _rope_function(family):
    original = getattr(_modeling(family), "apply_rotary_pos_emb")
    original = _ORIGINALS.get((_modeling(family), "apply_rotary_pos_emb"), original)

    def apply_rotary_pos_emb(q, k, cos, sin, position_ids=None, unsqueeze_dim=1):
        what = "apply_rotary_pos_emb"
        problem = ops.rope_problem(q, k, cos, sin) if unsqueeze_dim == 1 else (
            None, "unsqueeze_dim must be 1 (tables [1 or B, T, D] broadcast over the heads), "
            "got %r" % (unsqueeze_dim,))
        if problem:
            _warn_once("%s runs the original: %s" % (what, problem[1]))
            return original(q, k, cos, sin, unsqueeze_dim=unsqueeze_dim)
        if _fallback(what, "rope", (q.shape[1], k.shape[1], q.shape[3], str(q.dtype),
                                    True if cos.shape[0] == 1 else False),
                     (("q", str(q.device)), ("k", str(k.device)), ("cos", str(cos.device)),
                      ("sin", str(sin.device)))):
            return original(q, k, cos, sin, unsqueeze_dim=unsqueeze_dim)
        return ops.rope(q, k, cos, sin)

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
    from transformers.modeling_outputs import CausalLMOutputWithPast
    original = self._liger_original_forward
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
        if softcap:
            _warn_once("%s with final_logit_softcapping computes its loss as the model does "
                       "(liger.ops.cross_entropy's softcap is the fused_linear_cross_entropy "
                       "path's)" % what)
            return original(self, **kwargs)
        shift = _shifted_labels(labels, dict(kwargs))
        if _fallback(what, "cross_entropy", (logits.shape[-1], str(logits.dtype),
                                             str(shift.dtype), -100, 0.0, reduction),
                     (("logits", str(logits.device)), ("labels", str(shift.device)))):
            return original(self, **kwargs)
        loss = ops.cross_entropy(logits.reshape(-1, logits.shape[-1]), shift,
                                 reduction=reduction)
        if num_items is not None:
            loss = loss / num_items
        fields = {k: v for k, v in out.items() if k != "loss"}
        return CausalLMOutputWithPast(loss=loss, **fields)
    # fused_linear_cross_entropy: while training, the loss without logits.
    head = self.lm_head
    if not (self.training and torch.is_grad_enabled()) or getattr(head, "bias", None) \
            is not None or not hasattr(head, "weight"):
        return original(self, **kwargs)
    w = head.weight
    # Decided before the decoder runs (the hidden states take the lm_head's
    # dtype and device in a model of one dtype on one device).
    if _fallback(what, "fused_linear_cross_entropy",
                 (w.shape[0], w.shape[1], str(w.dtype), str(labels.dtype),
                  -100, 0.0, reduction, softcap),
                 (("lm_head.weight", str(w.device)), ("labels", str(labels.device)))):
        return original(self, **kwargs)
    kw = dict(kwargs)
    kw.pop("labels")
    kw.pop("logits_to_keep", None)
    shift = _shifted_labels(labels, kw)
    outputs = self.model(**kw)
    hidden = outputs[0]
    if hidden.dtype != w.dtype or hidden.device != w.device:
        # (Computed again as the model does: the decoder ran for nothing.)
        _warn_once("%s: hidden states in %s on %s and lm_head in %s on %s: the loss is "
                   "computed as the model does (liger's fused linear cross-entropy takes both "
                   "in bf16 or f16, on one device)" % (what, hidden.dtype, hidden.device,
                                                       w.dtype, w.device))
        return original(self, **kwargs)
    budget = getattr(self, "_liger_loss_budget", None)
    loss = ops.fused_linear_cross_entropy(
        hidden, w, shift, reduction=reduction, softcap=softcap,
        **({} if budget is None else dict(memory_budget=budget)))
    if num_items is not None:
        loss = loss / num_items
    fields = {k: getattr(outputs, k) for k in CausalLMOutputWithPast.__dataclass_fields__
              if k not in ("loss", "logits") and getattr(outputs, k, None) is not None}
    return CausalLMOutputWithPast(loss=loss, logits=None, **fields)


# What the patched forward passes through: the causal LMs' own arguments.
# The Trainer keeps only the dataset columns a model's forward names
# (remove_unused_columns), so a bare (*args, **kwargs) lost input_ids.
_causal_lm_forward.__signature__ = inspect.Signature(
    [inspect.Parameter("self", inspect.Parameter.POSITIONAL_OR_KEYWORD),
     inspect.Parameter("args", inspect.Parameter.VAR_POSITIONAL)]
    + [inspect.Parameter(name, inspect.Parameter.KEYWORD_ONLY, default=None)
       for name in ("input_ids", "attention_mask", "position_ids", "past_key_values",
                    "inputs_embeds", "labels", "use_cache", "logits_to_keep")]
    + [inspect.Parameter("kwargs", inspect.Parameter.VAR_KEYWORD)])


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
                _patch_forward(cls, fn)
        if loss:
            _patch(lm_cls, "_liger_loss", loss)
            _patch_forward(lm_cls, _causal_lm_forward)
        return None
    for m, cls, fn in targets:
        m._liger_family = family
        if cls is lm_cls:
            m._liger_loss = loss
            if loss_memory_budget is not None:
                m._liger_loss_budget = int(loss_memory_budget)
        m._liger_original_forward = _original(cls, "forward")
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


def precompile(out_dir, config, dtype=None, target=None):
    """Compiles the kernels a patched model of `config` calls into `out_dir`
    for `target` (the GPU's: sm_90a by default; liger.specs.CAPABILITIES;
    needs liger-compile); point LIGER_OPS_BUNDLES at it where the model
    trains. Returns the bundle paths."""
    return ops.precompile(out_dir, kernel_specs(config, dtype), target)


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
    pre.add_argument("--target", default=None, choices=specs.GPU_TARGETS,
                     help="the GPU's target, by compute capability (default sm_90a): "
                          + specs.targets_text())
    args = ap.parse_args(argv)
    try:
        from transformers import AutoConfig
    except ImportError:
        print("liger.transformers: needs the transformers package", file=sys.stderr)
        return 1
    try:
        for path in args.configs:
            config = AutoConfig.from_pretrained(path)
            for bundle in precompile(args.dir, config, args.dtype, args.target):
                print("%s -> %s" % (path, bundle))
    except (LigerError, OSError, ValueError) as e:
        print("liger.transformers: %s" % e, file=sys.stderr)
        return 1
    return 0


def __getattr__(name):
    """liger.integration's names (imported on first use: it imports this module)."""
    if name in ("LigerCallback", "AutoModelForCausalLM", "_apply_liger_kernel_to_instance"):
        return getattr(importlib.import_module("liger.integration"), name)
    raise AttributeError("module 'liger.transformers' has no attribute %r" % name)


if __name__ == "__main__":
    sys.exit(main())
