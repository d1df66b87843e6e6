"""Launches every kernel of a few bundles once, at a small and an odd shape
(the matmul templates' kernels at 1 and 130 rows, a loss plan's dx and
its narrow-tile variant at 1 and 100),
for compute-sanitizer (memcheck, racecheck, synccheck): an out-of-bounds
access, a shared-memory race or a missing barrier shows there before it
shows in numbers. Usage: sanitize.py BUNDLES_DIR [matmul] (run under
compute-sanitizer); with `matmul`, only the matmul templates' kernels."""

import os
import sys

import torch

sys.path.insert(0, os.path.dirname(__file__))
import kernels  # noqa: E402
from liger import runtime  # noqa: E402

root = sys.argv[1]
only_matmul = sys.argv[2:] == ["matmul"]
# Rowwise: Llama-sized rows, one-element chunks (7 f16; 50257 bf16's
# norms), rows peeled to 16-byte chunks (50257 bf16's softmax, SwiGLU and
# GeGLU), and the loop over chunk groups (262147 f32).
rowwise = [("h1000_f32", 3), ("h1000_bf16", 5), ("h4096_bf16", 2), ("h7_f16", 3),
           ("h50257_bf16", 2), ("h262147_f32", 2)]
for name, tokens in [] if only_matmul else rowwise:
    if not os.path.isdir(os.path.join(root, name)):
        continue
    dt = name.split("_")[1]
    hidden = int(name.split("_")[0][1:])
    bundle = runtime.load(os.path.join(root, name))
    for case, (specs, _) in kernels.references(dt).items():
        bundle[case + "_rowwise_0"](*kernels.make_inputs(specs, tokens, hidden, dt))
# Attention: every case's kernel at one token and at 2 x 130 (a tail of
# every block size, two (batch, head) rows of tiles).
att = os.path.join(root, "attention")
if not only_matmul and os.path.isdir(att):
    bundle = runtime.load(att)
    for name, (hq, hkv, d, causal, scale, dt, *_) in kernels.ATTENTION.items():
        dtype = kernels.torch_dtype(dt)
        for b, t in ((1, 1), (2, 130)):
            q = torch.randn(b, hq, t, d, device="cuda").to(dtype)
            k = torch.randn(b, hkv, t, d, device="cuda").to(dtype)
            v = torch.randn_like(k)
            bundle[name + "_attention_0"](q, k, v)
            if name in kernels.ATTENTION_GRAD:
                # The forward's lse and the backward from it (its prepare
                # kernel, the bulk copies of the rows' statistics, dq's TMA
                # reductions, the finishing kernel).
                o, lse = bundle[name + "_lse_attention_0"](q, k, v)
                bundle[name + "_grad_attention_0"](torch.randn_like(q), q, k, v, o, lse)
# Cross-entropy: the loss, the gradient and both fused, 1 and 5 rows, one
# target ignored.
ce = os.path.join(root, "cross_entropy")
if not only_matmul and os.path.isdir(ce):
    bundle = runtime.load(ce)
    for name, (vocab, dt, tdt, attrs, weighted, _) in kernels.CROSS_ENTROPY.items():
        dtype = kernels.torch_dtype(dt)
        for rows in (1, 5):
            x = torch.randn(rows, vocab, device="cuda").to(dtype)
            t = torch.randint(0, vocab, (rows,), device="cuda").to(
                {"i64": torch.int64, "i32": torch.int32}[tdt])
            t[-1] = attrs.get("ignore_index", -100)
            w = [torch.rand(vocab, device="cuda")] if weighted else []
            g = (torch.ones(rows, device="cuda") if attrs["reduction"] == "none"
                 else torch.tensor(1.0, device="cuda"))
            bundle["ce_%s_rowwise_0" % name](x, t, *w)
            bundle["ceg_%s_rowwise_0" % name](x, t, g, *w)
            bundle["cef_%s_rowwise_0" % name](x, t, *w, g)
            if name in kernels.CROSS_ENTROPY_PINNED:
                bundle["cefp_%s_rowwise_0" % name](x, t, *w, g)
# The matmul templates: partial row and column tiles.
matmul = os.path.join(root, "matmul")
if os.path.isdir(matmul):
    bundle = runtime.load(matmul)
    for name, (k, n, dt) in ((nm, v[:3]) for nm, v in kernels.MATMULS.items()):
        dtype = {"bf16": torch.bfloat16, "f16": torch.float16}[dt]
        for rows in (1, 130):
            args = [torch.randn(rows, k, device="cuda").to(dtype),
                    torch.randn(n, k, device="cuda").to(dtype)]
            if kernels.MATMUL_PROLOGUES.get(name):
                args.insert(1, torch.randn(k, device="cuda").to(dtype))
            if name in kernels.MATMUL_LORA:
                r = kernels.MATMUL_LORA[name][0]
                args += [torch.randn(r, k, device="cuda").to(dtype),
                         torch.randn(n, r, device="cuda").to(dtype)]
            if name in kernels.MATMUL_BIAS:
                args.append(torch.randn(n, device="cuda").to(dtype))
            if kernels.MATMUL_EPILOGUES.get(name) in ("add_silu", "add_gelu"):
                args.append(torch.randn(rows, n, device="cuda").to(dtype))
            elif kernels.MATMUL_EPILOGUES.get(name) in ("swiglu", "geglu_tanh"):
                args.append(torch.randn(n, k, device="cuda").to(dtype))
            bundle[name + "_matmul_0"](*args)
    # The gradient products: dx [rows, K] and dW [N, K] (the rows reduced).
    for name, (op, n, k, dt) in ((nm, v[:4]) for nm, v in kernels.MATMUL_GRADS.items()):
        dtype = {"bf16": torch.bfloat16, "f16": torch.float16}[dt]
        for rows in (1, 130):
            dy = torch.randn(rows, n, device="cuda").to(dtype)
            if op == "dx":
                args = [dy, torch.randn(n, k, device="cuda").to(dtype)]
            else:
                args = [dy, torch.randn(rows, k, device="cuda").to(dtype)]
                if op == "dw_acc":
                    args.append(torch.randn(n, k, device="cuda"))
                elif op == "dw_acc_lowp":
                    args.append(torch.randn(n, k, device="cuda").to(dtype))
            bundle[name + "_matmul_0"](*args)
    # q/k + RoPE: batch 2 x 65 tokens.
    for name, (k, hq, hkv, d, dt, _, _, _, norm, bias, batched, _) in kernels.MATMUL_ROPE.items():
        dtype = {"bf16": torch.bfloat16, "f16": torch.float16}[dt]
        args = [torch.randn(2, 65, k, device="cuda").to(dtype)]
        args += [torch.randn(k, device="cuda").to(dtype)] if norm else []
        args += [torch.randn(h * d, k, device="cuda").to(dtype) for h in (hq, hkv)]
        args += [torch.randn(h * d, device="cuda").to(dtype) for h in (hq, hkv)] if bias else []
        args += [torch.randn(2 if batched else 1, 65, d, device="cuda").to(dtype)
                 for _ in range(2)]
        bundle[name + "_matmul_0"](*args)
# A loss plan's dx (G · W): at 100 rows its narrow-tile variant runs (two
# 64-row tiles, the second partial, against one of 128), at 1 row the kernel.
plans = os.path.join(root, "loss_plan")
if os.path.isdir(plans):
    bundle = runtime.load(plans)
    for name, (v, h, dt, _, _) in kernels.LOSS_PLANS.items():
        (plan,) = [p for p in bundle.plans if p["function"] == name]
        dtype = kernels.torch_dtype(dt)
        for rows in (1, 100):
            bundle[plan["kernels"]["dx"]](torch.randn(rows, v, device="cuda").to(dtype),
                                          torch.randn(v, h, device="cuda").to(dtype))
torch.cuda.synchronize()
if only_matmul and not os.path.isdir(matmul):
    sys.exit("sanitize: no matmul bundle in %s" % root)
print("sanitize: launched every kernel of " + ("the matmul bundle" if only_matmul else "%d bundles" % (
    len(rowwise) + os.path.isdir(ce) + os.path.isdir(matmul) + os.path.isdir(plans))))
