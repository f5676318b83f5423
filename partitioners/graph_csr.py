"""CSR by destination from edge lists: the builder behind :meth:`Graph.from_edges
<partitioners.graph.Graph.from_edges>` and the synthetic generators.

Edge ``src -> dst`` is the int64 key ``dst * n + src``, so sorting keys sorts edges by
(destination, source). Without weights equal keys are identical edges and an in-place
(unstable) sort gives the same arrays as a stable one; with weights the builder takes a stable
argsort, because repeated edges keep their weights in input order. Every step works on sorted
int64 arrays (sort, run detection, merge); none looks keys up in random order, which is what
makes the build fast at scale (a binary search per edge costs a cache miss per probe).

This module is torch-free.
"""

from __future__ import annotations

import numpy as np

__all__ = ["CHUNK", "MAX_NODES", "build_csr", "build_csr_edge_data", "csr_from_keys", "edge_keys", "index_dtype"]


def index_dtype(num_nodes: int) -> np.dtype:
    """The narrowest id dtype for ``num_nodes`` nodes: int32 when it fits, else int64."""
    return np.dtype(np.int32) if num_nodes < 2**31 - 1 else np.dtype(np.int64)


MAX_NODES = 3_037_000_499
"""Largest ``num_nodes`` whose edge keys ``dst * n + src`` fit in int64 (``isqrt(2**63 - 1)``)."""

CHUNK = 1 << 20
"""Elements per step of the chunked loops: bounds their temporaries, never changes a result."""


def build_csr(src: np.ndarray, dst: np.ndarray, n: int, w: np.ndarray | None, *,
              symmetrize: bool, remove_self_loops: bool, remove_duplicates: bool,
              ) -> tuple[np.ndarray, np.ndarray, np.ndarray | None, dict[str, int]]:
    """Sort edges by (dst, src) into CSR, applying the cleaning options; returns the counts.

    ``src``, ``dst`` integer ``[E]`` (validated ids), ``w`` float32 ``[E]`` or None. Returns
    ``(indptr, indices, edge_weight, report)`` as :func:`csr_from_keys`.
    """
    report: dict[str, int] = {}
    # unweighted symmetrize writes the reverses after the keys: room is reserved, not touched
    room = src.size if (symmetrize and w is None) else 0
    keys, num_keys, w, loops = edge_keys(src, dst, n, w, drop_self_loops=remove_self_loops,
                                         room=room)
    if remove_self_loops:
        report["self_loops_removed"] = loops
    return csr_from_keys(keys, n, w, num_keys=num_keys, symmetrize=symmetrize,
                         remove_duplicates=remove_duplicates, report=report)


def build_csr_edge_data(src: np.ndarray, dst: np.ndarray, n: int, w: np.ndarray | None,
                        attr: np.ndarray | None, **options: bool,
                        ) -> tuple[np.ndarray, np.ndarray, np.ndarray | None, np.ndarray | None, dict[str, int]]:
    """:func:`build_csr` carrying edge features ``attr`` (float32 ``[E, D]`` or None) as well as
    the weights: ``(indptr, indices, edge_weight, edge_attr, report)``.

    With ``attr`` the builder carries each edge's input position (int64) where it would carry a
    weight, then gathers the weights and feature rows by it. So a stored edge has the data of the
    input edge the weighted build keeps for it: the first of repeated edges with
    ``remove_duplicates``, and an added reverse ``v -> u`` the data of the first ``u -> v``. Without
    ``attr`` this is :func:`build_csr` itself (same arrays, same work).
    """
    if attr is None:
        indptr, indices, w, report = build_csr(src, dst, n, w, **options)
        return indptr, indices, w, None, report
    indptr, indices, origin, report = build_csr(src, dst, n, np.arange(src.size, dtype=np.int64), **options)
    assert origin is not None
    return indptr, indices, None if w is None else w[origin], attr[origin], report


def edge_keys(src: np.ndarray, dst: np.ndarray, n: int, w: np.ndarray | None, *,
              drop_self_loops: bool, room: int = 0,
              ) -> tuple[np.ndarray, int, np.ndarray | None, int]:
    """Keys ``dst * n + src`` and weights of the edges, self-loops dropped when asked.

    Returns ``(keys, num_keys, w, loops)``: an int64 buffer whose first ``num_keys`` entries are
    the keys, built chunk by chunk, followed by ``room`` unused entries (untouched memory, so
    free until written); the kept weights ``[num_keys]`` or None; the self-loops dropped.
    """
    keys = np.empty(src.size + room, dtype=np.int64)
    w_kept = np.empty_like(w) if (w is not None and drop_self_loops) else w
    filled = 0
    for lo in range(0, src.size, CHUNK):
        s, d = src[lo:lo + CHUNK], dst[lo:lo + CHUNK]
        k = d.astype(np.int64)
        k *= n
        k += s
        if drop_self_loops:
            keep = s != d
            k = k[keep]
            if w_kept is not None:
                w_kept[filled:filled + k.size] = w[lo:lo + CHUNK][keep]  # type: ignore[index]
        keys[filled:filled + k.size] = k
        filled += k.size
    if w_kept is not None:
        w_kept = w_kept[:filled]
    return keys, filled, w_kept, src.size - filled


def csr_from_keys(keys: np.ndarray, n: int, w: np.ndarray | None = None, *,
                  num_keys: int | None = None, symmetrize: bool = False,
                  remove_duplicates: bool = False, report: dict[str, int] | None = None,
                  ) -> tuple[np.ndarray, np.ndarray, np.ndarray | None, dict[str, int]]:
    """CSR by destination of the edges given as keys ``dst * n + src``: the core of
    :meth:`Graph.from_edges <partitioners.graph.Graph.from_edges>`, shared with the generators in
    :mod:`partitioners.synthetic`.

    Args:
        keys: int64 buffer whose first ``num_keys`` entries (default: all) are the edge keys in
            input order, each in ``[0, n * n)``. The buffer is consumed: sorted and overwritten
            in place. Unweighted ``symmetrize`` writes the reverses into the entries after the
            keys when there is room for ``num_keys`` more, instead of into a new array.
        n: number of nodes, ``1 <= n <= MAX_NODES``.
        w: float32 ``[num_keys]`` weights in input order, or None.
        num_keys: ``M``, the number of keys at the front of ``keys`` (default: ``keys.size``).
        symmetrize, remove_duplicates: as in :meth:`Graph.from_edges` (self-loops are the
            caller's to drop, before this step).
        report: counts so far (e.g. ``self_loops_removed``); ``duplicates_removed`` and
            ``symmetrize_added`` are added to it, in that order.

    Returns ``(indptr, indices, edge_weight, report)``: int64 ``[n+1]``, int32/int64 ``[E]``
    (:func:`index_dtype`), float32 ``[E]`` or None, and the report.
    """
    report = {} if report is None else report
    buffer = keys
    keys = buffer[:buffer.size if num_keys is None else num_keys]
    if w is None:
        keys.sort()  # equal keys are identical edges, so any sort gives the stable order
        if remove_duplicates:
            m = keys.size
            keys = _dedupe_sorted(keys)
            report["duplicates_removed"] = int(m - keys.size)
        if symmetrize:
            keys, added = _symmetric_union(buffer, keys.size, n, unique=remove_duplicates)
            report["symmetrize_added"] = added
        del buffer
    else:
        del buffer
        order = _stable_key_order(keys, n)  # duplicates keep their weights in input order
        keys[:] = keys[order]  # back into the caller's buffer: one [M] key array at a time
        w = w[order]
        del order
        first: np.ndarray | None = _run_starts(keys)
        if remove_duplicates:
            assert first is not None
            kept = int(np.count_nonzero(first))
            report["duplicates_removed"] = int(keys.size - kept)
            keys[:kept] = keys[first]
            keys, w = keys[:kept], w[first]
            first = None  # every key is now the first of its run
        if symmetrize:
            added_keys, added_w = _missing_reverses(keys, w, n, first)
            report["symmetrize_added"] = int(added_keys.size)
            keys, w = _insert_sorted(keys, w, added_keys, added_w)
    # the in-edges of destination v are the keys in [v * n, (v + 1) * n)
    indptr = np.searchsorted(keys, np.arange(n + 1, dtype=np.int64) * n).astype(np.int64, copy=False)
    indices = np.empty(keys.size, dtype=index_dtype(n))
    np.remainder(keys, n, out=indices)  # buffered cast: no int64 temporary of [E]
    return indptr, indices, w, report


def _run_starts(keys: np.ndarray) -> np.ndarray:
    """bool ``[M]``: True where a sorted key differs from the one before (the first of each run)."""
    first = np.empty(keys.size, dtype=bool)
    if keys.size:
        first[0] = True
        np.not_equal(keys[1:], keys[:-1], out=first[1:])
    return first


def _dedupe_sorted(keys: np.ndarray) -> np.ndarray:
    """Drop repeats from a sorted 1-D array in place; returns the leading view that holds them.

    Chunk by chunk, the first key of each run moves forward to its final place, which is never
    after where it was, so no chunk is overwritten before it is read.
    """
    out = 0
    last = None
    for lo in range(0, keys.size, CHUNK):
        chunk = keys[lo:lo + CHUNK]
        first = _run_starts(chunk)
        if last is not None:
            first[0] = chunk[0] != last
        last = chunk[-1].copy()
        kept = chunk[first]  # a copy, taken before anything in this chunk is written
        keys[out:out + kept.size] = kept
        out += kept.size
    return keys[:out]


def _reverse_keys(keys: np.ndarray, n: int, out: np.ndarray | None = None) -> np.ndarray:
    """Keys ``src * n + dst`` of the reversed edges (int64, same shape), computed in chunks."""
    out = np.empty_like(keys) if out is None else out
    for lo in range(0, keys.size, CHUNK):
        d, s = np.divmod(keys[lo:lo + CHUNK], n)
        s *= n
        s += d
        out[lo:lo + CHUNK] = s
    return out


def _symmetric_union(buffer: np.ndarray, m: int, n: int, *, unique: bool,
                     ) -> tuple[np.ndarray, int]:
    """The ``m`` sorted keys at the front of ``buffer`` (repeats allowed unless ``unique``) plus,
    once, the reverse of each edge whose reverse is missing: returns the sorted result (in
    ``buffer`` when it has room for the reverses) and the number of reverses added.

    With ``U`` the distinct keys and ``R`` their reverses, the result is the set ``U | R`` plus
    the repeats of the input (each key beyond the first of its run), so ``|R - U|`` are added.
    """
    keys = buffer[:m]
    repeats = None
    if not unique:
        repeats = keys[~_run_starts(keys)]
        keys = _dedupe_sorted(keys)
    m = keys.size
    if buffer.size >= 2 * m:
        union = buffer[:2 * m]
    else:
        union = np.empty(2 * m, dtype=np.int64)
        union[:m] = keys
    del keys, buffer
    _reverse_keys(union[:m], n, out=union[m:])
    union.sort()
    union = _dedupe_sorted(union)
    added = int(union.size - m)
    if repeats is not None and repeats.size:
        union = np.concatenate([union, repeats])
        union.sort()
    return union, added


def _stable_order_by(values: np.ndarray, bound: int) -> np.ndarray:
    """Stable argsort (int64 ``[M]``) of int64 ``values`` in ``[0, bound)``; ``values`` is consumed.

    Sorts the distinct composites ``value * M + position`` in place, which is several times
    faster than ``argsort(kind="stable")``; falls back to that when a composite would overflow.
    """
    m = values.size
    if bound * m > 2**63:
        return np.argsort(values, kind="stable")
    values *= m
    for lo in range(0, m, CHUNK):  # + position, chunk by chunk (no arange of [M])
        values[lo:lo + CHUNK] += np.arange(lo, min(m, lo + CHUNK), dtype=np.int64)
    values.sort()
    np.remainder(values, max(m, 1), out=values)
    return values


def _stable_key_order(keys: np.ndarray, n: int) -> np.ndarray:
    """Stable argsort of edge keys: by source, then stably by destination (LSD, two passes)."""
    order = _stable_order_by(keys % n, n)
    dst = keys[order]
    dst //= n
    result = _stable_order_by(dst, n)
    for lo in range(0, result.size, CHUNK):  # result = order[result], in place
        result[lo:lo + CHUNK] = order[result[lo:lo + CHUNK]]
    return result


def _sorted_isin(queries: np.ndarray, sorted_keys: np.ndarray) -> np.ndarray:
    """bool ``[Q]``: membership of sorted ``queries`` in sorted ``sorted_keys``, in chunks.

    Sorted queries make each binary search start where the last one ended (cache friendly).
    """
    found = np.zeros(queries.size, dtype=bool)
    if sorted_keys.size == 0:
        return found
    for lo in range(0, queries.size, CHUNK):
        q = queries[lo:lo + CHUNK]
        pos = np.searchsorted(sorted_keys, q)
        np.minimum(pos, sorted_keys.size - 1, out=pos)
        found[lo:lo + CHUNK] = sorted_keys[pos] == q
    return found


def _missing_reverses(keys: np.ndarray, w: np.ndarray, n: int, first: np.ndarray | None,
                      ) -> tuple[np.ndarray, np.ndarray]:
    """Sorted keys of the reverses missing from sorted ``keys``, once each, and their weights:
    the weight of the first forward edge (``first`` marks run starts; None when keys are unique)."""
    if first is not None:
        keys, w = keys[first], w[first]
    # keys are sorted by (dst, src): a stable sort by src orders their reverses by (src, dst)
    by_src = _stable_order_by(keys % n, n)
    rev, w_rev = keys[by_src], w[by_src]
    del by_src
    _reverse_keys(rev, n, out=rev)
    missing = ~_sorted_isin(rev, keys)
    return rev[missing], w_rev[missing]


def _insert_sorted(keys: np.ndarray, w: np.ndarray, new_keys: np.ndarray, new_w: np.ndarray,
                   ) -> tuple[np.ndarray, np.ndarray]:
    """Merge sorted ``new_keys`` (none equal to a key of ``keys``) and their weights into sorted
    ``keys`` and ``w``; the order of ``keys`` among themselves is kept."""
    at = np.empty(new_keys.size, dtype=np.int64)
    for lo in range(0, new_keys.size, CHUNK):  # final positions of the new keys
        hi = min(new_keys.size, lo + CHUNK)
        at[lo:hi] = np.searchsorted(keys, new_keys[lo:hi])
        at[lo:hi] += np.arange(lo, hi)
    mask = np.zeros(keys.size + new_keys.size, dtype=bool)
    mask[at] = True
    del at
    merged_keys = np.empty(mask.size, dtype=np.int64)
    merged_w = np.empty(mask.size, dtype=w.dtype)
    merged_keys[mask] = new_keys  # a boolean mask fills its places in order
    merged_w[mask] = new_w
    np.logical_not(mask, out=mask)
    merged_keys[mask] = keys
    merged_w[mask] = w
    return merged_keys, merged_w
