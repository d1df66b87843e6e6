"""What the tests of liger.ops' matmul-template ops share: the mark of a
test that compiles (liger-compile and ptxas here), `python -m liger.ops
module SPEC` run as a user runs it, the error measure, and a record of the
kernels a call loads."""

import os
import subprocess
import sys

import pytest

from liger.driver import LigerError, find_tool

ROOT = os.path.join(os.path.dirname(__file__), "..", "..")


def have_compiler():
    try:
        find_tool("liger-compile")
    except LigerError:
        return False
    return os.path.exists(os.path.join(os.environ.get("CUDA_HOME", "/usr/local/cuda"), "bin",
                                       "ptxas"))


needs_compiler = pytest.mark.skipif(not have_compiler(), reason="liger-compile or ptxas "
                                    "not found")


def module_command(spec):
    """The text `python -m liger.ops module str(spec)` prints (checked to
    exit 0)."""
    out = subprocess.run([sys.executable, "-m", "liger.ops", "module", str(spec)],
                         capture_output=True, text=True,
                         env=dict(os.environ, PYTHONPATH=os.path.join(ROOT, "python")))
    assert out.returncode == 0, out.stderr
    return out.stdout


def rel(got, want):
    """max |got - want| over max |want|, in float64."""
    return ((got.double() - want.double()).abs().max() /
            want.double().abs().max().clamp_min(1e-30)).item()


def record_loads(monkeypatch, module, name):
    """The specs `module.name` (a kernel loader of liger.bundles) is called
    with from here on, in a list that fills as it is called."""
    loaded = []
    load = getattr(module, name)
    monkeypatch.setattr(module, name, lambda spec: (loaded.append(spec), load(spec))[1])
    return loaded
