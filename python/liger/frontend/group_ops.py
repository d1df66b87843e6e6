"""The PyTorch operators the torch.compile backend adds to liger.operators'.

    liger::lora_linear(x, weight, bias?, lora_a, lora_b, scale) -> y
    liger::fusion_group(unit, inputs) -> outputs
    liger::embedding_dense_backward(grad, indices, num_weights, padding_idx,
                                    scale_grad_by_freq) -> grad_weight

`lora_linear` is PEFT's LoRA projection, `x·Wᵀ + b + (x·Aᵀ)·Bᵀ · scale`,
computed by the same PyTorch ops in the same order as PEFT's layer (so a
call is numerically the layer it replaces), with its backward in PyTorch
ops (matrix products the backend imports as liger.linear_grad_input and
liger.linear_grad_weight). The backend puts it where it recognised a PEFT
LoRA layer, so that the forward graph holds `liger.lora_linear`, which
liger-fuse-lora fuses with what follows.

`embedding_dense_backward` is PyTorch's own kernel of that aten op behind
an operator Inductor cannot decompose: the backend's decomposition table
maps the aten op to it (backend.KEPT_OPS), because Inductor's decomposition
accumulates a bf16/f16 embedding's gradient in an f32 [vocab, hidden]
buffer (1.96 GiB at Llama-3-8B's vocabulary) where the kernel writes the
weight's dtype directly.

`fusion_group` runs one fusion group the backend compiled (a `Unit`,
registered by its key): its kernels on the GPU, its reference function on
CPU tensors. The key names the unit's module text and compile options, so
a graph that names a key always runs the unit that key was made from. Its
fake implementation gives each output's shape from the inputs' (the unit's
shape rules), so Inductor compiles the graphs around it.

TODO: these belong in liger.operators beside the other operators, once the
unit runner has moved into the package's lower layers.
"""

from typing import Dict, List, Optional

import torch
import torch.nn.functional as F
from torch import Tensor

_UNITS: Dict[str, object] = {}


def register_unit(unit) -> str:
    """Makes `unit` (with `.key`, `.run(inputs)`, `.outputs_like(inputs)`)
    callable as liger::fusion_group(unit.key, inputs); returns the key."""
    _UNITS.setdefault(unit.key, unit)
    return unit.key


def unit(key: str):
    """The unit registered under `key`."""
    try:
        return _UNITS[key]
    except KeyError:
        raise KeyError("liger::fusion_group: no unit %r in this process (a graph compiled by "
                       "another process? the backend compiles its graphs itself)" % key) from None


@torch.library.custom_op("liger::fusion_group", mutates_args=())
def fusion_group(key: str, inputs: List[Tensor]) -> List[Tensor]:
    return list(unit(key).run(inputs))


@fusion_group.register_fake
def _(key, inputs):
    return list(unit(key).outputs_like(inputs))


# --- LoRA ---------------------------------------------------------------------

@torch.library.custom_op("liger::lora_linear", mutates_args=())
def lora_linear(x: Tensor, weight: Tensor, bias: Optional[Tensor], lora_a: Tensor,
                lora_b: Tensor, scale: float) -> Tensor:
    # PEFT's order: the base layer, then the adapter's product scaled.
    return F.linear(x, weight, bias) + F.linear(F.linear(x, lora_a), lora_b) * scale


@lora_linear.register_fake
def _(x, weight, bias, lora_a, lora_b, scale):
    return x.new_empty(x.shape[:-1] + (weight.shape[0],))


def _lora_setup(ctx, inputs, output):
    x, weight, bias, lora_a, lora_b, scale = inputs
    ctx.save_for_backward(x, weight, lora_a, lora_b)
    ctx.scale = scale
    ctx.has_bias = bias is not None


def _rows(t):
    return t.reshape(-1, t.shape[-1])


def _lora_grad(ctx, dy):
    x, weight, lora_a, lora_b = ctx.saved_tensors
    need = ctx.needs_input_grad
    # The scale rides on the rank-r products, never on a [tokens, out] pass.
    dmid = dy.matmul(lora_b) * ctx.scale   # the gradient of x·Aᵀ: [..., r]
    dx = dy.matmul(weight) + dmid.matmul(lora_a) if need[0] else None
    dw = _rows(dy).t().matmul(_rows(x)) if need[1] else None
    db = _rows(dy).sum(0) if ctx.has_bias and need[2] else None
    da = _rows(dmid).t().matmul(_rows(x)) if need[3] else None
    # x·Aᵀ recomputed: [..., r]
    dlb = _rows(dy).t().matmul(_rows(F.linear(x, lora_a))) * ctx.scale if need[4] else None
    return dx, dw, db, da, dlb, None


lora_linear.register_autograd(_lora_grad, setup_context=_lora_setup)


# --- PyTorch's embedding backward, kept whole ----------------------------------

@torch.library.custom_op("liger::embedding_dense_backward", mutates_args=())
def embedding_dense_backward(grad: Tensor, indices: Tensor, num_weights: int,
                             padding_idx: int, scale_grad_by_freq: bool) -> Tensor:
    return torch.ops.aten.embedding_dense_backward.default(
        grad, indices, num_weights, padding_idx, scale_grad_by_freq)


@embedding_dense_backward.register_fake
def _(grad, indices, num_weights, padding_idx, scale_grad_by_freq):
    return grad.new_empty((num_weights, grad.shape[-1]))
