"""The bundle cache (liger.cache) under what happens to caches: several
processes compiling the same module at once, two compilers sharing one
cache, file systems where locks do not work, damaged entries (a garbled
manifest, a missing or truncated cubin, a file where the entry's directory
should be, an entry without its marker), the leftovers of a killed compile,
caches that cannot be written, and entries of another user."""

import errno
import json
import multiprocessing
import os
import pickle
import re
import shutil
import signal
import stat
import subprocess
import sys
import tempfile
import time

import pytest

from liger import LigerError, cache, compiler

ROOT = os.path.join(os.path.dirname(__file__), "..", "..")
MODULE = """func.func @f(%x: tensor<?x64xf32>, %w: tensor<64xf32>) -> tensor<?x64xf32> {
  %y = liger.rms_norm %x, %w : tensor<?x64xf32>, tensor<64xf32>
  return %y : tensor<?x64xf32>
}
"""
KEY = "k" * 32

needs_ptxas = pytest.mark.skipif(
    not shutil.which("ptxas") and not os.path.exists("/usr/local/cuda/bin/ptxas"),
    reason="ptxas (CUDA toolkit) not found")


def _entries(root):
    return sorted(n for n in os.listdir(root) if not n.startswith("."))


def fake_build(work, cubin=b"\x7fELF a cubin"):
    """What a build writes: a manifest and the files it names."""
    with open(os.path.join(work, "manifest.json"), "w") as f:
        json.dump({"modules": [{"name": "liger_kernels", "cubin": "k.cubin",
                                "ptx": "k.ptx"}]}, f)
    with open(os.path.join(work, "k.cubin"), "wb") as f:
        f.write(cubin)
    with open(os.path.join(work, "k.ptx"), "w") as f:
        f.write("// ptx")


def _counting(builds, content=b"\x7fELF a cubin"):
    def build(work):
        builds.append(work)
        fake_build(work, content)
    return build


def _contend(root, python_path, rendezvous, index, workers, results):
    """One of `workers` processes compiling MODULE into `root` at once.
    Each notes in `rendezvous` that its lock-free lookup missed; the one
    that gets the lock waits, before it builds, until every other has
    missed too, so they all contend for the lock."""
    sys.path.insert(0, python_path)
    from liger import cache as c
    from liger import compiler as comp
    lookup, start = c.Cache.lookup, c._Build.__init__

    def noting_lookup(self, key, identity=None):
        found = lookup(self, key, identity)
        if found is None:
            open(os.path.join(rendezvous, "missed-%d" % index), "w").close()
        return found

    def waiting_start(self, *args):
        deadline = time.time() + 60
        while len(os.listdir(rendezvous)) < workers and time.time() < deadline:
            time.sleep(0.01)
        start(self, *args)
    c.Cache.lookup, c._Build.__init__ = noting_lookup, waiting_start
    compiled = comp.compile(MODULE, target="sm_80", cache_dir=root)
    results.put((index, compiled.path, compiled.cached,
                 c.entry_problem(compiled.path, compiled.key)))


@needs_ptxas
def test_processes_compiling_one_module_make_one_entry(tmp_path):
    """Four processes at once, every one missing the entry before the
    first builds: one compile, one entry, four whole results (the others
    wait on the entry's lock and take it)."""
    root, rendezvous = str(tmp_path / "cache"), tmp_path / "rendezvous"
    rendezvous.mkdir()
    ctx = multiprocessing.get_context("spawn")
    results = ctx.Queue()
    procs = [ctx.Process(target=_contend, args=(root, os.path.join(ROOT, "python"),
                                                str(rendezvous), i, 4, results))
             for i in range(4)]
    for p in procs:
        p.start()
    got = sorted(results.get(timeout=300) for _ in procs)
    for p in procs:
        p.join(60)
    assert sorted(os.listdir(rendezvous)) == ["missed-%d" % i for i in range(4)]
    paths = {path for _, path, _, _ in got}
    assert len(paths) == 1
    assert [problem for _, _, _, problem in got] == [None] * 4
    assert sorted(cached for _, _, cached, _ in got) == [False, True, True, True]
    (path,) = paths
    assert _entries(root) == [os.path.basename(os.path.dirname(path))]
    assert not [n for n in os.listdir(root) if n.startswith(".tmp-")]


def _damage_manifest(path):
    with open(os.path.join(path, "manifest.json"), "w") as f:
        f.write("{ not json")


def _cubin(path):
    manifest = json.load(open(os.path.join(path, "manifest.json")))
    return os.path.join(path, manifest["modules"][0]["cubin"])


def _remove_cubin(path):
    os.remove(_cubin(path))


def _truncate_cubin(path):
    open(_cubin(path), "wb").close()


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
    (_truncate_cubin, r"its file 'liger_kernels.sm_80.cubin' has 0 bytes, its marker says "
                      r"[1-9][0-9]*"),
    (_remove_marker, r"no completion marker \(liger-entry.json\)"),
    (_file_for_directory, "not a directory"),
    (_empty_directory, r"no completion marker \(liger-entry.json\)"),
], ids=["garbled-manifest", "missing-cubin", "truncated-cubin", "no-marker",
        "file-for-directory", "entry-without-bundle"])
def test_a_damaged_entry_is_detected_and_rebuilt(tmp_path, damage, problem):
    root = str(tmp_path)
    first = compiler.compile(MODULE, target="sm_80", cache_dir=root)
    damage(first.path)
    assert re.fullmatch(problem, cache.entry_problem(first.path, first.key))
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
        cache.Cache(str(tmp_path)).get_or_build(KEY, build)
    assert [n for n in os.listdir(tmp_path) if not n.startswith(".lock-")] == []


def test_a_build_that_is_not_a_bundle_is_refused(tmp_path):
    with pytest.raises(LigerError, match="the bundle built for cache entry k+ is not whole: "
                                         "its manifest.json is missing or does not parse"):
        cache.Cache(str(tmp_path)).get_or_build(KEY, lambda work: None)
    assert _entries(tmp_path) == []


def test_two_compilers_share_a_cache_without_touching_each_others_entries(tmp_path):
    """Each compiler has its own entry under the key: neither rebuilds nor
    removes the other's (a process reading one keeps it), and each builds
    once however they alternate."""
    c = cache.Cache(str(tmp_path))
    builds = []
    a, cached = c.get_or_build(KEY, _counting(builds, b"A"), identity="compiler A")
    assert not cached
    a_files = {n: open(os.path.join(a, n), "rb").read() for n in os.listdir(a)}
    b, cached = c.get_or_build(KEY, _counting(builds, b"B"), identity="compiler B")
    assert not cached and b != a
    for _ in range(3):
        assert c.get_or_build(KEY, _counting(builds), identity="compiler A") == (a, True)
        assert c.get_or_build(KEY, _counting(builds), identity="compiler B") == (b, True)
    assert len(builds) == 2
    assert {n: open(os.path.join(a, n), "rb").read() for n in os.listdir(a)} == a_files
    assert os.path.dirname(a) == os.path.dirname(b) == os.path.join(str(tmp_path), KEY)
    assert cache.read_marker(a)["identity"] == "compiler A"
    # An entry whose marker names another compiler is not this one's.
    assert cache.entry_problem(a, KEY, "compiler B") == "its marker names another compiler"


def test_a_lookup_naming_no_compiler_takes_the_newest_whole_entry(tmp_path):
    c = cache.Cache(str(tmp_path))
    old, _ = c.get_or_build(KEY, fake_build, identity="old compiler")
    new, _ = c.get_or_build(KEY, fake_build, identity="new compiler")
    assert c.lookup(KEY) == new
    _truncate_cubin(new)
    assert c.lookup(KEY) == old
    assert c.lookup("j" * 32) is None


def _no_locks(monkeypatch):
    """flock as on a file system without locks (NFS without lockd)."""
    def flock(fd, op):
        raise OSError(errno.ENOLCK, "No locks available")
    monkeypatch.setattr(cache.fcntl, "flock", flock)


def test_where_locks_do_not_work_an_entry_put_in_place_first_is_taken(tmp_path, monkeypatch):
    """Without locks two processes (of two hosts, say) build at once; the
    one whose rename finds a whole entry in place takes it."""
    _no_locks(monkeypatch)
    c = cache.Cache(str(tmp_path))
    ours = []

    def build(work):
        # Another process puts its entry in place while this one builds.
        other = cache.Cache(str(tmp_path)).get_or_build(KEY, _counting([], b"theirs"))
        ours.append(other)
        fake_build(work, b"ours")
    path, cached = c.get_or_build(KEY, build)
    assert ours == [(path, False)] and cached
    assert open(os.path.join(path, "k.cubin"), "rb").read() == b"theirs"
    assert cache.entry_problem(path, KEY, "") is None
    assert not [n for n in os.listdir(tmp_path) if n.startswith(".tmp-")]
    # A damaged entry in place is replaced.
    _truncate_cubin(path)
    assert c.get_or_build(KEY, fake_build) == (path, False)
    assert cache.entry_problem(path, KEY, "") is None


def test_leftovers_of_a_killed_compile_are_cleaned(tmp_path, monkeypatch):
    """A build directory whose builder's lock nobody holds goes at the
    next build, whoever's it was; one whose builder is alive stays, even
    named after a process this one cannot see (a container sharing the
    host name but not the PID namespace). A directory without the lock
    goes only once it is older than an hour."""
    root = str(tmp_path)
    c = cache.Cache(root)
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    live = cache._Build(root, "a" * 32)  # holds its lock, as a live builder does
    live_elsewhere = cache._Build(root, "b" * 32)
    named = tmp_path / (".tmp-%s-%s-%d-xyz" % ("b" * 32, cache._HOST, dead.pid))
    os.rename(live_elsewhere.dir, named)
    live_elsewhere.dir = str(named)
    killed = cache._Build(root, "c" * 32)
    os.close(killed.fd)  # its process died: the lock is released
    killed.fd = None
    young, old = tmp_path / ".tmp-young", tmp_path / ".tmp-old"
    for d in (young, old):
        d.mkdir()
    hour_ago = time.time() - cache.STALE_SECONDS - 60
    os.utime(old, (hour_ago, hour_ago))
    assert sorted(c.clean_stale()) == sorted([os.path.basename(killed.dir), old.name])
    assert sorted(os.listdir(root)) == sorted([os.path.basename(live.dir), named.name,
                                               young.name])
    live.close()
    live_elsewhere.close()
    assert os.listdir(root) == [young.name]


def test_where_locks_do_not_work_only_old_leftovers_are_cleaned(tmp_path, monkeypatch):
    root = str(tmp_path)
    build = cache._Build(root, "a" * 32)
    old = cache._Build(root, "b" * 32)
    hour_ago = time.time() - cache.STALE_SECONDS - 60
    os.utime(old.dir, (hour_ago, hour_ago))
    _no_locks(monkeypatch)
    assert cache.Cache(root).clean_stale() == [os.path.basename(old.dir)]
    assert os.listdir(root) == [os.path.basename(build.dir)]
    build.close()
    old.close()


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


def test_a_cache_named_explicitly_that_cannot_be_written_is_an_error(tmp_path):
    """precompile DIR (a cache named explicitly) never compiles elsewhere
    and reports success: it raises, and builds nothing."""
    root = _read_only_root(tmp_path)
    builds = []
    with pytest.raises(LigerError, match="^the bundle cache %s cannot be written \\(" %
                                         re.escape(root)):
        cache.Cache(root).get_or_build(KEY, _counting(builds))
    assert builds == []


def test_the_users_cache_falls_back_to_a_temporary_one_with_one_warning(tmp_path,
                                                                       monkeypatch):
    root = _read_only_root(tmp_path)
    monkeypatch.setenv("LIGER_CACHE_DIR", root)
    monkeypatch.setattr(cache, "_FALLBACK", {})
    with pytest.warns(cache.LigerCacheWarning) as caught:
        first, cached = cache.Cache().get_or_build(KEY, fake_build)
        second, _ = cache.Cache().get_or_build("j" * 32, fake_build)
    assert len(caught) == 1
    message = str(caught[0].message)
    assert message.startswith("liger: the compile cache %s cannot be written (" % root)
    assert "for this process (set LIGER_CACHE_DIR to a writable directory)" in message
    fallback = cache._FALLBACK[os.path.abspath(root)].root
    assert first.startswith(fallback) and second.startswith(fallback)
    assert not cached
    assert cache.Cache().get_or_build(KEY, fake_build) == (first, True)


def test_the_temporary_cache_is_removed_at_exit(tmp_path):
    code = ("import sys, os, warnings; sys.path.insert(0, %r)\n"
            "from liger import cache\n"
            "warnings.simplefilter('ignore')\n"
            "os.environ['LIGER_CACHE_DIR'] = %r\n"
            "def build(work):\n"
            "    open(os.path.join(work, 'manifest.json'), 'w').write('{\"modules\": []}')\n"
            "path, _ = cache.Cache().get_or_build('k' * 32, build)\n"
            "print(cache._FALLBACK[os.path.abspath(%r)].root)\n"
            % (os.path.join(ROOT, "python"), _read_only_root(tmp_path),
               _read_only_root(tmp_path)))
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    fallback = proc.stdout.strip()
    assert fallback.startswith(tempfile.gettempdir()) and not os.path.exists(fallback)


@needs_ptxas
def test_a_hit_writes_nothing(tmp_path):
    """A whole entry is read without the lock or any file written: a
    read-only cache that has the entry serves it."""
    root = str(tmp_path)
    first = compiler.compile(MODULE, target="sm_80", cache_dir=root)
    locks = [n for n in os.listdir(root) if n.startswith(".lock-" + first.key)]
    assert len(locks) == 1
    before = sorted(os.listdir(root))
    os.remove(os.path.join(root, locks[0]))
    assert compiler.compile(MODULE, target="sm_80", cache_dir=root).cached
    assert sorted(os.listdir(root)) == sorted(set(before) - set(locks))


def test_the_default_root_is_the_users(monkeypatch, tmp_path):
    monkeypatch.setenv("LIGER_CACHE_DIR", str(tmp_path))
    assert cache.Cache().root == str(tmp_path)
    monkeypatch.delenv("LIGER_CACHE_DIR")
    assert cache.Cache().root == os.path.join(os.path.expanduser("~"), ".cache", "liger")


# --- two users -------------------------------------------------------------

NOBODY = 65534
as_root = pytest.mark.skipif(os.geteuid() != 0, reason="acting as a second user needs root")


def _as_nobody(fn):
    """fn() run by the user nobody (a forked child); its result, or the
    text of what it raised."""
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: never returns
        try:
            os.close(r)
            os.setgroups([])
            os.setgid(NOBODY)
            os.setuid(NOBODY)
            result = ("ok", fn())
        except BaseException as e:  # noqa: B902 (reported to the parent)
            result = ("raised", "%s: %s" % (type(e).__name__, e))
        try:
            os.write(w, pickle.dumps(result))
        finally:
            os._exit(0)
    os.close(w)
    with os.fdopen(r, "rb") as f:
        data = f.read()
    os.waitpid(pid, 0)
    return pickle.loads(data)


@pytest.fixture
def shared(monkeypatch):
    """A cache directory every user may write (as a shared one is)."""
    d = tempfile.mkdtemp(prefix="liger-shared-cache-")
    os.chmod(d, 0o777)
    yield d
    shutil.rmtree(d, ignore_errors=True)


def _read_bundle(path):
    return open(os.path.join(path, "k.cubin"), "rb").read()


@as_root
def test_an_entry_is_readable_by_another_user(shared):
    """A directory precompiled by one user serves a job running as
    another (the entry has the umask's permissions, not mkdtemp's 0700)."""
    path, _ = cache.Cache(shared).get_or_build(KEY, fake_build, identity="X")
    umask = os.umask(0)
    os.umask(umask)
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o777 & ~umask
    assert _as_nobody(lambda: cache.Cache(shared).lookup(KEY)) == ("ok", path)
    assert _as_nobody(lambda: _read_bundle(path)) == ("ok", b"\x7fELF a cubin")


@as_root
def test_another_users_lock_file_does_not_stop_a_build(shared):
    """The entry's lock file is another user's (0644): the lock is taken
    through a read-only descriptor."""
    c = cache.Cache(shared)
    path, _ = c.get_or_build(KEY, fake_build, identity="X")
    shutil.rmtree(path)
    (lock,) = [n for n in os.listdir(shared) if n.startswith(".lock-")]
    assert stat.S_IMODE(os.stat(os.path.join(shared, lock)).st_mode) == 0o644
    os.chmod(os.path.dirname(path), 0o777)  # (as in a cache shared with umask 002)
    got = _as_nobody(lambda: cache.Cache(shared).get_or_build(KEY, fake_build, identity="X"))
    assert got == ("ok", (path, False)), got
    assert os.stat(path).st_uid == NOBODY
    # Where this user may not add an entry (the key's directory is the
    # other user's, 0755), a cache named explicitly says so.
    os.chmod(os.path.dirname(path), 0o755)
    got = _as_nobody(lambda: cache.Cache(shared).get_or_build(KEY, fake_build, identity="Y"))
    assert got[0] == "raised" and got[1].startswith(
        "LigerError: the bundle cache %s cannot be written ([Errno 13] Permission denied" %
        shared), got


@as_root
def test_another_users_private_entry_is_left_alone(shared, monkeypatch):
    """An entry this user may not read is not damaged: it is not removed
    or rebuilt over; the user's cache falls back (with its warning), a
    cache named explicitly says why it cannot serve it."""
    umask = os.umask(0o077)
    try:
        path, _ = cache.Cache(shared).get_or_build(KEY, fake_build, identity="X")
    finally:
        os.umask(umask)
    assert _as_nobody(lambda: cache.entry_problem(path, KEY)) == (
        "ok", "%s cannot be read here (Permission denied)" % path)
    assert _as_nobody(lambda: cache.Cache(shared).lookup(KEY)) == ("ok", None)
    got = _as_nobody(lambda: cache.Cache(shared).get_or_build(KEY, fake_build, identity="X"))
    assert got == ("raised", "LigerError: the bundle cache %s has an entry this user cannot "
                             "use: %s cannot be read here (Permission denied)" % (shared, path))
    monkeypatch.setenv("LIGER_CACHE_DIR", shared)

    def in_the_users_cache():
        import warnings
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            other, cached = cache.Cache().get_or_build(KEY, fake_build, identity="X")
        return other.startswith(shared), cached, [str(w.message) for w in caught]
    state, (inside, cached, warned) = _as_nobody(in_the_users_cache)
    assert state == "ok" and not inside and not cached
    assert len(warned) == 1 and warned[0].startswith(
        "liger: the compile cache %s has an entry this user cannot use: %s cannot be read "
        "here (Permission denied); compiling into " % (shared, path)), warned
    assert cache.entry_problem(path, KEY, "X") is None
