"""Saved activations a backward graph may overwrite.

AOTAutograd hands the backward graph the tensors the forward saved; those
not aliased with anything the caller holds are "donated" (AOTAutograd's
bw_donated_idxs: the backward may reuse their memory, and AOTAutograd
refuses a second backward through them, retain_graph). Inductor reuses a
donated buffer for the output of a kernel it generates, never for the
output of an operator it calls. So where a gated activation's backward,
liger::swiglu_backward(dy, gate, up) (or geglu_backward), is the last user
of a donated gate and a donated up (the activation recomputed from them may
come before), `reuse_saved_inputs` puts in its place
liger::swiglu_backward_, which writes dgate over gate and dup over up:
two [tokens, intermediate] tensors less at the backward's peak, which is
there, at the last layer's MLP (measured on the H200, Llama-3-8B widths:
0.44 GiB; Liger-Kernel's SwiGLU backward writes its gradients over its
inputs the same way). Anything else is left as it is.
"""

import operator
from typing import List

import torch

# op -> its in-place form; each takes (dy, gate, up, *attributes) and
# returns (dgate, dup).
_IN_PLACE = {
    "swiglu_backward": "swiglu_backward_",
    "geglu_backward": "geglu_backward_",
}


def donated_inputs() -> List[int]:
    """The indices of the backward graph's donated inputs, when AOTAutograd
    is compiling one (none otherwise, or where this torch does not say)."""
    try:
        from torch._inductor.utils import get_donated_idxs
        return list(get_donated_idxs() or ())
    except Exception:  # a torch without donated buffers: nothing is reused
        return []


def _gradients(node):
    """The getitem nodes taking node's two results, or None where a result
    is used otherwise (a tuple passed on whole)."""
    taken = {}
    for user in node.users:
        if user.target is not operator.getitem or user.args[1] not in (0, 1) \
                or user.args[1] in taken:
            return None
        taken[user.args[1]] = user
    return taken


def _last_use(node, value, order) -> bool:
    """Whether `node` is the last reader of `value` in the graph's order
    (the order Inductor keeps between a buffer's readers and a write to
    it): the recomputed activation of the backward reads gate and up before
    their gradient does."""
    return all(order[user] < order[node] for user in value.users if user is not node)


def reuse_saved_inputs(gm: torch.fx.GraphModule, donated: List[int]) -> List[str]:
    """Rewrites each gated backward whose gate and up are donated inputs of
    `gm` it reads last into its in-place form (above); returns one line
    per rewrite, for the report."""
    placeholders = [n for n in gm.graph.nodes if n.op == "placeholder"]
    order = {n: i for i, n in enumerate(gm.graph.nodes)}
    donated_nodes = {placeholders[i] for i in donated if 0 <= i < len(placeholders)}
    lines = []
    for node in list(gm.graph.nodes):
        if node.op != "call_function" or not isinstance(node.target, torch._ops.OpOverload):
            continue
        op = node.target._opname if node.target.namespace == "liger" else None
        if op not in _IN_PLACE:
            continue
        dy, gate, up = node.args[:3]
        taken = _gradients(node)
        if (taken is None or gate is up or dy in (gate, up) or gate not in donated_nodes
                or up not in donated_nodes or not _last_use(node, gate, order)
                or not _last_use(node, up, order)):
            continue
        with gm.graph.inserting_before(node):
            gm.graph.call_function(getattr(torch.ops.liger, _IN_PLACE[op]).default,
                                   tuple(node.args), dict(node.kwargs))
        for index, saved in ((0, gate), (1, up)):
            if index in taken:
                taken[index].replace_all_uses_with(saved)
                gm.graph.erase_node(taken[index])
        gm.graph.erase_node(node)
        lines.append("liger.%s writes its gradients over its saved %s and %s"
                     % (op, gate.name, up.name))
    if lines:
        gm.graph.lint()
        gm.recompile()
    return lines
