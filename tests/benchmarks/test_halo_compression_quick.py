"""``benchmarks/halo_compression.py`` (issue 16's benchmark) without its training runs: the
packing-cost figures and the target checks, on tiny synthetic inputs."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parents[2] / "benchmarks"
if str(BENCH) not in sys.path:
    sys.path.insert(0, str(BENCH))

import halo_compression as hc  # noqa: E402


def test_packing_cost_reports_the_link_time_a_value_saves():
    out = hc.packing_cost(hidden=16, rows=200, gbps=10.0, rounds=2)
    assert set(out) >= {"fp32 copy", "int8", "int4", "int2", "int1"}
    for bits in (8, 4, 2, 1):
        v = out[f"int{bits}"]
        saved = (4 - bits / 8 - 6 / 16) * 8 / 10.0   # bytes a value saves, at 10 Gbit/s, in ns
        assert v["link_ns_saved_per_value"] == pytest.approx(saved)
        assert v["cost_over_saving"] == pytest.approx(v["ns_per_value"] / saved)
        assert v["ns_per_value"] > 0


def _row(bytes_, acc, epoch, exposed=0.0):
    return {"halo_bytes": bytes_, "test_acc": acc, "epoch_time_s": epoch, "exposed_comm_s": exposed, "widths": None}


def test_targets_follow_the_issue():
    rows = {"sync fp32": _row(1000, 0.90, 1.0, 0.5), "sync int8": _row(262, 0.897, 0.45, 0.1),
            "sync int4": _row(150, 0.88, 0.4), "sync adaptive:3": _row(100, 0.893, 0.4),
            "stale fp32": _row(1000, 0.90, 0.6), "stale int4": _row(137, 0.899, 0.3)}
    t = hc.check_targets(rows)
    assert t["sync int8"]["bytes_ok"] and t["sync int8"]["acc_ok"]            # 0.262x, -0.3 points
    assert not t["sync int4"]["bytes_ok"] and not t["sync int4"]["acc_ok"]    # 0.15x, -2 points
    assert t["sync adaptive:3"]["bytes_ok"] is None and t["sync adaptive:3"]["acc_ok"]
    assert t["stale int4"]["bytes_ratio"] == pytest.approx(0.137)
    assert t["epoch: sync int8 / sync fp32"]["ok"] and t["epoch: stale int4 / sync fp32"]["ok"]
    assert t["exposed: sync int8 / sync fp32"]["ratio"] == pytest.approx(0.2)
