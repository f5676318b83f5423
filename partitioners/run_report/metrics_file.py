"""Read and check a training run's metrics file (``gnn_dist.train --metrics PATH``). Torch-free.

The file is JSON lines: a ``{"config": {...}}`` record first (the resolved run configuration),
then one record per epoch (``gnn_dist/metrics.py``). It is user input: every line is parsed and
every field this report uses is type-checked; a bad line is a :class:`MetricsFileError` naming
the file and the line. A last line cut short (a run killed while writing it: no newline at its
end, not valid JSON) is skipped with a warning. Fields an epoch record lacks are recorded (an
older file, another schedule) so the report can say what is missing.

Which metric fields an epoch record has (``val_acc``; a regression's ``val_mse``, ...) is the
run's task (:mod:`.task`): the config record's ``task``, else what the records hold.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .task import RunTask, detect_task, recorded_task

__all__ = ["EPOCH_FIELDS", "MetricsFileError", "RunMetrics", "evaluated", "read_metrics"]


class MetricsFileError(ValueError):
    """The metrics file is missing, unreadable as JSON lines, or holds a bad record (exit code 2)."""


def _number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _check_real(value: Any) -> float | None:
    """A number (non-finite: None, as the writer records NaN), or None; else TypeError."""
    if value is None:
        return None
    if not _number(value):
        raise TypeError("a number or null")
    return float(value) if math.isfinite(value) else None


def _check_nonnegative(value: Any) -> float | None:
    v = _check_real(value)
    if v is not None and v < 0:
        raise TypeError("a number >= 0 or null")
    return v


def _check_count_list(value: Any) -> list[float] | None:
    if value is None:
        return None
    if not isinstance(value, list) or not all(_number(v) and math.isfinite(v) and v >= 0 for v in value):
        raise TypeError("a list of numbers >= 0, or null")
    return [float(v) for v in value]


EPOCH_FIELDS: dict[str, Any] = {
    "train_loss": _check_real,
    "epoch_time_s": _check_nonnegative,
    "compute_time_s": _check_nonnegative,
    "comm_time_s": _check_nonnegative,
    "exposed_comm_s": _check_nonnegative,
    "eval_time_s": _check_nonnegative,
    "halo_bytes": _check_nonnegative,
    "allreduce_bytes": _check_nonnegative,
    "comm_bytes": _check_nonnegative,
    "bytes_per_layer": _check_count_list,
    "staleness": _check_nonnegative,
    "feature_hit_rate": _check_real,
}
"""Field of an epoch record the report reads -> its check (value -> cleaned value, or TypeError
naming what was expected), besides the metric fields of the run's task (numbers or null, like
``train_loss``). Other fields are ignored."""


@dataclass(frozen=True, slots=True)
class RunMetrics:
    """A metrics file's records, checked."""

    path: str
    config: dict[str, Any] | None
    """The config record's object, or None when the file has none."""
    epochs: tuple[dict[str, Any], ...]
    """One dict per epoch record, in file order (epoch numbers increasing): ``"epoch"`` and the
    :data:`EPOCH_FIELDS` and metric fields (``task.fields()``) the record has, cleaned (numbers
    as floats, NaN as None)."""
    task: RunTask = field(default_factory=lambda: detect_task(set()))
    """The run's task: its metrics, and the one the best epoch is chosen by (:mod:`.task`)."""
    warnings: tuple[str, ...] = ()
    """What was skipped (a truncated last line, records that are not epoch records)."""
    missing: dict[str, int] = field(default_factory=dict)
    """:data:`EPOCH_FIELDS` or metric field name -> number of epoch records without it (only
    names with > 0; ``eval_time_s`` and the metrics count only in evaluated epochs)."""

    def values(self, name: str) -> list[float | None]:
        """Field ``name`` of every epoch record (None where absent or null)."""
        return [rec.get(name) for rec in self.epochs]

    def has(self, name: str) -> bool:
        """Whether some epoch record has a value (not null) for ``name``."""
        return any(rec.get(name) is not None for rec in self.epochs)


    def evaluated(self, rec: dict[str, Any]) -> bool:
        """Whether the epoch of record ``rec`` (one of :attr:`epochs`) was evaluated."""
        return evaluated(rec, self.task)


def evaluated(rec: dict[str, Any], task: RunTask) -> bool:
    """Whether the epoch of record ``rec`` was evaluated (has a value of one of ``task``'s metrics)."""
    return any(rec.get(k) is not None for k in task.fields())


def _short(value: Any) -> str:
    text = json.dumps(value)
    return text if len(text) <= 40 else text[:37] + "..."


def _epoch_number(where: str, rec: dict[str, Any]) -> int:
    epoch = rec["epoch"]
    if isinstance(epoch, bool) or not isinstance(epoch, int) or epoch < 0:
        raise MetricsFileError(f"{where}: field 'epoch' must be an integer >= 0, got {_short(epoch)}")
    return epoch


def _epoch_record(where: str, rec: dict[str, Any], checks: dict[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {"epoch": rec["epoch"]}
    for name, check in checks.items():
        if name not in rec:
            continue
        try:
            out[name] = check(rec[name])
        except TypeError as exc:
            raise MetricsFileError(f"{where}: field {name!r} must be {exc}, got {_short(rec[name])}") from None
    return out


def _parse_line(where: str, raw: bytes) -> Any:
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        raise MetricsFileError(f"{where}: not UTF-8 text; a metrics file is JSON lines "
                               f"(gnn_dist.train --metrics PATH)") from None
    try:
        return json.loads(text)
    except RecursionError:
        raise MetricsFileError(f"{where}: not valid JSON (nested too deeply)") from None
    except ValueError as exc:  # JSONDecodeError, integers of too many digits
        raise MetricsFileError(f"{where}: not valid JSON ({exc}); every line of a metrics file "
                               f"is one JSON object (gnn_dist.train --metrics PATH)") from None


def read_metrics(path: str | Path) -> RunMetrics:
    """Read and check the metrics file ``path``.

    Raises:
        MetricsFileError: the file is missing or a folder, a line is not a JSON object (other than
            a truncated last one), a field has the wrong type, epoch numbers do not increase, a
            config record is not the first record, or there is no epoch record.
        OSError: the file exists but cannot be read.
    """
    p = Path(path)
    if not p.exists():
        raise MetricsFileError(f"{path}: no such metrics file (write one with gnn_dist.train --metrics PATH)")
    if p.is_dir():
        raise MetricsFileError(f"{path}: is a folder; give the metrics file (JSON lines) that "
                               f"gnn_dist.train --metrics PATH wrote")
    data = p.read_bytes()
    lines = data.split(b"\n")
    config: dict[str, Any] | None = None
    raws: list[tuple[str, dict[str, Any]]] = []   # (where, record) of each epoch record
    warnings: list[str] = []
    ignored: list[int] = []
    seen_records = False
    for number, raw in enumerate(lines, start=1):
        if not raw.strip():
            continue
        where = f"{path} line {number}"
        try:
            rec = _parse_line(where, raw)
        except MetricsFileError:
            if number == len(lines):  # no newline after it: cut short by a crash
                warnings.append(f"{where}: skipped a truncated last line (the run was stopped while "
                                f"writing it)")
                continue
            raise
        if not isinstance(rec, dict):
            raise MetricsFileError(f"{where}: expected a JSON object, got {type(rec).__name__}")
        if "epoch" in rec:
            epoch = _epoch_number(where, rec)
            if raws and epoch <= raws[-1][1]["epoch"]:
                raise MetricsFileError(f"{where}: epoch {epoch} follows epoch {raws[-1][1]['epoch']}; "
                                       f"epoch numbers must increase (is this several runs' files joined?)")
            raws.append((where, rec))
        elif "config" in rec:
            if seen_records:
                raise MetricsFileError(f"{where}: a config record after the first record; a metrics file "
                                       f"has one, on its first line (is this several runs' files joined?)")
            if not isinstance(rec["config"], dict):
                raise MetricsFileError(f"{where}: field 'config' must be an object, got {_short(rec['config'])}")
            config = rec["config"]
        else:
            ignored.append(number)
        seen_records = True
    if not raws:
        raise MetricsFileError(f"{path}: no epoch records (a record with an 'epoch' field); did the "
                               f"run train an epoch?")
    task, problem = recorded_task(config)
    if task is None:
        task = detect_task({k for _, r in raws for k in r})
        if problem is not None:
            warnings.append(f"{path}: {problem}; the metrics are found from the epoch records' fields")
    checks = {**EPOCH_FIELDS, **{name: _check_real for name in task.fields()}}
    epochs = [_epoch_record(where, r, checks) for where, r in raws]
    if ignored:
        shown = ", ".join(map(str, ignored[:5])) + (", ..." if len(ignored) > 5 else "")
        warnings.append(f"{path}: ignored {len(ignored)} record(s) that are neither the config nor an "
                        f"epoch record (line {shown})")
    only_evaluated = {"eval_time_s", *task.fields()}   # the other epochs have no such figure
    missing = {name: n for name in checks
               if (n := sum(name not in e and (name not in only_evaluated or evaluated(e, task)) for e in epochs))}
    return RunMetrics(path=str(path), config=config, epochs=tuple(epochs), warnings=tuple(warnings),
                      missing=missing, task=task)
