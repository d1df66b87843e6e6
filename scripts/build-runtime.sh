#!/usr/bin/env bash
# Builds the runtime alone (no MLIR) with its unit tests and the
# _liger_runtime Python extension, for machines that run kernels but do not
# compile them (the GPU machine: CMake, ninja, pybind11, Python). The
# extension lands in $LIGER_RUNTIME_BUILD_DIR/python (default
# build-runtime-py/python); put it and python/ on PYTHONPATH.
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
BUILD=${LIGER_RUNTIME_BUILD_DIR:-$ROOT/build-runtime-py}
PYTHON=${PYTHON:-python3}
cmake -G Ninja -S "$ROOT" -B "$BUILD" -DLIGER_ENABLE_COMPILER=OFF \
  -DLIGER_BUILD_PYTHON=ON -DCMAKE_BUILD_TYPE=Release \
  -DPython3_EXECUTABLE="$(command -v "$PYTHON")" >/dev/null
ninja -C "$BUILD" >/dev/null
echo "build-runtime: $BUILD/python/$(cd "$BUILD/python" && ls _liger_runtime*.so)"
