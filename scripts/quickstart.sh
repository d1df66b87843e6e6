#!/usr/bin/env bash
# The main job on the bundled example: set up, build, then parse, verify and
# canonicalize a Llama-3-8B decoder layer written in the liger dialect and
# report what it computes. The canonicalized IR is written beside the build.
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
BUILD=${LIGER_BUILD_DIR:-$ROOT/build}
EXAMPLE=${1:-$ROOT/examples/llama3_8b_decoder_layer.mlir}

"$ROOT/scripts/setup.sh"
echo "quickstart: building liger-opt (first build takes a few minutes)"
"$ROOT/scripts/build.sh" liger-opt >/dev/null

OUT=$BUILD/quickstart
mkdir -p "$OUT"
echo "quickstart: liger-opt $(basename "$EXAMPLE") --canonicalize --liger-print-summary"
"$BUILD/bin/liger-opt" "$EXAMPLE" --canonicalize --liger-print-summary \
  -o "$OUT/$(basename "$EXAMPLE" .mlir).canonical.mlir"
echo "quickstart: canonicalized IR in $OUT/$(basename "$EXAMPLE" .mlir).canonical.mlir"
