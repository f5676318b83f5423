"""A custom GNN built from a PyG layer, trained exactly on P ranks with ``gnn_dist.Trainer``.

Partition once, then train on as many ranks as the folder has parts::

    gnn-dist partition --dataset sbm-tiny --parts 2 --out parts/tiny-2
    torchrun --nproc-per-node 2 examples/custom_pyg_model.py --data parts/tiny-2

    gnn-dist partition --dataset sbm-tiny --parts 1 --out parts/tiny-1
    python examples/custom_pyg_model.py --data parts/tiny-1      # one process, no torchrun

Both runs train the same model to the same weights (up to float rounding): see
``docs/custom_models.md`` for why, and ``tests/gnn_dist/test_examples.py`` for the proof.
"""

from __future__ import annotations

import argparse
import logging
from collections.abc import Sequence
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn
from torch_geometric.nn import GraphConv

import gnn_dist
from gnn_dist.models import PartLike
from gnn_dist.nn import hash_dropout

log = logging.getLogger("custom_pyg_model")


class PyGGraphConvNet(nn.Module):
    """``num_layers`` PyG ``GraphConv`` layers (mean aggregation) with ReLU and dropout between.

    Runs on one rank's part: ``forward(part, x)`` maps the inner rows ``x`` ``[I, in_dim]`` to
    logits ``[I, out_dim]``. ``part`` is anything with ``.block`` and ``.exchange`` (a
    ``gnn_dist.LocalPartition``, or ``gnn_dist.models.FullGraph`` for a whole graph).
    """

    def __init__(self, in_dim: int, hidden_dim: int, out_dim: int, num_layers: int = 2,
                 dropout: float = 0.5, seed: int = 0) -> None:
        super().__init__()
        # Optional: with these attributes the Trainer checks the widths against the partition
        # and a checkpoint records them (resuming into another shape is refused).
        self.in_dim, self.hidden_dim, self.out_dim, self.num_layers = in_dim, hidden_dim, out_dim, num_layers
        dims = [in_dim] + [hidden_dim] * (num_layers - 1) + [out_dim]
        # aggr="mean" averages over a destination's in-edges; every in-edge of an inner node is
        # in its rank's block, so the mean is exact on any partition.
        self.convs = nn.ModuleList(GraphConv(dims[i], dims[i + 1], aggr="mean") for i in range(num_layers))
        self.dropout = dropout
        self.seed = seed
        # The dropout masks change every training step. A buffer (not a Python int) so it is
        # saved in checkpoints and broadcast from rank 0 with the weights.
        self.register_buffer("step", torch.zeros((), dtype=torch.long))

    def forward(self, part: PartLike, x: torch.Tensor) -> torch.Tensor:
        block = part.block
        # The input graph's ids of the inner rows: the same node has the same id on every rank
        # of every partitioning, so masks keyed by it do not depend on P.
        ids = block.src_original_ids[:block.num_dst]
        h = x
        for i, conv in enumerate(self.convs):
            # [I, F] -> [S, F]: the inner rows, then the halo rows fetched from their owners.
            # A collective with a differentiable backward: every rank calls it, every layer.
            h_all = part.exchange(h)
            # PyG on the local bipartite block: sources are the S local rows, destinations the
            # first D = I of them (a destination's own row is source row i too).
            h = conv((h_all, h_all[:block.num_dst]), block.edge_index, size=(block.num_src, block.num_dst))
            if i < len(self.convs) - 1:
                h = F.relu(h)
                # Not torch.nn.Dropout: its mask depends on the rank's RNG stream and row order.
                h = hash_dropout(h, self.dropout, seed=self.seed, step=self.step, layer=i, row_ids=ids,
                                 training=self.training)
        if self.training:
            with torch.no_grad():
                self.step += 1
        return h


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(description="Train a custom PyG-layer GNN on a partition folder.")
    p.add_argument("--data", required=True, help="partition folder with as many parts as ranks")
    p.add_argument("--hidden", type=int, default=32)
    p.add_argument("--layers", type=int, default=2)
    p.add_argument("--dropout", type=float, default=0.5)
    p.add_argument("--lr", type=float, default=0.01)
    p.add_argument("--epochs", type=int, default=50)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--log-every", type=int, default=10)
    return p


def main(argv: Sequence[str] | None = None) -> list[dict[str, Any]]:
    """Train as ``argv`` says (under torchrun or as one process); returns the per-epoch metrics."""
    args = build_parser().parse_args(argv)
    # Without torchrun variables: world size 1, no process group. Under torchrun: a group that
    # is torn down on every exit path of the ``with``.
    with gnn_dist.init_distributed() as ctx:
        if ctx.is_main:
            logging.basicConfig(level=logging.INFO, format=f"[rank{ctx.rank}] %(message)s")
        part = gnn_dist.load_partition(args.data, device=ctx.device)  # this rank's part only
        torch.manual_seed(args.seed)  # the Trainer broadcasts rank 0's initial weights anyway
        model = PyGGraphConvNet(part.feature_dim, args.hidden, part.num_classes, args.layers,
                                dropout=args.dropout, seed=args.seed)
        # Loss = sum over this rank's training rows / global training count; gradients are
        # summed over ranks: P ranks take the step one device would.
        trainer = gnn_dist.Trainer(model, part, lr=args.lr, log_every=args.log_every)
        history = trainer.fit(args.epochs)
        log.info("final: %s", trainer.evaluate())
    return history


if __name__ == "__main__":
    main()
