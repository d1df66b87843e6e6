"""The liger ops the frontend emits: one `OpSpec` per dialect op, one `Record` per use.

A recognised torch subgraph (an HF RMSNorm, a rotate-half RoPE, a gated
MLP, a loss...) becomes a `Record`: the liger op it is, its operands (FX
nodes), its attributes and the FX nodes whose values its results are. The
importer prints records as liger-dialect ops; a later graph rewrite can
replace the same nodes by calls of the liger operators. Neither needs to
know how a record was recognised, and neither needs to know how kernels are
called.

`OPS` is the one place that knows each op's operands, attributes (with the
dialect's defaults) and how the op is spelt (its declarative assembly format
in dialects/liger/Dialect/Liger/IR/LigerOps.td and LigerGradOps.td).
"""

import math
from dataclasses import dataclass, field
from typing import Any, Callable, Dict, FrozenSet, Optional, Sequence, Tuple


@dataclass(frozen=True)
class Attr:
    """One attribute of an op: its name, how it is spelt, its kind and default.

    kind: 'f32' (a float), 'i64' (an integer), 'enum' (a bare word), 'unit'
    (a keyword present or absent). `default` is the dialect's default (None:
    no default, the attribute is optional); a value equal to it is not printed.
    """

    name: str
    kind: str
    default: Any = None
    spelling: Optional[str] = None

    @property
    def word(self) -> str:
        return self.spelling or self.name


@dataclass(frozen=True)
class OpSpec:
    """How one liger op is spelt.

    operands: positional operands, in order; optional: positional operands
    that may be absent (`, %b`); saved: operands given together or not at
    all, spelt `saved(%a, %b : A, B)` (the forward's values a gradient op
    reads); keyword: operands spelt `name(%v : type)`; typed: the operands
    whose types close the op (`: type, type`); attrs: in the order the
    format prints them; results: the number of results given the attributes
    and which operands are present.
    """

    name: str
    operands: Tuple[str, ...]
    typed: Tuple[str, ...]
    attrs: Tuple[Attr, ...] = ()
    optional: Tuple[str, ...] = ()
    keyword: Tuple[str, ...] = ()
    results: Callable[[Dict[str, Any], Sequence[str]], int] = lambda attrs, present: 1
    saved: Tuple[str, ...] = ()

    @property
    def optional_operands(self) -> Tuple[str, ...]:
        """Every operand a use may leave out, in the order the format prints them."""
        return self.optional + self.saved + self.keyword


_EPS = Attr("eps", "f32", 1e-6)
_OFFSET = Attr("offset", "f32", 0.0)
_CASTING = Attr("casting_mode", "enum", "llama", "casting")
_RSTD = Attr("with_rstd", "unit", False, "rstd")
_LN_EPS = Attr("eps", "f32", 1e-5)
_STATS = Attr("with_stats", "unit", False, "stats")
_APPROX = Attr("approximate", "enum", "none")
_LOSS_ATTRS = (Attr("ignore_index", "i64", -100), Attr("label_smoothing", "f32", 0.0),
               Attr("reduction", "enum", "mean"), Attr("softcap", "f32", None),
               Attr("lse_square_scale", "f32", 0.0))
_Z_LOSS = Attr("return_z_loss", "unit", False, "z_loss")
_CAUSAL = Attr("causal", "unit", False)
_SCALE = Attr("scale", "f32", None)
_WINDOW = Attr("window", "i64", None)
_SOFTCAP = Attr("softcap", "f32", None)


def _unit(attrs: Dict[str, Any], name: str) -> int:
    return 1 if attrs.get(name) else 0


def _spec(*args, **kwargs) -> OpSpec:
    return OpSpec(*args, **kwargs)


OPS: Dict[str, OpSpec] = {spec.name: spec for spec in [
    _spec("add", ("lhs", "rhs"), ("lhs",)),
    _spec("mul", ("lhs", "rhs"), ("lhs",)),
    _spec("silu", ("input",), ("input",)),
    _spec("gelu", ("input",), ("input",), (_APPROX,)),
    _spec("swiglu", ("gate", "up"), ("gate",)),
    _spec("geglu", ("gate", "up"), ("gate",), (_APPROX,)),
    _spec("softmax", ("input",), ("input",)),
    _spec("linear", ("input", "weight"), ("input", "weight", "bias"), optional=("bias",)),
    _spec("lora_linear", ("input", "weight", "lora_a", "lora_b"),
          ("input", "weight", "lora_a", "lora_b", "bias"), (Attr("scale", "f32", 1.0),),
          optional=("bias",)),
    _spec("rms_norm", ("input", "weight"), ("input", "weight"), (_EPS, _OFFSET, _CASTING, _RSTD),
          results=lambda a, p: 1 + _unit(a, "with_rstd")),
    _spec("add_rms_norm", ("input", "residual", "weight"), ("input", "weight"),
          (_EPS, _OFFSET, _CASTING, _RSTD), results=lambda a, p: 2 + _unit(a, "with_rstd")),
    _spec("layer_norm", ("input", "weight"), ("input", "weight", "bias"), (_LN_EPS, _STATS),
          optional=("bias",), results=lambda a, p: 1 + 2 * _unit(a, "with_stats")),
    _spec("rope", ("q", "k", "cos", "sin"), ("q", "k", "cos"), results=lambda a, p: 2),
    _spec("attention", ("q", "k", "v"), ("q", "k", "v"),
          (_CAUSAL, _WINDOW, _SOFTCAP, _SCALE, Attr("return_lse", "unit", False)),
          results=lambda a, p: 1 + _unit(a, "return_lse")),
    _spec("cross_entropy", ("logits", "target"), ("logits", "target"), _LOSS_ATTRS + (_Z_LOSS,),
          keyword=("weight",), results=lambda a, p: 1 + _unit(a, "return_z_loss")),
    _spec("fused_linear_cross_entropy", ("hidden", "weight", "target"),
          ("hidden", "weight", "target"), _LOSS_ATTRS + (_Z_LOSS,),
          keyword=("bias", "class_weight"), results=lambda a, p: 1 + _unit(a, "return_z_loss")),
    # Gradient ops (the backward module).
    _spec("linear_grad_input", ("grad", "weight"), ("grad", "weight")),
    _spec("linear_grad_weight", ("grad", "input"), ("grad", "input")),
    _spec("rms_norm_grad", ("grad", "input", "weight", "rstd"), ("input", "weight", "rstd"),
          (_OFFSET, _CASTING), results=lambda a, p: 2),
    _spec("layer_norm_grad", ("grad", "input", "weight", "mean", "rstd"),
          ("input", "weight", "mean"), results=lambda a, p: 3),
    _spec("rope_grad", ("grad_q", "grad_k", "cos", "sin"), ("grad_q", "grad_k", "cos"),
          results=lambda a, p: 2),
    _spec("swiglu_grad", ("grad", "gate", "up"), ("gate",), results=lambda a, p: 2),
    _spec("geglu_grad", ("grad", "gate", "up"), ("gate",), (_APPROX,), results=lambda a, p: 2),
    _spec("softmax_grad", ("grad", "output"), ("output",)),
    _spec("attention_grad", ("grad", "q", "k", "v"), ("grad", "q", "k", "v"),
          (_CAUSAL, _WINDOW, _SOFTCAP, _SCALE), saved=("out", "lse"), results=lambda a, p: 3),
    _spec("cross_entropy_grad", ("logits", "target", "grad_loss"),
          ("logits", "target", "grad_loss"), _LOSS_ATTRS, keyword=("weight",)),
    _spec("fused_linear_cross_entropy_grad", ("hidden", "weight", "target", "grad_loss"),
          ("hidden", "weight", "target", "grad_loss"), _LOSS_ATTRS,
          keyword=("bias", "class_weight"), results=lambda a, p: 3 if "bias" in p else 2),
]}


@dataclass(eq=False)
class Record:
    """One liger op standing for a torch subgraph.

    operands: operand name -> the FX node that supplies it (absent or None:
    an optional operand not given); attrs: attribute name -> value (Python
    float/int/bool/str); results: for each result of the op, the FX node
    whose value it is (None where no node of the graph holds that value,
    e.g. rstd); covered: every FX node the record replaces; pattern: the
    recognition pattern that made it (for reports); looked_through: nodes
    between the operands and the covered ones that only reshape or
    transpose an operand (a projection's flattened input, its transposed
    weight), which other records may look through too: they count as
    imported, are never claimed, and stay in the graph while anything else
    reads them; alternative: a smaller record over part of the same nodes
    that a policy refusing this one may take instead (the loss on the
    logits where the lm_head + loss cannot run); bounds: (size, n) pairs,
    each a symbolic size of the graph up to which the record stands for
    its nodes (an attention whose mask it drops was evaluated up to n
    tokens), guarded to it when the record is taken.
    """

    op: str
    operands: Dict[str, Any]
    attrs: Dict[str, Any]
    results: Tuple[Any, ...]
    covered: FrozenSet[Any] = field(default_factory=frozenset)
    pattern: str = ""
    looked_through: FrozenSet[Any] = field(default_factory=frozenset)
    alternative: Optional["Record"] = None
    bounds: Tuple[Tuple[Any, int], ...] = ()

    def __post_init__(self):
        spec = OPS[self.op]
        unknown = set(self.operands) - set(spec.operands + spec.optional_operands)
        if unknown:
            raise ValueError("liger.%s has no operand %s" % (self.op, ", ".join(sorted(unknown))))
        missing = [name for name in spec.operands if self.operands.get(name) is None]
        if missing:
            raise ValueError("liger.%s needs operand %s" % (self.op, ", ".join(missing)))
        saved = [name for name in spec.saved if self.operands.get(name) is not None]
        if saved and len(saved) != len(spec.saved):
            raise ValueError("liger.%s takes its saved operands %s together, got %s"
                             % (self.op, ", ".join(spec.saved), ", ".join(saved)))
        names = {a.name for a in spec.attrs}
        bad = set(self.attrs) - names
        if bad:
            raise ValueError("liger.%s has no attribute %s" % (self.op, ", ".join(sorted(bad))))
        count = spec.results(self.attrs, self.present())
        if len(self.results) != count:
            raise ValueError("liger.%s has %d results, the record gives %d"
                             % (self.op, count, len(self.results)))

    def present(self) -> Tuple[str, ...]:
        """The names of the operands given, in the op's order."""
        spec = OPS[self.op]
        return tuple(n for n in spec.operands + spec.optional_operands
                     if self.operands.get(n) is not None)

    def describe(self) -> str:
        """`liger.rms_norm (eps = 1e-05, casting = gemma)`: the op and its non-default attributes."""
        spec = OPS[self.op]
        shown = []
        for attr in spec.attrs:
            value = self.attrs.get(attr.name, attr.default)
            if value is None or value == attr.default:
                continue
            shown.append(attr.word if attr.kind == "unit" else "%s = %s" % (attr.word, value))
        return "liger.%s" % self.op + (" (%s)" % ", ".join(shown) if shown else "")


def format_float(value: float) -> str:
    """A float as an MLIR literal (MLIR wants a '.' in the mantissa)."""
    if not math.isfinite(value):
        raise ValueError("not a finite attribute value: %r" % value)
    text = repr(float(value))
    mantissa, _, exponent = text.partition("e")
    if "." not in mantissa:
        mantissa += ".0"
    return mantissa + ("e" + exponent if exponent else "")


def format_op(op: str, operands: Dict[str, str], types: Dict[str, str],
              attrs: Dict[str, Any]) -> str:
    """The op's custom form from SSA names and types: `liger.rms_norm %x, %w eps = ... : T, W`."""
    spec = OPS[op]
    parts = [", ".join(operands[n] for n in spec.operands + spec.optional if n in operands)]
    if spec.saved and all(n in operands for n in spec.saved):
        parts.append("saved(%s : %s)" % (", ".join(operands[n] for n in spec.saved),
                                         ", ".join(types[n] for n in spec.saved)))
    for name in spec.keyword:
        if name in operands:
            parts.append("%s(%s : %s)" % (name, operands[name], types[name]))
    for attr in spec.attrs:
        value = attrs.get(attr.name, attr.default)
        if value is None or value is False or value == attr.default:
            continue
        if attr.kind == "unit":
            parts.append(attr.word)
        elif attr.kind == "f32":
            parts.append("%s = %s" % (attr.word, format_float(value)))
        elif attr.kind == "i64":
            parts.append("%s = %d" % (attr.word, int(value)))
        else:
            parts.append("%s = %s" % (attr.word, value))
    typed = ", ".join(types[n] for n in spec.typed if n in operands)
    return "liger.%s %s : %s" % (op, " ".join(p for p in parts if p), typed)
