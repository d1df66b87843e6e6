#!/usr/bin/env python3
"""The wgmma template's schedules at the same problem (a diagnostic, not a
goal row): the up projection and the gate/up pair with SwiGLU of
Llama-3-8B (16384 tokens, bf16), each as data-parallel 128-row tiles (the
default), data-parallel 64-row tiles and pingpong 64- and 128-row tiles
(bench/matmul_schedules.mlir), beside cuBLAS (eager) and torch.compile.
Each result is checked against torch first; times are
triton.testing.do_bench medians.

    PYTHONPATH=python:build-runtime-py/python \\
        python3 bench/matmul_schedules.py [--bundle bench-bundles/matmul-schedules]
"""
import argparse

import torch
import torch.nn.functional as F
from floors import ms

from liger import runtime

BF16 = torch.bfloat16
KERNELS = {"up": ["up_dp128", "up_dp64", "up_pp64", "up_pp128", "up_dp64_n128", "up_pp64_n128"],
           "gate_up+swiglu": ["gu_dp128", "gu_dp64", "gu_pp64", "gu_pp128"]}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bundle", default="bench-bundles/matmul-schedules")
    ap.add_argument("--tokens", type=int, default=16384)
    args = ap.parse_args()
    ours = runtime.load(args.bundle)
    M, K, N = args.tokens, 4096, 14336
    x = torch.randn(M, K, dtype=BF16, device="cuda")
    w = (torch.randn(N, K, dtype=BF16, device="cuda") / K ** 0.5).to(BF16)
    u = (torch.randn(N, K, dtype=BF16, device="cuda") / K ** 0.5).to(BF16)
    y = torch.empty(M, N, dtype=BF16, device="cuda")
    up = lambda: F.linear(x, w)
    gate_up = lambda: F.silu(F.linear(x, w)) * F.linear(x, u)
    for case, peer in (("up", up), ("gate_up+swiglu", gate_up)):
        ref = peer()
        rows = {"eager (cuBLAS)": peer, "compile": torch.compile(peer)}
        for name in KERNELS[case]:
            k = ours[name + "_matmul_0"]
            rows["liger " + name] = ((lambda k=k: k(x, w, out=[y])) if case == "up"
                                     else (lambda k=k: k(x, w, u, out=[y])))
        for impl, f in rows.items():
            out = f()
            out = y if out is None or not isinstance(out, torch.Tensor) else out
            err = ((out.float() - ref.float()).norm() / ref.float().norm()).item()
            if err > 2e-2:
                raise SystemExit("%s %s: relative error %.2e" % (case, impl, err))
            print("%-16s %-22s %.3f ms  (rel. err %.1e)" % (case, impl, ms(f), err), flush=True)


if __name__ == "__main__":
    main()
