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

Isolated nodes (no edge to or from another node: an empty row of the symmetric adjacency) never
reach METIS, which gains nothing from them and slows down badly on many (a 4-edge graph with ids
up to 2,000,000 ran for over 10 minutes, then pymetis failed with "unknown exception"). METIS
partitions the subgraph of the other nodes, renumbered; the isolated ones then fill the parts
by balance (:func:`place_isolated`). A graph without isolated nodes is passed whole, unchanged.

METIS may leave a part empty on tiny or disconnected graphs; that is allowed downstream.
pymetis is imported at call time only.
This module is torch-free.
"""

from __future__ import annotations

import logging
import time
from typing import TYPE_CHECKING, Any

import numpy as np

from ..graph import Graph
from ._common import vertex_weights
from .targets import check_part_weights, part_shares

if TYPE_CHECKING:
    from ..memory import GraphSize

__all__ = ["metis_assign", "symmetric_adjacency", "symmetric_adjacency_on_disk", "induced_subgraph", "place_isolated",
           "metis_memory"]

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


def symmetric_adjacency_on_disk(graph: Graph, dtype: np.dtype | type = np.int64,
                                ) -> tuple[np.ndarray, np.ndarray]:
    """:func:`symmetric_adjacency` of an out-of-core graph, built on disk in its
    :attr:`~partitioners.graph.Graph.scratch_dir` (:func:`~partitioners.outofcore.csr_build.build_csr_on_disk`:
    symmetrised, self-loops and repeats dropped), as memory maps: equal arrays, and nothing of
    size ``E`` in memory."""
    from ..outofcore.csr_build import build_csr_on_disk, csr_edge_chunks
    from ..outofcore.scratch import Scratch

    dtype = np.dtype(dtype)
    scratch = Scratch(graph.scratch_dir)  # type: ignore[arg-type]
    try:
        adj = build_csr_on_disk(csr_edge_chunks(graph.indptr, graph.indices), graph.num_nodes,
                                scratch, weighted=False, symmetrize=True, remove_self_loops=True,
                                remove_duplicates=True, dtype=dtype, names=("indices", "rows"),
                                max_entries=2 * graph.num_edges)
        xadj = adj.indptr
        if xadj.dtype != dtype:
            narrow = scratch.array("xadj", dtype, xadj.shape)
            for lo in range(0, xadj.size, 1 << 22):
                narrow[lo:lo + (1 << 22)] = xadj[lo:lo + (1 << 22)]
            xadj = scratch.freeze(narrow)
    finally:
        scratch.close()  # the maps stay valid: their files are unlinked, not gone
    return xadj, adj.indices


def metis_assign(graph: Graph, num_parts: int, *, seed: int = 0,
                 balance: str | tuple[str, ...] = ("nodes",), imbalance: float = 0.03,
                 part_weights: Any = None) -> np.ndarray:
    """int32 ``[N]``: METIS's k-way partition (arguments checked by the caller).

    ``part_weights`` (:mod:`.targets`) become METIS's target part weights (``tpwgts``: part
    ``p`` gets the fraction ``w_p / sum(w)`` of the vertex weight); None: equal parts.

    Isolated nodes (no edge to or from another node) do not enter METIS: it partitions the
    subgraph of the others, renumbered, and the isolated ones then fill the parts by balance
    (:func:`place_isolated`). A graph without isolated nodes goes to METIS whole, as it is.
    """
    n = graph.num_nodes
    if num_parts == 1:
        return np.zeros(n, dtype=np.int32)
    fractions = check_part_weights(part_weights, num_parts)
    pymetis = _import_pymetis()
    idx_dtype = np.int64 if pymetis._internal._idx_type_width() == 64 else np.int32
    t0 = time.perf_counter()
    on_disk = graph.scratch_dir is not None
    xadj, adjncy = (symmetric_adjacency_on_disk if on_disk else symmetric_adjacency)(graph, idx_dtype)
    names, W_CN = vertex_weights(graph, balance)
    # One constraint of all ones is METIS's default: pass no weights at all.
    vweights = None if names == ("nodes",) else combined_weights(W_CN).astype(idx_dtype)
    connected = np.diff(xadj) > 0
    num_isolated = n - int(np.count_nonzero(connected))
    if num_isolated:
        out = None
        if on_disk:
            from ..outofcore.scratch import Scratch

            with Scratch(graph.scratch_dir) as scratch:  # type: ignore[arg-type]
                out = scratch.array("adjncy-connected", adjncy.dtype, adjncy.shape)
                xadj, adjncy = induced_subgraph(xadj, adjncy, connected, out)
                adjncy = scratch.freeze(adjncy)
        else:
            xadj, adjncy = induced_subgraph(xadj, adjncy, connected)
        if vweights is not None:
            vweights = vweights[connected]
    options = pymetis.Options(seed=int(seed), ufactor=max(1, int(round(1000 * imbalance))))
    t1 = time.perf_counter()
    if xadj.size > 1:
        result = pymetis.part_graph(num_parts, pymetis.CSRAdjacency(xadj, adjncy),
                                    vweights=vweights, options=options, tpwgts=metis_tpwgts(fractions))
        parts = _as_int32(result.vertex_part)
    else:  # no edges at all: every node is isolated
        parts = np.zeros(0, dtype=np.int32)
    t2 = time.perf_counter()
    logger.info("metis: %d nodes, %d undirected edges, %d constraints: prepare %.2fs, METIS %.2fs",
                n - num_isolated, adjncy.size // 2, len(names), t1 - t0, t2 - t1)
    if num_isolated:
        assignment = np.empty(n, dtype=np.int32)
        assignment[connected] = parts
        place_isolated(assignment, ~connected, W_CN, num_parts, fractions)
        logger.info("metis: %d isolated nodes placed by balance, outside METIS", num_isolated)
    else:
        assignment = parts
    if len(names) > 1:
        from .rebalance import rebalance_parts

        assignment = rebalance_parts(graph, assignment, num_parts, balance=names,
                                     imbalance=imbalance, seed=seed, part_weights=fractions)
    return assignment


def metis_tpwgts(fractions: tuple[float, ...] | None) -> list[float] | None:
    """pymetis's ``tpwgts``: one target fraction per part (pymetis always passes one constraint,
    so ``nparts`` floats, not ``nparts * ncon``), summing to 1; None for equal parts (METIS's
    default, and the call made before part weights existed)."""
    if fractions is None:
        return None
    out = [float(f) for f in fractions]
    out[-1] = max(0.0, 1.0 - sum(out[:-1]))  # exactly 1 in floats: pymetis warns otherwise
    return out


def _as_int32(parts: object) -> np.ndarray:
    """pymetis's ``vertex_part`` (an array.array, a buffer, in current pymetis; a list in old
    ones) as int32."""
    try:
        return np.asarray(memoryview(parts)).astype(np.int32)  # type: ignore[arg-type]
    except TypeError:
        return np.asarray(parts).astype(np.int32)


def induced_subgraph(xadj: np.ndarray, adjncy: np.ndarray, keep: np.ndarray,
                     out: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
    """CSR ``(xadj, adjncy)`` of the subgraph on the nodes where bool ``keep`` is True, renumbered
    ``0..K-1`` in id order. The dropped nodes must be isolated (empty rows, listed in no row), so
    the kept rows are the whole of ``adjncy``, renumbered: into ``out`` (e.g. a memory map, for
    an out-of-core graph) chunk by chunk when given, else into a new array."""
    new_id = np.cumsum(keep, dtype=adjncy.dtype) - 1
    sub_xadj = np.concatenate([xadj[:1], xadj[1:][keep]])
    if out is None:
        return sub_xadj, new_id[adjncy]
    for lo in range(0, adjncy.size, 1 << 22):
        out[lo:lo + (1 << 22)] = new_id[adjncy[lo:lo + (1 << 22)]]
    return sub_xadj, out


def place_isolated(assignment: np.ndarray, isolated: np.ndarray, W_CN: np.ndarray,
                   num_parts: int, fractions: tuple[float, ...] | None = None) -> None:
    """Fill ``assignment[isolated]`` (in place) so that the parts' loads stay even.

    Isolated nodes with the same weights (``W_CN[:, v]``, int64 ``[C, N]``) form a group; heavier
    groups go first. A group's ``k`` nodes are spread so that the heaviest part, in the criteria
    they weigh in, is as light as possible (:func:`_fill_counts`); a group that weighs in no
    criterion evens out the node counts. Nodes go in id order, lightest part first. Loads are
    relative to each part's target (``fractions``: :mod:`.targets`).
    """
    mean_C = W_CN.sum(axis=1).astype(np.float64) / num_parts
    mean_C[mean_C == 0] = 1.0
    share_P = part_shares(fractions, num_parts)
    target_CP = mean_C[:, None] * share_P[None, :]
    placed = ~isolated
    load_CP = np.stack([np.bincount(assignment[placed], weights=w[placed], minlength=num_parts)
                        for w in W_CN]).astype(np.float64)
    sizes = np.bincount(assignment[placed], minlength=num_parts).astype(np.float64)
    ids = np.flatnonzero(isolated)
    if W_CN.shape[0] == 1:  # np.unique along an axis is slow; one row needs none
        values, group = np.unique(W_CN[0, ids], return_inverse=True)
        patterns = values[:, None]
    else:
        patterns, group = np.unique(W_CN[:, ids].T, axis=0, return_inverse=True)
    group = group.ravel()
    for g in np.argsort(-(patterns / mean_C).sum(axis=1), kind="stable"):
        members = ids[group == g]
        w_C = patterns[g].astype(np.float64)
        counted = w_C > 0
        if counted.any():
            take = _fill_counts(load_CP[counted], w_C[counted], target_CP[counted], members.size)
        else:
            take = _fill_counts(sizes[None, :], np.ones(1), share_P[None, :], members.size)
        order = np.argsort((load_CP[counted] / target_CP[counted]).max(axis=0)
                           if counted.any() else sizes / share_P, kind="stable")
        assignment[members] = np.repeat(order, take[order]).astype(np.int32)
        load_CP += w_C[:, None] * take[None, :]
        sizes += take


def _fill_counts(load_cP: np.ndarray, w_c: np.ndarray, target_cP: np.ndarray, k: int) -> np.ndarray:
    """int64 ``[P]``: how many of ``k`` equal nodes (weights ``w_c > 0``) each part takes so that
    ``max_c (load + take * w) / target`` is as even as possible (water-filling on a level ``lam``).
    """
    def fits(lam: float) -> np.ndarray:
        room = ((lam * target_cP - load_cP) / w_c[:, None]).min(axis=0)
        return np.maximum(np.floor(room), 0).astype(np.int64)

    lo = 0.0
    hi = float((load_cP / target_cP).max()) + k * float((w_c[:, None] / target_cP).max()) + 1.0
    for _ in range(200):  # bisection to the smallest level that holds all k nodes
        mid = (lo + hi) / 2
        if mid <= lo or mid >= hi:
            break
        if int(fits(mid).sum()) >= k:
            hi = mid
        else:
            lo = mid
    take = fits(hi)
    excess = int(take.sum()) - k
    if excess > 0:  # the parts that reach the level first give the extra nodes back
        level = ((load_cP + take[None, :] * w_c[:, None]) / target_cP).max(axis=0)
        back = np.argsort(-level, kind="stable")
        back = back[take[back] > 0][:excess]
        take[back] -= 1
    return take


def combined_weights(W_CN: np.ndarray, resolution: int = 64) -> np.ndarray:
    """int64 ``[N]``: one vertex weight for several criteria, each scaled to the same total.

    ``sum_c W_c * resolution * N / total_c``, rounded: a node weighs ``resolution`` per criterion
    in which it is average, so rounding costs at most ``1 / (2 * resolution)`` of an average node.
    """
    n = W_CN.shape[1]
    scale = resolution * n / W_CN.sum(axis=1).astype(np.float64)
    return np.rint((W_CN * scale[:, None]).sum(axis=0)).astype(np.int64)


def metis_memory(size: GraphSize, num_parts: int) -> int:
    """Bytes :func:`metis_assign` needs besides the graph (:mod:`partitioners.memory`).

    Ours: ``xadj``/``adjncy`` as int64, ``8 N + 8 M`` for the ``M`` entries of the symmetrised
    adjacency, held while METIS runs (the scipy temporaries that build them, about 32 B per
    entry, are freed before). pymetis copies them (``8 N + 8 M``). METIS, with 64-bit
    ``idx_t``, holds the graph with unit edge weights (``16 M + 16 N``) at every coarsening
    level plus its refinement work space. Measured on sbm, R-MAT and random graphs of 2 to 40
    edges per node (random graphs coarsen worst and take the most): at most 120 B per entry
    plus 200 B per node in all, which is what this returns. For a graph read out of core
    ours are memory maps (:func:`symmetric_adjacency_on_disk`), 8 B per entry and per node less.
    """
    ours = 8 * (size.adjacency_entries + size.num_nodes) if size.on_disk else 0
    return 120 * size.adjacency_entries + 200 * size.num_nodes - ours
