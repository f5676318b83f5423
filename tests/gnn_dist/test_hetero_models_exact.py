"""HGT and per-relation GraphSAGE (``hetero-sage``) on typed graphs: P ranks train exactly what one
rank trains (per-epoch losses and accuracies, final weights and every learnable node row), with
dropout on, learnable rows for the featureless type, Adam, and the exact schedules (sync;
overlap, where HGT's layer protocol splits its sources and hetero-sage runs exchange-then-compute).

The typed graph is R-GCN's (:func:`test_rgcn_exact.make_graph`): a featured target type, a
featureless type, a featured type of another width, reverse relations, a relation from a type
into itself, duplicate edges, self-loops and isolated nodes. Each launch trains every setting
of its rank count in turn (one process start per P)."""

from __future__ import annotations

import pytest
import torch

from mp_utils import run_ranks
from test_rgcn_exact import EPOCHS, assert_same, write

SETTINGS = {1: [("hgt", "sync"), ("hetero-sage", "sync")],
            2: [("hgt", "sync"), ("hetero-sage", "overlap")],
            3: [("hgt", "overlap"), ("hetero-sage", "sync")]}


def train(rank: int, world_size: int, path: str) -> dict:
    """Each of ``SETTINGS[world_size]`` trained from the same start: the history, the shared
    weights and this rank's learnable rows by (type, id)."""
    import gnn_dist
    from gnn_dist.hetero import is_per_rank
    from gnn_dist.models import build_model

    part = gnn_dist.load_partition(path)
    out = {}
    for name, pipeline in SETTINGS[world_size]:
        torch.manual_seed(0)
        options = {"heads": 2} if name == "hgt" else {}
        model = build_model(name, in_dim=part.feature_dim, hidden_dim=8, out_dim=part.num_classes, num_layers=2,
                            dropout=0.5, seed=7, typed=part.typed, embedding_dim=5, **options)
        trainer = gnn_dist.Trainer(model, part, lr=0.05, weight_decay=5e-4, log_every=0, pipeline=pipeline)
        hist = trainer.fit(EPOCHS)
        emb = model.embedding
        rows = {(int(t), int(i)): emb.weights[k][j].detach().clone()
                for k, t in enumerate(emb.types) for j, i in enumerate(emb.ids(k).tolist())}
        out[name, pipeline] = {
            "loss": [h["train_loss"] for h in hist],
            "acc": [(h["train_acc"], h["val_acc"], h["test_acc"]) for h in hist],
            "params": {k: v.detach().clone() for k, v in model.named_parameters() if not is_per_rank(v)},
            "rows": rows, "num_halo": part.num_halo}
    return out


@pytest.fixture(scope="module")
def reference(tmp_path_factory) -> dict:
    path = write(1, "random", tmp_path_factory.mktemp("p1") / "parts")
    got = run_ranks(train, 1, path, timeout=240)[0]
    return {name: r for (name, _), r in got.items()}


@pytest.mark.parametrize("num_parts", [2, 3])
def test_p_ranks_equal_one_rank(reference, tmp_path, num_parts):
    path = write(num_parts, "random", tmp_path / "parts")
    results = run_ranks(train, num_parts, path, timeout=240)
    for name, pipeline in SETTINGS[num_parts]:
        per_rank = [r[name, pipeline] for r in results]
        assert all(r["num_halo"] > 0 for r in per_rank)
        assert_same(per_rank, reference[name])


def test_the_models_learn(reference):
    """Guards the comparison: the loss falls and the weights of every layer move off their start."""
    for name, ref in reference.items():
        assert ref["loss"][-1] < ref["loss"][0], name
        assert all(torch.isfinite(v).all() for v in ref["params"].values()), name
