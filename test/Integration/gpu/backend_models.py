"""The models of the GPU suite of torch.compile(backend="liger")
(test_backend_gpu.py): what scripts/build-gpu-bundles.sh precompiles and
what the test runs, built by the same function.

`precompile_all(DIR)` compiles, on the build machine (the CPU reference
traces each training step; nothing runs), the sm_90a kernels of every case
into the cache DIR (LIGER_OPS_BUNDLES=DIR on the GPU machine) and writes
DIR/expected.json: per case, the fusion groups that got a kernel and those
left to Inductor with the reason, which the GPU run must reproduce.
"""
import json
import os
import sys

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "..")

# The tiny config of each family in examples/configs (what the CPU suite
# trains), at sizes the kernels take: rows of 256, heads of 64, a vocabulary
# that is a multiple of 8, one layer.
FAMILIES = ["llama", "mistral", "qwen2", "qwen3", "gemma", "gemma2", "phi3", "olmo2"]
SIZES = dict(hidden_size=256, intermediate_size=512, vocab_size=2048, head_dim=64,
             max_position_embeddings=256)
VOCAB = SIZES["vocab_size"]
# (case, family, PEFT LoRA on q/k/v/o)
CASES = [(f, f, False) for f in FAMILIES] + [("llama-lora", "llama", True)]
BATCH = (4, 64)
# What precompile traces with: the token dimensions are dynamic, so the
# kernels serve BATCH (and any other size).
PRECOMPILE_BATCH = (2, 16)


def config(family):
    from liger.frontend import capture
    fields = json.load(open(os.path.join(ROOT, "examples", "configs", "tiny-%s.json" % family)))
    fields.update(SIZES)
    if family == "gemma2":
        fields["query_pre_attn_scalar"] = SIZES["head_dim"]
    return capture.load_fields(fields)


def build(family, device, lora=False, seed=0):
    """The case's model, bf16, in training mode: random weights on `device`,
    or no weights at all on "precompile" (uninitialised CPU memory: what
    precompile traces needs no values)."""
    import torch
    from liger.frontend import capture
    if device == "precompile":
        model = capture.build_model(config(family), "bf16", "meta", seed).to_empty(device="cpu")
    else:
        model = capture.build_model(config(family), "bf16", device, seed)
        with torch.no_grad():
            for name, p in model.named_parameters():
                if "norm" in name:
                    p.normal_(0.0 if family.startswith("gemma") else 1.0, 0.1)
    if lora:
        from peft import LoraConfig, get_peft_model
        # Adapters in the model's dtype (PEFT would keep them in f32, and
        # an adapter of another dtype is not liger.lora_linear).
        model = get_peft_model(model, LoraConfig(
            r=8, lora_alpha=16, lora_dropout=0.0,
            target_modules=["q_proj", "k_proj", "v_proj", "o_proj"]),
            autocast_adapter_dtype=False)
        if device != "precompile":
            with torch.no_grad():
                for name, p in model.named_parameters():
                    if "lora_B" in name:  # PEFT starts B at zero; make the update visible
                        p.normal_(0.0, 0.02)
    return model.train()


def batch(vocab, shape, device, seed=1):
    import torch
    g = torch.Generator(device="cpu").manual_seed(seed)
    ids = torch.randint(0, vocab, shape, generator=g).to(device)
    labels = ids.clone()
    labels[:, :3] = -100  # a prompt not trained on
    return dict(input_ids=ids, labels=labels)


def groups(part):
    """A graph's fusion groups with kernels: 'kind (ops)'."""
    return sorted(u.group() for u in part.units)


def left(part):
    """Its groups left to Inductor."""
    return sorted(left.group() for left in part.left)


def e2e_model(device, layers=2):
    """bench/e2e.py's Llama-3-8B-width model, on "cuda" or "precompile"."""
    sys.path.insert(0, os.path.join(ROOT, "bench"))
    import e2e
    return e2e.build(layers, False, device)


def precompile_all(out_dir):
    """Every case's kernels (and bench/e2e.py's model's) into out_dir; the
    expectations into out_dir/expected.json."""
    import torch
    from liger.frontend import backend
    expected = {}
    todo = [(case, family, lora) for case, family, lora in CASES] + [("e2e", None, False)]
    for case, family, lora in todo:
        torch._dynamo.reset()
        if case == "e2e":
            model, vocab = e2e_model("precompile"), 128256
        else:
            model, vocab = build(family, "precompile", lora), VOCAB
        reports = backend.precompile(model, batch(vocab, PRECOMPILE_BATCH, "cpu"), out_dir)
        (report,) = reports
        expected[case] = {p.name.split(".")[-1]: dict(groups=groups(p), left=left(p))
                          for p in report.partitions}
        print("precompiled %s: %s" % (case, "; ".join(report.summary())), flush=True)
    with open(os.path.join(out_dir, "expected.json"), "w") as f:
        json.dump(expected, f, indent=1, sort_keys=True)
