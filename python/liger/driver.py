"""Runs liger-opt from Python and reads its reports.

`find_tool` locates the binary ($LIGER_OPT, then $LIGER_BUILD_DIR/bin, then
the installed package's tools, then build/bin of this checkout, then PATH:
liger.installation); `run_opt` runs it on MLIR text and
raises LigerError with the tool's diagnostics when it fails; `summarize`
parses the report of the liger-print-summary pass.
"""

import os
import re
import shutil
import subprocess
from dataclasses import dataclass, field
from typing import Dict, List, Optional, Sequence

from . import installation
from .errors import LigerError


def _is_liger_command(path: str) -> bool:
    """Whether `path` is one of this package's own commands (pip's script
    for a [project.scripts] entry: `from liger.cli import ...`), which
    finds and runs the real tool, so never is one."""
    try:
        with open(path, "rb") as f:
            head = f.read(1024)
    except OSError:
        return False
    return head.startswith(b"#!") and b"from liger.cli import" in head


def _on_path(name: str) -> Optional[str]:
    """The first `name` on PATH that is a tool, not liger's own command of
    that name (a runtime-only wheel installs liger-opt as that command:
    taking it for the tool, a caller would run a command that can only
    say there is no compiler)."""
    for folder in os.environ.get("PATH", "").split(os.pathsep):
        path = shutil.which(name, path=folder or os.curdir)
        if path and not _is_liger_command(path):
            return path
    return None


def find_tool(name: str = "liger-opt") -> str:
    """Returns the path of a liger tool or raises LigerError saying where it looked."""
    candidates = []
    env = os.environ.get("LIGER_OPT") if name == "liger-opt" else None
    if env:
        candidates.append(env)
    candidates += installation.tool_candidates(name)
    for path in candidates:
        if os.path.isfile(path) and os.access(path, os.X_OK):
            return path
    on_path = _on_path(name)
    if on_path:
        return on_path
    if installation.has_compiler() is False and name != "liger-bundle":
        raise LigerError("cannot find %s: this liger (%s) was built without the compiler (no "
                         "MLIR 22 where it was built), and none is in %s or on PATH. Install "
                         "LLVM/MLIR 22 (Debian: apt-get install llvm-22-dev libmlir-22-dev "
                         "mlir-22-tools) and reinstall liger, or use bundles precompiled "
                         "elsewhere (LIGER_OPS_BUNDLES)."
                         % (name, installation.PACKAGE_DIR, ", ".join(candidates)))
    raise LigerError("cannot find %s; looked in %s and on PATH. Build it with "
                     "scripts/build.sh or set LIGER_BUILD_DIR." % (name, ", ".join(candidates)))


def run_opt(mlir: str, args: Sequence[str] = (), tool: Optional[str] = None) -> str:
    """Runs liger-opt with `args` on the MLIR text `mlir`; returns its stdout.

    Raises LigerError carrying the diagnostics when liger-opt rejects the input.
    """
    exe = tool or find_tool()
    proc = subprocess.run([exe, "-", *args], input=mlir, capture_output=True, text=True)
    if proc.returncode < 0:
        raise LigerError("liger-opt was killed by signal %d" % -proc.returncode, proc.stderr)
    if proc.returncode != 0:
        raise LigerError("liger-opt failed (exit %d)" % proc.returncode, proc.stderr.strip())
    return proc.stdout


@dataclass
class Summary:
    """The liger-print-summary report of one function."""

    function: str
    liger_ops: Dict[str, int] = field(default_factory=dict)
    other_ops: Dict[str, int] = field(default_factory=dict)
    weight_elements: int = 0
    weight_mib: float = 0.0
    projection_flops_per_token: int = 0


def _number(text: str) -> int:
    return int(text.replace(",", ""))


def summarize(mlir: str, canonicalize: bool = True, tool: Optional[str] = None) -> List[Summary]:
    """Verifies `mlir` and returns one Summary per function with a body."""
    args = (["--canonicalize"] if canonicalize else []) + ["--liger-print-summary", "-o", os.devnull]
    report = run_opt(mlir, args, tool)
    summaries: List[Summary] = []
    for line in report.splitlines():
        if line.startswith("liger summary of @"):
            summaries.append(Summary(function=line[len("liger summary of @"):]))
            continue
        if not summaries:
            continue
        current = summaries[-1]
        stripped = line.strip()
        op = re.match(r"(liger\.\w+)\s+(\d+)", stripped)
        if op:
            current.liger_ops[op.group(1)] = int(op.group(2))
        elif stripped.startswith("other ops:"):
            for name, count in re.findall(r"([\w.]+) x(\d+)", stripped):
                current.other_ops[name] = int(count)
        elif stripped.startswith("weights:"):
            m = re.match(r"weights: ([\d,]+) elements, ([\d.]+) MiB", stripped)
            current.weight_elements, current.weight_mib = _number(m.group(1)), float(m.group(2))
        elif stripped.startswith("projection FLOP/token:"):
            current.projection_flops_per_token = _number(stripped.split(":")[1])
    return summaries
