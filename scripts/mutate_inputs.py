#!/usr/bin/env python3
"""Robustness check: liger-opt must never die on malformed input.

Takes the .mlir test inputs under the given paths, makes mutated copies
(truncated at a random point, two tokens swapped, a dimension size changed or
made dynamic, a line dropped, an element type changed), runs liger-opt on
each with the verifier and a few passes, and fails if any run is killed by a
signal or prints a crash report. A diagnostic and a non-zero exit are the
expected outcome for most mutants.

The seed is random per run and printed; pass --seed to reproduce a failure.
"""
import argparse
import os
import random
import re
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor

TOKEN = re.compile(r"%[\w.]+|[A-Za-z_][\w.]*|\d+|\S")
DIMS = re.compile(r"(?<=[<x])(\d+|\?)(?=x)")
ELEMENT_TYPES = ["bf16", "f16", "f32", "f64", "i1", "i16", "i32", "i64", "index"]
PASS_SETS = [[], ["--canonicalize"], ["--liger-print-summary", "--canonicalize"],
             ["--mlir-print-op-generic"], ["--liger-fuse"],
             ["--liger-lower-to-linalg"], ["--liger-lower-to-gpu"]]
# Crashes inside upstream MLIR code that liger cannot prevent, recognized by
# a frame of their stack trace. They are counted and shown, not failed.
KNOWN_UPSTREAM = [
    ("mlir::linalg::TransposeOp::parse",
     "MLIR 22's linalg.transpose parser dereferences a null attribute on a "
     "malformed permutation"),
]


def mutate(text, rng):
    kind = rng.choice(["truncate", "swap", "dim", "drop_line", "element_type"])
    if kind == "truncate":
        return kind, text[: rng.randrange(max(1, len(text)))]
    if kind == "swap":
        tokens = list(TOKEN.finditer(text))
        if len(tokens) < 2:
            return kind, text
        a, b = sorted(rng.sample(tokens, 2), key=lambda m: m.start())
        return kind, (text[: a.start()] + b.group() + text[a.end(): b.start()]
                      + a.group() + text[b.end():])
    if kind == "dim":
        dims = list(DIMS.finditer(text))
        if not dims:
            return kind, text
        m = rng.choice(dims)
        new = rng.choice(["?", "0", "1", "3", str(rng.randrange(2, 5000))])
        return kind, text[: m.start()] + new + text[m.end():]
    if kind == "drop_line":
        lines = text.splitlines(True)
        del lines[rng.randrange(len(lines))]
        return kind, "".join(lines)
    found = [m for m in re.finditer(r"\b(bf16|f16|f32|i32|i64)\b", text)]
    if not found:
        return kind, text
    m = rng.choice(found)
    return kind, text[: m.start()] + rng.choice(ELEMENT_TYPES) + text[m.end():]


def run_one(tool, text, passes, timeout):
    proc = subprocess.run([tool, "-", "-o", os.devnull, "--split-input-file"] + passes,
                          input=text, capture_output=True, text=True, timeout=timeout)
    crashed = (proc.returncode < 0 or "Stack dump" in proc.stderr
               or "PLEASE submit a bug report" in proc.stderr
               or proc.returncode not in (0, 1))
    return crashed, proc


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--liger-opt", required=True, help="path of liger-opt")
    parser.add_argument("--mutants", type=int, default=12,
                        help="mutated copies per input file")
    parser.add_argument("--seed", type=int, default=None)
    parser.add_argument("--timeout", type=float, default=60.0)
    parser.add_argument("paths", nargs="+")
    args = parser.parse_args()

    seed = args.seed if args.seed is not None else random.randrange(2**31)
    print("mutate_inputs: seed %d (rerun with --seed %d)" % (seed, seed))
    rng = random.Random(seed)
    inputs = []
    for path in args.paths:
        for root, dirs, names in os.walk(path) if os.path.isdir(path) else [("", [], [path])]:
            dirs.sort()
            inputs += [os.path.join(root, n) for n in sorted(names) if n.endswith(".mlir")]

    jobs = []
    for path in inputs:
        with open(path, encoding="utf-8") as f:
            text = f.read()
        for _ in range(args.mutants):
            kind, mutant = mutate(text, rng)
            jobs.append((path, kind, mutant, rng.choice(PASS_SETS)))

    failures = 0
    rejected = 0
    known = 0
    with ThreadPoolExecutor(max_workers=os.cpu_count() or 2) as pool:
        results = pool.map(lambda j: run_one(args.liger_opt, j[2], j[3], args.timeout), jobs)
        for (path, kind, mutant, passes), (crashed, proc) in zip(jobs, results):
            rejected += proc.returncode == 1
            upstream = [why for frame, why in KNOWN_UPSTREAM if frame in proc.stderr]
            if crashed and upstream:
                known += 1
                print("known upstream crash on a '%s' mutant of %s: %s" % (kind, path, upstream[0]))
                continue
            if crashed:
                failures += 1
                print("CRASH (exit %d) on a '%s' mutant of %s with %s" %
                      (proc.returncode, kind, path, " ".join(passes) or "no passes"))
                print("---- input ----\n%s\n---- stderr (first 40 lines) ----\n%s" %
                      (mutant, "\n".join(proc.stderr.splitlines()[:40])))
    print("mutate_inputs: %d runs (%d rejected with a diagnostic, %d known upstream "
          "crashes), %d crashes" % (len(jobs), rejected, known, failures))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
