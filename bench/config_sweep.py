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
BF16 = torch.bfloat16


def rows(H):
    return torch.randn(M, H, device="cuda", dtype=BF16)


def log_probs(H):
    return torch.randn(M, H, device="cuda").log_softmax(-1).to(BF16)


# prefix: (row length, its inputs, the [M, H] bf16 passes it must move,
# whether it writes [M, H] bf16 or one f32 per row)
inputs = {
    "swiglu": (14336, lambda H: (rows(H), rows(H)), 3, True),
    "rms": (4096, lambda H: (rows(H), torch.randn(H, device="cuda", dtype=BF16)), 2, True),
    "kl": (128256, lambda H: (log_probs(H), log_probs(H).exp()), 2, False),
    "jsdloss": (128256, lambda H: (log_probs(H), log_probs(H)), 2, False),
}
print("copy bandwidth %.0f GB/s" % bw)
for prefix, (H, make, passes, row_result) in inputs.items():
    xs = make(H)
    out = [torch.empty(M, H, device="cuda", dtype=BF16) if row_result else
           torch.empty(M, device="cuda")]
    floor = passes * M * H * 2 / bw / 1e6
    for name in sorted(k for k in bundle.kernels if k.startswith(prefix + "_t")):
        k = bundle[name]
        t = ms(lambda: k(*xs, out=out))
        print("%-28s %8.3f ms  %5.0f%% of floor" % (name, t, 100 * floor / t))
    del xs, out
