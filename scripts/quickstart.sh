#!/usr/bin/env bash
# The main job, on a machine with no GPU: set up, build, then take a Hugging
# Face config shipped in the repo (Llama-3-8B) to liger IR with the frontend
# (python -m liger.frontend import: the model built with no weights, one
# decoder layer and the lm_head + loss captured and recognised), report what
# fused into what (and why the rest did not) with the kernel count before
# and after, and compile the kernels to a bundle for sm_90a.
#
#   bash scripts/quickstart.sh [CONFIG.json | MODEL_DIR | LAYER.mlir]
#
# A .mlir argument skips the import and runs the same job on that module
# (e.g. the hand-written layer, examples/llama3_8b_decoder_layer.mlir).
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
BUILD=${LIGER_BUILD_DIR:-$ROOT/build}
INPUT=${1:-$ROOT/examples/configs/llama3-8b.json}
PYTHON=${PYTHON:-python3}

# --tests brings PyTorch and transformers, which the frontend builds the model with.
"$ROOT/scripts/setup.sh" --tests
echo "quickstart: building liger-opt and liger-compile (first build takes a few minutes)"
"$ROOT/scripts/build.sh" liger-opt liger-compile >/dev/null

OUT=$BUILD/quickstart
mkdir -p "$OUT"
OPT="$BUILD/bin/liger-opt"

if [[ $INPUT == *.mlir ]]; then
  LAYER=$INPUT
else
  NAME=$(basename "${INPUT%/}" .json)
  LAYER=$OUT/$NAME.mlir
  echo
  echo "== import: python -m liger.frontend import $(basename "${INPUT%/}") -o $NAME.mlir"
  PYTHONPATH="$ROOT/python${PYTHONPATH:+:$PYTHONPATH}" LIGER_BUILD_DIR="$BUILD" \
    "$PYTHON" -m liger.frontend import "$INPUT" -o "$LAYER"
fi
NAME=$(basename "$LAYER" .mlir)

echo
echo "== before fusion: liger-opt $NAME.mlir --canonicalize --liger-print-summary"
"$OPT" "$LAYER" --canonicalize --liger-print-summary -o "$OUT/$NAME.canonical.mlir"

echo
echo "== fusion report: liger-opt $NAME.mlir --canonicalize --liger-fuse=report=true"
"$OPT" "$LAYER" --canonicalize --liger-fuse=report=true -o "$OUT/$NAME.fused.mlir"

echo
echo "== after fusion: liger-opt --liger-print-summary"
"$OPT" "$OUT/$NAME.fused.mlir" --liger-print-summary -o /dev/null

echo
echo "== kernels: liger-compile $NAME.mlir -o $NAME.bundle (sm_90a)"
if "$BUILD/bin/liger-compile" "$LAYER" -o "$OUT/$NAME.bundle" --target=sm_90a \
    2>"$OUT/$NAME.compile.log"; then
  echo "quickstart: bundle (cubins, PTX, manifest.json) in $OUT/$NAME.bundle (warnings, one per group left for later, in $OUT/$NAME.compile.log)"
  # The kernels made, from the bundle's manifest (docs/Design/Bundle.md).
  "$PYTHON" - "$OUT/$NAME.bundle/manifest.json" <<'PY'
import json, sys
for module in json.load(open(sys.argv[1]))["modules"]:
    for k in module["kernels"]:
        ops = [op for op in k["ops"].split(", ") if op.startswith("liger.")]
        print("  %-34s %-7s %4d threads  %s" % (k["name"], k.get("template", ""),
                                                k["block"][0], " + ".join(ops)))
PY
else
  cat "$OUT/$NAME.compile.log"
  echo "quickstart: liger-compile could not write the bundle (see above)"
fi

echo
echo "quickstart: liger IR in $LAYER, fused IR in $OUT/$NAME.fused.mlir"
