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
    # A copy: autograd may hand back views of buffers it reuses (SDPA's backward).
    value = value.detach().cpu().clone().contiguous()
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


class _Retaining(torch.fx.Interpreter):
    """Runs a graph keeping every value and the gradient that reaches it."""

    def run_node(self, n):
        out = super().run_node(n)
        if isinstance(out, torch.Tensor) and out.requires_grad and not out.is_leaf:
            out.retain_grad()
        return out


def compare_backward(capture, backward, seed: int = 0, rtol: float = None) -> List[Comparison]:
    """Runs every backward function on the CPU and checks it against autograd.

    The objective is a random weighting of the graph's outputs. Each
    backward function gets the forward values, the gradients autograd gives
    the forward results (and, after a cut, the gradients of the cut op's
    operands, which only the cut op may read);
    partial sums are carried from the previous function's results. Every
    complete gradient it returns is compared with autograd's.
    """
    gm = capture.graph_module
    values = capture.placeholder_values()
    args = []
    for n in gm.graph.nodes:
        if n.op == "placeholder":
            v = values[n.name].detach().clone()
            if v.is_floating_point():
                v.requires_grad_(True)
            args.append(v)
    interpreter = _Retaining(gm, garbage_collect_values=False)
    outputs = interpreter.run(*args)
    env = interpreter.env
    generator = torch.Generator().manual_seed(seed)
    objective = sum((o * torch.randn(o.shape, generator=generator, dtype=o.dtype)).sum()
                    for o in outputs if isinstance(o, torch.Tensor) and o.requires_grad)
    objective.backward()
    # Copied at once: autograd may hand back views of buffers it reuses.
    grads = {node: value.grad.detach().clone() for node, value in env.items()
             if isinstance(value, torch.Tensor) and value.grad is not None}

    def grad_of(node):
        return grads[node]

    carried: Dict[str, object] = {}
    out: List[Comparison] = []
    for function in backward.functions:
        f = function.forward
        inputs = []
        for kind, ssa, detail in function.arguments:
            node = f.values[ssa]
            if kind == "value":
                inputs.append(to_numpy(env[node]))
            elif kind == "grad":
                inputs.append(to_numpy(grad_of(node)))
            elif kind == "partial":
                inputs.append(carried.pop(ssa))
            else:  # the gradient through a cut op: the operand's, when the op alone reads it
                readers = G.users(node)
                if [u.name for u in readers] != [f.values[detail].name]:
                    raise AssertionError("%s is read by more than the cut op %s"
                                         % (ssa, detail))
                inputs.append(to_numpy(grad_of(node)))
        results = reference.run_cpu(backward.mlir, function.name, inputs)
        for (kind, ssa), got in zip(function.results, results):
            if kind == "partial":
                carried[ssa] = got
                continue
            want = grad_of(f.values[ssa]).detach().float().numpy()
            dtype = _TOLERANCE.get(G.dtype(f.values[ssa]), "f32")
            err = reference.assert_close(got, want, dtype, "%s: d%s" % (function.name, ssa),
                                         rtol=rtol)
            out.append(Comparison(function.name, ssa, err))
    return out
