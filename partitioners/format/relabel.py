"""New node ids for a partition: contiguous per part, inner rows in hotness order; halo sets.

All passes are vectorised numpy and go one part at a time over that part's in-edges, so the
temporary memory is O(N + edges of the largest part) on top of the graph itself.

Legend: ``N`` nodes, ``E`` edges, ``P`` parts, ``E_q`` in-edges of part q's nodes.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

import numpy as np
from tqdm.auto import tqdm

from ..graph import Graph, index_dtype

__all__ = ["Relabeling", "relabel", "edge_positions", "out_degree"]

log = logging.getLogger(__name__)


@dataclass(kw_only=True, slots=True, eq=False)
class Relabeling:
    """Everything the writer needs besides the graph, indexed as documented per field."""

    num_parts: int
    starts: np.ndarray
    """int64 ``[P + 1]``: part p owns new global ids ``[starts[p], starts[p+1])``."""
    order: np.ndarray
    """int64 ``[N]``: new global id -> original id (part p's inner rows, in local order, are
    ``order[starts[p]:starts[p+1]]``)."""
    node_map: np.ndarray
    """int64 ``[N]``: original id -> new global id (the inverse of ``order``)."""
    halos: list[np.ndarray]
    """Per part, int32/int64 ``[num_halo_p]``: new global ids of its halo rows, ascending (which
    groups them by owner part, ascending)."""
    hotness: np.ndarray
    """int64 ``[N]`` by original id: local out-edges + number of parts holding the node as halo."""
    self_loops: np.ndarray
    """int64 ``[N]`` by original id: self-loop edges ``v -> v``."""


def edge_positions(indptr: np.ndarray, nodes: np.ndarray) -> np.ndarray:
    """int64 ``[sum of in-degrees]``: CSR positions of the in-edges of ``nodes``, node by node in
    the given order, each node's edges in CSR order."""
    starts = indptr[nodes]
    lens = indptr[nodes + 1] - starts
    total = int(lens.sum())
    pos = np.arange(total, dtype=np.int64)
    if total:
        pos += np.repeat(starts - (np.cumsum(lens) - lens), lens)
    return pos


def out_degree(graph: Graph, chunk_edges: int = 1 << 22) -> np.ndarray:
    """int64 ``[N]``: out-degree of every node, counted over chunks of ``indices`` (``np.bincount``
    would otherwise make an int64 copy of the whole int32 ``indices``)."""
    n = graph.num_nodes
    deg = np.zeros(n, dtype=np.int64)
    for lo in range(0, graph.num_edges, chunk_edges):
        deg += np.bincount(graph.indices[lo:lo + chunk_edges], minlength=n)
    return deg


def relabel(graph: Graph, assignment: np.ndarray, num_parts: int, *, progress: bool = False) -> Relabeling:
    """Compute new ids, halo sets, hotness and self-loop counts (see ``docs/format.md``, Ids).

    ``assignment`` is a checked int ``[N]`` (:func:`partitioners.quality.check_assignment`).
    """
    n = graph.num_nodes
    indptr, indices = graph.indptr, graph.indices
    counts = np.bincount(assignment, minlength=num_parts)
    starts = np.zeros(num_parts + 1, dtype=np.int64)
    np.cumsum(counts, out=starts[1:])
    # original ids grouped by part, ascending inside a part; becomes `order` in place below
    order = np.argsort(assignment, kind="stable")
    hotness = np.zeros(n, dtype=np.int64)
    self_loops = np.zeros(n, dtype=np.int64)
    mark = np.zeros(n, dtype=bool)
    in_degree = np.diff(indptr)
    idx = index_dtype(n)
    halos_orig: list[np.ndarray] = []
    for q in tqdm(range(num_parts), desc="halos", unit="part", disable=not progress):
        nodes = order[starts[q]:starts[q + 1]]
        pos = edge_positions(indptr, nodes)
        src = indices[pos]
        del pos
        own = assignment[src] == q
        local_src = src[own]
        hotness += np.bincount(local_src, minlength=n)
        dst_own = np.repeat(nodes, in_degree[nodes])[own]
        loop_nodes = dst_own[local_src == dst_own]
        del dst_own, local_src
        if loop_nodes.size:
            u, c = np.unique(loop_nodes, return_counts=True)
            self_loops[u] += c
        mark[src[~own]] = True
        del src, own
        halo = np.flatnonzero(mark).astype(idx)
        mark[halo] = False
        hotness[halo] += 1
        halos_orig.append(halo)
        log.debug("part %d: %d inner, %d halo", q, nodes.size, halo.size)
    for q in range(num_parts):
        s, e = starts[q], starts[q + 1]
        # stable sort on -hotness keeps ascending original id among ties
        order[s:e] = order[s:e][np.argsort(-hotness[order[s:e]], kind="stable")]
    node_map = np.empty(n, dtype=np.int64)
    node_map[order] = np.arange(n, dtype=np.int64)
    halos = []
    while halos_orig:  # convert one at a time, freeing as we go
        halos.append(np.sort(node_map[halos_orig.pop(0)]).astype(idx))
    return Relabeling(num_parts=num_parts, starts=starts, order=order, node_map=node_map,
                      halos=halos, hotness=hotness, self_loops=self_loops)
