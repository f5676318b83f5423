"""Node regression benchmark (issue 20): gnn-dist on P ranks against a single-device PyG
reference of the same model, in one run.

Dataset: the catalog's ``sbm-regression`` (``sbm-tiny``'s graph and features, 4 float targets
planted over the graph: a random linear map of the 2-hop mean features plus noise), METIS
partitions at P = 1 and P (default 2), cached under ``benchmarks/.cache``.

Model: a 2-layer GCN (hidden 64, ReLU, dropout 0.5 after the hidden layer), Adam (lr 0.01,
weight decay 5e-4), MSE loss on the training mask, full batch, 200 epochs, the last epoch's
weights. For each seed both sides start from the same weights (gnn-dist's GCN built with the
seed, copied into PyG's ``GCNConv`` stack: the layers name their parameters alike):

- **gnn-dist**: ``Trainer(..., loss="mse")`` on P gloo ranks (exact: what one device trains,
  its dropout masks keyed by original node id);
- **PyG**: ``torch_geometric.nn.GCNConv`` layers on one device (``cached=True``, sparse
  ``adj_t`` of the one-part folder, i.e. the same graph), ``F.dropout``, ``F.mse_loss``.

The two differ only in the dropout masks (a hash of the node id in gnn-dist, torch's RNG in
PyG), so their errors are compared over ``--seeds`` seeds (mean). A parity check first runs both
with dropout off for 20 epochs: the test MSEs must agree to ~1e-5 (the same computation).

Target: the mean test MSE of gnn-dist within 2% relative error of PyG's
(``|mse_ours / mse_pyg - 1| <= 0.02``); the MAE and R^2 are shown beside it.

Usage (from the repository root)::

    python benchmarks/regression.py                # P = 2, 3 seeds, 200 epochs (~1 min on 2 cores)
    python benchmarks/regression.py --quick        # 1 seed, 30 epochs (seconds)
    python benchmarks/regression.py --parts 3 --seeds 5

Results: ``benchmarks/results/regression_[hardware]_[date][_quick].{md,json}``. What the task
benchmarks share (the launch, the weight copy, the report) is in ``task_reference.py``.
"""

from __future__ import annotations

import logging
import sys
from typing import Any

import task_reference as tr

METRICS = ("mse", "mae", "r2")
TARGETS = (tr.Target("mse", "ratio", 0.02),)


def regression_metrics(pred: Any, y: Any) -> dict[str, float]:
    """MSE, MAE and R^2 (the mean over the target columns) of float64 ``pred`` against ``y``."""
    e, t = pred - y, y
    return {"mse": float((e * e).mean()), "mae": float(e.abs().mean()),
            "r2": float((1 - (e * e).sum(0) / ((t - t.mean(0)) ** 2).sum(0)).mean())}


def pyg_job(rank: int, world_size: int, cfg: dict[str, Any], path: str, seeds: list[int], epochs: int,
            dropout: float) -> tr.Runs:
    """PyG on one device, from the same initial weights as gnn-dist's of each seed."""
    import torch.nn.functional as F

    g = tr.reference_graph(path)
    train = g.masks["train"]
    out = {}
    for seed in seeds:
        model = tr.reference_model(cfg, g.x.shape[1], g.y.shape[1], seed, dropout)
        pred = tr.train_reference(model, g, cfg, seed, epochs,
                                  lambda h, epoch: F.mse_loss(h[train], g.y[train])).double()
        out[seed] = {f"{s}_{k}": v for s, m in g.masks.items()
                     for k, v in regression_metrics(pred[m], g.y[m].double()).items()}
    return out


def main(argv: list[str] | None = None) -> int:
    a = tr.arguments(__doc__.split("\n\n")[0], "sbm-regression", epochs=200).parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    return tr.run_node_task(a, theme="regression", title="Node regression", loss="MSE loss", pyg_job=pyg_job,
                            metrics=METRICS, targets=TARGETS, trainer={"loss": "mse"})


if __name__ == "__main__":
    sys.exit(main())
