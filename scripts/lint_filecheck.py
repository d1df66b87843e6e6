#!/usr/bin/env python3
"""Fails on FileCheck directives that are missing their colon.

`// CHECK foo` (no colon) is not a directive: FileCheck silently ignores it,
so the check it was meant to be never runs. For every .mlir/.test file given
(or found under a given directory, skipping Inputs/ fixture folders) this script collects the file's check
prefixes (CHECK plus every --check-prefix/--check-prefixes on its RUN lines)
and reports each comment line that starts with such a prefix, optionally
followed by a directive suffix (-NEXT, -SAME, -NOT, -DAG, -LABEL, -EMPTY,
-COUNT-n), but not by a colon.

Usage: lint_filecheck.py PATH... ; exit status 1 when anything is reported.
"""
import os
import re
import sys

SUFFIX = r"(?:-NEXT|-SAME|-NOT|-DAG|-LABEL|-EMPTY|-COUNT-\d+)?"
PREFIX_FLAG = re.compile(r"--?check-prefix(?:es)?[= ]([A-Za-z0-9_,-]+)")


def prefixes_of(text):
    prefixes = {"CHECK"}
    for line in text.splitlines():
        if "RUN:" in line:
            for match in PREFIX_FLAG.finditer(line):
                prefixes.update(p for p in match.group(1).split(",") if p)
    return prefixes


def lint_file(path):
    with open(path, encoding="utf-8") as f:
        text = f.read()
    names = "|".join(sorted(map(re.escape, prefixes_of(text)), key=len, reverse=True))
    # A comment whose first word is PREFIX[-SUFFIX] followed by space or end.
    bad = re.compile(r"^\s*(?://|#|;)\s*(?:%s)%s(?:\s|$)" % (names, SUFFIX))
    problems = []
    for number, line in enumerate(text.splitlines(), 1):
        if bad.match(line):
            problems.append("%s:%d: check directive without a colon: %s"
                            % (path, number, line.strip()))
    return problems


def files_under(paths):
    for path in paths:
        if os.path.isdir(path):
            for root, dirs, names in os.walk(path):
                # Inputs/ folders hold fixtures, some deliberately bad.
                dirs[:] = sorted(d for d in dirs if d != "Inputs")
                for name in sorted(names):
                    if name.endswith((".mlir", ".test")):
                        yield os.path.join(root, name)
        else:
            yield path


def main(argv):
    if len(argv) < 2:
        print(__doc__.strip(), file=sys.stderr)
        return 2
    problems = []
    count = 0
    for path in files_under(argv[1:]):
        count += 1
        problems.extend(lint_file(path))
    for problem in problems:
        print(problem)
    print("lint_filecheck: %d files, %d problems" % (count, len(problems)))
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
