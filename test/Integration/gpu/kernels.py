"""The rowwise kernels the GPU suite checks: their liger source and their
float64 torch references.

`module_text(hidden, dtype)` is one liger module with one function per case;
`scripts/build-gpu-bundles.sh` compiles it with liger-compile (no fusion
flags needed: a chain such as silu -> mul fuses into one kernel) for every
(hidden, dtype) of `rowwise_bundles()`, and the GPU suite runs each kernel
against `references(dtype)[name]` on fresh random inputs.
"""

import math
import os


def load_bundle(bundles_dir, name):
    """The compiled bundle `name` under `bundles_dir`; skips the calling
    test, saying why, when it was not built or the runtime cannot load."""
    import pytest
    from liger import runtime
    path = os.path.join(bundles_dir, name)
    if not os.path.isdir(path):
        pytest.skip("bundle %s not built (run scripts/build-gpu-bundles.sh)" % path)
    try:
        return runtime.load(path)
    except ImportError as e:
        pytest.skip(str(e))

HIDDENS = [1000, 4096, 5120, 8192]
DTYPES = ["bf16", "f32"]
TOKENS = [1, 7, 4096, 16384]
# Rows of every length: odd ones that no wider vector divides (one-element
# chunks in the register form; 32001 and 50257 past the register budget at
# 256 threads: more threads, or the loop over chunk groups, whose rows are
# peeled to 16-byte chunks where the program has no per-column operand)
# and long ones (Gemma's 256000, 262147) that the kernels loop over, in
# three dtypes, at fewer tokens.
ODD_HIDDENS = [7, 1000, 32001, 50257, 256000, 262147]
ODD_DTYPES = ["bf16", "f16", "f32"]
ODD_TOKENS = [1, 7, 333]
TORCH_DTYPES = {"bf16": "bfloat16", "f16": "float16", "f32": "float32"}


def rowwise_shapes():
    """Every (hidden, dtype, tokens) the rowwise cases run at, once."""
    return sorted({(h, dt, n) for h in HIDDENS for dt in DTYPES for n in TOKENS} |
                  {(h, dt, n) for h in ODD_HIDDENS for dt in ODD_DTYPES for n in ODD_TOKENS})


def rowwise_bundles():
    """The (hidden, dtype) of every rowwise bundle (h<hidden>_<dtype>)."""
    return sorted({(h, dt) for h, dt, _ in rowwise_shapes()})


def _t(h, dt):
    return "tensor<?x%dx%s>" % (h, dt)


def module_text(hidden, dt):
    return "\n\n".join(_funcs(hidden, dt).values()) + "\n"


def _funcs(hidden, dt):
    """name -> the liger function of op `name` over rows of `hidden` `dt`."""
    X, W, R = _t(hidden, dt), "tensor<%dx%s>" % (hidden, dt), "tensor<?xf32>"
    WF = "tensor<%dxf32>" % hidden
    funcs = {
        "rms_llama": f"""func.func @rms_llama(%x: {X}, %w: {W}) -> ({X}, {R}) {{
  %y, %r = liger.rms_norm %x, %w eps = 1.0e-6 rstd : {X}, {W}
  return %y, %r : {X}, {R}
}}""",
        "rms_gemma": f"""func.func @rms_gemma(%x: {X}, %w: {WF}) -> {X} {{
  %y = liger.rms_norm %x, %w eps = 1.0e-6 offset = 1.0 casting = gemma : {X}, {WF}
  return %y : {X}
}}""",
        "add_rms": f"""func.func @add_rms(%x: {X}, %r: {X}, %w: {W}) -> ({X}, {X}) {{
  %y, %s = liger.add_rms_norm %x, %r, %w eps = 1.0e-5 : {X}, {W}
  return %y, %s : {X}, {X}
}}""",
        "layer_norm": f"""func.func @layer_norm(%x: {X}, %w: {W}, %b: {W}) -> ({X}, {R}, {R}) {{
  %y, %m, %r = liger.layer_norm %x, %w, %b eps = 1.0e-5 stats : {X}, {W}, {W}
  return %y, %m, %r : {X}, {R}, {R}
}}""",
        "swiglu": f"""func.func @swiglu(%g: {X}, %u: {X}) -> {X} {{
  %y = liger.swiglu %g, %u : {X}
  return %y : {X}
}}""",
        "geglu": f"""func.func @geglu(%g: {X}, %u: {X}) -> {X} {{
  %y = liger.geglu %g, %u approximate = tanh : {X}
  return %y : {X}
}}""",
        "softmax": f"""func.func @softmax(%x: {X}) -> {X} {{
  %y = liger.softmax %x : {X}
  return %y : {X}
}}""",
        "silu_mul": f"""func.func @silu_mul(%a: {X}, %b: {X}) -> {X} {{
  %s = liger.silu %a : {X}
  %y = liger.mul %s, %b : {X}
  return %y : {X}
}}""",
        "geglu_grad": f"""func.func @geglu_grad(%dy: {X}, %g: {X}, %u: {X}) -> ({X}, {X}) {{
  %dg, %du = liger.geglu_grad %dy, %g, %u approximate = tanh : {X}
  return %dg, %du : {X}, {X}
}}""",
        "softmax_grad": f"""func.func @softmax_grad(%dy: {X}, %y: {X}) -> {X} {{
  %dx = liger.softmax_grad %dy, %y : {X}
  return %dx : {X}
}}""",
        "rms_grad": f"""func.func @rms_grad(%dy: {X}, %x: {X}, %w: {W}, %r: {R}) -> ({X}, {W}) {{
  %dx, %dw = liger.rms_norm_grad %dy, %x, %w, %r : {X}, {W}, {R}
  return %dx, %dw : {X}, {W}
}}""",
        "rms_grad_gemma": f"""func.func @rms_grad_gemma(%dy: {X}, %x: {X}, %w: {WF}, %r: {R}) -> ({X}, {WF}) {{
  %dx, %dw = liger.rms_norm_grad %dy, %x, %w, %r offset = 1.0 casting = gemma : {X}, {WF}, {R}
  return %dx, %dw : {X}, {WF}
}}""",
        # add + RMSNorm backward: liger-fuse-elementwise puts the residual
        # gradient's add into the rms_norm_grad kernel (outputs: dW, then
        # the residual stream's gradient).
        "add_rms_grad": f"""func.func @add_rms_grad(%dy: {X}, %s: {X}, %w: {W}, %r: {R}, %dres: {X}) -> ({W}, {X}) {{
  %dx, %dw = liger.rms_norm_grad %dy, %s, %w, %r : {X}, {W}, {R}
  %d = liger.add %dx, %dres : {X}
  return %dw, %d : {W}, {X}
}}""",
        "ln_grad": f"""func.func @ln_grad(%dy: {X}, %x: {X}, %w: {W}, %m: {R}, %r: {R}) -> ({X}, {W}, {W}) {{
  %dx, %dw, %db = liger.layer_norm_grad %dy, %x, %w, %m, %r : {X}, {W}, {R}
  return %dx, %dw, %db : {X}, {W}, {W}
}}""",
        "swiglu_grad": f"""func.func @swiglu_grad(%dy: {X}, %g: {X}, %u: {X}) -> ({X}, {X}) {{
  %dg, %du = liger.swiglu_grad %dy, %g, %u : {X}
  return %dg, %du : {X}, {X}
}}""",
    }
    return funcs


# Row programs pinned to a thread-block cluster (sm_90: each CTA of the
# cluster runs the loop form over its part of the row, their reductions
# combined through distributed shared memory): (reference name, hidden,
# dtype, threads, cluster). Rows no cluster splits evenly (the last CTA's
# part is shorter: 50257 and 262147 in one-element chunks), a row the
# register form would hold (4096), several reductions in turn with per-row
# outputs (layer_norm's mean and rstd, rms_llama's rstd), two row inputs
# read twice (softmax_grad), an output read back (add_rms's sum).
CLUSTER_CASES = [
    ("softmax", 50257, "bf16", 512, 8),
    ("softmax", 128256, "f32", 512, 4),
    ("rms_llama", 4096, "bf16", 256, 2),
    ("layer_norm", 262147, "f16", 512, 8),
    ("softmax_grad", 32001, "bf16", 256, 2),
    ("add_rms", 14336, "f32", 512, 4),
]


def cluster_function(name, hidden, dt, threads, cluster):
    """The function of a CLUSTER_CASES entry (its kernel:
    <function>_rowwise_0)."""
    return "%s_h%d_%s_k%d" % (name, hidden, dt, cluster)


def _widest(hidden, dt, dividing):
    """The 16-byte vector width of `dt`, narrowed until it divides `hidden`
    where `dividing`."""
    width = 16 // {"bf16": 2, "f16": 2, "f32": 4}[dt]
    while dividing and hidden % width:
        width //= 2
    return width


def pinned_module_text(entries):
    """Functions `fname` (kernel <fname>_rowwise_0), one per entry (fname,
    op name of module_text, hidden, dtype, the #liger.kernel_config): the
    op as one liger.fusion group pinned to the configuration."""
    import re
    parts = []
    for fname, name, hidden, dt, config in entries:
        m = re.match(r"func\.func @\w+\((.*?)\) -> .*? \{\n(.*)\n  return (.*?) : (.*?)\n\}$",
                     _funcs(hidden, dt)[name], re.S)
        args = [a.split(": ") for a in m.group(1).split(", ")]
        names = [a[0] for a in args]
        body = re.sub(r"%(\w+)\b",
                      lambda v: "%%in_%s" % v.group(1) if "%" + v.group(1) in names else v.group(0),
                      m.group(2))
        in_types = ", ".join(a[1] for a in args)
        res_types = m.group(4)
        n = len(res_types.split(", "))
        res_sig = res_types if n == 1 else "(%s)" % res_types
        parts.append(
            "func.func @%s(%s) -> %s {\n"
            "  %%out%s = liger.fusion rowwise(%s) attributes {liger.kernel_config = %s} : (%s) -> %s {\n"
            "  ^bb0(%s):\n"
            "%s\n"
            "    liger.yield %s : %s\n"
            "  }\n"
            "  return %s : %s\n"
            "}" % (fname, m.group(1), res_sig,
                   "" if n == 1 else ":%d" % n, ", ".join(names), config, in_types, res_sig,
                   ", ".join("%%in_%s: %s" % (a[0][1:], a[1]) for a in args),
                   "\n".join("  " + line for line in body.split("\n")),
                   m.group(3), res_types,
                   "%out" if n == 1 else ", ".join("%%out#%d" % i for i in range(n)), res_types))
    return "\n\n".join(parts) + "\n"


def cluster_module_text():
    """Every CLUSTER_CASES entry pinned to its configuration, at the widest
    vector width its row takes."""
    return pinned_module_text([
        (cluster_function(*case), case[0], case[1], case[2],
         "#liger.kernel_config<kernel_template = rowwise, threads = %d, vector_width = %d, "
         "cluster = %d>" % (case[3], _widest(case[1], case[2], True), case[4]))
        for case in CLUSTER_CASES])


# Row programs at a pinned 16-byte vector width that does not divide their
# row (name, hidden, dtype, threads): each row is peeled to its first chunk
# boundary (RowKernel.cpp; also the default of a looped row). Programs
# without per-column operands (a peeled row refuses them); rows of GPT-2's
# vocabulary, Llama-2's 32001, odd widths, one shorter than its head (all
# single elements).
PEEL_CASES = [
    ("softmax", 50257, "bf16", 512),
    ("softmax", 32001, "f32", 512),
    ("softmax_grad", 50257, "f16", 256),
    ("swiglu", 14337, "bf16", 256),
    ("geglu_grad", 1001, "bf16", 128),
    ("silu_mul", 7, "f32", 32),
    ("softmax", 3, "bf16", 32),
    # A plain sum over a short row (its single elements 3 of 15, a
    # doubled one well past the tolerance).
    ("softmax_grad", 15, "f32", 32),
]


def peel_function(name, hidden, dt, threads):
    """The function of a PEEL_CASES entry (its kernel: <function>_rowwise_0)."""
    return "%s_h%d_%s_peeled" % (name, hidden, dt)


def peel_module_text():
    """Every PEEL_CASES entry pinned to 16-byte chunks."""
    return pinned_module_text([
        (peel_function(*case), case[0], case[1], case[2],
         "#liger.kernel_config<kernel_template = rowwise, threads = %d, vector_width = %d>"
         % (case[3], _widest(case[1], case[2], False)))
        for case in PEEL_CASES])


# RoPE at Llama-3-8B's head layout: 32 query heads, 8 key/value heads,
# head dimension 128; tables with batch 1 (broadcast) or dynamic (per batch).
ROPE = dict(hq=32, hkv=8, d=128)


def rope_module_text(dt):
    hq, hkv, d = ROPE["hq"], ROPE["hkv"], ROPE["d"]
    Q = "tensor<?x%dx?x%dx%s>" % (hq, d, dt)
    K = "tensor<?x%dx?x%dx%s>" % (hkv, d, dt)
    out = []
    for name, op in [("rope", "liger.rope"), ("rope_grad", "liger.rope_grad")]:
        for suffix, C in [("", "tensor<1x?x%dx%s>" % (d, dt)),
                          ("_batched", "tensor<?x?x%dx%s>" % (d, dt))]:
            out.append(f"""func.func @{name}{suffix}(%q: {Q}, %k: {K}, %c: {C}, %s: {C}) -> ({Q}, {K}) {{
  %a, %b = {op} %q, %k, %c, %s : {Q}, {K}, {C}
  return %a, %b : {Q}, {K}
}}""")
    return "\n\n".join(out) + "\n"


def torch_dtype(dt):
    """The torch dtype of "bf16", "f16" or "f32"."""
    import torch
    return getattr(torch, TORCH_DTYPES[dt])


def _round(t, dt):
    """float64 `t` rounded to dtype `dt` and back (where the op rounds)."""
    import torch
    return t.to(torch_dtype(dt)).to(torch.float64)


def make_inputs(specs, tokens, hidden, dt, gen=None):
    """Random inputs for `specs` (see references) on the GPU."""
    import torch
    dtype = torch_dtype(dt)
    out = []
    for kind, scale in specs:
        if kind in ("rstd", "mean", "ln_rstd"):
            # A forward's statistic of the row input before it, in f32
            # (computed on the CPU: under compute-sanitizer only liger's
            # kernels should run, and racecheck flags PyTorch's own
            # multi-block reduction over long rows).
            x = next(t for t in reversed(out) if t.dim() == 2).cpu().double()
            out.append(_row_stat(kind, x, scale).float().to("cuda"))
            continue
        shape = (tokens, hidden) if kind in ("rows", "rows_mean", "probs") else (hidden,)
        t = torch.randn(shape, generator=gen, device="cuda")
        if kind == "probs":
            t = torch.softmax(t * 2, -1)
        elif kind == "rows_mean":
            t = t * scale + scale
        else:
            t = t * scale
        out.append(t if kind == "feature_f32" else t.to(dtype))
    return out


def _row_stat(kind, x, eps):
    """Statistic `kind` of each row of float64 `x`: RMSNorm's rstd
    ("rstd"), LayerNorm's mean ("mean") or rstd ("ln_rstd", biased
    variance)."""
    import torch
    if kind == "rstd":
        return torch.rsqrt(x.pow(2).mean(-1) + eps)
    mean = x.mean(-1)
    if kind == "mean":
        return mean
    return torch.rsqrt((x - mean[:, None]).pow(2).mean(-1) + eps)


def _silu(g):
    return g * (1.0 / (1.0 + (-g).exp()))


def _gelu_tanh(x):
    import torch
    return 0.5 * x * (1 + torch.tanh(math.sqrt(2 / math.pi) * (x + 0.044715 * x ** 3)))


def references(dt):
    import torch  # the GPU machine's; the build machine only needs module_text
    """name -> (input specs, reference(inputs in float64) -> outputs in float64).

    Input specs: ("rows", scale) for [tokens, hidden], ("rows_mean", scale)
    for rows of mean and deviation `scale` (LayerNorm's: its row means are
    then far from 0, and checked relative to them), ("feature", scale) for
    [hidden], ("feature_f32", scale) for an f32 weight, ("probs", _) for rows
    of a softmax, ("rstd", eps) for the f32 [tokens] rstd that RMSNorm's
    forward returns for the input before it, ("mean", _) and ("ln_rstd",
    eps) for the f32 [tokens] mean and rstd that LayerNorm's forward
    returns for it (each rounded to f32, as the forwards return them).
    """
    def rms(x, w, eps, offset, casting):
        rstd = 1.0 / (x.pow(2).mean(-1, keepdim=True) + eps).sqrt()
        if casting == "llama":
            y = _round(x * rstd, dt) * _round(offset + w, dt)
        else:
            y = x * rstd * (offset + w)
        return y, rstd.squeeze(-1)

    def layer_norm(x, w, b):
        mean, rstd = _row_stat("mean", x, 1e-5), _row_stat("ln_rstd", x, 1e-5)
        return (x - mean[:, None]) * rstd[:, None] * w + b, mean, rstd

    def softmax(x):
        e = (x - x.max(-1, keepdim=True).values).exp()
        return (e / e.sum(-1, keepdim=True),)

    def swiglu_grad(dy, g, u):
        s = 1.0 / (1.0 + (-g).exp())
        return dy * u * s * (1 + g * (1 - s)), dy * g * s

    def geglu_grad(dy, g, u):
        k = math.sqrt(2 / math.pi)
        t = torch.tanh(k * (g + 0.044715 * g ** 3))
        dgelu = 0.5 * (1 + t) + 0.5 * g * (1 - t * t) * k * (1 + 3 * 0.044715 * g * g)
        return dy * u * dgelu, dy * _gelu_tanh(g)

    def softmax_grad(dy, y):
        return (y * (dy - (dy * y).sum(-1, keepdim=True)),)

    def rms_grad(dy, x, w, rstd, offset, casting):
        # x_hat as the forward pass rounded it (llama: to the input dtype).
        r = rstd.unsqueeze(-1)
        x_hat = x * r
        g = dy * (offset + w)
        dot = (g * x_hat).sum(-1, keepdim=True)
        dx = r * (g - x_hat * dot / x.shape[-1])
        seen = _round(x_hat, dt) if casting == "llama" else x_hat
        return dx, (dy * seen).reshape(-1, x.shape[-1]).sum(0)

    def add_rms_grad(dy, s, w, r, dres):
        dx, dw = rms_grad(dy, s, w, r, 0.0, "llama")
        return dw, _round(dx, dt) + dres

    def ln_grad(dy, x, w, mean, rstd):
        # x_hat from the statistics given (the forward's, in f32).
        mean, rstd = mean[:, None], rstd[:, None]
        x_hat = (x - mean) * rstd
        g = dy * w
        dx = rstd * (g - g.mean(-1, keepdim=True) - x_hat * (g * x_hat).mean(-1, keepdim=True))
        h = x.shape[-1]
        return dx, (dy * x_hat).reshape(-1, h).sum(0), dy.reshape(-1, h).sum(0)

    def add_rms(x, r, w):
        s = _round(x + r, dt)
        return rms(s, w, 1e-5, 0.0, "llama")[0], s

    return {
        "rms_llama": ([("rows", 1.0), ("feature", 1.0)],
                      lambda x, w: rms(x, w, 1e-6, 0.0, "llama")),
        "rms_gemma": ([("rows", 1.0), ("feature_f32", 0.5)],
                      lambda x, w: (rms(x, w, 1e-6, 1.0, "gemma")[0],)),
        "add_rms": ([("rows", 1.0), ("rows", 1.0), ("feature", 1.0)], add_rms),
        "layer_norm": ([("rows_mean", 3.0), ("feature", 1.0), ("feature", 1.0)], layer_norm),
        "swiglu": ([("rows", 2.0), ("rows", 1.0)], lambda g, u: (_silu(g) * u,)),
        "geglu": ([("rows", 2.0), ("rows", 1.0)], lambda g, u: (_gelu_tanh(g) * u,)),
        "softmax": ([("rows", 3.0)], softmax),
        "silu_mul": ([("rows", 2.0), ("rows", 1.0)], lambda a, b: (_silu(a) * b,)),
        "rms_grad": ([("rows", 1.0), ("rows", 1.0), ("feature", 1.0), ("rstd", 1e-6)],
                     lambda dy, x, w, r: rms_grad(dy, x, w, r, 0.0, "llama")),
        "rms_grad_gemma": ([("rows", 1.0), ("rows", 1.0), ("feature_f32", 0.5),
                            ("rstd", 1e-6)],
                           lambda dy, x, w, r: rms_grad(dy, x, w, r, 1.0, "gemma")),
        "ln_grad": ([("rows", 1.0), ("rows_mean", 3.0), ("feature", 1.0), ("mean", 0.0),
                     ("ln_rstd", 1e-5)], ln_grad),
        "add_rms_grad": ([("rows", 1.0), ("rows", 1.0), ("feature", 1.0), ("rstd", 1e-6),
                          ("rows", 1.0)],
                         lambda dy, s, w, r, dres: add_rms_grad(dy, s, w, r, dres)),
        "swiglu_grad": ([("rows", 1.0), ("rows", 2.0), ("rows", 1.0)], swiglu_grad),
        "geglu_grad": ([("rows", 1.0), ("rows", 2.0), ("rows", 1.0)], geglu_grad),
        "softmax_grad": ([("rows", 1.0), ("probs", 1.0)], softmax_grad),
    }


# liger.ops configurations the GPU suite calls (test_ops_autograd.py); the build
# machine precompiles them (scripts/build-gpu-bundles.sh) into
# gpu-bundles/ops, which the suite passes as LIGER_OPS_BUNDLES.
def ops_cases():
    """name -> (spec, op name, input shapes, dtype, extra kwargs)."""
    from liger import ops
    return {
        "rms_llama_bf16": (ops.rms_norm_spec(1000, "bf16"), "rms_norm",
                           [(2, 7, 1000), (1000,)], "bf16", {}),
        "rms_gemma_f32": (ops.rms_norm_spec(4096, "f32", "f32", eps=1e-5, offset=1.0,
                                            casting="gemma"),
                          "rms_norm", [(5, 4096), (4096,)], "f32",
                          dict(eps=1e-5, offset=1.0, casting="gemma")),
        "swiglu_bf16": (ops.swiglu_spec(5120, "bf16"), "swiglu",
                        [(33, 5120), (33, 5120)], "bf16", {}),
        "geglu_f32": (ops.geglu_spec(1000, "f32"), "geglu", [(3, 1000), (3, 1000)], "f32", {}),
        "softmax_f32": (ops.softmax_spec(1000, "f32"), "softmax", [(4, 1000)], "f32", {}),
        "rope_f32": (ops.rope_spec(4, 2, 64, "f32"), "rope",
                     [(2, 4, 5, 64), (2, 2, 5, 64), (1, 5, 64), (1, 5, 64)], "f32", {}),
        "rope_bf16_batched": (ops.rope_spec(32, 8, 128, "bf16", broadcast_tables=False), "rope",
                              [(2, 32, 7, 128), (2, 8, 7, 128), (2, 7, 128), (2, 7, 128)],
                              "bf16", {}),
        # Head dimensions whose half no wider vector divides (one-element
        # chunks).
        "rope_bf16_d10": (ops.rope_spec(3, 1, 10, "bf16"), "rope",
                          [(2, 3, 7, 10), (2, 1, 7, 10), (1, 7, 10), (1, 7, 10)], "bf16", {}),
        "rope_f32_d6": (ops.rope_spec(2, 2, 6, "f32"), "rope",
                        [(1, 2, 5, 6), (1, 2, 5, 6), (1, 5, 6), (1, 5, 6)], "f32", {}),
    }


def ops_norm_cases():
    """liger.ops.layer_norm and liger.ops.add_rms_norm: name -> (spec, the
    shape of x). Rows no vector width divides (1, 7, 4097), a long one
    (32001: past the register budget), an f32 weight over bf16 rows, no
    bias, every casting. LigerLayerNorm's and LigerFusedAddRMSNorm's
    defaults are "ln_bf16_1000" and "add_rms_bf16_1000"
    (test_nn_modules.py)."""
    from liger import ops
    return {
        "ln_bf16_1000": (ops.layer_norm_spec(1000, "bf16", eps=1e-6), (2, 7, 1000)),
        "ln_f16_4097_no_bias": (ops.layer_norm_spec(4097, "f16", bias=False), (5, 4097)),
        "ln_f32_1": (ops.layer_norm_spec(1, "f32"), (9, 1)),
        "ln_bf16_7_f32_weight": (ops.layer_norm_spec(7, "bf16", "f32"), (333, 7)),
        "ln_bf16_32001": (ops.layer_norm_spec(32001, "bf16"), (3, 32001)),
        "ln_f32_5120": (ops.layer_norm_spec(5120, "f32", eps=1e-6), (33, 5120)),
        "add_rms_bf16_1000": (ops.add_rms_norm_spec(1000, "bf16"), (2, 7, 1000)),
        "add_rms_f16_4097_gemma": (ops.add_rms_norm_spec(4097, "f16", "f32", eps=1e-5,
                                                         offset=1.0, casting="gemma"), (5, 4097)),
        "add_rms_f32_7_none": (ops.add_rms_norm_spec(7, "f32", casting="none"), (333, 7)),
        "add_rms_bf16_1": (ops.add_rms_norm_spec(1, "bf16"), (4, 1)),
        "add_rms_bf16_32001": (ops.add_rms_norm_spec(32001, "bf16"), (3, 32001)),
    }


def norm_inputs(spec, shape, gen):
    """Random inputs of an ops_norm_cases spec on the GPU: layer_norm's x
    (rows of mean 3), weight and bias (where the spec has one);
    add_rms_norm's x, residual and weight."""
    import torch
    dtype, wdtype = torch_dtype(spec.dtype), torch_dtype(spec.weight_dtype)
    h = shape[-1]

    def randn(*size, scale=1.0, shift=0.0):
        return torch.randn(size, generator=gen, device="cuda") * scale + shift
    if spec.op == "layer_norm":
        return [randn(*shape, scale=2.0, shift=3.0).to(dtype), randn(h, shift=1.0).to(wdtype)] \
            + ([randn(h).to(wdtype)] if spec.bias else [])
    return [randn(*shape).to(dtype), randn(*shape).to(dtype),
            randn(h, scale=0.5, shift=1.0 - spec.offset).to(wdtype)]


def norm_reference(spec, inputs):
    """The outputs of an ops_norm_cases spec's op in float64 on float64
    `inputs` (differentiable): F.layer_norm's; add + RMSNorm's normalized
    sum and sum, the sum rounded to the rows' dtype (a returned tensor) and
    x_hat too with casting "llama" (before the weight), the roundings not
    differentiated."""
    import torch
    if spec.op == "layer_norm":
        x, w = inputs[:2]
        return (torch.nn.functional.layer_norm(x, (x.shape[-1],), w,
                                               inputs[2] if spec.bias else None, spec.eps),)

    def rounded(t):
        return t + (_round(t.detach(), spec.dtype) - t.detach())
    x, res, w = inputs
    total = rounded(x + res)
    x_hat = total * torch.rsqrt(total.pow(2).mean(-1, keepdim=True) + spec.eps)
    if spec.casting == "llama":
        x_hat = rounded(x_hat)
    return x_hat * (spec.offset + w), total


def ops_ce_cases():
    """liger.ops.cross_entropy: name -> (spec, vocab, dtype, tokens, kwargs)."""
    from liger import ops
    return {
        "ce_bf16_mean": (ops.cross_entropy_spec(1000, "bf16"), 1000, "bf16", 37, {}),
        "ce_f32_none_all": (ops.cross_entropy_spec(
            3000, "f32", "i32", ignore_index=-1, label_smoothing=0.1, reduction="none",
            softcap=30.0, lse_square_scale=1e-4, weighted=True), 3000, "f32", 9,
            dict(ignore_index=-1, label_smoothing=0.1, reduction="none", softcap=30.0,
                 lse_square_scale=1e-4)),
        # Vocabularies whose loss and gradient did not compile before (the
        # gradient's cp.async of one element): GPT-2's in bf16 and f16,
        # 32001 in f32.
        "ce_bf16_50257": (ops.cross_entropy_spec(50257, "bf16"), 50257, "bf16", 37, {}),
        "ce_f16_50257": (ops.cross_entropy_spec(50257, "f16"), 50257, "f16", 37, {}),
        "ce_f32_32001": (ops.cross_entropy_spec(32001, "f32"), 32001, "f32", 37, {}),
        # The z-loss returned apart (the kernel's second output): the mean
        # of bf16 logits, and per token with class weights and every
        # attribute over GPT-2's vocabulary.
        "ce_bf16_zloss_mean": (ops.cross_entropy_spec(
            1000, "bf16", lse_square_scale=1e-4, return_z_loss=True), 1000, "bf16", 37,
            dict(lse_square_scale=1e-4, return_z_loss=True)),
        "ce_f32_zloss_none_all": (ops.cross_entropy_spec(
            50257, "f32", "i32", ignore_index=-1, label_smoothing=0.1, reduction="none",
            softcap=30.0, lse_square_scale=1e-4, weighted=True, return_z_loss=True), 50257,
            "f32", 9, dict(ignore_index=-1, label_smoothing=0.1, reduction="none",
                           softcap=30.0, lse_square_scale=1e-4, return_z_loss=True)),
    }


def ops_divergence_cases():
    """liger.ops.kl_div and liger.ops.jsd: name -> (spec, op, (tokens,
    vocab), kwargs). Vocabularies of 1, 7, GPT-2's 50257 (the loop form,
    peeled to 16-byte chunks), Llama-3's 128256 and 262147 (the loop form);
    37 tokens, or 1."""
    from liger import specs
    kl, jsd = specs.kl_div_spec, specs.jsd_spec
    return {
        "kl_bf16_50257_batchmean": (kl(50257, "bf16"), "kl_div", (37, 50257),
                                    dict(reduction="batchmean")),
        "kl_f32_7_none_log": (kl(7, "f32", log_target=True, pointwise=True), "kl_div",
                              (37, 7), dict(reduction="none", log_target=True)),
        "kl_f16_128256_sum": (kl(128256, "f16"), "kl_div", (9, 128256), dict(reduction="sum")),
        "kl_bf16_1_mean": (kl(1, "bf16"), "kl_div", (37, 1), dict(reduction="mean")),
        "kl_f32_262147_log": (kl(262147, "f32", log_target=True), "kl_div", (5, 262147),
                              dict(reduction="batchmean", log_target=True)),
        "jsd_bf16_50257_labels": (jsd(50257, "bf16", labels="i64"), "jsd", (37, 50257),
                                  dict(labels="i64")),
        "jsd_f32_7_forward_kl": (jsd(7, "f32", beta=0.0), "jsd", (37, 7), dict(beta=0.0)),
        "jsd_f16_128256_reverse_kl": (jsd(128256, "f16", beta=1.0, labels="i32"), "jsd",
                                      (9, 128256), dict(beta=1.0, labels="i32")),
        "jsd_bf16_262147": (jsd(262147, "bf16", beta=0.1, ignore_index=0, labels="i64"), "jsd",
                            (5, 262147), dict(beta=0.1, ignore_index=0, labels="i64")),
        "jsd_f32_1_one_token": (jsd(1, "f32"), "jsd", (1, 1), {}),
    }


def ops_flce_cases():
    """liger.ops.fused_linear_cross_entropy: name -> (spec, (tokens, hidden,
    vocab), memory budget in bytes, kwargs). The budgets force 2 to 3 chunks
    (the last one partial)."""
    from liger import ops
    return {
        "flce_bf16_mean": (ops.fused_linear_cross_entropy_spec(1000, 256, "bf16"),
                           (300, 256, 1000), 128 * 1000 * 2, {}),
        "flce_bf16_sum_all": (ops.fused_linear_cross_entropy_spec(
            4000, 512, "bf16", label_smoothing=0.1, reduction="sum", softcap=30.0,
            lse_square_scale=1e-4), (77, 512, 4000), 64 * 4000 * 2,
            dict(label_smoothing=0.1, reduction="sum", softcap=30.0, lse_square_scale=1e-4)),
        # Class weights (f32 [V], drawn by the test): the mean divides by
        # the counted tokens' total weight.
        "flce_bf16_weighted": (ops.fused_linear_cross_entropy_spec(1000, 256, "bf16",
                                                                   weighted=True),
                               (200, 256, 1000), 128 * 1000 * 2, dict(weighted=True)),
        # dW summed in an f32 buffer across the chunks, rounded once.
        "flce_bf16_dw_f32": (ops.fused_linear_cross_entropy_spec(1000, 256, "bf16", dw_f32=True),
                             (300, 256, 1000), 128 * 1000 * 2, dict(dw_f32=True)),
        # Per token (reduction "none"): the backward runs the chunks again
        # with each token's incoming gradient; odd token counts, class
        # weights and every attribute, and Llama-3's lm_head.
        "flce_bf16_none_all": (ops.fused_linear_cross_entropy_spec(
            4000, 512, "bf16", label_smoothing=0.1, reduction="none", softcap=30.0,
            lse_square_scale=1e-4, weighted=True), (77, 512, 4000), 64 * 4000 * 2,
            dict(label_smoothing=0.1, reduction="none", softcap=30.0, lse_square_scale=1e-4,
                 weighted=True)),
        "flce_bf16_none_llama3": (ops.fused_linear_cross_entropy_spec(
            128256, 4096, "bf16", reduction="none", dw_f32=True), (301, 4096, 128256),
            128 * 128256 * 2, dict(reduction="none", dw_f32=True)),
        # An lm_head bias (the logits kernel's epilogue adds it; dbias the
        # column sums of each chunk's G) and the z-loss returned apart:
        # the mean, per token with every attribute, a frozen bias with the
        # sum into f32 dW, one token, and Llama-3's lm_head.
        "flce_bf16_bias_zloss_mean": (ops.fused_linear_cross_entropy_spec(
            1000, 256, "bf16", label_smoothing=0.1, lse_square_scale=1e-4, bias=True,
            return_z_loss=True), (300, 256, 1000), 128 * 1000 * 2,
            dict(label_smoothing=0.1, lse_square_scale=1e-4, bias=True, return_z_loss=True)),
        "flce_bf16_bias_zloss_none_all": (ops.fused_linear_cross_entropy_spec(
            4000, 512, "bf16", label_smoothing=0.1, reduction="none", softcap=30.0,
            lse_square_scale=1e-4, weighted=True, bias=True, return_z_loss=True),
            (77, 512, 4000), 64 * 4000 * 2,
            dict(label_smoothing=0.1, reduction="none", softcap=30.0, lse_square_scale=1e-4,
                 weighted=True, bias=True, return_z_loss=True)),
        "flce_bf16_frozen_bias_sum_dw_f32": (ops.fused_linear_cross_entropy_spec(
            1000, 256, "bf16", reduction="sum", dw_f32=True, bias=True), (200, 256, 1000),
            128 * 1000 * 2, dict(reduction="sum", dw_f32=True, bias=True, frozen_bias=True)),
        "flce_bf16_bias_zloss_one_token": (ops.fused_linear_cross_entropy_spec(
            1000, 256, "bf16", lse_square_scale=1e-4, bias=True, return_z_loss=True),
            (1, 256, 1000), 128 * 1000 * 2,
            dict(lse_square_scale=1e-4, bias=True, return_z_loss=True)),
        "flce_bf16_bias_zloss_llama3": (ops.fused_linear_cross_entropy_spec(
            128256, 4096, "bf16", lse_square_scale=1e-4, bias=True, return_z_loss=True),
            (301, 4096, 128256), 256 * 128256 * 2,
            dict(lse_square_scale=1e-4, bias=True, return_z_loss=True)),
    }


def preference_cases():
    """liger.preference's losses: name -> (sequences 2B, length T, hidden,
    vocab, memory budget in bytes): odd sizes in 3 chunks, and Llama-3's
    lm_head in 2. Their kernels: preference_specs()."""
    return {"odd": (6, 37, 512, 4000, 80 * 4000 * 2),
            "llama3": (4, 256, 4096, 128256, 512 * 128256 * 2)}


def preference_specs():
    """The fused loss's kernels the preference losses run: per token, and
    the mean (ORPO's nll_target)."""
    from liger import ops
    return [ops.fused_linear_cross_entropy_spec(v, h, "bf16", reduction=reduction)
            for _, _, h, v, _ in preference_cases().values() for reduction in ("none", "mean")]


def fused_linear_jsd_cases():
    """liger.ops.fused_linear_jsd: name -> (tokens, student hidden, teacher
    hidden, vocab, dtype, memory budget in bytes, kwargs): odd sizes in 3
    chunks with shift labels, and a Llama-3.2-1B student of a Llama-3-8B
    teacher (Llama-3's vocabulary) in 2 chunks, dW summed in f32. Their
    kernels: fused_linear_jsd_specs()."""
    return {
        "fljsd_bf16_odd": (77, 512, 768, 4000, "bf16", 30 * 4000 * 4,
                           dict(jsd_beta=0.3, temperature=2.0, labels="i64")),
        "fljsd_f16_forward_kl": (64, 256, 256, 1000, "f16", 40 * 1000 * 4,
                                 dict(jsd_beta=0.0, temperature=0.7)),
        "fljsd_bf16_llama3": (301, 2048, 4096, 128256, "bf16", 256 * 128256 * 4,
                              dict(dw_f32=True, labels="i64")),
    }


def fused_linear_jsd_specs():
    """The kernels fused_linear_jsd runs for fused_linear_jsd_cases()."""
    from liger import ops
    out = []
    for _, hs, ht, v, dt, _, kw in fused_linear_jsd_cases().values():
        out += ops.fused_linear_jsd_specs(v, hs, ht, dt, kw.get("jsd_beta", 0.5), -100,
                                          kw.get("labels"), kw.get("temperature", 1.0),
                                          kw.get("dw_f32", False))
    return out


def lora_cases():
    """liger.ops.lora_linear: name -> its spec. Llama's 4096 x 4096 and an
    odd projection (K = 520: a partial last K slice; N = 1000: a partial
    column tile), each at rank 16, 32 and 64, in bf16 (no bias) and f16
    (a bias); scale 2, 0.5 or 1 by rank. Each runs at every row count of
    LORA_ROWS."""
    from liger import ops
    scales = {16: 2.0, 32: 0.5, 64: 1.0}
    return {"lora_%s_%dx%d_r%d" % (dt, k, n, r): ops.lora_linear_spec(
        k, n, r, dt, scales[r], bias=dt == "f16")
        for k, n in ((4096, 4096), (520, 1000)) for r in (16, 32, 64) for dt in ("bf16", "f16")}


# The token counts each LoRA case runs: one row, a partial row tile, several
# tiles with a partial last one, many, and enough row tiles that most
# column tiles start after column 0 has published x·Aᵀ (the hand-over).
LORA_ROWS = (1, 7, 77, 4096, 16384)


def gated_mlp_cases():
    """liger.ops.gated_mlp: name -> its spec. Llama-3-8B's MLP (4096 ->
    14336), a non-Llama width (Qwen2.5-1.5B's 1536 -> 8960: 8960 is no
    multiple of 128, a partial column tile), an odd one (520 -> 1000: a
    partial K slice and column tile); SwiGLU in bf16, GeGLU (tanh) in f16
    and GeGLU (erf) in bf16 at the odd size."""
    from liger import ops
    return {
        "swiglu_bf16_4096x14336": ops.gated_mlp_spec(4096, 14336, "bf16"),
        "swiglu_bf16_1536x8960": ops.gated_mlp_spec(1536, 8960, "bf16"),
        "geglu_f16_2048x16384": ops.gated_mlp_spec(2048, 16384, "f16", "geglu", "tanh"),
        "geglu_none_bf16_520x1000": ops.gated_mlp_spec(520, 1000, "bf16", "geglu", "none"),
    }


# The token counts each gated MLP case runs (the big ones at 16384 too, in
# test_ops_gated_mlp_gpu.py).
GATED_MLP_ROWS = (1, 7, 77, 4096)


def linear_rope_cases():
    """liger.ops.linear_rope: name -> its spec. Llama-3-8B's q/k
    projections (4096 -> 32 q and 8 kv heads of 128, tables [1, T, D]), a
    non-Llama width with biases and per-batch tables [B, T, D]
    (Qwen2.5-1.5B's 1536 -> 12 and 2 heads of 128), an odd one in f16 (520:
    a partial last K slice; 5 and 1 heads of 64, per-batch tables), head
    size 256 (Gemma-like: 2048 -> 8 and 1 heads) and a small head size 16
    in f16 with biases (72 -> 3 and 3 heads). Each runs at every (B, T) of
    LINEAR_ROPE_SHAPES."""
    from liger import ops
    return {
        "llama3_bf16_4096_q32_k8_d128": ops.linear_rope_spec(4096, 32, 8, 128, "bf16"),
        "qwen2_bf16_1536_q12_k2_d128_bias_batched": ops.linear_rope_spec(
            1536, 12, 2, 128, "bf16", bias=True, broadcast_tables=False),
        "odd_f16_520_q5_k1_d64_batched": ops.linear_rope_spec(
            520, 5, 1, 64, "f16", broadcast_tables=False),
        "gemma_bf16_2048_q8_k1_d256": ops.linear_rope_spec(2048, 8, 1, 256, "bf16"),
        "small_f16_72_q3_k3_d16_bias": ops.linear_rope_spec(72, 3, 3, 16, "f16", bias=True),
    }


# The (batch, sequence) shapes each q/k projection case runs: one token, odd
# lengths (a partial row tile), several batches, many tokens (the Llama-3-8B
# case at 4 x 4096 too, in test_ops_linear_rope_gpu.py).
LINEAR_ROPE_SHAPES = ((1, 1), (1, 7), (3, 77), (2, 2048))


# The mma.sync matmul template (liger-compile compiles matmul groups by default):
# name -> (K, N, dtype, tile_m, tile_n, stages). N = 1000 leaves a partial
# 64-column tile; the 64-row tile runs 4 warps.
# name -> (K, N, dtype, tile_m, tile_n, stages, mma): mma.sync (sm_80 and
# later) and wgmma + TMA (sm_90a) kernels.
MATMULS = {
    "proj_4096_1024": (4096, 1024, "bf16", 128, 128, 3, "mma_sync"),
    "proj_1024_1000": (1024, 1000, "bf16", 128, 64, 4, "mma_sync"),
    "proj_512_256_m64": (512, 256, "bf16", 64, 64, 4, "mma_sync"),
    "proj_256_128_f16": (256, 128, "f16", 128, 128, 2, "mma_sync"),
    "proj_512_256_res_silu": (512, 256, "bf16", 128, 64, 3, "mma_sync"),
    "gate_up_512_1000_swiglu": (512, 1000, "bf16", 128, 64, 3, "mma_sync"),
    "wg_4096_1024": (4096, 1024, "bf16", 128, 256, 4, "wgmma"),
    "wg_1024_1000": (1024, 1000, "bf16", 128, 128, 4, "wgmma"),
    "wg_520_264_ktail": (520, 264, "bf16", 128, 256, 3, "wgmma"),
    "wg_512_256_m64": (512, 256, "bf16", 64, 128, 4, "wgmma"),
    "wg_256_128_f16": (256, 128, "f16", 128, 128, 2, "wgmma"),
    "wg_512_256_res_silu": (512, 256, "bf16", 128, 256, 3, "wgmma"),
    "wg_gate_up_512_1000_swiglu": (512, 1000, "bf16", 128, 128, 3, "wgmma"),
    # Llama-3-8B's up projection at the configuration the selector picks.
    "wg_llama_up_4096_14336": (4096, 14336, "bf16", 128, 256, 4, "wgmma"),
    # An RMSNorm prologue (wgmma only): Llama's v projection, a partial
    # column tile with a K tail, Gemma's (1 + g), and a gate/up pair.
    "wg_rms_4096_1024": (4096, 1024, "bf16", 128, 256, 4, "wgmma"),
    "wg_rms_520_1000": (520, 1000, "bf16", 128, 128, 3, "wgmma"),
    "wg_rms_gemma_512_256": (512, 256, "bf16", 64, 256, 4, "wgmma"),
    "wg_rms_gate_up_512_1000_swiglu": (512, 1000, "bf16", 128, 128, 3, "wgmma"),
    # liger.linear's bias, added in f32 before the rounding.
    "proj_bias_512_256": (512, 256, "bf16", 128, 64, 3, "mma_sync"),
    "wg_bias_1024_1000": (1024, 1000, "bf16", 128, 128, 4, "wgmma"),
    # LoRA (wgmma only): r = 16 (32-byte swizzled B), 32 (64-byte), 64
    # (128-byte, after an RMSNorm), Llama's 4096 -> 4096 at the default tile.
    "wg_lora_512_1000_r16": (512, 1000, "bf16", 128, 128, 3, "wgmma"),
    "wg_lora_4096_4096_r16": (4096, 4096, "bf16", 128, 256, 4, "wgmma"),
    "wg_lora_1024_256_r32": (1024, 256, "bf16", 64, 256, 4, "wgmma"),
    "wg_rms_lora_512_256_r64": (512, 256, "bf16", 128, 128, 3, "wgmma"),
    # GELU (exact) after a residual add, GeGLU (tanh) of a gate/up pair, on
    # both templates.
    "wg_512_256_res_gelu": (512, 256, "bf16", 128, 256, 3, "wgmma"),
    "wg_gate_up_512_1000_geglu": (512, 1000, "bf16", 128, 128, 3, "wgmma"),
    "proj_512_256_res_gelu": (512, 256, "bf16", 128, 64, 3, "mma_sync"),
    "gate_up_512_1000_geglu": (512, 1000, "bf16", 128, 64, 3, "mma_sync"),
    # LoRA on mma.sync: r = 16 with a partial column tile, r = 32 after an
    # RMSNorm.
    "ms_lora_512_1000_r16": (512, 1000, "bf16", 128, 64, 3, "mma_sync"),
    "ms_rms_lora_512_256_r32": (512, 256, "bf16", 128, 128, 3, "mma_sync"),
    # The RMSNorm prologue on mma.sync.
    "proj_rms_512_1000": (512, 1000, "bf16", 128, 64, 3, "mma_sync"),
    "proj_rms_gemma_256_128_f16": (256, 128, "f16", 128, 128, 2, "mma_sync"),
    # The pingpong schedule (persistent CTAs, two consumer warpgroups, each
    # on 64-row tiles or 128-row tiles as two row blocks): a TMA-stored
    # projection, K and N tails, f16, a gate/up pair, an RMSNorm prologue, a
    # residual epilogue.
    "pp_4096_1024": (4096, 1024, "bf16", 64, 256, 4, "wgmma_pp"),
    "pp_520_264_ktail": (520, 264, "bf16", 64, 256, 3, "wgmma_pp"),
    "pp_256_128_f16": (256, 128, "f16", 64, 128, 2, "wgmma_pp"),
    "pp_gate_up_512_1000_swiglu": (512, 1000, "bf16", 64, 128, 4, "wgmma_pp"),
    "pp_rms_520_1000": (520, 1000, "bf16", 64, 128, 3, "wgmma_pp"),
    "pp_512_256_res_silu": (512, 256, "bf16", 64, 256, 3, "wgmma_pp"),
    "pp128_4096_1024": (4096, 1024, "bf16", 128, 128, 5, "wgmma_pp"),
    "pp128_520_264_ktail": (520, 264, "bf16", 128, 128, 4, "wgmma_pp"),
    "pp128_gate_up_512_1000_swiglu": (512, 1000, "bf16", 128, 64, 4, "wgmma_pp"),
    "pp128_rms_520_1000": (520, 1000, "bf16", 128, 128, 4, "wgmma_pp"),
    # (The stages the compiler gives pingpong's 128 x 128 tile beside the
    # rotating output boxes.)
    "pp128_s6_4096_1024": (4096, 1024, "bf16", 128, 128, 6, "wgmma_pp"),
    # The persistent schedule (one CTA per SM looping over tiles, one set
    # of consumer warpgroups, the output through rotating boxes beside the
    # ring): the same variety at the data-parallel tiles, and the 4 stages
    # the compiler gives 128 x 256 (shared memory filled to 230400 bytes).
    "ps_4096_1024": (4096, 1024, "bf16", 128, 256, 3, "wgmma_ps"),
    "ps_s4_4096_1024": (4096, 1024, "bf16", 128, 256, 4, "wgmma_ps"),
    # Several tiles a warpgroup at 16384 rows (the rotating boxes reused
    # across tiles) with a residual epilogue's global loads, and in f16.
    "ps_4096_1024_res_silu": (4096, 1024, "bf16", 128, 256, 4, "wgmma_ps"),
    "pp_4096_1024_res_silu": (4096, 1024, "bf16", 64, 256, 4, "wgmma_pp"),
    "ps_4096_1024_f16": (4096, 1024, "f16", 128, 256, 4, "wgmma_ps"),
    "ps_520_264_ktail": (520, 264, "bf16", 128, 128, 4, "wgmma_ps"),
    "ps_256_128_f16": (256, 128, "f16", 64, 128, 2, "wgmma_ps"),
    "ps_gate_up_512_1000_swiglu": (512, 1000, "bf16", 128, 128, 3, "wgmma_ps"),
    "ps_rms_520_1000": (520, 1000, "bf16", 128, 128, 3, "wgmma_ps"),
    "ps_512_256_res_silu": (512, 256, "bf16", 128, 256, 3, "wgmma_ps"),
    # Clusters of two CTAs (data-parallel, the weight tiles multicast): an
    # odd count of row tiles leaves the last cluster's second CTA past the
    # rows; a K tail, a 64-row tile, the gated pair, the norm prologue.
    "cl_4096_1024": (4096, 1024, "bf16", 128, 256, 4, "wgmma_cl"),
    "cl_520_264_ktail": (520, 264, "bf16", 128, 128, 4, "wgmma_cl"),
    "cl_256_128_f16_m64": (256, 128, "f16", 64, 128, 2, "wgmma_cl"),
    "cl_gate_up_512_1000_swiglu": (512, 1000, "bf16", 128, 128, 3, "wgmma_cl"),
    "cl_rms_520_1000": (520, 1000, "bf16", 128, 128, 3, "wgmma_cl"),
    "cl_512_256_res_silu": (512, 256, "bf16", 128, 256, 3, "wgmma_cl"),
}
# LoRA projections: name -> (r, scale); A [r, K] and B [N, r] follow the
# weight.
MATMUL_LORA = {"wg_lora_512_1000_r16": (16, 2.0), "wg_lora_4096_4096_r16": (16, 2.0),
               "wg_lora_1024_256_r32": (32, 0.5), "wg_rms_lora_512_256_r64": (64, 1.0),
               "ms_lora_512_1000_r16": (16, 2.0), "ms_rms_lora_512_256_r32": (32, 0.5)}
# Projections with a bias b [N] (the kernel's input after the weight).
MATMUL_BIAS = {"proj_bias_512_256", "wg_bias_1024_1000"}
# Prologues before the projection: name -> the norm (its weight g [K] is the
# kernel's second input).
MATMUL_PROLOGUES = {"wg_rms_4096_1024": "rms_norm",
                    "proj_rms_512_1000": "rms_norm",
                    "proj_rms_gemma_256_128_f16": "rms_norm_gemma",
                    "wg_rms_lora_512_256_r64": "rms_norm",
                    "ms_rms_lora_512_256_r32": "rms_norm",
                    "wg_rms_520_1000": "rms_norm",
                    "wg_rms_gemma_512_256": "rms_norm_gemma",
                    "wg_rms_gate_up_512_1000_swiglu": "rms_norm",
                    "pp_rms_520_1000": "rms_norm",
                    "pp128_rms_520_1000": "rms_norm",
                    "ps_rms_520_1000": "rms_norm",
                    "cl_rms_520_1000": "rms_norm"}
# Epilogues after the projection: name -> the ops (a residual input [rows, N]
# is the kernel's third input).
MATMUL_EPILOGUES = {"proj_512_256_res_silu": "add_silu",
                    "gate_up_512_1000_swiglu": "swiglu",  # a second weight [N, K]
                    "wg_512_256_res_silu": "add_silu",
                    "pp_512_256_res_silu": "add_silu",
                    "pp_gate_up_512_1000_swiglu": "swiglu",
                    "pp128_gate_up_512_1000_swiglu": "swiglu",
                    "ps_512_256_res_silu": "add_silu",
                    "ps_4096_1024_res_silu": "add_silu",
                    "pp_4096_1024_res_silu": "add_silu",
                    "ps_gate_up_512_1000_swiglu": "swiglu",
                    "cl_512_256_res_silu": "add_silu",
                    "cl_gate_up_512_1000_swiglu": "swiglu",
                    "wg_gate_up_512_1000_swiglu": "swiglu",
                    "wg_rms_gate_up_512_1000_swiglu": "swiglu",
                    "wg_512_256_res_gelu": "add_gelu",
                    "proj_512_256_res_gelu": "add_gelu",
                    "wg_gate_up_512_1000_geglu": "geglu_tanh",
                    "gate_up_512_1000_geglu": "geglu_tanh"}
MATMUL_ROWS = [1, 7, 77, 100, 4096, 16384]
# The gradient products of y = x · Wᵀ with W [N, K]: name -> (op, N, K,
# dtype, tile_m, tile_n, stages, mma). "dx": dx = dy · W, dy [rows, N];
# "dw": dW = dyᵀ · x over the rows, x [rows, K]; "dw_acc": the same added
# into an f32 [N, K] buffer (the kernel's third input); "dw_acc_lowp" into a
# buffer of the input's dtype (summed in f32, rounded once; on wgmma the old
# tile comes in by TMA, one warpgroup's or two). Llama's down
# projection (dx [rows, 14336]), partial tiles on every side (N = 1000, K =
# 520), a 64-row tile, f16; LoRA's backward shapes at r = 16 (u = dy · B,
# dx += u · A, dA = uᵀ · x, dB = dyᵀ · t); and the mma.sync template.
MATMUL_GRADS = {
    "wg_dx_llama_down_4096_14336": ("dx", 4096, 14336, "bf16", 128, 256, 4, "wgmma"),
    "wg_dx_1000_520": ("dx", 1000, 520, "bf16", 128, 256, 3, "wgmma"),
    "wg_dx_512_256_m64": ("dx", 512, 256, "bf16", 64, 128, 4, "wgmma"),
    "wg_dw_1024_4096": ("dw", 1024, 4096, "bf16", 128, 256, 4, "wgmma"),
    "wg_dw_1000_520": ("dw", 1000, 520, "bf16", 128, 256, 3, "wgmma"),
    "wg_dw_256_128_f16": ("dw", 256, 128, "f16", 64, 128, 2, "wgmma"),
    "wg_dw_acc_512_256": ("dw_acc", 512, 256, "bf16", 128, 128, 4, "wgmma"),
    "wg_dw_acc_lowp_1000_520": ("dw_acc_lowp", 1000, 520, "bf16", 128, 256, 3, "wgmma"),
    "wg_dw_acc_lowp_200_200_f16_m64": ("dw_acc_lowp", 200, 200, "f16", 64, 128, 4, "wgmma"),
    "wg_lora_u_4096_16": ("dx", 4096, 16, "bf16", 128, 64, 4, "wgmma"),
    "wg_lora_dx_16_4096": ("dx", 16, 4096, "bf16", 128, 256, 4, "wgmma"),
    "wg_lora_da_16_4096": ("dw", 16, 4096, "bf16", 64, 256, 4, "wgmma"),
    "wg_lora_db_4096_16": ("dw", 4096, 16, "bf16", 128, 64, 4, "wgmma"),
    "ms_dx_1024_4096": ("dx", 1024, 4096, "bf16", 128, 128, 3, "mma_sync"),
    "ms_dx_512_1000": ("dx", 512, 1000, "bf16", 128, 64, 3, "mma_sync"),
    "ms_dw_1000_520": ("dw", 1000, 520, "bf16", 128, 64, 4, "mma_sync"),
    "ms_dw_acc_256_128_f16": ("dw_acc", 256, 128, "f16", 64, 64, 2, "mma_sync"),
    "ms_dw_acc_lowp_512_256": ("dw_acc_lowp", 512, 256, "bf16", 128, 64, 3, "mma_sync"),
    # The pingpong schedule: dx and dW with partial tiles on every side,
    # dW into an f32 buffer.
    "pp_dx_1000_520": ("dx", 1000, 520, "bf16", 64, 256, 3, "wgmma_pp"),
    "pp_dw_1000_520": ("dw", 1000, 520, "bf16", 64, 256, 3, "wgmma_pp"),
    "pp_dw_acc_512_256": ("dw_acc", 512, 256, "bf16", 64, 128, 4, "wgmma_pp"),
    "pp128_dx_1000_520": ("dx", 1000, 520, "bf16", 128, 128, 4, "wgmma_pp"),
    "pp128_dw_1000_520": ("dw", 1000, 520, "bf16", 128, 128, 4, "wgmma_pp"),
    "pp128_dw_acc_512_256": ("dw_acc", 512, 256, "bf16", 128, 128, 4, "wgmma_pp"),
    "ps_dx_1000_520": ("dx", 1000, 520, "bf16", 128, 256, 3, "wgmma_ps"),
    "ps_dw_1000_520": ("dw", 1000, 520, "bf16", 128, 256, 3, "wgmma_ps"),
    "ps_dw_acc_512_256": ("dw_acc", 512, 256, "bf16", 128, 128, 4, "wgmma_ps"),
    # A 16-bit dW buffer's old tile in the tile loops: each consumer set's
    # own, copied in again for each of the CTA's tiles once the set's
    # previous store has read it (8192 x 4096 and 4096 x 4096: 2048 and 512
    # tiles, so that on up to 264 SMs every set uses its region at least
    # three times and the mbarriers' parity wraps; 1000 x 520: partial
    # tiles, a 64-row f16 tile).
    "pp_dw_acc_lowp_8192_4096": ("dw_acc_lowp", 8192, 4096, "bf16", 128, 128, 5, "wgmma_pp"),
    "pp_dw_acc_lowp_1000_520_f16_m64": ("dw_acc_lowp", 1000, 520, "f16", 64, 128, 4, "wgmma_pp"),
    "ps_dw_acc_lowp_4096_4096": ("dw_acc_lowp", 4096, 4096, "bf16", 128, 256, 3, "wgmma_ps"),
    "ps_dw_acc_lowp_1000_520": ("dw_acc_lowp", 1000, 520, "bf16", 128, 256, 3, "wgmma_ps"),
    # Clusters: dx's W and dW's x multicast in 64-column boxes; dW's 3 or 8
    # row tiles (of dy's 384 or 1000 features: an odd count past the end),
    # into f32 and 16-bit buffers.
    "cl_dx_1000_520": ("dx", 1000, 520, "bf16", 128, 256, 3, "wgmma_cl"),
    "cl_dx_llama_down_4096_14336": ("dx", 4096, 14336, "bf16", 128, 256, 4, "wgmma_cl"),
    "cl_dw_1000_520": ("dw", 1000, 520, "bf16", 128, 256, 3, "wgmma_cl"),
    "cl_dw_acc_384_256": ("dw_acc", 384, 256, "bf16", 128, 128, 4, "wgmma_cl"),
    "cl_dw_acc_lowp_1000_520": ("dw_acc_lowp", 1000, 520, "bf16", 128, 256, 3, "wgmma_cl"),
}

# q/k projections with RoPE in the epilogue: name -> (K, Hq, Hkv, D,
# dtype, tile_m, tile_n, stages, norm, bias, batched tables, mma). The
# kernel's inputs: x [B, T, K], [g], Wq, Wk, [bq, bk], cos, sin; outputs q
# [B, Hq, T, D], k [B, Hkv, T, D]. Llama-3-8B's with its RMSNorm, a K tail
# with biases (Qwen2) and per-batch tables at head_dim 64 (two heads per
# tile), f16; on mma.sync (the rotation's partner exchanged through shared
# memory) Llama's with its norm, and biases with per-batch tables.
MATMUL_ROPE = {
    "wg_qk_rope_llama_rms": (4096, 32, 8, 128, "bf16", 128, 256, 4, True, False, False, "wgmma"),
    "wg_qk_rope_520_d64_bias": (520, 4, 2, 64, "bf16", 128, 128, 3, False, True, True, "wgmma"),
    "wg_qk_rope_256_f16": (256, 2, 1, 128, "f16", 64, 128, 2, False, False, False, "wgmma"),
    "ms_qk_rope_llama_rms": (4096, 32, 8, 128, "bf16", 128, 128, 3, True, False, False,
                             "mma_sync"),
    "ms_qk_rope_512_d64_bias": (512, 4, 2, 64, "bf16", 128, 64, 3, False, True, True,
                                "mma_sync"),
    "pp_qk_rope_llama_rms": (4096, 32, 8, 128, "bf16", 64, 256, 4, True, False, False,
                             "wgmma_pp"),
    "pp_qk_rope_520_d64_bias": (520, 4, 2, 64, "bf16", 64, 128, 3, False, True, True,
                                "wgmma_pp"),
    "pp128_qk_rope_llama_rms": (4096, 32, 8, 128, "bf16", 128, 128, 5, True, False, False,
                                "wgmma_pp"),
    "ps_qk_rope_llama_rms": (4096, 32, 8, 128, "bf16", 128, 256, 4, True, False, False,
                             "wgmma_ps"),
    "ps_qk_rope_520_d64_bias": (520, 4, 2, 64, "bf16", 128, 128, 4, False, True, True,
                                "wgmma_ps"),
}
MATMUL_ROPE_SHAPES = [(1, 1), (1, 7), (9, 7), (2, 77), (1, 4096), (8, 2048)]

# The gated MLP's backward in one kernel: dh = dy · W_down [N, K] (dy [rows,
# N]), then the activation's gradient in the epilogue reading gate and up
# [rows, K]: name -> (activation, N, K, dtype, tile_m, tile_n, stages, mma,
# dh kept). Results: [dh,] dgate, dup. Llama-3-8B's down projection, K and N
# tails, GeGLU (tanh) in f16, dh also written, the mma.sync template.
MATMUL_GATED_GRADS = {
    "wg_swiglu_grad_llama_4096_14336": ("swiglu", 4096, 14336, "bf16", 128, 256, 4, "wgmma",
                                        False),
    "wg_swiglu_grad_1000_520_dh": ("swiglu", 1000, 520, "bf16", 128, 256, 3, "wgmma", True),
    "wg_geglu_grad_512_1000_f16": ("geglu_tanh", 512, 1000, "f16", 64, 128, 4, "wgmma", False),
    "ms_swiglu_grad_1024_1000": ("swiglu", 1024, 1000, "bf16", 128, 64, 3, "mma_sync", False),
    "ms_geglu_grad_512_264_dh": ("geglu_tanh", 512, 264, "bf16", 128, 64, 3, "mma_sync", True),
    "pp_swiglu_grad_llama_4096_14336": ("swiglu", 4096, 14336, "bf16", 64, 256, 4, "wgmma_pp",
                                        False),
    "pp_swiglu_grad_1000_520_dh": ("swiglu", 1000, 520, "bf16", 64, 256, 3, "wgmma_pp", True),
    "pp128_swiglu_grad_1000_520_dh": ("swiglu", 1000, 520, "bf16", 128, 128, 4, "wgmma_pp",
                                      True),
    "ps_swiglu_grad_1000_520_dh": ("swiglu", 1000, 520, "bf16", 128, 256, 3, "wgmma_ps", True),
    "cl_swiglu_grad_1000_520_dh": ("swiglu", 1000, 520, "bf16", 128, 256, 3, "wgmma_cl", True),
}
# The gate/up pair keeping gate and up for the backward: name -> (K, N,
# dtype, tile_m, tile_n, stages, mma). Results: gate, up, swiglu(gate, up).
MATMUL_GATED_KEEPS = {
    "wg_gate_up_keeps_4096_14336": (4096, 14336, "bf16", 128, 128, 4, "wgmma"),
    "wg_gate_up_keeps_520_1000": (520, 1000, "bf16", 128, 128, 3, "wgmma"),
    "ms_gate_up_keeps_512_264": (512, 264, "bf16", 128, 64, 3, "mma_sync"),
    "pp_gate_up_keeps_520_1000": (520, 1000, "bf16", 64, 128, 3, "wgmma_pp"),
    "pp128_gate_up_keeps_520_1000": (520, 1000, "bf16", 128, 64, 4, "wgmma_pp"),
    "ps_gate_up_keeps_520_1000": (520, 1000, "bf16", 128, 128, 3, "wgmma_ps"),
    "cl_gate_up_keeps_520_1000": (520, 1000, "bf16", 128, 128, 3, "wgmma_cl"),
}


def gated_group_texts():
    """The matmul groups of MATMUL_GATED_GRADS and MATMUL_GATED_KEEPS,
    pinned to their tiles."""
    out = []

    def group(name, args, results, body, config):
        types = ", ".join(t for _, t in results)
        return """func.func @%s(%s) -> (%s) {
  %%y:%d = liger.fusion matmul(%s) attributes {liger.kernel_config = %s} : (%s) -> (%s) {
  ^bb0(%s):
    %s
    liger.yield %s : %s
  }
  return %s : %s
}""" % (name, ", ".join("%%%s: %s" % a for a in args), types, len(results),
        ", ".join("%" + a[0] for a in args), config, ", ".join(a[1] for a in args), types,
        ", ".join("%%b%s: %s" % a for a in args), "\n    ".join(body),
        ", ".join(v for v, _ in results), types,
        ", ".join("%%y#%d" % i for i in range(len(results))), types)

    for name, (act, n, k, dt, tm, tn, stages, mma, keep) in MATMUL_GATED_GRADS.items():
        DY, W, H = ("tensor<?x%dx%s>" % (n, dt), "tensor<%dx%dx%s>" % (n, k, dt),
                    "tensor<?x%dx%s>" % (k, dt))
        grad = ("liger.swiglu_grad %dh, %bg, %bu" if act == "swiglu" else
                "liger.geglu_grad %dh, %bg, %bu approximate = tanh")
        body = ["%%dh = liger.linear_grad_input %%bdy, %%bw : %s, %s" % (DY, W),
                "%%dg, %%du = %s : %s" % (grad, H)]
        results = ([("%dh", H)] if keep else []) + [("%dg", H), ("%du", H)]
        out.append(group(name, [("dy", DY), ("w", W), ("g", H), ("u", H)], results, body,
                         matmul_config(mma, tm, tn, stages)))
    for name, (k, n, dt, tm, tn, stages, mma) in MATMUL_GATED_KEEPS.items():
        X, W, Y = ("tensor<?x%dx%s>" % (k, dt), "tensor<%dx%dx%s>" % (n, k, dt),
                   "tensor<?x%dx%s>" % (n, dt))
        body = ["%%g = liger.linear %%bx, %%bwg : %s, %s" % (X, W),
                "%%u = liger.linear %%bx, %%bwu : %s, %s" % (X, W),
                "%%h = liger.swiglu %%g, %%u : %s" % Y]
        out.append(group(name, [("x", X), ("wg", W), ("wu", W)],
                         [("%g", Y), ("%u", Y), ("%h", Y)], body,
                         matmul_config(mma, tm, tn, stages)))
    return out



def matmul_config(mma, tm, tn, stages):
    """The liger.kernel_config of a matmul group pinned to the template of
    `mma` ("wgmma", "wgmma_pp" / "wgmma_ps": wgmma with the pingpong or
    the persistent schedule, "wgmma_cl": data-parallel in clusters of two,
    or "mma_sync"), a tm x tn tile and `stages` stages, with a 128-byte
    (wgmma) or 64-byte (mma.sync) K slice."""
    schedule = {"wgmma_pp": ", schedule = pingpong",
                "wgmma_ps": ", schedule = persistent",
                "wgmma_cl": ", cluster = 2"}.get(mma, "")
    mma = "wgmma" if mma.startswith("wgmma") else mma
    return ("#liger.kernel_config<kernel_template = matmul_%s, tile_m = %d, tile_n = %d, tile_k = %d, "
            "stages = %d%s>" % (mma, tm, tn, 64 if mma == "wgmma" else 32, stages, schedule))

def qk_rope_group_text(name):
    """The matmul group liger-fuse-qkv-rope forms, pinned to a wgmma tile."""
    k, hq, hkv, d, dt, tm, tn, stages, norm, bias, batched, mma = MATMUL_ROPE[name]
    X = "tensor<?x?x%dx%s>" % (k, dt)
    W = {p: "tensor<%dx%dx%s>" % (h * d, k, dt) for p, h in (("q", hq), ("k", hkv))}
    P = {p: "tensor<?x?x%dx%s>" % (h * d, dt) for p, h in (("q", hq), ("k", hkv))}
    S = {p: "tensor<?x?x%dx%dx%s>" % (h, d, dt) for p, h in (("q", hq), ("k", hkv))}
    H = {p: "tensor<?x%dx?x%dx%s>" % (h, d, dt) for p, h in (("q", hq), ("k", hkv))}
    C = "tensor<%sx?x%dx%s>" % ("?" if batched else "1", d, dt)
    args = [("x", X)] + ([("g", "tensor<%dx%s>" % (k, dt))] if norm else [])
    args += [("wq", W["q"]), ("wk", W["k"])]
    if bias:
        args += [("bq", "tensor<%dx%s>" % (hq * d, dt)), ("bk", "tensor<%dx%s>" % (hkv * d, dt))]
    args += [("cos", C), ("sin", C)]
    body = ["%c0 = arith.constant 0 : index", "%c1 = arith.constant 1 : index"]
    inp = "%bx"
    if norm:
        body.append("%%n = liger.rms_norm %%bx, %%bg eps = 1.0e-5 : %s, tensor<%dx%s>" % (X, k, dt))
        inp = "%n"
    for p, h in (("q", hq), ("k", hkv)):
        b = ", %%bb%s" % p if bias else ""
        bt = ", tensor<%dx%s>" % (h * d, dt) if bias else ""
        body += ["%%%s = liger.linear %s, %%bw%s%s : %s, %s%s" % (p, inp, p, b, X, W[p], bt),
                 "%%%sb = tensor.dim %%%s, %%c0 : %s" % (p, p, P[p]),
                 "%%%st = tensor.dim %%%s, %%c1 : %s" % (p, p, P[p]),
                 "%%%s4 = tensor.expand_shape %%%s [[0], [1], [2, 3]] output_shape [%%%sb, %%%st, %d, %d]"
                 " : %s into %s" % (p, p, p, p, h, d, P[p], S[p]),
                 "%%%se = tensor.empty(%%%sb, %%%st) : %s" % (p, p, p, H[p]),
                 "%%%sh = linalg.transpose ins(%%%s4 : %s) outs(%%%se : %s) permutation = [0, 2, 1, 3]"
                 % (p, p, S[p], p, H[p])]
    body += ["%%qr, %%kr = liger.rope %%qh, %%kh, %%bcos, %%bsin : %s, %s, %s" % (H["q"], H["k"], C),
             "liger.yield %%qr, %%kr : %s, %s" % (H["q"], H["k"])]
    config = matmul_config(mma, tm, tn, stages)
    return """func.func @%s(%s) -> (%s, %s) {
  %%y:2 = liger.fusion matmul(%s) attributes {liger.kernel_config = %s} : (%s) -> (%s, %s) {
  ^bb0(%s):
    %s
  }
  return %%y#0, %%y#1 : %s, %s
}""" % (name, ", ".join("%%%s: %s" % a for a in args), H["q"], H["k"],
        ", ".join("%" + a[0] for a in args), config, ", ".join(a[1] for a in args),
        H["q"], H["k"], ", ".join("%%b%s: %s" % a for a in args), "\n    ".join(body),
        H["q"], H["k"])



def matmul_module_text():
    out = []
    for name, (k, n, dt, tm, tn, stages, mma) in MATMULS.items():
        X, W, Y = ("tensor<?x%dx%s>" % (k, dt), "tensor<%dx%dx%s>" % (n, k, dt),
                   "tensor<?x%dx%s>" % (n, dt))
        G = "tensor<%dx%s>" % (k, dt)
        config = matmul_config(mma, tm, tn, stages)
        epilogue = MATMUL_EPILOGUES.get(name)
        norm = MATMUL_PROLOGUES.get(name)
        # The kernel's inputs, in order: x, [g], w, [b], [u | r].
        bias = name in MATMUL_BIAS
        B = "tensor<%dx%s>" % (n, dt)
        lora = MATMUL_LORA.get(name)
        args = [("x", X)] + ([("g", G)] if norm else []) + [("w", W)]
        if lora:
            LA, LB = ("tensor<%dx%dx%s>" % (lora[0], k, dt),
                      "tensor<%dx%dx%s>" % (n, lora[0], dt))
            args += [("la", LA), ("lb", LB)]
        args += [("b", B)] if bias else []
        args += {"swiglu": [("u", W)], "geglu_tanh": [("u", W)], "add_silu": [("r", Y)],
                 "add_gelu": [("r", Y)]}.get(epilogue, [])
        params = ", ".join("%%%s: %s" % a for a in args)
        names = ", ".join("%" + a[0] for a in args)
        types = ", ".join(a[1] for a in args)
        block = ", ".join("%%b%s: %s" % a for a in args)
        body = []
        inp = "%bx"
        if norm == "rms_norm":
            body.append("%%n = liger.rms_norm %%bx, %%bg eps = 1.0e-5 : %s, %s" % (X, G))
            inp = "%n"
        elif norm == "rms_norm_gemma":
            body.append("%%n = liger.rms_norm %%bx, %%bg eps = 1.0e-6 offset = 1.0 "
                        "casting = gemma : %s, %s" % (X, G))
            inp = "%n"
        if lora:
            body.append("%%l = liger.lora_linear %s, %%bw, %%bla, %%blb scale = %s : %s, %s, %s, %s"
                        % (inp, repr(float(lora[1])), X, W, LA, LB))
        elif bias:
            body.append("%%l = liger.linear %s, %%bw, %%bb : %s, %s, %s" % (inp, X, W, B))
        else:
            body.append("%%l = liger.linear %s, %%bw : %s, %s" % (inp, X, W))
        result = "%l"
        if epilogue == "add_silu":
            body += ["%%s = liger.add %%l, %%br : %s" % Y, "%%t = liger.silu %%s : %s" % Y]
            result = "%t"
        elif epilogue == "add_gelu":
            body += ["%%s = liger.add %%l, %%br : %s" % Y, "%%t = liger.gelu %%s : %s" % Y]
            result = "%t"
        elif epilogue == "swiglu":
            body += ["%%lu = liger.linear %s, %%bu : %s, %s" % (inp, X, W),
                     "%%s = liger.swiglu %%l, %%lu : %s" % Y]
            result = "%s"
        elif epilogue == "geglu_tanh":
            body += ["%%lu = liger.linear %s, %%bu : %s, %s" % (inp, X, W),
                     "%%s = liger.geglu %%l, %%lu approximate = tanh : %s" % Y]
            result = "%s"
        body.append("liger.yield %s : %s" % (result, Y))
        out.append("""func.func @%s(%s) -> %s {
  %%y = liger.fusion matmul(%s) attributes {liger.kernel_config = %s} : (%s) -> %s {
  ^bb0(%s):
    %s
  }
  return %%y : %s
}""" % (name, params, Y, names, config, types, Y, block, "\n    ".join(body), Y))
    for name, (op, n, k, dt, tm, tn, stages, mma) in MATMUL_GRADS.items():
        config = matmul_config(mma, tm, tn, stages)
        DY = "tensor<?x%dx%s>" % (n, dt)
        if op == "dx":
            args = [("dy", DY), ("w", "tensor<%dx%dx%s>" % (n, k, dt))]
            Y = "tensor<?x%dx%s>" % (k, dt)
            body = "%%g = liger.linear_grad_input %%bdy, %%bw : %s, %s" % (args[0][1], args[1][1])
        else:
            args = [("dy", DY), ("x", "tensor<?x%dx%s>" % (k, dt))]
            acc = op in ("dw_acc", "dw_acc_lowp")
            acc_dt = "f32" if op == "dw_acc" else dt
            if acc:
                args.append(("acc", "tensor<%dx%dx%s>" % (n, k, acc_dt)))
            Y = "tensor<%dx%dx%s>" % (n, k, acc_dt if acc else dt)
            body = "%%g = liger.linear_grad_weight %%bdy, %%bx%s : %s" % (
                " accumulate %bacc" if acc else "", ", ".join(a[1] for a in args))
        out.append("""func.func @%s(%s) -> %s {
  %%y = liger.fusion matmul(%s) attributes {liger.kernel_config = %s} : (%s) -> %s {
  ^bb0(%s):
    %s
    liger.yield %%g : %s
  }
  return %%y : %s
}""" % (name, ", ".join("%%%s: %s" % a for a in args), Y,
            ", ".join("%" + a[0] for a in args), config, ", ".join(a[1] for a in args), Y,
            ", ".join("%%b%s: %s" % a for a in args), body, Y, Y))
    out += [qk_rope_group_text(name) for name in MATMUL_ROPE]
    out += gated_group_texts()
    return "\n\n".join(out) + "\n"


# Cross-entropy (forward `ce_<name>` and gradient `ceg_<name>`), by case:
# vocabulary, logits dtype, target dtype, attributes (liger syntax, also read
# by the reference), class weights, z-loss result.
CROSS_ENTROPY = {
    "v32000_bf16": (32000, "bf16", "i64", dict(reduction="mean"), False, False),
    "v128256_bf16": (128256, "bf16", "i64", dict(reduction="mean"), False, False),
    "v151936_bf16_sum_ls": (151936, "bf16", "i64",
                            dict(reduction="sum", label_smoothing=0.1), False, False),
    "v1000_f32_none_all": (1000, "f32", "i32",
                           dict(reduction="none", ignore_index=-1, label_smoothing=0.1,
                                softcap=30.0, lse_square_scale=1e-4), True, True),
    "v32001_bf16_weighted": (32001, "bf16", "i64",
                             dict(reduction="mean", label_smoothing=0.05, softcap=20.0),
                             True, False),
    "v128256_f32_zloss": (128256, "f32", "i64",
                          dict(reduction="mean", lse_square_scale=1e-4), False, True),
    # Vocabularies no 16-byte chunk divides: rows peeled at run time (single
    # elements up to the first aligned chunk and after the last), GPT-2's in
    # bf16 and f16, 32001 in f32 (the fused kernels stage their rows by
    # cp.async at one CTA per SM), a vocabulary shorter than a chunk, and
    # long ones (Gemma's 256000, 262147) with every reduction.
    "v7_bf16": (7, "bf16", "i64", dict(reduction="mean"), False, False),
    "v50257_bf16": (50257, "bf16", "i64", dict(reduction="mean"), False, False),
    "v50257_f16_ls": (50257, "f16", "i64", dict(reduction="mean", label_smoothing=0.1),
                      False, False),
    "v32001_f32_sum": (32001, "f32", "i64", dict(reduction="sum"), False, False),
    "v256000_bf16": (256000, "bf16", "i64", dict(reduction="mean"), False, False),
    "v262147_bf16_zloss": (262147, "bf16", "i64",
                           dict(reduction="mean", lse_square_scale=1e-4), False, True),
    "v262147_f32_none": (262147, "f32", "i32",
                         dict(reduction="none", ignore_index=-1, softcap=30.0), False, False),
}
CROSS_ENTROPY_TOKENS = [1, 1000, 8192]


def cross_entropy_tokens(vocab):
    """The token counts of a case: fewer for the long vocabularies (8192 x
    262147 f32 logits are 8.6 GB, and the reference and the four ways hold
    several such)."""
    return CROSS_ENTROPY_TOKENS if vocab <= 151936 else [1, 1000, 2048]
# The fused loss + gradient kernel at pinned configurations as well
# (`cefp_<name>`): name -> liger.kernel_config.
CROSS_ENTROPY_PINNED = {
    "v128256_bf16": "#liger.kernel_config<kernel_template = cross_entropy, threads = 1024, vector_width = 8, ctas_per_sm = 1>",
    # One CTA per SM over a row that fits in shared memory whole (4 staged
    # chunks a thread cover 32768 columns, past the row's 32000).
    "v32000_bf16": "#liger.kernel_config<kernel_template = cross_entropy, threads = 1024, vector_width = 8, ctas_per_sm = 1>",
    "v1000_f32_none_all": "#liger.kernel_config<kernel_template = cross_entropy, threads = 64, vector_width = 2>",
    # Two CTAs per SM over peeled rows: half the staging area each.
    "v50257_bf16": "#liger.kernel_config<kernel_template = cross_entropy, threads = 512, vector_width = 8, ctas_per_sm = 2>",
}


def _ce_attr_text(attrs, with_zloss):
    text = []
    for key in ["ignore_index", "label_smoothing", "reduction", "softcap",
                "lse_square_scale"]:
        if key in attrs:
            v = attrs[key]
            text.append("%s = %s" % (key, v if isinstance(v, (int, str)) else repr(float(v))))
    if with_zloss:
        text.append("z_loss")
    return " ".join(text)


def cross_entropy_module_text():
    out = []
    for name, (v, dt, tdt, attrs, weighted, zloss) in CROSS_ENTROPY.items():
        X, T, W = "tensor<?x%dx%s>" % (v, dt), "tensor<?x%s>" % tdt, "tensor<%dxf32>" % v
        none = attrs["reduction"] == "none"
        L = "tensor<?xf32>" if none else "tensor<f32>"
        wparam = ", %%w: %s" % W if weighted else ""
        wuse = " weight(%%w : %s)" % W if weighted else ""
        results = [L, L] if zloss else [L]
        names = "%l, %z" if zloss else "%l"
        out.append("""func.func @ce_%s(%%x: %s, %%t: %s%s) -> (%s) {
  %s = liger.cross_entropy %%x, %%t%s %s : %s, %s
  return %s : %s
}""" % (name, X, T, wparam, ", ".join(results), names, wuse, _ce_attr_text(attrs, zloss),
        X, T, names, ", ".join(results)))
        out.append("""func.func @ceg_%s(%%x: %s, %%t: %s, %%g: %s%s) -> %s {
  %%d = liger.cross_entropy_grad %%x, %%t, %%g%s %s : %s, %s, %s
  return %%d : %s
}""" % (name, X, T, L, wparam, X, wuse, _ce_attr_text(attrs, False), X, T, L, X))
        # The loss and its gradient: one kernel (liger-fuse-cross-entropy-grad),
        # inputs (x, t, [w], g), outputs (loss, [z], grad).
        out.append("""func.func @cef_%s(%%x: %s, %%t: %s%s, %%g: %s) -> (%s, %s) {
  %s = liger.cross_entropy %%x, %%t%s %s : %s, %s
  %%d = liger.cross_entropy_grad %%x, %%t, %%g%s %s : %s, %s, %s
  return %s, %%d : %s, %s
}""" % (name, X, T, wparam, L, ", ".join(results), X, names, wuse,
        _ce_attr_text(attrs, zloss), X, T, wuse, _ce_attr_text(attrs, False), X, T, L,
        names, ", ".join(results), X))
        if name in CROSS_ENTROPY_PINNED:
            ins = ["%x", "%t"] + (["%w"] if weighted else []) + ["%g"]
            in_types = [X, T] + ([W] if weighted else []) + [L]
            blk = ", ".join("%%b%s: %s" % (a[1:], ty) for a, ty in zip(ins, in_types))
            res_types = results + [X]
            out.append("""func.func @cefp_%s(%%x: %s, %%t: %s%s, %%g: %s) -> (%s) {
  %%r:%d = liger.fusion rowwise(%s) attributes {liger.kernel_config = %s} : (%s) -> (%s) {
  ^bb0(%s):
    %s = liger.cross_entropy %%bx, %%bt%s %s : %s, %s
    %%d = liger.cross_entropy_grad %%bx, %%bt, %%bg%s %s : %s, %s, %s
    liger.yield %s, %%d : %s
  }
  return %s : %s
}""" % (name, X, T, wparam, L, ", ".join(res_types), len(res_types), ", ".join(ins),
            CROSS_ENTROPY_PINNED[name], ", ".join(in_types), ", ".join(res_types), blk,
            names, wuse.replace("%w", "%bw"), _ce_attr_text(attrs, zloss), X, T,
            wuse.replace("%w", "%bw"), _ce_attr_text(attrs, False), X, T, L, names,
            ", ".join(res_types), ", ".join("%%r#%d" % i for i in range(len(res_types))),
            ", ".join(res_types)))
    return "\n\n".join(out) + "\n"


# Loss groups planned by liger-plan-loss (liger-compile
# --loss-memory-budget=LOSS_PLAN_BUDGET): function -> (vocab, hidden, dtype,
# attributes as written, kwargs of F.cross_entropy / the reference).
LOSS_PLAN_BUDGET = 128 * 1000 * 2  # 128-token chunks at vocabulary 1000
# With "bias": an lm_head bias [V] (a parameter after the targets, dbias a
# last result); with "z_loss": the z-loss term returned apart (a second
# result), at that lse_square_scale.
LOSS_PLANS = {
    "step_mean": (1000, 256, "bf16", "label_smoothing = 0.1", dict(label_smoothing=0.1)),
    "step_sum": (1000, 512, "f16", "reduction = sum softcap = 30.0",
                 dict(reduction="sum", softcap=30.0)),
    "step_bias_z_loss": (1000, 256, "bf16", "label_smoothing = 0.1 lse_square_scale = 1.0e-3",
                         dict(label_smoothing=0.1, bias=True, z_loss=1e-3)),
}


def loss_plan_module_text():
    """A training step's lm_head loss and gradients per LOSS_PLANS entry."""
    out = []
    for name, (v, h, dt, attrs, kw) in sorted(LOSS_PLANS.items()):
        X, W, T = "tensor<?x%dx%s>" % (h, dt), "tensor<%dx%dx%s>" % (v, h, dt), "tensor<?xi64>"
        B = "tensor<%dx%s>" % (v, dt)
        bparam, buse, btype, db = (", %%b: %s" % B, " bias(%%b : %s)" % B, ", " + B, ", %db") \
            if kw.get("bias") else ("",) * 4
        z, ztype, zattr = (", %z", ", tensor<f32>", " z_loss") if "z_loss" in kw else ("",) * 3
        out.append(f"""func.func @{name}(%h: {X}, %w: {W}, %t: {T}{bparam}, %g: tensor<f32>) -> (tensor<f32>{ztype}, {X}, {W}{btype}) {{
  %l{z} = liger.fused_linear_cross_entropy %h, %w, %t{buse} {attrs}{zattr} : {X}, {W}, {T}
  %dh, %dw{db} = liger.fused_linear_cross_entropy_grad %h, %w, %t, %g{buse} {attrs} : {X}, {W}, {T}, tensor<f32>
  return %l{z}, %dh, %dw{db} : tensor<f32>{ztype}, {X}, {W}{btype}
}}
""")
    return "\n".join(out)


# The attention template (test_attention_kernels.py): name -> (query heads,
# key/value heads, head dimension, causal, scale or None, dtype, sliding
# window or None, softcap or None). Llama's GQA, multi-head without a
# mask, D 64 with a scale of its own, Gemma's D 256 with one key/value
# head, f16; sliding windows of two whole key blocks (Llama's heads) and of
# an odd 77 keys (D 64, with the scale), and one over D 256; softcaps
# below the scores' spread (about 1 on these inputs: the cap bends them) on
# Llama's heads, with a window, a scale and f16 at D 64, and without a
# mask at D 256 (Gemma 2's heads).
ATTENTION = {
    "attn_gqa_causal": (32, 8, 128, True, None, "bf16", None, None),
    "attn_mha": (4, 4, 128, False, None, "bf16", None, None),
    "attn_d64_scale": (6, 2, 64, True, 0.3, "bf16", None, None),
    "attn_d256_mqa": (4, 1, 256, True, None, "bf16", None, None),
    "attn_f16": (2, 2, 128, True, None, "f16", None, None),
    "attn_gqa_window": (32, 8, 128, True, None, "bf16", 256, None),
    "attn_d64_window_odd": (6, 2, 64, True, 0.3, "bf16", 77, None),
    "attn_d256_window": (4, 1, 256, True, None, "bf16", 200, None),
    "attn_gqa_softcap": (32, 8, 128, True, None, "bf16", None, 2.0),
    "attn_d64_window_softcap_f16": (6, 2, 64, True, 0.3, "f16", 77, 1.5),
    "attn_d256_softcap_full": (8, 4, 256, False, None, "bf16", None, 3.0),
}
# (batch, sequence): one token, tails of every block size, a batch of
# three, Llama-length sequences.
ATTENTION_SHAPES = [(1, 1), (1, 7), (3, 77), (2, 128), (1, 1000), (2, 2048), (1, 8192)]


# The cases whose backward the template takes (head dimension 64 or 128):
# each also has @<name>_lse (the forward with its lse) and @<name>_grad (the
# backward from the saved output and lse).
ATTENTION_GRAD = [name for name, case in ATTENTION.items() if case[2] <= 128]


def attention_module_text():
    out = []
    for name, (hq, hkv, d, causal, scale, dt, window, softcap) in ATTENTION.items():
        Q = "tensor<?x%dx?x%dx%s>" % (hq, d, dt)
        K = "tensor<?x%dx?x%dx%s>" % (hkv, d, dt)
        L = "tensor<?x%dx?xf32>" % hq
        attrs = (" causal" if causal else "") + (" window = %d" % window if window else "") + \
            (" softcap = %r" % softcap if softcap else "") + \
            (" scale = %r" % scale if scale else "")
        out.append("""func.func @%s(%%q: %s, %%k: %s, %%v: %s) -> %s {
  %%o = liger.attention %%q, %%k, %%v%s : %s, %s, %s
  return %%o : %s
}""" % (name, Q, K, K, Q, attrs, Q, K, K, Q))
        if name not in ATTENTION_GRAD:
            continue
        out.append("""func.func @%s_lse(%%q: %s, %%k: %s, %%v: %s) -> (%s, %s) {
  %%o, %%lse = liger.attention %%q, %%k, %%v%s return_lse : %s, %s, %s
  return %%o, %%lse : %s, %s
}""" % (name, Q, K, K, Q, L, attrs, Q, K, K, Q, L))
        out.append("""func.func @%s_grad(%%do: %s, %%q: %s, %%k: %s, %%v: %s, %%o: %s, %%lse: %s)
    -> (%s, %s, %s) {
  %%dq, %%dk, %%dv = liger.attention_grad %%do, %%q, %%k, %%v saved(%%o, %%lse : %s, %s)%s
      : %s, %s, %s, %s
  return %%dq, %%dk, %%dv : %s, %s, %s
}""" % (name, Q, Q, K, K, Q, L, Q, K, K, Q, L, attrs, Q, Q, K, K, Q, K, K))
    return "\n\n".join(out) + "\n"


def attention_masked(t, s, causal, window, device):
    """The keys a query does not see, [T, S] (True: masked), or None: the
    causal mask bottom-right aligned (key j > i + S - T masked), with a
    sliding window W also key j <= i + S - T - W."""
    import torch
    if not causal:
        return None
    i = torch.arange(t, device=device)[:, None]
    j = torch.arange(s, device=device)[None, :]
    mask = j > i + (s - t)
    if window:
        mask |= j <= i + (s - t) - window
    return mask


def _attention_heads(q, k, causal, scale, dtype, window=None, softcap=None):
    """(batch, query head, its key/value head, scale, the scaled (softcap
    c: c tanh(s / c)) and masked scores in `dtype`, the cap's slope 1 -
    tanh² or 1) for each (batch, query head): the key/value head of query
    head h is h / (Hq / Hkv); the mask attention_masked's."""
    b, hq, t, d = q.shape
    hkv, s = k.shape[1], k.shape[2]
    scale = 1.0 / math.sqrt(d) if scale is None else scale
    mask = attention_masked(t, s, causal, window, q.device)
    for bi in range(b):
        for h in range(hq):
            kv = h // (hq // hkv)
            scores = (q[bi, h].to(dtype) @ k[bi, kv].to(dtype).T) * scale
            slope = 1.0
            if softcap:
                capped = scores.div(softcap).tanh()
                scores, slope = capped * softcap, 1 - capped * capped
            if mask is not None:
                scores = scores.masked_fill(mask, float("-inf"))
            yield bi, h, kv, scale, scores, slope


def attention_grad_reference(q, k, v, grad, causal, scale, dtype, window=None, softcap=None):
    """(dq, dk, dv, lse) of attention_reference's attention in `dtype`, per
    (batch, query head): p = softmax(scale q kᵀ + mask), dv = pᵀ grad,
    ds = p (grad vᵀ - rowsum(p (grad vᵀ))) (times the softcap's slope),
    dq = scale ds k, dk = scale dsᵀ q, a key/value head's dk and dv summed
    over its query heads; lse the log-sum-exp of the scaled, masked
    scores."""
    import torch
    dq = torch.empty(q.shape, dtype=dtype, device=q.device)
    dk = torch.zeros(k.shape, dtype=dtype, device=q.device)
    dv = torch.zeros(v.shape, dtype=dtype, device=q.device)
    lse = torch.empty(q.shape[:3], dtype=dtype, device=q.device)
    for bi, h, kv, scale, scores, slope in _attention_heads(q, k, causal, scale, dtype, window,
                                                            softcap):
        qh, kh, vh = q[bi, h].to(dtype), k[bi, kv].to(dtype), v[bi, kv].to(dtype)
        gh = grad[bi, h].to(dtype)
        lse[bi, h] = torch.logsumexp(scores, dim=-1)
        p = torch.softmax(scores, dim=-1)
        dp = gh @ vh.T
        ds = p * (dp - (p * dp).sum(-1, keepdim=True)) * slope
        dq[bi, h] = scale * (ds @ kh)
        dk[bi, kv] += scale * (ds.T @ qh)
        dv[bi, kv] += p.T @ gh
    return dq, dk, dv, lse


def attention_reference(q, k, v, causal, scale, dtype, window=None, softcap=None):
    """softmax(scale q kᵀ + mask) v per head in `dtype` (float64; float32
    for long sequences), the heads, softcap and mask of _attention_heads."""
    import torch
    out = torch.empty(q.shape, dtype=dtype, device=q.device)
    for bi, h, kv, _, scores, _ in _attention_heads(q, k, causal, scale, dtype, window, softcap):
        out[bi, h] = torch.softmax(scores, dim=-1) @ v[bi, kv].to(dtype)
    return out
