"""Causal masks made explicit by a trace -> `is_causal=True` (or a sliding
window).

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
as symbolic inputs, at a set of small probe sizes, one past every
constant the mask's ops hold and at its reach (twice the traced length or
more, REACH_ELEMENTS), so that a mask causal only at the traced sizes, or
only up to a length (a sliding window, a chunk, stated or derived), is not
taken for the causal one. The verdict holds up to the longest q length
evaluated, and where a mask is dropped on it the graph's length is guarded
to that (a longer sequence compiles the graph again and is evaluated at
its own length). A causal mask narrowed to a sliding window of W keys is
recognised as such: wider than the traced length, the call becomes causal
with the graph's length guarded to W; narrower, the call keeps its mask
and carries W (WINDOW_META, for liger.attention's `window`). A mask larger
than `MAX_ELEMENTS` at the traced sizes is left alone (said in the
report).
"""

import math
import weakref
from dataclasses import dataclass
from typing import List, Optional

import torch

from .. import operators
from . import graph as G
from .graph import aten

# The largest mask evaluated (elements at the sizes evaluated; a bool each).
MAX_ELEMENTS = 2 ** 28
# Where the sizes are symbolic, the mask is also evaluated at its reach: the
# longer q length of twice the traced one and the one whose mask (the other
# sizes at 1) has REACH_ELEMENTS elements, never one whose mask has more
# than MAX_ELEMENTS (or the q length's bound, where it was marked dynamic
# with one). A verdict holds up to the longest q length evaluated; where it
# drops the mask, the graph's length is guarded to it.
REACH_ELEMENTS = 2 ** 24
# The sizes a symbolic size input takes besides its traced value.
PROBE_SIZES = (1, 2, 3, 5, 8, 13)
PATTERN = "recognise-causal-mask"
# The meta key of an SDPA call whose mask is causal with a sliding window of
# that many keys (recognise-causal-mask leaves the mask).
WINDOW_META = "liger_sliding_window"
# The note of a call made causal with the graph's length guarded to its
# window (a longer sequence compiles the graph again).
GUARDED = ("its sliding window of %d keys is wider than the traced length: the graph serves "
           "lengths up to it")
# The note of a call made causal with the graph's length guarded to the
# longest q length its mask was evaluated at.
REACHED = "evaluated up to %d tokens: a longer sequence compiles the graph again"
# Why a mask stays where its length was marked dynamic with a range the
# evaluation fell short of (no guard may narrow the range).
SHORT_OF_BOUND = ("its mask was evaluated up to %d tokens, and the range its length was marked "
                  "dynamic with goes past that (no guard may narrow it)")
# Per shape environment, the symbols of the sizes marked dynamic with a
# range (note_strict_sizes): dynamo refuses a guard that narrows such a
# range, with a max or not, and the shape environment shows only the max.
_STRICT: "weakref.WeakKeyDictionary" = weakref.WeakKeyDictionary()


@dataclass
class MaskLine:
    node: object
    rewritten: bool
    reason: str = ""
    # The sliding window the graph's length was guarded to (GUARDED), or 0.
    guarded_window: int = 0
    # The q length the graph's length was guarded to (REACHED), or 0.
    guarded_length: int = 0

    def __str__(self) -> str:
        if self.rewritten:
            return "[%s] causal mask -> is_causal at %s%s" % (
                PATTERN, G.where(self.node), self.reason and " (%s)" % self.reason)
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


def _kept(mask) -> Optional[torch.Tensor]:
    """`mask` ([..., T, S]: bool, True where attended; or additive floats,
    0 there and -inf or the dtype's lowest elsewhere) as bool [..., T, S],
    or None where it is neither."""
    if mask.dtype == torch.bool:
        return mask
    if not mask.is_floating_point():
        return None
    kept = mask == 0
    dropped = (mask == float("-inf")) | (mask == torch.finfo(mask.dtype).min)
    return kept if bool((kept != dropped).all()) else None


def _band(mask, rows: int) -> Optional[int]:
    """0 where `mask` (broadcast over its leading dims) is the causal mask
    of T = S = `rows`; W where it is that mask with a sliding window of W <
    `rows` keys (query i attends to the keys i - W < j <= i: Hugging Face's
    sliding window, liger.attention's `window`); None where it is neither."""
    if not isinstance(mask, torch.Tensor) or mask.dim() < 2 or mask.shape[-2:] != (rows, rows):
        return None
    kept = _kept(mask)
    if kept is None or rows == 0:
        return None if kept is None else 0
    # The last query's keys give the window: all `rows` of them, none.
    width = int(kept.reshape(-1, rows, rows)[0, -1].sum())
    if width == 0:
        return None
    band = operators.attention_mask(rows, rows, True, width, kept.device, explicit=True)
    return (0 if width == rows else width) if bool((kept == band).all()) else None


# The most elements a tensor constant of a mask's subgraph may have for its
# values to be probed past (a window, or a table of per-layer windows).
CONSTANT_ELEMENTS = 1024
# The most distinct constants a mask is probed past (each costs evaluations
# at sizes past it); a mask holding more is left alone.
MAX_CONSTANTS = 64
# The ops a position is compared with or shifted by: the floats that reach
# them (an argument, or through any op: torch.full(W), a tensor's entry),
# and the tensor constants that do, may hold a window. A float that
# reaches none is a fill value (an additive mask's lowest value, -1e9).
_POSITION_OPS = {"lt", "le", "gt", "ge", "eq", "ne", "add", "sub", "rsub", "remainder",
                 "floor_divide", "div", "fmod"}
# The dtypes' extremes: the fill values of additive masks, compared with as
# such (Hugging Face's `mask == min`), never windows.
_EXTREMES = {torch.finfo(t).max for t in (torch.float16, torch.bfloat16, torch.float32)}


def _op_name(node) -> str:
    packet = getattr(node.target, "overloadpacket", None)
    return getattr(packet, "__name__", "")


def _feeding_positions(nodes) -> set:
    """The position ops among `nodes` and every node whose value reaches
    one of them."""
    fed, stack = set(), [n for n in nodes if _op_name(n) in _POSITION_OPS]
    while stack:
        n = stack.pop()
        if n not in fed:
            fed.add(n)
            stack.extend(n.all_input_nodes)
    return fed


class _Folding(torch.fx.Interpreter):
    """Evaluates a mask's function, keeping the values of the nodes that no
    size input reaches (its tensor constants, `torch.tensor(W)` in a
    forward, and the constants its ops compute, `torch.tensor(10) * 2`) in
    `folded`."""

    def __init__(self, fn, folded: dict):
        super().__init__(fn)
        self.folded = folded
        self.sized = set()
        for n in fn.graph.nodes:
            if n.op == "placeholder" or any(a in self.sized for a in n.all_input_nodes):
                self.sized.add(n)

    def run_node(self, n):
        value = super().run_node(n)
        if n not in self.sized and n.op in ("get_attr", "call_function"):
            self.folded[n] = value
        return value


def _constants(nodes, folded) -> List[int]:
    """The magnitudes 2 <= |c| < 2**62 of the integers the nodes' arguments
    hold, and of the floats (rounded down and up) and the small tensors
    among the nodes' arguments and their values in `folded` (_Folding: the
    tensor constants and the constants the ops compute) that reach an op
    positions are compared with or shifted by, in order
    (sizes a mask may compare its positions with: a sliding window, a chunk,
    a diagonal such as tril's -W; the larger ones stand for "to the end")."""
    found = []
    fed = _feeding_positions(nodes)

    def visit(a, position):
        if isinstance(a, bool):
            return
        if isinstance(a, torch.Tensor):
            if position and a.numel() <= CONSTANT_ELEMENTS and a.dtype != torch.bool and \
                    not a.is_complex():
                try:
                    values = a.detach().cpu().reshape(-1).double().unique().tolist()
                except Exception:  # (no data here: the mask cannot be evaluated either)
                    return
                visit(values, position)
            return
        if isinstance(a, float):
            if position and math.isfinite(a) and abs(a) < 2 ** 62 and abs(a) not in _EXTREMES:
                visit((math.floor(a), math.ceil(a)), position)
            return
        if isinstance(a, int):
            if 2 <= abs(a) < 2 ** 62 and abs(a) not in found:
                found.append(abs(a))
        elif isinstance(a, (list, tuple)):
            for b in a:
                visit(b, position)
        elif isinstance(a, slice):
            visit((a.start, a.stop, a.step), position)
        elif isinstance(a, dict):
            visit(tuple(a.values()), position)

    for n in nodes:
        visit((n.args, n.kwargs), n in fed)
        if n in folded:
            visit(folded[n], n in fed)
    return found


@dataclass(frozen=True)
class Verdict:
    """What the evaluation of a mask found. `why`: None where it is the
    causal mask at every size evaluated, narrowed to a sliding window of
    `window` keys where one showed (0: none); else why not. `reach`: the
    longest q length it was evaluated at; the verdict holds up to it."""
    why: Optional[str]
    window: int = 0
    reach: int = 0


def _elements(mask, symbols) -> int:
    """The mask's element count with its sizes' symbols at `symbols`."""
    elements = 1
    for s in G.shape(mask):
        elements *= int(G.size_expr(s).subs(symbols)) if isinstance(s, torch.SymInt) else int(s)
    return elements


def _upper(t) -> Optional[int]:
    """The largest value a symbolic q length `t` may take (a bound it was
    marked dynamic with: torch._dynamo.mark_dynamic(..., max=N)), or
    None where it has none."""
    if not isinstance(t, torch.SymInt):
        return None
    try:
        upper = t.node.shape_env.bound_sympy(t.node.expr).upper
    except Exception:  # (no shape environment to ask)
        return None
    # (An unbounded size's bound: int_oo, or a huge integer in older torch.)
    if not getattr(upper, "is_Integer", False) or not upper.is_finite or int(upper) >= 2 ** 62:
        return None
    return int(upper)


def _reach(mask, size_inputs, q_size, rows, upper):
    """The size inputs' values of the reach evaluation: the size input the
    q length grows with at the least value that makes the q length the
    reach, the others at 1; None where no size input makes it longer than
    `rows`, the traced length. The reach: where the q length has a bound
    (`upper`, _upper), that bound; else the longer of twice the traced
    length and the length at REACH_ELEMENTS; never past MAX_ELEMENTS, nor
    past the longest the q length takes. The elements counted at a size
    value v: the mask's, and v * v (a mask built at the full size and
    sliced, every fourth token). A string (why) where the q length grows
    with several sizes or the bound is past MAX_ELEMENTS."""
    symbols = [G.size_expr(G.val(n)) for n in size_inputs]

    def values(at, v):
        return [v if j == at else 1 for j in range(len(symbols))]

    def length(vals):
        return int(q_size.subs(dict(zip(symbols, vals))))

    top = 2 ** 31 - 1

    def largest(ok):
        # The largest v in [1, top] with ok(v) (ok holds up to a value), or 0.
        low, high = 0, top + 1
        while high - low > 1:
            mid = (low + high) // 2
            low, high = (mid, high) if ok(mid) else (low, mid)
        return low

    try:
        # (compared far apart: a q length such as (s0 + 3) // 4 is flat nearby)
        growing = [at for at in range(len(symbols))
                   if length(values(at, 2 ** 20)) > length(values(at, 1))]
    except (TypeError, ValueError):  # (a q length of other symbols)
        return None
    if len(growing) > 1:
        return ("its q length %s grows with several sizes: the lengths their sums make are "
                "not all evaluated" % q_size)
    if not growing:
        return None
    (at,) = growing

    def cost(v):
        return max(_elements(mask, dict(zip(symbols, values(at, v)))), v * v)

    def least(want):
        # The least v whose q length is at least `want` (<= the longest it takes).
        return largest(lambda v: length(values(at, v)) < want) + 1

    longest = length(values(at, top))
    cap = length(values(at, largest(lambda v: cost(v) <= MAX_ELEMENTS)))
    if upper is not None:
        v = least(min(upper, longest))
        if cost(v) > MAX_ELEMENTS:
            return ("its q length may be up to %d (the bound it was marked dynamic with), and "
                    "the mask is evaluated up to %d elements (%d tokens)"
                    % (upper, MAX_ELEMENTS, cap))
    else:
        wide = length(values(at, largest(lambda v: cost(v) <= REACH_ELEMENTS)))
        v = least(min(max(2 * rows, wide), cap, longest))
    return values(at, v) if length(values(at, v)) > rows else None


def _verdict(gm, mask, t) -> Verdict:
    """The Verdict on `mask` as the causal mask of q length `t` (a size of
    the graph), a sliding window allowed, at the traced sizes, the probe
    sizes and the reach."""
    made = _mask_function(gm, mask)
    if isinstance(made, str):
        return Verdict(made)
    fn, size_inputs, traced = made
    rows = int(t.node.hint) if isinstance(t, torch.SymInt) else int(t)
    # The traced sizes, then (sizes given as inputs) each probe size in
    # place of every size input, each size input through the probe sizes
    # with the others at 3, each size input one and two past every
    # constant's magnitude the mask's ops hold (_constants), with the others at 1 (a
    # window or a chunk of C keys shows only at lengths above C; triu(1 - W)
    # holds W - 1), and the reach (_reach: a window or a chunk that no
    # constant states shows there too): the mask must be causal at its q
    # length each time, narrowed by one sliding window wherever it is. A
    # case with more elements than the traced mask and the reach's (or,
    # with no reach, REACH_ELEMENTS) is not evaluated: the verdict
    # holds up to the longest q length evaluated (the graph's length
    # guarded to it), and a longer sequence is evaluated at its own length
    # when the graph compiles again.
    cases = [traced]
    if traced:
        n = len(traced)
        cases += [[p] * n for p in PROBE_SIZES]
        if n > 1:
            cases += [[p if j == i else 3 for j in range(n)]
                      for i in range(n) for p in PROBE_SIZES]
        # (The cases past constants join the list this loop walks once the
        # traced evaluation has folded the constants the ops compute.)
    q_size = G.size_expr(t)
    windows, causal_lengths = set(), []
    budget, reach = MAX_ELEMENTS, 0
    for values in cases:
        symbols = {G.size_expr(G.val(n)): v for n, v in zip(size_inputs, values)}
        elements = _elements(mask, symbols)
        if values is traced and elements > MAX_ELEMENTS:
            return Verdict("the mask has %d elements at the traced sizes (evaluated up to %d)"
                           % (elements, MAX_ELEMENTS))
        if elements > budget:
            continue
        folded = {}
        try:
            with torch.no_grad():
                value = _Folding(fn, folded).run(*values) if values is traced else fn(*values)
        except Exception as e:  # an op that needs the graph's device or state
            return Verdict("the mask could not be evaluated: %s: %s" % (
                type(e).__name__, str(e).splitlines()[0] if str(e) else ""))
        if values is traced and traced:
            constants = _constants(fn.graph.nodes, folded)
            if len(constants) > MAX_CONSTANTS:
                return Verdict("the mask's ops hold %d distinct constants (probed past up to %d)"
                               % (len(constants), MAX_CONSTANTS))
            cases += [[c + past if j == i else 1 for j in range(n)]
                      for c in constants for past in (1, 2) for i in range(n)]
            farthest = _reach(mask, size_inputs, q_size, rows, _upper(t))
            if isinstance(farthest, str):
                return Verdict(farthest)
            if farthest is not None:
                cases.append(farthest)
                # Each other size at the reach's value too, where the mask's
                # elements allow (a mask that reads another size: a window
                # among another input's first n tokens; a batch is too large).
                v = max(farthest)
                cases += [[v if j == i else f for j, f in enumerate(farthest)]
                          for i in range(n) if farthest[i] == 1]
            budget = max(elements, REACH_ELEMENTS if farthest is None else _elements(
                mask, {G.size_expr(G.val(n)): v for n, v in zip(size_inputs, farthest)}))
        if values is traced:
            length = rows
        else:
            try:
                length = int(q_size.subs(symbols))
            except (TypeError, ValueError):
                return Verdict("the q length %s is not a function of the size inputs" % q_size)
        reach = max(reach, length)
        band = _band(value, length)
        if band is None:
            return Verdict("the mask is not causal" + ("" if values is traced else
                                                       " at probe sizes %s" % values))
        if band:
            windows.add(band)
        else:
            causal_lengths.append(length)
    if len(windows) > 1:
        return Verdict("the mask's sliding window changes with the sizes (%s keys)"
                       % ", ".join(map(str, sorted(windows))))
    window = windows.pop() if windows else 0
    if window and max(causal_lengths, default=0) > window:
        return Verdict("the mask is causal at q length %d but narrowed to a window of %d keys "
                       "at others" % (max(causal_lengths), window))
    return Verdict(None, window, reach)


def note_strict_sizes(gm) -> None:
    """Notes the sizes of dynamo graph `gm`'s inputs that the user marked
    dynamic with a range (torch._dynamo.mark_dynamic(..., min=, max=)),
    for can_hold."""
    for n in gm.graph.nodes:
        if n.op != "placeholder":
            continue
        try:
            example = n.meta["grapharg"].example
        except Exception:  # (no dynamo argument, or its tensor is gone)
            continue
        value = n.meta.get("example_value")
        ranges = getattr(example, "_dynamo_dynamic_range", None)
        if not ranges or not isinstance(value, torch.Tensor):
            continue
        for r in ranges:
            if r.min is None and r.max is None:
                continue  # (torch 2.11 records plain mark_dynamic so: no range)
            size = value.shape[r.dim] if r.dim < value.dim() else None
            if isinstance(size, torch.SymInt):
                _STRICT.setdefault(size.node.shape_env, set()).update(
                    size.node.expr.free_symbols)


def can_hold(t, length: int) -> bool:
    """Whether a q length `t` may be held to `length` (hold): it is at most
    that at the traced sizes and, symbolic, was marked dynamic with no
    range past it (note_strict_sizes; a guard narrowing the range would
    break the one the user gave torch.compile: a
    ConstraintViolationError)."""
    if not isinstance(t, torch.SymInt):
        return int(t) <= length
    upper = _upper(t)
    if upper is None and t.node.expr.free_symbols & _STRICT.get(t.node.shape_env, set()):
        return False  # (a range with a min only: any guard narrows it)
    return t.node.hint is not None and t.node.hint <= length and \
        (upper is None or upper <= length)


def hold(t, length: int) -> bool:
    """Whether a q length `t` is at most `length` where it can_hold; where
    `t` is symbolic, a guard that it is (on the graph's shape environment:
    torch.compile compiles the graph again for a longer sequence; none
    where its bound says so already)."""
    if not can_hold(t, length):
        return False
    return bool(t <= length) if isinstance(t, torch.SymInt) else True


def guard_causal(verdict: Verdict, t) -> bool:
    """Whether the attention of q length `t` may run as plain causal
    attention: the mask is causal up to that length. The graph's length
    is then guarded to the verdict's reach, or, where a sliding window is
    wider than the traced length, to the window (torch.compile compiles
    the graph again for a longer one, which then sees the window)."""
    if verdict.why is not None:
        return False
    if not verdict.window:
        return hold(t, verdict.reach)
    # Longer than the window at the traced size: the window's mask (or
    # liger.attention's window) serves the lengths, no causal call.
    return hold(t, min(verdict.window, verdict.reach))


def _rewrite(gm, node) -> MaskLine:
    """Makes `node` (an SDPA call with a mask) causal without the mask
    where it can; its report line."""
    q, k = G.strip(node.args[0]), G.strip(node.args[1])
    if G.rank(q) != 4 or G.rank(k) != 4:
        return MaskLine(node, False, "q or k is not [B, H, T, D]")
    if not G.same_dim(G.shape(q)[-2], G.shape(k)[-2]):
        return MaskLine(node, False, "q and k have different lengths (a mask aligned to the "
                        "end of the keys)")
    if G.arg(node, 5, "is_causal", False):
        return MaskLine(node, False, "the call is causal and masked")
    mask = G.arg(node, 3, "attn_mask")
    t = G.shape(q)[-2]
    verdict = mask_verdict(gm, mask, t)
    if verdict.why is not None:
        return MaskLine(node, False, verdict.why)
    if not guard_causal(verdict, t):
        if not verdict.window:
            return MaskLine(node, False, SHORT_OF_BOUND % verdict.reach)
        node.meta[WINDOW_META] = verdict.window
        return MaskLine(node, False, "a causal mask with a sliding window of %d keys "
                        "(is_causal cannot say it)" % verdict.window)
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
    if not isinstance(t, torch.SymInt):
        return MaskLine(node, True)
    if verdict.window:
        return MaskLine(node, True, GUARDED % verdict.window, guarded_window=verdict.window)
    return MaskLine(node, True, REACHED % verdict.reach, guarded_length=verdict.reach)


def _remembered(gm) -> dict:
    """The verdicts remembered with `gm` (a GraphModule's meta; a bare
    graph remembers none)."""
    meta = getattr(gm, "meta", None)
    return meta.setdefault("liger_mask_verdicts", {}) if isinstance(meta, dict) else {}


def mask_verdict(gm, mask, t) -> Verdict:
    """The Verdict on `mask` (a node of `gm`; bool, or additive: 0 where
    attended) as the causal mask of q length `t`, computed from the graph's
    sizes alone, at the traced sizes, the probe sizes and the reach, narrowed by a
    sliding window or not. The rule recognise-causal-mask applies to SDPA's
    masks, for the masks an eager attention adds to its scores too.
    Remembered with the graph module (a mask every layer shares is
    evaluated once)."""
    verdicts = _remembered(gm)
    key = (mask, str(G.size_expr(t)))
    if key not in verdicts:
        verdicts[key] = _verdict(gm, mask, t)
    return verdicts[key]


def causal_masks(gm) -> List[MaskLine]:
    """Rewrites, in place, every SDPA call of `gm` (an aten FX graph module)
    whose mask is its causal mask computed from sizes; one report line per
    masked call. A call whose mask is causal with a sliding window keeps
    it, the window in its meta (WINDOW_META: liger.attention's window,
    recognise-attention's). A mask's subgraph goes with the last call that
    read it."""
    graph = getattr(gm, "graph", gm)
    lines, dropped = [], []
    for node in list(graph.nodes):
        if not G.is_op(node, aten.scaled_dot_product_attention.default):
            continue
        mask = G.arg(node, 3, "attn_mask")
        if mask is None:
            continue
        line = _rewrite(gm, node)
        lines.append(line)
        if line.rewritten:
            dropped.append(mask)
    # The masks' subgraphs, where nothing else reads them (the nodes only:
    # the rest of the graph is left as it is).
    G.erase_unread(graph, dropped)
    if dropped and isinstance(gm, torch.fx.GraphModule):
        gm.recompile()
    return lines
