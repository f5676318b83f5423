"""Model selection: which weights a run ends with (``select``), and when it stops (``patience``).

The trainer shows each evaluated epoch's record to a :class:`ModelSelection`, which keeps the
best one so far (the best validation value of the task's metric, ``val_{metric}``: the highest
accuracy, or the lowest error of a regression, :attr:`gnn_dist.tasks.Task.select_metric`; the
first such epoch on a tie) and counts the evaluations since. With ``select="best-val"`` it also keeps a copy of that epoch's state dict,
and :meth:`~ModelSelection.restore_best` loads it into the model at the end of
:meth:`Trainer.fit <gnn_dist.trainer.Trainer.fit>`; the weights training had reached are kept
aside meanwhile (:meth:`~ModelSelection.training_state`), so a later ``fit`` continues from them
(:meth:`~ModelSelection.resume_training`) and a checkpoint holds them, not the best ones. With
``patience=K``, :attr:`~ModelSelection.stopped` turns True once K evaluations in a row have not
improved on the best.

Every rank takes the same decisions: the metrics are computed from all-reduced sums (the
accuracies from integer counts, exact in float64), the same on every rank, so no collective is
needed here. The state (:meth:`~ModelSelection.state_dict`: the metric watched, the best record
and the count as plain values, the best weights as tensors) goes into checkpoints and comes back
on resume; a checkpoint written before the metric was recorded watched ``val_acc``.
"""

from __future__ import annotations

import math
from typing import Any

import torch

__all__ = ["ModelSelection", "BEST_KEYS", "best_keys"]

def best_keys(metric: str) -> tuple[str, ...]:
    """The best record's keys when selection watches ``val_{metric}``: the epoch (0-based, as in
    the epoch records) and the metric on the three masks."""
    return ("epoch", f"train_{metric}", f"val_{metric}", f"test_{metric}")


BEST_KEYS = best_keys("acc")
"""What the best record holds when the metric is the accuracy."""


def _copy(state: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    return {k: v.detach().clone() for k, v in state.items()}


class ModelSelection:
    """The best epoch so far and the evaluations since (see the module docstring).

    Args:
        config: a :class:`~gnn_dist.config.SelectionConfig` (``select``, ``patience``).
        metric: the metric watched on the validation mask (``val_{metric}``; default ``acc``).
        lower_is_better: whether a lower value is better (an error such as ``mse``).

    Attributes:
        best: the best epoch's record (:func:`best_keys`), or None before the first evaluation.
        since_best: evaluations since the best one.
    """

    def __init__(self, config: Any, metric: str = "acc", lower_is_better: bool = False) -> None:
        self.config = config
        self.metric, self.lower_is_better = metric, lower_is_better
        self.keys = best_keys(metric)
        self.key = f"val_{metric}"
        """The record key watched."""
        self.best: dict[str, Any] | None = None
        self.since_best = 0
        self._weights: dict[str, torch.Tensor] | None = None
        self._parked: dict[str, torch.Tensor] | None = None

    @property
    def keeps_weights(self) -> bool:
        """``select="best-val"``: a copy of the best epoch's weights is kept."""
        return self.config.select == "best-val"

    @property
    def active(self) -> bool:
        """Whether the run depends on the validation metric (``best-val`` or a patience)."""
        return self.keeps_weights or self.config.patience is not None

    @property
    def stopped(self) -> bool:
        """The patience is spent: ``patience`` evaluations in a row did not improve on the best."""
        patience = self.config.patience
        return patience is not None and self.since_best >= patience

    def observe(self, record: dict[str, Any], model: torch.nn.Module) -> bool:
        """Take an epoch's record (after its evaluation); True when it is the new best.

        Raises:
            ValueError: ``best-val`` or a patience, and the validation metric is NaN (no
                validation nodes in the partition).
        """
        val = record.get(self.key)
        if val is None:
            return False
        if math.isnan(val):
            if self.active:
                raise ValueError(f"select={self.config.select!r}"
                                 + (f" with patience={self.config.patience}" if self.config.patience else "")
                                 + " needs validation nodes, but the partition's val_mask is empty: partition the "
                                   "graph with a validation mask, or use --select last without --patience")
            return False
        if self.best is None or self._better(val, self.best[self.key]):
            self.best = {k: record[k] for k in self.keys}
            self.since_best = 0
            if self.keeps_weights:
                self._weights = _copy(model.state_dict())
            return True
        self.since_best += 1
        return False

    def _better(self, value: float, best: float) -> bool:
        return value < best if self.lower_is_better else value > best

    def restore_best(self, model: torch.nn.Module) -> dict[str, Any] | None:
        """``best-val``: load the best epoch's weights into ``model`` (its current ones are kept
        aside for training on); returns the best record, or None when nothing was restored."""
        if not self.keeps_weights or self._weights is None:
            return None
        if self._parked is None:
            self._parked = _copy(model.state_dict())
        model.load_state_dict(self._weights)
        return self.best

    def resume_training(self, model: torch.nn.Module) -> None:
        """Put back the weights training had reached, if :meth:`restore_best` set them aside."""
        if self._parked is not None:
            model.load_state_dict(self._parked)
            self._parked = None

    def training_state(self, model: torch.nn.Module) -> dict[str, torch.Tensor]:
        """The state dict training continues from: the one set aside by :meth:`restore_best`,
        else the model's own (what a checkpoint stores as its weights)."""
        return self._parked if self._parked is not None else model.state_dict()

    def state_dict(self) -> dict[str, Any]:
        """``{"select", "metric", "best", "since_best", "weights"}``: plain values and tensors only
        (``weights`` is the best epoch's state dict with ``best-val``, else None)."""
        return {"select": self.config.select, "metric": self.metric,
                "best": None if self.best is None else dict(self.best),
                "since_best": int(self.since_best), "weights": self._weights}

    def load_state_dict(self, state: dict[str, Any] | None) -> str | None:
        """Restore a :meth:`state_dict` (None: a checkpoint without one); returns why the best
        state could not be taken over (then selection starts afresh), or None. Anything set
        aside by :meth:`restore_best` is dropped: the model now holds the checkpoint's weights.

        Raises:
            ValueError: ``state`` is not a selection state.
        """
        self._parked = None
        self.best, self.since_best, self._weights = None, 0, None
        if state is None:
            return "the checkpoint holds no model-selection state" if self.active else None
        best, weights = state.get("best"), state.get("weights")
        theirs = state.get("metric", "acc")   # checkpoints before the metric was recorded: the accuracy
        if not isinstance(theirs, str):
            raise ValueError(f"the model-selection state's metric {theirs!r} is not a name")
        if best is not None and (not isinstance(best, dict) or any(k not in best for k in best_keys(theirs))):
            raise ValueError(f"the model-selection state's best record {best!r} lacks one of "
                             f"{', '.join(best_keys(theirs))}")
        if weights is not None and (not isinstance(weights, dict)
                                    or not all(isinstance(v, torch.Tensor) for v in weights.values())):
            raise ValueError("the model-selection state's weights are not a state dict of tensors")
        if theirs != self.metric:
            return (f"the checkpoint's model selection watched val_{theirs}, this run's watches {self.key}"
                    if self.active and best is not None else None)
        if self.keeps_weights and best is not None and weights is None:
            return (f"the checkpoint was written with select={state.get('select')!r} and holds no best-val weights")
        self.best = None if best is None else {k: best[k] for k in self.keys}
        self.since_best = int(state.get("since_best", 0))
        self._weights = weights if self.keeps_weights else None
        return None

    def __repr__(self) -> str:
        best = "none" if self.best is None else f"epoch {self.best['epoch']} ({self.key} {self.best[self.key]:.4f})"
        return (f"ModelSelection(select={self.config.select!r}, patience={self.config.patience}, best={best}, "
                f"since_best={self.since_best})")
