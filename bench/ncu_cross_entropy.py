#!/usr/bin/env python3
"""Launches the fused cross-entropy kernels of the bench bundle once each at
the bench shape (8192 tokens x 128256, bf16, mean), for a profiler, e.g.

    ncu --kernel-name regex:ce_fused --section SpeedOfLight \\
        --section WarpStateStats --csv \\
        python3 bench/ncu_cross_entropy.py --bundle bench-bundles/cross_entropy ce_fused
"""
import argparse

import torch

from liger import runtime


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bundle", default="bench-bundles/cross_entropy")
    ap.add_argument("--tokens", type=int, default=8192)
    ap.add_argument("kernels", nargs="+", help="functions of bench/cross_entropy.mlir")
    args = ap.parse_args()
    ours = runtime.load(args.bundle)
    x = (torch.randn(args.tokens, 128256, device="cuda") * 3).to(torch.bfloat16)
    t = torch.randint(0, 128256, (args.tokens,), device="cuda")
    one = torch.tensor(1.0, device="cuda")
    for name in args.kernels:
        ours[name + "_rowwise_0"](x, t, one)
    torch.cuda.synchronize()


if __name__ == "__main__":
    main()
