"""liger: a fusion compiler for transformer layers on NVIDIA GPUs.

This package is the Python face of the compiler. For now it drives the
tools of a liger build: `liger-opt` (parse, verify, run passes, summarize)
and `liger-cpu-runner` (run a function on NumPy arrays: the CPU reference);
the pybind11 extensions for compiling bundles and launching kernels come
with the runtime.
"""

from liger.driver import LigerError, Summary, find_tool, run_opt, summarize
from liger.reference import BF16, assert_close, run_before_after, run_cpu, to_bf16

__all__ = ["BF16", "LigerError", "Summary", "assert_close", "find_tool", "run_before_after",
           "run_cpu", "run_opt", "summarize", "to_bf16"]
__version__ = "0.1.0"
