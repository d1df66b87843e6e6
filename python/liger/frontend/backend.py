"""The torch.compile backend: `torch.compile(model, backend="liger")`.

    import liger                                     # registers backend="liger"
    compiled = torch.compile(model, backend="liger")
    compiled = liger.compile_model(model)            # the same, training-friendly

For each graph dynamo captures:

1. the graph is traced to aten ops before autograd (make_fx, pre-dispatch:
   what torch.export's training IR is); SDPA calls are given back the form
   the eager model runs (masks.py: a traced causal mask -> is_causal;
   gqa.py: repeated key/value heads -> enable_gqa); recognize.py's patterns find
   the torch subgraphs of unpatched models (HF's RMSNorm, rotate-half RoPE,
   gated MLPs, softmax, SDPA's attention, the losses, PEFT's LoRA);
2. substitute.py puts in place of each the liger operator with its own
   backward (liger.ops), where that operator runs here (its kernels, not
   a fallback to PyTorch's op: for the backward too where the graph trains);
3. Inductor's compile_fx runs AOTAutograd on it, and before Inductor
   compiles each forward and backward graph, partition.py imports it into
   the liger dialect, runs liger-fuse, and makes each fusion group one
   liger::fusion_group call (its kernels from the bundle cache or
   liger-compile; on CPU tensors with LIGER_OPS_CPU_REFERENCE=1 its
   reference function); Inductor compiles the rest, so nothing of
   torch.compile's own fusions is lost.

Why recognition runs before autograd: AOTAutograd's backward graph holds
the decomposed derivative of each torch subgraph (dozens of aten ops per
norm), which no pattern recognises reliably, while the liger operators'
backward operators are the dialect's gradient ops, which the importer reads
as they are. Why on make_fx's pre-dispatch graph rather than on what
AOTAutograd is given: a backend sees the graph before AOTAutograd only
through its own trace, and pre-dispatch aten is what the patterns were
written for (torch.export's training IR); the operators put there are then
what AOTAutograd differentiates.

What liger cannot take is Inductor's, never an error: a whole graph on the
CPU without LIGER_OPS_CPU_REFERENCE=1, in f64, or on a GPU liger has no
target for (said once per reason); a subgraph whose operator cannot run
(said in the report); a group without a kernel (one LigerFallbackWarning
naming the group and the reason). Sizes that torch.compile makes dynamic
beyond the token dimensions (a hidden size) keep their subgraphs out of
liger (the report says which), and a graph with a dynamic size the kernels
need static is recompiled by dynamo as torch.compile does.

`LIGER_DEBUG=1` prints, per graph, what was recognised, the fusion report,
the kernels, what stayed with Inductor and a summary line;
`LIGER_DUMP_DIR=DIR` writes every stage (docs/torch-compile-backend.md).
"""

import dataclasses
import functools
import inspect
import os
import sys
import warnings
from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional

import torch
import torch.fx.traceback as fx_traceback
from torch.fx.experimental.proxy_tensor import make_fx

from .. import bundles, specs
from ..errors import LigerError, LigerFallbackWarning
from . import inplace
from .gqa import grouped_kv
from . import masks
from .partition import KernelTarget, Partition, partition
from .recognize import recognize
from .substitute import Substitution, substitute


@dataclass(frozen=True)
class Options:
    """The backend's options (torch.compile(..., options={...}) or
    liger.compile_model(model, **options)).

    loss_memory_budget: bytes of logits one chunk of the fused linear
      cross-entropy may hold (liger.ops' default, 0.5 GiB);
    kernel_target: on CPU tensors with LIGER_OPS_CPU_REFERENCE=1, also
      compile the liger operators and each group for this GPU target
      ("sm_90a", "sm_80") and leave to Inductor what gets no kernel there
      (the GPU's decisions, made without a GPU);
    precompile_dir: with kernel_target, compile those kernels into this
      cache (LIGER_OPS_BUNDLES where the model trains) and run nothing
      (precompile());
    report: print the reports (as LIGER_DEBUG=1 does);
    dump_dir: write every stage there (as LIGER_DUMP_DIR=DIR does);
    fused_mlp: the MLP in training as matmul kernels: a matmul group of
      several results (the forward's gate/up pair writing gate and up
      beside the activation) and the backward's dx of the down projection
      with the activation's gradient in its epilogue (off by default: not
      yet measured faster than cuBLAS and the activation's kernel);
    attention: SDPA's attention as liger::attention where its kernels take
      the call (off by default: on the H200 the attention kernels' forward
      + backward measure 0.80-0.92x cuDNN's, docs/benchmarks.md).
    """

    loss_memory_budget: int = 2 ** 29
    kernel_target: Optional[str] = None
    precompile_dir: Optional[str] = None
    report: bool = False
    dump_dir: Optional[str] = None
    fused_mlp: bool = False
    attention: bool = False

    def check(self) -> Optional[KernelTarget]:
        """The GPU target a CPU run compiles for, or None."""
        if self.kernel_target is None:
            if self.precompile_dir is not None:
                raise LigerError("backend='liger': precompile_dir needs a kernel_target")
            return None
        return KernelTarget(specs.check_choice("kernel_target", self.kernel_target,
                                               specs.GPU_TARGETS), self.precompile_dir)

    @classmethod
    def of(cls, options: Optional[Dict[str, Any]]) -> "Options":
        options = dict(options or {})
        known = {f.name for f in dataclasses.fields(cls)}
        unknown = sorted(set(options) - known)
        if unknown:
            raise LigerError("backend='liger' has no option %s (it has %s)"
                             % (", ".join(unknown), ", ".join(sorted(known))))
        return cls(**options)


@dataclass
class GraphReport:
    """What the backend did with one graph dynamo captured."""

    name: str
    recognition: List[str] = field(default_factory=list)
    partitions: List[Partition] = field(default_factory=list)
    inductor_only: Optional[str] = None
    graph_breaks: int = 0
    # Sliding windows the graph's length is guarded to (recognise-causal-mask:
    # the graph serves lengths up to each).
    guarded_windows: List[int] = field(default_factory=list)

    def breaks(self) -> str:
        """`2 graph breaks`: dynamo's, in the compilation so far."""
        return "%d graph break%s" % (self.graph_breaks, "" if self.graph_breaks == 1 else "s")

    def summary(self) -> List[str]:
        """One line per forward or backward graph (or for the whole graph, when
        Inductor took all of it)."""
        breaks = self.breaks()
        if self.inductor_only:
            return ["%s: all with Inductor (%s), %s" % (self.name, self.inductor_only, breaks)]
        return ["%s, %s" % (p.summary(), breaks) for p in self.partitions]

    def head(self) -> List[str]:
        """The graph's name and what recognition found in it."""
        return ["== liger: %s" % self.name] + self.recognition

    def section(self, p: Partition) -> List[str]:
        """What became of one forward or backward graph."""
        out = ["-- %s" % p.name] + p.fusion
        for u in p.units:
            out.append("kernel %s: %s" % (u.name, u.group()))
        out += ["in place: %s" % line for line in p.in_place]
        for why in [str(left) for left in p.left] + ([p.error] if p.error else []):
            out.append("stays with Inductor: %s" % why)
        out.append("with Inductor: %s" % (", ".join(p.inductor) or "nothing"))
        return out

    def lines(self) -> List[str]:
        """The whole report (what LIGER_DEBUG=1 prints, graph by graph)."""
        if self.inductor_only:
            return ["== liger: %s" % self.name] + self.summary()
        return self.head() + [line for p in self.partitions for line in self.section(p)] + \
            self.summary()


_WARNED = set()


def _warn_once(message: str) -> None:
    if message not in _WARNED:
        _WARNED.add(message)
        warnings.warn(message, LigerFallbackWarning, stacklevel=3)


def _graph_breaks() -> int:
    from torch._dynamo.utils import counters
    return sum(counters["graph_break"].values())


def _why_inductor(example_inputs) -> Optional[str]:
    """Why a whole graph goes to Inductor, or None: its target ("cpu" on
    CPU tensors with the reference) comes from the tensors' device."""
    tensors = [t for t in example_inputs if isinstance(t, torch.Tensor)]
    if any(t.dtype == torch.float64 for t in tensors):
        return "it computes in f64; liger's kernels take bf16, f16 and f32"
    devices = {t.device for t in tensors if t.is_floating_point()} or {t.device for t in tensors}
    if len(devices) > 1:
        return "its tensors are on %s; liger's kernels take one device" % ", ".join(
            sorted(map(str, devices)))
    if not devices:
        return "it takes no tensor"
    device = devices.pop()
    if device.type == "cpu" and not bundles.cpu_reference_enabled():
        return ("it runs on the CPU; liger's kernels run on CUDA GPUs "
                "(LIGER_OPS_CPU_REFERENCE=1 runs the CPU reference, for tests)")
    try:
        bundles.device_target(device)
    except LigerError as e:
        return str(e)
    return None


class LigerBackend:
    """A torch.compile backend with its options and the reports of the
    graphs it compiled (`reports`)."""

    def __init__(self, options: Optional[Options] = None):
        self.options = options or Options()
        self.reports: List[GraphReport] = []
        # The module path of the model within what is compiled (compile_model's
        # wrapper holds it as `model`): reports name the model's own modules.
        self.prefix = ""
        self._breaks_before = _graph_breaks()

    # -- reports and dumps ------------------------------------------------------

    def _debug(self) -> bool:
        return self.options.report or os.environ.get("LIGER_DEBUG", "") not in ("", "0")

    def _dump_dir(self) -> Optional[str]:
        return self.options.dump_dir or os.environ.get("LIGER_DUMP_DIR") or None

    def _dumper(self, name: str):
        root = self._dump_dir()
        if not root:
            return None
        folder = os.path.join(root, name)
        os.makedirs(folder, exist_ok=True)

        def dump(file: str, text: str) -> None:
            with open(os.path.join(folder, file), "w") as f:
                f.write(text if text.endswith("\n") else text + "\n")
        return dump

    def _relative(self, lines: List[str]) -> List[str]:
        if not self.prefix:
            return lines
        return [line.replace(" at %s" % self.prefix, " at ") for line in lines]

    def _print(self, lines: List[str]) -> None:
        print("\n".join(lines), file=sys.stderr, flush=True)

    # -- the backend ----------------------------------------------------------

    def __call__(self, gm, example_inputs, **kwargs):
        from torch._inductor.compile_fx import compile_fx
        report = GraphReport("graph%d" % len(self.reports))
        self.reports.append(report)
        report.graph_breaks = _graph_breaks() - self._breaks_before
        dump = self._dumper(report.name)
        if dump:
            dump("dynamo.txt", gm.print_readable(print_output=False))
        why = _why_inductor(example_inputs)
        if why:
            report.inductor_only = why
            _warn_once("liger: Inductor compiles the whole graph: %s" % why)
            if self._debug():
                self._print(report.lines())
            return compile_fx(gm, example_inputs)
        device = next(t.device for t in example_inputs if isinstance(t, torch.Tensor))
        target = bundles.device_target(device)
        try:
            graph = self._substituted(gm, report, dump)
        except Exception as e:  # code the aten trace or recognition cannot take
            report.inductor_only = "liger could not trace it: %s: %s" % (
                type(e).__name__, str(e).splitlines()[0] if str(e) else "")
            _warn_once("liger: Inductor compiles the whole graph: %s" % report.inductor_only)
            return compile_fx(gm, example_inputs)
        inner = functools.partial(self._inner, report, target, dump)
        # The backward is compiled with the forward when precompiling (nothing runs).
        patches = dict(enable_autograd_cache=False,
                       force_non_lazy_backward_lowering=bool(self.options.precompile_dir))
        with torch._functorch.config.patch(**patches):
            compiled = compile_fx(graph, example_inputs, inner_compile=inner,
                                  decompositions=_decompositions())
        if self.options.precompile_dir:
            return _compiled_only
        return compiled

    def _substituted(self, gm, report: GraphReport, dump):
        """The dynamo graph as aten ops (pre-dispatch), recognised subgraphs
        replaced by the liger operators."""
        fake_mode, fake_args = _fake_inputs(gm)
        substitution = Substitution(self.options, self.options.check())
        with fake_mode, fx_traceback.preserve_node_meta():
            aten = make_fx(torch.fx.Interpreter(gm).run, pre_dispatch=True,
                           tracing_mode="fake")(*fake_args)
        masks.note_strict_sizes(gm)
        mask_lines = masks.causal_masks(aten)
        report.guarded_windows = [m.guarded_window for m in mask_lines if m.guarded_window]
        rewrites = [str(line) for line in mask_lines + grouped_kv(aten)]
        # Whether AOTAutograd will make a backward of this graph, whose
        # operators then need their backward kernels too.
        training = torch.is_grad_enabled() and any(
            isinstance(t, torch.Tensor) and t.requires_grad for t in fake_args)
        found = recognize(aten, policy=substitution.policy(fake_mode, training))
        report.recognition = self._relative(rewrites + found.lines())
        if found.dynamic:
            _warn_once("liger: in %s, %s; those parts stay with Inductor"
                       % (report.name, found.dynamic[0]))
        graph = substitute(aten, found.records, substitution, fake_mode, fake_args)
        _recompute_in_backward(graph)
        if dump:
            dump("aten.txt", aten.print_readable(print_output=False))
            dump("substituted.txt", graph.print_readable(print_output=False))
        return graph

    def _inner(self, report: GraphReport, target: str, dump, gm, example_inputs, **kwargs):
        from torch._inductor.compile_fx import compile_fx_inner
        from torch._guards import detect_fake_mode
        name = "%s.%s" % (report.name, "backward" if kwargs.get("is_backward") else "forward")
        if dump:
            dump("%s.txt" % name, gm.print_readable(print_output=False))
        fake_mode = detect_fake_mode(example_inputs) or _fake_inputs(gm)[0]
        try:
            part = partition(gm, name, target, fake_mode, self.options.check(), dump,
                             self.options.fused_mlp)
        except Exception as e:  # liger-opt refused what the importer wrote (a bug): said
            part = Partition(name, error="liger could not compile it: %s" % (
                str(e).splitlines()[0] if isinstance(e, LigerError) else
                "%s: %s" % (type(e).__name__, e)))
            _warn_once("liger: %s stays with Inductor: %s" % (name, part.error))
        if kwargs.get("is_backward"):
            part.in_place = inplace.reuse_saved_inputs(gm, inplace.donated_inputs())
        part.fusion = self._relative(part.fusion)
        report.partitions.append(part)
        if dump:
            dump("%s.partitioned.txt" % name, gm.print_readable(print_output=False))
            dump("%s.kernels.txt" % name, "\n".join(
                "%s %s %s: %s" % (u.name, u.key, bundles.load(u.spec).path, ", ".join(u.ops))
                for u in part.units) or "(no fusion group)")
        if self._debug():
            first = report.head() if len(report.partitions) == 1 else []
            self._print(first + report.section(part) + ["%s, %s" % (part.summary(),
                                                                   report.breaks())])
        return compile_fx_inner(gm, example_inputs, **kwargs)


# Liger operators AOTAutograd's partitioner may run again in the backward
# rather than save: elementwise, so recomputing one costs a memory-bound
# kernel over its inputs (which the backward holds anyway: the gated
# activations' gradient reads gate and up), where saving it holds a
# [tokens, intermediate] tensor per layer from the forward to the backward.
# The partitioner recomputes only the ops of its allowlist (aten's
# pointwise ops, which is what torch.compile does with silu(gate) * up);
# a liger operator needs the checkpoint policy's tag.
RECOMPUTED_OPS = ("swiglu", "geglu")


def _recompute_in_backward(graph):
    from torch.utils.checkpoint import CheckpointPolicy
    targets = {getattr(torch.ops.liger, name).default for name in RECOMPUTED_OPS}
    for node in graph.graph.nodes:
        if node.op == "call_function" and node.target in targets:
            node.meta["recompute"] = CheckpointPolicy.PREFER_RECOMPUTE


# Ops whose Inductor decomposition the backend replaces by PyTorch's own
# kernel behind an opaque operator of the same name (group_ops).
# embedding_dense_backward: the decomposition accumulates a bf16/f16
# embedding's gradient in an f32 [vocab, hidden] buffer and copies it down
# (Llama-3-8B's vocabulary: 1.96 GiB alive at the backward's peak, measured
# on the H200), where PyTorch's kernel writes the weight's dtype directly.
# (Dropping the decomposition instead would leave Inductor an op it both
# decomposes and falls back on, which torch 2.11 refuses.)
KEPT_OPS = ("embedding_dense_backward",)


@functools.lru_cache(maxsize=None)
def _kept_table():
    from torch._inductor.decomposition import select_decomp_table
    from . import group_ops  # noqa: F401  (registers the operators)
    kept = {getattr(torch.ops.aten, name): getattr(torch.ops.liger, name).default
            for name in KEPT_OPS}
    return {op: kept.get(getattr(op, "overloadpacket", op), fn)
            for op, fn in select_decomp_table().items()}


def _decompositions():
    """Inductor's decomposition table with KEPT_OPS mapped to their
    operators (built once; a copy per graph, which compile_fx may keep)."""
    return dict(_kept_table())


class Precompiled(Exception):
    """Raised where a graph compiled only to precompile its kernels would run."""


def _compiled_only(*args):
    raise Precompiled()


def _fake_inputs(gm):
    """The fake mode of a dynamo graph and its placeholders' fake values."""
    from torch._guards import detect_fake_mode
    values = [n.meta.get("example_value", n.meta.get("val")) for n in gm.graph.nodes
              if n.op == "placeholder"]
    return detect_fake_mode(values), values


# Options -> the backend that compiles with them (torch.compile(backend="liger")).
_BACKENDS: Dict[Options, LigerBackend] = {}


def liger_backend(gm, example_inputs, options=None, **kwargs):
    """The function registered as torch.compile's backend "liger"; `options`
    is torch.compile's options dict (Options' fields); `reports()` says
    what became of the graphs."""
    options = Options.of(options)
    backend = _BACKENDS.setdefault(options, LigerBackend(options))
    return backend(gm, example_inputs)


def reports() -> List[GraphReport]:
    """The reports of the graphs backend="liger" compiled in this process."""
    return [r for b in _BACKENDS.values() for r in b.reports]


# --- liger.compile_model ----------------------------------------------------------

class _Training(torch.nn.Module):
    """A causal LM as a training step wants it: with labels, in training, no
    logits are returned (the lm_head and loss can then fuse, as Liger-Kernel's
    skip_logits), and no KV cache is made unless asked for."""


    def __init__(self, model, skip_logits: Optional[bool]):
        super().__init__()
        self.model = model
        self.skip_logits = skip_logits
        try:
            self._takes_use_cache = "use_cache" in inspect.signature(model.forward).parameters
        except (TypeError, ValueError):
            self._takes_use_cache = False

    def forward(self, *args, **kwargs):
        if self.training and self._takes_use_cache and "use_cache" not in kwargs:
            kwargs["use_cache"] = False
        out = self.model(*args, **kwargs)
        skip = self.skip_logits
        if skip is None:
            skip = self.training and kwargs.get("labels") is not None
        if skip and getattr(out, "loss", None) is not None and "logits" in out:
            out["logits"] = None
        return out

    def __getattr__(self, name):
        try:
            return super().__getattr__(name)
        except AttributeError:
            return getattr(super().__getattr__("model"), name)


class CompiledModel(torch.nn.Module):
    """What compile_model returns: the compiled model, called with the batch
    and sequence dimensions of its tensor arguments dynamic (token counts
    change; the kernels take them as arguments), and `liger`, the backend
    (its `reports`)."""

    def __init__(self, compiled, backend: LigerBackend):
        super().__init__()
        self.compiled = compiled
        self.liger = backend

    def forward(self, *args, **kwargs):
        for t in list(args) + list(kwargs.values()):
            if isinstance(t, torch.Tensor) and t.dim() >= 2:
                torch._dynamo.maybe_mark_dynamic(t, 0)
                torch._dynamo.maybe_mark_dynamic(t, 1)
        return self.compiled(*args, **kwargs)


def compile_model(model, *, fullgraph: bool = False, dynamic: Optional[bool] = None,
                  skip_logits: Optional[bool] = None, **options) -> CompiledModel:
    """`torch.compile(model, backend="liger")` for training: a Hugging Face
    causal LM called with labels in training mode returns no logits
    (skip_logits=None decides so; True or False forces it) and makes no KV
    cache unless asked, so its lm_head and loss can fuse; the batch and
    sequence dimensions of its tensor arguments are dynamic. `options`: the
    backend's (Options). `.liger.reports` says what each graph became."""
    backend = LigerBackend(Options.of(options))
    backend.prefix = "model."
    compiled = torch.compile(_Training(model, skip_logits), backend=backend,
                             fullgraph=fullgraph, dynamic=dynamic)
    return CompiledModel(compiled, backend)


def precompile(model, batch: Dict[str, Any], out_dir: str, target: str = "sm_90a",
               **options) -> List[GraphReport]:
    """Compiles, for the GPU `target`, every kernel a training step of `model`
    (on the CPU) on `batch` needs under compile_model: the liger operators'
    and the fusion groups', into the cache `out_dir`; where the model trains
    on that GPU without the compiler, LIGER_OPS_BUNDLES=out_dir serves them.
    The graphs are traced and compiled (on the CPU reference, for the same
    graphs a GPU run makes) and nothing runs; the token dimensions are
    dynamic, so a small batch serves every size, but for a sliding window
    wider than the batch's sequence: the graphs then serve lengths up to
    the window (recognise-causal-mask), and a warning asks for a batch
    longer than it too. Returns the reports."""
    previous = os.environ.get("LIGER_OPS_CPU_REFERENCE")
    os.environ["LIGER_OPS_CPU_REFERENCE"] = "1"
    try:
        compiled = compile_model(model, kernel_target=target, precompile_dir=out_dir,
                                 **options)
        try:
            compiled(**batch)
        except Precompiled:
            pass
    finally:
        if previous is None:
            del os.environ["LIGER_OPS_CPU_REFERENCE"]
        else:
            os.environ["LIGER_OPS_CPU_REFERENCE"] = previous
    guarded = sorted({w for r in compiled.liger.reports for w in r.guarded_windows})
    if guarded:
        warnings.warn("liger precompile: the batch's sequence is within the sliding window of "
                      "%s keys, so the kernels serve sequences up to it; for longer ones, "
                      "precompile again with a batch longer than the window"
                      % " and ".join(map(str, guarded)), stacklevel=2)
    return compiled.liger.reports
