"""Compare the per-epoch training losses of two ``--metrics`` files (``gnn_dist.train``).

``python benchmarks/compare_metrics.py A.jsonl B.jsonl [--rtol 1e-5] [--atol 1e-6]`` exits 0 when
the losses of the epochs both files hold agree (and they share at least one epoch), else 1 with
the first epochs that differ. ``benchmarks/gpu_check.sh`` uses it to show that the GPU runs with
the feature cache and with the Triton kernels train the same as the plain run.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from pathlib import Path


def losses(path: str | Path) -> dict[int, float]:
    """``{epoch: train_loss}`` of a metrics file (one JSON object per line; the config record
    that opens it is skipped)."""
    out = {}
    for n, line in enumerate(Path(path).read_text().splitlines(), 1):
        if line.strip():
            try:
                rec = json.loads(line)
                if isinstance(rec, dict) and "config" in rec and "epoch" not in rec:
                    continue
                out[int(rec["epoch"])] = float(rec["train_loss"])
            except (ValueError, KeyError, TypeError) as exc:
                raise SystemExit(f"{path}:{n}: not a metrics line with epoch and train_loss ({exc})")
    return out


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("a")
    p.add_argument("b")
    p.add_argument("--rtol", type=float, default=1e-5)
    p.add_argument("--atol", type=float, default=1e-6)
    args = p.parse_args(argv)
    a, b = losses(args.a), losses(args.b)
    common = sorted(set(a) & set(b))
    if not common:
        print(f"no common epochs: {args.a} has {len(a)}, {args.b} has {len(b)}")
        return 1
    bad = [e for e in common if not math.isclose(a[e], b[e], rel_tol=args.rtol, abs_tol=args.atol)]
    worst = max(abs(a[e] - b[e]) / max(abs(a[e]), 1e-30) for e in common)
    if bad:
        print(f"losses differ in {len(bad)} of {len(common)} epochs (rtol {args.rtol}), first: "
              + ", ".join(f"epoch {e}: {a[e]!r} vs {b[e]!r}" for e in bad[:3]))
        return 1
    print(f"losses agree over {len(common)} epochs (max relative difference {worst:.2e}, rtol {args.rtol})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
