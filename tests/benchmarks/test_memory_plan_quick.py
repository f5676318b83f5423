"""``benchmarks/memory_plan.py`` (issue 15's planner benchmark) without its training runs: the
report of synthetic cases, the target counted per rank."""

from __future__ import annotations

import sys
from pathlib import Path

BENCH = Path(__file__).resolve().parents[2] / "benchmarks"
if str(BENCH) not in sys.path:
    sys.path.insert(0, str(BENCH))

import memory_plan as mp  # noqa: E402


def _case(model: str, ratios: list[float], flags: list[str] | None = None) -> dict:
    measured = [1000 * 2**20] * len(ratios)
    row = {"dataset": "sbm-small", "parts": len(ratios), "model": model, "measured": measured,
           "predicted": [int(m * r) for m, r in zip(measured, ratios)], "baseline": [500 * 2**20] * len(ratios),
           "ratios": ratios, "largest_ratio": ratios[0], "worst_ratio": max(ratios, key=lambda r: abs(r - 1))}
    return row if flags is None else {**row, "flags": flags}


def test_the_report_counts_a_case_only_when_every_rank_is_within_15_percent():
    env = {"date": "now", "cpu_model": "cpu", "cpu_count": 2, "load_average_1_5_15": [0, 0, 0],
           "packages": {"torch": "x"}, "git_revision": "abc"}
    rows = [_case("gcn", [0.95, 1.02]), _case("gat", [0.99, 0.80])]
    text = mp.render(mp.BenchConfig(), env, rows, "", 60.0, [_case("gcn", [0.9], ["--precision", "bf16"])])
    assert "Target: every rank within 15%: 1 of 2 cases." in text
    assert "| sbm-small | 2 | gat |" in text and "0.80x" in text and "**no**" in text
    assert "--precision bf16" in text and "Outside the target" in text
    link = mp.render(mp.BenchConfig(), env, rows, "", 60.0, None, [_case("gcn", [1.05, 0.97], ["--hidden", "32"]),
                                                                   _case("gcn", [1.2], ["--decoder", "mlp"])])
    assert "## Link prediction" in link and "Every rank within 15%: 1 of 2 cases." in link
    assert "| sbm-small | 2 | gcn | --hidden 32 |" in link
