"""The GPU suite's row programs at a pinned vector width that does not
divide their row (test/Integration/gpu/kernels.py, PEEL_CASES) without a
GPU: the module its bundle is built from lowers on both targets, every case
to one kernel at its threads and 16-byte chunks whose rows are peeled (the
head computed from the row, single elements loaded and stored one by one),
and none of them through one-element chunks."""

import os
import re
import sys

import pytest

from liger import driver

ROOT = os.path.join(os.path.dirname(__file__), "..", "..")
sys.path.insert(0, os.path.join(ROOT, "test", "Integration", "gpu"))
import kernels  # noqa: E402

BYTES = {"bf16": 2, "f16": 2, "f32": 4}


@pytest.mark.parametrize("chip", ["sm_90a", "sm_80"])
def test_every_case_is_a_peeled_kernel(chip):
    out = driver.run_opt(kernels.peel_module_text(), ["--liger-lower-to-gpu=chip=%s" % chip])
    funcs = re.split(r"(?=gpu\.func @)", out)
    for case in kernels.PEEL_CASES:
        _, hidden, dt, threads = case
        width = 16 // BYTES[dt]
        assert hidden % width, case  # (a case the width divides peels nothing)
        name = kernels.peel_function(*case) + "_rowwise_0"
        (text,) = [f for f in funcs if f.startswith("gpu.func @%s(" % name)]
        head = text.split("\n", 1)[0]
        assert "known_block_size = array<i32: %d, 1, 1>" % threads in head, name
        assert "vector_width = %d" % width in head, name
        # The row's head: (W - r (H mod W) mod W) mod W.
        assert "arith.remui" in text, name
        # Its single elements, one by one.
        assert re.search(r"memref\.load %arg0\[%block_id_x, %\w+\]", text), name
        assert "vector<1x" not in text, name
        if hidden >= 2 * width - 1:  # full chunks too, 16-byte aligned
            assert re.search(r"vector\.load %arg0\[%block_id_x, %\w+\] \{alignment = 16 : i64\}",
                             text), name
