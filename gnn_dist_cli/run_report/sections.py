"""The run report's sections, in order: training loss, the task's metrics, time and bytes per
epoch, and the partition (charts, tables and the notes that say what is missing). Torch-free."""

from __future__ import annotations

import json
import math
from typing import Any, Callable, Sequence

from .charts import BarChart, Chart, LineChart, Series
from .document import Section, Table
from .run_view import RunView, mean
from .task import BOUNDED, SPLITS
from .text import byte_unit, fmt_ms


def _lacking(run: RunView, *names: str) -> list[str]:
    n = len(run.metrics.epochs)
    return [f"{name} is missing from {run.metrics.missing[name]} of {n} epoch record(s)"
            for name in names if run.metrics.missing.get(name)]


def _points(run: RunView, name: str) -> Series | None:
    pts = [(float(e["epoch"]), e[name]) for e in run.metrics.epochs if e.get(name) is not None]
    if not pts:
        return None
    return Series(name=name, xs=[x for x, _ in pts], ys=[y for _, y in pts])


def _epoch_span(run: RunView) -> tuple[float, float]:
    return float(run.epochs[0]), float(run.epochs[-1])


def _loss_section(run: RunView) -> Section:
    s = _points(run, "train_loss")
    if s is None:
        return Section("loss", "Training loss", notes=["no training loss recorded (field train_loss)"])
    chart = LineChart("training loss per epoch", "epoch", "loss", [Series("train loss", s.ys, s.xs)],
                      x_range=_epoch_span(run))
    return Section("loss", "Training loss", charts=[chart], notes=_lacking(run, "train_loss"))


def _metrics_title(run: RunView) -> str:
    t = run.metrics.task
    if t.metrics == ("acc",) and t.name is None:
        return "Accuracy (micro-F1 for multi-label)"
    words = [t.word(m) for m in t.metrics]
    return ", ".join([words[0][:1].upper() + words[0][1:], *words[1:]])


def _metrics_section(run: RunView) -> Section:
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


def _time_section(run: RunView) -> Section:
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


def _bytes_section(run: RunView) -> Section:
    m = run.metrics
    charts: list[Chart] = []
    notes = _lacking(run, "bytes_per_layer", "halo_bytes", "allreduce_bytes")
    lists = [v for v in m.values("bytes_per_layer") if v]
    if lists:
        depth = max(len(v) for v in lists)
        means = [mean([v[i] for v in lists if i < len(v)]) or 0.0 for i in range(depth)]
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


def _partition_section(run: RunView) -> Section | None:
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


SECTIONS: tuple[Callable[[RunView], Section | None], ...] = (
    _loss_section, _metrics_section, _time_section, _bytes_section, _partition_section)
"""The report's sections in order; a builder returns None to leave its section out."""
