"""Damaged and lying bundles on the GPU: refused when they are opened, with
a message, and never a crash of the process.

A real bundle (scripts/build-gpu-bundles.sh) is copied with its cubin
damaged as an interrupted copy or a bad disk leaves it (damaged_bundles.py:
cut at every length class, single bits flipped with a fixed seed; 48
cases), and with manifests that lie about its intact cubin (half the
block, a finishing kernel's half block, one parameter more, a tensor map
fewer, another arch). Every case runs in its own Python process, which
opens the bundle through liger.runtime.load (the device check included)
and, where it opens, launches a kernel on the GPU and synchronizes: a
crash or a hang fails that case instead of ending the suite.

Under the manifest's own digest every damaged cubin must be refused. The
cases of a matching digest rewrite the digest to match the damage, as a manifest
written for the damaged file would: the loader's structure checks refuse
what they read, and the rest (a flipped bit in a kernel's code) reaches
the driver, launched; the process must survive it. The grid and the
dynamic shared memory are not in the cubin: those lies open
(docs/Design/Kernel-ABI.md) and are not run here.
"""

import json
import os
import subprocess
import sys

import pytest

import damaged_bundles

torch = pytest.importorskip("torch", reason="the GPU suite needs PyTorch")
if not torch.cuda.is_available():
    pytest.skip("no CUDA GPU on this machine", allow_module_level=True)

HERE = os.path.dirname(os.path.abspath(__file__))

# The subprocess: opens the bundle, and where it opens launches `kernel` on
# random inputs of 7 rows, then prints what happened as one JSON line.
CHILD = r"""
import json, sys
from liger import runtime
path, name = sys.argv[1], sys.argv[2]
try:
    bundle = runtime.load(path)
except Exception as e:
    print(json.dumps({"outcome": "refused", "message": str(e)}))
    sys.exit(0)
import torch
kernel = bundle[name]
dtypes = {"bf16": torch.bfloat16, "f16": torch.float16, "f32": torch.float32}
shapes = {"rows": lambda p: (7, p["length"]), "feature": lambda p: (p["length"],),
          "matrix": lambda p: (p["outer"], p["length"])}
try:
    inputs = [torch.randn(shapes[p["kind"]](p), dtype=dtypes[p["dtype"]], device="cuda")
              for p in kernel.inputs]
    kernel(*inputs)
    torch.cuda.synchronize()
    print(json.dumps({"outcome": "launched"}))
except Exception as e:
    print(json.dumps({"outcome": "failed", "message": str(e)}))
"""


def run_case(path, kernel):
    """How the process that opened (and launched) the bundle at `path`
    ended: its JSON line, or a failure of the test for a crash or hang."""
    try:
        run = subprocess.run([sys.executable, "-c", CHILD, path, kernel],
                             capture_output=True, text=True, timeout=300,
                             env=dict(os.environ, PYTHONPATH=os.pathsep.join(
                                 [HERE] + sys.path)))
    except subprocess.TimeoutExpired:
        pytest.fail("%s: the process hung (killed after 300 s)" % path)
    if run.returncode != 0 or not run.stdout.strip():
        pytest.fail("%s: the process ended with %s:\n%s" % (path, run.returncode,
                                                           run.stderr[-2000:]))
    return json.loads(run.stdout.strip().splitlines()[-1])


def bundle_path(bundles_dir, name):
    path = os.path.join(bundles_dir, name)
    if not os.path.isdir(path):
        pytest.skip("bundle %s not built (run scripts/build-gpu-bundles.sh)" % path)
    return path


# A rowwise bundle, whose kernel takes rows and a weight; and the matmul
# bundle of the matmul templates (tensor maps), whose first kernel
# takes rows and matrices.
BUNDLES = {"h4096_bf16": "rms_llama_rowwise_0", "matmul": None}


def _params(cases):
    """pytest params of (bundle, x) cases."""
    return [pytest.param(bundle, x, id="%s-%s" % (bundle, x)) for bundle, x in cases]


# damaged_bundles.cases gives 48 cases for any cubin; they are numbered
# here, their names (which depend on the cubin's size) said on failure.
NUM_CASES = 48


def _kernel(path, bundle):
    """The kernel of `bundle` to launch: one whose inputs are rows,
    features and matrices."""
    if BUNDLES[bundle]:
        return BUNDLES[bundle]
    manifest, _ = damaged_bundles.cubin_of(path)
    for k in manifest["modules"][0]["kernels"]:
        if all(p["role"] != "input" or p["kind"] in ("rows", "feature", "matrix")
               for p in k["params"]) and "finish" not in k:
            return k["name"]
    pytest.skip("%s has no kernel of rows, features and matrices" % path)


def _damaged(bundles_dir, bundle, case, tmp_path, match_digest):
    """The bundle copied with damaged case number `case`, its name, and the
    kernel to launch."""
    path = bundle_path(bundles_dir, bundle)
    _, cubin = damaged_bundles.cubin_of(path)
    cases = damaged_bundles.cases(open(cubin, "rb").read(), total=NUM_CASES)
    name, data = cases[case]
    dest = damaged_bundles.write_copy(path, str(tmp_path / name), data, match_digest)
    return dest, name, _kernel(path, bundle)


@pytest.mark.parametrize("bundle,case", _params(
    [("h4096_bf16", i) for i in range(NUM_CASES)]))
def test_a_damaged_cubin_is_refused_at_open(bundles_dir, bundle, case, tmp_path):
    dest, name, kernel = _damaged(bundles_dir, bundle, case, tmp_path, match_digest=False)
    result = run_case(dest, kernel)
    assert result["outcome"] == "refused", (name, result)
    assert "is not the cubin the manifest names" in result["message"], (name, result)


@pytest.mark.parametrize("bundle,case", _params(
    [(b, i) for b in BUNDLES for i in range(NUM_CASES)]))
def test_damage_under_a_matching_digest_does_not_crash(bundles_dir, bundle, case,
                                                       tmp_path):
    dest, name, kernel = _damaged(bundles_dir, bundle, case, tmp_path, match_digest=True)
    result = run_case(dest, kernel)  # refused, launched or failed: it ended
    assert result["outcome"] in ("refused", "launched", "failed"), (name, result)


# The lies the loader refuses (the others are not in the cubin).
LIES = [(bundle, name) for bundle in BUNDLES for name, (_, _, expected) in
        damaged_bundles.LIES.items() if expected]


@pytest.mark.parametrize("bundle,lie", _params(LIES))
def test_a_lying_manifest_is_refused_at_open(bundles_dir, bundle, lie, tmp_path):
    path = bundle_path(bundles_dir, bundle)
    found = {name: (manifest, expected) for name, manifest, expected in
             damaged_bundles.lies(path)}
    if lie not in found:
        pytest.skip("%s has nothing to tell the lie %s about" % (bundle, lie))
    manifest, expected = found[lie]
    dest = damaged_bundles.write_lie(path, str(tmp_path / "lie"), manifest)
    result = run_case(dest, _kernel(path, bundle))
    assert result["outcome"] == "refused", result
    assert expected in result["message"], result


@pytest.mark.parametrize("bundle", list(BUNDLES))
def test_the_truth_opens_and_launches(bundles_dir, bundle):
    path = bundle_path(bundles_dir, bundle)
    result = run_case(path, _kernel(path, bundle))
    assert result["outcome"] == "launched", (bundle, result)
