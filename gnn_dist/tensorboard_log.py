"""Rank 0's TensorBoard log (``--tensorboard DIR``): each epoch's figures as scalars.

The same records as the metrics file (:mod:`.metrics`), written with
``torch.utils.tensorboard.SummaryWriter`` (the ``tensorboard`` package: the optional extra
``pip install 'gnn-dist[tensorboard]'``), under the tags of :data:`SCALARS`, the task's metrics
(:func:`metric_tags`: ``accuracy/{train,val,test}``; a multi-label run's also
``rocauc/{train,val,test}``, a regression's ``mse/...``, ``mae/...``, ``r2/...``) and
``bytes/layer_K`` for each layer's halo bytes, at step = epoch. Metrics appear on evaluated
epochs only. The writer flushes after every epoch, so a running job shows in TensorBoard as it
trains. Without the package the run is refused at start with one line (:func:`require_tensorboard`).
"""

from __future__ import annotations

from typing import Any

__all__ = ["SCALARS", "TensorBoardLog", "metric_tags", "require_tensorboard"]

SCALARS: dict[str, str] = {
    "loss/train": "train_loss", "time/epoch_s": "epoch_time_s", "time/compute_s": "compute_time_s",
    "time/comm_s": "comm_time_s", "time/exposed_comm_s": "exposed_comm_s", "time/eval_s": "eval_time_s",
    "time/wait_cpu_s": "wait_cpu_s",
    "bytes/halo": "halo_bytes", "bytes/allreduce": "allreduce_bytes", "features/hit_rate": "feature_hit_rate",
}
"""TensorBoard tag -> the metrics record's key, besides the task's metrics (:func:`metric_tags`)."""

_METRIC_GROUPS = {"acc": "accuracy"}
"""A metric's tag group when it is not the metric's name."""


def metric_tags(metrics: tuple[str, ...] | list[str]) -> dict[str, str]:
    """TensorBoard tag -> record key of each metric (a :class:`gnn_dist.tasks.Task`'s
    ``metrics_shown``) on each mask: ``accuracy/val`` -> ``val_acc``, ``mse/val`` -> ``val_mse``."""
    from .tasks.base import SPLITS

    return {f"{_METRIC_GROUPS.get(m, m)}/{split}": f"{split}_{m}" for m in metrics for split in SPLITS}


def require_tensorboard() -> Any:
    """``SummaryWriter``; ValueError (one line, with the fix) when tensorboard is not installed."""
    try:
        from torch.utils.tensorboard import SummaryWriter
    except ImportError as exc:
        raise ValueError(f"--tensorboard needs the tensorboard package ({exc}): pip install "
                         f"'gnn-dist[tensorboard]' (or pip install tensorboard), or drop --tensorboard "
                         f"(--metrics FILE.jsonl and gnn-dist report need nothing)") from None
    return SummaryWriter


class TensorBoardLog:
    """A ``SummaryWriter`` on ``log_dir`` that writes one epoch record at a time: the
    :data:`SCALARS` and the ``metrics`` of the run's task (default: the accuracy)."""

    def __init__(self, log_dir: str, metrics: tuple[str, ...] | list[str] = ("acc",)) -> None:
        self.writer = require_tensorboard()(log_dir=log_dir)
        self.scalars = {**SCALARS, **metric_tags(metrics)}
        """Tag -> record key of everything written."""

    def write(self, rec: dict[str, Any]) -> None:
        step = int(rec["epoch"])
        for tag, key in self.scalars.items():
            value = rec.get(key)
            if value is not None:
                self.writer.add_scalar(tag, float(value), step)
        for layer, nbytes in enumerate(rec.get("bytes_per_layer") or []):
            self.writer.add_scalar(f"bytes/layer_{layer}", float(nbytes), step)
        self.writer.flush()

    def close(self) -> None:
        self.writer.close()
