"""liger.integration: the Hugging Face Trainer with LigerCallback trains a
tiny Llama as the unpatched model does (the patched functions run by the
reference lowering, LIGER_OPS_CPU_REFERENCE=1), and Liger-Kernel's names
(_apply_liger_kernel_to_instance, AutoLigerKernelForCausalLM's loading)
patch what they say."""
import os
import subprocess
import sys
import warnings

import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")
pytest.importorskip("accelerate")  # the Trainer's

from liger import integration  # noqa: E402
from liger import transformers as lt  # noqa: E402
from liger.errors import LigerError  # noqa: E402
from test_transformers import _clean, needs_runner, tiny_config, tokens  # noqa: E402,F401


class Batches(torch.utils.data.Dataset):
    """Eight sequences of 6 tokens, their own labels."""

    def __init__(self):
        self.ids = torch.cat([tokens(s) for s in range(4)])

    def __len__(self):
        return len(self.ids)

    def __getitem__(self, i):
        return {"input_ids": self.ids[i], "labels": self.ids[i]}


def _train(tmp_path, callbacks, steps=6):
    """The training losses of `steps` steps of a tiny Llama (seed 3)."""
    torch.manual_seed(3)
    model = transformers.AutoModelForCausalLM.from_config(tiny_config("llama"))
    args = transformers.TrainingArguments(
        output_dir=str(tmp_path), max_steps=steps, per_device_train_batch_size=4,
        learning_rate=3e-3, logging_steps=1, report_to=[], save_strategy="no",
        use_cpu=True, seed=3, data_seed=3, disable_tqdm=True)
    trainer = transformers.Trainer(model=model, args=args, train_dataset=Batches(),
                                   callbacks=callbacks)
    trainer.train()
    return [e["loss"] for e in trainer.state.log_history if "loss" in e], model


# The f32 model's loss on the logits (the fused linear cross-entropy's
# kernels take bf16/f16).
F32_FLAGS = dict(cross_entropy=True, fused_linear_cross_entropy=False)


@needs_runner
def test_trainer_with_the_callback_trains_as_the_unpatched_model(tmp_path, monkeypatch):
    monkeypatch.setenv("LIGER_OPS_CPU_REFERENCE", "1")
    ref_losses, _ = _train(tmp_path / "ref", [])
    callback = integration.LigerCallback(**F32_FLAGS)
    with warnings.catch_warnings():
        warnings.simplefilter("error", lt.LigerFallbackWarning)  # nothing falls back
        losses, model = _train(tmp_path / "liger", [callback])
    # 2 layers x 2 norms + the final norm, 2 MLPs, the causal LM.
    assert callback.patched == (model, 5 + 2 + 1)
    assert model.model.norm.forward.__func__ is lt._rms_norm_forward
    assert len(losses) == len(ref_losses) == 6
    assert losses[-1] < losses[0] - 0.05, losses  # it learns
    for got, want in zip(losses, ref_losses):
        assert got == pytest.approx(want, rel=1e-4), (losses, ref_losses)


def test_a_callback_added_after_construction_patches_at_train_begin():
    model = transformers.AutoModelForCausalLM.from_config(tiny_config("llama"))
    callback = integration.LigerCallback()
    callback.on_train_begin(None, None, None, model=model)
    callback.on_train_begin(None, None, None, model=model)  # once
    assert callback.patched == (model, 8)
    assert model.model.norm.forward.__func__ is lt._rms_norm_forward


def test_apply_to_instance_takes_liger_kernels_flags():
    model = transformers.AutoModelForCausalLM.from_config(tiny_config("qwen2"))
    assert integration._apply_liger_kernel_to_instance(
        model=model, rms_norm=False, swiglu=True, fused_linear_cross_entropy=False) == 2
    assert "forward" not in vars(model.model.norm)


def test_apply_to_instance_refuses_a_flag_the_family_does_not_take():
    model = transformers.AutoModelForCausalLM.from_config(tiny_config("llama"))
    with pytest.raises(LigerError, match=r"^liger.transformers' llama patch takes no geglu, "
                       r"layer_norm \(its flags: rope, cross_entropy, "
                       r"fused_linear_cross_entropy, rms_norm, swiglu, lora, "
                       r"fuse_norm_linear, fuse_qkv_rope, fused_mlp, loss_memory_budget, "
                       r"attention\)$"):
        integration._apply_liger_kernel_to_instance(model, geglu=True, layer_norm=True)
    assert "forward" not in vars(model.model.norm)  # nothing was patched


def test_auto_model_patches_on_load_and_passes_the_rest_to_transformers(tmp_path):
    config = tiny_config("gemma")
    model = lt.AutoModelForCausalLM.from_config(config, geglu=False, torch_dtype=torch.float64)
    assert model.dtype == torch.float64  # transformers' argument reached it
    assert model.model.norm.forward.__func__ is lt._rms_norm_forward
    assert "forward" not in vars(model.model.layers[0].mlp)  # geglu=False
    model.save_pretrained(tmp_path)
    loaded = lt.AutoModelForCausalLM.from_pretrained(tmp_path, rms_norm=False)
    assert "forward" not in vars(loaded.model.norm)
    assert loaded.model.layers[0].mlp.forward.__func__ is lt._mlp_forward


def test_auto_model_refuses_a_model_type_liger_does_not_patch():
    config = transformers.GPT2Config(n_layer=1, n_embd=32, n_head=2, vocab_size=64)
    with pytest.raises(LigerError, match="not model_type 'gpt2'"):
        lt.AutoModelForCausalLM.from_config(config)


@pytest.mark.parametrize("package", ["torch", "transformers"])
def test_a_missing_package_is_named_with_its_install_command(package):
    code = "import sys; sys.modules[%r] = None; import liger.integration" % package
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          env=dict(os.environ, PYTHONPATH=os.path.join(
                              os.path.dirname(__file__), "..", "..", "python")))
    assert proc.returncode == 1
    assert proc.stderr.strip().splitlines()[-1] == (
        "ImportError: liger.integration needs %s, which is not installed: pip install %s "
        "(or pip install 'liger[transformers]')" % (package, package))
