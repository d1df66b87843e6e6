import os
import sys

import pytest

ROOT = os.path.join(os.path.dirname(__file__), "..", "..", "..")
# The checkout's package, unless LIGER_TEST_INSTALLED=1 asks for the
# installed one (pip install .; docs/install.md).
if os.environ.get("LIGER_TEST_INSTALLED", "") in ("", "0"):
    sys.path.insert(0, os.path.join(ROOT, "python"))
sys.path.insert(0, os.path.dirname(__file__))


def pytest_configure(config):
    config.addinivalue_line(
        "markers", "experimental: opt-in features not yet released; scripts/gpu-check.sh "
        "reports them apart")


def pytest_addoption(parser):
    parser.addoption("--bundles", default=os.path.join(ROOT, "gpu-bundles"),
                     help="directory of bundles from scripts/build-gpu-bundles.sh")


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
