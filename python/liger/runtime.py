"""Run compiled liger kernels on torch tensors.

    bundle = liger.runtime.load("layer.bundle")      # written by liger-compile
    y, s = bundle["layer_rowwise_0"](x, residual, weight)

`load` opens a bundle through the `_liger_runtime` extension (build it with
`scripts/build-runtime.sh`; no MLIR needed) and, where there is a GPU,
checks that the current one runs every kernel. Calling a kernel checks the
tensors (torch tensors on one CUDA device, contiguous; the runtime checks
dtypes, shapes and alignment against the kernel ABI), allocates the outputs
unless `out=` gives them (and the f32 workspaces of a kernel that reduces
across rows or accumulates, such as RMSNorm's backward with its weight
gradient or attention's with its dq, or whose CTAs hand each other values,
such as a LoRA projection's x·Aᵀ, which the launch zero-fills) in the
shapes the runtime gives (asked once per input shapes and device), and
launches on the current CUDA stream of the tensors' device. Errors are
exceptions that say what and where; importing this module never touches
the GPU.
"""

import os

from .loss_plan import chunked_loss, gives_z_loss, per_token, takes_bias

_DTYPES = None


def _runtime():
    # Installed: inside the package. A checkout: build-runtime-py/python on
    # PYTHONPATH.
    try:
        from . import _liger_runtime
        return _liger_runtime
    except ImportError:
        pass
    try:
        import _liger_runtime
    except ImportError as e:
        raise ImportError(
            "the liger runtime extension (_liger_runtime) is neither in the liger package "
            "(pip install .) nor on PYTHONPATH: run scripts/build-runtime.sh and add its "
            "python/ folder (%s)" % e) from None
    return _liger_runtime


def _torch_dtypes():
    global _DTYPES
    if _DTYPES is None:
        import torch
        _DTYPES = {"bf16": torch.bfloat16, "f16": torch.float16, "f32": torch.float32,
                   "i32": torch.int32, "i64": torch.int64}
    return _DTYPES


_SMS = {}


def _sm_count(device):
    """The SM count of CUDA device index `device` (asked once)."""
    n = _SMS.get(device)
    if n is None:
        import torch
        n = _SMS[device] = torch.cuda.get_device_properties(device).multi_processor_count
    return n


_RAW_STREAM = None


def _raw_stream(device):
    """The current CUDA stream of device index `device`, as an integer
    (torch's raw accessor, found once; its stream object where it has none)."""
    global _RAW_STREAM
    if _RAW_STREAM is None:
        import torch
        _RAW_STREAM = getattr(torch._C, "_cuda_getCurrentRawStream", None) or (
            lambda d: torch.cuda.current_stream(d).cuda_stream)
    return _RAW_STREAM(device)


_NAMES = None  # torch dtype -> the runtime's dtype name


def _dtype_name(dtype):
    global _NAMES
    if _NAMES is None:
        _NAMES = {t: name for name, t in _torch_dtypes().items()}
    name = _NAMES.get(dtype)
    if name is None:
        raise TypeError("liger kernels take bf16, f16, f32, i32 or i64 tensors, got %s" % dtype)
    return name


class Kernel:
    """One kernel of a bundle, callable on torch tensors. Its parameters,
    the shapes of its outputs and workspaces and the checks of its
    arguments are the runtime's (the kernel ABI, docs/Design/Kernel-ABI.md),
    not re-derived here."""

    def __init__(self, bundle, spec):
        self._bundle = bundle
        self._index = spec["index"]  # the runtime's handle
        self.name = spec["name"]
        self.function = spec["function"]  # the function it was compiled from
        self.ops = spec["ops"]
        # Its narrow-tile variant's entry point, which the launcher runs
        # instead where it fills the GPU better (Kernel-ABI.md), or None.
        self.narrow = spec.get("narrow") or None
        self.params = spec["params"]
        self.inputs = [p for p in self.params if p["role"] == "input"]
        self.outputs = [p for p in self.params if p["role"] == "output"]
        self.workspaces = [p for p in self.params if p["role"] == "workspace"]
        self._out_dtypes = None
        self._known_shapes = {}

    def __repr__(self):
        return "<liger kernel %s: %s>" % (self.name, self.ops)

    def output_shapes(self, inputs):
        """The shapes of the outputs for `inputs` (torch tensors or anything
        with .shape), from the runtime, which checks the inputs' shapes as a
        launch does. Symbolic sizes (torch.compile's fake tensors) take the
        runtime's rule instead: each output size is a static size or the
        size of an input it comes from."""
        shapes = [tuple(t.shape) for t in inputs]
        if all(type(d) is int for s in shapes for d in s):
            return self._bundle.output_shapes(self._index, shapes)
        rules = self._bundle.output_shape_rules(self._index, [len(s) for s in shapes])
        return [tuple(d if type(d) is int else shapes[d[0]][d[1]] for d in rule)
                for rule in rules]

    def workspace_shapes(self, inputs):
        """The shapes of the f32 workspaces a launch on `inputs` (CUDA
        tensors) takes, from the runtime (none for most kernels)."""
        return self._shapes_for(tuple(tuple(t.shape) for t in inputs),
                                inputs[0].get_device())[1]

    def _refuse(self, inputs, out, workspaces=None):
        """Raises what is wrong with the tensors of a call (the fast check
        in __call__ found something): the first bad one, by name."""
        import torch
        labelled = [(self.inputs[i]["name"] if i < len(self.inputs) else "input #%d" % i, t)
                    for i, t in enumerate(inputs)]
        labelled += [("out[%d]" % i, t) for i, t in enumerate(out or ())]
        labelled += [("workspaces[%d]" % i, t) for i, t in enumerate(workspaces or ())]
        device = None
        for what, t in labelled:
            if not isinstance(t, torch.Tensor):
                raise TypeError("%s: %s must be a torch.Tensor" % (self.name, what))
            if not t.is_cuda:
                raise ValueError("%s: %s is on %s; liger kernels run on CUDA tensors"
                                 % (self.name, what, t.device))
            if device is None:
                device = t.device
            elif t.device != device:
                raise ValueError("%s: %s is on %s, the other tensors on %s"
                                 % (self.name, what, t.device, device))
            if not t.is_contiguous():
                raise ValueError("%s: %s must be contiguous (call .contiguous())"
                                 % (self.name, what))
        raise AssertionError("%s: _refuse found nothing wrong" % self.name)

    def _shapes_for(self, shapes, device):
        """(output shapes, workspace shapes) for input `shapes` on the CUDA
        device index `device`, from the runtime (which checks the shapes),
        remembered per shapes: a training step calls a kernel with few."""
        key = (shapes, device)
        known = self._known_shapes.get(key)
        if known is None:
            outs = self._bundle.output_shapes(self._index, list(shapes))
            spaces = []
            if self.workspaces:
                spaces = self._bundle.workspace_shapes(self._index, list(shapes),
                                                       _sm_count(device))
            known = ([tuple(s) for s in outs], [tuple(s) for s in spaces])
            if len(self._known_shapes) >= 256:  # (dynamic shapes: bounded)
                self._known_shapes.clear()
            self._known_shapes[key] = known
        return known

    def __call__(self, *inputs, out=None, workspaces=None):
        """Launches on `inputs`, into `out` (else new tensors), returning the
        output(s). `workspaces`, where given, are the f32 workspaces
        (workspace_shapes()'s): the launch zero-fills them and what the
        kernel leaves there is the caller's to read (a LoRA projection's
        rows' x·Aᵀ, docs/Design/GPU-Lowering.md); else they are allocated
        and dropped."""
        import torch
        # The per-launch cost is Python's: one pass over the tensors, the
        # shapes remembered, the detailed checks only when one fails.
        out = None if out is None else list(out)
        if workspaces is not None:
            workspaces = list(workspaces)
            if len(workspaces) != len(self.workspaces):
                raise ValueError("%s: takes %d workspaces (%s), got %d" % (
                    self.name, len(self.workspaces),
                    ", ".join(p["name"] for p in self.workspaces), len(workspaces)))
        tensors = inputs + tuple(out or ()) + tuple(workspaces or ())
        if not tensors:  # no tensor at all: the runtime says what it takes
            self._bundle.output_shapes(self._index, [])
        device = None
        for t in tensors:
            if not isinstance(t, torch.Tensor) or not t.is_cuda or not t.is_contiguous():
                self._refuse(inputs, out, workspaces)
            d = t.get_device()
            if device is None:
                device = d
            elif d != device:
                self._refuse(inputs, out, workspaces)
        shapes = tuple(tuple(t.shape) for t in inputs)
        out_shapes, space_shapes = self._shapes_for(shapes, device)
        if self._out_dtypes is None:
            dtypes = _torch_dtypes()
            self._out_dtypes = [dtypes[p["dtype"]] for p in self.outputs]
        if out is None:
            out = [torch.empty(shape, dtype=dtype, device=device)
                   for dtype, shape in zip(self._out_dtypes, out_shapes)]
        # Uninitialized: the runtime's launch zero-fills every workspace on
        # the stream before the kernel (docs/Design/Kernel-ABI.md); given
        # ones, the runtime checks as it checks the rest.
        if workspaces is None:
            workspaces = [torch.empty(shape, dtype=torch.float32, device=device)
                          for shape in space_shapes]
        args = [(t.data_ptr(), _dtype_name(t.dtype), list(t.shape))
                for t in (*inputs, *out, *workspaces)]
        if os.environ.get("LIGER_DEBUG"):
            print("liger: launch %s (%s) on %s" % (self.name, self.ops, list(shapes)))
        self._bundle.launch(self._index, args, _raw_stream(device), device)
        return out[0] if len(out) == 1 else tuple(out)


class Bundle:
    """An opened kernel bundle: `bundle[name]` is a callable Kernel."""

    def __init__(self, path):
        self.path = path
        self._bundle = _runtime().Bundle.open(path)
        self.kernels = {k["name"]: Kernel(self._bundle, k) for k in self._bundle.kernels()}
        # The planned loss groups (liger-plan-loss): run_loss_plan.
        self.plans = self._bundle.plans()
        # A bundle the current GPU cannot run (its arch, its shared memory)
        # is refused here, not at its first launch.
        try:
            import torch
        except ImportError:
            return
        if torch.cuda.is_available():
            self._bundle.check_device(torch.cuda.current_device())

    def __getitem__(self, name):
        try:
            return self.kernels[name]
        except KeyError:
            raise KeyError("%s has no kernel %r (it has %s)"
                           % (self.path, name, ", ".join(sorted(self.kernels)))) from None

    def kernels_of(self, function):
        """The kernels compiled from @`function`, in the order liger-compile
        numbered them."""
        return [k for k in self.kernels.values() if k.function == function]


def run_loss_plan(bundle, hidden, weight, target, function=None, grad_loss=None,
                  want_dx=True, want_dw=True, class_weight=None, bias=None, want_db=None):
    """Runs a planned loss group of `bundle` (liger-compile plans each
    lm_head loss group, unless --no-matmul-kernels: `bundle.plans`): the
    loss of hidden [N, H] · weightᵀ (+ bias) against target [N] and, for the
    incoming gradient `grad_loss` (1 if None), dhidden and dweight, in
    chunks of the plan's `chunk_tokens` rows, never holding the [N, V]
    logits. `function` picks the plan of that function where the bundle has
    several; a plan of a loss alone (no gradient op in its group) runs with
    want_dx=want_dw=False. `class_weight` ([V], f32) is required by, and
    only taken by, a plan of a loss with class weights (the plan's
    "class_weight"); `bias` ([V], W's dtype) likewise by a plan of an
    lm_head with a bias (its logits kernel takes it), whose dbias comes
    with the gradients (want_db: by default with dhidden or dweight). A
    plan of a reduction "none" loss (its loss kernel per row) gives the [N]
    losses and takes `grad_loss` [N], each token's (1 for each if None).
    Returns the group's results in their order: (loss, z_loss where the
    loss op returns the z-loss apart, dhidden, dweight, dbias where the
    lm_head has a bias), a gradient not wanted None."""
    plans = [p for p in bundle.plans if function is None or p["function"] == function]
    if len(plans) != 1:
        raise ValueError("%s has %d loss plans%s (it has %s)" % (
            bundle.path, len(plans), " for @%s" % function if function else "",
            ", ".join("@" + p["function"] for p in bundle.plans) or "none"))
    plan = plans[0]
    if (want_dx or want_dw or want_db) and "dx" not in plan["kernels"]:
        raise ValueError("the plan of @%s has no weight gradient (its loss group has no "
                         "liger.fused_linear_cross_entropy_grad): pass want_dx=False, "
                         "want_dw=False" % plan["function"])
    if bool(plan.get("class_weight")) != (class_weight is not None):
        raise ValueError("the plan of @%s is of a loss %s class weights, and class_weight "
                         "was %s" % (plan["function"],
                                     "with" if plan.get("class_weight") else "without",
                                     "not given" if class_weight is None else "given"))
    kernels = {stage: bundle[name] for stage, name in plan["kernels"].items()}
    with_bias = takes_bias(kernels["logits"])
    if with_bias != (bias is not None):
        raise ValueError("the plan of @%s is of an lm_head %s a bias, and bias was %s" % (
            plan["function"], "with" if with_bias else "without",
            "not given" if bias is None else "given"))
    rows = per_token(kernels["ce"])
    if grad_loss is not None and list(grad_loss.shape) != ([hidden.shape[0]] if rows else []):
        raise ValueError("the plan of @%s is of a loss %s: grad_loss must have shape %s, got "
                         "%s" % (plan["function"], "per token" if rows else "summed",
                                 [hidden.shape[0]] if rows else [], list(grad_loss.shape)))
    if want_db is None:
        want_db = with_bias and (want_dx or want_dw)
    elif want_db and not with_bias:
        raise ValueError("the plan of @%s is of an lm_head without a bias: there is no "
                         "dbias (pass want_db=False)" % plan["function"])
    loss, z_loss, dx, dw, db = chunked_loss(
        kernels, hidden, weight, target, class_weight, plan["chunk_tokens"], plan["mean"],
        plan["ignore_index"], want_dx, want_dw, dw_f32=bool(plan.get("dw_f32")),
        grad_loss=grad_loss, per_token=rows, bias=bias, want_db=want_db)
    return ((loss,) + ((z_loss,) if gives_z_loss(kernels["ce"]) else ()) + (dx, dw) +
            ((db,) if with_bias else ()))


def load(path):
    """Opens the bundle directory `path` (written by liger-compile)."""
    return Bundle(path)


def driver_status():
    """'OK', or why the CUDA driver cannot be used on this machine."""
    return _runtime().driver_status()
