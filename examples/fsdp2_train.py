#!/usr/bin/env python3
"""Train a small Llama patched by liger.transformers with PyTorch's FSDP2
(`fully_shard`, or DDP with `--engine ddp`) on several GPUs, or the same
model on one GPU, with the same global batch and seed, and compare the
per-step losses.

    # one GPU: the reference run
    python3 examples/fsdp2_train.py --json single.json
    # two GPUs, one process each, each half of the global batch
    torchrun --nproc-per-node 2 examples/fsdp2_train.py --json fsdp.json
    # compare (per-step loss, relative)
    python3 examples/fsdp2_train.py --compare single.json fsdp.json

`--patch none` runs the model as Hugging Face wrote it (eager PyTorch under
the same FSDP2 setup), for the tokens/s beside ours. Each layer and then the
whole model are sharded (`fully_shard`); parameters are bf16, gathered
before each module's forward, and their gradients reduce-scattered by FSDP2
itself: liger's kernels see plain tensors on the process's GPU. The kernels
come from LIGER_OPS_BUNDLES (scripts/build-gpu-bundles.sh precompiles this
model's) or are compiled on first use where liger-compile is installed.
Keep NVLink multicast off (NCCL_NVLS_ENABLE=0) on shared machines.
"""
import argparse
import json
import os
import sys
import time

# The model: Llama's layout at a size that trains in seconds.
CONFIG = dict(model_type="llama", hidden_size=1024, intermediate_size=2816,
              num_hidden_layers=4, num_attention_heads=8, num_key_value_heads=4,
              vocab_size=32000, max_position_embeddings=1024, rms_norm_eps=1e-5)


def build(patch):
    import torch
    import transformers
    kw = {k: v for k, v in CONFIG.items() if k != "model_type"}
    config = transformers.LlamaConfig(**kw)
    config._attn_implementation = "sdpa"
    torch.manual_seed(0)
    model = transformers.LlamaForCausalLM(config).to("cuda", torch.bfloat16)
    if patch == "liger":
        import warnings
        from liger import transformers as lt
        lt.apply_liger_kernel_to_llama(model=model)
        warnings.simplefilter("error", lt.LigerFallbackWarning)  # no silent fallback
    return model


def batches(steps, batch, seq):
    """The global batches, the same in every process (seeded)."""
    import torch
    g = torch.Generator().manual_seed(1)
    ids = torch.randint(0, CONFIG["vocab_size"], (steps, batch, seq), generator=g)
    labels = ids.clone()
    labels[:, :, :8] = -100  # a prompt not trained on, the same count in every row
    return ids, labels


def train(args):
    import torch
    import torch.distributed as dist
    world = int(os.environ.get("WORLD_SIZE", "1"))
    rank = int(os.environ.get("RANK", "0"))
    local = int(os.environ.get("LOCAL_RANK", "0"))
    torch.cuda.set_device(local)
    if world > 1:
        os.environ.setdefault("NCCL_NVLS_ENABLE", "0")
        dist.init_process_group("nccl", device_id=torch.device("cuda", local))
    if args.batch % world:
        raise SystemExit("--batch %d does not split over %d processes" % (args.batch, world))
    model = build(args.patch)
    if world > 1 and args.engine == "fsdp2":
        from torch.distributed.fsdp import fully_shard
        for layer in model.model.layers:
            fully_shard(layer)
        fully_shard(model)
    elif world > 1:  # DDP: whole replicas, gradients all-reduced (averaged)
        from torch.nn.parallel import DistributedDataParallel
        model = DistributedDataParallel(model, device_ids=[local])
    model.train()
    opt = torch.optim.AdamW(model.parameters(), lr=args.lr)
    ids, labels = batches(args.steps, args.batch, args.seq)
    share = args.batch // world  # this process's rows of each global batch
    rows = slice(rank * share, (rank + 1) * share)
    losses, times = [], []
    for step in range(args.steps):
        x = ids[step, rows].cuda()
        y = labels[step, rows].cuda()
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        loss = model(input_ids=x, labels=y).loss
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        torch.cuda.synchronize()
        times.append(time.perf_counter() - t0)
        # Every process has the same count of labelled tokens, so the mean
        # of the processes' means is the global batch's mean.
        reported = loss.detach().float()
        if world > 1:
            dist.all_reduce(reported)
            reported /= world
        losses.append(reported.item())
    timed = times[args.warmup:] or times
    tokens_per_gpu = share * args.seq / (sum(timed) / len(timed))
    result = dict(world=world, engine=args.engine if world > 1 else "none", patch=args.patch,
                  batch=args.batch, seq=args.seq,
                  losses=losses, tokens_per_s_per_gpu=tokens_per_gpu,
                  peak_gib=torch.cuda.max_memory_allocated() / 2 ** 30,
                  device=torch.cuda.get_device_name(), torch=torch.__version__)
    if rank == 0:
        print("%d GPU(s)%s, %s: loss %.4f -> %.4f, %.0f tokens/s per GPU, peak %.2f GiB" % (
            world, " (%s)" % args.engine if world > 1 else "", args.patch, losses[0],
            losses[-1], tokens_per_gpu, result["peak_gib"]))
        if args.json:
            with open(args.json, "w") as f:
                json.dump(result, f, indent=1)
    if world > 1:
        dist.destroy_process_group()


def compare(paths, tolerance):
    runs = [json.load(open(p)) for p in paths]
    a, b = runs[0]["losses"], runs[1]["losses"]
    if len(a) != len(b):
        print("compare: %d and %d steps" % (len(a), len(b)))
        return 1
    err = max(abs(x - y) / abs(x) for x, y in zip(a, b))
    for r, p in zip(runs, paths):
        print("%s: %d GPU(s), %s, %s, %.0f tokens/s per GPU, peak %.2f GiB" % (
            p, r["world"], r.get("engine", "none"), r["patch"], r["tokens_per_s_per_gpu"],
            r["peak_gib"]))
    ok = err <= tolerance
    print("per-step loss: max relative difference %.2e over %d steps (tolerance %.0e): %s" % (
        err, len(a), tolerance, "ok" if ok else "FAILED"))
    return 0 if ok else 1


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--patch", choices=("liger", "none"), default="liger")
    ap.add_argument("--engine", choices=("fsdp2", "ddp"), default="fsdp2",
                    help="with several processes: FSDP2 (fully_shard) or DDP")
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--warmup", type=int, default=3, help="steps left out of tokens/s")
    ap.add_argument("--batch", type=int, default=8, help="global batch (rows)")
    ap.add_argument("--seq", type=int, default=512)
    ap.add_argument("--lr", type=float, default=1e-4)
    ap.add_argument("--json")
    ap.add_argument("--compare", nargs=2, metavar="JSON")
    ap.add_argument("--tolerance", type=float, default=1e-2,
                    help="per-step loss, relative (bf16)")
    args = ap.parse_args(argv)
    if args.compare:
        return compare(args.compare, args.tolerance)
    train(args)
    return 0


if __name__ == "__main__":
    sys.exit(main())
