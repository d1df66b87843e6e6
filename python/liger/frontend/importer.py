"""The FX importer: an aten graph and its records -> a liger-dialect module.

Records (recognize.py) become their liger ops; the aten ops that join them
become what the bundled Llama layer (examples/llama3_8b_decoder_layer.mlir)
uses between liger ops, which the fusion passes know:

    aten.linear, mm(x, t(W)), addmm(b, x, t(W))   liger.linear
    aten.add / aten.mul of equal shapes and dtypes  liger.add / liger.mul
    aten.silu, aten.gelu                            liger.silu, liger.gelu
    view/reshape that split or merge dimensions     tensor.expand_shape / tensor.collapse_shape
    transpose, permute, t                           linalg.transpose (into tensor.empty)

Identities (graph.py) are looked through. Whatever else the graph computes
is not imported and is never an error: it is a boundary, its values enter
the module as function arguments and the imported values it reads leave as
results. Only glue joined to a record is imported (a lone reshape is not a
layer). Sizes that torch.export traced symbolically (the tokens: batch and
sequence) print as `?`.

When an op that is not imported sits between imported ones (an eager
attention between the projections and the output projection, say), the
imported part is split where it must be: one function per stretch that
depends on the boundary's results, in order (`@name`, `@name_1`, ...). Each
split is a graph break of the summary line.
"""

from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional, Sequence, Set, Tuple

import sympy
import torch

from . import graph as G
from .graph import aten
from .recognize import Recognition, recognize
from .records import Record, format_op

class Unimportable(ValueError):
    """A part of the graph the importer took cannot be written (the message says why)."""


# Loss operands the dialect wants flat ([tokens, classes], [tokens]).
_FLAT_RANK = {"logits": 2, "hidden": 2, "target": 1}


@dataclass
class Emitted:
    """One op of an imported function as printed, with what the backward reads.

    op: `liger.<name>` or the layout op (`tensor.collapse_shape`, ...), ''
    for index arithmetic; operands: role -> SSA name; info: the reassociation,
    permutation or slice of a layout op.
    """

    line: str
    op: str = ""
    results: Tuple[str, ...] = ()
    operands: Dict[str, str] = field(default_factory=dict)
    attrs: Dict[str, Any] = field(default_factory=dict)
    info: Any = None


@dataclass
class Function:
    """One function of the module: the FX nodes its arguments and results hold.

    body: its ops in order; types: SSA name -> type of every value it defines
    or takes; parameters and returns: the SSA names of its arguments and
    results; values: SSA name -> the FX node whose value it is.
    """

    name: str
    arguments: List[object]
    results: List[object]
    ops: int = 0
    body: List[Emitted] = field(default_factory=list)
    types: Dict[str, str] = field(default_factory=dict)
    parameters: List[str] = field(default_factory=list)
    returns: List[str] = field(default_factory=list)
    values: Dict[str, object] = field(default_factory=dict)


@dataclass
class Imported:
    """A module imported from one graph, with how much of the graph it holds."""

    name: str
    mlir: str
    functions: List[Function]
    recognition: Recognition
    imported_nodes: int
    aten_nodes: int
    boundary: List[str] = field(default_factory=list)

    @property
    def graph_breaks(self) -> int:
        return max(len(self.functions) - 1, 0)

    def summary(self, kernels: Optional[int] = None) -> str:
        """`name: 61 of 64 aten nodes imported, 13 liger ops[, 8 kernels], 0 graph breaks`."""
        ops = sum(f.ops for f in self.functions)
        text = "%s: %d of %d aten nodes imported, %d liger ops" % (
            self.name, self.imported_nodes, self.aten_nodes, ops)
        if kernels is not None:
            text += ", %d kernels" % kernels
        return text + ", %d graph break%s" % (self.graph_breaks, "" if self.graph_breaks == 1 else "s")


# --- which nodes are imported ---------------------------------------------------

def _row_slice(node):
    """(linear node, first row, rows) when `node` takes a static slice of the last
    dimension of an aten.linear (Phi3's fused qkv_proj and gate_up_proj)."""
    rows = G.row_slice(node)
    if rows is None or not G.is_op(rows[0], aten.linear.default):
        return None
    return rows


def _linear_operands(node):
    """(x, W, bias) when `node` is a projection the importer writes as liger.linear.

    For a row slice of a projection, W and bias are (node, first row, rows):
    the slice of the output is the projection by those rows of the weight.
    """
    rows = _row_slice(node)
    if rows is not None:
        lin, start, count = rows
        bias = lin.args[2] if len(lin.args) > 2 and lin.args[2] is not None else None
        return (lin.args[0], (G.strip(lin.args[1]), start, count),
                (G.strip(bias), start, count) if bias is not None else None)
    if G.is_op(node, aten.linear.default):
        bias = node.args[2] if len(node.args) > 2 else None
        return node.args[0], node.args[1], bias
    if G.is_op(node, aten.mm.default):
        w = G.transposed(G.strip(node.args[1]))
        return (node.args[0], w, None) if w is not None else None
    if G.is_op(node, aten.addmm.default) and G.arg(node, 3, "beta", 1) == 1 \
            and G.arg(node, 4, "alpha", 1) == 1:
        w = G.transposed(G.strip(node.args[2]))
        bias = G.strip(node.args[0])
        if w is not None and G.rank(bias) == 1:
            return node.args[1], w, bias
    return None


def _tensor(operand):
    """The FX node of a linear operand (a row slice names its node first)."""
    if operand is None:
        return None
    return G.strip(operand[0] if isinstance(operand, tuple) else operand)


def _sliced(node, produced) -> bool:
    """A projection imported as the projections by its row slices."""
    readers = G.users(node)
    return G.is_op(node, aten.linear.default) and bool(readers) and all(
        u in produced or (_is_split(u) and all(g in produced for g in u.users)) for u in readers)


def _is_split(node) -> bool:
    return G.is_op(node, *G.SPLITS) and all(_row_slice(u) is not None for u in node.users)


def _reassociation(small, big) -> Optional[List[List[int]]]:
    """Groups of `big`'s dims whose sizes multiply to each of `small`'s dims."""
    groups, j = [], 0
    for i, size in enumerate(small):
        group, product = [], sympy.Integer(1)
        while j < len(big):
            group.append(j)
            product *= G.size_expr(big[j])
            j += 1
            if sympy.simplify(product - G.size_expr(size)) == 0:
                break
        else:
            return None
        if sympy.simplify(product - G.size_expr(size)) != 0:
            return None
        groups.append(group)
    while j < len(big):  # trailing unit dimensions join the last group
        if not (G.is_static(big[j]) and big[j] == 1) or not groups:
            return None
        groups[-1].append(j)
        j += 1
    return groups


def _reshape_kind(node):
    """('expand' | 'collapse', groups) for a view/reshape the tensor dialect can spell."""
    if not G.is_op(node, aten.view.default, aten.reshape.default, aten._unsafe_view.default):
        return None
    src, dst = G.shape(node.args[0]), G.shape(node)
    if len(dst) > len(src):
        groups = _reassociation(src, dst)
        return ("expand", groups) if groups else None
    if len(dst) < len(src):
        groups = _reassociation(dst, src)
        return ("collapse", groups) if groups else None
    return None


def _permutation(node) -> Optional[List[int]]:
    if G.is_op(node, aten.permute.default):
        r = G.rank(node)
        return [d % r for d in node.args[1]]
    if G.is_op(node, aten.transpose.int):
        r = G.rank(node)
        a, b = node.args[1] % r, node.args[2] % r
        perm = list(range(r))
        perm[a], perm[b] = perm[b], perm[a]
        return perm
    if G.is_op(node, aten.t.default) and G.rank(node) == 2:
        return [1, 0]
    return None


def _is_glue(node) -> bool:
    """Whether the importer can write this aten node as a liger or layout op."""
    if not G.is_tensor(node) or G.dtype(node) not in G.FLOATS:
        return False
    lin = _linear_operands(node)
    if lin is not None:
        if G.is_op(node, aten.linear.default) and G.users(node) \
                and all(_row_slice(u) is not None or _is_split(u) for u in G.users(node)):
            return False  # written as the projections by its row slices
        x, w, b = (_tensor(v) for v in lin)
        return (G.rank(w) == 2 and all(G.is_static(s) for s in G.shape(w))
                and G.dtype(x) == G.dtype(w) == G.dtype(node)
                and (b is None or (G.rank(b) == 1 and G.dtype(b) == G.dtype(node))))
    pair = G.binary(node, aten.add.Tensor, aten.mul.Tensor)
    if pair is not None:
        return all(isinstance(p, torch.fx.Node) and G.is_tensor(p) and G.same_shape(p, node)
                   and G.dtype(p) == G.dtype(node) for p in pair)
    if G.is_op(node, aten.silu.default):
        return True
    if G.is_op(node, aten.gelu.default):
        return G.arg(node, 1, "approximate", "none") in ("none", "tanh")
    if _reshape_kind(node) is not None:
        return True
    return _permutation(node) is not None


# --- the printer ----------------------------------------------------------------

class _Writer:
    """Prints one function: SSA names for nodes, index values, layout ops."""

    def __init__(self, names: Dict[object, str], locations: bool = False):
        self.names = names
        self.locations = locations
        self.body: List[Emitted] = []
        self.types: Dict[str, str] = {}
        self.constants: Dict[int, str] = {}
        self.dims: Dict[object, str] = {}
        self.sizes: Dict[object, tuple] = {}
        self.slices: Dict[tuple, str] = {}
        self.values: Dict[str, object] = {v: k for k, v in names.items()}
        self.fresh = 0

    def arguments(self, nodes: Sequence[object]) -> None:
        """Notes where each symbolic size can be read: the first argument that has it."""
        for node in nodes:
            if not G.is_tensor(node):
                continue
            for d, size in enumerate(G.shape(node)):
                if not G.is_static(size):
                    self.sizes.setdefault(G.size_expr(size), (node, d))

    def emit(self, line: str, op: str = "", results=(), types=(), operands=None, attrs=None,
             info=None) -> None:
        """Appends one op (`line` without its indentation); notes its results' types.

        With `locations`, an op that defines values carries the name of its
        first result as its location (`loc("mul_1")`), which liger-opt keeps
        through canonicalization and fusion: how a caller finds the FX nodes
        of a fused module's values.
        """
        if self.locations and line.startswith("%"):
            line += ' loc("%s")' % line.split(" ", 1)[0].rstrip(",")[1:]
        self.body.append(Emitted("  " + line, op, tuple(results), dict(operands or {}),
                                 dict(attrs or {}), info))
        self.types.update(zip(results, types))
        self.known(results)

    def known(self, results) -> None:
        """Notes the symbolic sizes of values now defined, as `arguments` does."""
        for name in results:
            node = self.values.get(name)
            if node is not None:
                self.arguments([node])

    @property
    def lines(self) -> List[str]:
        return [e.line for e in self.body]

    def value(self, node) -> str:
        return self.names[G.strip(node)]

    def new(self, hint: str) -> str:
        self.fresh += 1
        return "%%%s_%d" % (hint, self.fresh)

    def index(self, value: int) -> str:
        if value not in self.constants:
            name = "%%c%d" % value
            self.emit("%s = arith.constant %d : index" % (name, value))
            self.constants[value] = name
        return self.constants[value]

    def dim(self, node, d: int) -> str:
        """An index value holding size `d` of `node`.

        A symbolic size is read once per function from the first argument
        that has it (as the bundled layer reads %b and %t from %x), so the
        layout ops between liger ops read no intermediate of a chain.
        """
        size = G.shape(G.strip(node))[d]
        key = G.size_expr(size)
        if key not in self.dims:
            source, index = self.sizes.get(key, (G.strip(node), d))
            name = self.new("dim")
            self.emit("%s = tensor.dim %s, %s : %s" % (
                name, self.names[source], self.index(index), G.mlir_type(source)))
            self.dims[key] = name
        return self.dims[key]

    def split_sizes(self, src, i: int, sizes) -> List[str]:
        """The output sizes of a group of an expand_shape that splits size `i`
        of `src` into `sizes`: static ones as literals, a dynamic one read
        where a value of the function has that size, at most one divided out
        of the whole (the flattened tokens split into batch and sequence)."""
        out = [str(s) if G.is_static(s) else self.sizes.get(G.size_expr(s)) for s in sizes]
        unknown = [j for j, s in enumerate(out) if s is None]
        if len(unknown) > 1:
            raise Unimportable("no value of the function has the sizes %s of a split of %s"
                               % (", ".join(str(sizes[j]) for j in unknown), src.name))
        for j, s in enumerate(out):
            if s is not None and not G.is_static(sizes[j]):
                out[j] = self.dim(*s)
        if unknown:
            whole = self.dim(src, i)
            for j, s in enumerate(out):
                if j == unknown[0] or s == "1":
                    continue
                name = self.new("div")
                self.emit("%s = arith.divui %s, %s : index" % (
                    name, whole, self.index(int(s)) if G.is_static(sizes[j]) else s))
                whole = name
            out[unknown[0]] = whole
        return out

    def collapse(self, node, groups: List[List[int]], result_type: str) -> str:
        name = self.new("flat")
        self.emit("%s = tensor.collapse_shape %s %s : %s into %s" % (
            name, self.value(node), groups, G.mlir_type(G.strip(node)), result_type),
            "tensor.collapse_shape", [name], [result_type], {"input": self.value(node)},
            info=groups)
        return name

    def flat(self, node, rank: int):
        """(SSA name, type) of `node` with its leading dimensions merged into one."""
        node = G.strip(node)
        sizes = G.shape(node)
        if len(sizes) <= rank:
            return self.value(node), G.mlir_type(node)
        lead = len(sizes) - rank + 1
        groups = [list(range(lead))] + [[d] for d in range(lead, len(sizes))]
        merged = [sympy.Mul(*[G.size_expr(s) for s in sizes[:lead]])] + list(sizes[lead:])
        dims = ["%d" % int(m) if (isinstance(m, int) or getattr(m, "is_Integer", False)) else "?"
                for m in merged]
        flat_type = "tensor<%s>" % "x".join(dims + [G.DTYPES[G.dtype(node)]])
        return self.collapse(node, groups, flat_type), flat_type

    def rows(self, operand):
        """(SSA name, type) of a weight or bias, or of the rows a row slice takes."""
        if not isinstance(operand, tuple):
            return self.value(operand), G.mlir_type(G.strip(operand))
        node, start, count = operand
        sizes = list(G.shape(node))
        sizes[0] = count
        result = G.tensor_type(sizes, G.dtype(node))
        key = (node, start, count)
        if key not in self.slices:
            name = self.new("rows")
            offsets = [str(start)] + ["0"] * (len(sizes) - 1)
            self.emit("%s = tensor.extract_slice %s[%s] [%s] [%s] : %s to %s" % (
                name, self.value(node), ", ".join(offsets), ", ".join(str(d) for d in sizes),
                ", ".join(["1"] * len(sizes)), G.mlir_type(node), result),
                "tensor.extract_slice", [name], [result], {"input": self.value(node)},
                info=(offsets, sizes))
            self.slices[key] = name
        return self.slices[key], result

    def record(self, rec: Record) -> None:
        operands, types = {}, {}
        for name in rec.present():
            node = rec.operands[name]
            want = _FLAT_RANK.get(name) if rec.op in ("cross_entropy",
                                                      "fused_linear_cross_entropy") else None
            if want:
                operands[name], types[name] = self.flat(node, want)
            elif isinstance(node, tuple):  # (weight, first row, rows): a row slice
                operands[name], types[name] = self.rows(node)
            else:
                operands[name], types[name] = self.value(node), G.mlir_type(G.strip(node))
        results = [self.names[r] if r is not None else self.new("unused") for r in rec.results]
        result_types = [G.mlir_type(r) if r is not None else "" for r in rec.results]
        self.emit("%s = %s" % (", ".join(results), format_op(rec.op, operands, types, rec.attrs)),
                  "liger." + rec.op, results, result_types, operands, rec.attrs)

    def glue(self, node) -> None:
        out = self.names[node]
        lin = _linear_operands(node)
        if lin is not None:
            x, w, b = lin
            ops, types = {"input": self.value(x)}, {"input": G.mlir_type(G.strip(x))}
            ops["weight"], types["weight"] = self.rows(w)
            if b is not None:
                ops["bias"], types["bias"] = self.rows(b)
            self.emit("%s = %s" % (out, format_op("linear", ops, types, {})), "liger.linear",
                      [out], [G.mlir_type(node)], ops)
            return
        pair = G.binary(node, aten.add.Tensor, aten.mul.Tensor)
        if pair is not None:
            op = "add" if G.is_op(node, aten.add.Tensor) else "mul"
            ops = {"lhs": self.value(pair[0]), "rhs": self.value(pair[1])}
            self.emit("%s = %s" % (out, format_op(op, ops, {"lhs": G.mlir_type(node)}, {})),
                      "liger." + op, [out], [G.mlir_type(node)], ops)
            return
        if G.is_op(node, aten.silu.default, aten.gelu.default):
            op = "silu" if G.is_op(node, aten.silu.default) else "gelu"
            attrs = {"approximate": G.arg(node, 1, "approximate", "none")} if op == "gelu" else {}
            ops = {"input": self.value(node.args[0])}
            self.emit("%s = %s" % (out, format_op(op, ops, {"input": G.mlir_type(node)}, attrs)),
                      "liger." + op, [out], [G.mlir_type(node)], ops, attrs)
            return
        kind = _reshape_kind(node)
        if kind is not None:
            src = node.args[0]
            how, groups = kind
            if how == "collapse":
                self.emit("%s = tensor.collapse_shape %s %s : %s into %s" % (
                    out, self.value(src), groups, G.mlir_type(G.strip(src)), G.mlir_type(node)),
                    "tensor.collapse_shape", [out], [G.mlir_type(node)],
                    {"input": self.value(src)}, info=groups)
                return
            sizes = []
            for i, group in enumerate(groups):
                sizes += self.split_sizes(src, i, [G.shape(node)[d] for d in group])
            self.emit("%s = tensor.expand_shape %s %s output_shape [%s] : %s into %s" % (
                out, self.value(src), groups, ", ".join(sizes), G.mlir_type(G.strip(src)),
                G.mlir_type(node)), "tensor.expand_shape", [out], [G.mlir_type(node)],
                {"input": self.value(src)}, info=groups)
            return
        perm = _permutation(node)
        src = node.args[0]
        dynamic = [self.dim(src, perm[j]) for j, s in enumerate(G.shape(node)) if not G.is_static(s)]
        init = self.new("init")
        self.emit("%s = tensor.empty(%s) : %s" % (init, ", ".join(dynamic), G.mlir_type(node)))
        self.emit("%s = linalg.transpose ins(%s : %s) outs(%s : %s) permutation = %s" % (
            out, self.value(src), G.mlir_type(G.strip(src)), init, G.mlir_type(node), perm),
            "linalg.transpose", [out], [G.mlir_type(node)], {"input": self.value(src)}, info=perm)


# --- the driver -----------------------------------------------------------------

def _ssa(name: str) -> str:
    return "%" + "".join(c if c.isalnum() or c == "_" else "_" for c in name)


def import_graph(gm, name: str, recognition: Optional[Recognition] = None,
                 argument_names: Optional[Dict[str, str]] = None,
                 locations: bool = False) -> Imported:
    """Imports an aten FX graph (torch.export's or make_fx's) into a liger module.

    `argument_names` names the parameters' placeholders (by their module
    path); arguments are the graph's other inputs first, then parameters. The result holds the module text and, per function, the FX nodes
    its arguments and results are, so a caller can run it on the graph's
    values or put it back into the graph.
    """
    graph = getattr(gm, "graph", gm)
    found = recognition if recognition is not None else recognize(gm)
    order = {n: i for i, n in enumerate(graph.nodes)}
    covered = found.by_node()
    record_of: Dict[object, Record] = {}
    for r in found.records:
        for n in r.results:
            if n is not None:
                record_of[n] = r

    # Nodes that produce values in the module: record results and glue, plus
    # the identities of either.
    produced: Set[object] = set(record_of)
    for node in graph.nodes:
        if node.op == "call_function" and node not in covered and _is_glue(node):
            produced.add(node)
    produced = _joined(produced, record_of)

    def made(node) -> bool:
        return G.strip(node) in produced

    # Levels: a stretch of imported nodes after a boundary node it depends on
    # goes into a later function.
    # A node that is not imported but reads an imported value of level L
    # feeds level L + 1 (through every input: a boundary op with several
    # outputs passes its level to the getitems that read them).
    level: Dict[object, int] = {}
    for node in graph.nodes:
        if node in produced:
            inputs = [G.strip(a) for a in _inputs(node, record_of)]
            level[node] = max([level.get(a, 0) for a in inputs] + [0])
        else:
            inputs = [G.strip(a) for a in node.all_input_nodes]
            level[node] = max([level.get(a, 0) + (1 if a in produced else 0)
                               for a in inputs] + [0])
    units = sorted(produced, key=lambda n: order[n])
    functions: List[Function] = []
    bodies: List[str] = []
    names: Dict[object, str] = {}
    for node in graph.nodes:
        if node.op == "placeholder" and argument_names and node.name in argument_names:
            names[node] = _ssa(argument_names[node.name])
        else:
            names[node] = _ssa(node.name)
    levels = sorted({level[n] for n in units})
    emitted: Set[Record] = set()
    for index, lvl in enumerate(levels):
        members = [n for n in units if level[n] == lvl]
        fname = name if index == 0 else "%s_%d" % (name, index)
        writer = _Writer(names, locations)
        arguments: List[object] = _arguments(members, record_of, order, argument_names)
        writer.arguments(arguments)
        inside: Set[object] = set()
        absorbed: Set[object] = set()
        ops = 0
        for node in _topological(members, record_of, order):
            rec = record_of.get(node)
            if rec is not None:
                if rec in emitted:
                    continue
                emitted.add(rec)
                writer.record(rec)
                inside.update(n for n in rec.results if n is not None)
                absorbed.update(rec.covered)
            else:
                writer.glue(node)
                inside.add(node)
            ops += 1 if (rec is not None or _is_liger_glue(node)) else 0
        results = [n for n in sorted(inside, key=lambda n: order[n])
                   if _escapes(n, inside | absorbed, produced)]
        signature = ", ".join("%s: %s" % (names[a], G.mlir_type(a)) for a in arguments)
        result_types = ", ".join(G.mlir_type(r) for r in results)
        text = ["func.func @%s(%s) -> (%s) {" % (fname, signature, result_types)]
        text += writer.lines
        text.append("  return %s : %s" % (", ".join(names[r] for r in results), result_types))
        text.append("}")
        bodies.append("\n".join(text))
        types = dict(writer.types)
        types.update((names[a], G.mlir_type(a)) for a in arguments)
        values = {names[n]: n for n in list(arguments) + sorted(inside, key=lambda n: order[n])}
        functions.append(Function(fname, arguments, results, ops, writer.body, types,
                                  [names[a] for a in arguments], [names[r] for r in results],
                                  values))
    # Empty tensors (the pass-through half of a full rotary) count for nothing.
    aten_nodes = [n for n in graph.nodes if n.op == "call_function" and G.is_tensor(n)
                  and G.identity_source(n) is None and 0 not in G.shape(n)]
    imported = [n for n in aten_nodes if made(n) or n in covered or _sliced(n, produced)]
    boundary = sorted({str(n.target) for n in aten_nodes if not (made(n) or n in covered)})
    header = "// Imported by liger.frontend from an aten graph (%s).\n" % name
    return Imported(name, header + "\n\n".join(bodies) + "\n", functions, found, len(imported),
                    len(aten_nodes), boundary)


def _arguments(members, record_of, order, argument_names) -> List[object]:
    """The values a function reads and does not make: inputs first, then parameters."""
    made = set()
    for n in members:
        rec = record_of.get(n)
        made.update(r for r in (rec.results if rec else [n]) if r is not None)
    out: List[object] = []
    for n in members:
        for a in _inputs(n, record_of):
            a = G.strip(a)
            if a not in made and a not in out:
                out.append(a)
    named = argument_names or {}
    return sorted(out, key=lambda n: (n.op == "placeholder" and n.name in named, order[n]))


def _is_liger_glue(node) -> bool:
    return (_linear_operands(node) is not None or G.is_op(node, aten.silu.default, aten.gelu.default)
            or G.binary(node, aten.add.Tensor, aten.mul.Tensor) is not None)


def _inputs(node, record_of) -> List[object]:
    """The tensors a node reads (a record's operands; a glue op's tensor operands)."""
    rec = record_of.get(node)
    if rec is not None:
        return [_tensor(v) for v in rec.operands.values() if v is not None]
    if node.op != "call_function":
        return []
    lin = _linear_operands(node)
    if lin is not None:
        return [_tensor(v) for v in lin if v is not None]
    pair = G.binary(node, aten.add.Tensor, aten.mul.Tensor)
    if pair is not None:
        return [a for a in pair if isinstance(a, torch.fx.Node)]
    return [a for a in node.all_input_nodes if G.is_tensor(a)]


def _joined(produced: Set[object], record_of) -> Set[object]:
    """The produced nodes connected (through produced nodes) to a record."""
    neighbours: Dict[object, Set[object]] = {n: set() for n in produced}
    for n in produced:
        for a in _inputs(n, record_of):
            a = G.strip(a)
            if a in produced:
                neighbours[n].add(a)
                neighbours[a].add(n)
    keep: Set[object] = set()
    for start in record_of:
        if start in keep:
            continue
        stack = [start]
        while stack:
            n = stack.pop()
            if n in keep:
                continue
            keep.add(n)
            stack.extend(neighbours[n] - keep)
    return keep


def _topological(members, record_of, order):
    """Members in graph order, a record placed after every operand it reads."""
    pending = list(members)
    done: Set[object] = set()
    member_set = set(members)
    out = []
    while pending:
        for i, node in enumerate(pending):
            rec = record_of.get(node)
            group = [n for n in rec.results if n is not None] if rec else [node]
            needs = [G.strip(a) for g in group for a in _inputs(g, record_of)]
            if all(a in done or a not in member_set or a in group for a in needs):
                for g in group:
                    done.add(g)
                    if g in pending:
                        pending.remove(g)
                out.extend(group)
                break
        else:
            raise AssertionError("cycle among imported nodes")
    return out


def _escapes(node, inside: Set[object], produced: Set[object]) -> bool:
    """Read by a node outside the function (or returned by the graph).

    An empty tensor read from it (the pass-through half of a full rotary)
    and a projection imported as its row slices read nothing.
    """
    for user in node.users:
        if user.op == "output":
            return True
        if G.is_op(user, *G.ASSERTS):
            continue
        if G.identity_source(user) is node:
            if _escapes(user, inside, produced):
                return True
            continue
        if G.is_tensor(user) and 0 in G.shape(user):
            continue
        if G.is_op(user, aten.linear.default) and _sliced(user, produced):
            continue
        if user not in inside:
            return True
    return False
