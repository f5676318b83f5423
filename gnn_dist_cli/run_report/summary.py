"""The run report's summary figures: epoch times and edges per second, the best and final
scores, the final loss, the run-queue wait and the bytes on the wire. Torch-free."""

from __future__ import annotations

from typing import Any, Sequence

from .document import SummaryRow
from .run_view import RunView, lookup, mean
from .task import SPLITS
from .text import NOT_RECORDED, epoch_range, fmt_acc, fmt_bytes, fmt_metric, fmt_ms


def _first_and_rest(values: list[float | None]) -> tuple[float | None, float | None]:
    return (values[0] if values else None), (mean(values[1:]) if len(values) > 1 else None)


def _best_val(run: RunView) -> dict[str, Any] | None:
    """The epoch of the best validation value of the selection metric (the first of equal ones,
    as ``--select best-val`` picks it)."""
    t = run.metrics.task
    key, best = t.select_key, None
    for rec in run.metrics.epochs:
        val = rec.get(key)
        if val is not None and (best is None or (val < best[key] if t.lower_is_better else val > best[key])):
            best = rec
    return best


def _final_eval(run: RunView) -> dict[str, Any] | None:
    """The evaluated epoch whose weights the run ends with, as its ``final:`` line reports them:
    the best validation epoch with ``select = "best-val"`` (the run keeps its weights), else the
    last evaluated one."""
    scored = [r for r in run.metrics.epochs if run.metrics.evaluated(r)]
    if not scored:
        return None
    if lookup(run.metrics.config, "trainer", "selection", "select") == (True, "best-val"):
        return _best_val(run) or scored[-1]
    return scored[-1]


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


def summary_rows(run: RunView) -> list[SummaryRow]:
    """The summary's rows, in order: epochs and their times, edges per second, the scores, the final
    loss and the byte totals."""
    m = run.metrics
    epochs = run.epochs
    rows = [SummaryRow("epochs", "epochs recorded", f"{len(epochs)} ({epoch_range(epochs)})",
                       float(len(epochs)))]
    if m.resizes:   # an elastic job that went on with another number of ranks
        rows.append(SummaryRow("resizes", "resized (elastic job)", "; ".join(
            f"from epoch {r['epoch']}: {r['from_world_size']} -> {r['to_world_size']} ranks"
            + (f" (repartitioned: {r['repartitioned']})" if "repartitioned" in r else "") for r in m.resizes),
            float(len(m.resizes))))
    times = m.values("epoch_time_s")
    first, rest = _first_and_rest(times)
    mean_all = mean(times)
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
    eval_mean = mean(m.values("eval_time_s"))
    if eval_mean is not None:
        rows.append(SummaryRow("mean_eval_time_s", "mean evaluation time (not in the epoch time)",
                               fmt_ms(eval_mean), eval_mean))
    wait, lacking = _total(m.values("wait_cpu_s"))
    if wait is not None:
        rows.append(SummaryRow("total_wait_cpu_s", "time rank 0's threads waited on a CPU run queue in the steps, "
                               "total", fmt_ms(wait) + (f" ({lacking} epoch(s) not recorded)" if lacking else ""), wait))
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


def _score_rows(run: RunView) -> list[SummaryRow]:
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
