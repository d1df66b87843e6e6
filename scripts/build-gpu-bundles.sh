#!/usr/bin/env bash
# Compiles the kernels of the GPU suite (test/Integration/gpu/kernels.py)
# with liger-compile into gpu-bundles/h<hidden>_<dtype>/ (every row length
# and dtype of kernels.rowwise_bundles()), for sm_90a, and copies the
# nlohmann/json headers the runtime reads manifests with into
# gpu-bundles/include/ (the GPU machine may not have them). Run it here (it
# needs the compiler); carry gpu-bundles/ to the GPU machine and run
# scripts/gpu-check.sh there.
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
BUILD=${LIGER_BUILD_DIR:-$ROOT/build}
OUT=${1:-$ROOT/gpu-bundles}
PYTHON=${PYTHON:-python3}
rm -rf "$OUT"
mkdir -p "$OUT/src" "$OUT/include"
json=""
for dir in ${LIGER_JSON_INCLUDE_DIR:-} /usr/include /usr/local/include; do
  if [[ -f "$dir/nlohmann/json.hpp" ]]; then json=$dir; break; fi
done
[[ -n "$json" ]] || { echo "build-gpu-bundles: nlohmann/json.hpp not found (scripts/setup.sh installs nlohmann-json3-dev)"; exit 1; }
cp -r "$json/nlohmann" "$OUT/include/"
"$PYTHON" - "$OUT/src" <<'PY'
import sys
sys.path.insert(0, "test/Integration/gpu")
import kernels
for h, dt in kernels.rowwise_bundles():
    open("%s/h%d_%s.mlir" % (sys.argv[1], h, dt), "w").write(kernels.module_text(h, dt))
for dt in kernels.DTYPES:
    open("%s/rope_%s.mlir" % (sys.argv[1], dt), "w").write(kernels.rope_module_text(dt))
PY
for src in "$OUT"/src/*.mlir; do
  name=$(basename "$src" .mlir)
  "$BUILD/bin/liger-compile" "$src" -o "$OUT/$name" --target=sm_90a >/dev/null
done
# The matmul templates (test_matmul_kernels.py).
"$PYTHON" - "$OUT/src/matmul.mlir" <<'PY'
import sys
sys.path.insert(0, "test/Integration/gpu")
import kernels
open(sys.argv[1], "w").write(kernels.matmul_module_text())
PY
"$BUILD/bin/liger-compile" "$OUT/src/matmul.mlir" -o "$OUT/matmul" --target=sm_90a >/dev/null
"$PYTHON" - "$OUT/src/cluster.mlir" <<'PY'
import sys
sys.path.insert(0, "test/Integration/gpu")
import kernels
open(sys.argv[1], "w").write(kernels.cluster_module_text())
PY
"$BUILD/bin/liger-compile" "$OUT/src/cluster.mlir" -o "$OUT/cluster" --target=sm_90a >/dev/null
"$PYTHON" - "$OUT/src/peel.mlir" <<'PY'
import sys
sys.path.insert(0, "test/Integration/gpu")
import kernels
open(sys.argv[1], "w").write(kernels.peel_module_text())
PY
"$BUILD/bin/liger-compile" "$OUT/src/peel.mlir" -o "$OUT/peel" --target=sm_90a >/dev/null
# Cross-entropy forward and gradient (test_cross_entropy_kernels.py).
"$PYTHON" - "$OUT/src/cross_entropy.mlir" <<'PY'
import sys
sys.path.insert(0, "test/Integration/gpu")
import kernels
open(sys.argv[1], "w").write(kernels.cross_entropy_module_text())
PY
"$BUILD/bin/liger-compile" "$OUT/src/cross_entropy.mlir" -o "$OUT/cross_entropy" --target=sm_90a >/dev/null
# The attention template (test_attention_kernels.py).
"$PYTHON" - "$OUT/src/attention.mlir" <<'PY'
import sys
sys.path.insert(0, "test/Integration/gpu")
import kernels
open(sys.argv[1], "w").write(kernels.attention_module_text())
PY
"$BUILD/bin/liger-compile" "$OUT/src/attention.mlir" -o "$OUT/attention" --target=sm_90a >/dev/null
# Loss groups planned as chunk kernels (test_planned_loss.py).
"$PYTHON" - "$OUT/src/loss_plan.mlir" <<'PY'
import sys
sys.path.insert(0, "test/Integration/gpu")
import kernels
open(sys.argv[1], "w").write(kernels.loss_plan_module_text())
PY
"$BUILD/bin/liger-compile" "$OUT/src/loss_plan.mlir" -o "$OUT/loss_plan" --target=sm_90a \
  --loss-memory-budget="$("$PYTHON" -c 'import sys; sys.path.insert(0, "test/Integration/gpu"); import kernels; print(kernels.LOSS_PLAN_BUDGET)')" >/dev/null
# Bundles for other architectures: the runtime must refuse them on the
# H200 with a clear message.
"$BUILD/bin/liger-compile" "$OUT/src/h1000_f32.mlir" -o "$OUT/sm80_h1000_f32" --target=sm_80 >/dev/null
"$BUILD/bin/liger-compile" "$OUT/src/h1000_f32.mlir" -o "$OUT/sm86_h1000_f32" --target=sm_86 >/dev/null
# The liger.ops configurations of test_ops_autograd.py, test_ops_norms_gpu.py,
# test_preference_gpu.py, test_fused_linear_jsd_gpu.py, test_ops_lora_gpu.py,
# test_ops_gated_mlp_gpu.py, test_ops_linear_rope_gpu.py (the q/k projection
# kernels and their backward's RoPE kernels; at batch 1 a case of per-batch
# tables runs the broadcast tables' kernels), test_ops_attention_gpu.py (the
# attention template's forward and backward, ops_attention_cases.py) and of
# the patched tiny models of test_transformers_parity.py (their LoRA layers
# too: models.lora_specs() builds the PEFT models on the meta device, with
# transformers and PEFT), by key (LIGER_OPS_BUNDLES).
PYTHONPATH="$ROOT/python:$ROOT/test/Integration/gpu${PYTHONPATH:+:$PYTHONPATH}" \
  LIGER_BUILD_DIR="$BUILD" "$PYTHON" - "$OUT/ops" <<'PY'
import dataclasses
import sys
import kernels
import models
import ops_attention_cases
from liger import ops
linear_rope = list(kernels.linear_rope_cases().values())
linear_rope += [dataclasses.replace(s, broadcast_tables=True) for s in linear_rope
                if not s.broadcast_tables]
ops.precompile(sys.argv[1], [case[0] for case in kernels.ops_cases().values()] +
               [case[0] for case in kernels.ops_norm_cases().values()] +
               [case[0] for case in kernels.ops_ce_cases().values()] +
               [case[0] for case in kernels.ops_flce_cases().values()] +
               [case[0] for case in kernels.ops_divergence_cases().values()] +
               kernels.preference_specs() + kernels.fused_linear_jsd_specs() +
               list(kernels.lora_cases().values()) + list(kernels.gated_mlp_cases().values()) +
               linear_rope + [s.rope_spec() for s in linear_rope] +
               ops_attention_cases.specs() + models.specs() + models.lora_specs())
PY
# torch.compile(backend="liger"): the kernels of a training step of each
# model of test_backend_gpu.py and of bench/e2e.py's model (the liger
# operators' and the fusion groups'), by key, and what the GPU run must
# find (backend/expected.json). The graphs are those of the torch that
# traces them: PRECOMPILE_PYTHON names a Python whose torch, transformers
# and PEFT are the GPU machine's versions (default: $PYTHON).
PYTHONPATH="$ROOT/python:$ROOT/test/Integration/gpu${PYTHONPATH:+:$PYTHONPATH}" \
  LIGER_BUILD_DIR="$BUILD" "${PRECOMPILE_PYTHON:-$PYTHON}" -W ignore - "$OUT/backend" <<'PY'
import sys
import backend_models
backend_models.precompile_all(sys.argv[1])
PY
echo "build-gpu-bundles: $(ls -d "$OUT"/h* "$OUT"/rope* "$OUT"/sm8* "$OUT"/matmul | wc -l) bundles, $(ls "$OUT/ops" | wc -l) liger.ops bundles and $(ls "$OUT/backend" | wc -l) backend bundles in $OUT"
