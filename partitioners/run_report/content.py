"""What the run report says: its header, summary figures, sections (charts, tables, notes),
computed once from a :class:`~partitioners.run_report.metrics_file.RunMetrics` (and a partition
folder's metadata) and drawn by ``html.py`` or ``png.py``. Torch-free.

Byte and time figures are rank 0's (the metrics file is rank 0's): the bytes it sent, its step's
compute and communication time.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Sequence

from ..format import PartitionMeta
from .charts import BarChart, Chart, LineChart, Series
from .metrics_file import RunMetrics
from .task import BOUNDED, SPLITS

__all__ = ["Report", "Section", "SummaryRow", "Table", "build_report"]

NOT_RECORDED = "not recorded"


@dataclass(frozen=True, slots=True)
class Table:
    columns: tuple[str, ...]
    rows: Sequence[tuple[str, ...]]
    caption: str = ""


@dataclass(frozen=True, slots=True)
class Section:
    key: str
    """A stable id (the HTML section's ``id``)."""
    title: str
    charts: Sequence[Chart] = ()
    tables: Sequence[Table] = ()
    notes: Sequence[str] = ()
    """What is missing or how to read the charts."""


@dataclass(frozen=True, slots=True)
class SummaryRow:
    key: str
    """A stable id (``data-key`` in the HTML)."""
    label: str
    text: str
    value: float | None = None
    """The figure in base units (seconds, bytes, a fraction, a count); None when not recorded."""


@dataclass(frozen=True, slots=True)
class Report:
    title: str
    source: str
    """The metrics file."""
    header: Sequence[tuple[str, str]]
    summary: Sequence[SummaryRow]
    sections: Sequence[Section]
    notes: Sequence[str] = ()
    """Warnings of the reader and the fields the records lack."""
    config: dict[str, Any] | None = field(default=None, repr=False)


# ----------------------------------------------------------------------------------- formatting
def fmt_ms(seconds: float | None) -> str:
    return NOT_RECORDED if seconds is None else f"{seconds * 1e3:,.1f} ms"


def fmt_acc(value: float | None) -> str:
    return NOT_RECORDED if value is None else f"{value:.4f}"


def fmt_metric(metric: str, value: float | None) -> str:
    """A metric's value: 4 decimals for one in [0, 1] (an accuracy), 5 significant digits else."""
    if value is None or metric in BOUNDED:
        return fmt_acc(value)
    return f"{value:.5g}"


_BYTE_UNITS = (("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10), ("B", 1))


def byte_unit(largest: float) -> tuple[str, float]:
    """The unit (name, bytes) to show values up to ``largest`` bytes in."""
    for name, size in _BYTE_UNITS:
        if largest >= size:
            return name, size
    return "B", 1


def fmt_bytes(n: float | None) -> str:
    if n is None:
        return NOT_RECORDED
    name, size = byte_unit(n)
    return f"{n:,.0f} B" if size == 1 else f"{n / size:,.2f} {name} ({n:,.0f} B)"


def _mean(values: Sequence[float | None]) -> float | None:
    got = [v for v in values if v is not None]
    return sum(got) / len(got) if got else None


def _lookup(config: dict[str, Any] | None, *path: str) -> tuple[bool, Any]:
    """``(found, value)`` of ``config[path[0]][path[1]]...``."""
    node: Any = config
    for key in path:
        if not isinstance(node, dict) or key not in node:
            return False, None
        node = node[key]
    return True, node


def _scalar_text(found: bool, value: Any) -> str:
    if not found:
        return NOT_RECORDED
    if value is None:
        return "none"
    if isinstance(value, (dict, list)):
        return json.dumps(value, sort_keys=True)
    return str(value)


def _config_int(config: dict[str, Any] | None, *paths: tuple[str, ...]) -> int | None:
    for path in paths:
        found, value = _lookup(config, *path)
        if found and isinstance(value, int) and not isinstance(value, bool) and value >= 0:
            return value
    return None


# ----------------------------------------------------------------------------------- context
@dataclass(frozen=True, slots=True)
class _Run:
    metrics: RunMetrics
    meta: PartitionMeta | None

    @property
    def epochs(self) -> list[int]:
        return [e["epoch"] for e in self.metrics.epochs]

    def num_edges(self) -> tuple[int | None, str]:
        if self.meta is not None:
            return self.meta.num_edges, f"partition {self.meta.path}"
        n = _config_int(self.metrics.config, ("data", "num_edges"), ("num_edges",))
        return (n, "the config record") if n is not None else (None, "")

    def num_parts(self) -> int | None:
        if self.meta is not None:
            return self.meta.num_parts
        return _config_int(self.metrics.config, ("data", "num_parts"), ("num_parts",), ("world_size",))


# ----------------------------------------------------------------------------------- header
def _epoch_range(epochs: Sequence[int]) -> str:
    return f"epoch {epochs[0]}" if len(epochs) == 1 else f"epoch {epochs[0]} to {epochs[-1]}"


def _header(run: _Run) -> list[tuple[str, str]]:
    cfg = run.metrics.config
    rows = [
        ("model", _scalar_text(*_lookup(cfg, "model", "model"))),
        ("layers", _scalar_text(*_lookup(cfg, "model", "layers"))),
        ("hidden", _scalar_text(*_lookup(cfg, "model", "hidden"))),
    ]
    found, heads = _lookup(cfg, "model", "heads")
    if found and heads is not None:
        rows.append(("heads", _scalar_text(found, heads)))
    schedule = _scalar_text(*_lookup(cfg, "trainer", "schedule", "pipeline"))
    extras = []
    for key in ("halo_dtype", "boundary_sample_rate", "simulate_link", "stale_smoothing"):
        found, value = _lookup(cfg, "trainer", "schedule", key)
        if found and value is not None and not (key == "boundary_sample_rate" and value == 1.0):
            extras.append(f"{key} {_scalar_text(found, value)}")
    rows.append(("schedule (pipeline)", schedule + (f" ({', '.join(extras)})" if extras else "")))
    parts = run.num_parts()
    rows.append(("parts", str(parts) if parts is not None else f"{NOT_RECORDED} (pass --partition DIR)"))
    found, requested = _lookup(cfg, "epochs")
    epochs = run.epochs
    recorded = f"{len(epochs)} recorded ({_epoch_range(epochs)})"
    rows.append(("epochs", f"{_scalar_text(found, requested)} requested, {recorded}" if found else recorded))
    found, opt = _lookup(cfg, "trainer", "optim", "optimizer")
    if found:
        rows.append(("optimizer", f"{_scalar_text(found, opt)}, lr "
                                  f"{_scalar_text(*_lookup(cfg, 'trainer', 'optim', 'lr'))}"))
    found, data = _lookup(cfg, "data", "data")
    if found:
        rows.append(("data", _scalar_text(found, data)))
    rows.append(("task", _task_text(run)))
    return rows


def _task_text(run: _Run) -> str:
    """The task, its loss and what the best epoch is chosen by."""
    t = run.metrics.task
    what = t.name or ", ".join(t.metrics) + " (found from the epoch records' fields)"
    loss = f", loss {t.loss}" if t.loss else ""
    return f"{what}{loss}; best epoch by {t.select_key} ({t.direction})"


# ----------------------------------------------------------------------------------- summary
def _first_and_rest(values: list[float | None]) -> tuple[float | None, float | None]:
    return (values[0] if values else None), (_mean(values[1:]) if len(values) > 1 else None)


def _best_val(run: _Run) -> dict[str, Any] | None:
    """The epoch of the best validation value of the selection metric (the first of equal ones,
    as ``--select best-val`` picks it)."""
    t = run.metrics.task
    key, best = t.select_key, None
    for rec in run.metrics.epochs:
        val = rec.get(key)
        if val is not None and (best is None or (val < best[key] if t.lower_is_better else val > best[key])):
            best = rec
    return best


def _final_eval(run: _Run) -> dict[str, Any] | None:
    scored = [r for r in run.metrics.epochs if run.metrics.evaluated(r)]
    return scored[-1] if scored else None


def epoch_comm_bytes(rec: dict[str, Any]) -> float | None:
    """An epoch's bytes on the wire: ``comm_bytes``, else halo + all-reduce bytes."""
    if rec.get("comm_bytes") is not None:
        return rec["comm_bytes"]
    if rec.get("halo_bytes") is not None and rec.get("allreduce_bytes") is not None:
        return rec["halo_bytes"] + rec["allreduce_bytes"]
    return None


def _total(values: Sequence[float | None]) -> tuple[float | None, int]:
    """``(sum of the values present or None, number missing)``."""
    got = [v for v in values if v is not None]
    return (sum(got) if got else None), len(values) - len(got)


def _summary(run: _Run) -> list[SummaryRow]:
    m = run.metrics
    epochs = run.epochs
    rows = [SummaryRow("epochs", "epochs recorded", f"{len(epochs)} ({_epoch_range(epochs)})",
                       float(len(epochs)))]
    times = m.values("epoch_time_s")
    first, rest = _first_and_rest(times)
    mean_all = _mean(times)
    rows += [
        SummaryRow("first_epoch_time_s", f"first epoch's time (epoch {epochs[0]}: includes compilation "
                                         f"and warm-up)", fmt_ms(first), first),
        SummaryRow("mean_epoch_time_s", "mean epoch time, all epochs", fmt_ms(mean_all), mean_all),
        SummaryRow("mean_epoch_time_after_first_s", "mean epoch time, excluding the first",
                   fmt_ms(rest) if len(epochs) > 1 else "— (one epoch)", rest),
    ]
    steady = rest if rest is not None else (mean_all if len(epochs) == 1 else None)
    num_edges, source = run.num_edges()
    rows.append(SummaryRow("num_edges", "edges of the graph",
                           f"{num_edges:,} (from the {source})" if num_edges is not None
                           else f"{NOT_RECORDED} (pass --partition DIR)",
                           None if num_edges is None else float(num_edges)))
    if num_edges is not None and steady:
        basis = "excluding the first" if rest is not None else "its only epoch"
        rate = num_edges / steady
        rows.append(SummaryRow("edges_per_s", "edges per second", f"{rate:,.0f} (edges / mean epoch time, "
                                                                  f"{basis})", rate))
    else:
        why = "no graph edge count" if num_edges is None else "no epoch time"
        rows.append(SummaryRow("edges_per_s", "edges per second", f"{NOT_RECORDED} ({why})"))
    eval_mean = _mean(m.values("eval_time_s"))
    if eval_mean is not None:
        rows.append(SummaryRow("mean_eval_time_s", "mean evaluation time (not in the epoch time)",
                               fmt_ms(eval_mean), eval_mean))
    rows += _score_rows(run)
    losses = [(e["epoch"], e["train_loss"]) for e in m.epochs if e.get("train_loss") is not None]
    rows.append(SummaryRow("final_train_loss", f"final training loss (epoch {losses[-1][0]})" if losses
                           else "final training loss", fmt_acc(losses[-1][1]) if losses else NOT_RECORDED,
                           losses[-1][1] if losses else None))
    for key, label, values in (
            ("total_comm_bytes", "bytes on the wire, total (rank 0 sent)", [epoch_comm_bytes(e) for e in m.epochs]),
            ("total_halo_bytes", "halo bytes, total", m.values("halo_bytes")),
            ("total_allreduce_bytes", "gradient all-reduce bytes, total", m.values("allreduce_bytes"))):
        total, lacking = _total(values)
        text = fmt_bytes(total) + (f" ({lacking} epoch(s) not recorded)" if lacking and total is not None else "")
        rows.append(SummaryRow(key, label, text, total))
    return rows


def _score_rows(run: _Run) -> list[SummaryRow]:
    """The best validation epoch by the selection metric, its validation and test values, and the
    last evaluated epoch's value of every metric on every mask."""
    t = run.metrics.task
    m, word = t.select_metric, t.word(t.select_metric)
    by = "" if m == "acc" else f" (by {t.select_key}, {t.direction})"
    best = _best_val(run)
    val, test = (best.get(f"val_{m}"), best.get(f"test_{m}")) if best else (None, None)
    rows = [
        SummaryRow("best_val_epoch", f"best validation epoch{by}",
                   str(best["epoch"]) if best else f"{NOT_RECORDED} (no validation {word})",
                   float(best["epoch"]) if best else None),
        SummaryRow(f"best_val_{m}", f"best validation {word}", fmt_metric(m, val), val),
        SummaryRow(f"best_test_{m}", f"test {word} at the best validation epoch", fmt_metric(m, test), test),
    ]
    final = _final_eval(run)
    at = f" (epoch {final['epoch']})" if final else ""
    for metric in t.metrics:
        for split in SPLITS:
            value = final.get(f"{split}_{metric}") if final else None
            rows.append(SummaryRow(f"final_{split}_{metric}", f"final {split} {t.word(metric)}{at}",
                                   fmt_metric(metric, value), value))
    return rows


# ----------------------------------------------------------------------------------- sections
def _lacking(run: _Run, *names: str) -> list[str]:
    n = len(run.metrics.epochs)
    return [f"{name} is missing from {run.metrics.missing[name]} of {n} epoch record(s)"
            for name in names if run.metrics.missing.get(name)]


def _points(run: _Run, name: str) -> Series | None:
    pts = [(float(e["epoch"]), e[name]) for e in run.metrics.epochs if e.get(name) is not None]
    if not pts:
        return None
    return Series(name=name, xs=[x for x, _ in pts], ys=[y for _, y in pts])


def _epoch_span(run: _Run) -> tuple[float, float]:
    return float(run.epochs[0]), float(run.epochs[-1])


def _loss_section(run: _Run) -> Section:
    s = _points(run, "train_loss")
    if s is None:
        return Section("loss", "Training loss", notes=["no training loss recorded (field train_loss)"])
    chart = LineChart("training loss per epoch", "epoch", "loss", [Series("train loss", s.ys, s.xs)],
                      x_range=_epoch_span(run))
    return Section("loss", "Training loss", charts=[chart], notes=_lacking(run, "train_loss"))


def _metrics_title(run: _Run) -> str:
    t = run.metrics.task
    if t.metrics == ("acc",) and t.name is None:
        return "Accuracy (micro-F1 for multi-label)"
    words = [t.word(m) for m in t.metrics]
    return ", ".join([words[0][:1].upper() + words[0][1:], *words[1:]])


def _metrics_section(run: _Run) -> Section:
    """A chart of each of the task's metrics (train/val/test at the evaluated epochs); its key is
    ``accuracy`` for a run whose first metric is the accuracy, ``metrics`` otherwise."""
    t = run.metrics.task
    key, title = ("accuracy" if t.metrics[0] == "acc" else "metrics"), _metrics_title(run)
    charts: list[Chart] = []
    for metric in t.metrics:
        series = [Series(split, s.ys, s.xs) for split in SPLITS if (s := _points(run, f"{split}_{metric}"))]
        if series:
            word = t.word(metric)
            charts.append(LineChart(f"{word} at the evaluated epochs", "epoch", word, series,
                                    y_range=(0.0, 1.0) if metric in BOUNDED else None, x_range=_epoch_span(run)))
    if not charts:
        fields = "/".join(t.fields())
        return Section(key, title, notes=[f"no evaluated epoch (fields {fields}; gnn_dist.train --eval-every N)"])
    count = sum(map(run.metrics.evaluated, run.metrics.epochs))
    notes = [f"{count} of {len(run.metrics.epochs)} epochs evaluated"]
    if t.select_metric != "acc":
        notes.append(f"the best epoch is the one of the {'lowest' if t.lower_is_better else 'highest'} "
                     f"{t.select_key} (the selection metric, from {t.source})")
    return Section(key, title, charts=charts, notes=notes + _lacking(run, *t.fields()))


def _clip_first(totals: list[float | None], lines: Sequence[Sequence[float | None]]) -> float | None:
    """A y-axis top that cuts the first bar when it is > 3x every other (compilation)."""
    rest = [v for v in totals[1:] if v is not None] + [v for ln in lines for v in ln[1:] if v is not None]
    if not rest or totals[0] is None or max(rest) <= 0 or totals[0] <= 3 * max(rest):
        return None
    return 1.25 * max(rest)


def _time_section(run: _Run) -> Section:
    m = run.metrics
    cats = [str(e) for e in run.epochs]
    ms = [[None if v is None else v * 1e3 for v in m.values(name)]
          for name in ("compute_time_s", "exposed_comm_s", "epoch_time_s", "comm_time_s")]
    compute, exposed, total, comm = ms
    notes = _lacking(run, "compute_time_s", "exposed_comm_s", "epoch_time_s", "comm_time_s")
    title = "Time per epoch"
    if m.has("compute_time_s") and m.has("exposed_comm_s"):
        series = [Series("compute", compute), Series("exposed communication", exposed)]
        other = [None if None in (t, c, x) else max(0.0, t - c - x) for t, c, x in zip(total, compute, exposed)]
        if any(o is not None and t and o > 0.05 * t for o, t in zip(other, total)):
            series.append(Series("other (epoch time not in the step)", other))
        totals = [None if c is None and x is None else (c or 0.0) + (x or 0.0) + (o or 0.0)
                  for c, x, o in zip(compute, exposed, other)]
    elif m.has("epoch_time_s"):
        series, totals = [Series("epoch (not split)", total)], total
        notes.append("compute_time_s/exposed_comm_s not recorded: the epoch time is not split")
    else:
        return Section("time", title, notes=["no time recorded (fields epoch_time_s, compute_time_s, "
                                             "exposed_comm_s)"])
    lines = [Series("communication, total (overlapped included)", comm)] if m.has("comm_time_s") else []
    y_max = _clip_first(totals, [ln.ys for ln in lines])
    if y_max is not None:
        notes.append(f"epoch {run.epochs[0]} ({fmt_ms(total[0] / 1e3 if total[0] is not None else None)}: "
                     f"compilation and warm-up) is cut at the top of the chart")
    notes.append("exposed communication: time the step waited for exchanges; the total also "
                 "counts exchanges hidden behind compute")
    chart = BarChart("time per epoch (rank 0)", "epoch", "time (ms)", cats, series, stacked=True,
                     lines=lines, y_max=y_max)
    return Section("time", title, charts=[chart], notes=notes)


def _bytes_section(run: _Run) -> Section:
    m = run.metrics
    charts: list[Chart] = []
    notes = _lacking(run, "bytes_per_layer", "halo_bytes", "allreduce_bytes")
    lists = [v for v in m.values("bytes_per_layer") if v]
    if lists:
        depth = max(len(v) for v in lists)
        means = [_mean([v[i] for v in lists if i < len(v)]) or 0.0 for i in range(depth)]
        unit, size = byte_unit(max(means))
        charts.append(BarChart("halo bytes per layer, mean per epoch (rank 0 sent)", "layer",
                               unit, [str(i) for i in range(depth)],
                               [Series("halo bytes", [v / size for v in means])]))
        if depth > 1 and means[0] == 0:
            notes.append("layer 0 sends nothing when the halo rows' input features were fetched once "
                         "(static halo)")
    else:
        notes.append("no per-layer bytes recorded (field bytes_per_layer)")
    cats = [str(e) for e in run.epochs]
    if m.has("halo_bytes") or m.has("allreduce_bytes"):
        halo, grad = m.values("halo_bytes"), m.values("allreduce_bytes")
        series_raw = [("halo exchange", halo), ("gradient all-reduce", grad)]
    elif m.has("comm_bytes"):
        series_raw = [("communication", m.values("comm_bytes"))]
    else:
        series_raw = []
        notes.append("no bytes per epoch recorded (fields halo_bytes, allreduce_bytes, comm_bytes)")
    if series_raw:
        largest = max(sum(v for v in vals if v is not None) for vals in zip(*(s for _, s in series_raw)))
        unit, size = byte_unit(largest)
        charts.append(BarChart("bytes on the wire per epoch (rank 0 sent)", "epoch", unit, cats,
                               [Series(name, [None if v is None else v / size for v in vals])
                                for name, vals in series_raw], stacked=True))
    return Section("bytes", "Bytes on the wire", charts=charts, notes=notes)


def _number_text(value: Any) -> str:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return "—" if value is None else str(value)
    if isinstance(value, int):
        return f"{value:,}"
    return f"{value:.4g}" if math.isfinite(value) else str(value)


_QUALITY_KEYS = (("edge_cut", "edge cut (edges between parts)"),
                 ("comm_volume", "communication volume (halo rows per exchange)"),
                 ("max_halo_fraction", "halo fraction, max"), ("mean_halo_fraction", "halo fraction, mean"),
                 ("node_balance", "node balance (max/mean)"), ("edge_balance", "edge balance (max/mean)"),
                 ("train_balance", "training-node balance (max/mean)"), ("empty_parts", "empty parts"))


def _partition_section(run: _Run) -> Section | None:
    meta = run.meta
    if meta is None:
        return None
    parts = meta.parts
    cats = [str(pm.part_id) for pm in parts]
    rows_chart = BarChart("rows per part", "part", "rows", cats,
                          [Series("inner nodes", [float(pm.num_inner) for pm in parts]),
                           Series("halo rows", [float(pm.num_halo) for pm in parts])])
    edges_chart = BarChart("local edges per part", "part", "edges", cats,
                           [Series("local edges", [float(pm.num_local_edges) for pm in parts])])
    per_part = Table(("part", "inner nodes", "halo rows", "local edges", "training nodes", "halo / inner"),
                     [(str(pm.part_id), f"{pm.num_inner:,}", f"{pm.num_halo:,}", f"{pm.num_local_edges:,}",
                       f"{pm.num_train:,}", f"{pm.num_halo / pm.num_inner:.3f}" if pm.num_inner else "—")
                      for pm in parts], caption="per part")
    q = meta.quality if isinstance(meta.quality, dict) else {}
    quality = Table(("figure", "value"),
                    [("folder", str(meta.path)), ("graph", f"{meta.num_nodes:,} nodes, {meta.num_edges:,} edges"),
                     ("method", f"{meta.method} {json.dumps(meta.method_params, sort_keys=True)}")]
                    + [(label, _number_text(q[key])) for key, label in _QUALITY_KEYS if key in q],
                    caption="partition quality (partition.json)")
    notes = [] if q else ["partition.json records no quality report"]
    return Section("partition", f"Partition: {meta.num_parts} parts", charts=[rows_chart, edges_chart],
                   tables=[per_part, quality], notes=notes)


SECTIONS: tuple[Callable[[_Run], Section | None], ...] = (
    _loss_section, _metrics_section, _time_section, _bytes_section, _partition_section)
"""The report's sections in order; a builder returns None to leave its section out."""


def _notes(run: _Run) -> list[str]:
    m = run.metrics
    notes = list(m.warnings)
    if m.config is None:
        notes.append("the file has no config record: model, layers, hidden and schedule are not known")
    if m.missing:
        n = len(m.epochs)
        notes.append("fields missing from epoch records: " + ", ".join(
            f"{name} ({count} of {n})" for name, count in m.missing.items()))
    return notes


def build_report(metrics: RunMetrics, meta: PartitionMeta | None = None) -> Report:
    """The report of ``metrics`` (with ``meta``: the partition's section and its edge count)."""
    run = _Run(metrics, meta)
    sections = [s for build in SECTIONS if (s := build(run)) is not None]
    return Report(title=f"gnn-dist run report: {Path(metrics.path).name}", source=metrics.path,
                  header=_header(run), summary=_summary(run), sections=sections, notes=_notes(run),
                  config=metrics.config)
