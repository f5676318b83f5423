#!/usr/bin/env bash
# Set up, then run the whole test suite (multi-rank tests spawn gloo processes on CPU).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh test
python3 -m pytest -q "$@"
