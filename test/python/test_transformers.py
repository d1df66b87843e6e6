"""liger.transformers on the CPU: the patching (classes and models), the
fallbacks and their warnings, the kernels chosen by a model's config, and
the patched models' numerics through the reference lowering
(LIGER_OPS_CPU_REFERENCE=1) against the same models unpatched: tiny
configurations with random weights, nothing downloaded."""
import os
import warnings

import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

from liger import bundles, ops  # noqa: E402
from liger import transformers as lt  # noqa: E402
from liger.driver import LigerError, find_tool  # noqa: E402

F32, BF16 = torch.float32, torch.bfloat16


def _has_cpu_runner():
    try:
        find_tool("liger-cpu-runner")
        find_tool("liger-compile")
        return True
    except LigerError:
        return False


needs_runner = pytest.mark.skipif(not _has_cpu_runner(),
                                  reason="liger-cpu-runner/liger-compile not built")


def tiny_config(family, **overrides):
    """Two decoder layers, hidden 32, 4 query heads of 8 over 2 KV heads,
    vocabulary 96."""
    common = dict(hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                  num_attention_heads=4, num_key_value_heads=2, vocab_size=96,
                  max_position_embeddings=64, rms_norm_eps=1e-5)
    common.update(overrides)
    cls = {"llama": transformers.LlamaConfig, "mistral": transformers.MistralConfig,
           "qwen2": transformers.Qwen2Config, "qwen3": transformers.Qwen3Config,
           "gemma": transformers.GemmaConfig}[family]
    if family in ("gemma", "qwen3"):
        common.setdefault("head_dim", 8)
    if family == "gemma" and "num_key_value_heads" not in overrides:
        common["num_key_value_heads"] = 1  # multi-query, as Gemma 2B
    config = cls(**common)
    config._attn_implementation = "eager"
    return config


def tiny_model(family, seed, dtype=F32, **overrides):
    config = tiny_config(family, **overrides)
    torch.manual_seed(seed)
    model = transformers.AutoModelForCausalLM.from_config(config).to(dtype)
    if family == "gemma":
        # Gemma's RMSNorm weights start at 0 (the scale is 1 + w): make them
        # matter.
        with torch.no_grad():
            for m in model.modules():
                if type(m).__name__ == "GemmaRMSNorm":
                    m.weight.normal_(0, 0.1)
    return model


def tokens(seed, batch=2, seq=6, vocab=96):
    g = torch.Generator().manual_seed(seed)
    return torch.randint(0, vocab, (batch, seq), generator=g)


@pytest.fixture(autouse=True)
def _clean(monkeypatch):
    lt.revert()
    lt._WARNED.clear()
    lt._DECIDED.clear()
    ops.clear_caches()
    monkeypatch.delenv("LIGER_OPS_CPU_REFERENCE", raising=False)
    yield
    lt.revert()
    lt._DECIDED.clear()
    ops.clear_caches()


def test_class_patch_replaces_the_family_forwards_and_revert_restores_them():
    from transformers.models.llama import modeling_llama as ml
    before = (ml.LlamaRMSNorm.forward, ml.LlamaMLP.forward, ml.LlamaForCausalLM.forward,
              ml.apply_rotary_pos_emb)
    assert lt.apply_liger_kernel_to_llama() is None
    assert ml.LlamaRMSNorm.forward is lt._rms_norm_forward
    assert ml.LlamaMLP.forward is lt._mlp_forward
    assert ml.LlamaForCausalLM.forward is lt._causal_lm_forward
    assert getattr(ml.apply_rotary_pos_emb, "_liger", False)
    # Another family's classes stay.
    from transformers.models.qwen2 import modeling_qwen2 as mq
    assert not getattr(mq.apply_rotary_pos_emb, "_liger", False)
    assert mq.Qwen2RMSNorm.forward is not lt._rms_norm_forward
    lt.revert()
    assert (ml.LlamaRMSNorm.forward, ml.LlamaMLP.forward, ml.LlamaForCausalLM.forward,
            ml.apply_rotary_pos_emb) == before


def test_flags_choose_what_is_patched():
    from transformers.models.mistral import modeling_mistral as mm
    lt.apply_liger_kernel_to_mistral(rope=False, rms_norm=False,
                                     fused_linear_cross_entropy=False)
    assert mm.MistralMLP.forward is lt._mlp_forward
    assert mm.MistralRMSNorm.forward is not lt._rms_norm_forward
    assert mm.MistralForCausalLM.forward is not lt._causal_lm_forward
    assert not getattr(mm.apply_rotary_pos_emb, "_liger", False)


@pytest.mark.parametrize("family,norms", [("llama", 5), ("qwen3", 9), ("gemma", 5)])
def test_model_patch_counts_its_modules_and_leaves_the_classes(family, norms):
    model = tiny_model(family, 0)
    # norms, 2 MLPs, the causal LM (Qwen3 adds a q and a k norm per layer)
    assert lt.apply_liger_kernel(model) == norms + 2 + 1
    assert type(model.model.norm).forward is not lt._rms_norm_forward
    assert model.model.norm.forward.__func__ is lt._rms_norm_forward
    other = tiny_model(family, 0)
    assert "forward" not in vars(other.model.norm)


def test_a_model_of_another_family_is_a_clear_error():
    with pytest.raises(LigerError, match="apply_liger_kernel_to_gemma: LlamaForCausalLM has no "
                                         "GemmaRMSNorm, GemmaMLP or GemmaForCausalLM module"):
        lt.apply_liger_kernel_to_gemma(model=tiny_model("llama", 0))
    from transformers.models.gemma import modeling_gemma as mg
    assert not getattr(mg.apply_rotary_pos_emb, "_liger", False)  # nothing was patched


def test_both_losses_is_an_error():
    with pytest.raises(ValueError, match="cannot both be True"):
        lt.apply_liger_kernel_to_llama(cross_entropy=True, fused_linear_cross_entropy=True)


def test_unknown_model_type_is_a_clear_error():
    class Config:
        model_type = "bert"
    with pytest.raises(LigerError, match="not model_type 'bert'"):
        lt.kernel_specs(Config())


def _fallback_warnings(caught):
    return [str(w.message) for w in caught if w.category is lt.LigerFallbackWarning]


def test_cpu_tensors_fall_back_with_one_warning():
    """A reason of the device is the whole model's: one warning, however
    many modules fall back."""
    ids = tokens(1)
    ref = tiny_model("llama", 3)
    model = tiny_model("llama", 3)
    lt.apply_liger_kernel(model)
    model.train()
    ref.train()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        out = model(input_ids=ids, labels=ids)
        out2 = model(input_ids=ids, labels=ids)
    expected = ref(input_ids=ids, labels=ids)
    assert torch.equal(out.loss, expected.loss) and torch.equal(out2.loss, expected.loss)
    assert _fallback_warnings(caught) == [
        "liger: patched modules run their original forward: liger.ops runs on CUDA tensors, "
        "got tensors on cpu (LIGER_OPS_CPU_REFERENCE=1 runs CPU tensors through the slow "
        "reference lowering, for tests)"]


# What a patched Llama decides at its first forward on one GPU: the
# modules, their ops and static arguments, their tensors' devices.
LLAMA_DECISIONS = [
    ("LlamaRMSNorm", "rms_norm", (32, "torch.bfloat16", "torch.bfloat16", 1e-5, 0.0, "llama"),
     (("hidden_states", "cuda:0"), ("weight", "cuda:0"))),
    ("LlamaMLP", "swiglu", (64, "torch.bfloat16"), (("gate", "cuda:0"), ("up", "cuda:0"))),
    ("apply_rotary_pos_emb", "rope", (4, 2, 8, "torch.bfloat16", True),
     (("q", "cuda:0"), ("k", "cuda:0"), ("cos", "cuda:0"), ("sin", "cuda:0"))),
    ("LlamaForCausalLM's loss", "fused_linear_cross_entropy",
     (96, 32, "torch.bfloat16", "torch.int64", -100, 0.0, "mean", None),
     (("lm_head.weight", "cuda:0"), ("labels", "cuda:0"))),
]


def _gpu(monkeypatch, capability, name):
    """torch.cuda as on a machine with one GPU of `capability`."""
    monkeypatch.setattr(torch.cuda, "get_device_capability", lambda device=None: capability)
    monkeypatch.setattr(torch.cuda, "get_device_name", lambda device=None: name)
    bundles.clear()


def test_a_gpu_liger_has_no_kernels_for_gives_one_warning(monkeypatch):
    _gpu(monkeypatch, (7, 5), "Tesla T4")
    loaded = []
    monkeypatch.setattr(bundles, "kernels", loaded.append)
    monkeypatch.setattr(bundles, "loss_plan_kernels", loaded.append)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for _ in range(2):
            for decision in LLAMA_DECISIONS:
                assert lt._fallback(*decision)
    assert _fallback_warnings(caught) == [
        "liger: patched modules run their original forward: liger has no kernels for Tesla T4 "
        "(compute capability 7.5): its targets are sm_90a (9.0), sm_80 (8.0, 8.7), sm_86 "
        "(8.6, 8.9)"]
    assert loaded == []
    # An Ada GPU takes the sm_86 kernels.
    lt._DECIDED.clear()
    _gpu(monkeypatch, (8, 9), "NVIDIA L4")
    for decision in LLAMA_DECISIONS:
        assert lt._fallback(*decision) is None
    assert [spec.target for spec in loaded] == ["sm_86"] * 4


def test_patching_touches_no_gpu(monkeypatch):
    """Patching reads no device property (that would initialise CUDA, and
    fork-based workers that use CUDA later would fail) and warns of nothing
    it cannot know yet (the kernels may all be in the bundle cache)."""
    def no_cuda(*args, **kwargs):
        raise AssertionError("CUDA touched while patching")
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    for name in ("_lazy_init", "init", "current_device", "get_device_capability",
                 "get_device_properties", "get_device_name", "device_count"):
        monkeypatch.setattr(torch.cuda, name, no_cuda)
    monkeypatch.setattr("liger.driver.find_tool", _no_tool)
    monkeypatch.delenv("LIGER_OPS_BUNDLES", raising=False)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        lt.apply_liger_kernel_to_llama()
        lt.apply_liger_kernel(tiny_model("qwen2", 0))
    assert _fallback_warnings(caught) == []


def test_tensors_on_several_devices_fall_back(monkeypatch):
    with pytest.warns(lt.LigerFallbackWarning):
        why = lt._fallback("LlamaRMSNorm", "rms_norm", LLAMA_DECISIONS[0][2],
                           (("hidden_states", "cuda:0"), ("weight", "cuda:1")))
    assert why == "LlamaRMSNorm runs its original forward: liger.ops.rms_norm: hidden_states " \
                  "is on cuda:0 and weight on cuda:1"


@pytest.mark.parametrize("error", [ImportError("no _liger_runtime"),
                                   RuntimeError("CUDA_ERROR_NO_BINARY_FOR_GPU"),
                                   OSError(37, "No locks available")],
                         ids=["no-runtime", "driver", "cache"])
def test_kernels_that_fail_to_load_fall_back(error, monkeypatch):
    """Whatever stops the kernels loading is decided before the forward
    runs: the module falls back with a warning, nothing is raised."""
    import liger.runtime
    _gpu(monkeypatch, (9, 0), "NVIDIA H200")
    monkeypatch.setattr(bundles, "bundle_path", lambda spec: "/bundles/x")

    def failing(path):
        raise error
    monkeypatch.setattr(liger.runtime, "load", failing)
    with pytest.warns(lt.LigerFallbackWarning) as caught:
        why = lt._fallback(*LLAMA_DECISIONS[1])
    spec = ops.swiglu_spec(64, "bf16", target="sm_90a")
    assert why == "LlamaMLP runs its original forward: cannot load the kernels of %s (target " \
                  "sm_90a): %s: %s" % (spec, type(error).__name__, error)
    assert [str(w.message) for w in caught] == ["liger: " + why]


def test_unsupported_activation_falls_back():
    model = tiny_model("llama", 0, hidden_act="gelu")
    lt.apply_liger_kernel(model, rope=False, rms_norm=False, fused_linear_cross_entropy=False)
    x = torch.randn(2, 3, 32)
    with pytest.warns(lt.LigerFallbackWarning, match="activation 'gelu' runs its original"):
        y = model.model.layers[0].mlp(x)
    ref = tiny_model("llama", 0, hidden_act="gelu").model.layers[0].mlp(x)
    assert torch.equal(y, ref)


def test_unbuilt_fusion_flags_warn():
    with pytest.warns(lt.LigerFallbackWarning, match="lora=True: liger.ops has no autograd op"):
        lt.apply_liger_kernel_to_qwen2(lora=True)


def test_kernel_specs_follow_the_config():
    specs = lt.kernel_specs(tiny_config("gemma"), "bf16")
    assert ops.rms_norm_spec(32, "bf16", "bf16", 1e-5, 1.0, "gemma") in specs
    assert ops.geglu_spec(64, "bf16", "tanh") in specs
    assert ops.rope_spec(4, 1, 8, "bf16", True) in specs
    assert ops.fused_linear_cross_entropy_spec(96, 32, "bf16", reduction="sum") in specs
    qwen3 = lt.kernel_specs(tiny_config("qwen3"), torch.bfloat16)
    assert ops.rms_norm_spec(8, "bf16", "bf16", 1e-5) in qwen3  # its q/k norms
    assert ops.swiglu_spec(64, "bf16") in qwen3
    # The config's own dtype when none is given.
    config = tiny_config("llama", torch_dtype="bfloat16")
    assert ops.swiglu_spec(64, "bf16") in lt.kernel_specs(config)


@needs_runner
def test_precompiled_bundles_are_found_by_config_and_a_missing_one_falls_back(
        tmp_path, monkeypatch):
    config = tiny_config("llama")
    config.save_pretrained(tmp_path / "model")
    assert lt.main(["precompile", str(tmp_path / "bundles"), str(tmp_path / "model"),
                    "--dtype", "f32"]) == 0
    monkeypatch.setenv("LIGER_OPS_BUNDLES", str(tmp_path / "bundles"))
    for spec in lt.kernel_specs(config, "f32"):
        assert ops.bundle_path(spec).startswith(str(tmp_path / "bundles")), spec
    # A machine without the compiler: another configuration's kernels are
    # missing, and the patched forward says which spec to precompile.
    monkeypatch.setattr("liger.driver.find_tool", _no_tool)
    monkeypatch.setenv("LIGER_CACHE_DIR", str(tmp_path / "cache"))
    other = ops.rms_norm_spec(48, "f32", "f32", 1e-5)
    with pytest.raises(LigerError, match="python -m liger.ops precompile"):
        ops.bundle_path(other)
    # What a patched forward decides on a GPU (sm_90a here) then: warns
    # (once) and runs its original, before any kernel runs.
    monkeypatch.setitem(bundles._TARGETS, ("cuda", None), "sm_90a")
    args = (48, "torch.float32", "torch.float32", 1e-5, 0.0, "llama")
    for i in range(2):
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            why = lt._fallback("LlamaRMSNorm", "rms_norm", args,
                               (("hidden_states", "cuda"), ("weight", "cuda")))
        assert why == (
            "LlamaRMSNorm runs its original forward: no compiled kernels for %s (target "
            "sm_90a) in LIGER_OPS_BUNDLES=%s, and liger-compile is not installed here: on a "
            "machine with the compiler run\n  python -m liger.ops precompile DIR '%s'\n"
            "and set LIGER_OPS_BUNDLES=DIR here" % (other, tmp_path / "bundles", other))
        assert [str(w.message) for w in caught] == (["liger: " + why] if i == 0 else [])


def _no_tool(name="liger-opt"):
    raise LigerError("cannot find %s" % name)


def _grads(model):
    return {n: p.grad.detach().clone() for n, p in model.named_parameters()
            if p.grad is not None}


def _step(model, ids, labels=None, **kw):
    model.zero_grad(set_to_none=True)
    out = model(input_ids=ids, labels=ids if labels is None else labels, **kw)
    out.loss.backward()
    return out.loss.detach(), _grads(model)


CASES = [(f, "f32") for f in ("llama", "mistral", "qwen2", "qwen3", "gemma")] + [
    ("llama", "bf16"), ("gemma", "bf16")]


@needs_runner
@pytest.mark.parametrize("family,dtype", CASES)
def test_patched_model_matches_the_original_through_the_reference(family, dtype, monkeypatch):
    """Loss and every parameter's gradient of one training step, the patched
    model's liger functions run by the reference lowering: f32 with the loss
    on the logits (cross_entropy=True), bf16 with the fused linear
    cross-entropy (its kernels take bf16/f16)."""
    monkeypatch.setenv("LIGER_OPS_CPU_REFERENCE", "1")
    ids = tokens(7)
    labels = ids.clone()
    labels[0, 2] = -100  # an ignored label
    torch_dtype = torch.bfloat16 if dtype == "bf16" else F32
    ref, model = tiny_model(family, 11, torch_dtype), tiny_model(family, 11, torch_dtype)
    flags = dict(cross_entropy=True, fused_linear_cross_entropy=False) if dtype == "f32" \
        else {}
    assert lt.apply_liger_kernel(model, **flags) > 0
    ref.train()
    model.train()
    with warnings.catch_warnings():
        warnings.simplefilter("error", lt.LigerFallbackWarning)  # nothing falls back
        loss, grads = _step(model, ids, labels)
    ref_loss, ref_grads = _step(ref, ids, labels)
    # bf16: both round differently (the reference in f32 inside each op,
    # PyTorch between its ops); one step's gradients agree to bf16's few
    # bits.
    loss_tol, grad_tol = (1e-5, 1e-4) if dtype == "f32" else (1e-2, 6e-2)
    assert torch.allclose(loss.float(), ref_loss.float(), rtol=loss_tol), (loss, ref_loss)
    assert grads.keys() == ref_grads.keys()
    for name, g in grads.items():
        r = ref_grads[name].float()
        err = ((g.float() - r).abs().max() / r.abs().max().clamp_min(1e-30)).item()
        assert err < grad_tol, (name, err)


@needs_runner
def test_cross_entropy_flag_and_summed_loss_match(monkeypatch):
    """cross_entropy=True (logits kept, the loss by liger), with Hugging
    Face's num_items_in_batch (a summed loss over the counted tokens)."""
    monkeypatch.setenv("LIGER_OPS_CPU_REFERENCE", "1")
    ids = tokens(5)
    ref, model = tiny_model("qwen2", 2), tiny_model("qwen2", 2)
    lt.apply_liger_kernel(model, cross_entropy=True, fused_linear_cross_entropy=False,
                          rope=False, rms_norm=False, swiglu=False)
    ref.train()
    model.train()
    n = torch.tensor(9)
    loss, grads = _step(model, ids, num_items_in_batch=n)
    ref_loss, ref_grads = _step(ref, ids, num_items_in_batch=n)
    assert torch.allclose(loss, ref_loss, rtol=1e-5)
    assert torch.allclose(grads["lm_head.weight"], ref_grads["lm_head.weight"], atol=1e-6)


@needs_runner
def test_frozen_lm_head_gets_no_weight_gradient(monkeypatch):
    """A frozen lm_head (as under LoRA): the fused loss forms dx only."""
    monkeypatch.setenv("LIGER_OPS_CPU_REFERENCE", "1")
    h = torch.randn(10, 32).to(torch.bfloat16).requires_grad_(True)
    w = torch.randn(96, 32).to(torch.bfloat16)
    t = torch.randint(0, 96, (10,))
    loss = ops.fused_linear_cross_entropy(h, w, t)
    loss.backward()
    hr = h.detach().float().requires_grad_(True)
    torch.nn.functional.cross_entropy(hr @ w.float().t(), t).backward()
    assert w.grad is None
    assert h.grad is not None
    err = ((h.grad.float() - hr.grad).abs().max() / hr.grad.abs().max()).item()
    assert err < 2e-2, err


@needs_runner
def test_loss_memory_budget_reaches_the_fused_loss(monkeypatch):
    """loss_memory_budget sets the fused loss's chunking, on a model or on
    the class; the loss is the same."""
    monkeypatch.setenv("LIGER_OPS_CPU_REFERENCE", "1")
    seen = []
    fused = ops.fused_linear_cross_entropy

    def recording(*args, **kw):
        seen.append(kw.get("memory_budget"))
        return fused(*args, **kw)
    monkeypatch.setattr(ops, "fused_linear_cross_entropy", recording)
    ids = tokens(4)
    losses = []
    for budget in (None, 5 * 96 * 2):  # the default, then chunks of 5 tokens
        model = tiny_model("llama", 8, torch.bfloat16)
        lt.apply_liger_kernel(model, rope=False, rms_norm=False, swiglu=False,
                              loss_memory_budget=budget)
        model.train()
        losses.append(model(input_ids=ids, labels=ids).loss)
    lt.apply_liger_kernel_to_llama(rope=False, rms_norm=False, swiglu=False,
                                   loss_memory_budget=4096)
    model = tiny_model("llama", 8, torch.bfloat16).train()
    losses.append(model(input_ids=ids, labels=ids).loss)
    assert seen == [None, 5 * 96 * 2, 4096]
    assert torch.allclose(losses[1], losses[0], rtol=1e-5)
    assert torch.allclose(losses[2], losses[0], rtol=1e-5)


@needs_runner
def test_eval_mode_keeps_the_logits(monkeypatch):
    """Outside training (or without labels) the causal LM runs as it was:
    logits are returned."""
    monkeypatch.setenv("LIGER_OPS_CPU_REFERENCE", "1")
    ids = tokens(3)
    model = tiny_model("llama", 4, torch.bfloat16)
    lt.apply_liger_kernel(model, rope=False, rms_norm=False, swiglu=False)
    model.eval()
    out = model(input_ids=ids, labels=ids)
    assert out.logits is not None and out.logits.shape == (2, 6, 96)
    model.train()
    assert model(input_ids=ids, labels=ids).logits is None


def test_f32_fused_linear_cross_entropy_is_refused_and_the_model_falls_back(monkeypatch):
    with pytest.raises(LigerError, match="takes bf16 or f16"):
        ops.fused_linear_cross_entropy_spec(96, 32, "f32")
    assert ops.cross_entropy_spec(96, "f32", "i64") in lt.kernel_specs(tiny_config("llama"),
                                                                        "f32")
    monkeypatch.setenv("LIGER_OPS_CPU_REFERENCE", "1")
    ids = tokens(2)
    ref, model = tiny_model("llama", 6), tiny_model("llama", 6)
    lt.apply_liger_kernel(model, rope=False, rms_norm=False, swiglu=False)
    model.train()
    ref.train()
    with pytest.warns(lt.LigerFallbackWarning, match="takes bf16 or f16 .* for f32 use liger.ops.cross_entropy on the logits"):
        out = model(input_ids=ids, labels=ids)
    assert torch.equal(out.loss, ref(input_ids=ids, labels=ids).loss)


def test_an_lm_head_of_odd_size_falls_back(monkeypatch):
    """The fused loss's matmul kernels move 16-byte rows: an lm_head whose
    vocabulary is not a multiple of 8 (GPT-2's 50257, say) keeps the
    model's loss, with one warning, and kernel_specs leaves its spec out."""
    with pytest.raises(LigerError, match=r"multiples of 8 .* got \[97, 32\]"):
        ops.fused_linear_cross_entropy_spec(97, 32, "bf16")
    specs = lt.kernel_specs(tiny_config("llama", vocab_size=97), "bf16")
    assert not [s for s in specs if s.op == "fused_linear_cross_entropy"]
    assert ops.cross_entropy_spec(97, "bf16", "i64") in specs
    monkeypatch.setenv("LIGER_OPS_CPU_REFERENCE", "1")
    ids = tokens(2, vocab=97)
    ref = tiny_model("llama", 6, BF16, vocab_size=97)
    model = tiny_model("llama", 6, BF16, vocab_size=97)
    lt.apply_liger_kernel(model, rope=False, rms_norm=False, swiglu=False)
    model.train()
    ref.train()
    with pytest.warns(lt.LigerFallbackWarning, match=r"got \[97, 32\]"):
        out = model(input_ids=ids, labels=ids)
    assert torch.equal(out.loss, ref(input_ids=ids, labels=ids).loss)


def test_reference_off_is_a_clear_error_on_cpu():
    with pytest.raises(LigerError, match="LIGER_OPS_CPU_REFERENCE=1"):
        ops.rms_norm(torch.randn(2, 8), torch.ones(8))
    assert not ops.cpu_reference_enabled()
    os.environ.pop("LIGER_OPS_CPU_REFERENCE", None)


@needs_runner
def test_hidden_states_off_the_lm_heads_device_fall_back(monkeypatch):
    """A model split over devices (device_map) whose last hidden states
    are not where the lm_head is: the loss is the model's, with a warning
    (the fused loss takes one device)."""
    monkeypatch.setenv("LIGER_OPS_CPU_REFERENCE", "1")
    ids = tokens(4)
    ref, model = tiny_model("llama", 9, BF16), tiny_model("llama", 9, BF16)
    lt.apply_liger_kernel(model, rope=False, rms_norm=False, swiglu=False)
    model.train()
    ref.train()
    decoder = model.model.forward
    calls = []

    def elsewhere(*args, **kwargs):
        out = decoder(*args, **kwargs)
        calls.append(1)
        if len(calls) == 1:  # the first run: its hidden states on another device
            out.last_hidden_state = out.last_hidden_state.to("meta")
        return out
    model.model.forward = elsewhere
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        loss = model(input_ids=ids, labels=ids).loss
    assert _fallback_warnings(caught) == [
        "liger: LlamaForCausalLM's loss: hidden states in torch.bfloat16 on meta and lm_head "
        "in torch.bfloat16 on cpu: the loss is computed as the model does (liger's fused "
        "linear cross-entropy takes both in bf16 or f16, on one device)"]
    assert torch.equal(loss, ref(input_ids=ids, labels=ids).loss)


@needs_runner
def test_rope_falls_back_on_any_shape_liger_rope_refuses(monkeypatch):
    """The patched apply_rotary_pos_emb decides by liger.ops.rope's own
    rules (one function): k of another batch, or tables of another
    sequence length, fall back with its message instead of raising."""
    monkeypatch.setenv("LIGER_OPS_CPU_REFERENCE", "1")
    lt.apply_liger_kernel_to_llama(rms_norm=False, swiglu=False,
                                   fused_linear_cross_entropy=False)
    from transformers.models.llama import modeling_llama as ml
    g = torch.Generator().manual_seed(0)
    q, k = torch.randn(2, 4, 3, 8, generator=g), torch.randn(1, 2, 3, 8, generator=g)
    angle = torch.rand(1, 3, 8, generator=g)
    original = lt._ORIGINALS[(ml, "apply_rotary_pos_emb")]
    with pytest.warns(lt.LigerFallbackWarning, match="^liger: apply_rotary_pos_emb runs the "
                      r"original: liger.ops.rope: q and k must be \[B, Hq, T, D\] and \[B, "
                      r"Hk, T, D\], got \[2, 4, 3, 8\] and \[1, 2, 3, 8\]$"):
        got = ml.apply_rotary_pos_emb(q, k, angle.cos(), angle.sin())
    expected = original(q, k, angle.cos(), angle.sin())
    assert all(torch.equal(a, b) for a, b in zip(got, expected))
    with pytest.raises(LigerError, match="q and k must be"):
        ops.rope(q, k, angle.cos(), angle.sin())
