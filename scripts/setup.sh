#!/usr/bin/env bash
# Installs what liger needs on a fresh Debian 12 machine; safe to re-run.
#
#   Debian packages: LLVM/MLIR 22 (dev files, tools, FileCheck, lit), CMake,
#                    ninja, g++, GoogleTest, nlohmann/json (the runtime's
#                    manifest reader, header-only)
#   PyPI:            pytest, numpy, pybind11 (with --tests: torch, transformers
#                    and peft at the versions of scripts/requirements-tests.txt)
#   CUDA toolkit:    checked, not installed: ptxas from $CUDA_HOME/bin or
#                    /usr/local/cuda/bin (needed to build cubins, not to test)
#
# Only missing packages are installed; apt-get update runs only then.
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)

log() { printf 'setup: %s\n' "$*"; }

DEB_PACKAGES=(llvm-22-dev libmlir-22-dev mlir-22-tools llvm-22-tools
              cmake ninja-build g++ libgtest-dev nlohmann-json3-dev)
missing=()
for pkg in "${DEB_PACKAGES[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$pkg")
  fi
done
apt_install() {
  local sudo=""
  if [[ $(id -u) -ne 0 ]]; then
    command -v sudo >/dev/null || { log "need root (or sudo) to install: $*"; exit 1; }
    sudo="sudo"
  fi
  log "installing Debian packages: $*"
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq "$@" >/dev/null
}
if ((${#missing[@]})); then
  apt_install "${missing[@]}"
else
  log "Debian packages present"
fi

MLIR_DIR=/usr/lib/llvm-22/lib/cmake/mlir
[[ -f $MLIR_DIR/MLIRConfig.cmake ]] || { log "MLIR 22 CMake config not found in $MLIR_DIR"; exit 1; }
[[ -x /usr/lib/llvm-22/bin/FileCheck && -x /usr/lib/llvm-22/bin/lit ]] ||
  { log "FileCheck or lit missing from /usr/lib/llvm-22/bin (package llvm-22-tools)"; exit 1; }

PYTHON=${PYTHON:-python3}
if ! "$PYTHON" -c 'import pytest, numpy, pybind11' 2>/dev/null; then
  log "installing Python packages: pytest numpy pybind11"
  if ! "$PYTHON" -m pip install -q pytest numpy pybind11; then
    # Debian's own python3 refuses pip installs (PEP 668): use its packages.
    log "pip refused; trying Debian's python3-pytest python3-numpy python3-pybind11"
    apt_install python3-pytest python3-numpy python3-pybind11 python3-dev
  fi
  "$PYTHON" -c 'import pytest, numpy, pybind11' ||
    { log "pytest/numpy/pybind11 still not importable by $PYTHON; set PYTHON= to another interpreter"; exit 1; }
else
  log "Python packages present"
fi

# With --tests: PyTorch, transformers and peft as well, for the Python tests
# of liger.ops, liger.transformers and liger.frontend on the CPU (PyPI's
# torch is the CUDA build, a few GB with its nvidia-* wheels; the tests that
# need it skip, and say so, where it cannot be installed).
if [[ ${1:-} == --tests ]]; then
  if ! "$PYTHON" -c 'import torch, transformers, peft' 2>/dev/null; then
    log "installing Python packages for the tests: $(grep -v '^#' "$ROOT/scripts/requirements-tests.txt" | xargs)"
    "$PYTHON" -m pip install -q -r "$ROOT/scripts/requirements-tests.txt" ||
      log "WARNING: torch/transformers/peft not installed; their tests will be skipped"
  else
    log "torch, transformers and peft present: $("$PYTHON" -c 'import torch, transformers, peft; print("torch %s, transformers %s, peft %s" % (torch.__version__, transformers.__version__, peft.__version__))') (the tests pin $(grep -v '^#' "$ROOT/scripts/requirements-tests.txt" | xargs))"
  fi
fi

CUDA_ROOT=${CUDA_HOME:-/usr/local/cuda}
if [[ -x $CUDA_ROOT/bin/ptxas ]]; then
  log "ptxas: $CUDA_ROOT/bin/ptxas ($("$CUDA_ROOT/bin/ptxas" --version | tail -1))"
elif command -v ptxas >/dev/null; then
  log "ptxas: $(command -v ptxas) (from PATH)"
else
  log "WARNING: ptxas not found in \$CUDA_HOME/bin ($CUDA_ROOT/bin) or on PATH."
  log "  Building cubins needs the CUDA toolkit (12.8 or newer for sm_90a/PTX 8.6)."
  log "  Install it under /usr/local/cuda, or export CUDA_HOME=<toolkit root>."
  log "  Parsing, passes and tests that need no cubin work without it."
fi
log "done"
