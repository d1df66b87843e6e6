"""liger in the Hugging Face Trainer and TRL, under Liger-Kernel's names.

    from liger.integration import LigerCallback
    trainer = Trainer(model=model, args=args, train_dataset=data,
                      callbacks=[LigerCallback()])      # TRL's SFTTrainer alike

The callback patches the trainer's model (a PEFT model: its base) with
liger's kernels when the trainer is built (`on_init_end`), or at the start
of training where it was added later; the flags are liger.transformers'
(`LigerCallback(rope=False, cross_entropy=True, fused_linear_cross_entropy=
False)`). For code written against Liger-Kernel:

    _apply_liger_kernel_to_instance(model, **kwargs)   # the Trainer's hook
    model = AutoModelForCausalLM.from_pretrained(path, **kwargs)
    model = AutoModelForCausalLM.from_config(config, **kwargs)

`AutoModelForCausalLM` is Liger-Kernel's `AutoLigerKernelForCausalLM`:
the keyword arguments that are liger flags patch the model; the rest go to
transformers. liger.transformers re-exports these names.
"""

import importlib.util
import inspect

for _package in ("torch", "transformers"):
    if importlib.util.find_spec(_package) is None:
        raise ImportError("liger.integration needs %s, which is not installed: pip install %s "
                          "(or pip install 'liger[transformers]')" % (_package, _package))

import transformers as hf  # noqa: E402

from . import transformers as lt  # noqa: E402
from .errors import LigerError  # noqa: E402


def _flags_of(model_type):
    """The flags liger.transformers' entry point for `model_type` takes."""
    apply = lt._APPLY[model_type]
    return [name for name in inspect.signature(apply).parameters if name != "model"]


def _split(model_type, kwargs):
    """(liger flags, the rest) of `kwargs`."""
    flags = _flags_of(model_type)
    return ({k: v for k, v in kwargs.items() if k in flags},
            {k: v for k, v in kwargs.items() if k not in flags})


def _apply_liger_kernel_to_instance(model, **kwargs):
    """Patches `model`, a Hugging Face model already built, by its config's
    model_type: Liger-Kernel's function of this name, which the Trainer
    calls with its `liger_kernel_config`. Returns the number of modules
    patched. A flag the family does not take is an error naming the ones it
    does (Liger-Kernel drops it)."""
    family = lt._model_type(model.config)
    flags, unknown = _split(family, kwargs)
    if unknown:
        raise LigerError("liger.transformers' %s patch takes no %s (its flags: %s)"
                         % (family, ", ".join(sorted(unknown)),
                            ", ".join(_flags_of(family))))
    return lt.apply_liger_kernel(model, **flags)


class LigerCallback(hf.TrainerCallback):
    """Patches the trainer's model with liger's kernels, once: at the end of
    the trainer's construction, or at the start of training for a callback
    added afterwards (`trainer.add_callback`)."""

    def __init__(self, **flags):
        self.flags = flags
        self.patched = None  # the model patched, and the modules it had

    def _patch(self, model):
        if model is None or self.patched is not None and self.patched[0] is model:
            return
        self.patched = (model, _apply_liger_kernel_to_instance(model, **self.flags))

    def on_init_end(self, args, state, control, model=None, **kwargs):
        self._patch(model)

    def on_train_begin(self, args, state, control, model=None, **kwargs):
        self._patch(model)


class AutoModelForCausalLM:
    """transformers.AutoModelForCausalLM, the model patched on load
    (Liger-Kernel's AutoLigerKernelForCausalLM): liger flags among the
    keyword arguments choose what is patched, the rest go to
    transformers."""

    @classmethod
    def from_pretrained(cls, pretrained_model_name_or_path, *args, **kwargs):
        config = hf.AutoConfig.from_pretrained(
            pretrained_model_name_or_path,
            trust_remote_code=kwargs.get("trust_remote_code", False))
        flags, rest = _split(lt._model_type(config), kwargs)
        model = hf.AutoModelForCausalLM.from_pretrained(pretrained_model_name_or_path,
                                                        *args, **rest)
        lt.apply_liger_kernel(model, **flags)
        return model

    @classmethod
    def from_config(cls, config, **kwargs):
        flags, rest = _split(lt._model_type(config), kwargs)
        model = hf.AutoModelForCausalLM.from_config(config, **rest)
        lt.apply_liger_kernel(model, **flags)
        return model
