"""What a run's metrics are, as its metrics file says: the task, the metrics of its epoch
records (``{split}_{metric}``), and the one model selection watches with its direction. Torch-free.

``gnn_dist.train`` writes them into the config record (``{"config": {..., "task": {"task":
"regression", "loss": "mse", "metrics": ["mse", "mae", "r2"], "select_metric": "mse",
"lower_is_better": true}}}``, from :class:`gnn_dist.tasks.Task`), and the report takes them from
there. A file without that record (written before it was) is read by its fields: the metrics of
:data:`METRIC_WORDS` its epoch records have, the accuracy watched if it has one, and the
direction of :data:`LOWER_IS_BETTER`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Iterable

__all__ = ["LOWER_IS_BETTER", "METRIC_WORDS", "SPLITS", "RunTask", "detect_task", "recorded_task"]

SPLITS = ("train", "val", "test")
"""The masks metrics are computed on: the prefixes of their record keys."""

METRIC_WORDS: dict[str, str] = {"acc": "accuracy", "rocauc": "ROC-AUC", "mse": "mean squared error",
                                "mae": "mean absolute error", "r2": "R²"}
"""Metric name -> how the report names it; the metrics read from a file that does not list its own."""

LOWER_IS_BETTER = frozenset({"mse", "mae"})
"""Metrics that are errors, for a file that does not record the direction."""

BOUNDED = frozenset({"acc", "rocauc"})
"""Metrics in [0, 1] (their charts' y axis is 0..1)."""


@dataclass(frozen=True, slots=True)
class RunTask:
    """The run's task as far as the report needs it."""

    name: str | None
    """``classification``, ``multilabel``, ``regression`` (any registered task), or None when the
    file does not say."""
    loss: str | None
    metrics: tuple[str, ...]
    """Metric names of the epoch records, in the task's order (``acc``; ``mse``, ``mae``, ``r2``)."""
    select_metric: str
    """The metric the best epoch is chosen by, on the validation mask (``val_{select_metric}``)."""
    lower_is_better: bool
    source: str
    """Where this came from: ``the config record`` or ``the epoch records' fields``."""

    def word(self, metric: str) -> str:
        """How the report names ``metric`` (``acc`` of a multi-label run is its micro-F1)."""
        if metric == "acc" and self.name == "multilabel":
            return "micro-F1"
        return METRIC_WORDS.get(metric, metric)

    def fields(self) -> list[str]:
        """Every metric field of the epoch records: ``{split}_{metric}``."""
        return metric_fields(self.metrics)

    @property
    def select_key(self) -> str:
        return f"val_{self.select_metric}"

    @property
    def direction(self) -> str:
        return "lower is better" if self.lower_is_better else "higher is better"


def metric_fields(metrics: Iterable[str]) -> list[str]:
    """``{split}_{metric}`` of each metric and split."""
    return [f"{split}_{m}" for m in metrics for split in SPLITS]


def _names(value: Any) -> bool:
    return isinstance(value, list) and bool(value) and all(isinstance(m, str) and m.isidentifier() for m in value)


def recorded_task(config: dict[str, Any] | None) -> tuple[RunTask | None, str | None]:
    """``(task, problem)``: the task the config record names (``config["task"]``), or None with
    why it cannot be used (None: the record has none)."""
    if config is None or "task" not in config:
        return None, None
    rec = config["task"]
    problem = "config field 'task' is not what gnn_dist.train writes"
    if not isinstance(rec, dict):
        return None, f"{problem} (an object)"
    metrics, select, lower = rec.get("metrics"), rec.get("select_metric"), rec.get("lower_is_better")
    if not _names(metrics):
        return None, f"{problem} ('metrics': a list of metric names)"
    if not isinstance(select, str) or select not in metrics:
        return None, f"{problem} ('select_metric': one of its metrics)"
    if not isinstance(lower, bool):
        return None, f"{problem} ('lower_is_better': true or false)"
    name, loss = rec.get("task"), rec.get("loss")
    return RunTask(name=name if isinstance(name, str) else None, loss=loss if isinstance(loss, str) else None,
                   metrics=tuple(metrics), select_metric=select, lower_is_better=lower,
                   source="the config record"), None


def detect_task(keys: set[str]) -> RunTask:
    """The task of a file without a task record, from the keys its epoch records have: the
    metrics of :data:`METRIC_WORDS` found (``acc`` when none is), ``acc`` watched if found, else
    the first one."""
    found = tuple(m for m in METRIC_WORDS if any(f in keys for f in metric_fields([m])))
    metrics = found or ("acc",)
    select = "acc" if "acc" in metrics else metrics[0]
    return RunTask(name=None, loss=None, metrics=metrics, select_metric=select,
                   lower_is_better=select in LOWER_IS_BETTER, source="the epoch records' fields")
