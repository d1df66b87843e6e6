"""Where this liger is and what it was built with.

An installed liger (`pip install .`, or `cmake --install` into a prefix)
carries `liger/_build_info.py`, written by CMake at install
(cmake/LigerInstall.cmake): its version, whether the compiler's tools were
built and where they are, and whether the LibTorch operators were. A
checkout has no such file: its version is read from the top-level
CMakeLists.txt (`project(liger VERSION ...)`, the one place it is written)
and its tools and extension are in the build directories (build/,
build-runtime-py/; `LIGER_BUILD_DIR`). This module imports nothing but the
standard library.
"""

import os
import re
from typing import List, Optional

PACKAGE_DIR = os.path.dirname(os.path.abspath(__file__))
# The checkout this package is in, where it is in one (python/liger).
_CHECKOUT = os.path.dirname(os.path.dirname(PACKAGE_DIR))

try:
    from . import _build_info  # type: ignore[attr-defined]
except ImportError:  # a checkout
    _build_info = None


def installed() -> bool:
    """True for an installed liger (a wheel or a CMake prefix)."""
    return _build_info is not None


def version() -> str:
    """liger's version: the installed one's, else the checkout's."""
    if _build_info is not None:
        return _build_info.VERSION
    cmake = os.path.join(_CHECKOUT, "CMakeLists.txt")
    try:
        with open(cmake) as f:
            match = re.search(r"^project\(liger VERSION ([0-9.]+)", f.read(), re.M)
    except OSError:
        match = None
    if not match:
        raise RuntimeError("cannot tell liger's version: %s is neither an installed liger "
                           "(no _build_info.py) nor in a checkout (no project(liger VERSION ...) "
                           "in %s)" % (PACKAGE_DIR, cmake))
    return match.group(1)


def tools_dir() -> Optional[str]:
    """The folder of an installed liger's tools; None in a checkout."""
    if _build_info is None:
        return None
    return os.path.normpath(os.path.join(PACKAGE_DIR, _build_info.TOOLS_DIR))


def has_compiler() -> Optional[bool]:
    """Whether the installed liger has the compiler's tools (MLIR 22 was found
    when it was built); None in a checkout, where build/ decides."""
    return None if _build_info is None else bool(_build_info.COMPILER)


def tool_candidates(name: str) -> List[str]:
    """Where a liger tool may be, in order: $LIGER_BUILD_DIR/bin, the installed
    tools' folder, then build/bin of the checkout."""
    candidates = []
    if os.environ.get("LIGER_BUILD_DIR"):
        candidates.append(os.path.join(os.environ["LIGER_BUILD_DIR"], "bin", name))
    if tools_dir():
        candidates.append(os.path.join(tools_dir(), name))
    if _build_info is None:
        candidates.append(os.path.join(_CHECKOUT, "build", "bin", name))
    return candidates


def library_candidates(filename: str) -> List[str]:
    """Where a compiled part of the package (libliger_torch_ops.so) may be:
    inside the package when installed, then every folder of sys.path (the
    development layout puts build-runtime-py/python there)."""
    import sys
    return [os.path.join(d, filename) for d in [PACKAGE_DIR] + sys.path if d]


def describe() -> str:
    """A few lines: the version, where this liger is, what it has."""
    lines = ["liger %s" % version(), "package: %s" % PACKAGE_DIR]
    if _build_info is None:
        lines.append("a checkout: tools from $LIGER_BUILD_DIR/bin or build/bin, the runtime "
                     "extension from PYTHONPATH (scripts/build-runtime.sh)")
    else:
        lines.append("compiler: %s" % ("liger-opt, liger-compile, liger-cpu-runner in %s"
                                       % tools_dir() if _build_info.COMPILER else
                                       "not built (no MLIR 22 where it was built): runtime "
                                       "only, for precompiled bundles (LIGER_OPS_BUNDLES)"))
        lines.append("torch operators: %s" % ("built against torch %s" % _build_info.TORCH_VERSION
                                              if _build_info.TORCH_OPS else
                                              "not built (torch was not importable at build "
                                              "time: pip install --no-build-isolation)"))
    return "\n".join(lines)
