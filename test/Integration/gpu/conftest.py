import contextlib
import fcntl
import os
import sys
import tempfile

import pytest

ROOT = os.path.join(os.path.dirname(__file__), "..", "..", "..")
# The checkout's package, unless LIGER_TEST_INSTALLED=1 asks for the
# installed one (pip install .; docs/install.md).
if os.environ.get("LIGER_TEST_INSTALLED", "") in ("", "0"):
    sys.path.insert(0, os.path.join(ROOT, "python"))
sys.path.insert(0, os.path.dirname(__file__))


def pytest_configure(config):
    config.addinivalue_line(
        "markers", "large_memory: takes tens of GiB of GPU memory; these take a lock "
        "file, so that under pytest-xdist (scripts/gpu-check.sh LIGER_GPU_CHECK_JOBS) "
        "they run one at a time")


def pytest_addoption(parser):
    parser.addoption("--bundles", default=os.path.join(ROOT, "gpu-bundles"),
                     help="directory of bundles from scripts/build-gpu-bundles.sh")
    parser.addoption("--shard", default=None,
                     help="K/N: run the K-th of N shares of the tests (every N-th test from "
                          "the K-th, in collection order), for a suite longer than one sitting")


def shard(items, spec):
    """(kept, deselected) of the collected `items` under --shard `spec`
    ("K/N", 1 <= K <= N): every N-th item from the K-th."""
    try:
        k, n = (int(x) for x in spec.split("/"))
    except ValueError:
        k = n = 0
    if not 1 <= k <= n:
        raise pytest.UsageError("--shard wants K/N with 1 <= K <= N, got %r" % spec)
    kept = [item for i, item in enumerate(items) if i % n == k - 1]
    return kept, [item for i, item in enumerate(items) if i % n != k - 1]


def pytest_collection_modifyitems(config, items):
    spec = config.getoption("--shard")
    if spec is None:
        return
    kept, deselected = shard(items, spec)
    if deselected:
        config.hook.pytest_deselected(items=deselected)
    items[:] = kept


@pytest.fixture(scope="session")
def bundles_dir(request):
    return request.config.getoption("--bundles")


@pytest.fixture(scope="module")
def ops_bundles(bundles_dir):
    """LIGER_OPS_BUNDLES pointed at the liger.ops bundles of
    scripts/build-gpu-bundles.sh for the module's tests (skipped, and saying
    so, where they are not built)."""
    path = os.path.join(bundles_dir, "ops")
    if not os.path.isdir(path):
        pytest.skip("%s not built (run scripts/build-gpu-bundles.sh)" % path)
    old = os.environ.get("LIGER_OPS_BUNDLES")
    os.environ["LIGER_OPS_BUNDLES"] = path
    yield path
    if old is None:
        del os.environ["LIGER_OPS_BUNDLES"]
    else:
        os.environ["LIGER_OPS_BUNDLES"] = old


@pytest.fixture(autouse=True)
def _return_cached_memory():
    """After each test, the memory PyTorch's allocator holds goes back to the
    GPU: under pytest-xdist (scripts/gpu-check.sh LIGER_GPU_CHECK_JOBS)
    several processes share one GPU, and one test's cache must not starve
    another's large allocation."""
    yield
    _empty_cuda_cache()


def _empty_cuda_cache():
    """The memory PyTorch's allocator caches goes back to the GPU (where a
    test has used the GPU)."""
    torch = sys.modules.get("torch")
    if torch is not None and torch.cuda.is_available() and torch.cuda.is_initialized():
        torch.cuda.empty_cache()


@contextlib.contextmanager
def large_memory_lock(directory=None):
    """An exclusive lock on a file every pytest process of this machine's
    user sees (in `directory`, default the temporary directory), held for
    the block; the block's cached GPU memory is returned before it is
    released, for the next holder."""
    path = os.path.join(directory or tempfile.gettempdir(),
                        "liger-gpu-large-memory-%d.lock" % os.getuid())
    with open(path, "a") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        try:
            yield path
        finally:
            _empty_cuda_cache()
            fcntl.flock(f, fcntl.LOCK_UN)


@pytest.fixture(autouse=True)
def _one_large_memory_test_at_a_time(request):
    """A test marked large_memory runs under large_memory_lock: of several
    processes sharing the GPU, one at a time runs such a test."""
    if request.node.get_closest_marker("large_memory") is None:
        yield
        return
    with large_memory_lock():
        yield
