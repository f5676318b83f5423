"""The CSR by destination built on disk from edge chunks: a counting pass and a fill pass.

1. **Count** (:func:`~._kernels.count_degrees`): each row's entries, over the edge chunks; ids
   are checked and self-loops counted here.
2. **Fill** (:func:`~._kernels.fill_rows`): a second pass over the same chunks writes each edge
   at its row's cursor in a memory-mapped buffer, so every row holds its entries in input order.
3. **Clean** (:func:`~._kernels.clean_rows`): each row is read back, sorted by source (stably,
   so repeated edges keep their weights in input order), cleaned, and written to the output (in
   place when the dtypes allow: the output never overtakes the input).

Symmetrising puts the reverse of every edge in the fill too, tagged in its low bit (see
:func:`~._kernels.fill_rows`); after the sort an input edge ``u -> v`` comes before the reverses
of ``v -> u`` in row ``v``, so a row keeps its input edges and, only where it has none, one
reverse (the first, whose weight is the first forward edge's). Duplicates, self-loops and the
added reverses are counted in the report exactly as :func:`partitioners.graph_csr.build_csr`
counts them, and the arrays are equal to that function's: the in-memory and the out-of-core path
write the same partition folder.

Memory: the edge chunks of the caller, one row's sorted copy and, while the entries fit int32,
the per-row counts (then cursors) as int32 ``[N]``; ``indptr``, wider counters and every ``[E]``
array are memory maps in the :class:`~.scratch.Scratch` folder. Disk: the fill (``8`` bytes per entry
symmetrised, else the index width, plus 4 weighted) and, symmetrised, the output (index width
per entry). This module is torch-free.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Iterable, Iterator

import numpy as np
from tqdm.auto import tqdm

from ..chunks import plain, row_ranges
from ..errors import GraphError
from ..graph_csr import index_dtype
from .scratch import Scratch

__all__ = ["EdgeChunk", "DiskCSR", "build_csr_on_disk", "build_memory", "SEGMENT_ENTRIES",
           "csr_edge_chunks"]

SEGMENT_ENTRIES = 1 << 22
"""Entries per call of the clean kernel (a progress step; a longer row is one call of its own)."""

EdgeChunk = tuple[np.ndarray, np.ndarray, "np.ndarray | None"]
"""``(src, dst, weight or None)`` of consecutive input edges."""


@dataclass(eq=False)
class DiskCSR:
    """The result: memory-mapped ``indptr`` int64 ``[n+1]``, ``indices`` ``[E]``, weights."""

    indptr: np.ndarray
    indices: np.ndarray
    edge_weight: np.ndarray | None
    report: dict[str, int] = field(default_factory=dict)


def _check_chunk(src: np.ndarray, dst: np.ndarray, bad: int, offset: int, n: int,
                 names: tuple[str, str]) -> None:
    """Raise the GraphError for the edge at ``bad`` of a chunk that starts at ``offset``."""
    for name, a in zip(names, (src, dst)):
        v = int(a[bad])
        if v < 0:
            raise GraphError(f"{name}[{offset + bad}] = {v} is negative; node ids must be in [0, {n})")
        if v >= n:
            raise GraphError(f"{name}[{offset + bad}] = {v} is out of range: num_nodes is {n}, "
                             f"ids must be in [0, {n})")


def build_csr_on_disk(chunks: Callable[[], Iterable[EdgeChunk]], n: int, scratch: Scratch, *,
                      weighted: bool, symmetrize: bool = False, remove_self_loops: bool = False,
                      remove_duplicates: bool = False, dtype: np.dtype | None = None,
                      names: tuple[str, str] = ("src", "dst"), payload_dtype: Any = np.float32,
                      max_entries: int | None = None, progress: bool = False) -> DiskCSR:
    """Build the CSR by destination of the edges that ``chunks()`` yields (called twice: the
    same edges in the same order each time) on ``n`` nodes, in ``scratch``.

    Options as :meth:`Graph.from_edges <partitioners.graph.Graph.from_edges>`; ``dtype`` of
    ``indices`` (default :func:`~partitioners.graph_csr.index_dtype`); ``names`` of the two
    id arrays in error messages; ``progress``: tqdm bars that count edges and entries.
    ``max_entries``: a bound on the entries (the edges, twice them symmetrised) when known:
    below ``2**31 - 1`` the per-row counters are int32 in memory (``4 N`` bytes, which the
    count and fill passes' random updates find in the cache far more often than an int64
    map's), else int64 in the scratch folder. ``weighted``: the chunks' third entry is a per-edge payload of ``payload_dtype`` (float32
    weights; int64 edge positions, which the npy-dir reader carries to gather the weights and
    edge features by), kept with its edge as a weight is.

    Raises:
        GraphError: an id outside ``[0, n)``, naming the array and the edge.
    """
    from ._kernels import count_degrees, fill_rows

    dtype = np.dtype(dtype or index_dtype(n))
    report: dict[str, int] = {}
    if max_entries is not None and max_entries < 2**31 - 1:
        deg = np.zeros(n, dtype=np.int32)
    else:
        deg = scratch.array("degrees", np.int64, n)
    deg_plain = plain(deg)
    loops = 0
    offset = 0
    with _bar("count edges", None, progress) as bar:
        for src, dst, _ in chunks():
            src, dst = plain(src), plain(dst)
            bad, dropped = count_degrees(src, dst, n, deg_plain, remove_self_loops, symmetrize)
            if bad >= 0:
                _check_chunk(src, dst, bad, offset, n, names)
            loops += dropped
            offset += src.size
            bar.update(src.size)
    if remove_self_loops:
        report["self_loops_removed"] = int(loops)
    indptr = scratch.array("indptr", np.int64, n + 1)
    np.cumsum(deg, dtype=np.int64, out=indptr[1:])
    total = int(indptr[-1])
    cursor = deg  # reused: each row's next free slot
    cursor[:] = indptr[:-1]
    # symmetrised entries are 2 * id + tag: they need one bit more than the ids
    wide = symmetrize and 2 * n + 1 > np.iinfo(dtype).max
    fill_dtype = np.dtype(np.int64) if wide else dtype
    fill = scratch.array("fill", fill_dtype, total)
    payload_dtype = np.dtype(payload_dtype)
    fill_w = scratch.array("fill-weights", payload_dtype, total if weighted else 0)
    empty_w = np.zeros(0, payload_dtype)
    with _bar("fill rows", offset, progress) as bar:
        for src, dst, w in chunks():
            fill_rows(plain(src), plain(dst),
                      empty_w if w is None else plain(np.asarray(w, payload_dtype)), weighted,
                      plain(cursor), plain(fill), plain(fill_w), remove_self_loops, symmetrize)
            bar.update(src.size)
    del cursor, deg, deg_plain
    in_place = fill.dtype == dtype  # the output never overtakes the segment being read
    out = fill if in_place else scratch.array("indices", dtype, total)
    out_w = fill_w
    with _bar("sort rows", total, progress) as bar:
        kept = _clean_rows(indptr, fill, fill_w if weighted else None, out,
                           out_w if weighted else None, n, symmetrize=symmetrize,
                           dedupe=remove_duplicates, report=report, step=bar.update)
    if not in_place:
        fill = scratch.freeze(fill, 0)
    indices = scratch.freeze(out, kept)
    weights = scratch.freeze(out_w, kept) if weighted else None
    return DiskCSR(indptr=scratch.freeze(indptr), indices=indices, edge_weight=weights,
                   report=report)


def build_memory(size: object) -> int:
    """Bytes the out-of-core read needs besides its memory maps (a :class:`~partitioners.memory.GraphSize`):
    the int32 per-row counters (``4 N``), the clean pass's copy of the longest row (counted at
    16 B per edge of ``E / 64``: a hub holding 1.5% of the edges), and the node-data
    conversions of :mod:`.npy_dir` (a chunk read and its converted copy)."""
    from .npy_dir import CHUNK_BYTES

    return (4 * size.num_nodes + 16 * (size.num_edges // 64)  # type: ignore[attr-defined]
            + 2 * CHUNK_BYTES)


def _bar(desc: str, total: int | None, enabled: bool) -> Any:
    """A tqdm bar counting edges (or row entries)."""
    return tqdm(total=total, desc=desc, unit="edge", unit_scale=True, disable=not enabled)


def _clean_rows(indptr: np.ndarray, fill: np.ndarray, fill_w: np.ndarray | None, out: np.ndarray,
                out_w: np.ndarray | None, n: int, *, symmetrize: bool, dedupe: bool,
                report: dict[str, int], step: Callable[[int], None]) -> int:
    """Sort, clean and compact every row (module docstring, step 3) with
    :func:`~._kernels.clean_rows`, row ranges of about :data:`SEGMENT_ENTRIES` entries a call
    (for the progress bar); rewrite ``indptr`` to the kept entries; return their number."""
    from ._kernels import clean_rows

    weighted = fill_w is not None
    empty_w = np.zeros(0, np.float32)
    ranges = list(row_ranges(indptr, SEGMENT_ENTRIES))  # before the calls rewrite indptr
    starts = [(int(indptr[lo]), int(indptr[hi])) for lo, hi in ranges]
    written = duplicates = added = 0
    args = (plain(indptr), plain(fill), plain(fill_w) if weighted else empty_w, weighted,
            plain(out), plain(out_w) if out_w is not None else empty_w)
    for (lo, hi), (a, b) in zip(ranges, starts):
        written, dup, add = clean_rows(*args, lo, hi, a, written, symmetrize, dedupe)
        duplicates += dup
        added += add
        step(b - a)
    if dedupe:
        report["duplicates_removed"] = int(duplicates)
    if symmetrize:
        report["symmetrize_added"] = int(added)
    return written


def csr_edge_chunks(indptr: np.ndarray, indices: np.ndarray, chunk_edges: int = 1 << 22,
                    ) -> Callable[[], Iterator[EdgeChunk]]:
    """The edges of a CSR by destination as chunks ``(sources, destinations, None)``, row
    ranges of about ``chunk_edges`` edges (the input of METIS's symmetric adjacency)."""
    def chunks() -> Iterator[EdgeChunk]:
        for lo, hi in row_ranges(indptr, chunk_edges):
            a, b = int(indptr[lo]), int(indptr[hi])
            dst = np.repeat(np.arange(lo, hi, dtype=np.int64), np.diff(np.asarray(indptr[lo:hi + 1])))
            yield plain(np.asarray(indices[a:b])), dst, None
    return chunks
