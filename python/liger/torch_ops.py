"""Compiled liger kernels as PyTorch operators.

    from liger import runtime, torch_ops
    bundle = runtime.load("layer.bundle")
    torch_ops.register(bundle)                       # torch.ops.liger.<kernel>
    torch_ops.register_autograd("swiglu_rowwise_0", "swiglu_grad_rowwise_0")
    y = torch.ops.liger.swiglu_rowwise_0(gate, up)    # differentiable, traceable

Each kernel becomes a `torch.ops.liger.<kernel>` operator with a CUDA
implementation (the runtime launch, on the current stream) and a fake
implementation (shapes and dtypes from the bundle's manifest), so
`torch.compile` traces through it without running it. `register_autograd`
pairs a forward kernel with a backward kernel whose inputs are the incoming
gradient followed by the forward inputs and whose outputs are one gradient
per forward input (liger.swiglu_grad's convention).
"""

import functools
import os

from . import installation

_LIBRARIES = {}
_KERNELS = {}


def _outputs_like(kernel, inputs):
    import torch
    from liger.runtime import _torch_dtypes
    dtypes = _torch_dtypes()
    return [torch.empty(shape, dtype=dtypes[p["dtype"]], device=inputs[0].device)
            for p, shape in zip(kernel.outputs, kernel.output_shapes(inputs))]


def _cuda_impl(kernel, *inputs):
    return kernel(*[t.contiguous() for t in inputs])


def _fake_impl(kernel, *inputs):
    outs = _outputs_like(kernel, inputs)
    return outs[0] if len(outs) == 1 else tuple(outs)


def register(bundle, namespace="liger"):
    """Defines torch.ops.<namespace>.<kernel> for every kernel of `bundle`
    (a liger.runtime.Bundle). Returns the operator names."""
    import torch
    lib = _LIBRARIES.get(namespace)
    if lib is None:
        lib = _LIBRARIES[namespace] = torch.library.Library(namespace, "FRAGMENT")
    names = []
    for name, kernel in bundle.kernels.items():
        qualified = "%s::%s" % (namespace, name)
        if qualified in _KERNELS:
            raise ValueError("%s is already registered (from another bundle?)" % qualified)
        args = ", ".join("Tensor %s" % p["name"] for p in kernel.inputs)
        n = len(kernel.outputs)
        rets = "Tensor" if n == 1 else "(" + ", ".join(["Tensor"] * n) + ")"
        lib.define("%s(%s) -> %s" % (name, args, rets))
        lib.impl(name, functools.partial(_cuda_impl, kernel), "CUDA")
        torch.library.register_fake(qualified, lib=lib)(functools.partial(_fake_impl, kernel))
        _KERNELS[qualified] = kernel
        names.append(qualified)
    return names


def register_autograd(forward, backward, namespace="liger"):
    """Makes torch.ops.<namespace>.<forward> differentiable through the
    kernel <backward>: backward(grad, *forward_inputs) -> one gradient per
    forward input."""
    import torch
    fwd = "%s::%s" % (namespace, forward)
    bwd_kernel = _KERNELS.get("%s::%s" % (namespace, backward))
    fwd_kernel = _KERNELS.get(fwd)
    if fwd_kernel is None or bwd_kernel is None:
        raise KeyError("register the bundle holding %s and %s first" % (forward, backward))
    if len(fwd_kernel.outputs) != 1 or len(bwd_kernel.outputs) != len(fwd_kernel.inputs):
        raise ValueError("%s must have one output and %s one gradient per input of %s"
                         % (forward, backward, forward))
    op = getattr(getattr(torch.ops, namespace), backward)

    def setup_context(ctx, inputs, output):
        ctx.save_for_backward(*inputs)

    def backward_fn(ctx, grad):
        grads = op(grad.contiguous(), *ctx.saved_tensors)
        return grads if isinstance(grads, tuple) else (grads,)

    torch.library.register_autograd(fwd, backward_fn, setup_context=setup_context)


def load_library(path=None):
    """Loads the LibTorch adapter (liger_torch_ops, built by
    scripts/build-runtime.sh where PyTorch is installed), which defines
    torch.ops.liger.launch(bundle, kernel, inputs, outputs) and
    torch.ops.liger.call(bundle, kernel, inputs) -> outputs in C++: the
    low-overhead path. Looks in the installed package, then beside
    _liger_runtime on sys.path, unless `path` is given. Returns the path
    loaded."""
    import torch
    candidates = [path] if path else installation.library_candidates("libliger_torch_ops.so")
    for candidate in candidates:
        if candidate and os.path.isfile(candidate):
            torch.ops.load_library(candidate)
            return candidate
    raise ImportError("libliger_torch_ops.so not found (looked in %s); build it with "
                      "scripts/build-runtime.sh on a machine with PyTorch"
                      % ", ".join(c for c in candidates if c))
