#!/usr/bin/env python3
"""Times rowwise kernels compiled at pinned configurations
(bench/config_sweep.mlir: threads x vector width) at 16384 tokens, as a
fraction of the copy-bandwidth floor, to choose liger-lower-to-gpu's
default configuration.

    PYTHONPATH=python:build-runtime-py/python python3 bench/config_sweep.py --bundle bench-bundles/sweep
"""
import argparse

import torch

from floors import copy_bandwidth, ms
from liger import runtime

ap = argparse.ArgumentParser()
ap.add_argument("--bundle", default="bench-bundles/sweep")
ap.add_argument("--tokens", type=int, default=16384)
args = ap.parse_args()
M = args.tokens
bw = copy_bandwidth()
bundle = runtime.load(args.bundle)
inputs = {
    "swiglu": (14336, lambda H: (torch.randn(M, H, device="cuda", dtype=torch.bfloat16),
                                 torch.randn(M, H, device="cuda", dtype=torch.bfloat16)), 3),
    "rms": (4096, lambda H: (torch.randn(M, H, device="cuda", dtype=torch.bfloat16),
                             torch.randn(H, device="cuda", dtype=torch.bfloat16)), 2),
}
print("copy bandwidth %.0f GB/s" % bw)
for prefix, (H, make, passes) in inputs.items():
    xs = make(H)
    out = [torch.empty(M, H, device="cuda", dtype=torch.bfloat16)]
    floor = passes * M * H * 2 / bw / 1e6
    for name in sorted(k for k in bundle.kernels if k.startswith(prefix + "_t")):
        k = bundle[name]
        t = ms(lambda: k(*xs, out=out))
        print("%-28s %8.3f ms  %5.0f%% of floor" % (name, t, 100 * floor / t))
