"""Causal masks made explicit by a trace -> `is_causal=True`.

Hugging Face models build their attention mask in Python. Run eagerly with
no padding, they pass SDPA no mask and `is_causal=True`; traced (dynamo,
torch.export), they cannot look at the padding mask's values, so they build
the [B, 1, T, T] mask as tensor ops (aranges, comparisons, the packed-
sequence test over position ids) and pass it with `is_causal=False`. SDPA
then runs masked, non-causal attention: its fused kernels cannot skip the
blocks above the diagonal (on the H200, cuDNN's backward of a Llama-3-8B
layer at 4 x 2048 tokens takes 2.8x the causal one's time).

`causal_masks` finds each SDPA call whose mask is computed from the graph's
sizes alone (no tensor input of the graph among its ancestors: no padding
mask, no position ids given by the caller), evaluates that subgraph, and
where it is the causal mask of the call's equal q and k lengths, drops the
mask and sets `is_causal=True`: the same attention, one kernel's work.
Evaluated where: at the traced sizes (the graph is specialised to them, or
guarded on them when they are static) and, where the graph takes its sizes
as symbolic inputs, at a set of small probe sizes too, so that a mask
causal only at the traced sizes is left alone. A mask larger than
`MAX_ELEMENTS` at the traced sizes is left alone (said in the report).
"""

from dataclasses import dataclass
from typing import List, Optional

import torch

from . import graph as G
from .graph import aten

# The largest mask evaluated (elements at the traced sizes; a bool each).
MAX_ELEMENTS = 2 ** 28
# The sizes a symbolic size input takes besides its traced value.
PROBE_SIZES = (1, 2, 3, 5, 8, 13)
PATTERN = "recognise-causal-mask"


@dataclass
class MaskLine:
    node: object
    rewritten: bool
    reason: str = ""

    def __str__(self) -> str:
        if self.rewritten:
            return "[%s] causal mask -> is_causal at %s" % (PATTERN, G.where(self.node))
        return "[%s] left alone %s at %s: %s" % (PATTERN, self.node.name, G.where(self.node),
                                                 self.reason)


def _ancestors(node):
    """Every node `node` is computed from, in graph order, and itself."""
    seen, stack = set(), [node]
    while stack:
        n = stack.pop()
        if n in seen:
            continue
        seen.add(n)
        stack.extend(n.all_input_nodes)
    order = {n: i for i, n in enumerate(node.graph.nodes)}
    return sorted(seen, key=order.__getitem__)


def _on_cpu(value):
    """`value` with every device in it replaced by the CPU (the mask is
    evaluated here, whatever device the graph runs on)."""
    if isinstance(value, torch.device):
        return torch.device("cpu")
    if isinstance(value, (list, tuple)):
        return type(value)(_on_cpu(v) for v in value)
    if isinstance(value, dict):
        return {k: _on_cpu(v) for k, v in value.items()}
    return value


def _mask_function(gm, mask):
    """(a GraphModule computing `mask` from the graph's size inputs, those
    inputs, the traced value of each), or the reason there is none."""
    nodes = _ancestors(mask)
    sizes = []
    for n in nodes:
        if n.op == "placeholder":
            value = G.val(n)
            if not isinstance(value, (int, torch.SymInt)):
                return "the mask is computed from the graph input %s" % n.name
            sizes.append(n)
        elif n.op not in ("call_function", "get_attr"):
            return "the mask is computed by a %s node (%s)" % (n.op, n.name)
    sub = torch.fx.Graph()
    env = {}
    for n in nodes:
        if n.op == "placeholder":
            env[n] = sub.placeholder(n.name)
        else:
            env[n] = sub.node_copy(n, lambda x: env[x])
            env[n].args, env[n].kwargs = _on_cpu(env[n].args), _on_cpu(env[n].kwargs)
    sub.output(env[mask])
    traced = []
    for n in sizes:
        value = G.val(n)
        if isinstance(value, torch.SymInt):
            hint = value.node.hint
            if hint is None:
                return "the traced value of size %s is unknown" % n.name
            value = int(hint)
        traced.append(value)
    root = gm if isinstance(gm, torch.nn.Module) else torch.nn.Module()
    return torch.fx.GraphModule(root, sub), sizes, traced


def _is_causal(mask, rows: int) -> bool:
    """`mask` ([..., T, T] broadcast over the leading dims: bool, True where
    attended; or additive floats, 0 there and -inf or the dtype's lowest
    elsewhere) is the causal mask of T = `rows`."""
    if not isinstance(mask, torch.Tensor) or mask.dim() < 2 or mask.shape[-2:] != (rows, rows):
        return False
    causal = torch.ones(rows, rows, dtype=torch.bool).tril_()
    if mask.dtype == torch.bool:
        return bool((mask == causal).all())
    if not mask.is_floating_point():
        return False
    lowest = torch.finfo(mask.dtype).min
    attended = mask == 0
    masked = (mask == float("-inf")) | (mask == lowest)
    return bool((attended == causal).all() and (masked == ~causal).all())


def _verdict(gm, mask, t) -> Optional[str]:
    """None when `mask` is the causal mask of q length `t` (a size of the
    graph), at the traced sizes and the probe sizes; else why not."""
    made = _mask_function(gm, mask)
    if isinstance(made, str):
        return made
    fn, size_inputs, traced = made
    mask_shape = G.shape(mask)
    rows = int(t.node.hint) if isinstance(t, torch.SymInt) else int(t)
    elements = 1
    for s in mask_shape:
        elements *= int(s.node.hint) if isinstance(s, torch.SymInt) else int(s)
    if elements > MAX_ELEMENTS:
        return "the mask has %d elements at the traced sizes (evaluated up to %d)" % (
            elements, MAX_ELEMENTS)
    # The traced sizes, then (sizes given as inputs) each probe size in
    # place of every size input, and each size input through the probe
    # sizes with the others at 3: the mask must be causal at its q length
    # each time.
    cases = [traced]
    if traced:
        cases += [[p] * len(traced) for p in PROBE_SIZES]
        if len(traced) > 1:
            cases += [[p if j == i else 3 for j in range(len(traced))]
                      for i in range(len(traced)) for p in PROBE_SIZES]
    q_size = G.size_expr(t)
    for values in cases:
        try:
            with torch.no_grad():
                value = fn(*values)
        except Exception as e:  # an op that needs the graph's device or state
            return "the mask could not be evaluated: %s: %s" % (
                type(e).__name__, str(e).splitlines()[0] if str(e) else "")
        if values is traced:
            length = rows
        else:
            symbols = {G.size_expr(G.val(n)): v for n, v in zip(size_inputs, values)}
            try:
                length = int(q_size.subs(symbols))
            except (TypeError, ValueError):
                return "the q length %s is not a function of the size inputs" % q_size
        if not _is_causal(value, length):
            return "the mask is not causal" + ("" if values is traced else
                                               " at probe sizes %s" % values)
    return None


def _rewrite(gm, node, verdicts) -> Optional[str]:
    """Makes `node` (an SDPA call with a mask) causal without the mask;
    None when done, else why it was left alone."""
    q, k = G.strip(node.args[0]), G.strip(node.args[1])
    if G.rank(q) != 4 or G.rank(k) != 4:
        return "q or k is not [B, H, T, D]"
    if not G.same_dim(G.shape(q)[-2], G.shape(k)[-2]):
        return "q and k have different lengths (a mask aligned to the end of the keys)"
    if G.arg(node, 5, "is_causal", False):
        return "the call is causal and masked"
    mask = G.arg(node, 3, "attn_mask")
    t = G.shape(q)[-2]
    key = (mask, str(G.size_expr(t)))
    if key not in verdicts:  # a mask every layer shares is evaluated once
        verdicts[key] = _verdict(gm, mask, t)
    if verdicts[key] is not None:
        return verdicts[key]
    args = list(node.args)
    kwargs = dict(node.kwargs)
    if len(args) > 3:
        args[3] = None
    else:
        kwargs["attn_mask"] = None
    if len(args) > 5:
        args[5] = True
    else:
        kwargs["is_causal"] = True
    node.args, node.kwargs = tuple(args), kwargs
    return None


def causal_verdict(gm, mask, t) -> Optional[str]:
    """None when `mask` (a node of `gm`; bool, or additive: 0 where
    attended) is the causal mask of q length `t` computed from the graph's
    sizes alone, at the traced sizes and the probe sizes; else why not.
    The rule recognise-causal-mask applies to SDPA's masks, for the masks
    an eager attention adds to its scores."""
    return _verdict(gm, mask, t)


def causal_masks(gm) -> List[MaskLine]:
    """Rewrites, in place, every SDPA call of `gm` (an aten FX graph module)
    whose mask is its causal mask computed from sizes; one report line per
    masked call. A mask's subgraph goes with the last call that read it."""
    graph = getattr(gm, "graph", gm)
    lines, dropped, verdicts = [], [], {}
    for node in list(graph.nodes):
        if not G.is_op(node, aten.scaled_dot_product_attention.default):
            continue
        mask = G.arg(node, 3, "attn_mask")
        if mask is None:
            continue
        reason = _rewrite(gm, node, verdicts)
        lines.append(MaskLine(node, reason is None, reason or ""))
        if reason is None:
            dropped.append(mask)
    # The masks' subgraphs, where nothing else reads them (the nodes only:
    # the rest of the graph is left as it is).
    G.erase_unread(graph, dropped)
    if dropped and isinstance(gm, torch.fx.GraphModule):
        gm.recompile()
    return lines
