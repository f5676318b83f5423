"""What a training step measured, and where it goes: the metrics file, the progress line, the
end-of-run summary.

A step's figures are a :class:`StepStats` value made from the recordings of that step (the
exchanger's :class:`~gnn_dist.distributed.ExchangeStats` and the feature store's counts), not the
differences of counters. An epoch's record is ``{"epoch": E, **StepStats, "epoch_time_s",
"comm_bytes", "train_acc"/"val_acc"/"test_acc" (null when not evaluated; a regression has
"train_mse"/"val_mse"/"test_mse", the same of "mae" and "r2" instead: :mod:`gnn_dist.tasks`),
"eval_time_s", "wait_cpu_s"}`` (``wait_cpu_s``: the seconds the rank's threads, summed, waited
on a CPU run queue while runnable during the step, from ``/proc/self/task/*/schedstat``
(:mod:`gnn_dist.run_queue`); null where there is no schedstat, not Linux); with a
metrics file also every rank's ``"peak_memory_bytes"`` (its peak so far in this ``fit``, from the
warm baseline at its start, ``"memory_baseline_bytes"``) and the planner's
``"predicted_peak_bytes"`` (null when not known).

The metrics file (rank 0, JSON lines) starts with one ``{"config": {...}}`` record (the resolved
configuration, and under ``"task"`` the resolved task's ``task``, ``loss``, ``metrics``,
``select_metric`` and ``lower_is_better``: what ``gnn-dist report`` reads), then one record per epoch. A resumed run keeps the epoch records before its
checkpoint and rewrites the rest, so the file reads like one uninterrupted run (the file is
rewritten atomically: temp file and rename). A resume on another world size (an elastic job
that lost or gained a node) adds ``{"event": "resize", "epoch": E, "from_world_size": 4,
"to_world_size": 2}`` after the kept records (E: the epoch it goes on from; with a ``stale``
schedule also ``"pipeline_state"``: what it carried to the new cut).

The file ends at a complete record whatever the disk does: each epoch record is one line built
whole, then written by one ``write`` call (looped only over a short write); when the filesystem
refuses it (a full disk, ``ENOSPC``; a quota; an I/O error) the file is truncated back to where
the record started and a :class:`~gnn_dist.atomic_file.StorageError` (an ``OSError``: one line
naming the file, the epoch and the reason, exit code 1) ends the run. Its folder is checked
before training (:func:`check_metrics_target`, and ``--validate``), as ``--save-model``'s is.
"""

from __future__ import annotations

import errno as errno_codes
import json
import logging
import math
import os
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from .cache.budget import format_bytes

__all__ = ["StepStats", "MetricsFile", "check_metrics_target", "progress_line", "summary_line"]

log = logging.getLogger(__name__)


@dataclass(slots=True)
class StepStats:
    """One training step of one rank (the loss is the global one)."""

    train_loss: float
    halo_bytes: int
    """Halo bytes this rank sent in the step (forward and backward, in the wire dtype)."""
    allreduce_bytes: int
    """Gradient bytes this rank all-reduced."""
    compute_time_s: float
    """The step's time minus the time it waited for exchanges."""
    comm_time_s: float
    """Sum of the durations of the exchanges waited for in the step."""
    exposed_comm_s: float
    """Time the step waited for exchanges."""
    bytes_per_layer: list[int] = field(default_factory=list)
    staleness: int = 0
    feature_hits: int = 0
    """Feature rows served from the device cache."""
    feature_misses: int = 0
    """Feature rows served from host memory or disk."""
    feature_h2d_bytes: int = 0
    """Feature bytes copied host-to-device."""
    fetch_bytes: int = 0
    """Bytes this rank sent fetching rows its task asked for (link prediction's edge endpoints,
    forward and backward); 0 for node tasks."""

    @property
    def feature_hit_rate(self) -> float:
        total = self.feature_hits + self.feature_misses
        return self.feature_hits / total if total else float("nan")

    def to_record(self) -> dict[str, Any]:
        return {**asdict(self), "feature_hit_rate": self.feature_hit_rate}


def _json_safe(value: Any) -> Any:
    """``value`` with non-finite floats replaced by None (JSON has no NaN)."""
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value


class MetricsFile:
    """Rank 0's JSON-lines metrics file (see the module docstring)."""

    def __init__(self, path: str) -> None:
        self.path = path

    def start(self, config: dict[str, Any] | None, start_epoch: int) -> None:
        """Write the config record and keep the epoch records before ``start_epoch`` (rewritten
        atomically; the folder is created).

        Raises:
            StorageError: the file or its folder cannot be written (the message names it); the
                file is as it was.
        """
        from .atomic_file import StorageError, atomic_write

        kept = self._records_before(start_epoch) if start_epoch > 0 else []
        text = "" if config is None else json.dumps({"config": config}) + "\n"
        data = (text + "".join(kept)).encode()
        folder = os.path.dirname(os.path.abspath(self.path))
        try:
            os.makedirs(folder, exist_ok=True)
        except OSError as exc:
            raise StorageError.of(exc, self.path, "the metrics file ") from exc
        atomic_write(Path(self.path), lambda f: f.write(data), what="the metrics file ")

    def _records_before(self, start_epoch: int) -> list[str]:
        kept: list[str] = []
        if not os.path.exists(self.path):
            return kept
        with open(self.path) as f:
            for line in f:
                try:
                    rec = json.loads(line)
                except json.JSONDecodeError:
                    continue  # a line cut short by a crash
                if isinstance(rec, dict) and isinstance(rec.get("epoch"), int) and rec["epoch"] < start_epoch:
                    kept.append(line if line.endswith("\n") else line + "\n")
        return kept

    def append(self, record: dict[str, Any]) -> None:
        """Append ``record`` as one line, whole or not at all.

        Raises:
            StorageError: the filesystem refused the write; the file was truncated back to its
                last complete record (the message names the file, the epoch and the reason).
        """
        data = (json.dumps({k: _json_safe(v) for k, v in record.items()}) + "\n").encode()   # built whole first
        try:
            fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o666)
        except OSError as exc:
            raise self._error(exc, record, "") from exc
        try:
            end = os.fstat(fd).st_size   # the last good offset: the end of the last complete record
            try:
                written = os.write(fd, data)
                while written < len(data):   # a short write: the rest (the next call reports the error)
                    written += os.write(fd, memoryview(data)[written:])
            except OSError as exc:
                try:
                    os.ftruncate(fd, end)
                    kept = "the file ends with the last complete record"
                except OSError:
                    kept = f"its last line may be cut short ({self.path} could not be truncated back)"
                raise self._error(exc, record, kept) from exc
        finally:
            os.close(fd)

    def _error(self, exc: OSError, record: dict[str, Any], kept: str) -> OSError:
        """The :class:`~gnn_dist.atomic_file.StorageError` of a failed append of ``record``."""
        from .atomic_file import StorageError

        reason = exc.strerror or str(exc) or type(exc).__name__
        code = errno_codes.errorcode.get(exc.errno or -1)
        epoch = record.get("epoch")
        what = f"epoch {epoch}'s record" if epoch is not None else "a record"
        return StorageError(f"cannot write the metrics file {self.path}: {reason}" + (f" ({code})" if code else "")
                            + f"; {what} was not written" + (f", {kept}" if kept else ""),
                            path=self.path, code=exc.errno, reason=reason)


def check_metrics_target(config: Any) -> None:
    """``--metrics``' path checked on rank 0 (:func:`gnn_dist.model_file.check_output_file`: its
    folder exists and is writable, it is not a folder) before training, as ``--save-model``'s
    (a collective: a refusal, a ``ValueError``, is raised on every rank)."""
    from .distributed import all_ranks_agree, get_rank
    from .model_file import check_output_file

    path = config.trainer.report.metrics_path
    if path is None:
        return
    with all_ranks_agree(f"checking --metrics {path}"):
        if get_rank() == 0:
            check_output_file(path, "--metrics")


def _regression_scores(rec: dict[str, Any]) -> str:
    """A regression record's metrics: ``mse train T  val V  test S  (mae val .. test .., r2 val .. test ..)``."""
    return (f"  mse train {rec['train_mse']:.4f}  val {rec['val_mse']:.4f}  test {rec['test_mse']:.4f}  "
            f"(mae val {rec['val_mae']:.4f}  test {rec['test_mae']:.4f}, r2 val {rec['val_r2']:.4f}  "
            f"test {rec['test_r2']:.4f})")


def progress_line(rec: dict[str, Any], *, feature_store: bool) -> str:
    """The rank-0 log line of an epoch record (accuracies, or a regression's errors)."""
    accs = "" if rec.get("val_acc") is None else (
        f"  train {rec['train_acc']:.4f}  val {rec['val_acc']:.4f}  test {rec['test_acc']:.4f}")
    if rec.get("val_rocauc") is not None:  # multi-label: ROC-AUC beside the micro-F1
        accs += f"  (roc-auc val {rec['val_rocauc']:.4f}  test {rec['test_rocauc']:.4f})"
    if rec.get("val_mse") is not None:   # regression: its errors instead of accuracies
        accs += _regression_scores(rec)
    line = (f"epoch {rec['epoch']:4d}  loss {rec['train_loss']:.4f}{accs}  "
            f"{rec['epoch_time_s'] * 1e3:.1f} ms (compute {rec['compute_time_s'] * 1e3:.1f}, "
            f"halo comm {rec['comm_time_s'] * 1e3:.1f}, exposed {rec['exposed_comm_s'] * 1e3:.1f})  "
            f"comm {rec['comm_bytes'] / 2**20:.2f} MiB  staleness {rec['staleness']}")
    if feature_store:
        line += (f"  features hit rate {rec['feature_hit_rate']:.3f}, "
                 f"host-to-device {rec['feature_h2d_bytes'] / 2**20:.2f} MiB")
    return line


def summary_line(history: list[dict[str, Any]], num_edges: int, peaks: list[int | None] | None = None,
                 peak_kind: str = "cpu rss", predicted: list[int] | None = None, *, metric: str = "acc",
                 lower_is_better: bool = False) -> str:
    """The end-of-run line: epochs, mean epoch time, edges per second, best validation epoch (by
    ``val_{metric}``, the lowest with ``lower_is_better``: a regression's ``mse``), and
    with ``peaks`` (bytes, one per rank; None where unknown) the peak memory of each rank, with
    ``predicted`` (the memory planner's, one per rank) beside them as predicted / measured."""
    if not history:
        return "no epochs trained"
    times = [r["epoch_time_s"] for r in history]
    mean = sum(times) / len(times)
    line = (f"{len(history)} epochs, mean epoch {mean * 1e3:.1f} ms, "
            f"{num_edges / mean if mean > 0 else float('inf'):.3g} edges/s")
    val, test = f"val_{metric}", f"test_{metric}"
    scored = [r for r in history if r.get(val) is not None]
    if scored:
        best = (min if lower_is_better else max)(scored, key=lambda r: r[val])
        shown = "" if metric == "acc" else f" {metric}"
        line += f", best val{shown} {best[val]:.4f} at epoch {best['epoch']} (test {best[test]:.4f})"
    if peaks:
        shown = ", ".join("?" if p is None else format_bytes(p) for p in peaks)
        line += f"; peak memory per rank ({peak_kind}): {shown}"
        if predicted and len(predicted) == len(peaks):
            ratios = ", ".join("?" if not m else f"{p / m:.2f}x" for p, m in zip(predicted, peaks))
            line += f" (predicted {', '.join(format_bytes(p) for p in predicted)}: {ratios})"
    return line
