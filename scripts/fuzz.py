#!/usr/bin/env python3
"""Fuzzer: no input crashes a liger tool, and every compile is bounded.

Seeds: every .mlir test input (test/**, split at '// -----' lines) and
examples/*.mlir (the "tests" corpus), and generated modules holding every op
of the dialect, forward and gradient, at odd sizes, and a decoder layer per
size (the "layers" corpus, scripts/fuzz_layers.py). Each seed runs as it is
and as mutated copies (truncated, tokens swapped, sizes changed, lines
dropped or repeated, element types, numbers and op names replaced, one value
put in place of another, a line of another seed spliced in) through one of
the commands:

  opt        liger-opt with one of a few pass lists (verify, canonicalize,
             summary, generic printing, the reference and GPU lowerings,
             kernel configuration, the CPU pipeline)
  fuse       liger-opt --liger-fuse (or its norm-prologue variant)
  gpu-sm90a  liger-compile --emit=gpu --target=sm_90a
  gpu-sm80   liger-compile --emit=gpu --target=sm_80
  ptx-sm90a  liger-compile --emit=ptx --target=sm_90a
  ptx-sm80   liger-compile --emit=ptx --target=sm_80

A diagnostic and exit status 1 are the expected answer to most mutants. Any
other end is a failure: a signal (SIGSEGV, SIGABRT from an assert,
llvm_unreachable or report_fatal_error), another exit status, a crash
report or a sanitizer report, or a run longer than --timeout. Each failure is
written to --out as the input file and the command line that reproduces it,
and printed; the run ends with one line

  fuzz: N inputs, S signals, T timeouts

and a non-zero status when S + T > 0. The seed is fixed (--seed, or
$LIGER_FUZZ_SEED), so that a run is reproducible.

Failures that belong to code maintained elsewhere are listed below (PENDING
and KNOWN_UPSTREAM), each with its reason; they are counted and shown apart
and do not fail the run. --subset pending runs only the seeds and commands
a PENDING entry names, to show what fails there today; --subset all runs
everything, PENDING failures counted as failures.
"""
import argparse
import json
import os
import random
import re
import resource
import shlex
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import fuzz_layers  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DEFAULT_SEED = 1

COMMANDS = ("opt", "fuse", "gpu-sm90a", "gpu-sm80", "ptx-sm90a", "ptx-sm80")
# The arguments each command draws one of.
COMPILE_ARGS = [[], [], ["--no-matmul-kernels"], ["--no-fuse"],
                ["--matmul-kernels", "--norm-prologue", "--fusion-report"],
                ["--matmul-schedule=pingpong"]]
EXTRA_ARGS = {
    "opt": [[], ["--canonicalize"], ["--liger-print-summary", "--canonicalize"],
            ["--mlir-print-op-generic"], ["--liger-lower-to-linalg"],
            ["--liger-lower-to-gpu"], ["--liger-select-kernel-config"],
            ["--liger-select-kernel-config=matmul-schedule=pingpong",
             "--liger-lower-to-gpu=matmul-kernels=true"],
            ["--canonicalize", "--liger-cpu-pipeline"]],
    "fuse": [["--liger-fuse"], ["--canonicalize", "--liger-fuse=norm-prologue=true report=true"]],
    "gpu-sm90a": COMPILE_ARGS, "gpu-sm80": COMPILE_ARGS,
    "ptx-sm90a": COMPILE_ARGS, "ptx-sm80": COMPILE_ARGS,
}

# Crashes inside upstream MLIR that liger cannot prevent, recognized by a
# frame of their stack trace: counted and shown, never failed. Only these.
KNOWN_UPSTREAM = [
    ("mlir::linalg::TransposeOp::parse",
     "MLIR 22's linalg.transpose parser dereferences a null attribute on a "
     "malformed permutation (reproducible with mlir-opt)"),
    ("mlir::detail::Parser::parseDenseArrayAttr",
     "MLIR 22's dense array parser asks an index element type for its bit "
     "width ('array<index: 1>', as a mutated operandSegmentSizes spells it; "
     "reproducible with mlir-opt)"),
]

# Failures in code maintained elsewhere, waiting for its fix, each with its
# reason. "commands" (a regex) names the runs that reach the failing code,
# matched against the command and its arguments ("gpu-sm80 --no-fuse",
# "opt --liger-lower-to-gpu"); "seeds" (a regex) the seeds where it shows
# today, which --subset pending runs (with "args", if given).
# An entry with a stack frame ("crash") excuses any crash through it.
# An entry with "timeout" covers its commands on its seeds and on any input
# with a static dimension of at least "min_dim" (the row a rowwise kernel
# unrolls): --subset required skips those runs (each would cost --timeout)
# and the other subsets excuse their timeouts.
PENDING = []


def find_seeds(corpora):
    """[(name, text)] of the seeds of the named corpora, in a fixed order."""
    seeds = []
    if "tests" in corpora:
        paths = []
        for top in ("test", "examples"):
            for root, dirs, names in os.walk(os.path.join(ROOT, top)):
                dirs.sort()
                paths += [os.path.join(root, n) for n in sorted(names) if n.endswith(".mlir")]
        for path in paths:
            with open(path, encoding="utf-8") as f:
                chunks = re.split(r"(?m)^// -----\s*$", f.read())
            rel = os.path.relpath(path, ROOT)
            for i, chunk in enumerate(chunks):
                if "func.func" in chunk or "module" in chunk:
                    seeds.append(("tests/%s#%d" % (rel, i), chunk))
    if "layers" in corpora:
        seeds += [("layers/" + name, text) for name, text in fuzz_layers.corpus()]
    return seeds


#===------------------------------------------------------------------===#
# Mutations
#===------------------------------------------------------------------===#

TOKEN = re.compile(r"%[\w.#]+|[A-Za-z_][\w.]*|\d+(?:\.\d+)?(?:[eE][-+]?\d+)?|\S")
DIMS = re.compile(r"(?<=[<x])(\d+|\?)(?=x)")
NUMBER = re.compile(r"(?<![\w%#.])-?\d+(?:\.\d+)?(?:[eE][-+]?\d+)?(?![\w.])")
VALUE = re.compile(r"%[A-Za-z_][\w.]*|%\d+")
OP_NAME = re.compile(r"\bliger\.[a-z_]+\b")
ELEMENT_TYPES = ["bf16", "f16", "f32", "f64", "i1", "i16", "i32", "i64", "index"]
LIGER_OPS = ["rms_norm", "add_rms_norm", "layer_norm", "rope", "linear", "lora_linear",
             "silu", "gelu", "swiglu", "geglu", "add", "mul", "softmax", "cross_entropy",
             "fused_linear_cross_entropy", "kl_div", "jsd", "attention", "attention_grad",
             "rms_norm_grad", "layer_norm_grad", "rope_grad", "swiglu_grad", "geglu_grad", "softmax_grad",
             "cross_entropy_grad", "fused_linear_cross_entropy_grad", "linear_grad_input",
             "linear_grad_weight", "fusion", "yield"]
ODD_SIZES = ["?", "0", "1", "3", "7", "1000", "50257", "65537", "2147483648",
             "9223372036854775807"]
ODD_NUMBERS = ["0", "-1", "1", "0.0", "-0.0", "1.0e+38", "1.0e-45", "nan", "inf",
               "-1.0e+39", "4294967296", "-9223372036854775808", "3"]


def replace_match(text, m, new):
    return text[: m.start()] + new + text[m.end():]


def mutate_once(text, rng, donors):
    kind = rng.choice(["truncate", "swap", "dim", "drop_line", "repeat_line",
                       "element_type", "number", "op_name", "value", "splice"])
    if kind == "truncate":
        return kind, text[: rng.randrange(max(1, len(text)))]
    if kind == "swap":
        tokens = list(TOKEN.finditer(text))
        if len(tokens) < 2:
            return kind, text
        a, b = sorted(rng.sample(tokens, 2), key=lambda m: m.start())
        return kind, (text[: a.start()] + b.group() + text[a.end(): b.start()]
                      + a.group() + text[b.end():])
    if kind in ("drop_line", "repeat_line", "splice"):
        lines = text.splitlines(True) or [""]
        i = rng.randrange(len(lines))
        if kind == "drop_line":
            del lines[i]
        elif kind == "repeat_line":
            lines.insert(i, lines[i])
        else:
            donor = rng.choice(donors).splitlines(True) or [""]
            lines.insert(i, rng.choice(donor))
        return kind, "".join(lines)
    pattern = {"dim": DIMS, "number": NUMBER, "value": VALUE, "op_name": OP_NAME,
               "element_type": re.compile(r"\b(bf16|f16|f32|i32|i64)\b")}[kind]
    found = list(pattern.finditer(text))
    if not found:
        return kind, text
    m = rng.choice(found)
    if kind == "dim":
        new = rng.choice(ODD_SIZES + [str(rng.randrange(2, 5000))])
    elif kind == "number":
        new = rng.choice(ODD_NUMBERS)
    elif kind == "value":
        # Another value of the text in this one's place: aliasing operands,
        # uses before definitions, type mismatches.
        new = rng.choice(found).group()
    elif kind == "op_name":
        new = "liger." + rng.choice(LIGER_OPS)
    else:
        new = rng.choice(ELEMENT_TYPES)
    return kind, replace_match(text, m, new)


def mutate(text, rng, donors):
    """One to three mutations: (their kinds joined by '+', the text)."""
    kinds = []
    for _ in range(rng.choice([1, 1, 2, 3])):
        kind, text = mutate_once(text, rng, donors)
        kinds.append(kind)
    return "+".join(kinds), text


#===------------------------------------------------------------------===#
# Running
#===------------------------------------------------------------------===#

def command_line(command, args, bin_dir, path):
    if command in ("opt", "fuse"):
        return [os.path.join(bin_dir, "liger-opt"), path, "-o", os.devnull] + args
    emit, arch = command.split("-")
    target = "sm_" + arch[len("sm"):]
    return [os.path.join(bin_dir, "liger-compile"), path, "--emit=" + emit,
            "--target=" + target, "-o", os.devnull] + args


CRASH_MARKS = ("Stack dump:", "PLEASE submit a bug report", "LLVM ERROR:",
               "ERROR: AddressSanitizer", "ERROR: LeakSanitizer", "runtime error:",
               "UndefinedBehaviorSanitizer")


def limit_memory(gib):
    """A preexec_fn capping the address space of a run at `gib` GiB (none
    for 0: sanitized builds reserve terabytes of shadow address space)."""
    if not gib:
        return None

    def apply():
        limit = int(gib * (1 << 30))
        resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
    return apply


def run_one(argv, timeout, memory_gib=0):
    """(outcome, returncode, stderr, seconds): outcome is 'ok' (exit 0),
    'rejected' (exit 1 with no crash report), 'signal' (any other end) or
    'timeout'."""
    start = time.monotonic()
    try:
        proc = subprocess.run(argv, stdin=subprocess.DEVNULL, capture_output=True,
                              timeout=timeout, preexec_fn=limit_memory(memory_gib))
    except subprocess.TimeoutExpired as e:
        stderr = (e.stderr or b"").decode("utf-8", "replace")
        return "timeout", None, stderr, time.monotonic() - start
    stderr = proc.stderr.decode("utf-8", "replace")
    seconds = time.monotonic() - start
    if proc.returncode not in (0, 1) or any(m in stderr for m in CRASH_MARKS):
        return "signal", proc.returncode, stderr, seconds
    return ("ok" if proc.returncode == 0 else "rejected"), proc.returncode, stderr, seconds


def describe_end(returncode):
    if returncode is None:
        return "timed out"
    if returncode < 0:
        import signal
        try:
            return "killed by %s" % signal.Signals(-returncode).name
        except ValueError:
            return "killed by signal %d" % -returncode
    return "exit status %d" % returncode


def largest_static_dim(text):
    """The largest static dimension of a tensor type in `text` (0 if none)."""
    dims = [int(d) for shape in re.findall(r"tensor<([\dx?]*)x?[a-z]", text)
            for d in shape.split("x") if d.isdigit()]
    return max(dims, default=0)


def run_name(job):
    """"gpu-sm80 --no-fuse": the command and its arguments, for PENDING."""
    return " ".join([job["command"]] + job["args"])


def pending_covers(entry, job, seeds_only=False):
    """Whether `entry` names this run: its commands, and its seeds (or, for
    a timeout, an input with a dimension of at least its min_dim)."""
    if not re.search(entry["commands"], run_name(job)):
        return False
    if re.search(entry["seeds"], job["seed"]):
        return True
    return (not seeds_only and entry["crash"] == "timeout"
            and largest_static_dim(job["text"]) >= entry["min_dim"])


def pending_excuse(job, outcome, stderr):
    """The PENDING entry that excuses this failure, if any."""
    for entry in PENDING:
        if entry["crash"] == "timeout":
            if outcome == "timeout" and pending_covers(entry, job):
                return entry
        elif outcome == "signal" and entry["crash"] in stderr:
            return entry
    return None


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter,
                                     epilog="\n".join(__doc__.splitlines()[1:]))
    parser.add_argument("--bin", required=True,
                        help="directory holding liger-opt and liger-compile")
    parser.add_argument("--seed", type=int,
                        default=int(os.environ.get("LIGER_FUZZ_SEED", DEFAULT_SEED)))
    parser.add_argument("--mutants", type=int, default=4,
                        help="mutated copies of each seed (default 4)")
    parser.add_argument("--corpus", default="tests,layers",
                        help="comma-separated corpora: tests, layers (default both)")
    parser.add_argument("--commands", default=",".join(COMMANDS),
                        help="comma-separated commands (default all: %s)" % ", ".join(COMMANDS))
    parser.add_argument("--subset", choices=["required", "pending", "all"], default="required",
                        help="required: everything, PENDING failures shown apart (default); "
                             "pending: only what PENDING names; all: everything, nothing excused")
    parser.add_argument("--only", default="",
                        help="only seeds whose name matches this regex")
    parser.add_argument("--timeout", type=float, default=60.0,
                        help="seconds one run may take (default 60)")
    parser.add_argument("--memory-limit", type=float, default=8,
                        help="GiB of address space one run may take (default 8; 0 for "
                             "none, as sanitized builds need)")
    parser.add_argument("--jobs", type=int, default=os.cpu_count() or 2)
    parser.add_argument("--out", default=None,
                        help="where failing inputs are written (default: fuzz-failures "
                             "beside --bin)")
    parser.add_argument("--list", action="store_true",
                        help="print the seeds and commands that would run, and exit")
    parser.add_argument("--pending", default=None,
                        help="a JSON list of PENDING entries to use instead of the "
                             "script's own (the fuzzer's self-test)")
    args = parser.parse_args()
    if args.pending:
        with open(args.pending, encoding="utf-8") as f:
            PENDING[:] = json.load(f)

    commands = [c for c in args.commands.split(",") if c]
    for c in commands:
        if c not in COMMANDS:
            parser.error("unknown command '%s' (expected one of %s)" % (c, ", ".join(COMMANDS)))
    corpora = [c for c in args.corpus.split(",") if c]
    for c in corpora:
        if c not in ("tests", "layers"):
            parser.error("unknown corpus '%s' (expected tests or layers)" % c)
    out_dir = args.out or os.path.join(os.path.dirname(os.path.abspath(args.bin)),
                                       "fuzz-failures")
    seeds = [(n, t) for n, t in find_seeds(corpora) if re.search(args.only, n)]
    print("fuzz: seed %d (rerun with --seed %d), %d seeds, commands %s, subset %s"
          % (args.seed, args.seed, len(seeds), ",".join(commands), args.subset))
    sys.stdout.flush()

    # The jobs, drawn before anything runs: the same seed gives the same
    # inputs and commands whatever the timing. A generated seed runs as it is
    # through every command, a test input through one compile command (lit
    # runs its liger-opt commands; --subset pending, through every one), and
    # each mutant through one command.
    rng = random.Random(args.seed)
    skipped = []
    donors = [t for _, t in seeds] or [""]
    compile_commands = [c for c in commands if c not in ("opt", "fuse")] or commands
    jobs = []
    for name, text in seeds:
        if name.startswith("layers/") or args.subset == "pending":
            variants = [("seed", text, c) for c in commands]
        else:
            variants = [("seed", text, rng.choice(compile_commands))]
        for _ in range(args.mutants):
            kind, mutant = mutate(text, rng, donors)
            variants.append((kind, mutant, rng.choice(commands)))
        for kind, variant, command in variants:
            job = {"seed": name, "kind": kind, "text": variant, "command": command,
                   "args": rng.choice(EXTRA_ARGS[command])}
            if args.subset == "pending":
                # A seed through the commands an entry names, with the
                # arguments that reach the failing code.
                if kind != "seed":
                    continue
                trials = [dict(job, args=e.get("args") or (
                    ["--liger-lower-to-gpu"] if command == "opt" else []))
                    for e in PENDING]
                job = next((t for e, t in zip(PENDING, trials)
                            if pending_covers(e, t, seeds_only=True)), None)
                if job is None:
                    continue
            elif args.subset == "required":
                entry = next((e for e in PENDING if e["crash"] == "timeout"
                              and pending_covers(e, job)), None)
                if entry is not None:
                    skipped.append((name, entry))
                    continue
            jobs.append(job)
    if args.list:
        for job in jobs:
            print("%s %s %s %s" % (job["seed"], job["kind"], job["command"], " ".join(job["args"])))
        return 0

    # Generated seeds must be valid modules: a seed the verifier rejects
    # would test nothing.
    invalid = []
    for name, text in seeds:
        if name.startswith("layers/"):
            outcome, _, stderr, _ = run_one_text(
                [os.path.join(args.bin, "liger-opt"), "-", "-o", os.devnull], text, args.timeout)
            if outcome != "ok":
                invalid.append((name, stderr))
    for name, stderr in invalid:
        print("INVALID SEED %s:\n%s" % (name, "\n".join(stderr.splitlines()[:10])))

    # The failures of an earlier run would read as this run's.
    os.makedirs(out_dir, exist_ok=True)
    for stale in os.listdir(out_dir):
        if re.match(r"(signal|timeout)-\d+\.(mlir|sh)$", stale):
            os.remove(os.path.join(out_dir, stale))
    work = os.path.join(out_dir, "work")
    os.makedirs(work, exist_ok=True)

    def execute(index_job):
        index, job = index_job
        path = os.path.join(work, "input-%d.mlir" % index)
        with open(path, "w", encoding="utf-8") as f:
            f.write(job["text"])
        argv = command_line(job["command"], job["args"], args.bin, path)
        result = run_one(argv, args.timeout, args.memory_limit)
        os.remove(path)
        return result

    counts = {"ok": 0, "rejected": 0, "signal": 0, "timeout": 0}
    slowest = (0.0, None)
    known, pending_hits, failures = [], {}, []
    start = time.monotonic()
    with ThreadPoolExecutor(max_workers=max(1, args.jobs)) as pool:
        for index, (job, (outcome, returncode, stderr, seconds)) in enumerate(
                zip(jobs, pool.map(execute, enumerate(jobs)))):
            if outcome in ("ok", "rejected"):
                counts[outcome] += 1
                slowest = max(slowest, (seconds, index), key=lambda p: p[0])
                continue
            upstream = [why for frame, why in KNOWN_UPSTREAM if frame in stderr]
            if outcome == "signal" and upstream:
                known.append((job, upstream[0]))
                continue
            excuse = pending_excuse(job, outcome, stderr) if args.subset != "all" else None
            if excuse:
                pending_hits.setdefault(excuse["name"], []).append(job)
                continue
            counts[outcome] += 1
            failures.append(job)
            stem = "%s-%d" % (outcome, len(failures))
            path = os.path.join(out_dir, stem + ".mlir")
            with open(path, "w", encoding="utf-8") as f:
                f.write(job["text"])
            argv = command_line(job["command"], job["args"], args.bin, path)
            with open(os.path.join(out_dir, stem + ".sh"), "w") as f:
                f.write("#!/bin/sh\n%s\n" % " ".join(shlex.quote(a) for a in argv))
            print("FAILURE (%s) on the %s of %s" % (describe_end(returncode),
                                                    "seed" if job["kind"] == "seed"
                                                    else "'%s' mutant" % job["kind"],
                                                    job["seed"]))
            print("  reproduce: %s" % " ".join(shlex.quote(a) for a in argv))
            if stderr.strip():
                print("  stderr (first 25 lines):")
                for line in stderr.splitlines()[:25]:
                    print("    " + line)
            sys.stdout.flush()
    elapsed = time.monotonic() - start
    if not os.listdir(work):
        os.rmdir(work)

    for job, why in known:
        print("known upstream crash on the '%s' variant of %s (%s): %s"
              % (job["kind"], job["seed"], job["command"], why))
    for entry in PENDING:
        hits = pending_hits.get(entry["name"], [])
        skips = [name for name, e in skipped if e is entry]
        if hits or skips:
            names = sorted({j["seed"] for j in hits} | set(skips))
            print("pending elsewhere: %s, %d run(s) %s (%s%s): %s"
                  % (entry["name"], len(hits) + len(skips),
                     "not run" if skips and not hits else "excused",
                     ", ".join(names[:6]), ", ..." if len(names) > 6 else "",
                     entry["why"]))
    print("fuzz: %d runs in %.0f s: %d accepted, %d rejected with a diagnostic, "
          "%d known upstream, %d pending elsewhere"
          % (len(jobs), elapsed, counts["ok"], counts["rejected"], len(known),
             sum(len(h) for h in pending_hits.values()) + len(skipped)))
    if slowest[1] is not None:
        job = jobs[slowest[1]]
        print("fuzz: slowest run %.1f s (the %s of %s through %s), timeout %.0f s"
              % (slowest[0], "seed" if job["kind"] == "seed" else "'%s' mutant" % job["kind"],
                 job["seed"], run_name(job), args.timeout))
    if failures:
        print("fuzz: failing inputs and their command lines are in %s" % out_dir)
    print("fuzz: %d inputs, %d signals, %d timeouts" % (len(jobs), counts["signal"],
                                                         counts["timeout"]))
    return 1 if failures or invalid else 0


def run_one_text(argv, text, timeout):
    try:
        proc = subprocess.run(argv, input=text.encode("utf-8"), capture_output=True,
                              timeout=timeout)
    except subprocess.TimeoutExpired:
        return "timeout", None, "", timeout
    return ("ok" if proc.returncode == 0 else "rejected"), proc.returncode, \
        proc.stderr.decode("utf-8", "replace"), 0


if __name__ == "__main__":
    sys.exit(main())
