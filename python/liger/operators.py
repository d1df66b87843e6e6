"""liger.ops' kernels as PyTorch operators: torch.ops.liger.*.

Each op is a `torch.library.custom_op` in the `liger` namespace whose
schema holds what configures its kernel (ints, floats, strings), so one
operator serves every configuration; a fake implementation gives exact
output shapes, dtypes and strides (contiguous), so `torch.compile` traces
through the ops with no graph break; `register_autograd` pairs a forward
with its backward operator. The implementation builds the op's spec for
the tensors' device (liger.specs; the target from the device), finds its
kernels once per spec (liger.bundles) and launches them, or runs their
reference functions on CPU tensors.

    liger::rms_norm(x, weight, eps, offset, casting) -> (y, rstd)
    liger::rms_norm_backward(dy, x, weight, rstd, eps, offset, casting) -> (dx, dweight)
    liger::add_rms_norm(x, residual, weight, eps, offset, casting) -> (y, x + residual, rstd)
    liger::add_rms_norm_backward(dy, dsum, sum, weight, rstd, eps, offset, casting)
        -> (dresidual, dweight)                   (the gradient of x and of residual alike)
    liger::layer_norm(x, weight, bias?, eps) -> (y, mean, rstd)
    liger::layer_norm_backward(dy, x, weight, mean, rstd, eps, with_bias) -> (dx, dweight, dbias)
    liger::swiglu(gate, up) -> y                  liger::swiglu_backward(dy, gate, up)
    liger::geglu(gate, up, approximate) -> y      liger::geglu_backward(dy, gate, up, approximate)
    liger::softmax(x) -> y                        liger::softmax_backward(dy, y)
    liger::rope(q, k, cos, sin) -> (q, k)         liger::rope_backward(dq, dk, cos, sin)
    liger::cross_entropy(logits, target, weight?, ..., return_z_loss) -> (loss, z_loss, grad)
    liger::cross_entropy_(logits!, target, weight?, ..., return_z_loss) -> (loss, z_loss)
                                             (the gradient over the logits;
                                              z_loss empty unless return_z_loss)
    liger::fused_linear_cross_entropy(hidden, weight, target, bias?, class_weight?, ...,
                                      return_z_loss, memory_budget, dw_f32, want_dx,
                                      want_dw, want_db)
        -> (loss, z_loss, dhidden, dweight, dbias)
                                             (reduction "none": the gradients empty;
                                              z_loss empty unless return_z_loss)
    liger::fused_linear_cross_entropy_backward(hidden, weight, target, bias?, class_weight?,
                                               dloss, ..., return_z_loss, ..., want_dx,
                                               want_dw, want_db)
        -> (dhidden, dweight, dbias)         (reduction "none": dloss per token)
    liger::kl_div(input, target, reduction, log_target, eps, want_grad) -> (loss, grad)
                                             (grad: the gradient of a unit incoming
                                              gradient, formed in the same kernel
                                              where want_grad, the reduction is
                                              not "none" and input is not f16;
                                              else empty)
    liger::kl_div_backward(target, dloss, reduction, log_target, eps) -> dinput
    liger::jsd(input, target, shift_labels?, beta, ignore_index, want_grad) -> (loss, grad)
    liger::fused_linear_jsd(student_input, student_weight, teacher_input, teacher_weight,
                            shift_labels?, jsd_beta, ignore_index, temperature,
                            memory_budget, dw_f32, want_dx, want_dw)
        -> (loss, dstudent_input, dstudent_weight)
    liger::lora_linear(x, weight, bias?, lora_a, lora_b, scale, keep_mid=False)
        -> (y, mid)                          (mid = x · Aᵀ where keep_mid, what dB
                                              is formed from; else empty)
    liger::lora_linear_backward(dy, weight, lora_a, lora_b, scale, has_bias)
        -> (dx, dmid)                        (dmid = scale · dy · B, what dA is
                                              formed from; dW, dA, dB, db:
                                              PyTorch's matmuls)
    liger::gated_mlp(x, gate_weight, up_weight, down_weight, activation, approximate)
        -> (y, h, gate, up)                  (h, gate, up: what the backward reads)
    liger::gated_mlp_backward(dy, down_weight, gate, up, activation, approximate)
        -> (dgate, dup)                      (the weight gradients and dx: PyTorch's
                                              matmuls)
    liger::linear_rope(x, q_weight, k_weight, cos, sin, q_bias?, k_bias?) -> (q, k)
                                             (backward: liger::rope_backward, then
                                              PyTorch's matmuls)
    liger::attention(q, k, v, causal, scale, window=0, softcap=0) -> (out, lse)
                                             (scale 0: 1/sqrt(D); window 0,
                                              softcap 0: none; lse f32 [B, Hq, T])
    liger::attention_backward(dout, q, k, v, out, lse, causal, scale, window=0,
                              softcap=0) -> (dq, dk, dv)

Row ops take [..., H] inputs and flatten their leading dimensions into
rows, on the GPU and on the CPU alike; every implementation makes its
inputs contiguous (a copy where they are not). The ops trust their
arguments: liger.ops validates them before calling.
"""

import functools
from typing import List, Optional, Tuple

import torch
import torch.nn.functional as F
from torch import Tensor

from . import bundles, specs
from .errors import LigerError
from .loss_plan import chunked_jsd, chunked_loss, plan_chunks, plan_jsd_chunks

F32 = torch.float32


# --- the eager path --------------------------------------------------------
# Outside torch.compile, a call through torch.ops pays the dispatcher, the
# custom op's wrappers and its generated autograd.Function: about 80 us of
# host time a LayerNorm forward on the H200's host, more than its kernel over
# 16384 x 4096 bf16. `call` takes a shorter way where nothing needs the
# dispatcher: the same implementation, setup_context and backward, in a plain
# autograd.Function. Under torch.compile, a dispatch mode (FakeTensorMode, a
# selective checkpoint's policy, a FLOP counter), a functorch transform or a
# tensor subclass, the op is called as the PyTorch operator it is.

_IMPLS = {}  # op -> its implementation (the function the custom op wraps)
_EAGER = {}  # op -> what `call` runs instead of it, where it may
_PLAIN = (torch.Tensor, torch.nn.Parameter)


def _custom_op(name, mutates_args=()):
    """torch.library.custom_op, remembering the implementation."""
    def wrap(fn):
        op = torch.library.custom_op(name, mutates_args=mutates_args)(fn)
        _IMPLS[op] = fn
        return op
    return wrap


def _autograd(op, backward, setup_context):
    """op.register_autograd(backward, setup_context=setup_context), and the
    same pair around the implementation as the eager path's function."""
    op.register_autograd(backward, setup_context=setup_context)
    impl = _IMPLS[op]

    def forward(ctx, *args):
        output = impl(*args)
        setup_context(ctx, args, output)
        return output

    # (Named for the op: its grad_fn is Liger_<op>Backward.)
    eager = type("Liger_" + impl.__name__, (torch.autograd.Function,), dict(
        forward=staticmethod(forward),
        backward=staticmethod(backward)))
    _EAGER[op] = eager.apply


def _no_autograd(op):
    """The eager path of a functional op with no gradient (a backward op):
    its implementation."""
    _EAGER[op] = _IMPLS[op]


def _dispatcher_needed(args):
    return (torch.compiler.is_compiling() or torch._C._len_torch_dispatch_stack() > 0
            or torch._C._functorch.peek_interpreter_stack() is not None
            or any(type(a) not in _PLAIN for a in args if isinstance(a, torch.Tensor)))


def call(op, *args):
    """op(*args), by the eager path where the op has one and nothing needs
    the dispatcher (module comment above); the results are the same."""
    eager = _EAGER.get(op)
    if eager is None or _dispatcher_needed(args):
        return op(*args)
    return eager(*args)


@functools.lru_cache(maxsize=None)
def _spec(make, args, device):
    """The spec `make(*args)` for tensors on `device` (built once)."""
    return make(*args, target=bundles.device_target(device))


def clear():
    """Forgets every spec and kernel (they load again on next use)."""
    _spec.cache_clear()
    _LORA_KERNELS.clear()
    _GATED_MLP_KERNELS.clear()
    _LINEAR_ROPE_KERNELS.clear()
    bundles.clear()


def _pair(make, args, device):
    return bundles.kernels(_spec(make, args, device))


def _rows(t):
    """t as contiguous [rows, H] (itself when it is one already)."""
    if t.dim() == 2 and t.is_contiguous():
        return t
    return t.reshape(-1, t.shape[-1]).contiguous()


def _shaped(y, like):
    """y, a [rows, N] output, in the shape of the input `like`'s rows (N its
    last dimension: H for a row op, a projection's width)."""
    return y if y.dim() == like.dim() else y.view(like.shape[:-1] + y.shape[-1:])


def _per_row(t, like):
    """t, one value per row [rows], in the shape of the input `like`'s rows
    (itself where `like` is [rows, H]: a view costs a few microseconds)."""
    return t if like.dim() == 2 else t.view(like.shape[:-1])


def _is_one(dloss):
    """Whether the incoming gradient is 1 (checked only when running, not
    while a graph is traced: then the product is always formed)."""
    from torch._subclasses.fake_tensor import is_fake
    if torch.compiler.is_compiling() or is_fake(dloss) or \
            torch._C._functorch.is_functorch_wrapped_tensor(dloss):
        return False
    return bool(torch.equal(dloss, torch.ones_like(dloss)))


def _like(t):
    return torch.empty_like(t, memory_format=torch.contiguous_format)


def _product(grad, dloss):
    """grad times the incoming dloss (a loss's: 0-dim, which keeps grad's
    dtype while the product is formed in f32, one rounding, not dloss
    rounded first)."""
    return grad * (dloss if dloss.dim() == 0 else dloss.to(grad.dtype))


def _scaled(grad, dloss):
    """A gradient formed in the forward for a unit incoming gradient, times
    the incoming dloss: grad itself where dloss is 1 (asked of the device,
    which waits for it; _scaled_in_place does not ask)."""
    if _is_one(dloss):
        return grad
    return _product(grad, dloss)


def _graph_kept():
    """Whether the running backward keeps the graph (retain_graph,
    create_graph), or runs outside the autograd engine."""
    try:
        return torch._C._autograd._get_current_graph_task_keep_graph()
    except RuntimeError:
        return True


def grads_dropped(loss):
    """Tells the backward of the op whose differentiable output is `loss`
    that the caller dropped the op's gradient outputs (the gradients its
    forward formed for a unit incoming gradient: liger.ops' functions
    return the loss alone), so that its backward may scale them over
    themselves (_scaled_in_place). Without it a caller holding them would
    see them change. Returns `loss`."""
    # (compiling first: a traced tensor's grad_fn is not to be read)
    if not torch.compiler.is_compiling() and loss.grad_fn is not None:
        loss.grad_fn.grads_dropped = True
    return loss


def _differentiated_once(grad, dloss):
    """Refuses a backward that is itself differentiated (create_graph=True:
    a double backward, a gradient penalty) of a loss whose forward formed
    its gradient: that gradient has no graph through the loss's inputs, so
    every second-order term through it would silently be 0. (Not while a
    graph is traced: a traced backward is differentiated by its tracer's
    rules.)"""
    if torch.is_grad_enabled() and not _dispatcher_needed((grad, dloss)):
        raise LigerError(
            "liger's losses are differentiable once (as Liger-Kernel's): their forward "
            "forms the gradient, with no graph through the inputs, so a backward with "
            "create_graph=True would lose every second-order term; use the PyTorch loss "
            "where higher-order gradients are needed")


def _scaled_in_place(grad, dloss, scale_spec, ctx):
    """_scaled's product, formed over `grad` itself (a gradient the forward
    formed for a unit incoming gradient and saved for this backward) by the
    @scale kernel of the spec `scale_spec()` (liger.scale): a row whose
    factor is 1 is neither read nor written, so nothing waits for the
    device to say whether dloss is 1. `dloss` is a scalar, or with
    `ctx.per_row` (a cross-entropy's reduction "none") one value per row of
    grad, in the target's shape (0-dim for logits of one row). Only where
    the op's caller dropped grad (grads_dropped on `ctx`, the op's backward
    node): else, or where the graph is kept (a later backward reads grad
    again), or the call is traced, the product is formed apart (_scaled).
    A backward that is itself differentiated is refused
    (_differentiated_once), unless the loss is linear in its input
    (`ctx.linear_in_input`: its gradient does not depend on the input, so
    the product formed apart is exact to every order)."""
    if not getattr(ctx, "linear_in_input", False):
        _differentiated_once(grad, dloss)
    per_row = getattr(ctx, "per_row", False)
    if not getattr(ctx, "grads_dropped", False) or _dispatcher_needed((grad, dloss)) or \
            _graph_kept():
        if per_row:
            return grad * dloss.reshape(*grad.shape[:-1], 1).to(grad.dtype)
        return _scaled(grad, dloss)
    factor = dloss.detach().to(F32)
    if per_row:
        factor = factor.reshape(-1).contiguous()
    rows = grad.view(-1, grad.shape[-1])
    bundles.load(scale_spec())["scale_rowwise_0"](rows, factor, out=[rows])
    torch.autograd.graph.increment_version(grad)
    return grad


def _extra_outputs(ctx, *outputs):
    """Marks an op's `outputs` beside its one differentiable output (saved
    statistics, gradients formed in the forward) non-differentiable, and
    turns the materialization of unread outputs' gradients off: autograd
    would otherwise hand the backward a tensor of zeros the size of each,
    a [tokens, vocab] fill for a loss's gradient, that the backward ignores.
    Its backward is then _one_output_backward's."""
    ctx.mark_non_differentiable(*outputs)
    ctx.set_materialize_grads(False)


def _one_output_backward(backward):
    """The backward of an op with one differentiable output
    (_extra_outputs): no gradient for that output (None: not materialized
    as zeros), none for any input."""
    @functools.wraps(backward)
    def wrapped(ctx, grad, *unread):
        if grad is None:
            return (None,) * len(ctx.needs_input_grad)
        return backward(ctx, grad, *unread)
    return wrapped


# --- RMSNorm ---------------------------------------------------------------

def _rms_norm_args(x, weight, eps, offset, casting):
    return (x.shape[-1], x.dtype, weight.dtype, eps, offset, casting)


@_custom_op("liger::rms_norm", mutates_args=())
def rms_norm(x: Tensor, weight: Tensor, eps: float, offset: float,
             casting: str) -> Tuple[Tensor, Tensor]:
    fwd, _ = _pair(specs.rms_norm_spec, _rms_norm_args(x, weight, eps, offset, casting),
                   x.device)
    y, rstd = fwd(_rows(x), weight.contiguous())
    return _shaped(y, x), _per_row(rstd, x)


@rms_norm.register_fake
def _(x, weight, eps, offset, casting):
    return torch.empty_like(x, memory_format=torch.contiguous_format), \
        x.new_empty(x.shape[:-1], dtype=F32)


@_custom_op("liger::rms_norm_backward", mutates_args=())
def rms_norm_backward(dy: Tensor, x: Tensor, weight: Tensor, rstd: Tensor, eps: float,
                      offset: float, casting: str) -> Tuple[Tensor, Tensor]:
    _, bwd = _pair(specs.rms_norm_spec, _rms_norm_args(x, weight, eps, offset, casting),
                   x.device)
    dx, dw = bwd(_rows(dy), _rows(x), weight.contiguous(), rstd.reshape(-1).contiguous())
    return _shaped(dx, x), dw


@rms_norm_backward.register_fake
def _(dy, x, weight, rstd, eps, offset, casting):
    return torch.empty_like(x, memory_format=torch.contiguous_format), \
        torch.empty_like(weight, memory_format=torch.contiguous_format)


def _rms_norm_setup(ctx, inputs, output):
    x, weight, eps, offset, casting = inputs
    ctx.save_for_backward(x, weight, output[1])
    ctx.config = (eps, offset, casting)
    _extra_outputs(ctx, output[1])


@_one_output_backward
def _rms_norm_grad(ctx, dy, _drstd):
    x, weight, rstd = ctx.saved_tensors
    dx, dw = call(rms_norm_backward, dy, x, weight, rstd, *ctx.config)
    return dx, dw, None, None, None


_autograd(rms_norm, _rms_norm_grad, _rms_norm_setup)
_no_autograd(rms_norm_backward)


# --- RMSNorm with the projections that read it ------------------------------
#
# xn = rms_norm(x) and y_i = xn·W_iᵀ (+ b_i) for the projections that read xn
# (the attention's q/k/v, the MLP's gate/up: fuse_norm_linear) as one op.
# The forward is the norm's kernel, then each projection; the backward
# accumulates dxn = Σ dy_i·W_i in one buffer (each product after the first
# adds into it, addmm's beta = 1, instead of autograd's add pass per reader
# of xn; the gradient of xn's other readers, where it has some, added last),
# forms dW_i = dy_iᵀ·xn (db_i = Σ dy_i), and runs the norm's backward kernel
# on dxn with the rstd the forward saved. Saved: x, the weights, xn and rstd
# (what the norm and projections apart save). The norm's output stays one
# the forward writes: folded into the projections' prologue it measured
# slower than the norm kernel and the plain projection (docs/benchmarks.md).


@_custom_op("liger::rms_norm_linear", mutates_args=())
def rms_norm_linear(x: Tensor, weight: Tensor, eps: float, offset: float, casting: str,
                    weights: List[Tensor], biases: List[Tensor]
                    ) -> Tuple[Tensor, Tensor, List[Tensor]]:
    """(xn, rstd, [y_i]): `biases` empty, or one per weight."""
    xn, rstd = _IMPLS[rms_norm](x, weight, eps, offset, casting)
    return xn, rstd, [F.linear(xn, w, biases[i] if biases else None)
                      for i, w in enumerate(weights)]


@rms_norm_linear.register_fake
def _(x, weight, eps, offset, casting, weights, biases):
    return _like(x), x.new_empty(x.shape[:-1], dtype=F32), \
        [x.new_empty(x.shape[:-1] + (w.shape[0],)) for w in weights]


def _rms_norm_linear_setup(ctx, inputs, output):
    x, weight, eps, offset, casting, weights, biases = inputs
    xn, rstd, _ = output
    ctx.save_for_backward(x, weight, xn, rstd, *weights)
    ctx.config = (eps, offset, casting)
    ctx.biased = bool(biases)
    ctx.mark_non_differentiable(rstd)
    ctx.set_materialize_grads(False)  # (an unread output's gradient: None, no zeros)


def _rms_norm_linear_grad(ctx, dxn_readers, _drstd, dys):
    x, weight, xn, rstd, *weights = ctx.saved_tensors
    need_x, need_weight, *_, need_weights, need_biases = ctx.needs_input_grad
    dxn = None
    if need_x or need_weight:
        for w, dy in zip(weights, dys):
            if dy is not None:
                dxn = _flat(dy).matmul(w) if dxn is None else dxn.addmm_(_flat(dy), w)
        if dxn_readers is not None:
            dxn = _flat(dxn_readers).clone() if dxn is None else dxn.add_(_flat(dxn_readers))
    dx = dnorm = None
    if dxn is not None:
        dx, dnorm = call(rms_norm_backward, dxn.view(x.shape), x, weight, rstd, *ctx.config)
    elif need_x or need_weight:  # (no output read: zero gradients)
        dx, dnorm = torch.zeros_like(x), torch.zeros_like(weight)
    flat_xn = _flat(xn)
    dws = [_flat(dy).t().matmul(flat_xn) if dy is not None and need else None
           for dy, need in zip(dys, need_weights)]
    dbs = [_flat(dy).sum(0) if dy is not None and need else None
           for dy, need in zip(dys, need_biases)] if ctx.biased else []
    return (dx if need_x else None, dnorm if need_weight else None, None, None, None, dws, dbs)


# (No eager path: torch.autograd.Function tracks no tensor inside a list.)
rms_norm_linear.register_autograd(_rms_norm_linear_grad, setup_context=_rms_norm_linear_setup)


# --- add + RMSNorm ---------------------------------------------------------

@_custom_op("liger::add_rms_norm", mutates_args=())
def add_rms_norm(x: Tensor, residual: Tensor, weight: Tensor, eps: float, offset: float,
                 casting: str) -> Tuple[Tensor, Tensor, Tensor]:
    fwd, _ = _pair(specs.add_rms_norm_spec, _rms_norm_args(x, weight, eps, offset, casting),
                   x.device)
    y, total, rstd = fwd(_rows(x), _rows(residual), weight.contiguous())
    return _shaped(y, x), _shaped(total, x), _per_row(rstd, x)


@add_rms_norm.register_fake
def _(x, residual, weight, eps, offset, casting):
    return _like(x), _like(x), x.new_empty(x.shape[:-1], dtype=F32)


@_custom_op("liger::add_rms_norm_backward", mutates_args=())
def add_rms_norm_backward(dy: Tensor, dsum: Tensor, total: Tensor, weight: Tensor, rstd: Tensor,
                          eps: float, offset: float, casting: str) -> Tuple[Tensor, Tensor]:
    """The gradient of the residual stream (of x and of the residual alike)
    and of the weight, from the incoming gradients of the normalized sum
    (dy) and of the sum (dsum): RMSNorm's backward over the saved sum, dsum
    added to its dx in the kernel."""
    _, bwd = _pair(specs.add_rms_norm_spec, _rms_norm_args(total, weight, eps, offset, casting),
                   total.device)
    dw, dtotal = bwd(_rows(dy), _rows(total), weight.contiguous(),
                     rstd.reshape(-1).contiguous(), _rows(dsum))
    return _shaped(dtotal, total), dw


@add_rms_norm_backward.register_fake
def _(dy, dsum, total, weight, rstd, eps, offset, casting):
    return _like(total), _like(weight)


def _add_rms_norm_setup(ctx, inputs, output):
    _, _, weight, eps, offset, casting = inputs
    ctx.save_for_backward(output[1], weight, output[2])
    ctx.config = (eps, offset, casting)
    ctx.mark_non_differentiable(output[2])


def _add_rms_norm_grad(ctx, dy, dsum, _drstd):
    total, weight, rstd = ctx.saved_tensors
    dtotal, dw = call(add_rms_norm_backward, dy, dsum, total, weight, rstd, *ctx.config)
    return dtotal, dtotal, dw, None, None, None


_autograd(add_rms_norm, _add_rms_norm_grad, _add_rms_norm_setup)
_no_autograd(add_rms_norm_backward)


# --- LayerNorm -------------------------------------------------------------

def _layer_norm_args(x, weight, eps, with_bias):
    return (x.shape[-1], x.dtype, weight.dtype, eps, with_bias)


@_custom_op("liger::layer_norm", mutates_args=())
def layer_norm(x: Tensor, weight: Tensor, bias: Optional[Tensor],
               eps: float) -> Tuple[Tensor, Tensor, Tensor]:
    fwd, _ = _pair(specs.layer_norm_spec, _layer_norm_args(x, weight, eps, bias is not None),
                   x.device)
    args = [_rows(x), weight.contiguous()] + ([bias.contiguous()] if bias is not None else [])
    y, mean, rstd = fwd(*args)
    return _shaped(y, x), _per_row(mean, x), _per_row(rstd, x)


@layer_norm.register_fake
def _(x, weight, bias, eps):
    return _like(x), x.new_empty(x.shape[:-1], dtype=F32), x.new_empty(x.shape[:-1], dtype=F32)


@_custom_op("liger::layer_norm_backward", mutates_args=())
def layer_norm_backward(dy: Tensor, x: Tensor, weight: Tensor, mean: Tensor, rstd: Tensor,
                        eps: float, with_bias: bool) -> Tuple[Tensor, Tensor, Tensor]:
    """dx, dweight and, `with_bias`, dbias (else an empty tensor), from the
    mean and rstd of each row that the forward returned."""
    _, bwd = _pair(specs.layer_norm_spec, _layer_norm_args(x, weight, eps, with_bias), x.device)
    grads = bwd(_rows(dy), _rows(x), weight.contiguous(), mean.reshape(-1).contiguous(),
                rstd.reshape(-1).contiguous())
    db = grads[2] if with_bias else weight.new_empty(0)
    return _shaped(grads[0], x), grads[1], db


@layer_norm_backward.register_fake
def _(dy, x, weight, mean, rstd, eps, with_bias):
    return _like(x), _like(weight), _like(weight) if with_bias else weight.new_empty(0)


def _layer_norm_setup(ctx, inputs, output):
    x, weight, bias, eps = inputs
    ctx.save_for_backward(x, weight, output[1], output[2])
    ctx.config = (eps, bias is not None)
    _extra_outputs(ctx, output[1], output[2])


@_one_output_backward
def _layer_norm_grad(ctx, dy, _dmean, _drstd):
    x, weight, mean, rstd = ctx.saved_tensors
    dx, dw, db = call(layer_norm_backward, dy, x, weight, mean, rstd, *ctx.config)
    return dx, dw, db if ctx.config[1] else None, None


_autograd(layer_norm, _layer_norm_grad, _layer_norm_setup)
_no_autograd(layer_norm_backward)


# --- SwiGLU, GeGLU ---------------------------------------------------------

@_custom_op("liger::swiglu", mutates_args=())
def swiglu(gate: Tensor, up: Tensor) -> Tensor:
    fwd, _ = _pair(specs.swiglu_spec, (gate.shape[-1], gate.dtype), gate.device)
    return _shaped(fwd(_rows(gate), _rows(up)), gate)


@_custom_op("liger::swiglu_backward", mutates_args=())
def swiglu_backward(dy: Tensor, gate: Tensor, up: Tensor) -> Tuple[Tensor, Tensor]:
    _, bwd = _pair(specs.swiglu_spec, (gate.shape[-1], gate.dtype), gate.device)
    dg, du = bwd(_rows(dy), _rows(gate), _rows(up))
    return _shaped(dg, gate), _shaped(du, gate)


@_custom_op("liger::geglu", mutates_args=())
def geglu(gate: Tensor, up: Tensor, approximate: str) -> Tensor:
    fwd, _ = _pair(specs.geglu_spec, (gate.shape[-1], gate.dtype, approximate), gate.device)
    return _shaped(fwd(_rows(gate), _rows(up)), gate)


@_custom_op("liger::geglu_backward", mutates_args=())
def geglu_backward(dy: Tensor, gate: Tensor, up: Tensor,
                   approximate: str) -> Tuple[Tensor, Tensor]:
    _, bwd = _pair(specs.geglu_spec, (gate.shape[-1], gate.dtype, approximate), gate.device)
    dg, du = bwd(_rows(dy), _rows(gate), _rows(up))
    return _shaped(dg, gate), _shaped(du, gate)


def _gated_backward_into(spec, dy, gate, up):
    """dgate written over gate and dup over up (an elementwise kernel: each
    element is read before its thread writes it); through a copy where
    gate or up is not one contiguous block."""
    _, bwd = _pair(*spec)
    if gate.is_contiguous() and up.is_contiguous():
        bwd(_rows(dy), _rows(gate), _rows(up), out=[_rows(gate), _rows(up)])
        return
    dg, du = bwd(_rows(dy), _rows(gate), _rows(up))
    gate.copy_(dg.view(gate.shape))
    up.copy_(du.view(up.shape))


# The gated activations' backward in place, for the torch.compile backend:
# where the saved gate and up die at their backward (frontend/inplace.py),
# their gradients take their memory, as Liger-Kernel's SwiGLU backward does
# (two [tokens, intermediate] tensors less at the backward's peak).
@_custom_op("liger::swiglu_backward_", mutates_args=("gate", "up"))
def swiglu_backward_(dy: Tensor, gate: Tensor, up: Tensor) -> None:
    _gated_backward_into((specs.swiglu_spec, (gate.shape[-1], gate.dtype), gate.device),
                         dy, gate, up)


@_custom_op("liger::geglu_backward_", mutates_args=("gate", "up"))
def geglu_backward_(dy: Tensor, gate: Tensor, up: Tensor, approximate: str) -> None:
    _gated_backward_into((specs.geglu_spec, (gate.shape[-1], gate.dtype, approximate),
                          gate.device), dy, gate, up)


@swiglu_backward_.register_fake
def _(dy, gate, up):
    return None


@geglu_backward_.register_fake
def _(dy, gate, up, approximate):
    return None


@swiglu.register_fake
def _(gate, up):
    return _like(gate)


@geglu.register_fake
def _(gate, up, approximate):
    return _like(gate)


@swiglu_backward.register_fake
def _(dy, gate, up):
    return _like(gate), _like(gate)


@geglu_backward.register_fake
def _(dy, gate, up, approximate):
    return _like(gate), _like(gate)


def _gated_setup(ctx, inputs, output):
    ctx.save_for_backward(inputs[0], inputs[1])
    ctx.config = tuple(inputs[2:])


def _swiglu_grad(ctx, dy):
    return call(swiglu_backward, dy, *ctx.saved_tensors)


def _geglu_grad(ctx, dy):
    return call(geglu_backward, dy, *ctx.saved_tensors, *ctx.config) + (None,)


_autograd(swiglu, _swiglu_grad, _gated_setup)
_no_autograd(swiglu_backward)
_autograd(geglu, _geglu_grad, _gated_setup)
_no_autograd(geglu_backward)


# --- softmax ---------------------------------------------------------------

@_custom_op("liger::softmax", mutates_args=())
def softmax(x: Tensor) -> Tensor:
    fwd, _ = _pair(specs.softmax_spec, (x.shape[-1], x.dtype), x.device)
    return _shaped(fwd(_rows(x)), x)


@_custom_op("liger::softmax_backward", mutates_args=())
def softmax_backward(dy: Tensor, y: Tensor) -> Tensor:
    _, bwd = _pair(specs.softmax_spec, (y.shape[-1], y.dtype), y.device)
    return _shaped(bwd(_rows(dy), _rows(y)), y)


@softmax.register_fake
def _(x):
    return _like(x)


@softmax_backward.register_fake
def _(dy, y):
    return _like(y)


def _softmax_setup(ctx, inputs, output):
    ctx.save_for_backward(output)


def _softmax_grad(ctx, dy):
    (y,) = ctx.saved_tensors
    return call(softmax_backward, dy, y)


_autograd(softmax, _softmax_grad, _softmax_setup)
_no_autograd(softmax_backward)


# --- RoPE ------------------------------------------------------------------

def _rope_args(q, k, cos):
    return (q.shape[1], k.shape[1], q.shape[-1], q.dtype, cos.shape[0] == 1)


@_custom_op("liger::rope", mutates_args=())
def rope(q: Tensor, k: Tensor, cos: Tensor, sin: Tensor) -> Tuple[Tensor, Tensor]:
    fwd, _ = _pair(specs.rope_spec, _rope_args(q, k, cos), q.device)
    return fwd(q.contiguous(), k.contiguous(), cos.contiguous(), sin.contiguous())


@_custom_op("liger::rope_backward", mutates_args=())
def rope_backward(dq: Tensor, dk: Tensor, cos: Tensor, sin: Tensor) -> Tuple[Tensor, Tensor]:
    _, bwd = _pair(specs.rope_spec, _rope_args(dq, dk, cos), dq.device)
    return bwd(dq.contiguous(), dk.contiguous(), cos.contiguous(), sin.contiguous())


@rope.register_fake
def _(q, k, cos, sin):
    return _like(q), _like(k)


@rope_backward.register_fake
def _(dq, dk, cos, sin):
    return _like(dq), _like(dk)


def _rope_setup(ctx, inputs, output):
    ctx.save_for_backward(inputs[2], inputs[3])


def _rope_grad(ctx, dq, dk):
    cos, sin = ctx.saved_tensors
    gq, gk = call(rope_backward, dq, dk, cos, sin)
    return gq, gk, None, None


_autograd(rope, _rope_grad, _rope_setup)
_no_autograd(rope_backward)


# --- cross-entropy ---------------------------------------------------------

def _ce_loss_shape(target, reduction):
    return target.shape if reduction == "none" else ()


def _ce_spec_of(logits, target, weight, ignore_index, label_smoothing, reduction, softcap,
                lse_square_scale, return_z_loss):
    """The cross-entropy's spec, built when called (a backward keeps it
    without keeping the tensors)."""
    return functools.partial(_spec, specs.cross_entropy_spec, (
        logits.shape[-1], logits.dtype, target.dtype, ignore_index, label_smoothing, reduction,
        softcap, lse_square_scale, weight is not None, return_z_loss), logits.device)


def _ce_launch(logits, target, weight, ignore_index, label_smoothing, reduction, softcap,
               lse_square_scale, return_z_loss, grad):
    """The loss and, with `return_z_loss`, the z-loss term apart (the
    kernel's second output; else an empty tensor), with the gradient of a
    unit incoming gradient written into `grad` (the logits themselves, in
    place)."""
    fwd, _ = bundles.kernels(_ce_spec_of(logits, target, weight, ignore_index, label_smoothing,
                                         reduction, softcap, lse_square_scale, return_z_loss)())
    shape = _ce_loss_shape(target, reduction)
    one = torch.ones(shape, dtype=F32, device=logits.device)
    loss = torch.empty(shape, dtype=F32, device=logits.device)
    z_loss = torch.empty(shape if return_z_loss else 0, dtype=F32, device=logits.device)
    rows = logits.view(-1, logits.shape[-1])

    def flat(t):  # (the kernel's [rows] per token, or its scalar)
        return t.view(-1) if reduction == "none" else t
    fwd(rows, target.reshape(-1).contiguous(),
        *([weight.contiguous()] if weight is not None else []), flat(one),
        out=[flat(loss), *([flat(z_loss)] if return_z_loss else []), grad.view(rows.shape)])
    return loss, z_loss


@_custom_op("liger::cross_entropy", mutates_args=())
def cross_entropy(logits: Tensor, target: Tensor, weight: Optional[Tensor], ignore_index: int,
                  label_smoothing: float, reduction: str, softcap: float,
                  lse_square_scale: float, return_z_loss: bool) -> Tuple[Tensor, Tensor, Tensor]:
    logits = logits.contiguous()
    grad = torch.empty_like(logits)
    loss, z_loss = _ce_launch(logits, target, weight, ignore_index, label_smoothing, reduction,
                              softcap, lse_square_scale, return_z_loss, grad)
    return loss, z_loss, grad


def _ce_fake_losses(logits, target, reduction, return_z_loss):
    shape = _ce_loss_shape(target, reduction)
    return (logits.new_empty(shape, dtype=F32),
            logits.new_empty(shape if return_z_loss else 0, dtype=F32))


@cross_entropy.register_fake
def _(logits, target, weight, ignore_index, label_smoothing, reduction, softcap,
      lse_square_scale, return_z_loss):
    return _ce_fake_losses(logits, target, reduction, return_z_loss) + (_like(logits),)


@_custom_op("liger::cross_entropy_", mutates_args=("logits",))
def cross_entropy_(logits: Tensor, target: Tensor, weight: Optional[Tensor], ignore_index: int,
                   label_smoothing: float, reduction: str, softcap: float,
                   lse_square_scale: float, return_z_loss: bool) -> Tuple[Tensor, Tensor]:
    # The kernel reads each chunk of a row before writing its gradient there
    # (Liger-Kernel's memory saving); contiguous logits (liger.ops checks).
    return _ce_launch(logits, target, weight, ignore_index, label_smoothing, reduction,
                      softcap, lse_square_scale, return_z_loss, logits)


@cross_entropy_.register_fake
def _(logits, target, weight, ignore_index, label_smoothing, reduction, softcap,
      lse_square_scale, return_z_loss):
    return _ce_fake_losses(logits, target, reduction, return_z_loss)


# The z-loss returned apart has no gradient (as Liger-Kernel's, which
# drops its incoming gradient: its term is in the loss, and differentiated
# there).

def _ce_setup(ctx, inputs, output):
    ctx.save_for_backward(output[2])
    ctx.scale_spec = _ce_spec_of(*inputs)
    ctx.per_row = inputs[5] == "none"
    _extra_outputs(ctx, output[1], output[2])


@_one_output_backward
def _ce_grad(ctx, dloss, _dz, _dgrad):
    (grad,) = ctx.saved_tensors
    return (_scaled_in_place(grad, dloss, ctx.scale_spec, ctx),) + (None,) * 8


cross_entropy.register_autograd(_ce_grad, setup_context=_ce_setup)


class CrossEntropyInPlace(torch.autograd.Function):
    """liger::cross_entropy_ made differentiable: the forward writes the
    gradient over the logits (an operator that mutates its input takes no
    registered autograd formula), the backward scales it."""

    @staticmethod
    def forward(ctx, logits, target, weight, *config):
        grad = logits.detach()
        loss, z_loss = cross_entropy_(grad, target, weight, *config)
        ctx.save_for_backward(grad)
        ctx.scale_spec = _ce_spec_of(logits, target, weight, *config)
        ctx.per_row = config[2] == "none"
        # (the gradient is over the caller's logits by design: scaled there)
        ctx.grads_dropped = True
        _extra_outputs(ctx, z_loss)
        return loss, z_loss

    @staticmethod
    @_one_output_backward
    def backward(ctx, dloss, _dz):
        (grad,) = ctx.saved_tensors
        return (_scaled_in_place(grad, dloss, ctx.scale_spec, ctx),) + (None,) * 8


# --- fused linear cross-entropy --------------------------------------------
#
# With reduction "mean" or "sum" the forward forms the gradients too (one
# chunk loop), which the backward scales. With reduction "none" each
# token's incoming gradient is known only in the backward: the forward
# runs the chunk loop for the losses, the backward runs it again with those
# gradients (the logits of each chunk recomputed: one more logits matmul).
# A bias's gradient comes with the others (the column sums of each chunk's
# G); the z-loss returned apart has none (Liger-Kernel's is for logging:
# its term is in the loss, and differentiated there).

def _flce_spec_of(hidden, weight, target, bias, class_weight, ignore_index, label_smoothing,
                  reduction, softcap, lse_square_scale, return_z_loss, dw_f32):
    """The fused linear cross-entropy's spec, built when called (a backward
    keeps it without keeping the tensors)."""
    v, h = weight.shape
    return functools.partial(_spec, specs.fused_linear_cross_entropy_spec, (
        v, h, hidden.dtype, target.dtype, ignore_index, label_smoothing, reduction, softcap,
        lse_square_scale, class_weight is not None, dw_f32, bias is not None, return_z_loss),
        hidden.device)


def _flce_run(hidden, weight, target, bias, class_weight, ignore_index, label_smoothing,
              reduction, softcap, lse_square_scale, return_z_loss, memory_budget, dw_f32,
              want_dx, want_dw, want_db, grad_loss=None):
    """chunked_loss over the kernels of the configuration: (loss, z_loss,
    dx, dW, db)."""
    v, h = weight.shape
    spec = _flce_spec_of(hidden, weight, target, bias, class_weight, ignore_index,
                         label_smoothing, reduction, softcap, lse_square_scale, return_z_loss,
                         dw_f32)()
    x = _rows(hidden)
    plan = plan_chunks(x.shape[0], v, spec.dtype, memory_budget)
    return chunked_loss(
        bundles.loss_plan_kernels(spec), x, weight.contiguous(),
        target.reshape(-1).contiguous(),
        class_weight.contiguous() if class_weight is not None else None,
        plan["chunk_tokens"], reduction == "mean", ignore_index, want_dx, want_dw, dw_f32,
        grad_loss, per_token=reduction == "none",
        bias=bias.contiguous() if bias is not None else None, want_db=want_db)


def _flce_loss_shape(target, reduction):
    return target.shape if reduction == "none" else ()


@_custom_op("liger::fused_linear_cross_entropy", mutates_args=())
def fused_linear_cross_entropy(
        hidden: Tensor, weight: Tensor, target: Tensor, bias: Optional[Tensor],
        class_weight: Optional[Tensor], ignore_index: int, label_smoothing: float,
        reduction: str, softcap: float, lse_square_scale: float, return_z_loss: bool,
        memory_budget: int, dw_f32: bool, want_dx: bool, want_dw: bool,
        want_db: bool) -> Tuple[Tensor, Tensor, Tensor, Tensor, Tensor]:
    # Per token, the gradients wait for the backward.
    none = reduction == "none"
    want_db = want_db and bias is not None
    want_dx, want_dw, want_db = (want and not none for want in (want_dx, want_dw, want_db))
    loss, z_loss, dx, dw, db = _flce_run(
        hidden, weight, target, bias, class_weight, ignore_index, label_smoothing, reduction,
        softcap, lse_square_scale, return_z_loss, memory_budget, dw_f32, want_dx, want_dw,
        want_db)
    shape = _flce_loss_shape(target, reduction)
    return (loss.view(shape),
            z_loss.view(shape) if return_z_loss else hidden.new_empty(0, dtype=F32),
            dx.view(hidden.shape) if want_dx else hidden.new_empty(0),
            dw if want_dw else weight.new_empty(0),
            db if want_db else weight.new_empty(0))


@fused_linear_cross_entropy.register_fake
def _(hidden, weight, target, bias, class_weight, ignore_index, label_smoothing, reduction,
      softcap, lse_square_scale, return_z_loss, memory_budget, dw_f32, want_dx, want_dw,
      want_db):
    none = reduction == "none"
    shape = _flce_loss_shape(target, reduction)
    return (hidden.new_empty(shape, dtype=F32),
            hidden.new_empty(shape if return_z_loss else 0, dtype=F32),
            _like(hidden) if want_dx and not none else hidden.new_empty(0),
            _like(weight) if want_dw and not none else weight.new_empty(0),
            _like(bias) if want_db and bias is not None and not none else weight.new_empty(0))


@_custom_op("liger::fused_linear_cross_entropy_backward", mutates_args=())
def fused_linear_cross_entropy_backward(
        hidden: Tensor, weight: Tensor, target: Tensor, bias: Optional[Tensor],
        class_weight: Optional[Tensor], dloss: Tensor, ignore_index: int,
        label_smoothing: float, softcap: float, lse_square_scale: float, return_z_loss: bool,
        memory_budget: int, dw_f32: bool, want_dx: bool, want_dw: bool,
        want_db: bool) -> Tuple[Tensor, Tensor, Tensor]:
    """dhidden, dweight and dbias of the per-token losses (reduction
    "none") for the incoming gradient `dloss` (one value per token, in the
    target's shape or [N]): the chunk loop again, each chunk's logits
    recomputed, with the forward's kernels (its spec: `return_z_loss` as
    the forward's, the z-loss computed again and dropped), so that the
    bundle the forward ran serves the backward."""
    want_db = want_db and bias is not None
    _, _, dx, dw, db = _flce_run(
        hidden, weight, target, bias, class_weight, ignore_index, label_smoothing, "none",
        softcap, lse_square_scale, return_z_loss, memory_budget, dw_f32, want_dx, want_dw,
        want_db, grad_loss=dloss.reshape(-1))
    return (dx.view(hidden.shape) if want_dx else hidden.new_empty(0),
            dw if want_dw else weight.new_empty(0),
            db if want_db else weight.new_empty(0))


@fused_linear_cross_entropy_backward.register_fake
def _(hidden, weight, target, bias, class_weight, dloss, ignore_index, label_smoothing, softcap,
      lse_square_scale, return_z_loss, memory_budget, dw_f32, want_dx, want_dw, want_db):
    return (_like(hidden) if want_dx else hidden.new_empty(0),
            _like(weight) if want_dw else weight.new_empty(0),
            _like(bias) if want_db and bias is not None else weight.new_empty(0))


def _save_grads(ctx, inputs, output):
    """The fused linear JSD, whose forward formed the student's dx and dW
    (its last two inputs say which): saved for the backward to scale with
    the student's @scale."""
    _, dx, dw = output
    ctx.want = tuple(inputs[-2:])
    student_input, student_weight, dw_f32 = inputs[0], inputs[1], inputs[9]
    ctx.scale_spec = _matmul_spec_of(*student_weight.shape, student_input.dtype, dw_f32,
                                     student_input.device)
    ctx.save_for_backward(dx, dw)
    _extra_outputs(ctx, dx, dw)


def _scaled_grads(ctx, dloss):
    dx, dw = ctx.saved_tensors
    want_dx, want_dw = ctx.want
    return tuple(_scaled_in_place(g, dloss, ctx.scale_spec, ctx) if want else None
                 for g, want in ((dx, want_dx), (dw, want_dw)))


def _flce_setup(ctx, inputs, output):
    hidden, weight, target, bias, class_weight, ignore_index, label_smoothing, reduction, \
        softcap, lse_square_scale, return_z_loss, memory_budget, dw_f32, want_dx, want_dw, \
        want_db = inputs
    ctx.per_token = reduction == "none"
    ctx.want = (want_dx, want_dw, want_db and bias is not None)
    _extra_outputs(ctx, *output[1:])
    if not ctx.per_token:
        # The gradients formed in the forward, for the backward to scale.
        ctx.save_for_backward(*output[2:])
        ctx.scale_spec = _flce_spec_of(hidden, weight, target, bias, class_weight,
                                       ignore_index, label_smoothing, reduction, softcap,
                                       lse_square_scale, return_z_loss, dw_f32)
        return
    # Per token: the backward runs the chunks again over the inputs.
    ctx.save_for_backward(hidden, weight, target, bias, class_weight)
    ctx.config = (ignore_index, label_smoothing, softcap, lse_square_scale, return_z_loss,
                  memory_budget, dw_f32)


@_one_output_backward
def _flce_grad(ctx, dloss, _dz, _ddx, _ddw, _ddb):
    if ctx.per_token:
        hidden, weight, target, bias, class_weight = ctx.saved_tensors
        grads = fused_linear_cross_entropy_backward(
            hidden, weight, target, bias, class_weight, dloss, *ctx.config, *ctx.want)
    else:
        # dx and dW scaled over themselves (@scale: rows of the hidden
        # size), the bias's [V] by a product.
        dx, dw, db = ctx.saved_tensors
        _differentiated_once(db, dloss)  # (also where only the bias is differentiated)
        grads = tuple(f(g, dloss) if want else g for f, g, want in zip(
            (functools.partial(_scaled_in_place, scale_spec=ctx.scale_spec, ctx=ctx),) * 2 + (_product,),
            (dx, dw, db), ctx.want))
    dx, dw, db = (g if want else None for g, want in zip(grads, ctx.want))
    return (dx, dw, None, db) + (None,) * 12


fused_linear_cross_entropy.register_autograd(_flce_grad, setup_context=_flce_setup)


# --- KL divergence, JSD ----------------------------------------------------
#
# Their kernels give the loss per token (per element for a KL divergence
# with reduction "none"); the operators add the tokens up and divide.
# Where a gradient is wanted the forward writes it too, in the same kernel
# (as cross_entropy does), for a unit incoming gradient, which the backward
# scales; a KL divergence with reduction "none" (an incoming gradient per
# element) passes it to its gradient kernel in the backward instead.

def _kl_div_spec_of(x, log_target, eps, reduction):
    """kl_div's spec over rows like x, built when called (a backward keeps
    it without keeping x)."""
    return functools.partial(_spec, specs.kl_div_spec, (
        x.shape[-1], x.dtype, log_target, eps, reduction == "none"), x.device)


def _kl_div_spec(x, log_target, eps, reduction):
    return _kl_div_spec_of(x, log_target, eps, reduction)()


def _kl_div_kernels(x, log_target, eps, reduction):
    return bundles.kernels(_kl_div_spec(x, log_target, eps, reduction))


def _kl_div_divisor(reduction, shape):
    """What a KL divergence's total is divided by (torch.nn.KLDivLoss's)."""
    rows, vocab = shape
    return {"sum": 1, "mean": rows * vocab, "batchmean": rows}[reduction]


def _kl_div_grad_in_forward(reduction, want_grad, dtype):
    """Whether the forward forms the gradient, -target / divisor for a unit
    incoming gradient: not for reduction "none" (a gradient per element
    comes in), nor in f16, where -target / (tokens · vocab) underflows
    before a loss scaler's factor could lift it (the backward kernel
    forms -target · dloss / divisor in f32 and rounds once)."""
    return want_grad and reduction != "none" and dtype != torch.float16


@_custom_op("liger::kl_div", mutates_args=())
def kl_div(input: Tensor, target: Tensor, reduction: str, log_target: bool,
           eps: float, want_grad: bool) -> Tuple[Tensor, Tensor]:
    x, t = input.contiguous(), target.contiguous()
    if _kl_div_grad_in_forward(reduction, want_grad, input.dtype):
        # The loss per token and, in the same kernel, the gradient of a
        # unit incoming gradient (each token's share of it: 1 / divisor).
        share = torch.full((input.shape[0],), 1.0 / _kl_div_divisor(reduction, input.shape),
                           dtype=F32, device=input.device)
        bundle = bundles.load(_kl_div_spec(input, log_target, eps, reduction))
        loss, grad = bundle["fwd_grad_rowwise_0"](x, t, share)
    else:
        fwd, _ = _kl_div_kernels(input, log_target, eps, reduction)
        loss, grad = fwd(x, t), input.new_empty(0)
    if reduction == "none":
        return loss, grad
    return loss.sum() / _kl_div_divisor(reduction, input.shape), grad


@kl_div.register_fake
def _(input, target, reduction, log_target, eps, want_grad):
    loss = input.new_empty(input.shape if reduction == "none" else (), dtype=F32)
    return loss, (_like(input) if _kl_div_grad_in_forward(reduction, want_grad, input.dtype)
                  else input.new_empty(0))


@_custom_op("liger::kl_div_backward", mutates_args=())
def kl_div_backward(target: Tensor, dloss: Tensor, reduction: str, log_target: bool,
                    eps: float) -> Tensor:
    _, bwd = _kl_div_kernels(target, log_target, eps, reduction)
    if reduction == "none":
        grad = dloss.to(F32).contiguous()
    else:  # each token's share of the incoming gradient
        grad = (dloss.to(F32) / _kl_div_divisor(reduction, target.shape)).expand(
            target.shape[0]).contiguous()
    return bwd(target.contiguous(), grad)


@kl_div_backward.register_fake
def _(target, dloss, reduction, log_target, eps):
    return _like(target)


def _kl_div_setup(ctx, inputs, output):
    reduction, want_grad = inputs[2], inputs[-1]
    ctx.in_forward = _kl_div_grad_in_forward(reduction, want_grad, inputs[0].dtype)
    ctx.linear_in_input = True  # (−target over the divisor: a create_graph backward is exact)
    _extra_outputs(ctx, output[1])
    # The gradient formed in the forward, or the target to form it from
    # (also where want_grad was False and a gradient is asked for anyway).
    ctx.save_for_backward(output[1] if ctx.in_forward else inputs[1])
    ctx.config = tuple(inputs[2:-1])
    reduction, log_target, eps = ctx.config
    ctx.scale_spec = _kl_div_spec_of(inputs[0], log_target, eps, reduction)


@_one_output_backward
def _kl_div_grad(ctx, dloss, _dgrad):
    (saved,) = ctx.saved_tensors
    if ctx.in_forward:
        grad = _scaled_in_place(saved, dloss, ctx.scale_spec, ctx)
    else:
        grad = kl_div_backward(saved, dloss, *ctx.config)
    return (grad,) + (None,) * 5


kl_div.register_autograd(_kl_div_grad, setup_context=_kl_div_setup)


def _jsd_spec_of(vocab, dtype, device, shift_labels, beta, ignore_index, temperature=None):
    """liger.jsd's spec for rows [..., vocab] of `dtype` (of log-
    probabilities, or with a `temperature` of logits), built when called."""
    return functools.partial(_spec, specs.jsd_spec, (
        vocab, dtype, beta, ignore_index, None if shift_labels is None else shift_labels.dtype,
        temperature), device)


def _jsd_bundle(vocab, dtype, device, shift_labels, beta, ignore_index, temperature=None):
    """liger.jsd's kernels (_jsd_spec_of)."""
    return bundles.load(_jsd_spec_of(vocab, dtype, device, shift_labels, beta, ignore_index,
                                     temperature)())


def _jsd_share(rows, shift_labels, ignore_index, device):
    """Each token's share of a JSD's unit incoming gradient, [rows] f32: 1
    over the tokens the JSD averages over, at least 1 (a loss over none is
    0, as Liger-Kernel gives). A tensor, so nothing waits for the device,
    formed in one launch without labels and four with them (ne, sum, clamp,
    the reciprocal written over the rows); its first element is the mean's
    factor."""
    if shift_labels is None:
        return torch.full((rows,), 1.0 / max(rows, 1), dtype=F32, device=device)
    counted = (shift_labels != ignore_index).sum().clamp_(min=1)
    return torch.reciprocal(counted.expand(rows), out=torch.empty(rows, dtype=F32,
                                                                  device=device))


def _jsd_mean(total, share, dtype):
    """The JSD's mean: `total`, the sum of the tokens' losses (0-dim f32),
    times the share, rounded once to `dtype`; 0 over no token."""
    out = torch.empty((), dtype=dtype, device=total.device)
    if share.numel() == 0:
        return out.zero_()
    return torch.mul(total, share[0], out=out)


@_custom_op("liger::jsd", mutates_args=())
def jsd(input: Tensor, target: Tensor, shift_labels: Optional[Tensor], beta: float,
        ignore_index: int, want_grad: bool) -> Tuple[Tensor, Tensor]:
    bundle = _jsd_bundle(input.shape[-1], input.dtype, input.device, shift_labels, beta,
                         ignore_index)
    share = _jsd_share(input.shape[0], shift_labels, ignore_index, input.device)
    labels = [] if shift_labels is None else [shift_labels.contiguous()]
    x, y = input.contiguous(), target.contiguous()
    if want_grad:
        # The loss per token and, in the same kernel, the gradient of a
        # unit incoming gradient (each token's share of it).
        per_token, grad = bundle["fwd_rowwise_0"](x, y, share, *labels)
    else:
        per_token, grad = bundle["loss_rowwise_0"](x, y, *labels), input.new_empty(0)
    return _jsd_mean(per_token.sum(), share, input.dtype), grad


@jsd.register_fake
def _(input, target, shift_labels, beta, ignore_index, want_grad):
    return input.new_empty(()), _like(input) if want_grad else input.new_empty(0)


def _jsd_setup(ctx, inputs, output):
    ctx.save_for_backward(output[1])
    ctx.want_grad = inputs[-1]
    x, _, shift_labels, beta, ignore_index, _ = inputs
    ctx.scale_spec = _jsd_spec_of(x.shape[-1], x.dtype, x.device, shift_labels, beta,
                                  ignore_index)
    _extra_outputs(ctx, output[1])


@_one_output_backward
def _jsd_grad(ctx, dloss, _dgrad):
    (grad,) = ctx.saved_tensors
    return (_scaled_in_place(grad, dloss, ctx.scale_spec, ctx) if ctx.want_grad else None,) + \
        (None,) * 5


jsd.register_autograd(_jsd_grad, setup_context=_jsd_setup)


# --- fused linear JSD ------------------------------------------------------
#
# The student's and the teacher's lm_heads chunk by chunk, as the fused
# linear cross-entropy's: their logits and the student's gradient products
# are the matmul kernels of that loss's plan (of the student's and the
# teacher's [V, H]), the JSD the row kernels of liger.jsd over the logits
# themselves (at the temperature: log-softmax in the kernel, the gradient
# written over the student's logits). The forward forms the student's gradients, which the
# backward scales; the teacher gets none.

def _matmul_spec_of(v, h, dtype, dw_f32, device):
    """The fused loss's spec for an lm_head [v, h], built when called."""
    return functools.partial(_spec, specs.fused_linear_cross_entropy_spec, (
        v, h, dtype, "i64", -100, 0.0, "mean", None, 0.0, False, dw_f32), device)


def _matmul_kernels(v, h, dtype, dw_f32, device):
    """The chunk kernels of the fused loss's plan for an lm_head [v, h]."""
    return bundles.loss_plan_kernels(_matmul_spec_of(v, h, dtype, dw_f32, device)())


@_custom_op("liger::fused_linear_jsd", mutates_args=())
def fused_linear_jsd(student_input: Tensor, student_weight: Tensor, teacher_input: Tensor,
                     teacher_weight: Tensor, shift_labels: Optional[Tensor], jsd_beta: float,
                     ignore_index: int, temperature: float, memory_budget: int, dw_f32: bool,
                     want_dx: bool, want_dw: bool) -> Tuple[Tensor, Tensor, Tensor]:
    v, hs = student_weight.shape
    dtype = student_input.dtype
    device = student_input.device
    student = _matmul_kernels(v, hs, dtype, dw_f32, device)
    teacher = _matmul_kernels(v, teacher_weight.shape[1], dtype, False, device)["logits"]
    labels = None if shift_labels is None else shift_labels.contiguous()
    jsd_kernels = _jsd_bundle(v, dtype, device, labels, jsd_beta, ignore_index, temperature)
    share = _jsd_share(student_input.shape[0], labels, ignore_index, device)
    plan = plan_jsd_chunks(student_input.shape[0], v, dtype, memory_budget)
    total, dx, dw = chunked_jsd(
        student, teacher, jsd_kernels, student_input.contiguous(), student_weight.contiguous(),
        teacher_input.contiguous(), teacher_weight.contiguous(), labels, plan["chunk_tokens"],
        share, want_dx, want_dw, dw_f32)
    return (_jsd_mean(total, share, F32), dx if want_dx else student_input.new_empty(0),
            dw if want_dw else student_weight.new_empty(0))


@fused_linear_jsd.register_fake
def _(student_input, student_weight, teacher_input, teacher_weight, shift_labels, jsd_beta,
      ignore_index, temperature, memory_budget, dw_f32, want_dx, want_dw):
    return (student_input.new_empty((), dtype=F32),
            _like(student_input) if want_dx else student_input.new_empty(0),
            _like(student_weight) if want_dw else student_weight.new_empty(0))


@_one_output_backward
def _fljsd_grad(ctx, dloss, _ddx, _ddw):
    return _scaled_grads(ctx, dloss) + (None,) * 10


fused_linear_jsd.register_autograd(_fljsd_grad, setup_context=_save_grads)


# --- LoRA projection ---------------------------------------------------------
#
# PEFT's LoRA layer, x·Wᵀ + b + (x·Aᵀ)·Bᵀ·scale. The forward is the matmul
# template's LoRA kernel where the configuration has one (the spec's rules:
# bf16/f16, rank 16, 32 or 64, aligned sizes) on a device liger has kernels
# for; otherwise PyTorch's ops in PEFT's order, so that a call is the layer
# it replaces. That second path is the torch.compile backend's: it puts this
# operator in place of every PEFT LoRA layer it recognises, and one that no
# fusion group takes runs here (liger.ops.lora_linear refuses those
# configurations before calling, liger.transformers keeps PEFT's forward,
# warned). The backward's dx is the template's kernel too: dy·W + s·(dy·B)·A
# is the LoRA projection of dy with Wᵀ, Bᵀ and Aᵀ (the spec's @bwd, W read
# MN-major), and where its kernel hands dy·B from column tile to column
# tile (the products workspace) that product is dA's too; the forward's
# kernel hands x·Aᵀ the same way, and where the call keeps it (keep_mid:
# autograd records it and B trains) that is dB's. dW, dA, dB and the
# bias's gradient are PyTorch's matmuls, the scale on the rank-r products.

_LORA_KERNELS = {}


def _template_kernels(kernels, t, make, args, loader):
    """The kernels `loader(make(*args))` of a matmul-template op's
    configuration (args: its sizes, dtypes and attributes; t's device gives
    the target), remembered in `kernels`; None where the configuration or
    the device has none (a spec that fails to load raises)."""
    try:  # (a machine's reason, not cached: LIGER_OPS_CPU_REFERENCE may change)
        target = bundles.device_target(t.device)
    except LigerError:
        return None
    key = args + (target, t.device)
    if key not in kernels:
        try:
            spec = make(*args, target=target)
        except LigerError:
            spec = None
        kernels[key] = None if spec is None else loader(spec)
    return kernels[key]


def _lora_kernels(x, weight, has_bias, lora_a, lora_b, scale, *others):
    """The LoRA kernels (forward, backward's dx) of the call's
    configuration, or None (one dtype for every operand, `others` too: the
    spec's rules). The backward's is None where the template left it
    uncompiled."""
    dtypes = {t.dtype for t in (x, weight, lora_a, lora_b) + others}
    if len(dtypes) != 1:
        return None
    return _template_kernels(_LORA_KERNELS, x, specs.lora_linear_spec, (
        weight.shape[1], weight.shape[0], lora_a.shape[0], str(x.dtype), scale,
        has_bias), bundles.matmul_kernels)


def _lora_pytorch(x, weight, bias, lora_a, lora_b, scale):
    """(y, x · Aᵀ): PEFT's LoRA layer in PyTorch's ops, in its order (the
    base layer, then the adapter's product scaled), and the rank-r
    product it formed."""
    mid = F.linear(x, lora_a)
    return F.linear(x, weight, bias) + F.linear(mid, lora_b) * scale, mid


def lora_reference(x, weight, bias, lora_a, lora_b, scale):
    """PEFT's LoRA layer in PyTorch's ops, in its order."""
    return _lora_pytorch(x, weight, bias, lora_a, lora_b, scale)[0]


@_custom_op("liger::lora_linear", mutates_args=())
def lora_linear(x: Tensor, weight: Tensor, bias: Optional[Tensor], lora_a: Tensor,
                lora_b: Tensor, scale: float, keep_mid: bool = False) -> Tuple[Tensor, Tensor]:
    """(y, mid): the LoRA projection y and, where keep_mid, mid = x · Aᵀ
    [..., r] in x's dtype (what dB is formed from: the backward then does
    not recompute it), else an empty tensor. The kernel's products
    workspace holds x · Aᵀ in f32 where it hands the product between column
    tiles; mid is that, rounded (else PyTorch forms it)."""
    kernels = _lora_kernels(x, weight, bias is not None, lora_a, lora_b, scale,
                            *(() if bias is None else (bias,)))
    if kernels is None or x.numel() == 0:  # (no rows: no launch)
        y, mid = _lora_pytorch(x, weight, bias, lora_a, lora_b, scale)
        return y, (mid if keep_mid else x.new_empty(0))
    args = [_rows(x), weight.contiguous(), lora_a.contiguous(), lora_b.contiguous()]
    args += [] if bias is None else [bias.contiguous()]
    kernel = kernels[0]
    spaces = ([torch.empty(shape, dtype=F32, device=x.device)
               for shape in kernel.workspace_shapes(args)] if keep_mid else None)
    y = kernel(*args, workspaces=spaces).view(x.shape[:-1] + (weight.shape[0],))
    if not keep_mid:
        return y, x.new_empty(0)
    mid = spaces[0].to(x.dtype) if spaces else F.linear(args[0], lora_a)
    return y, mid.view(x.shape[:-1] + (lora_a.shape[0],))


@lora_linear.register_fake
def _(x, weight, bias, lora_a, lora_b, scale, keep_mid=False):
    return (x.new_empty(x.shape[:-1] + (weight.shape[0],)),
            x.new_empty(x.shape[:-1] + (lora_a.shape[0],)) if keep_mid else x.new_empty(0))


def lora_keeps_mid(lora_b):
    """Whether a call of lora_linear keeps x · Aᵀ for its backward: where
    autograd records it and B takes a gradient (dB is formed from it)."""
    return torch.is_grad_enabled() and lora_b.requires_grad


def _lora_setup(ctx, inputs, output):
    x, weight, bias, lora_a, lora_b, scale = inputs[:6]
    keep_mid = len(inputs) > 6 and inputs[6]
    ctx.save_for_backward(x, weight, lora_a, lora_b, output[1] if keep_mid else None)
    _extra_outputs(ctx, output[1])
    ctx.scale = scale
    ctx.has_bias = bias is not None


def _flat(t):
    return t.reshape(-1, t.shape[-1])


def _lora_dmid(dy, lora_b, scale):
    """dmid = scale · dy · B [..., r], the gradient of x·Aᵀ, in PyTorch's
    matmul (the scale on the rank-r product, never on a [tokens, out]
    pass)."""
    return dy.matmul(lora_b).mul_(scale)


def lora_grad_reference(dy, weight, lora_a, lora_b, scale):
    """(dx, dmid) in PyTorch's matmuls: dmid (_lora_dmid) and dx = dy · W +
    dmid · A, the rank-r product formed first so that cuBLAS adds dy · W to
    it in its epilogue (addmm's beta = 1)."""
    dmid = _lora_dmid(dy, lora_b, scale)
    dx = _flat(dmid).matmul(lora_a).addmm_(_flat(dy), weight)
    return dx.view(dy.shape[:-1] + (weight.shape[1],)), dmid


@_custom_op("liger::lora_linear_backward", mutates_args=())
def lora_linear_backward(dy: Tensor, weight: Tensor, lora_a: Tensor, lora_b: Tensor,
                         scale: float, has_bias: bool) -> Tuple[Tensor, Tensor]:
    """(dx, dmid) of the LoRA projection for its output's gradient dy:
    dx = dy · W + scale · (dy · B) · A by the backward's kernel of the
    forward's configuration (has_bias: whether the forward had a bias, its
    spec holding this kernel), dmid = scale · dy · B [..., r]."""
    kernels = _lora_kernels(dy, weight, has_bias, lora_a, lora_b, scale)
    kernel = kernels and kernels[1]
    if kernel is None or dy.numel() == 0:
        return lora_grad_reference(dy, weight, lora_a, lora_b, scale)
    inputs = [weight.contiguous(), _rows(dy), lora_b.t().contiguous(), lora_a.t().contiguous()]
    spaces = [torch.empty(shape, dtype=F32, device=dy.device)
              for shape in kernel.workspace_shapes(inputs)]
    dx = kernel(*inputs, workspaces=spaces)
    # The kernel's products workspace holds dy · B in f32, where it hands
    # the product between column tiles (scaled and rounded by one kernel);
    # else PyTorch forms it.
    dmid = (torch.mul(spaces[0], scale, out=spaces[0].new_empty(spaces[0].shape, dtype=dy.dtype))
            if spaces else _lora_dmid(_flat(dy), lora_b, scale))
    rows = dy.shape[:-1]
    return dx.view(rows + (weight.shape[1],)), dmid.view(rows + (lora_a.shape[0],))


@lora_linear_backward.register_fake
def _(dy, weight, lora_a, lora_b, scale, has_bias):
    rows = dy.shape[:-1]
    return dy.new_empty(rows + (weight.shape[1],)), dy.new_empty(rows + (lora_a.shape[0],))


@_one_output_backward
def _lora_grad(ctx, dy, _dmid):
    x, weight, lora_a, lora_b, mid = ctx.saved_tensors
    need = ctx.needs_input_grad
    if need[0] and torch.is_grad_enabled():
        # A backward that is itself differentiated (create_graph=True):
        # PyTorch's form, whose ops autograd records.
        dx, dmid = lora_grad_reference(dy, weight, lora_a, lora_b, ctx.scale)
    elif need[0]:
        dx, dmid = call(lora_linear_backward, dy, weight, lora_a, lora_b, ctx.scale,
                        ctx.has_bias)
    else:
        dx, dmid = None, _lora_dmid(dy, lora_b, ctx.scale)
    dw = _flat(dy).t().matmul(_flat(x)) if need[1] else None
    db = _flat(dy).sum(0) if ctx.has_bias and need[2] else None
    da = _flat(dmid).t().matmul(_flat(x)) if need[3] else None
    if need[4] and (mid is None or torch.is_grad_enabled()):
        # x·Aᵀ recomputed where the forward did not keep it, or recorded
        # (a differentiated backward): [..., r]
        mid = F.linear(x, lora_a)
    dlb = _flat(dy).t().matmul(_flat(mid)) * ctx.scale if need[4] else None
    return dx, dw, db, da, dlb, None, None


_autograd(lora_linear, _lora_grad, _lora_setup)
_no_autograd(lora_linear_backward)


# --- gated MLP ---------------------------------------------------------------
#
# down(act(x·W_gateᵀ) * (x·W_upᵀ)), act SiLU (swiglu) or GELU (geglu). Where
# the configuration has kernels (liger.specs.GatedMLPSpec's rules) on a device
# liger has kernels for: the forward is the matmul template's gate/up pair
# with the activation in its epilogue (one kernel, keeping gate and up for the
# backward) and the down projection; the backward is the matmul template's
# dh = dy·W_down with the activation's gradient in its epilogue (one kernel:
# dgate and dup, dh never stored), then the weight gradients and dx as GEMMs.
# Otherwise PyTorch's ops, as Hugging Face's MLP computes them (liger.ops.
# gated_mlp refuses those configurations before calling). Saved for the
# backward: x, gate, up and h = act(gate) * up (eager PyTorch saves act(gate)
# too).

_GATED_MLP_KERNELS = {}


def _gated_mlp_pair(spec):
    kernels = bundles.matmul_kernels(spec)
    if kernels[1] is None:
        raise LigerError("the kernels of %s (target %s) have no backward (bwd_matmul_0)"
                         % (spec, spec.target))
    return kernels


def _gated_mlp_kernels(t, hidden, intermediate, activation, approximate):
    """The (forward, backward) kernels of the configuration (the sizes, t's
    dtype and device), or None."""
    return _template_kernels(_GATED_MLP_KERNELS, t, specs.gated_mlp_spec, (
        hidden, intermediate, str(t.dtype), activation, approximate), _gated_mlp_pair)


def _gelu_tanh_grad(g):
    c = 0.7978845608028654  # sqrt(2 / pi)
    t = torch.tanh(c * (g + 0.044715 * g ** 3))
    return 0.5 * (1 + t) + 0.5 * g * (1 - t * t) * c * (1 + 3 * 0.044715 * g * g)


def gated_reference(gate, up, activation, approximate):
    """act(gate) * up in PyTorch's ops (Hugging Face's MLP)."""
    if activation == "swiglu":
        return F.silu(gate) * up
    return F.gelu(gate, approximate=approximate) * up


def gated_grad_reference(dh, gate, up, activation, approximate):
    """(dgate, dup) of act(gate) * up for the incoming gradient dh."""
    if activation == "swiglu":
        s = torch.sigmoid(gate)
        return dh * up * s * (1 + gate * (1 - s)), dh * gate * s
    if approximate == "tanh":
        return dh * up * _gelu_tanh_grad(gate), dh * F.gelu(gate, approximate="tanh")
    cdf = 0.5 * (1 + torch.erf(gate * 0.7071067811865476))
    pdf = torch.exp(-0.5 * gate * gate) * 0.3989422804014327
    return dh * up * (cdf + gate * pdf), dh * gate * cdf


@_custom_op("liger::gated_mlp", mutates_args=())
def gated_mlp(x: Tensor, gate_weight: Tensor, up_weight: Tensor, down_weight: Tensor,
              activation: str, approximate: str) -> Tuple[Tensor, Tensor, Tensor, Tensor]:
    """(y, h, gate, up): y the MLP's output, the others what its backward
    reads."""
    width = gate_weight.shape[0]
    kernels = _gated_mlp_kernels(x, x.shape[-1], width, activation, approximate)
    if kernels is None or x.numel() == 0:  # (no rows: no launch)
        gate, up = F.linear(x, gate_weight), F.linear(x, up_weight)
        h = gated_reference(gate, up, activation, approximate)
        return F.linear(h, down_weight), h, gate, up
    gate, up, h = kernels[0](_rows(x), gate_weight.contiguous(), up_weight.contiguous())
    y = F.linear(h, down_weight)
    return _shaped(y, x), _shaped(h, x), _shaped(gate, x), _shaped(up, x)


@gated_mlp.register_fake
def _(x, gate_weight, up_weight, down_weight, activation, approximate):
    inner = x.new_empty(x.shape[:-1] + (gate_weight.shape[0],))
    return x.new_empty(x.shape[:-1] + (down_weight.shape[0],)), inner, _like(inner), \
        _like(inner)


@_custom_op("liger::gated_mlp_backward", mutates_args=())
def gated_mlp_backward(dy: Tensor, down_weight: Tensor, gate: Tensor, up: Tensor,
                       activation: str, approximate: str) -> Tuple[Tensor, Tensor]:
    """(dgate, dup) for the MLP's incoming gradient dy: dh = dy·W_down and
    the activation's gradient, one kernel where the configuration has one."""
    kernels = _gated_mlp_kernels(dy, dy.shape[-1], gate.shape[-1], activation, approximate)
    if kernels is None or dy.numel() == 0:
        return gated_grad_reference(dy.matmul(down_weight), gate, up, activation, approximate)
    dgate, dup = kernels[1](_rows(dy), down_weight.contiguous(), _rows(gate), _rows(up))
    return _shaped(dgate, gate), _shaped(dup, up)


@gated_mlp_backward.register_fake
def _(dy, down_weight, gate, up, activation, approximate):
    return _like(gate), _like(up)


def _gated_mlp_setup(ctx, inputs, output):
    x, gate_weight, up_weight, down_weight, activation, approximate = inputs
    _, h, gate, up = output
    ctx.save_for_backward(x, gate_weight, up_weight, down_weight, h, gate, up)
    ctx.config = (activation, approximate)
    _extra_outputs(ctx, h, gate, up)


@_one_output_backward
def _gated_mlp_grad(ctx, dy, _dh, _dgate, _dup):
    x, gate_weight, up_weight, down_weight, h, gate, up = ctx.saved_tensors
    need = ctx.needs_input_grad
    dx = dgw = duw = None
    ddw = _flat(dy).t().matmul(_flat(h)) if need[3] else None
    if need[0] or need[1] or need[2]:
        # Fresh dgate and dup: a backward run twice (retain_graph, gradcheck)
        # reads the saved gate and up again. (The torch.compile backend
        # writes them over donated gate and up: frontend/inplace.py.)
        dgate, dup = call(gated_mlp_backward, dy, down_weight, gate, up, *ctx.config)
        dgate, dup = _flat(dgate), _flat(dup)
        if need[0]:
            dx = dgate.matmul(gate_weight).addmm_(dup, up_weight).view(x.shape)
        flat_x = _flat(x)
        dgw = dgate.t().matmul(flat_x) if need[1] else None
        duw = dup.t().matmul(flat_x) if need[2] else None
    return dx, dgw, duw, ddw, None, None


_autograd(gated_mlp, _gated_mlp_grad, _gated_mlp_setup)
_no_autograd(gated_mlp_backward)


# --- q/k projections with RoPE -------------------------------------------------
#
# rope(split(x·Wqᵀ + bq), split(x·Wkᵀ + bk), cos, sin) of x [B, T, H], the
# head split [B, T, Hq·D] -> [B, Hq, T, D] (Hugging Face's attention before
# its attention function). Where the configuration has a kernel (liger.specs.
# LinearRoPESpec's rules): one kernel of the matmul template, RoPE in its
# epilogue, q and k stored head-major; the backward is RoPE's gradient kernel
# (liger.rope_grad) on dq and dk, then dx, dWq, dWk (and the biases') as
# GEMMs. Otherwise PyTorch's ops, as Hugging Face computes them. Saved for the
# backward: x, the weights and the tables (the projections are not kept).

_LINEAR_ROPE_KERNELS = {}


def linear_rope_args(x, q_weight, k_weight, cos, bias):
    """The arguments of specs.linear_rope_spec (but the target) of a call:
    the sizes and the tables' batch as Python constants (under
    torch.compile the batch is a symbol; a size is specialized), `bias`:
    with biases."""
    d = int(cos.shape[-1])
    return (int(x.shape[-1]), int(q_weight.shape[0]) // d, int(k_weight.shape[0]) // d, d,
            str(x.dtype), bool(bias), bool(cos.shape[0] == 1))


def _linear_rope_operands_fit(x, q_weight, k_weight, cos, sin, q_bias, k_bias):
    """Whether a kernel could take the operands: one dtype, biases on both
    projections or neither."""
    operands = (x, q_weight, k_weight, cos, sin) + tuple(
        b for b in (q_bias, k_bias) if b is not None)
    return len({t.dtype for t in operands}) == 1 and (q_bias is None) == (k_bias is None)


def _linear_rope_kernel(x, q_weight, k_weight, cos, bias):
    """The kernel of the configuration (operands that fit), or None."""
    return _template_kernels(_LINEAR_ROPE_KERNELS, x, specs.linear_rope_spec,
                             linear_rope_args(x, q_weight, k_weight, cos, bias),
                             lambda spec: bundles.linear_rope_kernels(spec)[0])


def _rotate_half(t):
    half = t.shape[-1] // 2
    return torch.cat((-t[..., half:], t[..., :half]), dim=-1)


def rope_reference(q, k, cos, sin):
    """Hugging Face's apply_rotary_pos_emb of q [B, Hq, T, D] and k [B, Hk,
    T, D] with tables [1 or B, T, D]."""
    cos, sin = cos.unsqueeze(1), sin.unsqueeze(1)
    return q * cos + _rotate_half(q) * sin, k * cos + _rotate_half(k) * sin


def rope_grad_reference(dq, dk, cos, sin):
    """The gradient of rope_reference for the incoming dq and dk (RoPE is
    linear: its transpose, the rotation by -sin)."""
    cos, sin = cos.unsqueeze(1), sin.unsqueeze(1)
    return dq * cos - _rotate_half(dq * sin), dk * cos - _rotate_half(dk * sin)


def _head_split(y, x, d):
    """y [B, T, H·D] as [B, H, T, D] (a view)."""
    return y.view(x.shape[0], x.shape[1], y.shape[-1] // d, d).transpose(1, 2)


def linear_rope_reference(x, q_weight, k_weight, cos, sin, q_bias=None, k_bias=None):
    """The q/k projections, head splits and RoPE in PyTorch's ops."""
    d = cos.shape[-1]
    return rope_reference(_head_split(F.linear(x, q_weight, q_bias), x, d),
                          _head_split(F.linear(x, k_weight, k_bias), x, d), cos, sin)


@_custom_op("liger::linear_rope", mutates_args=())
def linear_rope(x: Tensor, q_weight: Tensor, k_weight: Tensor, cos: Tensor, sin: Tensor,
                q_bias: Optional[Tensor], k_bias: Optional[Tensor]) -> Tuple[Tensor, Tensor]:
    fit = _linear_rope_operands_fit(x, q_weight, k_weight, cos, sin, q_bias, k_bias)
    kernel = _linear_rope_kernel(x, q_weight, k_weight, cos, q_bias is not None) if fit else None
    if kernel is None or x.numel() == 0:  # (no rows: no launch)
        q, k = linear_rope_reference(x, q_weight, k_weight, cos, sin, q_bias, k_bias)
        return q.contiguous(), k.contiguous()
    args = [x.contiguous(), q_weight.contiguous()]
    args += [q_bias.contiguous()] if q_bias is not None else []
    args += [k_weight.contiguous()]
    args += [k_bias.contiguous()] if k_bias is not None else []
    return kernel(*args, cos.contiguous(), sin.contiguous())


@linear_rope.register_fake
def _(x, q_weight, k_weight, cos, sin, q_bias, k_bias):
    b, t, d = x.shape[0], x.shape[1], cos.shape[-1]
    # (Without a kernel, the rotation promotes to the tables' dtype.)
    dtype = torch.promote_types(torch.promote_types(x.dtype, cos.dtype), sin.dtype)
    return (x.new_empty(b, q_weight.shape[0] // d, t, d, dtype=dtype),
            x.new_empty(b, k_weight.shape[0] // d, t, d, dtype=dtype))


def _linear_rope_setup(ctx, inputs, output):
    x, q_weight, k_weight, cos, sin, q_bias, k_bias = inputs
    ctx.save_for_backward(x, q_weight, k_weight, cos, sin)
    ctx.biases = (q_bias is not None, k_bias is not None)
    ctx.fit = _linear_rope_operands_fit(x, q_weight, k_weight, cos, sin, q_bias, k_bias)


def _linear_rope_grad(ctx, dq, dk):
    x, q_weight, k_weight, cos, sin = ctx.saved_tensors
    need = ctx.needs_input_grad
    if not (need[0] or need[1] or need[2] or need[5] or need[6]):
        return (None,) * 7
    b, t, d = x.shape[0], x.shape[1], cos.shape[-1]
    if dq is None:
        dq = x.new_zeros(b, q_weight.shape[0] // d, t, d)
    if dk is None:
        dk = x.new_zeros(b, k_weight.shape[0] // d, t, d)
    # RoPE's gradient kernel where the forward had its kernel (the same
    # device and dtypes), else PyTorch's ops as the forward's.
    if x.numel() and ctx.fit and _linear_rope_kernel(x, q_weight, k_weight, cos, ctx.biases[0]):
        gq, gk = call(rope_backward, dq, dk, cos, sin)
    else:
        gq, gk = rope_grad_reference(dq, dk, cos, sin)
    # [B, H, T, D] -> [rows, H·D]: the projections' gradients.
    gq = gq.transpose(1, 2).reshape(b * t, q_weight.shape[0])
    gk = gk.transpose(1, 2).reshape(b * t, k_weight.shape[0])
    flat_x = _flat(x)
    dx = gq.matmul(q_weight).addmm_(gk, k_weight).view(x.shape) if need[0] else None
    dwq = gq.t().matmul(flat_x) if need[1] else None
    dwk = gk.t().matmul(flat_x) if need[2] else None
    dbq = gq.sum(0) if ctx.biases[0] and need[5] else None
    dbk = gk.sum(0) if ctx.biases[1] and need[6] else None
    return dx, dwq, dwk, None, None, dbq, dbk


_autograd(linear_rope, _linear_rope_grad, _linear_rope_setup)


# --- attention -----------------------------------------------------------------
#
# softmax(scale · q·kᵀ + mask)·v of q [B, Hq, T, D] over k and v [B, Hkv, S,
# D] (grouped-query heads), causal masks aligned bottom-right (query i sees
# the keys j <= i + S - T; with a sliding window W, only those > i + S - T -
# W). The forward is the attention template's kernel
# with the rows' log-sum-exp (liger.attention return_lse); the backward its
# kernel of liger.attention_grad from the saved output and lse (no
# probabilities recomputed but from the lse). Both come from one spec's
# module (liger.specs.AttentionSpec). liger.ops.attention runs PyTorch's
# scaled_dot_product_attention instead where the template does not take the
# call (attention_reference), so the operators run only what has kernels.


def _attention_args(q, k, causal, scale, window, softcap):
    return (q.shape[1], k.shape[1], q.shape[3], q.dtype, causal, scale, window, softcap)


def _attention_kernels(q, k, causal, scale, window, softcap):
    return bundles.attention_kernels(_spec(specs.attention_spec,
                                           _attention_args(q, k, causal, scale, window, softcap),
                                           q.device))


def attention_mask(t, s, causal, window, device, explicit=False):
    """liger.attention's mask as SDPA's boolean attn_mask [T, S] (True:
    kept), or None where no mask or (unless `explicit`) SDPA's own
    is_causal (T = S, no window) says it: causal aligned bottom-right
    (query i keeps the keys j <= i + S - T), a sliding window W also
    dropping the keys j <= i + S - T - W."""
    if not causal or (not explicit and not window and t in (s, 1)):
        return None
    mask = torch.ones(t, s, dtype=torch.bool, device=device).tril(s - t)
    if window:
        mask = mask.triu(s - t - window + 1)
    return mask


def attention_reference(q, k, v, causal, scale, window=0, softcap=0.0):
    """liger.attention by PyTorch's scaled_dot_product_attention (grouped
    heads through enable_gqa; scale 0 or None: its default, 1/sqrt(D)), the
    causal mask aligned bottom-right as liger's: SDPA's is_causal is
    aligned top-left, the same where T = S; a single query sees every key;
    otherwise (or with a sliding window) an explicit mask (attention_mask).
    (S < T under a causal mask leaves queries with no key:
    liger.ops.attention refuses it.) With a softcap, which SDPA does not
    take, softcapped_attention: the math as Hugging Face's eager attention
    computes it, with liger's mask."""
    t, s = q.shape[2], k.shape[2]
    if softcap:
        return softcapped_attention(q, k, v, attention_mask(t, s, causal, window, q.device, True),
                                    scale, softcap)
    mask = attention_mask(t, s, causal, window, q.device)
    return F.scaled_dot_product_attention(q, k, v, attn_mask=mask,
                                          is_causal=bool(causal and mask is None and t == s),
                                          scale=scale or None, enable_gqa=True)


def softcapped_attention(q, k, v, keep, scale, softcap, dropout=0.0):
    """softmax(c · tanh(scale · q · kᵀ / c) + mask) · v in PyTorch, for
    the calls liger's kernels do not take (SDPA has no softcap), as Hugging
    Face's eager attention computes it (Gemma 2's): grouped heads, `keep` a
    boolean mask broadcast over the scores [B, Hq, T, S] (True: attended)
    or None, `scale` 0 or None: 1/sqrt(D). The scores and their cap in q's
    dtype (the products accumulated in f32), the softmax in f32 rounded
    back to q's dtype (with `dropout` on it), its product with v: the
    precision and the memory of the attention the model runs without
    liger. A row whose keys are all masked averages them (the mask is the
    dtype's lowest number, not -inf), as the eager attention does for
    padding."""
    group = q.shape[1] // k.shape[1]
    k, v = k.repeat_interleave(group, dim=1), v.repeat_interleave(group, dim=1)
    scores = q.matmul(k.transpose(-1, -2)) * (scale or q.shape[-1] ** -0.5)
    scores = torch.tanh(scores / softcap) * softcap
    if keep is not None:  # (the lowest number of the dtype that f32 holds too)
        lowest = max(torch.finfo(scores.dtype).min, torch.finfo(F32).min)
        scores = scores.masked_fill(~keep, lowest)
    p = torch.softmax(scores, dim=-1, dtype=F32).to(q.dtype)
    if dropout:
        p = F.dropout(p, dropout)
    return p.matmul(v)


@_custom_op("liger::attention", mutates_args=())
def attention(q: Tensor, k: Tensor, v: Tensor, causal: bool,
              scale: float, window: int = 0, softcap: float = 0.0) -> Tuple[Tensor, Tensor]:
    """(out, lse): the attention's output and each query row's log-sum-exp
    of its scaled (softcapped), masked scores (f32 [B, Hq, T]), what the
    backward reads."""
    fwd, _ = _attention_kernels(q, k, causal, scale, window, softcap)
    return fwd(q.contiguous(), k.contiguous(), v.contiguous())


@attention.register_fake
def _(q, k, v, causal, scale, window=0, softcap=0.0):
    return _like(q), q.new_empty(q.shape[:3], dtype=F32)


@_custom_op("liger::attention_backward", mutates_args=())
def attention_backward(dout: Tensor, q: Tensor, k: Tensor, v: Tensor, out: Tensor, lse: Tensor,
                       causal: bool, scale: float, window: int = 0,
                       softcap: float = 0.0) -> Tuple[Tensor, Tensor, Tensor]:
    """(dq, dk, dv) for the incoming gradient of the output, from the
    forward's saved output and lse: one kernel (dk and dv of a key/value
    head summed over its query heads)."""
    spec = _spec(specs.attention_spec, _attention_args(q, k, causal, scale, window, softcap),
                 q.device)
    _, bwd = bundles.attention_kernels(spec)
    if bwd is None:
        raise LigerError("the attention kernels of %s (target %s) have no backward: %s" % (
            spec, spec.target, specs.attention_unsupported(spec.target, spec.dtype,
                                                           spec.head_dim, True)))
    return bwd(dout.contiguous(), q.contiguous(), k.contiguous(), v.contiguous(),
               out.contiguous(), lse.contiguous())


@attention_backward.register_fake
def _(dout, q, k, v, out, lse, causal, scale, window=0, softcap=0.0):
    return _like(q), _like(k), _like(v)


def _attention_setup(ctx, inputs, output):
    q, k, v, causal, scale = inputs[:5]
    # (window and softcap: their defaults, where not given)
    window = inputs[5] if len(inputs) > 5 else 0
    softcap = inputs[6] if len(inputs) > 6 else 0.0
    out, lse = output
    ctx.save_for_backward(q, k, v, out, lse)
    ctx.config = (causal, scale, window, softcap)
    ctx.inputs = len(inputs)
    _extra_outputs(ctx, lse)


@_one_output_backward
def _attention_grad(ctx, dout, _dlse):
    q, k, v, out, lse = ctx.saved_tensors
    dq, dk, dv = call(attention_backward, dout, q, k, v, out, lse, *ctx.config)
    return (dq, dk, dv) + (None,) * (ctx.inputs - 3)


_autograd(attention, _attention_grad, _attention_setup)
_no_autograd(attention_backward)
