"""``benchmarks/recompute.py`` (issue 15's benchmark) without its training runs: the summary of
the ranks' records, the targets and the report, on synthetic records."""

from __future__ import annotations

import sys
from pathlib import Path

BENCH = Path(__file__).resolve().parents[2] / "benchmarks"
if str(BENCH) not in sys.path:
    sys.path.insert(0, str(BENCH))

import recompute as rc  # noqa: E402


def _rank(step_peaks: dict[str, list[int]], losses: dict[str, list[float]]) -> dict:
    history = {name: [{"loss": loss, "epoch_time_s": 1.0 + 0.1 * k, "step_peak": peak, "data_peak": 2 * peak}
                      for k, (loss, peak) in enumerate(zip(losses[name], step_peaks[name]))]
               for name in rc.SETTINGS}
    return {"history": history, "nodes": 10, "halo": 3}


def test_the_busiest_rank_medians_after_the_warm_up_and_the_targets():
    peaks = {name: [999, 100 // (i + 1), 100 // (i + 1), 100 // (i + 1)] for i, name in enumerate(rc.SETTINGS)}
    losses = {name: [1.0, 0.9, 0.8, 0.7] for name in rc.SETTINGS}
    losses["bf16"] = [1.0, 0.91, 0.8, 0.7]
    low = {name: [p // 2 for p in v] for name, v in peaks.items()}
    rows = rc.summarize([_rank(peaks, losses), _rank(low, losses)], warmup=1)
    assert rows["fp32"]["step_peak"] == 100 and rows["fp32"]["step_peak_ratio"] == 1.0   # the warm-up's 999 left out
    assert rows["fp32 recompute all"]["step_peak"] == 33 and rows["fp32 recompute all"]["step_peak_ratio"] == 0.33
    assert rows["fp32 recompute layers"]["losses_identical"] and not rows["bf16"]["losses_identical"]
    targets = rc.check_targets(rows)
    assert targets == {"step_peak<=0.5x": True, "losses bit-identical": True, "epoch<=1.4x": True}
    rows["fp32 recompute all"]["epoch_time_s_ratio"] = 1.5
    assert not rc.check_targets(rows)["epoch<=1.4x"]


def test_the_report_names_every_setting_and_the_targets():
    peaks = {name: [100, 100] for name in rc.SETTINGS}
    losses = {name: [1.0, 0.9] for name in rc.SETTINGS}
    rows = rc.summarize([_rank(peaks, losses)], warmup=0)
    env = {"date": "d", "cpu_model": "cpu", "cpu_count": 2, "load_average_1_5_15": [0, 0, 0],
           "packages": {"torch": "t"}, "git_revision": "g"}
    results = {"memory": {"rows": rows, "targets": rc.check_targets(rows), "sizes": []},
               "accuracy": {f"{m} {p}": 0.5 for m in rc.ACCURACY_MODELS for p in ("fp32", "bf16")}}
    text = rc.render(rc.BenchConfig(), env, results, "", 60.0)
    assert all(f"| {name} |" in text for name in rc.SETTINGS)
    assert "step_peak<=0.5x MISSED" in text and "| gat | 0.5000 | 0.5000 | +0.0000 |" in text
