#!/usr/bin/env bash
# Installs liger as a user would and uses it from outside the checkout:
#   1. `cmake --install` of the compiler build ($LIGER_BUILD_DIR) and of the
#      runtime-only build ($LIGER_RUNTIME_BUILD_DIR) into two prefixes;
#   2. examples/cmake-consumer configured against each prefix
#      (find_package(liger), liger::runtime) and built, and
#      examples/cmake-compiler-consumer (liger::compiler and liger::runtime)
#      against the compiler's prefix, with MLIR kept out of its configure;
#   3. the installed liger-compile compiles a module into a bundle, and the
#      consumer lists its kernels and their output shapes; the compiler
#      consumer compiles the same module through liger::compile, for two
#      targets, and lists the kernels of each bundle;
#   4. what must fail does, with liger's message: a bundle directory that
#      does not exist, a module with a parse error and an unknown target
#      given to liger::compile, a component the package does not have
#      (the compiler of the runtime-only prefix), a configure where MLIR 22
#      is missing;
#   5. `pip install` of the checkout into a fresh venv (a runtime-only wheel,
#      the quick one; build isolation fetches scikit-build-core and pybind11
#      from PyPI), then `liger --version`, `liger info`, the imports, the
#      runtime extension and liger-bundle found inside the package, and
#      liger-compile's message for a wheel without the compiler.
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
consumer() { # consumer PREFIX BUILD_DIR [EXAMPLE [CMAKE_ARGS...]]
  cmake -G Ninja -S "$ROOT/examples/${3:-cmake-consumer}" -B "$2" \
    -DCMAKE_PREFIX_PATH="$1" -DCMAKE_BUILD_TYPE=Release "${@:4}" &&
    cmake --build "$2"
}
VERSION=$(sed -n 's/^project(liger VERSION \([0-9.]*\).*/\1/p' "$ROOT/CMakeLists.txt")

check install cmake --install "$BUILD" --prefix "$TMP/prefix"
check install-runtime-only cmake --install "$RUNTIME_BUILD" --prefix "$TMP/runtime-prefix"
check consumer consumer "$TMP/prefix" "$TMP/consumer"
check consumer-runtime-only consumer "$TMP/runtime-prefix" "$TMP/runtime-consumer"
# Nothing of MLIR is needed to build against liger::compiler.
check compiler-consumer consumer "$TMP/prefix" "$TMP/compiler-consumer" \
  cmake-compiler-consumer --no-warn-unused-cli \
  -DCMAKE_DISABLE_FIND_PACKAGE_MLIR=ON -DCMAKE_DISABLE_FIND_PACKAGE_LLVM=ON
check installed-version expect_output version "liger-compile $VERSION (LLVM/MLIR" \
  "$TMP/prefix/bin/liger-compile" --version
check installed-compile "$TMP/prefix/bin/liger-compile" \
  "$ROOT/test/Target/liger-compile.mlir" -o "$TMP/layer.bundle"
for dir in consumer runtime-consumer; do
  check "$dir-lists" expect_output list \
    "layer_rowwise_2: rowwise for sm_90a, 2 inputs, 1 outputs (liger.silu, liger.mul)" \
    "$TMP/$dir/liger-list-kernels" "$TMP/layer.bundle"
  check "$dir-shapes" expect_output shapes \
    "layer_rowwise_0 with 3 rows writes [3, 4096] [3, 4096]" \
    "$TMP/$dir/liger-list-kernels" "$TMP/layer.bundle"
done
check consumer-missing-bundle expect_failure missing \
  "liger-list-kernels: cannot read bundle directory $TMP/none: No such file or directory" \
  "$TMP/consumer/liger-list-kernels" "$TMP/none"
for target in sm_90a sm_80; do
  check "compiler-consumer-$target" expect_output "$target" \
    "compiled 3 kernels for $target into $TMP/api-$target.bundle layer_rowwise_0: rowwise for $target (liger.add_rms_norm) layer_matmul_1: matmul for $target (liger.linear) layer_rowwise_2: rowwise for $target (liger.silu, liger.mul)" \
    "$TMP/compiler-consumer/liger-compile-and-list" "$ROOT/test/Target/liger-compile.mlir" \
    "$TMP/api-$target.bundle" "$target"
done
# What the compiler left, and why, as liger-compile says it (sm_80 has no
# attention template).
check compiler-consumer-left expect_output left \
  "(not compiled yet, no kernel template: 1 liger.attention)" \
  "$TMP/compiler-consumer/liger-compile-and-list" "$ROOT/examples/llama3_8b_decoder_layer.mlir" \
  "$TMP/api-llama.bundle" sm_80
printf 'func.func @f(%%x: tensor<?x8xbf16>) {\n  liger.frobnicate\n}\n' >"$TMP/bad.mlir"
check compiler-consumer-parse-error expect_failure parse \
  "liger-compile-and-list: $TMP/bad.mlir:2:3: error: custom op 'liger.frobnicate' is unknown liger.frobnicate ^" \
  "$TMP/compiler-consumer/liger-compile-and-list" "$TMP/bad.mlir" "$TMP/bad.bundle"
check compiler-consumer-bad-target expect_failure target \
  "liger-compile-and-list: unsupported GPU target 'sm_70' (supported: sm_80, sm_86, sm_90a)" \
  "$TMP/compiler-consumer/liger-compile-and-list" "$ROOT/test/Target/liger-compile.mlir" \
  "$TMP/bad.bundle" sm_70
check compiler-consumer-wrote-nothing test ! -e "$TMP/bad.bundle"
mkdir -p "$TMP/wants"
cat >"$TMP/wants/CMakeLists.txt" <<'CMAKE'
cmake_minimum_required(VERSION 3.20)
project(wants LANGUAGES CXX)
find_package(liger REQUIRED COMPONENTS ${COMPONENT})
CMAKE
check no-compiler-component expect_failure component \
  "liger has no component 'compiler' (this liger was built without it: runtime-only, or against static MLIR libraries)" \
  cmake -S "$TMP/wants" -B "$TMP/wants/build1" -DCMAKE_PREFIX_PATH="$TMP/runtime-prefix" \
  -DCOMPONENT=compiler
check no-such-component expect_failure component \
  "liger has no component 'torch' (components: runtime, compiler)" \
  cmake -S "$TMP/wants" -B "$TMP/wants/build2" -DCMAKE_PREFIX_PATH="$TMP/prefix" -DCOMPONENT=torch
check no-mlir-message expect_failure no-mlir \
  "liger's compiler needs LLVM/MLIR 22, which was not found. Install it (Debian: apt-get install llvm-22-dev libmlir-22-dev mlir-22-tools, or scripts/setup.sh), pass -DMLIR_DIR=<llvm-22>/lib/cmake/mlir, or build the runtime alone with -DLIGER_ENABLE_COMPILER=OFF." \
  cmake -G Ninja -S "$ROOT" -B "$TMP/no-mlir" -DCMAKE_DISABLE_FIND_PACKAGE_MLIR=ON

# --- the wheel ---------------------------------------------------------------
# What a user has: no build directory to take tools from.
unset LIGER_BUILD_DIR LIGER_OPT
VENV=$TMP/venv
check venv "${PYTHON:-python3}" -m venv "$VENV"
check pip-install "$VENV/bin/pip" install -q "$ROOT" \
  -C cmake.define.LIGER_ENABLE_COMPILER=OFF -C build-dir="$TMP/wheel-build"
check liger-version expect_output version "liger $VERSION" "$VENV/bin/liger" --version
check liger-info expect_output info "compiler: not built (no MLIR 22 where it was built)" \
  "$VENV/bin/liger" info
# Run from elsewhere: the checkout's python/ must not be what is imported.
check wheel-imports expect_output imports "$VERSION $VENV/lib/" env -C "$TMP" \
  "$VENV/bin/python" -c "import liger, liger.ops, liger.runtime; \
print(liger.__version__, liger.runtime._runtime().__file__)"
check wheel-liger-bundle expect_output bundle "$TMP/layer.bundle: 3 kernels" \
  timeout 60 env -C "$TMP" PATH="$VENV/bin:/usr/bin:/bin" liger-bundle "$TMP/layer.bundle"
check wheel-no-compiler expect_failure compiler \
  "liger-compile: cannot find liger-compile: this liger" \
  timeout 60 env -C "$TMP" PATH="$VENV/bin:/usr/bin:/bin" liger-compile --version

echo "check-install: $passed passed, $failed failed"
[[ $failed -eq 0 ]]
