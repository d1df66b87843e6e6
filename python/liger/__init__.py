"""liger: a fusion compiler for transformer layers on NVIDIA GPUs.

This package is the Python face of the compiler:

- `liger.driver`: `liger-opt` (parse, verify, run passes, summarize);
- `liger.reference`: `liger-cpu-runner`, functions on NumPy arrays on the
  CPU (the numerical oracle) and the before/after-pass check;
- `liger.compiler`: `compile(...)` a module to a kernel bundle, cached on disk;
- `liger.runtime`: load a bundle, call its kernels on torch CUDA tensors
  (needs the `_liger_runtime` extension: scripts/build-runtime.sh);
- `liger.torch_ops`: kernels as `torch.ops` operators, with autograd.
- `liger.ops`: fused ops (rms_norm, swiglu, geglu, softmax, rope) as
  differentiable functions on torch tensors (`python -m liger.ops
  precompile` for machines without the compiler).
- `liger.nn`: Liger-Kernel's modules (LigerRMSNorm, the gated MLPs, the
  losses) over liger.ops, with Liger-Kernel's constructor arguments.

Importing `liger` needs neither torch nor a GPU.
"""

from liger.driver import LigerError, Summary, find_tool, run_opt, summarize
from liger.reference import BF16, assert_close, run_before_after, run_cpu, to_bf16
from liger.compiler import Compiled, compile  # noqa: A004 (liger.compile is the API)

__all__ = ["BF16", "Compiled", "LigerError", "Summary", "assert_close", "compile", "find_tool",
           "run_before_after", "run_cpu", "run_opt", "summarize", "to_bf16"]
__version__ = "0.1.0"
