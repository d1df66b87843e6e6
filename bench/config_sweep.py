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
ap.add_argument("--only", help="comma-separated kernel-name prefixes to time (default all)")
args = ap.parse_args()
M = args.tokens
bw = copy_bandwidth()
bundle = runtime.load(args.bundle)
BF16 = torch.bfloat16


def rows(H):
    return torch.randn(M, H, device="cuda", dtype=BF16)


def log_probs(H):
    return torch.randn(M, H, device="cuda").log_softmax(-1).to(BF16)


def labels(H):
    """Shift labels with one in seven ignored."""
    out = torch.randint(0, H, (M,), device="cuda")
    out[::7] = -100
    return out


def logits_jsd(H):
    """Both chunks of logits, the incoming gradient per token, labels with
    one in seven ignored."""
    return (rows(H) * 3, rows(H) * 3, torch.rand(M, device="cuda"), labels(H))


# prefix: (row length, its inputs, the [M, H] bf16 passes it must move,
# its outputs: "rows" ([M, H] bf16) and "row" (one f32 per row))
inputs = {
    "swiglu": (14336, lambda H: (rows(H), rows(H)), 3, ("rows",)),
    "rms": (4096, lambda H: (rows(H), torch.randn(H, device="cuda", dtype=BF16)), 2, ("rows",)),
    "kl": (128256, lambda H: (log_probs(H), log_probs(H).exp()), 2, ("row",)),
    "jsdloss": (128256, lambda H: (log_probs(H), log_probs(H)), 2, ("row",)),
    "jsdlogits": (128256, logits_jsd, 3, ("row", "rows")),
    "softmax": (128256, lambda H: (rows(H),), 2, ("rows",)),
    # GPT-2's odd vocabulary: one-element chunks against peeled rows
    "kl50k": (50257, lambda H: (log_probs(H), log_probs(H).exp()), 2, ("row",)),
    "kllg50k": (50257, lambda H: (log_probs(H), log_probs(H).exp(),
                                  torch.rand(M, device="cuda")), 3, ("row", "rows")),
    "jsdloss50k": (50257, lambda H: (log_probs(H), log_probs(H), labels(H)), 2, ("row",)),
    "jsdlg50k": (50257, lambda H: (log_probs(H), log_probs(H), torch.rand(M, device="cuda"),
                                   labels(H)), 3, ("row", "rows")),
}
print("copy bandwidth %.0f GB/s" % bw)
only = set(args.only.split(",")) if args.only else set(inputs)
unknown = only - set(inputs)
if unknown:
    ap.error("unknown prefixes %s (known: %s)" % (sorted(unknown), ", ".join(inputs)))
for prefix, (H, make, passes, outputs) in inputs.items():
    if prefix not in only:
        continue
    xs = make(H)
    out = [torch.empty(M, H, device="cuda", dtype=BF16) if o == "rows" else
           torch.empty(M, device="cuda") for o in outputs]
    floor = passes * M * H * 2 / bw / 1e6
    first = None  # the first configuration's outputs, which the others should match
    for name in sorted(k for k in bundle.kernels if k.startswith(prefix + "_t")):
        k = bundle[name]
        t = ms(lambda: k(*xs, out=out))
        got = [o.float().clone() for o in out]
        first = first or got
        diff = max((g - f).abs().max().item() for g, f in zip(got, first))
        print("%-28s %8.3f ms  %5.0f%% of floor  max |diff| vs the first %.2e"
              % (name, t, 100 * floor / t, diff))
    del xs, out
