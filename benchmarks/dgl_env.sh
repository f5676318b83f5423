#!/usr/bin/env bash
# Create the DGL 2.1 side environment that benchmarks/kernels.py uses as its peer, if present.
# Several GB, created once; never a test dependency. Needs network access to PyPI and the DGL wheels.
#   bash benchmarks/dgl_env.sh            # -> benchmarks/.dgl-venv
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
venv="${DGL_VENV:-$here/.dgl-venv}"
python="${PYTHON:-python3}"
if [[ -x "$venv/bin/python" ]] && "$venv/bin/python" -c "import dgl, torch" 2>/dev/null; then
    echo "DGL environment already present: $venv"
    exit 0
fi
tmp="$venv.tmp.$$"
trap 'rm -rf "$tmp"' EXIT
"$python" -m venv "$tmp"
"$tmp/bin/pip" install --upgrade pip
"$tmp/bin/pip" install torch==2.2.1 --index-url https://download.pytorch.org/whl/cpu
"$tmp/bin/pip" install dgl==2.1.0 -f https://data.dgl.ai/wheels/torch-2.2/repo.html \
    'numpy<2' 'setuptools<70' torchdata==0.7.1 pandas pyyaml pydantic psutil
"$tmp/bin/python" -c "import dgl, torch; print('dgl', dgl.__version__, 'torch', torch.__version__)"
rm -rf "$venv"
mv "$tmp" "$venv"      # a venv hard-codes its path in scripts: fix the shebangs after the move
sed -i "s#$tmp#$venv#g" "$venv"/bin/* 2>/dev/null || true
trap - EXIT
echo "DGL environment ready: $venv"
