"""Hugging Face models patched by liger.transformers train as the originals
do: a tiny configuration of each family (models.py; random weights,
random tokens, fixed seed), 20 AdamW steps with and without the patch, the
per-step losses and the final parameters compared; the same with a PEFT
LoRA adapter (PEFT's forward; and with lora=True, every decoder
projection's adapter in liger's LoRA kernel) and with gradient
checkpointing. A family the installed
transformers lacks is skipped, naming what it lacks. The kernels are the ones
scripts/build-gpu-bundles.sh precompiled (LIGER_OPS_BUNDLES); no patched
forward may fall back. Skips cleanly without torch, a GPU, transformers or
the bundles."""
import inspect
import os
import warnings

import pytest

import models

torch = pytest.importorskip("torch", reason="needs PyTorch")
if not torch.cuda.is_available():
    pytest.skip("no CUDA GPU on this machine", allow_module_level=True)
transformers = pytest.importorskip("transformers", reason="needs transformers")
from liger import transformers as lt  # noqa: E402

STEPS = 20
# Per-step loss, relative; final parameters, ||ours - theirs|| / ||theirs||.
TOL = {"bf16": (1e-2, 1e-2), "f32": (2e-3, 2e-3)}
ZERO_START_PARAM_TOL = {"bf16": 0.3, "f32": 2e-2}
LORA_PARAM_TOL = {"bf16": 5e-2, "f32": 2e-3}
DTYPES = {"bf16": torch.bfloat16, "f32": torch.float32}


pytestmark = pytest.mark.usefixtures("ops_bundles")


def build(family, dtype, lora=False, checkpointing=False):
    kw = dict(models.TINY[family])
    model_type = kw.pop("model_type")
    try:
        lt._classes(model_type)
    except lt.LigerError as e:
        pytest.skip(str(e))
    config = transformers.AutoConfig.for_model(model_type, **kw)
    config._attn_implementation = models.ATTENTION.get(family, "sdpa")
    torch.manual_seed(0)
    model = transformers.AutoModelForCausalLM.from_config(config).to("cuda", DTYPES[dtype])
    # RMSNorm weights start at 1 (Gemma's at 0: the scale is 1 + w): make
    # them matter.
    fam = lt._FAMILIES[model_type]
    with torch.no_grad():
        for m in model.modules():
            if type(m).__name__ in fam.norms:
                m.weight.normal_(1.0 - fam.offset, 0.1)
    if checkpointing:
        model.gradient_checkpointing_enable()
    if lora:
        model = models.peft_model(model, lora)
    model.train()
    return model


def train(model, vocab, lr):
    # One batch, learnt over the steps (so the loss falls).
    g = torch.Generator(device="cuda").manual_seed(1)
    ids = torch.randint(0, vocab, (4, 64), device="cuda", generator=g)
    labels = ids.clone()
    labels[:, :5] = -100  # a prompt not trained on
    params = [p for p in model.parameters() if p.requires_grad]
    zero_start = {n: not p.detach().any().item() for n, p in model.named_parameters()
                  if p.requires_grad}
    opt = torch.optim.AdamW(params, lr=lr)
    losses = []
    for _ in range(STEPS):
        loss = model(input_ids=ids, labels=labels).loss
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        losses.append(loss.item())
    return losses, zero_start, {n: p.detach().float()
                                for n, p in model.named_parameters() if p.requires_grad}


CASES = [(f, "bf16", False, False) for f in models.TINY] + [
    ("llama", "f32", False, False),
    ("llama", "bf16", "peft", False),   # PEFT LoRA on q/k/v/o (lm_head frozen)
    ("qwen2", "bf16", "peft", False),
] + [
    # lora=True: every decoder projection's adapter in liger's LoRA kernel
    # (Qwen2's q/k/v with their biases).
    (family, dtype, "liger", False) for family, dtype in models.LORA_KERNEL_CASES] + [
    ("llama", "bf16", False, True),   # gradient checkpointing
]


@pytest.mark.parametrize("family,dtype,lora,checkpointing", CASES,
                         ids=["%s-%s%s%s" % (f, d, {None: "", False: "", "peft": "-lora",
                                                     "liger": "-lora-liger"}[lo],
                                             "-ckpt" if c else "")
                              for f, d, lo, c in CASES])
def test_patched_model_trains_as_the_original(family, dtype, lora, checkpointing):
    _trains_as_the_original(family, dtype, lora, checkpointing)


# fused_mlp=True: each dense MLP one liger.ops.gated_mlp (Llama's, Phi-3's
# fused gate_up, Gemma's GeGLU, Qwen3-MoE's dense layer beside its experts).
FUSED_MLP_CASES = ("llama", "phi3", "gemma", "qwen3_moe")


@pytest.mark.parametrize("family", FUSED_MLP_CASES)
def test_fused_mlp_trains_as_the_original(family):
    _trains_as_the_original(family, "bf16", False, False, fused_mlp=True)


# fuse_qkv_rope=True: each attention's q and k one liger.ops.linear_rope
# (Llama's, Qwen2's with q/k biases, Gemma's multi-query, Granite's
# multipliers); any fallback would warn, which fails the run.
FUSE_QKV_ROPE_CASES = ("llama", "qwen2", "gemma", "granite")


@pytest.mark.parametrize("family", FUSE_QKV_ROPE_CASES)
def test_fuse_qkv_rope_trains_as_the_original(family):
    _trains_as_the_original(family, "bf16", False, False, fuse_qkv_rope=True)


# fuse_norm_linear=True: each decoder layer's norm with the projections that
# read it one liger.ops.rms_norm_linear (the norm kernel, the projections,
# their input gradients accumulated into one buffer, the norm's backward
# kernel): Llama's q/k/v and gate/up, Qwen2's biased q/k/v, Phi-3's fused
# qkv_proj and gate_up_proj, Gemma 2's pre-feedforward norm; no norm may
# come untied (it would warn, which fails the run).
FUSE_NORM_LINEAR_CASES = ("llama", "qwen2", "phi3", "gemma2")


@pytest.mark.parametrize("family", FUSE_NORM_LINEAR_CASES)
def test_fuse_norm_linear_trains_as_the_original(family):
    _trains_as_the_original(family, "bf16", False, False, fuse_norm_linear=True)


# attention=True: the model's attention function liger.ops.attention (the
# attention template's forward and backward, D 64): every family's tiny
# model (Gemma's multi-query heads, Granite's attention_multiplier as its
# scale, Gemma 2's and 3's sliding layers with their window of 32, shorter
# than the sequence, and Gemma 2's softcapped scores against its eager
# attention); any fallback would warn, which fails the run.
ATTENTION_CASES = ("llama", "qwen2", "gemma", "gemma2", "gemma3_text", "granite", "phi3",
                   "olmo2", "glm4", "smollm3", "mixtral", "qwen3_moe", "llama4_text")


@pytest.mark.parametrize("family", ATTENTION_CASES)
def test_attention_trains_as_the_original(family):
    _trains_as_the_original(family, "bf16", False, False, attention=True)


def _trains_as_the_original(family, dtype, lora, checkpointing, fused_mlp=False,
                            fuse_qkv_rope=False, attention=False, fuse_norm_linear=False):
    vocab = models.TINY[family]["vocab_size"]
    lr = 1e-3 if lora else 1e-4
    ref_losses, zero_start, ref_params = train(build(family, dtype, lora, checkpointing), vocab, lr)
    model = build(family, dtype, lora, checkpointing)
    # f32 takes cross-entropy on the logits (the fused linear cross-entropy's
    # wgmma kernels take bf16/f16).
    flags = dict(cross_entropy=True, fused_linear_cross_entropy=False) if dtype == "f32" \
        else {}
    fam = lt._FAMILIES[models.TINY[family]["model_type"]]
    if lora == "liger":
        flags["lora"] = True
    if fused_mlp:
        flags["fused_mlp"] = True
    if fuse_qkv_rope:
        flags["fuse_qkv_rope"] = True
    if attention:
        flags["attention"] = True
    if fuse_norm_linear:
        flags["fuse_norm_linear"] = True
    if fam.rope_tables not in (None, dtype):
        # OLMo 2's RoPE tables stay f32 (liger.ops.rope takes them in q's
        # dtype): its RoPE falls back, warned (test_transformers.py).
        flags["rope"] = False
    with warnings.catch_warnings():
        # What the family cannot patch is warned here (test_transformers.py
        # checks those warnings); the training below may warn of nothing.
        warnings.simplefilter("ignore", lt.LigerFallbackWarning)
        patched = lt.apply_liger_kernel(model.get_base_model() if lora else model, **flags)
    assert patched >= 8
    if fuse_qkv_rope:  # (the patch warned of nothing it left: the attention is the rewrite)
        modules = [m for m in model.modules() if type(m).__name__.endswith("Attention")]
        assert modules and all(inspect.unwrap(vars(m)["forward"].__func__).__code__
                               .co_filename.startswith("<liger fuse_qkv_rope: ")
                               for m in modules)
    if fuse_norm_linear:  # (every layer's two norms tied to their projections)
        tied = [m for m in model.modules() if getattr(m, "_liger_consumers", None)]
        assert len(tied) == 2 * model.config.num_hidden_layers
    if attention:  # (the patch chose liger's attention function for the model)
        assert model.config._attn_implementation == lt.ATTENTION_IMPLEMENTATION == "liger"
    with warnings.catch_warnings():
        warnings.simplefilter("error", lt.LigerFallbackWarning)
        losses, _, params = train(model, vocab, lr)
    if fuse_norm_linear:  # (and none came untied)
        assert len([m for m in model.modules() if getattr(m, "_liger_consumers", None)]) == \
            len(tied)
    loss_tol, param_tol = TOL[dtype]
    loss_err = max(abs(a - b) / abs(b) for a, b in zip(losses, ref_losses))
    # Each trained parameter's distance from the original's, relative to
    # its norm. Parameters that start at 0 (LoRA's B, Qwen2's q/k/v biases)
    # get a looser bound: AdamW's first updates are about lr * sign(gradient),
    # and where a gradient is near 0, rounding flips the sign, a sizeable
    # part of a young parameter's norm.
    # LoRA trains at 10x the rate (1e-3), so the same noise moves the
    # adapters 10x as far: measured 0.020-0.026 on the H200.
    if lora:
        param_tol = LORA_PARAM_TOL[dtype]

    def bound(name):
        return ZERO_START_PARAM_TOL[dtype] if zero_start[name] else param_tol
    # Not compared: a k_proj bias, whose gradient is 0 in exact arithmetic
    # (softmax over the keys ignores a shift common to them all), so that
    # both runs train it on rounding noise alone.
    errs = {n: ((params[n] - p).norm() / p.norm().clamp_min(1e-30)).item()
            for n, p in ref_params.items() if not n.endswith("k_proj.bias")}
    param_err = max([e for n, e in errs.items() if not zero_start[n]] or [0.0])
    zero_err = max([e for n, e in errs.items() if zero_start[n]] or [0.0])
    bad = {n: e for n, e in errs.items() if e > bound(n)}
    line = ("%s %s lora=%s ckpt=%s%s: loss %.4f -> %.4f (original %.4f -> %.4f), max per-step "
            "loss error %.2e, max parameter error %.2e (%.2e on those starting at 0)" % (
                family, dtype, lora, checkpointing, (" fused_mlp" if fused_mlp else "") +
                (" fuse_qkv_rope" if fuse_qkv_rope else "") +
                (" attention" if attention else "") +
                (" fuse_norm_linear" if fuse_norm_linear else ""),
                losses[0], losses[-1], ref_losses[0],
                ref_losses[-1], loss_err, param_err, zero_err))
    print(line)
    if os.environ.get("LIGER_PARITY_LOG"):  # the loss table, for the record
        with open(os.environ["LIGER_PARITY_LOG"], "a") as f:
            f.write(line + "\n")
    assert loss_err <= loss_tol, (losses, ref_losses)
    assert not bad, bad
    assert losses[-1] < losses[0]  # it learns


def _grads(model):
    return {n: p.grad.detach().float() for n, p in model.named_parameters()
            if p.grad is not None}


def _close(ours, theirs, tol):
    """||ours - theirs|| / ||theirs|| per gradient, each within tol."""
    assert ours.keys() == theirs.keys()
    errs = {n: ((ours[n] - g).norm() / g.norm().clamp_min(1e-30)).item()
            for n, g in theirs.items()}
    bad = {n: e for n, e in errs.items() if e > tol}
    assert not bad, bad


@pytest.mark.parametrize("dynamic", [False, True], ids=["static", "dynamic"])
def test_a_patched_model_compiles_with_no_graph_break_on_the_gpu(dynamic):
    """torch._dynamo.explain over a patched tiny Llama's training step on
    the GPU: one graph, no break (the liger ops are custom operators with
    fake kernels; the fallback decisions are constants of the graph); then
    torch.compile(fullgraph=True), with static or dynamic shapes, trains as
    the eager patched model does: the loss and every parameter's gradient,
    over two sequence lengths."""
    model = build("llama", "bf16")
    assert lt.apply_liger_kernel(model) >= 8
    vocab = models.TINY["llama"]["vocab_size"]
    if not dynamic:
        ids = torch.randint(0, vocab, (2, 64), device="cuda")
        with warnings.catch_warnings():
            warnings.simplefilter("error", lt.LigerFallbackWarning)
            explained = torch._dynamo.explain(model)(input_ids=ids, labels=ids)
        assert explained.graph_break_count == 0, [r.reason for r in explained.break_reasons]
        assert explained.graph_count == 1
    torch._dynamo.reset()
    eager = build("llama", "bf16")
    lt.apply_liger_kernel(eager)
    compiled = torch.compile(model, fullgraph=True, dynamic=dynamic)
    for seq in (64, 96):
        ids = torch.randint(0, vocab, (2, seq), device="cuda")
        model.zero_grad(set_to_none=True)
        eager.zero_grad(set_to_none=True)
        with warnings.catch_warnings():
            warnings.simplefilter("error", lt.LigerFallbackWarning)
            loss = compiled(input_ids=ids, labels=ids).loss
        loss.backward()
        ref = eager(input_ids=ids, labels=ids).loss
        ref.backward()
        assert abs(loss.item() - ref.item()) <= 1e-2 * abs(ref.item()), (loss.item(), ref.item())
        # Inductor fuses and reorders the model's own ops (bf16): the
        # gradients agree to bf16's few bits, as the eager parity does.
        _close(_grads(model), _grads(eager), 3e-2)


def test_a_gpu_liger_has_no_kernels_for_falls_back_with_one_warning(monkeypatch):
    """A patched model on a GPU of a compute capability liger has no
    target for (7.5 here, by the capability torch reports): the model runs
    as the original, with one warning for the whole model."""
    from liger import bundles
    monkeypatch.setattr(torch.cuda, "get_device_capability", lambda device=None: (7, 5))
    bundles.clear()
    lt._DECIDED.clear()
    lt._WARNED.clear()
    model, ref = build("llama", "bf16"), build("llama", "bf16")
    lt.apply_liger_kernel(model)
    ids = torch.randint(0, models.TINY["llama"]["vocab_size"], (2, 64), device="cuda")
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            loss = model(input_ids=ids, labels=ids).loss
            model(input_ids=ids, labels=ids)
    finally:
        bundles.clear()
        lt._DECIDED.clear()
    messages = [str(w.message) for w in caught if w.category is lt.LigerFallbackWarning]
    assert len(messages) == 1, messages
    assert messages[0].startswith("liger: patched modules run their original forward: liger "
                                  "has no kernels for "), messages
    assert "(compute capability 7.5)" in messages[0]
    assert torch.equal(loss, ref(input_ids=ids, labels=ids).loss)
