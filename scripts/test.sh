#!/usr/bin/env bash
# Sets up, builds and runs every test that needs no GPU:
#   1. lit/FileCheck suite (check-liger)
#   2. C++ unit tests (GoogleTest, via ctest)
#   3. the runtime alone, configured without MLIR (-DLIGER_ENABLE_COMPILER=OFF),
#      with its unit tests and its Python extension: the runtime/compiler split
#      stays real
#   4. Python tests (pytest test/python)
#   5. the fuzzer (scripts/fuzz.py): mutated inputs through liger-opt and
#      liger-compile, no signal and no timeout (fixed seed; $LIGER_FUZZ_SEED
#      draws others)
# Ends with one line "tests: N passed, M failed" over all suites (counted from
# each runner's own report; each fuzz input counts as one); exits non-zero if
# any step failed.
set -uo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
BUILD=${LIGER_BUILD_DIR:-$ROOT/build}
RUNTIME_BUILD=${LIGER_RUNTIME_BUILD_DIR:-$ROOT/build-runtime}
PYTHON=${PYTHON:-python3}
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
# test/Integration/gpu skips (and says why) on a machine without a GPU.
step python env LIGER_BUILD_DIR="$BUILD" LIGER_RUNTIME_BUILD_DIR="$RUNTIME_BUILD" \
  "$PYTHON" -m pytest -q -rs "$ROOT/test/python" \
  "$ROOT/test/Integration/gpu"

step fuzz "$PYTHON" "$ROOT/scripts/fuzz.py" --bin "$BUILD/bin" --out "$BUILD/fuzz-failures"

# Test counts from each runner's report.
count() { grep -Eo "$2" "$LOG/$1.log" | grep -Eo '[0-9]+' | tail -1; }
lit_passed=$(count lit 'Passed: +[0-9]+'); lit_failed=$(count lit 'Failed: +[0-9]+')
py_passed=$(count python '[0-9]+ passed'); py_failed=$(count python '[0-9]+ failed')
ctest_counts() { # "N% tests passed, F tests failed out of T" -> passed failed
  grep -Eo '[0-9]+ tests failed out of [0-9]+' "$LOG/$1.log" | tail -1 |
    awk '{print $6 - $1, $1}'
}
read -r unit_passed unit_failed <<<"$(ctest_counts unit)"
read -r rt_passed rt_failed <<<"$(ctest_counts runtime-only)"
# "fuzz: N inputs, S signals, T timeouts" -> passed failed
read -r fuzz_passed fuzz_failed <<<"$(grep -Eo 'fuzz: [0-9]+ inputs, [0-9]+ signals, [0-9]+ timeouts' \
  "$LOG/fuzz.log" | tail -1 | awk '{print $2 - $4 - $6, $4 + $6}')"
total_passed=$(( ${lit_passed:-0} + ${unit_passed:-0} + ${rt_passed:-0} + ${py_passed:-0} + ${fuzz_passed:-0} ))
total_failed=$(( ${lit_failed:-0} + ${unit_failed:-0} + ${rt_failed:-0} + ${py_failed:-0} + ${fuzz_failed:-0} ))
echo "lit ${lit_passed:-0}, unit ${unit_passed:-0}, runtime-only ${rt_passed:-0}, python ${py_passed:-0}, fuzz ${fuzz_passed:-0} passed; $steps_failed step(s) failed"
if (( steps_failed > 0 && total_failed == 0 )); then total_failed=$steps_failed; fi
echo "tests: $total_passed passed, $total_failed failed"
[[ $steps_failed -eq 0 ]]
