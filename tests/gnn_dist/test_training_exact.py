"""P ranks train exactly what one rank trains: per-epoch losses, accuracies and final weights.

Random graphs with isolated nodes, self-loops and duplicate edges; the P-part assignments
include an empty part and a part without training nodes. Every built-in model, with dropout
off and on (the masks are keyed by original node ids, so they do not depend on P).
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

from partitioners import Graph
from partitioners.format.writer import write_partition
from mp_utils import run_ranks

MODELS = ("gcn", "sage", "gat", "gin")
EPOCHS = 4
NUM_NODES = 120


def make_graph(seed: int = 0) -> Graph:
    rng = np.random.default_rng(seed)
    n = NUM_NODES
    active = n - 10  # the last 10 nodes are isolated
    src = rng.integers(0, active, 700)
    dst = rng.integers(0, active, 700)
    src = np.concatenate([src, [3, 3, 5]])  # self-loops and a duplicate
    dst = np.concatenate([dst, [3, 3, 7]])
    src = np.concatenate([src, [5]])
    dst = np.concatenate([dst, [7]])
    x = rng.standard_normal((n, 6)).astype(np.float32)
    y = rng.integers(0, 3, n)
    train = np.zeros(n, bool)
    train[rng.choice(n, 40, replace=False)] = True
    val = ~train & (rng.random(n) < 0.5)
    test = ~train & ~val
    return Graph.from_edges(src, dst, n, features=x, labels=y, train_mask=train, val_mask=val,
                            test_mask=test, num_classes=3)


def assignment(graph: Graph, num_parts: int) -> np.ndarray:
    """A random assignment. P=2: two mixed parts. P>=3: part 0 holds only non-training nodes;
    P=4: the last part is empty too. The training nodes are always split over >= 2 parts."""
    rng = np.random.default_rng(num_parts)
    if num_parts < 3:
        return rng.integers(0, num_parts, graph.num_nodes).astype(np.int32)
    last = num_parts - 1 if num_parts == 4 else num_parts  # exclusive bound of the mixed parts
    a = rng.integers(1, last, graph.num_nodes).astype(np.int32)
    a[np.flatnonzero(~graph.train_mask)[:15]] = 0
    return a


def write(graph: Graph, num_parts: int, out) -> str:
    write_partition(graph, assignment(graph, num_parts), num_parts, out, method="test",
                    method_params={}, seed=0)
    return str(out)


def train_all(rank: int, world_size: int, path: str, dropout: float) -> dict:
    """Train every model on this rank's part; rank 0 returns the histories and weights."""
    import gnn_dist
    from gnn_dist.models import build_model

    part = gnn_dist.load_partition(path)
    out = {}
    for name in MODELS:
        torch.manual_seed(0)
        kwargs = {"heads": 2} if name == "gat" else {}
        model = build_model(name, in_dim=part.feature_dim, hidden_dim=8, out_dim=part.num_classes,
                            num_layers=3 if name == "sage" else 2, dropout=dropout, seed=7, **kwargs)
        trainer = gnn_dist.Trainer(model, part, lr=0.05, weight_decay=5e-4, log_every=0)
        hist = trainer.fit(EPOCHS)
        out[name] = {"loss": [h["train_loss"] for h in hist],
                     "acc": [(h["train_acc"], h["val_acc"], h["test_acc"]) for h in hist],
                     "params": {k: v.detach().clone() for k, v in model.state_dict().items()}}
    return out


@pytest.fixture(scope="module")
def graph() -> Graph:
    return make_graph()


@pytest.fixture(scope="module")
def reference(graph, tmp_path_factory) -> dict:
    out = {}
    for dropout in (0.0, 0.5):
        path = write(graph, 1, tmp_path_factory.mktemp("p1") / "parts")
        out[dropout] = train_all(0, 1, path, dropout)
    return out


def assert_same(got: dict, ref: dict) -> None:
    for name in MODELS:
        np.testing.assert_allclose(got[name]["loss"], ref[name]["loss"], rtol=1e-5, atol=1e-6, err_msg=name)
        np.testing.assert_allclose(np.array(got[name]["acc"], dtype=float),
                                   np.array(ref[name]["acc"], dtype=float), atol=1e-9, err_msg=name)
        for key, value in ref[name]["params"].items():
            torch.testing.assert_close(got[name]["params"][key], value, rtol=1e-5, atol=1e-5,
                                       msg=lambda m, k=key, n=name: f"{n}.{k}: {m}")


@pytest.mark.parametrize("num_parts", [2, 3, 4])
def test_p_ranks_equal_one_rank(graph, reference, tmp_path, num_parts):
    path = write(graph, num_parts, tmp_path / "parts")
    for dropout in (0.0, 0.5):
        results = run_ranks(train_all, num_parts, path, dropout, timeout=240)
        ranks_agree = results[0]
        for other in results[1:]:  # every rank holds the same weights
            for name in MODELS:
                for k, v in ranks_agree[name]["params"].items():
                    assert torch.equal(other[name]["params"][k], v), f"rank weights differ: {name}.{k}"
        assert_same(results[0], reference[dropout])


def test_the_test_graph_has_the_hard_cases(graph):
    for p in (2, 3, 4):
        a = assignment(graph, p)
        assert (np.bincount(a[graph.train_mask], minlength=p) > 0).sum() >= 2, "training split over ranks"
    a = assignment(graph, 4)
    assert np.bincount(a, minlength=4)[3] == 0, "an empty part"
    assert not graph.train_mask[a == 0].any() and (a == 0).any(), "a part without training nodes"
    assert (graph.in_degree() == 0).any() and (graph.out_degree() == 0).any(), "isolated nodes"
    src, dst = graph.edges()
    assert (src == dst).any(), "self-loops"


def test_dropout_changes_training(reference):
    """Guards the dropout-on comparison against a no-op dropout."""
    assert reference[0.0]["gcn"]["loss"][1:] != reference[0.5]["gcn"]["loss"][1:]
