"""The `liger` command, and the commands that run an installed liger's tools.

    liger --version       liger's version
    liger info            where this liger is and what it was built with
    liger-compile ...     (and liger-opt, liger-cpu-runner, liger-bundle): the
                          tool of this liger, found as liger.driver.find_tool
                          finds it; a wheel puts these commands on PATH

`python -m liger` is `liger`. The model and op command lines stay with their
modules: `python -m liger.frontend`, `python -m liger.ops`,
`python -m liger.transformers`.
"""

import argparse
import os
import sys
from typing import List, Optional

from . import installation


def main(argv: Optional[List[str]] = None) -> int:
    parser = argparse.ArgumentParser(
        prog="liger", description="liger: a fusion compiler for transformer layers on NVIDIA "
        "GPUs. The compiler's tools are liger-compile and liger-opt; the model command lines "
        "are python -m liger.frontend, python -m liger.ops and python -m liger.transformers.")
    parser.add_argument("--version", action="version",
                        version="liger %s" % installation.version())
    commands = parser.add_subparsers(dest="command", metavar="COMMAND")
    commands.add_parser("info", help="where this liger is and what it was built with")
    args = parser.parse_args(argv)
    if args.command == "info":
        print(installation.describe())
        return 0
    parser.print_help()
    return 0


def run_tool(name: str, argv: Optional[List[str]] = None) -> int:
    """Replaces this process with liger's tool `name` (arguments `argv`, else
    this process's); exits 1 with liger's message where there is none."""
    from .driver import find_tool
    from .errors import LigerError
    try:
        tool = find_tool(name)  # never this command: find_tool looks past liger's own
    except LigerError as e:
        print("%s: %s" % (name, e), file=sys.stderr)
        return 1
    args = sys.argv[1:] if argv is None else argv
    os.execv(tool, [tool] + list(args))
    return 1  # not reached


def liger_compile() -> int:
    return run_tool("liger-compile")


def liger_opt() -> int:
    return run_tool("liger-opt")


def liger_cpu_runner() -> int:
    return run_tool("liger-cpu-runner")


def liger_bundle() -> int:
    return run_tool("liger-bundle")
