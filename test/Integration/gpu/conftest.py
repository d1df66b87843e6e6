import os
import sys

import pytest

ROOT = os.path.join(os.path.dirname(__file__), "..", "..", "..")
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
