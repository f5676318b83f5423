"""Balance repair: move nodes until every part is within its bound in every criterion.

METIS through pymetis balances one weight only, so with several criteria (``nodes`` and
``train``, or the typed criteria of :mod:`partitioners.hetero.partition`) some parts may come
out above their bound in one of them; :func:`rebalance_parts` moves nodes, fewest halo rows
lost first (the gains of :mod:`.refine`), until they are within. Bounds are each part's own
(:mod:`.targets`: ``part_weights`` size the parts). This module is torch-free.
"""

from __future__ import annotations

import logging
import time
from typing import Any

import numpy as np

from ..graph import Graph
from ..quality import check_assignment
from ._common import check_imbalance, vertex_weights
from .refine import _simple_in_adjacency, _State, volume_table
from .targets import check_part_weights, part_bounds, part_targets

__all__ = ["rebalance_parts", "rebalance_weights"]

logger = logging.getLogger(__name__)


def rebalance_parts(graph: Graph, assignment: Any, num_parts: int, *,
                    balance: str | tuple[str, ...] = ("nodes",), imbalance: float = 0.03,
                    max_rounds: int = 16, seed: int = 0, part_weights: Any = None) -> np.ndarray:
    """int32 ``[N]``: ``assignment`` with nodes moved until every part is within every bound.

    For multi-criteria balance where the partitioner balances only one combined weight (METIS
    through pymetis takes a single constraint). For each criterion ``c`` and part ``A`` above
    its bound, nodes of ``A`` that weigh in ``c`` go, best volume gain first (module
    docstring), to the part ``B`` with the most room in ``c``: directly when they fit there in
    every criterion, else swapped with a node of ``B`` that weighs less in ``c`` (best gain to
    ``A`` first) when the swap leaves both parts within bounds (or no worse) in every criterion.
    Swaps matter when one criterion is tight everywhere (``nodes`` after METIS): moving a
    training node then needs a non-training node to move back. Rounds repeat until every part
    is within bounds, a round changes nothing, or ``max_rounds``; leftover excess is logged as
    a warning. Gains are computed once per round (moves in between make them approximate: the
    volume may rise; this step buys balance). Deterministic for a given seed. With
    ``part_weights`` the bounds are each part's own (:mod:`.targets`).
    """
    P = int(num_parts)
    part = check_assignment(assignment, graph.num_nodes, P).astype(np.int32)
    names, W_CN = vertex_weights(graph, balance)
    return rebalance_weights(graph, part, P, names, W_CN, imbalance=imbalance, seed=seed,
                             max_rounds=max_rounds, part_weights=part_weights)


def rebalance_weights(graph: Graph, part: np.ndarray, num_parts: int, names: tuple[str, ...],
                      W_CN: np.ndarray, *, imbalance: float = 0.03, seed: int = 0,
                      max_rounds: int = 16, part_weights: Any = None,
                      what: str = "rebalance") -> np.ndarray:
    """:func:`rebalance_parts` with the balance weights given: criteria ``names`` and their int64
    ``W_CN [C, N]`` (the typed criteria of :mod:`partitioners.hetero.partition`, say).
    ``part`` (int32 ``[N]``) is updated in place and returned."""
    P = int(num_parts)
    imbalance = check_imbalance(imbalance)
    fractions = check_part_weights(part_weights, P)
    load_CP = np.stack([np.bincount(part, weights=w, minlength=P) for w in W_CN]).astype(np.int64)
    bound_CP = part_bounds(W_CN, P, imbalance, fractions)
    if P == 1 or np.all(load_CP <= bound_CP):
        return part
    t0 = time.perf_counter()
    ptr, src, mult = _simple_in_adjacency(graph)
    cnt = volume_table(ptr, src, mult, part, P)
    state = _State(ptr, src, mult, cnt, part, W_CN, load_CP, bound_CP,
                   part_targets(W_CN, P, fractions))
    tie = np.random.default_rng(seed).permutation(graph.num_nodes)
    moves = 0
    for _ in range(max_rounds):
        over_CP = state.load_CP > bound_CP
        if not over_CP.any():
            break
        round_moves = 0
        r = state.leaving()
        for c, a in zip(*np.nonzero(over_CP)):
            round_moves += _drain(state, int(c), int(a), r, tie)
        moves += round_moves
        if round_moves == 0:
            break
    excess = (state.load_CP / bound_CP).max(axis=1)
    if np.any(excess > 1.0 + 1e-12):
        logger.warning("%s: could not bring every part within bounds; heaviest part / bound "
                       "per criterion: %s", what, dict(zip(names, np.round(excess, 3).tolist())))
    logger.info("%s: %d moves in %.2fs", what, moves, time.perf_counter() - t0)
    return state.part


def _drain(state: "_State", c: int, a: int, r: np.ndarray, tie: np.ndarray) -> int:
    """Move weight of criterion ``c`` out of part ``a`` (moves and swaps); the nodes moved."""
    W_CN, bound_CP, part = state.W_CN, state.bound_CP, state.part
    moved = 0
    tried: set[int] = set()
    while state.load_CP[c, a] > bound_CP[c, a]:
        room = bound_CP[c] - state.load_CP[c]
        room[a] = -np.inf
        room[list(tried)] = -np.inf
        b = int(np.argmax(room))
        if room[b] <= 0:
            break
        tried.add(b)
        movers = np.flatnonzero((part == a) & (W_CN[c] > 0))
        g_mv = state.gains_of(movers, r[movers], masked=False)[:, b]
        movers = movers[np.lexsort((tie[movers], -g_mv))]
        partners = np.flatnonzero(part == b)
        g_pt = state.gains_of(partners, r[partners], masked=False)[:, a]
        # lightest in c first, then best gain to a
        partners = partners[np.lexsort((tie[partners], -g_pt, W_CN[c, partners]))]
        used = np.zeros(partners.size, dtype=bool)
        for v in movers:
            if state.load_CP[c, a] <= bound_CP[c, a] or state.load_CP[c, b] >= bound_CP[c, b]:
                break
            v = int(v)
            w = W_CN[:, v]
            if np.all((w == 0) | (state.load_CP[:, b] + w <= bound_CP[:, b])):
                state._apply(v, a, b)
                moved += 1
                continue
            lighter = np.flatnonzero(~used & (W_CN[c, partners] < w[c]))
            for j in lighter[:64]:  # bounded search for a partner
                x = int(partners[j])
                if part[x] != b:
                    used[j] = True
                    continue
                d = w - W_CN[:, x]  # what a gains back is x, what b gains is v
                new_a = state.load_CP[:, a] - d
                new_b = state.load_CP[:, b] + d
                ok_a = (new_a <= bound_CP[:, a]) | (new_a <= state.load_CP[:, a])
                ok_b = (new_b <= bound_CP[:, b]) | (new_b <= state.load_CP[:, b])
                if np.all(ok_a & ok_b):
                    state._apply(v, a, b)
                    state._apply(x, b, a)
                    used[j] = True
                    moved += 2
                    break
    return moved
