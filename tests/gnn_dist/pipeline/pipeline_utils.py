"""Shared helpers of the pipeline tests: small partitioned graphs and training runs."""

from __future__ import annotations

from typing import Any

import numpy as np
import torch



def small_graph(seed: int = 0, num_nodes: int = 150, num_edges: int = 900):
    """A random graph with features, 3 classes and masks (isolated nodes and a self-loop)."""
    from partitioners import Graph

    rng = np.random.default_rng(seed)
    active = num_nodes - 5
    src = np.concatenate([rng.integers(0, active, num_edges), [3]])
    dst = np.concatenate([rng.integers(0, active, num_edges), [3]])
    x = rng.standard_normal((num_nodes, 6)).astype(np.float32)
    y = rng.integers(0, 3, num_nodes)
    train = np.zeros(num_nodes, bool)
    train[rng.choice(num_nodes, 60, replace=False)] = True
    val = ~train & (rng.random(num_nodes) < 0.5)
    return Graph.from_edges(src, dst, num_nodes, features=x, labels=y, train_mask=train, val_mask=val,
                            test_mask=~train & ~val, num_classes=3)


def write_parts(graph, num_parts: int, out, seed: int = 0) -> str:
    """``graph`` split at random into ``num_parts`` parts, written as a partition folder."""
    from partitioners.format.writer import write_partition

    assignment = np.random.default_rng(seed + num_parts).integers(0, num_parts, graph.num_nodes).astype(np.int32)
    write_partition(graph, assignment, num_parts, out, method="test", method_params={}, seed=0)
    return str(out)


class _SlowConv(torch.nn.Module):
    """A GCNConv that also sleeps ``delay_s`` per forward: compute of a known, load-independent
    duration (sleeping releases the GIL, as a kernel would), for the simulated-link tests."""

    def __init__(self, in_channels: int, out_channels: int, delay_s: float) -> None:
        from gnn_dist.nn import GCNConv

        super().__init__()
        self.conv = GCNConv(in_channels, out_channels)
        self.delay_s = delay_s

    def forward(self, block: Any, x_src: torch.Tensor) -> torch.Tensor:
        import time

        time.sleep(self.delay_s)
        return self.conv(block, x_src)


def slow_gcn(in_dim: int, hidden: int, out_dim: int, delay_s: float) -> Any:
    from gnn_dist.models import GCN

    class SlowGCN(GCN):
        def init_conv(self, in_channels: int, out_channels: int, *, last: bool, **kwargs: Any) -> Any:
            return _SlowConv(in_channels, out_channels, delay_s)

    return SlowGCN(in_dim, hidden, out_dim, 2, dropout=0.0, seed=7)


def train_model(path: str, name: str, epochs: int, *, dropout: float = 0.0, hidden: int = 8,
                layers: int = 2, lr: float = 0.05, slow_s: float | None = None, **config: Any) -> dict[str, Any]:
    """Train model ``name`` on this rank's part; the history, final eval and weights.
    ``slow_s``: a 2-layer GCN whose layers also sleep that long (``name`` is ignored)."""
    import gnn_dist
    from gnn_dist.models import build_model

    part = gnn_dist.load_partition(path)
    torch.manual_seed(0)
    kwargs = {"heads": 2} if name == "gat" else {}
    if slow_s is not None:
        model = slow_gcn(part.feature_dim, hidden, part.num_classes, slow_s)
    else:
        model = build_model(name, in_dim=part.feature_dim, hidden_dim=hidden, out_dim=part.num_classes,
                            num_layers=layers, dropout=dropout, seed=7, **kwargs)
    trainer = gnn_dist.Trainer(model, part, lr=lr, log_every=0, **config)
    hist = trainer.fit(epochs)
    return {"history": hist, "final": trainer.evaluate(),
            "params": {k: v.detach().clone() for k, v in model.state_dict().items()}}
