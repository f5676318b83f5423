"""Checks of scalar arguments (seeds, counts, bounded numbers) shared by the generators and
the partition methods. Each returns the value as a plain Python number or raises a
``ValueError`` naming the argument and the value received.

This module is torch-free.
"""

from __future__ import annotations

import math

import numpy as np

__all__ = ["check_float", "check_int", "check_seed"]


def check_seed(seed: object) -> int:
    """``seed`` as an int; ValueError unless it is a non-negative integer (bools refused)."""
    if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)) or seed < 0:
        raise ValueError(f"seed must be a non-negative integer, got {seed!r}")
    return int(seed)


def check_int(name: str, value: object, minimum: int) -> int:
    """``value`` as an int; ValueError unless it is an integer ``>= minimum`` (bools refused)."""
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < minimum:
        raise ValueError(f"{name} must be an integer >= {minimum}, got {value!r}")
    return int(value)


def check_float(name: str, value: object, lo: float, hi: float = math.inf, *,
                lo_open: bool = False) -> float:
    """``value`` as a float; ValueError unless it is finite and in ``[lo, hi]`` (``(lo, hi]``
    with ``lo_open``)."""
    try:
        v = float(value)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        raise ValueError(f"{name} must be a number, got {value!r}") from None
    if not math.isfinite(v) or v < lo or v > hi or (lo_open and v == lo):
        bounds = f"{'(' if lo_open else '['}{lo}, {hi}]"
        raise ValueError(f"{name} must be in {bounds}, got {value!r}")
    return v
