"""The GPUs liger has kernels for (liger.specs.CAPABILITIES): each compute
capability maps to one target, and every kernel a patched model of a real
configuration calls, compiled for each target, fits the shared memory of
every GPU that target runs on. A kernel sized for the A100's 163 KB fails
to launch on an 8.6 or 8.9 GPU, which allow a block 99 KB."""

import json
import os
import shutil
import types

import pytest

from liger import ops, specs

torch = pytest.importorskip("torch")
from liger import transformers as lt  # noqa: E402 (needs torch)

needs_ptxas = pytest.mark.skipif(
    not shutil.which("ptxas") and not os.path.exists("/usr/local/cuda/bin/ptxas"),
    reason="ptxas (CUDA toolkit) not found: cannot compile bundles")

# Llama-3-8B (the largest row, a 128256-word vocabulary) and Gemma-7B
# (head_dim 256, a 256000-word vocabulary).
CONFIGS = {
    "llama3-8b": dict(model_type="llama", hidden_size=4096, intermediate_size=14336,
                      vocab_size=128256, num_attention_heads=32, num_key_value_heads=8,
                      rms_norm_eps=1e-5),
    "gemma-7b": dict(model_type="gemma", hidden_size=3072, intermediate_size=24576,
                     vocab_size=256000, num_attention_heads=16, num_key_value_heads=16,
                     head_dim=256, rms_norm_eps=1e-6),
}


def test_each_capability_maps_to_its_target():
    assert specs.target_for_capability(9, 0) == "sm_90a"
    assert specs.target_for_capability(8, 0) == "sm_80"
    assert specs.target_for_capability(8, 7) == "sm_80"
    assert specs.target_for_capability(8, 6) == "sm_86"
    assert specs.target_for_capability(8, 9) == "sm_86"
    for unknown in ((7, 5), (8, 8), (9, 1), (10, 0), (12, 0)):
        assert specs.target_for_capability(*unknown) is None, unknown
    assert set(t for t, _ in specs.CAPABILITIES.values()) == set(specs.GPU_TARGETS)
    assert specs.targets_text() == "sm_90a (9.0), sm_80 (8.0, 8.7), sm_86 (8.6, 8.9)"


def _shared_memory(bundle):
    """(kernel, dynamic shared memory bytes) of every kernel of a bundle
    (a reduction's finishing kernel too)."""
    found = []

    def walk(node):
        if isinstance(node, dict):
            if "dynamic_shared_memory_bytes" in node:
                found.append((node["name"], node["dynamic_shared_memory_bytes"]))
            for value in node.values():
                walk(value)
        elif isinstance(node, list):
            for value in node:
                walk(value)
    with open(os.path.join(bundle, "manifest.json")) as f:
        walk(json.load(f))
    return found


@needs_ptxas
@pytest.mark.parametrize("target", specs.GPU_TARGETS)
def test_every_kernel_fits_each_gpu_of_its_target(target, tmp_path):
    limit = min(smem for t, smem in specs.CAPABILITIES.values() if t == target)
    largest = 0
    for name, config in CONFIGS.items():
        model_specs = lt.kernel_specs(types.SimpleNamespace(**config), "bf16")
        paths = ops.precompile(str(tmp_path), model_specs, target)
        for spec, path in zip(model_specs, paths):
            manifest = json.load(open(os.path.join(path, "manifest.json")))
            assert [m["arch"] for m in manifest["modules"]] == [target]
            for kernel, smem in _shared_memory(path):
                assert smem <= limit, "%s %s: %s needs %d bytes of shared memory, %s GPUs " \
                    "allow %d" % (name, spec, kernel, smem, target, limit)
                largest = max(largest, smem)
    # The cross-entropy over a large vocabulary stages what fits: the
    # budget is used, not left idle.
    assert largest > limit * 0.9, largest
