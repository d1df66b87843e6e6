"""liger: a fusion compiler for transformer layers on NVIDIA GPUs.

This package is the Python face of the compiler. For now it drives the
`liger-opt` tool of a liger build (parse, verify, run passes, summarize);
the pybind11 extensions for compiling bundles and launching kernels come
with the runtime.
"""

from liger.driver import LigerError, Summary, find_tool, run_opt, summarize

__all__ = ["LigerError", "Summary", "find_tool", "run_opt", "summarize"]
__version__ = "0.1.0"
