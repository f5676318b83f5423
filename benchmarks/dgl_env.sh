#!/usr/bin/env bash
# Create the DGL 2.1 side environment that benchmarks/kernels.py (and train.py) use as a peer.
# DGL's PyPI builds stop at torch 2.2, so it lives in its own venv: several GB (PyPI's torch
# 2.2.1 is a CUDA build), created once, never a test dependency. Only PyPI is used.
#   bash benchmarks/dgl_env.sh            # -> benchmarks/.dgl-venv (DGL_VENV overrides)
# The venv is built in place and marked complete by a READY file written last, so a broken or
# interrupted build is detected and rebuilt (a venv cannot be moved after creation).
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
venv="${DGL_VENV:-$here/.dgl-venv}"
python="${PYTHON:-python3}"
if [[ -f "$venv/READY" ]] && "$venv/bin/python" -c "import dgl, torch" 2>/dev/null; then
    echo "DGL environment already present: $venv"
    exit 0
fi
rm -rf "$venv"
"$python" -m venv "$venv"
"$venv/bin/pip" install --quiet torch==2.2.1 dgl==2.1.0 'numpy<2' 'setuptools<70' torchdata==0.7.1 \
    pandas pyyaml pydantic psutil scipy
"$venv/bin/python" -c "import dgl, torch; print('dgl', dgl.__version__, 'torch', torch.__version__)"
date -u +%FT%TZ > "$venv/READY"
echo "DGL environment ready: $venv"
