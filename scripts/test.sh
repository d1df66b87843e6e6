#!/usr/bin/env bash
# Sets up, builds and runs every test that needs no GPU:
#   1. lit/FileCheck suite (check-liger)
#   2. C++ unit tests (GoogleTest, via ctest)
#   3. the runtime alone, configured without MLIR (-DLIGER_ENABLE_COMPILER=OFF),
#      with its unit tests and its Python extension: the runtime/compiler split
#      stays real
#   4. the install (scripts/check-install.sh): both builds installed into
#      prefixes and examples/cmake-consumer built against them
#      (find_package(liger))
#   5. Python tests (pytest test/python)
#   6. the fuzzer (scripts/fuzz.py): mutated inputs through liger-opt and
#      liger-compile, no signal and no timeout (fixed seed; $LIGER_FUZZ_SEED
#      draws others)
#   7. with --sanitize (or LIGER_TEST_SANITIZE=1): our code built with
#      AddressSanitizer and UndefinedBehaviorSanitizer (-DLIGER_SANITIZE) into
#      its own build directory ($LIGER_SANITIZE_BUILD_DIR, default
#      build-sanitize/), then its unit tests and every lit suite that runs
#      our tools (all but Docs and Lint), test/Robustness's fuzz runs of
#      liger-opt and of liger-cpu-runner's .npy reader among them
# Ends with one line "tests: N passed, M failed" over all suites (counted from
# each runner's own report; each fuzz input counts as one); exits non-zero if
# any step failed.
set -uo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
BUILD=${LIGER_BUILD_DIR:-$ROOT/build}
RUNTIME_BUILD=${LIGER_RUNTIME_BUILD_DIR:-$ROOT/build-runtime}
SANITIZE_BUILD=${LIGER_SANITIZE_BUILD_DIR:-$ROOT/build-sanitize}
PYTHON=${PYTHON:-python3}
SANITIZE=${LIGER_TEST_SANITIZE:-0}
for arg in "$@"; do
  case $arg in
    --sanitize) SANITIZE=1 ;;
    *) echo "usage: scripts/test.sh [--sanitize]" >&2; exit 2 ;;
  esac
done
LOG=$(mktemp -d)
trap 'rm -rf "$LOG"' EXIT
steps_failed=0
step() {
  local name=$1; shift
  echo "==== $name"
  local start=$SECONDS
  if "$@" 2>&1 | tee "$LOG/$name.log"; then echo "==== $name: ok ($((SECONDS - start)) s)"
  else steps_failed=$((steps_failed + 1)); echo "==== $name: FAILED ($((SECONDS - start)) s)"; fi
}

"$ROOT/scripts/setup.sh" --tests || exit 1
"$ROOT/scripts/build.sh" || exit 1

step lit ninja -C "$BUILD" check-liger
step unit ctest --test-dir "$BUILD" --output-on-failure
runtime_only() {
  cmake -G Ninja -S "$ROOT" -B "$RUNTIME_BUILD" -DLIGER_ENABLE_COMPILER=OFF \
    -DLIGER_BUILD_PYTHON=ON -DPython3_EXECUTABLE="$(command -v "$PYTHON")" \
    -DCMAKE_BUILD_TYPE=Release >/dev/null &&
    ninja -C "$RUNTIME_BUILD" >/dev/null &&
    ctest --test-dir "$RUNTIME_BUILD" --output-on-failure
}
step runtime-only runtime_only
step install env LIGER_BUILD_DIR="$BUILD" LIGER_RUNTIME_BUILD_DIR="$RUNTIME_BUILD" \
  "$ROOT/scripts/check-install.sh"
# test/Integration/gpu skips (and says why) on a machine without a GPU.
step python env LIGER_BUILD_DIR="$BUILD" LIGER_RUNTIME_BUILD_DIR="$RUNTIME_BUILD" \
  "$PYTHON" -m pytest -q -rs "$ROOT/test/python" \
  "$ROOT/test/Integration/gpu"

step fuzz "$PYTHON" "$ROOT/scripts/fuzz.py" --bin "$BUILD/bin" --out "$BUILD/fuzz-failures"

# Our code under ASan + UBSan; the LLVM/MLIR libraries stay uninstrumented.
# The sanitizers' options are test/sanitizers.env's, for lit (lit.cfg.py)
# and ctest (here).
sanitized() {
  cmake -G Ninja -S "$ROOT" -B "$SANITIZE_BUILD" -DCMAKE_BUILD_TYPE=Release \
    -DMLIR_DIR=/usr/lib/llvm-22/lib/cmake/mlir -DMLIR_LINK_MLIR_DYLIB=ON \
    -DLIGER_SANITIZE=address,undefined \
    -DPython3_EXECUTABLE="$(command -v "$PYTHON")" >/dev/null &&
    ninja -C "$SANITIZE_BUILD" liger-test-binaries >/dev/null || return 1
  local rc=0
  (set -a && . "$ROOT/test/sanitizers.env" &&
    ctest --test-dir "$SANITIZE_BUILD" --output-on-failure) || rc=1
  local suite suites=()
  for suite in Robustness Dialect Transforms Conversion Pipelines Target \
    Examples Registration; do
    suites+=("$SANITIZE_BUILD/test/$suite")
  done
  /usr/lib/llvm-22/bin/lit -sv "${suites[@]}" || rc=1
  return $rc
}
if [[ $SANITIZE == 1 ]]; then step sanitize sanitized; fi

# Test counts from each runner's report.
count() { grep -Eo "$2" "$LOG/$1.log" | grep -Eo '[0-9]+' | tail -1; }
lit_passed=$(count lit 'Passed: +[0-9]+'); lit_failed=$(count lit 'Failed: +[0-9]+')
py_passed=$(count python '[0-9]+ passed'); py_failed=$(count python '[0-9]+ failed')
install_passed=$(count install '[0-9]+ passed'); install_failed=$(count install '[0-9]+ failed')
ctest_counts() { # "N% tests passed, F tests failed out of T" -> passed failed
  grep -Eo '[0-9]+ tests failed out of [0-9]+' "$LOG/$1.log" | tail -1 |
    awk '{print $6 - $1, $1}'
}
read -r unit_passed unit_failed <<<"$(ctest_counts unit)"
read -r rt_passed rt_failed <<<"$(ctest_counts runtime-only)"
# "fuzz: N inputs, S signals, T timeouts" -> passed failed
read -r fuzz_passed fuzz_failed <<<"$(grep -Eo 'fuzz: [0-9]+ inputs, [0-9]+ signals, [0-9]+ timeouts' \
  "$LOG/fuzz.log" | tail -1 | awk '{print $2 - $4 - $6, $4 + $6}')"
san_passed=0 san_failed=0 san_report=""
if [[ $SANITIZE == 1 ]]; then
  read -r san_unit_passed san_unit_failed <<<"$(ctest_counts sanitize)"
  san_lit_passed=$(count sanitize 'Passed: +[0-9]+'); san_lit_failed=$(count sanitize 'Failed: +[0-9]+')
  san_passed=$(( ${san_unit_passed:-0} + ${san_lit_passed:-0} ))
  san_failed=$(( ${san_unit_failed:-0} + ${san_lit_failed:-0} ))
  san_report=", sanitized $san_passed"
fi
total_passed=$(( ${lit_passed:-0} + ${unit_passed:-0} + ${rt_passed:-0} + ${install_passed:-0} + ${py_passed:-0} + ${fuzz_passed:-0} + san_passed ))
total_failed=$(( ${lit_failed:-0} + ${unit_failed:-0} + ${rt_failed:-0} + ${install_failed:-0} + ${py_failed:-0} + ${fuzz_failed:-0} + san_failed ))
echo "lit ${lit_passed:-0}, unit ${unit_passed:-0}, runtime-only ${rt_passed:-0}, install ${install_passed:-0}, python ${py_passed:-0}, fuzz ${fuzz_passed:-0}$san_report passed; $steps_failed step(s) failed"
if (( steps_failed > 0 && total_failed == 0 )); then total_failed=$steps_failed; fi
echo "tests: $total_passed passed, $total_failed failed"
[[ $steps_failed -eq 0 ]]
