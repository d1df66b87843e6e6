"""The fused linear cross-entropy's chunk loop: the lm_head's loss and its
gradients over chunks of tokens, never holding the [tokens, vocab] logits.

`plan_chunks` says how many tokens a chunk takes under a memory budget;
`chunked_loss` runs one chunk's kernels (the logits, the loss with its
gradient over them, dx, dW; an lm_head bias's gradient is the column sums
of that gradient, added up here) over every chunk. The kernels are those of a
bundle's loss plan (liger-plan-loss, the manifest's `plans`): compiled GPU
kernels (liger.runtime) or their reference functions on the CPU
(liger.reference.ReferenceBundle); liger.ops and liger.runtime.run_loss_plan
both run them through here.
"""

from .errors import LigerValueError
from .specs import BYTES, check_int, dtype_name


def plan_chunks(tokens, vocab, dtype, memory_budget=2 ** 29, what="row of logits"):
    """How fused_linear_cross_entropy chunks `tokens` under `memory_budget`
    bytes: the logits of one chunk [chunk_tokens, vocab] are its only buffer
    beyond the gradients it returns (dx, dW). Chunks of at least 128 tokens
    are whole 128-row matmul tiles. `what` names a token's share of the
    buffers in the refusal of a budget too small for one. Returns
    dict(chunk_tokens, chunks, extra_bytes)."""
    row = check_int("vocab", vocab, 1) * BYTES[dtype_name(dtype)]
    memory_budget = check_int("memory_budget", memory_budget, 1)
    tokens = check_int("tokens", tokens, 0)
    chunk = memory_budget // row
    if chunk < 1:
        raise LigerValueError("memory_budget of %d bytes holds no %s (%d bytes)"
                              % (memory_budget, what, row))
    if chunk >= 128:
        chunk -= chunk % 128
    chunk = max(1, min(chunk, tokens))
    chunks = -(-tokens // chunk)
    return dict(chunk_tokens=chunk, chunks=chunks, extra_bytes=min(chunk, tokens) * row)


def _gradient_buffers(x, weight, want_dx, want_dw, dw_f32):
    """dx (x's shape) and dW (W's; with dw_f32 an f32 buffer every chunk
    adds into, rounded once at the end), each None where not wanted."""
    import torch
    dx = torch.empty_like(x) if want_dx else None
    dw = None
    if want_dw and dw_f32:
        dw = torch.zeros(weight.shape, dtype=torch.float32, device=x.device)
    elif want_dw:
        dw = torch.empty_like(weight)
        if x.shape[0] == 0:
            dw.zero_()
    return dx, dw


def _gradient_products(kernels, g, x_chunk, weight, dx, dw, first_row, dw_f32):
    """One chunk's dx = G · W (into dx's rows from `first_row`) and dW =
    Gᵀ · x, the first chunk's written (dw0), later ones (or all, into
    f32) added (dw)."""
    if dx is not None:
        kernels["dx"](g, weight, out=[dx[first_row:first_row + g.shape[0]]])
    if dw is not None and first_row == 0 and not dw_f32:
        kernels["dw0"](g, x_chunk, out=[dw])
    elif dw is not None:
        kernels["dw"](g, x_chunk, dw, out=[dw])


def _rounded(dw, weight):
    """dW in W's dtype (an f32 sum rounded once); also db in the bias's."""
    return dw if dw is None or dw.dtype == weight.dtype else dw.to(weight.dtype)


def per_token(ce):
    """Whether a loss plan's loss kernel `ce` (a runtime Kernel, or the
    reference's) gives each row's loss and takes each row's incoming
    gradient: the plan of a reduction "none" loss."""
    return len(ce.outputs[0]["shape"]) == 1


def takes_bias(logits):
    """Whether a loss plan's logits kernel adds a bias (its parameters: x,
    W, then the bias): the plan of an lm_head with one."""
    return len(logits.inputs) == 3


def gives_z_loss(ce):
    """Whether a loss plan's loss kernel gives the z-loss term apart (its
    outputs: the loss, the z-loss, the gradient over the logits)."""
    return len(ce.outputs) == 3


def chunked_loss(kernels, x, weight, target, class_weight, chunk, mean, ignore_index,
                 want_dx=True, want_dw=True, dw_f32=False, grad_loss=None, per_token=False,
                 bias=None, want_db=False):
    """The lm_head's loss and gradients chunk by chunk, with the kernels of
    one chunk (`kernels`: logits, ce, dx, dw0 unless dw_f32, dw; what
    liger.ops compiles and what liger-plan-loss writes into a bundle's
    plan): per chunk of `chunk` rows, the logits (plus `bias` [V], which
    the logits kernel of a plan with a bias takes: takes_bias), their
    summed loss and, over them, their gradient G, then dx = G · W, dW (+)=
    Gᵀ · x and, with `want_db`, db += the column sums of G (added up in
    f32 by PyTorch over the chunk's G, which is held for dx and dW anyway;
    rounded once to the bias's dtype). Only the chunk's logits are held.
    The mean's denominator (the counted tokens, or their total class
    weight) and `grad_loss` (an incoming gradient, 1 if None) scale G
    through the loss kernel's incoming gradient. With `per_token` (a plan
    of reduction "none") the loss kernel gives each row's loss and takes
    each row's incoming gradient: `grad_loss` is then [N] (1 for every
    token if None), and the loss returned is [N] f32. Where the loss kernel
    gives the z-loss term apart (gives_z_loss) it is returned too, reduced
    as the loss.
    Returns (loss, z_loss, dx, dW, db); a gradient not wanted, and the
    z-loss of a plan without it, are None."""
    import torch
    n, v = x.shape[0], weight.shape[0]
    dev = x.device
    if (bias is not None) != takes_bias(kernels["logits"]):
        raise ValueError("the plan's logits kernel %s a bias, and bias was %s" % (
            "adds" if takes_bias(kernels["logits"]) else "adds no",
            "not given" if bias is None else "given"))
    with_z = gives_z_loss(kernels["ce"])
    one = torch.ones((), dtype=torch.float32, device=dev)
    if mean:
        # (With class weights the z-loss's scale would be the counted
        # tokens' alone: a plan refuses a z-loss with them under the mean.)
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
    dx, dw = _gradient_buffers(x, weight, want_dx, want_dw, dw_f32)
    db = torch.zeros(v, dtype=torch.float32, device=dev) if want_db else None
    if per_token:
        total = torch.empty(n, dtype=torch.float32, device=dev)
        z_total = torch.empty(n, dtype=torch.float32, device=dev) if with_z else None
    else:
        total = torch.zeros((), dtype=torch.float32, device=dev)
        part = torch.empty((), dtype=torch.float32, device=dev)
        z_total = torch.zeros((), dtype=torch.float32, device=dev) if with_z else None
        z_part = torch.empty((), dtype=torch.float32, device=dev) if with_z else None
    cw = [class_weight] if class_weight is not None else []
    b = [bias] if bias is not None else []
    for c0 in range(0, n, chunk):
        rows = min(chunk, n - c0)
        xc, tc, z = x[c0:c0 + rows], target[c0:c0 + rows], logits[:rows]
        kernels["logits"](xc, weight, *b, out=[z])
        # The loss (and the z-loss apart) and, over the logits, their gradient.
        if per_token:
            zl = [z_total[c0:c0 + rows]] if with_z else []
            kernels["ce"](z, tc, *cw, g[c0:c0 + rows], out=[total[c0:c0 + rows], *zl, z])
        else:
            kernels["ce"](z, tc, *cw, g, out=[part, *([z_part] if with_z else []), z])
            total += part
            if with_z:
                z_total += z_part
        _gradient_products(kernels, z, xc, weight, dx, dw, c0, dw_f32)
        if db is not None:
            db += z.sum(0, dtype=torch.float32)
    if mean:
        total = total * scale
        z_total = z_total * scale if with_z else None
    return total, z_total, dx, _rounded(dw, weight), _rounded(db, bias)


def chunked_sequences(kernels, x, weight, target, per_chunk, objective, groups=1,
                      want_dx=True, want_dw=True):
    """A loss over sequences through the lm_head whose every sequence (or,
    with groups=2, every pair of sequences) contributes a term of its own,
    chunk by chunk of whole sequences (pairs), with the kernels of a
    per-token loss plan (`kernels` of reduction "none": logits, ce, dx,
    dw0, dw). x [S, T, H], target [S, T]; with groups=2, S = 2B: B
    sequences, then the B sequences paired with them. Per chunk of k
    sequences (pairs; `per_chunk`, the last one fewer): their logits, each
    token's loss with its gradient over the logits for an incoming gradient
    of 1 (G), then `objective(losses, s0, k)` -> (value, c, aux): value is
    the chunk's share of the loss, from its tokens' losses [groups·k, T]
    (f32, 0 where ignored; with groups=2 the first k rows the pairs' first
    sequences; s0 the first sequence's, or pair's, index) alone; c
    [groups·k, T] its gradient over them; aux anything it reports. c scales
    G's rows: dx = c · (G · W) row by row, dW += Gᵀ · (c · x). So the
    gradients are formed in the forward with one logits matmul per chunk,
    which a loss over each token's loss (reduction "none", whose incoming
    gradients come in the backward) cannot do. Returns (the sum of the
    values, f32; dx [S, T, H]; dW; [(s0, k, aux)] per chunk), a gradient
    not wanted None."""
    import torch
    s, t, h = x.shape
    count, v = s // groups, weight.shape[0]
    dev, dtype = x.device, x.dtype
    grad = want_dx or want_dw
    k0 = max(1, min(per_chunk, count))
    rows0 = groups * k0 * t
    logits = torch.empty((rows0, v), dtype=dtype, device=dev)
    losses = torch.empty(rows0, dtype=torch.float32, device=dev)
    ones = torch.ones(rows0, dtype=torch.float32, device=dev)
    dx, dw = _gradient_buffers(x, weight, want_dx, want_dw, False)
    rows_dx = torch.empty((rows0, h), dtype=dtype, device=dev) if want_dx else None
    total = torch.zeros((), dtype=torch.float32, device=dev)
    reports = []
    for s0 in range(0, count, k0):
        k = min(k0, count - s0)
        rows = groups * k * t
        parts = [slice(g * count + s0, g * count + s0 + k) for g in range(groups)]
        xc = torch.cat([x[part] for part in parts]).view(rows, h)
        tc = torch.cat([target[part] for part in parts]).view(rows)
        z, lc = logits[:rows], losses[:rows]
        kernels["logits"](xc, weight, out=[z])
        kernels["ce"](z, tc, ones[:rows], out=[lc, z])
        value, c, aux = objective(lc.view(groups * k, t), s0, k)
        total += value
        reports.append((s0, k, aux))
        if not grad:
            continue
        c = c.reshape(rows, 1)
        if dx is not None:
            kernels["dx"](z, weight, out=[rows_dx[:rows]])
            scaled = (rows_dx[:rows] * c).to(dtype).view(groups * k, t, h)
            for g, part in enumerate(parts):
                dx[part] = scaled[g * k:(g + 1) * k]
        if dw is not None:
            _gradient_products(kernels, z, (xc * c).to(dtype), weight, None, dw, s0, False)
    return total, dx, dw, reports


# The fused linear JSD's buffers of one chunk: the student's and the
# teacher's logits [chunk, vocab], in the inputs' dtype (the JSD's row
# kernel reads them as they are and writes the gradient over the
# student's).
JSD_LOGIT_ROWS = 2


def plan_jsd_chunks(tokens, vocab, dtype, memory_budget=2 ** 29):
    """How fused_linear_jsd chunks `tokens` of logits in `dtype` under
    `memory_budget` bytes (its chunk buffers: JSD_LOGIT_ROWS rows of logits
    per token); as plan_chunks."""
    return plan_chunks(tokens, vocab * JSD_LOGIT_ROWS, dtype, memory_budget,
                       "token's two rows of logits, the student's and the teacher's")


def chunked_jsd(student, teacher_logits, jsd, xs, ws, xt, wt, labels, chunk, share,
                want_dx=True, want_dw=True, dw_f32=False):
    """The fused linear JSD chunk by chunk: per chunk of `chunk` tokens the
    student's and the teacher's logits (the matmul kernels of a loss plan:
    `student` logits, dx, dw0 unless dw_f32, dw; `teacher_logits`), then
    the JSD kernels of the logits themselves (`jsd`: a liger.jsd bundle
    with the temperature, @fwd the loss per token and, written over the
    student's logits, their gradient G for each token's share;
    @loss the loss alone), then dx = G · W_s and dW_s (+)= Gᵀ · x_s.
    `share`: each token's share of the mean, [tokens] f32 (one value:
    1 over the tokens averaged over). Returns (the sum of the tokens'
    losses, f32: the caller takes the mean, dx, dW); a gradient not wanted
    is None."""
    import torch
    n, v = xs.shape[0], ws.shape[0]
    dev, dtype = xs.device, xs.dtype
    grad = want_dx or want_dw
    rows0 = min(chunk, n)
    zs = torch.empty((rows0, v), dtype=dtype, device=dev)
    zt = torch.empty((rows0, v), dtype=dtype, device=dev)
    per_token = torch.empty((rows0,), dtype=torch.float32, device=dev)
    dx, dw = _gradient_buffers(xs, ws, want_dx, want_dw, dw_f32)
    total = torch.zeros((), dtype=torch.float32, device=dev)
    for c0 in range(0, n, chunk):
        rows = min(chunk, n - c0)
        xc, z, y = xs[c0:c0 + rows], zs[:rows], zt[:rows]
        student["logits"](xc, ws, out=[z])
        teacher_logits(xt[c0:c0 + rows], wt, out=[y])
        lab = [] if labels is None else [labels[c0:c0 + rows]]
        if not grad:
            total += jsd["loss_rowwise_0"](z, y, *lab, out=[per_token[:rows]]).sum()
            continue
        jsd["fwd_rowwise_0"](z, y, share[:rows], *lab, out=[per_token[:rows], z])
        total += per_token[:rows].sum()
        _gradient_products(student, z, xc, ws, dx, dw, c0, dw_f32)
    return total, dx, _rounded(dw, ws)
