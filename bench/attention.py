#!/usr/bin/env python3
"""Attention forward, and forward + backward: liger's attention kernels
(liger-compile of bench/attention.mlir) beside PyTorch's scaled_dot_product_attention with
its default backend and with each backend forced (cuDNN, FlashAttention-2,
memory-efficient), Llama-3-8B's heads (32 query over 8 key/value heads,
head dimension 128, bf16), batch x sequence = 16384 tokens at sequences
2048, 4096 and 8192, causal and not, and with --window causal with a
sliding window of WINDOW keys (the SDPA backends given it as an explicit
mask; those that take none are skipped), and with --softcap causal with
Gemma 2's logit softcap of SOFTCAP (c · tanh(s / c)), which no SDPA
backend takes: beside PyTorch's flex_attention (compiled, the softcap as
its score_mod, the causal block mask) and Hugging Face's eager attention
(Gemma 2's: the scores in bf16, capped, an additive mask, the softmax in
f32). FLOPs count the scores the mask
keeps (4 B Hq D for each: T²/2 causal, about T·W with the window;
forward + backward 3.5 times that); the
floor is those FLOPs at the bf16 matrix rate measured in this run. Each
output and gradient is checked against SDPA's first. Times are
triton.testing.do_bench medians. Forward + backward rows ("fwd+bwd"):
liger's forward with its lse then its backward (the dq workspace's fill
and the finishing kernel included); SDPA's forward then
torch.autograd.grad of the output for q, k and v (--no-backward skips
them).

    PYTHONPATH=python:build-runtime-py/python python3 bench/attention.py \\
        [--bundle bench-bundles/attention] [--json out.json]

GQA for SDPA: the backends that take grouped key/value heads are called
with enable_gqa=True; the others get k and v repeated to the query heads
outside the timed call.
"""
import argparse
import json
import sys

import torch
import torch.nn.functional as F
from floors import matrix_rate, ms
from torch.nn.attention import SDPBackend, sdpa_kernel

from liger import operators, runtime

BF16 = torch.bfloat16
# The window of bench/attention.mlir's @llama_window kernels.
WINDOW = 1024
# The softcap of its @llama_softcap kernels (Gemma 2's attn_logit_softcapping).
SOFTCAP = 50.0
BACKENDS = {"sdpa (default)": None, "cudnn": SDPBackend.CUDNN_ATTENTION,
            "flash": SDPBackend.FLASH_ATTENTION, "efficient": SDPBackend.EFFICIENT_ATTENTION}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bundle", default="bench-bundles/attention")
    ap.add_argument("--tokens", type=int, default=16384)
    ap.add_argument("--seqs", default="2048,4096,8192")
    ap.add_argument("--json", default=None)
    ap.add_argument("--no-backward", action="store_true")
    ap.add_argument("--window", action="store_true",
                    help="add the rows of a sliding window of %d keys" % WINDOW)
    ap.add_argument("--softcap", action="store_true",
                    help="add the rows of a causal softcap of %g" % SOFTCAP)
    args = ap.parse_args()
    ours = runtime.load(args.bundle)
    rate = matrix_rate()
    hq, hkv, d = 32, 8, 128
    rows = []
    print("bf16 matrix rate in this run: %.0f TFLOP/s" % rate)
    print("%-8s %-6s %-8s %-16s %9s %9s %7s" % (
        "seq", "mask", "pass", "impl", "ms", "TFLOP/s", "floor"))
    for seq in [int(s) for s in args.seqs.split(",")]:
        b = args.tokens // seq
        q = torch.randn(b, hq, seq, d, dtype=BF16, device="cuda")
        k = torch.randn(b, hkv, seq, d, dtype=BF16, device="cuda")
        v = torch.randn(b, hkv, seq, d, dtype=BF16, device="cuda")
        kr, vr = k.repeat_interleave(hq // hkv, 1), v.repeat_interleave(hq // hkv, 1)
        modes = [("causal", True, None), ("full", False, None)]
        if args.window:
            modes.append(("window", True, WINDOW))
        if args.softcap:
            modes.append(("softcap", True, None))
        for mode, causal, window in modes:
            softcap = SOFTCAP if mode == "softcap" else None
            # The scores each query keeps: min(i + 1, W) keys for query i.
            kept = seq * seq / 2 if causal else seq * seq
            if window:
                w = min(window, seq)
                kept = w * (w + 1) / 2 + (seq - w) * w
            flops = 4 * b * hq * kept * d
            # SDPA's own arguments for the mask: is_causal, or a [T, S]
            # boolean mask of the window.
            mask = {"is_causal": causal} if not window else {"attn_mask": torch.ones(
                seq, seq, dtype=torch.bool, device="cuda").tril().triu(1 - window)}
            kernel = ours["llama_%s_attention_0" % mode]
            out = torch.empty_like(q)
            peers = softcap_peers(seq, softcap) if softcap else None
            # (A softcap's reference: its math in f32.)
            keep = torch.ones(seq, seq, dtype=torch.bool, device="cuda").tril()
            ref = operators.softcapped_attention(q.float(), k.float(), v.float(), keep, None,
                                                 softcap) if softcap \
                else F.scaled_dot_product_attention(q, kr, vr, **mask)
            out.fill_(float("nan"))
            kernel(q, k, v, out=[out])
            err = ((out.float() - ref.float()).norm() / ref.float().norm()).item()
            if not err < 1e-2:
                sys.exit("liger's attention differs from SDPA's at seq %d: %.3g" % (seq, err))
            impls = {"liger": lambda: kernel(q, k, v, out=[out])}
            for name, fn in (peers or {}).items():
                impls[name] = lambda fn=fn: fn(q, kr, vr)
            for name, backend in ({} if softcap else BACKENDS).items():
                def call(backend=backend, mask=mask):
                    if backend is None:
                        return F.scaled_dot_product_attention(q, k, v, **mask, enable_gqa=True)
                    with sdpa_kernel(backend):
                        return F.scaled_dot_product_attention(q, kr, vr, **mask)
                try:
                    call()
                except RuntimeError as e:  # a backend that does not take the case
                    print("  %s: not available (%s)" % (name, str(e).splitlines()[0][:80]))
                    continue
                impls[name] = call
            case = {"seq": seq, "batch": b, "causal": causal, "window": window,
                    "softcap": softcap}
            report(rows, impls, dict(case, **{"pass": "fwd"}), flops, rate)
            if args.no_backward:
                continue
            # Forward + backward.
            prefix = "llama_%s" % mode
            fwd, bwd = ours[prefix + "_lse_attention_0"], ours[prefix + "_grad_attention_0"]
            grad = torch.randn_like(q)
            lse = torch.empty(b, hq, seq, device="cuda")
            grads = [torch.empty_like(q), torch.empty_like(k), torch.empty_like(v)]

            def liger_train():
                fwd(q, k, v, out=[out, lse])
                bwd(grad, q, k, v, out, lse, out=grads)
            leaves = [x.detach().float().requires_grad_() if softcap else
                      x.detach().clone().requires_grad_() for x in (q, k, v)]
            ref_grads = torch.autograd.grad(
                operators.softcapped_attention(*leaves, keep, None, softcap) if softcap else
                F.scaled_dot_product_attention(*leaves, **mask, enable_gqa=True),
                leaves, grad)
            for x in grads:
                x.fill_(float("nan"))
            liger_train()
            for name, x, r in zip(("dq", "dk", "dv"), grads, ref_grads):
                err = ((x.float() - r.float()).norm() / r.float().norm()).item()
                if not err < 2e-2:
                    sys.exit("liger's %s differs from SDPA's at seq %d: %.3g" % (name, seq, err))
            train = {"liger": liger_train}
            for name, fn in (peers or {}).items():
                ins = [x.detach().clone().requires_grad_() for x in (q, k, v)]
                train[name] = lambda fn=fn, ins=ins: torch.autograd.grad(
                    fn(*ins, gqa=True), ins, grad)
            for name in impls:
                if name == "liger" or name not in BACKENDS:
                    continue
                backend = BACKENDS[name]
                gqa = backend is None
                ins = [x.detach().clone().requires_grad_()
                       for x in ((q, k, v) if gqa else (q, kr, vr))]

                def step(backend=backend, ins=ins, gqa=gqa, mask=mask):
                    if backend is None:
                        o = F.scaled_dot_product_attention(*ins, **mask, enable_gqa=True)
                    else:
                        with sdpa_kernel(backend):
                            o = F.scaled_dot_product_attention(*ins, **mask)
                    return torch.autograd.grad(o, ins, grad)
                train[name] = step
            report(rows, train, dict(case, **{"pass": "fwd+bwd"}), 3.5 * flops, rate)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(dict(rate_tflops=rate, rows=rows), f, indent=1)


def softcap_peers(seq, softcap):
    """PyTorch's softcapped causal attentions (q [B, Hq, T, D]; k, v [B,
    Hkv, T, D] with gqa, else repeated to Hq): flex_attention compiled with
    the softcap as its score_mod and the causal block mask, and Hugging
    Face's eager attention as Gemma 2's modeling code writes it."""
    from torch.nn.attention.flex_attention import create_block_mask, flex_attention
    flex = torch.compile(flex_attention)
    block_mask = create_block_mask(lambda b, h, qi, ki: qi >= ki, None, None, seq, seq)
    additive = torch.zeros(seq, seq, dtype=BF16, device="cuda").masked_fill(
        torch.ones(seq, seq, dtype=torch.bool, device="cuda").triu(1), torch.finfo(BF16).min)

    def cap(score, b, h, qi, ki):
        return softcap * torch.tanh(score / softcap)

    def flex_call(q, k, v, gqa=False):
        return flex(q, k, v, score_mod=cap, block_mask=block_mask, enable_gqa=True)

    def eager(q, k, v, gqa=False):
        if gqa:
            g = q.shape[1] // k.shape[1]
            k, v = k.repeat_interleave(g, 1), v.repeat_interleave(g, 1)
        w = q @ k.transpose(-1, -2) * q.shape[-1] ** -0.5
        w = torch.tanh(w / softcap) * softcap + additive
        return torch.softmax(w, dim=-1, dtype=torch.float32).to(q.dtype) @ v
    return {"flex (compiled)": flex_call, "eager (HF math)": eager}


def report(rows, impls, case, flops, rate):
    floor = flops / rate / 1e9
    for name, fn in impls.items():
        t = ms(fn)
        row = dict(case, impl=name, ms=t, tflops=flops / t / 1e9, floor_fraction=floor / t)
        rows.append(row)
        print("%-8d %-6s %-8s %-16s %9.3f %9.1f %6.0f%%" % (
            case["seq"], "window" if case["window"] else "cap" if case.get("softcap") else
            "causal" if case["causal"] else "full",
            row["pass"], name, t,
            row["tflops"], 100 * row["floor_fraction"]))


if __name__ == "__main__":
    main()
