#!/usr/bin/env python3
"""The per-shape matmul configuration sweep: it writes the table that
liger-compile --matmul-config-table reads (docs/Design/GPU-Lowering.md,
*Configuration tables*).

Two steps, on two machines:

    # here (the compiler): each shape of a model's layer at each candidate
    # configuration, pinned, as one module, and the list of candidates
    python3 bench/matmul_config_sweep.py emit --out bench-bundles/matmul-sweep-src
    liger-compile bench-bundles/matmul-sweep-src/sweep.mlir -o bench-bundles/matmul-sweep
    cp bench-bundles/matmul-sweep-src/candidates.json bench-bundles/matmul-sweep/
    # (bench/build-bundles.sh does these three)

    # on the GPU: every candidate checked against torch, then timed; the
    # fastest per shape, where it beats the default rule's configuration by
    # --min-gain, becomes an entry of the table
    PYTHONPATH=python:build-runtime-py/python python3 bench/matmul_config_sweep.py \\
        measure --bundle bench-bundles/matmul-sweep --table matmul-configs.json

Candidates (wgmma, sm_90a): data-parallel tiles 128 x 256, 128 x 128,
64 x 256 and 64 x 128 (the first two in clusters of two CTAs too),
pingpong tiles 128 x 128, 64 x 256 and 128 x 64,
and persistent tiles 128 x 256 and 128 x 128, each with as many stages as
fit; those the compiler refuses for a shape
(accumulators, shared memory, the schedule's limits) are left out at emit
time. The times are triton.testing.do_bench medians at --tokens rows,
beside cuBLAS (eager) and torch.compile. The fastest other candidate of a
shape becomes an entry only when, timed alternately with the default
rule's kernel (the median of 7 rounds' ratios), it is --min-gain faster:
the clock drifts over a run by more than the gains sought.
"""
import argparse
import json
import os
import subprocess
import sys

# name -> (body, K, widths[, extra]): the layer's products. A projection
# y = x · Wᵀ (a pair: silu(x · Wgᵀ) · (x · Wuᵀ) in one kernel; extra
# {"lora_rank": r}: + 2 (x · Aᵀ) · Bᵀ); grad_input dx = dy · W (K: dy's
# width); grad_weight dW = dyᵀ · x ([K, widths[0]], over the tokens; extra
# {"accumulate": True}: added into an f32 buffer).
MODELS = {
    "llama3-8b": {
        "q_proj": ("projection", 4096, [4096]),
        "kv_proj": ("projection", 4096, [1024]),
        "gate_up": ("projection", 4096, [14336, 14336]),
        "down_proj": ("projection", 14336, [4096]),
        "q_lora16": ("projection", 4096, [4096], {"lora_rank": 16}),
        "down_dx": ("grad_input", 4096, [14336]),
        "o_dx": ("grad_input", 4096, [4096]),
        "o_dw": ("grad_weight", 4096, [4096]),
        "down_dw_f32": ("grad_weight", 4096, [14336], {"accumulate": True}),
    },
    "qwen2.5-7b": {
        "q_proj": ("projection", 3584, [3584]),
        "kv_proj": ("projection", 3584, [512]),
        "gate_up": ("projection", 3584, [18944, 18944]),
        "down_proj": ("projection", 18944, [3584]),
        "down_dx": ("grad_input", 3584, [18944]),
        "o_dw": ("grad_weight", 3584, [3584]),
    },
    # The fused linear losses' dx = G · W of one chunk of tokens through
    # Llama-3's lm_head (vocabulary 128256) at hidden 2048 and 4096: a long
    # reduction onto few output tiles (not in the default --models).
    "lm-head": {
        "dx_h2048": ("grad_input", 128256, [2048]),
        "dx_h4096": ("grad_input", 128256, [4096]),
    },
}
# (schedule, tile_m, tile_n); the stages are the compiler's (as many as fit).
# (schedule, tile_m, tile_n, cluster); the stages are the compiler's (as
# many as fit).
CANDIDATES = [("data-parallel", 128, 256, 1), ("data-parallel", 128, 128, 1),
              ("data-parallel", 64, 256, 1), ("data-parallel", 64, 128, 1),
              ("data-parallel", 128, 256, 2), ("data-parallel", 128, 128, 2),
              ("pingpong", 128, 128, 1), ("pingpong", 64, 256, 1), ("pingpong", 128, 64, 1),
              ("persistent", 128, 256, 1), ("persistent", 128, 128, 1)]
# The kernel_config spelling of each schedule (none: the default), and a
# kernel name's short form.
SCHEDULE_ATTR = {"data-parallel": "", "pingpong": ", schedule = pingpong",
                 "persistent": ", schedule = persistent"}
SCHEDULE_KIND = {"data-parallel": "dp", "pingpong": "pp", "persistent": "ps"}
DTYPE = "bf16"


def config_attr(schedule, cluster):
    """The kernel_config fields after the stages for a schedule and a
    cluster size (none for the defaults: data-parallel, 1)."""
    return SCHEDULE_ATTR[schedule] + (", cluster = %d" % cluster if cluster > 1 else "")


def group_text(name, body, k, widths, config, extra):
    """A function holding one matmul group of `body` (with `extra`) pinned
    to `config` (None: no attribute, the default rule's)."""
    t = "tensor<%sx%dx%s>"
    rank, accumulate = extra.get("lora_rank", 0), extra.get("accumulate", False)
    x = t % ("?", k, DTYPE)
    attrs = ""
    if config is not None:
        schedule, tm, tn, cluster = config
        attrs = (" attributes {liger.kernel_config = #liger.kernel_config<kernel_template = "
                 "matmul_wgmma, tile_m = %d, tile_n = %d, tile_k = 64, stages = %%STAGES%%%s>}"
                 % (tm, tn, config_attr(schedule, cluster)))
    if body == "projection":
        ws = [t % (n, k, DTYPE) for n in widths]
        y = t % ("?", widths[0], DTYPE)
        args = ["%x: " + x] + ["%%w%d: %s" % (i, w) for i, w in enumerate(ws)]
        bb = ["%a: " + x] + ["%%b%d: %s" % (i, w) for i, w in enumerate(ws)]
        lines = ["    %%l%d = liger.linear %%a, %%b%d : %s, %s" % (i, i, x, w)
                 for i, w in enumerate(ws)]
        if rank:
            la, lb = t % (rank, k, DTYPE), t % (widths[0], rank, DTYPE)
            args += ["%la: " + la, "%lb: " + lb]
            bb += ["%c: " + la, "%d: " + lb]
            lines = ["    %%l0 = liger.lora_linear %%a, %%b0, %%c, %%d scale = 2.0 : %s, %s, %s, %s"
                     % (x, ws[0], la, lb)]
        if len(ws) == 2:
            lines.append("    %%r = liger.swiglu %%l0, %%l1 : %s" % y)
            result = "%r"
        else:
            result = "%l0"
    elif body == "grad_input":
        w = t % (k, widths[0], DTYPE)
        y = t % ("?", widths[0], DTYPE)
        args, bb = ["%x: " + x, "%w0: " + w], ["%a: " + x, "%b0: " + w]
        lines = ["    %%r = liger.linear_grad_input %%a, %%b0 : %s, %s" % (x, w)]
        result = "%r"
    else:  # grad_weight
        xs = t % ("?", widths[0], DTYPE)
        y = t % (k, widths[0], "f32" if accumulate else DTYPE)
        args, bb = ["%x: " + x, "%w0: " + xs], ["%a: " + x, "%b0: " + xs]
        if accumulate:
            args.append("%acc: " + y)
            bb.append("%c: " + y)
            lines = ["    %%r = liger.linear_grad_weight %%a, %%b0 accumulate %%c : %s, %s, %s"
                     % (x, xs, y)]
        else:
            lines = ["    %%r = liger.linear_grad_weight %%a, %%b0 : %s, %s" % (x, xs)]
        result = "%r"
    types = [a.split(": ", 1)[1] for a in args]
    return "\n".join([
        "func.func @%s(%s) -> %s {" % (name, ", ".join(args), y),
        "  %%y = liger.fusion matmul(%s)%s : (%s) -> %s {" % (
            ", ".join(a.split(":")[0] for a in args), attrs, ", ".join(types), y),
        "  ^bb0(%s):" % ", ".join(bb)] + lines + [
        "    liger.yield %s : %s" % (result, y), "  }",
        "  return %%y : %s" % y, "}", ""])


def configure(text, opt):
    """The module `text` after liger-select-kernel-config, or None where
    the compiler refuses its pinned configuration."""
    proc = subprocess.run([opt, "--liger-select-kernel-config"], input=text,
                          capture_output=True, text=True)
    return proc.stdout if proc.returncode == 0 else None


def emit(args):
    opt = args.liger_opt or os.path.join(os.environ.get("LIGER_BUILD_DIR", "build"), "bin",
                                         "liger-opt")
    funcs, candidates = [], []
    for model in args.models.split(","):
        for shape, (body, k, widths, *extra) in MODELS[model].items():
            extra = extra[0] if extra else {}
            match = {"chip": "sm_90a", "body": body, "dtype": DTYPE, "widths": widths,
                     "norm": False, "lora_rank": extra.get("lora_rank", 0),
                     "accumulate": extra.get("accumulate", False),
                     "weight_transposed": False}
            # dW's K is the tokens; its rows are dy's width.
            match.update({"m_min": k, "m_max": k} if body == "grad_weight" else {"k": k})
            default = configure(group_text("f", body, k, widths, None, extra), opt)
            if default is None:
                sys.exit("the compiler refuses %s %s with its default configuration" % (
                    model, shape))
            for schedule, tm, tn, cluster in CANDIDATES:
                # Stages: the most that fit (8 down to 2), the compiler's check.
                for stages in range(8 if schedule == "pingpong" else 5, 1, -1):
                    text = group_text("f", body, k, widths, (schedule, tm, tn, cluster),
                                      extra).replace(
                        "%STAGES%", str(stages))
                    if configure(text, opt) is not None:
                        break
                else:
                    continue
                kind = SCHEDULE_KIND[schedule]
                prefix = model.replace(".", "").replace("-", "_")
                name = "%s_%s_%s%d_%dx%d%s" % (prefix, shape, kind, stages, tm, tn,
                                               "_c%d" % cluster if cluster > 1 else "")
                funcs.append(text.replace("@f(", "@%s(" % name, 1))
                config = {"tile_m": tm, "tile_n": tn, "tile_k": 64, "stages": stages,
                          "schedule": schedule}
                if cluster > 1:
                    config["cluster"] = cluster
                # The default rule's configuration, as the compiler prints it.
                pinned = "tile_m = %d, tile_n = %d, tile_k = 64, stages = %d%s>" % (
                    tm, tn, stages, config_attr(schedule, cluster))
                candidates.append({"kernel": name + "_matmul_0", "model": model,
                                   "shape": shape, "body": body, "k": k, "widths": widths,
                                   "extra": extra,
                                   "match": match, "config": config,
                                   "default": pinned in default})
    os.makedirs(args.out, exist_ok=True)
    with open(os.path.join(args.out, "sweep.mlir"), "w") as f:
        f.write("// bench/matmul_config_sweep.py emit --models %s\n\n" % args.models)
        f.write("\n".join(funcs))
    with open(os.path.join(args.out, "candidates.json"), "w") as f:
        json.dump(candidates, f, indent=1)
    print("matmul_config_sweep: %d candidates (%d shapes) in %s" % (
        len(candidates), len({(c["model"], c["shape"]) for c in candidates}), args.out))


def label_of(candidate):
    """A candidate's configuration as a row label: schedule, tile, stages."""
    c = candidate["config"]
    return "%s %dx%d s%d%s%s" % (c["schedule"], c["tile_m"], c["tile_n"], c["stages"],
                                 " cluster %d" % c["cluster"] if "cluster" in c else "",
                                 " (default)" if candidate["default"] else "")


def measure(args):
    import torch
    import torch.nn.functional as F
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    from floors import interleaved_ratio, matrix_rate, ms
    from liger import runtime

    with open(os.path.join(args.bundle, "candidates.json")) as f:
        candidates = json.load(f)
    bundle = runtime.load(args.bundle)
    M = args.tokens
    bf16 = torch.bfloat16
    rate = matrix_rate()
    gpu = torch.cuda.get_device_name()
    print("%s, %d tokens, bf16 rate %.0f TFLOP/s" % (gpu, M, rate))
    models = args.models.split(",") if args.models else None
    shapes = {}
    for c in candidates:
        if models is None or c["model"] in models:
            shapes.setdefault((c["model"], c["shape"]), []).append(c)
    entries, rows, ratios = [], [], []

    def write():  # after each shape: a run cut short keeps what it measured
        with open(args.table, "w") as f:
            json.dump({"version": 1, "note": "bench/matmul_config_sweep.py measure --tokens %d "
                       "--min-gain %g" % (M, args.min_gain), "entries": entries}, f, indent=1)
        if args.json:
            with open(args.json, "w") as f:
                json.dump(dict(rows=rows, ratios=ratios), f, indent=1)

    for (model, shape), group in shapes.items():
        body, k, widths = group[0]["body"], group[0]["k"], group[0]["widths"]
        rank = group[0]["extra"].get("lora_rank", 0)
        accumulate = group[0]["extra"].get("accumulate", False)
        n = widths[0]
        torch.manual_seed(0)
        if body == "projection":
            x = torch.randn(M, k, dtype=bf16, device="cuda")
            ws = [(torch.randn(w, k, dtype=bf16, device="cuda") / k ** 0.5).to(bf16)
                  for w in widths]
            inputs = [x] + ws
            if rank:
                la = (torch.randn(rank, k, device="cuda") / k ** 0.5).to(bf16)
                lb = (torch.randn(n, rank, device="cuda") / 4).to(bf16)
                inputs += [la, lb]

            def peer(x=x, ws=ws, lora=inputs[2:]):
                if len(ws) == 2:
                    return F.silu(F.linear(x, ws[0])) * F.linear(x, ws[1])
                if lora:
                    return F.linear(x, ws[0]) + 2.0 * F.linear(F.linear(x, lora[0]), lora[1])
                return F.linear(x, ws[0])
            out_shape, flop = (M, n), 2 * M * k * sum(widths)
        elif body == "grad_input":
            dy = torch.randn(M, k, dtype=bf16, device="cuda")
            w = (torch.randn(k, n, dtype=bf16, device="cuda") / k ** 0.5).to(bf16)
            inputs = [dy, w]

            def peer(dy=dy, w=w):
                return dy @ w
            out_shape, flop = (M, n), 2 * M * k * n
        else:
            dy = torch.randn(M, k, dtype=bf16, device="cuda") / M ** 0.5
            xs = torch.randn(M, n, dtype=bf16, device="cuda")
            inputs = [dy, xs]
            if accumulate:  # into a zeroed f32 buffer, as PyTorch's accumulation
                acc = torch.zeros(k, n, dtype=torch.float32, device="cuda")
                inputs.append(acc)

                def peer(dy=dy, xs=xs, acc=acc):
                    return acc.zero_().add_(dy.t() @ xs)
            else:
                def peer(dy=dy, xs=xs):
                    return dy.t() @ xs
            out_shape, flop = (k, n), 2 * M * k * n
        ref = peer().float().clone()  # (a peer may return its own buffer)
        floor = flop / rate / 1e9
        case = "%s %s %s" % (model, shape, "x".join(str(v) for v in (M, k, *widths)))
        times = {"eager (cuBLAS)": ms(peer), "compile": ms(torch.compile(peer))}
        out = torch.empty(out_shape, dtype=torch.float32 if accumulate else bf16,
                          device="cuda")
        measured, calls = [], {}
        for c in group:
            kernel = bundle[c["kernel"]]
            out.fill_(float("nan"))
            if accumulate:
                inputs[-1].zero_()
            kernel(*inputs, out=[out])
            err = ((out.float() - ref).norm() / ref.norm()).item()
            if not err < 2e-2:  # NaN included
                sys.exit("%s %s: relative error %.2e" % (case, c["kernel"], err))
            if accumulate:  # the buffer zeroed in each call, as the peers'
                def call(kernel=kernel):
                    kernel(*inputs[:-1], inputs[-1].zero_(), out=[out])
            else:
                def call(kernel=kernel):
                    kernel(*inputs, out=[out])
            t = ms(call)
            calls[c["kernel"]] = call
            measured.append((t, c))
            times["liger " + label_of(c)] = t
        for impl, t in times.items():
            rows.append(dict(case=case, impl=impl, ms=t, floor_ms=floor, of_floor=floor / t))
            print("%-44s %-34s %7.3f ms  %4.0f%% of floor" % (case, impl, t, 100 * floor / t),
                  flush=True)
        # The decision: the fastest other candidate by its row, confirmed
        # against the default rule's kernel timed alternately with it
        # (floors.interleaved_ratio). Rows timed seconds apart carry the
        # clock's drift (several percent over a run), more than the gains
        # sought; a row more than --confirm-within behind is not confirmed.
        defaults = [c for t, c in measured if c["default"]]
        others = [(t, c) for t, c in measured if not c["default"]]
        if not others:
            continue
        best_t, best = min(others, key=lambda m: m[0])
        if defaults:
            default = defaults[0]
            default_t = times["liger %s" % label_of(default)]
            if best_t > default_t * (1 + args.confirm_within):
                continue
            ratio, rounds = interleaved_ratio(calls[best["kernel"]], calls[default["kernel"]])
            ratios.append(dict(case=case, candidate=label_of(best), default=label_of(default),
                               median=ratio, rounds=rounds))
            print("%-44s %s / default %s: %.3f interleaved (%.3f-%.3f)" % (
                case, label_of(best), label_of(default), ratio, min(rounds), max(rounds)),
                flush=True)
            if ratio > 1 - args.min_gain:
                continue
        entries.append({"match": best["match"], "config": best["config"],
                        "note": "%s, %d tokens: %.3f ms; %s; cuBLAS %.3f ms"
                        % (gpu, M, best_t,
                           "%.3f of the default rule's time, interleaved" % ratio
                           if defaults else "the default rule not a candidate",
                           times["eager (cuBLAS)"])})
        write()
    write()
    print("matmul_config_sweep: %d entries in %s" % (len(entries), args.table))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = ap.add_subparsers(dest="step", required=True)
    e = sub.add_parser("emit", help="write the candidates' module (needs liger-opt)")
    e.add_argument("--out", required=True)
    e.add_argument("--models", default="llama3-8b",
                   help="comma-separated, of: " + ", ".join(MODELS))
    e.add_argument("--liger-opt")
    m = sub.add_parser("measure", help="time the candidates, write the table (needs a GPU)")
    m.add_argument("--bundle", default="bench-bundles/matmul-sweep")
    m.add_argument("--table", required=True)
    m.add_argument("--tokens", type=int, default=16384)
    m.add_argument("--min-gain", type=float, default=0.01,
                   help="an entry only where the fastest beats the default by this fraction")
    m.add_argument("--models", help="comma-separated: time only these models' shapes "
                   "(default: every shape of the bundle)")
    m.add_argument("--confirm-within", type=float, default=0.03,
                   help="confirm the fastest other candidate against the default, timed "
                   "alternately, when its row is at most this fraction behind the default's")
    m.add_argument("--json")
    args = ap.parse_args()
    if args.step == "emit":
        for model in args.models.split(","):
            if model not in MODELS:
                ap.error("unknown model %r (known: %s)" % (model, ", ".join(MODELS)))
        emit(args)
    else:
        measure(args)


if __name__ == "__main__":
    main()
