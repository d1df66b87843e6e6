"""The bundle cache (liger.cache) under what happens to caches: several
processes compiling the same module at once, damaged entries (a garbled
manifest, a missing cubin, a file where the entry's directory should be, an
entry without its marker), the leftovers of a killed compile, and a cache
that cannot be written."""

import json
import multiprocessing
import os
import shutil
import signal
import subprocess
import sys
import time

import pytest

from liger import LigerError, cache, compiler

ROOT = os.path.join(os.path.dirname(__file__), "..", "..")
MODULE = """func.func @f(%x: tensor<?x64xf32>, %w: tensor<64xf32>) -> tensor<?x64xf32> {
  %y = liger.rms_norm %x, %w : tensor<?x64xf32>, tensor<64xf32>
  return %y : tensor<?x64xf32>
}
"""

needs_ptxas = pytest.mark.skipif(
    not shutil.which("ptxas") and not os.path.exists("/usr/local/cuda/bin/ptxas"),
    reason="ptxas (CUDA toolkit) not found")


def _entries(root):
    return sorted(n for n in os.listdir(root) if not n.startswith("."))


def _compile_in(args):
    root, python_path = args
    sys.path.insert(0, python_path)
    from liger import compiler as c
    compiled = c.compile(MODULE, target="sm_80", cache_dir=root)
    return compiled.path, compiled.cached, cache.entry_problem(compiled.path, compiled.key)


@needs_ptxas
def test_processes_compiling_one_module_make_one_entry(tmp_path):
    """Four processes at once: one entry, four whole results, one compile
    (the others wait on the entry's lock and take it)."""
    root = str(tmp_path / "cache")
    ctx = multiprocessing.get_context("spawn")
    with ctx.Pool(4) as pool:
        results = pool.map(_compile_in, [(root, os.path.join(ROOT, "python"))] * 4)
    paths = {path for path, _, _ in results}
    assert len(paths) == 1
    assert [problem for _, _, problem in results] == [None] * 4
    assert sorted(cached for _, cached, _ in results) == [False, True, True, True]
    assert _entries(root) == [os.path.basename(paths.pop())]
    assert not [n for n in os.listdir(root) if n.startswith(".tmp-")]


def _damage_manifest(path):
    with open(os.path.join(path, "manifest.json"), "w") as f:
        f.write("{ not json")


def _remove_cubin(path):
    manifest = json.load(open(os.path.join(path, "manifest.json")))
    os.remove(os.path.join(path, manifest["modules"][0]["cubin"]))


def _remove_marker(path):
    os.remove(os.path.join(path, cache.MARKER))


def _file_for_directory(path):
    shutil.rmtree(path)
    with open(path, "w") as f:
        f.write("not a bundle")


def _empty_directory(path):
    # What a compile killed before the atomic rename of old left behind.
    shutil.rmtree(path)
    os.mkdir(path)
    open(os.path.join(path, "module.mlir"), "w").close()


@needs_ptxas
@pytest.mark.parametrize("damage,problem", [
    (_damage_manifest, "its manifest.json is missing or does not parse"),
    (_remove_cubin, "its manifest names 'liger_kernels.sm_80.cubin', which is missing"),
    (_remove_marker, "no completion marker (liger-entry.json)"),
    (_file_for_directory, "not a directory"),
    (_empty_directory, "no completion marker (liger-entry.json)"),
], ids=["garbled-manifest", "missing-cubin", "no-marker", "file-for-directory",
        "entry-without-bundle"])
def test_a_damaged_entry_is_detected_and_rebuilt(tmp_path, damage, problem):
    root = str(tmp_path)
    first = compiler.compile(MODULE, target="sm_80", cache_dir=root)
    damage(first.path)
    assert cache.entry_problem(first.path, first.key) == problem
    assert cache.Cache(root).lookup(first.key) is None
    again = compiler.compile(MODULE, target="sm_80", cache_dir=root)
    assert not again.cached and again.path == first.path
    assert cache.entry_problem(again.path, again.key) is None
    assert compiler.compile(MODULE, target="sm_80", cache_dir=root).cached


def test_a_failed_build_leaves_nothing(tmp_path):
    def build(work):
        open(os.path.join(work, "half-written"), "w").close()
        raise LigerError("no")
    with pytest.raises(LigerError, match="no"):
        cache.Cache(str(tmp_path)).get_or_build("k" * 32, build)
    assert [n for n in os.listdir(tmp_path) if not n.startswith(".lock-")] == []


def test_a_build_that_is_not_a_bundle_is_refused(tmp_path):
    with pytest.raises(LigerError, match="the bundle built for cache entry k+ is not whole: "
                                         "its manifest.json is missing or does not parse"):
        cache.Cache(str(tmp_path)).get_or_build("k" * 32, lambda work: None)
    assert _entries(tmp_path) == []


def test_leftovers_of_a_killed_compile_are_cleaned(tmp_path):
    """A build directory of a process that no longer runs goes at the next
    build; one of a live process stays unless it is older than an hour."""
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    c = cache.Cache(str(tmp_path))
    stale = tmp_path / (".tmp-%s-%s-%d-abc" % ("a" * 32, cache._HOST, dead.pid))
    live = tmp_path / (".tmp-%s-%s-%d-def" % ("b" * 32, cache._HOST, os.getpid()))
    old = tmp_path / (".tmp-%s-otherhost-%d-ghi" % ("c" * 32, os.getpid()))
    other = tmp_path / (".tmp-%s-otherhost-1-jkl" % ("d" * 32))
    for d in (stale, live, old, other):
        d.mkdir()
        (d / "module.mlir").write_text("")
    hour_ago = time.time() - cache.STALE_SECONDS - 60
    os.utime(old, (hour_ago, hour_ago))
    assert sorted(c.clean_stale()) == sorted([stale.name, old.name])
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted([live.name, other.name])


@needs_ptxas
def test_a_compile_killed_midway_is_cleaned_by_the_next(tmp_path):
    """A real compile killed while it builds: its temporary directory stays
    (no entry appears), and the next compile removes it and builds."""
    root = str(tmp_path)
    code = ("import sys, time; sys.path.insert(0, %r)\n"
            "from liger import cache\n"
            "def build(work):\n"
            "    open(work + '/module.mlir', 'w').close(); print('building', flush=True)\n"
            "    time.sleep(60)\n"
            "cache.Cache(%r).get_or_build(cache.bundle_key(%r, cache.compile_options('sm_80')),"
            " build)\n" % (os.path.join(ROOT, "python"), root, MODULE))
    proc = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
    assert proc.stdout.readline().strip() == "building"
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    assert len([n for n in os.listdir(root) if n.startswith(".tmp-")]) == 1
    assert _entries(root) == []
    compiled = compiler.compile(MODULE, target="sm_80", cache_dir=root)
    assert not compiled.cached and cache.entry_problem(compiled.path, compiled.key) is None
    assert not [n for n in os.listdir(root) if n.startswith(".tmp-")]


def _read_only_root(tmp_path):
    """A directory this process cannot write: a read-only one, or (for
    root, whom permissions do not stop) a path under /sys."""
    if os.geteuid() != 0:
        d = tmp_path / "ro"
        d.mkdir()
        d.chmod(0o555)
        return str(d)
    return "/sys/liger-cache-test"


@needs_ptxas
def test_a_read_only_cache_falls_back_to_a_temporary_one_with_one_warning(tmp_path,
                                                                          monkeypatch):
    root = _read_only_root(tmp_path)
    monkeypatch.setattr(cache, "_FALLBACK", {})
    with pytest.warns(cache.LigerCacheWarning) as caught:
        first = compiler.compile(MODULE, target="sm_80", cache_dir=root)
        second = compiler.compile(MODULE.replace("64", "32"), target="sm_80", cache_dir=root)
    assert len(caught) == 1
    message = str(caught[0].message)
    assert message.startswith("liger: the compile cache %s cannot be written (" % root)
    assert "for this process (set LIGER_CACHE_DIR to a writable directory)" in message
    fallback = cache._FALLBACK[os.path.abspath(root)].root
    assert first.path.startswith(fallback) and second.path.startswith(fallback)
    assert not first.cached
    assert compiler.compile(MODULE, target="sm_80", cache_dir=root).cached


@needs_ptxas
def test_a_hit_writes_nothing(tmp_path):
    """A whole entry is read without the lock or any file written: a
    read-only cache that has the entry serves it."""
    root = str(tmp_path)
    first = compiler.compile(MODULE, target="sm_80", cache_dir=root)
    before = sorted(os.listdir(root))
    os.remove(os.path.join(root, ".lock-" + first.key))
    assert compiler.compile(MODULE, target="sm_80", cache_dir=root).cached
    assert sorted(os.listdir(root)) == sorted(set(before) - {".lock-" + first.key})


def test_the_default_root_is_the_users(monkeypatch, tmp_path):
    monkeypatch.setenv("LIGER_CACHE_DIR", str(tmp_path))
    assert cache.Cache().root == str(tmp_path)
    monkeypatch.delenv("LIGER_CACHE_DIR")
    assert cache.Cache().root == os.path.join(os.path.expanduser("~"), ".cache", "liger")
