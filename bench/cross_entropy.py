#!/usr/bin/env python3
"""Cross-entropy on bf16 logits (8192 tokens x vocabulary 128256, mean,
int64 targets, 1/7 of them ignored; or --vocab 50257, 256000 or 262147,
whose kernels bench/cross_entropy.mlir also holds, without the pinned
configurations) beside PyTorch eager, torch.compile and
Liger-Kernel, on one GPU: the loss alone and the loss with the logits'
gradient (forward + backward), each beside its byte floor (the logits read
once, the gradient written once, over the device-to-device copy bandwidth
measured in the same run) and with the extra peak memory of one forward +
backward beyond the logits.

    PYTHONPATH=python:build-runtime-py/python python3 bench/cross_entropy.py \
        --bundle bench-bundles/cross_entropy [--tokens 8192] [--json out.json]
"""
import argparse
import json
import sys

import torch
import torch.nn.functional as F
from floors import copy_bandwidth, ms
from liger import runtime

BF16 = torch.bfloat16


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bundle", default="bench-bundles/cross_entropy")
    ap.add_argument("--tokens", type=int, default=8192)
    ap.add_argument("--vocab", type=int, default=128256)
    ap.add_argument("--impls", help="comma-separated implementations to run (default: all)")
    ap.add_argument("--json")
    args = ap.parse_args()
    n, v = args.tokens, args.vocab
    bw = copy_bandwidth()
    ours = runtime.load(args.bundle)
    # The default kernels of the vocabulary (ce_<V> unless it is 128256).
    suffix = "" if v == 128256 else "_%d" % v
    if "ce%s_rowwise_0" % suffix not in ours.kernels:
        sys.exit("%s has no kernels for vocabulary %d (bench/cross_entropy.mlir)"
                 % (args.bundle, v))
    k_loss, k_grad = ours["ce%s_rowwise_0" % suffix], ours["ce_grad%s_rowwise_0" % suffix]
    k_fused = ours["ce_fused%s_rowwise_0" % suffix]
    pinned = v == 128256  # the A/B configurations exist at Llama-3's vocabulary
    x = (torch.randn(n, v, device="cuda") * 3).to(BF16)
    t = torch.randint(0, v, (n,), device="cuda")
    t[::7] = -100
    one = torch.tensor(1.0, device="cuda")
    loss_out = torch.empty((), device="cuda")

    def eager(xx):
        return F.cross_entropy(xx.float(), t)
    compiled = torch.compile(eager)  # compiled on first call only

    def fwd_bwd(f):
        def step():
            xx = x.detach().requires_grad_(True)
            loss = f(xx)
            loss.backward()
            return loss, xx.grad
        return step

    impls = {
        "eager": (lambda: eager(x), fwd_bwd(eager)),
        "compile": (lambda: compiled(x), fwd_bwd(compiled)),
    }
    try:
        from liger_kernel.ops.cross_entropy import LigerCrossEntropyFunction
        xs = x.clone()  # Liger-Kernel writes the gradient into its input

        def lk_step():
            xx = xs.detach().requires_grad_(True)
            loss = LigerCrossEntropyFunction.apply(xx, t, None)  # no class weights
            loss = loss[0] if isinstance(loss, tuple) else loss
            loss.backward()
            return loss, xx.grad
        impls["Liger-Kernel"] = (None, lk_step)
    except Exception as e:  # noqa: BLE001
        print("# liger-kernel not importable: %s" % e, file=sys.stderr)
    # The gradient is allocated per step, as the peers' is.
    impls["liger"] = (lambda: k_loss(x, t, out=[loss_out]),
                      lambda: (k_loss(x, t), k_grad(x, t, one)))
    # The loss and its gradient in one kernel; then the same writing the
    # gradient over the logits (as Liger-Kernel does).
    impls["liger fused"] = (None, lambda: k_fused(x, t, one))
    xf = x.clone()
    impls["liger fused in place"] = (
        None, lambda: (k_fused(xf, t, one, out=[loss_out, xf])[0], xf))
    if pinned:
        k_fused_1024 = ours["ce_fused_1024_rowwise_0"]
        k_fused_reread = ours["ce_fused_reread_rowwise_0"]
        k_fused_pinned = {c: ours["ce_fused_%s_rowwise_0" % c] for c in ("512x2", "256x4")}
        # 1024 threads, one CTA per SM, pinned: since 8f9157c also the
        # default above, kept so a change of the default shows against it.
        impls["liger fused 1024x1"] = (None, lambda: k_fused_1024(x, t, one))
        # The same with reuse_loads = false: the gradient pass reads the row
        # from memory again instead of from shared memory.
        impls["liger fused re-read"] = (None, lambda: k_fused_reread(x, t, one))
        # Threads x CTAs per SM, each CTA staging its share of shared memory.
        for c, k in k_fused_pinned.items():
            impls["liger fused " + c] = (None, lambda k=k: k(x, t, one))

    if args.impls:
        wanted = set(args.impls.split(","))
        impls = {k: v for k, v in impls.items() if k in wanted}

    # The reference: float64 loss and gradient.
    xr = x.double().requires_grad_(True)
    ref = F.cross_entropy(xr, t)
    ref.backward()
    ref_grad = xr.grad.to(torch.float32)
    ref = ref.item()
    del xr

    elem = x.numel() * x.element_size()
    rows = []
    for impl, (fwd, step) in impls.items():
        if impl == "Liger-Kernel":
            xs.copy_(x)
        if impl == "liger fused in place":
            xf.copy_(x)
        torch.cuda.synchronize()
        base = torch.cuda.memory_allocated()
        torch.cuda.reset_peak_memory_stats()
        out = step()
        torch.cuda.synchronize()
        peak = torch.cuda.max_memory_allocated() - base
        loss, grad = out[0], out[1]
        loss_err = abs(float(loss) - ref) / abs(ref)
        g = grad.float()
        grad_err = ((g - ref_grad).norm() / ref_grad.norm()).item()
        del out, g, grad
        if fwd is not None:
            tf = ms(fwd)
            rows.append(dict(case="loss", impl=impl, ms=tf, floor_ms=elem / bw / 1e6,
                             err=loss_err, peak_gib=None))
        tb = ms(step)
        rows.append(dict(case="loss+grad", impl=impl, ms=tb, floor_ms=2 * elem / bw / 1e6,
                         err=max(loss_err, grad_err), peak_gib=peak / 2**30))
    print("copy bandwidth %.0f GB/s; %d tokens x %d vocabulary, bf16 logits" % (bw, n, v))
    print("%-10s %-20s %9s %9s %8s %9s %10s" % ("case", "impl", "ms", "floor ms", "of floor",
                                              "rel err", "extra GiB"))
    for r in rows:
        print("%-10s %-20s %9.3f %9.3f %7.0f%% %9.1e %10s" % (
            r["case"], r["impl"], r["ms"], r["floor_ms"], 100 * r["floor_ms"] / r["ms"],
            r["err"], "-" if r["peak_gib"] is None else "%.2f" % r["peak_gib"]))
    if args.json:
        json.dump(dict(bandwidth_gbs=bw, tokens=n, vocab=v, rows=rows), open(args.json, "w"),
                  indent=1)


if __name__ == "__main__":
    main()
