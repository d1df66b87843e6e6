#!/usr/bin/env bash
# Compiles bench/kernels.mlir into bench-bundles/rowwise (sm_90a), for
# bench/rowwise.py on the GPU machine, and bench/matmul.mlir into
# bench-bundles/matmul (the matmul templates; and matmul-pingpong, with the
# pingpong schedule) for bench/matmul.py (the configuration sweep's
# candidates into bench-bundles/matmul-sweep, for
# bench/matmul_config_sweep.py),
# with --norm-prologue so that qk_rope_wg keeps its norm in the kernel (the
# measured alternative to the default rowwise norm kernel),
# bench/cross_entropy.mlir into bench-bundles/cross_entropy, and the
# liger.ops fused linear cross-entropy and divergence kernels and those of a patched
# Llama-3-8B-shaped model (bench/e2e.py) into bench-bundles/ops, and those
# of its liger-backend variant into bench-bundles/backend.
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
BUILD=${LIGER_BUILD_DIR:-$ROOT/build}
rm -rf "$ROOT/bench-bundles"
"$BUILD/bin/liger-compile" "$ROOT/bench/kernels.mlir" -o "$ROOT/bench-bundles/rowwise" --target=sm_90a
"$BUILD/bin/liger-compile" "$ROOT/bench/matmul.mlir" -o "$ROOT/bench-bundles/matmul" --target=sm_90a \
  --norm-prologue
# The same with the pingpong schedule wherever a group takes it, for
# bench/matmul.py --bundle bench-bundles/matmul-pingpong.
"$BUILD/bin/liger-compile" "$ROOT/bench/matmul.mlir" -o "$ROOT/bench-bundles/matmul-pingpong" \
  --target=sm_90a --norm-prologue --matmul-schedule=pingpong
# bench/attention.mlir into bench-bundles/attention (bench/attention.py).
"$BUILD/bin/liger-compile" "$ROOT/bench/attention.mlir" -o "$ROOT/bench-bundles/attention" --target=sm_90a >/dev/null
# The schedules pinned side by side, for bench/matmul_schedules.py.
"$BUILD/bin/liger-compile" "$ROOT/bench/matmul_schedules.mlir" -o "$ROOT/bench-bundles/matmul-schedules" \
  --target=sm_90a
"$BUILD/bin/liger-compile" "$ROOT/bench/cross_entropy.mlir" -o "$ROOT/bench-bundles/cross_entropy" --target=sm_90a
# Rowwise kernels at pinned threads x vector width, for bench/config_sweep.py.
"$BUILD/bin/liger-compile" "$ROOT/bench/config_sweep.mlir" -o "$ROOT/bench-bundles/sweep" --target=sm_90a
# Every candidate configuration of the layer's products, pinned, for
# bench/matmul_config_sweep.py measure (which writes the table that
# --matmul-config-table reads).
python3 "$ROOT/bench/matmul_config_sweep.py" emit --out "$ROOT/bench-bundles/matmul-sweep-src" \
  --liger-opt "$BUILD/bin/liger-opt" --models "${LIGER_SWEEP_MODELS:-llama3-8b,qwen2.5-7b}"
"$BUILD/bin/liger-compile" "$ROOT/bench-bundles/matmul-sweep-src/sweep.mlir" \
  -o "$ROOT/bench-bundles/matmul-sweep" --target=sm_90a >/dev/null
cp "$ROOT/bench-bundles/matmul-sweep-src/candidates.json" "$ROOT/bench-bundles/matmul-sweep/"
rm -rf "$ROOT/bench-bundles/matmul-sweep-src"
# liger.ops.fused_linear_cross_entropy at Llama-3-8B's lm_head (mean, and
# per token: also the preference losses' kernels), for
# bench/fused_linear_cross_entropy.py and bench/preference.py
# (LIGER_OPS_BUNDLES=bench-bundles/ops).
PYTHONPATH="$ROOT/python${PYTHONPATH:+:$PYTHONPATH}" LIGER_BUILD_DIR="$BUILD" python3 - "$ROOT/bench-bundles/ops" <<'PY'
import sys
from liger import ops
ops.precompile(sys.argv[1], [ops.fused_linear_cross_entropy_spec(128256, 4096, "bf16"),
                             ops.fused_linear_cross_entropy_spec(128256, 4096, "bf16",
                                                                 reduction="none")])
PY
# liger.ops.fused_linear_jsd's kernels at bench/fused_linear_jsd.py's shapes.
PYTHONPATH="$ROOT/python:$ROOT/bench${PYTHONPATH:+:$PYTHONPATH}" LIGER_BUILD_DIR="$BUILD" python3 - "$ROOT/bench-bundles/ops" <<'PY'
import sys
from liger import ops
import fused_linear_jsd
ops.precompile(sys.argv[1], fused_linear_jsd.specs())
PY
# liger.ops.kl_div and liger.ops.jsd at the vocabularies of
# bench/divergence.py (LIGER_OPS_BUNDLES=bench-bundles/ops).
PYTHONPATH="$ROOT/python:$ROOT/bench${PYTHONPATH:+:$PYTHONPATH}" LIGER_BUILD_DIR="$BUILD" python3 - "$ROOT/bench-bundles/ops" <<'PY'
import sys
from liger import ops
import divergence
ops.precompile(sys.argv[1], [s for v in divergence.VOCABS for s in divergence.specs(v)])
PY
# liger.ops.layer_norm at hidden 4096, for bench/rowwise.py's LayerNorm rows.
PYTHONPATH="$ROOT/python:$ROOT/bench${PYTHONPATH:+:$PYTHONPATH}" LIGER_BUILD_DIR="$BUILD" python3 - "$ROOT/bench-bundles/ops" <<'PY'
import sys
from liger import ops
import rowwise
ops.precompile(sys.argv[1], rowwise.layer_norm_specs())
PY
# The kernels a patched Llama-3-8B-shaped model calls, for bench/e2e.py (with
# fused_mlp=True and fuse_qkv_rope=True too: its variants liger-fused-mlp and
# liger-qk-rope; the latter's are bench/matmul.py's "qk+rope fwd+bwd" row's).
PYTHONPATH="$ROOT/python:$ROOT/bench${PYTHONPATH:+:$PYTHONPATH}" LIGER_BUILD_DIR="$BUILD" python3 - "$ROOT/bench-bundles/ops" <<'PY'
import sys
import e2e
from liger import transformers as lt
lt.precompile(sys.argv[1], e2e.config_namespace(), "bf16", fused_mlp=True, fuse_qkv_rope=True)
PY
# The LoRA kernels of bench/e2e.py's --lora model (its liger-lora variant),
# the one of bench/matmul.py's "lora r16 fwd+bwd" row among them (4096 ->
# 4096, rank 16, scale 2). transformers and peft as the GPU machine's:
# PRECOMPILE_PYTHON.
PYTHONPATH="$ROOT/python:$ROOT/bench${PYTHONPATH:+:$PYTHONPATH}" LIGER_BUILD_DIR="$BUILD" \
  "${PRECOMPILE_PYTHON:-python3}" - "$ROOT/bench-bundles/ops" <<'PY'
import sys
import e2e
from liger import ops
ops.precompile(sys.argv[1], e2e.lora_specs(2))
PY
# The kernels and fused graphs of bench/e2e.py's liger-backend variant
# (torch.compile(backend="liger") of the unpatched model, default --layers),
# with and without --lora (LIGER_OPS_BUNDLES=...:bench-bundles/backend).
# The graphs are those of the torch that traces them: PRECOMPILE_PYTHON
# names a Python with the GPU machine's torch and transformers.
for lora in "" --lora; do
  PYTHONPATH="$ROOT/python${PYTHONPATH:+:$PYTHONPATH}" LIGER_BUILD_DIR="$BUILD" \
    "${PRECOMPILE_PYTHON:-python3}" -W ignore "$ROOT/bench/e2e.py" --precompile "$ROOT/bench-bundles/backend" $lora
done
