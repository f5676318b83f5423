"""The two sequential loops of the out-of-core CSR build (:mod:`.csr_build`), compiled by numba.

Both walk one chunk of edges in input order. Ids are checked here, where each is read anyway:
a kernel returns the position of the first edge with an id outside ``[0, n)`` (``-1`` when all
are good) and changes nothing for that chunk's later edges.
"""

from __future__ import annotations

import numba
import numpy as np

__all__ = ["count_degrees", "fill_rows", "clean_rows", "insertion_sort", "SHORT_ROW"]


@numba.njit(cache=True, nogil=True)
def count_degrees(src: np.ndarray, dst: np.ndarray, n: int, deg: np.ndarray,
                  drop_loops: bool, symmetrize: bool) -> tuple[int, int]:
    """``deg[v] +=`` entries row ``v`` gets from this chunk (its in-edges; with ``symmetrize``
    also the reverse of each out-edge that is not a self-loop). Returns ``(first bad edge or -1,
    self-loops dropped)``."""
    loops = 0
    for i in range(src.size):
        s, d = src[i], dst[i]
        if s < 0 or s >= n or d < 0 or d >= n:
            return i, loops
        if s == d:
            if drop_loops:
                loops += 1
                continue
            deg[d] += 1
            continue
        deg[d] += 1
        if symmetrize:
            deg[s] += 1
    return -1, loops


@numba.njit(cache=True, nogil=True)
def fill_rows(src: np.ndarray, dst: np.ndarray, w: np.ndarray, weighted: bool,
              cursor: np.ndarray, out: np.ndarray, out_w: np.ndarray,
              drop_loops: bool, symmetrize: bool) -> None:
    """Write each edge at ``cursor[row]`` of its row and advance the cursor.

    Without ``symmetrize`` the entry is the source. With it, edge ``s -> d`` writes ``2 s`` in
    row ``d`` (an input edge) and, unless a self-loop, ``2 d + 1`` in row ``s`` (its reverse):
    the low bit tells them apart when the rows are cleaned. Weights follow their entries.
    """
    for i in range(src.size):
        s, d = src[i], dst[i]
        if s == d and drop_loops:
            continue
        p = cursor[d]
        cursor[d] = p + 1
        if symmetrize:
            out[p] = 2 * s
        else:
            out[p] = s
        if weighted:
            out_w[p] = w[i]
        if symmetrize and s != d:
            q = cursor[s]
            cursor[s] = q + 1
            out[q] = 2 * d + 1
            if weighted:
                out_w[q] = w[i]


SHORT_ROW = 64
"""Rows of at most this many entries are sorted in a reused buffer by :func:`insertion_sort`
(no allocation per row); longer ones by numpy's sorts."""


@numba.njit(cache=True, nogil=True)
def insertion_sort(keys: np.ndarray, payload: np.ndarray, with_payload: bool,
                   out: np.ndarray, out_payload: np.ndarray) -> None:
    """``out`` = ``keys`` sorted, stably (equal keys keep their order, as a mergesort would);
    with ``with_payload`` ``out_payload`` gets each key's payload along with it."""
    for i in range(keys.size):
        k = keys[i]
        j = i
        while j > 0 and out[j - 1] > k:
            out[j] = out[j - 1]
            if with_payload:
                out_payload[j] = out_payload[j - 1]
            j -= 1
        out[j] = k
        if with_payload:
            out_payload[j] = payload[i]


@numba.njit(cache=True, nogil=True)
def clean_rows(indptr: np.ndarray, fill: np.ndarray, fill_w: np.ndarray, weighted: bool,
               out: np.ndarray, out_w: np.ndarray, lo: int, hi: int, start: int, written: int,
               symmetrize: bool, dedupe: bool) -> tuple[int, int, int]:
    """Sort rows ``lo..hi-1`` of the fill by entry (stably: repeated edges keep their weights in
    input order), keep what the options keep, and write the kept entries from ``out[written]``
    on; ``indptr[r + 1]`` becomes the end of row ``r``'s kept entries.

    ``out`` may be ``fill`` itself (the same dtype): a row is copied before it is written back,
    never past where it started. ``start`` is the fill's start of row ``lo`` (``indptr[lo]``
    may already hold the kept end of row ``lo - 1``, which the caller passes as ``written``). Symmetrised entries are
    ``2 id + tag`` (tag 1: a reverse): after the sort a row holds, per neighbour, its input
    edges and then the reverses; it keeps the input edges (the first only, deduplicating) or,
    with none, the first reverse. Returns ``(written, duplicates dropped, reverses added)``.
    """
    duplicates = 0
    added = 0
    a = start
    small = np.empty(SHORT_ROW, fill.dtype)
    small_w = np.empty(SHORT_ROW if weighted else 0, fill_w.dtype)
    for r in range(lo, hi):
        b = indptr[r + 1]
        if b - a <= SHORT_ROW:
            vals = small[:b - a]
            ws = small_w[:b - a] if weighted else small_w
            insertion_sort(fill[a:b], fill_w[a:b], weighted, vals, ws)
        elif weighted:
            order = np.argsort(fill[a:b], kind="mergesort")
            vals = fill[a:b][order]
            ws = fill_w[a:b][order]
        else:
            vals = np.sort(fill[a:b])
            ws = fill_w[:0]
        for i in range(vals.size):
            v = vals[i]
            if symmetrize:
                node = v >> 1
                first = i == 0 or (vals[i - 1] >> 1) != node
                reverse = (v & 1) == 1
                keep = first or (not dedupe and not reverse)
                if keep and reverse:
                    added += 1
                elif not keep and not reverse:  # a repeated input edge (reverses are not counted)
                    duplicates += 1
            else:
                node = v
                keep = not dedupe or i == 0 or vals[i - 1] != v
                if not keep:
                    duplicates += 1
            if keep:
                out[written] = node
                if weighted:
                    out_w[written] = ws[i]
                written += 1
        indptr[r + 1] = written
        a = b
    return written, duplicates, added
