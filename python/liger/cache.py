"""The bundle cache: one store for compiled and precompiled kernel bundles.

A cache is a directory of entries, one per key (`bundle_key`: a hash of a
module's text and its compile options, the target among them):

    <root>/<key>/            the bundle (manifest.json, cubins) and
    <root>/<key>/liger-entry.json   its completion marker, written last
    <root>/.lock-<key>       the entry's file lock
    <root>/.tmp-<key>-<host>-<pid>-<random>/   an entry being built

`liger.compile` caches what it compiles in the user's cache
($LIGER_CACHE_DIR, else ~/.cache/liger); `python -m liger.ops precompile
DIR` writes the same entries into DIR, which `LIGER_OPS_BUNDLES=DIR` then
serves where no compiler is installed. An entry is used only when it is
whole: a directory with a marker that parses and names its key, a manifest
that parses, and every file the manifest names (a cheap check, made on
every lookup). A damaged entry is rebuilt. Builds are safe across
processes: one builds under the entry's lock while the others wait for it,
into a temporary directory renamed into place at once (a reader never sees
half an entry); the temporary directories of a killed build (owned by a
dead process of this host, or older than an hour) are removed by the next
build in that cache. A cache that cannot be written falls back, with one
LigerCacheWarning, to a temporary cache for the rest of the process.

The marker records the compiler that made the entry (`identity`: the
liger-compile executable's sha256 and ptxas' version); a lookup that names
an identity rebuilds an entry of another compiler, one that names none
(a machine without the compiler) takes any whole entry.
"""

import errno
import fcntl
import hashlib
import json
import os
import shutil
import socket
import tempfile
import time
import warnings

from .errors import LigerCacheWarning, LigerError

MARKER = "liger-entry.json"
# Temporary build directories of no live process older than this are
# leftovers of a killed build.
STALE_SECONDS = 3600
_HOST = socket.gethostname().replace("-", "_")
_FALLBACK = {}


def compile_options(target="sm_90a", fuse=True, matmul_kernels=False, loss_dw_f32=False):
    """liger-compile's options as keys name them (those at their default
    left out, so a new option keeps the keys of the bundles without it)."""
    options = {"target": target, "fuse": fuse}
    if matmul_kernels:
        options["matmul_kernels"] = True
    if loss_dw_f32:
        options["loss_dw_f32"] = True
    return options


def bundle_key(text, options):
    """The key of the bundle of module `text` compiled with `options` (a
    dict of liger-compile options, the target among them)."""
    material = json.dumps(options, sort_keys=True) + "\n" + text
    return hashlib.sha256(material.encode()).hexdigest()[:32]


def default_root():
    """$LIGER_CACHE_DIR, else ~/.cache/liger."""
    return os.environ.get("LIGER_CACHE_DIR") or os.path.join(
        os.path.expanduser("~"), ".cache", "liger")


def entry_problem(path, key=None):
    """Why the entry at `path` cannot be used, or None when it is whole:
    a directory whose marker parses (naming `key`), whose manifest parses,
    and where every file the manifest names exists."""
    if not os.path.isdir(path):
        return "no entry" if not os.path.lexists(path) else "not a directory"
    try:
        with open(os.path.join(path, MARKER)) as f:
            marker = json.load(f)
    except (OSError, ValueError):
        return "no completion marker (%s)" % MARKER
    if not isinstance(marker, dict) or (key is not None and marker.get("key") != key):
        return "its marker names another key"
    try:
        with open(os.path.join(path, "manifest.json")) as f:
            manifest = json.load(f)
        files = [m[field] for m in manifest["modules"] for field in ("cubin", "ptx")
                 if field in m]
    except (OSError, ValueError, KeyError, TypeError):
        return "its manifest.json is missing or does not parse"
    for name in files:
        if not isinstance(name, str) or not os.path.isfile(os.path.join(path, name)):
            return "its manifest names %r, which is missing" % (name,)
    return None


def read_marker(path):
    with open(os.path.join(path, MARKER)) as f:
        return json.load(f)


class Cache:
    """A cache directory (see the module's doc)."""

    def __init__(self, root=None):
        self.root = os.path.abspath(root or default_root())

    def path(self, key):
        return os.path.join(self.root, key)

    def lookup(self, key, identity=None):
        """The path of the whole entry `key` (made by the compiler
        `identity`, when given), or None. Writes nothing."""
        path = self.path(key)
        if entry_problem(path, key) is not None:
            return None
        if identity is not None and read_marker(path).get("identity") != identity:
            return None
        return path

    def get_or_build(self, key, build, identity=None, meta=None):
        """(path, cached): the entry `key`, built by `build(directory)` where
        it is missing, damaged or (with `identity`) another compiler's.
        `build` writes the bundle into the empty directory it is given and
        raises to give up (nothing is left behind). `meta` goes into the
        marker."""
        path = self.lookup(key, identity)
        if path is not None:
            return path, True
        cache = self._writable()
        if cache is not self:
            return cache.get_or_build(key, build, identity, meta)
        with _Lock(os.path.join(self.root, ".lock-" + key)):
            # Another process may have built it while this one waited.
            path = self.lookup(key, identity)
            if path is not None:
                return path, True
            self.clean_stale()
            work = tempfile.mkdtemp(prefix=".tmp-%s-%s-%d-" % (key, _HOST, os.getpid()),
                                    dir=self.root)
            try:
                build(work)
                marker = dict(meta or {}, key=key, identity=identity, created=time.time())
                with open(os.path.join(work, MARKER), "w") as f:
                    json.dump(marker, f, sort_keys=True, indent=1)
                problem = entry_problem(work, key)
                if problem:
                    raise LigerError("the bundle built for cache entry %s is not whole: %s"
                                     % (key, problem))
                self._remove(self.path(key))
                os.rename(work, self.path(key))
                work = None
            finally:
                if work is not None:
                    shutil.rmtree(work, ignore_errors=True)
        return self.path(key), False

    def _remove(self, path):
        """Removes a damaged or outdated entry (a file or a directory)."""
        if os.path.isdir(path) and not os.path.islink(path):
            trash = tempfile.mkdtemp(prefix=".tmp-trash-%s-%d-" % (_HOST, os.getpid()),
                                     dir=self.root)
            os.rename(path, os.path.join(trash, "entry"))
            shutil.rmtree(trash, ignore_errors=True)
        elif os.path.lexists(path):
            os.remove(path)

    def clean_stale(self, now=None):
        """Removes the temporary directories of killed builds: those of a
        process of this host that no longer runs, and any older than
        STALE_SECONDS. Returns their names."""
        now = time.time() if now is None else now
        removed = []
        try:
            names = os.listdir(self.root)
        except OSError:
            return removed
        for name in names:
            if not name.startswith(".tmp-"):
                continue
            path = os.path.join(self.root, name)
            parts = name.split("-")
            try:
                host, pid = parts[-3], int(parts[-2])
                age = now - os.lstat(path).st_mtime
            except (IndexError, ValueError, OSError):
                continue
            if age > STALE_SECONDS or (host == _HOST and not _alive(pid)):
                shutil.rmtree(path, ignore_errors=True)
                removed.append(name)
        return removed

    def _writable(self):
        """This cache, or (once warned) a temporary one where this cache's
        directory cannot be written."""
        try:
            os.makedirs(self.root, exist_ok=True)
            probe = tempfile.mkdtemp(prefix=".tmp-probe-%s-%d-" % (_HOST, os.getpid()),
                                     dir=self.root)
            os.rmdir(probe)
            return self
        except OSError as e:
            fallback = _FALLBACK.get(self.root)
            if fallback is None:
                fallback = _FALLBACK[self.root] = Cache(tempfile.mkdtemp(prefix="liger-cache-"))
                warnings.warn("liger: the compile cache %s cannot be written (%s); compiling "
                              "into %s for this process (set LIGER_CACHE_DIR to a writable "
                              "directory)" % (self.root, e.strerror or e, fallback.root),
                              LigerCacheWarning, stacklevel=4)
            return fallback


def _alive(pid):
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


class _Lock:
    """An exclusive advisory lock on a file (fcntl.flock), held across
    processes of this host; released when the holder exits, killed or not."""

    def __init__(self, path):
        self.path = path
        self.fd = None

    def __enter__(self):
        self.fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o666)
        while True:
            try:
                fcntl.flock(self.fd, fcntl.LOCK_EX)
                return self
            except OSError as e:
                if e.errno != errno.EINTR:
                    os.close(self.fd)
                    raise

    def __exit__(self, *exc):
        fcntl.flock(self.fd, fcntl.LOCK_UN)
        os.close(self.fd)
