"""Hugging Face models patched with liger's kernels, one call per family.

    from liger.transformers import apply_liger_kernel_to_llama
    apply_liger_kernel_to_llama()                # the classes, before loading
    model = AutoModelForCausalLM.from_pretrained(...)
    # or a model already built (PEFT models too):
    apply_liger_kernel_to_llama(model=model)

The entry points (one per family of _FAMILIES, generated from its entry)
take Liger-Kernel's flag names and defaults, so existing configurations
work: `rope`, `rms_norm`, `swiglu` (`geglu` for the Gemmas),
`cross_entropy`, `fused_linear_cross_entropy` (default but for Granite; the
two losses exclude each other), Llama 4's `layer_norm`. What each flag
replaces, with the liger.ops function that runs it:

    rms_norm     the family's RMSNorm forward    ops.rms_norm (Gemma: 1 + w, cast after)
    layer_norm   a model's nn.LayerNorm forwards ops.layer_norm (LigerLayerNorm's; Llama 4's
                 vision encoder; on a model only: the class is PyTorch's)
    rope         apply_rotary_pos_emb            ops.rope
    swiglu/geglu the MLP's and each MoE expert's act(gate) * up
                                                 ops.swiglu / ops.geglu
    fused_linear_cross_entropy
                 the causal LM's lm_head + loss  ops.fused_linear_cross_entropy
                 while training with labels: no [tokens, vocab] logits kept
                 (an lm_head bias added to the logits, with its gradient)
    cross_entropy the loss on the logits         ops.cross_entropy

docs/transformers.md lists each family's classes and what stays its own.

A class patch changes the family's classes (every model built afterwards);
a model patch changes that model's modules only. RoPE is a function of the
family's modeling module, so either way it is patched there. Every patched
forward falls back to the original, with one warning per reason, where
liger has no kernel for the call: tensors not on a CUDA device or on a GPU
liger has no target for (one warning for the whole model, at its first
forward: patching touches no GPU), tensors on several devices, dtypes
other than bf16/f16/f32, shapes the kernels do not take (partial rotary,
tables of another layout, an lm_head bias of another dtype than its
weight), or no compiled kernels for the configuration and no compiler to
make them.

Kernels come from `liger.ops`: precompiled for a model configuration with
`precompile(DIR, config)` (or `python -m liger.transformers precompile DIR
CONFIG...`) and found through `LIGER_OPS_BUNDLES=DIR`, or compiled on first
use and cached where the compiler is installed.

`loss_memory_budget` (bytes) bounds the fused loss's chunk of logits
(liger.ops.fused_linear_cross_entropy's `memory_budget`; 0.5 GiB by
default): smaller chunks, less memory, more passes over the weight gradient.

`lora`, `fused_mlp`, `fuse_norm_linear`, `fuse_qkv_rope` and `attention`
name the fusions liger's compiler makes beyond Liger-Kernel's set (LoRA
projections, the gated MLP's projections with their activation, the norm
folded into its projections, q/k projections with RoPE in their epilogue,
the attention template).

    lora         a PEFT LoRA Linear on a decoder projection  ops.lora_linear
                 (q/k/v/o_proj, gate/up/down_proj, Phi-3's and GLM-4's fused
                 qkv_proj and gate_up_proj): base + adapter in one kernel;
                 on a model only (PEFT's classes are not the family's)
    fused_mlp    each dense gated MLP (gate/up/down_proj, or a fused
                 gate_up_proj)                                ops.gated_mlp
    fuse_qkv_rope the attention's q/k projections and RoPE   ops.linear_rope
                 (one kernel; Hugging Face's attention forward
                 otherwise as it is)
    fuse_norm_linear a decoder layer's norm and the projections
                 that read it (q/k/v, gate/up); on a model only
                                                         ops.rms_norm_linear
    attention    the attention function (attn_implementation  ops.attention
                 "liger", registered with Hugging Face's attention
                 interface); on a model only

A LoRA layer runs liger.ops.lora_linear where one adapter is active, not
merged, with no dropout (p = 0), no DoRA or other variant, no bias on
lora_B, and the base layer and both factors in one dtype (PEFT's
get_peft_model(..., autocast_adapter_dtype=False) keeps bf16/f16 adapters
in the model's dtype) that the kernel takes (bf16 or f16, rank 16, 32 or
64, aligned sizes: liger.ops.lora_linear's rules); any other runs PEFT's
own forward, with one warning per reason. Its backward is PyTorch's
matmuls. With fused_mlp, an MLP runs liger.ops.gated_mlp where its
projections are bias-free torch.nn.Linear of one dtype that the kernels
take (liger.ops.gated_mlp's rules) and its activation the family's; any
other runs its projections around the gated op (as `swiglu`/`geglu` patch
it), with one warning per reason; MoE experts keep the gated op, warned.
With fuse_qkv_rope, the family's attention forward is Hugging Face's own
(of the installed transformers: its cache, masks and attention function)
with the lines that form q and k — the q and k projections' head splits,
then apply_rotary_pos_emb, nothing between that reads them — replaced by
one liger.ops.linear_rope call where RoPE was; an attention that forms q
and k otherwise (q/k norms: Qwen3, OLMo 2, Gemma 3; RoPE on some layers:
SmolLM3; a fused qkv_proj: Phi-3), a family whose RoPE liger.ops.rope
cannot take, or a subclass with a forward of its own stays as it is,
warned. A call runs ops.linear_rope where q_proj and k_proj are
torch.nn.Linear (a PEFT LoRA layer is not), the tables span the head, and
the call is one liger.ops.linear_rope takes (its rules: one dtype, biases
on both or neither, the kernel's sizes); any other forms q and k as
Hugging Face does, with one warning per reason. With fuse_norm_linear, a
norm's forward computes its projections too and hands each its result,
which the projection returns when called with the norm's output (the
layer's forward stays Hugging Face's); a norm whose layer has none of its
projections, or a projection that is no torch.nn.Linear, or one that the
fuse_qkv_rope/fused_mlp flags compute, stays apart, warned; a projection
the layer calls otherwise unties its norm, warned. With attention, the model's attention function is
liger.ops.attention where a call has no mask (Hugging Face makes none for
a causal batch without padding, SDPA's mask function being registered
with it) or a sliding window's, no dropout, sinks or position bias, and
kernels, softcapped where the model is (Gemma 2); any other runs Hugging
Face's SDPA function (a softcapped one, which that function refuses, the
module's own eager attention), with one warning per reason.
A class patch registers the implementation and warns: models choose
theirs when built (attn_implementation="liger").
"""

import ast
import importlib
import inspect
import linecache
import sys
import textwrap
import types
import typing
import warnings
import weakref

import torch

from . import bundles, operators, ops, specs
from .errors import LigerError, LigerFallbackWarning  # noqa: F401 (liger.transformers' API)


class _Family(typing.NamedTuple):
    """What liger patches in one Hugging Face family, the entry of its
    config's model_type in _FAMILIES: one table read by the patching, by
    kernel_specs and by the entry points."""
    name: str        # the entry point: apply_liger_kernel_to_<name>
    module: str      # transformers.models.<module>.modeling_<module>
    causal_lm: str   # the causal LM class: its loss
    norms: tuple     # the RMSNorm classes (each norm of the family: q/k norms too)
    mlps: tuple      # (class, kind) of each gated MLP: _MLP_PATCHES
    gate: str = "swiglu"       # the gated op, and the name of its flag
    casting: str = "llama"     # the RMSNorm's casting (liger.ops.rms_norm)
    offset: float = 0.0        # and its weight offset (1.0: the scale is 1 + w)
    flags: tuple = ()          # (flag, default) where Liger-Kernel's differ, or extra
    rope: str = None           # why liger.ops.rope cannot take the family's RoPE
    rope_tables: str = None    # the RoPE tables' dtype, where not the model's
    stays: tuple = ()          # (flag, class, why): parts liger cannot take
    layer_norms: tuple = ()    # the LayerNorm classes the layer_norm flag patches on a model
    qk_norms: str = None       # "head": q/k norms over head_dim; "proj": over q/k_proj
    gated_sizes: tuple = ("intermediate_size",)  # config attributes: gated op sizes
    dense_sizes: tuple = None  # those of the dense MLPs (fused_mlp's), where not all
    logits_scaling: bool = False  # the model divides its logits by config.logits_scaling
    router_aux_loss: bool = False  # and adds its router's load-balancing loss
    output: str = "CausalLMOutputWithPast"  # the causal LM's output class
    attention: str = None      # the attention class, where not <causal LM's prefix>Attention
    # The `scaling` the attention passes its attention function, where not
    # head_dim ** -0.5 (the modeling code's): (config attribute, power).
    scaling: tuple = None
    # fuse_norm_linear's: (the decoder layer's norm, the layouts of the
    # projections that read its output), each norm before a projection.
    norm_linear: tuple = None


# The projections that read a decoder layer's norm (fuse_norm_linear): the
# attention's and the MLP's, in each layout (the first whose modules the
# layer has).
_ATTENTION_INPUTS = (("self_attn.q_proj", "self_attn.k_proj", "self_attn.v_proj"),
                     ("self_attn.qkv_proj",))
_MLP_INPUTS = (("mlp.gate_proj", "mlp.up_proj"), ("mlp.gate_up_proj",),
               ("feed_forward.gate_proj", "feed_forward.up_proj"))  # (Llama 4's dense layers)
_NORM_LINEAR = (("input_layernorm", _ATTENTION_INPUTS),
                ("post_attention_layernorm", _MLP_INPUTS))


_MOE_OUTPUT = "MoeCausalLMOutputWithPast"
_GEMMA = dict(gate="geglu", casting="gemma", offset=1.0)
# (Gemma 2 and 3 normalise after attention too: the MLP's input norm is
# pre_feedforward_layernorm.)
_SANDWICH = (("input_layernorm", _ATTENTION_INPUTS), ("pre_feedforward_layernorm", _MLP_INPUTS))
# model_type -> Family. Liger-Kernel's entry points and flags; the classes
# each patches are in docs/transformers.md.
_FAMILIES = {
    "llama": _Family("llama", "llama", "LlamaForCausalLM", ("LlamaRMSNorm",),
                    (("LlamaMLP", "gate_up"),)),
    "mistral": _Family("mistral", "mistral", "MistralForCausalLM", ("MistralRMSNorm",),
                      (("MistralMLP", "gate_up"),)),
    "qwen2": _Family("qwen2", "qwen2", "Qwen2ForCausalLM", ("Qwen2RMSNorm",),
                    (("Qwen2MLP", "gate_up"),)),
    "qwen3": _Family("qwen3", "qwen3", "Qwen3ForCausalLM", ("Qwen3RMSNorm",),
                    (("Qwen3MLP", "gate_up"),), qk_norms="head"),
    "gemma": _Family("gemma", "gemma", "GemmaForCausalLM", ("GemmaRMSNorm",),
                    (("GemmaMLP", "gate_up"),), **_GEMMA),
    # Sandwich norms (before and after attention and MLP), the loss's logits
    # softcapped (config.final_logit_softcapping).
    "gemma2": _Family("gemma2", "gemma2", "Gemma2ForCausalLM", ("Gemma2RMSNorm",),
                     (("Gemma2MLP", "gate_up"),), scaling=("query_pre_attn_scalar", -0.5),
                     norm_linear=_SANDWICH, **_GEMMA),
    "gemma3_text": _Family("gemma3_text", "gemma3", "Gemma3ForCausalLM", ("Gemma3RMSNorm",),
                          (("Gemma3MLP", "gate_up"),), qk_norms="head",
                          scaling=("query_pre_attn_scalar", -0.5), norm_linear=_SANDWICH,
                          **_GEMMA),
    "phi3": _Family("phi3", "phi3", "Phi3ForCausalLM", ("Phi3RMSNorm",),
                   (("Phi3MLP", "fused"),)),
    # Liger-Kernel's Granite takes the loss on the logits by default (its
    # fused loss has no logits scaling); liger's scales the hidden states.
    "granite": _Family("granite", "granite", "GraniteForCausalLM", ("GraniteRMSNorm",),
                      (("GraniteMLP", "gate_up"),),
                      flags=(("cross_entropy", True), ("fused_linear_cross_entropy", False)),
                      logits_scaling=True, scaling=("attention_multiplier", 1)),
    # Norms after attention and MLP, q/k norms over the whole projections,
    # weights multiplied in f32 (casting "gemma", offset 0), RoPE tables
    # kept in f32.
    "olmo2": _Family("olmo2", "olmo2", "Olmo2ForCausalLM", ("Olmo2RMSNorm",),
                    (("Olmo2MLP", "gate_up"),), casting="gemma", rope_tables="f32",
                    qk_norms="proj", norm_linear=()),
    "glm4": _Family("glm4", "glm4", "Glm4ForCausalLM", ("Glm4RMSNorm",),
                   (("Glm4MLP", "fused"),), flags=(("rope", False),),
                   rope="GLM-4's RoPE rotates interleaved pairs of a partial rotary dimension; "
                        "liger.ops.rope rotates the halves of the whole head"),
    "smollm3": _Family("smollm3", "smollm3", "SmolLM3ForCausalLM", ("SmolLM3RMSNorm",),
                      (("SmolLM3MLP", "gate_up"),)),
    # MoE: each expert's SwiGLU (the router stays PyTorch's), the router's
    # load-balancing loss added as the model adds it.
    "mixtral": _Family("mixtral", "mixtral", "MixtralForCausalLM", ("MixtralRMSNorm",),
                      (("MixtralExperts", "experts"),), router_aux_loss=True,
                      output=_MOE_OUTPUT),
    "qwen3_moe": _Family("qwen3_moe", "qwen3_moe", "Qwen3MoeForCausalLM", ("Qwen3MoeRMSNorm",),
                        (("Qwen3MoeMLP", "gate_up"), ("Qwen3MoeExperts", "experts")),
                        qk_norms="head", gated_sizes=("moe_intermediate_size",
                                                      "intermediate_size"),
                        dense_sizes=("intermediate_size",),
                        router_aux_loss=True, output=_MOE_OUTPUT),
    "llama4_text": _Family(
        "llama4", "llama4", "Llama4ForCausalLM", ("Llama4TextRMSNorm",),
        (("Llama4TextMLP", "gate_up"), ("Llama4TextExperts", "bmm_experts")),
        flags=(("layer_norm", True),),
        rope="Llama 4's apply_rotary_emb rotates interleaved pairs by complex freqs_cis; "
             "liger.ops.rope rotates halves by cos/sin tables",
        stays=(("rms_norm", "Llama4TextL2Norm", "Llama 4's q/k norm has no weight (liger.ops."
                "rms_norm takes one)"),),
        layer_norms=("nn.LayerNorm",),
        gated_sizes=("intermediate_size", "intermediate_size_mlp"), output=_MOE_OUTPUT,
        attention="Llama4TextAttention"),
}
# The activations each gated op computes: Hugging Face's ACT2FN names and the
# op's attributes for each.
_ACTIVATIONS = {"swiglu": {"silu": (), "swish": ()},
                "geglu": {"gelu_pytorch_tanh": ("tanh",), "gelu": ("none",)}}
# (activation module class, ACT2FN name), filled at the first patch.
_ACTIVATION_TYPES = []

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
    module = _FAMILIES[family].module
    return importlib.import_module("transformers.models.%s.modeling_%s" % (module, module))


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


def _fallback(what, op, args, devices, instead="its original forward"):
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
    return _decided(what, op, tuple(ops.static(a) for a in args), devices, instead)


@torch._dynamo.assume_constant_result
def _decided(what, op, args, devices, instead):
    key = (what, op, args, devices, instead)
    if key not in _DECIDED:
        _DECIDED[key] = _decide(what, op, args, devices, instead)
    if _DECIDED[key]:
        _warn_once(_DECIDED[key])
    return _DECIDED[key]


# The liger.bundles function that loads an op's kernels, where not a row
# op's pair (`kernels`).
_LOADERS = {"fused_linear_cross_entropy": "loss_plan_kernels", "lora_linear": "matmul_kernels",
            "gated_mlp": "matmul_kernels", "linear_rope": "linear_rope_kernels",
            "attention": "attention_kernels"}


def _decide(what, op, args, devices, instead):
    """The reason of _fallback, by liger.ops' own rules: one device
    (ops.one_device), a device liger has kernels for (bundles.device_target:
    a reason of the machine, the same for every module, so warned once),
    the spec's rules (dtypes, sizes, attributes), kernels that load.
    `instead`: what the module runs then."""
    try:
        device = ops.one_device(op, [(name, torch.device(d)) for name, d in devices])
    except LigerError as e:
        return "%s runs %s: %s" % (what, instead, e)
    try:
        target = bundles.device_target(device)
    except LigerError as e:
        return "patched modules run their original forward: %s" % e
    try:
        spec = getattr(specs, op + "_spec")(*args, target=target)
        getattr(bundles, _LOADERS.get(op, "kernels"))(spec)
    except LigerError as e:
        return "%s runs %s: %s" % (what, instead, e)
    return None


def _rms_norm_config(self, x):
    """(eps, offset, casting) of the norm module's liger.ops.rms_norm call
    on x, or None where it runs its original forward (_fallback: warned)."""
    family = _FAMILIES[self._liger_family]
    eps = getattr(self, "variance_epsilon", getattr(self, "eps", 1e-6))
    w = self.weight
    if _fallback(type(self).__name__, "rms_norm",
                 (x.shape[-1], str(x.dtype), str(w.dtype), eps, family.offset, family.casting),
                 (("hidden_states", str(x.device)), ("weight", str(w.device)))):
        return None
    return eps, family.offset, family.casting


def _rms_norm_forward(self, hidden_states):
    config = _rms_norm_config(self, hidden_states)
    if config is None:
        return self._liger_original_forward(self, hidden_states)
    return ops.rms_norm(hidden_states, self.weight, *config)


# fuse_norm_linear=True (a model patch): each decoder layer's norm with the
# projections that read its output (_Family.norm_linear) as one
# liger.ops.rms_norm_linear. The norm's forward computes the projections
# too and hands each its result; a projection's forward returns it where it
# is called with that norm output (the layer's forward, Hugging Face's,
# stays as it is), else computes as it would. A projection called with
# anything else, or not called before the norm runs again, unties the norm
# (warned): a layer that reads its norm otherwise runs it apart, never with
# a wrong result.

def _norm_linear_targets(model, fam, norm_classes, flags):
    """Ties each norm of `model`'s decoder layers to its projections (their
    modules, `_liger_consumers`); _apply's targets that patch the norms'
    and the projections' forwards."""
    sides = {"input_layernorm": "fuse_qkv_rope", "post_attention_layernorm": "fused_mlp",
             "pre_feedforward_layernorm": "fused_mlp"}
    if fam.norm_linear == ():
        _warn_once("fuse_norm_linear=True: %s's decoder layers normalise after attention and "
                   "MLP (no norm is read by a projection): nothing to fuse" % fam.causal_lm)
        return []
    targets = []
    for layer in model.modules():
        for norm_name, layouts in fam.norm_linear or _NORM_LINEAR:
            norm = getattr(layer, norm_name, None)
            if not isinstance(norm, norm_classes):
                continue
            where = "%s.%s" % (type(layer).__name__, norm_name)
            if flags.get(sides[norm_name]):
                _warn_once("fuse_norm_linear=True: %s stays apart from its projections: %s=True "
                           "computes them" % (where, sides[norm_name]))
                continue
            consumers = _consumers(layer, layouts, where)
            if consumers:
                norm._liger_consumers, norm._liger_where = tuple(consumers), where
                targets.append((norm, type(norm), (("forward", _norm_linear_forward),)))
                targets += [(m, torch.nn.Linear, (("forward", _norm_fed_forward),))
                            for m in consumers]
    return targets


def _consumers(layer, layouts, where):
    """The torch.nn.Linear projections of `layer` in the first of `layouts`
    (dotted paths) it has, or None, warned."""
    for layout in layouts:
        try:
            found = [layer.get_submodule(path) for path in layout]
        except AttributeError:
            continue
        other = [(path, m) for path, m in zip(layout, found) if type(m) is not torch.nn.Linear]
        if not other:
            return found
        _warn_once("fuse_norm_linear=True: %s stays apart: %s is %s.%s, not a torch.nn.Linear"
                   % (where, other[0][0], type(other[0][1]).__module__,
                      type(other[0][1]).__qualname__))
        return None
    _warn_once("fuse_norm_linear=True: %s stays apart: its layer has no %s" % (
        where, " or ".join("/".join(layout) for layout in layouts)))
    return None


def _untie(norm, why):
    """Runs `norm` apart from its projections from now on, warned."""
    for m in norm._liger_consumers:
        m.__dict__.pop("_liger_ready", None)
    norm._liger_consumers = ()
    _warn_once("fuse_norm_linear=True: %s runs apart from its projections: %s"
               % (norm._liger_where, why))


def _norm_linear_forward(self, hidden_states):
    """The norm and its projections as liger.ops.rms_norm_linear, where the
    projections take it (ops.rms_norm_linear_problem: plain weights of the
    input's dtype and device, biases on all or none); else the norm as
    rms_norm=True runs it, warned once per reason."""
    consumers = () if torch.compiler.is_compiling() else self._liger_consumers
    if consumers and any("_liger_ready" in m.__dict__ for m in consumers):
        _untie(self, "a projection was not called with its output before it ran again")
        consumers = ()
    if not consumers:
        return _rms_norm_forward(self, hidden_states)
    x, w = hidden_states, self.weight
    weights = [m.weight for m in consumers]
    problem = None
    if any(type(t) not in operators._PLAIN for t in [w] + weights):
        problem = "a weight is a %s" % next(type(t).__name__ for t in [w] + weights
                                             if type(t) not in operators._PLAIN)
    elif torch.is_autocast_enabled(x.device.type):
        problem = "autocast is on (liger.ops.rms_norm_linear computes in the input's dtype)"
    elif any(m._forward_pre_hooks for m in consumers) or \
            torch.nn.modules.module._global_forward_pre_hooks:
        problem = "a projection has a forward pre-hook (it may change its input or weight)"
    else:
        found = ops.rms_norm_linear_problem(x, w, weights, [m.bias for m in consumers])
        problem = found and found[1]
    if problem:
        _warn_once("fuse_norm_linear=True: %s runs apart from its projections: %s"
                   % (self._liger_where, problem))
        return _rms_norm_forward(self, hidden_states)
    config = _rms_norm_config(self, x)
    if config is None:
        return self._liger_original_forward(self, hidden_states)
    xn, ys = ops.rms_norm_linear(x, w, weights, [m.bias for m in consumers], *config)
    for m, y in zip(consumers, ys):
        m._liger_ready = (xn, xn._version, y, self)
    return xn


def _norm_fed_forward(self, input):
    """A projection tied to its norm: the norm's result for it where called
    with the norm's output, else its own forward."""
    ready = None if torch.compiler.is_compiling() else self.__dict__.pop("_liger_ready", None)
    if ready is not None:
        xn, version, y, norm = ready
        if xn is input and input._version == version:
            return y
        _untie(norm, "a projection was called with another input than its output" if xn is not
               input else "its output was changed in place before a projection read it")
    return self._liger_original_forward(self, input)


def _layer_norm_forward(self, input):
    """nn.LayerNorm's forward as liger.ops.layer_norm (LigerLayerNorm's),
    where liger can run it: over the last dimension, with a weight."""
    original = self._liger_original_forward
    what = type(self).__name__
    w, b = self.weight, self.bias
    if w is None or len(self.normalized_shape) != 1:
        _warn_once("%s runs its original forward: liger.ops.layer_norm normalizes the last "
                   "dimension and scales by a weight, got normalized_shape %s%s" % (
                       what, list(self.normalized_shape),
                       " without elementwise_affine" if w is None else ""))
        return original(self, input)
    devices = (("input", str(input.device)), ("weight", str(w.device))) + (
        (("bias", str(b.device)),) if b is not None else ())
    if _fallback(what, "layer_norm", (input.shape[-1], str(input.dtype), str(w.dtype), self.eps,
                                      b is not None), devices):
        return original(self, input)
    return ops.layer_norm(input, w, b, self.eps)


def _activation_name(act):
    """The ACT2FN name of an activation module (by its exact class: a class
    liger does not know keeps its own name)."""
    for cls, name in _ACTIVATION_TYPES:
        if type(act) is cls:
            return name
    return type(act).__name__


def _activation(self):
    """(the family's gated op, its attributes) where that op computes the
    module's own activation, else None (warned once: the module computes
    act(gate) * up as it does)."""
    op = _FAMILIES[self._liger_family].gate
    act = self.act_fn if hasattr(self, "act_fn") else self.activation_fn
    name = _activation_name(act)
    attrs = _ACTIVATIONS[op].get(name)
    if attrs is None:
        _warn_once("%s with activation %r runs its original forward (liger.ops.%s computes "
                   "%s)" % (type(self).__name__, name, op, " or ".join(_ACTIVATIONS[op])))
        return None
    return op, attrs


def _gated(self, gate, up):
    """act(gate) * up of a gated MLP or experts module: the family's gated
    op (liger.ops.swiglu or geglu) where it computes the module's own
    activation and liger can run the call, else as the module computes it
    (warned once)."""
    activation = _activation(self)
    act = self.act_fn if hasattr(self, "act_fn") else self.activation_fn
    if activation is None:
        return act(gate) * up
    op, attrs = activation
    if _fallback(type(self).__name__, op, (gate.shape[-1], str(gate.dtype)) + attrs,
                 (("gate", str(gate.device)), ("up", str(up.device)))):
        return act(gate) * up
    return getattr(ops, op)(gate, up, *attrs)


def _gated_split(self, gate_up):
    """_gated over a fused projection's output, gate then up along its last
    dimension (Hugging Face's chunk(2)); also the experts' _apply_gate."""
    gate, up = gate_up.chunk(2, dim=-1)
    return _gated(self, gate, up)


def _mlp_forward(self, x):
    return self.down_proj(_gated(self, self.gate_proj(x), self.up_proj(x)))


def _fused_mlp_forward(self, hidden_states):
    return self.down_proj(_gated_split(self, self.gate_up_proj(hidden_states)))


def _one_gated_mlp(self, x, projections, split):
    """The MLP as liger.ops.gated_mlp (fused_mlp=True) of its gate and up
    weights and its down projection, where it can take them: `projections`
    (name, module) bias-free torch.nn.Linear with plain weights (not a
    quantized layer, not a tensor subclass), the family's gated op the
    module's activation, the call a configuration with kernels; `split`:
    the first projection is a fused gate_up (gate then up along its rows,
    Hugging Face's chunk(2)). None otherwise, warned once per reason (the
    caller then runs the gated op and the projections apart)."""
    what = type(self).__name__
    instead = "liger.ops.%s and its projections apart" % _FAMILIES[self._liger_family].gate
    for name, proj in projections:
        if type(proj) is not torch.nn.Linear or proj.bias is not None:
            kind = "a torch.nn.Linear with a bias" if type(proj) is torch.nn.Linear else \
                "%s.%s" % (type(proj).__module__, type(proj).__qualname__)
            _warn_once("%s runs %s (fused_mlp=True): liger.ops.gated_mlp takes bias-free "
                       "torch.nn.Linear projections, %s is %s" % (what, instead, name, kind))
            return None
        if type(proj.weight) not in (torch.Tensor, torch.nn.Parameter):
            _warn_once("%s runs %s (fused_mlp=True): liger.ops.gated_mlp takes plain weights, "
                       "%s's is a %s" % (what, instead, name, type(proj.weight).__name__))
            return None
    activation = _activation(self)
    if activation is None:
        return None
    op, attrs = activation
    if split:
        gate_weight, up_weight = projections[0][1].weight.chunk(2, dim=0)
    else:
        gate_weight, up_weight = projections[0][1].weight, projections[1][1].weight
    down = projections[-1][1].weight
    tensors = (("x", x), ("gate_weight", gate_weight), ("up_weight", up_weight),
               ("down_weight", down))
    dtypes = {t.dtype for _, t in tensors}
    if len(dtypes) > 1:
        _warn_once("%s runs %s (fused_mlp=True): liger.ops.gated_mlp takes x and its weights "
                   "in one dtype, got %s" % (what, instead, ", ".join(
                       "%s %s" % (n, str(t.dtype).replace("torch.", "")) for n, t in tensors)))
        return None
    if _fallback(what, "gated_mlp", (x.shape[-1], gate_weight.shape[0], str(x.dtype), op)
                 + attrs, tuple((n, str(t.device)) for n, t in tensors), instead):
        return None
    return ops.gated_mlp(x, gate_weight, up_weight, down, op, *attrs)


def _gated_mlp_forward(self, x):
    """A Llama MLP (gate_proj, up_proj, down_proj) as one liger.ops.gated_mlp
    where it can, else as _mlp_forward."""
    y = _one_gated_mlp(self, x, (("gate_proj", self.gate_proj), ("up_proj", self.up_proj),
                                 ("down_proj", self.down_proj)), False)
    return _mlp_forward(self, x) if y is None else y


def _gated_mlp_split_forward(self, hidden_states):
    """A fused gate_up_proj's MLP (Phi-3, GLM-4) as one liger.ops.gated_mlp
    where it can, else as _fused_mlp_forward."""
    y = _one_gated_mlp(self, hidden_states, (("gate_up_proj", self.gate_up_proj),
                                             ("down_proj", self.down_proj)), True)
    return _fused_mlp_forward(self, hidden_states) if y is None else y


def _experts_forward(self, *args, **kwargs):
    """The experts as Hugging Face dispatches them (config.
    _experts_implementation): grouped_mm and batched_mm call the patched
    _apply_gate; the eager loop computes act(gate) * up itself, so it runs
    as written, warned."""
    implementation = self.config._experts_implementation
    if implementation in (None, "eager"):
        _warn_once("%s with experts_implementation=%r runs its original forward (its loop "
                   "applies the activation itself; 'grouped_mm' or 'batched_mm' run liger.ops.%s)"
                   % (type(self).__name__, implementation, _FAMILIES[self._liger_family].gate))
    return self._liger_original_forward(self, *args, **kwargs)


def _bmm_experts_forward(self, hidden_states):
    """Llama 4's experts: the tokens [E * T, H] sorted by expert, the
    weights gate_up [E, H, 2I] and down [E, I, H]."""
    x = hidden_states.view(self.gate_up_proj.shape[0], -1, self.hidden_size)
    h = _gated_split(self, torch.bmm(x, self.gate_up_proj))
    return torch.bmm(h, self.down_proj).view(-1, self.hidden_size)


# How a gated MLP of each kind (_Family.mlps) is patched: (attribute,
# function) pairs.
#   gate_up      gate_proj, up_proj and down_proj (Llama's MLP)
#   fused        one gate_up_proj whose output splits into gate and up (Phi-3, GLM-4)
#   experts      MoE experts of fused [E, 2I, H] weights (Mixtral, Qwen3-MoE): Hugging
#                Face's grouped_mm and batched_mm call _apply_gate on the tokens'
#                gate_up; its eager loop does not (that falls back, warned)
#   bmm_experts  Llama 4's experts
_MLP_PATCHES = {
    "gate_up": (("forward", _mlp_forward),),
    "fused": (("forward", _fused_mlp_forward),),
    "experts": (("_apply_gate", _gated_split), ("forward", _experts_forward)),
    "bmm_experts": (("forward", _bmm_experts_forward),),
}
# fused_mlp=True: each dense MLP as one liger.ops.gated_mlp; experts as
# _MLP_PATCHES patches them.
_ONE_KERNEL_MLP_PATCHES = {
    "gate_up": (("forward", _gated_mlp_forward),),
    "fused": (("forward", _gated_mlp_split_forward),),
}


# The decoder projections whose PEFT LoRA layers lora=True patches.
_LORA_PROJECTIONS = ("q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj",
                     "down_proj", "qkv_proj", "gate_up_proj")


def _lora_layers(model):
    """The PEFT LoRA Linear modules of `model` on _LORA_PROJECTIONS (none
    where PEFT is not installed)."""
    try:
        from peft.tuners.lora.layer import Linear
    except ImportError:
        return []
    return [m for name, m in model.named_modules()
            if isinstance(m, Linear) and name.rsplit(".", 1)[-1] in _LORA_PROJECTIONS]


def _lora_problem(layer, x, args, kwargs):
    """(True, why) where liger.ops.lora_linear cannot compute PEFT LoRA
    Linear `layer`'s forward of x (called with `args` and `kwargs` beside
    x) by these rules of the layer; else (False, the active adapter's
    name). The kernel's own rules (dtype, rank, sizes, scale) are the
    spec's, checked by _fallback."""
    if args or any(v is not None for v in kwargs.values()):
        return True, "it is called with more than the input (%s)" % ", ".join(
            sorted(k for k, v in kwargs.items() if v is not None) or ["positional arguments"])
    if layer.disable_adapters:
        return True, "its adapters are disabled"
    if layer.merged:
        return True, "its adapter is merged into the base layer"
    active = [a for a in layer.active_adapters if a in layer.lora_A]
    if len(active) != 1:
        return True, "%d adapters are active (liger.ops.lora_linear computes one)" % len(active)
    (name,) = active
    if name in getattr(layer, "lora_variant", {}) or getattr(layer, "use_dora", {}).get(name):
        return True, "its adapter %r is a variant of LoRA (DoRA or another: %s)" % (
            name, type(getattr(layer, "lora_variant", {}).get(name)).__name__)
    dropout = layer.lora_dropout[name]
    if not isinstance(dropout, torch.nn.Identity) and getattr(dropout, "p", None) != 0:
        return True, "its adapter's dropout is %s (liger.ops.lora_linear has none: " \
            "lora_dropout=0.0)" % getattr(dropout, "p", type(dropout).__name__)
    base, lora_a, lora_b = layer.base_layer, layer.lora_A[name], layer.lora_B[name]
    if not all(isinstance(m, torch.nn.Linear) for m in (base, lora_a, lora_b)) or \
            getattr(layer, "fan_in_fan_out", False):
        return True, "its base layer or factors are not torch.nn.Linear [out, in] weights"
    if lora_b.bias is not None:
        return True, "its lora_B has a bias (lora_bias=True)"
    dtypes = [("x", x.dtype), ("the base weight", base.weight.dtype),
              ("lora_A", lora_a.weight.dtype), ("lora_B", lora_b.weight.dtype)]
    if base.bias is not None:
        dtypes.append(("the base bias", base.bias.dtype))
    if len({dt for _, dt in dtypes}) != 1:
        return True, "its operands have several dtypes (%s; get_peft_model(..., " \
            "autocast_adapter_dtype=False) keeps bf16/f16 adapters in the model's dtype)" % \
            ", ".join("%s %s" % (what, str(dt).replace("torch.", "")) for what, dt in dtypes)
    return False, name


def _lora_forward(self, x, *args, **kwargs):
    """A PEFT LoRA Linear's forward as liger.ops.lora_linear (base and
    adapter in one kernel), where it can run it; PEFT's own otherwise,
    warned once per reason."""
    original = self._liger_original_forward
    what = "PEFT's LoRA Linear"
    refused, why = _lora_problem(self, x, args, kwargs)
    if refused:
        _warn_once("%s runs its original forward: %s" % (what, why))
        return original(self, x, *args, **kwargs)
    base, a, b = self.base_layer, self.lora_A[why].weight, self.lora_B[why].weight
    w, bias, scale = base.weight, base.bias, self.scaling[why]
    devices = (("x", str(x.device)), ("weight", str(w.device)), ("lora_A", str(a.device)),
               ("lora_B", str(b.device))) + ((("bias", str(bias.device)),) if bias is not None
                                             else ())
    if _fallback(what, "lora_linear", (w.shape[1], w.shape[0], a.shape[0], str(x.dtype), scale,
                                       bias is not None), devices):
        return original(self, x, *args, **kwargs)
    return ops.lora_linear(x, w, bias, a, b, scale)


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


# fuse_qkv_rope=True: the attention's q/k projections and RoPE as one
# liger.ops.linear_rope. The family's attention forward is Hugging Face's own
# with three of its lines replaced, those that form q and k:
_QK_LINES = ("query_states = self.q_proj(hidden_states).view(hidden_shape).transpose(1, 2)",
             "key_states = self.k_proj(hidden_states).view(hidden_shape).transpose(1, 2)",
             "query_states, key_states = apply_rotary_pos_emb(query_states, key_states, cos, sin)")
# and what may stand between them (nothing else reads or writes q, k,
# hidden_states, hidden_shape or the tables there). The call stands where
# RoPE was, with the tables it would have taken and the modeling module's
# apply_rotary_pos_emb (liger.ops.rope under rope=True) for a call the kernel
# cannot take.
_QK_BETWEEN = ("value_states = self.v_proj(hidden_states).view(hidden_shape).transpose(1, 2)",
               "cos, sin = position_embeddings")
_QK_CALL = ("query_states, key_states = self._liger_linear_rope(hidden_states, cos, sin, "
            "hidden_shape, apply_rotary_pos_emb)")
_QK_FILE = "<liger fuse_qkv_rope: %s>"


def _qk_rope_forward(cls):
    """(cls.forward with its q/k projections and RoPE as one call of
    self._liger_linear_rope, None), or (None, why it cannot be): the lines
    of _QK_LINES in the forward's body, in order, with only the lines of
    _QK_BETWEEN (or blank ones) between them; no closure. Everything else
    stays Hugging Face's, of the installed version: the cache, the
    attention function, the masks, the forward's decorators (transformers'
    deprecate_kwarg: evaluated again, as the class body evaluated them, over
    the rewritten function). Its source is registered with linecache
    (tracebacks show it)."""
    original = _original(cls, "forward")
    inner = inspect.unwrap(original)
    name = "%s.forward" % cls.__name__
    try:
        source = textwrap.dedent(inspect.getsource(inner))
        (node,) = ast.parse(source).body
    except (OSError, TypeError, SyntaxError, ValueError) as e:
        return None, "%s's source cannot be read as one function (%s)" % (name, e)
    if not isinstance(node, ast.FunctionDef) or inner.__code__.co_freevars:
        return None, "%s is not a plain function (%s)" % (
            name, "a closure over " + ", ".join(inner.__code__.co_freevars)
            if isinstance(node, ast.FunctionDef) else type(node).__name__)
    lines = source.splitlines()
    stripped = [line.strip() for line in lines]
    indents = {len(line) - len(line.lstrip()) for line, text in zip(lines, stripped)
               if text in _QK_LINES}
    at = [stripped.index(text) if stripped.count(text) == 1 else -1 for text in _QK_LINES]
    if -1 in at or at != sorted(at) or len(indents) != 1 or any(
            text and text not in _QK_BETWEEN + _QK_LINES for text in stripped[at[0]:at[2]]):
        return None, ("%s does not form q and k as Llama's attention does (its q/k "
                      "projections' head split, then apply_rotary_pos_emb, with nothing "
                      "between them that reads q or k: a q/k norm, a RoPE applied only on "
                      "some layers)" % name)
    lines[at[2]] = " " * indents.pop() + _QK_CALL
    del lines[at[1]], lines[at[0]]
    filename = _QK_FILE % name
    text = "\n".join(lines) + "\n"
    code = compile(text, filename, "exec")
    linecache.cache[filename] = (len(text), None, text.splitlines(True), filename)
    (fn_code,) = [c for c in code.co_consts if isinstance(c, types.CodeType)
                  and c.co_name == node.name]
    fn = types.FunctionType(fn_code, inner.__globals__, node.name, inner.__defaults__)
    for attr in ("__kwdefaults__", "__doc__", "__qualname__", "__annotations__"):
        setattr(fn, attr, getattr(inner, attr))
    fn.__dict__.update(inner.__dict__)
    for decorator in reversed(node.decorator_list):
        fn = eval(compile(ast.Expression(decorator), filename, "eval"), inner.__globals__)(fn)
    return fn, None


def _qk_rope_attention(fam):
    """(the family's attention class, its rewritten forward, None), or
    (the class or None, None, why fuse_qkv_rope leaves it): one rule for
    the patch and for kernel_specs."""
    name = fam.attention or fam.causal_lm.replace("ForCausalLM", "Attention")
    if fam.rope:
        return None, None, "%s stays as it is: %s" % (name, fam.rope)
    cls = getattr(importlib.import_module("transformers.models.%s.modeling_%s" % (
        fam.module, fam.module)), name, None)
    if cls is None:
        return None, None, "transformers' %s has no %s: nothing to fuse" % (fam.module, name)
    forward, why = _qk_rope_forward(cls)
    return cls, forward, None if forward else "%s stays as it is: %s" % (name, why)


def _qk_rope_parts(fam):
    """fuse_qkv_rope=True's part of _apply's list: the family's attention
    class with its rewritten forward, or none, warned."""
    cls, forward, why = _qk_rope_attention(fam)
    if forward is None:
        _warn_once("fuse_qkv_rope=True: %s" % why)
        return []
    return [(True, cls, (("_liger_linear_rope", _linear_rope), ("forward", forward)))]


def _takes_rewrite(module, cls, patches):
    """Whether `module`, an instance of `cls`, takes `patches`: a forward
    rewritten from cls's own (fuse_qkv_rope's) only where the module's
    class runs cls's forward (a subclass with its own stays as it is,
    warned)."""
    if not any(attr == "_liger_linear_rope" for attr, _ in patches) or \
            type(module).forward is cls.forward:
        return True
    _warn_once("fuse_qkv_rope=True: %s stays as it is: it is a %s with a forward of its own"
               % (type(module).__name__, cls.__name__))
    return False


def _linear_rope(self, hidden_states, cos, sin, hidden_shape, apply_rotary_pos_emb):
    """(q, k) of the attention as liger.ops.linear_rope where it can take
    them: q_proj and k_proj torch.nn.Linear with plain weights (a PEFT LoRA
    layer is not), the tables spanning the head, the call's tensors those
    liger.ops.linear_rope takes (ops.linear_rope_problem) in a configuration
    with kernels; else as Hugging Face forms them (`apply_rotary_pos_emb`:
    the modeling module's, liger.ops.rope under rope=True), warned once per
    reason."""
    what = type(self).__name__
    instead = "its q/k projections and RoPE apart (fuse_qkv_rope=True)"
    x, qp, kp = hidden_states, self.q_proj, self.k_proj
    problem = None
    for name, proj in (("q_proj", qp), ("k_proj", kp)):
        if type(proj) is not torch.nn.Linear:
            problem = "%s is %s.%s, not a torch.nn.Linear" % (
                name, type(proj).__module__, type(proj).__qualname__)
        elif type(proj.weight) not in (torch.Tensor, torch.nn.Parameter):
            problem = "%s's weight is a %s" % (name, type(proj.weight).__name__)
        if problem:
            break
    if problem is None and cos.shape[-1] != self.head_dim:
        problem = "the tables span %d of the head's %d features (a partial rotary " \
            "dimension)" % (cos.shape[-1], self.head_dim)
    if problem is None:
        found = ops.linear_rope_problem(x, qp.weight, kp.weight, cos, sin, qp.bias, kp.bias)
        problem = found and found[1]
    if problem:
        _warn_once("%s runs %s: %s" % (what, instead, problem))
    else:
        tensors = (("hidden_states", x), ("q_proj.weight", qp.weight),
                   ("k_proj.weight", kp.weight), ("cos", cos), ("sin", sin))
        tensors += (("q_proj.bias", qp.bias), ("k_proj.bias", kp.bias)) \
            if qp.bias is not None else ()
        if not _fallback(what, "linear_rope", ops.operators.linear_rope_args(
                x, qp.weight, kp.weight, cos, qp.bias is not None),
                tuple((n, str(t.device)) for n, t in tensors), instead):
            return ops.linear_rope(x, qp.weight, kp.weight, cos, sin, qp.bias, kp.bias)
    query = qp(x).view(hidden_shape).transpose(1, 2)
    key = kp(x).view(hidden_shape).transpose(1, 2)
    return apply_rotary_pos_emb(query, key, cos, sin)


# attention=True: liger.ops.attention as Hugging Face's attention function,
# registered with its attention interface as attn_implementation="liger"
# (the model's attention forward otherwise its own: projections, RoPE,
# cache), with SDPA's mask function, so that a mask is made only where
# SDPA needs one.

ATTENTION_IMPLEMENTATION = "liger"
# Hugging Face's SDPA attention function, what _attention_forward runs where
# liger.ops.attention cannot (found at registration: torch.compile cannot
# trace an import).
_SDPA_FORWARD = []


def _register_attention():
    """Registers _attention_forward and SDPA's mask function under
    ATTENTION_IMPLEMENTATION with Hugging Face's interfaces (again: the
    same functions)."""
    from transformers import AttentionInterface, AttentionMaskInterface
    from transformers.integrations.sdpa_attention import sdpa_attention_forward
    from transformers.masking_utils import sdpa_mask
    _SDPA_FORWARD[:] = [sdpa_attention_forward]
    AttentionInterface.register(ATTENTION_IMPLEMENTATION, _attention_forward)
    AttentionMaskInterface.register(ATTENTION_IMPLEMENTATION, sdpa_mask)


def _attention_scale(scaling, head_dim):
    """liger.ops.attention's `scale` for the `scaling` an attention passes
    its attention function, over heads of `head_dim`: None (the op's
    default, 1/sqrt(D): one spec, whatever computed it) where that is none
    or exactly head_dim ** -0.5, else the scaling. What _attention_forward
    calls with and kernel_specs lists, so the two name one spec."""
    return None if scaling is None or scaling == head_dim ** -0.5 else scaling


def _attention_scaling(fam, config, head_dim):
    """The `scaling` an attention of `fam` built from `config` passes its
    attention function: its modeling code's, head_dim ** -0.5 or
    fam.scaling's config attribute to its power (Granite's
    attention_multiplier, the Gemmas' query_pre_attn_scalar ** -0.5)."""
    if fam.scaling is None:
        return head_dim ** -0.5
    name, power = fam.scaling
    value = getattr(config, name)
    return value if power == 1 else value ** power


def _attention_window(config):
    """The sliding window of the layers of a model of `config` that have
    one (Hugging Face's `sliding_window` where its `layer_types` name
    sliding layers, or, without layer types, Mistral's on every layer), or
    None."""
    window = getattr(config, "sliding_window", None)
    types = getattr(config, "layer_types", None)
    if not window or (types is not None and "sliding_attention" not in types):
        return None
    return window


def _attention_spec(fam, config, heads, kv, head_dim, dtype, target, window=None):
    """The liger.ops.attention spec a model of `fam` and `config` patched
    with attention=True calls while training (the queries and keys of one
    length, autograd recording), or None where the template does not take
    that call on `target` (specs.attention_unsupported, with the backward:
    liger.ops.attention runs PyTorch there). Causal as the modeling code's
    attention is (the Gemmas' use_bidirectional_attention turns it off),
    softcapped where the config says (Gemma 2's attn_logit_softcapping)."""
    if specs.attention_unsupported(target, dtype, head_dim, True):
        return None
    causal = not getattr(config, "use_bidirectional_attention", None)
    try:  # (a configuration the spec refuses, liger.ops.attention refuses too)
        return ops.attention_spec(heads, kv, head_dim, dtype, causal,
                                  _attention_scale(_attention_scaling(fam, config, head_dim),
                                                   head_dim), window if causal else None,
                                  getattr(config, "attn_logit_softcapping", None),
                                  target=target)
    except LigerError:
        return None


def _attention_forward(module, query, key, value, attention_mask, dropout=0.0, scaling=None,
                       is_causal=None, **kwargs):
    """Hugging Face's attention function of attn_implementation="liger":
    sdpa_attention_forward's meaning (query [B, Hq, T, D], key and value
    [B, Hkv, S, D] -> ([B, T, Hq, D], None)) by liger.ops.attention where
    it can take the call: no mask (a causal batch without padding: SDPA's
    mask function makes none) or a sliding window's, no dropout, sinks or
    position bias, a configuration liger.ops has kernels for (_fallback);
    a softcap (Gemma 2's) is the op's. Otherwise Hugging Face's SDPA
    function, or with a softcap (which that function refuses) the module's
    own eager attention (_eager_forward), warned once per reason. As
    Hugging Face's SDPA: causal where the module is and there is more than
    one query; a static cache's empty keys past the queries (a causal
    prefill) cut."""
    what = type(module).__name__
    softcap = kwargs.pop("softcap", None)
    instead = "%s (attention=True)" % (
        "its eager attention (a softcap)" if softcap else "PyTorch's SDPA")
    problem = None
    window = None
    extra = [name for name in ("s_aux", "sinks", "position_bias")
             if kwargs.get(name) is not None]
    if dropout:
        problem = "attention dropout %r: liger.ops.attention has none" % dropout
    elif extra:
        problem = "%s: liger.ops.attention has none" % _names(extra)
    elif attention_mask is not None:
        window = _sliding_window(attention_mask, kwargs.get("sliding_window"), query, key)
        if window is None:
            problem = "an attention mask (padding, packed sequences): liger.ops.attention " \
                "takes a causal mask, with or without a sliding window, or none"
    if problem is None:
        t = query.shape[2]
        causal = _causal_call(module, is_causal, t)
        if causal and key.shape[2] > t:
            key, value = key[:, :, :t], value[:, :, :t]
        d = query.shape[-1]
        scale = _attention_scale(scaling, d)
        if not _fallback(what, "attention", (query.shape[1], key.shape[1], d, str(query.dtype),
                                             causal, scale, window, softcap),
                         (("query", str(query.device)), ("key", str(key.device)),
                          ("value", str(value.device))), instead):
            out = ops.attention(query, key, value, causal=causal, scale=scale, window=window,
                                softcap=softcap)
            return out.transpose(1, 2).contiguous(), None
    else:
        _warn_once("%s runs %s: %s" % (what, instead, problem))
    if softcap:
        return _eager_forward(module, query, key, value, attention_mask, dropout, scaling,
                              is_causal, softcap=softcap, **kwargs)
    return _SDPA_FORWARD[0](module, query, key, value, attention_mask, dropout=dropout,
                            scaling=scaling, is_causal=is_causal, **kwargs)


def _causal_call(module, is_causal, queries):
    """Whether an attention call is causal as Hugging Face's SDPA function
    decides it: the call's is_causal, else the module's, and more than one
    query."""
    causal = getattr(module, "is_causal", True) if is_causal is None else is_causal
    return bool(queries > 1 and causal)


def _eager_forward(module, query, key, value, attention_mask, dropout, scaling, is_causal,
                   **kwargs):
    """A call Hugging Face's SDPA function does not take (a softcap: it
    refuses one) by the module's own eager attention (its modeling code's
    eager_attention_forward, what attn_implementation="eager" runs: the
    softcap, sinks and the rest as the model computes them), with
    Hugging Face's boolean SDPA mask made additive (0 where attended, the
    dtype's lowest number elsewhere) and, where there is none, the causal
    mask SDPA's is_causal would apply (top-left, where the module is causal
    and there is more than one query)."""
    eager = getattr(sys.modules.get(type(module).__module__), "eager_attention_forward", None)
    if eager is None:
        raise LigerError("attention=True: %s needs its eager attention for this call (a "
                         "softcap, which SDPA does not take), and its modeling module %s has "
                         "no eager_attention_forward" % (type(module).__name__,
                                                         type(module).__module__))
    t, s = query.shape[2], key.shape[2]
    keep = attention_mask
    if keep is None and _causal_call(module, is_causal, t):
        keep = torch.ones(t, s, dtype=torch.bool, device=query.device).tril()
    if keep is not None and keep.dtype == torch.bool:
        keep = torch.zeros(keep.shape, dtype=query.dtype, device=query.device).masked_fill(
            ~keep, torch.finfo(query.dtype).min)
    return eager(module, query, key, value, keep, dropout=dropout, scaling=scaling, **kwargs)


# The last mask _sliding_window found to be a window's (a weak reference:
# Hugging Face builds one a forward and hands it to every sliding layer).
_WINDOW_MASK = [None]


def _sliding_window(mask, window, query, key):
    """`window` where `mask` (Hugging Face's boolean SDPA mask [B, 1, T, S],
    True: attended) is exactly the causal mask with that sliding window over
    the call's queries and keys of one length (a batch without padding:
    operators.attention_mask's, the rule liger.attention follows), else
    None. Checked once a mask (every sliding layer of a forward gets the
    same one); not while torch.compile traces (data-dependent)."""
    t = query.shape[2]
    if not window or isinstance(window, bool) or not isinstance(window, int) or \
            not isinstance(mask, torch.Tensor) or mask.dtype != torch.bool or \
            mask.dim() != 4 or key.shape[2] != t or tuple(mask.shape[-2:]) != (t, t) or \
            torch.compiler.is_compiling():
        return None
    seen = _WINDOW_MASK[0]
    if seen is None or seen[0]() is not mask or seen[1] != (mask._version, window):
        keep = operators.attention_mask(t, t, True, window, mask.device)
        if keep is None or not torch.equal(mask, keep.expand(mask.shape)):
            return None
        _WINDOW_MASK[0] = (weakref.ref(mask), (mask._version, window))
    return window


def _shifted_labels(labels, kwargs):
    """The next-token targets as Hugging Face's causal LM loss forms them
    (labels shifted left, -100 last), or the caller's `shift_labels`."""
    import torch.nn.functional as F
    shift = kwargs.pop("shift_labels", None)
    if shift is None:
        shift = F.pad(labels, (0, 1), value=-100)[..., 1:]
    return shift.reshape(-1)


def _causal_lm_forward(self, *args, **kwargs):
    original = self._liger_original_forward
    mode = getattr(self, "_liger_loss", None)
    labels = kwargs.get("labels")
    if args or labels is None or mode is None:
        return original(self, *args, **kwargs)
    family = _FAMILIES[self._liger_family]
    what = type(self).__name__ + "'s loss"
    num_items = kwargs.get("num_items_in_batch")
    reduction = "mean" if num_items is None else "sum"
    if mode == "cross_entropy":
        # The logits as the model returns them: scaled (Granite) and
        # softcapped (Gemma 2 and 3) already.
        out = original(self, **dict(kwargs, labels=None))
        logits = out.logits
        shift = _shifted_labels(labels, dict(kwargs))
        if _fallback(what, "cross_entropy", (logits.shape[-1], str(logits.dtype),
                                             str(shift.dtype), -100, 0.0, reduction),
                     (("logits", str(logits.device)), ("labels", str(shift.device)))):
            return original(self, **kwargs)
        loss = ops.cross_entropy(logits.reshape(-1, logits.shape[-1]), shift,
                                 reduction=reduction)
        if num_items is not None:
            loss = loss / num_items
        aux = out.get("aux_loss") if family.router_aux_loss else None
        if aux is not None:  # (the router's loss, added as the model adds it)
            loss = loss + self.router_aux_loss_coef * aux.to(loss.device)
        return type(out)(**dict(out.items(), loss=loss))
    # fused_linear_cross_entropy: while training, the loss without logits
    # (an lm_head bias added to them, with its gradient).
    head = self.lm_head
    if not (self.training and torch.is_grad_enabled()) or not hasattr(head, "weight"):
        return original(self, **kwargs)
    w, bias = head.weight, getattr(head, "bias", None)
    problem = ops.lm_head_bias_problem(bias, w)
    if problem:
        _warn_once("%s runs its original forward: %s" % (what, problem[1]))
        return original(self, **kwargs)
    softcap = getattr(self.config, "final_logit_softcapping", None)
    devices = (("lm_head.weight", str(w.device)), ("labels", str(labels.device))) + (
        (("lm_head.bias", str(bias.device)),) if bias is not None else ())
    # Decided before the decoder runs (the hidden states take the lm_head's
    # dtype and device in a model of one dtype on one device). The spec's
    # arguments after the softcap: lse_square_scale, weighted, dw_f32, bias.
    if _fallback(what, "fused_linear_cross_entropy",
                 (w.shape[0], w.shape[1], str(w.dtype), str(labels.dtype),
                  -100, 0.0, reduction, softcap, 0.0, False, False, bias is not None), devices):
        return original(self, **kwargs)
    kw = dict(kwargs)
    kw.pop("labels")
    kw.pop("logits_to_keep", None)
    shift = _shifted_labels(labels, kw)
    router = None
    if family.router_aux_loss:
        router = kw.get("output_router_logits")
        router = kw["output_router_logits"] = \
            self.config.output_router_logits if router is None else router
    outputs = self.model(**kw)
    hidden = outputs[0]
    if hidden.dtype != w.dtype or hidden.device != w.device:
        # (Computed again as the model does: the decoder ran for nothing.)
        _warn_once("%s: hidden states in %s on %s and lm_head in %s on %s: the loss is "
                   "computed as the model does (liger's fused linear cross-entropy takes both "
                   "in bf16 or f16, on one device)" % (what, hidden.dtype, hidden.device,
                                                       w.dtype, w.device))
        return original(self, **kwargs)
    if family.logits_scaling:
        # The model's logits (h · Wᵀ + b) / s, as (h / s) · Wᵀ + b / s.
        hidden = hidden / self.config.logits_scaling
        bias = bias / self.config.logits_scaling if bias is not None else None
    budget = getattr(self, "_liger_loss_budget", None)
    loss = ops.fused_linear_cross_entropy(
        hidden, w, shift, reduction=reduction, softcap=softcap, bias=bias,
        **({} if budget is None else dict(memory_budget=budget)))
    if num_items is not None:
        loss = loss / num_items
    output = self._liger_output
    fields = {k: getattr(outputs, k) for k in output.__dataclass_fields__
              if k not in ("loss", "logits") and getattr(outputs, k, None) is not None}
    if router:
        fields["aux_loss"] = self._liger_router_loss(
            outputs.router_logits, self.num_experts, self.num_experts_per_tok,
            kw.get("attention_mask"))
        loss = loss + self.router_aux_loss_coef * fields["aux_loss"].to(loss.device)
    return output(loss=loss, logits=None, **fields)


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


def _classes(family):
    """The family's modeling module and {name: class} of every class its
    entry names (_Family: norms, MLPs, causal LM, the classes that stay;
    "nn.LayerNorm" a path in the module), or a LigerError naming what the
    installed transformers lacks."""
    import transformers
    fam = _FAMILIES[family]
    entry = "apply_liger_kernel_to_%s" % fam.name
    try:
        mod = _modeling(family)
    except ImportError as e:
        raise LigerError("%s: transformers %s has no %s model (%s)"
                         % (entry, transformers.__version__, family, e)) from None
    names = fam.norms + tuple(n for n, _ in fam.mlps) + (fam.causal_lm,) + tuple(
        path for _, path, _ in fam.stays) + fam.layer_norms
    classes, missing = {}, []
    for path in names:
        value = mod
        for name in path.split("."):
            value = getattr(value, name, None)
        if value is None:
            missing.append(path)
        classes[path] = value
    # The methods a kind of MLP patches besides its forward (the experts'
    # _apply_gate, which Hugging Face's experts implementations call).
    missing += ["%s.%s" % (name, attr) for name, kind in fam.mlps if classes[name] is not None
                for attr, _ in _MLP_PATCHES[kind]
                if attr != "forward" and not hasattr(classes[name], attr)]
    if missing:
        raise LigerError("%s: transformers %s's %s has no %s (liger patches the classes of "
                         "transformers 5)" % (entry, transformers.__version__, mod.__name__,
                                              _names(missing)))
    return mod, classes


def _names(names):
    names = list(names)
    return ", ".join(names[:-1]) + " or " + names[-1] if len(names) > 1 else names[0]


def _apply(family, flags):
    """Patches `family` as its entry point's `flags` (a dict of every flag)
    say: the classes, or flags["model"]'s modules."""
    fam = _FAMILIES[family]
    model = flags["model"]
    if flags["cross_entropy"] and flags["fused_linear_cross_entropy"]:
        raise ValueError("cross_entropy and fused_linear_cross_entropy cannot both be True "
                         "(the fused loss replaces the plain one)")
    mod, classes = _classes(family)
    if not _ACTIVATION_TYPES:
        from transformers.activations import ACT2FN
        _ACTIVATION_TYPES.extend((type(ACT2FN[name]), name)
                                 for names in _ACTIVATIONS.values() for name in names)
    loss = "fused_linear_cross_entropy" if flags["fused_linear_cross_entropy"] else \
        "cross_entropy" if flags["cross_entropy"] else None
    lm_cls = classes[fam.causal_lm]
    parts = [(flags["rms_norm"], classes[name], (("forward", _rms_norm_forward),))
             for name in fam.norms]
    one_kernel = flags["fused_mlp"]
    parts += [(flags[fam.gate] or (one_kernel and kind in _ONE_KERNEL_MLP_PATCHES),
               classes[name],
               _ONE_KERNEL_MLP_PATCHES[kind] if one_kernel and kind in _ONE_KERNEL_MLP_PATCHES
               else _MLP_PATCHES[kind]) for name, kind in fam.mlps]
    parts.append((loss, lm_cls, (("forward", _causal_lm_forward),)))
    if flags["fuse_qkv_rope"]:
        parts += _qk_rope_parts(fam)
    # LayerNorm (nn.LayerNorm: PyTorch's own class) on a model's modules
    # alone, as Liger-Kernel patches them: a class patch would change every
    # LayerNorm of the process.
    layer_norm = flags.get("layer_norm", False) and fam.layer_norms
    if layer_norm and model is not None:
        parts += [(True, classes[path], (("forward", _layer_norm_forward),))
                  for path in fam.layer_norms]
    parts = [(cls, patches) for flag, cls, patches in parts if flag]
    targets = []
    if model is not None:
        targets = [(m, cls, patches) for m in model.modules() for cls, patches in parts
                   if isinstance(m, cls) and _takes_rewrite(m, cls, patches)]
        lora_layers = _lora_layers(model) if flags["lora"] else []
        if flags["lora"] and not lora_layers:
            _warn_once("lora=True: %s has no PEFT LoRA Linear on %s: nothing to patch" % (
                type(model).__name__, _names(_LORA_PROJECTIONS)))
        targets += [(m, type(m), (("forward", _lora_forward),)) for m in lora_layers]
        if not targets and parts:
            raise LigerError("apply_liger_kernel_to_%s: %s has no %s module to patch (is it a "
                             "%s model?)" % (fam.name, type(model).__name__, _names(
                                 fam.norms + tuple(n for n, _ in fam.mlps) + (fam.causal_lm,)),
                                 family))
    if flags["rope"] and fam.rope:
        _warn_once("rope=True: %s: the model's RoPE stays as it is" % fam.rope)
    experts = [name for name, kind in fam.mlps if kind not in _ONE_KERNEL_MLP_PATCHES]
    if one_kernel and experts and flags[fam.gate] and (model is None or any(
            isinstance(m, classes[name]) for m in model.modules() for name in experts)):
        _warn_once("fused_mlp=True: %s run liger.ops.%s in each expert (liger.ops.gated_mlp "
                   "computes one dense MLP)" % (_names(experts), fam.gate))
    for flag, path, why in fam.stays:
        cls = classes[path]
        if flags[flag] and (model is None or any(isinstance(m, cls) for m in model.modules())):
            _warn_once("%s=True: %s stays as it is: %s" % (flag, path, why))
    if flags["lora"] and model is None:
        _warn_once("lora=True: PEFT's LoRA layers stay as they are in a class patch (they are "
                   "PEFT's classes, not the family's): give the model (model=...) to patch them")
    if flags["fuse_norm_linear"] and model is None:
        _warn_once("fuse_norm_linear=True: a class patch cannot tie a norm to the projections "
                   "of its layer: give the model (model=...) to fuse them")
    if layer_norm and model is None:
        _warn_once("layer_norm=True: %s stays as it is in a class patch (it is PyTorch's, "
                   "for every model): give the model (model=...) to patch its LayerNorms"
                   % _names(fam.layer_norms))
    if flags["rope"] and not fam.rope:
        _patch(mod, "apply_rotary_pos_emb", _rope_function(family))
    if flags["attention"]:
        _register_attention()
        if model is None:
            _warn_once('attention=True: a class patch cannot choose the attention of models '
                       'built afterwards: build them with attn_implementation="%s" (registered '
                       'now), or patch a model (model=...)' % ATTENTION_IMPLEMENTATION)
        else:
            model.set_attn_implementation(ATTENTION_IMPLEMENTATION)
    # What the loss reads besides the family: its output class (found here:
    # torch.compile cannot trace the import of transformers' lazy module),
    # the fused loss's chunk budget, the model's router loss.
    loss_attrs = {}
    if loss:
        from transformers import modeling_outputs
        loss_attrs["_liger_output"] = getattr(modeling_outputs, fam.output)
    if loss and flags["loss_memory_budget"] is not None:
        loss_attrs["_liger_loss_budget"] = int(flags["loss_memory_budget"])
    if loss and fam.router_aux_loss:
        loss_attrs["_liger_router_loss"] = staticmethod(mod.load_balancing_loss_func)
    if model is None:
        for cls, patches in parts:
            _patch(cls, "_liger_family", family)
            for attr, fn in patches:
                if attr == "forward":
                    _patch_forward(cls, fn)
                else:
                    _patch(cls, attr, fn)
        if loss:
            _patch(lm_cls, "_liger_loss", loss)
            for name, value in loss_attrs.items():
                _patch(lm_cls, name, value)
        return None
    if flags["fuse_norm_linear"]:  # (after rms_norm's: a tied norm's forward is its own)
        targets += _norm_linear_targets(model, fam, tuple(classes[n] for n in fam.norms), flags)
    for m, cls, patches in targets:
        m._liger_family = family
        if cls is lm_cls:
            m._liger_loss = loss
            for name, value in loss_attrs.items():
                setattr(m, name, value.__func__ if isinstance(value, staticmethod) else value)
        for attr, fn in patches:
            if attr == "forward":
                m._liger_original_forward = _original(cls, "forward")
            setattr(m, attr, types.MethodType(fn, m))
    return len({id(m) for m, _, _ in targets})


# Liger-Kernel's flags, in its order, with its defaults ("gate": the
# family's swiglu or geglu); a family's own (_Family.flags) change a default
# or follow `model`, and liger's come last.
_FLAGS = (("rope", True), ("cross_entropy", False), ("fused_linear_cross_entropy", True),
          ("rms_norm", True), ("gate", True), ("model", None))
_LIGER_FLAGS = (("lora", False), ("fuse_norm_linear", False), ("fuse_qkv_rope", False),
                ("fused_mlp", False), ("loss_memory_budget", None), ("attention", False))


def _entry_point(family):
    """apply_liger_kernel_to_<name>: a function of the family's flags (the
    signature Liger-Kernel's has, liger's flags after them) over _apply."""
    fam = _FAMILIES[family]
    own = dict(fam.flags)
    params = [(fam.gate if name == "gate" else name, default) for name, default in _FLAGS]
    params = [(name, own.pop(name, default)) for name, default in params]
    params += list(own.items()) + list(_LIGER_FLAGS)
    signature = inspect.Signature([
        inspect.Parameter(name, inspect.Parameter.POSITIONAL_OR_KEYWORD, default=default)
        for name, default in params])

    def apply(*args, **kwargs):
        bound = signature.bind(*args, **kwargs)
        bound.apply_defaults()
        return _apply(family, bound.arguments)

    apply.__name__ = apply.__qualname__ = "apply_liger_kernel_to_" + fam.name
    apply.__signature__ = signature
    apply.__doc__ = (
        "Patches %s (model_type %r) with liger's kernels: the classes, before a model is "
        "built, or `model`'s modules (a PEFT model's base too). Returns the count of "
        "modules patched on a model, None for a class patch. RMSNorm: %s; %s: %s; the "
        "loss: %s. docs/transformers.md has what each flag patches."
        % (fam.causal_lm, family, ", ".join(fam.norms), fam.gate,
           ", ".join(name for name, _ in fam.mlps), fam.causal_lm))
    return apply


_APPLY = {family: _entry_point(family) for family in _FAMILIES}
apply_liger_kernel_to_llama = _APPLY["llama"]
apply_liger_kernel_to_mistral = _APPLY["mistral"]
apply_liger_kernel_to_qwen2 = _APPLY["qwen2"]
apply_liger_kernel_to_qwen3 = _APPLY["qwen3"]
apply_liger_kernel_to_gemma = _APPLY["gemma"]
apply_liger_kernel_to_gemma2 = _APPLY["gemma2"]
apply_liger_kernel_to_gemma3_text = _APPLY["gemma3_text"]
apply_liger_kernel_to_phi3 = _APPLY["phi3"]
apply_liger_kernel_to_granite = _APPLY["granite"]
apply_liger_kernel_to_olmo2 = _APPLY["olmo2"]
apply_liger_kernel_to_glm4 = _APPLY["glm4"]
apply_liger_kernel_to_smollm3 = _APPLY["smollm3"]
apply_liger_kernel_to_mixtral = _APPLY["mixtral"]
apply_liger_kernel_to_qwen3_moe = _APPLY["qwen3_moe"]
apply_liger_kernel_to_llama4 = _APPLY["llama4_text"]


def _model_type(config):
    family = getattr(config, "model_type", None)
    if family not in _FAMILIES:
        raise LigerError("liger.transformers patches %s, not model_type %r"
                         % (", ".join(sorted(_FAMILIES)), family))
    return family


def apply_liger_kernel(model, **flags):
    """Patches `model` by its config's model_type (PEFT models: their base)."""
    return _APPLY[_model_type(model.config)](model=model, **flags)


def _rotary_fraction(config):
    """The part of the head the config's RoPE rotates (partial_rotary_factor)."""
    params = getattr(config, "rope_parameters", None)
    params = params if isinstance(params, dict) else {}
    return params.get("partial_rotary_factor", getattr(config, "partial_rotary_factor", None)
                      or 1.0)


def kernel_specs(config, dtype=None, fused_mlp=False, target=None, fuse_qkv_rope=False,
                 attention=False):
    """The liger.ops specs a patched model of `config` calls (training, with
    the fused linear cross-entropy, mean and summed losses; `fused_mlp`:
    patched with fused_mlp=True, its MLPs' kernels where `target`, sm_90a
    by default, takes them; `fuse_qkv_rope`: patched with fuse_qkv_rope=True,
    its q/k projections' kernels where the installed transformers' attention
    takes the rewrite, with and without biases where the config does not
    say, the backward's RoPE kernels among the rope specs; `attention`:
    patched with attention=True, the liger.ops.attention spec of its
    training call (causal, the config's heads, the family's scaling: the
    op's default where it is head_dim ** -0.5, the config's
    attn_logit_softcapping) where the attention template takes its forward
    and backward on `target`): what `precompile`
    compiles for a machine without the compiler. Reads the config's
    attributes alone (an object with them will do; with `attention`, the
    family's scaling attribute too, Granite's attention_multiplier or the
    Gemmas' query_pre_attn_scalar, and attn_logit_softcapping where the
    model softcaps: Gemma 2's config class holds it by default, an object
    must say it)."""
    family = _model_type(config)
    fam = _FAMILIES[family]
    dt = dtype or getattr(config, "dtype", None) or getattr(config, "torch_dtype", None) \
        or "f32"
    dt = {"bfloat16": "bf16", "float16": "f16", "float32": "f32"}.get(
        str(dt).replace("torch.", ""), dt)
    h, vocab = config.hidden_size, config.vocab_size
    heads = config.num_attention_heads
    kv = getattr(config, "num_key_value_heads", None) or heads
    head_dim = getattr(config, "head_dim", None) or h // heads
    norms = [h] + {"head": [head_dim], "proj": [heads * head_dim, kv * head_dim]}.get(
        fam.qk_norms, [])
    specs = [ops.rms_norm_spec(n, dt, dt, config.rms_norm_eps, fam.offset, fam.casting)
             for n in norms]
    # The gated op of the config's activation (the family's own where it
    # names none; another falls back).
    act = getattr(config, "hidden_activation", None) or getattr(config, "hidden_act", None) \
        or next(iter(_ACTIVATIONS[fam.gate]))
    attrs = _ACTIVATIONS[fam.gate].get(act)
    if attrs is not None:
        specs += [getattr(ops, fam.gate + "_spec")(getattr(config, name), dt, *attrs)
                  for name in fam.gated_sizes if getattr(config, name, None)]
    if attrs is not None and fused_mlp and any(
            kind in _ONE_KERNEL_MLP_PATCHES for _, kind in fam.mlps):
        for name in fam.dense_sizes or fam.gated_sizes:
            try:  # (a configuration gated_mlp refuses runs the gated op: listed above)
                specs.append(ops.gated_mlp_spec(config.hidden_size, getattr(config, name), dt,
                                                fam.gate, *attrs,
                                                target=target or ops.TARGET))
            except (LigerError, TypeError, AttributeError):
                pass
    if not fam.rope and _rotary_fraction(config) == 1.0 and fam.rope_tables in (None, dt):
        specs += [ops.rope_spec(heads, kv, head_dim, dt, batch) for batch in (True, False)]
        bias = getattr(config, "attention_bias", None)
        fused = fuse_qkv_rope and _qk_rope_attention(fam)[1] is not None
        for with_bias in ((False, True) if bias is None else (bool(bias),)):
            for batch in ((True, False) if fused else ()):
                try:  # (a configuration linear_rope refuses runs apart: listed above)
                    specs.append(ops.linear_rope_spec(h, heads, kv, head_dim, dt, with_bias,
                                                      batch, target=target or ops.TARGET))
                except LigerError:
                    pass
    # Attention: causal, and with the sliding window where layers have one
    # (a batch longer than it; a shorter one is causal alone).
    for window in ((None, _attention_window(config)) if attention else ()):
        attn = _attention_spec(fam, config, heads, kv, head_dim, dt, target or ops.TARGET,
                               window)
        specs += [attn] if attn and (window is None or attn.window) else []
    softcap = getattr(config, "final_logit_softcapping", None)
    # The losses, mean and summed: the fused linear cross-entropy (bf16 and
    # f16) and cross-entropy on the logits (cross_entropy=True).
    fused = dt != "f32" and not ops.fused_linear_cross_entropy_unsupported_shape(vocab, h)
    for r in ("mean", "sum"):
        if fused:
            specs.append(ops.fused_linear_cross_entropy_spec(vocab, h, dt, "i64", reduction=r,
                                                             softcap=softcap))
        specs.append(ops.cross_entropy_spec(vocab, dt, "i64", reduction=r))
    return list(dict.fromkeys(specs))


def lora_kernel_specs(model, target=None):
    """The liger.ops specs of the LoRA kernels a PEFT model patched with
    lora=True calls: one per configuration (shape, rank, scale, bias,
    dtype) of its LoRA layers that liger can run, those whose configuration
    the kernel refuses left out (they run PEFT's forward). Reads the
    layers' weights' shapes and dtypes alone: a model on the meta device
    will do."""
    out = []
    for layer in _lora_layers(model):
        base = layer.base_layer
        probe = torch.empty(0, dtype=base.weight.dtype, device="meta")
        refused, name = _lora_problem(layer, probe, (), {})
        if refused:
            continue
        w, a = base.weight, layer.lora_A[name].weight
        try:
            out.append(ops.lora_linear_spec(w.shape[1], w.shape[0], a.shape[0], w.dtype,
                                            layer.scaling[name], base.bias is not None,
                                            target=target or ops.TARGET))
        except LigerError:
            continue
    return list(dict.fromkeys(out))


def precompile(out_dir, config, dtype=None, target=None, fused_mlp=False, fuse_qkv_rope=False,
               attention=False):
    """Compiles the kernels a patched model of `config` calls into `out_dir`
    for `target` (the GPU's: sm_90a by default; liger.specs.CAPABILITIES;
    needs liger-compile); point LIGER_OPS_BUNDLES at it where the model
    trains. `fused_mlp`, `fuse_qkv_rope`, `attention`: those of a model
    patched with fused_mlp=True, fuse_qkv_rope=True or attention=True too.
    Returns the bundle paths."""
    return ops.precompile(out_dir, kernel_specs(config, dtype, fused_mlp, target, fuse_qkv_rope,
                                                attention), target)


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
    pre.add_argument("--fused-mlp", action="store_true",
                     help="also the kernels of a model patched with fused_mlp=True")
    pre.add_argument("--fuse-qkv-rope", action="store_true",
                     help="also the kernels of a model patched with fuse_qkv_rope=True")
    pre.add_argument("--attention", action="store_true",
                     help="also the kernels of a model patched with attention=True")
    ops.add_precompile_targets(pre)
    args = ap.parse_args(argv)
    try:
        from transformers import AutoConfig
    except ImportError:
        print("liger.transformers: needs the transformers package", file=sys.stderr)
        return 1
    try:
        for path in args.configs:
            config = AutoConfig.from_pretrained(path)
            for target in args.targets:
                for bundle in precompile(args.dir, config, args.dtype, target, args.fused_mlp,
                                         args.fuse_qkv_rope, args.attention):
                    print("%s (%s) -> %s" % (path, target, bundle))
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
