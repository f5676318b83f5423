"""What a run learns: a registry of tasks, one a file.

A task (:class:`Task`) owns what depends on what the labels are: the per-node loss summed over a
mask, the evaluation metrics computed from a rank's logits (a collective: their sums are
all-reduced, so every rank gets the numbers one device computes), which metric model selection
watches and whether lower is better, what a prediction writes, and the model's output width.

=================  ===============  ===============  ==========================================
task               partition label  losses (first:   metrics (``train_``/``val_``/``test_``)
                   kind             the natural one)
=================  ===============  ===============  ==========================================
classification     ``class``        ce               ``acc``
multilabel         ``multilabel``   bce              ``acc`` (micro-F1), ``rocauc``
regression         ``regression``   mse, mae         ``mse``, ``mae``, ``r2``
link               an edge split    bce              ``mrr``, ``hits@K``, ``auc``
=================  ===============  ===============  ==========================================

:func:`resolve_task` turns the run's :class:`~gnn_dist.config.TaskConfig` (``--task``,
``--loss``) and the partition's label kind into a task, refusing a mismatch in one line. A new
task is a class registered with :func:`register_task` in a file of its own; link prediction
(:mod:`.link`) shows the hooks a task that is not a node task uses: :meth:`Task.trains_on` (an
edge split, not node labels), :meth:`Task.attach` (its decoder module), :meth:`Task.train_loss`.
"""

from __future__ import annotations

from typing import Any

from ..config.registry import register_check, register_choices, register_hook
from .base import LOSSES, TASKS, Task, register_task, resolve_task, task_for_label_kind, task_names
from .classification import Classification   # each registers itself, in this order
from .multilabel import MultiLabel
from .regression import Regression
from .link import LinkPrediction

__all__ = ["Task", "TASKS", "LOSSES", "register_task", "resolve_task", "task_for_label_kind", "task_names",
           "Classification", "MultiLabel", "Regression",
           "LinkPrediction"]


def check_loss(options: Any) -> tuple[str, str] | None:
    """``("loss", message)`` when a :class:`~gnn_dist.config.TaskConfig` names both a task and a
    loss that task does not train with, else None."""
    if options.task == "auto" or options.loss == "auto":
        return None
    kind = TASKS[options.task]
    if options.loss not in kind.losses:
        return "loss", (f"{options.loss} is not a loss of task {options.task} (its losses: {', '.join(kind.losses)}); "
                        f"use --loss auto or one of {', '.join(kind.losses)}")
    return None


# what gnn_dist.config's TaskConfig asks (gnn_dist.config.registry)
register_choices("task", lambda: ("auto", *task_names()))
register_check("task", check_loss)
register_hook("resolve_task", resolve_task)
