#!/usr/bin/env python3
"""Rowwise kernels of liger beside PyTorch eager, torch.compile and
Liger-Kernel, on one GPU, at Llama-3-8B shapes (16384 tokens, hidden 4096,
MLP width 14336, bf16; LayerNorm through liger.ops, whose kernels come from
LIGER_OPS_BUNDLES, see layer_norm_specs), and over long and odd rows (the "long" cases:
softmax over 50257, 256000 bf16 and 262147 f32, RMSNorm over 256000 bf16,
at --long-tokens rows).

Each figure is the median time (triton.testing.do_bench) and its fraction of
the floor: the bytes the op must move (inputs read once, outputs written
once) over the device-to-device copy bandwidth measured in the same run.
Every implementation's result is checked against eager before it is timed.

    LIGER_OPS_BUNDLES=bench-bundles/ops PYTHONPATH=python:build-runtime-py/python \
        python3 bench/rowwise.py --bundle bench-bundles/rowwise [--tokens 16384] [--json out.json]
"""
import argparse
import json
import sys

import torch
import torch.nn.functional as F
from floors import copy_bandwidth, ms

from liger import runtime

try:
    from liger_kernel.ops.rms_norm import LigerRMSNormFunction
    from liger_kernel.ops.fused_add_rms_norm import LigerFusedAddRMSNormFunction
    from liger_kernel.ops.swiglu import LigerSiLUMulFunction
    from liger_kernel.ops.geglu import LigerGELUMulFunction
    from liger_kernel.ops.layer_norm import LigerLayerNormFunction
    HAVE_LK = True
except Exception as e:  # noqa: BLE001
    print("# liger-kernel not importable: %s" % e, file=sys.stderr)
    HAVE_LK = False

BF16 = torch.bfloat16
try:
    from liger_kernel.ops.rope import LigerRopeFunction
    HAVE_ROPE = True
except Exception:  # noqa: BLE001
    HAVE_ROPE = False


def rel_err(out, ref):
    out, ref = out.double(), ref.double()
    return ((out - ref).norm() / ref.norm().clamp_min(1e-30)).item()


def rms_ref(x, w, eps=1e-6):
    xf = x.float()
    return (xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + eps)).to(x.dtype) * w


def add_rms_ref(x, r, w, eps=1e-6):
    s = x + r
    return rms_ref(s, w, eps), s


def swiglu_ref(g, u):
    return F.silu(g) * u


def geglu_ref(g, u):
    return F.gelu(g, approximate="tanh") * u


LN_EPS = 1e-5


def layer_norm_specs(hidden=4096):
    """The liger.ops kernels of the LayerNorm rows (what build-bundles.sh
    precompiles into bench-bundles/ops)."""
    from liger import specs
    return [specs.layer_norm_spec(hidden, "bf16", eps=LN_EPS)]


def layer_norm_ref(x, w, b):
    return F.layer_norm(x, (x.shape[-1],), w, b, LN_EPS)


def autograd_step(f, inputs, dy):
    """A forward + backward step of `f` through autograd, on copies of
    `inputs` that require gradients, as a function of (ignored) arguments
    so that run() can time it beside our kernels."""
    leaves = [t.clone().requires_grad_(True) for t in inputs]

    def step(*_):
        y = f(*leaves)
        y.backward(dy)
        return y.detach()
    return step


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bundle", default="bench-bundles/rowwise")
    ap.add_argument("--tokens", type=int, default=16384)
    ap.add_argument("--long-tokens", type=int, default=2048,
                    help="rows of the long cases (2048 x 256000 bf16: 1 GB)")
    ap.add_argument("--json")
    ap.add_argument("--cases", help="comma-separated case prefixes to run (e.g. "
                    "rms_norm,overhead); default: all")
    args = ap.parse_args()
    prefixes = args.cases.split(",") if args.cases else None

    def want(case):
        return prefixes is None or any(case.startswith(p) for p in prefixes)
    M, H, I = args.tokens, 4096, 14336
    bw = copy_bandwidth()
    ours = runtime.load(args.bundle)
    rows = []

    def run(case, impls, inputs, ref, nbytes, first_only=True):
        if not want(case):
            return
        expected = ref(*inputs)
        expected = expected[0] if isinstance(expected, tuple) else expected
        floor = nbytes / bw / 1e6
        for name, f in impls.items():
            out = f(*inputs)
            out = out[0] if isinstance(out, tuple) else out
            err = rel_err(out, expected)
            t = ms(lambda: f(*inputs))
            rows.append(dict(case=case, impl=name, ms=t, floor_ms=floor,
                             of_floor=floor / t, err=err))

    def preallocated(kernel, *shapes, dtype=BF16):
        """Our kernel with its outputs allocated once (as a framework would
        reuse them), so the timing is the launch and the kernel."""
        outs = [torch.empty(sh, dtype=dtype, device="cuda") for sh in shapes]

        def call(*inputs):
            return kernel(*inputs, out=outs)
        return call

    def peers(ref, lk=None):
        d = {"eager": ref, "compile": torch.compile(ref)}
        if HAVE_LK and lk:
            d["liger-kernel"] = lk
        return d

    x = torch.randn(M, H, dtype=BF16, device="cuda")
    r = torch.randn(M, H, dtype=BF16, device="cuda")
    w = torch.randn(H, dtype=BF16, device="cuda")
    impls = peers(rms_ref, lambda x, w: LigerRMSNormFunction.apply(x, w, 1e-6))
    impls["liger (ours)"] = preallocated(ours["rms_norm_rowwise_0"], (M, H))
    if "rms_norm_noreuse_rowwise_0" in ours.kernels:
        impls["ours, no reuse"] = preallocated(ours["rms_norm_noreuse_rowwise_0"], (M, H))
    run("rms_norm fwd", impls, (x, w), rms_ref, 2 * M * H * 2 + H * 2)

    # RMSNorm forward + backward with the weight gradient: ours is the
    # forward kernel (writing rstd) then the backward kernels (dx per row, dW
    # as per-CTA partials and a finishing reduction); the peers go through
    # autograd. Bytes as shared/bench/peers.py counts them: forward reads x
    # and writes y, backward reads x and dy and writes dx.
    dy = torch.randn(M, H, dtype=BF16, device="cuda")
    fwd_r = ours["rms_norm_rstd_rowwise_0"]
    bwd_r = ours["rms_norm_grad_rowwise_0"]
    y_r = torch.empty(M, H, dtype=BF16, device="cuda")
    rstd_r = torch.empty(M, dtype=torch.float32, device="cuda")
    dx_r = torch.empty(M, H, dtype=BF16, device="cuda")
    dw_r = torch.empty(H, dtype=BF16, device="cuda")

    def rms_ours_full(x, w):
        fwd_r(x, w, out=[y_r, rstd_r])
        bwd_r(dy, x, w, rstd_r, out=[dx_r, dw_r])
        return y_r

    def rms_autograd(f):
        return autograd_step(f, (x, w), dy)
    impls = {"eager": rms_autograd(rms_ref), "compile": rms_autograd(torch.compile(rms_ref))}
    if HAVE_LK:
        impls["liger-kernel"] = rms_autograd(lambda x, w: LigerRMSNormFunction.apply(x, w, 1e-6))
    impls["liger (ours)"] = rms_ours_full
    run("rms_norm fwd+bwd", impls, (x, w), rms_ref, 5 * M * H * 2 + H * 2)
    # The backward alone, and its workspace rows (CTAs) swept around the
    # compiled default of ctas_per_sm per SM.
    sms = torch.cuda.get_device_properties(0).multi_processor_count
    bwd_bytes = 3 * M * H * 2 + M * 4 + 2 * H * 2
    variants = [("rms_norm_grad_rowwise_0", n, "ours %d/SM" % n) for n in (1, 2, 4, 8)]
    if "rms_norm_grad_noreuse_rowwise_0" in ours.kernels:
        variants.append(("rms_norm_grad_noreuse_rowwise_0", 4, "no reuse 4/SM"))
    for kernel, per_sm, label in variants if want("rms_norm bwd") else ():
        ws = torch.empty(min(M, per_sm * sms), H, dtype=torch.float32, device="cuda")
        launch_args = [(t.data_ptr(), n, list(t.shape)) for t, n in
                       ((dy, "bf16"), (x, "bf16"), (w, "bf16"), (rstd_r, "f32"),
                        (dx_r, "bf16"), (dw_r, "bf16"), (ws, "f32"))]
        stream = torch.cuda.current_stream().cuda_stream
        t = ms(lambda: ours._bundle.launch(kernel, launch_args, stream, 0))
        floor = bwd_bytes / bw / 1e6
        rows.append(dict(case="rms_norm bwd", impl=label, ms=t,
                         floor_ms=floor, of_floor=floor / t, err=float("nan")))
    del dy

    impls = peers(add_rms_ref,
                  lambda x, r, w: LigerFusedAddRMSNormFunction.apply(x, r, w, 1e-6))
    impls["liger (ours)"] = preallocated(ours["add_rms_norm_rowwise_0"], (M, H), (M, H))
    run("add_rms_norm fwd", impls, (x, r, w), add_rms_ref, 4 * M * H * 2 + H * 2)
    del r

    # LayerNorm (weight and bias) through liger.ops.layer_norm, the
    # operator a patched model calls, forward alone and forward + backward
    # (dx, dW, dbias) through autograd like the peers. Bytes: forward reads
    # x and writes y and each row's mean and rstd (f32, as Liger-Kernel's
    # does); backward reads x, dy and the statistics and writes dx.
    if want("layer_norm"):
        try:
            from liger import ops as liger_ops
            b = torch.randn(H, dtype=BF16, device="cuda")
            liger_ops.layer_norm(x[:1], w, b, LN_EPS)
        except Exception as e:  # noqa: BLE001
            print("# liger.ops.layer_norm not runnable (LIGER_OPS_BUNDLES with "
                  "layer_norm_specs()?): %s" % e, file=sys.stderr)
        else:
            def ln_ours(x, w, b):
                return liger_ops.layer_norm(x, w, b, LN_EPS)

            def ln_lk(x, w, b):
                return LigerLayerNormFunction.apply(x, w, b, LN_EPS)
            impls = peers(layer_norm_ref, ln_lk)
            impls["liger (ours)"] = ln_ours
            run("layer_norm fwd", impls, (x, w, b), layer_norm_ref,
                2 * M * H * 2 + 2 * H * 2 + M * 8)
            dy = torch.randn(M, H, dtype=BF16, device="cuda")

            def ln_autograd(f):
                return autograd_step(f, (x, w, b), dy)
            impls = {"eager": ln_autograd(layer_norm_ref),
                     "compile": ln_autograd(torch.compile(layer_norm_ref))}
            if HAVE_LK:
                impls["liger-kernel"] = ln_autograd(ln_lk)
            impls["liger (ours)"] = ln_autograd(ln_ours)
            run("layer_norm fwd+bwd", impls, (x, w, b), layer_norm_ref,
                5 * M * H * 2 + 4 * H * 2 + 2 * M * 8)
            del dy
    del x

    g = torch.randn(M, I, dtype=BF16, device="cuda")
    u = torch.randn(M, I, dtype=BF16, device="cuda")
    impls = peers(swiglu_ref, lambda g, u: LigerSiLUMulFunction.apply(g, u))
    impls["liger (ours)"] = preallocated(ours["swiglu_rowwise_0"], (M, I))
    run("swiglu fwd", impls, (g, u), swiglu_ref, 3 * M * I * 2)

    impls = peers(geglu_ref, lambda g, u: LigerGELUMulFunction.apply(g, u))
    impls["liger (ours)"] = preallocated(ours["geglu_rowwise_0"], (M, I))
    run("geglu fwd (tanh)", impls, (g, u), geglu_ref, 3 * M * I * 2)

    # Gated activations forward + backward: ours is the forward kernel then
    # the backward kernel (activation recomputed); the peers go through
    # autograd. Bytes: forward reads gate, up and writes y; backward reads
    # dy, gate, up and writes d_gate, d_up.
    dy = torch.randn(M, I, dtype=BF16, device="cuda")

    def gated_full(case, ref, lk, fwd_name, bwd_name):
        fwd = preallocated(ours[fwd_name], (M, I))
        bwd = preallocated(ours[bwd_name], (M, I), (M, I))

        def ours_full(g, u):
            y = fwd(g, u)
            bwd(dy, g, u)
            return y

        def autograd_full(f):
            return autograd_step(f, (g, u), dy)
        impls = {"eager": autograd_full(ref), "compile": autograd_full(torch.compile(ref))}
        if HAVE_LK:
            impls["liger-kernel"] = autograd_full(lk)
        impls["liger (ours)"] = ours_full
        run(case, impls, (g, u), ref, 8 * M * I * 2)

    gated_full("swiglu fwd+bwd", swiglu_ref, lambda a, b: LigerSiLUMulFunction.apply(a, b),
               "swiglu_rowwise_0", "swiglu_grad_rowwise_0")
    gated_full("geglu fwd+bwd", geglu_ref, lambda a, b: LigerGELUMulFunction.apply(a, b),
               "geglu_rowwise_0", "geglu_grad_rowwise_0")

    # RoPE (Llama-3-8B heads), q and k in [B, H, T, D], tables [1, T, D];
    # peers as in shared/bench/peers.py.
    if "rope_rowwise_0" in ours.kernels:
        B, T = 4, M // 4
        q = torch.randn(B, 32, T, 128, dtype=BF16, device="cuda")
        k = torch.randn(B, 8, T, 128, dtype=BF16, device="cuda")
        pos = torch.arange(T, device="cuda", dtype=torch.float32)
        inv = 1.0 / (500000.0 ** (torch.arange(0, 128, 2, device="cuda",
                                               dtype=torch.float32) / 128))
        emb = torch.cat((torch.outer(pos, inv),) * 2, dim=-1)
        cos, sin = emb.cos().to(BF16)[None], emb.sin().to(BF16)[None]

        def rope_ref(q, k, c, s):
            def rot(x):
                x1, x2 = x.chunk(2, dim=-1)
                return torch.cat((-x2, x1), dim=-1)
            c, s = c.unsqueeze(1), s.unsqueeze(1)
            return q * c + rot(q) * s, k * c + rot(k) * s
        impls = peers(rope_ref, (lambda q, k, c, s: LigerRopeFunction.apply(q, k, c, s))
                      if HAVE_ROPE else None)
        impls["liger (ours)"] = preallocated(ours["rope_rowwise_0"], (B, 32, T, 128),
                                             (B, 8, T, 128))
        run("rope fwd", impls, (q, k, cos, sin), rope_ref,
            2 * (q.numel() + k.numel()) * 2)
        del q, k

    # Long and odd rows. The floor counts the row read once and written
    # once; a row past the kernel's register budget is read twice (softmax:
    # its online max and sum, then the output; RMSNorm: its sum of squares,
    # then the normalization), so such a kernel's own floor is 3/4 of it.
    # GPT-2's vocabulary takes one-element chunks (no wider vector divides
    # 50257).
    ML = args.long_tokens

    def softmax_ref(x):
        return torch.softmax(x.float(), -1).to(x.dtype)
    for case, kernel, h, dt in [("long softmax 50257", "softmax_50257_rowwise_0", 50257, BF16),
                                ("long softmax 256000", "softmax_256000_rowwise_0", 256000, BF16),
                                ("long softmax 262147", "softmax_262147_rowwise_0", 262147,
                                 torch.float32)]:
        if kernel not in ours.kernels or not want(case):
            continue
        xl = torch.randn(ML, h, dtype=dt, device="cuda")
        impls = peers(softmax_ref)
        impls["liger (ours)"] = preallocated(ours[kernel], (ML, h), dtype=dt)
        run(case, impls, (xl,), softmax_ref, 2 * xl.numel() * xl.element_size())
        del xl
    if "rms_norm_256000_rowwise_0" in ours.kernels and want("long rms_norm 256000"):
        xl = torch.randn(ML, 256000, dtype=BF16, device="cuda")
        wl = torch.randn(256000, dtype=BF16, device="cuda")
        impls = peers(rms_ref)
        impls["liger (ours)"] = preallocated(ours["rms_norm_256000_rowwise_0"], (ML, 256000))
        run("long rms_norm 256000", impls, (xl, wl), rms_ref, 2 * xl.numel() * 2 + 256000 * 2)
        del xl, wl

    # Launch overhead: host time per call of a tiny kernel (1 row) through
    # liger.runtime, beside torch.add on tiny tensors.
    import time
    del g, u, dy
    x1 = torch.randn(1, H, dtype=BF16, device="cuda")
    k1 = preallocated(ours["rms_norm_rowwise_0"], (1, H))
    a1, b1 = torch.randn(8, device="cuda"), torch.randn(8, device="cuda")
    overhead = {}
    calls = [] if not want("overhead") else [("liger.runtime (Python)", lambda: k1(x1, w)),
             ("torch.add (8 elements)", lambda: torch.add(a1, b1)),
             # The same op through torch.ops (the Python dispatcher path that
             # every torch.ops.liger call takes): the floor of a custom op.
             ("torch.ops.aten.add.Tensor", lambda: torch.ops.aten.add.Tensor(a1, b1)),
             ("torch.ops.aten.add (packet)", lambda: torch.ops.aten.add(a1, b1))]
    try:
        if not calls:
            raise ImportError("overhead not asked for")
        from liger import torch_ops
        torch_ops.load_library()
        outs1 = [torch.empty(1, H, dtype=BF16, device="cuda")]
        calls.insert(1, ("torch.ops.liger.launch", lambda: torch.ops.liger.launch(
            args.bundle, "rms_norm_rowwise_0", [x1, w], outs1)))
    except ImportError as e:
        print("# LibTorch adapter not loadable: %s" % e, file=sys.stderr)
    if calls:
        # A whole operator as a model calls it (liger.ops: its checks, the
        # custom operator's dispatch, the kernel's outputs allocated), where
        # the LayerNorm bundle is there (LIGER_OPS_BUNDLES).
        try:
            from liger import ops as liger_ops
            bias1 = torch.randn(H, dtype=BF16, device="cuda")
            liger_ops.layer_norm(x1, w, bias1, LN_EPS)
            calls.insert(1, ("liger.ops.layer_norm", lambda: liger_ops.layer_norm(
                x1, w, bias1, LN_EPS)))
        except Exception as e:  # noqa: BLE001
            print("# liger.ops.layer_norm not runnable: %s" % e, file=sys.stderr)
    for name, f in calls:
        for _ in range(100):
            f()
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        for _ in range(2000):
            f()
        torch.cuda.synchronize()
        overhead[name] = (time.perf_counter() - t0) / 2000 * 1e6

    print("copy bandwidth %.0f GB/s; %d tokens" % (bw, M))
    for name, us in overhead.items():
        print("host time per call: %-24s %6.1f us" % (name, us))
    print("%-18s %-14s %9s %9s %8s %9s" % ("case", "impl", "ms", "floor ms", "of floor", "rel err"))
    for row in rows:
        print("%-18s %-14s %9.3f %9.3f %7.0f%% %9.1e" % (
            row["case"], row["impl"], row["ms"], row["floor_ms"], 100 * row["of_floor"],
            row["err"]))
    if args.json:
        json.dump(dict(copy_gbs=bw, tokens=M, rows=rows, host_us_per_call=overhead),
                  open(args.json, "w"), indent=1)


if __name__ == "__main__":
    main()
