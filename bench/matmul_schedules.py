#!/usr/bin/env python3
"""The wgmma template's schedules at the same problem (a diagnostic, not a
goal row): the up projection and the gate/up pair with SwiGLU of
Llama-3-8B (16384 tokens, bf16), each as data-parallel 128-row tiles (the
default), data-parallel 64-row tiles, pingpong 64- and 128-row tiles and
persistent at the default tile (bench/matmul_schedules.mlir), beside
cuBLAS (eager) and torch.compile. Each result is checked against torch
first; times are triton.testing.do_bench medians; then the persistent
kernel against the default, timed alternately (floors.interleaved_ratio).

    PYTHONPATH=python:build-runtime-py/python \\
        python3 bench/matmul_schedules.py [--bundle bench-bundles/matmul-schedules]
"""
import argparse

import torch
import torch.nn.functional as F
from floors import interleaved_ratio, ms

from liger import runtime

BF16 = torch.bfloat16
KERNELS = {"up": ["up_dp128", "up_dp64", "up_pp64", "up_pp128", "up_dp64_n128", "up_pp64_n128",
                  "up_ps128", "up_ps128s3"],
           "gate_up+swiglu": ["gu_dp128", "gu_dp64", "gu_pp64", "gu_pp128", "gu_ps128"]}


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
        persistent = [n for n in KERNELS[case] if "_ps" in n][0]
        m, r = interleaved_ratio(rows["liger " + persistent], rows["liger " + KERNELS[case][0]])
        print("%-16s %s / %s: %.3f interleaved (median of %s)" % (
            case, persistent, KERNELS[case][0], m, " ".join("%.3f" % t for t in r)), flush=True)


if __name__ == "__main__":
    main()
