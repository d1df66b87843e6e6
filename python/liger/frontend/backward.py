"""The backward of an imported module, from the dialect's gradient ops.

For each forward function `@f` the backward is `@f_backward`: it takes the
forward function's arguments and the gradients of its results, recomputes
the forward (norms now also returning `rstd`) and runs, op by op in reverse,
the gradient the dialect defines for it:

    liger.linear           linear_grad_input, linear_grad_weight (tokens flattened)
    liger.rms_norm         rms_norm_grad            liger.add_rms_norm  rms_norm_grad + the sum's
    liger.rope             rope_grad                liger.swiglu/geglu  swiglu_grad/geglu_grad
    liger.softmax          softmax_grad             liger.add/mul       add/mul of the gradient
    liger.cross_entropy    cross_entropy_grad
    liger.fused_linear_cross_entropy               fused_linear_cross_entropy_grad
    layout ops             the inverse layout op (an inserted slice for a weight's rows)

so liger-fuse sees the same gradient ops the kernels implement (and fuses
a loss with its gradient). Why not AOTAutograd's joint graph: it would hold
the decomposed derivative of each torch subgraph (dozens of aten ops per
norm), which no pattern recognises reliably; once the liger operators carry
these gradient ops as their backward, AOTAutograd's backward graph holds the
same records (and, in the torch.compile backend, liger.attention_grad:
liger::attention_backward from the forward's saved output and lse).

An op without a rule here (liger.lora_linear, silu, gelu, which have no
gradient op; liger.attention, whose liger.attention_grad reads the
forward's output and lse, which this recomputed forward does not give) is
a cut: the gradient of its results is returned, and the gradient of its
operands through it (computed by PyTorch) enters a later function
(`@f_backward_1`, ...), as the forward splits around what it does not
import. A gradient that is complete only after such a cut is carried from
function to function as a partial sum. A bias gets no gradient (a column
sum of the output gradient; the dialect has no op for it): `missing` says so.
"""

import math
import re
from collections import defaultdict
from dataclasses import dataclass, field
from typing import Dict, List, Optional, Tuple

from .importer import Emitted, Function, Imported
from .records import format_op

# Operands that take no gradient, per op.
_NO_GRAD = {"liger.rope": {"cos", "sin"}, "liger.cross_entropy": {"target", "weight"},
            "liger.fused_linear_cross_entropy": {"target", "class_weight"}}
_RULES = {"liger.linear", "liger.add", "liger.mul", "liger.rms_norm", "liger.add_rms_norm",
          "liger.rope", "liger.swiglu", "liger.geglu", "liger.softmax", "liger.cross_entropy",
          "liger.fused_linear_cross_entropy", "tensor.collapse_shape", "tensor.expand_shape",
          "linalg.transpose", "tensor.extract_slice"}
_DIFFERENTIABLE = _RULES | {"liger.attention", "liger.lora_linear", "liger.silu", "liger.gelu"}


@dataclass
class BackwardFunction:
    """One backward function: what each argument and result is.

    arguments, results: (kind, SSA name of the forward value) with kind
    'value' (a forward argument), 'grad' (the gradient of a forward result,
    or of a cut op's result, complete), 'through' (the gradient of an operand
    through the cut op `detail` names), 'partial' (a gradient summed so far).
    """

    name: str
    forward: Function
    arguments: List[Tuple[str, str, Optional[str]]] = field(default_factory=list)
    results: List[Tuple[str, str]] = field(default_factory=list)
    text: str = ""


@dataclass
class Backward:
    """The backward functions of an imported module."""

    name: str
    mlir: str
    functions: List[BackwardFunction]
    missing: List[str] = field(default_factory=list)


def _dims(type_: str) -> Tuple[List[str], str]:
    inner = re.fullmatch(r"tensor<(.*)>", type_).group(1).split("x")
    return inner[:-1], inner[-1]


def _tensor(dims: List[str], element: str) -> str:
    return "tensor<%s>" % "x".join(list(dims) + [element])


class _Builder:
    def __init__(self, forward: Function):
        self.f = forward
        self.types: Dict[str, str] = dict(forward.types)
        self.lines: List[str] = []
        self.count = 0
        self.missing: List[str] = []

    def new(self, type_: str) -> str:
        self.count += 1
        name = "%%g%d" % self.count
        self.types[name] = type_
        return name

    def emit(self, line: str) -> None:
        self.lines.append("  " + line)

    def op(self, op: str, operands: Dict[str, str], attrs: Dict, result_types: List[str]):
        names = [self.new(t) for t in result_types]
        types = {role: self.types[v] for role, v in operands.items()}
        self.emit("%s = %s" % (", ".join(names),
                               format_op(op[len("liger."):], operands, types, attrs)))
        return names

    def index(self, value: int) -> str:
        name = "%%gc%d_%d" % (value, self.count)
        self.count += 1
        self.emit("%s = arith.constant %d : index" % (name, value))
        return name

    def sizes(self, value: str) -> List[str]:
        """The sizes of `value` as index SSA names or integer literals."""
        out = []
        for d, size in enumerate(_dims(self.types[value])[0]):
            if size == "?":
                name = "%%gd%d" % self.count
                self.count += 1
                self.emit("%s = tensor.dim %s, %s : %s" % (name, value, self.index(d),
                                                           self.types[value]))
                out.append(name)
            else:
                out.append(size)
        return out

    def collapse(self, value: str, groups) -> str:
        dims, element = _dims(self.types[value])
        merged = []
        for group in groups:
            sizes = [dims[d] for d in group]
            merged.append("?" if "?" in sizes else str(math.prod(int(d) for d in sizes)))
        result = self.new(_tensor(merged, element))
        self.emit("%s = tensor.collapse_shape %s %s : %s into %s" % (
            result, value, groups, self.types[value], self.types[result]))
        return result

    def flat2(self, value: str) -> str:
        dims = _dims(self.types[value])[0]
        if len(dims) <= 2:
            return value
        return self.collapse(value, [list(range(len(dims) - 1)), [len(dims) - 1]])

    def expand(self, value: str, groups, like: str) -> str:
        """`value` expanded back to the shape of the forward value `like`."""
        result = self.new(self.types[like])
        self.emit("%s = tensor.expand_shape %s %s output_shape [%s] : %s into %s" % (
            result, value, groups, ", ".join(self.sizes(like)), self.types[value],
            self.types[like]))
        return result

    def add(self, a: Optional[str], b: str) -> str:
        if a is None:
            return b
        return self.op("liger.add", {"lhs": a, "rhs": b}, {}, [self.types[b]])[0]

    def rstd_type(self, value: str) -> str:
        return _tensor(_dims(self.types[value])[0][:-1], "f32")

    # --- the forward, with rstd ----------------------------------------------

    def forward(self) -> Dict[str, str]:
        """Prints the forward body; returns norm result -> its rstd."""
        rstd = {}
        for e in self.f.body:
            if e.op in ("liger.rms_norm", "liger.add_rms_norm"):
                attrs = dict(e.attrs, with_rstd=True)
                name = "%%rstd_%d" % len(rstd)
                self.types[name] = self.rstd_type(e.operands["input"])
                rstd[e.results[0]] = name
                types = {role: self.types[v] for role, v in e.operands.items()}
                self.emit("%s = %s" % (", ".join(list(e.results) + [name]),
                                       format_op(e.op[len("liger."):], e.operands, types, attrs)))
            else:
                self.lines.append(e.line)
        return rstd

    # --- the gradient of one op ----------------------------------------------

    def rule(self, e: Emitted, grads: List[Optional[str]], rstd) -> List[Tuple[str, str]]:
        """(operand SSA, its gradient through `e`) for each differentiable operand."""
        o, g = e.operands, grads[0]
        if e.op == "liger.linear":
            dx = self.op("liger.linear_grad_input", {"grad": g, "weight": o["weight"]}, {},
                         [self.types[o["input"]]])[0]
            dw = self.op("liger.linear_grad_weight", {"grad": self.flat2(g),
                                                      "input": self.flat2(o["input"])},
                         {}, [self.types[o["weight"]]])[0]
            if "bias" in o:
                self.missing.append("the bias %s of %s (a column sum of the output gradient; "
                                    "the dialect has no op for it)" % (o["bias"], e.results[0]))
            return [(o["input"], dx), (o["weight"], dw)]
        if e.op == "liger.add":
            return [(o["lhs"], g), (o["rhs"], g)]
        if e.op == "liger.mul":
            t = self.types[g]
            return [(o["lhs"], self.op("liger.mul", {"lhs": g, "rhs": o["rhs"]}, {}, [t])[0]),
                    (o["rhs"], self.op("liger.mul", {"lhs": g, "rhs": o["lhs"]}, {}, [t])[0])]
        if e.op == "liger.add_rms_norm" and g is None:
            return [(o["input"], grads[1]), (o["residual"], grads[1])]
        if e.op in ("liger.rms_norm", "liger.add_rms_norm"):
            x = o["input"] if e.op == "liger.rms_norm" else e.results[1]
            attrs = {k: v for k, v in e.attrs.items() if k in ("offset", "casting_mode")}
            dx, dw = self.op("liger.rms_norm_grad", {"grad": g, "input": x, "weight": o["weight"],
                                                     "rstd": rstd[e.results[0]]}, attrs,
                             [self.types[x], self.types[o["weight"]]])
            if e.op == "liger.rms_norm":
                return [(o["input"], dx), (o["weight"], dw)]
            total = self.add(grads[1], dx) if grads[1] is not None else dx
            return [(o["input"], total), (o["residual"], total), (o["weight"], dw)]
        if e.op == "liger.rope":
            dq, dk = self.op("liger.rope_grad", {"grad_q": grads[0], "grad_k": grads[1],
                                                 "cos": o["cos"], "sin": o["sin"]}, {},
                             [self.types[o["q"]], self.types[o["k"]]])
            return [(o["q"], dq), (o["k"], dk)]
        if e.op in ("liger.swiglu", "liger.geglu"):
            dg, du = self.op(e.op + "_grad", {"grad": g, "gate": o["gate"], "up": o["up"]},
                             e.attrs, [self.types[o["gate"]]] * 2)
            return [(o["gate"], dg), (o["up"], du)]
        if e.op == "liger.softmax":
            return [(o["input"], self.op("liger.softmax_grad", {"grad": g, "output": e.results[0]},
                                         {}, [self.types[o["input"]]])[0])]
        if e.op == "liger.cross_entropy":
            ops = {"logits": o["logits"], "target": o["target"], "grad_loss": g}
            if "weight" in o:
                ops["weight"] = o["weight"]
            attrs = {k: v for k, v in e.attrs.items() if k != "return_z_loss"}
            return [(o["logits"], self.op("liger.cross_entropy_grad", ops, attrs,
                                          [self.types[o["logits"]]])[0])]
        if e.op == "liger.fused_linear_cross_entropy":
            ops = dict(o, grad_loss=g)
            attrs = {k: v for k, v in e.attrs.items() if k != "return_z_loss"}
            types = [self.types[o["hidden"]], self.types[o["weight"]]]
            if "bias" in o:
                types.append(self.types[o["bias"]])
            got = self.op("liger.fused_linear_cross_entropy_grad", ops, attrs, types)
            return list(zip([o["hidden"], o["weight"], o.get("bias")], got))
        if e.op == "tensor.collapse_shape":
            return [(o["input"], self.expand(g, e.info, o["input"]))]
        if e.op == "tensor.expand_shape":
            return [(o["input"], self.collapse(g, e.info))]
        if e.op == "linalg.transpose":
            perm = e.info
            inverse = [perm.index(i) for i in range(len(perm))]
            source = o["input"]
            dynamic = [s for s in self.sizes(source) if s.startswith("%")]
            init = self.new(self.types[source])
            self.emit("%s = tensor.empty(%s) : %s" % (init, ", ".join(dynamic), self.types[source]))
            result = self.new(self.types[source])
            self.emit("%s = linalg.transpose ins(%s : %s) outs(%s : %s) permutation = %s" % (
                result, g, self.types[g], init, self.types[source], inverse))
            return [(source, result)]
        if e.op == "tensor.extract_slice":
            offsets, sizes = e.info
            whole = self.types[o["input"]]
            zero = self.new(whole)
            self.emit("%s = arith.constant dense<0.0> : %s" % (zero, whole))
            result = self.new(whole)
            self.emit("%s = tensor.insert_slice %s into %s[%s] [%s] [%s] : %s into %s" % (
                result, g, zero, ", ".join(offsets), ", ".join(str(s) for s in sizes),
                ", ".join(["1"] * len(sizes)), self.types[g], whole))
            return [(o["input"], result)]
        raise AssertionError("no gradient rule for " + e.op)


def _operands(e: Emitted) -> List[Tuple[str, str]]:
    skip = _NO_GRAD.get(e.op, set())
    return [(role, v) for role, v in e.operands.items()
            if role not in skip and (e.op != "liger.linear" or role != "bias")]


def _plan(f: Function):
    """Levels: which backward function completes each gradient and runs each op."""
    body = [(i, e) for i, e in enumerate(f.body) if e.op in _DIFFERENTIABLE]
    level: Dict[str, int] = {r: 0 for r in f.returns}
    contributions: Dict[str, set] = defaultdict(set)
    for r in f.returns:
        contributions[r].add(0)
    runs: Dict[int, int] = {}
    for i, e in reversed(body):
        outs = [r for r in e.results if r in level]
        if not outs:
            continue
        at = max(level[r] for r in outs)
        for r in outs:
            level[r] = at
        if e.op == "liger.rope" and len(outs) < 2:
            runs[i] = at  # rope_grad needs both gradients: a cut
            cut = True
        else:
            runs[i] = at
            cut = e.op not in _RULES
        for _, v in _operands(e):
            got = at + 1 if cut else at
            contributions[v].add(got)
            level[v] = max(level.get(v, -1), got)
    return body, level, contributions, runs


def backward_functions(f: Function) -> Tuple[List[BackwardFunction], List[str]]:
    body, level, contributions, runs = _plan(f)
    cuts = [(i, e) for i, e in body if i in runs and (e.op not in _RULES or (
        e.op == "liger.rope" and sum(r in level for r in e.results) < 2))]
    count = max(list(level.values()) + [0]) + 1
    out: List[BackwardFunction] = []
    missing: List[str] = []
    for lvl in range(count):
        b = _Builder(f)
        name = "%s_backward" % f.name + ("" if lvl == 0 else "_%d" % lvl)
        fn = BackwardFunction(name, f)
        args = [(p, f.types[p]) for p in f.parameters]
        fn.arguments = [("value", p, None) for p in f.parameters]
        acc: Dict[str, str] = {}

        def incoming(kind, value, detail, hint):
            arg = "%%%s_%d" % (hint, len(fn.arguments))
            b.types[arg] = f.types.get(value) or b.types[value]
            args.append((arg, b.types[arg]))
            fn.arguments.append((kind, value, detail))
            acc[value] = b.add(acc.get(value), arg) if value in acc else arg
        rstd = b.forward()
        if lvl == 0:
            for r in f.returns:
                incoming("grad", r, None, "grad")
        for i, e in cuts:
            if runs[i] == lvl - 1:
                for _, v in _operands(e):
                    incoming("through", v, e.results[0], "grad_in")
        for v, levels in contributions.items():
            if min(levels) < lvl <= level[v]:
                incoming("partial", v, None, "partial")
        for i, e in reversed(body):
            if runs.get(i) != lvl or (i, e) in cuts:
                continue
            grads = [acc.get(r) for r in e.results]
            if all(g is None for g in grads):
                continue
            for v, g in b.rule(e, grads, rstd):
                if v is not None:
                    acc[v] = b.add(acc.get(v), g)
        results = []
        for i, e in cuts:
            if runs[i] == lvl:
                for r in e.results:
                    if r in acc:
                        results.append(("grad", r, acc[r]))
        for p in f.parameters:
            if p in acc and level.get(p) == lvl:
                results.append(("grad", p, acc[p]))
        for v in contributions:
            if v in acc and level[v] > lvl:
                results.append(("partial", v, acc[v]))
        fn.results = [(kind, v) for kind, v, _ in results]
        types = [b.types[g] for _, _, g in results]
        text = ["func.func @%s(%s) -> (%s) {" % (
            name, ", ".join("%s: %s" % a for a in args), ", ".join(types))]
        text += b.lines
        text.append("  return %s : %s" % (", ".join(g for _, _, g in results), ", ".join(types)))
        text.append("}")
        fn.text = "\n".join(text)
        missing += b.missing
        out.append(fn)
    return out, sorted(set(missing))


def backward_module(imported: Imported) -> Backward:
    """The backward functions of every function of `imported`."""
    functions, missing = [], []
    for f in imported.functions:
        fns, miss = backward_functions(f)
        functions += fns
        missing += miss
    text = "// The backward of %s (liger.frontend).\n" % imported.name
    return Backward(imported.name + "_backward", text + "\n\n".join(f.text for f in functions) + "\n",
                    functions, missing)
