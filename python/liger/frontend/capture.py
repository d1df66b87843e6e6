"""Capture: a Hugging Face config -> aten graphs of one decoder layer and the loss.

The model is built from its config with random weights (no download; on
the meta device when only the graph is wanted, so a Llama-3-8B config costs
no memory) and cut to one decoder layer. Two graphs are captured with
`torch.export` (its training IR: aten ops before autograd, with each value's
shape and dtype):

- the decoder layer: `layer(hidden_states, position_embeddings=(cos, sin))`
  with no mask (SDPA's causal attention), or, for a family whose attention
  cannot run through SDPA (Gemma2's logit softcapping), eager attention
  with the additive causal mask as an input;
- the head: the final norm, the lm_head and the family's own loss
  (`model.loss_function`, with Gemma2's final logit softcapping), run by the
  model's own forward on given hidden states and already shifted labels.

Why torch.export: Hugging Face keeps its decoders exportable (it tests that),
its training IR is a documented, versioned contract (aten ops, functional),
and at the aten level the spellings that change between transformers
versions (how RoPE or the attention interface is written, `x.pow(2)` behind
a helper, a tuple or a tensor returned) are gone. The batch and sequence
sizes are traced symbolically (`torch.export.Dim`), so the token dimensions
of the imported module are dynamic.
"""

import copy
import json
import os
from dataclasses import dataclass, field
from typing import Dict, Optional, Sequence, Tuple

import torch

DTYPES = {"f32": torch.float32, "bf16": torch.bfloat16, "f16": torch.float16}
_CONFIG_DTYPES = {"float32": "f32", "bfloat16": "bf16", "float16": "f16"}


class CaptureError(RuntimeError):
    """The model could not be built or captured (the message says why)."""


@dataclass
class Capture:
    """One captured graph with its inputs and parameters.

    program: the torch.export ExportedProgram; inputs: user input name ->
    example tensor (in the graph's placeholder order); parameters:
    placeholder name -> the parameter's tensor; argument_names: parameter
    placeholder name -> the name its function argument gets in the module
    (its path in the module, e.g. `self_attn_q_proj_weight`).
    """

    name: str
    program: object
    inputs: Dict[str, torch.Tensor]
    parameters: Dict[str, torch.Tensor] = field(default_factory=dict)
    argument_names: Dict[str, str] = field(default_factory=dict)

    @property
    def graph_module(self):
        return self.program.graph_module

    def placeholder_values(self) -> Dict[str, torch.Tensor]:
        """Placeholder name -> value: the parameters and the example inputs."""
        values = dict(self.parameters)
        user = [s for s in self.program.graph_signature.input_specs if s.kind.name == "USER_INPUT"]
        for spec, tensor in zip(user, self.inputs.values()):
            values[spec.arg.name] = tensor
        return values


def load_config(path: str):
    """A transformers config from a config.json file or a model directory (no download)."""
    if os.path.isdir(path):
        path = os.path.join(path, "config.json")
    if not os.path.isfile(path):
        raise CaptureError("no config at %s (give a config.json or a directory holding one)" % path)
    try:
        with open(path) as f:
            fields = json.load(f)
    except (OSError, ValueError) as e:
        raise CaptureError("cannot read %s: %s" % (path, e)) from e
    return load_fields(fields, path)


def load_fields(fields, where: str = "the config"):
    """A transformers config from the fields of a config.json (a dict)."""
    from transformers import AutoConfig
    if not isinstance(fields, dict) or "model_type" not in fields:
        raise CaptureError("%s has no model_type: not a Hugging Face config.json" % where)
    fields = dict(fields)
    model_type = fields.pop("model_type")
    try:
        return AutoConfig.for_model(model_type, **fields)
    except (ValueError, KeyError) as e:
        raise CaptureError("%s: transformers does not know model_type %r (%s)"
                           % (where, model_type, e)) from e


def config_dtype(config) -> str:
    """'bf16', 'f16' or 'f32': the dtype the config names (f32 when it names none)."""
    named = getattr(config, "dtype", None) or getattr(config, "torch_dtype", None)
    name = str(named).replace("torch.", "") if named is not None else "float32"
    return _CONFIG_DTYPES.get(name, "f32")


def attention_implementation(config) -> str:
    """SDPA (causal, no mask) where the family's attention allows it, else eager."""
    if getattr(config, "attn_logit_softcapping", None):
        return "eager"
    return "sdpa"


def build_model(config, dtype: str = "f32", device: str = "cpu", seed: int = 0,
                layers: int = 1):
    """The causal LM of `config` with `layers` decoder layers and random weights."""
    from transformers import AutoModelForCausalLM
    config = copy.deepcopy(config)
    config.num_hidden_layers = layers
    types = getattr(config, "layer_types", None)
    if isinstance(types, (list, tuple)) and len(types) > layers:
        config.layer_types = list(types[:layers])
    torch.manual_seed(seed)
    try:
        with torch.device(device):
            model = AutoModelForCausalLM.from_config(
                config, attn_implementation=attention_implementation(config))
    except Exception as e:  # transformers raises many kinds for a bad config
        raise CaptureError("cannot build %s from its config: %s"
                           % (getattr(config, "model_type", "the model"), e)) from e
    return model.to(DTYPES[dtype]).eval()


def _dims(tokens: Optional[Tuple[int, int]]):
    from torch.export import Dim
    if tokens is not None:
        return None, None
    return Dim("batch", min=1), Dim("seq", min=2)


def _names(program, prefix: str) -> Dict[str, str]:
    out = {}
    for spec in program.graph_signature.input_specs:
        if spec.target:
            target = spec.target[len(prefix):] if spec.target.startswith(prefix) else spec.target
            out[spec.arg.name] = target.replace(".", "_")
    return out


def _parameters(program) -> Dict[str, torch.Tensor]:
    out = {}
    for spec in program.graph_signature.input_specs:
        if spec.target and spec.target in program.state_dict:
            out[spec.arg.name] = program.state_dict[spec.target]
        elif spec.target and spec.target in getattr(program, "constants", {}):
            out[spec.arg.name] = program.constants[spec.target]
    return out


def _export(module, args: Sequence[torch.Tensor], dynamic, what: str):
    from torch.export import export
    try:
        return export(module, tuple(args), dynamic_shapes=dynamic)
    except Exception as e:  # export reports unsupported code with many exception kinds
        raise CaptureError("torch.export could not capture %s: %s" % (what, e)) from e


class _Layer(torch.nn.Module):
    def __init__(self, layer):
        super().__init__()
        self.layer = layer

    def forward(self, hidden_states, cos, sin, attention_mask=None):
        out = self.layer(hidden_states, attention_mask=attention_mask,
                         position_embeddings=(cos, sin))
        return out[0] if isinstance(out, tuple) else out


def capture_decoder_layer(model, tokens: Optional[Tuple[int, int]] = None,
                          example: Tuple[int, int] = (2, 8)) -> Capture:
    """Captures decoder layer 0 of `model` on hidden states [B, T, hidden].

    tokens: (B, T) for static token sizes; None: batch and sequence dynamic
    (traced at `example`).
    """
    config = model.config
    base = getattr(model, model.base_model_prefix)
    b, t = tokens or example
    dt = next(model.parameters()).dtype
    device = next(model.parameters()).device
    x = torch.randn(b, t, config.hidden_size, dtype=dt, device=device)
    positions = torch.arange(t, device=device)[None].expand(b, t)
    with torch.no_grad():
        cos, sin = base.rotary_emb(x, positions)
    inputs = {"hidden_states": x, "cos": cos.contiguous(), "sin": sin.contiguous()}
    batch, seq = _dims(tokens)
    dynamic = None if batch is None else [{0: batch, 1: seq}] * 3
    if attention_implementation(config) == "eager":
        mask = torch.full((t, t), float("-inf"), device=device).triu(1)
        inputs["attention_mask"] = mask.to(dt)[None, None].expand(b, 1, t, t).contiguous()
        if dynamic is not None:
            dynamic = dynamic + [{0: batch, 2: seq, 3: seq}]
    name = "%s_decoder_layer" % config.model_type
    program = _export(_Layer(base.layers[0]), list(inputs.values()), dynamic,
                      "the decoder layer of %s" % config.model_type)
    return Capture(name, program, inputs, _parameters(program), _names(program, "layer."))


class _Head(torch.nn.Module):
    """Stands in for the base model: the final norm of given hidden states."""

    def __init__(self, norm):
        super().__init__()
        from transformers.modeling_outputs import BaseModelOutputWithPast
        self.norm = norm
        # Found here, not in forward: a tracer may not import transformers'
        # lazy modules.
        self._output = BaseModelOutputWithPast

    def forward(self, input_ids=None, inputs_embeds=None, **kwargs):
        return self._output(last_hidden_state=self.norm(inputs_embeds))


class _Loss(torch.nn.Module):
    def __init__(self, model):
        super().__init__()
        self.model = model

    def forward(self, hidden_states, labels):
        return self.model(inputs_embeds=hidden_states, labels=labels, shift_labels=labels).loss


# The names Hugging Face gives the base model's final norm.
FINAL_NORMS = ("norm", "final_layernorm", "final_layer_norm", "ln_f")


def _final_norm(base, config):
    for name in FINAL_NORMS:
        norm = getattr(base, name, None)
        if isinstance(norm, torch.nn.Module):
            return norm
    raise CaptureError("the base model of %s has no final norm named %s: its lm_head and loss "
                     "cannot be captured" % (config.model_type, " or ".join(FINAL_NORMS)))


def capture_lm_head_loss(model, tokens: Optional[Tuple[int, int]] = None,
                         example: Tuple[int, int] = (2, 8)) -> Capture:
    """Captures the final norm, the lm_head and the loss on hidden states and labels.

    The model's own forward runs with its base model replaced by the final
    norm, so the family's head code (a logit softcap) and loss function are
    what is captured. The labels are already shifted (`shift_labels`).
    """
    config = model.config
    prefix = model.base_model_prefix
    base = getattr(model, prefix)
    b, t = tokens or example
    dt = next(model.parameters()).dtype
    device = next(model.parameters()).device
    inputs = {"hidden_states": torch.randn(b, t, config.hidden_size, dtype=dt, device=device),
              "labels": torch.randint(0, config.vocab_size, (b, t), device=device)}
    batch, seq = _dims(tokens)
    dynamic = None if batch is None else [{0: batch, 1: seq}] * 2
    setattr(model, prefix, _Head(_final_norm(base, config)))
    try:
        program = _export(_Loss(model), list(inputs.values()), dynamic,
                          "the lm_head and loss of %s" % config.model_type)
    finally:
        setattr(model, prefix, base)
    names = _names(program, "model.")
    names = {k: v.replace("%s_" % prefix, "", 1) if v.startswith(prefix + "_") else v
             for k, v in names.items()}
    return Capture("%s_lm_head_loss" % config.model_type, program, inputs, _parameters(program),
                   names)
