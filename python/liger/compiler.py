"""Compile liger modules to kernel bundles from Python, with an on-disk cache.

    from liger import compiler
    compiled = compiler.compile("layer.mlir", target="sm_90a")
    bundle = liger.runtime.load(compiled.path)

`compile` runs `liger-compile` (the same pipeline as the tool: canonicalize,
liger-fuse, the GPU lowering, PTX, cubin, bundle) and keeps the bundle in a
cache directory ($LIGER_CACHE_DIR, else ~/.cache/liger) under a key of the
module text, the options, liger-compile's version and build (the sha256 of
the executable) and ptxas' version: the same input compiles once per
compiler build. With LIGER_DEBUG=1 every stage's output is written beside
the bundle (stages/) and its path printed.
"""

import hashlib
import json
import os
import shutil
import subprocess
import tempfile
from dataclasses import dataclass
from typing import Optional

from .driver import LigerError, find_tool


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


def compile(source: str, target: str = "sm_90a", fuse: bool = True,
            cache_dir: Optional[str] = None, tool: Optional[str] = None,
            matmul_kernels: bool = False, loss_dw_f32: bool = False) -> Compiled:
    """Compiles `source` (a path to a .mlir file, or MLIR text) for `target`
    (`matmul_kernels`: also the matmul groups and the loss plans,
    liger-compile --matmul-kernels; `loss_dw_f32`: a planned loss sums dW in
    f32, --loss-dw-f32).

    Raises LigerError with liger-compile's diagnostics when it fails.
    """
    text = open(source).read() if os.path.isfile(source) else source
    exe = tool or find_tool("liger-compile")
    options = {"target": target, "fuse": fuse}
    if matmul_kernels:
        options["matmul_kernels"] = True
    if loss_dw_f32:
        options["loss_dw_f32"] = True
    key_material = json.dumps({
        "source": text, "options": options,
        "compiler": _version([exe, "--version"]),
        "compiler_sha256": executable_digest(exe),
        "ptxas": _version([_ptxas(), "--version"]),
    }, sort_keys=True)
    key = hashlib.sha256(key_material.encode()).hexdigest()[:32]
    root = cache_dir or os.environ.get("LIGER_CACHE_DIR") or os.path.join(
        os.path.expanduser("~"), ".cache", "liger")
    entry = os.path.join(root, key)
    bundle = os.path.join(entry, "bundle")
    if os.path.isfile(os.path.join(bundle, "manifest.json")):
        return Compiled(bundle, key, True)
    os.makedirs(root, exist_ok=True)
    work = tempfile.mkdtemp(prefix=key + ".", dir=root)
    try:
        src = os.path.join(work, "module.mlir")
        with open(src, "w") as f:
            f.write(text)
        args = [exe, src, "-o", os.path.join(work, "bundle"), "--target=" + target]
        if not fuse:
            args.append("--no-fuse")
        if matmul_kernels:
            args.append("--matmul-kernels")
        if loss_dw_f32:
            args.append("--loss-dw-f32")
        debug = bool(os.environ.get("LIGER_DEBUG"))
        if debug:
            args.append("--dump-dir=" + os.path.join(work, "stages"))
        proc = subprocess.run(args, capture_output=True, text=True)
        if proc.returncode != 0:
            raise LigerError("liger-compile failed (exit %d)" % proc.returncode,
                             proc.stderr.strip())
        try:
            os.rename(work, entry)  # atomic: a concurrent compile may win
        except OSError:
            if not os.path.isfile(os.path.join(bundle, "manifest.json")):
                raise
            return Compiled(bundle, key, True)
        work = None
        if debug:
            print("liger: compiled %s; stages in %s" % (bundle, os.path.join(entry, "stages")))
        return Compiled(bundle, key, False)
    finally:
        if work and os.path.isdir(work):
            shutil.rmtree(work, ignore_errors=True)
