"""The ``stale`` schedule's halo rows carried to another cut of the same graph, by original id.

A rank file of ``stale`` (:meth:`~.stale.StalePipeline.state_dict`) holds, per exchanging layer,
the moving average of the halo rows it read (``m [H, F]``, ``count``) and the original ids of
those rows (``halo_ids [H]``). The rows are what their owner sent: a row read by several ranks
holds the same value on each (the same rows travel, through a codec keyed by the row's original
id; only adaptive widths, decided per pair of ranks, can make two readers' copies differ, and then
the first saved copy is taken). So a row's saved value belongs to the row, not to the cut.

On another cut, :func:`collect` reads the saved states of every rank of the old cut, one at a
time (memory: one old rank's state and this rank's ``[H, F]`` tables), and picks this rank's halo
rows by id. A halo row of the new cut that no rank read in the old cut (its owner never sent it:
every reader of it was in its owner's part) has no saved value: it is ``missing``, and the first
resumed step fills it with the value its owner sends in that step (that step waits for the
exchange, as a synchronous step would, for those rows only); its moving average starts there.

The picking by id (:func:`saved_row_ids`, :func:`pick_rows`) also places a layer-parallel run's
history on another layout (:mod:`gnn_dist.layer_parallel.reshard`).

The halo *gradients* are not carried: a rank's buffer holds, per owned row, the sum of the
gradients its readers sent, and which readers are remote depends on the cut. Read on another
cut, that sum would count again the gradients of edges that became local (computed afresh in the
step) and lack those of edges that became remote, so no saved value is right. The first resumed
backward therefore waits for the current halo gradients (what a synchronous step uses: exact),
and the gradients' moving average restarts from them; the forward stays stale (staleness 1).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

import torch

__all__ = ["CarriedLayer", "collect", "NoRowIds", "pick_rows", "saved_row_ids", "state_steps"]


class NoRowIds(ValueError):
    """A saved state without the original ids of its halo rows (written before they were saved):
    it cannot be placed on another cut (the schedule then starts fresh, with a warning)."""


@dataclass(slots=True)
class CarriedLayer:
    """One layer's saved halo rows, picked for this rank's halo rows: ``count`` and ``gamma`` of the
    moving average, ``m [H, F]`` (zero where ``found`` is False) and ``found`` (bool ``[H]``)."""

    gamma: float
    count: int
    m: torch.Tensor
    found: torch.Tensor


def saved_row_ids(state: dict[str, Any], key: str = "halo_ids", rows: str = "halo rows") -> torch.Tensor:
    """The original ids (int64 ``[R]``) a saved state holds under ``key``, of its ``rows``.

    Raises:
        NoRowIds: there are none (a rank file written before they were saved)."""
    ids = state.get(key)
    if not isinstance(ids, torch.Tensor) or ids.dtype != torch.int64 or ids.dim() != 1:
        raise NoRowIds(f"the rank files hold no original ids of their {rows} (written by an older gnn-dist), "
                       f"so their rows cannot be placed on another cut")
    return ids


def pick_rows(layer: int, features: dict[str, Any], saved_ids: torch.Tensor, want: torch.Tensor,
              carried: dict[int, CarriedLayer]) -> None:
    """Copy the rows of ``want`` (the original ids of the rows this rank needs) that one old
    rank's moving average ``features`` (:meth:`~.stale.EMABuffer.state_dict`, its rows those of
    ``saved_ids``) holds and ``carried[layer]`` still lacks (the first saved copy of a row is
    taken)."""
    m, count, gamma = features.get("m"), features.get("count"), features.get("gamma")
    if m is None:
        return
    if not isinstance(m, torch.Tensor) or m.dim() < 1 or m.shape[0] != saved_ids.numel():
        raise ValueError(f"layer {layer}: {saved_ids.numel()} halo ids beside a buffer of shape "
                         f"{tuple(getattr(m, 'shape', ()))}")
    entry = carried.get(layer)
    if entry is None:
        entry = carried[layer] = CarriedLayer(float(gamma or 0.0), int(count),
                                              m.new_zeros((want.numel(), *m.shape[1:])),
                                              torch.zeros(want.numel(), dtype=torch.bool))
    elif (entry.count, entry.gamma) != (int(count), float(gamma or 0.0)):
        raise ValueError(f"layer {layer}: the ranks' moving averages disagree (count {entry.count} and {count})")
    if not saved_ids.numel() or not want.numel():
        return
    order = torch.argsort(saved_ids)
    ordered = saved_ids[order]
    pos = torch.searchsorted(ordered, want).clamp(max=ordered.numel() - 1)
    take = (ordered[pos] == want) & ~entry.found
    rows = take.nonzero().squeeze(1)
    entry.m[rows] = m[order[pos[rows]]].to(entry.m.dtype)
    entry.found |= take


def state_steps(state: dict[str, Any], layers: str, steps: int | None, what: str) -> int:
    """The step count of one old rank's saved ``state`` (``what``; its per-layer dict under
    ``layers``), equal to the earlier ranks' ``steps`` (None: the first rank).

    Raises:
        ValueError: a malformed state, or another step count (not one run's checkpoint)."""
    got = state.get("steps")
    if not isinstance(got, int) or got < 0 or not isinstance(state.get(layers), dict):
        raise ValueError(f"malformed {what} (steps={got!r})")
    if steps is not None and got != steps:
        raise ValueError(f"the ranks' states are of different steps ({steps} and {got})")
    return got


def collect(states: Iterable[dict[str, Any]], halo_ids: torch.Tensor) -> tuple[int, dict[int, CarriedLayer]]:
    """``(steps, {layer: CarriedLayer})`` for the halo rows ``halo_ids`` (int64 ``[H]``, this
    rank's, in its halo order) from the saved states of every rank of the old cut (any order,
    read one at a time).

    Raises:
        NoRowIds: a state without halo ids.
        ValueError: states that disagree on the step count or on a layer's moving average (not
            one run's checkpoint), or malformed ones.
    """
    want = halo_ids.detach().cpu().to(torch.int64)
    steps: int | None = None
    carried: dict[int, CarriedLayer] = {}
    for state in states:
        steps = state_steps(state, "layers", steps, "stale pipeline state")
        saved_ids = saved_row_ids(state)
        for layer, entry in state["layers"].items():
            pick_rows(int(layer), dict(entry["features"]), saved_ids, want, carried)
    return steps or 0, carried
