"""The task protocol and its registry (see :mod:`gnn_dist.tasks`)."""

from __future__ import annotations

from typing import Any, Callable, ClassVar, TypeVar

import torch

__all__ = ["Task", "TASKS", "LOSSES", "register_task", "resolve_task", "task_for_label_kind", "task_names",
           "SPLITS", "count_ratios"]

SPLITS = ("train", "val", "test")
"""The masks metrics are computed on, and the prefixes of their record keys."""

LOSSES = ("ce", "bce", "mse", "mae")
"""Every loss some task trains with (``--loss``; ``auto`` is the task's own)."""


class Task:
    """What a run learns (one subclass a file, registered with :func:`register_task`).

    Class attributes: ``name`` (``--task``), ``label_kind`` (the partition's ``label_kind`` it
    trains on), ``losses`` (``--loss`` values; the first is the natural one), ``metrics`` (the
    metric names of :meth:`metrics`' records, ``{split}_{metric}``; the first is the one
    :meth:`unevaluated` fills), ``predicts_nodes`` (the model's output rows are the predictions of
    their nodes, as the partition's labels are; False: they are embeddings that the task's own
    modules score, as link prediction's decoder scores pairs).

    Args:
        loss: one of ``losses``, or None / ``"auto"`` for the natural one.
    """

    name: ClassVar[str]
    label_kind: ClassVar[str]
    losses: ClassVar[tuple[str, ...]]
    metrics_shown: ClassVar[tuple[str, ...]]
    predicts_nodes: ClassVar[bool] = True

    def __init__(self, loss: str | None = None) -> None:
        loss = self.losses[0] if loss in (None, "auto") else loss
        if loss not in self.losses:
            raise ValueError(f"loss {loss!r} is not a loss of task {self.name} (its losses: {', '.join(self.losses)})")
        self.loss = loss

    @classmethod
    def from_options(cls, loss: str | None, options: Any) -> "Task":
        """The task with ``loss`` and the run's task options (a
        :class:`~gnn_dist.config.TaskConfig`, or None: the defaults); node tasks take none."""
        return cls(loss)

    @classmethod
    def trains_on(cls, label_kind: str | None, edge_split: bool) -> bool:
        """Whether the task trains on a partition whose labels are ``label_kind`` (and which has an
        edge split or not): by default, when the labels are the task's :attr:`label_kind`."""
        return cls.label_kind == label_kind

    # ------------------------------------------------------------------ the part
    def check_data(self, meta: Any, where: Any) -> None:
        """Refuse (``ValueError`` naming ``where``, the folder) a partition the task cannot train
        on, from its metadata (``partition.json``) alone: ``gnn-dist train --validate`` calls it
        before any rank starts, the trainer on every rank alike. Node tasks need labels and
        training nodes."""
        if meta.label_kind is None or int(meta.num_classes) < 1:
            raise ValueError(f"{where}: the partition has no labels to train on")
        if sum(int(p.num_train) for p in meta.parts) == 0:
            raise ValueError(f"{where}: the partition has no training nodes (train_mask is empty everywhere)")

    def attach(self, model: torch.nn.Module, part: Any, seed: int) -> None:
        """Called once by the trainer before the weights are broadcast: a task that owns modules
        or per-part state adds them here (link prediction: the decoder, as ``model.link_decoder``)."""

    def add_modules(self, model: torch.nn.Module) -> None:
        """Add the task's own modules to ``model`` (built from its ``ModelConfig``): what
        :meth:`attach` adds, and what a model file rebuilds (link prediction: ``link_decoder``).
        Node tasks own none."""

    def model_options(self) -> dict[str, Any]:
        """The task options (:class:`~gnn_dist.config.TaskConfig` fields) that :meth:`add_modules`
        depends on, as the model file's header records them (``task_options``; link prediction:
        ``decoder``); :meth:`from_options` with them rebuilds the same modules."""
        return {}

    def train_loss(self, logits: torch.Tensor, part: Any, epoch: int) -> torch.Tensor:
        """The step's loss on this rank: its share of the global mean, so that the sum over ranks
        is the one-device loss (node tasks: :meth:`loss_sum` over the training rows divided by the
        global training count)."""
        return self.loss_sum(logits, part.y, part.train_mask) / part.global_num_train

    def step_fetch_bytes(self) -> int:
        """Bytes this rank sent in the last :meth:`train_loss` and its backward fetching rows of
        other ranks (link prediction's edge endpoints); node tasks fetch none."""
        return 0

    # ------------------------------------------------------------------ model selection
    @property
    def select_metric(self) -> str:
        """The metric model selection (``--select best-val``, ``--patience``) watches on the
        validation mask (``val_{select_metric}``)."""
        return "acc"

    @property
    def lower_is_better(self) -> bool:
        """Whether a lower :attr:`select_metric` is better (an error) or a higher one (a score)."""
        return False

    # ------------------------------------------------------------------ model and loss
    def out_dim(self, num_classes: int, hidden: int | None = None) -> int:
        """The model's output width for a partition of ``num_classes`` (classes, labels or the
        target width); ``hidden`` is the model's hidden width (link prediction's embeddings)."""
        return int(num_classes)

    def width_problem(self, out_dim: int, num_classes: int) -> str | None:
        """Why a model of output width ``out_dim`` cannot train on ``num_classes`` (None: it can):
        by default it must equal the task's :meth:`out_dim`."""
        want = self.out_dim(num_classes)
        if out_dim == want:
            return None
        return (f"the model's output width out_dim={out_dim} does not match the {want} outputs of task "
                f"{self.name} on this partition; build it with out_dim={want}")

    def loss_sum(self, logits: torch.Tensor, y: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        """Sum over the rows of ``mask`` of the per-node loss (a zero that still depends on the
        logits when there are none, so the backward runs every collective)."""
        raise NotImplementedError

    # ------------------------------------------------------------------ evaluation
    def metrics(self, logits: torch.Tensor, part: Any) -> dict[str, float]:
        """``{split}_{metric}`` for each split of :data:`SPLITS`, over every rank's rows (a
        collective), from this rank's ``logits`` ``[I, out_dim]`` and ``part``'s labels/masks."""
        raise NotImplementedError

    def unevaluated(self) -> dict[str, None]:
        """The record keys of an epoch without evaluation (all None)."""
        return {f"{split}_{self.metrics_shown[0]}": None for split in SPLITS}

    def record(self) -> dict[str, Any]:
        """What the metrics file's config record says of the task (``task``, ``loss``, ``metrics``,
        ``select_metric``, ``lower_is_better``): the run report reads it without importing torch."""
        return {"task": self.name, "loss": self.loss, "metrics": list(self.metrics_shown),
                "select_metric": self.select_metric, "lower_is_better": self.lower_is_better}

    # ------------------------------------------------------------------ prediction
    def predict(self, logits: torch.Tensor) -> tuple[torch.Tensor | None, torch.Tensor]:
        """``(probabilities or None, predicted)`` of the rows of ``logits``, as ``gnn-dist
        predict`` writes them."""
        raise NotImplementedError

    def __repr__(self) -> str:
        return f"{type(self).__name__}(loss={self.loss!r})"


TASKS: dict[str, type[Task]] = {}
"""Registered tasks by name."""

T = TypeVar("T", bound=type[Task])


def register_task(cls: T) -> T:
    """Class decorator: the task is ``--task cls.name``."""
    if cls.name in TASKS and TASKS[cls.name] is not cls:
        raise ValueError(f"a task named {cls.name!r} is already registered ({TASKS[cls.name].__qualname__})")
    TASKS[cls.name] = cls
    return cls


def task_names() -> tuple[str, ...]:
    """The registered tasks' names, in registration order."""
    return tuple(TASKS)


_KIND_WORDS = {"class": "class ids", "multilabel": "a 0/1 multi-label matrix", "regression": "float regression targets",
               "edge-split": "an edge split (gnn-dist partition --edge-split)"}


def task_for_label_kind(label_kind: str | None) -> type[Task] | None:
    """The task that trains on a partition of ``label_kind`` (None: none does)."""
    return next((t for t in TASKS.values() if t.label_kind == label_kind), None)


def resolve_task(task: str = "auto", loss: str = "auto", label_kind: str | None = None, *,
                 edge_split: bool = False, options: Any = None,
                 where: str = "the partition", error: Callable[[str, str], Exception] | None = None) -> Task:
    """The task of ``--task``/``--loss`` for a partition whose labels are ``label_kind`` (and which
    has an ``edge_split`` or not); ``options`` the run's :class:`~gnn_dist.config.TaskConfig`.

    ``auto`` is the partition's label kind's task and that task's natural loss (link prediction on
    a partition without node labels but with an edge split). Refused (``error(field,
    message)``, default ``ValueError``; one line naming the partition's label kind and the fix):
    a task whose labels are not the partition's, a loss the task does not train with.
    """
    def fail(field: str, message: str) -> Exception:
        return error(field, message) if error is not None else ValueError(f"{field}: {message}")

    natural = task_for_label_kind(label_kind)
    if natural is None and edge_split:
        natural = next(t for t in TASKS.values() if t.trains_on(None, True) and not t.trains_on(None, False))
    shown = f"{label_kind!r} ({_KIND_WORDS.get(str(label_kind), 'no labels')})"
    if task == "auto":
        if natural is None:
            raise fail("task", f"auto: {where} has label_kind {shown}, which no task trains on; "
                               f"partition a graph with labels")
        kind = natural
    else:
        if task not in TASKS:
            raise fail("task", f"{task!r} is not one of auto, {', '.join(TASKS)}")
        kind = TASKS[task]
        if not kind.trains_on(label_kind, edge_split) and kind.trains_on(None, True):
            raise fail("task", f"{task} trains on {_KIND_WORDS[kind.label_kind]}, but {where} has none: "
                               f"partition with gnn-dist partition ... --edge-split 0.85,0.05,0.1")
        if not kind.trains_on(label_kind, edge_split):
            fix = f"--task auto (here: {natural.name})" if natural is not None else "partition a graph with labels"
            raise fail("task", f"{task} trains on {_KIND_WORDS[kind.label_kind]}, but {where} has label_kind "
                               f"{shown}: use {fix}, or partition {_KIND_WORDS[kind.label_kind]}")
    if loss not in ("auto", *kind.losses):
        owners = [t.name for t in TASKS.values() if loss in t.losses]
        chosen = f"task {kind.name}" + (f", the task of {where}'s label_kind {shown}" if task == "auto" else "")
        raise fail("loss", f"{loss} is not a loss of {chosen} (its losses: {', '.join(kind.losses)})"
                           + (f"; {loss} trains task {' or '.join(owners)}" if owners else "")
                           + f"; use --loss auto or one of {', '.join(kind.losses)}")
    return kind.from_options(loss, options)


def count_ratios(parts: list[tuple[torch.Tensor, torch.Tensor]]) -> list[float]:
    """``numerator / denominator`` of each pair, each summed over ranks first (one all-reduce of
    float64 counts: integers, exact); NaN where the denominator is 0."""
    from ..distributed import all_reduce_sum

    counts = torch.stack([s.to(torch.float64) for pair in parts for s in pair])
    all_reduce_sum(counts)
    c = counts.tolist()
    return [(c[2 * i] / c[2 * i + 1] if c[2 * i + 1] else float("nan")) for i in range(len(parts))]
