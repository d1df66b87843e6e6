#!/usr/bin/env bash
# Installs liger as a user would and uses it from outside the checkout:
#   1. `cmake --install` of the compiler build ($LIGER_BUILD_DIR) and of the
#      runtime-only build ($LIGER_RUNTIME_BUILD_DIR) into two prefixes;
#   2. examples/cmake-consumer configured against each prefix
#      (find_package(liger), liger::runtime) and built;
#   3. the installed liger-compile compiles a module into a bundle, and the
#      consumer lists its kernels and their output shapes;
#   4. what must fail does, with liger's message: a bundle directory that
#      does not exist, and a component the package does not have.
# Prints "check-install: N passed, M failed" and exits non-zero on a failure.
set -uo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
BUILD=${LIGER_BUILD_DIR:-$ROOT/build}
RUNTIME_BUILD=${LIGER_RUNTIME_BUILD_DIR:-$ROOT/build-runtime}
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
passed=0 failed=0
check() { # check NAME COMMAND...: one test
  if "${@:2}" >"$TMP/out" 2>&1; then passed=$((passed + 1))
  else failed=$((failed + 1)); echo "check-install: FAILED $1"; tail -20 "$TMP/out"; fi
}
# expect_output NAME TEXT COMMAND...: COMMAND's output holds TEXT (blanks
# and line breaks compared as one space: CMake wraps its messages).
holds() { tr -s ' \n' '  ' <<<"$1" | grep -qF -- "$2" || { echo "expected '$2' in:"; echo "$1"; return 1; }; }
expect_output() { local out; out=$("${@:3}" 2>&1); holds "$out" "$2"; }
expect_failure() { # like expect_output, and COMMAND must fail
  local out
  if out=$("${@:3}" 2>&1); then echo "expected a failure, got:"; echo "$out"; return 1; fi
  holds "$out" "$2"
}
consumer() { # consumer PREFIX BUILD_DIR
  cmake -G Ninja -S "$ROOT/examples/cmake-consumer" -B "$2" \
    -DCMAKE_PREFIX_PATH="$1" -DCMAKE_BUILD_TYPE=Release &&
    cmake --build "$2"
}
VERSION=$(sed -n 's/^project(liger VERSION \([0-9.]*\).*/\1/p' "$ROOT/CMakeLists.txt")

check install cmake --install "$BUILD" --prefix "$TMP/prefix"
check install-runtime-only cmake --install "$RUNTIME_BUILD" --prefix "$TMP/runtime-prefix"
check consumer consumer "$TMP/prefix" "$TMP/consumer"
check consumer-runtime-only consumer "$TMP/runtime-prefix" "$TMP/runtime-consumer"
check installed-version expect_output version "liger-compile $VERSION (LLVM/MLIR" \
  "$TMP/prefix/bin/liger-compile" --version
check installed-compile "$TMP/prefix/bin/liger-compile" \
  "$ROOT/test/Target/liger-compile.mlir" -o "$TMP/layer.bundle"
for dir in consumer runtime-consumer; do
  check "$dir-lists" expect_output list \
    "layer_rowwise_1: rowwise for sm_90a, 2 inputs, 1 outputs (liger.silu, liger.mul)" \
    "$TMP/$dir/liger-list-kernels" "$TMP/layer.bundle"
  check "$dir-shapes" expect_output shapes \
    "layer_rowwise_0 with 3 rows writes [3, 4096] [3, 4096]" \
    "$TMP/$dir/liger-list-kernels" "$TMP/layer.bundle"
done
check consumer-missing-bundle expect_failure missing \
  "liger-list-kernels: cannot read bundle directory $TMP/none: No such file or directory" \
  "$TMP/consumer/liger-list-kernels" "$TMP/none"
mkdir -p "$TMP/wants-compiler"
cat >"$TMP/wants-compiler/CMakeLists.txt" <<'CMAKE'
cmake_minimum_required(VERSION 3.20)
project(wants-compiler LANGUAGES CXX)
find_package(liger REQUIRED COMPONENTS compiler)
CMAKE
check no-compiler-component expect_failure component \
  "liger has no component 'compiler' (components: runtime; the compiler is the liger-compile tool in $TMP/prefix/bin)" \
  cmake -S "$TMP/wants-compiler" -B "$TMP/wants-compiler/build" -DCMAKE_PREFIX_PATH="$TMP/prefix"

echo "check-install: $passed passed, $failed failed"
[[ $failed -eq 0 ]]
