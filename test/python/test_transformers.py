"""liger.transformers on the CPU: the patching (classes and models), the
fallbacks and their warnings, the kernels chosen by a model's config, and
the patched models' numerics through the reference lowering
(LIGER_OPS_CPU_REFERENCE=1) against the same models unpatched: tiny
configurations with random weights, nothing downloaded."""
import functools
import inspect
import linecache
import os
import types
import warnings

import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")
import torch.nn.functional as F  # noqa: E402

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


# Each family's tiny configuration beyond the common one: the sizes its
# parts take, and what makes its own parts matter (a softcap that bends the
# logits, Granite's multipliers, the MoE router's loss, a dense layer beside
# the experts).
TINY = {
    "llama": {}, "mistral": {}, "qwen2": {}, "phi3": {}, "olmo2": {}, "smollm3": {},
    "qwen3": dict(head_dim=8),
    "gemma": dict(head_dim=8, num_key_value_heads=1),  # multi-query, as Gemma 2B
    "gemma2": dict(head_dim=8, query_pre_attn_scalar=8, final_logit_softcapping=2.0,
                   sliding_window=4),
    "gemma3_text": dict(head_dim=8, query_pre_attn_scalar=8, final_logit_softcapping=2.0,
                        sliding_window=4),
    "granite": dict(embedding_multiplier=12.0, residual_multiplier=0.22,
                    attention_multiplier=0.125, logits_scaling=6.0),
    "glm4": dict(head_dim=8),  # RoPE over half the head, in interleaved pairs
    "mixtral": dict(num_local_experts=4, num_experts_per_tok=2, output_router_logits=True,
                    router_aux_loss_coef=0.1),
    "qwen3_moe": dict(head_dim=8, num_experts=4, num_experts_per_tok=2, moe_intermediate_size=48,
                      mlp_only_layers=[1], output_router_logits=True, router_aux_loss_coef=0.1),
    # Layer 0 dense (intermediate_size_mlp), layer 1 MoE (intermediate_size).
    "llama4_text": dict(head_dim=8, intermediate_size=48, intermediate_size_mlp=64,
                        num_local_experts=4, num_experts_per_tok=1, interleave_moe_layer_step=2),
}


def tiny_config(family, **overrides):
    """Two decoder layers, hidden 32, 4 query heads of 8 over 2 KV heads,
    vocabulary 96, no special tokens; TINY[family] beside."""
    common = dict(hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                  num_attention_heads=4, num_key_value_heads=2, vocab_size=96,
                  max_position_embeddings=64, rms_norm_eps=1e-5, pad_token_id=None,
                  bos_token_id=None, eos_token_id=None)
    common.update(TINY[family])
    common.update(overrides)
    config = transformers.AutoConfig.for_model(family, **common)
    config._attn_implementation = "eager"
    return config


def tiny_model(family, seed, dtype=F32, **overrides):
    config = tiny_config(family, **overrides)
    torch.manual_seed(seed)
    model = transformers.AutoModelForCausalLM.from_config(config).to(dtype)
    # RMSNorm weights start at 1 (Gemma's at 0: the scale is 1 + w): make
    # them matter.
    start = 1.0 - lt._FAMILIES[family].offset
    with torch.no_grad():
        for m in model.modules():
            if type(m).__name__ in lt._FAMILIES[family].norms:
                m.weight.normal_(start, 0.1)
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
    message = ("liger.transformers patches gemma, gemma2, gemma3_text, glm4, granite, llama, "
               "llama4_text, mistral, mixtral, olmo2, phi3, qwen2, qwen3, qwen3_moe, smollm3, "
               "not model_type 'bert'")
    with pytest.raises(LigerError) as e:
        lt.kernel_specs(Config())
    assert str(e.value) == message

    class Model(torch.nn.Module):
        config = Config()
    with pytest.raises(LigerError) as e:
        lt.apply_liger_kernel(Model())
    assert str(e.value) == message


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
     (96, 32, "torch.bfloat16", "torch.int64", -100, 0.0, "mean", None, 0.0, False, False,
      False),
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


def test_fuse_norm_linear_needs_a_model():
    with pytest.warns(lt.LigerFallbackWarning) as caught:
        lt.apply_liger_kernel_to_qwen2(fuse_norm_linear=True)
    assert [str(w.message) for w in caught] == [
        "liger: fuse_norm_linear=True: a class patch cannot tie a norm to the projections of "
        "its layer: give the model (model=...) to fuse them"]


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


def test_precompile_command_compiles_for_each_target_it_is_given(tmp_path, monkeypatch,
                                                                 capsys):
    """--target, repeated, compiles the config's kernels for each target
    into the one directory (liger.ops precompile puts them side by side:
    test_ops.py); none means sm_90a; a target liger has no kernels for is
    refused, naming those it has, before anything compiles."""
    tiny_config("llama").save_pretrained(tmp_path / "model")
    out, model = str(tmp_path / "bundles"), str(tmp_path / "model")
    calls = []

    def precompile(out_dir, config, dtype, target, fused_mlp=False, fuse_qkv_rope=False,
                   attention=False):
        flags = dict(fused_mlp=fused_mlp, fuse_qkv_rope=fuse_qkv_rope, attention=attention)
        calls.append((out_dir, config.model_type, dtype, target) + tuple(
            name for name, on in flags.items() if on))
        return ["%s/%s" % (out_dir, target)]

    monkeypatch.setattr(lt, "precompile", precompile)
    assert lt.main(["precompile", out, model, "--dtype", "f32", "--target", "sm_86",
                    "--target", "sm_90a", "--target", "sm_86"]) == 0
    assert calls == [(out, "llama", "f32", "sm_86"), (out, "llama", "f32", "sm_90a")]
    assert capsys.readouterr().out == "%s (sm_86) -> %s/sm_86\n%s (sm_90a) -> %s/sm_90a\n" % (
        model, out, model, out)
    calls.clear()
    assert lt.main(["precompile", out, model]) == 0
    assert calls == [(out, "llama", None, "sm_90a")]
    calls.clear()
    assert lt.main(["precompile", out, model, "--fused-mlp"]) == 0
    assert calls == [(out, "llama", None, "sm_90a", "fused_mlp")]
    calls.clear()
    assert lt.main(["precompile", out, model, "--fuse-qkv-rope", "--fused-mlp"]) == 0
    assert calls == [(out, "llama", None, "sm_90a", "fused_mlp", "fuse_qkv_rope")]
    calls.clear()
    assert lt.main(["precompile", out, model, "--attention"]) == 0
    assert calls == [(out, "llama", None, "sm_90a", "attention")]
    calls.clear()
    with pytest.raises(SystemExit) as exit:
        lt.main(["precompile", out, model, "--target", "sm_80", "--target", "sm_75"])
    assert exit.value.code == 2
    assert capsys.readouterr().err.endswith(
        "error: argument --target: invalid choice: 'sm_75' (choose from 'sm_90a', 'sm_80', "
        "'sm_86')\n")
    assert calls == []


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


# Every family in f32 (the loss on the logits); bf16 (the fused linear
# cross-entropy) where the family's loss or MLP differs: Gemma 2's softcap,
# Granite's logits scaling, Mixtral's router loss, Llama 4's experts.
CASES = [(f, "f32") for f in TINY] + [
    (f, "bf16") for f in ("llama", "gemma", "gemma2", "granite", "mixtral", "llama4_text")]
# What a family's patched model leaves as it is, warned: at patching, and
# in its forward; nothing else may fall back.
PATCH_WARNINGS = {
    "llama4_text": [
        "liger: rope=True: Llama 4's apply_rotary_emb rotates interleaved pairs by complex "
        "freqs_cis; liger.ops.rope rotates halves by cos/sin tables: the model's RoPE stays as "
        "it is",
        "liger: rms_norm=True: Llama4TextL2Norm stays as it is: Llama 4's q/k norm has no "
        "weight (liger.ops.rms_norm takes one)"],
}
FORWARD_WARNINGS = {
    # OLMo 2 keeps its RoPE tables in f32 whatever the model's dtype.
    ("olmo2", "bf16"): [
        "liger: apply_rotary_pos_emb runs the original: liger.ops.rope: cos must have the dtype "
        "of q (torch.bfloat16), got torch.float32"],
}


def _loss_flags(dtype):
    """f32: the loss on the logits; bf16: the fused linear cross-entropy."""
    return dict(cross_entropy=True, fused_linear_cross_entropy=False) if dtype == "f32" \
        else dict(cross_entropy=False, fused_linear_cross_entropy=True)


def _record_loaded(monkeypatch):
    """The specs whose kernels the patched forwards load, in a list."""
    loaded = []
    for name in ("kernels", "loss_plan_kernels", "matmul_kernel", "matmul_kernels",
                 "linear_rope_kernels", "attention_kernels"):
        monkeypatch.setattr(bundles, name, lambda spec, load=getattr(bundles, name): (
            loaded.append(spec), load(spec))[1])
    return loaded


def _train_step(model):
    """One training step on fixed tokens, one label ignored: the output,
    the loss and every parameter's gradient."""
    ids = tokens(7)
    labels = ids.clone()
    labels[0, 2] = -100
    model.train()
    model.zero_grad(set_to_none=True)
    out = model(input_ids=ids, labels=labels)
    out.loss.backward()
    return out, out.loss.detach(), _grads(model)


def _assert_trains_as(model, reference, family, dtype, loaded, fused_mlp=False,
                      forward_warnings=None, fuse_qkv_rope=False, attention=False):
    """One training step of the patched `model` against `reference` (the
    unpatched model's _train_step): the fallback warnings are
    FORWARD_WARNINGS', the loss (and an MoE router's loss) and every
    parameter's gradient agree, and every kernel loaded is one
    kernel_specs(config) lists (what precompile compiles)."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        out, loss, grads = _train_step(model)
    assert _fallback_warnings(caught) == (FORWARD_WARNINGS.get((family, dtype), [])
                                          if forward_warnings is None else forward_warnings)
    ref_out, ref_loss, ref_grads = reference
    # bf16: both round differently (the reference in f32 inside each op,
    # PyTorch between its ops); one step's gradients agree to bf16's few
    # bits.
    loss_tol, grad_tol = (1e-5, 1e-4) if dtype == "f32" else (1e-2, 6e-2)
    assert torch.allclose(loss.float(), ref_loss.float(), rtol=loss_tol), (loss, ref_loss)
    assert type(out) is type(ref_out)
    if ref_out.get("aux_loss") is not None:  # the MoE router's loss, in the loss too
        assert torch.allclose(out.aux_loss.float(), ref_out.aux_loss.float(), rtol=loss_tol)
    assert grads.keys() == ref_grads.keys()
    for name, g in grads.items():
        r = ref_grads[name].float()
        err = ((g.float() - r).abs().max() / r.abs().max().clamp_min(1e-30)).item()
        assert err < grad_tol, (name, err)
    listed = lt.kernel_specs(model.config, dtype, fused_mlp, fuse_qkv_rope=fuse_qkv_rope,
                             attention=attention)
    assert loaded and not [s for s in loaded if s.with_target(ops.TARGET) not in listed], (
        loaded, listed)


@needs_runner
@pytest.mark.parametrize("family,dtype", CASES)
def test_patched_model_matches_the_original_through_the_reference(family, dtype, monkeypatch):
    """A model patched by apply_liger_kernel (its model_type's entry point),
    its liger functions run by the reference lowering, trains one step as
    the original: f32 with the loss on the logits (cross_entropy=True),
    bf16 with the fused linear cross-entropy (its kernels take bf16/f16)."""
    monkeypatch.setenv("LIGER_OPS_CPU_REFERENCE", "1")
    loaded = _record_loaded(monkeypatch)
    torch_dtype = torch.bfloat16 if dtype == "bf16" else F32
    ref, model = tiny_model(family, 11, torch_dtype), tiny_model(family, 11, torch_dtype)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert lt.apply_liger_kernel(model, **_loss_flags(dtype)) > 0
    assert _fallback_warnings(caught) == PATCH_WARNINGS.get(family, [])
    _assert_trains_as(model, _train_step(ref), family, dtype, loaded)


# fused_mlp=True: Llama's MLP, a fused gate_up_proj (Phi-3), GeGLU (Gemma), a
# dense MLP beside MoE experts (Qwen3-MoE: its experts warned, left to the
# gated op).
FUSED_MLP_CASES = {"llama": [], "phi3": [], "gemma": [], "qwen3_moe": [
    "liger: fused_mlp=True: Qwen3MoeExperts run liger.ops.swiglu in each expert "
    "(liger.ops.gated_mlp computes one dense MLP)"]}


@needs_runner
@pytest.mark.parametrize("family", sorted(FUSED_MLP_CASES))
def test_fused_mlp_trains_as_the_original(family, monkeypatch):
    """fused_mlp=True: every dense gated MLP is one liger.ops.gated_mlp
    (the gate/up kernel forward, the dh + activation-gradient kernel
    backward) and the model trains one step as the original, in bf16."""
    monkeypatch.setenv("LIGER_OPS_CPU_REFERENCE", "1")
    loaded = _record_loaded(monkeypatch)
    ref, model = tiny_model(family, 13, torch.bfloat16), tiny_model(family, 13, torch.bfloat16)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        lt.apply_liger_kernel(model, fused_mlp=True)
    assert _fallback_warnings(caught) == FUSED_MLP_CASES[family]
    fam = lt._FAMILIES[family]
    dense = [m for m in model.modules() for name, kind in fam.mlps
             if type(m).__name__ == name and kind in ("gate_up", "fused")]
    assert dense and all(vars(m)["forward"].__func__ in (
        lt._gated_mlp_forward, lt._gated_mlp_split_forward) for m in dense)
    _assert_trains_as(model, _train_step(ref), family, "bf16", loaded, fused_mlp=True)
    assert any(s.op == "gated_mlp" for s in loaded), loaded


@needs_runner
def test_fused_mlp_class_patch_and_revert(monkeypatch):
    """A class patch with fused_mlp=True replaces the MLP class's forward
    (a model built afterwards trains as the original); revert restores it."""
    monkeypatch.setenv("LIGER_OPS_CPU_REFERENCE", "1")
    loaded = _record_loaded(monkeypatch)
    from transformers.models.llama import modeling_llama
    original = modeling_llama.LlamaMLP.forward
    reference = _train_step(tiny_model("llama", 14, torch.bfloat16))
    assert lt.apply_liger_kernel_to_llama(fused_mlp=True) is None
    assert modeling_llama.LlamaMLP.forward is lt._gated_mlp_forward
    _assert_trains_as(tiny_model("llama", 14, torch.bfloat16), reference, "llama", "bf16",
                      loaded, fused_mlp=True)
    lt.revert()
    assert modeling_llama.LlamaMLP.forward is original


FUSED_MLP_PREFIX = "liger: LlamaMLP runs liger.ops.swiglu and its projections apart"


@needs_runner
@pytest.mark.parametrize("case,dtype,overrides,message", [
    ("bias", torch.bfloat16, dict(mlp_bias=True), FUSED_MLP_PREFIX + " (fused_mlp=True): "
     "liger.ops.gated_mlp takes bias-free torch.nn.Linear projections, gate_proj is a "
     "torch.nn.Linear with a bias"),
    ("f32", F32, {}, FUSED_MLP_PREFIX + ": liger.ops.gated_mlp takes bf16 or f16 (its kernels "
     "are the matmul template's: wgmma and mma.sync), got f32"),
    ("unaligned", torch.bfloat16, dict(intermediate_size=60), FUSED_MLP_PREFIX + ": "
     "intermediate must be a multiple of 8 (the matmul template's column tiles), got 60"),
])
def test_an_mlp_fused_mlp_cannot_take_runs_the_gated_op_warned_once(
        case, dtype, overrides, message, monkeypatch):
    """An MLP liger.ops.gated_mlp refuses (biases, f32, sizes the template
    does not take) runs liger.ops.swiglu between its own projections, with
    one warning naming the reason, and still trains as the original."""
    monkeypatch.setenv("LIGER_OPS_CPU_REFERENCE", "1")
    loaded = _record_loaded(monkeypatch)
    ref, model = (tiny_model("llama", 15, dtype, **overrides) for _ in range(2))
    lt.apply_liger_kernel(model, fused_mlp=True, **_loss_flags("f32" if dtype == F32 else
                                                                 "bf16"))
    _assert_trains_as(model, _train_step(ref), "llama", "f32" if dtype == F32 else "bf16",
                      loaded, fused_mlp=True, forward_warnings=[message])
    assert not [s for s in loaded if s.op == "gated_mlp"]
    assert [s for s in loaded if s.op == "swiglu"]


@needs_runner
def test_fused_mlp_leaves_peft_lora_projections_to_the_gated_op(monkeypatch):
    """A PEFT LoRA layer on gate_proj: the MLP runs its projections (the
    LoRA layer's own forward) around liger.ops.swiglu, warned once."""
    peft = pytest.importorskip("peft")
    monkeypatch.setenv("LIGER_OPS_CPU_REFERENCE", "1")
    model = peft.get_peft_model(tiny_model("llama", 16, torch.bfloat16), peft.LoraConfig(
        r=16, lora_alpha=16, target_modules=["gate_proj"]), autocast_adapter_dtype=False)
    lt.apply_liger_kernel(model.get_base_model(), fused_mlp=True)
    mlp = model.get_base_model().model.layers[0].mlp
    x = torch.randn(3, 32, dtype=torch.bfloat16)
    calls = []
    monkeypatch.setattr(lt.ops, "swiglu", lambda g, u: (calls.append(g.shape), g * u)[1])
    with pytest.warns(lt.LigerFallbackWarning) as caught:
        mlp(x)
    assert [str(w.message) for w in caught] == [
        FUSED_MLP_PREFIX + " (fused_mlp=True): liger.ops.gated_mlp takes bias-free "
        "torch.nn.Linear projections, gate_proj is peft.tuners.lora.layer.Linear"]
    assert calls == [(3, 64)]


# fuse_norm_linear=True: every family; what it leaves apart, warned at
# patching (OLMo 2 normalises after attention and MLP; an MoE layer's norm
# feeds its router and experts).
_APART = "liger: fuse_norm_linear=True: %s.post_attention_layernorm stays apart: its layer has " \
    "no mlp.gate_proj/mlp.up_proj or mlp.gate_up_proj or feed_forward.gate_proj/feed_forward." \
    "up_proj"
NORM_LINEAR_WARNINGS = {
    "olmo2": ["liger: fuse_norm_linear=True: Olmo2ForCausalLM's decoder layers normalise after "
              "attention and MLP (no norm is read by a projection): nothing to fuse"],
    "mixtral": [_APART % "MixtralDecoderLayer"],
    "qwen3_moe": [_APART % "Qwen3MoeDecoderLayer"],
    "llama4_text": PATCH_WARNINGS["llama4_text"] + [_APART % "Llama4TextDecoderLayer"],
}
# The norms tied per family (2 layers): both of each layer's, one where an
# MoE layer's is apart (Qwen3-MoE's layer 1 is dense, Llama 4's layer 0).
NORMS_TIED = dict({f: 4 for f in TINY}, olmo2=0, mixtral=2, qwen3_moe=3, llama4_text=3)


def _tied(model):
    return [m for m in model.modules() if getattr(m, "_liger_consumers", None)]


@needs_runner
@pytest.mark.parametrize("family,dtype", [(f, "f32") for f in TINY] + [
    (f, "bf16") for f in ("llama", "qwen2", "gemma2", "phi3")])
def test_fuse_norm_linear_trains_as_the_original(family, dtype, monkeypatch):
    """fuse_norm_linear=True: each decoder layer's norm and the projections
    that read it (q/k/v or Phi-3's qkv_proj; gate/up, gate_up_proj, Gemma's
    pre-feedforward norm) are one liger.ops.rms_norm_linear per step, and
    the model trains two steps as the original (the projections handed
    their results each time: nothing unties)."""
    monkeypatch.setenv("LIGER_OPS_CPU_REFERENCE", "1")
    loaded = _record_loaded(monkeypatch)
    torch_dtype = BF16 if dtype == "bf16" else F32
    ref, model = tiny_model(family, 19, torch_dtype), tiny_model(family, 19, torch_dtype)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        lt.apply_liger_kernel(model, fuse_norm_linear=True, **_loss_flags(dtype))
    assert _fallback_warnings(caught) == NORM_LINEAR_WARNINGS.get(family, [])
    assert len(_tied(model)) == NORMS_TIED[family]
    calls = []
    fused = lt.ops.rms_norm_linear
    monkeypatch.setattr(lt.ops, "rms_norm_linear", lambda *a: calls.append(len(a[2])) or fused(*a))
    for _ in range(2):
        _assert_trains_as(model, _train_step(ref), family, dtype, loaded)
    assert len(calls) == 2 * NORMS_TIED[family] and len(_tied(model)) == NORMS_TIED[family]
    assert not [m for m in model.modules() if "_liger_ready" in vars(m)]


@needs_runner
def test_rms_norm_linear_matches_float64(monkeypatch):
    """liger.ops.rms_norm_linear against the norm and projections in
    float64: outputs, and the gradients of every input for the
    projections' gradients and xn's own (another reader), with biases and
    without; a projection whose output is not read gets no gradient."""
    monkeypatch.setenv("LIGER_OPS_CPU_REFERENCE", "1")
    g = torch.Generator().manual_seed(3)
    for biased in (False, True):
        x = torch.randn(3, 7, 48, generator=g).requires_grad_()
        w = torch.randn(48, generator=g).requires_grad_()
        ws = [torch.randn(n, 48, generator=g).requires_grad_() for n in (32, 16, 24)]
        bs = [torch.randn(n, generator=g).requires_grad_() for n in (32, 16, 24)] \
            if biased else None
        xn, ys = ops.rms_norm_linear(x, w, ws, bs, eps=1e-5, offset=1.0, casting="gemma")
        x64 = x.double()
        want_xn = x64 * torch.rsqrt(x64.pow(2).mean(-1, keepdim=True) + 1e-5) * \
            (1.0 + w.double())
        want_ys = [F.linear(want_xn, p.double(), None if bs is None else b.double())
                   for p, b in zip(ws, bs or [None] * 3)]
        for got, want in zip([xn] + ys, [want_xn] + want_ys):
            assert torch.allclose(got.double(), want, rtol=1e-5, atol=1e-5)
        inputs = [x, w] + ws + (bs or [])
        seeds = [torch.randn(t.shape, generator=g) for t in [xn] + ys]
        # The second projection's output unread (None in its place).
        outs = [xn, ys[0], ys[2]]
        grads = [seeds[0], seeds[1], seeds[3]]
        got = torch.autograd.grad(outs, inputs, grads, allow_unused=True)
        want = torch.autograd.grad([want_xn, want_ys[0], want_ys[2]], inputs,
                                   [t.double() for t in grads], allow_unused=True)
        for i, (a, b) in enumerate(zip(got, want)):
            if b is None:
                assert a is None, i
            else:
                assert ((a.double() - b).norm() / b.norm()).item() < 1e-5, i


@pytest.mark.parametrize("weights,biases,message", [
    ([], None, "weights must be a list of one projection weight [N, H] or more, got an empty "
               "list"),
    ([torch.randn(8, 16)], None, "weights[0] must be [N, H] with H = 32 (the features of x), "
                                 "got [8, 16]"),
    ([torch.randn(8, 32), torch.randn(4, 32, dtype=torch.float64)], None,
     "weights[1] must have the dtype of x (torch.float32), got torch.float64"),
    ([torch.randn(8, 32)], [torch.randn(8), torch.randn(8)],
     "biases must be None or a list of one bias per weight (1), got 2"),
    ([torch.randn(8, 32)], [torch.randn(4)], "biases[0] must be [N] = [8] (weights[0]'s N), got "
                                             "[4]"),
    ([torch.randn(8, 32), torch.randn(4, 32)], [torch.randn(8), None],
     "biases must be one per weight or none, got biases[1] None beside 1 others")],
    ids=["none", "width", "dtype", "bias_count", "bias_shape", "some_biases"])
def test_rms_norm_linear_refuses_projections_it_cannot_take(weights, biases, message,
                                                            monkeypatch):
    monkeypatch.setenv("LIGER_OPS_CPU_REFERENCE", "1")
    with pytest.raises((lt.LigerError, TypeError, ValueError)) as e:
        ops.rms_norm_linear(torch.randn(2, 32), torch.ones(32), weights, biases)
    assert str(e.value) == "liger.ops.rms_norm_linear: " + message


@needs_runner
def test_fuse_norm_linear_unties_a_norm_its_layer_reads_otherwise(monkeypatch):
    """A projection called with another input than its norm's output (a
    layer that transforms it first), or not called before the norm runs
    again: the norm is untied, warned once, and runs as rms_norm=True
    does; every result stays the original's."""
    monkeypatch.setenv("LIGER_OPS_CPU_REFERENCE", "1")
    model = tiny_model("llama", 20)
    lt.apply_liger_kernel(model, fuse_norm_linear=True, rope=False, swiglu=False,
                          fused_linear_cross_entropy=False)
    reference = tiny_model("llama", 20)
    layer, ref_layer = model.model.layers[0], reference.model.layers[0]
    x = torch.randn(2, 5, 32)
    with pytest.warns(lt.LigerFallbackWarning) as caught:
        h = layer.post_attention_layernorm(x)
        gate = layer.mlp.gate_proj(h * 2)  # another input
    assert [str(w.message) for w in caught] == [
        "liger: fuse_norm_linear=True: LlamaDecoderLayer.post_attention_layernorm runs apart "
        "from its projections: a projection was called with another input than its output"]
    assert torch.allclose(gate, ref_layer.mlp.gate_proj(
        ref_layer.post_attention_layernorm(x) * 2), atol=1e-6)
    assert not layer.post_attention_layernorm._liger_consumers
    assert not [m for m in model.modules() if "_liger_ready" in vars(m)]
    with pytest.warns(lt.LigerFallbackWarning) as caught:
        layer.input_layernorm(x)  # q/k/v never read it
        h = layer.input_layernorm(x)
    assert [str(w.message) for w in caught] == [
        "liger: fuse_norm_linear=True: LlamaDecoderLayer.input_layernorm runs apart from its "
        "projections: a projection was not called with its output before it ran again"]
    assert torch.allclose(layer.self_attn.q_proj(h), ref_layer.self_attn.q_proj(
        ref_layer.input_layernorm(x)), atol=1e-6)


@needs_runner
def test_fuse_norm_linear_under_autocast_hooks_and_in_place_changes(monkeypatch):
    """What the op cannot see runs the norm apart, warned, with the
    original's results: autocast (liger.ops.rms_norm_linear computes in
    x's dtype, autocast off inside it), a projection's forward pre-hook,
    a norm output changed in place by a hook before a projection reads it
    (the projection's result would be of the old one: the norm unties)."""
    monkeypatch.setenv("LIGER_OPS_CPU_REFERENCE", "1")
    x = torch.randn(2, 5, 32)
    model, reference = tiny_model("llama", 23), tiny_model("llama", 23)
    lt.apply_liger_kernel(model, fuse_norm_linear=True, rope=False, swiglu=False,
                          fused_linear_cross_entropy=False)
    layer, ref_layer = model.model.layers[0], reference.model.layers[0]
    with torch.autocast("cpu", dtype=BF16):
        xn, ys = ops.rms_norm_linear(x, layer.input_layernorm.weight,
                                     [layer.self_attn.q_proj.weight], eps=1e-5)
        assert xn.dtype == ys[0].dtype == F32
        with pytest.warns(lt.LigerFallbackWarning) as caught:
            h = layer.input_layernorm(x)
            q = layer.self_attn.q_proj(h)
        want = ref_layer.self_attn.q_proj(ref_layer.input_layernorm(x))
    assert [str(w.message) for w in caught] == [
        "liger: fuse_norm_linear=True: LlamaDecoderLayer.input_layernorm runs apart from its "
        "projections: autocast is on (liger.ops.rms_norm_linear "
        "computes in the input's dtype)"]
    assert q.dtype == want.dtype == BF16 and torch.allclose(q.float(), want.float(), atol=1e-2)
    handle = layer.self_attn.k_proj.register_forward_pre_hook(lambda m, args: (args[0] * 2,))
    with pytest.warns(lt.LigerFallbackWarning) as caught:
        k = layer.self_attn.k_proj(layer.input_layernorm(x))
    handle.remove()
    assert [str(w.message) for w in caught] == [
        "liger: fuse_norm_linear=True: LlamaDecoderLayer.input_layernorm runs apart from its "
        "projections: a projection has a forward pre-hook (it may change its input or "
        "weight)"]
    assert torch.allclose(k, ref_layer.self_attn.k_proj(ref_layer.input_layernorm(x) * 2),
                          atol=1e-5)
    norm = layer.post_attention_layernorm
    handle = norm.register_forward_hook(lambda m, args, out: out.mul_(3))
    with torch.no_grad(), pytest.warns(lt.LigerFallbackWarning) as caught:
        up = layer.mlp.up_proj(norm(x))
    handle.remove()
    assert [str(w.message) for w in caught] == [
        "liger: fuse_norm_linear=True: LlamaDecoderLayer.post_attention_layernorm runs apart "
        "from its projections: its output was changed in place before a projection read it"]
    with torch.no_grad():
        want = ref_layer.mlp.up_proj(ref_layer.post_attention_layernorm(x) * 3)
    assert torch.allclose(up, want, atol=1e-5) and not norm._liger_consumers


@needs_runner
def test_fuse_norm_linear_leaves_what_other_flags_compute(monkeypatch):
    """fused_mlp=True computes the MLP's projections, fuse_qkv_rope=True
    the attention's q and k, lora=True's PEFT layers are no
    torch.nn.Linear: those norms stay apart, warned, and the model trains
    as the original."""
    peft = pytest.importorskip("peft")
    monkeypatch.setenv("LIGER_OPS_CPU_REFERENCE", "1")
    model = tiny_model("llama", 21, BF16, head_dim=16)
    ref = tiny_model("llama", 21, BF16, head_dim=16)
    with pytest.warns(lt.LigerFallbackWarning) as caught:
        lt.apply_liger_kernel(model, fuse_norm_linear=True, fused_mlp=True, fuse_qkv_rope=True)
    assert [str(w.message) for w in caught] == [
        "liger: fuse_norm_linear=True: LlamaDecoderLayer.input_layernorm stays apart from its "
        "projections: fuse_qkv_rope=True computes them",
        "liger: fuse_norm_linear=True: LlamaDecoderLayer.post_attention_layernorm stays apart "
        "from its projections: fused_mlp=True computes them"]
    assert not _tied(model)
    loaded = _record_loaded(monkeypatch)
    _assert_trains_as(model, _train_step(ref), "llama", "bf16", loaded, fused_mlp=True,
                      fuse_qkv_rope=True)
    lt._WARNED.clear()
    peft_model = peft.get_peft_model(tiny_model("llama", 22, BF16), peft.LoraConfig(
        r=16, lora_alpha=16, target_modules=["q_proj"]), autocast_adapter_dtype=False)
    with pytest.warns(lt.LigerFallbackWarning) as caught:
        lt.apply_liger_kernel(peft_model.get_base_model(), fuse_norm_linear=True)
    assert [str(w.message) for w in caught] == [
        "liger: fuse_norm_linear=True: LlamaDecoderLayer.input_layernorm stays apart: "
        "self_attn.q_proj is peft.tuners.lora.layer.Linear, not a torch.nn.Linear"]
    assert len(_tied(peft_model)) == 2  # the MLPs' norms


# fuse_qkv_rope=True: head_dim 16 (the kernel's multiple); Llama, Qwen2's q/k
# biases, Gemma's multi-query attention and its own RMSNorm, Granite's
# attention multiplier (the attention function's scaling: Hugging Face's).
QK_ROPE_FAMILIES = ("llama", "qwen2", "gemma", "granite")


def _qk_rope_patched(module):
    """Whether `module`'s forward is fuse_qkv_rope's rewrite of its class's."""
    forward = vars(module).get("forward")
    forward = getattr(forward, "__func__", forward) or type(module).forward
    # (Under its decorators: transformers' deprecate_kwarg wraps it.)
    return inspect.unwrap(forward).__code__.co_filename.startswith("<liger fuse_qkv_rope: ")


@needs_runner
@pytest.mark.parametrize("family", QK_ROPE_FAMILIES)
def test_fuse_qkv_rope_trains_as_the_original(family, monkeypatch):
    """fuse_qkv_rope=True: each attention forms q and k with one
    liger.ops.linear_rope (the q/k projections with RoPE in the kernel's
    epilogue; the backward's RoPE gradient kernel) and the model trains one
    step as the original, in bf16, warning of nothing."""
    monkeypatch.setenv("LIGER_OPS_CPU_REFERENCE", "1")
    loaded = _record_loaded(monkeypatch)
    ref, model = (tiny_model(family, 17, BF16, head_dim=16) for _ in range(2))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        lt.apply_liger_kernel(model, fuse_qkv_rope=True)
    assert _fallback_warnings(caught) == []
    attention = [m for m in model.modules() if type(m).__name__.endswith("Attention")]
    assert len(attention) == 2 and all(_qk_rope_patched(m) for m in attention)
    _assert_trains_as(model, _train_step(ref), family, "bf16", loaded, fuse_qkv_rope=True)
    qk = {s.with_target(ops.TARGET) for s in loaded if s.op == "linear_rope"}
    heads, kv = (4, 1) if family == "gemma" else (4, 2)
    assert qk == {ops.linear_rope_spec(32, heads, kv, 16, "bf16", family == "qwen2")}
    # The backward ran RoPE's gradient kernel (liger.ops.rope's pair).
    assert ops.rope_spec(heads, kv, 16, "bf16") in {s.with_target(ops.TARGET) for s in loaded}


@needs_runner
def test_fuse_qkv_rope_class_patch_and_revert(monkeypatch):
    """A class patch replaces the attention class's forward with the rewrite
    of Hugging Face's own (a model built afterwards trains as the original);
    revert restores it."""
    monkeypatch.setenv("LIGER_OPS_CPU_REFERENCE", "1")
    loaded = _record_loaded(monkeypatch)
    from transformers.models.llama import modeling_llama
    original = modeling_llama.LlamaAttention.forward
    reference = _train_step(tiny_model("llama", 18, BF16, head_dim=16))
    assert lt.apply_liger_kernel_to_llama(fuse_qkv_rope=True) is None
    model = tiny_model("llama", 18, BF16, head_dim=16)
    assert _qk_rope_patched(model.model.layers[0].self_attn)
    _assert_trains_as(model, reference, "llama", "bf16", loaded, fuse_qkv_rope=True)
    assert [s for s in loaded if s.op == "linear_rope"]
    lt.revert()
    assert modeling_llama.LlamaAttention.forward is original
    assert not hasattr(modeling_llama.LlamaAttention, "_liger_linear_rope")


# attention=True: Llama (GQA), Gemma (multi-query; its scaling
# query_pre_attn_scalar^-1/2 the default), Granite (attention_multiplier: a
# scale of its own), in f32 and bf16.
ATTENTION_CASES = [("llama", F32, 4, 2, None), ("gemma", F32, 4, 1, None),
                   ("granite", F32, 4, 2, 0.125), ("llama", BF16, 4, 2, None)]


def _attention_alone(model, attention=True):
    """Patches `model`'s attention function alone (attention=True)."""
    fam = lt._FAMILIES[model.config.model_type]
    return lt.apply_liger_kernel(model, attention=attention, rope=False, rms_norm=False,
                                 fused_linear_cross_entropy=False, **{fam.gate: False},
                                 **({"layer_norm": False} if fam.layer_norms else {}))


def _rel(got, want):
    return ((got.double() - want.double()).abs().max() /
            want.double().abs().max().clamp_min(1e-30)).item()


@needs_runner
@pytest.mark.parametrize("family,dtype,heads,kv_heads,scale", ATTENTION_CASES,
                         ids=["%s-%s" % (c[0], str(c[1])[6:]) for c in ATTENTION_CASES])
def test_attention_runs_liger_ops_attention_as_sdpa(family, dtype, heads, kv_heads, scale,
                                                    monkeypatch):
    """attention=True on a model: its attention implementation is "liger",
    each attention call one liger.ops.attention (causal, the module's
    scaling: the default's spec where it is 1/sqrt(D)), and the model's
    loss, logits and every gradient those of Hugging Face's SDPA attention,
    warning of nothing."""
    monkeypatch.setenv("LIGER_OPS_CPU_REFERENCE", "1")
    loaded = []
    load = bundles.attention_kernels
    monkeypatch.setattr(bundles, "attention_kernels",
                        lambda spec: (loaded.append(spec), load(spec))[1])
    ref, model = (tiny_model(family, 21, dtype) for _ in range(2))
    ref.set_attn_implementation("sdpa")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        _attention_alone(model)
        assert model.config._attn_implementation == "liger"
        ids = tokens(8)
        outs = [m(input_ids=ids, labels=ids) for m in (ref, model)]
        for out in outs:
            out.loss.backward()
    assert _fallback_warnings(caught) == []
    dt = "f32" if dtype == F32 else "bf16"
    assert set(loaded) == {ops.attention_spec(heads, kv_heads, 8, dt, True, scale,
                                              target="cpu")}, loaded
    tol = 1e-5 if dtype == F32 else 2e-2
    assert _rel(outs[1].logits, outs[0].logits) < tol
    assert _rel(outs[1].loss, outs[0].loss) < tol
    for (name, p), q in zip(ref.named_parameters(), model.parameters()):
        assert _rel(q.grad, p.grad) < (tol if dtype == F32 else 5e-2), (name, _rel(q.grad,
                                                                                p.grad))


@needs_runner
def test_attention_with_a_mask_runs_sdpa_warned_once(monkeypatch):
    """A batch with padding (a mask): Hugging Face's SDPA function, the
    reference's logits exactly, one warning naming the reason; a batch
    without runs liger.ops.attention again."""
    monkeypatch.setenv("LIGER_OPS_CPU_REFERENCE", "1")
    ref, model = (tiny_model("llama", 22) for _ in range(2))
    ref.set_attn_implementation("sdpa")
    _attention_alone(model)
    ids = tokens(9)
    mask = torch.ones_like(ids)
    mask[0, :2] = 0
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for _ in range(2):
            assert torch.equal(model(input_ids=ids, attention_mask=mask).logits,
                               ref(input_ids=ids, attention_mask=mask).logits)
    assert _fallback_warnings(caught) == [
        "liger: LlamaAttention runs PyTorch's SDPA (attention=True): an attention mask "
        "(padding, packed sequences): liger.ops.attention takes a causal mask, with or "
        "without a sliding window, or none"]
    assert _rel(model(input_ids=ids).logits, ref(input_ids=ids).logits) < 1e-5


# (family, overrides, window): Mistral's window on every layer, Gemma 3's
# on its sliding layers (layer_types), Qwen2's from use_sliding_window; each
# window shorter than the 9 tokens.
WINDOW_CASES = [("mistral", dict(sliding_window=3), 3),
                ("gemma3_text", dict(sliding_window=4, query_pre_attn_scalar=32), 4),
                ("qwen2", dict(sliding_window=5, use_sliding_window=True, max_window_layers=1),
                 5)]


@needs_runner
@pytest.mark.parametrize("family,overrides,window", WINDOW_CASES,
                         ids=[c[0] for c in WINDOW_CASES])
def test_a_sliding_window_runs_liger_ops_attention_with_it(family, overrides, window,
                                                          monkeypatch):
    """A sliding window shorter than the batch (Hugging Face's SDPA mask of
    the window, no padding): the sliding layers call liger.ops.attention
    with window=W, the others causal; the loss, logits and every gradient
    those of Hugging Face's SDPA, warning of nothing; kernel_specs lists
    both specs. With padding too, SDPA's function, warned."""
    monkeypatch.setenv("LIGER_OPS_CPU_REFERENCE", "1")
    loaded = _record_loaded(monkeypatch)
    ref, model = (tiny_model(family, 31, **overrides) for _ in range(2))
    ref.set_attn_implementation("sdpa")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        _attention_alone(model)
        ids = tokens(32, seq=9)
        outs = [m(input_ids=ids, labels=ids) for m in (ref, model)]
        for out in outs:
            out.loss.backward()
    assert _fallback_warnings(caught) == []
    attention = {s for s in loaded if s.op == "attention"}
    types = getattr(model.config, "layer_types", None) or ["sliding_attention"]
    assert {s.window for s in attention} == {
        window if t == "sliding_attention" else 0 for t in types}, attention
    listed = set(_attention_specs(model.config, "f32", target="cpu"))
    assert attention <= listed and {s.window for s in listed} == {0, window}
    assert _rel(outs[1].logits, outs[0].logits) < 1e-5
    assert _rel(outs[1].loss, outs[0].loss) < 1e-5
    for (name, p), q in zip(ref.named_parameters(), model.parameters()):
        assert _rel(q.grad, p.grad) < 1e-5, (name, _rel(q.grad, p.grad))
    mask = torch.ones_like(ids)
    mask[1, :2] = 0
    with pytest.warns(lt.LigerFallbackWarning, match=r"an attention mask \(padding"):
        got = model(input_ids=ids, attention_mask=mask).logits
    assert _rel(got, ref(input_ids=ids, attention_mask=mask).logits) < 1e-5


@needs_runner
def test_attention_dropout_falls_back_under_a_sliding_window_too(monkeypatch):
    """Attention dropout while training (liger.ops.attention has none)
    falls back to Hugging Face's SDPA function, warned, whatever the mask:
    under a sliding window's mask too (whose call would otherwise run
    liger.ops.attention with the window), the same dropout draws as the
    unpatched model's."""
    monkeypatch.setenv("LIGER_OPS_CPU_REFERENCE", "1")
    ref, model = (tiny_model("mistral", 36, sliding_window=4, attention_dropout=0.5)
                  for _ in range(2))
    ref.set_attn_implementation("sdpa")
    _attention_alone(model)
    ids = tokens(37, seq=9)
    model.train(), ref.train()
    with pytest.warns(lt.LigerFallbackWarning, match=r"MistralAttention runs PyTorch's SDPA "
                      r"\(attention=True\): attention dropout 0.5"):
        torch.manual_seed(38)
        got = model(input_ids=ids).logits
    torch.manual_seed(38)
    assert torch.equal(got, ref(input_ids=ids).logits)


@needs_runner
def test_attention_generates_as_sdpa(monkeypatch):
    """Greedy generation with the cache: the prefill causal, each decoding
    step one query over every key (no mask), the reference's tokens."""
    monkeypatch.setenv("LIGER_OPS_CPU_REFERENCE", "1")
    ref, model = (tiny_model("qwen2", 23) for _ in range(2))
    ref.set_attn_implementation("sdpa")
    _attention_alone(model)
    ids = tokens(10, seq=5)
    assert torch.equal(model.generate(ids, max_new_tokens=3, do_sample=False),
                       ref.generate(ids, max_new_tokens=3, do_sample=False))


@needs_runner
def test_a_softcapped_attention_runs_liger_ops_attention_with_it(monkeypatch):
    """Gemma 2 softcaps its scores (attn_logit_softcapping, here below the
    scores' spread so that it bends them): attention=True runs
    liger.ops.attention with softcap=c on every layer (with the window on
    its sliding ones); the loss, logits and every gradient those of Hugging
    Face's eager attention (the one that softcaps), warning of nothing;
    kernel_specs lists what loaded. With padding, or dropout while
    training: the module's own eager attention (Hugging Face's SDPA
    function refuses a softcap), warned; eager's logits."""
    monkeypatch.setenv("LIGER_OPS_CPU_REFERENCE", "1")
    loaded = _record_loaded(monkeypatch)
    cap = 0.02
    ref, model, uncapped = (tiny_model("gemma2", 33, attn_logit_softcapping=c)
                            for c in (cap, cap, None))
    assert ref.config._attn_implementation == "eager"
    ids = tokens(34, seq=9)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        _attention_alone(model)
        assert model.config._attn_implementation == "liger"
        outs = [m(input_ids=ids, labels=ids) for m in (ref, model)]
        for out in outs:
            out.loss.backward()
    assert _fallback_warnings(caught) == []
    attention = {s for s in loaded if s.op == "attention"}
    assert {(s.softcap, s.window) for s in attention} == {(cap, 0), (cap, 4)}, attention
    assert attention == set(_attention_specs(model.config, "f32", target="cpu"))
    assert _rel(outs[1].logits, outs[0].logits) < 1e-5
    assert _rel(outs[1].loss, outs[0].loss) < 1e-5
    for (name, p), q in zip(ref.named_parameters(), model.parameters()):
        assert _rel(q.grad, p.grad) < 1e-5, (name, _rel(q.grad, p.grad))
    # (The cap matters: without it the logits are others.)
    assert _rel(uncapped(input_ids=ids).logits, outs[0].logits) > 1e-3
    mask = torch.ones_like(ids)
    mask[1, :2] = 0
    with pytest.warns(lt.LigerFallbackWarning, match=r"Gemma2Attention runs its eager "
                      r"attention \(a softcap\) \(attention=True\): an attention mask "
                      r"\(padding"):
        got = model(input_ids=ids, attention_mask=mask).logits
    assert _rel(got, ref(input_ids=ids, attention_mask=mask).logits) < 1e-5
    model.config.attention_dropout = 0.5
    for layer in model.model.layers:
        layer.self_attn.attention_dropout = 0.5
    ref.config.attention_dropout = 0.5
    for layer in ref.model.layers:
        layer.self_attn.attention_dropout = 0.5
    model.train(), ref.train()
    with pytest.warns(lt.LigerFallbackWarning, match=r"attention dropout 0.5"):
        torch.manual_seed(35)
        got = model(input_ids=ids).logits
    torch.manual_seed(35)
    assert torch.equal(got, ref(input_ids=ids).logits)  # (the same dropout draws)


@needs_runner
def test_attention_class_patch_registers_and_warns(monkeypatch):
    """A class patch cannot choose the attention of the models built
    afterwards: it registers "liger" and says so; a model built with
    attn_implementation="liger" runs liger.ops.attention."""
    monkeypatch.setenv("LIGER_OPS_CPU_REFERENCE", "1")
    with pytest.warns(lt.LigerFallbackWarning) as caught:
        lt.apply_liger_kernel_to_llama(attention=True, rope=False, rms_norm=False,
                                       swiglu=False, fused_linear_cross_entropy=False)
    assert _fallback_warnings(caught) == [
        'liger: attention=True: a class patch cannot choose the attention of models built '
        'afterwards: build them with attn_implementation="liger" (registered now), or patch a '
        'model (model=...)']
    loaded = []
    load = bundles.attention_kernels
    monkeypatch.setattr(bundles, "attention_kernels",
                        lambda spec: (loaded.append(spec), load(spec))[1])
    config = tiny_config("llama")
    config._attn_implementation = "liger"
    torch.manual_seed(24)
    model = transformers.AutoModelForCausalLM.from_config(config)
    assert model.config._attn_implementation == "liger"
    model(input_ids=tokens(11))
    assert loaded


def _attention_specs(config, dtype="bf16", **kw):
    return [s for s in lt.kernel_specs(config, dtype, attention=True, **kw)
            if s.op == "attention"]


def test_kernel_specs_of_attention():
    """kernel_specs(config, dtype, attention=True) adds the liger.ops.attention
    spec of the patched model's training call where the template takes its
    forward and backward (bf16 or f16, D 64 or 128 on sm_90a): causal, the
    config's heads, the family's scaling (the default's spec where it is
    1/sqrt(D), Gemma 2's softcap); none for another head size, f32 or
    another target."""
    llama = tiny_config("llama", head_dim=64)
    assert _attention_specs(llama) == [ops.attention_spec(4, 2, 64, "bf16", True)]
    assert _attention_specs(tiny_config("llama", head_dim=128), "f16") == [
        ops.attention_spec(4, 2, 128, "f16", True)]
    assert not [s for s in lt.kernel_specs(llama, "bf16") if s.op == "attention"]
    # Granite scales by attention_multiplier: its own scale, or the
    # default's spec where it is 1/sqrt(D) (0.125 at D 64).
    assert _attention_specs(tiny_config("granite", head_dim=64, attention_multiplier=0.015625)) \
        == [ops.attention_spec(4, 2, 64, "bf16", True, 0.015625)]
    assert _attention_specs(tiny_config("granite", head_dim=64, attention_multiplier=0.125)) == [
        ops.attention_spec(4, 2, 64, "bf16", True)]
    # Gemma: multi-query; Gemma 3 scales by query_pre_attn_scalar^-1/2 (and
    # a bidirectional Gemma's attention is not causal).
    assert _attention_specs(tiny_config("gemma", head_dim=64)) == [
        ops.attention_spec(4, 1, 64, "bf16", True)]
    assert _attention_specs(tiny_config("gemma", head_dim=64, use_bidirectional_attention=True)) \
        == [ops.attention_spec(4, 1, 64, "bf16", False)]
    # (Its sliding layers' window listed beside: causal alone runs where a
    # batch is no longer than the window.)
    assert _attention_specs(tiny_config("gemma3_text", head_dim=64, query_pre_attn_scalar=256)) \
        == [ops.attention_spec(4, 2, 64, "bf16", True, 0.0625),
            ops.attention_spec(4, 2, 64, "bf16", True, 0.0625, window=4)]
    # Gemma 2 softcaps its scores (its config's default, 50), on its
    # sliding layers too; without the softcap, its scaling is Gemma 3's.
    assert _attention_specs(tiny_config("gemma2", head_dim=64, query_pre_attn_scalar=64)) == [
        ops.attention_spec(4, 2, 64, "bf16", True, softcap=50.0),
        ops.attention_spec(4, 2, 64, "bf16", True, window=4, softcap=50.0)]
    assert _attention_specs(tiny_config("gemma2", head_dim=64, query_pre_attn_scalar=64,
                                        attn_logit_softcapping=None)) == [
        ops.attention_spec(4, 2, 64, "bf16", True), ops.attention_spec(4, 2, 64, "bf16", True,
                                                                       window=4)]
    # What the template does not train: D 80 (no multiple of 64), D 192 (no
    # backward: SDPA trains it), f32, sm_80; the reference lowering takes
    # every configuration.
    assert _attention_specs(tiny_config("llama", head_dim=80)) == []
    assert _attention_specs(tiny_config("llama", head_dim=192)) == []
    assert _attention_specs(llama, "f32") == []
    assert _attention_specs(llama, target="sm_80") == []
    assert _attention_specs(tiny_config("llama"), "f32", target="cpu") == [
        ops.attention_spec(4, 2, 8, "f32", True, target="cpu")]


# Scalings of the families' own where the tiny configuration's is 1/sqrt(D)
# (Gemma 2 with its config's softcap, 50).
OWN_SCALING = {"gemma2": dict(query_pre_attn_scalar=32),
               "gemma3_text": dict(query_pre_attn_scalar=32)}


@pytest.mark.parametrize("family", list(TINY))
def test_the_listed_attention_is_the_modeling_codes(family):
    """The attention spec kernel_specs lists is the one _attention_forward
    looks up for each attention module of the installed transformers'
    model: its heads, head_dim, is_causal, scaling (as the module passes
    it, mapped to liger.ops.attention's scale as _attention_forward maps
    it) and softcap, equal as floats are."""
    model = tiny_model(family, 27, **OWN_SCALING.get(family, {}))
    config = model.config
    modules = [m for m in model.modules() if hasattr(m, "scaling") and hasattr(m, "is_causal")]
    assert len(modules) == config.num_hidden_layers
    assert {ops.attention_spec(config.num_attention_heads, config.num_key_value_heads,
                               m.head_dim, "f32", m.is_causal,
                               lt._attention_scale(m.scaling, m.head_dim),
                               softcap=getattr(m, "attn_logit_softcapping", None), target="cpu")
            for m in modules} == {s for s in _attention_specs(config, "f32", target="cpu")
                                  if not s.window}
    assert (family == "gemma2") == any(getattr(m, "attn_logit_softcapping", None)
                                       for m in modules)
    if family in OWN_SCALING or family == "granite":
        assert _attention_specs(config, "f32", target="cpu")[0].scale == modules[0].scaling != 0


# The overrides that keep every layer's attention without a mask on
# _train_step's tokens (the Gemmas' sliding window of 4 is shorter).
NO_MASK = {"gemma2": dict(sliding_window=16), "gemma3_text": dict(sliding_window=16)}
# Each family with its own scaling (Gemma 2 softcapped), and Gemma 2
# without its softcap and with its window of 4.
LOAD_CASES = [(f, dict(OWN_SCALING.get(f, {}), **NO_MASK.get(f, {}))) for f in TINY] + [
    ("gemma2", dict(attn_logit_softcapping=None))]


@needs_runner
@pytest.mark.parametrize("family,overrides", LOAD_CASES,
                         ids=list(TINY) + ["gemma2-uncapped-window"])
def test_a_patched_attention_loads_the_spec_kernel_specs_lists(family, overrides, monkeypatch):
    """A model patched with attention=True, trained one step through the
    reference lowering, loads the liger.ops.attention spec that
    kernel_specs(config, attention=True) lists for the target, and no
    other: the causal one, and the window's where a sliding window is
    shorter than the tokens."""
    monkeypatch.setenv("LIGER_OPS_CPU_REFERENCE", "1")
    loaded = _record_loaded(monkeypatch)
    model = tiny_model(family, 28, **overrides)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", lt.LigerFallbackWarning)  # (what stays: tested above)
        _attention_alone(model)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        _train_step(model)
    assert _fallback_warnings(caught) == []
    # (A sliding window no shorter than the tokens: causal alone runs; the
    # window's spec is listed beside it, for longer batches.)
    listed = _attention_specs(model.config, "f32", target="cpu")
    window = lt._attention_window(model.config)
    assert {s for s in loaded if s.op == "attention"} == {
        s for s in listed if not s.window or s.window < 7}
    assert len(listed) == 1 + (window is not None)
    assert {s.softcap for s in listed} == {
        model.config.to_dict().get("attn_logit_softcapping") or 0.0}


# attention=True with every other flag, in bf16 at D 64 (the template's
# size: what kernel_specs lists for sm_90a): Llama (GQA), Gemma
# (multi-query), Granite (an attention_multiplier of its own).
ATTENTION_TRAINING = {"llama": {}, "gemma": dict(num_key_value_heads=1),
                      "granite": dict(attention_multiplier=0.0625)}


@needs_runner
@pytest.mark.parametrize("family", sorted(ATTENTION_TRAINING))
def test_attention_trains_as_the_original(family, monkeypatch):
    """A model patched with attention=True (and the default flags) trains
    one step as the original with SDPA, warning of nothing, and every
    kernel loaded, the attention's among them, is one
    kernel_specs(config, attention=True) lists for sm_90a."""
    monkeypatch.setenv("LIGER_OPS_CPU_REFERENCE", "1")
    loaded = _record_loaded(monkeypatch)
    ref, model = (tiny_model(family, 29, BF16, head_dim=64, **ATTENTION_TRAINING[family])
                  for _ in range(2))
    ref.set_attn_implementation("sdpa")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        lt.apply_liger_kernel(model, attention=True)
    assert _fallback_warnings(caught) == []
    assert model.config._attn_implementation == "liger"
    _assert_trains_as(model, _train_step(ref), family, "bf16", loaded, attention=True)
    assert {s.with_target(ops.TARGET) for s in loaded if s.op == "attention"} == set(
        _attention_specs(model.config)) != set()


QK_ROPE_PREFIX = ("liger: LlamaAttention runs its q/k projections and RoPE apart "
                  "(fuse_qkv_rope=True): ")


@needs_runner
@pytest.mark.parametrize("case,dtype,overrides,message", [
    ("head_dim", BF16, {}, QK_ROPE_PREFIX + "head_dim must be a multiple of 16 of at most 256 "
     "on sm_90a (a column tile of the RoPE epilogue holds whole heads), got 8"),
    ("f32", F32, dict(head_dim=16), QK_ROPE_PREFIX + "liger.ops.linear_rope takes bf16 or f16 "
     "(its kernels are the matmul template's: wgmma and mma.sync), got f32"),
], ids=["head_dim8", "f32"])
def test_an_attention_fuse_qkv_rope_cannot_take_runs_apart_warned_once(
        case, dtype, overrides, message, monkeypatch):
    """A call liger.ops.linear_rope refuses (a head size the kernel does not
    take, f32, tables not spanning the head) forms q and k as Hugging Face
    does (the module's apply_rotary_pos_emb: liger.ops.rope under
    rope=True), with one warning naming the reason, and trains as the
    original."""
    monkeypatch.setenv("LIGER_OPS_CPU_REFERENCE", "1")
    loaded = _record_loaded(monkeypatch)
    ref, model = (tiny_model("llama", 19, dtype, **overrides) for _ in range(2))
    flags = _loss_flags("f32" if dtype == F32 else "bf16")
    lt.apply_liger_kernel(model, fuse_qkv_rope=True, rope=False, **flags)
    _assert_trains_as(model, _train_step(ref), "llama", "f32" if dtype == F32 else "bf16",
                      loaded, fuse_qkv_rope=True, forward_warnings=[message])
    assert not [s for s in loaded if s.op == "linear_rope"]


@needs_runner
def test_fuse_qkv_rope_takes_neither_a_lone_bias_nor_a_peft_layer(monkeypatch):
    """q_proj with a bias where k_proj has none, or a PEFT LoRA layer on
    q_proj: q and k are formed as Hugging Face forms them, each reason
    warned once, the logits the original's."""
    monkeypatch.setenv("LIGER_OPS_CPU_REFERENCE", "1")
    ids = tokens(3)
    ref, model = (tiny_model("qwen2", 20, BF16, head_dim=16) for _ in range(2))
    for m in (ref, model):
        for layer in m.model.layers:
            layer.self_attn.k_proj.bias = None
    lt.apply_liger_kernel(model, fuse_qkv_rope=True, rope=False, rms_norm=False,
                          swiglu=False, fused_linear_cross_entropy=False)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        got = [model(input_ids=ids).logits for _ in range(2)]
    assert _fallback_warnings(caught) == [
        "liger: Qwen2Attention runs its q/k projections and RoPE apart (fuse_qkv_rope=True): "
        "liger.ops.linear_rope: q_bias and k_bias must be given together (the kernel adds both "
        "or neither)"]
    want = ref(input_ids=ids).logits
    assert all(torch.equal(g, want) for g in got)
    peft = pytest.importorskip("peft")
    lt._WARNED.clear()
    ref = tiny_model("llama", 21, BF16, head_dim=16)
    model = peft.get_peft_model(tiny_model("llama", 21, BF16, head_dim=16), peft.LoraConfig(
        r=16, lora_alpha=16, target_modules=["q_proj"]), autocast_adapter_dtype=False)
    lt.apply_liger_kernel(model.get_base_model(), fuse_qkv_rope=True, rope=False,
                          rms_norm=False, swiglu=False, fused_linear_cross_entropy=False)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        got = model(input_ids=ids).logits
    assert _fallback_warnings(caught) == [
        "liger: LlamaAttention runs its q/k projections and RoPE apart (fuse_qkv_rope=True): "
        "q_proj is peft.tuners.lora.layer.Linear, not a torch.nn.Linear"]
    assert torch.equal(got, ref(input_ids=ids).logits)  # (PEFT starts B at 0)


@needs_runner
def test_tables_fuse_qkv_rope_cannot_take_form_q_and_k_apart(monkeypatch):
    """Tables of another dtype than the projections (kept in f32, as OLMo 2
    keeps them) or not spanning the head (a partial rotary dimension): q and k as
    Hugging Face forms them (bit for bit; its own error where it has one),
    each reason warned once."""
    monkeypatch.setenv("LIGER_OPS_CPU_REFERENCE", "1")
    model = tiny_model("llama", 22, BF16, head_dim=16)
    lt.apply_liger_kernel(model, fuse_qkv_rope=True, rope=False)
    attn = model.model.layers[0].self_attn
    from transformers.models.llama import modeling_llama
    rope = modeling_llama.apply_rotary_pos_emb
    x = torch.randn(2, 5, 32, dtype=BF16)
    shape = (2, 5, -1, 16)
    angles = torch.randn(1, 5, 16)
    tables = (angles.cos(), angles.sin())
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        got = [attn._liger_linear_rope(x, *tables, shape, rope) for _ in range(2)]
    assert _fallback_warnings(caught) == [
        QK_ROPE_PREFIX + "liger.ops.linear_rope: cos must have the dtype of x (torch.bfloat16), "
        "got torch.float32"]
    q = attn.q_proj(x).view(shape).transpose(1, 2)
    k = attn.k_proj(x).view(shape).transpose(1, 2)
    want = modeling_llama.apply_rotary_pos_emb(q, k, *tables)
    assert all(torch.equal(a, b) for g in got for a, b in zip(g, want))
    half = tuple(t[..., :8].to(BF16) for t in tables)
    with pytest.raises(RuntimeError) as theirs:
        modeling_llama.apply_rotary_pos_emb(q, k, *half)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with pytest.raises(RuntimeError) as ours:
            attn._liger_linear_rope(x, *half, shape, rope)
    assert _fallback_warnings(caught) == [
        QK_ROPE_PREFIX + "the tables span 8 of the head's 16 features (a partial rotary "
        "dimension)"]
    assert str(ours.value) == str(theirs.value)


def test_a_subclass_with_its_own_attention_forward_stays(monkeypatch):
    """A model patch rewrites the family's own attention forward: a module
    of a subclass with a forward of its own keeps it, warned; one that
    inherits the family's forward takes the rewrite."""
    from transformers.models.llama import modeling_llama

    class Own(modeling_llama.LlamaAttention):
        def forward(self, *args, **kwargs):
            return super().forward(*args, **kwargs)

    class Inherits(modeling_llama.LlamaAttention):
        pass
    model = tiny_model("llama", 23, BF16, head_dim=16)
    for layer, cls in zip(model.model.layers, (Own, Inherits)):
        layer.self_attn.__class__ = cls
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        lt.apply_liger_kernel(model, fuse_qkv_rope=True)
    assert _fallback_warnings(caught) == [
        "liger: fuse_qkv_rope=True: Own stays as it is: it is a LlamaAttention with a forward "
        "of its own"]
    own, inherits = (layer.self_attn for layer in model.model.layers)
    assert "forward" not in vars(own) and _qk_rope_patched(inherits)


def test_tables_that_require_grad_fall_back_in_the_patched_rope():
    """rope=True: tables that require grad (liger.ops.rope refuses them: its
    backward gives them none) run the module's original RoPE, warned, with
    their gradient."""
    from transformers.models.llama import modeling_llama
    original = modeling_llama.apply_rotary_pos_emb
    lt.apply_liger_kernel_to_llama()
    q, k = torch.randn(1, 2, 3, 8), torch.randn(1, 1, 3, 8)
    angle = torch.randn(1, 3, 8, requires_grad=True)
    cos, sin = angle.cos(), angle.sin()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        got = modeling_llama.apply_rotary_pos_emb(q, k, cos, sin)
    assert _fallback_warnings(caught) == [
        "liger: apply_rotary_pos_emb runs the original: liger.ops.rope: cos and sin must not "
        "require grad (RoPE's tables get no gradient here: detach them)"]
    want = original(q, k, cos, sin)
    assert all(torch.equal(a, b) for a, b in zip(got, want))
    got[0].sum().backward()
    assert angle.grad is not None


# The families whose attention stays as it is under fuse_qkv_rope=True, and
# why: q/k norms between the projections and RoPE, RoPE only on some layers,
# a fused qkv_proj, a RoPE liger.ops.rope does not compute.
QK_ROPE_STAYS = {
    "qwen3": "Qwen3Attention", "olmo2": "Olmo2Attention", "gemma3_text": "Gemma3Attention",
    "smollm3": "SmolLM3Attention", "phi3": "Phi3Attention", "qwen3_moe": "Qwen3MoeAttention",
}


@pytest.mark.parametrize("family", sorted(QK_ROPE_STAYS) + ["glm4", "llama4_text"])
def test_an_attention_that_forms_q_and_k_otherwise_stays_warned(family):
    """fuse_qkv_rope=True leaves an attention whose q and k are not formed
    as Llama's (and a family whose RoPE liger.ops.rope cannot take) as it
    is, with one warning at patching naming it and why."""
    mod = lt._modeling(family)
    name = QK_ROPE_STAYS.get(family) or lt._FAMILIES[family].attention or "Glm4Attention"
    original = getattr(mod, name).forward
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        getattr(lt, "apply_liger_kernel_to_" + lt._FAMILIES[family].name)(
            fuse_qkv_rope=True, rope=False)
    messages = [m for m in _fallback_warnings(caught) if "fuse_qkv_rope" in m]
    if family in QK_ROPE_STAYS:
        assert messages == [
            "liger: fuse_qkv_rope=True: %s stays as it is: %s.forward does not form q and k as "
            "Llama's attention does (its q/k projections' head split, then "
            "apply_rotary_pos_emb, with nothing between them that reads q or k: a q/k norm, a "
            "RoPE applied only on some layers)" % (name, name)]
    else:
        assert messages == ["liger: fuse_qkv_rope=True: %s stays as it is: %s" % (
            name, lt._FAMILIES[family].rope)]
    assert getattr(mod, name).forward is original


def test_the_rewrite_takes_the_three_lines_alone():
    """The rewrite replaces the q/k lines with one self._liger_linear_rope
    call and runs the rest as written, under the forward's own decorators;
    it refuses a forward with a line between them that is not v's
    projection or the tables' unpacking (a scale, a norm), one that lacks a
    line, and one whose source is not a function's, naming why."""
    from transformers.models.llama import modeling_llama
    def deco(tag):
        def wrap(f):
            @functools.wraps(f)
            def wrapper(*args, **kwargs):
                return ("deco", tag), f(*args, **kwargs)
            return wrapper
        return wrap
    ns = dict(vars(modeling_llama), deco=deco)
    lines = [
        "def forward(self, hidden_states, position_embeddings=None, **kwargs):",
        "    input_shape = hidden_states.shape[:-1]",
        "    hidden_shape = (*input_shape, -1, self.head_dim)",
        "    query_states = self.q_proj(hidden_states).view(hidden_shape).transpose(1, 2)",
        "",
        "    key_states = self.k_proj(hidden_states).view(hidden_shape).transpose(1, 2)",
        "    cos, sin = position_embeddings",
        "    query_states, key_states = apply_rotary_pos_emb(query_states, key_states, cos, sin)",
        "    return query_states + 1, key_states, kwargs"]

    def attention(source_lines):
        source = "\n".join(source_lines) + "\n"
        name = "<test attention %d>" % len(linecache.cache)
        linecache.cache[name] = (len(source), None, source.splitlines(True), name)
        exec(compile(source, name, "exec"), ns)
        return type("TestAttention", (), dict(forward=ns["forward"]))
    fn, why = lt._qk_rope_forward(attention(lines))
    assert why is None
    assert "_liger_linear_rope" in fn.__code__.co_names
    assert not {"q_proj", "k_proj"} & set(fn.__code__.co_names)
    # The call stands where RoPE stood: the tables and the module's RoPE.
    this = types.SimpleNamespace(head_dim=4, _liger_linear_rope=lambda x, c, s, shape, rope: (
        torch.full((1,), float(shape[-1])), (c, s, rope)))
    x = torch.zeros(2, 3, 8)
    q, k, kwargs = fn(this, x, position_embeddings=("cos", "sin"), extra=5)
    assert q.tolist() == [5.0] and kwargs == dict(extra=5)
    assert k == ("cos", "sin", modeling_llama.apply_rotary_pos_emb)
    assert fn.__code__.co_filename in linecache.cache  # (tracebacks show the source)
    scaled = lines[:6] + ["    query_states = query_states * 2"] + lines[6:]
    missing = lines[:5] + lines[6:]
    for source in (scaled, missing):
        fn, why = lt._qk_rope_forward(attention(source))
        assert fn is None and why.startswith(
            "TestAttention.forward does not form q and k as Llama's attention does"), why
    # A decorator (transformers' deprecate_kwarg) is applied again over the
    # rewrite.
    fn, why = lt._qk_rope_forward(attention(["@deco(3)"] + lines))
    assert why is None and fn(this, x, position_embeddings=("c", "s"))[0] == ("deco", 3)
    fn, why = lt._qk_rope_forward(type("TestAttention", (), dict(forward=len)))
    assert fn is None and why.startswith("TestAttention.forward's source cannot be read as "
                                         "one function")
    moved = lines[:4] + ["    cos = cos * 2"] + lines[4:]  # (between: refused too)
    assert lt._qk_rope_forward(attention(moved))[0] is None


def test_kernel_specs_of_fuse_qkv_rope():
    """kernel_specs(config, dtype, fuse_qkv_rope=True) adds the linear_rope
    specs of the config (both bias variants where the config does not say,
    both table layouts), and none where the family has q/k norms or the
    configuration is one the kernel refuses."""
    llama = lt.kernel_specs(tiny_config("llama", head_dim=16), "bf16", fuse_qkv_rope=True)
    qk = [s for s in llama if s.op == "linear_rope"]
    assert set(qk) == {ops.linear_rope_spec(32, 4, 2, 16, "bf16", False, b) for b in
                       (True, False)}  # (LlamaConfig says attention_bias=False)
    assert ops.rope_spec(4, 2, 16, "bf16", True) in llama  # the backward's
    qwen2 = lt.kernel_specs(tiny_config("qwen2", head_dim=16), "bf16", fuse_qkv_rope=True)
    assert {s.bias for s in qwen2 if s.op == "linear_rope"} == {False, True}
    assert not [s for s in lt.kernel_specs(tiny_config("qwen3", head_dim=16), "bf16",
                                           fuse_qkv_rope=True) if s.op == "linear_rope"]
    assert not [s for s in lt.kernel_specs(tiny_config("llama"), "bf16", fuse_qkv_rope=True)
                if s.op == "linear_rope"]  # head_dim 8
    assert not [s for s in lt.kernel_specs(tiny_config("llama", head_dim=16), "bf16")
                if s.op == "linear_rope"]


def test_kernel_specs_of_fused_mlp():
    """kernel_specs(config, dtype, fused_mlp=True) adds the gated_mlp spec of
    each dense MLP's size (bf16/f16 only: f32 runs the gated op)."""
    llama = lt.kernel_specs(tiny_config("llama"), "bf16", fused_mlp=True)
    assert ops.gated_mlp_spec(32, 64, "bf16") in llama
    assert ops.swiglu_spec(64, "bf16") in llama  # (a refused MLP's fallback)
    assert not [s for s in lt.kernel_specs(tiny_config("llama"), "bf16") if s.op == "gated_mlp"]
    assert not [s for s in lt.kernel_specs(tiny_config("llama"), "f32", fused_mlp=True)
                if s.op == "gated_mlp"]
    gemma = lt.kernel_specs(tiny_config("gemma"), "f16", fused_mlp=True)
    assert ops.gated_mlp_spec(32, 64, "f16", "geglu", "tanh") in gemma
    # Mixtral has experts alone: no dense MLP; Qwen3-MoE's dense MLP alone
    # (intermediate_size 64, not its experts' 48).
    assert not [s for s in lt.kernel_specs(tiny_config("mixtral"), "bf16", fused_mlp=True)
                if s.op == "gated_mlp"]
    assert [s for s in lt.kernel_specs(tiny_config("qwen3_moe"), "bf16", fused_mlp=True)
            if s.op == "gated_mlp"] == [ops.gated_mlp_spec(32, 64, "bf16")]
    # A target's own rules: hidden 40 is no multiple of 32 (sm_80), one of 8.
    wide = tiny_config("llama", hidden_size=40)
    assert [s for s in lt.kernel_specs(wide, "bf16", True, "sm_80") if s.op == "gated_mlp"] == []
    assert [s for s in lt.kernel_specs(wide, "bf16", True) if s.op == "gated_mlp"] == [
        ops.gated_mlp_spec(40, 64, "bf16")]


def test_fused_mlp_leaves_experts_to_their_own_flag():
    """swiglu=False, fused_mlp=True: the dense MLP is patched, the experts
    stay as they are (and no warning speaks of them)."""
    model = tiny_model("qwen3_moe", 17, torch.bfloat16)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        lt.apply_liger_kernel(model, swiglu=False, fused_mlp=True)
    assert _fallback_warnings(caught) == []
    kinds = {type(m).__name__: "_apply_gate" in vars(m) or "forward" in vars(m)
             for m in model.modules() if type(m).__name__ in ("Qwen3MoeMLP", "Qwen3MoeExperts")}
    assert kinds == {"Qwen3MoeMLP": True, "Qwen3MoeExperts": False}


# A class patch of each kind of gated MLP beyond Llama's (a fused gate_up,
# MoE experts, Llama 4's experts) and of Granite's and OLMo 2's own parts.
CLASS_CASES = ["phi3", "granite", "olmo2", "qwen3_moe", "llama4_text"]


@needs_runner
@pytest.mark.parametrize("family", CLASS_CASES)
def test_class_patched_model_matches_the_original_through_the_reference(family,
                                                                       monkeypatch):
    """The family's classes patched before the model is built (the entry
    point without `model`): the model trains one step as the original."""
    monkeypatch.setenv("LIGER_OPS_CPU_REFERENCE", "1")
    loaded = _record_loaded(monkeypatch)
    reference = _train_step(tiny_model(family, 12))  # (before the classes change)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", lt.LigerFallbackWarning)  # (checked below)
        assert lt._APPLY[family](**_loss_flags("f32")) is None
    model = tiny_model(family, 12)
    _assert_trains_as(model, reference, family, "f32", loaded)


@pytest.mark.parametrize("family", list(TINY))
def test_class_patch_of_each_family_replaces_its_classes_and_warns_of_what_stays(family):
    """Every class the family's entry names is patched (its norms, its
    gated MLPs, its causal LM), RoPE where liger.ops.rope takes the
    family's; what stays is warned once, naming why; revert restores it
    all."""
    fam = lt._FAMILIES[family]
    mod, classes = lt._classes(family)
    before = {name: dict(vars(cls)) for name, cls in classes.items()}
    rope = mod.__dict__.get("apply_rotary_pos_emb")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        lt._APPLY[family]()
    expected = ["liger: rope=True: %s: the model's RoPE stays as it is" % fam.rope] \
        if fam.rope and dict(fam.flags).get("rope", True) else []
    expected += ["liger: %s=True: %s stays as it is: %s" % stay for stay in fam.stays]
    if fam.layer_norms:
        expected.append("liger: layer_norm=True: nn.LayerNorm stays as it is in a class patch "
                        "(it is PyTorch's, for every model): give the model (model=...) to "
                        "patch its LayerNorms")
    assert _fallback_warnings(caught) == expected
    assert torch.nn.LayerNorm.forward is lt._original(torch.nn.LayerNorm, "forward")
    for name in fam.norms:
        assert classes[name].forward is lt._rms_norm_forward, name
    for name, kind in fam.mlps:
        for attr, fn in lt._MLP_PATCHES[kind]:
            assert getattr(classes[name], attr) is fn, (name, attr)
    loss = classes[fam.causal_lm]
    assert loss.forward is lt._causal_lm_forward
    # Granite's loss defaults to the logits (Liger-Kernel's default).
    assert loss._liger_loss == ("cross_entropy" if family == "granite"
                                else "fused_linear_cross_entropy")
    assert getattr(mod.__dict__.get("apply_rotary_pos_emb"), "_liger", False) == (
        not fam.rope)
    lt.revert()
    assert {name: dict(vars(cls)) for name, cls in classes.items()} == before
    assert mod.__dict__.get("apply_rotary_pos_emb") is rope


def _llama4_vision_encoder(seed):
    """A one-layer Llama 4 vision encoder, hidden 32: four nn.LayerNorm
    (before and after the layers, two in the layer)."""
    from transformers.models.llama4 import configuration_llama4, modeling_llama4
    config = configuration_llama4.Llama4VisionConfig(
        hidden_size=32, num_hidden_layers=1, num_attention_heads=4, intermediate_size=128,
        image_size=16, patch_size=8, vision_output_dim=32, projector_input_dim=32,
        projector_output_dim=32, pixel_shuffle_ratio=0.5)
    config._attn_implementation = "eager"
    torch.manual_seed(seed)
    model = modeling_llama4.Llama4VisionModel(config)
    with torch.no_grad():
        for m in model.modules():
            if isinstance(m, torch.nn.LayerNorm):
                m.weight.normal_(1.0, 0.1)
                m.bias.normal_(0.0, 0.1)
    return model


@needs_runner
def test_llama4s_layer_norm_flag_patches_a_models_layer_norms(monkeypatch):
    """layer_norm=True on a model patches each of its nn.LayerNorm (Llama 4's
    vision encoder, as Liger-Kernel's flag does) with liger.ops.layer_norm:
    the encoder's output and every gradient are the original's, through
    the reference lowering."""
    monkeypatch.setenv("LIGER_OPS_CPU_REFERENCE", "1")
    loaded = _record_loaded(monkeypatch)
    ref, model = _llama4_vision_encoder(5), _llama4_vision_encoder(5)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert lt.apply_liger_kernel_to_llama4(model=model, rope=False) == 4
    assert _fallback_warnings(caught) == []
    norms = [m for m in model.modules() if isinstance(m, torch.nn.LayerNorm)]
    assert len(norms) == 4 and all(m.forward.__func__ is lt._layer_norm_forward for m in norms)
    pixels = torch.randn(2, 3, 16, 16, generator=torch.Generator().manual_seed(6))
    with warnings.catch_warnings():
        warnings.simplefilter("error", lt.LigerFallbackWarning)
        out = model(pixels).last_hidden_state
    want = ref(pixels).last_hidden_state
    assert torch.allclose(out, want, rtol=1e-5, atol=1e-5)
    out.square().sum().backward()
    want.square().sum().backward()
    grads = dict(ref.named_parameters())
    for name, p in model.named_parameters():
        r = grads[name].grad
        assert torch.allclose(p.grad, r, rtol=1e-4, atol=1e-4 * r.abs().max().item()), name
    assert {str(s) for s in loaded} == {
        "layer_norm:bias=1,dtype=f32,eps=1e-05,hidden=32,weight_dtype=f32"}
    # Unpatched with the flag off.
    plain = _llama4_vision_encoder(5)
    with pytest.raises(LigerError, match="has no Llama4TextRMSNorm"):
        lt.apply_liger_kernel_to_llama4(model=plain, rope=False, layer_norm=False)


def test_a_layer_norm_liger_cannot_take_runs_its_own_forward_warned_once():
    """Without a weight (elementwise_affine=False) or over more than the
    last dimension: the module's own forward, one warning each."""
    model = torch.nn.Sequential(torch.nn.LayerNorm(8, elementwise_affine=False),
                                torch.nn.LayerNorm((2, 4)))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", lt.LigerFallbackWarning)
        model.config = types.SimpleNamespace(model_type="llama4_text")
        assert lt.apply_liger_kernel(model, rope=False) == 2
    x = torch.randn(3, 2, 4).reshape(3, 8)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for _ in range(2):
            y = model[0](x)
            z = model[1](x.view(3, 2, 4))
    assert torch.equal(y, torch.nn.functional.layer_norm(x, (8,)))
    assert torch.equal(z, torch.nn.functional.layer_norm(x.view(3, 2, 4), (2, 4),
                                                         model[1].weight, model[1].bias))
    assert _fallback_warnings(caught) == [
        "liger: LayerNorm runs its original forward: liger.ops.layer_norm normalizes the last "
        "dimension and scales by a weight, got normalized_shape [8] without "
        "elementwise_affine",
        "liger: LayerNorm runs its original forward: liger.ops.layer_norm normalizes the last "
        "dimension and scales by a weight, got normalized_shape [2, 4]"]


@pytest.mark.parametrize("family", list(TINY))
def test_a_peft_models_base_is_patched_as_the_model(family):
    """A LoRA model (PEFT, every linear layer adapted): its base model is
    patched module for module as the bare model is, the projections the
    patched MLPs call being LoRA layers."""
    peft = pytest.importorskip("peft")
    bare = tiny_model(family, 0)
    peft_model = peft.get_peft_model(tiny_model(family, 0), peft.LoraConfig(
        r=4, lora_alpha=8, lora_dropout=0.0, target_modules="all-linear"))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", lt.LigerFallbackWarning)
        count = lt.apply_liger_kernel(bare)
        assert count > 0
        assert lt.apply_liger_kernel(peft_model.get_base_model()) == count
    patched = [m for m in peft_model.modules() if "_liger_family" in vars(m)]
    assert len(patched) == count and {m._liger_family for m in patched} == {family}


@needs_runner
def test_a_peft_model_trains_as_the_original_through_the_reference(monkeypatch):
    """LoRA on Phi-3's fused qkv and gate_up projections: the patched MLP
    splits the adapted projection's output; the loss and the adapters'
    gradients are the original's."""
    peft = pytest.importorskip("peft")
    monkeypatch.setenv("LIGER_OPS_CPU_REFERENCE", "1")
    loaded = _record_loaded(monkeypatch)
    ref, model = [peft.get_peft_model(tiny_model("phi3", 13), peft.LoraConfig(
        r=4, lora_alpha=8, lora_dropout=0.0, init_lora_weights=False,
        target_modules=["qkv_proj", "gate_up_proj"])) for _ in range(2)]
    ref.load_state_dict(model.state_dict())
    assert lt.apply_liger_kernel(model.get_base_model(), **_loss_flags("f32")) > 0
    _assert_trains_as(model, _train_step(ref), "phi3", "f32", loaded)


@needs_runner
def test_eager_experts_fall_back_with_one_warning(monkeypatch):
    """Hugging Face's eager experts loop applies the activation itself (no
    _apply_gate): the experts run as written, warned once; the rest of the
    model is patched and it trains as the original."""
    monkeypatch.setenv("LIGER_OPS_CPU_REFERENCE", "1")
    loaded = _record_loaded(monkeypatch)
    ref = tiny_model("mixtral", 14, experts_implementation="eager")
    model = tiny_model("mixtral", 14, experts_implementation="eager")
    assert model.config._experts_implementation == "eager"
    lt.apply_liger_kernel(model, **_loss_flags("f32"))
    monkeypatch.setitem(FORWARD_WARNINGS, ("mixtral", "f32"), [
        "liger: MixtralExperts with experts_implementation='eager' runs its original forward "
        "(its loop applies the activation itself; 'grouped_mm' or 'batched_mm' run "
        "liger.ops.swiglu)"])
    _assert_trains_as(model, _train_step(ref), "mixtral", "f32", loaded)
    assert not [s for s in loaded if s.op == "swiglu"]


@pytest.mark.parametrize("family,owner,attr", [
    ("mixtral", None, "MixtralExperts"),
    # Experts whose implementations call no _apply_gate would run
    # unpatched, silently: the same error.
    ("qwen3_moe", "Qwen3MoeExperts", "_apply_gate")])
def test_a_transformers_without_the_familys_classes_is_a_clear_error(family, owner, attr,
                                                                      monkeypatch):
    mod = lt._modeling(family)
    monkeypatch.delattr(getattr(mod, owner) if owner else mod, attr)
    with pytest.raises(LigerError) as e:
        lt._APPLY[family]()
    assert str(e.value) == (
        "apply_liger_kernel_to_%s: transformers %s's transformers.models.%s.modeling_%s has "
        "no %s (liger patches the classes of transformers 5)" % (
            family, transformers.__version__, family, family,
            "%s.%s" % (owner, attr) if owner else attr))
    assert lt._ORIGINALS == {}  # nothing was patched


# Liger-Kernel's signatures of the entry points whose flags differ from
# Llama's (liger's own flags follow them).
SIGNATURES = {
    "gemma2": "(rope=True, cross_entropy=False, fused_linear_cross_entropy=True, "
              "rms_norm=True, geglu=True, model=None",
    "granite": "(rope=True, cross_entropy=True, fused_linear_cross_entropy=False, "
               "rms_norm=True, swiglu=True, model=None",
    "glm4": "(rope=False, cross_entropy=False, fused_linear_cross_entropy=True, "
            "rms_norm=True, swiglu=True, model=None",
    "llama4_text": "(rope=True, cross_entropy=False, fused_linear_cross_entropy=True, "
                   "rms_norm=True, swiglu=True, model=None, layer_norm=True",
}


@pytest.mark.parametrize("family", list(SIGNATURES))
def test_entry_points_take_liger_kernels_flags(family):
    import inspect
    apply = lt._APPLY[family]
    assert str(inspect.signature(apply)) == SIGNATURES[family] + (
        ", lora=False, fuse_norm_linear=False, fuse_qkv_rope=False, fused_mlp=False, "
        "loss_memory_budget=None, attention=False)")
    assert getattr(lt, apply.__name__) is apply


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


def _biased_lm_head(model, seed, head=torch.nn.Linear):
    """`model` with its lm_head replaced by a `head` [96, 32] with a
    bias, weight and bias random, in the model's dtype."""
    g = torch.Generator().manual_seed(seed)
    lm_head = head(32, 96, bias=True)
    with torch.no_grad():
        lm_head.weight.copy_(torch.randn(96, 32, generator=g) / 32 ** 0.5)
        lm_head.bias.copy_(torch.randn(96, generator=g))
    model.lm_head = lm_head.to(model.dtype)
    return model


@needs_runner
@pytest.mark.parametrize("family,dtype", [("llama", "bf16"), ("llama", "f32"),
                                          ("granite", "bf16")])
def test_an_lm_head_with_a_bias_trains_as_the_original(family, dtype, monkeypatch):
    """A biased lm_head (nn.Linear(..., bias=True)): bf16 takes the fused
    linear cross-entropy with the bias (its kernels' spec has it; no
    logits while training; Granite's logits (h · Wᵀ + b) / s as (h / s) ·
    Wᵀ + b / s), f32 the loss on the logits; one training step as the
    unpatched model's, the bias's gradient too, with no fallback."""
    monkeypatch.setenv("LIGER_OPS_CPU_REFERENCE", "1")
    loaded = _record_loaded(monkeypatch)
    torch_dtype = BF16 if dtype == "bf16" else F32
    ref = _biased_lm_head(tiny_model(family, 13, torch_dtype), 5)
    model = _biased_lm_head(tiny_model(family, 13, torch_dtype), 5)
    lt.apply_liger_kernel(model, **_loss_flags(dtype))
    ref_out, ref_loss, ref_grads = _train_step(ref)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        out, loss, grads = _train_step(model)
    assert _fallback_warnings(caught) == []
    loss_tol, grad_tol = (1e-5, 1e-4) if dtype == "f32" else (1e-2, 6e-2)
    assert torch.allclose(loss.float(), ref_loss.float(), rtol=loss_tol), (loss, ref_loss)
    assert grads.keys() == ref_grads.keys() and "lm_head.bias" in grads
    assert grads["lm_head.bias"].abs().sum() > 0
    for name, g in grads.items():
        r = ref_grads[name].float()
        err = ((g.float() - r).abs().max() / r.abs().max().clamp_min(1e-30)).item()
        assert err < grad_tol, (name, err)
    losses = [s for s in loaded if s.op in ("fused_linear_cross_entropy", "cross_entropy")]
    if dtype == "bf16":
        assert out.logits is None and ref_out.logits is not None
        assert losses and all(s.op == "fused_linear_cross_entropy" and s.bias for s in losses)
    else:
        assert out.logits is not None
        assert losses and all(s.op == "cross_entropy" for s in losses)


class _HeadWithAnF32Bias(torch.nn.Linear):
    """An lm_head that keeps its bias in f32 and adds it in the input's
    dtype: a bias the fused loss cannot take ([V] of the weight's dtype)."""

    def to(self, dtype):
        self.weight.data = self.weight.data.to(dtype)
        return self

    def forward(self, x):
        return torch.nn.functional.linear(x, self.weight, self.bias.to(x.dtype))


@needs_runner
def test_an_lm_head_bias_the_fused_loss_cannot_take_falls_back(monkeypatch):
    """A bias of another dtype than the lm_head's weight: the model's own
    loss, with one warning naming the fused loss's rule, no kernel of it
    loaded."""
    monkeypatch.setenv("LIGER_OPS_CPU_REFERENCE", "1")
    loaded = _record_loaded(monkeypatch)
    ids = tokens(6)
    ref = _biased_lm_head(tiny_model("llama", 14, BF16), 6, _HeadWithAnF32Bias)
    model = _biased_lm_head(tiny_model("llama", 14, BF16), 6, _HeadWithAnF32Bias)
    assert model.lm_head.bias.dtype == F32 and model.lm_head.weight.dtype == BF16
    lt.apply_liger_kernel(model, rope=False, rms_norm=False, swiglu=False)
    model.train()
    ref.train()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        losses = [model(input_ids=ids, labels=ids).loss for _ in range(2)]
    assert _fallback_warnings(caught) == [
        "liger: LlamaForCausalLM's loss runs its original forward: "
        "liger.ops.fused_linear_cross_entropy: bias must have the dtype of weight "
        "(torch.bfloat16), got torch.float32"]
    want = ref(input_ids=ids, labels=ids).loss
    assert torch.equal(losses[0], want) and torch.equal(losses[1], want)
    assert not [s for s in loaded if s.op == "fused_linear_cross_entropy"]


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


# --- lora=True: PEFT's LoRA layers through liger.ops.lora_linear -------------

LORA_TARGETS = ["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"]
LORA_PREFIX = "liger: PEFT's LoRA Linear runs its original forward: "


def lora_model(family, dtype, seed=0, **config):
    """A tiny model with a PEFT adapter (rank 16, alpha 32: scale 2) on
    every decoder projection, in the model's dtype, B random (PEFT starts
    it at 0)."""
    peft = pytest.importorskip("peft")
    options = dict(r=16, lora_alpha=32, lora_dropout=0.0, init_lora_weights=False,
                   target_modules=LORA_TARGETS)
    options.update(config)
    return peft.get_peft_model(tiny_model(family, seed, dtype), peft.LoraConfig(**options),
                               autocast_adapter_dtype=False)


def _lora_steps(model, steps=3):
    """SGD steps on fixed tokens: each step's loss and adapters' gradients
    (and the gradients of every other trainable parameter)."""
    ids = tokens(5)
    opt = torch.optim.SGD([p for p in model.parameters() if p.requires_grad], lr=0.1)
    model.train()
    out = []
    for _ in range(steps):
        loss, grads = _step(model, ids)
        opt.step()
        out.append((loss, grads))
    return out


def _lora_grads(grads):
    return {n: g.float() for n, g in grads.items() if "lora_" in n}


def _worst(grads, ref):
    """The largest ||g - r|| / ||r|| over the adapters' gradients."""
    return max(((g - ref[n]).norm() / ref[n].norm().clamp_min(1e-30)).item()
               for n, g in grads.items())


@needs_runner
@pytest.mark.parametrize("family,dtype", [("llama", "bf16"), ("qwen2", "bf16"),
                                          ("llama", "f32")])
def test_lora_trains_as_peft(monkeypatch, family, dtype):
    """A PEFT model patched with lora=True (and the family's defaults)
    trains as the unpatched one, step for step (SGD): in bf16 every LoRA
    layer runs the LoRA kernel's module (Qwen2's q/k/v with their biases),
    in f32 (no kernel takes f32) PEFT's forward, warned once.

    f32: the losses within 1e-5 and every gradient within 1e-4 of PEFT's.
    bf16: the losses within 1e-2; the adapters' gradients as close to the
    f32 model's (the same weights, unpatched) as PEFT's own bf16 ones are:
    PEFT's bf16 gradients are 2-10% from the f32 model's (||g - r|| /
    ||r||, measured), so no bf16 run can be held to 1e-2 of another."""
    monkeypatch.setenv("LIGER_OPS_CPU_REFERENCE", "1")
    loaded = _record_loaded(monkeypatch)
    dt = {"f32": F32, "bf16": BF16}[dtype]
    ref, model = lora_model(family, dt), lora_model(family, dt)
    f32_model = lora_model(family, dt).float()
    layers = lt._lora_layers(model)
    assert len(layers) == 14
    patched = lt.apply_liger_kernel(model.get_base_model(), lora=True, **_loss_flags(dtype))
    assert patched >= len(layers)
    assert all(vars(m)["forward"].__func__ is lt._lora_forward for m in layers)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        steps = _lora_steps(model)
    assert _fallback_warnings(caught) == ([] if dtype == "bf16" else [
        LORA_PREFIX + "liger.ops.lora_linear takes bf16 or f16 (its kernels are the matmul "
        "template's: wgmma and mma.sync), got f32"])
    lora_specs = [s for s in loaded if s.op == "lora_linear"]
    if dtype == "bf16":
        assert set(lora_specs) == {s.with_target("cpu") for s in lt.lora_kernel_specs(model)}
        assert len(set(lora_specs)) == (5 if family == "qwen2" else 4)  # (shapes, biases)
    else:
        assert lora_specs == [] and lt.lora_kernel_specs(model) == []
    want = _lora_steps(ref)
    exact = _lora_steps(f32_model) if dtype == "bf16" else None
    for i, ((loss, grads), (ref_loss, ref_grads)) in enumerate(zip(steps, want)):
        assert grads.keys() == ref_grads.keys()
        assert len(_lora_grads(grads)) == 28
        if dtype == "f32":
            assert torch.allclose(loss, ref_loss, rtol=1e-5), (i, loss, ref_loss)
            for name, g in grads.items():
                r = ref_grads[name]
                err = ((g - r).abs().max() / r.abs().max().clamp_min(1e-30)).item()
                assert err < 1e-4, (i, name, err)
            continue
        assert torch.allclose(loss.float(), ref_loss.float(), rtol=1e-2), (i, loss, ref_loss)
        truth = _lora_grads(exact[i][1])
        ours, pefts = _worst(_lora_grads(grads), truth), _worst(_lora_grads(ref_grads), truth)
        assert ours < max(2 * pefts, 0.05), (i, ours, pefts)


def _lora_falls_back(model, ref, message, flags=None, twice=True):
    """The patched model's forward is PEFT's, bit for bit, with `message`
    warned once over two forwards."""
    lt.apply_liger_kernel(model.get_base_model(), lora=True, rope=False, rms_norm=False,
                          swiglu=False, fused_linear_cross_entropy=False, **(flags or {}))
    ids = tokens(2)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        got = [model(input_ids=ids).logits for _ in range(2 if twice else 1)]
    assert _fallback_warnings(caught) == [message]
    want = ref(input_ids=ids).logits
    assert all(torch.equal(g, want) for g in got)


@pytest.mark.parametrize("case,config,message", [
    ("dropout", dict(lora_dropout=0.1),
     "its adapter's dropout is 0.1 (liger.ops.lora_linear has none: lora_dropout=0.0)"),
    ("rank 8", dict(r=8, lora_alpha=16),
     "rank must be 16, 32 or 64 (the kernel's second product is k16 MMAs over the rank, B's "
     "rows one TMA swizzle span), got 8"),
    ("DoRA", dict(use_dora=True),
     "its adapter 'default' is a variant of LoRA (DoRA or another: DoraLinearVariant)"),
    ("lora_bias", dict(lora_bias=True), "its lora_B has a bias (lora_bias=True)"),
], ids=["dropout", "rank8", "dora", "lora_bias"])
def test_lora_near_misses_stay_pefts(cpu_reference, case, config, message):
    """What the kernel does not compute (PEFT's dropout, a rank it does not
    take, DoRA, a bias on B) runs PEFT's forward, warned once, naming
    why."""
    ref, model = lora_model("llama", BF16, **config), lora_model("llama", BF16, **config)
    model.load_state_dict(ref.state_dict())
    model.eval()  # (PEFT's dropout then the identity: one forward, either way)
    ref.eval()
    _lora_falls_back(model, ref, LORA_PREFIX + message)


def test_lora_adapters_of_another_dtype_stay_pefts(cpu_reference):
    """PEFT's default autocast_adapter_dtype=True keeps bf16 models'
    adapters in f32: PEFT's forward, the warning naming the way out."""
    peft = pytest.importorskip("peft")
    models = [peft.get_peft_model(tiny_model("llama", 0, BF16), peft.LoraConfig(
        r=16, lora_alpha=32, target_modules=LORA_TARGETS)) for _ in range(2)]
    models[1].load_state_dict(models[0].state_dict())
    _lora_falls_back(models[1], models[0], LORA_PREFIX + (
        "its operands have several dtypes (x bfloat16, the base weight bfloat16, lora_A "
        "float32, lora_B float32; get_peft_model(..., autocast_adapter_dtype=False) keeps "
        "bf16/f16 adapters in the model's dtype)"))


def test_merged_and_disabled_adapters_stay_pefts(cpu_reference):
    ref, model = lora_model("llama", BF16), lora_model("llama", BF16)
    model.load_state_dict(ref.state_dict())
    with model.disable_adapter(), ref.disable_adapter():
        _lora_falls_back(model, ref, LORA_PREFIX + "its adapters are disabled")
    lt._WARNED.clear()
    model.merge_adapter()
    ref.merge_adapter()
    _lora_falls_back(model, ref, LORA_PREFIX + "its adapter is merged into the base layer")


def test_lora_patches_a_models_peft_layers_only():
    """PEFT's classes are not the family's: a class patch leaves them (and
    says so), and a model without LoRA layers has nothing to patch."""
    with pytest.warns(lt.LigerFallbackWarning) as caught:
        lt.apply_liger_kernel_to_llama(lora=True)
    assert _fallback_warnings(caught) == [
        "liger: lora=True: PEFT's LoRA layers stay as they are in a class patch (they are "
        "PEFT's classes, not the family's): give the model (model=...) to patch them"]
    lt.revert()
    lt._WARNED.clear()
    with pytest.warns(lt.LigerFallbackWarning) as caught:
        lt.apply_liger_kernel(tiny_model("llama", 0), lora=True)
    assert _fallback_warnings(caught) == [
        "liger: lora=True: LlamaForCausalLM has no PEFT LoRA Linear on q_proj, k_proj, v_proj, "
        "o_proj, gate_proj, up_proj, down_proj, qkv_proj or gate_up_proj: nothing to patch"]


def test_lora_kernel_specs_read_a_meta_model():
    """The specs precompile needs for a PEFT model, from its layers alone
    (a model on the meta device): one per shape, bias and dtype; none for
    layers the kernel refuses."""
    peft = pytest.importorskip("peft")
    with torch.device("meta"):  # (PEFT makes the factors f32 there)
        model = peft.get_peft_model(tiny_model("qwen2", 0, BF16), peft.LoraConfig(
            r=32, lora_alpha=16, target_modules=LORA_TARGETS)).to(BF16)
    s = lambda k, n, bias: ops.lora_linear_spec(k, n, 32, "bf16", 0.5, bias)  # noqa: E731
    assert set(lt.lora_kernel_specs(model)) == {
        s(32, 32, True), s(32, 16, True), s(32, 32, False), s(32, 64, False), s(64, 32, False)}
    assert lt.lora_kernel_specs(model, target="sm_80")[0].target == "sm_80"
    with torch.device("meta"):
        model = peft.get_peft_model(tiny_model("qwen2", 0, BF16), peft.LoraConfig(
            r=8, target_modules=LORA_TARGETS)).to(BF16)
    assert lt.lora_kernel_specs(model) == []
