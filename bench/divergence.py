#!/usr/bin/env python3
"""The distillation losses on bf16 log-probabilities (8192 tokens x
vocabulary 128256, or --vocab 50257): KL divergence (batchmean, target
probabilities) and the generalized JSD (beta 0.5, shift labels, 1/7 of
them ignored), liger.ops.kl_div and liger.ops.jsd beside PyTorch eager,
torch.compile and Liger-Kernel's LigerKLDivLossFunction and
LigerJSDFunction, on one GPU: the loss alone and the loss with the input's
gradient (forward + backward), each beside its byte floor (the loss: input
and target read once; with the gradient, the gradient written once too),
over the device-to-device copy bandwidth measured in the same run, with
the error against float64 and the extra peak memory of one step.

liger's kernels come precompiled (bench/build-bundles.sh writes them into
bench-bundles/ops):

    LIGER_OPS_BUNDLES=bench-bundles/ops PYTHONPATH=python:build-runtime-py/python \\
        python3 bench/divergence.py [--tokens 8192] [--vocab 128256] [--json out.json] \\
        [--host-check]
"""
import argparse
import json
import sys

# (torch, Triton and the runtime are imported where the benchmark runs:
# bench/build-bundles.sh reads specs() on the build machine.)
VOCABS = (128256, 50257)
IGNORE = -100


def specs(vocab):
    """The liger.ops kernels this benchmark calls (what build-bundles.sh
    precompiles)."""
    from liger import specs as s
    return [s.kl_div_spec(vocab, "bf16"), s.jsd_spec(vocab, "bf16", labels="i64")]


def jsd_torch(x, y, labels, beta=0.5):
    """Liger-Kernel's JSD in PyTorch (mean over the counted tokens)."""
    import torch
    x, y = x.float(), y.float()
    log_m = torch.logaddexp(y + torch.log(torch.tensor(beta)),
                            x + torch.log(torch.tensor(1 - beta)))
    pointwise = beta * y.exp() * (y - log_m) + (1 - beta) * x.exp() * (x - log_m)
    keep = labels != IGNORE
    return (pointwise.sum(-1) * keep).sum() / keep.sum().clamp(min=1)


def main():
    import torch
    import torch.nn.functional as F
    from floors import copy_bandwidth, ms
    from liger import ops
    BF16 = torch.bfloat16
    ap = argparse.ArgumentParser()
    ap.add_argument("--tokens", type=int, default=8192)
    ap.add_argument("--vocab", type=int, default=128256, choices=VOCABS)
    ap.add_argument("--losses", default="kl_div,jsd")
    ap.add_argument("--json")
    ap.add_argument("--host-check", action="store_true",
                    help="liger's backward scales the saved gradient as it did before "
                    "liger.scale: after asking the device whether the incoming gradient is 1")
    args = ap.parse_args()
    if args.host_check:
        from liger import operators
        operators._scaled_in_place = lambda grad, dloss, *_: operators._scaled(grad, dloss)
    n, v = args.tokens, args.vocab
    bw = copy_bandwidth()
    x = (torch.randn(n, v, device="cuda") * 3).log_softmax(-1).to(BF16)
    y = (torch.randn(n, v, device="cuda") * 3).log_softmax(-1).to(BF16)
    p = y.float().exp().to(BF16)
    labels = torch.randint(0, v, (n,), device="cuda")
    labels[::7] = IGNORE

    peers = {}
    try:
        from liger_kernel.ops.jsd import LigerJSDFunction
        from liger_kernel.ops.kl_div import LigerKLDivLossFunction
        peers["kl_div"] = lambda xx: LigerKLDivLossFunction.apply(xx, p, "batchmean", False,
                                                                  1e-10)
        peers["jsd"] = lambda xx: LigerJSDFunction.apply(xx, y, labels, 0.5, IGNORE, None,
                                                         None)
    except Exception as e:  # noqa: BLE001
        print("# liger-kernel not importable: %s" % e, file=sys.stderr)

    losses = {
        "kl_div": (lambda xx: F.kl_div(xx.float(), p.float(), reduction="batchmean"),
                   lambda xx: ops.kl_div(xx, p, "batchmean"),
                   lambda xx: F.kl_div(xx, p.double(), reduction="batchmean")),
        "jsd": (lambda xx: jsd_torch(xx, y, labels),
                lambda xx: ops.jsd(xx, y, labels, 0.5, IGNORE),
                lambda xx: jsd_torch(xx, y.double(), labels)),
    }
    elem = x.numel() * x.element_size()
    rows = []
    for loss in args.losses.split(","):
        eager, ours, ref64 = losses[loss]
        compiled = torch.compile(eager)
        impls = {"eager": eager, "compile": compiled, "liger": ours}
        if loss in peers:
            impls["Liger-Kernel"] = peers[loss]
        xr = x.double().requires_grad_(True)
        ref = ref64(xr)
        ref.backward()
        ref_grad, ref = xr.grad.float(), ref.item()
        del xr
        for impl, f in impls.items():
            def step(f=f):
                xx = x.detach().requires_grad_(True)
                out = f(xx)
                out.backward()
                return out, xx.grad
            torch.cuda.synchronize()
            base = torch.cuda.memory_allocated()
            torch.cuda.reset_peak_memory_stats()
            out, grad = step()
            torch.cuda.synchronize()
            peak = torch.cuda.max_memory_allocated() - base
            err = max(abs(float(out) - ref) / abs(ref),
                      ((grad.float() - ref_grad).norm() / ref_grad.norm()).item())
            del out, grad
            with torch.no_grad():
                tf = ms(lambda f=f: f(x))
            rows.append(dict(loss=loss, case="loss", impl=impl, ms=tf,
                             floor_ms=2 * elem / bw / 1e6, err=None, peak_gib=None))
            rows.append(dict(loss=loss, case="loss+grad", impl=impl, ms=ms(step),
                             floor_ms=3 * elem / bw / 1e6, err=err, peak_gib=peak / 2**30))
    print("copy bandwidth %.0f GB/s; %d tokens x %d vocabulary, bf16" % (bw, n, v))
    print("%-7s %-10s %-14s %9s %9s %8s %9s %10s" % (
        "loss", "case", "impl", "ms", "floor ms", "of floor", "rel err", "extra GiB"))
    for r in rows:
        print("%-7s %-10s %-14s %9.3f %9.3f %7.0f%% %9s %10s" % (
            r["loss"], r["case"], r["impl"], r["ms"], r["floor_ms"],
            100 * r["floor_ms"] / r["ms"], "-" if r["err"] is None else "%.1e" % r["err"],
            "-" if r["peak_gib"] is None else "%.2f" % r["peak_gib"]))
    if args.json:
        json.dump(dict(bandwidth_gbs=bw, tokens=n, vocab=v, rows=rows), open(args.json, "w"),
                  indent=1)


if __name__ == "__main__":
    main()
