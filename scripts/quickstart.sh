#!/usr/bin/env bash
# The main job on the bundled example: set up, build, then fuse a Llama-3-8B
# decoder layer written in the liger dialect into kernel groups and report
# what fused into what (and why the rest did not), with the kernel count
# before and after. The fused IR is written beside the build.
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
BUILD=${LIGER_BUILD_DIR:-$ROOT/build}
EXAMPLE=${1:-$ROOT/examples/llama3_8b_decoder_layer.mlir}

"$ROOT/scripts/setup.sh"
echo "quickstart: building liger-opt and liger-compile (first build takes a few minutes)"
"$ROOT/scripts/build.sh" liger-opt liger-compile >/dev/null

OUT=$BUILD/quickstart
mkdir -p "$OUT"
NAME=$(basename "$EXAMPLE" .mlir)
OPT="$BUILD/bin/liger-opt"

echo
echo "== before fusion: liger-opt $(basename "$EXAMPLE") --canonicalize --liger-print-summary"
"$OPT" "$EXAMPLE" --canonicalize --liger-print-summary -o "$OUT/$NAME.canonical.mlir"

echo
echo "== fusion report: liger-opt $(basename "$EXAMPLE") --canonicalize --liger-fuse=report=true"
"$OPT" "$EXAMPLE" --canonicalize --liger-fuse=report=true -o "$OUT/$NAME.fused.mlir"

echo
echo "== after fusion: liger-opt --liger-print-summary"
"$OPT" "$OUT/$NAME.fused.mlir" --liger-print-summary -o /dev/null

echo
echo "== kernels: liger-compile $(basename "$EXAMPLE") -o $NAME.bundle (sm_90a)"
if "$BUILD/bin/liger-compile" "$EXAMPLE" -o "$OUT/$NAME.bundle" --target=sm_90a; then
  echo "quickstart: bundle (cubin, PTX, manifest.json) in $OUT/$NAME.bundle"
else
  echo "quickstart: liger-compile could not write the bundle (see above)"
fi

echo
echo "== kernels with the experimental matmul templates: liger-compile --matmul-kernels (sm_90a)"
if "$BUILD/bin/liger-compile" "$EXAMPLE" -o "$OUT/$NAME.matmul.bundle" --target=sm_90a \
    --matmul-kernels 2>"$OUT/$NAME.matmul.log"; then
  echo "quickstart: bundle in $OUT/$NAME.matmul.bundle (warnings, one per group left for later, in $OUT/$NAME.matmul.log)"
  # The kernels made, from the bundle's manifest (docs/Design/Bundle.md).
  python3 - "$OUT/$NAME.matmul.bundle/manifest.json" <<'PY'
import json, sys
for module in json.load(open(sys.argv[1]))["modules"]:
    for k in module["kernels"]:
        ops = [op for op in k["ops"].split(", ") if op.startswith("liger.")]
        print("  %-34s %-7s %4d threads  %s" % (k["name"], k.get("template", ""),
                                                k["block"][0], " + ".join(ops)))
PY
else
  cat "$OUT/$NAME.matmul.log"
  echo "quickstart: liger-compile --matmul-kernels could not write the bundle (see above)"
fi

echo
echo "quickstart: fused IR in $OUT/$NAME.fused.mlir"
