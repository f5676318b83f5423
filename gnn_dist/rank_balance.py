"""Which rank the step waits for, and the part weights that would balance the ranks' compute.

A synchronous step lasts as long as its slowest rank. On a cluster whose devices differ (or a
machine shared with other jobs) equal parts make the fast ranks wait; ``gnn-dist partition
--part-weights`` sizes the parts to the ranks. The weights to give are measured, not guessed:
rank ``r`` computed its part, which holds the fraction ``s_r`` of the balance criteria (the
folder's recorded ``part_weights``, ``1/P`` each for equal parts), in ``c_r`` seconds per step
(the step's time less its exposed communication: waiting for a slower rank's rows is not
compute). Its speed is ``s_r / c_r``, and parts sized to the speeds,

.. math::
    w_r = \\frac{s_r / c_r}{\\sum_q s_q / c_q},

would take every rank the same time if a part's compute were proportional to its share. It is
not quite (a smaller part keeps about as many halo rows; the optimizer step does not shrink), so
a second measurement on the new parts, with the same formula, refines the weights.

At the end of ``fit`` every rank gives the median of its compute time over the epochs trained
(the first left out when there are three or more: it warms caches up), and rank 0 logs one line
when the slowest rank's compute is more than :data:`IMBALANCE` above the mean: the times per
rank and the ``--part-weights`` that would balance them. The times are measured: on a machine
shared with other jobs they move with the load, so the line says what this run saw.
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence

__all__ = ["IMBALANCE", "median_compute_s", "speed_weights", "balance_line"]

IMBALANCE = 0.15
"""The slowest rank's compute above the ranks' mean, as a fraction, from which the line is logged."""


def median_compute_s(history: Sequence[dict]) -> float | None:
    """The median ``compute_time_s`` of the epoch records ``history`` (the first left out from
    three epochs on); None without epochs."""
    times = [float(r["compute_time_s"]) for r in history]
    if len(times) >= 3:
        times = times[1:]
    return statistics.median(times) if times else None


def speed_weights(shares: Sequence[float], compute_s: Sequence[float]) -> tuple[float, ...]:
    """Each part's fraction with the parts sized to the ranks' measured speeds (module docstring):
    ``shares`` the parts' current fractions, ``compute_s`` each rank's seconds per step (positive)."""
    if len(shares) != len(compute_s) or not shares:
        raise ValueError(f"{len(shares)} part shares for {len(compute_s)} ranks' compute times")
    if any(c <= 0 for c in compute_s) or any(s < 0 for s in shares):
        raise ValueError(f"compute times must be positive and shares non-negative, got {list(compute_s)}, "
                         f"{list(shares)}")
    speed = [s / c for s, c in zip(shares, compute_s)]
    total = sum(speed)
    if total <= 0:
        raise ValueError("every part is empty: no speed to measure")
    return tuple(v / total for v in speed)


def balance_line(shares: Sequence[float], compute_s: Sequence[float | None]) -> str | None:
    """Rank 0's line on an unbalanced step (None when balanced within :data:`IMBALANCE`, a single
    rank, a rank without a measurement, or ranks that are not one per part, as the stages of
    layer parallelism): each rank's compute, the slowest, and the weights."""
    if len(compute_s) < 2 or len(compute_s) != len(shares) or any(c is None or c <= 0 for c in compute_s):
        return None
    times = [float(c) for c in compute_s]   # type: ignore[arg-type]
    mean = sum(times) / len(times)
    slowest = max(range(len(times)), key=times.__getitem__)
    if times[slowest] <= mean * (1 + IMBALANCE):
        return None
    weights = speed_weights(shares, times)
    shown = ", ".join(f"{t * 1e3:.0f}" for t in times)
    return (f"rank balance: compute per step {shown} ms (median per rank): rank {slowest} is "
            f"{times[slowest] / mean - 1:.0%} above the mean and the others wait for it; parts sized to "
            f"the speeds measured here: gnn-dist partition ... --part-weights "
            f"{','.join(f'{w:.3f}' for w in weights)} (docs/scaling.md, \"Devices that differ\")")
