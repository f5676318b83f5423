#!/usr/bin/env bash
# Set up, then run the whole test suite (multi-rank tests spawn gloo processes on CPU).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh test
python3 -m pytest -q -n 2 "$@"   # 2 workers (pytest-xdist); -n 0 runs it in one process
