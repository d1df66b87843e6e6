#!/usr/bin/env python3
"""The matmul templates (mma.sync, and wgmma + TMA) beside PyTorch (cuBLAS) eager
and torch.compile, at Llama-3-8B projection shapes, bf16.

Each figure is the median time (triton.testing.do_bench) and its fraction of
the floor: the FLOPs (2·M·N·K) over the bf16 matrix rate measured in the
same run (torch.matmul on 8192³, the best this GPU showed us). Every result
is checked against torch before it is timed.

    PYTHONPATH=python:build-runtime-py/python LIGER_OPS_BUNDLES=bench-bundles/ops \\
        python3 bench/matmul.py --bundle bench-bundles/matmul [--tokens 16384] [--json out.json]

(LIGER_OPS_BUNDLES: the "mlp fwd+bwd" row's liger.ops.gated_mlp kernels, the
"qk+rope fwd+bwd" row's liger.ops.linear_rope kernels, the "rms_norm+qkv
fwd+bwd" row's RMSNorm kernels and the "lora r16 fwd+bwd" and "lora r16
dx" rows' liger.ops.lora_linear kernels.)
"""
import argparse
import json

import torch
import torch.nn.functional as F
from floors import interleaved_ratio, matrix_rate, ms

from liger import runtime

BF16 = torch.bfloat16


def timed_rows(case, impls, ref, floor, calls=1):
    """One row per implementation of `case`: its results (a tuple of
    tensors) checked against `ref` (the largest relative error), then
    timed beside `floor`, per call of `calls` made in a row (more than one:
    the host's launches overlap the GPU's work, as in a training step)."""
    rows = []
    for impl, f in impls.items():
        o = f()
        err = max(((a.float() - r.float()).norm() / r.float().norm()).item()
                  for a, r in zip(o, ref))
        t = ms(f) if calls == 1 else ms(lambda: [f() for _ in range(calls)]) / calls
        rows.append(dict(case=case, impl=impl, ms=t, floor_ms=floor, of_floor=floor / t,
                         err=err))
    return rows


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bundle", default="bench-bundles/matmul")
    ap.add_argument("--tokens", type=int, default=16384)
    ap.add_argument("--json")
    args = ap.parse_args()
    M = args.tokens
    rate = matrix_rate()  # TFLOP/s
    ours = runtime.load(args.bundle)
    rows = []
    for name, (k, n) in {"o_proj": (4096, 4096), "up_proj": (4096, 14336),
                         "down_proj": (14336, 4096)}.items():
        x = torch.randn(M, k, dtype=BF16, device="cuda")
        w = (torch.randn(n, k, dtype=BF16, device="cuda") / k ** 0.5).to(BF16)
        y = torch.empty(M, n, dtype=BF16, device="cuda")
        ref = F.linear(x, w)
        floor = 2 * M * n * k / rate / 1e9
        kernel = ours[name + "_matmul_0"]
        wg = ours[name + "_wg_matmul_0"]
        impls = {"eager (cuBLAS)": lambda: F.linear(x, w),
                 "compile": torch.compile(lambda: F.linear(x, w)),
                 "liger mma.sync": lambda: kernel(x, w, out=[y]),
                 "liger wgmma": lambda: wg(x, w, out=[y])}
        for impl, f in impls.items():
            out = f()
            out = out if isinstance(out, torch.Tensor) else y
            err = ((out.float() - ref.float()).norm() / ref.float().norm()).item()
            t = ms(f)
            rows.append(dict(case="%s %dx%dx%d" % (name, M, n, k), impl=impl, ms=t,
                             floor_ms=floor, of_floor=floor / t, err=err))
        del x, w, y, ref
    # The gate/up pair with SwiGLU (one kernel) beside two cuBLAS GEMMs and
    # the activation (eager), or the compiled function.
    k, n = 4096, 14336
    x = torch.randn(M, k, dtype=BF16, device="cuda")
    wg = (torch.randn(n, k, dtype=BF16, device="cuda") / k ** 0.5).to(BF16)
    wu = (torch.randn(n, k, dtype=BF16, device="cuda") / k ** 0.5).to(BF16)
    y = torch.empty(M, n, dtype=BF16, device="cuda")

    def gated(x, wg, wu):
        return F.silu(F.linear(x, wg)) * F.linear(x, wu)
    ref = gated(x, wg, wu)
    floor = 2 * 2 * M * n * k / rate / 1e9
    kernel = ours["gate_up_proj_matmul_0"]
    kwg = ours["gate_up_proj_wg_matmul_0"]
    compiled = torch.compile(gated)
    for impl, f in {"eager (cuBLAS)": lambda: gated(x, wg, wu),
                    "compile": lambda: compiled(x, wg, wu),
                    "liger mma.sync": lambda: kernel(x, wg, wu, out=[y]),
                    "liger wgmma": lambda: kwg(x, wg, wu, out=[y])}.items():
        out = f()
        out = out if isinstance(out, torch.Tensor) else y
        err = ((out.float() - ref.float()).norm() / ref.float().norm()).item()
        t = ms(f)
        rows.append(dict(case="gate_up+swiglu %dx%dx%d" % (M, n, k), impl=impl, ms=t,
                         floor_ms=floor, of_floor=floor / t, err=err))
    # The whole MLP, down(SwiGLU(gate(x), up(x))): ours is two kernels (the
    # gate/up pair with SwiGLU, then the down projection); Liger-Kernel
    # fuses only the activation (LigerSiLUMulFunction between cuBLAS GEMMs).
    wd = (torch.randn(k, n, dtype=BF16, device="cuda") / n ** 0.5).to(BF16)
    out = torch.empty(M, k, dtype=BF16, device="cuda")
    down = ours["down_proj_wg_matmul_0"]

    def mlp(x, wg, wu, wd):
        return F.linear(gated(x, wg, wu), wd)

    def ours_mlp():
        kwg(x, wg, wu, out=[y])
        down(y, wd, out=[out])
        return out
    impls = {"eager (cuBLAS)": lambda: mlp(x, wg, wu, wd),
             "compile": (lambda c: lambda: c(x, wg, wu, wd))(torch.compile(mlp))}
    try:
        from liger_kernel.ops.swiglu import LigerSiLUMulFunction
        impls["Liger-Kernel"] = lambda: F.linear(
            LigerSiLUMulFunction.apply(F.linear(x, wg), F.linear(x, wu)), wd)
    except ImportError:
        print("Liger-Kernel not installed: its MLP row is left out")
    impls["liger wgmma"] = ours_mlp
    ref = mlp(x, wg, wu, wd)
    floor = 3 * 2 * M * n * k / rate / 1e9
    for impl, f in impls.items():
        o = f()
        err = ((o.float() - ref.float()).norm() / ref.float().norm()).item()
        t = ms(f)
        rows.append(dict(case="mlp %dx%dx%d" % (M, n, k), impl=impl, ms=t,
                         floor_ms=floor, of_floor=floor / t, err=err))
    # The MLP's training step, forward + backward (the gradients of x and of
    # the three weights): ours is liger.ops.gated_mlp (the gate/up +
    # SwiGLU kernel keeping gate and up, cuBLAS's down projection; the dh +
    # swiglu_grad kernel, cuBLAS's weight gradients and dx); the peers'
    # is autograd through their forwards. Floor: 9 GEMMs of M·n·k.
    dy = torch.randn(M, k, dtype=BF16, device="cuda")
    leaves = [t.detach().requires_grad_() for t in (x, wg, wu, wd)]

    def step(forward):
        return lambda: torch.autograd.grad(forward(*leaves), leaves, dy)
    impls = {"eager (cuBLAS)": step(mlp), "compile": step(torch.compile(mlp))}
    try:
        from liger_kernel.ops.swiglu import LigerSiLUMulFunction
        impls["Liger-Kernel"] = step(lambda x, wg, wu, wd: F.linear(
            LigerSiLUMulFunction.apply(F.linear(x, wg), F.linear(x, wu)), wd))
    except ImportError:
        print("Liger-Kernel not installed: its MLP training row is left out")
    from liger import LigerError, ops
    try:
        ops.gated_mlp(*[t[:8] if t is x else t for t in (x, wg, wu, wd)])
        impls["liger.ops.gated_mlp"] = step(ops.gated_mlp)
    except LigerError as e:
        print("liger.ops.gated_mlp has no kernels here (LIGER_OPS_BUNDLES=bench-bundles/ops, "
              "bench/build-bundles.sh): its MLP training row is left out: %s" % e)
    rows += timed_rows("mlp fwd+bwd %dx%dx%d" % (M, n, k), impls, step(mlp)(),
                       9 * 2 * M * n * k / rate / 1e9)
    del dy, leaves
    # RMSNorm -> projection (4096 -> 4096): the norm folded into the
    # matmul's prologue beside our plain projection and the peers' norm
    # kernel followed by cuBLAS.
    k = n = 4096
    x = torch.randn(M, k, dtype=BF16, device="cuda")
    g = (1 + 0.1 * torch.randn(k, device="cuda")).to(BF16)
    w = (torch.randn(n, k, dtype=BF16, device="cuda") / k ** 0.5).to(BF16)
    y = torch.empty(M, n, dtype=BF16, device="cuda")

    def rms(x, g):
        xf = x.float()
        return g * (xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + 1e-5)).to(BF16)

    def norm_linear(x, g, w):
        return F.linear(rms(x, g), w)
    fused, plain = ours["norm_proj_wg_matmul_0"], ours["o_proj_wg_matmul_0"]
    impls = {"eager (cuBLAS)": lambda: norm_linear(x, g, w),
             "compile": (lambda c: lambda: c(x, g, w))(torch.compile(norm_linear))}
    try:
        from liger_kernel.ops.rms_norm import LigerRMSNormFunction
        impls["Liger-Kernel"] = lambda: F.linear(
            LigerRMSNormFunction.apply(x, g, 1e-5, 0.0, "llama"), w)
    except ImportError:
        print("Liger-Kernel not installed: its norm row is left out")
    impls["liger prologue"] = lambda: (fused(x, g, w, out=[y]), y)[1]
    impls["liger plain proj"] = lambda: (plain(x, w, out=[y]), y)[1]
    # What liger-compile emits by default: our RMSNorm row kernel, then the
    # plain projection on its output (two launches, x normalized through
    # memory); "liger prologue" is the fold (--norm-prologue).
    pre = ours["norm_pre_rowwise_0"]
    xn = torch.empty_like(x)
    impls["liger norm kernel"] = lambda: (pre(x, g, out=[xn]), plain(xn, w, out=[y]), y)[2]
    ref = norm_linear(x, g, w)
    floor = 2 * M * n * k / rate / 1e9
    for impl, f in impls.items():
        o = f()
        err = ((o.float() - ref.float()).norm() / ref.float().norm()).item()
        if impl == "liger plain proj":
            err = float("nan")  # no norm: not comparable
        t = ms(f)
        rows.append(dict(case="rms_norm+proj %dx%dx%d" % (M, n, k), impl=impl, ms=t,
                         floor_ms=floor, of_floor=floor / t, err=err))
    # A rank-16 LoRA projection (4096 -> 4096, scale 2): one kernel beside
    # our plain projection and the peers' three GEMMs.
    la = (torch.randn(16, k, device="cuda") / k ** 0.5).to(BF16)
    lb = (torch.randn(n, 16, device="cuda") / 4).to(BF16)

    def lora_linear(x, w, la, lb):
        return F.linear(x, w) + 2.0 * F.linear(F.linear(x, la), lb)
    lora = ours["lora_proj_wg_matmul_0"]
    impls = {"eager (cuBLAS)": lambda: lora_linear(x, w, la, lb),
             "compile": (lambda c: lambda: c(x, w, la, lb))(torch.compile(lora_linear)),
             "liger wgmma": lambda: (lora(x, w, la, lb, out=[y]), y)[1],
             "liger plain proj": lambda: (plain(x, w, out=[y]), y)[1]}
    ref = lora_linear(x, w, la, lb)
    lora_fwd = impls
    for impl, f in impls.items():
        o = f()
        err = ((o.float() - ref.float()).norm() / ref.float().norm()).item()
        if impl == "liger plain proj":
            err = float("nan")  # no LoRA term: not comparable
        t = ms(f)
        rows.append(dict(case="lora r16 %dx%dx%d" % (M, n, k), impl=impl, ms=t,
                         floor_ms=floor, of_floor=floor / t, err=err))
    # The same LoRA projection in a training step: x, A and B trainable, W
    # frozen (LoRA fine-tuning), a random dy; ours is liger.ops.lora_linear
    # (the LoRA kernel forward; dx = dy·W with the rank-r product added
    # into it, dA and dB from the rank-r products), the peers' autograd
    # through PEFT's three products; beside it the plain projection's step
    # (x trainable, W frozen: the forward and dx GEMMs). Floor: those 2 GEMMs.
    dyl = torch.randn(M, n, dtype=BF16, device="cuda")
    lora_leaves = [t.detach().requires_grad_() for t in (x, la, lb)]

    def lora_step(forward):
        return lambda: torch.autograd.grad(
            forward(lora_leaves[0], w, lora_leaves[1], lora_leaves[2]), lora_leaves, dyl)
    impls = {"eager (cuBLAS)": lora_step(lora_linear),
             "compile": lora_step(torch.compile(lora_linear))}
    try:
        ops.lora_linear(x[:8], w, None, la, lb, 2.0)
        impls["liger.ops.lora_linear"] = lora_step(
            lambda x, w, a, b: ops.lora_linear(x, w, None, a, b, 2.0))
    except LigerError as e:
        print("liger.ops.lora_linear has no kernels here (LIGER_OPS_BUNDLES=bench-bundles/ops, "
              "bench/build-bundles.sh): its LoRA training row is left out: %s" % e)
    rows += timed_rows("lora r16 fwd+bwd %dx%dx%d" % (M, n, k), impls, lora_step(lora_linear)(),
                       2 * floor)
    impls_step = impls
    # The LoRA dx alone: liger::lora_linear_backward (the spec's backward
    # kernel, dy·W + 2·(dy·B)·A with W read in place, and dmid = 2·dy·B
    # from the dy·B it hands between column tiles) and its kernel by itself,
    # beside PyTorch's form of the same pair and the plain projection's dx
    # (cuBLAS's dy·W; ours, W read MN-major). Each timed as 10 calls in a
    # row, per call: the host's launches then overlap the GPU's work, as in
    # a training step (one call alone would time the operator's host work
    # before its kernel).
    from liger import bundles, operators
    dx_ref = operators.lora_grad_reference(dyl, w, la, lb, 2.0)
    impls = {"eager (cuBLAS)": lambda: operators.lora_grad_reference(dyl, w, la, lb, 2.0)}
    if "liger.ops.lora_linear" in impls_step:
        impls["liger lora_linear_backward"] = \
            lambda: operators.lora_linear_backward(dyl, w, la, lb, 2.0, False)
        dx_kernel = bundles.matmul_kernels(ops.lora_linear_spec(k, n, 16, "bf16", 2.0, False))[1]
        dx_inputs = [w, dyl, lb.t().contiguous(), la.t().contiguous()]
        dx_out = torch.empty(M, k, dtype=BF16, device="cuda")
        spaces = [torch.empty(s, device="cuda") for s in dx_kernel.workspace_shapes(dx_inputs)]
        impls["liger dx kernel"] = lambda: (
            dx_kernel(*dx_inputs, out=[dx_out], workspaces=spaces), dx_out,
            (2.0 * spaces[0]).to(BF16))[1:]

        def fresh():
            # As the operator calls it (the factors transposed, new output
            # and workspaces each call) but not through the dispatcher.
            inputs = [w, dyl, lb.t().contiguous(), la.t().contiguous()]
            ws = [torch.empty(s, device="cuda") for s in dx_kernel.workspace_shapes(inputs)]
            return dx_kernel(*inputs, workspaces=ws), (2.0 * ws[0]).to(BF16)
        impls["liger dx kernel, fresh buffers"] = fresh
    plain_dx = ours["o_dx_wg_matmul_0"]
    plain_out = torch.empty(M, k, dtype=BF16, device="cuda")
    rows += timed_rows("lora r16 dx %dx%dx%d" % (M, k, n), impls, dx_ref, floor, calls=10)
    rows += timed_rows("proj dx %dx%dx%d" % (M, k, n), {
        "eager (cuBLAS)": lambda: (dyl.matmul(w),),
        "liger wgmma": lambda: ((plain_dx(dyl, w, out=[plain_out]), plain_out)[1],)},
        (dyl.matmul(w),), floor, calls=10)
    plain_leaf = x.detach().requires_grad_()

    def plain_step():
        return torch.autograd.grad(F.linear(plain_leaf, w), [plain_leaf], dyl)
    rows += timed_rows("proj fwd+bwd, W frozen %dx%dx%d" % (M, n, k),
                       {"eager (cuBLAS)": plain_step}, plain_step(), 2 * floor)
    # The LoRA goals are ratios to the plain projection: each pair timed
    # alternately (floors.interleaved_ratio), beside the rows' own ratio.
    ratios = [("lora r16 fwd / liger plain proj", lora_fwd["liger wgmma"],
               lora_fwd["liger plain proj"])]
    if "liger.ops.lora_linear" in impls_step:
        ratios.append(("lora r16 fwd+bwd / plain fwd+bwd (W frozen)",
                       impls_step["liger.ops.lora_linear"], plain_step))
    ratios = [dict(case=case, median=m, rounds=r)
              for case, a, b in ratios for m, r in [interleaved_ratio(a, b)]]
    # The down projection's backward: dx = dy · W and dW = dyᵀ · x (bf16,
    # and added into an f32 buffer; the peers' f32 form is cuBLAS's bf16
    # product then an f32 add, PyTorch's gradient accumulation).
    k, n = 14336, 4096
    dy = torch.randn(M, n, dtype=BF16, device="cuda")
    w = (torch.randn(n, k, dtype=BF16, device="cuda") / n ** 0.5).to(BF16)
    x = (torch.randn(M, k, dtype=BF16, device="cuda") / M ** 0.5).to(BF16)
    dx = torch.empty(M, k, dtype=BF16, device="cuda")
    dw = torch.empty(n, k, dtype=BF16, device="cuda")
    acc = torch.zeros(n, k, dtype=torch.float32, device="cuda")
    floor = 2 * M * n * k / rate / 1e9
    kdx, kdw, kacc = ours["down_dx_wg_matmul_0"], ours["down_dw_wg_matmul_0"], \
        ours["down_dw_acc_wg_matmul_0"]
    for case, ref, impls in [
            ("down dX", dy @ w, {
                "eager (cuBLAS)": lambda: dy @ w,
                "compile": (lambda c: lambda: c(dy, w))(torch.compile(lambda a, b: a @ b)),
                "liger wgmma": lambda: (kdx(dy, w, out=[dx]), dx)[1]}),
            ("down dW", dy.t() @ x, {
                "eager (cuBLAS)": lambda: dy.t() @ x,
                "compile": (lambda c: lambda: c(dy, x))(torch.compile(lambda a, b: a.t() @ b)),
                "liger wgmma": lambda: (kdw(dy, x, out=[dw]), dw)[1]}),
            ("down dW+=f32", (dy.t() @ x).float(), {
                "eager (cuBLAS)": lambda: acc.zero_().add_(dy.t() @ x),
                "liger wgmma": lambda: (kacc(dy, x, acc.zero_(), out=[acc]), acc)[1]})]:
        for impl, f in impls.items():
            o = f()
            err = ((o.float() - ref.float()).norm() / ref.float().norm()).item()
            t = ms(f)
            rows.append(dict(case="%s %dx%dx%d" % (case, M, n, k), impl=impl, ms=t,
                             floor_ms=floor, of_floor=floor / t, err=err))
    # The gated MLP's backward from the down projection: dh = dy · W_down,
    # then SwiGLU's gradient at the saved gate and up (dgate, dup). Ours is
    # one kernel (the gradient in the dx product's epilogue, dh never
    # stored); the peers' dh is cuBLAS's, then the activation's backward:
    # PyTorch's ops (eager), compiled, or Liger-Kernel's in-place kernel.
    gate = torch.randn(M, k, dtype=BF16, device="cuda")
    up = torch.randn(M, k, dtype=BF16, device="cuda")
    dg, du = (torch.empty(M, k, dtype=BF16, device="cuda") for _ in range(2))

    def swiglu_grads(dh, g, u):
        gf, uf, hf = g.float(), u.float(), dh.float()
        s = torch.sigmoid(gf)
        return (hf * uf * s * (1 + gf * (1 - s))).to(BF16), (hf * gf * s).to(BF16)

    def mlp_bwd(dy, w, g, u):
        return swiglu_grads(dy @ w, g, u)
    ref = mlp_bwd(dy, w, gate, up)
    impls = {"eager (cuBLAS)": lambda: mlp_bwd(dy, w, gate, up),
             "compile": (lambda c: lambda: c(dy, w, gate, up))(torch.compile(mlp_bwd))}
    try:
        from liger_kernel.ops.swiglu import swiglu_backward
        g2, u2 = gate.clone(), up.clone()

        def lk_mlp_bwd():  # in place over its gate and up: fresh copies each call
            g2.copy_(gate)
            u2.copy_(up)
            return swiglu_backward(g2, u2, dy @ w)
        impls["Liger-Kernel"] = lk_mlp_bwd
    except ImportError:
        print("Liger-Kernel not installed: its MLP backward row is left out")
    impls["liger dX + swiglu_grad"] = lambda: (
        ours["mlp_bwd_wg_matmul_0"](dy, w, gate, up, out=[dg, du]), (dg, du))[1]
    rows += timed_rows("down dX+swiglu_grad %dx%dx%d" % (M, n, k), impls, ref, floor)
    del gate, up, dg, du
    # The gate/up pair of a training step, gate and up kept for the
    # backward: ours writes gate, up and SwiGLU in one kernel; the peers run
    # two projections (cuBLAS) and the activation.
    xk = torch.randn(M, n, dtype=BF16, device="cuda")
    wg, wu = ((torch.randn(k, n, device="cuda") / n ** 0.5).to(BF16) for _ in range(2))
    outs = [torch.empty(M, k, dtype=BF16, device="cuda") for _ in range(3)]

    def gate_up_keeps(x, wg, wu):
        g, u = F.linear(x, wg), F.linear(x, wu)
        return g, u, F.silu(g) * u
    ref = gate_up_keeps(xk, wg, wu)
    impls = {"eager (cuBLAS)": lambda: gate_up_keeps(xk, wg, wu),
             "compile": (lambda c: lambda: c(xk, wg, wu))(torch.compile(gate_up_keeps)),
             "liger wgmma": lambda: (ours["gate_up_keeps_wg_matmul_0"](xk, wg, wu, out=outs),
                                     outs)[1]}
    floor = 2 * 2 * M * n * k / rate / 1e9
    rows += timed_rows("gate_up+swiglu keeps %dx%dx%d" % (M, k, n), impls, ref, floor)
    del xk, wg, wu, outs
    # RMSNorm -> q/k projections -> RoPE (Llama-3-8B: 32 + 8 heads of 128),
    # batch 4: one kernel beside our plain [Wq; Wk] projection of the same
    # 5120 columns and the peers' norm, two GEMMs, head split and rotation.
    B, T, hq, hkv, d = 4, M // 4, 32, 8, 128
    x = torch.randn(B, T, 4096, dtype=BF16, device="cuda")
    wq = (torch.randn(hq * d, 4096, device="cuda") / 64).to(BF16)
    wk = (torch.randn(hkv * d, 4096, device="cuda") / 64).to(BF16)
    wqk = torch.cat([wq, wk]).contiguous()
    pos = torch.arange(T, device="cuda", dtype=torch.float32)
    freq = 500000.0 ** (-torch.arange(0, d, 2, device="cuda", dtype=torch.float32) / d)
    ang = torch.cat([pos[:, None] * freq[None]] * 2, -1)[None]
    cos, sin = ang.cos().to(BF16), ang.sin().to(BF16)
    qo = torch.empty(B, hq, T, d, dtype=BF16, device="cuda")
    ko = torch.empty(B, hkv, T, d, dtype=BF16, device="cuda")
    yqk = torch.empty(B * T, (hq + hkv) * d, dtype=BF16, device="cuda")

    def rotate(t):
        return torch.cat([-t[..., d // 2:], t[..., :d // 2]], -1)

    def qk_rope(x, g, wq, wk, cos, sin):
        n = rms(x, g)
        q = F.linear(n, wq).view(B, T, hq, d).transpose(1, 2)
        k = F.linear(n, wk).view(B, T, hkv, d).transpose(1, 2)
        c, s_ = cos[:, None], sin[:, None]
        return q * c + rotate(q) * s_, k * c + rotate(k) * s_
    fused_qk, plain_qk = ours["qk_rope_wg_matmul_0"], ours["qk_plain_wg_matmul_0"]
    impls = {"eager (cuBLAS)": lambda: qk_rope(x, g, wq, wk, cos, sin),
             "compile": (lambda c: lambda: c(x, g, wq, wk, cos, sin))(torch.compile(qk_rope))}
    try:
        from liger_kernel.ops.rms_norm import LigerRMSNormFunction
        from liger_kernel.ops.rope import LigerRopeFunction

        def lk_qk_rope():
            n = LigerRMSNormFunction.apply(x, g, 1e-5, 0.0, "llama")
            q = F.linear(n, wq).view(B, T, hq, d).transpose(1, 2)
            k = F.linear(n, wk).view(B, T, hkv, d).transpose(1, 2)
            return LigerRopeFunction.apply(q, k, cos, sin)
        impls["Liger-Kernel"] = lk_qk_rope
    except ImportError:
        print("Liger-Kernel not installed: its q/k + RoPE row is left out")
    impls["liger prologue"] = lambda: (fused_qk(x, g, wq, wk, cos, sin, out=[qo, ko]), (qo, ko))[1]
    impls["liger plain proj"] = lambda: (plain_qk(x.view(B * T, 4096), wqk, out=[yqk]), yqk)[1]
    rope_only = ours["qk_rope_only_wg_matmul_0"]
    xn = torch.empty_like(x)
    impls["liger norm kernel"] = lambda: (pre(x.view(B * T, 4096), g, out=[xn.view(B * T, 4096)]),
                                       rope_only(xn, wq, wk, cos, sin, out=[qo, ko]), (qo, ko))[2]
    ref = qk_rope(x, g, wq, wk, cos, sin)
    floor = 2 * M * (hq + hkv) * d * 4096 / rate / 1e9
    for impl, f in impls.items():
        o = f()
        if impl == "liger plain proj":
            err = float("nan")  # no norm, no rotation: not comparable
        else:
            err = max(((a.float() - r.float()).norm() / r.float().norm()).item()
                      for a, r in zip(o, ref))
        t = ms(f)
        rows.append(dict(case="rms_norm+qk+rope %dx%dx%d" % (M, (hq + hkv) * d, 4096),
                         impl=impl, ms=t, floor_ms=floor, of_floor=floor / t, err=err))
    # Its goals are ratios too: the chain (norm kernel + q/k + RoPE kernel)
    # to the plain q/k projection and to torch.compile's chain, interleaved.
    ratios += [dict(case=case, median=m, rounds=r) for case, a, b in [
        ("rms_norm+qk+rope (norm kernel) / liger plain proj", impls["liger norm kernel"],
         impls["liger plain proj"]),
        ("rms_norm+qk+rope (norm kernel) / compile", impls["liger norm kernel"],
         impls["compile"])] for m, r in [interleaved_ratio(a, b)]]
    # The q/k projections with RoPE in a training step, forward + backward
    # (the gradients of x, Wq and Wk), no norm: ours is liger.ops.linear_rope
    # (one kernel forward; RoPE's gradient kernel, then cuBLAS's dx, dWq and
    # dWk); the peers' is autograd through their forwards. Floor: 3 GEMMs of
    # M·(hq + hkv)·d·4096.
    def qk_rope_plain(x, wq, wk, cos, sin):
        q = F.linear(x, wq).view(B, T, hq, d).transpose(1, 2)
        k = F.linear(x, wk).view(B, T, hkv, d).transpose(1, 2)
        c, s_ = cos[:, None], sin[:, None]
        return q * c + rotate(q) * s_, k * c + rotate(k) * s_
    leaves = [t.detach().requires_grad_() for t in (x, wq, wk)]
    dq, dk = torch.randn_like(qo), torch.randn_like(ko)

    def qk_step(forward):
        return lambda: torch.autograd.grad(forward(*leaves, cos, sin), leaves, (dq, dk))
    impls = {"eager (cuBLAS)": qk_step(qk_rope_plain),
             "compile": qk_step(torch.compile(qk_rope_plain))}
    try:
        from liger_kernel.ops.rope import LigerRopeFunction
        impls["Liger-Kernel"] = qk_step(lambda x, wq, wk, cos, sin: LigerRopeFunction.apply(
            F.linear(x, wq).view(B, T, hq, d).transpose(1, 2),
            F.linear(x, wk).view(B, T, hkv, d).transpose(1, 2), cos, sin))
    except ImportError:
        print("Liger-Kernel not installed: its q/k + RoPE training row is left out")
    try:
        ops.linear_rope(x[:, :8], wq, wk, cos[:, :8], sin[:, :8])
        impls["liger.ops.linear_rope"] = qk_step(ops.linear_rope)
    except LigerError as e:
        print("liger.ops.linear_rope has no kernels here (LIGER_OPS_BUNDLES=bench-bundles/ops, "
              "bench/build-bundles.sh): its q/k + RoPE training row is left out: %s" % e)
    rows += timed_rows("qk+rope fwd+bwd %dx%dx%d" % (M, (hq + hkv) * d, 4096), impls,
                       qk_step(qk_rope_plain)(), 3 * 2 * M * (hq + hkv) * d * 4096 / rate / 1e9)
    # RMSNorm -> q/k/v in a training step, forward + backward (the gradients
    # of x, the norm's weight and Wq, Wk, Wv): ours is liger.ops.
    # rms_norm_linear (fuse_norm_linear=True: the norm kernel, cuBLAS's
    # projections; dxn accumulated into one buffer, the norm's backward
    # kernel) beside liger.ops.rms_norm and the projections apart (rms_norm=
    # True); the peers' is autograd through their forwards. Floor: 3 GEMMs
    # of M·(hq + 2·hkv)·d·4096.
    del leaves, dq, dk
    wv = (torch.randn(hkv * d, 4096, dtype=BF16, device="cuda") / 64).to(BF16)
    leaves = [t.detach().requires_grad_() for t in (x, g, wq, wk, wv)]
    seeds = [torch.randn(B, T, n_, dtype=BF16, device="cuda") for n_ in (hq * d, hkv * d, hkv * d)]

    def norm_qkv(x, g, wq, wk, wv):
        xn = rms(x, g)
        return F.linear(xn, wq), F.linear(xn, wk), F.linear(xn, wv)

    def norm_step(forward):
        return lambda: torch.autograd.grad(forward(*leaves), leaves, seeds)
    impls = {"eager (cuBLAS)": norm_step(norm_qkv), "compile": norm_step(torch.compile(norm_qkv))}
    try:
        from liger_kernel.ops.rms_norm import LigerRMSNormFunction
        impls["Liger-Kernel"] = norm_step(lambda x, g, wq, wk, wv: tuple(
            F.linear(xn, w) for xn in [LigerRMSNormFunction.apply(x, g, 1e-5, 0.0, "llama")]
            for w in (wq, wk, wv)))
    except ImportError:
        print("Liger-Kernel not installed: its norm + q/k/v training row is left out")
    try:
        ops.rms_norm_linear(x[:1, :8], g, [wq, wk, wv], eps=1e-5)
        impls["liger norm apart"] = norm_step(lambda x, g, wq, wk, wv: tuple(
            F.linear(xn, w) for xn in [ops.rms_norm(x, g, 1e-5)] for w in (wq, wk, wv)))
        impls["liger.ops.rms_norm_linear"] = norm_step(
            lambda x, g, wq, wk, wv: tuple(ops.rms_norm_linear(x, g, [wq, wk, wv], eps=1e-5)[1]))
    except LigerError as e:
        print("liger.ops.rms_norm has no kernels here (LIGER_OPS_BUNDLES=bench-bundles/ops, "
              "bench/build-bundles.sh): its norm + q/k/v training rows are left out: %s" % e)
    rows += timed_rows("rms_norm+qkv fwd+bwd %dx%dx%d" % (M, (hq + 2 * hkv) * d, 4096), impls,
                       norm_step(norm_qkv)(), 3 * 2 * M * (hq + 2 * hkv) * d * 4096 / rate / 1e9)
    print("bf16 matrix rate %.0f TFLOP/s (8192^3 torch.matmul)" % rate)
    print("%-31s %-16s %9s %9s %8s %9s" % ("case", "impl", "ms", "floor ms", "of floor",
                                           "rel err"))
    for r in rows:
        print("%-31s %-16s %9.3f %9.3f %7.0f%% %9.1e" % (
            r["case"], r["impl"], r["ms"], r["floor_ms"], 100 * r["of_floor"], r["err"]))
    for r in ratios:
        print("%-44s %.3f interleaved (median of %s)" % (
            r["case"], r["median"], " ".join("%.3f" % t for t in r["rounds"])))
    if args.json:
        json.dump(dict(tflops=rate, tokens=M, rows=rows, ratios=ratios), open(args.json, "w"),
                  indent=1)


if __name__ == "__main__":
    main()
