"""liger: a fusion compiler for transformer layers on NVIDIA GPUs.

This package is the Python face of the compiler:

- `liger.driver`: `liger-opt` (parse, verify, run passes, summarize);
- `liger.reference`: `liger-cpu-runner`, functions on NumPy arrays on the
  CPU (the numerical oracle) and the before/after-pass check;
- `liger.compiler`: `compile(...)` a module to a kernel bundle, cached on disk;
- `liger.runtime`: load a bundle, call its kernels on torch CUDA tensors
  (needs the `_liger_runtime` extension: scripts/build-runtime.sh);
- `liger.torch_ops`: kernels as `torch.ops` operators, with autograd.
- `liger.ops`: fused ops (rms_norm, add_rms_norm, layer_norm, swiglu,
  geglu, softmax, rope, the losses) as differentiable functions on torch
  tensors (`python -m liger.ops precompile` for machines without the
  compiler).
- `torch.compile(model, backend="liger")`, `liger.compile_model(model)`:
  the torch.compile backend (liger.frontend.backend), registered with
  torch's dynamo when this package is imported and torch is installed.
- `liger.nn`: Liger-Kernel's modules (LigerRMSNorm, LigerFusedAddRMSNorm,
  LigerLayerNorm, the gated MLPs, the losses) over liger.ops, with
  Liger-Kernel's constructor arguments.

`liger.installation` says what this liger is (`python -m liger --version`,
`liger info`). Importing `liger` needs neither torch nor a GPU.
"""

import importlib.abc
import importlib.util
import sys

from liger.driver import LigerError, Summary, find_tool, run_opt, summarize
from liger.reference import BF16, assert_close, run_before_after, run_cpu, to_bf16
from liger.compiler import Compiled, compile  # noqa: A004 (liger.compile is the API)

__all__ = ["BF16", "Compiled", "LigerError", "Summary", "assert_close", "compile",
           "compile_model", "find_tool", "run_before_after", "run_cpu", "run_opt", "summarize",
           "to_bf16"]
from liger.installation import version as _version

__version__ = _version()


def compile_model(model, **options):
    """torch.compile(model, backend="liger") for a training step
    (liger.frontend.backend.compile_model: its options and reports)."""
    from liger.frontend.backend import compile_model as compile_with_liger
    return compile_with_liger(model, **options)


def _liger_backend(gm, example_inputs, **kwargs):
    """torch.compile's backend "liger" (liger.frontend.backend, imported at
    its first graph)."""
    from liger.frontend.backend import liger_backend
    return liger_backend(gm, example_inputs, **kwargs)


_REGISTRY = "torch._dynamo.backends.registry"


def _register(registry) -> None:
    if "liger" not in getattr(registry, "_COMPILER_FNS", {}):
        registry.register_backend(compiler_fn=_liger_backend, name="liger")


class _RegisterWhenImported(importlib.abc.MetaPathFinder):
    """Registers the backend once torch's dynamo registry is imported: torch
    is not imported for it (an import of liger stays light), and a
    torch.compile(backend="liger") after `import liger` finds it."""

    def find_spec(self, fullname, path, target=None):
        if fullname != _REGISTRY:
            return None
        sys.meta_path.remove(self)
        spec = importlib.util.find_spec(fullname)
        if spec is not None and spec.loader is not None:
            run = spec.loader.exec_module

            def exec_module(module):
                run(module)
                _register(module)
            spec.loader.exec_module = exec_module
        return spec


if _REGISTRY in sys.modules:
    _register(sys.modules[_REGISTRY])
elif importlib.util.find_spec("torch") is not None:
    sys.meta_path.insert(0, _RegisterWhenImported())
