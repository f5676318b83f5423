"""Multi-label node classification benchmark (issue 20): gnn-dist on P ranks against a
single-device PyG reference of the same model, in one run.

Dataset: the catalog's ``sbm-multilabel`` (``sbm-tiny``'s graph and features, 8 binary labels
planted over the graph: a random linear map of the 2-hop mean features plus noise, each column
thresholded so that 10% to 40% of the nodes carry the label; 50/20/30% train/val/test nodes),
METIS partitions at P = 1 and P (default 2), cached under ``benchmarks/.cache``.

Model: a 2-layer GCN (hidden 64, ReLU, dropout 0.5 after the hidden layer), Adam (lr 0.01,
weight decay 5e-4), binary cross-entropy with logits on the training mask (the mean over the
nodes and labels), full batch, 200 epochs, the last epoch's weights. For each seed both sides
start from the same weights (gnn-dist's GCN built with the seed, copied into PyG's ``GCNConv``
stack):

- **gnn-dist**: ``Trainer(..., loss="bce")`` on P gloo ranks (task ``multilabel``);
- **PyG**: ``torch_geometric.nn.GCNConv`` layers on one device, on the one-part folder's graph,
  ``F.binary_cross_entropy_with_logits``; the metrics written here with numpy / scipy (not
  gnn-dist's task code), as ``gnn_dist/tasks/multilabel.py`` documents them: the micro-F1 of
  ``logit > 0`` (:math:`2 TP / (2 TP + FP + FN)` over every node and label of the mask) and the
  mean over the labels of the ROC-AUC (ogbn-proteins' metric).

A parity check first runs both with dropout off for 20 epochs: the metrics must agree to ~1e-5.

Target: the mean over seeds of the test micro-F1 and ROC-AUC of gnn-dist within 1 point (0.01)
of PyG's.

Usage (from the repository root)::

    python benchmarks/multilabel.py                # P = 2, 3 seeds, 200 epochs
    python benchmarks/multilabel.py --quick        # 1 seed, 30 epochs (seconds)

Results: ``benchmarks/results/multilabel_[hardware]_[date][_quick].{md,json}``; ``acc`` in them
is the micro-F1 (gnn-dist's name for the task's first metric).
"""

from __future__ import annotations

import logging
import sys
from typing import Any

import task_reference as tr

METRICS = ("acc", "rocauc")
TARGETS = tuple(tr.Target(m, "diff", 0.01) for m in METRICS)


def multilabel_metrics(logits: Any, labels: Any) -> dict[str, float]:
    """``acc``: the micro-F1 of ``logits > 0`` against the 0/1 ``labels`` ``[n, C]``; ``rocauc``:
    the mean per-label ROC-AUC of the logits."""
    import numpy as np

    z, y = np.asarray(logits, dtype=np.float64), np.asarray(labels) > 0
    pred = z > 0
    tp = int((pred & y).sum())
    wrong = int((pred != y).sum())   # FP + FN
    return {"acc": 2 * tp / (2 * tp + wrong) if tp + wrong else float("nan"),
            "rocauc": tr.roc_auc_columns(z, y)}


def pyg_job(rank: int, world_size: int, cfg: dict[str, Any], path: str, seeds: list[int], epochs: int,
            dropout: float) -> tr.Runs:
    """PyG on one device, from the same initial weights as gnn-dist's of each seed."""
    import torch.nn.functional as F

    g = tr.reference_graph(path)
    y = g.y.float()
    train = g.masks["train"]
    out = {}
    for seed in seeds:
        model = tr.reference_model(cfg, g.x.shape[1], y.shape[1], seed, dropout)
        logits = tr.train_reference(model, g, cfg, seed, epochs,
                                    lambda h, epoch: F.binary_cross_entropy_with_logits(h[train], y[train]))
        out[seed] = {f"{s}_{k}": v for s, m in g.masks.items()
                     for k, v in multilabel_metrics(logits[m].numpy(), g.y[m].numpy()).items()}
    return out


def main(argv: list[str] | None = None) -> int:
    a = tr.arguments(__doc__.split("\n\n")[0], "sbm-multilabel", epochs=200).parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    return tr.run_node_task(a, theme="multilabel", title="Multi-label classification",
                            loss="BCE with logits (`acc` is the micro-F1 of logit > 0, `rocauc` the mean per-label "
                                 "ROC-AUC)", pyg_job=pyg_job, metrics=METRICS, targets=TARGETS,
                            trainer={"loss": "bce"})


if __name__ == "__main__":
    sys.exit(main())
