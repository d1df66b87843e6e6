"""The liger operators (`torch.ops.liger.*`) and the dialect ops they run: one table.

A liger operator is a PyTorch custom op with its own backward (liger.operators). Each row says which dialect op a call computes,
which positional argument is which operand or attribute, and which output is
which result. Recognition reads a call as a `Record` through it
(`match_operator`): a patched model's operators, and those the torch.compile
backend puts in place of recognised subgraphs, import as the ops they are,
forward and backward.

Operators whose outputs are not one dialect op's results (cross-entropy and
the fused linear cross-entropy form their gradients in the forward) are not
rows: their calls stay as they are and run their own kernels.
"""

from dataclasses import dataclass, field
from typing import Dict, Optional, Tuple

from .records import Record


# The recognition pattern of a call of a liger operator.
PATTERN = "recognise-operator"


@dataclass(frozen=True)
class Operator:
    """One liger operator as a dialect op.

    operands: the dialect operand of each positional argument (None: an
    attribute or an argument the op does not take); attrs: argument position
    -> attribute; results: the number of outputs; flags: output position ->
    the unit attribute the op needs to give that result (RMSNorm's rstd;
    LayerNorm's mean and rstd, both under `stats`; attention's lse);
    defaults: attribute -> the value the operator takes for the dialect's
    default (attention's scale 0: 1/sqrt(D)), which the op leaves unset;
    kernels: whether a call runs liger kernels of its own (liger.ops'
    operators do; lora_linear, as the backend calls it, only where the
    layer's configuration has a kernel, PyTorch's ops otherwise).
    """

    name: str
    op: str
    operands: Tuple[Optional[str], ...]
    attrs: Dict[int, str] = field(default_factory=dict)
    results: int = 1
    flags: Dict[int, str] = field(default_factory=dict)
    kernels: bool = True
    defaults: Dict[str, object] = field(default_factory=dict)
    # Outputs the dialect op does not give (lora_linear's x·Aᵀ, kept for its
    # backward): a call where one is read is not imported; it runs as the
    # operator it is.
    extra: Tuple[int, ...] = ()

    def record(self, node, covered) -> Optional[Record]:
        """The record of a call `node` (its outputs: the node, or its
        getitems); None where an `extra` output is read."""
        args = list(node.args)
        operands = {role: args[i] for i, role in enumerate(self.operands)
                    if role is not None and i < len(args) and args[i] is not None}
        attrs = {name: args[i] for i, name in self.attrs.items() if i < len(args)
                 and not (name in self.defaults and args[i] == self.defaults[name])}
        if self.results == 1:
            results = (node,)
        else:
            # (A getitem nothing reads, as make_fx leaves, reads no output.)
            outputs = {u.args[1]: u for u in node.users if u.args[0] is node and u.users}
            results = tuple(outputs.get(i) for i in range(self.results))
            if any(results[i] is not None for i in self.extra):
                return None
            results = tuple(r for i, r in enumerate(results) if i not in self.extra)
        # A flag gives its outputs together (LayerNorm's `stats`: mean and
        # rstd): set where any of them is read.
        for flag in set(self.flags.values()):
            attrs[flag] = any(results[i] is not None for i, f in self.flags.items() if f == flag)
        results = tuple(r for i, r in enumerate(results)
                        if i not in self.flags or attrs[self.flags[i]])
        return Record(self.op, operands, attrs, results, frozenset(covered), PATTERN)


OPERATORS: Dict[str, Operator] = {o.name: o for o in [
    Operator("rms_norm", "rms_norm", ("input", "weight"),
             {2: "eps", 3: "offset", 4: "casting_mode"}, 2, {1: "with_rstd"}),
    Operator("rms_norm_backward", "rms_norm_grad", ("grad", "input", "weight", "rstd"),
             {5: "offset", 6: "casting_mode"}, 2),
    Operator("layer_norm", "layer_norm", ("input", "weight", "bias"), {3: "eps"}, 3,
             {1: "with_stats", 2: "with_stats"}),
    Operator("layer_norm_backward", "layer_norm_grad", ("grad", "input", "weight", "mean", "rstd"),
             {}, 3),
    Operator("swiglu", "swiglu", ("gate", "up")),
    Operator("swiglu_backward", "swiglu_grad", ("grad", "gate", "up"), {}, 2),
    Operator("geglu", "geglu", ("gate", "up"), {2: "approximate"}),
    Operator("geglu_backward", "geglu_grad", ("grad", "gate", "up"), {3: "approximate"}, 2),
    Operator("softmax", "softmax", ("input",)),
    Operator("softmax_backward", "softmax_grad", ("grad", "output")),
    Operator("rope", "rope", ("q", "k", "cos", "sin"), {}, 2),
    Operator("rope_backward", "rope_grad", ("grad_q", "grad_k", "cos", "sin"), {}, 2),
    Operator("lora_linear", "lora_linear", ("input", "weight", "bias", "lora_a", "lora_b"),
             {5: "scale"}, 2, kernels=False, extra=(1,)),
    Operator("attention", "attention", ("q", "k", "v"),
             {3: "causal", 4: "scale", 5: "window", 6: "softcap"}, 2, {1: "return_lse"},
             defaults={"scale": 0.0, "window": 0, "softcap": 0.0}),
    Operator("attention_backward", "attention_grad", ("grad", "q", "k", "v", "out", "lse"),
             {6: "causal", 7: "scale", 8: "window", 9: "softcap"}, 3,
             defaults={"scale": 0.0, "window": 0, "softcap": 0.0}),
]}


def by_target(target) -> Optional[Operator]:
    """The row of an FX call target that is a liger operator, else None."""
    if getattr(target, "namespace", None) != "liger":
        return None
    return OPERATORS.get(getattr(target, "_opname", None))
