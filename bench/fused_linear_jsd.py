#!/usr/bin/env python3
"""Distillation through the lm_heads: the fused linear JSD (beta 0.5,
temperature 1, 1/7 of the shift labels ignored), forward + backward (the
student's dx and dW), for a Llama-3.2-1B student (hidden 2048) of a
Llama-3-8B teacher (hidden 4096) over Llama-3's vocabulary (128256),
8192 tokens, bf16, beside PyTorch eager (every logit held), torch.compile
and Liger-Kernel's LigerFusedLinearJSDFunction on one GPU: time, its
fraction of the FLOP floor (the student's 3 GEMMs and the teacher's one,
2·N·V·(3·H_s + H_t), over the bf16 matrix rate measured in the same run)
and the peak memory one step allocates beyond its inputs.

    PYTHONPATH=python:build-runtime-py/python:bench LIGER_OPS_BUNDLES=bench-bundles/ops \\
        python3 bench/fused_linear_jsd.py [--budget-mib 512] [--json out.json]

(bench/build-bundles.sh precompiles our kernels for these shapes.)
"""
import argparse
import json
import sys

import torch
from floors import profile_impls, matrix_rate, measure_steps, print_rows
from liger import ops

BF16 = torch.bfloat16
SHAPES = dict(tokens=8192, student=2048, teacher=4096, vocab=128256)


def specs(student=SHAPES["student"], teacher=SHAPES["teacher"], vocab=SHAPES["vocab"]):
    """The kernels the liger row runs (for bench/build-bundles.sh)."""
    return ops.fused_linear_jsd_specs(vocab, student, teacher, "bf16", labels="i64")


def plain(xs, ws, xt, wt, labels, beta=0.5):
    """The JSD in PyTorch with every logit held (f32 log-probabilities)."""
    q = (xs @ ws.t()).float().log_softmax(-1)
    p = (xt @ wt.t()).float().log_softmax(-1)
    m = (beta * p.exp() + (1 - beta) * q.exp()).log()
    per_token = beta * (p.exp() * (p - m)).sum(-1) + (1 - beta) * (q.exp() * (q - m)).sum(-1)
    counted = labels != -100
    return (per_token * counted).sum() / counted.sum()


def main():
    ap = argparse.ArgumentParser()
    for k, v in SHAPES.items():
        ap.add_argument("--" + k, type=int, default=v)
    ap.add_argument("--budget-mib", type=int, default=512)
    ap.add_argument("--impls", help="comma-separated implementations to run (default: all)")
    ap.add_argument("--json")
    ap.add_argument("--profile", type=int, default=0, metavar="N",
                    help="after the timings, profile one more step of each implementation "
                         "and print its N GPU kernels of most time")
    args = ap.parse_args()
    n, hs, ht, v = args.tokens, args.student, args.teacher, args.vocab
    rate = matrix_rate()
    xs = torch.randn(n, hs, device="cuda").to(BF16)
    ws = (torch.randn(v, hs, device="cuda") / hs ** 0.5).to(BF16)
    xt = torch.randn(n, ht, device="cuda").to(BF16)
    wt = (torch.randn(v, ht, device="cuda") / ht ** 0.5).to(BF16)
    labels = torch.randint(0, v, (n,), device="cuda")
    labels[::7] = -100

    def step_of(f):
        def step():
            xx = xs.detach().requires_grad_(True)
            ww = ws.detach().requires_grad_(True)
            loss = f(xx, ww)
            loss.backward()
            return loss, xx.grad, ww.grad
        return step

    def eager(xx, ww):
        return plain(xx, ww, xt, wt, labels)
    impls = {"eager": step_of(eager), "compile": step_of(torch.compile(eager))}
    try:
        from liger_kernel.ops.fused_linear_jsd import LigerFusedLinearJSDFunction
        impls["Liger-Kernel"] = step_of(lambda xx, ww: LigerFusedLinearJSDFunction.apply(
            xx, ww, xt, wt, labels, 0.5, -100, 1.0))
    except Exception as e:  # noqa: BLE001
        print("# liger-kernel not importable: %s" % e, file=sys.stderr)
    budget = args.budget_mib << 20
    impls["liger"] = step_of(lambda xx, ww: ops.fused_linear_jsd(
        xx, ww, xt, wt, labels, memory_budget=budget))
    if args.impls:
        impls = {k: f for k, f in impls.items() if k in set(args.impls.split(","))}

    xr, wr = xs.float().requires_grad_(True), ws.float().requires_grad_(True)
    ref = plain(xr, wr, xt.float(), wt.float(), labels)
    ref.backward()
    ref_dx, ref_dw, ref = xr.grad, wr.grad, ref.detach()
    del xr, wr

    floor = 2 * n * v * (3 * hs + ht) / rate / 1e9
    rows = measure_steps(impls, (ref, ref_dx, ref_dw), floor, rep=50)
    print("bf16 matrix rate %.0f TFLOP/s; %d tokens, student hidden %d, teacher hidden %d, "
          "vocabulary %d" % (rate, n, hs, ht, v))
    print_rows(rows)
    profiles = profile_impls(impls, args.profile) if args.profile else {}
    if args.json:
        json.dump(dict(tflops=rate, tokens=n, student=hs, teacher=ht, vocab=v, rows=rows,
                       profiles=profiles), open(args.json, "w"), indent=1)


if __name__ == "__main__":
    main()
