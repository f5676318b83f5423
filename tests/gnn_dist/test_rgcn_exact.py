"""R-GCN on typed graphs: P ranks train exactly what one rank trains (per-epoch losses and
accuracies, final weights and every learnable node row), with dropout on, learnable rows for
the featureless types, Adam, and the exact schedules (sync, overlap); the halo bytes of a layer
are each needed source row once.

The typed graph: a labelled, featured target type (``paper``, 6 features), a featureless type
(``author``: learnable rows), a featured type of another width (``venue``, 3 features: the first
layer's rows are zero-padded to 6), relations with their reverses, a relation from a type into
itself, duplicate edges, self-loops and isolated nodes; parts by ``random`` (P = 2, 3) and METIS.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

from mp_utils import run_ranks

EPOCHS = 4


def make_graph(seed: int = 0):
    from partitioners.hetero import HeteroGraph

    rng = np.random.default_rng(seed)
    n = {"paper": 60, "author": 45, "venue": 7}

    def edges(s: str, d: str, m: int, active: int | None = None):
        hi = (active or n[s], active or n[d])
        return rng.integers(0, hi[0], m), rng.integers(0, hi[1], m)

    cites = edges("paper", "paper", 150, active=55)   # papers 55-59 cite and are cited by nobody
    cites = (np.concatenate([cites[0], [3, 3, 4]]), np.concatenate([cites[1], [3, 3, 9]]))   # self-loops, a duplicate
    rels = {("author", "writes", "paper"): edges("author", "paper", 120),
            ("paper", "cites", "paper"): cites,
            ("paper", "in", "venue"): edges("paper", "venue", 50)}
    train = rng.random(n["paper"]) < 0.5
    val = ~train & (rng.random(n["paper"]) < 0.5)
    return HeteroGraph(
        n, rels,
        features={"paper": rng.standard_normal((n["paper"], 6)).astype(np.float32),
                  "venue": rng.standard_normal((n["venue"], 3)).astype(np.float32)},
        labels={"paper": rng.integers(0, 3, n["paper"])},
        masks={"paper": {"train": train, "val": val, "test": ~train & ~val}},
    ).add_reverse()


def write(num_parts: int, method: str, out) -> str:
    from partitioners.api import partition_graph

    partition_graph(make_graph(), num_parts, method, out, seed=1)
    return str(out)


def train_rgcn(rank: int, world_size: int, path: str, pipeline: str, num_bases: int | None) -> dict:
    """Train an R-GCN on this rank's part; returns the history, the shared weights and this
    rank's learnable rows by (type, id)."""
    import gnn_dist
    from gnn_dist.hetero import is_per_rank
    from gnn_dist.models import build_model

    part = gnn_dist.load_partition(path)
    torch.manual_seed(0)
    model = build_model("rgcn", in_dim=part.feature_dim, hidden_dim=8, out_dim=part.num_classes, num_layers=2,
                        dropout=0.5, seed=7, typed=part.typed, embedding_dim=5, num_bases=num_bases)
    trainer = gnn_dist.Trainer(model, part, lr=0.05, weight_decay=5e-4, log_every=0, pipeline=pipeline)
    hist = trainer.fit(EPOCHS)
    emb = model.embedding
    rows = {(int(t), int(i)): emb.weights[k][j].detach().clone()
            for k, t in enumerate(emb.types) for j, i in enumerate(emb.ids(k).tolist())}
    return {"loss": [h["train_loss"] for h in hist],
            "acc": [(h["train_acc"], h["val_acc"], h["test_acc"]) for h in hist],
            "halo_bytes": [h["halo_bytes"] for h in hist],
            "params": {k: v.detach().clone() for k, v in model.named_parameters() if not is_per_rank(v)},
            "rows": rows, "num_halo": part.num_halo, "num_send": int(part.exchanger.send_index.numel())}


def merged_rows(results: list[dict]) -> dict:
    out: dict = {}
    for r in results:
        assert not set(out) & set(r["rows"]), "a learnable row held by two ranks"
        out.update(r["rows"])
    return out


@pytest.fixture(scope="module")
def reference(tmp_path_factory) -> dict:
    path = write(1, "random", tmp_path_factory.mktemp("p1") / "parts")
    return {(pipe, nb): run_ranks(train_rgcn, 1, path, pipe, nb, timeout=240)[0]
            for pipe, nb in (("sync", None), ("sync", 2))}


def assert_same(results: list[dict], ref: dict) -> None:
    got = results[0]
    np.testing.assert_allclose(got["loss"], ref["loss"], rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(np.array(got["acc"], dtype=float), np.array(ref["acc"], dtype=float), atol=1e-9)
    for key, value in ref["params"].items():
        torch.testing.assert_close(got["params"][key], value, rtol=1e-5, atol=1e-5, msg=lambda m, k=key: f"{k}: {m}")
    for other in results[1:]:
        for key, value in got["params"].items():
            assert torch.equal(other["params"][key], value), f"the ranks' weights differ: {key}"
    rows, ref_rows = merged_rows(results), ref["rows"]
    assert rows.keys() == ref_rows.keys(), "every learnable row is held by exactly one rank"
    for key, value in ref_rows.items():
        torch.testing.assert_close(rows[key], value, rtol=1e-5, atol=1e-5, msg=lambda m, k=key: f"row {k}: {m}")


@pytest.mark.parametrize("num_parts,method,pipeline,num_bases", [
    (2, "random", "sync", None), (3, "random", "overlap", None), (2, "metis", "overlap", 2), (4, "random", "sync", 2)])
def test_p_ranks_equal_one_rank(reference, tmp_path, num_parts, method, pipeline, num_bases):
    path = write(num_parts, method, tmp_path / "parts")
    results = run_ranks(train_rgcn, num_parts, path, pipeline, num_bases, timeout=240)
    assert_same(results, reference[("sync", num_bases)])
    # the bytes a rank sends in a step: per layer each row a peer needs once (whatever its relations),
    # and each halo row's gradient back to its owner; layer 0's rows are the widest input (paper's 6
    # features >= venue's 3, the learnable rows' 5), layer 1's the hidden width 8
    for r in results:
        assert r["num_halo"] > 0
        assert r["halo_bytes"] == [(r["num_send"] + r["num_halo"]) * (6 + 8) * 4] * EPOCHS


def test_learning_rows_move(reference):
    """Guards the comparison: the learnable rows are trained (not left at their initial values)."""
    from gnn_dist.hetero.embedding import initial_rows

    author = make_graph().node_types.index("author")
    ids = torch.arange(45)
    start = initial_rows(ids, 45, 5, 7, author)
    got = torch.stack([reference[("sync", None)]["rows"][(author, i)] for i in range(45)])
    assert (got - start).abs().max() > 1e-3
