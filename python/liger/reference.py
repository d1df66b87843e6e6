"""The CPU reference path from Python: run liger functions on NumPy arrays.

`run_cpu` compiles one function of a liger module for the CPU (through
`liger-cpu-runner`: liger-lower-to-linalg, bufferization, LLVM JIT) and runs
it on NumPy inputs. `run_before_after` runs a module before and after a pass
pipeline on the same inputs, the check every fusion pass owes: the function
must not change beyond rounding.

NumPy has no bfloat16: a bf16 argument is given as a `BF16` wrapper (or a
uint16 array of bit patterns) and bf16 results come back as float32 arrays
holding the exact bf16 values. `to_bf16` rounds float arrays to nearest even,
as the hardware does.

`ReferenceBundle` is a module's functions as a runtime Bundle's kernels on
CPU torch tensors: what liger.ops runs on CPU tensors
(LIGER_OPS_CPU_REFERENCE=1).
"""

import os
import subprocess
import tempfile
from typing import List, Optional, Sequence, Union

import numpy as np

from .driver import LigerError, find_tool, run_opt


class BF16:
    """A bf16 array, held as its uint16 bit patterns."""

    def __init__(self, bits: np.ndarray):
        if bits.dtype != np.uint16:
            raise TypeError("BF16 holds uint16 bit patterns; use to_bf16() to round floats")
        self.bits = np.asarray(bits, order="C")

    @property
    def shape(self):
        return self.bits.shape

    def to_f32(self) -> np.ndarray:
        return bf16_bits_to_f32(self.bits)


def to_bf16(values: np.ndarray) -> BF16:
    """Rounds `values` to bf16 (round to nearest, ties to even; NaN stays NaN)."""
    f = np.asarray(values, dtype=np.float32, order="C")
    bits = f.view(np.uint32).astype(np.uint64)
    rounding = ((bits >> 16) & 1) + 0x7FFF
    rounded = ((bits + rounding) >> 16).astype(np.uint16)
    nan = np.isnan(f)
    rounded[nan] = ((bits[nan] >> 16) | 0x40).astype(np.uint16)
    return BF16(rounded)


def bf16_bits_to_f32(bits: np.ndarray) -> np.ndarray:
    """The float32 values of bf16 bit patterns (exact)."""
    return (bits.astype(np.uint32) << 16).view(np.float32)


def round_to(values: np.ndarray, dtype: str) -> np.ndarray:
    """`values` rounded to `dtype` ('bf16', 'f16', 'f32'), returned as float64.

    The reference implementations use it to round where an op rounds.
    """
    if dtype == "bf16":
        return to_bf16(np.asarray(values, dtype=np.float32)).to_f32().astype(np.float64)
    if dtype == "f16":
        return np.asarray(values).astype(np.float16).astype(np.float64)
    if dtype == "f32":
        return np.asarray(values).astype(np.float32).astype(np.float64)
    raise ValueError("unknown dtype %r" % dtype)


Input = Union[np.ndarray, BF16]


def _save(path: str, value: Input) -> None:
    if isinstance(value, BF16):
        np.save(path, value.bits)
        return
    array = np.asarray(value, order="C")
    if array.dtype == np.float64 or array.dtype == np.float32 or array.dtype == np.float16 \
            or array.dtype == np.int32 or array.dtype == np.int64 or array.dtype == np.bool_ \
            or array.dtype == np.uint16:
        np.save(path, array)
        return
    raise TypeError("unsupported input dtype %s (use float16/32/64, int32/64, bool or BF16)"
                    % array.dtype)


def run_cpu(mlir: str, entry: str, inputs: Sequence[Input],
            tool: Optional[str] = None, specialize_shapes: bool = False) -> List[np.ndarray]:
    """Runs function `entry` of the module `mlir` on `inputs`; returns its results.

    bf16 results are returned as float32 arrays of their exact values. With
    `specialize_shapes`, the function is compiled for the input shapes
    (static) instead of as written (the shapes are checked either way). Raises
    LigerError with the runner's diagnostics when compilation or the input
    check fails.
    """
    exe = tool or find_tool("liger-cpu-runner")
    with tempfile.TemporaryDirectory(prefix="liger-cpu-") as tmp:
        module = os.path.join(tmp, "module.mlir")
        with open(module, "w") as f:
            f.write(mlir)
        args = [exe, module, "--entry=" + entry]
        if specialize_shapes:
            args.append("--specialize-shapes")
        for i, value in enumerate(inputs):
            path = os.path.join(tmp, "in%d.npy" % i)
            _save(path, value)
            args += ["-i", path]
        out_dir = os.path.join(tmp, "out")
        os.mkdir(out_dir)
        args += ["--output-dir", out_dir]
        proc = subprocess.run(args, capture_output=True, text=True)
        if proc.returncode < 0:
            raise LigerError("liger-cpu-runner was killed by signal %d" % -proc.returncode,
                             proc.stderr)
        if proc.returncode != 0:
            raise LigerError("liger-cpu-runner failed (exit %d)" % proc.returncode,
                             proc.stderr.strip())
        results = []
        count = len([n for n in os.listdir(out_dir) if n.startswith("result")])
        for i in range(count):
            value = np.load(os.path.join(out_dir, "result%d.npy" % i))
            # uint16 only ever carries bf16: liger has no 16-bit integers.
            results.append(bf16_bits_to_f32(value) if value.dtype == np.uint16 else value)
        return results


def run_before_after(mlir: str, pipeline: Sequence[str], entry: str,
                     inputs: Sequence[Input], tool: Optional[str] = None):
    """Runs `entry` before and after `liger-opt <pipeline>` on the same inputs.

    Returns (before, after, transformed_mlir). The caller compares the results
    with the tolerance of the dtypes involved (see `assert_close`).
    """
    transformed = run_opt(mlir, list(pipeline), tool)
    before = run_cpu(mlir, entry, inputs)
    after = run_cpu(transformed, entry, inputs)
    return before, after, transformed


# Relative tolerances by dtype: fp32 results are compared at 1e-5, half
# precision at a few units of their last place.
TOLERANCE = {"f32": 1e-5, "f16": 2e-3, "bf16": 1e-2}


def assert_close(actual: np.ndarray, expected: np.ndarray, dtype: str, what: str = "",
                 rtol: Optional[float] = None, atol: Optional[float] = None) -> float:
    """Checks `actual` against `expected` within the tolerance of `dtype`.

    NaN or infinity never passes unless the reference has it at the same
    place. The error is measured relative to the largest reference magnitude
    (so cancellation near zero does not make a correct result fail), and
    returned so tests can report it.
    """
    actual = np.asarray(actual, dtype=np.float64)
    expected = np.asarray(expected, dtype=np.float64)
    label = (what + ": ") if what else ""
    if actual.shape != expected.shape:
        raise AssertionError("%sshape %s, expected %s" % (label, actual.shape, expected.shape))
    bad_actual = ~np.isfinite(actual)
    bad_expected = ~np.isfinite(expected)
    if np.any(bad_actual != bad_expected) or np.any(
            np.isnan(actual[bad_expected]) != np.isnan(expected[bad_expected])):
        raise AssertionError("%snon-finite values differ: %d in the result, %d in the reference"
                             % (label, int(bad_actual.sum()), int(bad_expected.sum())))
    finite = ~bad_expected
    if not finite.any():
        return 0.0
    rtol = TOLERANCE[dtype] if rtol is None else rtol
    scale = max(float(np.max(np.abs(expected[finite]))), 1e-30)
    err = float(np.max(np.abs(actual[finite] - expected[finite]))) / scale
    bound = rtol + (0.0 if atol is None else atol / scale)
    if not err <= bound:
        raise AssertionError("%smax error %.3g (relative to max |ref| %.3g) exceeds %.3g"
                             % (label, err, scale, bound))
    return err


class ReferenceKernel:
    """One function of a liger module, callable as a runtime Kernel is but
    on CPU torch tensors, through the reference lowering (liger-cpu-runner:
    a process per call, seconds; for tests without a GPU)."""

    def __init__(self, text, function):
        import re
        self.text, self.function = text, function
        head = re.search(r"func\.func @%s\((.*?)\) -> (.*?) \{\n" % re.escape(function), text)

        def described(types):
            # As a runtime Kernel's parameters: each tensor's dtype and
            # shape, a dynamic size named "rows".
            return [dict(dtype=t[-1], shape=["rows" if d == "?" else int(d) for d in t[:-1]])
                    for t in (m.split("x") for m in re.findall(r"tensor<([^>]*)>", types))]
        self.inputs, self.outputs = described(head.group(1)), described(head.group(2))
        # The element type of each result (bf16 results come back as f32
        # arrays of their exact values).
        self.dtypes = [o["dtype"] for o in self.outputs]
        # (A function has no scratch: the GPU kernels' workspaces, such as
        # a LoRA kernel's hand-over of its rank-r product, are not its.)
        self.workspaces = []

    def workspace_shapes(self, inputs):
        """As a runtime Kernel's: none."""
        return []

    def __call__(self, *inputs, out=None, workspaces=None):
        import torch
        if workspaces:
            raise ValueError("%s: takes no workspaces, got %d" % (self.function,
                                                                  len(workspaces)))
        arrays = []
        for t in inputs:
            t = t.detach().contiguous()
            arrays.append(BF16(t.view(torch.int16).numpy().view(np.uint16))
                          if t.dtype == torch.bfloat16 else t.numpy())
        types = {"bf16": torch.bfloat16, "f16": torch.float16, "f32": torch.float32,
                 "i32": torch.int32, "i64": torch.int64}
        results = [torch.from_numpy(np.array(r)).to(types[dt])
                   for r, dt in zip(run_cpu(self.text, self.function, arrays),
                                    self.dtypes)]
        if out is not None:
            for o, r in zip(out, results):
                o.copy_(r.reshape(o.shape))
            results = list(out)
        return results[0] if len(results) == 1 else tuple(results)


class ReferenceBundle:
    """A module on the CPU, as a runtime Bundle of its kernels:
    `bundle[kernel name]` is the reference of the function the kernel was
    compiled from (`fwd_rowwise_0` -> @fwd). With `options` of the matmul
    templates (matmul_kernels) a module's lm_head loss, its function
    @loss, is planned as liger-compile plans it and `plans` names the
    chunk functions; other functions stay as they are (`fwd_matmul_0` ->
    @fwd)."""

    def __init__(self, text, plans=(), options=None, name="a module"):
        self.path = "the reference lowering of " + name
        self._text = text
        self.kernels = self
        self.plans = list(plans)  # as a runtime Bundle's, for run_loss_plan
        options = options or {}
        if options.get("matmul_kernels") and "func.func @loss(" in text:
            self._plan_loss(options.get("loss_dw_f32", False))

    def _plan_loss(self, dw_f32):
        """The lm_head loss as liger-compile plans it: the chunk functions
        (liger-plan-loss) and a plan naming them (a kernel `<function>_ref_0`
        is its function here)."""
        import re
        self._text = run_opt(self._text, [
            "--liger-loss-plan-pipeline" + ("=dw-f32=true" if dw_f32 else "")])
        found = re.search(r"liger\.plan = \{([^{}]*)\}", self._text)
        if not found:
            raise LigerError("%s: liger-plan-loss left the loss unplanned" % self.path)
        self.plans = [dict(function="loss", kernels={
            stage: fn + "_ref_0" for stage, fn in re.findall(r"(\w+) = @(\w+)", found.group(1))})]

    def get(self, name):
        function = name.rsplit("_", 2)[0]
        if "func.func @%s(" % function not in self._text:
            return None
        return ReferenceKernel(self._text, function)

    def __getitem__(self, name):
        kernel = self.get(name)
        if kernel is None:
            raise KeyError("%s has no function for kernel %r" % (self.path, name))
        return kernel
