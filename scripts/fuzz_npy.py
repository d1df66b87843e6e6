#!/usr/bin/env python3
"""Fuzzer of liger-cpu-runner's .npy reader: damaged files never crash it.

Writes mutated copies of a valid .npy file (a 3x8 float32 array): bytes of
the header flipped, the length field replaced, the header cut, grown or
padded with a long run of one character, fields repeated, the data cut or
extended, and runs liger-cpu-runner on each as the input of a function. Exit
status 0 (the mutant still reads as a 3x8 float32 array) or 1 with a
diagnostic are fine; a signal, another status or a crash or sanitizer report
is a failure, printed with its reproducer (the file is kept in --out). Ends
with one line

  fuzz-npy: N inputs, S signals, T timeouts

The seed is fixed (--seed, or $LIGER_FUZZ_SEED).
"""
import argparse
import os
import random
import shlex
import struct
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from fuzz import CRASH_MARKS, describe_end  # noqa: E402

MODULE = """func.func @f(%x: tensor<?x8xf32>) -> tensor<?x8xf32> {
  %y = liger.silu %x : tensor<?x8xf32>
  return %y : tensor<?x8xf32>
}
"""
HEADER = "{'descr': '<f4', 'fortran_order': False, 'shape': (3, 8), }"
PIECES = ["{", "}", "(", ")", ",", ":", "'", '"', "\\", " ", "\n", "\x00", "\xff",
          "'descr'", "'shape'", "'fortran_order'", "True", "False", "'<f4'",
          "99999999999999999999", "-1", "(3, 8)", "()", "((", "'extra'"]


def npy(version, header, data):
    length_format = "<H" if version[0] == 1 else "<I"
    prefix = 8 + struct.calcsize(length_format)
    header += " " * ((64 - (prefix + len(header) + 1) % 64) % 64) + "\n"
    raw = header.encode("latin1")
    # Version 1.0 cannot say a longer header: the length wraps (a damaged
    # file, as the others).
    length = len(raw) & (0xFFFF if version[0] == 1 else 0xFFFFFFFF)
    return (b"\x93NUMPY" + bytes(version) + struct.pack(length_format, length)
            + raw + data)


def mutate(rng):
    version = rng.choice([(1, 0), (2, 0), (3, 0)])
    header, data = HEADER, bytes(96)
    kind = rng.choice(["flip", "length", "cut", "run", "pieces", "data", "version"])
    if kind == "pieces":
        for _ in range(rng.randrange(1, 6)):
            i = rng.randrange(len(header) + 1)
            header = header[:i] + rng.choice(PIECES) + header[i:]
    elif kind == "run":
        i = rng.randrange(len(header) + 1)
        header = header[:i] + rng.choice("'(0 ,{") * rng.choice([100, 5000, 60000, 70000]) + header[i:]
    elif kind == "data":
        data = bytes(rng.choice([0, 4, 95, 97, 1 << 16]))
    raw = bytearray(npy(version, header, data))
    start = 10 if version[0] == 1 else 12
    if kind == "flip":
        for _ in range(rng.randrange(1, 8)):
            raw[rng.randrange(min(len(raw), start + len(HEADER) + 8))] = rng.randrange(256)
    elif kind == "length":
        value = rng.choice([0, 1, 63, 0xFFFF, 0xFFFFFFFF, rng.randrange(1 << 16)])
        if version[0] == 1:
            raw[8:10] = struct.pack("<H", value & 0xFFFF)
        else:
            raw[8:12] = struct.pack("<I", value)
    elif kind == "cut":
        raw = raw[: rng.randrange(len(raw))]
    elif kind == "version":
        raw[6], raw[7] = rng.randrange(256), rng.choice([0, 0, 1, 255])
    return kind, bytes(raw)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runner", required=True, help="path of liger-cpu-runner")
    parser.add_argument("--out", required=True, help="a directory for the inputs")
    parser.add_argument("--count", type=int, default=200)
    parser.add_argument("--seed", type=int,
                        default=int(os.environ.get("LIGER_FUZZ_SEED", 1)))
    parser.add_argument("--timeout", type=float, default=60.0)
    args = parser.parse_args()

    os.makedirs(args.out, exist_ok=True)
    module = os.path.join(args.out, "module.mlir")
    with open(module, "w") as f:
        f.write(MODULE)
    rng = random.Random(args.seed)
    print("fuzz-npy: seed %d (rerun with --seed %d)" % (args.seed, args.seed))
    mutants = [mutate(rng) for _ in range(args.count)]

    def execute(index):
        path = os.path.join(args.out, "input-%d.npy" % index)
        with open(path, "wb") as f:
            f.write(mutants[index][1])
        argv = [args.runner, module, "--entry=f", "-i", path]
        try:
            proc = subprocess.run(argv, capture_output=True, timeout=args.timeout)
        except subprocess.TimeoutExpired:
            return argv, None, ""
        return argv, proc.returncode, proc.stderr.decode("utf-8", "replace")

    signals = timeouts = accepted = 0
    with ThreadPoolExecutor(max_workers=os.cpu_count() or 2) as pool:
        for (kind, _), (argv, returncode, stderr) in zip(
                mutants, pool.map(execute, range(args.count))):
            accepted += returncode == 0
            if returncode in (0, 1) and not any(m in stderr for m in CRASH_MARKS):
                os.remove(argv[-1])
                continue
            signals += returncode is not None
            timeouts += returncode is None
            print("FAILURE (%s) on a '%s' mutant" % (describe_end(returncode), kind))
            print("  reproduce: %s" % " ".join(shlex.quote(a) for a in argv))
            for line in stderr.splitlines()[:25]:
                print("    " + line)
    print("fuzz-npy: %d still read as an array, %d refused with a diagnostic"
          % (accepted, args.count - accepted - signals - timeouts))
    print("fuzz-npy: %d inputs, %d signals, %d timeouts" % (args.count, signals, timeouts))
    return 1 if signals or timeouts else 0


if __name__ == "__main__":
    sys.exit(main())
