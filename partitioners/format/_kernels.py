"""The writer's two loops over a part's in-edges, compiled by numba: one pass each, no
temporaries of the part's size (the numpy versions built positions, sources and masks per edge).
"""

from __future__ import annotations

import numba
import numpy as np

__all__ = ["count_part_edges", "gather_edge_rows", "gather_part_edges", "gather_row_counts",
           "weighted_in_degree"]


@numba.njit(cache=True, nogil=True)
def count_part_edges(indptr: np.ndarray, indices: np.ndarray, nodes: np.ndarray,
                     assignment: np.ndarray, q: int, node_counts: np.ndarray,
                     mark: np.ndarray) -> int:
    """Over the in-edges ``u -> v`` of part ``q``'s ``nodes``: ``node_counts[u, 1] += 1``
    (``u``'s out-degree), and ``node_counts[u, 0] += 1`` when ``u`` is in ``q`` too (a local
    out-edge of ``u``: its hotness), ``node_counts[v, 2] += 1`` for ``u == v`` (a self-loop),
    ``mark[u] = True`` when ``u`` is in another part (a halo row of ``q``). Returns the number
    of those cut edges (part ``q``'s share of the edge cut)."""
    cut = 0
    for i in range(nodes.size):
        v = nodes[i]
        for e in range(indptr[v], indptr[v + 1]):
            u = indices[e]
            node_counts[u, 1] += 1
            if assignment[u] == q:
                node_counts[u, 0] += 1
                if u == v:
                    node_counts[v, 2] += 1
            else:
                mark[u] = True
                cut += 1
    return cut


@numba.njit(cache=True, nogil=True)
def gather_row_counts(indptr: np.ndarray, rows: np.ndarray, node_counts: np.ndarray,
                      local_of: np.ndarray, in_degree: np.ndarray, out_degree: np.ndarray,
                      self_loops: np.ndarray) -> None:
    """For each local row ``i`` of a part (original id ``u = rows[i]``): its in-degree (from
    ``indptr``), out-degree and self-loops (``node_counts[u, 1]``, ``[u, 2]``) into the three
    outputs, and ``local_of[u] = i``; one pass, where numpy would take one per array."""
    for i in range(rows.size):
        u = rows[i]
        in_degree[i] = indptr[u + 1] - indptr[u]
        out_degree[i] = node_counts[u, 1]
        self_loops[i] = node_counts[u, 2]
        local_of[u] = i


@numba.njit(cache=True, nogil=True)
def gather_part_edges(indptr: np.ndarray, indices: np.ndarray, nodes: np.ndarray,
                      local_of: np.ndarray, out: np.ndarray, weight: np.ndarray,
                      out_weight: np.ndarray, weighted: bool) -> int:
    """The in-edges of ``nodes``, node by node in CSR order: ``out`` gets the local id of each
    source (``local_of``), ``out_weight`` its weight. Returns the number written, or ``-1 - k``
    when the ``k``-th source has no local id (neither inner nor halo: a bug)."""
    k = 0
    for i in range(nodes.size):
        v = nodes[i]
        for e in range(indptr[v], indptr[v + 1]):
            local = local_of[indices[e]]
            if local < 0:
                return -1 - k
            out[k] = local
            if weighted:
                out_weight[k] = weight[e]
            k += 1
    return k


@numba.njit(cache=True, nogil=True)
def gather_edge_rows(indptr: np.ndarray, nodes: np.ndarray, rows: np.ndarray, out: np.ndarray) -> int:
    """The edge rows (``rows`` ``[E, D]``, in CSR order) of the in-edges of ``nodes``, node by
    node in CSR order, into ``out``: the order :func:`gather_part_edges` writes the edges in.
    Returns the number of rows written."""
    k = 0
    for i in range(nodes.size):
        v = nodes[i]
        for e in range(indptr[v], indptr[v + 1]):
            out[k, :] = rows[e, :]
            k += 1
    return k


@numba.njit(cache=True, nogil=True)
def weighted_in_degree(indptr: np.ndarray, indices: np.ndarray, weight: np.ndarray, lo: int, hi: int,
                       out: np.ndarray) -> None:
    """For nodes ``v`` in ``[lo, hi)``: ``out[v - lo, 0]`` the sum of the weights of ``v``'s in-edges
    from other nodes (float64 sums, stored float32), ``out[v - lo, 1]`` the weight of its self-loop
    (the last one in CSR order; 0 without one)."""
    for v in range(lo, hi):
        total = 0.0
        loop = 0.0
        for e in range(indptr[v], indptr[v + 1]):
            if indices[e] == v:
                loop = weight[e]
            else:
                total += weight[e]
        out[v - lo, 0] = total
        out[v - lo, 1] = loop
