"""Keeps docs/adding-a-fusion-pass.md true.

Checks every block the page marks:
  <!-- check: excerpt PATH -->  the block's lines appear in PATH, in order;
  <!-- check: input PASS -->    liger-opt --PASS=report=true on the block
  <!-- check: report -->        prints exactly this report (the file name in
                                locations is the example's, mlp.mlir).
"""
import argparse
import os
import re
import subprocess
import sys
import tempfile


def blocks(text):
    for m in re.finditer(r"<!-- check: (\w+)\s*(\S*) -->\s*```[\w+]*\n(.*?)```", text, re.S):
        yield m.group(1), m.group(2), m.group(3)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--liger-opt", required=True)
    parser.add_argument("--root", required=True)
    parser.add_argument("doc")
    args = parser.parse_args()
    text = open(args.doc).read()
    errors, checked = [], 0
    report = None
    for kind, arg, body in blocks(text):
        checked += 1
        if kind == "excerpt":
            source = open(os.path.join(args.root, arg)).read().splitlines()
            pos = 0
            for line in body.splitlines():
                try:
                    pos = source.index(line, pos) + 1
                except ValueError:
                    errors.append("%s: excerpt line not found (in order): %r" % (arg, line))
                    break
        elif kind == "input":
            with tempfile.TemporaryDirectory() as tmp:
                path = os.path.join(tmp, "mlp.mlir")
                open(path, "w").write(body)
                proc = subprocess.run([args.liger_opt, path, "--%s=report=true" % arg,
                                       "-o", os.devnull], capture_output=True, text=True)
                if proc.returncode != 0:
                    errors.append("the example fails: %s" % proc.stderr)
                report = proc.stdout
        elif kind == "report":
            if report is None:
                errors.append("a report block before any input block")
            elif report.strip() != body.strip():
                errors.append("report differs:\n--- doc\n%s--- liger-opt\n%s" % (body, report))
    for e in errors:
        print("check_tutorial: " + e)
    print("check_tutorial: %d blocks checked, %d problems" % (checked, len(errors)))
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())
