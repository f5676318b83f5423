"""New node ids for a partition: contiguous per part, inner rows in hotness order; halo sets.

The passes go one part at a time over that part's in-edges (:func:`~._kernels.count_part_edges`:
one loop, no per-edge temporaries), so the memory is O(N) on top of the graph itself (whose
arrays may be memory maps: an out-of-core graph is read, never copied); the writer gathers a
part's edges in node chunks of about :data:`CHUNK_EDGES` edges.

Legend: ``N`` nodes, ``E`` edges, ``P`` parts, ``E_q`` in-edges of part q's nodes.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

import numpy as np
from tqdm.auto import tqdm

from ..chunks import plain
from ..graph import Graph, index_dtype

__all__ = ["Relabeling", "relabel", "node_chunks", "count_dtype", "CHUNK_EDGES"]

log = logging.getLogger(__name__)

HOT_COL, OUT_COL, LOOP_COL = 0, 1, 2
"""Columns of :attr:`Relabeling.node_counts` (the kernels use the same numbers)."""

CHUNK_EDGES = 1 << 20
"""In-edges per node chunk of the per-part passes (bounds their temporaries; changes no result)."""


def count_dtype(num_edges: int) -> np.dtype:
    """The narrowest dtype for per-node edge counts (degrees, hotness): int32 when ``E`` fits."""
    return np.dtype(np.int32) if num_edges < 2**31 - 1 else np.dtype(np.int64)


def node_chunks(deg: np.ndarray, chunk_edges: int = CHUNK_EDGES) -> list[tuple[int, int]]:
    """``[lo, hi)`` ranges of nodes whose in-degrees ``deg`` total about ``chunk_edges`` (at
    least one node each): the steps of a pass over the in-edges of those nodes."""
    if deg.size == 0:
        return []
    ends = np.cumsum(deg)
    bounds = [0]
    while bounds[-1] < deg.size:
        lo = bounds[-1]
        base = int(ends[lo - 1]) if lo else 0
        hi = int(np.searchsorted(ends, base + chunk_edges, side="right"))
        bounds.append(min(deg.size, max(hi, lo + 1)))
    return list(zip(bounds[:-1], bounds[1:]))


@dataclass(kw_only=True, slots=True, eq=False)
class Relabeling:
    """Everything the writer needs besides the graph, indexed as documented per field."""

    num_parts: int
    starts: np.ndarray
    """int64 ``[P + 1]``: part p owns new global ids ``[starts[p], starts[p+1])``."""
    order: np.ndarray
    """``[N]`` (:func:`~partitioners.graph.index_dtype`): new global id -> original id (part p's inner rows, in local order, are
    ``order[starts[p]:starts[p+1]]``)."""
    node_map: np.ndarray
    """int64 ``[N]``: original id -> new global id (the inverse of ``order``)."""
    halos: list[np.ndarray]
    """Per part, int32/int64 ``[num_halo_p]``: new global ids of its halo rows, ascending (which
    groups them by owner part, ascending)."""
    node_counts: np.ndarray
    """``[N, 3]`` by original id (:func:`count_dtype`; the folder stores int64): per node its
    hotness (local out-edges + number of parts holding the node as halo), out-degree and
    self-loop edges ``v -> v``, side by side so that a node's three share a cache line in the
    passes that look them up by random ids."""
    edge_cut: int
    """Edges whose source and destination are in different parts (counted on the way)."""

    @property
    def hotness(self) -> np.ndarray:
        return self.node_counts[:, HOT_COL]

    @property
    def out_degree(self) -> np.ndarray:
        return self.node_counts[:, OUT_COL]

    @property
    def self_loops(self) -> np.ndarray:
        return self.node_counts[:, LOOP_COL]


def relabel(graph: Graph, assignment: np.ndarray, num_parts: int, *, progress: bool = False) -> Relabeling:
    """Compute new ids, halo sets, hotness, out-degrees and self-loop counts (see
    ``docs/format.md``, Ids), in one pass over the edges.

    ``assignment`` is a checked int ``[N]`` (:func:`partitioners.quality.check_assignment`).
    """
    from ._kernels import count_part_edges  # numba: imported by the writer, not by readers
    n = graph.num_nodes
    indptr, indices = graph.indptr, graph.indices
    counts = np.bincount(assignment, minlength=num_parts)
    starts = np.zeros(num_parts + 1, dtype=np.int64)
    np.cumsum(counts, out=starts[1:])
    # original ids grouped by part, ascending inside a part; becomes `order` in place below
    order = np.argsort(assignment, kind="stable").astype(index_dtype(n))
    node_counts = np.zeros((n, 3), dtype=count_dtype(graph.num_edges))
    hotness = node_counts[:, HOT_COL]
    mark = np.zeros(n, dtype=bool)
    # the part of each source is looked up once per edge: int8 (N bytes) stays in the cache
    part_of = assignment.astype(np.int8) if num_parts <= 127 else assignment
    idx = index_dtype(n)
    halos_orig: list[np.ndarray] = []
    edge_cut = 0
    for q in tqdm(range(num_parts), desc="halos", unit="part", disable=not progress):
        part_nodes = order[starts[q]:starts[q + 1]]
        edge_cut += count_part_edges(plain(indptr), plain(indices), part_nodes, part_of, q,
                                     node_counts, mark)
        halo = np.flatnonzero(mark).astype(idx)
        mark[halo] = False
        hotness[halo] += 1
        halos_orig.append(halo)
        log.debug("part %d: %d inner, %d halo", q, part_nodes.size, halo.size)
    del part_of
    for q in range(num_parts):
        s, e = starts[q], starts[q + 1]
        # stable sort on -hotness keeps ascending original id among ties
        order[s:e] = order[s:e][np.argsort(-hotness[order[s:e]], kind="stable")]
    node_map = np.empty(n, dtype=np.int64)
    node_map[order] = np.arange(n, dtype=np.int64)
    halos = []
    while halos_orig:  # convert one at a time, freeing as we go; marks put the new ids in order
        mark[node_map[halos_orig.pop(0)]] = True
        halo = np.flatnonzero(mark).astype(idx)
        mark[halo] = False
        halos.append(halo)
    return Relabeling(num_parts=num_parts, starts=starts, order=order, node_map=node_map,
                      halos=halos, node_counts=node_counts, edge_cut=edge_cut)
