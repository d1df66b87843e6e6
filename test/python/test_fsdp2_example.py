"""examples/fsdp2_train.py on the CPU: its comparison of two runs' losses
and the global batches every process cuts its rows from (the 2-GPU run
itself is scripts/gpu-check.sh's)."""
import json
import os
import sys

import pytest

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "examples"))
import fsdp2_train  # noqa: E402


def _run(path, losses, world):
    with open(path, "w") as f:
        json.dump(dict(world=world, patch="liger", losses=losses, tokens_per_s_per_gpu=1.0,
                       peak_gib=1.0), f)
    return str(path)


def test_compare_passes_within_and_fails_beyond_the_tolerance(tmp_path, capsys):
    one = _run(tmp_path / "a.json", [10.0, 9.0, 8.0], 1)
    close = _run(tmp_path / "b.json", [10.0, 9.05, 8.0], 2)
    far = _run(tmp_path / "c.json", [10.0, 9.2, 8.0], 2)
    assert fsdp2_train.main(["--compare", one, close]) == 0
    assert "max relative difference 5.56e-03 over 3 steps (tolerance 1e-02): ok" in \
        capsys.readouterr().out
    assert fsdp2_train.main(["--compare", one, far]) == 1
    assert "FAILED" in capsys.readouterr().out
    short = _run(tmp_path / "d.json", [10.0], 2)
    assert fsdp2_train.main(["--compare", one, short]) == 1


def test_every_row_counts_the_same_labelled_tokens():
    torch = pytest.importorskip("torch")
    ids, labels = fsdp2_train.batches(3, 4, 32)
    assert ids.shape == labels.shape == (3, 4, 32)
    counted = (labels != -100).sum(-1)
    assert torch.equal(counted, torch.full_like(counted, 24))
    again, _ = fsdp2_train.batches(3, 4, 32)
    assert torch.equal(ids, again)  # the same in every process
