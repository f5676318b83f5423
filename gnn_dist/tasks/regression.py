"""Node regression: real-valued targets ``[I, D]``, MSE or MAE, and mse/mae/r2."""

from __future__ import annotations

from typing import Any

import torch
import torch.nn.functional as F

from .base import SPLITS, Task, register_task

__all__ = ["Regression"]


@register_task
class Regression(Task):
    r"""Float targets ``y`` ``[I, D]`` (a partition of ``label_kind`` ``regression``, whose
    ``num_classes`` is ``D``); the model's output width is ``D`` and its outputs are the
    predictions :math:`\hat y_v = z_v` (no link function).

    Loss, per node the mean over its ``D`` targets, summed over the mask (so the training loss,
    divided by the global training count, is torch's ``mse_loss`` / ``l1_loss`` of every training
    row of every rank):

    - ``mse``: :math:`\frac1D \sum_d (\hat y_{vd} - y_{vd})^2`;
    - ``mae``: :math:`\frac1D \sum_d |\hat y_{vd} - y_{vd}|`.

    Metrics per mask of ``n`` nodes, from float64 sums over every rank's rows (one all-reduce of
    all the sums; exact up to the order of the float64 additions):

    - ``mse`` :math:`= \frac{1}{nD} \sum_{v,d} e_{vd}^2`, ``mae`` :math:`= \frac{1}{nD} \sum_{v,d}
      |e_{vd}|` with :math:`e = \hat y - y`;
    - ``r2``: the mean over the targets of :math:`1 - \sum_v e_{vd}^2 / \sum_v (y_{vd} - \bar
      y_d)^2` (scikit-learn's ``r2_score``, uniform average), the denominator from
      :math:`\sum y^2 - (\sum y)^2 / n`; NaN for a target constant on the mask.

    Model selection watches the validation value of the training loss's metric (``val_mse`` or
    ``val_mae``), lower being better.
    """

    name = "regression"
    label_kind = "regression"
    losses = ("mse", "mae")
    metrics_shown = ("mse", "mae", "r2")

    @property
    def select_metric(self) -> str:
        return self.loss

    @property
    def lower_is_better(self) -> bool:
        return True

    def loss_sum(self, logits: torch.Tensor, y: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        fn = F.mse_loss if self.loss == "mse" else F.l1_loss
        return fn(logits[mask], y[mask], reduction="sum") / y.shape[1]

    def metrics(self, logits: torch.Tensor, part: Any) -> dict[str, float]:
        from ..distributed import all_reduce_sum

        masks = (part.train_mask, part.val_mask, part.test_mask)
        d = part.y.shape[1]
        rows = []
        for mask in masks:   # per mask: [n, sum |e|, sum e^2 (D), sum y (D), sum y^2 (D)]
            y = part.y[mask].to(torch.float64)
            e = logits[mask].to(torch.float64) - y
            rows.append(torch.cat([mask.sum().to(torch.float64).reshape(1), e.abs().sum().reshape(1),
                                   (e * e).sum(0), y.sum(0), (y * y).sum(0)]))
        sums = torch.stack(rows)
        all_reduce_sum(sums)
        out: dict[str, float] = {}
        for split, s in zip(SPLITS, sums.cpu()):
            n, abs_sum, sse, sy, syy = s[0].item(), s[1].item(), s[2:2 + d], s[2 + d:2 + 2 * d], s[2 + 2 * d:]
            nan = float("nan")
            out[f"{split}_mse"] = sse.sum().item() / (n * d) if n else nan
            out[f"{split}_mae"] = abs_sum / (n * d) if n else nan
            sst = syy - sy * sy / n if n else torch.zeros(d, dtype=torch.float64)
            r2 = torch.where(sst > 0, 1 - sse / torch.where(sst > 0, sst, 1), torch.full_like(sst, nan))
            out[f"{split}_r2"] = r2.mean().item() if n else nan
        return out

    def unevaluated(self) -> dict[str, None]:
        return {f"{split}_{m}": None for split in SPLITS for m in self.metrics_shown}

    def predict(self, logits: torch.Tensor) -> tuple[torch.Tensor | None, torch.Tensor]:
        return None, logits.float()
