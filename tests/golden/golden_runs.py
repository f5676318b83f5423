"""Golden training runs: per-epoch losses and final weights of every model x schedule x
feature-storage configuration, at P=1 and P=2, under a fixed seed.

Recorded once (``python tests/golden/record.py``) into ``goldens.json``; ``test_golden.py``
reruns them and requires the same bits: a refactor of the runtime must not change what it
computes. Each value is stored exactly (``float.hex``), weights as one sha256 over the
state dict's tensors (in name order, their raw bytes). Runs use one torch thread, so the
dense kernels' reduction order does not depend on the machine's core count.
"""

from __future__ import annotations

import hashlib
from typing import Any

import numpy as np
import torch

MODELS = ("gcn", "sage", "gat", "gin")
SCHEDULES = ("sync", "overlap", "stale")
EPOCHS = 3
NUM_NODES = 120

FEATURES: dict[str, dict[str, Any]] = {
    "device": {},
    "host": {"feature_storage": "host", "feature_cache_budget": "50%"},
    "mmap-chunked": {"feature_storage": "mmap", "feature_cache_budget": "50%", "first_layer_chunk_rows": 40},
}
"""Feature-storage configurations (host/mmap with half the rows cached and a chunked first layer)."""

EXTRAS: dict[str, tuple[str, dict[str, Any]]] = {
    "gcn-sync-precompute": ("gcn", {"pipeline": "sync", "precompute_first_layer": True}),
    "sage-sync-precompute": ("sage", {"pipeline": "sync", "precompute_first_layer": True}),
    "gin-overlap-precompute": ("gin", {"pipeline": "overlap", "precompute_first_layer": True}),
    "gcn-overlap-precompute-chunked": ("gcn", {"pipeline": "overlap", "precompute_first_layer": True,
                                               "feature_storage": "mmap", "feature_cache_budget": "50%",
                                               "first_layer_chunk_rows": 40}),
    "gcn-sync-sampled": ("gcn", {"pipeline": "sync", "boundary_sample_rate": 0.5}),
    "sage-overlap-sampled": ("sage", {"pipeline": "overlap", "boundary_sample_rate": 0.5}),
    "gcn-stale-sampled": ("gcn", {"pipeline": "stale", "boundary_sample_rate": 0.5}),
    "gcn-stale-smoothed": ("gcn", {"pipeline": "stale", "stale_smoothing": 0.5}),
    "gcn-sync-bf16": ("gcn", {"pipeline": "sync", "halo_dtype": "bf16"}),
    "gat-stale-fp16": ("gat", {"pipeline": "stale", "halo_dtype": "fp16"}),
    "gcn-sync-no-static-halo": ("gcn", {"pipeline": "sync", "static_halo": False}),
    "gat-overlap-no-static-halo-host": ("gat", {"pipeline": "overlap", "static_halo": False,
                                                "feature_storage": "host", "feature_cache_budget": "50%"}),
}
"""Schedule options: precomputed first layer, boundary sampling, smoothing, wire dtypes."""


def configs() -> dict[str, tuple[str, dict[str, Any]]]:
    """Every golden configuration: name -> (model, Trainer keyword arguments)."""
    out: dict[str, tuple[str, dict[str, Any]]] = {}
    for model in MODELS:
        for schedule in SCHEDULES:
            for storage, options in FEATURES.items():
                out[f"{model}-{schedule}-{storage}"] = (model, {"pipeline": schedule, **options})
    out.update(EXTRAS)
    return out


def make_graph(seed: int = 0):
    """120 nodes (10 isolated), self-loops and a duplicate edge, 6 features, 3 classes."""
    from partitioners import Graph

    rng = np.random.default_rng(seed)
    n, active = NUM_NODES, NUM_NODES - 10
    src = np.concatenate([rng.integers(0, active, 700), [3, 3, 5, 5]])
    dst = np.concatenate([rng.integers(0, active, 700), [3, 3, 7, 7]])
    x = rng.standard_normal((n, 6)).astype(np.float32)
    y = rng.integers(0, 3, n)
    train = np.zeros(n, bool)
    train[rng.choice(n, 50, replace=False)] = True
    val = ~train & (rng.random(n) < 0.5)
    return Graph.from_edges(src, dst, n, features=x, labels=y, train_mask=train, val_mask=val,
                            test_mask=~train & ~val, num_classes=3)


def write(num_parts: int, out: str) -> str:
    """The golden graph split at random into ``num_parts`` parts, written to ``out``."""
    from partitioners.format.writer import write_partition

    graph = make_graph()
    assignment = np.random.default_rng(10 + num_parts).integers(0, num_parts, graph.num_nodes).astype(np.int32)
    write_partition(graph, assignment, num_parts, out, method="test", method_params={}, seed=0)
    return out


def weights_digest(model: torch.nn.Module) -> str:
    h = hashlib.sha256()
    for name, tensor in sorted(model.state_dict().items()):
        h.update(name.encode())
        h.update(tensor.detach().cpu().contiguous().numpy().tobytes())
    return h.hexdigest()


def run_config(part: Any, model_name: str, options: dict[str, Any]) -> dict[str, Any]:
    import gnn_dist
    from gnn_dist.models import build_model

    torch.manual_seed(0)
    extra = {"heads": 2, "attn_dropout": 0.3} if model_name == "gat" else {}
    model = build_model(model_name, in_dim=part.feature_dim, hidden_dim=8, out_dim=part.num_classes,
                        num_layers=3, dropout=0.5, seed=7, **extra)
    trainer = gnn_dist.Trainer(model, part, lr=0.05, weight_decay=5e-4, log_every=0, eval_every=0, **options)
    history = trainer.fit(EPOCHS)
    return {"loss": [float(h["train_loss"]).hex() for h in history], "weights": weights_digest(model)}


def run_all(rank: int, world_size: int, path: str, names: list[str] | None = None) -> dict[str, Any]:
    """Every configuration (or ``names``) on this rank's part of ``path``; the same on every rank."""
    import gnn_dist

    torch.set_num_threads(1)
    part = gnn_dist.load_partition(path)
    table = configs()
    return {name: run_config(part, *table[name]) for name in (names or list(table))}
