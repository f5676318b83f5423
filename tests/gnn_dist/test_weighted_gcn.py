"""Weighted GCN end to end: the partition folder stores each row's global weighted degree, and P
ranks train exactly what one rank trains on a weighted graph (sync and overlap, dropout on)."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from partitioners import Graph
from partitioners.format.reader import load_part
from partitioners.format.writer import write_partition
from mp_utils import run_ranks

EPOCHS = 4


def weighted_graph(seed: int = 0) -> Graph:
    rng = np.random.default_rng(seed)
    n, active = 120, 110
    src = np.concatenate([rng.integers(0, active, 700), [3, 5, 9]])
    dst = np.concatenate([rng.integers(0, active, 700), [3, 7, 9]])  # self-loops 3 and 9, an edge 5 -> 7 twice
    src, dst = np.concatenate([src, [5]]), np.concatenate([dst, [7]])
    w = rng.uniform(0.1, 3.0, src.size).astype(np.float32)
    y = rng.integers(0, 3, n)
    train = np.zeros(n, bool)
    train[rng.choice(n, 40, replace=False)] = True
    return Graph.from_edges(src, dst, n, features=rng.standard_normal((n, 6)).astype(np.float32), labels=y,
                            train_mask=train, val_mask=~train, test_mask=np.zeros(n, bool), num_classes=3,
                            edge_weight=w)


def write(graph: Graph, num_parts: int, out) -> str:
    a = np.random.default_rng(num_parts).integers(0, num_parts, graph.num_nodes).astype(np.int32)
    write_partition(graph, a, num_parts, out, method="test", method_params={}, seed=0)
    return str(out)


def train(rank: int, world_size: int, path: str) -> dict:
    import gnn_dist
    from gnn_dist.models import build_model

    part = gnn_dist.load_partition(path)
    out = {}
    for pipeline in ("sync", "overlap"):
        torch.manual_seed(0)
        model = build_model("gcn", in_dim=part.feature_dim, hidden_dim=8, out_dim=part.num_classes, num_layers=2,
                            dropout=0.5, seed=7)
        trainer = gnn_dist.Trainer(model, part, lr=0.05, log_every=0, pipeline=pipeline, static_halo=False)
        out[pipeline] = [h["train_loss"] for h in trainer.fit(EPOCHS)]
    return out


@pytest.fixture(scope="module")
def graph() -> Graph:
    return weighted_graph()


def test_parts_store_the_global_weighted_degrees(graph, tmp_path):
    from gnn_dist.nn import Block

    whole = Block.from_graph(torch.from_numpy(graph.indptr), torch.from_numpy(graph.indices),
                             edge_weight=torch.from_numpy(graph.edge_weight))
    path = write(graph, 3, tmp_path / "parts")
    for p in range(3):
        part = load_part(path, p, verify=True)  # verify: the inner rows' sums against their CSR rows
        assert part.weighted_degree is not None and part.weighted_degree.shape == (part.num_local, 2)
        ref = whole.weighted_degree[torch.from_numpy(np.array(part.original_ids))].numpy()
        np.testing.assert_allclose(part.weighted_degree, ref, rtol=1e-6)
    assert whole.weighted_degree[3, 1] > 0 and whole.weighted_degree[4, 1] == 0, "a self-loop's weight, and none"


def test_p_ranks_equal_one_rank_on_a_weighted_graph(graph, tmp_path):
    one = train(0, 1, write(graph, 1, tmp_path / "p1"))
    unweighted = Graph.from_edges(*graph.edges(), graph.num_nodes, features=graph.x, labels=graph.y,
                                  train_mask=graph.train_mask, val_mask=graph.val_mask, test_mask=graph.test_mask,
                                  num_classes=3)
    assert train(0, 1, write(unweighted, 1, tmp_path / "u1"))["sync"] != one["sync"], "the weights change training"
    for res in run_ranks(train, 3, write(graph, 3, tmp_path / "p3"), timeout=240):
        for pipeline in ("sync", "overlap"):
            np.testing.assert_allclose(res[pipeline], one[pipeline], rtol=1e-5, atol=1e-6, err_msg=pipeline)
