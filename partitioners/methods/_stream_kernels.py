"""The micro-batch loop of the ``ldg`` and ``fennel`` streaming methods (:mod:`.streaming`),
compiled by numba, for the common case: ``nodes`` the only balance criterion (every node weighs
the same).

:func:`decide_batches` runs the batches of one chunk of the stream as the numpy code of
:mod:`.streaming` does, value for value (the same float operations in the same order, numpy's
``x ** 0.5`` being ``sqrt``), so the assignment is the same array; it stops before a batch whose
choices overfill a part, which the numpy code settles (:func:`~.streaming._settle_overflow`:
near the end of the stream only), and the caller resumes after it.
"""

from __future__ import annotations

import math

import numba
import numpy as np

__all__ = ["decide_batches", "water_fill"]


@numba.njit(cache=True, nogil=True)
def water_fill(level: np.ndarray, k: int, parts: np.ndarray) -> np.ndarray:
    """:func:`~.streaming._water_fill` (``k`` part ids from ``parts`` that even out ``level``,
    lightest first), compiled: the same float operations and stable sorts."""
    order = np.argsort(level, kind="mergesort")
    lv = level[order]
    common = np.empty(lv.size)
    total = 0.0
    used = 0
    for j in range(lv.size):
        total += lv[j]
        common[j] = (k + total) / (j + 1)
        if common[j] >= lv[j]:
            used = j + 1
    want = common[used - 1] - lv[:used]
    take = np.floor(want).astype(np.int64)
    short = k - take.sum()
    if short > 0:
        frac = -(want - take)
        for i in np.argsort(frac, kind="mergesort")[:short]:
            take[i] += 1
    return np.repeat(parts[order[:used]], take)


@numba.njit(cache=True, nogil=True, inline="always")
def _score(count: int, load: float, bound: float, npp: float, fennel: bool,
           alpha_gamma: float) -> float:
    """A part's score for a node with ``count`` placed in-neighbours in it (LDG or Fennel, as
    the numpy code computes it)."""
    if fennel:
        return count - alpha_gamma * math.sqrt(load * npp)
    return count * (1.0 - load / bound)


@numba.njit(cache=True, nogil=True)
def _place_lonely(choice: np.ndarray, lonely: np.ndarray, feasible: np.ndarray, size: np.ndarray,
                  ip: np.ndarray, idx: np.ndarray, lo: int, start: int) -> None:
    """:func:`~.streaming._place_lonely` for nodes of one weight: chains to the nearest earlier
    in-batch in-neighbour, heads water-filled over the open parts, chains follow their head.
    The batch is the chunk's nodes from ``lo`` on, node ``start`` the first."""
    b = choice.size
    num_parts = size.size
    parent = np.full(b, -1, dtype=np.int64)
    for r in range(b):
        for e in range(ip[lo + r], ip[lo + r + 1]):
            s = idx[e] - start
            if s >= 0 and s < r and s > parent[r]:
                parent[r] = s
    root = np.arange(b)
    heads = []
    for i in range(b):
        if not lonely[i]:
            parent[i] = -1
        if parent[i] >= 0:
            root[i] = root[parent[i]]
        elif lonely[i]:
            heads.append(i)
    if len(heads) > 0:
        others = np.zeros(num_parts, dtype=np.int64)
        for i in range(b):
            if not lonely[i]:
                others[choice[i]] += 1
        open_parts = np.flatnonzero(feasible)
        fill = size[open_parts] + others[open_parts]
        dealt = water_fill(fill, len(heads), open_parts)
        for j in range(len(heads)):
            choice[heads[j]] = dealt[j]
    for i in range(b):
        if lonely[i]:
            choice[i] = choice[root[i]]
            if not feasible[choice[i]]:  # least loaded part with room
                best = -np.inf
                for p in range(num_parts):
                    if feasible[p] and -size[p] > best:
                        best = -size[p]
                        choice[i] = p


@numba.njit(cache=True, nogil=True)
def decide_batches(ip: np.ndarray, idx: np.ndarray, first: int, lo: int, m: int, batch: int,
                   part: np.ndarray, load: np.ndarray, bound: np.ndarray, w: float, npp: np.ndarray,
                   tol: float, fennel: bool, alpha_gamma: float) -> int:
    """Place the chunk's nodes ``lo..m-1`` (chunk-local; the chunk's node ``i`` is node
    ``first + i``, its in-edges ``idx[ip[i]:ip[i + 1]]``) batch by batch, updating ``part`` and
    the parts' relative loads ``load``; each node weighs ``w``, part ``p`` may hold ``bound[p]``;
    ``npp[p]`` nodes make a load of 1 in part ``p``'s own units (its share: part weights).
    Returns where it stopped: ``m``, or the start of a batch
    that overfills a part (nothing of it placed)."""
    num_parts = load.size
    while lo < m:
        hi = min(m, lo + batch)
        b = hi - lo
        counts = np.zeros((b, num_parts), dtype=np.int64)
        for r in range(b):
            for e in range(ip[lo + r], ip[lo + r + 1]):
                q = part[idx[e]]
                if q >= 0:
                    counts[r, q] += 1
        feasible = load + w <= bound + tol
        size = load * npp
        choice = np.zeros(b, dtype=np.int64)
        lonely = np.zeros(b, dtype=np.bool_)
        if not feasible.any():  # none fits: least relative load after adding the node
            choice[:] = np.argmin((load + w) / bound)
        else:
            for r in range(b):
                best = -np.inf
                signal = False
                for p in range(num_parts):
                    if feasible[p]:
                        signal = signal or counts[r, p] > 0
                        score = _score(counts[r, p], load[p], bound[p], npp[p], fennel, alpha_gamma)
                        if score > best:  # the first of equal scores, as argmax
                            best = score
                            choice[r] = p
                lonely[r] = not signal
            if lonely.any():
                _place_lonely(choice, lonely, feasible, size, ip, idx, lo, first + lo)
        incoming = np.zeros(num_parts)
        for r in range(b):
            incoming[choice[r]] += w
        for p in range(num_parts):
            if load[p] + incoming[p] > bound[p] + tol and incoming[p] > 0:
                return lo
        for p in range(num_parts):
            load[p] += incoming[p]
        for r in range(b):
            part[first + lo + r] = choice[r]
        lo = hi
    return lo
