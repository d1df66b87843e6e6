#!/usr/bin/env bash
# Builds the runtime alone (no MLIR) with its unit tests, the
# _liger_runtime Python extension and, where PyTorch is installed, the
# LibTorch adapter (torch.ops.liger.*) and its C++ example, for machines
# that run kernels but do not
# compile them (the GPU machine: CMake, ninja, pybind11, Python). The
# extension lands in $LIGER_RUNTIME_BUILD_DIR/python (default
# build-runtime-py/python); put it and python/ on PYTHONPATH. The runtime
# reads manifests with nlohmann/json: the installed package, else the
# headers under $LIGER_JSON_INCLUDE_DIR (scripts/build-gpu-bundles.sh
# copies them to gpu-bundles/include).
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
BUILD=${LIGER_RUNTIME_BUILD_DIR:-$ROOT/build-runtime-py}
PYTHON=${PYTHON:-python3}
TORCH=OFF
"$PYTHON" -c 'import torch' 2>/dev/null && TORCH=ON
JSON=()
[[ -n "${LIGER_JSON_INCLUDE_DIR:-}" ]] && JSON=(-DLIGER_JSON_INCLUDE_DIR="$LIGER_JSON_INCLUDE_DIR")
cmake -G Ninja -S "$ROOT" -B "$BUILD" -DLIGER_ENABLE_COMPILER=OFF \
  -DLIGER_BUILD_PYTHON=ON -DLIGER_BUILD_TORCH=$TORCH -DCMAKE_BUILD_TYPE=Release \
  -DPython3_EXECUTABLE="$(command -v "$PYTHON")" "${JSON[@]}" >"$BUILD.cmake.log" 2>&1 ||
  { tail -40 "$BUILD.cmake.log"; exit 1; }
ninja -C "$BUILD" >"$BUILD.ninja.log" 2>&1 || { tail -60 "$BUILD.ninja.log"; exit 1; }
echo "build-runtime: $BUILD/python/$(cd "$BUILD/python" && ls _liger_runtime*.so)"
