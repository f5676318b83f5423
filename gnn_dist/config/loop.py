"""The training loop's sections: what is optimised (:class:`OptimizerConfig`), learnt
(:class:`TaskConfig`), kept (:class:`CheckpointConfig`, :class:`SelectionConfig`) and reported
(:class:`ReportConfig`)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from .fields import ConfigError, check_choice, flag, int_at_least, is_number, require
from .registry import choices, choices_of, hook, run_checks

__all__ = ["OPTIMIZERS", "RESUME_MODES", "SELECT_MODES", "TASK_LOSSES", "OptimizerConfig", "CheckpointConfig",
           "ReportConfig", "SelectionConfig", "TaskConfig"]

OPTIMIZERS = ("adam", "adamw", "sgd")
RESUME_MODES = ("auto", "latest")
"""``resume``: ``auto`` (the newest checkpoint if there is one, else a fresh start: right for a
first start and for an elastic restart), ``latest`` (the newest checkpoint, which must exist),
or the path of a checkpoint file."""
SELECT_MODES = ("last", "best-val")
"""``select``: the weights a run ends with, the last epoch's or those of the epoch with the best
validation accuracy (:mod:`gnn_dist.selection`)."""
TASK_LOSSES = ("auto", "ce", "bce", "mse", "mae")
"""``loss``: the task's own (``auto``), or one by name (:data:`gnn_dist.tasks.LOSSES`)."""


@dataclass(kw_only=True, slots=True)
class OptimizerConfig:
    optimizer: str = flag("--optimizer", default="adam", choices=OPTIMIZERS)
    """The optimizer."""
    lr: float = flag("--lr", default=0.01)
    """Learning rate."""
    weight_decay: float = flag("--weight-decay", default=5e-4)
    """L2 penalty (decoupled for adamw)."""

    def __post_init__(self) -> None:
        check_choice("optimizer", self.optimizer, OPTIMIZERS)
        require(is_number(self.lr) and self.lr > 0, "lr", self.lr, "a positive number")
        require(is_number(self.weight_decay) and self.weight_decay >= 0, "weight_decay", self.weight_decay,
                "a number >= 0")


@dataclass(kw_only=True, slots=True)
class CheckpointConfig:
    checkpoint_dir: str | None = flag("--checkpoint-dir")
    """Where rank 0 writes checkpoints (only rank 0 reads them back: no shared filesystem needed; with
    a stateful pipeline such as stale each rank also writes and reads its own rank file)."""
    checkpoint_every: int = flag("--checkpoint-every", default=10)
    """Checkpoint every K epochs and after the last."""
    checkpoint_keep: int | None = flag("--keep-checkpoints", metavar="N")
    """Keep only the newest N checkpoints (default: all)."""
    resume: str | None = flag("--resume", action="optional", metavar="auto|latest|PATH")
    """Continue from a checkpoint: auto (the newest in checkpoint_dir if any, else start at epoch 0;
    what --resume alone means, right for a first start and an elastic restart), latest (the newest,
    which must exist) or the path of a checkpoint file."""
    resume_any_partition: bool = flag("--resume-any-partition", default=False, action="store_true")
    """Resume a checkpoint written for another graph, or for another partition when a folder has
    no graph fingerprint (refused by default; another cut of the same graph, any number of parts,
    needs no flag)."""

    def __post_init__(self) -> None:
        int_at_least("checkpoint_every", self.checkpoint_every, 1)
        int_at_least("checkpoint_keep", self.checkpoint_keep, 1, optional=True)
        require(self.checkpoint_dir is None or isinstance(self.checkpoint_dir, str), "checkpoint_dir",
                self.checkpoint_dir, "a folder path")
        if self.checkpoint_keep is not None and self.checkpoint_dir is None:
            raise ConfigError("checkpoint_keep", "needs a checkpoint folder (checkpoint_dir, --checkpoint-dir)")
        require(self.resume is None or (isinstance(self.resume, str) and self.resume != ""), "resume",
                self.resume, "auto, latest or a checkpoint file")
        if self.resume in RESUME_MODES and self.checkpoint_dir is None:
            raise ConfigError("resume", f"{self.resume} needs a checkpoint folder (checkpoint_dir, --checkpoint-dir)")


@dataclass(kw_only=True, slots=True)
class ReportConfig:
    eval_every: int = flag("--eval-every", default=1)
    """Evaluate train/val/test accuracy every K epochs; 0 never."""
    log_every: int = flag("--log-every", default=10)
    """Rank 0 logs a progress line every K epochs; 0 never."""
    metrics_path: str | None = flag("--metrics", metavar="FILE.jsonl")
    """JSON-lines file rank 0 writes: the resolved config, then one object per epoch (started afresh
    unless resuming, which keeps the records of the epochs before the checkpoint)."""
    tensorboard: str | None = flag("--tensorboard", metavar="DIR")
    """Also write each epoch's figures (loss, accuracies, times, bytes per layer) as TensorBoard scalars
    into DIR, on rank 0 (needs the tensorboard package: pip install 'gnn-dist[tensorboard]')."""

    def __post_init__(self) -> None:
        int_at_least("eval_every", self.eval_every, 0)
        int_at_least("log_every", self.log_every, 0)


@dataclass(kw_only=True, slots=True)
class SelectionConfig:
    select: str = flag("--select", default="last", choices=SELECT_MODES)
    """The weights the run ends with: last (the last epoch's) or best-val (those of the evaluated epoch
    with the best validation accuracy, the first on a tie: kept in memory and in checkpoints, restored at
    the end; the final line names that epoch, and --save-model writes its weights)."""
    patience: int | None = flag("--patience", metavar="K")
    """Stop early when the validation accuracy has not improved for K evaluations in a row (default:
    never); a resumed run counts on from the checkpoint."""

    def __post_init__(self) -> None:
        check_choice("select", self.select, SELECT_MODES)
        int_at_least("patience", self.patience, 1, optional=True)


@dataclass(kw_only=True, slots=True)
class TaskConfig:
    task: str = flag("--task", default="auto", choices=choices_of("task"))
    """What the model learns: auto (the partition's label kind decides: class ids -> classification, a 0/1
    matrix -> multilabel, float targets -> regression) or a task by name, refused when the partition's
    labels are of another kind."""
    loss: str = flag("--loss", default="auto", choices=TASK_LOSSES)
    """The training loss: auto (the task's own: ce for classification, bce for multilabel and link, mse
    for regression), or ce, bce, mse, mae (mse and mae: regression)."""
    decoder: str = flag("--decoder", default="dot", choices=choices_of("decoder"))
    """Link prediction: how a pair is scored from its endpoints' embeddings: dot (inner product) or mlp
    (two layers on their element-wise product)."""
    eval_negatives: int = flag("--eval-negatives", default=100, metavar="M")
    """Link prediction: the fixed negatives each evaluated edge is ranked against (MRR, Hits@K)."""
    hits_k: int = flag("--hits-k", default=10, metavar="K")
    """Link prediction: the K of the Hits@K metric."""

    def __post_init__(self) -> None:
        check_choice("task", self.task, choices("task"))
        check_choice("loss", self.loss, TASK_LOSSES)
        check_choice("decoder", self.decoder, choices("decoder"))
        int_at_least("eval_negatives", self.eval_negatives, 1)
        int_at_least("hits_k", self.hits_k, 1)
        run_checks("task", self)   # the tasks' own: a loss of the task chosen (gnn_dist.tasks)

    def resolve(self, label_kind: str | None, where: str = "the partition", *, edge_split: bool = False) -> Any:
        """The :class:`~gnn_dist.tasks.Task` for a partition whose labels are ``label_kind`` (and
        which has an ``edge_split`` or not; :func:`gnn_dist.tasks.resolve_task`); a mismatch is a
        :class:`ConfigError`."""
        return hook("resolve_task")(self.task, self.loss, label_kind, edge_split=edge_split, options=self,
                                    where=where, error=ConfigError)

