"""The tiny model configurations of the GPU parity suite
(test_transformers_parity.py), as keyword arguments of Hugging Face's
configs: scripts/build-gpu-bundles.sh precompiles their kernels from these
(liger.transformers.kernel_specs reads the attributes alone, so building
them needs no model; fuse_qkv_rope's specs follow the installed
transformers' attention classes)."""
import types

COMMON = dict(hidden_size=256, intermediate_size=512, num_hidden_layers=2,
              num_attention_heads=4, num_key_value_heads=2, vocab_size=2048,
              max_position_embeddings=256, rms_norm_eps=1e-5)
# No special tokens (some families' defaults lie beyond the vocabulary).
NO_TOKENS = dict(pad_token_id=None, bos_token_id=None, eos_token_id=None)
GEGLU = dict(hidden_act="gelu_pytorch_tanh", hidden_activation="gelu_pytorch_tanh")
TINY = {
    "llama": dict(COMMON, model_type="llama"),
    "qwen2": dict(COMMON, model_type="qwen2"),
    # Gemma: multi-query attention, GeGLU, RMSNorm scaled by 1 + w.
    "gemma": dict(COMMON, model_type="gemma", num_key_value_heads=1, head_dim=64, **GEGLU),
    # Gemma 2 and 3: sandwich norms, a sliding window shorter than the
    # sequence; Gemma 2's logits softcapped in the loss and its scores in the
    # attention (its config's default, said here for kernel_specs: a model
    # patched with attention=True runs liger.ops.attention with it), Gemma
    # 3's q/k norms.
    "gemma2": dict(COMMON, model_type="gemma2", head_dim=64, query_pre_attn_scalar=64,
                   final_logit_softcapping=30.0, attn_logit_softcapping=50.0, sliding_window=32,
                   **GEGLU, **NO_TOKENS),
    "gemma3_text": dict(COMMON, model_type="gemma3_text", head_dim=64, query_pre_attn_scalar=64,
                        sliding_window=32, **GEGLU, **NO_TOKENS),
    # Phi-3: fused qkv and gate_up projections.
    "phi3": dict(COMMON, model_type="phi3", **NO_TOKENS),
    # Granite: its multipliers, the logits scaled down before the loss.
    "granite": dict(COMMON, model_type="granite", embedding_multiplier=12.0,
                    residual_multiplier=0.22, attention_multiplier=0.015625, logits_scaling=8.0,
                    **NO_TOKENS),
    # OLMo 2: norms after attention and MLP, q/k norms over the projections.
    "olmo2": dict(COMMON, model_type="olmo2", **NO_TOKENS),
    # GLM-4: RoPE over half the head (the model's own), fused gate_up.
    "glm4": dict(COMMON, model_type="glm4", head_dim=64, **NO_TOKENS),
    "smollm3": dict(COMMON, model_type="smollm3", **NO_TOKENS),
    # MoE: 4 experts (2 a token), the router's loss in the loss; Qwen3-MoE
    # with a dense layer, Llama 4 a dense layer then an MoE one.
    "mixtral": dict(COMMON, model_type="mixtral", num_local_experts=4, num_experts_per_tok=2,
                    output_router_logits=True, router_aux_loss_coef=0.02, **NO_TOKENS),
    "qwen3_moe": dict(COMMON, model_type="qwen3_moe", head_dim=64, num_experts=4,
                      num_experts_per_tok=2, moe_intermediate_size=256, mlp_only_layers=[1],
                      output_router_logits=True, router_aux_loss_coef=0.02, **NO_TOKENS),
    "llama4_text": dict(COMMON, model_type="llama4_text", head_dim=64, intermediate_size=256,
                        intermediate_size_mlp=512, num_local_experts=4, num_experts_per_tok=1,
                        interleave_moe_layer_step=2, **NO_TOKENS),
}
# The attention each family's model runs: SDPA, but Gemma 2's softcapped
# scores are its eager attention's alone.
ATTENTION = {"gemma2": "eager"}
DTYPES = ("bf16", "f32")


# PEFT adapters of the parity suite: "peft" (rank 8 on q/k/v/o, PEFT's
# f32 factors: PEFT's own forward, the base model patched) and "liger"
# (rank 16 on every decoder projection, in the model's dtype: lora=True
# runs each through liger.ops.lora_linear).
LORA = {
    "peft": dict(r=8, lora_alpha=16, lora_dropout=0.0,
                 target_modules=["q_proj", "k_proj", "v_proj", "o_proj"]),
    "liger": dict(r=16, lora_alpha=32, lora_dropout=0.0,
                  target_modules=["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj",
                                  "up_proj", "down_proj"]),
}
# (family, dtype) of the parity suite's lora=True cases.
LORA_KERNEL_CASES = (("llama", "bf16"), ("qwen2", "bf16"))


def peft_model(model, lora):
    """`model` with the PEFT adapter LORA[lora]."""
    from peft import LoraConfig, get_peft_model
    return get_peft_model(model, LoraConfig(**LORA[lora]),
                          autocast_adapter_dtype=lora != "liger")


def lora_specs():
    """The LoRA kernels of LORA_KERNEL_CASES' models (built on the meta
    device: needs transformers and PEFT)."""
    import torch
    import transformers
    from liger import transformers as lt
    out = []
    for family, dt in LORA_KERNEL_CASES:
        kw = dict(TINY[family])
        config = transformers.AutoConfig.for_model(kw.pop("model_type"), **kw)
        dtype = {"bf16": torch.bfloat16, "f32": torch.float32}[dt]
        with torch.device("meta"):  # (PEFT makes the factors f32 there)
            model = peft_model(transformers.AutoModelForCausalLM.from_config(config), "liger")
        out += lt.lora_kernel_specs(model.to(dtype))
    return out


def namespace(family):
    """The configuration as an object with its attributes."""
    return types.SimpleNamespace(**TINY[family])


def specs():
    """Every liger.ops spec the patched tiny models call (with fused_mlp=True,
    fuse_qkv_rope=True and attention=True too), and those of
    examples/fsdp2_train.py's model (the 2-GPU run of scripts/gpu-check.sh)."""
    import os
    import sys
    from liger import transformers as lt
    out = []
    for family in TINY:
        for dt in DTYPES:
            out += lt.kernel_specs(namespace(family), dt, fused_mlp=True, fuse_qkv_rope=True,
                                   attention=True)
    sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "..", "examples"))
    import fsdp2_train
    out += lt.kernel_specs(types.SimpleNamespace(**fsdp2_train.CONFIG), "bf16")
    return sorted(set(out), key=str)
