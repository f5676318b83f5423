"""Node classification: one class per node, cross-entropy, accuracy."""

from __future__ import annotations

from typing import Any

import torch
import torch.nn.functional as F

from .base import Task, count_ratios, register_task

__all__ = ["Classification"]


@register_task
class Classification(Task):
    r"""Class ids ``y`` ``[I]`` (a partition of ``label_kind`` ``class``).

    Loss (``ce``): per node :math:`-\log \mathrm{softmax}(z_v)_{y_v}`, summed over the mask.
    Metric ``acc``: the fraction of the mask's nodes whose largest logit is their class, from
    counts summed over ranks (exact). The model's output width is at least the classes.
    """

    name = "classification"
    label_kind = "class"
    losses = ("ce",)
    metrics_shown = ("acc",)

    def width_problem(self, out_dim: int, num_classes: int) -> str | None:
        if out_dim >= num_classes:
            return None
        return (f"the model's output width out_dim={out_dim} is smaller than the partition's {num_classes} classes; "
                f"build it with out_dim={num_classes}")

    def loss_sum(self, logits: torch.Tensor, y: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        return F.cross_entropy(logits[mask], y[mask], reduction="sum")

    def metrics(self, logits: torch.Tensor, part: Any) -> dict[str, float]:
        masks = (part.train_mask, part.val_mask, part.test_mask)
        accs = count_ratios([((logits[m].argmax(-1) == part.y[m]).sum(), m.sum()) for m in masks])
        return {f"{name}_acc": a for name, a in zip(("train", "val", "test"), accs)}

    def predict(self, logits: torch.Tensor) -> tuple[torch.Tensor | None, torch.Tensor]:
        return torch.softmax(logits, dim=-1), logits.argmax(-1)
