"""Feature normalisation at partition time (``gnn-dist partition --normalize-features``).

Two normalisations of the node features ``x`` (``[N, F]``, float32 or float16), computed in
float64 and stored in ``x``'s dtype:

``row``
    PyG's ``torch_geometric.transforms.NormalizeFeatures``, exactly: the matrix's smallest value
    is subtracted from every entry (``x - x.min()``: nothing changes for bag-of-words features,
    whose smallest value is 0), then each row is divided by its sum clamped at 1
    (``x / x.sum(-1, keepdim=True).clamp(min=1)``): rows summing to 1 or more sum to 1, an
    all-zero row stays zero (as does any row summing to less than 1, divided by 1).
``standard``
    Each column to zero mean and unit variance over all ``N`` nodes: ``(x - mean) / std``
    with the population standard deviation; a constant column (its smallest and largest value
    equal) becomes all 0.

Bounded memory: every pass reads ``x`` in row chunks of about :data:`CHUNK_BYTES` (``row``: one
pass for the minimum, one that writes; ``standard``: one for the column sums, minima and maxima,
one for the centred sums of squares, one that writes), so a memory-mapped ``x`` is never loaded
whole; the output is a new array, or a memory map the caller gives (:func:`normalize_features`).
:func:`normalize_graph_features` puts the result of a memory-mapped ``x`` (an npy-dir's, a
memory-mapped ``--features`` file) in a scratch memory map, so it stays out of memory too. The
chunks depend on ``F`` and the dtype only, so a memory map and an in-memory array of the same
values give the same bytes. Torch-free.
"""

from __future__ import annotations

import mmap
import os
from typing import TYPE_CHECKING, Any, Iterator

import numpy as np

from .chunks import rows_per_step

if TYPE_CHECKING:
    from .graph import Graph

__all__ = ["NORMALIZATIONS", "CHUNK_BYTES", "normalize_features", "normalize_graph_features"]

NORMALIZATIONS = ("row", "standard")
"""The values of ``--normalize-features`` (and of ``partition.json``'s ``normalize_features``)."""
CHUNK_BYTES = 16 << 20
"""Bytes of ``x`` read per step of each pass."""


def _chunks(x: np.ndarray) -> Iterator[tuple[int, np.ndarray]]:
    """``(first row, float64 rows)`` of ``x`` by :data:`CHUNK_BYTES`."""
    step = rows_per_step(x, CHUNK_BYTES)
    for lo in range(0, x.shape[0], step):
        yield lo, np.array(x[lo:lo + step], dtype=np.float64)  # a copy: the passes change it


def _row_writer(x: np.ndarray) -> Any:
    """``rows -> normalised rows`` of ``row``: the shift by the matrix's minimum, then each row
    divided by its sum clamped at 1 (PyG's ``NormalizeFeatures``)."""
    low = min((float(rows.min()) for _, rows in _chunks(x)), default=0.0)

    def normalised(rows: np.ndarray) -> np.ndarray:
        rows -= low
        sums = rows.sum(axis=1, keepdims=True)
        np.maximum(sums, 1.0, out=sums)
        rows /= sums
        return rows

    return normalised


def _standard_writer(x: np.ndarray) -> Any:
    """``rows -> standardised rows`` of ``standard``: the column means and population standard
    deviations (two passes: sums, then centred sums of squares), constant columns to 0."""
    n, f = x.shape
    total = np.zeros(f, np.float64)
    low = np.full(f, np.inf)
    high = np.full(f, -np.inf)
    for _, rows in _chunks(x):
        total += rows.sum(axis=0)
        np.minimum(low, rows.min(axis=0), out=low)
        np.maximum(high, rows.max(axis=0), out=high)
    mean = total / n
    squares = np.zeros(f, np.float64)
    for _, rows in _chunks(x):
        rows -= mean
        squares += np.square(rows).sum(axis=0)
    std = np.sqrt(squares / n)
    constant = (low == high) | (std == 0)
    std[constant] = 1.0

    def normalised(rows: np.ndarray) -> np.ndarray:
        rows -= mean
        rows /= std
        rows[:, constant] = 0.0
        return rows

    return normalised


def normalize_features(x: np.ndarray, how: str, *, out: np.ndarray | None = None) -> np.ndarray:
    """``x`` (``[N, F]`` float) normalised by ``how`` (``"row"`` or ``"standard"``; module
    docstring), in ``x``'s dtype.

    ``out``: where to write it (an array or writable memory map of ``x``'s shape and dtype; it
    may be ``x`` itself, written in place after the statistics are taken); default: a new
    array. ``x`` is read in row chunks and never copied whole. Returns ``out``.
    """
    if how not in NORMALIZATIONS:
        raise ValueError(f"unknown feature normalisation {how!r}; choose one of {', '.join(NORMALIZATIONS)}")
    if x.ndim != 2:
        raise ValueError(f"features must be 2-D [num_nodes, dim], got shape {x.shape}")
    if out is None:
        out = np.empty(x.shape, dtype=x.dtype)
    elif out.shape != x.shape or out.dtype != x.dtype:
        raise ValueError(f"out is {out.dtype}{list(out.shape)}, expected {x.dtype}{list(x.shape)}")
    if x.size == 0:
        return out
    normalised = _row_writer(x) if how == "row" else _standard_writer(x)
    for lo, rows in _chunks(x):
        out[lo:lo + rows.shape[0]] = normalised(rows)
    return out


def _memory_mapped(a: np.ndarray) -> bool:
    """True when ``a`` (or an array it is a view of) is a memory map."""
    base: Any = a
    while base is not None:
        if isinstance(base, (np.memmap, mmap.mmap)):
            return True
        base = getattr(base, "base", None)
    return False


def normalize_graph_features(graph: Graph, how: str, *,
                             scratch_dir: str | os.PathLike[str] | None = None) -> Graph:
    """Replace ``graph.x`` by its normalisation (:func:`normalize_features`); returns ``graph``.

    An in-memory ``x`` gets a new in-memory array (the caller's array is left as it was). A
    memory-mapped ``x`` gets a read-only scratch memory map (``N * F`` times the item size on
    disk), in the graph's :attr:`~partitioners.graph.Graph.scratch_dir` (an out-of-core graph),
    else in ``scratch_dir`` (default: the system's temporary folder); its file is unlinked once
    mapped, so the disk space comes back with the array.

    Raises:
        ValueError: the graph has no features, or ``how`` is unknown.
    """
    if graph.x is None:
        raise ValueError("the graph has no features to normalise")
    x = graph.x
    if not _memory_mapped(x):
        graph.x = normalize_features(x, how)
        return graph
    import tempfile

    from .outofcore.scratch import Scratch

    parent = graph.scratch_dir or scratch_dir or tempfile.gettempdir()
    scratch = Scratch(parent)
    try:
        out = scratch.array(f"features-{how}", x.dtype, x.shape)
        normalize_features(x, how, out=out)
        graph.x = scratch.freeze(out)
    finally:
        scratch.close()  # the map stays valid: its file is unlinked, not gone
    return graph
