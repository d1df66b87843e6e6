"""Fused ops on torch tensors, compiled by liger, with autograd.

    from liger import ops
    y = ops.rms_norm(x, w, eps=1e-6)          # backward: liger.rms_norm_grad
    y = ops.swiglu(gate, up)                  # backward: liger.swiglu_grad
    y = ops.geglu(gate, up, approximate="tanh")
    p = ops.softmax(x)                        # backward: liger.softmax_grad
    q, k = ops.rope(q, k, cos, sin)           # backward: liger.rope_grad
    loss = ops.cross_entropy(logits, target)  # the gradient written forward
    loss = ops.fused_linear_cross_entropy(h, lm_head_weight, target)  # no logits kept

Each call's configuration (the op, its attributes, the feature size and the
dtypes) names a small liger module holding a forward and a backward
function (`module_text(spec)`; cross-entropy has only a forward, which
computes the loss and its gradient in one kernel); its bundle is found, in
this order:

1. `$LIGER_OPS_BUNDLES/<key>`, where `python -m liger.ops precompile DIR SPEC...`
   (or `precompile(DIR, specs)`) wrote it: the way to run on a machine without
   the compiler (a GPU machine with only the runtime);
2. `liger.compile(...)` on first use, cached on disk, where liger-compile is
   installed.

Otherwise the call raises LigerError naming the SPEC to precompile. The key is
a hash of the module text and the target, so a changed attribute never
picks a stale bundle. The functions are `torch.autograd.Function`s: the
forward saves what its backward kernel reads (RMSNorm's rstd, softmax's
output) and the backward launches one kernel (two for RMSNorm's weight
gradient). Cross-entropy's forward keeps the gradient of a unit incoming
gradient (the logits' size, as Liger-Kernel does) and its backward scales
it by the incoming gradient (nothing to do for the usual 1). Tensors must
be contiguous CUDA tensors of one device.
"""

import hashlib
import json
import os
import sys

from .driver import LigerError

TARGET = "sm_90a"
_DT = {"bf16": "bf16", "f16": "f16", "f32": "f32"}
_TORCH_NAMES = {"torch.bfloat16": "bf16", "torch.float16": "f16", "torch.float32": "f32"}
_KERNELS = {}
_BUNDLES = {}


def _dt(dtype):
    """"bf16" for torch.bfloat16 or "bf16"; a LigerError for other dtypes."""
    name = _TORCH_NAMES.get(str(dtype), str(dtype))
    if name not in _DT:
        raise LigerError("liger.ops takes bf16, f16 or f32 tensors, got %s" % dtype)
    return name


def spec_string(op, **config):
    """`op:key=value,...`, the form `precompile` takes on its command line."""
    return op + ":" + ",".join("%s=%s" % kv for kv in sorted(config.items()))


def parse_spec(text):
    op, _, rest = text.partition(":")
    config = {}
    for item in filter(None, rest.split(",")):
        key, _, value = item.partition("=")
        config[key] = value
    return op, config


def module_text(spec):
    """The liger module (functions @fwd and @bwd) of a spec string."""
    op, c = parse_spec(spec)
    try:
        if op == "rms_norm":
            h, dt, wdt = int(c["hidden"]), _DT[c["dtype"]], _DT[c["weight_dtype"]]
            X, W = "tensor<?x%dx%s>" % (h, dt), "tensor<%dx%s>" % (h, wdt)
            attrs = "eps = %.9e offset = %.9e casting = %s" % (
                float(c["eps"]), float(c["offset"]), c["casting"])
            grad_attrs = "offset = %.9e casting = %s" % (float(c["offset"]), c["casting"])
            return f"""func.func @fwd(%x: {X}, %w: {W}) -> ({X}, tensor<?xf32>) {{
  %y, %r = liger.rms_norm %x, %w {attrs} rstd : {X}, {W}
  return %y, %r : {X}, tensor<?xf32>
}}
func.func @bwd(%dy: {X}, %x: {X}, %w: {W}, %r: tensor<?xf32>) -> ({X}, {W}) {{
  %dx, %dw = liger.rms_norm_grad %dy, %x, %w, %r {grad_attrs} : {X}, {W}, tensor<?xf32>
  return %dx, %dw : {X}, {W}
}}
"""
        if op in ("swiglu", "geglu"):
            X = "tensor<?x%dx%s>" % (int(c["hidden"]), _DT[c["dtype"]])
            attrs = " approximate = %s" % c["approximate"] if op == "geglu" else ""
            return f"""func.func @fwd(%g: {X}, %u: {X}) -> {X} {{
  %y = liger.{op} %g, %u{attrs} : {X}
  return %y : {X}
}}
func.func @bwd(%dy: {X}, %g: {X}, %u: {X}) -> ({X}, {X}) {{
  %dg, %du = liger.{op}_grad %dy, %g, %u{attrs} : {X}
  return %dg, %du : {X}, {X}
}}
"""
        if op == "softmax":
            X = "tensor<?x%dx%s>" % (int(c["hidden"]), _DT[c["dtype"]])
            return f"""func.func @fwd(%x: {X}) -> {X} {{
  %y = liger.softmax %x : {X}
  return %y : {X}
}}
func.func @bwd(%dy: {X}, %y: {X}) -> {X} {{
  %dx = liger.softmax_grad %dy, %y : {X}
  return %dx : {X}
}}
"""
        if op == "rope":
            dt, d = _DT[c["dtype"]], int(c["head_dim"])
            Q = "tensor<?x%dx?x%dx%s>" % (int(c["q_heads"]), d, dt)
            K = "tensor<?x%dx?x%dx%s>" % (int(c["k_heads"]), d, dt)
            C = "tensor<%sx?x%dx%s>" % ("1" if c["table_batch"] == "1" else "?", d, dt)
            return "\n".join(f"""func.func @{fn}(%q: {Q}, %k: {K}, %c: {C}, %s: {C}) -> ({Q}, {K}) {{
  %a, %b = {name} %q, %k, %c, %s : {Q}, {K}, {C}
  return %a, %b : {Q}, {K}
}}""" for fn, name in (("fwd", "liger.rope"), ("bwd", "liger.rope_grad"))) + "\n"
        if op == "cross_entropy":
            v, dt, tdt = int(c["vocab"]), _DT[c["dtype"]], c["target_dtype"]
            if c["reduction"] not in ("mean", "sum", "none"):
                raise ValueError("reduction must be mean, sum or none")
            attrs = _ce_attrs(c, c["reduction"])
            X, T = "tensor<?x%dx%s>" % (v, dt), "tensor<?x%s>" % tdt
            L = "tensor<?xf32>" if c["reduction"] == "none" else "tensor<f32>"
            W = "tensor<%dxf32>" % v
            wparam = ", %%w: %s" % W if c["weighted"] == "1" else ""
            wuse = " weight(%%w : %s)" % W if c["weighted"] == "1" else ""
            # The loss and its gradient for the incoming gradient %g: one
            # kernel (liger-fuse-cross-entropy-grad).
            return f"""func.func @fwd(%x: {X}, %t: {T}{wparam}, %g: {L}) -> ({L}, {X}) {{
  %l = liger.cross_entropy %x, %t{wuse} {attrs} : {X}, {T}
  %d = liger.cross_entropy_grad %x, %t, %g{wuse} {attrs} : {X}, {T}, {L}
  return %l, %d : {L}, {X}
}}
"""
        if op == "fused_linear_cross_entropy":
            return _flce_module_text(c)
    except (KeyError, ValueError) as e:
        raise LigerError("malformed op spec %r: %s" % (spec, e)) from None
    raise LigerError("unknown op %r in spec %r (liger.ops has rms_norm, swiglu, geglu, "
                     "softmax, rope, cross_entropy, fused_linear_cross_entropy)" % (op, spec))


def _ce_attrs(c, reduction):
    """The cross-entropy attributes of spec `c`, in the ops' syntax order."""
    if c["target_dtype"] not in ("i32", "i64"):
        raise ValueError("target_dtype must be i32 or i64")
    attrs = "ignore_index = %d label_smoothing = %.9e reduction = %s" % (
        int(c["ignore_index"]), float(c["label_smoothing"]), reduction)
    if float(c["softcap"]) > 0:
        attrs += " softcap = %.9e" % float(c["softcap"])
    return attrs + " lse_square_scale = %.9e" % float(c["lse_square_scale"])


def _flce_module_text(c):
    """The lm_head's loss and its gradient as the two liger ops, in one
    function @loss (incoming gradient %g). liger-compile --matmul-kernels
    plans them (liger-plan-loss: the functions of one chunk — logits, the
    summed loss with its gradient over the logits, dx, dW first and
    accumulating, or with dw_f32=1 (--loss-dw-f32) dW accumulated in f32
    alone — and the manifest's plan naming their kernels)."""
    v, h, dt = int(c["vocab"]), int(c["hidden"]), _DT[c["dtype"]]
    if c["reduction"] not in ("mean", "sum"):
        raise ValueError("reduction must be mean or sum (a per-token loss cannot have its "
                         "weight gradient formed before its incoming gradient is known)")
    X, W = "tensor<?x%dx%s>" % (h, dt), "tensor<%dx%dx%s>" % (v, h, dt)
    T = "tensor<?x%s>" % c["target_dtype"]
    CW = "tensor<%dxf32>" % v
    weighted = c["weighted"] == "1"
    wparam = ", %%cw: %s" % CW if weighted else ""
    wuse = " class_weight(%%cw : %s)" % CW if weighted else ""
    attrs = _ce_attrs(c, c["reduction"])
    return f"""func.func @loss(%h: {X}, %w: {W}, %t: {T}{wparam}, %g: tensor<f32>) -> (tensor<f32>, {X}, {W}) {{
  %l = liger.fused_linear_cross_entropy %h, %w, %t{wuse} {attrs} : {X}, {W}, {T}
  %dh, %dw = liger.fused_linear_cross_entropy_grad %h, %w, %t, %g{wuse} {attrs} : {X}, {W}, {T}, tensor<f32>
  return %l, %dh, %dw : tensor<f32>, {X}, {W}
}}
"""


def _compile_options(spec):
    """liger.compiler.compile's options for the spec's module: the matmul
    templates and the loss plan for the fused linear cross-entropy (its dW
    summed in f32 with dw_f32=1)."""
    op, c = parse_spec(spec)
    if op != "fused_linear_cross_entropy":
        return {}
    return dict(matmul_kernels=True, loss_dw_f32=c.get("dw_f32", "0") == "1")


def bundle_key(spec, target=TARGET):
    text = module_text(spec)
    options = json.dumps(_compile_options(spec), sort_keys=True)
    return hashlib.sha256((target + "\n" + options + "\n" + text).encode()).hexdigest()[:24]


def compiler_identity():
    """The sha256 of the liger-compile executable that precompile uses: a
    bundle's key names its spec and target, not the compiler that made it,
    so precompile stamps each bundle with this and remakes those of another
    compiler."""
    from .compiler import executable_digest
    from .driver import find_tool
    return executable_digest(find_tool("liger-compile"))


def precompile(out_dir, specs, target=TARGET):
    """Compiles each spec string into `out_dir/<key>` (needs liger-compile),
    keeping a bundle already there only when this compiler made it (its
    `compiler.sha256`). Returns the bundle paths."""
    import shutil
    from .compiler import compile as compile_module
    paths = []
    os.makedirs(out_dir, exist_ok=True)
    identity = compiler_identity()
    for spec in specs:
        dest = os.path.join(out_dir, bundle_key(spec, target))
        stamp = os.path.join(dest, "compiler.sha256")
        current = os.path.isfile(os.path.join(dest, "manifest.json")) and \
            os.path.isfile(stamp) and open(stamp).read().strip() == identity
        if not current:
            compiled = compile_module(module_text(spec), target=target,
                                      **_compile_options(spec))
            tmp = dest + ".tmp"
            shutil.rmtree(tmp, ignore_errors=True)
            shutil.copytree(compiled.path, tmp)
            with open(os.path.join(tmp, "spec.txt"), "w") as f:
                f.write(spec + "\n")
            with open(os.path.join(tmp, "compiler.sha256"), "w") as f:
                f.write(identity + "\n")
            shutil.rmtree(dest, ignore_errors=True)
            os.replace(tmp, dest)
        paths.append(dest)
    return paths


def bundle_path(spec, target=TARGET):
    """Where the bundle of `spec` is: precompiled, or compiled now."""
    root = os.environ.get("LIGER_OPS_BUNDLES")
    if root:
        path = os.path.join(root, bundle_key(spec, target))
        if os.path.isfile(os.path.join(path, "manifest.json")):
            return path
    from .compiler import compile as compile_module
    from .driver import find_tool
    try:
        find_tool("liger-compile")
    except LigerError:
        raise LigerError(
            "no compiled kernels for %s%s, and liger-compile is not installed here: "
            "on a machine with the compiler run\n  python -m liger.ops precompile DIR '%s'\n"
            "and set LIGER_OPS_BUNDLES=DIR here" % (
                spec, " in LIGER_OPS_BUNDLES=%s" % root if root else "", spec)) from None
    return compile_module(module_text(spec), target=target,
                          **_compile_options(spec)).path


def cpu_reference_enabled():
    """Whether calls on CPU tensors run the compiler's reference lowering
    (`LIGER_OPS_CPU_REFERENCE=1`): every call compiles and runs its liger
    function through liger-cpu-runner, seconds per call, for testing code
    that calls liger.ops (a patched model, say) on a machine without a GPU.
    Off, a call on CPU tensors is a LigerError."""
    return os.environ.get("LIGER_OPS_CPU_REFERENCE", "") not in ("", "0")


def _on_cpu(device):
    if device.type == "cuda":
        return False
    if device.type == "cpu" and cpu_reference_enabled():
        return True
    raise LigerError("liger.ops runs on CUDA tensors, got tensors on %s%s" % (
        device, " (LIGER_OPS_CPU_REFERENCE=1 runs CPU tensors through the slow reference "
        "lowering, for tests)" if device.type == "cpu" else ""))


def _bundle(spec, device):
    """The bundle of `spec` for tensors on `device`, loaded once per process:
    the compiled kernels, or on the CPU their reference functions."""
    key = (spec, device.type)
    bundle = _BUNDLES.get(key)
    if bundle is None:
        if _on_cpu(device):
            bundle = _BUNDLES[key] = _ReferenceBundle(spec)
        else:
            from . import runtime
            bundle = _BUNDLES[key] = runtime.load(bundle_path(spec))
    return bundle


def _kernels(spec, device):
    """(forward, backward) kernels of `spec`, loaded once per process."""
    key = (spec, device.type)
    pair = _KERNELS.get(key)
    if pair is None:
        bundle = _bundle(spec, device)
        # Cross-entropy's module has no backward kernel.
        pair = _KERNELS[key] = (bundle["fwd_rowwise_0"],
                                bundle.kernels.get("bwd_rowwise_0"))
        if os.environ.get("LIGER_DEBUG"):
            print("liger.ops: %s from %s" % (spec, bundle.path), file=sys.stderr)
    return pair


class _ReferenceKernel:
    """One function of a spec's module, callable as a runtime Kernel is but
    on CPU torch tensors, through the reference lowering."""

    def __init__(self, text, function):
        import re
        self.text, self.function = text, function
        head = re.search(r"func\.func @%s\(.*?\) -> (.*?) \{\n" % re.escape(function), text)
        # The element type of each result (bf16 results come back as f32
        # arrays of their exact values).
        self.dtypes = [t.split("x")[-1] for t in re.findall(r"tensor<([^>]*)>", head.group(1))]

    def __call__(self, *inputs, out=None):
        import numpy as np
        import torch
        from . import reference
        arrays = []
        for t in inputs:
            t = t.detach().contiguous()
            arrays.append(reference.BF16(t.view(torch.int16).numpy().view(np.uint16))
                          if t.dtype == torch.bfloat16 else t.numpy())
        types = {"bf16": torch.bfloat16, "f16": torch.float16, "f32": torch.float32,
                 "i32": torch.int32, "i64": torch.int64}
        results = [torch.from_numpy(np.array(r)).to(types[dt])
                   for r, dt in zip(reference.run_cpu(self.text, self.function, arrays),
                                    self.dtypes)]
        if out is not None:
            for o, r in zip(out, results):
                o.copy_(r.reshape(o.shape))
            results = list(out)
        return results[0] if len(results) == 1 else tuple(results)


class _ReferenceBundle:
    """A spec's module on the CPU: `bundle[kernel name]` is the reference of
    the function the kernel was compiled from (`fwd_rowwise_0` -> @fwd)."""

    def __init__(self, spec=None, text=None, plans=()):
        self.path = "the reference lowering of " + (spec or "a module")
        self._text = module_text(spec) if text is None else text
        self.kernels = self
        self.plans = list(plans)  # as a runtime Bundle's, for run_loss_plan
        options = _compile_options(spec) if spec is not None and text is None else {}
        if options.get("matmul_kernels"):
            self._plan_loss(options["loss_dw_f32"])

    def _plan_loss(self, dw_f32):
        """The lm_head loss as liger-compile plans it: the chunk functions
        (liger-plan-loss) and a plan naming them (a kernel `<function>_ref_0`
        is its function here)."""
        import re
        from .driver import run_opt
        self._text = run_opt(self._text, [
            "--liger-fuse-linear-cross-entropy",
            "--liger-plan-loss" + ("=dw-f32=true" if dw_f32 else "")])
        found = re.search(r"liger\.plan = \{([^{}]*)\}", self._text)
        if not found:
            raise LigerError("%s: liger-plan-loss left the loss unplanned" % self.path)
        self.plans = [dict(function="loss", kernels={
            stage: fn + "_ref_0" for stage, fn in re.findall(r"(\w+) = @(\w+)", found.group(1))})]

    def get(self, name):
        function = name.rsplit("_", 2)[0]
        if "func.func @%s(" % function not in self._text:
            return None
        return _ReferenceKernel(self._text, function)

    def __getitem__(self, name):
        kernel = self.get(name)
        if kernel is None:
            raise KeyError("%s has no function for kernel %r" % (self.path, name))
        return kernel


def chunked_loss(kernels, x, weight, target, class_weight, chunk, mean, ignore_index,
                 want_dx=True, want_dw=True, dw_f32=False, grad_loss=None):
    """The lm_head's loss and gradients chunk by chunk, with the kernels of
    one chunk (`kernels`: logits, ce, dx, dw0 unless dw_f32, dw; what
    liger.ops compiles and what liger-plan-loss writes into a bundle's
    plan): per chunk of `chunk` rows, the logits, their summed loss and,
    over them, their gradient G, then dx = G · W and dW (+)= Gᵀ · x. Only the
    chunk's logits are held. The mean's denominator (the counted tokens, or
    their total class weight) and `grad_loss` (an incoming gradient, 1 if
    None) scale G through the loss kernel's incoming gradient. Returns
    (loss, dx, dW); a gradient not wanted is None."""
    import torch
    n, v = x.shape[0], weight.shape[0]
    dev = x.device
    one = torch.ones((), dtype=torch.float32, device=dev)
    if mean:
        counted = (target != ignore_index).float()
        if class_weight is not None:
            counted = counted * class_weight[target.long().clamp(0, v - 1)]
        scale = (1.0 / counted.sum()).reshape(())
    else:
        scale = one
    g = scale if grad_loss is None else (scale * grad_loss).reshape(()).float()
    logits = torch.empty((min(chunk, n), v), dtype=x.dtype, device=dev)
    dx = torch.empty_like(x) if want_dx else None
    dw = None
    if want_dw and dw_f32:
        # Every chunk adds into an f32 buffer, rounded once at the end.
        dw = torch.zeros(weight.shape, dtype=torch.float32, device=dev)
    elif want_dw:
        dw = torch.empty_like(weight)
        if n == 0:
            dw.zero_()
    total = torch.zeros((), dtype=torch.float32, device=dev)
    part = torch.empty((), dtype=torch.float32, device=dev)
    cw = [class_weight] if class_weight is not None else []
    for i, c0 in enumerate(range(0, n, chunk)):
        rows = min(chunk, n - c0)
        xc, tc, z = x[c0:c0 + rows], target[c0:c0 + rows], logits[:rows]
        kernels["logits"](xc, weight, out=[z])
        kernels["ce"](z, tc, *cw, g, out=[part, z])  # the gradient over the logits
        total += part
        if want_dx:
            kernels["dx"](z, weight, out=[dx[c0:c0 + rows]])
        if want_dw and i == 0 and not dw_f32:
            kernels["dw0"](z, xc, out=[dw])
        elif want_dw:
            kernels["dw"](z, xc, dw, out=[dw])
    if dw is not None and dw_f32:
        dw = dw.to(weight.dtype)
    return (total * scale if mean else total), dx, dw


def _contiguous(*tensors):
    return [t.contiguous() for t in tensors]


def _function_classes():
    import torch

    class RMSNorm(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x, w, spec):
            fwd, bwd = _kernels(spec, x.device)
            y, rstd = fwd(x, w)
            ctx.save_for_backward(x, w, rstd)
            ctx.bwd = bwd
            return y

        @staticmethod
        def backward(ctx, dy):
            x, w, rstd = ctx.saved_tensors
            dx, dw = ctx.bwd(dy.contiguous(), x, w, rstd)
            return dx, dw, None

    class Gated(torch.autograd.Function):
        @staticmethod
        def forward(ctx, g, u, spec):
            fwd, bwd = _kernels(spec, g.device)
            ctx.save_for_backward(g, u)
            ctx.bwd = bwd
            return fwd(g, u)

        @staticmethod
        def backward(ctx, dy):
            dg, du = ctx.bwd(dy.contiguous(), *ctx.saved_tensors)
            return dg, du, None

    class Softmax(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x, spec):
            fwd, bwd = _kernels(spec, x.device)
            y = fwd(x)
            ctx.save_for_backward(y)
            ctx.bwd = bwd
            return y

        @staticmethod
        def backward(ctx, dy):
            (y,) = ctx.saved_tensors
            return ctx.bwd(dy.contiguous(), y), None

    class RoPE(torch.autograd.Function):
        @staticmethod
        def forward(ctx, q, k, cos, sin, spec):
            fwd, bwd = _kernels(spec, q.device)
            ctx.save_for_backward(cos, sin)
            ctx.bwd = bwd
            return fwd(q, k, cos, sin)

        @staticmethod
        def backward(ctx, dq, dk):
            cos, sin = ctx.saved_tensors
            gq, gk = ctx.bwd(dq.contiguous(), dk.contiguous(), cos, sin)
            return gq, gk, None, None, None

    class CrossEntropy(torch.autograd.Function):
        @staticmethod
        def forward(ctx, logits, target, weight, spec, none, inplace):
            fwd, _ = _kernels(spec, logits.device)
            shape = target.shape if none else ()
            one = torch.ones(shape, dtype=torch.float32, device=logits.device)
            loss = torch.empty(shape, dtype=torch.float32, device=logits.device)
            # In place: the kernel reads each chunk of a row before writing
            # its gradient there (Liger-Kernel's memory saving).
            grad = logits.detach() if inplace else torch.empty_like(logits)
            fwd(logits, target, *([weight] if weight is not None else []), one,
                out=[loss, grad])
            ctx.save_for_backward(grad)
            ctx.none = none
            return loss

        @staticmethod
        def backward(ctx, dloss):
            (grad,) = ctx.saved_tensors
            if ctx.none:
                grad = grad * dloss.unsqueeze(-1).to(grad.dtype)
            elif not torch.equal(dloss, torch.ones_like(dloss)):
                grad = grad * dloss.to(grad.dtype)
            return grad, None, None, None, None, None

    class FusedLinearCrossEntropy(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x, weight, target, class_weight, spec, chunk, mean, ignore_index,
                    dw_f32):
            b = _bundle(spec, x.device)
            # The kernels of one chunk, as the compiler planned them.
            (plan,) = b.plans
            kernels = {stage: b[name] for stage, name in plan["kernels"].items()}
            # Only the gradients autograd asks for (a frozen lm_head, as under
            # LoRA, takes no dW: a third of the FLOPs and W's size in memory).
            loss, dx, dw = chunked_loss(kernels, x, weight, target, class_weight, chunk, mean,
                                        ignore_index, ctx.needs_input_grad[0],
                                        ctx.needs_input_grad[1], dw_f32)
            ctx.save_for_backward(dx, dw)
            return loss

        @staticmethod
        def backward(ctx, dloss):
            dx, dw = ctx.saved_tensors
            if not torch.equal(dloss, torch.ones_like(dloss)):
                dx = dx * dloss.to(dx.dtype) if dx is not None else None
                dw = dw * dloss.to(dw.dtype) if dw is not None else None
            return dx, dw, None, None, None, None, None, None, None

    return dict(rms_norm=RMSNorm, gated=Gated, softmax=Softmax, rope=RoPE,
                cross_entropy=CrossEntropy, fused_linear_cross_entropy=FusedLinearCrossEntropy)


_FUNCTIONS = None


class _Eager:
    """`cls.apply` run outside torch.compile's tracing: the kernels launch
    through the runtime, which dynamo cannot trace, so a compiled caller
    breaks its graph around the call instead of failing inside it."""

    def __init__(self, cls):
        import torch
        self.apply = torch.compiler.disable(cls.apply, recursive=True)


def _fn(name):
    global _FUNCTIONS
    if _FUNCTIONS is None:
        _FUNCTIONS = {k: _Eager(v) for k, v in _function_classes().items()}
    return _FUNCTIONS[name]


# The spec of each op from its sizes and dtypes (torch dtypes or "bf16",
# "f16", "f32"): what a call computes and what `precompile` takes.
def rms_norm_spec(hidden, dtype, weight_dtype=None, eps=1e-6, offset=0.0, casting="llama"):
    return spec_string("rms_norm", hidden=int(hidden), dtype=_dt(dtype),
                       weight_dtype=_dt(weight_dtype or dtype), eps=float(eps),
                       offset=float(offset), casting=casting)


def swiglu_spec(hidden, dtype):
    return spec_string("swiglu", hidden=int(hidden), dtype=_dt(dtype))


def geglu_spec(hidden, dtype, approximate="tanh"):
    return spec_string("geglu", hidden=int(hidden), dtype=_dt(dtype), approximate=approximate)


def softmax_spec(hidden, dtype):
    return spec_string("softmax", hidden=int(hidden), dtype=_dt(dtype))


def rope_spec(q_heads, k_heads, head_dim, dtype, broadcast_tables=True):
    return spec_string("rope", q_heads=int(q_heads), k_heads=int(k_heads),
                       head_dim=int(head_dim), dtype=_dt(dtype),
                       table_batch="1" if broadcast_tables else "B")


def cross_entropy_spec(vocab, dtype, target_dtype="i64", ignore_index=-100,
                       label_smoothing=0.0, reduction="mean", softcap=None,
                       lse_square_scale=0.0, weighted=False):
    tdt = {"torch.int64": "i64", "torch.int32": "i32"}.get(str(target_dtype),
                                                           str(target_dtype))
    if tdt not in ("i32", "i64"):
        raise LigerError("liger.ops.cross_entropy takes int32 or int64 targets, got %s"
                         % target_dtype)
    return spec_string("cross_entropy", vocab=int(vocab), dtype=_dt(dtype), target_dtype=tdt,
                       ignore_index=int(ignore_index), label_smoothing=float(label_smoothing),
                       reduction=reduction, softcap=float(softcap or 0.0),
                       lse_square_scale=float(lse_square_scale),
                       weighted=int(bool(weighted)))


def fused_linear_cross_entropy_unsupported_shape(vocab, hidden):
    """Why the matmul kernels cannot take an lm_head [vocab, hidden] (their
    TMA and cp.async copies move 16-byte rows: both sizes multiples of 8 at
    2 bytes an element), or None."""
    if int(vocab) % 8 or int(hidden) % 8:
        return ("liger.ops.fused_linear_cross_entropy needs an lm_head whose vocabulary and "
                "hidden sizes are multiples of 8 (its matmul kernels move 16-byte rows), got "
                "[%d, %d]; use liger.ops.cross_entropy on the logits" % (int(vocab),
                                                                          int(hidden)))
    return None


def fused_linear_cross_entropy_spec(vocab, hidden, dtype, target_dtype="i64", ignore_index=-100,
                                    label_smoothing=0.0, reduction="mean", softcap=None,
                                    lse_square_scale=0.0, weighted=False, dw_f32=False):
    if _dt(dtype) == "f32":
        raise LigerError("liger.ops.fused_linear_cross_entropy takes bf16 or f16 (its matmul "
                         "kernels are wgmma's); for f32 use liger.ops.cross_entropy on the "
                         "logits")
    why = fused_linear_cross_entropy_unsupported_shape(vocab, hidden)
    if why:
        raise LigerError(why)
    ce = parse_spec(cross_entropy_spec(vocab, dtype, target_dtype, ignore_index,
                                       label_smoothing, reduction, softcap, lse_square_scale,
                                       weighted))[1]
    if dw_f32:  # (only when set: the keys of existing specs stay)
        ce["dw_f32"] = 1
    return spec_string("fused_linear_cross_entropy", hidden=int(hidden), **ce)


def fused_linear_cross_entropy_plan(tokens, vocab, dtype, memory_budget=2 ** 29):
    """How fused_linear_cross_entropy chunks `tokens` under `memory_budget`
    bytes: the logits of one chunk [chunk_tokens, vocab] are its only buffer
    beyond the gradients it returns (dx, dW). Chunks of at least 128 tokens
    are whole 128-row matmul tiles. Returns dict(chunk_tokens, chunks,
    extra_bytes)."""
    row = int(vocab) * {"bf16": 2, "f16": 2, "f32": 4}[_dt(dtype)]
    chunk = int(memory_budget) // row
    if chunk < 1:
        raise LigerError("memory_budget of %d bytes holds no row of logits (%d bytes)"
                         % (memory_budget, row))
    if chunk >= 128:
        chunk -= chunk % 128
    chunk = max(1, min(chunk, int(tokens)))
    chunks = -(-int(tokens) // chunk)
    return dict(chunk_tokens=chunk, chunks=chunks, extra_bytes=min(chunk, int(tokens)) * row)


def rms_norm(x, weight, eps=1e-6, offset=0.0, casting="llama"):
    """RMSNorm over the last dimension (liger.rms_norm; casting "llama",
    "gemma" or "none" as Hugging Face's Llama and Gemma modules)."""
    spec = rms_norm_spec(x.shape[-1], x.dtype, weight.dtype, eps, offset, casting)
    return _fn("rms_norm").apply(*_contiguous(x, weight), spec)


def swiglu(gate, up):
    """silu(gate) * up (liger.swiglu)."""
    spec = swiglu_spec(gate.shape[-1], gate.dtype)
    return _fn("gated").apply(*_contiguous(gate, up), spec)


def geglu(gate, up, approximate="tanh"):
    """gelu(gate) * up (liger.geglu; approximate "tanh" or "none")."""
    spec = geglu_spec(gate.shape[-1], gate.dtype, approximate)
    return _fn("gated").apply(*_contiguous(gate, up), spec)


def softmax(x):
    """Softmax over the last dimension (liger.softmax)."""
    spec = softmax_spec(x.shape[-1], x.dtype)
    return _fn("softmax").apply(*_contiguous(x), spec)


def rope(q, k, cos, sin):
    """Rotary embedding of q [B, Hq, T, D] and k [B, Hk, T, D] with tables
    [1 or B, T, D] (liger.rope, rotate-half convention)."""
    spec = rope_spec(q.shape[1], k.shape[1], q.shape[-1], q.dtype, cos.shape[0] == 1)
    return _fn("rope").apply(*_contiguous(q, k, cos, sin), spec)


def cross_entropy(logits, target, weight=None, ignore_index=-100, label_smoothing=0.0,
                  reduction="mean", softcap=None, lse_square_scale=0.0, inplace=False):
    """Cross-entropy of logits [N, V] against targets [N] (liger.cross_entropy,
    PyTorch's F.cross_entropy semantics plus Liger-Kernel's softcap and
    z-loss, f32 math): one kernel computes the loss and writes its gradient,
    which backward scales by the incoming gradient. Class weights (f32 [V])
    are not differentiated. With `inplace=True` the gradient is written over
    the logits (no second [N, V] buffer): only for logits nothing else reads
    afterwards, as a loss's usually are."""
    if logits.dim() != 2 or target.dim() != 1 or target.shape[0] != logits.shape[0]:
        raise LigerError("liger.ops.cross_entropy takes logits [N, V] and targets [N], got "
                         "%s and %s" % (tuple(logits.shape), tuple(target.shape)))
    if weight is not None:
        weight = weight.float().contiguous()
    spec = cross_entropy_spec(logits.shape[-1], logits.dtype, target.dtype, ignore_index,
                              label_smoothing, reduction, softcap, lse_square_scale,
                              weight is not None)
    if inplace and not logits.is_contiguous():
        raise LigerError("liger.ops.cross_entropy(inplace=True) needs contiguous logits "
                         "(a copy would not be in place)")
    logits, target = _contiguous(logits, target)
    return _fn("cross_entropy").apply(logits, target, weight, spec, reduction == "none",
                                      bool(inplace))


def fused_linear_cross_entropy(hidden, weight, target, class_weight=None, ignore_index=-100,
                               label_smoothing=0.0, reduction="mean", softcap=None,
                               lse_square_scale=0.0, memory_budget=2 ** 29, dw_f32=False):
    """cross_entropy(hidden · weightᵀ, target) without the [tokens, vocab]
    logits in memory (liger.fused_linear_cross_entropy's meaning): the
    tokens go in chunks whose logits fit `memory_budget` bytes
    (fused_linear_cross_entropy_plan); per chunk one matmul kernel writes the
    logits, one kernel their loss and, over them, their gradient G, then
    dx = G · W and dW += Gᵀ · x (accumulated in W's dtype, as Liger-Kernel
    does; with `dw_f32=True` into an f32 buffer of W's shape, rounded once at
    the end: exact sums for 4 bytes per weight of memory). The forward
    computes both gradients; backward scales them by the incoming gradient.
    reduction: mean or sum."""
    if reduction not in ("mean", "sum"):
        raise LigerError("liger.ops.fused_linear_cross_entropy: reduction must be mean or sum, "
                         "got %r (a per-token loss cannot have its weight gradient formed "
                         "before its incoming gradient is known)" % reduction)
    if class_weight is not None and lse_square_scale > 0 and reduction == "mean":
        raise LigerError("liger.ops.fused_linear_cross_entropy: class weights with a z-loss "
                         "and reduction=mean divide the two terms by different totals; "
                         "use liger.ops.cross_entropy on materialized logits")
    if weight.dim() != 2 or hidden.shape[-1] != weight.shape[1]:
        raise LigerError("liger.ops.fused_linear_cross_entropy takes hidden [..., H] and weight "
                         "[V, H], got %s and %s" % (tuple(hidden.shape), tuple(weight.shape)))
    x = hidden.reshape(-1, hidden.shape[-1])
    t = target.reshape(-1)
    if t.shape[0] != x.shape[0]:
        raise LigerError("liger.ops.fused_linear_cross_entropy: %d targets for %d tokens"
                         % (t.shape[0], x.shape[0]))
    if class_weight is not None:
        class_weight = class_weight.float().contiguous()
    v, h = weight.shape
    spec = fused_linear_cross_entropy_spec(v, h, x.dtype, t.dtype, ignore_index,
                                           label_smoothing, reduction, softcap,
                                           lse_square_scale, class_weight is not None,
                                           dw_f32)
    plan = fused_linear_cross_entropy_plan(x.shape[0], v, x.dtype, memory_budget)
    x, weight, t = _contiguous(x, weight, t)
    return _fn("fused_linear_cross_entropy").apply(
        x, weight, t, class_weight, spec, plan["chunk_tokens"], reduction == "mean",
        ignore_index, bool(dw_f32))


def main(argv=None):
    import argparse
    ap = argparse.ArgumentParser(
        prog="python -m liger.ops",
        description="Precompile the kernels of liger.ops configurations into a directory "
                    "that LIGER_OPS_BUNDLES points at (for machines without the compiler), "
                    "or show what a configuration compiles and how the fused linear "
                    "cross-entropy chunks its tokens.")
    sub = ap.add_subparsers(dest="command", required=True)
    pre = sub.add_parser("precompile", help="compile SPECs into DIR")
    pre.add_argument("dir")
    pre.add_argument("specs", nargs="+", metavar="SPEC",
                     help="op:key=value,... as a liger.ops error names it, e.g. "
                          "swiglu:dtype=bf16,hidden=14336")
    pre.add_argument("--target", default=TARGET)
    mod = sub.add_parser("module", help="print the liger module a SPEC compiles")
    mod.add_argument("spec", metavar="SPEC")
    plan = sub.add_parser("plan", help="print fused_linear_cross_entropy's chunking (JSON)")
    plan.add_argument("--tokens", type=int, required=True)
    plan.add_argument("--vocab", type=int, required=True)
    plan.add_argument("--dtype", default="bf16")
    plan.add_argument("--memory-budget", type=int, default=2 ** 29, help="bytes")
    args = ap.parse_args(argv)
    try:
        if args.command == "module":
            sys.stdout.write(module_text(args.spec))
        elif args.command == "plan":
            import json
            print(json.dumps(fused_linear_cross_entropy_plan(
                args.tokens, args.vocab, args.dtype, args.memory_budget), sort_keys=True))
        else:
            for spec, path in zip(args.specs, precompile(args.dir, args.specs, args.target)):
                print("%s -> %s" % (spec, path))
    except LigerError as e:
        print("liger.ops: %s" % e, file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
