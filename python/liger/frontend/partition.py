"""One graph after autograd -> fusion groups, each one operator call.

The torch.compile backend hands every forward and backward graph that
AOTAutograd makes to `partition` before Inductor compiles it:

1. recognition (liger operators, the matrix products autograd leaves, the
   torch subgraphs of recognize.py) and the importer write the graph's
   liger part as a liger module, each op located by the FX node it
   computes (`loc("mul_1")`);
2. liger-opt runs `liger-fuse` (its report is kept) and prints the module
   with those locations;
3. `parse_fused` reads each function's `liger.fusion` groups: their
   operands and results, found as FX values through the locations (an
   operand the importer sliced from a weight is that slice of it);
4. each group that fuses more than one op becomes a `Unit`: a module of
   its own (`@group`, numbered canonically, so its key names its content),
   whose kernels come from the bundle cache ($LIGER_OPS_BUNDLES,
   the user's cache, or liger-compile) through liger.bundles, or, on CPU
   tensors, its reference function;
5. the graph calls `liger::fusion_group(key, inputs)` in place of the
   group's nodes, and what no unit took (views, the embedding, a
   projection no group holds, a liger operator that runs as itself, such
   as liger::attention and liger::attention_backward, which no group
   takes) stays for Inductor.

A group whose kernel cannot be made (no template, an unsupported dtype or
size, no compiler and nothing precompiled) stays with Inductor, with one
warning naming it and the reason; a group whose operands or results cannot
be found in the graph stays too (the report says so).
"""

import dataclasses
import hashlib
import json
import operator
import os
import re
import tempfile
import warnings
from dataclasses import dataclass, field
from typing import ClassVar, Dict, List, Optional, Sequence, Tuple

import torch
from torch.fx.passes.tools_common import stable_topological_sort

from .. import bundles, driver, specs
from ..errors import LigerError, LigerFallbackWarning
from . import graph as G
from . import liger_operators
from .group_ops import register_unit
from .importer import Imported, Unimportable, import_graph
from .recognize import recognize

_LOC = re.compile(r'loc\((?:fused\[)?"([^"]+)"')
_SSA = re.compile(r"%[A-Za-z0-9_$.-]+")
_TRAILING_LOC = re.compile(r"\s*loc\((?:[^()]|\([^()]*\))*\)\s*$")


# --- the fused module -------------------------------------------------------------

@dataclass
class Op:
    """One top-level op of a fused function: its result names, op, text, location."""

    results: List[str]
    op: str
    text: str
    loc: Optional[str]


@dataclass
class Group:
    """One `liger.fusion` group of a fused function."""

    function: str
    kind: str
    operands: List[str]
    operand_types: List[str]
    result_types: List[str]
    results: List[str]
    region: List[str]
    yields: List[str]
    inner: Dict[str, Tuple["Op", int]]
    loc: Optional[str]

    def ops(self) -> List[str]:
        """The liger ops it fuses, in order (`liger.linear, liger.swiglu`)."""
        return [m.group(1) for m in (re.search(r"= (liger\.\w+)", r) for r in self.region) if m]


@dataclass
class Fused:
    """A fused module: per function, its top-level values and groups."""

    values: Dict[str, Dict[str, Tuple[Op, int]]] = field(default_factory=dict)
    groups: List[Group] = field(default_factory=list)
    returns: Dict[str, List[str]] = field(default_factory=dict)


def _results(lhs: str) -> List[str]:
    """`%5:2` -> [%5#0, %5#1]; `%a, %b` -> [%a, %b]; `%x` -> [%x]."""
    lhs = lhs.strip()
    m = re.fullmatch(r"(%[\w$.-]+):(\d+)", lhs)
    if m:
        return ["%s#%d" % (m.group(1), i) for i in range(int(m.group(2)))]
    return [r.strip() for r in lhs.split(",")]


def _op_of(line: str) -> Optional[Op]:
    m = re.match(r"\s*(%[^=]+?) = ([\w.]+)", line)
    if not m:
        return None
    loc = _LOC.search(line[line.rfind("loc("):]) if "loc(" in line else None
    return Op(_results(m.group(1)), m.group(2), line, loc.group(1) if loc else None)


def _types(text: str) -> List[str]:
    text = text.strip()
    if text.startswith("("):
        text = text[1:-1]
    return [t.strip() for t in text.split(",") if t.strip()]


def parse_fused(text: str) -> Fused:
    """Reads liger-opt's print of a fused module (with --mlir-print-debuginfo
    --mlir-print-local-scope)."""
    out = Fused()
    lines = text.splitlines()
    function = None
    i = 0
    while i < len(lines):
        line = lines[i]
        head = re.match(r"\s*func\.func @([\w$.-]+)\(", line)
        if head:
            function = head.group(1)
            out.values[function] = {}
            i += 1
            continue
        group = re.match(r"(\s*)(%[^=]+?) = liger\.fusion (\w+)\(([^)]*)\) : "
                         r"\(([^)]*)\) -> (.*) \{$", line)
        if group and function:
            indent = group.group(1)
            region, j = [], i + 1
            while j < len(lines) and not lines[j].startswith(indent + "}"):
                region.append(lines[j])
                j += 1
            loc = _LOC.search(lines[j]) if j < len(lines) else None
            inner: Dict[str, Tuple[Op, int]] = {}
            yields: List[str] = []
            for r in region:
                op = _op_of(r)
                if op is not None:
                    for k, name in enumerate(op.results):
                        inner[name] = (op, k)
                y = re.match(r"\s*liger\.yield (.*?) :", r)
                if y:
                    yields = [v.strip() for v in y.group(1).split(",")]
            results = _results(group.group(2))
            g = Group(function, group.group(3), [o.strip() for o in group.group(4).split(",")
                                                 if o.strip()],
                      _types(group.group(5)), _types(group.group(6)), results, region, yields,
                      inner, loc.group(1) if loc else None)
            out.groups.append(g)
            whole = Op(results, "liger.fusion", line, g.loc)
            for k, name in enumerate(results):
                out.values[function][name] = (whole, k)
            i = j + 1
            continue
        ret = re.match(r"    return (.*?) :", line)
        if ret and function:
            out.returns[function] = [v.strip() for v in ret.group(1).split(",")]
        op = _op_of(line)
        if op is not None and function:
            for k, name in enumerate(op.results):
                out.values[function][name] = (op, k)
        i += 1
    return out


# --- units ------------------------------------------------------------------------

@dataclass
class Input:
    """How one kernel input is made from the call's inputs: input `index`,
    then `slices` ((dim, start, size), ...) and a `collapse` of dimensions."""

    index: int
    slices: Tuple[Tuple[int, int, int], ...] = ()
    collapse: Optional[Tuple[Tuple[int, ...], ...]] = None

    def make(self, inputs):
        t = inputs[self.index]
        for dim, start, size in self.slices:
            t = t.narrow(dim, start, size)
        if self.collapse is not None:
            sizes = [1] * len(self.collapse)
            for k, group in enumerate(self.collapse):
                for d in group:
                    sizes[k] = sizes[k] * t.shape[d]
            t = t.reshape(sizes)
        return t.contiguous()


# One output size: coefficient * product of the call's input sizes (input, dim).
Size = Tuple[int, Tuple[Tuple[int, int], ...]]


def _size_rule(size, inputs: Sequence[Tuple]) -> Size:
    if G.is_static(size):
        return int(size), ()
    coeff, factors = G.size_expr(size).as_coeff_mul()
    dims = []
    for factor in factors:
        base, power = factor.as_base_exp()
        if not (base.is_Symbol and power.is_Integer and power > 0):
            raise Unimportable("the size %s is not a product of input sizes" % size)
        where = next(((i, d) for i, shape in enumerate(inputs) for d, s in enumerate(shape)
                      if not G.is_static(s) and G.size_expr(s) == base), None)
        if where is None:
            raise Unimportable("no input of the group has the size %s" % base)
        dims += [where] * int(power)
    if not coeff.is_Integer:
        raise Unimportable("the size %s is not a product of input sizes" % size)
    return int(coeff), tuple(dims)


def _size(rule: Size, inputs):
    coeff, dims = rule
    out = coeff
    for i, d in dims:
        out = out * inputs[i].shape[d]
    return out


@dataclasses.dataclass(frozen=True)
class GroupSpec(specs.Spec):
    """A unit's module as liger.bundles finds or compiles its kernels: the
    module text and the target name its bundle (its key), so a precompiled
    cache ($LIGER_OPS_BUNDLES) serves it where no compiler is."""

    op: ClassVar[str] = "fusion_group"
    # A model's groups differ by their graphs, each compiled once per
    # torch.compile graph (bounded by dynamo's recompile limit).
    COUNTED: ClassVar[bool] = False
    text: str = ""
    name: str = ""
    target: str = specs.DEFAULT_TARGET

    def _checked(self):
        return dict(target=specs.check_choice("target", self.target, specs.TARGETS))

    def __str__(self):
        return "fusion group %s" % self.name

    def module_text(self):
        return self.text

    def compile_options(self):
        """The groups are made already (no liger-fuse); matmul groups need
        the matmul templates."""
        if self.target == specs.REFERENCE_TARGET:
            return dict(target=self.target)
        return dict(target=self.target, fuse=False, matmul_kernels=True)


@dataclass(eq=False)
class Unit:
    """One fusion group as an operator call: `run(inputs)` on the call's
    inputs (torch tensors), `outputs_like(inputs)` for fake ones."""

    name: str
    kind: str
    ops: List[str]
    spec: GroupSpec
    inputs: List[Input]
    shapes: List[List[Size]]
    dtypes: List[torch.dtype]
    kernel: object = None

    def group(self) -> str:
        """`matmul (liger.linear, liger.linear, liger.swiglu)`."""
        return "%s (%s)" % (self.kind, ", ".join(self.ops))

    @property
    def key(self) -> str:
        """The group's bundle key and how the call's inputs make its
        operands and its outputs' shapes: units of one group text called
        differently (a weight sliced, or not) are different calls."""
        convention = repr((self.inputs, self.shapes, [str(d) for d in self.dtypes]))
        return "%s-%s" % (self.spec.key(), hashlib.sha256(convention.encode()).hexdigest()[:12])

    def outputs_like(self, inputs):
        device = inputs[0].device
        return [torch.empty([_size(r, inputs) for r in rule], dtype=dt, device=device)
                for rule, dt in zip(self.shapes, self.dtypes)]

    def run(self, inputs):
        got = self.kernel(*[i.make(inputs) for i in self.inputs])
        got = list(got) if isinstance(got, (tuple, list)) else [got]
        out = []
        for t, rule, dt in zip(got, self.shapes, self.dtypes):
            shape = [_size(r, inputs) for r in rule]
            out.append(t.reshape(shape).to(dt))
        return out


# --- from a fused group to a unit --------------------------------------------------

class _Resolver:
    """Finds the FX value of a fused function's SSA names."""

    def __init__(self, fused: Fused, imported: Imported):
        self.fused = fused
        self.functions = {f.name: f for f in imported.functions}
        self.emitted = {}
        for f in imported.functions:
            table = self.emitted[f.name] = {}
            for e in f.body:
                if e.results:
                    table[e.results[0][1:]] = e

    def group_output(self, group: Group, k: int):
        """The FX node a group's result k is: the value of the op that computes
        it inside the group, or, for an op a fusion pass made (an add and an
        RMSNorm as one add_rms_norm), the function result it is returned as."""
        name = group.yields[k]
        if name not in group.inner:
            raise Unimportable("its result %d is not computed inside it" % k)
        op, index = group.inner[name]
        try:
            return self.node_of(group.function, op, index, group.result_types[k])
        except Unimportable:
            position = self.fused.returns.get(group.function, []).index(group.results[k]) \
                if group.results[k] in self.fused.returns.get(group.function, []) else None
            if position is None:
                raise
            return self.functions[group.function].results[position]

    def node_of(self, function: str, op: Op, index: int, type_: str):
        """The FX node of result `index` of `op`, checked against its type."""
        e = self.emitted[function].get(op.loc)
        if e is None or (op.op != e.op and e.op) or index >= len(e.results):
            raise Unimportable("%s at loc(%s) is not an op the importer wrote" % (op.op, op.loc))
        node = self.functions[function].values.get(e.results[index])
        if node is None or G.mlir_type(node) != type_:
            raise Unimportable("%s at loc(%s) is not the graph value it was written for"
                               % (op.op, op.loc))
        return node

    def operand(self, function: str, name: str, type_: str, depth: int = 0):
        """(FX node, slices, collapse) an operand of a group is made from."""
        f = self.functions[function]
        m = re.fullmatch(r"%arg(\d+)", name)
        if m:
            node = f.arguments[int(m.group(1))]
            if G.mlir_type(node) != type_:
                raise Unimportable("argument %s is not the graph value it was written for" % name)
            return node, (), None
        op, index = self.fused.values[function].get(name, (None, 0))
        if op is None:
            raise Unimportable("%s is not defined at the top of @%s" % (name, function))
        if op.op == "liger.fusion":
            group = next(g for g in self.fused.groups if g.function == function
                         and name in g.results)
            return self.group_output(group, group.results.index(name)), (), None
        e = self.emitted[function].get(op.loc)
        if e is not None and index < len(e.results) and e.results[index] in f.values:
            return self.node_of(function, op, index, type_), (), None
        if depth > 2:
            raise Unimportable("%s is made by a chain of layout ops" % name)
        src = re.search(r"%s (%%[\w$.#-]+)" % re.escape(op.op), op.text)
        if op.op == "tensor.extract_slice":
            m = re.search(r"\[([\d, ]*)\] \[([\d, ]*)\] \[([\d, ]*)\]", op.text)
            if not m or set(_ints(m.group(3))) != {1}:
                raise Unimportable("%s is a strided or dynamic slice" % name)
            node, slices, collapse = self.operand(function, src.group(1),
                                                  self._type_of(op.text, 0), depth + 1)
            if collapse is not None:
                raise Unimportable("%s slices a collapsed value" % name)
            full = G.shape(node)
            cut = tuple((d, o, s) for d, (o, s) in enumerate(zip(_ints(m.group(1)),
                                                                  _ints(m.group(2))))
                        if (o, s) != (0, full[d]))
            return node, slices + cut, None
        if op.op == "tensor.collapse_shape":
            groups = re.search(r"(\[\[.*?\]\])", op.text)
            node, slices, collapse = self.operand(function, src.group(1),
                                                  self._type_of(op.text, 0), depth + 1)
            if collapse is not None:
                raise Unimportable("%s collapses a collapsed value" % name)
            return node, slices, tuple(tuple(g) for g in json.loads(groups.group(1)))
        raise Unimportable("%s is made by %s, which is not a value of the graph" % (name, op.op))

    @staticmethod
    def _type_of(text: str, k: int) -> str:
        """The type of the k-th operand of a layout op (`: T to U`, `: T into U`)."""
        return re.search(r": (tensor<[^>]*>) (?:to|into) ", text).group(1)


def _ints(text: str) -> List[int]:
    return [int(v) for v in text.split(",") if v.strip()]


def _canonical(text: str) -> str:
    """SSA names renumbered in order of appearance, locations dropped."""
    names: Dict[str, str] = {}

    def rename(m):
        token = m.group(0)
        if token not in names:
            names[token] = "%%v%d" % len(names)
        return names[token]
    out = []
    for line in text.splitlines():
        line = _TRAILING_LOC.sub("", line)
        line = re.sub(r" loc\((?:[^()]|\([^()]*\))*\)", "", line)
        out.append(_SSA.sub(rename, line))
    return "\n".join(out) + "\n"


def group_text(group: Group) -> str:
    """The module of one group: @group(its operands) -> its results."""
    args = ["%%in%d" % i for i in range(len(group.operands))]
    many = len(group.result_types) > 1
    results = ", ".join(group.result_types)
    out = "%%out:%d" % len(group.result_types) if many else "%out"
    outs = ["%%out#%d" % i for i in range(len(group.result_types))] if many else ["%out"]
    body = ["func.func @group(%s) -> (%s) {" % (
        ", ".join("%s: %s" % (a, t) for a, t in zip(args, group.operand_types)), results),
        "  %s = liger.fusion %s(%s) : (%s) -> %s {" % (
            out, group.kind, ", ".join(args), ", ".join(group.operand_types),
            "(%s)" % results if many else results)]
    body += ["  " + line.strip() for line in group.region]
    body += ["  }", "  return %s : %s" % (", ".join(outs), results), "}"]
    return _canonical("\n".join(body))


# --- the partition --------------------------------------------------------------

@dataclass
class Left:
    """A fusion group left to Inductor, and why: by the backend's policy (a
    choice its options change), because its graph does not map onto a
    kernel's call (structure), or because no kernel could be compiled or
    found for it (`warned`: one LigerFallbackWarning said so)."""

    label: str
    kind: str
    ops: List[str]
    reason: str
    policy: bool = False
    warned: bool = False

    def group(self) -> str:
        """`matmul (liger.linear, liger.linear, liger.swiglu)`."""
        return "%s (%s)" % (self.kind, ", ".join(self.ops))

    def __str__(self) -> str:
        return "%s (%s): %s" % (self.label, ", ".join(self.ops), self.reason)


@dataclass
class Partition:
    """What `partition` did to one graph (for the reports)."""

    name: str
    recognition: List[str] = field(default_factory=list)
    fusion: List[str] = field(default_factory=list)
    units: List[Unit] = field(default_factory=list)
    left: List[Left] = field(default_factory=list)
    operators: int = 0
    aten_nodes: int = 0
    covered_nodes: int = 0
    inductor: List[str] = field(default_factory=list)
    in_place: List[str] = field(default_factory=list)  # inplace.reuse_saved_inputs'
    mlir: str = ""
    fused: str = ""
    error: Optional[str] = None

    def summary(self) -> str:
        kernels = len(self.units) + self.operators
        return ("%s: %d of %d aten nodes in liger kernels, %d kernel%s (%d fusion group%s, %d "
                "liger operator%s)" % (self.name, self.covered_nodes, self.aten_nodes, kernels,
                                       "" if kernels == 1 else "s", len(self.units),
                                       "" if len(self.units) == 1 else "s", self.operators,
                                       "" if self.operators == 1 else "s"))


def _fuse_flags(fused_mlp: bool) -> List[str]:
    """liger-opt's flags: liger-fuse with its report, and with the gated
    activations' gradients in the down projection's dx kernel where
    `fused_mlp` (the flags are part of a fused graph's cache key)."""
    fuse = "--liger-fuse=report=true" + (" gradient-epilogues=true" if fused_mlp else "")
    return ["--canonicalize", fuse, "--mlir-print-debuginfo", "--mlir-print-local-scope"]


POLICY_SEVERAL_RESULTS = (
    "a matmul kernel of several results (projections kept for the backward beside their "
    "activation, as a training MLP's) runs with the backend option fused_mlp=True (off by "
    "default)")


def _policy(group: "Group", fused_mlp: bool) -> Optional[str]:
    """Why the backend leaves a group it could compile to Inductor, or None.
    A training MLP's projections kept for the backward beside their
    activation (a matmul kernel of several results: the gated pair's gate
    and up, or a projection's pre-activation) are the backend option
    fused_mlp's, off by default: not yet measured faster than cuBLAS's
    projections and the activation's kernel. (RoPE's q and k are one
    kernel's two results by design.)"""
    if fused_mlp or group.kind != "matmul" or len(group.results) < 2:
        return None
    if "liger.rope" in group.ops():
        return None
    return POLICY_SEVERAL_RESULTS


_LOC_NAME = re.compile(r'loc\("([^"]+)"\)')


# The graph's name in a canonical module (a graph that dynamo compiles
# again, for a longer sequence past a mask's reach, is the same module under
# another name).
_GRAPH_NAME = "liger_graph"


def _canonical_names(text: str, graph: Optional[str] = None) -> Tuple[str, Dict[str, str]]:
    """The imported module with its SSA names and locations renumbered in
    order of appearance (the FX node names they come from differ between a
    GPU's graph and the CPU's of the same model) and the name of its graph,
    `graph`, made _GRAPH_NAME, and the way back: canonical location -> the
    node's name."""
    back: Dict[str, str] = {}
    names: Dict[str, str] = {}

    def loc(m):
        canonical = names.setdefault('"%s"' % m.group(1), "l%d" % len(names))
        back[canonical] = m.group(1)
        return 'loc("%s")' % canonical
    text = _LOC_NAME.sub(loc, text)
    ssa: Dict[str, str] = {}
    text = _SSA.sub(lambda m: ssa.setdefault(m.group(0), "%%v%d" % len(ssa)), text)
    # (after the locations: a node's name may hold the graph's)
    return text.replace(graph, _GRAPH_NAME) if graph else text, back


# Beside a precompile's fused graphs: the torch that traced them. Another
# torch traces other graphs (its decompositions and partitioner differ), so
# they are not found by key; the fallback says why.
_TORCH_VERSION_FILE = "torch-version"


def _other_torch() -> str:
    """' (precompiled under torch X, this is torch Y)' where a precompile
    in LIGER_OPS_BUNDLES was traced by another torch; '' otherwise."""
    for root in bundles.precompiled_roots():
        try:
            with open(os.path.join(root, "fused", _TORCH_VERSION_FILE)) as f:
                version = f.read().strip()
        except OSError:
            continue
        if version != torch.__version__:
            return (" (its precompile in %s was traced by torch %s, this is torch %s: each "
                    "traces its own graphs)" % (root, version, torch.__version__))
    return ""


def _fuse(text: str, into: Optional[str], fused_mlp: bool = False,
          graph: Optional[str] = None) -> Tuple[str, List[str]]:
    """(fused module, liger-fuse's report) of an imported module (of the
    graph named `graph`): liger-opt's, kept in `into` (a precompile cache)
    as well; where liger-opt is not installed, the one a precompile kept
    ($LIGER_OPS_BUNDLES), found by the module's canonical text."""
    canonical, back = _canonical_names(text, graph)
    flags = _fuse_flags(fused_mlp)
    key = hashlib.sha256(("\n".join(flags) + "\n" + canonical).encode()).hexdigest()[:32]
    try:
        tool = driver.find_tool("liger-opt")
    except LigerError as e:
        for root in bundles.precompiled_roots():
            path = os.path.join(root, "fused", key + ".json")
            if os.path.isfile(path):
                with open(path) as f:
                    kept = json.load(f)
                fused, report = kept["fused"], kept["report"]
                break
        else:
            raise LigerError("%s, and no precompile of this graph is in LIGER_OPS_BUNDLES%s: "
                             "precompile the model's kernels where the compiler is "
                             "(liger.frontend.backend.precompile)"
                             % (str(e).splitlines()[0], _other_torch()))
    else:
        with tempfile.TemporaryDirectory(prefix="liger-fuse-") as tmp:
            path = os.path.join(tmp, "fused.mlir")
            report = driver.run_opt(canonical, flags + ["-o", path], tool).splitlines()
            with open(path) as f:
                fused = f.read()
        if into:
            os.makedirs(os.path.join(into, "fused"), exist_ok=True)
            with open(os.path.join(into, "fused", key + ".json"), "w") as f:
                json.dump(dict(fused=fused, report=report), f)
            with open(os.path.join(into, "fused", _TORCH_VERSION_FILE), "w") as f:
                f.write(torch.__version__ + "\n")

    def named(line):
        # (the graph's name first: a node's name may hold _GRAPH_NAME)
        line = line.replace(_GRAPH_NAME, graph) if graph else line
        return _LOC_NAME.sub(lambda m: 'loc("%s")' % back.get(m.group(1), m.group(1)), line)
    return named(fused), [named(line) for line in report]


def _where(line: str, names: Dict[str, object]) -> str:
    """A report line with its `loc("node")` replaced by where the node comes from."""
    def place(m):
        node = names.get(m.group(1))
        return G.where(node) if node is not None else m.group(0)
    return re.sub(r'loc\("([^"]+)"\)', place, line)


def _is_operator_call(node) -> bool:
    t = getattr(node, "target", None)
    return getattr(t, "namespace", None) == "liger"


def _call_of(node):
    """The liger operator call whose output `node` is, or None."""
    if _is_operator_call(node):
        return node
    if node.op == "call_function" and node.target is operator.getitem \
            and _is_operator_call(node.args[0]):
        return node.args[0]
    return None


def _runs_kernels(node) -> bool:
    """A liger operator call that runs kernels of its own."""
    entry = liger_operators.by_target(node.target)
    return entry is None or entry.kernels


@dataclass(frozen=True)
class KernelTarget:
    """A GPU target that a CPU reference run also compiles for (the backend's
    kernel_target): the kernels a GPU of that target will run, made and
    decided here, into `into` (precompile_dir) or the user's bundle cache."""

    target: str
    into: Optional[str] = None

    def bundle(self, spec) -> str:
        """The path of `spec`'s bundle for the target; LigerError with
        liger-compile's reason where it makes none."""
        spec = spec.with_target(self.target)
        return _compiled(lambda: bundles.precompile(self.into, [spec])[0] if self.into
                         else bundles.bundle_path(spec))


def _compiled(make) -> str:
    """make(), a bundle's path; LigerError with liger-compile's warning (what
    left a group without a kernel) where it fails."""
    try:
        return make()
    except LigerError as e:
        found = re.findall(r"warning: (.*)", e.diagnostics or "")
        message = str(e)
        if not found and "liger-compile is not installed here" in message:
            found = ["no compiled kernel for it%s and liger-compile is not installed here: "
                     "precompile the model's kernels where the compiler is "
                     "(liger.frontend.backend.precompile)" % re.search(
                         r"( \(target [^)]*\)(?: in LIGER_OPS_BUNDLES=\S+)?,)", message).group(1)]
        raise LigerError(found[0] if found else message.splitlines()[0]) from None


def _one_kernel(path: str) -> str:
    """`path`, the bundle of a group, once it holds the group's one kernel."""
    with open(os.path.join(path, "manifest.json")) as f:
        kernels = [k["name"] for m in json.load(f)["modules"] for k in m["kernels"]
                   if k["function"] == "group"]
    if len(kernels) != 1:
        raise LigerError("liger-compile made %d kernels of it, not one" % len(kernels))
    return path


def _kernel(spec: GroupSpec, check: Optional[KernelTarget]):
    """The callable that runs a unit's group: its kernel, or its reference
    function; raises LigerError saying why there is none. With `check` (CPU
    reference runs) the group must also compile for that GPU target."""
    if check is not None:
        _one_kernel(check.bundle(spec))
    if spec.target == specs.REFERENCE_TARGET:
        return bundles.load(spec)["group_ref_0"]
    _one_kernel(_compiled(lambda: bundles.bundle_path(spec)))
    (kernel,) = bundles.load(spec).kernels_of("group")
    return kernel


def partition(gm, name: str, target: str, fake_mode, check: Optional[KernelTarget] = None,
              dump=None, fused_mlp: bool = False) -> Partition:
    """Rewrites `gm` (an AOTAutograd graph) so each fusion group liger makes
    a kernel of is one liger::fusion_group call; returns what it did
    (`fused_mlp`: the backend option, see _policy)."""
    out = Partition(name)
    aten = {n.name for n in gm.graph.nodes if _counted(n)}
    out.aten_nodes = len(aten)
    found = recognize(gm)
    out.recognition = found.lines()
    try:
        imported = import_graph(gm, name, found, locations=True)
    except Unimportable as e:
        out.error = "the importer could not write it: %s" % e
        return _finish(out, gm, aten)
    out.mlir = imported.mlir
    if dump:
        dump("%s.recognition.txt" % name, "\n".join(out.recognition))
        dump("%s.mlir" % name, imported.mlir)
    if not any(f.ops for f in imported.functions):
        return _finish(out, gm, aten)
    fused, report = _fuse(imported.mlir, check.into if check is not None else None, fused_mlp,
                          name)
    out.fused = fused
    if dump:
        dump("%s.fused.mlir" % name, fused)
    names = {}
    for f in imported.functions:
        for ssa, node in f.values.items():
            names[ssa[1:]] = node
    out.fusion = [_where(line, names) for line in report]
    parsed = parse_fused(fused)
    resolver = _Resolver(parsed, imported)
    replaced = {}
    for index, group in enumerate(parsed.groups):
        label = "%s/%s %s" % (name, group.kind, index)
        # (The policy is the GPU's: a CPU reference run without a kernel
        # target runs every group's reference function.)
        why = _policy(group, fused_mlp) if target != specs.REFERENCE_TARGET or check else None
        if why is not None:
            out.left.append(Left(label, group.kind, group.ops(), why, policy=True))
            continue
        try:
            unit, inputs, outputs = _unit(group, resolver, "%s.g%d" % (name, index), target)
        except Unimportable as e:
            out.left.append(Left(label, group.kind, group.ops(), str(e)))
            continue
        if unit is None:
            continue  # one liger operator: it runs as itself
        if _reads_its_results(inputs, outputs):
            out.left.append(Left(label, group.kind, group.ops(), "one of its inputs is computed "
                                 "from one of its results by ops outside liger"))
            continue
        try:
            unit.kernel = _kernel(unit.spec, check)
        except LigerError as e:
            left = Left(label, group.kind, group.ops(), str(e).splitlines()[0], warned=True)
            out.left.append(left)
            warnings.warn("liger: fusion group %s (%s) stays with Inductor: %s" % (
                left.label, ", ".join(left.ops), left.reason), LigerFallbackWarning, stacklevel=2)
            continue
        register_unit(unit)
        out.units.append(unit)
        replaced[unit] = (inputs, outputs)
        if dump:
            dump("%s.mlir" % unit.name, unit.spec.text)
    _rewrite(gm, replaced, fake_mode)
    return _finish(out, gm, aten)


def _unit(group: Group, resolver: _Resolver, name: str, target: str):
    """(Unit, its call's input nodes, its output nodes), or (None, ...) for a
    group of one liger operator call (which runs as itself)."""
    outputs = [resolver.group_output(group, k) for k in range(len(group.results))]
    sources = [resolver.operand(group.function, o, t, 0)
               for o, t in zip(group.operands, group.operand_types)]
    ops = group.ops()
    calls = {_call_of(o) for o in outputs}
    if len(ops) == 1 and len(calls) == 1 and None not in calls and _runs_kernels(calls.pop()):
        return None, None, None
    nodes: List[object] = []
    for node, _, _ in sources:
        if node not in nodes:
            nodes.append(node)
    shapes_in = [G.shape(n) for n in nodes]
    inputs = [Input(nodes.index(node), slices, collapse) for node, slices, collapse in sources]
    shapes = [[_size_rule(s, shapes_in) for s in G.shape(o)] for o in outputs]
    spec = GroupSpec(text=group_text(group), name=name, target=target)
    unit = Unit(name, group.kind, ops, spec, inputs, shapes, [G.dtype(o) for o in outputs])
    return unit, nodes, outputs


def _reads_its_results(inputs, outputs) -> bool:
    """Whether an input of a group is computed from one of its results
    (through nodes outside the module liger-fuse saw): no one call can be it."""
    results, seen, todo = set(outputs), set(), list(inputs)
    while todo:
        node = todo.pop()
        if node in results:
            return True
        if node not in seen:
            seen.add(node)
            todo.extend(node.all_input_nodes)
    return False


def _rewrite(gm, replaced: Dict[Unit, Tuple[list, list]], fake_mode) -> None:
    """Each unit's outputs read from one liger::fusion_group call; the nodes
    no one reads then are gone. Built on a copy of the graph, so that a
    failure leaves `gm` as it was."""
    graph = torch.fx.Graph()
    copies: Dict[object, object] = {}
    output, old_output = graph.graph_copy(gm.graph, copies, return_output_node=True)
    graph.output(output).meta = dict(old_output.meta)
    target = torch.ops.liger.fusion_group.default
    order = {n: i for i, n in enumerate(gm.graph.nodes)}
    for unit, (inputs, outputs) in replaced.items():
        last = copies[max(inputs, key=lambda n: order[n])]
        with graph.inserting_after(last):
            call = graph.call_function(target, (unit.key, [copies[n] for n in inputs]))
        with fake_mode:
            vals = target(unit.key, [G.val(n) for n in inputs])
        call.meta["val"] = vals
        previous = call
        for k, node in enumerate(outputs):
            with graph.inserting_after(previous):
                item = graph.call_function(operator.getitem, (call, k))
            item.meta = dict(node.meta, val=vals[k])
            copies[node].replace_all_uses_with(item)
            # A later unit reading this output reads the call's, not the
            # original node (which would stay, computed a second time).
            copies[node] = item
            previous = item
    work = torch.fx.GraphModule(gm, graph)
    # A group's readers before its last input move after its call; every
    # other node keeps its place (a breadth-first sort would hoist each node
    # to where its inputs are ready: a backward's recomputed activations to
    # its top, alive through the whole backward).
    stable_topological_sort(work)
    work.graph.eliminate_dead_code()
    gm.graph = work.graph
    gm.recompile()


def _counted(node) -> bool:
    """An op of the graph the summary counts: a call of an aten, prims or
    liger op (not the getitem of an output, not an identity)."""
    return node.op == "call_function" and isinstance(node.target, torch._ops.OpOverload) \
        and G.identity_source(node) is None


def _finish(out: Partition, gm, aten) -> Partition:
    nodes = [n for n in gm.graph.nodes if _counted(n)]
    operators = [n for n in nodes if _is_operator_call(n) and n.target._opname != "fusion_group"]
    out.operators = len(operators)
    out.covered_nodes = len(aten - {n.name for n in nodes}) + len(operators)
    counts: Dict[str, int] = {}
    for n in nodes:
        if _is_operator_call(n):
            continue
        key = str(n.target)
        counts[key] = counts.get(key, 0) + 1
    out.inductor = ["%s%s" % (k, " x%d" % v if v > 1 else "") for k, v in sorted(counts.items())]
    return out
