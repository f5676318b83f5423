"""The accuracy benchmarks against PyG (``benchmarks/task_reference.py``, ``regression.py``,
``link_prediction.py``, ``multilabel.py``) without their training runs: the targets and the
report on synthetic records, and the reference metrics against their definitions computed the
slow way."""

from __future__ import annotations

import math
import sys
from pathlib import Path

import numpy as np
import pytest
import torch

BENCH = Path(__file__).resolve().parents[2] / "benchmarks"
if str(BENCH) not in sys.path:
    sys.path.insert(0, str(BENCH))

import link_prediction as lp  # noqa: E402
import multilabel as ml  # noqa: E402
import regression as rg  # noqa: E402
import task_reference as tr  # noqa: E402


def _runs(values: dict[int, dict[str, float]]) -> tr.Runs:
    return {seed: {f"test_{k}": v for k, v in row.items()} for seed, row in values.items()}


def test_targets_bound_the_mean_over_seeds_not_each_seed():
    ours = _runs({0: {"mrr": 0.30, "auc": 0.80}, 1: {"mrr": 0.20, "auc": 0.80}})
    ref = _runs({0: {"mrr": 0.24, "auc": 0.80}, 1: {"mrr": 0.25, "auc": 0.81}})
    targets = [tr.Target("mrr", "diff", 0.01), tr.Target("auc", "diff", 0.01)]
    got = tr.compare(ours, ref, ["mrr", "auc"], targets)
    assert got["mean"]["gnn_dist"]["mrr"] == pytest.approx(0.25) and got["mean"]["pyg"]["auc"] == pytest.approx(0.805)
    mrr, auc = got["targets"]["mrr diff"], got["targets"]["auc diff"]
    assert mrr["value"] == pytest.approx(0.005) and mrr["met"]                    # seeds +0.06 and -0.05
    assert mrr["per_seed"][0] == pytest.approx(0.06) and mrr["per_seed"][1] == pytest.approx(-0.05)
    assert auc["value"] == pytest.approx(-0.005) and auc["met"] and got["met"]
    ref[1]["test_auc"] = 0.83                                                  # mean 0.815: -0.015
    got = tr.compare(ours, ref, ["mrr", "auc"], targets)
    assert not got["targets"]["auc diff"]["met"] and got["targets"]["mrr diff"]["met"] and not got["met"]
    with pytest.raises(ValueError, match="other seeds"):
        tr.compare(ours, {0: ref[0]}, ["mrr"], targets[:1])


def test_a_ratio_target_is_a_relative_error_and_kinds_are_checked():
    t = tr.Target("mse", "ratio", 0.02)
    assert t.met(t.value(1.019, 1.0)) and t.met(t.value(0.981, 1.0)) and not t.met(t.value(1.03, 1.0))
    assert t.label == "mse ratio" and t.fmt(0.99844) == "0.9984"
    assert tr.Target("auc", "diff", 0.01).fmt(0.002) == "+0.0020"
    with pytest.raises(ValueError, match="not 'ratio' or 'diff'"):
        tr.Target("mse", "relative", 0.02)
    assert rg.TARGETS == (tr.Target("mse", "ratio", 0.02),)
    assert {t.metric for t in lp.TARGETS} == {"mrr", "hits@10", "auc"} and all(t.bound == 0.01 for t in lp.TARGETS)
    assert {t.metric for t in ml.TARGETS} == {"acc", "rocauc"} and all(t.kind == "diff" for t in ml.TARGETS)


def test_the_report_has_a_row_per_seed_the_mean_and_says_missed():
    ours = _runs({0: {"acc": 0.80, "rocauc": 0.90}, 2: {"acc": 0.70, "rocauc": 0.92}})
    ref = _runs({0: {"acc": 0.78, "rocauc": 0.90}, 2: {"acc": 0.70, "rocauc": 0.90}})
    same = {"test_acc": 0.5, "test_rocauc": 0.6}
    result = {"parity": {"gnn_dist": same, "pyg": same, "relative": 0.0},
              "gnn_dist": ours, "pyg": ref, "wall_s": {"gnn_dist": 1.0, "pyg": 2.0},
              "comparison": tr.compare(ours, ref, ml.METRICS, ml.TARGETS)}
    text = tr.comparison_markdown(result, ml.METRICS, ml.TARGETS, parts=2)
    assert "| seed | test acc (gnn-dist / PyG) | test rocauc | acc diff | rocauc diff |" in text
    assert "| 0 | 0.8000 / 0.7800 | 0.9000 / 0.9000 | +0.0200 | +0.0000 |" in text
    assert "| mean | 0.7500 / 0.7400 | 0.9100 / 0.9000 | +0.0100 | +0.0100 |" in text
    assert "Mean test acc difference gnn-dist - PyG: +0.0100** (target |difference| <= 0.01: met)" in text
    assert "relative difference 0.00e+00" in text and "(P = 2)" in text
    ours[2]["test_rocauc"] = 0.95
    result["comparison"] = tr.compare(ours, ref, ml.METRICS, ml.TARGETS)
    assert "rocauc difference gnn-dist - PyG: +0.0250** (target |difference| <= 0.01: NOT met)" in \
        tr.comparison_markdown(result, ml.METRICS, ml.TARGETS, parts=2)
    assert tr.parity_difference({"test_acc": 0.5, "test_rocauc": 0.6}, {"test_acc": 0.5, "test_rocauc": 0.3},
                                ml.TARGETS) == pytest.approx(1.0)


def _auc_by_pairs(scores: np.ndarray, labels: np.ndarray) -> float:
    """P(a positive outscores a negative), ties one half, over every pair."""
    pos, neg = scores[labels == 1], scores[labels == 0]
    return float(((pos[:, None] > neg[None, :]) + 0.5 * (pos[:, None] == neg[None, :])).mean())


def test_roc_auc_is_the_pairwise_probability_per_column():
    rng = np.random.default_rng(0)
    s = rng.integers(0, 5, (60, 3)).astype(float)      # many ties
    y = (rng.random((60, 3)) < 0.3).astype(np.uint8)
    want = np.mean([_auc_by_pairs(s[:, c], y[:, c]) for c in range(3)])
    assert tr.roc_auc_columns(s, y) == pytest.approx(want, rel=1e-12)
    y[:, 1] = 1                                         # one class only: the column is left out
    assert tr.roc_auc_columns(s, y) == pytest.approx(np.mean([_auc_by_pairs(s[:, c], y[:, c]) for c in (0, 2)]))
    assert math.isnan(tr.roc_auc_columns(s[:, 1], y[:, 1]))


def test_link_ranking_metrics_follow_their_definitions():
    rng = np.random.default_rng(1)
    pos = torch.from_numpy(rng.integers(0, 6, 40).astype(np.float32))
    neg = torch.from_numpy(rng.integers(0, 6, (40, 7)).astype(np.float32))
    got = lp.ranking_metrics(pos, neg, k=3)
    ranks = [1 + sum(n > p for n in row) + 0.5 * sum(n == p for n in row) for p, row in zip(pos.tolist(), neg.tolist())]
    assert got["mrr"] == pytest.approx(np.mean([1 / r for r in ranks]), rel=1e-12)
    assert got["hits@3"] == pytest.approx(np.mean([r <= 3 for r in ranks]))
    labels = np.r_[np.ones(40), np.zeros(280)]
    assert got["auc"] == pytest.approx(_auc_by_pairs(np.r_[pos.numpy(), neg.numpy().ravel()], labels), rel=1e-12)


def test_link_loss_and_decoders_of_the_reference():
    torch.manual_seed(0)
    h = torch.randn(6, 4)
    pos, neg = torch.tensor([[0, 1, 2], [3, 4, 5]]), torch.tensor([5, 0, 1])
    dot = lp.reference_decoder("dot", 4)
    s_pos, s_neg = (h[[0, 1, 2]] * h[[3, 4, 5]]).sum(1), (h[[0, 1, 2]] * h[[5, 0, 1]]).sum(1)
    want = -(torch.log(torch.sigmoid(s_pos)).sum() + torch.log(1 - torch.sigmoid(s_neg)).sum()) / 6
    assert lp.pair_loss(dot, h, pos, neg).item() == pytest.approx(want.item(), rel=1e-5)
    mlp = lp.reference_decoder("mlp", 4)
    assert sorted(mlp.state_dict()) == ["lin1.bias", "lin1.weight", "lin2.bias", "lin2.weight"]
    a, b = h[:2], h[2:4]
    assert torch.allclose(mlp(a, b), mlp.lin2(torch.relu(mlp.lin1(a * b))).squeeze(-1))
    assert mlp(h[:2, None].expand(-1, 3, -1), h[:3][None].expand(2, -1, -1)).shape == (2, 3)


def test_multilabel_and_regression_metrics():
    z = np.array([[1.0, -1.0, 2.0], [-0.5, 0.5, -2.0], [0.3, -0.1, 0.0]])
    y = np.array([[1, 0, 0], [1, 1, 0], [0, 0, 1]], np.uint8)
    # predicted positive: (0,0) tp, (0,2) fp, (1,1) tp, (2,0) fp; missed (1,0), (2,2): tp 2, fp 2, fn 2
    got = ml.multilabel_metrics(z, y)
    assert got["acc"] == pytest.approx(4 / (4 + 2 + 2))
    assert got["rocauc"] == pytest.approx(np.mean([_auc_by_pairs(z[:, c], y[:, c]) for c in range(3)]))
    pred, t = torch.tensor([[1.0, 2.0], [3.0, 5.0]], dtype=torch.float64), torch.tensor([[1.0, 1.0], [2.0, 5.0]],
                                                                                         dtype=torch.float64)
    got = rg.regression_metrics(pred, t)
    assert got["mse"] == pytest.approx(0.5) and got["mae"] == pytest.approx(0.5)
    assert got["r2"] == pytest.approx(np.mean([1 - 1 / 0.5, 1 - 1 / 8]))


def test_the_reference_pairs_and_negatives_are_gnn_dists(tmp_path):
    """The cached one-part folder with an edge split: the reference reads the same pairs and draws
    the same negatives (as rows) as gnn-dist's ``LinkEdges``; a second call reuses the folder."""
    import common

    import gnn_dist
    from gnn_dist.link import LinkEdges

    path = common.cached_metis_partitions("sbm-tiny", (1,), 0, tmp_path, edge_split=(0.8, 0.1, 0.1))[1]
    assert "sbm-tiny-split0.8,0.1,0.1-metis-seed0-p1-" in path
    stamp = (Path(path) / "partition.json").stat().st_mtime_ns
    assert common.cached_metis_partitions("sbm-tiny", (1,), 0, tmp_path, edge_split=(0.8, 0.1, 0.1))[1] == path
    assert (Path(path) / "partition.json").stat().st_mtime_ns == stamp
    pairs = lp.ReferencePairs(tr.reference_graph(path))
    edges = LinkEdges.from_partition(gnn_dist.load_partition(path))
    for split in ("train", "test"):
        assert torch.equal(pairs.pairs[split], edges.pairs[split])
        assert torch.equal(pairs.negatives(split, 3, 7, 4), edges.negatives(split, 3, 7, 4))
    assert pairs.pairs["test"].shape[1] == edges.global_counts["test"] > 0
