"""python -m liger.frontend import CONFIG.json|MODEL_DIR -o layer.mlir [--backward]

Builds the model of a Hugging Face config (random weights on the meta
device: no download, no memory), captures one decoder layer and the
lm_head + loss, recognises what liger has ops for, and writes the liger
module. It prints, per graph, what was recognised (and why near-misses were
left) and a summary line: aten nodes imported, liger ops, kernels after
liger-fuse, graph breaks. With --backward the module also holds the gradient
functions (backward.py). The module is verified by liger-opt when liger-opt
is found (driver.find_tool), as liger-compile will read it.
"""

import argparse
import os
import re
import sys

from ..driver import LigerError, find_tool, run_opt


def _tokens(text: str):
    if text == "dynamic":
        return None
    m = re.fullmatch(r"(\d+),(\d+)", text)
    if not m or int(m.group(2)) < 2 or int(m.group(1)) < 1:
        raise argparse.ArgumentTypeError(
            "expected 'dynamic' or BATCH,SEQUENCE with BATCH >= 1 and SEQUENCE >= 2, got %r" % text)
    return int(m.group(1)), int(m.group(2))


def _kernels(mlir: str, tool: str):
    """Function name -> kernel count after liger-fuse (liger-print-summary)."""
    report = run_opt(mlir, ["--canonicalize", "--liger-fuse", "--liger-print-summary", "-o",
                            os.devnull], tool)
    out, current = {}, None
    for line in report.splitlines():
        if line.startswith("liger summary of @"):
            current = line[len("liger summary of @"):]
        m = re.match(r"\s+kernels: (\d+)", line)
        if m and current:
            out[current] = int(m.group(1))
    return out


def import_command(args) -> int:
    from . import capture_model, import_graph, module_text
    from .backward import backward_module
    captures = capture_model(args.config, dtype=args.dtype, tokens=args.tokens)
    imported = [import_graph(c.graph_module, c.name, argument_names=c.argument_names)
                for c in captures]
    text = module_text(imported)
    backward = [backward_module(i) for i in imported] if args.backward else []
    text += "".join("\n" + b.mlir for b in backward)
    tool = None
    if not args.no_verify:
        try:
            tool = find_tool()
        except LigerError as e:
            print("liger.frontend: not verified: %s" % e, file=sys.stderr)
    kernels = {}
    if tool:
        run_opt(text, ["-o", os.devnull], tool)  # raises with the diagnostics
        kernels = _kernels(text, tool)
    for i in imported:
        if not args.quiet:
            print("== %s" % i.name)
            for line in i.recognition.lines():
                print(line)
            if i.boundary:
                print("not imported (left to PyTorch): %s" % ", ".join(i.boundary))
        count = sum(kernels.get(f.name, 0) for f in i.functions) if kernels else None
        print(i.summary(count))
    for b in backward:
        names = ", ".join("@" + f.name for f in b.functions)
        print("%s: %s%s" % (b.name, names, "".join("; no gradient for %s" % m for m in b.missing)))
    with open(args.output, "w") as f:
        f.write(text)
    print("liger.frontend: wrote %s%s" % (args.output, " (verified by liger-opt)" if tool else ""))
    return 0


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m liger.frontend",
                                     description="Hugging Face models into the liger dialect.")
    sub = parser.add_subparsers(dest="command", required=True)
    imp = sub.add_parser("import", help="a config's decoder layer and lm_head + loss as liger IR")
    imp.add_argument("config", help="a Hugging Face config.json, or a model directory holding one")
    imp.add_argument("-o", "--output", required=True, help="the .mlir file to write")
    imp.add_argument("--backward", action="store_true",
                     help="also write the gradient functions (the dialect's gradient ops)")
    imp.add_argument("--tokens", type=_tokens, default=None, metavar="dynamic|B,T",
                     help="token sizes: dynamic (default) or static BATCH,SEQUENCE")
    imp.add_argument("--dtype", choices=("f32", "bf16", "f16"), default=None,
                     help="the model's dtype (default: the config's)")
    imp.add_argument("--no-verify", action="store_true", help="do not run liger-opt on the module")
    imp.add_argument("--quiet", action="store_true", help="print only the summary lines")
    args = parser.parse_args(argv)
    from .capture import CaptureError
    try:
        return import_command(args)
    except (CaptureError, LigerError, OSError) as e:
        print("liger.frontend: error: %s" % e, file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
