"""ROC-AUC of multi-label outputs (ogbn-proteins' metric): the rank formula against pairwise
counting, and P ranks scoring what one rank scores."""

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
                        dropout=0.0, seed=1)
    trainer = gnn_dist.Trainer(model, part, lr=0.05, log_every=0, eval_every=0)
    trainer.fit(3)
    return trainer.evaluate()


def test_p_ranks_score_what_one_rank_scores(tmp_path):
    base = make_graph(160, seed=3)
    graph = dataclasses.replace(base, y=(base.x[:, :4] > 0.3).astype(np.uint8), num_classes=4)
    paths = {}
    for p in (1, 3):
        paths[p] = str(tmp_path / f"p{p}")
        a = np.random.default_rng(p).integers(0, p, graph.num_nodes).astype(np.int32)
        write_partition(graph, a, p, paths[p], method="test", method_params={}, seed=0)
    one = _evaluate(0, 1, paths[1])
    assert 0.5 < one["train_rocauc"] <= 1.0 and {"val_rocauc", "test_rocauc"} <= set(one)
    for res in run_ranks(_evaluate, 3, paths[3], timeout=180):
        for key, value in one.items():
            assert res[key] == pytest.approx(value, abs=1e-6), key


def test_the_progress_line_shows_the_roc_auc():
    from gnn_dist.metrics import progress_line

    rec = {"epoch": 3, "train_loss": 0.5, "train_acc": 0.7, "val_acc": 0.6, "test_acc": 0.65, "epoch_time_s": 0.01,
           "compute_time_s": 0.01, "comm_time_s": 0.0, "exposed_comm_s": 0.0, "comm_bytes": 0, "staleness": 0}
    assert "roc-auc" not in progress_line(rec, feature_store=False)
    line = progress_line({**rec, "train_rocauc": 0.9, "val_rocauc": 0.8125, "test_rocauc": 0.75}, feature_store=False)
    assert "val 0.6000  test 0.6500  (roc-auc val 0.8125  test 0.7500)" in line
