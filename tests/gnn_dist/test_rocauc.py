"""ROC-AUC of multi-label outputs (ogbn-proteins' metric) and of scored pairs: the rank formula
and the distributed pair count against pairwise counting, and P = 2, 3, 4 ranks training a
multi-label model with dropout and scoring exactly what one rank does."""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import pytest
import torch

from partitioners.format.writer import write_partition
from gnn_dist.scoring import roc_auc
from mp_utils import run_ranks
from train_helpers import make_graph


def _pairwise(scores: np.ndarray, labels: np.ndarray) -> float:
    """The definition: over every (positive, negative) pair, 1 when the positive scores higher, 1/2 on a tie."""
    aucs = []
    for c in range(scores.shape[1]):
        pos, neg = scores[labels[:, c] == 1, c], scores[labels[:, c] == 0, c]
        if pos.size and neg.size:
            d = pos[:, None] - neg[None, :]
            aucs.append(((d > 0).sum() + 0.5 * (d == 0).sum()) / d.size)
    return float(np.mean(aucs)) if aucs else math.nan


def test_roc_auc_is_the_pairwise_definition():
    rng = np.random.default_rng(0)
    scores = np.round(rng.standard_normal((80, 5)), 1)  # rounded: many ties
    labels = (rng.random((80, 5)) < 0.3).astype(np.uint8)
    labels[:, 4] = 1  # a column without negatives is left out of the mean
    assert roc_auc(scores, labels) == pytest.approx(_pairwise(scores, labels), abs=1e-12)
    assert roc_auc(scores[:, 0], labels[:, 0]) == pytest.approx(_pairwise(scores[:, :1], labels[:, :1]))
    assert roc_auc(np.arange(4.0), np.array([0, 0, 1, 1])) == 1.0
    assert math.isnan(roc_auc(scores[:, 4:], labels[:, 4:]))
    with pytest.raises(ValueError, match="same shape"):
        roc_auc(scores, labels[:, :3])


def _evaluate(rank: int, world_size: int, path: str) -> dict:
    import gnn_dist
    from gnn_dist.models import build_model

    part = gnn_dist.load_partition(path)
    torch.manual_seed(0)
    model = build_model("gcn", in_dim=part.feature_dim, hidden_dim=16, out_dim=part.num_classes, num_layers=2,
                        dropout=0.5, seed=1)
    trainer = gnn_dist.Trainer(model, part, lr=0.05, log_every=0, eval_every=0)
    losses = [h["train_loss"] for h in trainer.fit(3)]
    return {**trainer.evaluate(), "losses": losses}


@pytest.fixture(scope="module")
def multilabel_graph():
    base = make_graph(160, seed=3)
    return dataclasses.replace(base, y=(base.x[:, :4] > 0.3).astype(np.uint8), num_classes=4)


def _write_multilabel(graph, p: int, path) -> str:
    a = np.random.default_rng(p).integers(0, p, graph.num_nodes).astype(np.int32)
    write_partition(graph, a, p, path, method="test", method_params={}, seed=0)
    return str(path)


@pytest.fixture(scope="module")
def multilabel_one(multilabel_graph, tmp_path_factory) -> dict:
    return _evaluate(0, 1, _write_multilabel(multilabel_graph, 1, tmp_path_factory.mktemp("ml") / "p1"))


@pytest.mark.parametrize("num_parts", [2, 3, 4])
def test_p_ranks_train_and_score_what_one_rank_does(multilabel_graph, multilabel_one, tmp_path, num_parts):
    one = multilabel_one   # trained with dropout 0.5: the masks are keyed by original ids
    assert 0.5 < one["train_rocauc"] <= 1.0 and {"val_rocauc", "test_rocauc"} <= set(one)
    for res in run_ranks(_evaluate, num_parts, _write_multilabel(multilabel_graph, num_parts, tmp_path / "p"),
                         timeout=180):
        np.testing.assert_allclose(res.pop("losses"), one["losses"], rtol=1e-5, atol=1e-6)
        for key, value in one.items():
            if key != "losses":
                assert res[key] == pytest.approx(value, abs=1e-5), key


def test_the_progress_line_shows_the_roc_auc():
    from gnn_dist.metrics import progress_line

    rec = {"epoch": 3, "train_loss": 0.5, "train_acc": 0.7, "val_acc": 0.6, "test_acc": 0.65, "epoch_time_s": 0.01,
           "compute_time_s": 0.01, "comm_time_s": 0.0, "exposed_comm_s": 0.0, "comm_bytes": 0, "staleness": 0}
    assert "roc-auc" not in progress_line(rec, feature_store=False)
    line = progress_line({**rec, "train_rocauc": 0.9, "val_rocauc": 0.8125, "test_rocauc": 0.75}, feature_store=False)
    assert "val 0.6000  test 0.6500  (roc-auc val 0.8125  test 0.7500)" in line


def _pair_scores(seed: int) -> tuple[np.ndarray, np.ndarray]:
    """Positive and negative scores rounded to a coarse grid, so many pairs tie."""
    rng = np.random.default_rng(seed)
    return np.round(rng.normal(0.5, 1, 37), 1), np.round(rng.normal(0, 1, (37, 6)), 1)


def _pair_auc_of_my_share(rank: int, world_size: int, seed: int) -> float:
    from gnn_dist.scoring import pair_auc

    pos, neg = _pair_scores(seed)
    mine = np.array_split(np.arange(len(pos)), world_size)[rank]   # uneven shares, one empty at P = 3 below
    if world_size == 3 and rank == 1:
        mine = mine[:0]
    return pair_auc(torch.from_numpy(pos[mine]).float(), torch.from_numpy(neg[mine]).float())


def test_pair_auc_counts_every_positive_against_every_negative_across_ranks():
    pos, neg = _pair_scores(0)
    scores, labels = np.r_[pos, neg.reshape(-1)], np.r_[np.ones(pos.size), np.zeros(neg.size)]
    d = pos.astype(np.float32)[:, None].astype(np.float64) - neg.astype(np.float32).reshape(-1)[None, :]
    want = ((d > 0).sum() + 0.5 * (d == 0).sum()) / d.size
    assert (d == 0).sum() > 10                                            # ties are counted halves
    assert _pair_auc_of_my_share(0, 1, 0) == pytest.approx(want, abs=1e-12)
    assert _pair_auc_of_my_share(0, 1, 0) == pytest.approx(roc_auc(scores.astype(np.float32), labels), abs=1e-12)
    # every positive against every rank's negatives, whatever the ranks hold (rank 1 holds none here)
    kept = np.ones(pos.size, bool)
    kept[np.array_split(np.arange(pos.size), 3)[1]] = False
    d3 = pos.astype(np.float32)[kept][:, None].astype(np.float64) - neg.astype(np.float32)[kept].reshape(-1)[None, :]
    want3 = ((d3 > 0).sum() + 0.5 * (d3 == 0).sum()) / d3.size
    assert run_ranks(_pair_auc_of_my_share, 3, 0, timeout=120) == [pytest.approx(want3, abs=1e-12)] * 3
