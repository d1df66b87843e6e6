#!/usr/bin/env python3
"""Times rowwise kernels compiled at pinned configurations
(bench/config_sweep.mlir: threads x vector width, and for the loop form's
staging CTAs an SM, reuse_loads and the cluster splitting each row) at
16384 tokens, as a fraction of the
copy-bandwidth floor, to choose liger-lower-to-gpu's default
configuration.

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


def logits_jsd(H):
    """Both chunks of logits, the incoming gradient per token, labels with
    one in seven ignored."""
    labels = torch.randint(0, H, (M,), device="cuda")
    labels[::7] = -100
    return (rows(H) * 3, rows(H) * 3, torch.rand(M, device="cuda"), labels)


# prefix: (row length, its inputs, the [M, H] bf16 passes it must move,
# its outputs: "rows" ([M, H] bf16) and "row" (one f32 per row))
inputs = {
    "swiglu": (14336, lambda H: (rows(H), rows(H)), 3, ("rows",)),
    "rms": (4096, lambda H: (rows(H), torch.randn(H, device="cuda", dtype=BF16)), 2, ("rows",)),
    "kl": (128256, lambda H: (log_probs(H), log_probs(H).exp()), 2, ("row",)),
    "jsdloss": (128256, lambda H: (log_probs(H), log_probs(H)), 2, ("row",)),
    "jsdlogits": (128256, logits_jsd, 3, ("row", "rows")),
    "softmax": (128256, lambda H: (rows(H),), 2, ("rows",)),
}
print("copy bandwidth %.0f GB/s" % bw)
for prefix, (H, make, passes, outputs) in inputs.items():
    xs = make(H)
    out = [torch.empty(M, H, device="cuda", dtype=BF16) if o == "rows" else
           torch.empty(M, device="cuda") for o in outputs]
    floor = passes * M * H * 2 / bw / 1e6
    for name in sorted(k for k in bundle.kernels if k.startswith(prefix + "_t")):
        k = bundle[name]
        t = ms(lambda: k(*xs, out=out))
        print("%-28s %8.3f ms  %5.0f%% of floor" % (name, t, 100 * floor / t))
    del xs, out
