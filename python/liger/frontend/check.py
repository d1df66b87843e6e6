"""Runs an imported module on the CPU reference and compares it with PyTorch.

The captured graph is run by PyTorch (an FX interpreter that keeps every
node's value); each function of the imported module is then run by
`liger.reference.run_cpu` (liger-lower-to-linalg, the LLVM JIT) on the
values PyTorch gave its arguments, and each of its results is compared with
the value PyTorch computed for that node. This is how the frontend proves
that what it recognised is numerically the op it names.
"""

from dataclasses import dataclass
from typing import Dict, List

import numpy as np
import torch

from .. import reference
from . import graph as G


@dataclass
class Comparison:
    function: str
    node: str
    error: float


def graph_values(capture) -> Dict[object, torch.Tensor]:
    """Every node of the captured graph -> the value PyTorch computes for it."""
    gm = capture.graph_module
    values = capture.placeholder_values()
    args = [values[n.name] for n in gm.graph.nodes if n.op == "placeholder"]
    interpreter = torch.fx.Interpreter(gm, garbage_collect_values=False)
    with torch.no_grad():
        interpreter.run(*args)
    return dict(interpreter.env)


def to_numpy(value: torch.Tensor):
    """A torch tensor as run_cpu takes it (bf16 as a BF16 of its bit patterns)."""
    value = value.detach().contiguous().cpu()
    if value.dtype == torch.bfloat16:
        return reference.BF16(value.view(torch.int16).numpy().view(np.uint16))
    return value.numpy()


_TOLERANCE = {torch.float32: "f32", torch.float16: "f16", torch.bfloat16: "bf16"}


def compare(capture, imported, rtol: float = None) -> List[Comparison]:
    """Runs every function of `imported` on the CPU and checks it against PyTorch.

    Raises AssertionError naming the function and node that differ beyond
    the tolerance of their dtype (or `rtol`); returns the errors measured.
    """
    values = graph_values(capture)
    out: List[Comparison] = []
    for function in imported.functions:
        args = [to_numpy(values[a]) for a in function.arguments]
        results = reference.run_cpu(imported.mlir, function.name, args)
        for node, got in zip(function.results, results):
            want = values[node].detach().float().numpy()
            dtype = _TOLERANCE.get(G.dtype(node), "f32")
            err = reference.assert_close(got, want, dtype, "%s: %s" % (function.name, node.name),
                                         rtol=rtol)
            out.append(Comparison(function.name, node.name, err))
    return out
