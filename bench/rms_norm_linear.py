#!/usr/bin/env python3
"""RMSNorm -> q/k/v in a training step, ours two ways: liger.ops.rms_norm
with the projections apart (the default patch) and liger.ops.rms_norm_linear
(fuse_norm_linear=True), each timed twice (in order, then in reverse, to
show the spread of the order), with the three orders of the backward's
GEMMs alone (dxn accumulated first with addmm_, interleaved with each dW,
and autograd's order: the products, then their adds); --profile prints
each form's kernels (torch.profiler, 10 steps). Llama-3-8B widths, bf16.

    # here: bash bench/build-bundles.sh; on the GPU machine:
    PYTHONPATH=python:build-runtime-py/python LIGER_OPS_BUNDLES=bench-bundles/ops \\
        python3 bench/rms_norm_linear.py [--tokens 16384] [--profile]
"""
import argparse

import torch
import torch.nn.functional as F
from floors import ms

from liger import ops

BF16 = torch.bfloat16


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--tokens", type=int, default=16384)
    ap.add_argument("--profile", action="store_true")
    args = ap.parse_args()
    B, T, hidden, eps = 4, args.tokens // 4, 4096, 1e-5
    x = torch.randn(B, T, hidden, dtype=BF16, device="cuda")
    g = (1 + torch.randn(hidden, device="cuda") / 10).to(BF16)
    ws = [(torch.randn(n, hidden, device="cuda") / 64).to(BF16) for n in (4096, 1024, 1024)]
    leaves = [t.detach().requires_grad_() for t in [x, g] + ws]
    seeds = [torch.randn(B, T, w.shape[0], dtype=BF16, device="cuda") for w in ws]
    forms = {
        "norm apart": lambda x, g, *w: tuple(F.linear(xn, wi) for xn in [ops.rms_norm(x, g, eps)]
                                             for wi in w),
        "rms_norm_linear": lambda x, g, *w: tuple(ops.rms_norm_linear(x, g, list(w), eps=eps)[1]),
    }
    steps = {n: (lambda f=f: torch.autograd.grad(f(*leaves), leaves, seeds))
             for n, f in forms.items()}
    flat = [s.reshape(-1, s.shape[-1]) for s in seeds]
    xn, rstd = torch.ops.liger.rms_norm(x, g, eps, 0.0, "llama")
    flat_xn = xn.reshape(-1, hidden)

    def norm_backward(dxn):
        return torch.ops.liger.rms_norm_backward(dxn.view(x.shape), x, g, rstd, eps, 0.0,
                                                 "llama")

    def accumulated_first():
        dxn = flat[0].matmul(ws[0])
        for dy, w in zip(flat[1:], ws[1:]):
            dxn.addmm_(dy, w)
        return norm_backward(dxn), [dy.t().matmul(flat_xn) for dy in flat]

    def interleaved():
        dxn, dws = None, []
        for dy, w in zip(flat, ws):
            dxn = dy.matmul(w) if dxn is None else dxn.addmm_(dy, w)
            dws.append(dy.t().matmul(flat_xn))
        return norm_backward(dxn), dws

    def autograd_order():
        parts = [dy.matmul(w) for dy, w in zip(flat, ws)]
        dws = [dy.t().matmul(flat_xn) for dy in flat]
        return norm_backward(parts[0] + parts[1] + parts[2]), dws
    cases = dict(steps, **{"backward: dxn first": accumulated_first,
                           "backward: interleaved": interleaved,
                           "backward: autograd's order": autograd_order})
    # The two forms agree (their step's gradients).
    for a, b in zip(steps["norm apart"](), steps["rms_norm_linear"]()):
        err = ((a.float() - b.float()).norm() / b.float().norm()).item()
        assert err < 2e-2, err
    times = {n: [] for n in cases}
    for order in (list(cases), list(reversed(list(cases)))):
        for n in order:
            times[n].append(ms(cases[n]))
    print("%d tokens, ms (in order, reversed)" % args.tokens)
    for n, t in times.items():
        print("%-28s %8.3f %8.3f" % (n, t[0], t[1]))
    if args.profile:
        from torch.profiler import ProfilerActivity, profile
        for n, step in steps.items():
            torch.cuda.synchronize()
            with profile(activities=[ProfilerActivity.CUDA]) as p:
                for _ in range(10):
                    step()
                torch.cuda.synchronize()
            print("== %s, 10 steps" % n)
            print(p.key_averages().table(sort_by="cuda_time_total", row_limit=12,
                                         max_name_column_width=60))


if __name__ == "__main__":
    main()
