"""The ``ldg`` and ``fennel`` methods: one-pass streaming vertex partitioners.

Both read the graph once, as its in-adjacency in chunks of destination nodes, and place each node
for good when it arrives, greedily, next to the parts that already hold its in-neighbours:

* **LDG** (Stanton & Kliot, KDD 2012): ``argmax_p |N(v) ∩ P_p| * (1 - |P_p| / C)``, with
  capacity ``C = (1 + imbalance) * N / P``.
* **Fennel** (Tsourakakis et al., WSDM 2014): ``argmax_p |N(v) ∩ P_p| - alpha * gamma *
  |P_p|^(gamma - 1)`` with ``gamma = 1.5`` and ``alpha = sqrt(P) * m / N^1.5``. The paper's ``m``
  counts undirected edges, each seen from both ends; here ``m = E / 2`` for the ``E`` stored
  edges, which keeps the paper's ratio of neighbour signal (``E / N`` in-edges per node) to
  penalty whether the stored graph is symmetric or not.

``N(v)`` is the in-neighbours of ``v`` that are already placed (the stream gives nothing else;
later nodes are ignored). Both use a hard capacity: a part may not exceed
``max((1 + imbalance) * mean, ceil(mean))`` in any balance criterion (:mod:`._common`); with
several criteria ``|P_p|`` is the part's largest load relative to the mean (in node units) over
the criteria the node weighs in (an isolated node ignores edge loads). With ``nodes`` and another
criterion, each part also keeps node room for the nodes still to come that weigh in the other
one, in proportion to its room there (else the tail of the stream deadlocks: the parts with
training room are full of other nodes). A node that fits nowhere (a hub heavier than any part's
room, or that tail) goes where the largest relative load after adding it is smallest: several
criteria are best effort near the end of the stream (measured: within 8% at ``imbalance=0.03``;
use ``metis`` for tight multi-criteria balance).

Deviation from the sequential algorithms, for speed without a compiler: nodes are decided in
**micro-batches** of ``batch_nodes`` consecutive nodes, against the state before the batch
(neighbour counts and part loads). Two rules keep this close to the sequential result:

* a node with no placed in-neighbour in a part with room would, sequentially, join its nearest
  earlier in-batch in-neighbour (placed by then) or, with none, the least loaded part: here it
  points to that in-batch neighbour, pointer jumping finds the head of each chain, heads are
  water-filled onto the least loaded parts (counting the batch's other nodes) and chains follow
  their heads. Without this, a locality-ordered graph (a mesh, a path) is cut into stripes;
* capacity is exact within the batch: each part keeps its nodes in batch order while they fit;
  the rest go to their best-scoring part with room.

Measured with 256-node batches: the same cut as one node at a time on R-MAT, grid and planted
graphs, at 4-30M edges/s instead of 0.1-0.9M (benchmarks/partition_methods.py), in numpy.
With ``nodes`` the only criterion (the default) the batches are decided by a compiled loop
(:mod:`._stream_kernels`, numba) that computes the same values in the same order, so the
assignment is the same array, about ten times faster again (no numpy call per batch); the
batches it stops at (those that overfill a part, near the end of the stream) and the weighted
criteria take the numpy code.

Chunks arrive in a seeded random order (the seed does nothing on a graph of one chunk); nodes
keep id order within a chunk. Memory: the assignment and, with criteria beyond ``nodes``, their
weights (``O(N * C)``), the loads (``O(P * C)``) and one chunk; the graph is never copied or
symmetrised.
This module is torch-free.
"""

from __future__ import annotations

import logging
import math
import time
from dataclasses import dataclass

from typing import TYPE_CHECKING, Any

import numpy as np

from ..graph import Graph
from ._common import normalize_balance, progress_bar, shuffled_chunks, vertex_weights
from .targets import check_part_weights, part_bounds, part_shares

if TYPE_CHECKING:
    from ..memory import GraphSize

__all__ = ["ldg_assign", "fennel_assign", "streaming_memory", "DEFAULT_CHUNK_NODES",
           "DEFAULT_BATCH_NODES"]

logger = logging.getLogger(__name__)

DEFAULT_CHUNK_NODES = 1 << 16
"""Destination nodes read per chunk of the stream."""
DEFAULT_BATCH_NODES = 256
"""Nodes decided together (against the state before their micro-batch)."""


def ldg_assign(graph: Graph, num_parts: int, *, seed: int = 0,
               balance: str | tuple[str, ...] = ("nodes",), imbalance: float = 0.03,
               chunk_nodes: int = DEFAULT_CHUNK_NODES, batch_nodes: int = DEFAULT_BATCH_NODES,
               progress: bool = False, part_weights: Any = None) -> np.ndarray:
    """int32 ``[N]``: Linear Deterministic Greedy streaming partition (module docstring)."""
    return _stream(graph, num_parts, kind="ldg", seed=seed, balance=balance, imbalance=imbalance,
                   chunk_nodes=chunk_nodes, batch_nodes=batch_nodes, progress=progress,
                   part_weights=part_weights)


def fennel_assign(graph: Graph, num_parts: int, *, seed: int = 0,
                  balance: str | tuple[str, ...] = ("nodes",), imbalance: float = 0.03,
                  gamma: float = 1.5, chunk_nodes: int = DEFAULT_CHUNK_NODES,
                  batch_nodes: int = DEFAULT_BATCH_NODES, progress: bool = False,
                  part_weights: Any = None) -> np.ndarray:
    """int32 ``[N]``: Fennel streaming partition (module docstring)."""
    return _stream(graph, num_parts, kind="fennel", seed=seed, balance=balance,
                   imbalance=imbalance, gamma=gamma, chunk_nodes=chunk_nodes,
                   batch_nodes=batch_nodes, progress=progress, part_weights=part_weights)


@dataclass(eq=False)
class _State:
    """What the stream carries from batch to batch (:func:`_stream`)."""

    kind: str
    part: np.ndarray
    """int32 ``[N]``: the assignment so far (``-1``: not placed yet)."""
    load_CP: np.ndarray
    """The parts' loads per criterion, in units of the mean part."""
    mean_C: np.ndarray
    bound_CP: np.ndarray
    """Each part's bound per criterion, in units of the mean part (:mod:`.targets`)."""
    w_CN: np.ndarray | None
    left_k_C: np.ndarray | None
    reserve: bool
    c_nodes: int
    nodes_per_part: float
    npp_P: np.ndarray
    """Nodes that make a load of 1 in each part, over its share: loads in node units of its
    own size (``nodes_per_part`` each without part weights)."""
    alpha: float
    gamma: float
    tol: float = 1e-9

    @property
    def compiled(self) -> bool:
        """Whether :func:`~._stream_kernels.decide_batches` decides the batches: one criterion of
        equal weights, and a Fennel exponent numpy computes as a square root."""
        return self.w_CN is None and (self.kind == "ldg" or self.gamma - 1.0 == 0.5)


def _stream(graph: Graph, num_parts: int, *, kind: str, seed: int,
            balance: str | tuple[str, ...], imbalance: float, chunk_nodes: int,
            batch_nodes: int, progress: bool, gamma: float = 1.5,
            compiled: bool = True, part_weights: Any = None) -> np.ndarray:
    """The stream (module docstring); ``compiled=False`` decides every batch with numpy (the
    reference the compiled loop is tested against)."""
    if chunk_nodes < 1 or batch_nodes < 1:
        raise ValueError(f"chunk_nodes={chunk_nodes} and batch_nodes={batch_nodes} must both be >= 1")
    n, P = graph.num_nodes, num_parts
    t0 = time.perf_counter()
    fractions = check_part_weights(part_weights, P)
    names, mean_C, bound_CP, w_CN, left_k_C = _stream_weights(graph, P, balance, imbalance, fractions)
    # node-count room kept for the rest of the stream's nodes that weigh in another criterion
    reserve = "nodes" in names and len(names) > 1
    st = _State(kind=kind, part=np.full(n, -1, dtype=np.int32), load_CP=np.zeros((len(names), P)),
                mean_C=mean_C, bound_CP=bound_CP, w_CN=w_CN, left_k_C=left_k_C, reserve=reserve,
                c_nodes=names.index("nodes") if reserve else -1, nodes_per_part=n / P,
                npp_P=(n / P) / part_shares(fractions, P),
                alpha=math.sqrt(P) * (graph.num_edges / 2) / n ** 1.5, gamma=gamma)
    bar = progress_bar(progress, n, kind)
    for first, ip, idx in shuffled_chunks(graph, chunk_nodes, seed):
        _stream_chunk(st, first, ip, idx, batch_nodes, compiled and st.compiled)
        if bar is not None:
            bar.update(ip.size - 1)
    if bar is not None:
        bar.close()
    part = st.part
    assert part.min() >= 0
    dt = time.perf_counter() - t0
    logger.info("%s: %d nodes, %d edges in %.2fs (%.1fM edges/s)", kind, n, graph.num_edges, dt,
                graph.num_edges / max(dt, 1e-9) / 1e6)
    return part


def _stream_chunk(st: _State, first: int, ip: np.ndarray, idx: np.ndarray, batch_nodes: int,
                  compiled: bool) -> None:
    """Place the chunk's nodes ``first..`` (in-edges ``idx[ip[i]:ip[i + 1]]``) batch by batch:
    with ``compiled`` by :func:`~._stream_kernels.decide_batches`, and the batches it leaves
    (those that overfill a part) by :func:`_decide_batch`."""
    m = ip.size - 1
    row_of_edge = None
    lo = 0
    while lo < m:
        if compiled:
            from ._stream_kernels import decide_batches  # numba: imported when streaming

            lo = decide_batches(ip, idx, first, lo, m, batch_nodes, st.part, st.load_CP[0],
                                st.bound_CP[0], 1.0 / st.mean_C[0], st.npp_P,
                                st.tol, st.kind == "fennel", st.alpha * st.gamma)
            if lo >= m:
                break
        if row_of_edge is None:
            row_of_edge = np.repeat(np.arange(m, dtype=np.int64), np.diff(ip))
        hi = min(m, lo + batch_nodes)
        _decide_batch(st, first, lo, hi, ip, idx, row_of_edge)
        lo = hi


def _decide_batch(st: _State, first: int, lo: int, hi: int, ip: np.ndarray, idx: np.ndarray,
                  row_of_edge: np.ndarray) -> None:
    """Place the chunk's nodes ``lo..hi-1`` together, against the state before them (module
    docstring), with numpy."""
    P = st.load_CP.shape[1]
    part, load_CP, bound_CP, w_CN, tol = st.part, st.load_CP, st.bound_CP, st.w_CN, st.tol
    b = hi - lo
    e0, e1 = int(ip[lo]), int(ip[hi])
    ps = part[idx[e0:e1]]
    placed = ps >= 0
    key = (row_of_edge[e0:e1][placed] - lo) * P + ps[placed]
    counts = np.bincount(key, minlength=b * P).reshape(b, P)
    w_Cb = np.full((1, b), 1.0 / st.mean_C[0]) if w_CN is None else w_CN[:, first + lo:first + hi]
    if w_CN is None:
        feasible = np.broadcast_to(load_CP[0] + w_Cb[0, 0] <= bound_CP[0] + tol, (b, P))
        fullness = np.broadcast_to(load_CP[0] / bound_CP[0], (b, P))
        size = np.broadcast_to(load_CP[0] * st.npp_P, (b, P))
    else:
        feasible, fullness, size = _weighted_rooms(
            w_Cb, load_CP, bound_CP, st.npp_P, tol,
            reserve=(st.left_k_C, st.c_nodes, st.nodes_per_part) if st.reserve else None)
    if st.kind == "ldg":
        score = counts * (1.0 - fullness)
    else:
        score = counts - st.alpha * st.gamma * size ** (st.gamma - 1.0)
    score = np.where(feasible, score, -np.inf)
    choice = np.argmax(score, axis=1)
    signal = (counts * feasible).any(axis=1)
    none_fit = ~feasible.any(axis=1)
    lonely = ~signal & ~none_fit
    if none_fit.any():
        rows = np.flatnonzero(none_fit)
        rel = (load_CP[:, None, :] + w_Cb[:, rows, None]) / bound_CP[:, None, :]
        choice[rows] = np.argmin(rel.max(axis=0), axis=1)
    if lonely.any():
        _place_lonely(choice, lonely, feasible, size, w_Cb > 0,
                      idx[e0:e1] - (first + lo), row_of_edge[e0:e1] - lo)
    incoming = np.stack([np.bincount(choice, weights=w_Cb[c], minlength=P)
                         for c in range(w_Cb.shape[0])])
    if np.any((load_CP + incoming > bound_CP + tol) & (incoming > 0)):
        incoming = _settle_overflow(choice, score, w_Cb, load_CP, bound_CP, tol)
    load_CP += incoming
    if st.reserve:
        st.left_k_C -= (w_Cb > 0).sum(axis=1)  # type: ignore[operator]
    part[first + lo:first + hi] = choice


def _stream_weights(graph: Graph, num_parts: int, balance: str | tuple[str, ...], imbalance: float,
                    fractions: tuple[float, ...] | None) -> tuple[tuple[str, ...], np.ndarray, np.ndarray,
                                                                np.ndarray | None, np.ndarray | None]:
    """``(names, mean_C, bound_CP, w_CN, left_k_C)`` of the balance criteria.

    ``mean_C`` is the mean part weight, ``bound_CP`` each part's bound in units of it; ``w_CN`` the
    float64 relative weights and ``left_k_C`` the nodes still to come that weigh in each
    criterion, both None when only ``nodes`` is balanced (every node weighs the same: no weight
    arrays at all).
    """
    n = graph.num_nodes
    if normalize_balance(balance) == ("nodes",):
        mean_C = np.array([n / num_parts])
        bound_CP = part_bounds(np.array([[n]]), num_parts, imbalance, fractions) / mean_C[:, None]
        return ("nodes",), mean_C, bound_CP, None, None
    names, W_CN = vertex_weights(graph, balance)
    mean_C = W_CN.sum(axis=1).astype(np.float64) / num_parts
    bound_CP = part_bounds(W_CN, num_parts, imbalance, fractions) / mean_C[:, None]  # mean units
    w_CN = W_CN / mean_C[:, None]                                     # float64, relative weights
    left_k_C = (W_CN > 0).sum(axis=1).astype(np.float64)              # nodes still to come
    return names, mean_C, bound_CP, w_CN, left_k_C


def _weighted_rooms(w_Cb: np.ndarray, load_CP: np.ndarray, bound_CP: np.ndarray,
                    npp_P: np.ndarray, tol: float,
                    reserve: tuple[np.ndarray, int, float] | None,
                    ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(feasible, fullness, size)``, each ``[b, P]``: where each node of the batch fits, and
    each part's load as that node sees it (relative, and in node units).

    With several criteria only those in which the node weighs something count (an isolated node
    ignores edge loads). ``reserve`` is ``(left_k_C, c_nodes, nodes_per_part)`` when node room
    is kept for the rest of the stream (:func:`_reserve_rooms`).
    """
    w = w_Cb[:, :, None]
    feasible = np.all((w == 0) | (load_CP[:, None, :] + w <= bound_CP[:, None, :] + tol), axis=0)
    if reserve is not None:
        left_k_C, c_nodes, nodes_per_part = reserve
        feasible = _reserve_rooms(feasible, w_Cb, load_CP, bound_CP, left_k_C, c_nodes,
                                  nodes_per_part, tol)
    counted = (w_Cb > 0)[:, :, None]
    fullness = np.where(counted, (load_CP / bound_CP)[:, None, :], 0.0).max(axis=0)
    size = np.where(counted, load_CP[:, None, :], 0.0).max(axis=0) * npp_P
    return feasible, fullness, size


def _reserve_rooms(feasible: np.ndarray, w_Cb: np.ndarray, load_CP: np.ndarray,
                   bound_CP: np.ndarray, left_k_C: np.ndarray, c_nodes: int,
                   nodes_per_part: float, tol: float) -> np.ndarray:
    """``feasible`` narrowed so that nodes keep node-count room for the stream's future nodes.

    With ``nodes`` plus another criterion ``c`` (say ``train``), hard caps can deadlock at the
    end of the stream: the parts with ``train`` room are full of non-training nodes. So each part
    keeps node room for the nodes still to come that weigh in ``c``, shared out in proportion to
    the part's room in ``c``; a node that weighs nothing in ``c`` may not use that reserve. Rows
    left with no part are given back their plain ``feasible`` row.
    """
    room_CP = np.maximum(bound_CP - load_CP, 0.0)
    total = room_CP.sum(axis=1, keepdims=True)
    share_CP = np.divide(room_CP, total, out=np.zeros_like(room_CP), where=total > 0)
    need_CP = share_CP * left_k_C[:, None] / nodes_per_part   # relative node units
    need_CP[c_nodes] = 0.0
    reserved_bP = np.where((w_Cb == 0)[:, :, None], need_CP[:, None, :], 0.0).max(axis=0)
    strict = feasible & (load_CP[c_nodes] + w_Cb[c_nodes][:, None] + reserved_bP
                         <= bound_CP[c_nodes] + tol)
    stuck = ~strict.any(axis=1)
    strict[stuck] = feasible[stuck]
    return strict


def _place_lonely(choice: np.ndarray, lonely: np.ndarray, feasible: np.ndarray,
                  size: np.ndarray, weighs_Cb: np.ndarray, src_local: np.ndarray,
                  dst_local: np.ndarray) -> None:
    """Place the batch's nodes that have no placed in-neighbour in a part with room.

    Sequentially such a node joins its nearest earlier in-batch in-neighbour's part (that node
    is placed by then), or, with none, the least loaded part. Here: each lonely node points to its
    nearest earlier in-batch in-neighbour (``src_local``/``dst_local``: the batch's edges in
    batch-local ids), pointer jumping finds the root of each chain, lonely roots are spread by
    :func:`_water_fill` over the loads ``size`` (``[b, P]``, node units, as each node sees them;
    roots that weigh in the same criteria ``weighs_Cb`` are filled together), and every chain
    follows its root. ``choice`` is updated in place.
    """
    b = choice.size
    earlier = (src_local >= 0) & (src_local < dst_local)
    parent = np.full(b, -1, dtype=np.int64)
    np.maximum.at(parent, dst_local[earlier], src_local[earlier])
    parent[~lonely] = -1
    root = np.where(parent >= 0, parent, np.arange(b))
    while True:
        jumped = root[root]
        if np.array_equal(jumped, root):
            break
        root = jumped
    heads = np.flatnonzero(lonely & (parent < 0))
    if heads.size:
        others = np.bincount(choice[~lonely], minlength=size.shape[1])
        pattern = weighs_Cb[:, heads].T
        kinds, kind_of = np.unique(pattern, axis=0, return_inverse=True)
        for k in range(kinds.shape[0]):
            group = heads[kind_of.ravel() == k]
            open_parts = np.flatnonzero(feasible[group].any(axis=0))
            fill = size[group[0], open_parts] + others[open_parts]
            choice[group] = _water_fill(fill, group.size, open_parts)
            others += np.bincount(choice[group], minlength=others.size)
    rows = np.flatnonzero(lonely)
    choice[rows] = choice[root[rows]]
    ok = feasible[rows, choice[rows]]
    if not ok.all():  # a node dealt to a part without room for it: least loaded part with room
        rows = rows[~ok]
        choice[rows] = np.argmax(np.where(feasible[rows], -size[rows], -np.inf), axis=1)


def _water_fill(level: np.ndarray, k: int, parts: np.ndarray) -> np.ndarray:
    """``k`` part ids from ``parts`` (current fill ``level``) that even out the fill, lightest first.

    Parts below the common level ``L`` get ``L - level`` nodes each (rounded so that the counts add
    up to ``k``); the ids come grouped, lightest part first.
    """
    order = np.argsort(level, kind="stable")
    lv = level[order]
    j = np.arange(1, lv.size + 1)
    common = (k + np.cumsum(lv)) / j
    used = int(np.flatnonzero(common >= lv)[-1]) + 1  # common level covers the `used` lightest
    want = common[used - 1] - lv[:used]
    take = np.floor(want).astype(np.int64)
    short = k - int(take.sum())
    if short > 0:
        take[np.argsort(-(want - take), kind="stable")[:short]] += 1
    return np.repeat(parts[order[:used]], take)


def _settle_overflow(choice: np.ndarray, score: np.ndarray, w_Cb: np.ndarray,
                     load_CP: np.ndarray, bound_CP: np.ndarray, tol: float) -> np.ndarray:
    """Enforce capacity within a batch: re-place nodes whose chosen part fills up in the batch.

    Each part keeps, in batch order, the nodes that fit; the others move to their best-scoring
    part that still has room (ties to the least loaded), or, with none, to where the largest
    relative load after adding them is smallest (one at a time, final); repeat with the moved
    nodes. Every round keeps at least the first node sent to each part, and a part that fills up
    is closed to the rest, so it ends within ``P + 1`` rounds. Returns the batch's load per criterion and part; ``choice`` is
    updated in place.
    """
    num_parts = load_CP.shape[1]
    cur = load_CP.copy()
    todo = np.arange(choice.size)
    while todo.size:
        sub = todo[np.argsort(choice[todo], kind="stable")]  # grouped by part, batch order kept
        grouped = choice[sub]
        starts = np.searchsorted(grouped, np.arange(num_parts))
        cum_Cb = np.cumsum(w_Cb[:, sub], axis=1)
        before_CP = np.where(starts > 0, cum_Cb[:, np.maximum(starts - 1, 0)], 0.0)
        within_Cb = cum_Cb - before_CP[:, grouped]
        fits = np.all((w_Cb[:, sub] == 0) | (cur[:, grouped] + within_Cb <= bound_CP[:, grouped] + tol),
                      axis=0)
        kept = sub[fits]
        for c in range(cur.shape[0]):
            cur[c] += np.bincount(choice[kept], weights=w_Cb[c, kept], minlength=num_parts)
        todo = np.sort(sub[~fits])
        if not todo.size:
            break
        w_Ct = w_Cb[:, todo]
        w = w_Ct[:, :, None]
        room = np.all((w == 0) | (cur[:, None, :] + w <= bound_CP[:, None, :] + tol), axis=0)
        fullness = (cur / bound_CP).max(axis=0)
        pick = np.where(room, score[todo] - 1e-6 * fullness, -np.inf)
        choice[todo] = np.argmax(pick, axis=1)
        stuck = ~room.any(axis=1)
        for i in todo[stuck]:  # fits nowhere: placed one by one (so they spread out), for good
            w = w_Cb[:, i]
            p = int(np.argmin(((cur + w[:, None]) / bound_CP).max(axis=0)))
            choice[i] = p
            cur[:, p] += w
        todo = todo[~stuck]
    return cur - load_CP


def streaming_memory(size: GraphSize, num_parts: int) -> int:
    """Bytes :func:`ldg_assign` and :func:`fennel_assign` need besides the graph (module
    docstring): the assignment and, with criteria beyond ``nodes``, their int64 weights and
    float64 relative weights (up to 3 criteria: ``52 N``), plus an int64 per edge of one chunk
    of :data:`DEFAULT_CHUNK_NODES` nodes (counted at 8 times the mean degree, for skew)."""
    n, e = size.num_nodes, size.num_edges
    chunk_edges = min(e, DEFAULT_CHUNK_NODES * 8 * -(-e // max(n, 1)))
    return 52 * n + 8 * chunk_edges
