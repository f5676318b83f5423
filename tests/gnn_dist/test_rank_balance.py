"""The end-of-fit line on ranks whose compute differs, and the part weights it names
(``gnn_dist/rank_balance.py``): parts sized to the measured speeds."""

from __future__ import annotations

import logging

import numpy as np
import pytest

from gnn_dist.rank_balance import IMBALANCE, balance_line, median_compute_s, speed_weights


def test_the_weights_give_every_rank_the_same_time():
    shares, compute = (0.5, 0.25, 0.25), (3.0, 0.5, 1.0)
    w = speed_weights(shares, compute)
    assert sum(w) == pytest.approx(1.0)
    speed = [s / c for s, c in zip(shares, compute)]
    new_times = [wi / v for wi, v in zip(w, speed)]       # each rank's time on its new part at its speed
    assert max(new_times) == pytest.approx(min(new_times))
    assert w[0] < shares[0] and w[1] > w[2]              # the slow rank gets less, the fastest most


def test_equal_speeds_keep_the_shares():
    assert speed_weights((0.5, 0.5), (1.0, 1.0)) == (0.5, 0.5)
    assert speed_weights((2 / 3, 1 / 3), (1.0, 0.5)) == pytest.approx((0.5, 0.5))


@pytest.mark.parametrize("shares, compute", [((0.5,), (1.0, 1.0)), ((0.5, 0.5), (1.0, 0.0)),
                                             ((0.0, 0.0), (1.0, 1.0))])
def test_impossible_inputs_are_refused(shares, compute):
    with pytest.raises(ValueError):
        speed_weights(shares, compute)


def test_the_line_names_the_slow_rank_and_the_weights():
    line = balance_line((0.5, 0.5), (1.32, 0.75))
    assert line is not None and "rank 0 is" in line and "--part-weights 0.362,0.638" in line, line
    assert "1320, 750 ms" in line


@pytest.mark.parametrize("compute", [(1.0, 1.0), (1.0 + IMBALANCE / 2, 1.0), (1.0,), (1.0, None), (1.0, 0.0)])
def test_no_line_when_balanced_or_unmeasured(compute):
    assert balance_line((1 / len(compute),) * len(compute), compute) is None


def test_no_line_when_ranks_are_not_parts():
    """Layer parallelism's stages: 4 ranks on a 2-part folder."""
    assert balance_line((0.5, 0.5), (1.0, 3.0, 1.0, 1.0)) is None


def test_the_median_leaves_the_first_epoch_out():
    recs = [{"compute_time_s": t} for t in (9.0, 1.0, 2.0, 3.0)]
    assert median_compute_s(recs) == 2.0
    assert median_compute_s(recs[:2]) == 5.0   # two epochs: both kept
    assert median_compute_s([]) is None


def test_fit_gathers_the_compute_and_stays_quiet_alone(tmp_path, caplog):
    """One rank: the gather runs, no balance line (nothing to balance)."""
    import gnn_dist
    from gnn_dist.models import build_model
    from partitioners.format.writer import write_partition
    from train_helpers import make_graph

    g = make_graph(60, seed=2)
    write_partition(g, np.zeros(g.num_nodes, dtype=np.int32), 1, tmp_path / "p1", method="test",
                    method_params={}, seed=0)
    part = gnn_dist.load_partition(tmp_path / "p1")
    model = build_model("gcn", in_dim=part.feature_dim, hidden_dim=8, out_dim=part.num_classes, num_layers=2)
    with caplog.at_level(logging.INFO, logger="gnn_dist"):
        gnn_dist.Trainer(model, part, lr=0.01, log_every=1, eval_every=0).fit(3)
    assert any("summary:" in r.getMessage() for r in caplog.records)
    assert not any("rank balance" in r.getMessage() for r in caplog.records)
