#!/usr/bin/env python3
"""The chunked preference losses (DPO with a reference model, ORPO, SimPO, CPO,
KTO over the same sequences unpaired -- the first half chosen, its
log-probabilities averaged: summed over 768 tokens they saturate its sigmoid,
and every gradient is 0)
of an lm_head, forward + backward (dx and dW of the policy), at
Llama-3-8B's lm_head (8 sequences — 4 chosen, 4 rejected — of 1024 tokens,
hidden 4096, vocabulary 128256, bf16, the first 256 tokens of each the
prompt, ignored), beside PyTorch eager (every logit held), torch.compile
and Liger-Kernel's liger_kernel.chunked_loss on one GPU: time, its fraction
of the FLOP floor (the policy's 3 GEMMs of 2·N·V·H, DPO's reference 1 more,
over the bf16 matrix rate measured in the same run) and the peak memory one
step allocates beyond its inputs.

    PYTHONPATH=python:build-runtime-py/python:bench LIGER_OPS_BUNDLES=bench-bundles/ops \\
        python3 bench/preference.py [--loss dpo,orpo,simpo] [--json out.json]

(bench/build-bundles.sh precompiles our kernels for these shapes; liger
runs the chunks again in the backward: 4 policy GEMMs.)
"""
import argparse
import json
import sys

import torch
import torch.nn.functional as F
from floors import profile_impls, matrix_rate, measure_steps, print_rows
from liger import nn as liger_nn

BF16 = torch.bfloat16
LOSSES = ("dpo", "orpo", "simpo", "cpo", "kto")


def plain(loss, x, w, t, rx=None, rw=None, beta=0.1):
    """The loss in PyTorch with every logit held (Liger-Kernel's defaults)."""
    def logps(xx, ww, average):
        logp = F.linear(xx, ww).float().log_softmax(-1)
        counted = t != -100
        tok = logp.gather(-1, t.clamp(min=0).unsqueeze(-1)).squeeze(-1) * counted
        return (tok.sum(-1) / counted.sum(-1) if average else tok.sum(-1)), tok, counted
    pairs = x.shape[0] // 2
    if loss == "kto":  # no reference, no kl; averaged (a sum over a sequence saturates σ)
        p, _, _ = logps(x, w, True)
        sign = torch.ones_like(p)
        sign[pairs:] = -1
        return (1 - torch.sigmoid(beta * p * sign)).mean()
    if loss == "dpo":
        p, _, _ = logps(x, w, False)
        with torch.no_grad():
            r, _, _ = logps(rx, rw, False)
        d = beta * ((p[:pairs] - r[:pairs]) - (p[pairs:] - r[pairs:]))
        return -F.logsigmoid(d).mean()
    p, tok, counted = logps(x, w, loss != "cpo")  # CPO's are summed
    nll = -tok[:pairs].sum() / counted[:pairs].sum()
    c, r = p[:pairs], p[pairs:]
    if loss == "orpo":
        log_odds = (c - r) - (torch.log1p(-torch.exp(c)) - torch.log1p(-torch.exp(r)))
        return nll - beta * F.logsigmoid(log_odds).mean()
    if loss == "cpo":
        return nll - F.logsigmoid(beta * (c - r)).mean()
    return nll - F.logsigmoid(beta * (c - r) - 0.5).mean()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--sequences", type=int, default=8)
    ap.add_argument("--length", type=int, default=1024)
    ap.add_argument("--hidden", type=int, default=4096)
    ap.add_argument("--vocab", type=int, default=128256)
    ap.add_argument("--loss", default=",".join(LOSSES))
    ap.add_argument("--impls", help="comma-separated implementations to run (default: all)")
    ap.add_argument("--json")
    ap.add_argument("--profile", type=int, default=0, metavar="N",
                    help="after the timings, profile one more step of each implementation "
                         "and print its N GPU kernels of most time")
    args = ap.parse_args()
    s, n, h, v = args.sequences, args.length, args.hidden, args.vocab
    rate = matrix_rate()
    x = torch.randn(s, n, h, device="cuda").to(BF16)
    w = (torch.randn(v, h, device="cuda") / h ** 0.5).to(BF16)
    rx = torch.randn(s, n, h, device="cuda").to(BF16)
    rw = (torch.randn(v, h, device="cuda") / h ** 0.5).to(BF16)
    t = torch.randint(0, v, (s, n), device="cuda")
    t[:, :n // 4] = -100
    try:
        from liger_kernel.chunked_loss import (LigerFusedLinearCPOLoss,
                                               LigerFusedLinearDPOLoss,
                                               LigerFusedLinearKTOLoss,
                                               LigerFusedLinearORPOLoss,
                                               LigerFusedLinearSimPOLoss)
        peers = dict(dpo=LigerFusedLinearDPOLoss(), orpo=LigerFusedLinearORPOLoss(),
                     simpo=LigerFusedLinearSimPOLoss(), cpo=LigerFusedLinearCPOLoss(),
                     kto=LigerFusedLinearKTOLoss(average_log_prob=True))
    except Exception as e:  # noqa: BLE001
        print("# liger-kernel not importable: %s" % e, file=sys.stderr)
        peers = {}
    ours = dict(dpo=liger_nn.LigerFusedLinearDPOLoss(), orpo=liger_nn.LigerFusedLinearORPOLoss(),
                simpo=liger_nn.LigerFusedLinearSimPOLoss(), cpo=liger_nn.LigerFusedLinearCPOLoss(),
                kto=liger_nn.LigerFusedLinearKTOLoss(average_log_prob=True))
    labels = torch.arange(s, device="cuda") < s // 2  # KTO: the first half chosen
    rows, profiles = [], {}
    for loss in args.loss.split(","):
        ref_args = (rx, rw) if loss == "dpo" else ()
        kwargs = dict(ref_input=rx, ref_weight=rw) if loss == "dpo" else \
            dict(preference_labels=labels) if loss == "kto" else {}

        def step_of(f):
            def step():
                xx = x.detach().requires_grad_(True)
                ww = w.detach().requires_grad_(True)
                out = f(xx, ww)
                (out[0] if isinstance(out, tuple) else out).backward()
                return xx.grad, ww.grad
            return step
        eager = (lambda xx, ww, loss=loss: plain(loss, xx, ww, t, *ref_args))  # noqa: E731
        impls = {"eager": step_of(eager), "compile": step_of(torch.compile(eager))}
        # (KTO's modules take the input first)
        order = (lambda xx, ww: (xx, ww)) if loss == "kto" else (lambda xx, ww: (ww, xx))
        if loss in peers:
            impls["Liger-Kernel"] = step_of(
                lambda xx, ww, m=peers[loss]: m(*order(xx, ww), t, **kwargs))
        impls["liger"] = step_of(lambda xx, ww, m=ours[loss]: m(*order(xx, ww), t, **kwargs))
        if args.impls:
            impls = {k: f for k, f in impls.items() if k in set(args.impls.split(","))}
        xr, wr = x.float().requires_grad_(True), w.float().requires_grad_(True)
        plain(loss, xr, wr, t, *[a.float() for a in ref_args]).backward()
        ref_dx, ref_dw = xr.grad, wr.grad
        del xr, wr
        gemms = 4 if loss == "dpo" else 3
        floor = gemms * 2 * s * n * v * h / rate / 1e9
        rows += measure_steps(impls, (ref_dx, ref_dw), floor, rep=50, loss=loss)
        if args.profile:
            print("# %s" % loss, flush=True)
            profiles[loss] = profile_impls(impls, args.profile)
    print("bf16 matrix rate %.0f TFLOP/s; %d sequences x %d tokens x hidden %d x vocabulary %d"
          % (rate, s, n, h, v))
    print_rows(rows, first=("loss",))
    if args.json:
        json.dump(dict(tflops=rate, sequences=s, length=n, hidden=h, vocab=v, rows=rows,
                       profiles=profiles),
                  open(args.json, "w"), indent=1)


if __name__ == "__main__":
    main()
