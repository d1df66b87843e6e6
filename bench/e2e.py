#!/usr/bin/env python3
"""One training step of a Llama-3-8B-shaped model on one GPU: tokens/s and
peak memory of the Hugging Face model as it is (eager), under
torch.compile, patched by Liger-Kernel (apply_liger_kernel_to_llama) and
patched by liger (liger.transformers.apply_liger_kernel_to_llama; variant
liger-fused-mlp: with fused_mlp=True, each MLP one liger.ops.gated_mlp;
liger-qk-rope: with fuse_qkv_rope=True, each attention's q/k projections and
RoPE one liger.ops.linear_rope; liger-norm-linear: with fuse_norm_linear=True,
each layer's norms with the projections that read them one
liger.ops.rms_norm_linear; liger-lora, with --lora: with lora=True, each
PEFT LoRA layer one liger.ops.lora_linear, its adapters in bf16 where the
other variants keep PEFT's f32) and, as
it is, under torch.compile(backend="liger") (liger.compile_model,
fullgraph: variant liger-backend), in one run; with --lora, each with a
PEFT LoRA adapter (rank 16 on q/k/v/o). The first step's time (the
compile, for torch.compile and liger-backend) is reported beside the rest.

The model has Llama-3-8B's widths (hidden 4096, MLP 14336, vocabulary
128256, 32/8 heads) and `--layers` decoder layers, random weights and random
tokens, bf16, AdamW (fused); a step is forward, backward and the optimizer
step, timed over `--steps` after `--warmup` (the peer baselines' method).

    # here: bash bench/build-bundles.sh; on the GPU machine:
    PYTHONPATH=python:build-runtime-py/python \\
        LIGER_OPS_BUNDLES=bench-bundles/ops:bench-bundles/backend \\
        python3 bench/e2e.py [--lora] [--json out.json]

liger-backend finds its kernels and fused graphs in bench-bundles/backend
(precompile() below, run by bench/build-bundles.sh for the default
--layers, with and without --lora): the GPU machine has no compiler.
"""
import argparse
import json
import os
import subprocess
import sys
import time
import types

import torch

# Llama-3-8B's widths; bench/build-bundles.sh precompiles their kernels.
LLAMA3_8B = dict(model_type="llama", hidden_size=4096, intermediate_size=14336,
                 vocab_size=128256, num_attention_heads=32, num_key_value_heads=8,
                 max_position_embeddings=8192, rope_theta=500000.0, rms_norm_eps=1e-5)


def config_namespace():
    return types.SimpleNamespace(**LLAMA3_8B)


def build(layers, lora, device="cuda", bf16_adapters=False):
    """The model, bf16, random weights on `device`; on "precompile" without
    values (uninitialised CPU memory: what backend.precompile traces needs
    none). PEFT keeps LoRA adapters in f32 unless `bf16_adapters` (the
    liger-lora variant: liger.ops.lora_linear takes one dtype)."""
    from transformers import LlamaConfig, LlamaForCausalLM
    kw = {k: v for k, v in LLAMA3_8B.items() if k != "model_type"}
    cfg = LlamaConfig(num_hidden_layers=layers, **kw)
    cfg._attn_implementation = "sdpa"
    torch.manual_seed(0)
    if device == "precompile":
        previous = torch.get_default_dtype()
        torch.set_default_dtype(torch.bfloat16)
        try:
            with torch.device("meta"):
                model = LlamaForCausalLM(cfg)
        finally:
            torch.set_default_dtype(previous)
        model = model.to_empty(device="cpu")
    else:
        model = LlamaForCausalLM(cfg).to(device=device, dtype=torch.bfloat16)
    if lora:
        from peft import LoraConfig, get_peft_model
        model = get_peft_model(model, LoraConfig(
            r=16, lora_alpha=32, lora_dropout=0.0,
            target_modules=["q_proj", "k_proj", "v_proj", "o_proj"]),
            autocast_adapter_dtype=not bf16_adapters)
    return model.train()


def precompile(out_dir, layers, lora, batch=(2, 16)):
    """The kernels and fused graphs of the liger-backend variant's training
    step into the cache `out_dir` (here, where the compiler is); the token
    dimensions are dynamic, so a small batch serves every --batch/--seq.
    Returns the summary lines."""
    from liger.frontend import backend
    model = build(layers, lora, "precompile")
    ids = torch.randint(0, LLAMA3_8B["vocab_size"], batch)
    (report,) = backend.precompile(model, dict(input_ids=ids, labels=ids), out_dir)
    return report.summary()


def lora_specs(layers):
    """The liger.ops specs of the LoRA kernels the liger-lora variant calls
    (bench/build-bundles.sh precompiles them)."""
    from liger import transformers as lt
    return lt.lora_kernel_specs(build(layers, True, "precompile", bf16_adapters=True))


def _budget(args):
    """The fused loss's memory budget in bytes (--loss-budget-mib; None: liger's default)."""
    return None if args.loss_budget_mib is None else args.loss_budget_mib << 20


def run(variant, args):
    model = build(args.layers, args.lora, bf16_adapters=variant == "liger-lora")
    base = model.get_base_model() if args.lora else model
    if variant == "liger-kernel":
        from liger_kernel.transformers import apply_liger_kernel_to_llama
        apply_liger_kernel_to_llama(model=base, rope=True, rms_norm=True, swiglu=True,
                                    cross_entropy=False, fused_linear_cross_entropy=True)
    elif variant in ("liger", "liger-fused-mlp", "liger-qk-rope", "liger-norm-linear",
                     "liger-lora"):
        import warnings
        from liger import transformers as lt
        if variant == "liger-lora" and not args.lora:
            raise SystemExit("variant liger-lora patches the LoRA layers: run with --lora")
        lt.apply_liger_kernel_to_llama(model=base, loss_memory_budget=_budget(args),
                                       fused_mlp=variant == "liger-fused-mlp",
                                       fuse_qkv_rope=variant == "liger-qk-rope",
                                       fuse_norm_linear=variant == "liger-norm-linear",
                                       lora=variant == "liger-lora")
        # A fallback would measure the original model: refuse to report it.
        warnings.simplefilter("error", lt.LigerFallbackWarning)
    report = None
    if variant == "compile":
        step_model = torch.compile(model)
    elif variant == "liger-backend":
        import liger
        budget = {} if args.loss_budget_mib is None else dict(loss_memory_budget=_budget(args))
        step_model = liger.compile_model(model, fullgraph=True, **budget)
        report = step_model.liger.reports
    else:
        step_model = model
    params = [p for p in model.parameters() if p.requires_grad]
    opt = torch.optim.AdamW(params, lr=1e-5, fused=True)
    g = torch.Generator(device="cuda").manual_seed(1)
    ids = torch.randint(0, LLAMA3_8B["vocab_size"], (args.batch, args.seq), device="cuda",
                        generator=g)

    def step():
        out = step_model(input_ids=ids, labels=ids)
        out.loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        return out.loss

    torch.cuda.synchronize()
    t0 = time.perf_counter()
    losses = [step().item()]
    first_step_s = time.perf_counter() - t0  # with the compile, where there is one
    losses += [step().item() for _ in range(args.warmup - 1)]
    # Where the peak is: the memory allocated at its highest during the
    # forward, the backward and the optimizer step of one step.
    phases = {}
    torch.cuda.synchronize()
    torch.cuda.reset_peak_memory_stats()
    out = step_model(input_ids=ids, labels=ids)
    phases["forward"] = torch.cuda.max_memory_allocated() / 2 ** 30
    torch.cuda.reset_peak_memory_stats()
    out.loss.backward()
    del out
    phases["backward"] = torch.cuda.max_memory_allocated() / 2 ** 30
    torch.cuda.reset_peak_memory_stats()
    opt.step()
    opt.zero_grad(set_to_none=True)
    phases["optimizer"] = torch.cuda.max_memory_allocated() / 2 ** 30
    torch.cuda.synchronize()
    torch.cuda.reset_peak_memory_stats()
    t0 = time.perf_counter()
    for _ in range(args.steps):
        loss = step()
    torch.cuda.synchronize()
    dt = (time.perf_counter() - t0) / args.steps
    res = dict(variant=variant + ("+lora" if args.lora else ""), step_ms=dt * 1e3,
               tokens_per_s=args.batch * args.seq / dt,
               peak_gib=torch.cuda.max_memory_allocated() / 2 ** 30,
               first_loss=losses[0], last_loss=loss.item(),
               peak_gib_by_phase=phases, first_step_s=first_step_s)
    if report is not None:  # what liger took of each graph
        res["liger"] = [line for r in report for line in r.summary()]
    if args.profile:
        from floors import kernel_profile  # triton: on the GPU machine only
        res["profile"] = kernel_profile(step, args.profile)
    if args.memory:
        held = {}

        def forward():
            held["out"] = step_model(input_ids=ids, labels=ids)

        def backward():
            held.pop("out").loss.backward()

        def optimizer():
            opt.step()
            opt.zero_grad(set_to_none=True)

        dump = args.memory_dump and os.path.join(args.memory_dump, res["variant"])
        if dump:
            os.makedirs(args.memory_dump, exist_ok=True)
        res["memory"] = memory_at_peak([("forward", forward), ("backward", backward),
                                        ("optimizer", optimizer)], args.memory, dump)
    del model, step_model, opt
    torch.cuda.empty_cache()
    return res


def _frame(frames):
    """Where an allocation was made: its first Python frame outside torch's
    own package (Inductor's generated code included), as file:line name."""
    for f in frames:
        name = f.get("filename", "")
        if name.endswith(".py") and "/torch/" not in name:
            return "%s:%d %s" % (name.split("/")[-1], f.get("line", 0), f.get("name", ""))
    f = frames[0] if frames else {}
    return "%s:%d %s" % (f.get("filename", "?").split("/")[-1], f.get("line", 0),
                         f.get("name", ""))


def memory_at_peak(phases, top, dump=None):
    """One more step, run as its phases [(name, fn)], with the allocator's
    history recorded: the memory allocated before it (weights, optimizer
    state), the step's peak above that, the `top` places whose allocations
    are alive at the peak, by bytes, as (GiB, allocations, place), and the
    same for the peak of each phase. With `dump` (a path prefix), the
    snapshot is written to DUMP.pickle and the generated sources its frames
    name to DUMP-code/, to be read where the GPU is not."""
    torch.cuda.synchronize()
    base = torch.cuda.memory_allocated()
    torch.cuda.memory._record_memory_history(max_entries=2000000, stacks="python")
    ends = []  # the number of events recorded when each phase ended
    for _, fn in phases:
        fn()
        torch.cuda.synchronize()
        ends.append(sum(len(t) for t in torch.cuda.memory._snapshot()["device_traces"]))
    snap = torch.cuda.memory._snapshot()
    torch.cuda.memory._record_memory_history(enabled=None)
    events = [e for trace in snap["device_traces"] for e in trace]
    live, total = {}, 0
    peaks = [[0, {}] for _ in phases]  # per phase: bytes at its peak, what was alive
    phase = 0
    for i, event in enumerate(events):
        while phase < len(ends) - 1 and i >= ends[phase]:
            phase += 1
        if event["action"] == "alloc":
            live[event["addr"]] = (event["size"], _frame(event.get("frames", [])))
            total += event["size"]
            if total > peaks[phase][0]:
                peaks[phase] = [total, dict(live)]
        elif event["action"] == "free_requested" and event["addr"] in live:
            total -= live.pop(event["addr"])[0]

    def places(at_peak):
        by = {}
        for size, place in at_peak.values():
            n, b = by.get(place, (0, 0))
            by[place] = (n + 1, b + size)
        return sorted(((b / 2 ** 30, n, place) for place, (n, b) in by.items()),
                      reverse=True)[:top]

    if dump:
        import pickle
        import shutil
        with open(dump + ".pickle", "wb") as fh:
            pickle.dump(dict(snapshot=snap, phase_ends=ends,
                             phases=[name for name, _ in phases]), fh)
        code = dump + "-code"
        os.makedirs(code, exist_ok=True)
        for f in {f["filename"] for e in events for f in e.get("frames", [])}:
            if f.endswith(".py") and "/torch/" not in f and os.path.isfile(f):
                shutil.copy(f, code)
    step_peak = max(peaks, key=lambda p: p[0])
    return dict(before_gib=base / 2 ** 30, step_peak_gib=step_peak[0] / 2 ** 30,
                top=places(step_peak[1]),
                phases={name: dict(peak_gib=p[0] / 2 ** 30, top=places(p[1]))
                        for (name, _), p in zip(phases, peaks)})


def main():
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--layers", type=int, default=2)
    p.add_argument("--batch", type=int, default=4)
    p.add_argument("--seq", type=int, default=2048)
    p.add_argument("--steps", type=int, default=5)
    p.add_argument("--warmup", type=int, default=3, help="steps before timing (>= 1)")
    p.add_argument("--lora", action="store_true")
    p.add_argument("--variants", default="eager,compile,liger-kernel,liger,liger-backend")
    p.add_argument("--precompile", metavar="DIR",
                   help="write liger-backend's kernels for --layers (and --lora) into DIR, "
                        "run nothing (here, where the compiler is)")
    p.add_argument("--profile", type=int, default=0, metavar="N",
                   help="profile one more step of each variant and print its N GPU "
                        "kernels of most time")
    p.add_argument("--memory", type=int, default=0, metavar="N",
                   help="record the allocator's history over one more step of each variant "
                        "and print the N places holding the most memory at its peak")
    p.add_argument("--memory-dump", metavar="DIR",
                   help="with --memory: write each variant's allocator snapshot "
                        "(DIR/VARIANT.pickle) and the generated code its frames name "
                        "(DIR/VARIANT-code/)")
    p.add_argument("--loss-budget-mib", type=int, metavar="MIB",
                   help="liger's and liger-backend's fused loss: MiB of logits a chunk may "
                        "hold (default liger's, 512)")
    p.add_argument("--json")
    p.add_argument("--one", help=argparse.SUPPRESS)  # a variant, in this process
    args = p.parse_args()
    if args.warmup < 1:
        p.error("--warmup must be at least 1 (the first step is the compile)")
    if args.precompile:
        print("\n".join(precompile(args.precompile, args.layers, args.lora)))
        return 0
    if args.one:
        print("RESULT " + json.dumps(run(args.one, args)), flush=True)
        return 0
    print("# %s torch %s; layers=%d batch=%d seq=%d lora=%s loss budget=%s" % (
        torch.cuda.get_device_name(), torch.__version__, args.layers, args.batch, args.seq,
        args.lora, "default" if args.loss_budget_mib is None else
        "%d MiB" % args.loss_budget_mib), flush=True)
    rows = []
    # Each variant in its own process: the patches (ours and Liger-Kernel's
    # change modeling_llama's functions) and the allocator start clean.
    for v in args.variants.split(","):
        cmd = [sys.executable, __file__, "--one", v] + [
            "--%s=%s" % (k, getattr(args, k)) for k in ("layers", "batch", "seq", "steps",
                                                        "warmup", "profile", "memory")] + (
            ["--lora"] if args.lora else []) + (
            [] if args.loss_budget_mib is None else ["--loss-budget-mib=%d" % args.loss_budget_mib]) + (
            [] if args.memory_dump is None else ["--memory-dump=%s" % args.memory_dump])
        proc = subprocess.run(cmd, capture_output=True, text=True)
        found = [line for line in proc.stdout.splitlines() if line.startswith("RESULT ")]
        if proc.returncode != 0 or not found:
            tail = (proc.stderr.strip().splitlines() or ["no output"])[-1]
            print("%s: FAILED (exit %d): %s" % (v, proc.returncode, tail), flush=True)
            continue
        r = json.loads(found[-1][len("RESULT "):])
        rows.append(r)
        print("%-20s step %8.1f ms  %9.0f tok/s  peak %6.2f GiB (forward %.2f, backward %.2f, "
              "optimizer %.2f)  loss %.3f->%.3f  first step %.1f s" % (
                  r["variant"], r["step_ms"], r["tokens_per_s"], r["peak_gib"],
                  r["peak_gib_by_phase"]["forward"], r["peak_gib_by_phase"]["backward"],
                  r["peak_gib_by_phase"]["optimizer"], r["first_loss"], r["last_loss"],
                  r["first_step_s"]), flush=True)
        for line in r.get("liger", []):
            print("    " + line, flush=True)
        if r.get("profile"):
            from floors import print_profile
            print_profile(r["profile"])
        if "memory" in r:
            m = r["memory"]
            print("    memory: %.2f GiB before the step, its peak %.2f GiB above that; alive "
                  "at the peak:" % (m["before_gib"], m["step_peak_gib"]), flush=True)
            for gib, n, place in m["top"]:
                print("    %8.3f GiB %4d x  %s" % (gib, n, place[:100]), flush=True)
            for name, ph in m.get("phases", {}).items():
                print("    %s's peak, %.2f GiB above the start:" % (name, ph["peak_gib"]),
                      flush=True)
                for gib, n, place in ph["top"]:
                    print("    %8.3f GiB %4d x  %s" % (gib, n, place[:100]), flush=True)
    if args.json:
        with open(args.json, "w") as fh:
            json.dump(dict(args=vars(args), rows=rows), fh, indent=1)


if __name__ == "__main__":
    sys.exit(main())
