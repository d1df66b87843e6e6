"""Compile liger modules to kernel bundles from Python, with an on-disk cache.

    from liger import compiler
    compiled = compiler.compile("layer.mlir", target="sm_90a")
    bundle = liger.runtime.load(compiled.path)

`compile` runs `liger-compile` (the same pipeline as the tool: canonicalize,
liger-fuse, the GPU lowering, PTX, cubin, bundle) and keeps the bundle in
the bundle cache (liger.cache: $LIGER_CACHE_DIR, else ~/.cache/liger) under
a key of the module text and the options, in an entry of the compiler that
made it (the sha256 of the liger-compile executable and ptxas' version):
the same input compiles once per compiler build, and the entries of
several builds sharing a cache stay side by side. With LIGER_DEBUG=1 every
stage's output is written into the entry (stages/) and its path printed,
on a cache hit too (with the stages it kept, or that it kept none).
"""

import hashlib
import json
import os
import shutil
import subprocess
from dataclasses import dataclass
from typing import Optional

from . import cache
from .driver import find_tool
from .errors import LigerError, LigerValueError


@dataclass
class Compiled:
    """A compiled bundle: where it is, its cache key, and whether the cache
    already held it."""

    path: str
    key: str
    cached: bool


def _version(args):
    try:
        out = subprocess.run(args, capture_output=True, text=True, timeout=60)
        return (out.stdout + out.stderr).strip().splitlines()[-1] if out.returncode == 0 else ""
    except OSError:
        return ""


_DIGESTS = {}


def executable_digest(path: str) -> str:
    """sha256 of the file at `path` (memoized by path, size and mtime): what
    names a liger-compile build, whose --version stays the same across the
    builds of a release."""
    st = os.stat(path)
    memo = (os.path.realpath(path), st.st_size, st.st_mtime_ns)
    if memo not in _DIGESTS:
        h = hashlib.sha256()
        with open(path, "rb") as f:
            for block in iter(lambda: f.read(1 << 20), b""):
                h.update(block)
        _DIGESTS[memo] = h.hexdigest()
    return _DIGESTS[memo]


def _ptxas():
    cuda = os.environ.get("CUDA_HOME", "/usr/local/cuda")
    path = os.path.join(cuda, "bin", "ptxas")
    return path if os.path.exists(path) else (shutil.which("ptxas") or "ptxas")


_IDENTITIES = {}


def compiler_identity(exe=None) -> str:
    """What names the compiler that makes a bundle: the sha256 of the
    liger-compile executable (its --version stays the same across the builds
    of a release) and ptxas' version. A cache entry of another identity is
    rebuilt where a compiler is installed."""
    exe = exe or find_tool("liger-compile")
    digest = executable_digest(exe)
    ptxas = _ptxas()
    if (digest, ptxas) not in _IDENTITIES:
        _IDENTITIES[(digest, ptxas)] = hashlib.sha256(json.dumps({
            "compiler": _version([exe, "--version"]), "compiler_sha256": digest,
            "ptxas": _version([ptxas, "--version"])}, sort_keys=True).encode()).hexdigest()
    return _IDENTITIES[(digest, ptxas)]


# liger-compile's --matmul-schedule values.
MATMUL_SCHEDULES = ("auto", "data-parallel", "pingpong", "persistent")


def compile(source: str, target: str = "sm_90a", fuse: bool = True,
            cache_dir: Optional[str] = None, tool: Optional[str] = None,
            matmul_kernels: bool = True, loss_dw_f32: bool = False,
            meta: Optional[dict] = None, norm_prologue: bool = False,
            matmul_schedule: str = "auto",
            matmul_config_table: Optional[str] = None) -> Compiled:
    """Compiles `source` (a path to a .mlir file, or MLIR text) for `target`
    (`matmul_kernels`: the matmul groups and the loss plans too, as
    liger-compile does by default; False: --no-matmul-kernels, they stay
    uncompiled; `loss_dw_f32`: a planned loss sums dW in
    f32, --loss-dw-f32; `norm_prologue`: an RMSNorm read only by
    projections folded into their matmul kernels, --norm-prologue;
    `matmul_schedule`: how wgmma matmul kernels take their tiles, one of
    MATMUL_SCHEDULES, --matmul-schedule; `matmul_config_table`: the path of
    a JSON table of matmul configurations measured per shape,
    --matmul-config-table, keyed by its content; these three need the
    matmul kernels, the norm prologue also the fusion, and a table the
    "auto" schedule) into
    the bundle cache `cache_dir` (default: the
    user's, liger.cache.default_root(), which falls back to a temporary
    cache where it cannot be written; a `cache_dir` given never does).
    `meta` is recorded in the entry's marker.

    Raises LigerValueError for options that name nothing or cannot go
    together, LigerError with liger-compile's diagnostics when it fails, or
    when `cache_dir` cannot be written.
    """
    if matmul_schedule not in MATMUL_SCHEDULES:
        raise LigerValueError("matmul_schedule must be one of %s, got %r" % (
            ", ".join(MATMUL_SCHEDULES), matmul_schedule))
    # The norm prologue is a fusion; a schedule or a table also shapes the
    # groups a module already holds (fuse=False compiles those).
    if norm_prologue and not (matmul_kernels and fuse):
        raise LigerValueError("norm_prologue shapes the matmul kernels: it needs "
                              "matmul_kernels=True and fuse=True")
    for name, given in (("matmul_schedule=%r" % matmul_schedule, matmul_schedule != "auto"),
                        ("matmul_config_table", matmul_config_table is not None)):
        if given and not matmul_kernels:
            raise LigerValueError("%s shapes the matmul kernels: it needs matmul_kernels=True"
                                  % name)
    table = None
    if matmul_config_table is not None:
        if matmul_schedule != "auto":
            raise LigerValueError("matmul_schedule=%r and matmul_config_table both choose the "
                                  "configuration of matmul groups: give one" % matmul_schedule)
        try:
            with open(matmul_config_table, "rb") as f:
                table = f.read().decode("utf-8")
        except OSError as e:
            raise LigerValueError("cannot read the matmul configuration table %s: %s" % (
                matmul_config_table, e.strerror or e)) from None
        except UnicodeDecodeError as e:
            raise LigerValueError("the matmul configuration table %s is not UTF-8 text (%s)" % (
                matmul_config_table, e.reason)) from None
    text = open(source).read() if os.path.isfile(source) else source
    exe = tool or find_tool("liger-compile")
    options = cache.compile_options(target, fuse, matmul_kernels, loss_dw_f32, norm_prologue,
                                    matmul_schedule, table)
    key = cache.bundle_key(text, options)
    debug = bool(os.environ.get("LIGER_DEBUG"))

    def build(work):
        src = os.path.join(work, "module.mlir")
        with open(src, "w") as f:
            f.write(text)
        args = [exe, src, "-o", work, "--target=" + target]
        if not fuse:
            args.append("--no-fuse")
        if not matmul_kernels:
            args.append("--no-matmul-kernels")
        if loss_dw_f32:
            args.append("--loss-dw-f32")
        if norm_prologue:
            args.append("--norm-prologue")
        if matmul_schedule != "auto":
            args.append("--matmul-schedule=" + matmul_schedule)
        copy = os.path.join(work, "matmul-config-table.json")
        if table is not None:
            # The text keyed, not the file, which may change meanwhile.
            with open(copy, "w") as f:
                f.write(table)
            args.append("--matmul-config-table=" + copy)
        if debug:
            args.append("--dump-dir=" + os.path.join(work, "stages"))
        proc = subprocess.run(args, capture_output=True, text=True)
        if proc.returncode != 0:
            stderr = proc.stderr.strip()
            if table is not None:  # name the user's file, not the copy
                stderr = stderr.replace(copy, matmul_config_table)
            raise LigerError("liger-compile failed (exit %d)" % proc.returncode, stderr)

    path, cached = cache.Cache(cache_dir).get_or_build(key, build, compiler_identity(exe),
                                                       meta)
    if debug:
        print(_debug_report(path, cached))
    return Compiled(path, key, cached)


def _debug_report(path, cached):
    """What LIGER_DEBUG=1 prints for the entry `path`: compiled now or found
    in the cache, and where its stages are."""
    stages = os.path.join(path, "stages")
    if not cached:
        return "liger: compiled %s; stages in %s" % (path, stages)
    if os.path.isdir(stages):
        return "liger: cache hit %s; stages in %s (%s)" % (
            path, stages, ", ".join(sorted(os.listdir(stages))))
    return ("liger: cache hit %s; its stages were not kept (compiled without LIGER_DEBUG): "
            "delete the entry, or set LIGER_CACHE_DIR to another directory, to compile it "
            "again with them" % path)
