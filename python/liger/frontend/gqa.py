"""Repeated key/value heads -> `enable_gqa=True`.

Hugging Face's SDPA attention gives a model with fewer key/value heads than
query heads (grouped-query attention) to SDPA as it is, with
`enable_gqa=True`, when it has no mask; with a mask it first repeats each
key/value head Hq/Hkv times (`repeat_kv`: unsqueeze, expand, reshape). A
trace passes the mask (masks.py), so the traced call reads repeated k and
v, copies Hq/Hkv times the size of the originals, and the backward keeps
them: on Llama-3-8B's widths (32/8 heads), 96 MiB more per layer at 8192
tokens than the eager model keeps.

`grouped_kv` runs after recognise-causal-mask has dropped the mask: each
SDPA call with no mask whose k and v are both repeats, by the same factor,
of [B, Hkv, S, D] tensors reads those tensors instead, with
`enable_gqa=True` (query head h reads key/value head h / (Hq/Hkv), as the
repeat made it), and the repeats are dropped. It is the call the eager
model makes. Left alone, with the reason in the report: a call with a mask
(SDPA's fused kernels take grouped heads only without one), head
dimensions SDPA's fused kernels do not take grouped (k's and v's differ,
or above `MAX_HEAD_DIM`), k and v repeated by different factors.
"""

from dataclasses import dataclass
from typing import List, Optional, Tuple

import torch

from . import graph as G
from .graph import aten

PATTERN = "recognise-grouped-kv"
# Hugging Face's bound for the fused kernels' grouped heads
# (transformers.integrations.sdpa_attention.use_gqa_in_sdpa).
MAX_HEAD_DIM = 256


@dataclass
class GroupLine:
    node: object
    repeats: int
    rewritten: bool
    reason: str = ""

    def __str__(self) -> str:
        if self.rewritten:
            return "[%s] k/v heads repeated %dx -> enable_gqa at %s" % (
                PATTERN, self.repeats, G.where(self.node))
        return "[%s] left alone %s at %s: %s" % (PATTERN, self.node.name, G.where(self.node),
                                                 self.reason)


def supported() -> bool:
    """This torch's SDPA takes `enable_gqa` (2.5 and later)."""
    return any(a.name == "enable_gqa" for a in
               aten.scaled_dot_product_attention.default._schema.arguments)


def repeated(node) -> Optional[Tuple[object, int]]:
    """(x, n) when `node` is `x` ([B, H, S, D]) with each head repeated n
    times in place (x[:, :, None].expand(B, H, n, S, D).reshape(B, H*n, S, D)),
    else None."""
    if not G.is_op(node, aten.reshape.default, aten.view.default, aten._unsafe_view.default):
        return None
    expand = G.strip(node.args[0])
    if not G.is_op(expand, aten.expand.default):
        return None
    unsqueeze = G.strip(expand.args[0])
    if not G.is_op(unsqueeze, aten.unsqueeze.default) or unsqueeze.args[1] not in (2, -3):
        return None
    x = G.strip(unsqueeze.args[0])
    if not G.is_tensor(x) or G.rank(x) != 4:
        return None
    b, h, s, d = G.shape(x)
    wide = G.shape(expand)
    n = wide[2] if len(wide) == 5 else None
    if not (isinstance(n, int) and n > 1):
        return None
    if not all(G.same_dim(p, q) for p, q in zip(wide, (b, h, n, s, d))):
        return None
    out = G.shape(node)
    if len(out) != 4 or not all(G.same_dim(p, q) for p, q in zip(out, (b, h * n, s, d))):
        return None
    return x, n


def unrepeated(k, v):
    """(k, v, the repeats' nodes: reshape, expand, unsqueeze of each) with
    k and v each repeated per query head in place (`repeated`) as their
    originals, or (k, v, []) where neither is repeated; the reason where
    they are not repeated alike. (liger.attention's grouped heads read the
    originals.)"""
    k_src, v_src = repeated(k), repeated(v)
    if (k_src is None) != (v_src is None) or (k_src and k_src[1] != v_src[1]):
        return "k and v are not repeated alike"
    if k_src is None:
        return k, v, []
    nodes = []
    for rep in (k, v):
        expand = G.strip(rep.args[0])
        nodes += [rep, expand, G.strip(expand.args[0])]
    return k_src[0], v_src[0], nodes


def _reason(node, k, v) -> Optional[str]:
    if G.arg(node, 3, "attn_mask") is not None:
        return "the call has a mask (SDPA's fused kernels take grouped heads only without one)"
    if k[1] != v[1]:
        return "k and v are repeated %dx and %dx" % (k[1], v[1])
    dk, dv = G.shape(k[0])[-1], G.shape(v[0])[-1]
    if not (G.is_static(dk) and G.is_static(dv) and dk == dv and dk <= MAX_HEAD_DIM):
        return ("head dimensions k %s, v %s (SDPA's fused kernels take grouped heads of "
                "equal head dimensions up to %d)" % (dk, dv, MAX_HEAD_DIM))
    return None


def grouped_kv(gm) -> List[GroupLine]:
    """Rewrites, in place, every SDPA call of `gm` (an aten FX graph module)
    that reads repeated k and v heads into a grouped-query call on the
    unrepeated ones; one report line per call that reads them."""
    graph = getattr(gm, "graph", gm)
    if not supported():
        return []
    lines, dropped = [], []
    for node in list(graph.nodes):
        if not G.is_op(node, aten.scaled_dot_product_attention.default):
            continue
        if node.kwargs.get("enable_gqa", False):
            continue
        k, v = repeated(G.strip(node.args[1])), repeated(G.strip(node.args[2]))
        if k is None or v is None:
            continue
        reason = _reason(node, k, v)
        lines.append(GroupLine(node, k[1], reason is None, reason or ""))
        if reason is not None:
            continue
        dropped += [node.args[1], node.args[2]]
        node.args = (node.args[0], k[0], v[0]) + tuple(node.args[3:])
        node.kwargs = dict(node.kwargs, enable_gqa=True)
    # The repeats, where nothing else reads them.
    G.erase_unread(graph, dropped)
    if dropped and isinstance(gm, torch.fx.GraphModule):
        gm.recompile()
    return lines
