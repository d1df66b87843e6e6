"""Recognition: torch subgraphs of unpatched models -> liger op records.

Each pattern is written like a fusion pass (lib/Transforms/FuseAddRMSNorm.cpp):
a matcher anchored on one kind of node, a policy and a report. A matcher
returns a `Record` when the subgraph computes exactly what the liger op
computes, a `Miss` (with the reason) when it looks like the op but is not
numerically the same (the variance of an RMSNorm taken in bf16, a RoPE in
another convention, a cast in another place), and None when the node is not
the pattern's at all. Every hit and every near-miss gives one report line:

    [recognise-rms-norm] recognised liger.rms_norm (eps = 1e-05) at layers.0.input_layernorm
    [recognise-rms-norm] left alone rsqrt at norm: the variance is computed in bf16; liger.rms_norm computes it in f32

"Numerically the same" means the formula and the precision of every
reduction are the op's (docs/Reference/Semantics.md): the liger op computes
in f32 and rounds once, so it may round intermediates of an elementwise
chain fewer times than an eager bf16 graph does (as every fused kernel
does); it never reduces in a lower precision or rounds where the torch
graph does not.

The policy (`Policy`, default: accept) sees each record before it is kept,
as a fusion pass's control callback does: True keeps it; False, or a string
saying why, refuses it (and the report says so), and a record that names an
`alternative` (the loss on the logits for the lm_head + loss) offers that
one next.
"""

import operator
from dataclasses import dataclass, field
from typing import Callable, Dict, List, Optional, Sequence, Set, Union

import sympy
import torch

from . import gqa, masks
from . import graph as G
from . import liger_operators
from .graph import aten
from .records import Record


@dataclass
class Miss:
    """A near-miss: the node looked like the pattern, and why it was left."""

    reason: str


@dataclass
class Line:
    pattern: str
    node: object
    record: Optional[Record] = None
    reason: str = ""

    def __str__(self) -> str:
        if self.record is not None:
            return "[%s] recognised %s at %s" % (self.pattern, self.record.describe(),
                                                 G.where(self.node))
        return "[%s] left alone %s at %s: %s" % (self.pattern, self.node.name,
                                                 G.where(self.node), self.reason)


# True keeps a record; False or a reason (a string) refuses it.
Policy = Callable[[Record], Union[bool, str]]


@dataclass
class Recognition:
    """The records of one graph and the report of how they were found
    (`dynamic`: the reasons of those left for sizes that are dynamic where
    liger's ops take static ones)."""

    records: List[Record] = field(default_factory=list)
    report: List[Line] = field(default_factory=list)
    dynamic: List[str] = field(default_factory=list)

    def lines(self) -> List[str]:
        return [str(line) for line in self.report]

    def by_node(self) -> Dict[object, Record]:
        """Every node a record covers -> that record."""
        return {n: r for r in self.records for n in r.covered}


def _dtype_word(dt) -> str:
    return G.DTYPES.get(dt, str(dt))


def _interior_leak(nodes: Set[object], outputs: Sequence[object]) -> Optional[str]:
    """A node of the subgraph, other than its outputs, read from outside it."""
    for node in nodes:
        if G.strip(node) in outputs:
            continue
        for user in G.users(node):
            if user not in nodes:
                return "its intermediate %s is also read by %s" % (node.name, user.name)
    return None


# Operands whose every size is static; of the others the last (the hidden
# size) is, and of RoPE's q and k also the heads; a loss's target, a norm's
# rstd and mean and the attention's lse have only token dimensions (and
# heads).
_WEIGHTS = ("weight", "lora_a", "lora_b", "bias", "class_weight")
_TOKENS = ("target", "rstd", "mean", "lse")


def _dynamic_sizes(record: Record) -> Optional[str]:
    """Why a record cannot be a liger op because of sizes dynamic where the op
    takes static ones (torch.compile makes a size dynamic once it changes),
    or None."""
    found = []
    for role, node in record.operands.items():
        if node is None or isinstance(node, tuple) or role in _TOKENS or not G.is_tensor(node) \
                or G.rank(node) == 0:
            continue
        r = G.rank(node)
        dims = range(r) if role in _WEIGHTS else \
            [r - 1] + ([1] if record.op == "rope" and role in ("q", "k") else [])
        found += ["%s's size %s" % (role, G.shape(node)[d]) for d in dims
                  if not G.is_static(G.shape(node)[d])]
    if not found:
        return None
    return "%s %s dynamic: liger's ops take static hidden sizes (torch.compile made %s dynamic; " \
           "mark %s static or compile with dynamic=False)" % (
               ", ".join(found), "is" if len(found) == 1 else "are",
               "it" if len(found) == 1 else "them", "it" if len(found) == 1 else "them")


def _covered(*nodes) -> Set[object]:
    """The nodes with the identities and assertions that hang off them."""
    out: Set[object] = set()
    for node in nodes:
        out.add(node)
        out.update(G.identity_chain(node))
    return out


# --- RMSNorm ----------------------------------------------------------------

def _upcast_source(node):
    """(x, X) where `node` is x exactly extended to f32 (or x itself in f32)."""
    cast = G.cast_of(node)
    if cast is not None:
        source, before, after = cast
        if after == torch.float32 and before in G.FLOATS:
            return G.strip(source), before
    return node, G.dtype(node)


def match_rms_norm(rsqrt) -> Optional[object]:
    """HF's RMSNorm: x.float(); x * rsqrt(mean(x^2, -1) + eps); then the weight.

    Anchored on the rsqrt. The weight multiply decides the casting mode:
    LlamaRMSNorm rounds the normalised value to the input dtype and then
    multiplies by the weight in that dtype (`llama`); Gemma multiplies by
    `1 + w` in f32 and rounds once (`gemma`, offset 1); OLMo2 multiplies by
    w in f32 and rounds once (`gemma`, offset 0).
    """
    if not G.is_op(rsqrt, aten.rsqrt.default):
        return None
    added = G.binary(G.strip(rsqrt.args[0]), aten.add.Tensor, aten.add.Scalar)
    if added is None:
        return None
    eps = G.scalar(added[1])
    mean = G.strip(added[0])
    if eps is None or not G.is_op(mean, aten.mean.dim):
        return None
    dims, keepdim = G.arg(mean, 1, "dim"), G.arg(mean, 2, "keepdim", False)
    square = G.strip(mean.args[0])
    if G.is_op(square, aten.pow.Tensor_Scalar) and square.args[1] == 2:
        xf = G.strip(square.args[0])
    elif G.is_op(square, aten.mul.Tensor) and G.strip(square.args[0]) is G.strip(square.args[1]):
        xf = G.strip(square.args[0])
    else:
        return None
    r = G.rank(xf)
    if list(dims or []) not in ([-1], [r - 1]) or not keepdim or G.arg(mean, 3, "dtype") is not None:
        return Miss("the mean is not over the last dimension with keepdim")
    if not eps > 0:
        return Miss("eps %r is not positive" % eps)
    if G.dtype(xf) != torch.float32:
        return Miss("the variance is computed in %s; liger.rms_norm computes it in f32"
                    % _dtype_word(G.dtype(xf)))
    x, x_dtype = _upcast_source(xf)
    normed = [u for u in G.users(rsqrt) if G.binary(u, aten.mul.Tensor)
              and xf in map(G.strip, u.args[:2])]
    if len(normed) != 1 or len(G.users(rsqrt)) != 1:
        return Miss("rsqrt is read by something other than x * rsqrt")
    normed = normed[0]
    nodes = _covered(rsqrt, G.strip(rsqrt.args[0]), mean, square, normed)
    if xf is not x:
        nodes |= _covered(xf)

    # After x * rstd: [round to X] -> * weight term -> [round to X].
    step_from, step = normed, G.single_user(normed)
    pre_cast = None
    if step is not None and G.cast_of(step) is not None:
        pre_cast = G.cast_of(step)[2]
        nodes |= _covered(step)
        step_from, step = step, G.single_user(step)
    if step is None or G.binary(step, aten.mul.Tensor) is None:
        return Miss("x * rsqrt(...) is not multiplied by a weight alone")
    mul, prev = step, G.strip(step_from)
    ops = [G.strip(a) for a in mul.args[:2]]
    term = ops[1] if ops[0] is prev else ops[0]
    weight, offset, term_nodes, offset_dtype = _weight_term(term)
    if weight is None or G.rank(weight) != 1 or not G.same_dim(G.shape(weight)[0], G.shape(x)[-1]):
        return Miss("the scale is not a weight of the hidden size")
    nodes |= term_nodes | _covered(mul)
    result = mul
    post = G.single_user(mul)
    post_cast = None
    # A cast back to the input's dtype ends the norm (Gemma's); a cast to
    # another (a later `.float()`) is its reader's.
    if post is not None and G.cast_of(post) is not None and G.cast_of(post)[2] == x_dtype:
        post_cast = G.cast_of(post)[2]
        nodes |= _covered(post)
        result = post
    if G.dtype(result) != x_dtype:
        return Miss("the result is %s, the input %s (the weight's dtype promotes it); "
                    "liger.rms_norm returns the input's dtype"
                    % (_dtype_word(G.dtype(result)), _dtype_word(x_dtype)))
    if x_dtype == torch.float32:
        casting = "gemma" if offset else "llama"
    elif pre_cast == x_dtype and G.dtype(mul) == x_dtype:
        casting = "llama"
    elif pre_cast is None and G.dtype(mul) == torch.float32 and post_cast == x_dtype:
        if offset and offset_dtype != torch.float32:
            return Miss("the offset is added to the weight in %s; liger.rms_norm (gemma) adds "
                        "it in f32" % _dtype_word(offset_dtype))
        casting = "gemma"
    else:
        return Miss("the normalised value is rounded to %s before the weight multiply and "
                    "the result is %s: no casting mode of liger.rms_norm rounds there"
                    % (_dtype_word(pre_cast), _dtype_word(G.dtype(result))))
    leak = _interior_leak(nodes, [result])
    if leak:
        return Miss(leak)
    attrs = {"eps": eps, "offset": offset, "casting_mode": casting}
    return Record("rms_norm", {"input": x, "weight": weight}, attrs, (result,),
                  frozenset(nodes), "recognise-rms-norm")


def _weight_term(term):
    """(weight, offset, nodes, dtype of the offset add) of `w`, `w.float()` or `1 + w.float()`."""
    nodes: Set[object] = set()
    offset, offset_dtype = 0.0, None
    pair = G.binary(term, aten.add.Tensor, aten.add.Scalar)
    if pair is not None:
        constant = G.scalar(pair[1]) if G.scalar(pair[1]) is not None else G.scalar(pair[0])
        if constant is None:
            return None, 0.0, nodes, None
        offset, offset_dtype = constant, G.dtype(term)
        nodes |= _covered(term)
        term = G.strip(pair[0] if G.scalar(pair[1]) is not None else pair[1])
    cast = G.cast_of(term)
    if cast is not None and cast[2] == torch.float32:
        nodes |= _covered(term)
        term = G.strip(cast[0])
    if term.op not in ("placeholder", "get_attr") and not G.is_tensor(term):
        return None, 0.0, nodes, None
    return term, offset, nodes, offset_dtype


def match_add_rms_norm(record: Record) -> Optional[Record]:
    """An rms_norm record whose input is a residual sum becomes add_rms_norm
    (results: the norm, the sum, then rstd where the record has it)."""
    total = G.strip(record.operands["input"])
    pair = G.binary(total, aten.add.Tensor)
    if pair is None:
        return None
    a, b = (G.strip(p) for p in pair)
    if not all(G.is_tensor(t) and G.same_shape(t, total) and G.dtype(t) == G.dtype(total)
               for t in (a, b)):
        return None
    return Record("add_rms_norm", {"input": b, "residual": a, "weight": record.operands["weight"]},
                  record.attrs, (record.results[0], total) + tuple(record.results[1:]),
                  record.covered | _covered(total), "recognise-add-rms-norm")


# --- RoPE -------------------------------------------------------------------

def _table(node):
    """`cos.unsqueeze(1)` -> cos ([B or 1, T, D]), else None."""
    if G.is_op(node, aten.unsqueeze.default) and node.args[1] == 1 and G.rank(node.args[0]) == 3:
        return G.strip(node.args[0])
    return None


def _rotate_half(node, x) -> Optional[str]:
    """None when `node` is cat(-x[..., D/2:], x[..., :D/2]) on the last dim, else why not."""
    if not G.is_op(node, aten.cat.default):
        return "the rotation is not a concatenation (another convention)"
    parts, dim = node.args[0], G.arg(node, 1, "dim", 0)
    d = G.shape(x)[-1]
    if len(parts) != 2 or dim not in (-1, G.rank(x) - 1) or not G.is_static(d) or d % 2:
        return "the rotation does not concatenate two halves of the last dimension"
    neg, first = parts
    if not G.is_op(neg, aten.neg.default):
        return "the rotation does not negate its first half (another convention)"
    second = neg.args[0]

    def half(s, start, end):
        return (G.is_op(s, aten.slice.Tensor) and G.strip(s.args[0]) is x
                and G.arg(s, 1, "dim", 0) in (-1, G.rank(x) - 1)
                and G.arg(s, 2, "start", 0) in (start, None if start == 0 else start)
                and (G.arg(s, 3, "end") in (end, None) or (end == d and G.arg(s, 3, "end") >= d))
                and G.arg(s, 4, "step", 1) == 1)
    if not (half(second, d // 2, d) and half(first, 0, d // 2)):
        return "the rotation is not rotate_half (x[..., D/2:] negated, then x[..., :D/2])"
    return None


def _rope_half(add):
    """(x, cos, sin, nodes) of one `x * cos + rotate_half(x) * sin`, a Miss, or None."""
    pair = G.binary(add, aten.add.Tensor)
    if pair is None:
        return None
    muls = [G.binary(G.strip(p), aten.mul.Tensor) for p in pair]
    if None in muls:
        return None
    for (m1, m2), (n1, n2) in (muls, muls[::-1]):
        for x, cos_u in ((G.strip(m1), G.strip(m2)), (G.strip(m2), G.strip(m1))):
            if not G.is_tensor(x) or G.rank(x) != 4:
                continue
            for rot, sin_u in ((G.strip(n1), G.strip(n2)), (G.strip(n2), G.strip(n1))):
                if rot is x or not G.produced_within(rot, x, 6):
                    continue
                cos, sin = _table(cos_u), _table(sin_u)
                if cos is None or sin is None:
                    return Miss("the tables are not [B or 1, T, D] unsqueezed at dim 1 "
                                "(q and k laid out [B, H, T, D])")
                why = _rotate_half(rot, x)
                if why:
                    return Miss(why)
                nodes = _covered(add, G.strip(pair[0]), G.strip(pair[1]), rot, *rot.args[0],
                                 rot.args[0][0].args[0])
                return x, cos, sin, nodes, (cos_u, sin_u)
    return None


def _rounded_back(result, x, nodes: Set[object]):
    """`result` if it has x's dtype, else its only reader when that casts it back (added
    to `nodes`), else None."""
    if G.dtype(result) == G.dtype(x):
        return result
    back = G.single_user(result)
    cast = G.cast_of(back) if back is not None else None
    if cast is None or cast[2] != G.dtype(x):
        return None
    nodes |= _covered(back)
    return back


def match_rope(adds: Sequence[object]) -> List[tuple]:
    """Pairs of rotate-half embeddings (q then k) sharing their tables -> liger.rope.

    Returns (anchor, Record or Miss) for each pair and each near-miss.
    """
    lines = []
    halves = []
    for add in adds:
        got = _rope_half(add)
        if isinstance(got, Miss):
            lines.append((add, got))
        elif got is not None:
            halves.append((add,) + got)
    by_tables: Dict[tuple, list] = {}
    for h in halves:
        by_tables.setdefault((h[2], h[3]), []).append(h)
    for (cos, sin), group in by_tables.items():
        while group:
            q = group.pop(0)
            if not group:
                lines.append((q[0], Miss("no k embedding shares its tables")))
                break
            k = group.pop(0)
            add_q, x_q, _, _, nodes_q, tables = q
            add_k, x_k, _, _, nodes_k, _ = k
            nodes = set(nodes_q | nodes_k)
            # f32 tables promote a bf16 q; rounded back to q's dtype (OLMo2),
            # that is liger.rope's own f32 math rounded once.
            results = [_rounded_back(a, x, nodes) for a, x in ((add_q, x_q), (add_k, x_k))]
            why = None
            if None in results:
                why = "the result stays in %s (the tables promote it); liger.rope returns q's " \
                      "dtype" % _dtype_word(G.dtype(add_q))
            elif G.dtype(x_k) != G.dtype(x_q) or G.dtype(cos) != G.dtype(sin):
                why = "q and k, or cos and sin, have different dtypes"
            leak = why or _interior_leak(nodes, results)
            if leak:
                lines.append((add_q, Miss(leak)))
                continue
            # The unsqueezed tables go with the record when nothing else reads them.
            for t in tables:
                if all(u in nodes for u in G.users(t)):
                    nodes |= _covered(t)
            rec = Record("rope", {"q": x_q, "k": x_k, "cos": cos, "sin": sin}, {},
                         tuple(results), frozenset(nodes), "recognise-rope")
            lines.append((add_q, rec))
    return lines


# --- gated MLP, softmax, attention ----------------------------------------------

_ACTIVATIONS = {aten.silu.default: "swiglu", aten.gelu.default: "geglu"}


def match_gated(mul) -> Optional[object]:
    """`act(gate) * up` with act SiLU (liger.swiglu) or GELU (liger.geglu)."""
    pair = G.binary(mul, aten.mul.Tensor)
    if pair is None:
        return None
    a, b = (G.strip(p) for p in pair)
    for act, up in ((a, b), (b, a)):
        if not (G.is_op(act, *_ACTIVATIONS) and G.is_tensor(up)):
            continue
        op = _ACTIVATIONS[act.target]
        gate = G.strip(act.args[0])
        if not (G.same_shape(gate, up) and G.same_shape(gate, mul)):
            return Miss("gate and up have different shapes (a broadcast)")
        if not (G.dtype(gate) == G.dtype(up) == G.dtype(mul)):
            return Miss("gate, up and the product have different dtypes")
        if len(G.users(act)) != 1:
            return Miss("the activation is also read elsewhere")
        attrs = {}
        if op == "geglu":
            attrs["approximate"] = G.arg(act, 1, "approximate", "none")
        return Record(op, {"gate": gate, "up": up}, attrs, (mul,), frozenset(_covered(act, mul)),
                      "recognise-gated-mlp")
    return None


def match_softmax(node) -> Optional[object]:
    """softmax over the last dimension; an f32 softmax of a bf16 input cast back."""
    if G.is_op(node, aten.softmax.int):
        dim = G.arg(node, 1, "dim")
    elif G.is_op(node, aten._softmax.default):
        dim = node.args[1]
    else:
        return None
    x = G.strip(node.args[0])
    if dim not in (-1, G.rank(x) - 1):
        return Miss("the softmax is not over the last dimension")
    if not G.is_static(G.shape(x)[-1]):
        return Miss("the softmax dimension is dynamic")
    result, nodes = node, _covered(node)
    if G.dtype(node) != G.dtype(x):
        back = G.single_user(node)
        cast = G.cast_of(back) if back is not None else None
        if cast is None or cast[2] != G.dtype(x):
            return Miss("the result stays in %s; liger.softmax returns the input's dtype"
                        % _dtype_word(G.dtype(node)))
        result = back
        nodes |= _covered(back)
    return Record("softmax", {"input": x}, {}, (result,), frozenset(nodes), "recognise-softmax")


def _unrepeated(k, v):
    """gqa.unrepeated(k, v), its reason a Miss."""
    grouped = gqa.unrepeated(k, v)
    return Miss(grouped) if isinstance(grouped, str) else grouped


def _scale_attrs(attrs, scale, head):
    """`attrs` with the call's scale where it is not the default 1/sqrt(D)
    (left implicit, as the dialect prints it)."""
    if scale is not None and not (G.is_static(head) and
                                  abs(float(scale) - head ** -0.5) <= 1e-7 * head ** -0.5):
        attrs["scale"] = float(scale)
    return attrs


def match_attention(node) -> Optional[object]:
    """scaled_dot_product_attention without dropout, and without a mask or
    with a causal one narrowed to a sliding window (recognise-causal-mask's
    masks.WINDOW_META, k and v then repeated per query head) ->
    liger.attention.

    Grouped heads (`enable_gqa`, k and v [B, Hkv, S, D]) are liger.attention's
    own. SDPA's causal mask is aligned top-left (query i sees the keys j <=
    i), liger.attention's bottom-right (j <= i + S - T): a causal call is the
    op only where T and S are the same size.
    """
    if not G.is_op(node, aten.scaled_dot_product_attention.default):
        return None
    q, k, v = (G.strip(a) for a in node.args[:3])
    mask = G.arg(node, 3, "attn_mask")
    dropout = G.arg(node, 4, "dropout_p", 0.0)
    causal = G.arg(node, 5, "is_causal", False)
    scale = node.kwargs.get("scale", node.args[6] if len(node.args) > 6 else None)
    window = node.meta.get(masks.WINDOW_META) if mask is not None else None
    if mask is not None and not window:
        return Miss("an explicit attention mask (liger.attention masks causally, with a sliding "
                    "window or not at all)")
    if dropout:
        return Miss("attention dropout %g" % dropout)
    if G.rank(q) != 4 or G.rank(k) != 4:
        return Miss("q or k is not [B, H, T, D]")
    if causal and not G.same_dim(G.shape(q)[2], G.shape(k)[2]):
        return Miss("is_causal with %s queries over %s keys: SDPA aligns its causal mask "
                    "top-left, liger.attention bottom-right (the two agree only where T = S)"
                    % (G.shape(q)[2], G.shape(k)[2]))
    attrs = {"causal": bool(causal)}
    repeats, bounds = [], ()
    if window:  # (recognise-causal-mask checked T = S)
        grouped = _unrepeated(k, v)
        if isinstance(grouped, Miss):
            return grouped
        k, v, repeats = grouped
        attrs = {"causal": True, "window": int(window)}
        bounds = _mask_bounds(G.shape(q)[2], masks.mask_verdict(
            node.graph.owning_module, mask, G.shape(q)[2]))
    _scale_attrs(attrs, scale, G.shape(q)[-1])
    return Record("attention", {"q": q, "k": k, "v": v}, attrs, (node,),
                  frozenset(_covered(node, *repeats)), "recognise-attention", bounds=bounds)


def _mask_bounds(t, verdict) -> tuple:
    """The Record bounds of an attention of q length `t` that drops its
    mask on recognise-causal-mask's `verdict` (causal, with a window or
    not): `t` up to the longest q length the mask was evaluated at."""
    return ((t, verdict.reach),) if isinstance(t, torch.SymInt) else ()


def match_eager_attention(node) -> Optional[object]:
    """Hugging Face's eager attention with a logit softcap (Gemma 2's
    eager_attention_forward, which SDPA cannot run) -> liger.attention
    with `softcap`:

        matmul(dropout(softmax(c * tanh(matmul(q, kᵀ) * scale / c) + mask,
                               -1, f32).to(dtype), 0), v)

    k and v as they are or repeated per query head (repeat_kv: the op's
    grouped heads read the originals), the mask (added to the capped
    scores) the causal mask of equal q and k lengths computed from the
    graph's sizes alone, narrowed to a sliding window or not
    (recognise-causal-mask's evaluation), or none.
    Anchored at the product with v; a graph without the softcap's tanh
    there is no candidate."""
    if not G.is_op(node, aten.matmul.default):
        return None
    p, v = G.strip(node.args[0]), G.strip(node.args[1])
    chain = [node]
    dropout = None
    if G.is_op(p, aten.dropout.default):
        dropout, p = p, G.strip(p.args[0])
        chain.append(dropout)
    if G.cast_of(p) is not None or G.is_op(p, aten.to.dtype):
        chain.append(p)
        p = G.strip(p.args[0])
    if not G.is_op(p, aten.softmax.int, aten._softmax.default):
        return None
    softmax = p
    x = G.strip(softmax.args[0])
    mask = None
    added = G.binary(x, aten.add.Tensor)
    cap = _softcap(x)
    if cap is None and added is not None:
        for scores, other in (added, added[::-1]):
            cap = _softcap(G.strip(scores))
            if cap is not None:
                mask = G.strip(other)
                break
    if cap is None:
        return None
    softcap, raw, cap_nodes = cap
    chain += [softmax, *cap_nodes] + ([x] if mask is not None else [])
    raw = G.strip(raw)
    scale = None
    pair = G.binary(raw, aten.mul.Tensor)
    if pair is not None:
        for product, number in (pair, pair[::-1]):
            if G.scalar(number) is not None:
                chain.append(raw)
                scale, raw = G.scalar(number), G.strip(product)
                break
    if not G.is_op(raw, aten.matmul.default):
        return Miss("the softcapped scores are not a product q·kᵀ")
    q, kt = G.strip(raw.args[0]), G.strip(raw.args[1])
    if not (G.is_op(kt, aten.transpose.int) and sorted(
            d % 4 for d in kt.args[1:3]) == [2, 3] and G.rank(kt) == 4):
        return Miss("the scores' right operand is not kᵀ (a transpose of k's last two "
                    "dimensions)")
    k = G.strip(kt.args[0])
    if softmax.args[1] not in (-1, 3):
        return Miss("the softmax is not over the keys")
    if dropout is not None and G.arg(dropout, 1, "p", 0.0):
        return Miss("attention dropout %g" % G.arg(dropout, 1, "p", 0.0))
    grouped = _unrepeated(k, v)
    if isinstance(grouped, Miss):
        return grouped
    k, v, repeats = grouped
    chain += repeats
    if G.rank(q) != 4 or G.rank(k) != 4 or G.rank(v) != 4:
        return Miss("q, k or v is not [B, H, T, D]")
    (b, _, t, d), (bk, _, s, dk), (bv, _, sv, _) = G.shape(q), G.shape(k), G.shape(v)
    if not (G.same_dim(b, bk) and G.same_dim(b, bv) and G.same_dim(d, dk)
            and G.same_dim(s, sv)):
        return Miss("q, k and v differ in batch, k and v in length or q and k in head size "
                    "(a broadcast product)")
    attrs, bounds = {"causal": False}, ()
    if mask is not None:
        if not G.same_dim(t, s):
            return Miss("a mask over keys of another length than the queries")
        verdict = masks.mask_verdict(node.graph.owning_module, mask, t)
        if verdict.why is not None:
            return Miss("the mask is not the causal mask (%s)" % verdict.why)
        # A window wider than the traced length stays: liger.attention's
        # window serves every length up to the reach.
        attrs = {"causal": True, "window": verdict.window} if verdict.window else \
            {"causal": True}
        bounds = _mask_bounds(t, verdict)
    _scale_attrs(attrs, scale, G.shape(q)[-1])
    attrs["softcap"] = float(softcap)
    covered = _covered(*chain, raw, kt)
    return Record("attention", {"q": q, "k": k, "v": v}, attrs, (node,), frozenset(covered),
                  "recognise-eager-attention", bounds=bounds)


# --- LoRA -------------------------------------------------------------------

def _linear(node):
    """(x, W, b) of aten.linear, else None."""
    if not G.is_op(node, aten.linear.default):
        return None
    return G.strip(node.args[0]), G.strip(node.args[1]), \
        (G.strip(node.args[2]) if len(node.args) > 2 and node.args[2] is not None else None)


def match_lora(add) -> Optional[object]:
    """PEFT's `base(x) + lora_B(lora_A(dropout(x))) * scale` -> liger.lora_linear."""
    pair = G.binary(add, aten.add.Tensor)
    if pair is None:
        return None
    a, b = (G.strip(p) for p in pair)
    for base, scaled in ((a, b), (b, a)):
        lin = _linear(base)
        mul = G.binary(scaled, aten.mul.Tensor)
        if lin is None or mul is None:
            continue
        s = [G.scalar(m) for m in mul]
        scale = s[1] if s[1] is not None else s[0]
        low = G.strip(mul[0] if s[1] is not None else mul[1])
        up = _linear(low)
        if scale is None or up is None or up[2] is not None:
            continue
        down = _linear(up[0])
        if down is None or down[2] is not None:
            continue
        x, w, bias = lin
        if down[0] is not x:
            return Miss("lora_A reads another input than the base layer (dropout > 0?)")
        if not (G.dtype(x) == G.dtype(w) == G.dtype(down[1]) == G.dtype(up[1]) == G.dtype(add)):
            return Miss("the base and adapter weights have different dtypes")
        nodes = _covered(add, base, scaled, low, up[0])
        leak = _interior_leak(nodes, [add])
        if leak:
            return Miss(leak)
        operands = {"input": x, "weight": w, "lora_a": down[1], "lora_b": up[1]}
        if bias is not None:
            operands["bias"] = bias
        return Record("lora_linear", operands, {"scale": scale}, (add,), frozenset(nodes),
                      "recognise-lora")
    return None


# --- losses -----------------------------------------------------------------

_REDUCTIONS = {0: "none", 1: "mean", 2: "sum"}


def _logits_source(node, nodes: Set[object]):
    """Looks through exact upcasts, flattening views and a softcap.

    Returns (logits, softcap): the node that holds the logits (the importer
    flattens its leading dimensions) and the softcap (or None).
    """
    softcap = None
    while True:
        node = G.strip(node)
        cast = G.cast_of(node)
        if cast is not None and cast[2] == torch.float32 and cast[1] in G.FLOATS:
            nodes |= _covered(node)
            node = cast[0]
            continue
        if G.is_op(node, aten.view.default, aten.reshape.default, aten._unsafe_view.default) \
                and G.rank(node) == 2 and G.same_dim(G.shape(node)[-1], G.shape(node.args[0])[-1]):
            nodes |= _covered(node)
            node = node.args[0]
            continue
        cap = _softcap(node)
        if cap is not None and softcap is None:
            softcap, inner, cap_nodes = cap
            nodes |= cap_nodes
            node = inner
            continue
        return node, softcap


def _softcap(node):
    """`tanh(z / s) * s` -> (s, z, nodes)."""
    pair = G.binary(node, aten.mul.Tensor)
    if pair is None:
        return None
    for t, s in (pair, pair[::-1]):
        t = G.strip(t)
        if G.scalar(s) is None or not G.is_op(t, aten.tanh.default):
            continue
        inner = G.strip(t.args[0])
        if G.is_op(inner, aten.div.Tensor) and G.scalar(inner.args[1]) == G.scalar(s):
            return G.scalar(s), inner.args[0], _covered(node, t, inner)
        div = G.binary(inner, aten.mul.Tensor)
        if div is not None and G.scalar(div[1]) is not None \
                and abs(G.scalar(div[1]) * G.scalar(s) - 1) < 1e-12:
            return G.scalar(s), div[0], _covered(node, t, inner)
    return None


def _flat_target(node, nodes):
    node = G.strip(node)
    if G.is_op(node, aten.view.default, aten.reshape.default) and G.rank(node) == 1:
        nodes |= _covered(node)
        return G.strip(node.args[0])
    return node


def match_loss(node) -> Optional[object]:
    """F.cross_entropy (or nll_loss of log_softmax) on logits -> liger.cross_entropy;
    on the logits of an lm_head read by nothing else -> liger.fused_linear_cross_entropy."""
    if G.is_op(node, aten.cross_entropy_loss.default):
        logits, target = node.args[0], node.args[1]
        weight = G.arg(node, 2, "weight")
        reduction = G.arg(node, 3, "reduction", 1)
        ignore = G.arg(node, 4, "ignore_index", -100)
        smoothing = G.arg(node, 5, "label_smoothing", 0.0)
        nodes = _covered(node)
    elif G.is_op(node, aten.nll_loss_nd.default, aten.nll_loss.default):
        logp = G.strip(node.args[0])
        if not (G.is_op(logp, aten.log_softmax.int, aten._log_softmax.default)
                and G.arg(logp, 1, "dim") in (-1, G.rank(logp) - 1)):
            return Miss("nll_loss of something other than a log_softmax over the classes")
        if G.is_op(logp, aten.log_softmax.int) and G.arg(logp, 2, "dtype") not in (None, torch.float32):
            return Miss("the log_softmax is taken in %s" % G.arg(logp, 2, "dtype"))
        if len(G.users(logp)) != 1:
            return Miss("the log-probabilities are also read elsewhere")
        logits, target = logp.args[0], node.args[1]
        weight = G.arg(node, 2, "weight")
        reduction = G.arg(node, 3, "reduction", 1)
        ignore = G.arg(node, 4, "ignore_index", -100)
        smoothing = 0.0
        nodes = _covered(node, logp)
    else:
        return None
    if G.rank(node.args[0]) != 2:
        return Miss("the logits are not [tokens, classes] (the class dimension is not last)")
    if G.dtype(G.strip(logits)) not in G.FLOATS:
        return None
    if G.dtype(node.args[0]) != torch.float32:
        # A bf16 loss would round its log-probabilities; liger's losses are f32.
        return Miss("the loss is computed in %s; liger's losses compute in f32"
                    % _dtype_word(G.dtype(node.args[0])))
    source, softcap = _logits_source(logits, nodes)
    target = _flat_target(target, nodes)
    attrs = {"ignore_index": int(ignore), "label_smoothing": float(smoothing),
             "reduction": _REDUCTIONS[int(reduction)]}
    if softcap is not None:
        if softcap <= 0:
            return Miss("softcap %g is not positive" % softcap)
        attrs["softcap"] = softcap
    weight = G.strip(weight) if weight is not None else None
    leak = _interior_leak(nodes, [node])
    on_logits = None
    if not leak:
        operands = {"logits": G.strip(source), "target": target}
        if weight is not None:
            operands["weight"] = weight
        on_logits = Record("cross_entropy", operands, attrs, (node,), frozenset(nodes),
                           "recognise-cross-entropy")
    lin = _linear(G.strip(source))
    if lin is not None:
        head = G.strip(source)
        flce_nodes = nodes | _covered(head)
        if not _interior_leak(flce_nodes, [node]):
            operands = {"hidden": lin[0], "weight": lin[1], "target": target}
            if lin[2] is not None:
                operands["bias"] = lin[2]
            if weight is not None:
                operands["class_weight"] = weight
            # A policy that refuses the lm_head + loss (an f32 model, whose
            # fused loss has no kernel) may keep the loss on the logits.
            return Record("fused_linear_cross_entropy", operands, attrs, (node,),
                          frozenset(flce_nodes), "recognise-lm-head-loss",
                          alternative=on_logits)
    return on_logits if on_logits is not None else Miss(leak)


# --- projections after autograd ------------------------------------------------

def _flattened(node):
    """x when `node` merges the leading dimensions of x [..., K] into [rows, K]."""
    if not G.is_op(node, aten.view.default, aten.reshape.default, aten._unsafe_view.default):
        return None
    x = G.strip(node.args[0])
    if not G.is_tensor(x) or G.rank(x) < 3 or G.rank(node) != 2:
        return None
    rows = sympy.Mul(*[G.size_expr(d) for d in G.shape(x)[:-1]])
    if sympy.simplify(rows - G.size_expr(G.shape(node)[0])) != 0 \
            or not G.same_dim(G.shape(x)[-1], G.shape(node)[-1]):
        return None
    return x


def _viewed_back(node, x):
    """The only reader of the [rows, N] `node` when it restores x's leading dimensions."""
    out = G.single_user(node)
    if out is None or not G.is_op(out, aten.view.default, aten.reshape.default,
                                  aten._unsafe_view.default):
        return None
    want = G.shape(x)[:-1] + G.shape(node)[-1:]
    if G.rank(out) != len(want) or not all(G.same_dim(a, b) for a, b in zip(G.shape(out), want)):
        return None
    return out


def match_projection(node) -> Optional[object]:
    """The matrix products autograd and Inductor's decompositions leave:

        mm(x, t(W)), addmm(b, x, t(W))   -> liger.linear             x · Wᵀ (+ b)
        mm(dy, W)                        -> liger.linear_grad_input  dy · W
        mm(t(dy), x)                     -> liger.linear_grad_weight dyᵀ · x

    each a matrix product of the same dtype accumulated as the op does.
    Where the activation is the flattening of an [..., K] tensor and the
    product's only reader views it back ([..., N]), the op takes the
    unflattened tensor and gives the viewed result (what the fusion passes
    know: a projection of [B, T, K] hidden states); the flattening and a
    transposed weight are looked through.
    """
    if G.is_op(node, aten.mm.default):
        a, b, bias = G.strip(node.args[0]), G.strip(node.args[1]), None
    elif G.is_op(node, aten.addmm.default) and G.arg(node, 3, "beta", 1) == 1 \
            and G.arg(node, 4, "alpha", 1) == 1:
        a, b, bias = G.strip(node.args[1]), G.strip(node.args[2]), G.strip(node.args[0])
        if not (G.is_tensor(bias) and G.rank(bias) == 1):
            return None
    else:
        return None
    if not (G.is_tensor(a) and G.is_tensor(b) and G.dtype(node) in G.FLOATS
            and G.dtype(a) == G.dtype(b) == G.dtype(node)):
        return None
    if bias is not None and G.dtype(bias) != G.dtype(node):
        return None
    looked = set()
    weight = G.transposed(b)
    if weight is not None and all(G.is_static(d) for d in G.shape(weight)):
        op, roles = "linear", ("input", "weight")
        looked.add(b)
    elif bias is None and G.transposed(a) is not None and all(G.is_static(d)
                                                             for d in G.shape(node)):
        # dyᵀ · x over the tokens: both stay [T, .], as the op takes them.
        looked.add(a)
        return Record("linear_grad_weight", {"grad": G.transposed(a), "input": b}, {}, (node,),
                      frozenset(_covered(node)), "recognise-projection",
                      frozenset(looked))
    elif bias is None and all(G.is_static(d) for d in G.shape(b)):
        op, roles, weight = "linear_grad_input", ("grad", "weight"), b
    else:
        return None
    operands = {roles[0]: a, roles[1]: weight}
    if bias is not None:
        operands["bias"] = bias
    result, covered = node, _covered(node)
    x = _flattened(a)
    back = _viewed_back(node, x) if x is not None else None
    if back is not None:
        operands[roles[0]] = x
        looked.add(a)
        result = back
        covered |= _covered(back)
    parts = _row_slices(result) if op == "linear" else None
    if parts:
        # A fused projection (Phi3's qkv_proj, gate_up_proj) read in slices:
        # each slice is the projection by those rows of the weight (and bias).
        looked |= covered | {u for u in G.users(result) if G.is_op(u, *G.SPLITS)}
        return [Record(op, dict(operands, **{role: (operands[role], start, rows)
                                             for role in ("weight", "bias") if role in operands}),
                       {}, (part,), frozenset(_covered(part)), "recognise-projection",
                       frozenset(looked)) for part, start, rows in parts]
    return Record(op, operands, {}, (result,), frozenset(covered), "recognise-projection",
                  frozenset(looked))


def _row_slices(result):
    """[(node, first row, rows)] when every reader of `result` takes static rows
    of its last dimension (G.row_slice), else None."""
    out = []
    for user in G.users(result):
        parts = list(user.users) if G.is_op(user, *G.SPLITS) else [user]
        for part in parts:
            rows = G.row_slice(part)
            if rows is None or rows[0] is not result:
                return None
            out.append((part, rows[1], rows[2]))
    return out or None


# --- LayerNorm --------------------------------------------------------------

def match_layer_norm(node) -> Optional[object]:
    """`layer_norm(x, [H], weight, bias?, eps)` (nn.LayerNorm, F.layer_norm)
    -> liger.layer_norm: both compute the mean and variance in f32 and round
    the result once to x's dtype."""
    if not G.is_op(node, aten.layer_norm.default):
        return None
    x = G.strip(node.args[0])
    shape = G.arg(node, 1, "normalized_shape")
    weight = G.arg(node, 2, "weight")
    bias = G.arg(node, 3, "bias")
    eps = G.arg(node, 4, "eps", 1e-5)
    if not G.is_tensor(x) or len(shape) != 1 or not G.same_dim(shape[0], G.shape(x)[-1]):
        return Miss("the normalised shape %s is not the last dimension alone"
                    % (list(shape),))
    if weight is None:
        return Miss("no weight (liger.layer_norm scales by one)")
    operands = {"input": x, "weight": G.strip(weight)}
    if bias is not None:
        operands["bias"] = G.strip(bias)
    return Record("layer_norm", operands, {"eps": float(eps)}, (node,),
                  frozenset(_covered(node)), "recognise-layer-norm")


# --- liger operators already in the graph ---------------------------------------

def match_operator(node) -> Optional[object]:
    """A call of a liger operator (torch.ops.liger.*: a patched model's, or
    one the torch.compile backend put there) -> the dialect op it runs
    (liger_operators.OPERATORS); its results are the call's outputs."""
    if getattr(node, "op", None) != "call_function":
        return None
    entry = liger_operators.by_target(node.target)
    if entry is None:
        return None
    covered = _covered(node, *[u for u in node.users if u.target is operator.getitem])
    record = entry.record(node, covered)
    if record is None:
        return Miss("it reads its output(s) %s, which liger.%s does not give (what its "
                    "backward keeps): the call runs as the operator it is"
                    % (", ".join(map(str, entry.extra)), entry.op))
    return record


# --- driver -----------------------------------------------------------------

# (the pattern a near-miss is reported under, matcher), in the order they
# claim nodes; a record names its own pattern (add + RMSNorm, lm_head + loss).
_NODE_PATTERNS = [
    (liger_operators.PATTERN, match_operator),
    ("recognise-rms-norm", match_rms_norm),
    ("recognise-layer-norm", match_layer_norm),
    ("recognise-cross-entropy", match_loss),
    ("recognise-lora", match_lora),
    ("recognise-gated-mlp", match_gated),
    ("recognise-eager-attention", match_eager_attention),
    ("recognise-softmax", match_softmax),
    ("recognise-attention", match_attention),
    ("recognise-projection", match_projection),
]


def recognize(gm_or_graph, policy: Optional[Policy] = None) -> Recognition:
    """Finds every pattern in an aten FX graph; returns the records and the report."""
    graph = getattr(gm_or_graph, "graph", gm_or_graph)
    nodes = [n for n in graph.nodes if n.op == "call_function"]
    out = Recognition()
    claimed: Set[object] = set()

    def keep(anchor, got, pattern):
        if isinstance(got, list):  # one record per part (a projection read in slices)
            for one in got:
                keep(anchor, one, pattern)
            return
        if isinstance(got, Miss):
            out.report.append(Line(pattern, anchor, reason=got.reason))
            return
        dynamic = _dynamic_sizes(got)
        if dynamic:
            out.dynamic.append(dynamic)
            out.report.append(Line(got.pattern, anchor, reason=dynamic))
            return
        if got.covered & claimed:
            out.report.append(Line(got.pattern, anchor,
                                   reason="part of it already belongs to another record"))
            return
        held = [n for size, n in got.bounds if not masks.can_hold(size, n)]
        if held:
            out.report.append(Line(got.pattern, anchor, reason=masks.SHORT_OF_BOUND % held[0]))
            return
        verdict = True if policy is None else policy(got)
        if verdict is not True:
            out.report.append(Line(got.pattern, anchor, reason=verdict if isinstance(
                verdict, str) else "refused by the policy"))
            if got.alternative is not None:
                keep(anchor, got.alternative, pattern)
            return
        out.records.append(got)
        claimed.update(got.covered)
        for size, n in got.bounds:
            masks.hold(size, n)
        out.report.append(Line(got.pattern, anchor, record=got))

    for name, matcher in _NODE_PATTERNS:
        for node in nodes:
            if node in claimed:
                continue
            got = matcher(node)
            if got is None:
                continue
            if isinstance(got, Record) and got.op == "rms_norm":
                fused = match_add_rms_norm(got)
                if fused is not None and not (fused.covered & claimed):
                    got = fused
            keep(node, got, name)
        if name == "recognise-rms-norm":
            # RoPE after the norms (Qwen3 and OLMo2 normalise q and k first).
            adds = [n for n in nodes if n not in claimed and G.is_op(n, aten.add.Tensor)]
            for anchor, got in match_rope(adds):
                keep(anchor, got, "recognise-rope")
    order = {n: i for i, n in enumerate(graph.nodes)}
    out.report.sort(key=lambda line: order.get(line.node, -1))
    out.records.sort(key=lambda r: min(order[n] for n in r.results if n is not None))
    return out
