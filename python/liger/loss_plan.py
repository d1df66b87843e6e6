"""The fused linear cross-entropy's chunk loop: the lm_head's loss and its
gradients over chunks of tokens, never holding the [tokens, vocab] logits.

`plan_chunks` says how many tokens a chunk takes under a memory budget;
`chunked_loss` runs one chunk's kernels (the logits, the loss with its
gradient over them, dx, dW) over every chunk. The kernels are those of a
bundle's loss plan (liger-plan-loss, the manifest's `plans`): compiled GPU
kernels (liger.runtime) or their reference functions on the CPU
(liger.reference.ReferenceBundle); liger.ops and liger.runtime.run_loss_plan
both run them through here.
"""

from .errors import LigerValueError
from .specs import BYTES, check_int, dtype_name


def plan_chunks(tokens, vocab, dtype, memory_budget=2 ** 29):
    """How fused_linear_cross_entropy chunks `tokens` under `memory_budget`
    bytes: the logits of one chunk [chunk_tokens, vocab] are its only buffer
    beyond the gradients it returns (dx, dW). Chunks of at least 128 tokens
    are whole 128-row matmul tiles. Returns dict(chunk_tokens, chunks,
    extra_bytes)."""
    row = check_int("vocab", vocab, 1) * BYTES[dtype_name(dtype)]
    memory_budget = check_int("memory_budget", memory_budget, 1)
    tokens = check_int("tokens", tokens, 0)
    chunk = memory_budget // row
    if chunk < 1:
        raise LigerValueError("memory_budget of %d bytes holds no row of logits (%d bytes)"
                              % (memory_budget, row))
    if chunk >= 128:
        chunk -= chunk % 128
    chunk = max(1, min(chunk, tokens))
    chunks = -(-tokens // chunk)
    return dict(chunk_tokens=chunk, chunks=chunks, extra_bytes=min(chunk, tokens) * row)


def per_token(ce):
    """Whether a loss plan's loss kernel `ce` (a runtime Kernel, or the
    reference's) gives each row's loss and takes each row's incoming
    gradient: the plan of a reduction "none" loss."""
    return len(ce.outputs[0]["shape"]) == 1


def chunked_loss(kernels, x, weight, target, class_weight, chunk, mean, ignore_index,
                 want_dx=True, want_dw=True, dw_f32=False, grad_loss=None, per_token=False):
    """The lm_head's loss and gradients chunk by chunk, with the kernels of
    one chunk (`kernels`: logits, ce, dx, dw0 unless dw_f32, dw; what
    liger.ops compiles and what liger-plan-loss writes into a bundle's
    plan): per chunk of `chunk` rows, the logits, their summed loss and,
    over them, their gradient G, then dx = G · W and dW (+)= Gᵀ · x. Only the
    chunk's logits are held. The mean's denominator (the counted tokens, or
    their total class weight) and `grad_loss` (an incoming gradient, 1 if
    None) scale G through the loss kernel's incoming gradient. With
    `per_token` (a plan of reduction "none") the loss kernel gives each
    row's loss and takes each row's incoming gradient: `grad_loss` is then
    [N] (1 for every token if None), and the loss returned is [N] f32.
    Returns (loss, dx, dW); a gradient not wanted is None."""
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
    if per_token:
        g = torch.ones(n, dtype=torch.float32, device=dev) if grad_loss is None else \
            grad_loss.reshape(n).to(torch.float32).contiguous()
    else:
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
    if per_token:
        total = torch.empty(n, dtype=torch.float32, device=dev)
    else:
        total = torch.zeros((), dtype=torch.float32, device=dev)
        part = torch.empty((), dtype=torch.float32, device=dev)
    cw = [class_weight] if class_weight is not None else []
    for i, c0 in enumerate(range(0, n, chunk)):
        rows = min(chunk, n - c0)
        xc, tc, z = x[c0:c0 + rows], target[c0:c0 + rows], logits[:rows]
        kernels["logits"](xc, weight, out=[z])
        # The loss and, over the logits, their gradient.
        if per_token:
            kernels["ce"](z, tc, *cw, g[c0:c0 + rows], out=[total[c0:c0 + rows], z])
        else:
            kernels["ce"](z, tc, *cw, g, out=[part, z])
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
