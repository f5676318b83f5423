"""Shared helpers of the layer-parallel tests: a small graph, its folders, a training run per rank."""

from __future__ import annotations

import numpy as np
import torch

from partitioners import Graph
from partitioners.format.writer import write_partition

EPOCHS = 3
LAYERS = 4


def make_graph(seed: int = 0, n: int = 120) -> Graph:
    """A random graph with isolated nodes, self-loops and a duplicate edge."""
    rng = np.random.default_rng(seed)
    active = n - 10
    src = np.concatenate([rng.integers(0, active, 700), [3, 3, 5]])
    dst = np.concatenate([rng.integers(0, active, 700), [3, 3, 7]])
    x = rng.standard_normal((n, 6)).astype(np.float32)
    y = rng.integers(0, 3, n)
    train = np.zeros(n, bool)
    train[rng.choice(n, 40, replace=False)] = True
    val = ~train & (rng.random(n) < 0.5)
    return Graph.from_edges(src, dst, n, features=x, labels=y, train_mask=train, val_mask=val,
                            test_mask=~train & ~val, num_classes=3)


def write(graph: Graph, num_parts: int, out) -> str:
    a = np.random.default_rng(num_parts).integers(0, num_parts, graph.num_nodes).astype(np.int32)
    write_partition(graph, a, num_parts, out, method="test", method_params={}, seed=0)
    return str(out)


def model_of(spec: str, part, dropout: float):
    """The model ``spec``: a name, or ``name/jk`` (jumping knowledge)."""
    from gnn_dist.models import build_model

    name, _, jk = spec.partition("/")
    torch.manual_seed(0)
    return build_model(name, in_dim=part.feature_dim, hidden_dim=8, out_dim=part.num_classes, num_layers=LAYERS,
                       dropout=dropout, seed=7, jk=jk or None)


def summary(trainer, hist) -> dict:
    return {"loss": [h["train_loss"] for h in hist],
            "acc": [(h["train_acc"], h["val_acc"], h["test_acc"]) for h in hist],
            "params": {k: v.detach().clone() for k, v in trainer.model.state_dict().items()},
            "records": hist}


def train_graph(rank: int, world_size: int, path: str, name: str, dropout: float, epochs: int = EPOCHS) -> dict:
    """The reference: the graph-parallel Trainer."""
    import gnn_dist

    part = gnn_dist.load_partition(path)
    trainer = gnn_dist.Trainer(model_of(name, part, dropout), part, lr=0.05, log_every=0)
    return summary(trainer, trainer.fit(epochs))


def train_layer(rank: int, world_size: int, path: str, name: str, dropout: float, mode: str, stages: int,
                chunks: int = 1, epochs: int = EPOCHS, fields: dict | None = None) -> dict:
    """A layer-parallel run of ``stages`` stages on this rank."""
    from gnn_dist.config import TrainerConfig
    from gnn_dist.layer_parallel import LayerParallelTrainer, load_stage

    part, layout, groups = load_stage(path, mode, stages, LAYERS)
    config = TrainerConfig.from_fields(lr=0.05, log_every=0, parallel=mode, stages=stages, chunks=chunks, **(fields or {}))
    trainer = LayerParallelTrainer(model_of(name, part, dropout), part, config, layout=layout, groups=groups,
                                   timeout=60)
    return summary(trainer, trainer.fit(epochs))


def assert_same(got: dict, ref: dict, what: str) -> None:
    np.testing.assert_allclose(got["loss"], ref["loss"], rtol=1e-5, atol=1e-6, err_msg=what)
    np.testing.assert_allclose(np.array(got["acc"], float), np.array(ref["acc"], float), atol=1e-9, err_msg=what)
    assert got["params"].keys() == ref["params"].keys()
    for k, v in ref["params"].items():
        torch.testing.assert_close(got["params"][k], v, rtol=1e-5, atol=1e-5, msg=lambda m, k=k: f"{what} {k}: {m}")
