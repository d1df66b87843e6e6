"""The tiny model configurations of the GPU parity suite
(test_transformers_parity.py), as keyword arguments of Hugging Face's
configs: scripts/build-gpu-bundles.sh precompiles their kernels from these
(liger.transformers.kernel_specs reads the attributes alone, so building
them needs no transformers)."""
import types

COMMON = dict(hidden_size=256, intermediate_size=512, num_hidden_layers=2,
              num_attention_heads=4, num_key_value_heads=2, vocab_size=2048,
              max_position_embeddings=256, rms_norm_eps=1e-5)
TINY = {
    "llama": dict(COMMON, model_type="llama"),
    "qwen2": dict(COMMON, model_type="qwen2"),
    # Gemma: multi-query attention, GeGLU, RMSNorm scaled by 1 + w.
    "gemma": dict(COMMON, model_type="gemma", num_key_value_heads=1, head_dim=64,
                  hidden_act="gelu_pytorch_tanh", hidden_activation="gelu_pytorch_tanh"),
}
DTYPES = ("bf16", "f32")


def namespace(family):
    """The configuration as an object with its attributes."""
    return types.SimpleNamespace(**TINY[family])


def specs():
    """Every liger.ops spec the patched tiny models call, and those of
    examples/fsdp2_train.py's model (the 2-GPU run of scripts/gpu-check.sh)."""
    import os
    import sys
    from liger import transformers as lt
    out = []
    for family in TINY:
        for dt in DTYPES:
            out += lt.kernel_specs(namespace(family), dt)
    sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "..", "examples"))
    import fsdp2_train
    out += lt.kernel_specs(types.SimpleNamespace(**fsdp2_train.CONFIG), "bf16")
    return sorted(set(out), key=str)
