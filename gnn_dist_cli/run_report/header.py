"""The run report's header: what was run (model, schedule, parts, epochs, optimizer, data, task),
read from the metrics file's config record. Torch-free."""

from __future__ import annotations

import json
from typing import Any

from .run_view import RunView, lookup
from .text import NOT_RECORDED, epoch_range


def _scalar_text(found: bool, value: Any) -> str:
    if not found:
        return NOT_RECORDED
    if value is None:
        return "none"
    if isinstance(value, (dict, list)):
        return json.dumps(value, sort_keys=True)
    return str(value)


def header_rows(run: RunView) -> list[tuple[str, str]]:
    """The header's (label, text) pairs."""
    cfg = run.metrics.config
    rows = [
        ("model", _scalar_text(*lookup(cfg, "model", "model"))),
        ("layers", _scalar_text(*lookup(cfg, "model", "layers"))),
        ("hidden", _scalar_text(*lookup(cfg, "model", "hidden"))),
    ]
    found, heads = lookup(cfg, "model", "heads")
    if found and heads is not None:
        rows.append(("heads", _scalar_text(found, heads)))
    schedule = _scalar_text(*lookup(cfg, "trainer", "schedule", "pipeline"))
    extras = []
    for key in ("halo_dtype", "boundary_sample_rate", "simulate_link", "stale_smoothing"):
        found, value = lookup(cfg, "trainer", "schedule", key)
        if found and value is not None and not (key == "boundary_sample_rate" and value == 1.0):
            extras.append(f"{key} {_scalar_text(found, value)}")
    rows.append(("schedule (pipeline)", schedule + (f" ({', '.join(extras)})" if extras else "")))
    parts = run.num_parts()
    rows.append(("parts", str(parts) if parts is not None else f"{NOT_RECORDED} (pass --partition DIR)"))
    found, requested = lookup(cfg, "epochs")
    epochs = run.epochs
    recorded = f"{len(epochs)} recorded ({epoch_range(epochs)})"
    rows.append(("epochs", f"{_scalar_text(found, requested)} requested, {recorded}" if found else recorded))
    found, opt = lookup(cfg, "trainer", "optim", "optimizer")
    if found:
        rows.append(("optimizer", f"{_scalar_text(found, opt)}, lr "
                                  f"{_scalar_text(*lookup(cfg, 'trainer', 'optim', 'lr'))}, weight decay "
                                  f"{_scalar_text(*lookup(cfg, 'trainer', 'optim', 'weight_decay'))}"))
    found, dropout = lookup(cfg, "model", "dropout")
    if found:
        rows.append(("dropout", f"{_scalar_text(found, dropout)} (input "
                                f"{_scalar_text(*lookup(cfg, 'model', 'input_dropout'))})"))
    found, select = lookup(cfg, "trainer", "selection", "select")
    if found:
        patience = lookup(cfg, "trainer", "selection", "patience")
        rows.append(("selection", f"{_scalar_text(found, select)} weights, patience "
                                  f"{_scalar_text(*patience) if patience[1] is not None else 'none'}"))
    found, data = lookup(cfg, "data", "data")
    if found:
        rows.append(("data", _scalar_text(found, data)))
    rows.append(("task", _task_text(run)))
    return rows


def _task_text(run: RunView) -> str:
    """The task, its loss and what the best epoch is chosen by."""
    t = run.metrics.task
    what = t.name or ", ".join(t.metrics) + " (found from the epoch records' fields)"
    loss = f", loss {t.loss}" if t.loss else ""
    return f"{what}{loss}; best epoch by {t.select_key} ({t.direction})"
