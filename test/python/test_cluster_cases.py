"""The GPU suite's row programs pinned to thread-block clusters
(test/Integration/gpu/kernels.py, CLUSTER_CASES) without a GPU: the module
its bundle is built from lowers, every case to one kernel over a grid of
[rows, cluster] in clusters of 1 x cluster at its threads, and the same
module for sm_80 is refused, naming the cluster."""

import os
import re
import sys

import pytest

from liger import LigerError, driver

ROOT = os.path.join(os.path.dirname(__file__), "..", "..")
sys.path.insert(0, os.path.join(ROOT, "test", "Integration", "gpu"))
import kernels  # noqa: E402


def test_every_case_is_a_cluster_kernel():
    out = driver.run_opt(kernels.cluster_module_text(), ["--liger-lower-to-gpu"])
    for case in kernels.CLUSTER_CASES:
        _, _, _, threads, cluster = case
        name = kernels.cluster_function(*case) + "_rowwise_0"
        (head,) = re.findall(r"gpu\.func @%s\(.*" % name, out)
        assert "known_block_size = array<i32: %d, 1, 1>" % threads in head, name
        assert 'grid = ["rows", %d, 1]' % cluster in head, name
        assert "nvvm.cluster_dim = array<i32: 1, %d, 1>" % cluster in head, name


def test_sm80_has_no_clusters():
    with pytest.raises(LigerError, match="a cluster of 8 CTAs needs sm_90 or later; the target "
                                         "is sm_80"):
        driver.run_opt(kernels.cluster_module_text(), ["--liger-lower-to-gpu=chip=sm_80"])
