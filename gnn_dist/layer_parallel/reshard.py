"""A layer-parallel run's rank files carried to another layout, by original node id.

A rank file of a layer-parallel run (:meth:`~.state.StageState.state_dict`) holds, per
historical layer of its stage, the moving average of the layer's input rows (``m [I + H, F]``,
``count``, ``gamma``: :class:`~gnn_dist.pipeline.stale.EMABuffer`), the original ids of those
rows (``row_ids [I + H]``: the rank's inner then halo rows), the step count, the optimizer state,
the indices (in ``model.parameters()`` order) of the parameters the rank trains (``trained``)
and its layout (``stages``, ``graph_parts``).

A row's history belongs to the row, not to the layout: a halo row holds what its owner computed
(the exchange copies it; with smoothing every copy folds the same values in the same order), so
every saved copy of a row is the same value. On another layout (another number of stages:
layers move between ranks; with ``hybrid``, another number of graph parts or another cut of the
same graph) :func:`collect` reads the states of every old rank, one at a time (memory: one old
rank's state besides this rank's ``[I + H, F]`` tables), and picks for each of this rank's
historical layers the rows it reads (its inner and halo rows) by id, with the average's count
(:func:`~gnn_dist.pipeline.stale_reshard.pick_rows`); and for each parameter this rank trains,
the optimizer state of the first old rank that trained it (the ranks training a parameter hold
the same state: its gradient is all-reduced among them).

Every row is found in the files of one run: every layer but the model's first is historical in
every layout (only the first stage's first layer reads its input at once, from the row-local
stem), so the old stage that held layer ``i`` saved its history, and that stage's ranks saved
their inner rows, which cover the graph. Rows missing anyway (files not of one run) are counted
(``missing``); the stage state then restarts the history on every rank
(:meth:`~.state.StageState.restart_history`).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

import torch

from ..pipeline.stale_reshard import CarriedLayer, pick_rows, saved_row_ids, state_steps

__all__ = ["CarriedStage", "collect"]


@dataclass(slots=True)
class CarriedStage:
    """What the old ranks' files hold for this rank: the step count, per historical layer the
    rows it reads (:class:`~gnn_dist.pipeline.stale_reshard.CarriedLayer`; a layer no old rank
    saved is absent), the optimizer state of the parameters it trains, and the old layout."""

    steps: int
    layers: dict[int, CarriedLayer]
    optimizer: dict[str, Any]
    stages: int
    graph_parts: int


def _layout_of(state: dict[str, Any]) -> tuple[int, int]:
    stages, parts = state.get("stages"), state.get("graph_parts")
    if not isinstance(stages, int) or not isinstance(parts, int) or stages < 1 or parts < 1:
        raise ValueError(f"malformed stage state (stages={stages!r}, graph_parts={parts!r})")
    return stages, parts


def _pick_optimizer(state: dict[str, Any], trained: set[int], decided: set[int], out: dict[str, Any]) -> None:
    """Take from one old rank's optimizer state the entries of the parameters of ``trained``
    that it trained and no earlier old rank did (``decided``)."""
    optimizer, theirs = state.get("optimizer"), state.get("trained")
    if not isinstance(optimizer, dict) or not isinstance(optimizer.get("state"), dict) or \
            not isinstance(optimizer.get("param_groups"), list) or not isinstance(theirs, list):
        raise ValueError("malformed stage state (its optimizer state or its trained parameters)")
    if out.get("param_groups") is None:
        out["param_groups"] = optimizer["param_groups"]
    for j in sorted((trained & {int(t) for t in theirs}) - decided):
        decided.add(j)
        if j in optimizer["state"]:
            out["state"][j] = optimizer["state"][j]


def collect(states: Iterable[dict[str, Any]], layers: Iterable[int], row_ids: torch.Tensor,
            trained: Iterable[int]) -> CarriedStage:
    """What every old rank's saved state (any order, read one at a time) holds for this rank's
    historical ``layers``, over its rows ``row_ids`` (int64 ``[I + H]``, original ids, in its row
    order), and for the parameters ``trained`` (indices in ``model.parameters()`` order).

    Raises:
        NoRowIds: a state without row ids (written by an older gnn-dist).
        ValueError: states that disagree on the step count, the layout or a layer's moving
            average (not one run's checkpoint), or malformed ones.
    """
    want = row_ids.detach().cpu().to(torch.int64)
    mine, wanted = set(int(i) for i in layers), set(int(j) for j in trained)
    steps: int | None = None
    layout: tuple[int, int] | None = None
    carried: dict[int, CarriedLayer] = {}
    optimizer: dict[str, Any] = {"state": {}, "param_groups": None}
    decided: set[int] = set()
    for state in states:
        steps = state_steps(state, "history", steps, "stage state")
        saved_ids = saved_row_ids(state, "row_ids", "rows")
        old = _layout_of(state)
        if layout is not None and old != layout:
            raise ValueError(f"the ranks' states are of different layouts ({layout} and {old})")
        layout = old
        for layer, entry in state["history"].items():
            if int(layer) in mine:
                if not isinstance(entry, dict):
                    raise ValueError(f"layer {layer}: malformed history")
                pick_rows(int(layer), entry, saved_ids, want, carried)
        _pick_optimizer(state, wanted, decided, optimizer)
    if steps is None or layout is None:
        raise ValueError("no rank files to read")
    return CarriedStage(steps, carried, optimizer, *layout)
