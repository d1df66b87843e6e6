#!/usr/bin/env python3
"""The lm_head and its cross-entropy, forward + backward (dx and dW), at
Llama-3-8B's shapes (8192 tokens, hidden 4096, vocabulary 128256, bf16,
mean, 1/7 of the targets ignored), beside PyTorch eager, torch.compile and
Liger-Kernel on one GPU: time, its fraction of the FLOP floor (3 GEMMs of
2·N·V·H over the bf16 matrix rate measured in the same run) and the peak
memory one step allocates beyond its inputs (the gradients included).
With `--reduction none` each token's loss, backward with a per-token
incoming gradient (ours and Liger-Kernel's run the chunks again in the
backward: 4 GEMMs against the floor's 3).

    PYTHONPATH=python:build-runtime-py/python LIGER_OPS_BUNDLES=bench-bundles/ops \\
        python3 bench/fused_linear_cross_entropy.py [--budget-mib 512] [--reduction none] \\
        [--json out.json]

(bench/build-bundles.sh precompiles our kernels for these shapes.)
"""
import argparse
import json
import sys

import torch
import torch.nn.functional as F
from floors import profile_impls, matrix_rate, measure_steps, ms, print_rows
from liger import ops

BF16 = torch.bfloat16


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--tokens", type=int, default=8192)
    ap.add_argument("--hidden", type=int, default=4096)
    ap.add_argument("--vocab", type=int, default=128256)
    ap.add_argument("--budget-mib", type=int, default=512)
    ap.add_argument("--reduction", choices=("mean", "none"), default="mean")
    ap.add_argument("--impls", help="comma-separated implementations to run (default: all)")
    ap.add_argument("--json")
    ap.add_argument("--profile", type=int, default=0, metavar="N",
                    help="after the timings, profile one more step of each implementation "
                         "and print its N GPU kernels of most time")
    args = ap.parse_args()
    n, h, v, reduction = args.tokens, args.hidden, args.vocab, args.reduction
    rate = matrix_rate()
    x = torch.randn(n, h, device="cuda").to(BF16)
    w = (torch.randn(v, h, device="cuda") / h ** 0.5).to(BF16)
    t = torch.randint(0, v, (n,), device="cuda")
    t[::7] = -100
    # The incoming gradient: 1, or one per token (of both signs).
    dloss = torch.ones((), device="cuda") if reduction == "mean" else \
        torch.rand(n, device="cuda") * 2 - 0.5

    def eager(xx, ww):
        return F.cross_entropy(F.linear(xx, ww).float(), t, reduction=reduction)
    compiled = torch.compile(eager)

    def step_of(f):
        def step():
            xx = x.detach().requires_grad_(True)
            ww = w.detach().requires_grad_(True)
            loss = f(xx, ww)
            loss.backward(dloss)
            return loss, xx.grad, ww.grad
        return step

    impls = {"eager": step_of(eager), "compile": step_of(compiled)}
    try:
        from liger_kernel.ops.fused_linear_cross_entropy import (
            LigerFusedLinearCrossEntropyFunction)

        def lk(xx, ww):
            out = LigerFusedLinearCrossEntropyFunction.apply(xx, ww, t, None, None, -100, 0.0,
                                                             0.0, reduction)
            return out[0] if isinstance(out, tuple) else out
        impls["Liger-Kernel"] = step_of(lk)
    except Exception as e:  # noqa: BLE001
        print("# liger-kernel not importable: %s" % e, file=sys.stderr)
    budget = args.budget_mib << 20
    impls["liger"] = step_of(
        lambda xx, ww: ops.fused_linear_cross_entropy(xx, ww, t, reduction=reduction,
                                                      memory_budget=budget))
    if args.impls:
        impls = {k: f for k, f in impls.items() if k in set(args.impls.split(","))}
    plan = ops.fused_linear_cross_entropy_plan(n, v, "bf16", budget)

    # The reference: float32 logits from bf16 inputs, float64 loss.
    xr, wr = x.float().requires_grad_(True), w.float().requires_grad_(True)
    ref = F.cross_entropy(F.linear(xr, wr).double(), t, reduction=reduction)
    ref.backward(dloss.double())
    ref_dx, ref_dw, ref = xr.grad, wr.grad, ref.detach()
    del xr, wr

    floor = 3 * 2 * n * v * h / rate / 1e9
    rows = measure_steps(impls, (ref, ref_dx, ref_dw), floor, rep=500)
    print("bf16 matrix rate %.0f TFLOP/s; %d tokens x hidden %d x vocabulary %d, reduction "
          "%s; ours in %d chunks of %d tokens (%.2f GiB of logits)" % (
              rate, n, h, v, reduction, plan["chunks"], plan["chunk_tokens"],
              plan["extra_bytes"] / 2 ** 30))
    print_rows(rows)
    parts = breakdown(x, w, t, plan, rate) if "liger" in impls else []
    profiles = profile_impls(impls, args.profile) if args.profile else {}
    if args.json:
        json.dump(dict(tflops=rate, tokens=n, hidden=h, vocab=v, reduction=reduction,
                       plan=plan, rows=rows, breakdown=parts, profiles=profiles),
                  open(args.json, "w"), indent=1)


def breakdown(x, w, t, plan, rate):
    """Each of our kernels at one chunk's shape beside cuBLAS (torch.matmul)
    for the same GEMM: where the plan's time goes."""
    c = plan["chunk_tokens"]
    from liger import bundles
    spec = ops.fused_linear_cross_entropy_spec(w.shape[0], w.shape[1], "bf16",
                                               target=bundles.device_target(x.device))
    k = bundles.loss_plan_kernels(spec)  # the kernels of one chunk, by stage
    xc, tc = x[:c].contiguous(), t[:c].contiguous()
    z = torch.empty(c, w.shape[0], dtype=BF16, device="cuda")
    dx, dw = torch.empty_like(xc), torch.empty_like(w)
    part = torch.empty((), dtype=torch.float32, device="cuda")
    g = torch.ones((), dtype=torch.float32, device="cuda")
    k["logits"](xc, w, out=[z])
    gemm = 2 * c * w.shape[0] * w.shape[1]
    cases = [
        ("logits", lambda: k["logits"](xc, w, out=[z]), lambda: xc @ w.t(), gemm),
        ("ce", lambda: k["ce"](z, tc, g, out=[part, z]), None, 0),
        ("dx", lambda: k["dx"](z, w, out=[dx]), lambda: z @ w, gemm),
        ("dw0", lambda: k["dw0"](z, xc, out=[dw]), lambda: z.t() @ xc, gemm),
        ("dw", lambda: k["dw"](z, xc, dw, out=[dw]),
         lambda: dw.addmm_(z.t(), xc), gemm),
    ]
    parts = []
    print("per chunk of %d tokens: kernel, ms, cuBLAS ms (same GEMM), of the FLOP floor" % c)
    for name, ours, blas, flops in cases:
        tm = ms(ours)
        tb = ms(blas) if blas else None
        floor = flops / rate / 1e9 if flops else None
        parts.append(dict(kernel=name, ms=tm, cublas_ms=tb, floor_ms=floor))
        print("  %-7s %8.3f %8s %8s" % (name, tm, "%.3f" % tb if tb else "-",
                                        "%.0f%%" % (100 * floor / tm) if floor else "-"))
    return parts


if __name__ == "__main__":
    main()
