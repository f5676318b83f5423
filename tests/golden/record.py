"""Re-record ``goldens.json`` (only on purpose: the goldens pin what the runtime computes).

    python tests/golden/record.py
"""

from __future__ import annotations

import json
import platform
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE.parents[1]), str(HERE.parent), str(HERE)]

import torch  # noqa: E402

import golden_runs  # noqa: E402
from mp_utils import run_ranks  # noqa: E402


def main() -> None:
    out = {"torch": torch.__version__, "machine": platform.machine(), "runs": {}}
    with tempfile.TemporaryDirectory() as tmp:
        for p in (1, 2):
            path = golden_runs.write(p, f"{tmp}/p{p}")
            results = run_ranks(golden_runs.run_all, p, path, timeout=900)
            assert all(r == results[0] for r in results), "ranks disagree"
            out["runs"][f"P{p}"] = results[0]
    (HERE / "goldens.json").write_text(json.dumps(out, indent=1, sort_keys=True) + "\n")
    print(f"recorded {sum(len(v) for v in out['runs'].values())} runs")


if __name__ == "__main__":
    main()
