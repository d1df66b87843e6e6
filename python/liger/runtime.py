"""Run compiled liger kernels on torch tensors.

    bundle = liger.runtime.load("layer.bundle")      # written by liger-compile
    y, s = bundle["layer_rowwise_0"](x, residual, weight)

`load` opens a bundle through the `_liger_runtime` extension (build it with
`scripts/build-runtime.sh`; no MLIR needed). Calling a kernel checks the
tensors (CUDA, one device, dtype, contiguity, shapes; the runtime re-checks
shapes and alignment against the manifest), allocates the outputs unless
`out=` gives them (and the f32 workspaces of a kernel that reduces across
rows, such as RMSNorm's backward with its weight gradient), and launches on
the current CUDA stream of the tensors' device. Errors are exceptions that say what and where; importing this module
never touches the GPU.
"""

import os

from .loss_plan import chunked_loss

_DTYPES = None


def _runtime():
    try:
        import _liger_runtime
    except ImportError as e:
        raise ImportError(
            "the liger runtime extension (_liger_runtime) is not built or not on "
            "PYTHONPATH: run scripts/build-runtime.sh and add its python/ folder "
            "(%s)" % e) from None
    return _liger_runtime


def _torch_dtypes():
    global _DTYPES
    if _DTYPES is None:
        import torch
        _DTYPES = {"bf16": torch.bfloat16, "f16": torch.float16, "f32": torch.float32,
                   "i32": torch.int32, "i64": torch.int64}
    return _DTYPES


def _dtype_name(dtype):
    for name, t in _torch_dtypes().items():
        if t == dtype:
            return name
    raise TypeError("liger kernels take bf16, f16, f32, i32 or i64 tensors, got %s" % dtype)


class Kernel:
    """One kernel of a bundle, callable on torch tensors."""

    def __init__(self, bundle, spec):
        self._bundle = bundle
        self.name = spec["name"]
        self.ops = spec["ops"]
        self.params = spec["params"]
        self.inputs = [p for p in self.params if p["role"] == "input"]
        self.outputs = [p for p in self.params if p["role"] == "output"]
        self.workspaces = [p for p in self.params if p["role"] == "workspace"]

    def __repr__(self):
        return "<liger kernel %s: %s>" % (self.name, self.ops)

    def output_shapes(self, inputs):
        """The shapes of the outputs for `inputs` (torch tensors or anything
        with .shape): [B, H, T, D] outputs take the shapes of the [B, H, T, D]
        inputs in order (or, without such inputs, [B, heads, T, D] from
        [B, T, K] rows), row outputs the inputs' leading dimensions, feature
        and matrix outputs their static shape."""
        leading = None
        heads = []
        for p, t in zip(self.inputs, inputs):
            if p["kind"] == "rows" and leading is None:
                leading = tuple(t.shape[:-1])
            elif p["kind"] == "heads":
                heads.append(tuple(t.shape))
        if leading is None and not heads:
            raise ValueError("%s: no row-shaped input to size the outputs" % self.name)
        shapes = []
        for p in self.outputs:
            if p["kind"] == "heads" and not heads:
                # A projection's head split (q/k with RoPE): rows [B, T, K]
                # give [B, H, T, D].
                if len(leading) != 2:
                    raise ValueError("%s writes [B, H, T, D] from [B, T, K] rows, got rows "
                                     "of rank %d" % (self.name, len(leading) + 1))
                shapes.append((leading[0], p["heads"], leading[1], p["length"]))
            elif p["kind"] == "heads":
                shapes.append(heads[len([o for o in self.outputs[:len(shapes)]
                                         if o["kind"] == "heads"])])
            elif p["kind"] == "rows":
                shapes.append(leading + (p["length"],))
            elif p["kind"] == "feature":
                shapes.append((p["length"],))
            elif p["kind"] == "matrix":
                shapes.append((p["heads"], p["length"]))  # a weight gradient [N, K]
            elif p["kind"] == "scalar":
                shapes.append(())  # a reduced loss
            else:
                shapes.append(leading)
        return shapes

    def __call__(self, *inputs, out=None):
        import torch
        if len(inputs) != len(self.inputs):
            raise TypeError("%s takes %d input tensors (%s), got %d" % (
                self.name, len(self.inputs), ", ".join(p["name"] for p in self.inputs),
                len(inputs)))
        leading = None
        device = None
        for p, t in zip(self.inputs, inputs):
            if not isinstance(t, torch.Tensor):
                raise TypeError("%s: %s must be a torch.Tensor" % (self.name, p["name"]))
            if not t.is_cuda:
                raise ValueError("%s: %s is on %s; liger kernels run on CUDA tensors"
                                 % (self.name, p["name"], t.device))
            if device is None:
                device = t.device
            elif t.device != device:
                raise ValueError("%s: %s is on %s, the other tensors on %s"
                                 % (self.name, p["name"], t.device, device))
            if not t.is_contiguous():
                raise ValueError("%s: %s must be contiguous (call .contiguous())"
                                 % (self.name, p["name"]))
            if p["kind"] == "rows" and leading is None:
                leading = tuple(t.shape[:-1])
        dtypes = _torch_dtypes()
        if out is None:
            out = [torch.empty(shape, dtype=dtypes[p["dtype"]], device=device)
                   for p, shape in zip(self.outputs, self.output_shapes(inputs))]
        else:
            out = list(out)
            if len(out) != len(self.outputs):
                raise TypeError("%s: out= needs %d tensors" % (self.name, len(self.outputs)))
        workspaces = []
        if self.workspaces:
            rows = 1
            for d in leading or ():
                rows *= d
            ctas = self._bundle.workspace_ctas(
                self.name, rows, torch.cuda.get_device_properties(device).multi_processor_count)
            workspaces = [torch.empty((ctas, p["length"]), dtype=torch.float32, device=device)
                          for p in self.workspaces]
        args = [(t.data_ptr(), _dtype_name(t.dtype), list(t.shape))
                for t in list(inputs) + out + workspaces]
        stream = torch.cuda.current_stream(device).cuda_stream
        if os.environ.get("LIGER_DEBUG"):
            print("liger: launch %s (%s) rows=%s" % (self.name, self.ops, leading))
        self._bundle.launch(self.name, args, stream, device.index or 0)
        return out[0] if len(out) == 1 else tuple(out)


class Bundle:
    """An opened kernel bundle: `bundle[name]` is a callable Kernel."""

    def __init__(self, path):
        self.path = path
        self._bundle = _runtime().Bundle.open(path)
        self.kernels = {k["name"]: Kernel(self._bundle, k) for k in self._bundle.kernels()}
        import json
        with open(os.path.join(path, "manifest.json")) as f:
            # The planned loss groups (liger-plan-loss): run_loss_plan.
            self.plans = json.load(f).get("plans", [])

    def __getitem__(self, name):
        try:
            return self.kernels[name]
        except KeyError:
            raise KeyError("%s has no kernel %r (it has %s)"
                           % (self.path, name, ", ".join(sorted(self.kernels)))) from None


def run_loss_plan(bundle, hidden, weight, target, function=None, grad_loss=None,
                  want_dx=True, want_dw=True, class_weight=None):
    """Runs a planned loss group of `bundle` (liger-compile --matmul-kernels
    plans each lm_head loss group: `bundle.plans`): the loss of
    hidden [N, H] · weightᵀ against target [N] and, for the incoming gradient
    `grad_loss` (1 if None), dhidden and dweight, in chunks of the plan's
    `chunk_tokens` rows, never holding the [N, V] logits. `function` picks
    the plan of that function where the bundle has several; a plan of a loss
    alone (no gradient op in its group) runs with want_dx=want_dw=False.
    `class_weight` ([V], f32) is required by, and only taken by, a plan of
    a loss with class weights (the plan's "class_weight").
    Returns (loss, dhidden, dweight), a gradient not wanted None."""
    plans = [p for p in bundle.plans if function is None or p["function"] == function]
    if len(plans) != 1:
        raise ValueError("%s has %d loss plans%s (it has %s)" % (
            bundle.path, len(plans), " for @%s" % function if function else "",
            ", ".join("@" + p["function"] for p in bundle.plans) or "none"))
    plan = plans[0]
    if (want_dx or want_dw) and "dx" not in plan["kernels"]:
        raise ValueError("the plan of @%s has no weight gradient (its loss group has no "
                         "liger.fused_linear_cross_entropy_grad): pass want_dx=False, "
                         "want_dw=False" % plan["function"])
    if bool(plan.get("class_weight")) != (class_weight is not None):
        raise ValueError("the plan of @%s is of a loss %s class weights, and class_weight "
                         "was %s" % (plan["function"],
                                     "with" if plan.get("class_weight") else "without",
                                     "not given" if class_weight is None else "given"))
    kernels = {stage: bundle[name] for stage, name in plan["kernels"].items()}
    return chunked_loss(kernels, hidden, weight, target, class_weight,
                            plan["chunk_tokens"],
                            plan["mean"], plan["ignore_index"], want_dx, want_dw,
                            dw_f32=bool(plan.get("dw_f32")), grad_loss=grad_loss)


def load(path):
    """Opens the bundle directory `path` (written by liger-compile)."""
    return Bundle(path)


def driver_status():
    """'OK', or why the CUDA driver cannot be used on this machine."""
    return _runtime().driver_status()
