"""Where the kernels of a spec come from, loaded once per process.

A spec's bundle is found, in this order:

1. in a precompiled cache: `$LIGER_OPS_BUNDLES` (directories separated by
   the path separator), where `python -m liger.ops precompile DIR SPEC...`
   (or `precompile(DIR, specs)`) wrote it: the way to run on a machine
   without the compiler (a GPU machine with only the runtime);
2. in the user's bundle cache (liger.cache), compiled there on first use
   where liger-compile is installed (this compiler's entry), or any
   compiler's where none is installed.

Otherwise `bundle_path` raises LigerError naming the spec to precompile.
Both are liger.cache caches: one layout, one key (`spec.key()`), one
validation. A spec of target "cpu" is the reference lowering of its module
(liger.reference.ReferenceBundle), for CPU tensors.
"""

import contextlib
import os
import sys
import warnings

from . import cache, compiler, driver
from .errors import LigerError, LigerRecompileWarning
from .specs import (DEFAULT_TARGET, REFERENCE_TARGET, as_spec, target_for_capability,
                    targets_text)

_LOADED = {}
_KERNELS = {}
_TARGETS = {}
# How many configurations (specs) of one op a process loads before liger
# says so, once per op (LigerRecompileWarning): an attribute is a constant
# of the kernels, so each new value compiles (or finds) a bundle, which
# stays loaded, as CUDA graphs may hold its kernels.
RECOMPILE_WARNING_AT = 32
_LOADED_PER_OP = {}


def clear():
    """Forgets every loaded bundle and kernel (they load again on next use)."""
    _LOADED.clear()
    _KERNELS.clear()
    _TARGETS.clear()
    _LOADED_PER_OP.clear()


def _counted(spec):
    """Counts a configuration of spec's op as loaded (where its spec class
    counts them); warns once per op when they reach RECOMPILE_WARNING_AT."""
    if not spec.COUNTED:
        return
    n = _LOADED_PER_OP[spec.op] = _LOADED_PER_OP.get(spec.op, 0) + 1
    if n == RECOMPILE_WARNING_AT:
        warnings.warn(
            "liger.ops: %d configurations of %s loaded in this process, each kept loaded: its "
            "attributes (eps, beta, temperature, ignore_index, ...) and sizes are constants of "
            "its kernels, so a value that changes from call to call (a schedule) compiles and "
            "loads another bundle each time; keep such values fixed or take them from a few "
            "(the latest: %s)" % (n, spec.op, spec), LigerRecompileWarning, stacklevel=4)


def cpu_reference_enabled():
    """Whether calls on CPU tensors run the compiler's reference lowering
    (`LIGER_OPS_CPU_REFERENCE=1`): every call runs its liger function
    through liger-cpu-runner, seconds per call, for testing code that calls
    liger.ops (a patched model, say) on a machine without a GPU."""
    return os.environ.get("LIGER_OPS_CPU_REFERENCE", "") not in ("", "0")


def trace_constant(fn):
    """`fn` as a constant of a torch.compile trace: dynamo calls it and
    keeps its result, without guarding on what it reads (the table of
    targets, which the liger backend itself fills while it compiles the
    graph: a guard on the table lacking a device would fail on the frame
    that made it). This is the mark torch._dynamo.assume_constant_result
    sets, set here without importing dynamo (a second of every `import
    liger.ops`; liger.ops' fallback warnings are traced alike);
    test_backend.py checks it is still that function's mark."""
    fn._dynamo_marked_constant = True
    return fn


@trace_constant
def device_target(device):
    """The target of the kernels for tensors on `device` (a torch.device):
    the GPU's (specs.target_for_capability), "cpu" on the CPU with the
    reference lowering enabled. Raises LigerError where liger has no kernels
    for the device."""
    key = (device.type, device.index)
    target = _TARGETS.get(key)
    if target is None:
        if device.type == "cuda":
            import torch
            with _failing_as_liger_error("cannot read the compute capability of %s" % device):
                major, minor = torch.cuda.get_device_capability(device)
                name = torch.cuda.get_device_name(device)
            target = target_for_capability(major, minor)
            if target is None:
                raise LigerError(
                    "liger has no kernels for %s (compute capability %d.%d): its targets are "
                    "%s" % (name, major, minor, targets_text()))
        elif device.type == "cpu" and cpu_reference_enabled():
            target = REFERENCE_TARGET
        else:
            raise LigerError("liger.ops runs on CUDA tensors, got tensors on %s%s" % (
                device, " (LIGER_OPS_CPU_REFERENCE=1 runs CPU tensors through the slow "
                "reference lowering, for tests)" if device.type == "cpu" else ""))
        _TARGETS[key] = target
    return target


def precompiled_roots():
    return [d for d in os.environ.get("LIGER_OPS_BUNDLES", "").split(os.pathsep) if d]


def _compiler():
    try:
        return driver.find_tool("liger-compile")
    except LigerError:
        return None


def bundle_path(spec):
    """Where the bundle of `spec` is: precompiled, in the user's cache, or
    compiled now."""
    spec = as_spec(spec)
    key = spec.key()
    for root in precompiled_roots():
        path = cache.Cache(root).lookup(key)
        if path is not None:
            return path
    exe = _compiler()
    if exe is None:
        path = cache.Cache().lookup(key)
        if path is not None:
            return path
        roots = precompiled_roots()
        raise LigerError(
            "no compiled kernels for %s (target %s)%s, and liger-compile is not installed "
            "here: on a machine with the compiler run\n  python -m liger.ops precompile%s "
            "DIR '%s'\nand set LIGER_OPS_BUNDLES=DIR here" % (
                spec, spec.target, " in LIGER_OPS_BUNDLES=%s" % os.pathsep.join(roots)
                if roots else "", "" if spec.target == DEFAULT_TARGET else
                " --target " + spec.target, spec))
    return compiler.compile(spec.module_text(), tool=exe, meta=dict(spec=str(spec)),
                            **spec.compile_options()).path


def precompile(out_dir, specs, target=None):
    """Compiles each spec (a Spec, or its text for `target`, default
    sm_90a) into the cache `out_dir` (needs liger-compile; LigerError where
    `out_dir` cannot be written), keeping this compiler's entries already
    there. Returns the bundle paths."""
    paths = []
    exe = driver.find_tool("liger-compile")
    for spec in specs:
        spec = as_spec(spec, target or DEFAULT_TARGET)
        if target is not None and spec.target != target:
            spec = spec.with_target(target)
        paths.append(compiler.compile(spec.module_text(), tool=exe, cache_dir=out_dir,
                                      meta=dict(spec=str(spec)),
                                      **spec.compile_options()).path)
    return paths


@contextlib.contextmanager
def _failing_as_liger_error(what):
    """Whatever stops `what` as a LigerError (with its cause): a missing
    runtime extension (ImportError), a bundle the runtime or the driver
    refuses, a failing CUDA call (RuntimeError), the cache's file system
    (OSError), a bundle without the kernels a spec needs. Callers (a
    patched model's fallback) catch LigerError alone."""
    try:
        yield
    except LigerError:
        raise
    except (ImportError, RuntimeError, OSError, ValueError, KeyError, TypeError) as e:
        raise LigerError("%s: %s: %s" % (what, type(e).__name__, e)) from e


def _loading(spec):
    return _failing_as_liger_error("cannot load the kernels of %s (target %s)"
                                   % (spec, spec.target))


def load(spec):
    """The bundle of `spec`, loaded once per process: the compiled kernels
    (liger.runtime), or for target "cpu" the reference functions. Raises
    LigerError, whatever the reason."""
    spec = as_spec(spec)
    bundle = _LOADED.get(spec)
    if bundle is None:
        with _loading(spec):
            if spec.target == REFERENCE_TARGET:
                from .reference import ReferenceBundle
                bundle = ReferenceBundle(spec.module_text(), options=spec.compile_options(),
                                         name=str(spec))
            else:
                from . import runtime
                bundle = runtime.load(bundle_path(spec))
        _LOADED[spec] = bundle
        _counted(spec)
        if os.environ.get("LIGER_DEBUG"):
            print("liger.ops: %s from %s" % (spec, bundle.path), file=sys.stderr)
    return bundle


def kernels(spec):
    """(forward, backward) row kernels of a spec's module (@fwd, @bwd; None
    for a module without @bwd), loaded once per process."""
    return _pair(spec, "rowwise")


def _pair(spec, template):
    """(fwd_<template>_0, bwd_<template>_0 or None) of a spec's bundle,
    loaded once per process (liger-compile numbers the kernels of each
    function by template: rowwise, matmul, attention)."""
    pair = _KERNELS.get(spec)
    if pair is None:
        bundle = load(spec)
        with _loading(spec):
            pair = (bundle["fwd_%s_0" % template], bundle.kernels.get("bwd_%s_0" % template))
        _KERNELS[spec] = pair
    return pair


def matmul_kernels(spec):
    """(forward, backward) kernels of a spec whose @fwd and @bwd are matmul
    groups compiled by the matmul template (fwd_matmul_0, bwd_matmul_0;
    liger.ops.gated_mlp's and lora_linear's; the backward None where the
    template left @bwd's group uncompiled), loaded once per process."""
    return _pair(spec, "matmul")


def matmul_kernel(spec):
    """The one kernel of a spec's @fwd compiled by the matmul template
    (liger.ops.linear_rope's)."""
    return _pair(spec, "matmul")[0]


def linear_rope_kernels(spec):
    """The q/k projection kernel of a spec of liger.ops.linear_rope (its
    @fwd, the matmul template's) and its backward's RoPE kernels (the pair
    of spec.rope_spec()), loaded once per process."""
    return matmul_kernel(spec), kernels(spec.rope_spec())


def attention_kernels(spec):
    """(forward, backward) kernels of a spec of liger.ops.attention (its
    @fwd and @bwd, the attention template's: fwd_attention_0,
    bwd_attention_0; the backward None where the module has no @bwd),
    loaded once per process."""
    return _pair(spec, "attention")


def loss_plan_kernels(spec):
    """The kernels of one chunk of a planned loss (its stage -> kernel)."""
    stages = _KERNELS.get(spec)
    if stages is None:
        bundle = load(spec)
        with _loading(spec):
            if len(bundle.plans) != 1:
                raise ValueError("its bundle %s has %d loss plans, not one" % (
                    bundle.path, len(bundle.plans)))
            (plan,) = bundle.plans
            stages = {stage: bundle[name] for stage, name in plan["kernels"].items()}
        _KERNELS[spec] = stages
    return stages
