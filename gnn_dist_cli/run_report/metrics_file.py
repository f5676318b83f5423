"""Read and check a training run's metrics file (``gnn_dist.train --metrics PATH``). Torch-free.

The file is JSON lines: a ``{"config": {...}}`` record first (the resolved run configuration),
then one record per epoch (``gnn_dist/metrics.py``). It is user input: every line is parsed and
every field this report uses is type-checked; a bad line is a :class:`MetricsFileError` naming
the file and the line. A last line cut short (a run killed while writing it: no newline at its
end, not valid JSON) is skipped with a warning. Fields an epoch record lacks are recorded (an
older file, another schedule) so the report can say what is missing.

Which metric fields an epoch record has (``val_acc``; a regression's ``val_mse``, ...) is the
run's task (:mod:`.task`): the config record's ``task``, else what the records hold.

Bounds (the file may be hostile): a line may hold :data:`MAX_LINE_BYTES` (1 MiB; the writer's are
a few KB), read one at a time; a number the report uses must lie within
``±``:data:`MAX_MAGNITUDE` (1e100, so sums, spans and ratios of them stay finite) and an epoch
number within 0 to :data:`MAX_EPOCH`; a number literal that overflows a float (``1e400``, 4,000
digits) or an integer of more than :data:`MAX_INT_DIGITS` digits is never converted. Any of
these is one :class:`MetricsFileError` naming the file, the line and the field. JSON's ``NaN`` and
``Infinity`` stay what the writer's null is: no value.
"""

from __future__ import annotations

import json
import math
import dataclasses
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterator

from .task import RunTask, detect_task, recorded_task

__all__ = ["EPOCH_FIELDS", "MAX_EPOCH", "MAX_INT_DIGITS", "MAX_LINE_BYTES", "MAX_MAGNITUDE", "MetricsFileError",
           "RunMetrics", "evaluated", "read_metrics"]

MAX_LINE_BYTES = 1 << 20
"""The longest line read (bytes, without its newline); a longer one is refused unread."""
MAX_MAGNITUDE = 1e100
"""The largest absolute value of a number the report uses (a loss, a time, a byte count)."""
MAX_EPOCH = 2**53 - 1
"""The largest epoch number (exact as a float, where the charts place it)."""
MAX_INT_DIGITS = 100
"""Integer literals with more digits are never converted (Python refuses beyond 4,300)."""
_SPLITS = ("train_", "val_", "test_")
"""Prefixes of the metric fields (``{split}_{metric}``): what an epoch record keeps besides
:data:`EPOCH_FIELDS` until the task is known."""


class MetricsFileError(ValueError):
    """The metrics file is missing, unreadable as JSON lines, or holds a bad record (exit code 2)."""


class _Overflow:
    """A number literal of the file that is not converted: a float that overflows, an integer of
    too many digits (what the JSON parser gives in its place; every check refuses it)."""

    __slots__ = ("text",)

    def __init__(self, text: str) -> None:
        self.text = text

    def __str__(self) -> str:
        return self.text if len(self.text) <= 24 else f"{self.text[:12]}...({len(self.text)} characters)"


def _parse_int(text: str) -> int | _Overflow:
    return _Overflow(text) if len(text.lstrip("-")) > MAX_INT_DIGITS else int(text)


def _parse_float(text: str) -> float | _Overflow:
    value = float(text)
    return value if math.isfinite(value) else _Overflow(text)   # "1e400": not the writer's null


def _number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


_RANGE = f"within ±{MAX_MAGNITUDE:g}"


def _real(value: Any, kind: str = "") -> float | None:
    """``value`` as a float within :data:`MAX_MAGNITUDE` (non-finite: None); else TypeError saying
    what was expected (``a number{kind} or null``)."""
    if not _number(value):
        within = f" {_RANGE}" if isinstance(value, _Overflow) else ""
        raise TypeError(f"a number{kind}{within} or null")
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if not -MAX_MAGNITUDE <= value <= MAX_MAGNITUDE:   # an int is compared exactly, never converted first
        raise TypeError(f"a number{kind} {_RANGE} or null")
    if value < 0 and kind:
        raise TypeError(f"a number{kind} or null")
    return float(value)


def _check_real(value: Any) -> float | None:
    """A number (non-finite: None, as the writer records NaN), or None; else TypeError."""
    return None if value is None else _real(value)


def _check_nonnegative(value: Any) -> float | None:
    return None if value is None else _real(value, " >= 0")


def _check_count_list(value: Any) -> list[float] | None:
    if value is None:
        return None
    if not isinstance(value, list):
        raise TypeError("a list of numbers >= 0, or null")
    try:
        out = [_real(v, " >= 0") for v in value]
    except TypeError:
        raise TypeError(f"a list of numbers >= 0 {_RANGE}, or null") from None
    if None in out:
        raise TypeError("a list of numbers >= 0, or null")
    return out  # type: ignore[return-value]


EPOCH_FIELDS: dict[str, Any] = {
    "train_loss": _check_real,
    "epoch_time_s": _check_nonnegative,
    "compute_time_s": _check_nonnegative,
    "comm_time_s": _check_nonnegative,
    "exposed_comm_s": _check_nonnegative,
    "eval_time_s": _check_nonnegative,
    "wait_cpu_s": _check_nonnegative,
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
    resizes: tuple[dict[str, Any], ...] = ()
    """The resize records (an elastic job that went on with another number of ranks), in file
    order: ``epoch``, ``from_world_size``, ``to_world_size``, and ``repartitioned`` (where the
    partition came from) when it was cut for the new size (``--repartition-on-resize``)."""
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
    if isinstance(value, _Overflow):
        return str(value)
    text = json.dumps(value, default=str)
    return text if len(text) <= 40 else text[:37] + "..."


def _epoch_number(where: str, rec: dict[str, Any]) -> int:
    epoch = rec["epoch"]
    if isinstance(epoch, bool) or not isinstance(epoch, int) or not 0 <= epoch <= MAX_EPOCH:
        raise MetricsFileError(f"{where}: field 'epoch' must be an integer 0 to {MAX_EPOCH}, got {_short(epoch)}")
    return epoch


def _check_config(where: str, config: dict[str, Any]) -> None:
    """Refuse a number literal of the config record that was not converted (:class:`_Overflow`),
    naming its field (``config.data.num_edges``); iterative, whatever the nesting."""
    stack: list[tuple[str, Any]] = [("config", config)]
    while stack:
        name, node = stack.pop()
        if isinstance(node, _Overflow):
            name = name if len(name) <= 80 else name[:77] + "..."
            raise MetricsFileError(f"{where}: field {name!r} is {node}: a number beyond what this report reads "
                                   f"(integers of at most {MAX_INT_DIGITS} digits, floats that do not overflow)")
        if isinstance(node, dict):
            stack.extend((f"{name}.{k}", v) for k, v in node.items())
        elif isinstance(node, list):
            stack.extend((f"{name}[{i}]", v) for i, v in enumerate(node))


def _kept(rec: dict[str, Any]) -> dict[str, Any]:
    """The fields of an epoch record the report may read (the others are dropped as it is read)."""
    return {k: v for k, v in rec.items() if k == "epoch" or k in EPOCH_FIELDS or k.startswith(_SPLITS)}


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
        return json.loads(text, parse_int=_parse_int, parse_float=_parse_float)
    except RecursionError:
        raise MetricsFileError(f"{where}: not valid JSON (nested too deeply)") from None
    except ValueError as exc:  # JSONDecodeError, integers of too many digits
        raise MetricsFileError(f"{where}: not valid JSON ({exc}); every line of a metrics file "
                               f"is one JSON object (gnn_dist.train --metrics PATH)") from None


def read_metrics(path: str | Path) -> RunMetrics:
    """Read and check the metrics file ``path``.

    Raises:
        MetricsFileError: the file is missing or a folder, a line is longer than
            :data:`MAX_LINE_BYTES` or is not a JSON object (other than a truncated last one), a
            field has the wrong type or a number out of range, epoch numbers do not increase, a
            config record is not the first record, or there is no epoch record.
        OSError: the file exists but cannot be read.
    """
    p = Path(path)
    if not p.exists():
        raise MetricsFileError(f"{path}: no such metrics file (write one with gnn_dist.train --metrics PATH)")
    if p.is_dir():
        raise MetricsFileError(f"{path}: is a folder; give the metrics file (JSON lines) that "
                               f"gnn_dist.train --metrics PATH wrote")
    config: dict[str, Any] | None = None
    raws: list[tuple[str, dict[str, Any]]] = []   # (where, record) of each epoch record
    warnings: list[str] = []
    ignored: list[int] = []
    resizes: list[dict[str, Any]] = []
    seen_records = False
    with open(p, "rb") as f:
        for number, raw, last in _lines(f, str(path)):
            if not raw.strip():
                continue
            where = f"{path} line {number}"
            try:
                rec = _parse_line(where, raw)
            except MetricsFileError:
                if last:  # no newline after it: cut short by a crash
                    warnings.append(f"{where}: skipped a truncated last line (the run was stopped while "
                                    f"writing it)")
                    continue
                raise
            if not isinstance(rec, dict):
                raise MetricsFileError(f"{where}: expected a JSON object, got {type(rec).__name__}")
            if rec.get("event") == "resize" and _is_resize(rec):
                resizes.append({k: rec[k] for k in RESIZE_FIELDS if k in rec}
                               | ({"repartitioned": rec["repartitioned"][:MAX_NOTE_CHARS]}
                                  if isinstance(rec.get("repartitioned"), str) else {}))
            elif "epoch" in rec:
                epoch = _epoch_number(where, rec)
                if raws and epoch <= raws[-1][1]["epoch"]:
                    raise MetricsFileError(f"{where}: epoch {epoch} follows epoch {raws[-1][1]['epoch']}; "
                                           f"epoch numbers must increase (is this several runs' files joined?)")
                raws.append((where, _kept(rec)))
            elif "config" in rec:
                if seen_records:
                    raise MetricsFileError(f"{where}: a config record after the first record; a metrics file "
                                           f"has one, on its first line (is this several runs' files joined?)")
                if not isinstance(rec["config"], dict):
                    raise MetricsFileError(f"{where}: field 'config' must be an object, got "
                                           f"{_short(rec['config'])}")
                _check_config(where, rec["config"])
                config = rec["config"]
            else:
                ignored.append(number)
            seen_records = True
    return dataclasses.replace(_finish(path, config, raws, warnings, ignored), resizes=tuple(resizes))


MAX_NOTE_CHARS = 1000
"""The longest ``repartitioned`` note of a resize record kept (a path or two)."""
RESIZE_FIELDS = ("epoch", "from_world_size", "to_world_size")
"""A resize record's fields (``{"event": "resize", ...}``: an elastic job went on with another
number of ranks from that epoch; ``gnn_dist/trainer.py``)."""


def _is_resize(rec: dict[str, Any]) -> bool:
    return all(isinstance(rec.get(k), int) and not isinstance(rec.get(k), bool) and rec[k] >= 0
               for k in RESIZE_FIELDS)


def _lines(f: Any, path: str) -> Iterator[tuple[int, bytes, bool]]:
    """``(number, line without its newline, whether it had none)`` of each line of ``f``; a line
    longer than :data:`MAX_LINE_BYTES` is refused before the rest of it is read."""
    number = 0
    while raw := f.readline(MAX_LINE_BYTES + 2):
        number += 1
        ended = raw.endswith(b"\n")
        raw = raw[:-1] if ended else raw
        if len(raw.rstrip(b"\r")) > MAX_LINE_BYTES:
            raise MetricsFileError(f"{path} line {number}: longer than {MAX_LINE_BYTES} bytes (1 MiB); a metrics "
                                   f"file's records are a few KB (gnn_dist.train --metrics PATH)")
        yield number, raw, not ended


def _finish(path: str | Path, config: dict[str, Any] | None, raws: list[tuple[str, dict[str, Any]]],
            warnings: list[str], ignored: list[int]) -> RunMetrics:
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
