#!/usr/bin/env bash
# Set up, then run the whole test suite (multi-rank tests spawn gloo processes on CPU).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh test
# 2 workers (pytest-xdist); worksteal: each takes a contiguous half (a module's fixtures are built
# once, not on both) and an idle worker takes over the other's queued tests; tests/conftest.py starts
# the long ones first. -n 0 runs it in one process.
python3 -m pytest -q -n 2 --dist worksteal "$@"
