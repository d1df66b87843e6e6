"""Float64 references of the liger ops, written from docs/Reference/Semantics.md.

Each function takes float64 arrays holding the exact input values (bf16 and
f16 inputs are widened exactly) and returns float64 results. Where an op
rounds an intermediate to the input dtype (RMSNorm's casting modes, LoRA's
low-rank product, the logits of fused_linear_cross_entropy) the reference
rounds at the same place with `round_to`; everything else is exact float64.
Gradients are checked against finite differences of these functions, not
against a second hand-written derivative.
"""

import math

import numpy as np

from liger.reference import round_to

_erf = np.vectorize(math.erf, otypes=[np.float64])


def rms_norm(x, w, eps, offset=0.0, casting="llama", xdt="f32", wdt="f32"):
    rstd = 1.0 / np.sqrt(np.mean(x * x, axis=-1) + eps)
    r = rstd[..., None]
    if casting == "llama":
        y = round_to(x * r, xdt) * round_to(offset + w, wdt)
    elif casting == "gemma":
        y = x * r * (offset + w)
    else:
        normed = round_to(x * round_to(r, xdt), xdt)
        y = normed * round_to(offset + w, xdt)
    return y, rstd


def layer_norm_stats(x, eps):
    """The row mean and rstd = 1 / sqrt(var + eps) (biased variance) of
    liger.layer_norm."""
    mean = x.mean(-1)
    return mean, 1.0 / np.sqrt(((x - mean[..., None]) ** 2).mean(-1) + eps)


def layer_norm(x, w, b, eps):
    mean, rstd = layer_norm_stats(x, eps)
    y = (x - mean[..., None]) * rstd[..., None] * w
    return y + b if b is not None else y


def rotate_half(x):
    h = x.shape[-1] // 2
    return np.concatenate([-x[..., h:], x[..., :h]], axis=-1)


def rotate_half_transposed(y):
    h = y.shape[-1] // 2
    return np.concatenate([y[..., h:], -y[..., :h]], axis=-1)


def rope(x, cos, sin):
    # x [B, H, T, D]; cos/sin [B or 1, T, D] broadcast over heads.
    c, s = cos[:, None], sin[:, None]
    return x * c + rotate_half(x) * s


def rope_grad(g, cos, sin):
    c, s = cos[:, None], sin[:, None]
    return g * c + rotate_half_transposed(g * s)


def linear(x, w, b=None):
    y = x @ w.T
    return y + b if b is not None else y


def lora_linear(x, w, a, bmat, scale, bias=None, dt="f32"):
    low = round_to(x @ a.T, dt)
    y = x @ w.T + scale * (low @ bmat.T)
    return y + bias if bias is not None else y


def sigmoid(x):
    return 1.0 / (1.0 + np.exp(-x))


def silu(x):
    return x * sigmoid(x)


def gelu(x, approximate="none"):
    if approximate == "tanh":
        return 0.5 * x * (1 + np.tanh(math.sqrt(2 / math.pi) * (x + 0.044715 * x ** 3)))
    return 0.5 * x * (1 + _erf(x / math.sqrt(2)))


def softmax(x):
    e = np.exp(x - x.max(-1, keepdims=True))
    return e / e.sum(-1, keepdims=True)


def cross_entropy(x, t, weight=None, ignore_index=-100, label_smoothing=0.0,
                  reduction="mean", softcap=None, lse_square_scale=0.0):
    """Returns (loss, z_loss) as documented; NaN for out-of-range targets."""
    z = softcap * np.tanh(x / softcap) if softcap else x
    n, v = z.shape
    m = z.max(-1)
    lse = m + np.log(np.exp(z - m[:, None]).sum(-1))
    wv = weight if weight is not None else np.ones(v)
    ignored = t == ignore_index
    in_range = (t >= 0) & (t < v)
    idx = np.where(in_range & ~ignored, t, 0)
    zt = z[np.arange(n), idx]
    wt = np.where(ignored, 0.0, wv[idx])
    ce = wt * (lse - zt)
    if label_smoothing > 0:
        smooth = ((lse[:, None] - z) * wv).sum(-1) / v
        ce = (1 - label_smoothing) * ce + label_smoothing * np.where(ignored, 0.0, smooth)
    zl = np.where(ignored, 0.0, lse_square_scale * lse ** 2)
    invalid = ~ignored & ~in_range
    ce = np.where(invalid, np.nan, ce)
    zl = np.where(invalid, np.nan, zl)
    if reduction == "none":
        return ce + zl, zl
    if reduction == "sum":
        return np.array(ce.sum() + zl.sum()), np.array(zl.sum())
    count = float((~ignored).sum())
    return np.array(ce.sum() / wt.sum() + zl.sum() / count), np.array(zl.sum() / count)


def kl_div(x, t, reduction="batchmean", log_target=False, eps=1e-10, per_token=False):
    if log_target:
        pointwise = np.exp(t) * (t - x)
    else:
        pointwise = t * (np.log(np.maximum(t, eps)) - x)
    if reduction == "none":
        return pointwise
    if per_token:
        return pointwise.sum(-1)
    total = pointwise.sum()
    if reduction == "sum":
        return np.array(total)
    if reduction == "mean":
        return np.array(total / pointwise.size)
    return np.array(total / x.shape[0])


def jsd(x, y, beta=0.5, labels=None, ignore_index=-100, per_token=False):
    """Liger-Kernel's generalized JSD of student log-probs x, teacher log-probs y:
    the mean over the counted tokens (0 when none counts), or with per_token each
    token's loss (0 for a skipped one). Takes float64 NumPy arrays or torch
    tensors (differentiable: the GPU tests' and liger.ops' reference too)."""
    xp = np if isinstance(x, np.ndarray) else __import__("torch")
    p, q = xp.exp(y), xp.exp(x)
    if beta == 0.0:
        pointwise = p * (y - x)
    elif beta == 1.0:
        pointwise = q * (x - y)
    else:
        big = xp.maximum(x, y)
        log_m = big + xp.log(beta * xp.exp(y - big) + (1 - beta) * xp.exp(x - big))
        pointwise = beta * p * (y - log_m) + (1 - beta) * q * (x - log_m)
    per_row = pointwise.sum(-1)
    keep = xp.ones_like(per_row) > 0 if labels is None else labels != ignore_index
    per_row = xp.where(keep, per_row, xp.zeros_like(per_row))
    if per_token:
        return per_row
    return per_row.sum() / max(int(keep.sum()), 1)


def attention_scores(q, k, causal=False, scale=None):
    """scale · q · kᵀ per query head (its key/value head repeated), −inf at
    the keys the causal mask drops: [B, Hq, T, S]."""
    b, hq, t, d = q.shape
    hkv, s = k.shape[1], k.shape[2]
    k = np.repeat(k, hq // hkv, axis=1)
    scale = 1.0 / math.sqrt(d) if scale is None else scale
    scores = scale * np.einsum("bhtd,bhsd->bhts", q, k)
    if causal:
        i = np.arange(t)[:, None]
        j = np.arange(s)[None, :]
        scores = np.where(j > i + (s - t), -np.inf, scores)
    return scores


def attention(q, k, v, causal=False, scale=None):
    v = np.repeat(v, q.shape[1] // k.shape[1], axis=1)
    return np.einsum("bhts,bhsd->bhtd", softmax(attention_scores(q, k, causal, scale)), v)


def attention_lse(q, k, causal=False, scale=None):
    """The log-sum-exp of each query row's scores (liger.attention's
    return_lse): [B, Hq, T], −inf for a row whose keys are all masked."""
    scores = attention_scores(q, k, causal, scale)
    m = scores.max(-1)
    empty = np.isneginf(m)
    shift = np.where(empty, 0.0, m)
    with np.errstate(divide="ignore"):
        return np.where(empty, -np.inf,
                        shift + np.log(np.exp(scores - shift[..., None]).sum(-1)))


def attention_grad_saved(g, q, k, v, out, lse, causal=False, scale=None):
    """liger.attention_grad with saved(out, lse) as its description writes
    it: p = exp(s − lse), D = rowsum(g · out), ds = scale · p · (dp − D),
    returning (dq, dk, dv). For a saved `out` that was rounded (bf16), whose
    error D carries into ds where dp − D cancels: finite differences of the
    exact attention do not see it."""
    b, hq, t, d = q.shape
    hkv, s = k.shape[1], k.shape[2]
    group = hq // hkv
    scale = 1.0 / math.sqrt(d) if scale is None else scale
    with np.errstate(invalid="ignore"):
        p = np.exp(attention_scores(q, k, causal, scale) - lse[..., None])
    dp = np.einsum("bhte,bhse->bhts", g, np.repeat(v, group, axis=1))
    ds = scale * p * (dp - (g * out).sum(-1)[..., None])
    dq = np.einsum("bhts,bhsd->bhtd", ds, np.repeat(k, group, axis=1))

    def per_kv_head(x):
        return x.reshape(b, hkv, group, s, x.shape[-1]).sum(2)
    dk = per_kv_head(np.einsum("bhts,bhtd->bhsd", ds, q))
    dv = per_kv_head(np.einsum("bhts,bhte->bhse", p, g))
    return dq, dk, dv


def numeric_grad(f, x, h=1e-6):
    """Central differences of the scalar function f at x (float64)."""
    grad = np.zeros_like(x)
    flat, g = x.reshape(-1), grad.reshape(-1)
    for i in range(flat.size):
        old = flat[i]
        flat[i] = old + h
        up = f(x)
        flat[i] = old - h
        down = f(x)
        flat[i] = old
        g[i] = (up - down) / (2 * h)
    return grad
