"""The ``metis`` method: multilevel k-way partitioning with METIS (through pymetis).

METIS partitions an undirected simple graph, so whatever the input (directed, self-loops,
repeated edges) it gets the symmetric pattern of ``A + A^T`` without the diagonal and with each
neighbour once (:func:`symmetric_adjacency`), as int64 CSR arrays handed to pymetis without
copies. It minimises the edge cut of that graph subject to balance (``nodes``: weight 1, ``edges``:
in-degree, ``train``: train flag; see :mod:`._common`). ``imbalance`` becomes METIS's ``ufactor``
(``1000 * imbalance``), the seed its ``seed`` option: the result is deterministic for a given seed.

Several criteria: pymetis (checked with 2025.2.2) always calls METIS with one constraint
(``ncon = 1``; vertex weights past the first ``N`` are ignored), so METIS balances one combined
weight, the sum of the criteria each scaled to the same total, and
:func:`~.refine.rebalance_parts` then moves the fewest-volume-costly nodes until every criterion
is within its bound.

METIS may leave a part empty on tiny or disconnected graphs; that is allowed downstream.
pymetis is imported at call time only.
This module is torch-free.
"""

from __future__ import annotations

import logging
import time

import numpy as np

from ..graph import Graph
from ._common import vertex_weights

__all__ = ["metis_assign", "symmetric_adjacency"]

logger = logging.getLogger(__name__)


def _import_pymetis():  # noqa: ANN202 - module object
    try:
        import pymetis
    except ImportError as e:
        raise ValueError("method 'metis' needs pymetis, which is not importable "
                         f"({e}); install it with `pip install pymetis` "
                         "(or use method='fennel', 'ldg' or 'random')") from e
    return pymetis


def symmetric_adjacency(graph: Graph, dtype: np.dtype | type = np.int64,
                        ) -> tuple[np.ndarray, np.ndarray]:
    """``(xadj [N+1], adjncy [M])`` of the undirected simple graph under ``graph``.

    ``u`` and ``v`` are adjacent when ``u -> v`` or ``v -> u`` is an edge and ``u != v``; each
    neighbour is listed once, ascending. ``M`` is twice the number of undirected edges.
    """
    import scipy.sparse as sp

    n = graph.num_nodes
    indptr, indices = graph.indptr, graph.indices
    deg = np.diff(indptr)
    dst = np.repeat(np.arange(n, dtype=indices.dtype), deg)
    # The CSR is sorted by (dst, src): a repeated edge sits right after its first copy.
    keep = indices != dst
    if indices.size > 1:
        keep[1:] &= (indices[1:] != indices[:-1]) | (dst[1:] != dst[:-1])
    del dst
    if keep.all():
        kept_ptr, kept_idx = indptr, indices
    else:
        kept_before = np.zeros(indices.size + 1, dtype=np.int64)
        np.cumsum(keep, out=kept_before[1:])
        kept_ptr = kept_before[indptr]
        kept_idx = indices[keep]
        del kept_before
    del keep
    data = np.ones(kept_idx.size, dtype=np.bool_)
    a = sp.csr_matrix((data, kept_idx, kept_ptr), shape=(n, n))
    a.has_canonical_format = True  # sorted and deduplicated above
    s = (a + a.T.tocsr()).tocsr()
    return s.indptr.astype(dtype, copy=False), s.indices.astype(dtype, copy=False)


def metis_assign(graph: Graph, num_parts: int, *, seed: int = 0,
                 balance: str | tuple[str, ...] = ("nodes",), imbalance: float = 0.03,
                 ) -> np.ndarray:
    """int32 ``[N]``: METIS's k-way partition (arguments checked by the caller)."""
    n = graph.num_nodes
    if num_parts == 1:
        return np.zeros(n, dtype=np.int32)
    pymetis = _import_pymetis()
    idx_dtype = np.int64 if pymetis._internal._idx_type_width() == 64 else np.int32
    t0 = time.perf_counter()
    xadj, adjncy = symmetric_adjacency(graph, idx_dtype)
    names, W_CN = vertex_weights(graph, balance)
    # One constraint of all ones is METIS's default: pass no weights at all.
    vweights = None if names == ("nodes",) else combined_weights(W_CN).astype(idx_dtype)
    options = pymetis.Options(seed=int(seed), ufactor=max(1, int(round(1000 * imbalance))))
    t1 = time.perf_counter()
    result = pymetis.part_graph(num_parts, pymetis.CSRAdjacency(xadj, adjncy),
                                vweights=vweights, options=options)
    t2 = time.perf_counter()
    logger.info("metis: %d nodes, %d undirected edges, %d constraints: prepare %.2fs, METIS %.2fs",
                n, adjncy.size // 2, len(names), t1 - t0, t2 - t1)
    parts = result.vertex_part  # an array.array (a buffer) in current pymetis, a list in old ones
    try:
        assignment = np.asarray(memoryview(parts)).astype(np.int32)
    except TypeError:
        assignment = np.asarray(parts).astype(np.int32)
    if len(names) > 1:
        from .refine import rebalance_parts

        assignment = rebalance_parts(graph, assignment, num_parts, balance=names,
                                     imbalance=imbalance, seed=seed)
    return assignment


def combined_weights(W_CN: np.ndarray, resolution: int = 64) -> np.ndarray:
    """int64 ``[N]``: one vertex weight for several criteria, each scaled to the same total.

    ``sum_c W_c * resolution * N / total_c``, rounded: a node weighs ``resolution`` per criterion
    in which it is average, so rounding costs at most ``1 / (2 * resolution)`` of an average node.
    """
    n = W_CN.shape[1]
    scale = resolution * n / W_CN.sum(axis=1).astype(np.float64)
    return np.rint((W_CN * scale[:, None]).sum(axis=0)).astype(np.int64)
