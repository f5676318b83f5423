"""Refinement for the busiest link: lower the largest per-part halo send and receive volume.

A synchronous halo exchange takes as long as its busiest rank: the part that receives the
most halo rows, or sends the most, per layer. With ``cnt[u, p]`` the edges from ``u`` into part
``p`` (:mod:`.refine`), node ``u`` is a halo row of part ``p`` when ``p != part[u]`` and
``cnt[u, p] > 0``; part ``p`` **receives** its halo rows (``recv[p]``, the quality report's
``halo_per_part``) and part ``q`` **sends** the rows of its nodes to every other part that
reads them (``send[q] = sum over u in q of |{p != q : cnt[u, p] > 0}|``). Both sum to the
total communication volume; this refinement lowers ``M = max(max send, max recv)``.

Moving ``v`` from part ``a`` to ``b`` changes only a few entries, exactly (``m_u`` = edges
``u -> v``, ``q = part[u]``):

* an in-neighbour ``u`` outside ``a`` whose edges into ``a`` all go to ``v`` stops being a halo
  row of ``a``: ``recv[a] - 1``, ``send[q] - 1``;
* an in-neighbour ``u`` outside ``b`` with no edge into ``b`` yet becomes one of ``b``:
  ``recv[b] + 1``, ``send[q] + 1``;
* ``v``'s own row (``cnt[v, .]`` does not change) is sent from ``b`` instead of ``a``, to every
  part it feeds but its own: ``send[a] - |{p != a}|``, ``send[b] + |{p != b}|``, ``recv[a] + 1``
  if ``v`` feeds ``a``, ``recv[b] - 1`` if it feeds ``b``.

Algorithm (:func:`refine_max_volume`): first the total volume is lowered
(:func:`~.refine.refine_volume`: cheap, and it frees volume to spend); then rounds over the candidates, the boundary nodes in or next
to a part whose send or receive volume is the maximum ``M`` (in it, feeding it, or fed by it),
in a seeded random order. Each candidate's move to every part is scored exactly on the current
state by ``(M', number of entries equal to M', total volume')`` and made, to the best part, when
that is lexicographically lower than staying: the busiest link never gets busier, ties between
equally busy parts are broken one by one, and among those the total volume decides. A move
must keep every balance criterion within its bound (as :func:`~.refine.refine_volume`, each
part's own with ``part_weights``) and the total volume within ``1 + max_total_increase`` of the
input's (default: not above it). A candidate with no such move may still move, to free room,
when that changes neither the busiest link nor the total and leaves the target part less full
than its own (METIS fills every part to its bound). Rounds repeat until one makes no move or
``max_rounds``. Deterministic for a seed. Measured on R-MAT at P=8
(``benchmarks/max_volume.py``, docs/performance.md): see there.
This module is torch-free.
"""

from __future__ import annotations

import logging
import time
from typing import Any

import numpy as np

from ..graph import Graph
from ..quality import check_assignment
from ._common import check_imbalance
from .refine import _State, initial_state
from .targets import check_part_weights

__all__ = ["refine_max_volume", "link_volumes"]

logger = logging.getLogger(__name__)


def link_volumes(cnt: np.ndarray, part: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """int64 ``(send [P], recv [P])``: halo rows each part sends and receives per exchange, from
    ``cnt`` (int32 ``[N, P]``, :func:`~.refine.volume_table`) and the assignment."""
    P = cnt.shape[1]
    halo = cnt > 0
    halo[np.arange(part.size), part] = False
    send = np.bincount(part, weights=halo.sum(axis=1), minlength=P).astype(np.int64)
    return send, halo.sum(axis=0, dtype=np.int64)


def refine_max_volume(graph: Graph, assignment: Any, num_parts: int, *,
                      balance: str | tuple[str, ...] = ("nodes",), imbalance: float = 0.03,
                      seed: int = 0, part_weights: Any = None, max_rounds: int = 16,
                      max_total_increase: float = 0.0, total_first: bool = True) -> np.ndarray:
    """int32 ``[N]``: ``assignment`` with nodes moved to lower the largest per-part halo send or
    receive volume (module docstring), within the balance bounds.

    Args:
        graph: the graph the assignment partitions.
        assignment: int ``[N]`` part ids in ``[0, num_parts)`` (not modified).
        num_parts: number of parts ``P``.
        balance: criteria kept within bounds (``nodes``, ``edges``, ``train``).
        imbalance: allowed excess of a part over its target, per criterion (default: 0.03).
        seed: the order in which candidates are tried.
        part_weights: relative part sizes (:mod:`.targets`); None: equal parts.
        max_rounds: most rounds (default: 16).
        max_total_increase: how much the total volume may grow, relative to the input's
            (default: 0, never above the input's).
        total_first: first lower the total volume (:func:`~.refine.refine_volume`), then
            spend what it saved on the busiest link (default: True).
    """
    P = int(num_parts)
    part = check_assignment(assignment, graph.num_nodes, P).astype(np.int32)  # a copy
    imbalance = check_imbalance(imbalance)
    fractions = check_part_weights(part_weights, P)
    if P == 1 or max_rounds < 1:
        return part
    t0 = time.perf_counter()
    state = initial_state(graph, part, P, balance, imbalance, fractions)
    send, recv = link_volumes(state.cnt, state.part)
    start = (_busiest(send, recv), int(recv.sum()))
    cap = int(recv.sum() * (1.0 + float(max_total_increase)))
    if total_first:  # cheap volume first: the bottleneck moves may spend it, up to cap
        from .refine import refine_volume

        part = refine_volume(graph, part, P, balance=balance, imbalance=imbalance, seed=seed,
                             part_weights=fractions)
        state = initial_state(graph, part, P, balance, imbalance, fractions)
        send, recv = link_volumes(state.cnt, state.part)
    rng = np.random.default_rng(seed)
    for round_no in range(max_rounds):
        cand = _candidates(state, send, recv)
        moved = 0
        for v in cand[rng.permutation(cand.size)]:
            moved += _try_move(state, int(v), send, recv, cap)
        logger.info("max-volume round %d: %d candidates, %d moves, busiest link %d, total %d",
                    round_no, cand.size, moved, _busiest(send, recv), int(recv.sum()))
        if moved == 0:
            break
    logger.info("max-volume refine: busiest link %d -> %d, total volume %d -> %d in %.2fs",
                start[0], _busiest(send, recv), start[1], int(recv.sum()), time.perf_counter() - t0)
    return state.part


def _room_move(state: _State, v: int, ok: np.ndarray) -> int:
    """The least full part among ``ok`` (moves that change neither the busiest link nor the
    total) if moving ``v`` there leaves it less full than ``v``'s part is now, else -1: such moves
    free room in full parts for the moves that lower the busiest link (each lowers the sum of
    squared fullness, so they end)."""
    if not ok.any():
        return -1
    a = int(state.part[v])
    w = state.W_CN[:, v]
    source = float((state.load_CP[:, a] / state.target_CP[:, a]).max())
    after = ((state.load_CP + w[:, None]) / state.target_CP).max(axis=0)
    after = np.where(ok, after, np.inf)
    b = int(np.argmin(after))
    return b if after[b] < source else -1


def _busiest(send: np.ndarray, recv: np.ndarray) -> int:
    return int(max(send.max(), recv.max()))


def _candidates(state: _State, send: np.ndarray, recv: np.ndarray) -> np.ndarray:
    """Boundary nodes in, feeding or fed by a part whose send or receive volume is the maximum."""
    M = _busiest(send, recv)
    hot = (send == M) | (recv == M)
    part, cnt = state.part, state.cnt
    own = cnt[np.arange(part.size), part]
    feeds_out = cnt.sum(axis=1, dtype=np.int64) > own          # some out-edge leaves its part
    feeds_hot = (cnt[:, hot] > 0).any(axis=1)                   # an out-edge into a hot part
    src_part = part[state.src]
    cross = src_part != part[state.dst]                          # in-edges from another part
    fed = np.zeros(part.size, dtype=bool)
    fed[state.dst[cross]] = True
    fed_by_hot = np.zeros(part.size, dtype=bool)
    fed_by_hot[state.dst[cross & hot[src_part]]] = True
    boundary = feeds_out | fed
    return np.flatnonzero(boundary & (hot[part] | feeds_hot | fed_by_hot))


def _after_move(state: _State, v: int, send: np.ndarray, recv: np.ndarray,
                ) -> tuple[np.ndarray, np.ndarray]:
    """int64 ``(send [P, P], recv [P, P])``: row ``b`` the volumes after moving ``v`` to ``b``
    (module docstring; the row of ``v``'s own part is meaningless)."""
    s, e = int(state.ptr[v]), int(state.ptr[v + 1])
    u, m = state.src[s:e], state.mult[s:e]
    parts, part, cnt = state.parts, state.part, state.cnt
    a = int(part[v])
    q = part[u]
    cu = cnt[u]
    leave = (q != a) & (cu[:, a] == m)
    join = ((cu == 0) & (q[:, None] != parts)).astype(np.int64)        # [deg, b]
    has = (cnt[v] > 0).astype(np.int64)
    k = int(has.sum())
    base = send - np.bincount(q[leave], minlength=parts.size)
    send_b = base[None, :] + join.T @ (q[:, None] == parts)            # [b, q]
    send_b[:, a] -= k - has[a]
    send_b[parts, parts] += k - has
    recv_b = np.repeat(recv[None, :], parts.size, axis=0)
    recv_b[:, a] += has[a] - int(np.count_nonzero(leave))
    recv_b[parts, parts] += join.sum(axis=0) - has
    return send_b, recv_b


def _try_move(state: _State, v: int, send: np.ndarray, recv: np.ndarray, cap: int) -> int:
    """Move ``v`` to the part that lowers ``(M, entries at M, total)`` most, if any does and it
    fits (balance, total cap); ``send``/``recv`` updated in place. 1 if it moved, else 0."""
    room = state._room(v)
    if not room.any():
        return 0
    send_b, recv_b = _after_move(state, v, send, recv)
    M_b = np.maximum(send_b.max(axis=1), recv_b.max(axis=1))
    at_b = (send_b == M_b[:, None]).sum(axis=1) + (recv_b == M_b[:, None]).sum(axis=1)
    total_b = recv_b.sum(axis=1)
    ok = room & (total_b <= cap)
    if not ok.any():
        return 0
    M = _busiest(send, recv)
    key_now = (M, int((send == M).sum() + (recv == M).sum()), int(recv.sum()))
    order = np.lexsort((total_b, at_b, M_b))
    b = int(next(x for x in order if ok[x]))
    if (int(M_b[b]), int(at_b[b]), int(total_b[b])) >= key_now:
        b = _room_move(state, v, ok & (M_b == key_now[0]) & (at_b == key_now[1])
                       & (total_b <= key_now[2]))
        if b < 0:
            return 0
    state._apply(v, int(state.part[v]), b)
    send[:] = send_b[b]
    recv[:] = recv_b[b]
    return 1
