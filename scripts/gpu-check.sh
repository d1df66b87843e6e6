#!/usr/bin/env bash
# The GPU suite, on a machine with an NVIDIA GPU (no MLIR needed): builds the
# runtime and its Python extension (scripts/build-runtime.sh), runs the
# runtime's unit tests and test/Integration/gpu with the bundles compiled on
# the build machine (scripts/build-gpu-bundles.sh; default ./gpu-bundles),
# and prints one summary line. Exits non-zero on any failure.
# LIGER_GPU_CHECK_INSTALLED=1 runs the Python side (the GPU tests, the
# sanitizer's script, FSDP2) on the installed `liger` package (pip install .)
# instead of the checkout's python/ and the runtime built here; the
# runtime's unit tests and the LibTorch example still use the build here.
# LIGER_GPU_CHECK_PARTS=<list> runs only the parts named (comma-separated,
# of: unit, suite, example, fsdp, sanitizer; default all),
# so that a check longer than one sitting runs as several; the summary line
# says "not run" of each part left out, and the exit status counts only
# the parts run. LIGER_GPU_CHECK_SHARD=K/N runs the K-th of N shares of the
# suite's tests (pytest --shard); the summary line names the share.
# LIGER_GPU_CHECK_JOBS=N runs the suite in N processes sharing the GPU
# (pytest-xdist's -n; default 1, one process).
set -uo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
BUNDLES=${1:-$ROOT/gpu-bundles}
ALL_PARTS=unit,suite,example,fsdp,sanitizer
PARTS=${LIGER_GPU_CHECK_PARTS:-$ALL_PARTS}
for p in ${PARTS//,/ }; do
  [[ ",$ALL_PARTS," == *",$p,"* ]] || { echo "gpu-check: unknown part '$p' in LIGER_GPU_CHECK_PARTS (parts: $ALL_PARTS)"; exit 2; }
done
part() { [[ ",$PARTS," == *",$1,"* ]]; }
SHARD=${LIGER_GPU_CHECK_SHARD:-}
shard_args=()
if [[ -n "$SHARD" ]]; then
  if [[ ! "$SHARD" =~ ^([0-9]+)/([0-9]+)$ ]] || (( BASH_REMATCH[1] < 1 || BASH_REMATCH[1] > BASH_REMATCH[2] )); then
    echo "gpu-check: LIGER_GPU_CHECK_SHARD wants K/N with 1 <= K <= N, got '$SHARD'"; exit 2
  fi
  shard_args=(--shard="$SHARD")
fi
JOBS=${LIGER_GPU_CHECK_JOBS:-1}
[[ "$JOBS" =~ ^[1-9][0-9]*$ ]] || { echo "gpu-check: LIGER_GPU_CHECK_JOBS wants a positive number of processes, got '$JOBS'"; exit 2; }
not_run="not run (LIGER_GPU_CHECK_PARTS=$PARTS)"
PYTHON=${PYTHON:-python3}
if (( JOBS > 1 )) && part suite; then
  "$PYTHON" -c 'import xdist' 2>/dev/null ||
    { echo "gpu-check: LIGER_GPU_CHECK_JOBS=$JOBS needs pytest-xdist, which $PYTHON cannot import"; exit 2; }
  # (tests marked large_memory take a lock: one at a time, conftest.py)
  shard_args+=(-n "$JOBS")
fi
[[ -z "${LIGER_GPU_CHECK_EXPERIMENTAL:-}" ]] ||
  echo "gpu-check: LIGER_GPU_CHECK_EXPERIMENTAL is no longer read: the matmul templates' tests are the suite's"
BUILD=${LIGER_RUNTIME_BUILD_DIR:-$ROOT/build-runtime-py}
# LIGER_GPU_CHECK_LOGS=<dir> keeps every log of the run there.
if [[ -n "${LIGER_GPU_CHECK_LOGS:-}" ]]; then
  LOG=$LIGER_GPU_CHECK_LOGS
  mkdir -p "$LOG"
else
  LOG=$(mktemp -d)
  trap 'rm -rf "$LOG"' EXIT
fi

gpu=$(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | head -1)
if [[ -z "$gpu" ]]; then
  echo "gpu-check: skipped: no NVIDIA GPU (nvidia-smi found none)"
  exit 0
fi
if [[ ! -d "$BUNDLES" ]]; then
  echo "gpu-check: no bundles in $BUNDLES: run scripts/build-gpu-bundles.sh on the build machine and carry them"
  exit 1
fi
# The JSON headers the bundles brought, where this machine has none.
if [[ -f "$BUNDLES/include/nlohmann/json.hpp" ]]; then
  export LIGER_JSON_INCLUDE_DIR="$BUNDLES/include"
fi
LIGER_RUNTIME_BUILD_DIR="$BUILD" bash "$ROOT/scripts/build-runtime.sh" || exit 1
# with_liger CMD...: CMD with the `liger` package this run tests on its path.
if [[ ${LIGER_GPU_CHECK_INSTALLED:-0} != 0 ]]; then
  with_liger() { env -u PYTHONPATH LIGER_TEST_INSTALLED=1 "$@"; }
  package=$(with_liger "$PYTHON" -c 'import os, liger; print("installed liger %s in %s" % (liger.__version__, os.path.dirname(liger.__file__)))' 2>&1 | tail -1)
  with_liger "$PYTHON" -c 'import liger' 2>/dev/null || { echo "gpu-check: LIGER_GPU_CHECK_INSTALLED=1 but no installed liger package: $package"; exit 1; }
else
  with_liger() { PYTHONPATH="$ROOT/python:$BUILD/python${PYTHONPATH:+:$PYTHONPATH}" "$@"; }
  package="the checkout's"
fi
unit_rc=0
if part unit; then
  ctest --test-dir "$BUILD" --output-on-failure >"$LOG/unit.log" 2>&1
  unit_rc=$?
  tail -3 "$LOG/unit.log"
fi
# The suite's slowest tests are named in its log (--durations), for a check
# that must be split.
gpu_rc=0
if part suite; then
  with_liger "$PYTHON" -m pytest -q --durations=15 "${shard_args[@]}" \
    "$ROOT/test/Integration/gpu" --bundles="$BUNDLES" -p no:cacheprovider \
    2>&1 | tee "$LOG/gpu.log" | tail -25
  gpu_rc=${PIPESTATUS[0]}
fi
# The C++ LibTorch example (built where PyTorch is installed).
example="not built"
example_rc=0
part example || example=$not_run
if part example && [[ -x "$BUILD/bin/liger-libtorch-example" ]]; then
  if "$BUILD/bin/liger-libtorch-example" "$BUNDLES/h4096_bf16" >"$LOG/example.log" 2>&1; then
    example="ok"
  else
    example="FAILED"; example_rc=1
  fi
  cat "$LOG/example.log"
fi

# FSDP2 on 2 GPUs (examples/fsdp2_train.py): the patched model sharded over
# two processes against the same model on one GPU, per-step loss compared;
# eager PyTorch under the same FSDP2 setup for the tokens/s beside ours; and
# the patched model under DDP against the same one-GPU run.
fsdp="not run (needs 2 GPUs)"
fsdp_rc=0
gpus=$("$PYTHON" -c 'import torch; print(torch.cuda.device_count())' 2>/dev/null || echo 0)
part fsdp || { fsdp=$not_run; gpus=0; }
if [[ $gpus -ge 2 ]]; then
  export NCCL_NVLS_ENABLE=0  # NVLink multicast stays off
  run_py() { LIGER_OPS_BUNDLES="$BUNDLES/ops" with_liger "$@"; }
  ex="$ROOT/examples/fsdp2_train.py"
  {
    run_py "$PYTHON" "$ex" --json "$LOG/fsdp-single.json" &&
    run_py "$PYTHON" -m torch.distributed.run --nproc-per-node 2 "$ex" --json "$LOG/fsdp-2.json" &&
    run_py "$PYTHON" -m torch.distributed.run --nproc-per-node 2 "$ex" --patch none \
      --json "$LOG/fsdp-2-eager.json" &&
    run_py "$PYTHON" "$ex" --compare "$LOG/fsdp-single.json" "$LOG/fsdp-2.json" &&
    run_py "$PYTHON" -m torch.distributed.run --nproc-per-node 2 "$ex" --engine ddp \
      --json "$LOG/ddp-2.json" &&
    run_py "$PYTHON" "$ex" --compare "$LOG/fsdp-single.json" "$LOG/ddp-2.json"
  } >"$LOG/fsdp.log" 2>&1
  fsdp_rc=$?
  tail -6 "$LOG/fsdp.log"
  if [[ $fsdp_rc -eq 0 ]]; then
    fsdp="ok, $(grep -Eo 'max relative difference [^ ]+' "$LOG/fsdp.log" | head -1) per-step loss vs 1 GPU (DDP: $(grep -Eo 'max relative difference [^ ]+' "$LOG/fsdp.log" | tail -1 | cut -d' ' -f4)); $("$PYTHON" -c '
import json, sys
a, b = (json.load(open(p)) for p in sys.argv[1:])
print("%.0f tokens/s per GPU (eager under FSDP2: %.0f)" % (a["tokens_per_s_per_gpu"], b["tokens_per_s_per_gpu"]))' "$LOG/fsdp-2.json" "$LOG/fsdp-2-eager.json")"
  else
    fsdp="FAILED (rc $fsdp_rc)"
  fi
fi

# compute-sanitizer, where the toolkit has it: memcheck, racecheck and
# synccheck.
sanitizer=$(command -v compute-sanitizer || ls /usr/local/cuda/bin/compute-sanitizer 2>/dev/null)
san="not run (no compute-sanitizer)"
san_rc=0
part sanitizer || { san=$not_run; sanitizer=""; }
if [[ -n "$sanitizer" ]]; then
  san=""
  # Every kernel of a few bundles under memcheck and racecheck; the matmul
  # templates' kernels under synccheck too (their mbarrier and warpgroup
  # waits).
  for run in memcheck racecheck synccheck:matmul; do
    tool=${run%%:*}
    only=(); [[ $run == *:matmul ]] && only=(matmul)
    with_liger "$sanitizer" --tool "$tool" --error-exitcode 3 \
      "$PYTHON" "$ROOT/test/Integration/gpu/sanitize.py" "$BUNDLES" "${only[@]}" >"$LOG/$tool.log" 2>&1
    rc=$?
    tail -3 "$LOG/$tool.log"
    if [[ $rc -eq 0 ]]; then san+="$tool clean, "; else san+="$tool FAILED (rc $rc), "; san_rc=1; fi
  done
  san=${san%, }
fi
count() { grep -Eo "[0-9]+ $1" "${2:-$LOG/gpu.log}" | tail -1 | grep -Eo '[0-9]+' || echo 0; }
# ctest's summary line ("100% tests passed, 0 tests failed out of 21"), or
# its exit status when there is none.
# (colour codes stripped first; without the line, the per-test results.)
unit=$not_run
part unit && unit=$(sed 's/\x1b\[[0-9;]*m//g' "$LOG/unit.log" |
                    grep -Eo '[0-9]+% tests passed, [0-9]+ tests failed out of [0-9]+' | tail -1)
if [[ -z "$unit" ]]; then
  unit_passed=$(grep -Ec 'Test +#[0-9]+: .* Passed' "$LOG/unit.log")
  unit_skipped=$(grep -Ec 'Test +#[0-9]+: .*Skipped' "$LOG/unit.log")
  unit="ctest exit status $unit_rc, $unit_passed passed, $unit_skipped skipped (no summary line)"
fi
[[ -x "$BUILD/bin/liger-unit-tests" ]] || ! part unit || unit="not built (no GoogleTest on this machine; CI runs them)"
torch_v=$("$PYTHON" -c 'import torch; print(torch.__version__, "CUDA", torch.version.cuda)' 2>/dev/null)
suite="suite $not_run"
part suite && suite="$(count passed) passed, $(count failed) failed, $(count skipped) skipped"
# (an error in a test's setup or collection is neither passed nor failed)
errors=$(part suite && grep -Eo "[0-9]+ errors?" "$LOG/gpu.log" | tail -1 | grep -Eo '[0-9]+')
[[ -z "$errors" || "$errors" == 0 ]] || suite+=", $errors with errors"
[[ -z "$SHARD" ]] || suite+=" (shard $SHARD)"
(( JOBS == 1 )) || ! part suite || suite+=" ($JOBS pytest processes)"
echo "gpu-check: $suite on $gpu (torch $torch_v), $package package; compute-sanitizer: $san; LibTorch example: $example; runtime unit tests: ${unit:-not run}; FSDP2 (2 GPUs): $fsdp"
[[ ($unit_rc -eq 0 || "$unit" == not*) && $gpu_rc -eq 0 && $san_rc -eq 0 && $example_rc -eq 0 && $fsdp_rc -eq 0 ]]
