"""Multi-label node classification (ogbn-proteins): a 0/1 label matrix, BCE, micro-F1 and ROC-AUC."""

from __future__ import annotations

from typing import Any

import torch
import torch.nn.functional as F

from ..scoring import gathered_roc_auc
from .base import Task, count_ratios, register_task

__all__ = ["MultiLabel"]


@register_task
class MultiLabel(Task):
    r"""A 0/1 matrix ``y`` ``[I, C]`` (a partition of ``label_kind`` ``multilabel``).

    Loss (``bce``): per node the mean over its ``C`` labels of the binary cross-entropy of
    :math:`\sigma(z_{vc})` against :math:`y_{vc}`, summed over the mask. Metrics: ``acc`` the
    micro-F1 of ``logit > 0``, :math:`2 TP / (2 TP + FP + FN)` from counts summed over ranks
    (exact), and ``rocauc`` the mean per-label ROC-AUC over every rank's rows
    (:func:`~gnn_dist.scoring.gathered_roc_auc`). The model's output width is ``C``.
    """

    name = "multilabel"
    label_kind = "multilabel"
    losses = ("bce",)
    metrics_shown = ("acc", "rocauc")

    def width_problem(self, out_dim: int, num_classes: int) -> str | None:
        if out_dim == num_classes:
            return None
        return f"the model's output width out_dim={out_dim} does not match the {num_classes} labels of this multi-label partition"

    def loss_sum(self, logits: torch.Tensor, y: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        return F.binary_cross_entropy_with_logits(logits[mask], y[mask], reduction="sum") / y.shape[1]

    def metrics(self, logits: torch.Tensor, part: Any) -> dict[str, float]:
        p = part
        splits = (("train", p.train_mask), ("val", p.val_mask), ("test", p.test_mask))
        pairs = []
        for _, mask in splits:
            pred = (logits[mask] > 0).float()
            true = p.y[mask]
            tp = (pred * true).sum()
            pairs.append((2 * tp, 2 * tp + (pred * (1 - true)).sum() + ((1 - pred) * true).sum()))
        out = {f"{name}_acc": f1 for (name, _), f1 in zip(splits, count_ratios(pairs))}
        for name, mask in splits:  # ogbn-proteins' metric, over every rank's rows
            out[f"{name}_rocauc"] = gathered_roc_auc(logits[mask], p.y[mask])
        return out

    def predict(self, logits: torch.Tensor) -> tuple[torch.Tensor | None, torch.Tensor]:
        return torch.sigmoid(logits), (logits > 0).to(torch.uint8)
