"""The bundle cache: one store for compiled and precompiled kernel bundles.

A cache is a directory of entries, one per key (`bundle_key`: a hash of a
module's text and its compile options, the target among them) and
compiler (`identity`: the liger-compile executable's sha256 and ptxas'
version, recorded by liger.compiler):

    <root>/<key>/<compiler>/          the bundle (manifest.json, cubins) and
    <root>/<key>/<compiler>/liger-entry.json   its completion marker, written last
    <root>/.lock-<key>-<compiler>     the entry's file lock
    <root>/.tmp-<key>-<compiler>-<host>-<pid>-<random>/   an entry being built:
                                      bundle/ and the builder's lock

(<compiler> is a short hash of the identity.) `liger.compile` caches what it
compiles in the user's cache ($LIGER_CACHE_DIR, else ~/.cache/liger);
`python -m liger.ops precompile DIR` writes the same entries into DIR,
which `LIGER_OPS_BUNDLES=DIR` then serves where no compiler is installed.

An entry is used only when it is whole: a directory whose marker parses
and names its key and identity, whose manifest parses, and where every
file the manifest names has the size the marker recorded (a cheap check,
made on every lookup). A lookup that names an identity takes that
compiler's entry only; one that names none (a machine without the
compiler) takes the newest whole entry of any compiler. Compilers never
touch each other's entries, so two of them sharing a cache do not rebuild
or delete what the other is reading.

Builds are safe across processes: one builds under the entry's lock while
the others wait for it, into a temporary directory renamed into place at
once (a reader never sees half an entry); where locks do not work (some
network file systems) the rename decides, and a process that finds a
whole entry in place takes it. A damaged entry is rebuilt; one this
process may not read (another user's) is left alone. The builder holds a
lock on a file in its temporary directory while it builds: the next build
in that cache removes a temporary directory whose lock nobody holds (a
killed build), or, where locks do not work, one older than an hour.
Entries are made readable by every user the umask allows.

The user's cache, when it cannot be written (or its entry read), falls
back with one LigerCacheWarning to a temporary cache for the rest of the
process, removed at exit; a cache named explicitly (`Cache(root)`,
`precompile DIR`) never falls back: it raises LigerError.
"""

import atexit
import errno
import fcntl
import hashlib
import json
import os
import shutil
import socket
import stat
import tempfile
import time
import warnings

from .errors import LigerCacheWarning, LigerError

MARKER = "liger-entry.json"
# Where locks do not work, temporary build directories older than this are
# taken for the leftovers of a killed build.
STALE_SECONDS = 3600
_HOST = socket.gethostname().replace("-", "_")
_FALLBACK = {}
# What flock says where locks do not work (NFS without lockd, some FUSE
# file systems, a lock file opened read-only on NFS).
_NO_LOCKS = {errno.ENOLCK, errno.EOPNOTSUPP, errno.ENOSYS, errno.EINVAL, errno.EBADF}
# What os.rename says when the target directory exists.
_TAKEN = {errno.ENOTEMPTY, errno.EEXIST}


def compile_options(target="sm_90a", fuse=True, matmul_kernels=True, loss_dw_f32=False,
                    norm_prologue=False, matmul_schedule="auto", matmul_config_table=None):
    """liger-compile's options as keys name them: an option is recorded only
    where it is not its default (off, "auto": what it was when introduced),
    so that a new option keeps the keys of the bundles without it.
    matmul_config_table is the text of the table (its sha256 is recorded:
    a table edited compiles again).
    matmul_kernels is recorded where on although it is now the default: a
    module's key is the same as when the option was opt-in."""
    options = {"target": target, "fuse": fuse}
    if matmul_kernels:
        options["matmul_kernels"] = True
    if loss_dw_f32:
        options["loss_dw_f32"] = True
    if norm_prologue:
        options["norm_prologue"] = True
    if matmul_schedule != "auto":
        options["matmul_schedule"] = matmul_schedule
    if matmul_config_table is not None:
        options["matmul_config_table"] = hashlib.sha256(
            matmul_config_table.encode()).hexdigest()
    return options


def bundle_key(text, options):
    """The key of the bundle of module `text` compiled with `options` (a
    dict of liger-compile options, the target among them)."""
    material = json.dumps(options, sort_keys=True) + "\n" + text
    return hashlib.sha256(material.encode()).hexdigest()[:32]


def identity_name(identity):
    """The directory of `identity`'s entries under a key."""
    return hashlib.sha256(str(identity).encode()).hexdigest()[:16]


def default_root():
    """$LIGER_CACHE_DIR, else ~/.cache/liger."""
    return os.environ.get("LIGER_CACHE_DIR") or os.path.join(
        os.path.expanduser("~"), ".cache", "liger")


class Unreadable(Exception):
    """An entry this process may not read (another user's): not damaged,
    only not usable here."""


def _bundle_files(path):
    """The files the bundle at `path` consists of: its manifest and every
    file the manifest names."""
    with open(os.path.join(path, "manifest.json")) as f:
        manifest = json.load(f)
    names = [m[field] for m in manifest["modules"] for field in ("cubin", "ptx") if field in m]
    if not all(isinstance(n, str) for n in names):
        raise TypeError("a file name that is not a string")
    return ["manifest.json"] + names


def _file_sizes(path):
    """The size of each file of the bundle at `path` (those there)."""
    try:
        names = _bundle_files(path)
    except (OSError, ValueError, KeyError, TypeError):
        return {}
    sizes = {}
    for name in names:
        try:
            sizes[name] = os.stat(os.path.join(path, name)).st_size
        except OSError:
            pass
    return sizes


def _inspect(path, key, identity=None):
    """(marker, None) for a whole entry, (None, why not) otherwise; raises
    Unreadable where this process may not read it."""
    try:
        if not stat.S_ISDIR(os.stat(path).st_mode):
            return None, "not a directory"
    except FileNotFoundError:
        return None, "no entry" if not os.path.lexists(path) else "not a directory"
    except PermissionError as e:
        raise Unreadable("%s cannot be read here (%s)" % (path, e.strerror)) from e
    try:
        with open(os.path.join(path, MARKER)) as f:
            marker = json.load(f)
    except PermissionError as e:
        raise Unreadable("%s cannot be read here (%s)" % (path, e.strerror)) from e
    except (OSError, ValueError):
        return None, "no completion marker (%s)" % MARKER
    if not isinstance(marker, dict) or marker.get("key") != key:
        return None, "its marker names another key"
    if identity is not None and marker.get("identity") != identity:
        return None, "its marker names another compiler"
    try:
        files = _bundle_files(path)
    except PermissionError as e:
        raise Unreadable("%s cannot be read here (%s)" % (path, e.strerror)) from e
    except (OSError, ValueError, KeyError, TypeError):
        return None, "its manifest.json is missing or does not parse"
    sizes = marker.get("files")
    if not isinstance(sizes, dict):
        return None, "its marker records no file sizes"
    for name in files:
        try:
            size = os.stat(os.path.join(path, name)).st_size
        except OSError:
            return None, "its manifest names %r, which is missing" % name
        if size != sizes.get(name):
            return None, "its file %r has %d bytes, its marker says %s" % (name, size,
                                                                           sizes.get(name))
    return marker, None


def entry_problem(path, key, identity=None):
    """Why the entry at `path` cannot be used, or None when it is whole
    (a directory whose marker parses, naming `key` and, when given,
    `identity`; whose manifest parses; where every file the manifest names
    has the size the marker recorded)."""
    try:
        return _inspect(path, key, identity)[1]
    except Unreadable as e:
        return str(e)


def read_marker(path):
    with open(os.path.join(path, MARKER)) as f:
        return json.load(f)


class Cache:
    """A cache directory (see the module's doc). `fallback`: whether a
    cache that cannot be written falls back to a temporary one (by default
    only the user's cache, `root` None)."""

    def __init__(self, root=None, fallback=None):
        self.fallback = root is None if fallback is None else fallback
        self.root = os.path.abspath(root or default_root())

    def path(self, key, identity):
        """Where the entry of `key` made by the compiler `identity` is."""
        return os.path.join(self.root, key, identity_name(identity))

    def lookup(self, key, identity=None):
        """The path of the whole entry `key` made by the compiler
        `identity`, or with none given the newest whole entry of `key`; or
        None. Writes nothing."""
        if identity is not None:
            path = self.path(key, identity)
            try:
                marker, _ = _inspect(path, key, identity)
            except Unreadable:
                return None
            return path if marker is not None else None
        try:
            names = os.listdir(os.path.join(self.root, key))
        except OSError:
            return None
        best, newest = None, None
        for name in names:
            path = os.path.join(self.root, key, name)
            try:
                marker, _ = _inspect(path, key)
            except Unreadable:
                continue
            created = marker.get("created", 0) if marker is not None else None
            if marker is not None and (newest is None or created > newest):
                best, newest = path, created
        return best

    def get_or_build(self, key, build, identity="", meta=None):
        """(path, cached): the entry of `key` made by the compiler
        `identity`, built by `build(directory)` where it is missing or
        damaged. `build` writes the bundle into the empty directory it is
        given and raises to give up (nothing is left behind). `meta` goes
        into the marker."""
        path = self.lookup(key, identity)
        if path is not None:
            return path, True
        try:
            return self._build(key, build, identity, meta)
        except _CannotUse as e:
            return self._fallback(str(e)).get_or_build(key, build, identity, meta)

    def _build(self, key, build, identity, meta):
        try:
            self._check_writable()
        except OSError as e:
            raise _CannotUse("cannot be written (%s)" % (e.strerror or e)) from e
        path = self.path(key, identity)
        with _Lock(os.path.join(self.root, ".lock-%s-%s" % (key, identity_name(identity)))):
            # Another process may have built it while this one waited.
            try:
                marker, _ = _inspect(path, key, identity)
            except Unreadable as e:
                raise _CannotUse("has an entry this user cannot use: %s" % e) from e
            if marker is not None:
                return path, True
            self.clean_stale()
            work = _Build(self.root, "%s-%s" % (key, identity_name(identity)))
            try:
                build(work.bundle)
                marker = dict(meta or {}, key=key, identity=identity, created=time.time(),
                              files=_file_sizes(work.bundle))
                with open(os.path.join(work.bundle, MARKER), "w") as f:
                    json.dump(marker, f, sort_keys=True, indent=1)
                problem = entry_problem(work.bundle, key, identity)
                if problem:
                    raise LigerError("the bundle built for cache entry %s is not whole: %s"
                                     % (key, problem))
                try:
                    return self._install(work.bundle, path, key, identity)
                except PermissionError as e:
                    raise _CannotUse("cannot be written (%s)" % e) from e
            finally:
                work.close()

    def _install(self, bundle, path, key, identity):
        """(path, cached): renames the built `bundle` into place at `path`,
        or takes the entry there where another process (where locks do not
        work) put a whole one first."""
        parent = os.path.dirname(path)
        if os.path.lexists(parent) and not os.path.isdir(parent):
            self._remove(parent)  # a file where the key's directory should be
        os.makedirs(parent, exist_ok=True)
        if os.path.lexists(path):
            if entry_problem(path, key, identity) is None:
                return path, True
            self._remove(path)  # damaged (this compiler's)
        try:
            os.rename(bundle, path)
        except OSError as e:
            if e.errno not in _TAKEN or entry_problem(path, key, identity) is not None:
                raise
            return path, True
        return path, False

    def _remove(self, path):
        """Removes a damaged entry (a file or a directory)."""
        if os.path.isdir(path) and not os.path.islink(path):
            trash = tempfile.mkdtemp(prefix=".tmp-trash-%s-%d-" % (_HOST, os.getpid()),
                                     dir=self.root)
            try:
                os.rename(path, os.path.join(trash, "entry"))
            except FileNotFoundError:
                pass
            shutil.rmtree(trash, ignore_errors=True)
        else:
            try:
                os.remove(path)
            except FileNotFoundError:
                pass

    def clean_stale(self, now=None):
        """Removes the temporary directories of killed builds: those whose
        builder's lock nobody holds, and where locks do not work (or there
        is no lock file) those older than STALE_SECONDS. Returns their
        names."""
        now = time.time() if now is None else now
        removed = []
        try:
            names = os.listdir(self.root)
        except OSError:
            return removed
        for name in names:
            if name.startswith(".tmp-") and _Build.abandoned(os.path.join(self.root, name), now):
                removed.append(name)
        return removed

    def _check_writable(self):
        os.makedirs(self.root, exist_ok=True)
        probe = tempfile.mkdtemp(prefix=".tmp-probe-%s-%d-" % (_HOST, os.getpid()),
                                 dir=self.root)
        os.rmdir(probe)

    def _fallback(self, why):
        """A temporary cache for the rest of the process (warned once) where
        this one cannot be used; LigerError for a cache named explicitly."""
        if not self.fallback:
            raise LigerError("the bundle cache %s %s" % (self.root, why))
        fallback = _FALLBACK.get(self.root)
        if fallback is None:
            fallback = _FALLBACK[self.root] = Cache(tempfile.mkdtemp(prefix="liger-cache-"),
                                                    fallback=False)
            atexit.register(shutil.rmtree, fallback.root, True)
            warnings.warn("liger: the compile cache %s %s; compiling into %s for this process "
                          "(set LIGER_CACHE_DIR to a writable directory)" % (
                              self.root, why, fallback.root), LigerCacheWarning, stacklevel=4)
        return fallback


class _CannotUse(Exception):
    """This cache cannot serve an entry here: it cannot be written, or its
    entry cannot be read."""


class _Build:
    """A temporary build directory (<root>/.tmp-<name>-<host>-<pid>-*/):
    `bundle` is where the bundle is built; `lock`, a file the builder holds
    locked until it is done, tells a cleaner the build is alive."""

    LOCK = "lock"

    def __init__(self, root, name):
        self.dir = tempfile.mkdtemp(prefix=".tmp-%s-%s-%d-" % (name, _HOST, os.getpid()),
                                    dir=root)
        self.bundle = os.path.join(self.dir, "bundle")
        os.mkdir(self.bundle)  # (mode 0777 less the umask, as the entry will have)
        # Locked before it has its name, so a cleaner never finds it unlocked.
        self.fd = os.open(os.path.join(self.dir, ".lock-new"), os.O_RDWR | os.O_CREAT, 0o666)
        try:
            fcntl.flock(self.fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as e:
            if e.errno not in _NO_LOCKS:
                self.close()
                raise
        os.rename(os.path.join(self.dir, ".lock-new"), os.path.join(self.dir, self.LOCK))

    def close(self):
        """Removes the directory (its bundle, unless renamed into place)."""
        shutil.rmtree(self.dir, ignore_errors=True)
        if self.fd is not None:
            os.close(self.fd)
            self.fd = None

    @classmethod
    def abandoned(cls, path, now):
        """Removes the temporary directory `path` when no builder holds it;
        returns whether it did."""
        try:
            fd = os.open(os.path.join(path, cls.LOCK), os.O_RDONLY)
        except FileNotFoundError:
            fd = None  # a build starting, a removal under way, a probe
        except OSError:
            return False
        try:
            if fd is not None:
                try:
                    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                    shutil.rmtree(path, ignore_errors=True)  # (holding the lock)
                    return True
                except OSError as e:
                    if e.errno not in _NO_LOCKS:
                        return False  # a live build
            try:
                if now - os.lstat(path).st_mtime <= STALE_SECONDS:
                    return False
            except OSError:
                return False
            shutil.rmtree(path, ignore_errors=True)
            return True
        finally:
            if fd is not None:
                os.close(fd)


class _Lock:
    """An exclusive advisory lock on a file (fcntl.flock), held across
    processes; released when the holder exits, killed or not. Where locks
    do not work (or the lock file is another user's, private) it holds
    nothing: the rename into place decides."""

    def __init__(self, path):
        self.path = path
        self.fd = None

    def __enter__(self):
        try:
            self.fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o666)
        except PermissionError:
            try:
                self.fd = os.open(self.path, os.O_RDONLY)  # another user's lock file
            except PermissionError:
                return self  # a private one: as where locks do not work
        while True:
            try:
                fcntl.flock(self.fd, fcntl.LOCK_EX)
                return self
            except OSError as e:
                if e.errno == errno.EINTR:
                    continue
                os.close(self.fd)
                self.fd = None
                if e.errno in _NO_LOCKS:
                    return self
                raise

    def __exit__(self, *exc):
        if self.fd is not None:
            fcntl.flock(self.fd, fcntl.LOCK_UN)
            os.close(self.fd)
            self.fd = None
