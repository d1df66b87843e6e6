"""scripts/gpu-check.sh's parts (LIGER_GPU_CHECK_PARTS): only the parts
named run, the summary line says "not run" of the others, the exit status
counts only the parts run, and an unknown part is an error. Run on a
stand-in machine: the script in a scratch checkout whose runtime build is
a no-op, with fake nvidia-smi, ctest and Python (pytest) on PATH that
record their calls."""

import os
import shutil
import stat
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

FAKE_PYTHON = """#!/usr/bin/env bash
echo "python $*" >> "$CALLS"
if [[ "$1" == -m && "$2" == pytest ]]; then
  echo "$SUITE_OUT"; exit "${SUITE_RC:-0}"
fi
if [[ "$1" == -c && "$2" == *xdist* && -n "${NO_XDIST:-}" ]]; then exit 1; fi
echo 1
"""


def _executable(path, text):
    with open(path, "w") as f:
        f.write(text)
    os.chmod(path, os.stat(path).st_mode | stat.S_IXUSR)


@pytest.fixture
def checkout(tmp_path):
    scripts = tmp_path / "scripts"
    scripts.mkdir()
    shutil.copy(os.path.join(ROOT, "scripts", "gpu-check.sh"), scripts)
    _executable(str(scripts / "build-runtime.sh"), "#!/usr/bin/env bash\nexit 0\n")
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    _executable(str(bin_dir / "nvidia-smi"), "#!/usr/bin/env bash\necho 'Stand-in GPU'\n")
    _executable(str(bin_dir / "ctest"), "#!/usr/bin/env bash\necho \"ctest $*\" >> \"$CALLS\"\n"
                "echo '100% tests passed, 0 tests failed out of 2'\n")
    _executable(str(bin_dir / "python"), FAKE_PYTHON)
    (tmp_path / "bundles").mkdir()
    return tmp_path


def run(checkout, suite_out="5 passed, 1 skipped in 1.0s", suite_rc=0, **env):
    calls = checkout / "calls.txt"
    calls.write_text("")
    full = dict(os.environ, PATH="%s:%s" % (checkout / "bin", os.environ["PATH"]),
                PYTHON=str(checkout / "bin" / "python"), CALLS=str(calls),
                SUITE_OUT=suite_out, SUITE_RC=str(suite_rc),
                LIGER_RUNTIME_BUILD_DIR=str(checkout / "build"), **env)
    p = subprocess.run(["bash", str(checkout / "scripts" / "gpu-check.sh"),
                        str(checkout / "bundles")], env=full, capture_output=True, text=True,
                       timeout=60)
    (line,) = [ln for ln in p.stdout.splitlines() if ln.startswith("gpu-check: ")] or [""]
    return p.returncode, line, calls.read_text(), p


def test_only_the_parts_named_run(checkout):
    rc, line, calls, p = run(checkout, LIGER_GPU_CHECK_PARTS="suite")
    assert rc == 0, p.stdout + p.stderr
    assert line.startswith("gpu-check: 5 passed, 0 failed, 1 skipped on Stand-in GPU"), line
    for what in ("compute-sanitizer", "LibTorch example", "runtime unit tests",
                 "FSDP2 (2 GPUs)"):
        assert "%s: not run (LIGER_GPU_CHECK_PARTS=suite)" % what in line, line
    assert "ctest" not in calls and calls.count("-m pytest") == 1
    assert "--durations=15" in calls


def test_the_exit_status_counts_the_parts_run(checkout):
    rc, line, _, _ = run(checkout, suite_out="4 passed, 1 failed in 1.0s", suite_rc=1,
                         LIGER_GPU_CHECK_PARTS="suite")
    assert rc != 0 and "4 passed, 1 failed" in line
    # The suite left out counts for nothing.
    rc, line, calls, p = run(checkout, suite_rc=1, LIGER_GPU_CHECK_PARTS="unit")
    assert rc == 0, p.stdout + p.stderr
    assert line.startswith("gpu-check: suite not run (LIGER_GPU_CHECK_PARTS=unit)")
    assert "runtime unit tests: 100% tests passed" in line or \
        "runtime unit tests: not built" in line, line
    assert "ctest" in calls and "-m pytest" not in calls


def test_one_pytest_run_holds_every_gpu_test(checkout):
    # The matmul templates are released: no marker sets tests apart.
    rc, line, calls, _ = run(checkout, LIGER_GPU_CHECK_PARTS="suite")
    assert rc == 0 and calls.count("-m pytest") == 1
    assert " -m " not in calls.replace("-m pytest", ""), calls
    assert "experimental" not in line


def test_an_unknown_part_is_an_error(checkout):
    rc, _, calls, p = run(checkout, LIGER_GPU_CHECK_PARTS="suite,sanitise")
    assert rc == 2
    assert "unknown part 'sanitise' in LIGER_GPU_CHECK_PARTS (parts: unit,suite," \
        "example,fsdp,sanitizer)" in p.stdout
    # The experimental part is gone with the matmul templates' release.
    rc, _, calls, p = run(checkout, LIGER_GPU_CHECK_PARTS="experimental")
    assert rc == 2 and calls == "" and "unknown part 'experimental'" in p.stdout
    assert calls == ""


def test_a_shard_runs_its_share_of_the_suite(checkout):
    rc, line, calls, _ = run(checkout, LIGER_GPU_CHECK_SHARD="2/3",
                             LIGER_GPU_CHECK_PARTS="suite")
    assert rc == 0
    assert calls.count("--shard=2/3") == 1
    assert "5 passed, 0 failed, 1 skipped (shard 2/3) on Stand-in GPU" in line, line


@pytest.mark.parametrize("spec", ["0/3", "4/3", "2", "a/b", "1/0"])
def test_a_shard_out_of_range_is_an_error(checkout, spec):
    rc, _, calls, p = run(checkout, LIGER_GPU_CHECK_SHARD=spec)
    assert rc == 2 and calls == ""
    assert "LIGER_GPU_CHECK_SHARD wants K/N with 1 <= K <= N, got '%s'" % spec in p.stdout


def test_jobs_run_the_suite_in_that_many_processes(checkout):
    rc, line, calls, _ = run(checkout, LIGER_GPU_CHECK_JOBS="3", LIGER_GPU_CHECK_PARTS="suite")
    assert rc == 0
    assert calls.count("-n 3") == 1
    assert "5 passed, 0 failed, 1 skipped (3 pytest processes) on Stand-in GPU" in line, line
    # One process (the default) passes no -n.
    rc, line, calls, _ = run(checkout, LIGER_GPU_CHECK_JOBS="1", LIGER_GPU_CHECK_PARTS="suite")
    assert rc == 0 and " -n " not in calls and "pytest processes" not in line


@pytest.mark.parametrize("jobs", ["0", "-2", "x", "2.5"])
def test_jobs_not_a_positive_number_is_an_error(checkout, jobs):
    rc, _, calls, p = run(checkout, LIGER_GPU_CHECK_JOBS=jobs)
    assert rc == 2 and calls == ""
    assert "LIGER_GPU_CHECK_JOBS wants a positive number of processes, got '%s'" % jobs \
        in p.stdout


def test_jobs_without_xdist_is_an_error(checkout):
    rc, _, calls, p = run(checkout, LIGER_GPU_CHECK_JOBS="4", NO_XDIST="1")
    assert rc == 2 and "-m pytest" not in calls
    assert "LIGER_GPU_CHECK_JOBS=4 needs pytest-xdist, which %s cannot import" % (
        checkout / "bin" / "python") in p.stdout


def _gpu_conftest():
    import importlib.util
    path = os.path.join(ROOT, "test", "Integration", "gpu", "conftest.py")
    spec = importlib.util.spec_from_file_location("gpu_conftest", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_shards_split_the_tests_between_them():
    """The GPU suite's --shard K/N: every test in exactly one share, the
    shares within one test of each other's size; K/N out of range is a
    usage error."""
    conftest = _gpu_conftest()
    items = list(range(23))
    shares = [conftest.shard(items, "%d/4" % k) for k in range(1, 5)]
    kept = [s[0] for s in shares]
    assert sorted(x for share in kept for x in share) == items
    assert {len(share) for share in kept} == {5, 6}
    assert all(sorted(s[0] + s[1]) == items for s in shares)
    for spec in ("0/4", "5/4", "x", "1/0"):
        with pytest.raises(pytest.UsageError, match="--shard wants K/N"):
            conftest.shard(items, spec)


def test_large_memory_tests_take_one_lock(tmp_path):
    # conftest's lock: while one holder has it, another process cannot take it.
    conftest = _gpu_conftest()
    with conftest.large_memory_lock(str(tmp_path)) as path:
        probe = "import fcntl, sys\nf = open(sys.argv[1], 'a')\n" \
                "try:\n    fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)\n" \
                "except BlockingIOError:\n    sys.exit(3)\n"
        held = subprocess.run([sys.executable, "-c", probe, path])
        assert held.returncode == 3
    free = subprocess.run([sys.executable, "-c", probe, path])
    assert free.returncode == 0


def test_errors_are_counted_in_the_line(checkout):
    # A test that errs (a fixture, a collection) is neither passed nor
    # failed: the line says so, and the exit status counts it.
    rc, line, _, _ = run(checkout, suite_out="3 passed, 1 error in 1.0s", suite_rc=1,
                         LIGER_GPU_CHECK_PARTS="suite")
    assert rc != 0
    assert line.startswith("gpu-check: 3 passed, 0 failed, 0 skipped, 1 with errors on "), line
