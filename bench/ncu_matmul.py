#!/usr/bin/env python3
"""Launches chosen kernels of the matmul bench bundle once each, at the
bench shapes (16384 tokens, Llama-3-8B), for a profiler to look at, e.g.

    ncu --kernel-name regex:'(o_proj|norm_proj)_wg' --section SpeedOfLight \\
        --section MemoryWorkloadAnalysis --csv \\
        python3 bench/ncu_matmul.py --bundle bench-bundles/matmul o_proj_wg norm_proj_wg

Kernels: o_proj_wg, norm_proj_wg, up_proj_wg, gate_up_proj_wg, lora_proj_wg,
qk_plain_wg, qk_rope_wg.
"""
import argparse

import torch

from liger import runtime

BF16 = torch.bfloat16


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bundle", default="bench-bundles/matmul")
    ap.add_argument("--tokens", type=int, default=16384)
    ap.add_argument("kernels", nargs="+")
    args = ap.parse_args()
    M, ours = args.tokens, runtime.load(args.bundle)

    def rand(*shape):
        return (torch.randn(*shape, device="cuda") / shape[-1] ** 0.5).to(BF16)
    x, g = rand(M, 4096), (1 + 0.1 * torch.randn(4096, device="cuda")).to(BF16)
    cos = torch.rand(1, M // 4, 128, device="cuda").to(BF16)
    calls = {
        "o_proj_wg": lambda: [x, rand(4096, 4096)],
        "norm_proj_wg": lambda: [x, g, rand(4096, 4096)],
        "up_proj_wg": lambda: [x, rand(14336, 4096)],
        "gate_up_proj_wg": lambda: [x, rand(14336, 4096), rand(14336, 4096)],
        "lora_proj_wg": lambda: [x, rand(4096, 4096), rand(16, 4096), rand(4096, 16)],
        "qk_plain_wg": lambda: [x, rand(5120, 4096)],
        "qk_rope_wg": lambda: [x.view(4, M // 4, 4096), g, rand(4096, 4096), rand(1024, 4096),
                               cos, cos],
    }
    for name in args.kernels:
        ours[name + "_matmul_0"](*calls[name]())
    torch.cuda.synchronize()
    print("ncu_matmul: launched " + ", ".join(args.kernels))


if __name__ == "__main__":
    main()
