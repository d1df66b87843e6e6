"""The PyTorch operators the torch.compile backend adds to liger.operators'.

    liger::fusion_group(unit, inputs) -> outputs
    liger::embedding_dense_backward(grad, indices, num_weights, padding_idx,
                                    scale_grad_by_freq) -> grad_weight

(PEFT's LoRA projection, which the backend puts where it recognised a PEFT
LoRA layer, is liger.operators' `lora_linear`.)

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

from typing import Dict, List

import torch
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


# --- PyTorch's embedding backward, kept whole ----------------------------------

@torch.library.custom_op("liger::embedding_dense_backward", mutates_args=())
def embedding_dense_backward(grad: Tensor, indices: Tensor, num_weights: int,
                             padding_idx: int, scale_grad_by_freq: bool) -> Tensor:
    return torch.ops.aten.embedding_dense_backward.default(
        grad, indices, num_weights, padding_idx, scale_grad_by_freq)


@embedding_dense_backward.register_fake
def _(grad, indices, num_weights, padding_idx, scale_grad_by_freq):
    return grad.new_empty((num_weights, grad.shape[-1]))
