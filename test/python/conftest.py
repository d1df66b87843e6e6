import os
import sys
import zlib

import numpy as np
import pytest

# The checkout's package, unless LIGER_TEST_INSTALLED=1 asks for the
# installed one (pip install .; docs/install.md).
if os.environ.get("LIGER_TEST_INSTALLED", "") in ("", "0"):
    sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "python"))

# A fresh seed per run (printed in the header, so a failure can be replayed
# with LIGER_TEST_SEED=<seed>).
SEED = int(os.environ.get("LIGER_TEST_SEED", np.random.SeedSequence().entropy % (2 ** 32)))


def pytest_report_header(config):
    return "liger numerics seed: LIGER_TEST_SEED=%d" % SEED


@pytest.fixture
def rng(request):
    """A generator seeded by the run's seed and the test's id."""
    return np.random.default_rng([SEED, zlib.crc32(request.node.nodeid.encode())])


@pytest.fixture
def cpu_reference(monkeypatch):
    """liger.ops on CPU tensors through the reference lowering
    (LIGER_OPS_CPU_REFERENCE=1), with no configuration remembered from
    before; skips where liger-cpu-runner or liger-opt is not built."""
    from liger import LigerError, find_tool, ops
    try:
        find_tool("liger-cpu-runner")
        find_tool("liger-opt")
    except LigerError as e:
        pytest.skip(str(e))
    monkeypatch.setenv("LIGER_OPS_CPU_REFERENCE", "1")
    ops.clear_caches()
    yield
    ops.clear_caches()


def pytest_terminal_summary(terminalreporter):
    # Also under -q (which hides the header), so a failure in CI can be replayed.
    terminalreporter.write_line("liger numerics seed: LIGER_TEST_SEED=%d" % SEED)
