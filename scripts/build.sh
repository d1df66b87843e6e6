#!/usr/bin/env bash
# Configures (once) and builds liger with ninja into $LIGER_BUILD_DIR
# (default: build/ in the checkout). Extra arguments are ninja targets.
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
BUILD=${LIGER_BUILD_DIR:-$ROOT/build}
if [[ ! -f $BUILD/build.ninja ]]; then
  cmake -G Ninja -S "$ROOT" -B "$BUILD" \
    -DCMAKE_BUILD_TYPE=Release \
    -DMLIR_DIR=/usr/lib/llvm-22/lib/cmake/mlir \
    -DMLIR_LINK_MLIR_DYLIB=ON >/dev/null
fi
ninja -C "$BUILD" "$@"
