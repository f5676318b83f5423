"""Part weights: parts sized to their devices, and every part's target and bound per criterion.

``part_weights`` (``--part-weights 2,1,1``) gives part ``p`` the fraction ``w_p / sum(w)`` of
every balance criterion: with weights 2,1,1 part 0 should hold half the nodes (or edges, or
training nodes: whatever ``balance`` asks for) and parts 1 and 2 a quarter each. Without
weights (None) every part's target is the mean, ``total / P``, as before.

The balance tolerance then applies to each part's own target: part ``p`` may weigh at most
``max((1 + imbalance) * target_p, ceil(target_p))`` in a criterion (:func:`part_bounds`), and
the balances of the quality report are ``max_p load_p / target_p``. Equal weights give exactly
the unweighted targets and bounds (the same floats). This module is torch-free.
"""

from __future__ import annotations

import math
from typing import Any, Iterable

import numpy as np

__all__ = ["check_part_weights", "part_shares", "part_targets", "part_bounds"]


def check_part_weights(part_weights: Any, num_parts: int) -> tuple[float, ...] | None:
    """``part_weights`` normalised to fractions summing to 1, or None for equal parts (None given).

    ValueError unless it is ``num_parts`` finite positive numbers (a comma-separated string such
    as ``"2,1,1"`` is accepted too, as the command line gives it).
    """
    if part_weights is None:
        return None
    items: Iterable[Any] = part_weights.split(",") if isinstance(part_weights, str) else part_weights
    values: list[float] = []
    for item in items:
        try:
            if isinstance(item, bool):
                raise TypeError
            value = float(item)
        except (TypeError, ValueError):
            raise ValueError(f"part_weights: {item!r} is not a number; give {num_parts} positive "
                             f"numbers, one per part (e.g. 2,1,1)") from None
        if not math.isfinite(value) or value <= 0:
            raise ValueError(f"part_weights: {item!r} is not a positive number; every part needs "
                             f"a weight > 0")
        values.append(value)
    if len(values) != num_parts:
        raise ValueError(f"part_weights has {len(values)} value(s) for {num_parts} parts; give one "
                         f"weight per part")
    total = sum(values)
    return tuple(v / total for v in values)


def part_shares(fractions: tuple[float, ...] | None, num_parts: int) -> np.ndarray:
    """float64 ``[P]``: each part's target relative to the mean part (``P * fraction``; all 1.0
    without weights)."""
    if fractions is None:
        return np.ones(num_parts)
    return num_parts * np.asarray(fractions, dtype=np.float64)


def part_targets(W_CN: np.ndarray, num_parts: int,
                 fractions: tuple[float, ...] | None = None) -> np.ndarray:
    """float64 ``[C, P]``: each part's target weight per criterion (``W_CN`` int64 ``[C, N]``)."""
    mean_C = W_CN.sum(axis=1).astype(np.float64) / num_parts
    return mean_C[:, None] * part_shares(fractions, num_parts)[None, :]


def part_bounds(W_CN: np.ndarray, num_parts: int, imbalance: float,
                fractions: tuple[float, ...] | None = None) -> np.ndarray:
    """float64 ``[C, P]``: the largest allowed weight of each part per criterion,
    ``max((1 + imbalance) * target, ceil(target))``: the ceiling keeps a bound reachable when the
    target is fractional (3 nodes in 2 equal parts need a part of 2)."""
    target = part_targets(W_CN, num_parts, fractions)
    return np.maximum((1.0 + imbalance) * target, np.ceil(target))
