#!/usr/bin/env bash
# One-time set-up on a fresh machine (idempotent): torch, then gnn-dist.
#   bash scripts/setup.sh        the runtime only (what the main job needs)
#   bash scripts/setup.sh test   also the test extras (pytest, PyG, triton, matplotlib, tensorboard)
# torch is pinned to the CPU build on this project's machines only when no torch is installed,
# so a GPU user's own CUDA build is kept (the package itself requires torch>=2.4).
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
export PIP_DISABLE_PIP_VERSION_CHECK=1 PIP_ROOT_USER_ACTION=ignore
if ! "$PY" -c "import torch" >/dev/null 2>&1; then
  "$PY" -m pip install --quiet "torch==2.13.0"
fi
case "${1:-}" in
  "") "$PY" -m pip install --quiet -e . ;;
  test) "$PY" -m pip install --quiet -e ".[test]" ;;
  *) echo "scripts/setup.sh: unknown extra '$1' (none: the runtime; test: also the test extras)" >&2; exit 2 ;;
esac
