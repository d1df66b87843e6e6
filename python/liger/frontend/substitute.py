"""Recognised subgraphs -> calls of the liger operators, before autograd.

The torch.compile backend runs recognition on the aten graph of what dynamo
captured (before AOTAutograd differentiates it) and puts, in place of each
record, the call of the liger operator that computes the same op and has
its own backward (`liger.ops.*`, which checks its arguments first; PEFT's
LoRA: liger.operators.lora_linear, called directly: it runs PyTorch's ops
where its kernel cannot take the layer). AOTAutograd then traces the forward and the
backward through the operators, so the backward graph holds their backward
operators (liger.rms_norm_backward, ...) instead of the decomposed
derivative of each torch subgraph.

`policy(fake_mode, training)` is recognition's policy: it keeps a record
only where its operator runs here: the liger.ops call accepts the operands
(shapes, dtypes, device, attributes: what liger.ops checks), the operator
would not itself fall back to PyTorch (liger.ops.attention where
specs.attention_unsupported gives a reason, for its backward too where the
graph trains), and the kernels it loads load for the device (compiled or
precompiled; the reference lowering on CPU tensors, which then also compile
for a GPU target the run checks). Where it does not, the policy says why,
and the record's subgraph stays as it is (Inductor compiles it). An add +
RMSNorm becomes the RMSNorm operator on the sum (the add stays an add: the
fusion pass joins them again after autograd). A record without an operator
stays as it is.
"""

import dataclasses
from dataclasses import dataclass
from typing import Callable, Dict, Optional, Tuple

import torch
import torch.fx.traceback as fx_traceback
from torch.fx.experimental.proxy_tensor import make_fx

from .. import bundles, ops, specs
from ..errors import LigerError
from ..operators import lora_keeps_mid, lora_linear
from . import graph as G
from . import liger_operators
from .records import Record


def _rms_norm(o, a):
    return (ops.rms_norm(o["input"], o["weight"], a["eps"], a.get("offset", 0.0),
                         a.get("casting_mode", "llama")),)


def _rms_norm_spec(o, a, target):
    x = o["input"]
    return specs.rms_norm_spec(x.shape[-1], x.dtype, o["weight"].dtype, a["eps"],
                               a.get("offset", 0.0), a.get("casting_mode", "llama"),
                               target=target)


def _layer_norm(o, a):
    return (ops.layer_norm(o["input"], o["weight"], o.get("bias"), a.get("eps", 1e-5)),)


def _layer_norm_spec(o, a, target):
    x = o["input"]
    return specs.layer_norm_spec(x.shape[-1], x.dtype, o["weight"].dtype, a.get("eps", 1e-5),
                                 o.get("bias") is not None, target=target)


def _loss_attrs(a):
    return dict(ignore_index=a.get("ignore_index", -100),
                label_smoothing=a.get("label_smoothing", 0.0),
                reduction=a.get("reduction", "mean"), softcap=a.get("softcap"))


def _cross_entropy(o, a):
    return (ops.cross_entropy(o["logits"], o["target"], o.get("weight"), **_loss_attrs(a)),)


def _cross_entropy_spec(o, a, target):
    logits = o["logits"]
    return specs.cross_entropy_spec(logits.shape[-1], logits.dtype, o["target"].dtype,
                                    weighted=o.get("weight") is not None, target=target,
                                    **_loss_attrs(a))


def _flce(options):
    def call(o, a):
        # (An lm_head's bias is added to the logits and gets its gradient.)
        return (ops.fused_linear_cross_entropy(
            o["hidden"], o["weight"], o["target"], o.get("class_weight"),
            memory_budget=options.loss_memory_budget, bias=o.get("bias"), **_loss_attrs(a)),)
    return call


def _flce_spec(o, a, target):
    w = o["weight"]
    return specs.fused_linear_cross_entropy_spec(
        w.shape[0], w.shape[1], o["hidden"].dtype, o["target"].dtype,
        weighted=o.get("class_weight") is not None, bias=o.get("bias") is not None,
        target=target, **_loss_attrs(a))


def _lora(o, a):
    return (lora_linear(o["input"], o["weight"], o.get("bias"), o["lora_a"], o["lora_b"],
                        float(a.get("scale", 1.0)), lora_keeps_mid(o["lora_b"]))[0],)


def _attention(o, a):
    return (ops.attention(o["q"], o["k"], o["v"], a.get("causal", False), a.get("scale"),
                          a.get("window"), a.get("softcap")),)


def _attention_spec(o, a, target):
    q, k = o["q"], o["k"]
    return specs.attention_spec(q.shape[1], k.shape[1], q.shape[-1], q.dtype,
                                a.get("causal", False), a.get("scale"), a.get("window"),
                                a.get("softcap"), target=target)


def _attention_unsupported(o, a, target, training):
    """Why liger.ops.attention would run PyTorch's SDPA on `target` rather
    than the attention template's kernels (specs.attention_unsupported, the
    rule it applies; the lengths as expressions, equal where the graph
    shows them equal), or None."""
    q, k = o["q"], o["k"]
    return specs.attention_unsupported(target, specs.dtype_name(q.dtype), q.shape[-1], training,
                                       G.size_expr(q.shape[2]), G.size_expr(k.shape[2]))


@dataclass(frozen=True)
class _Call:
    """How the backend runs one record op.

    call: the liger operator call on the operands' values, giving the
    record's results in order; spec: the spec of the kernels it runs (its
    operands' values, attributes, target), or None for an operator computed
    by PyTorch ops; load: what the operator loads of that spec's bundle (it
    raises LigerError where that is missing); unsupported: where the
    operator would not run its kernels but fall back to PyTorch (its
    operands' values, attributes, a target, whether the graph trains), the
    reason, else None.
    """

    call: Optional[Callable]
    spec: Optional[Callable] = None
    load: Callable = bundles.kernels
    unsupported: Optional[Callable] = None


_CALLS: Dict[str, _Call] = {
    "rms_norm": _Call(_rms_norm, _rms_norm_spec),
    "layer_norm": _Call(_layer_norm, _layer_norm_spec),
    "swiglu": _Call(lambda o, a: (ops.swiglu(o["gate"], o["up"]),),
                    lambda o, a, t: specs.swiglu_spec(o["gate"].shape[-1], o["gate"].dtype,
                                                      target=t)),
    "geglu": _Call(lambda o, a: (ops.geglu(o["gate"], o["up"], a.get("approximate", "none")),),
                   lambda o, a, t: specs.geglu_spec(o["gate"].shape[-1], o["gate"].dtype,
                                                    a.get("approximate", "none"), target=t)),
    "softmax": _Call(lambda o, a: (ops.softmax(o["input"]),),
                     lambda o, a, t: specs.softmax_spec(o["input"].shape[-1], o["input"].dtype,
                                                        target=t)),
    "rope": _Call(lambda o, a: ops.rope(o["q"], o["k"], o["cos"], o["sin"]),
                  lambda o, a, t: specs.rope_spec(o["q"].shape[1], o["k"].shape[1],
                                                  o["q"].shape[-1], o["q"].dtype,
                                                  o["cos"].shape[0] == 1, target=t)),
    "cross_entropy": _Call(_cross_entropy, _cross_entropy_spec),
    "fused_linear_cross_entropy": _Call(None, _flce_spec, bundles.loss_plan_kernels),
    "lora_linear": _Call(_lora),
    # The forward with its lse and the backward: the bundle's @fwd and @bwd
    # (its module has @bwd wherever the template takes the backward, which
    # _attention_unsupported has checked where the graph trains).
    "attention": _Call(_attention, _attention_spec, bundles.attention_kernels,
                       _attention_unsupported),
}


def as_operator_record(record: Record) -> Record:
    """The record as its operator computes it: add + RMSNorm is the RMSNorm
    of the sum (the sum, the record's second result, stays in the graph)."""
    if record.op != "add_rms_norm":
        return record
    total = record.results[1]
    return Record("rms_norm", {"input": total, "weight": record.operands["weight"]},
                  record.attrs, (record.results[0],), record.covered - {total},
                  record.pattern, record.looked_through)


# The reason an attention stays SDPA without the backend's attention option.
ATTENTION_OFF = ("the backend's attention option is off (liger's attention kernels measure "
                 "slower than cuDNN's: options={'attention': True} puts them in)")


class Substitution:
    """What to call for a record, given the backend's options."""

    def __init__(self, options, check=None):
        self.calls = dict(_CALLS)
        self.calls["fused_linear_cross_entropy"] = dataclasses.replace(
            _CALLS["fused_linear_cross_entropy"], call=_flce(options))
        # A GPU target the operators' kernels must also compile for (CPU
        # reference runs: partition.KernelTarget), or None.
        self.check = check
        # The records the options leave to Inductor, and why.
        self.off = {} if options.attention else {"attention": ATTENTION_OFF}

    def call(self, record: Record, values: Dict[str, object]) -> Tuple:
        return self.calls[record.op].call(values, record.attrs)

    def policy(self, fake_mode, training: bool = True):
        """Recognition's policy: a record is kept when its operator runs here
        (the reason otherwise). `training`: whether the graph is compiled
        with a backward (grad mode on and an input that requires grad), so
        its operators need their backward kernels too."""
        def decide(record):
            record = as_operator_record(record)
            if record.op in self.off:
                return self.off[record.op]
            if record.op not in self.calls:
                return "no liger operator computes liger.%s (it stays with Inductor)" % record.op
            values = {k: G.val(v) for k, v in record.operands.items() if v is not None}
            how = self.calls[record.op]
            try:
                device = next(v for v in values.values() if isinstance(v, torch.Tensor)).device
                target = bundles.device_target(device)
                # (Before the call, which would warn of the fallback.)
                checked = [target] + ([self.check.target] if self.check is not None else [])
                if how.unsupported is not None:
                    for t in checked:
                        why = how.unsupported(values, record.attrs, t, training)
                        if why:
                            return "liger.ops.%s falls back to PyTorch on %s: %s" % (
                                record.op, t, why)
                with fake_mode:
                    how.call(values, record.attrs)
                if how.spec is not None:
                    made = how.spec(values, record.attrs, target)
                    how.load(made)
                    if self.check is not None:
                        self.check.bundle(made)
            except LigerError as e:
                return str(e).splitlines()[0]
            return True
        return decide


class _Substituting(torch.fx.Interpreter):
    """Runs an aten graph, computing each record's results by its operator."""

    def __init__(self, gm, records, substitution: Substitution):
        super().__init__(gm, garbage_collect_values=False)
        self.substitution = substitution
        self.result_of = {}
        # A liger operator's call (a patched model's) stays the call it is.
        for record in map(as_operator_record, records):
            if record.pattern == liger_operators.PATTERN:
                continue
            for i, node in enumerate(record.results):
                if node is not None:
                    self.result_of[node] = (record, i)
        self.done = {}

    def run_node(self, n):
        if n not in self.result_of:
            return super().run_node(n)
        record, i = self.result_of[n]
        if record not in self.done:
            with fx_traceback.set_current_meta(n):
                values = {k: self.env[v] for k, v in record.operands.items() if v is not None}
                self.done[record] = self.substitution.call(record, values)
        return self.done[record][i]


def substitute(gm, records, substitution: Substitution, fake_mode, example_inputs):
    """A new aten graph (pre-dispatch, as `gm`) where each record's results
    are its operator's; the nodes only the records read are gone."""
    with fake_mode, fx_traceback.preserve_node_meta():
        out = make_fx(_Substituting(gm, records, substitution).run, pre_dispatch=True,
                      tracing_mode="fake")(*example_inputs)
    out.graph.eliminate_dead_code()
    out.recompile()
    return out
