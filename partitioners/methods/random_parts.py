"""The ``random`` method: a seeded, structure-blind, balanced assignment.

Nodes are dealt to parts like cards: they are put in a seeded random order, then dealt
boustrophedon (parts ``0..P-1``, then ``P-1..0``, ...), and finally the part labels themselves are
permuted by the seed. So every part gets ``floor(N/P)`` or ``ceil(N/P)`` nodes.

With ``balance`` criteria beyond ``nodes`` the deal is stratified: nodes are sorted first by
training flag (``train``: training nodes are dealt first, so each part gets ``floor``/``ceil`` of
them) and then by in-degree descending (``edges``: heavy nodes are dealt first, snake order evens
out their sums), with the random order breaking ties. Node counts stay within one of each other.

With ``part_weights`` (:mod:`.targets`) the deal is weighted: part ``p`` takes its turns at the
Sainte-Laguë times ``(k + 1/2) / fraction_p`` (:func:`weighted_deal`), so it gets ``N * fraction_p``
nodes to within one, spread evenly through the sorted order (strata included); labels are not
permuted then (part ``p`` is the one of weight ``p``).

It ignores the edges entirely: its edge cut is ``(1 - 1/P)`` of the edges in expectation. It is
the baseline, and the right choice when the graph has no locality to exploit.
This module is torch-free.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

from ..graph import Graph
from ._common import vertex_weights
from .targets import check_part_weights

if TYPE_CHECKING:
    from ..memory import GraphSize

__all__ = ["random_assign", "random_memory", "weighted_deal"]


def random_assign(graph: Graph, num_parts: int, *, seed: int = 0,
                  balance: str | tuple[str, ...] = ("nodes",), part_weights: Any = None) -> np.ndarray:
    """int32 ``[N]``: a seeded balanced random assignment (arguments checked by the caller)."""
    n = graph.num_nodes
    fractions = check_part_weights(part_weights, num_parts)
    rng = np.random.default_rng(seed)
    keys = [rng.permutation(n)]  # np.lexsort: last key is the primary one
    names, W_CN = vertex_weights(graph, balance)
    if "edges" in names:
        keys.append(-W_CN[names.index("edges")])
    if "train" in names:
        keys.append(-W_CN[names.index("train")])
    order = keys[0] if len(keys) == 1 else np.lexsort(keys)
    assignment = np.empty(n, dtype=np.int32)
    if fractions is not None:
        assignment[order] = weighted_deal(n, fractions)
        return assignment
    rank = np.arange(n, dtype=np.int64)
    position = rank % num_parts
    backward = (rank // num_parts) % 2 == 1
    position[backward] = num_parts - 1 - position[backward]
    relabel = rng.permutation(num_parts).astype(np.int32)
    assignment[order] = relabel[position]
    return assignment


def weighted_deal(n: int, fractions: tuple[float, ...]) -> np.ndarray:
    """int32 ``[n]``: the part of each turn of a deal in which part ``p`` takes its turns at the
    times ``(k + 1/2) / fractions[p]``, ``k = 0, 1, ...`` (Sainte-Laguë): part ``p`` gets
    ``n * fractions[p]`` turns to within one, evenly spread; ties go to the lower part id."""
    f = np.asarray(fractions, dtype=np.float64)
    turns = np.ceil(n * f).astype(np.int64) + 1
    owner = np.repeat(np.arange(f.size, dtype=np.int32), turns)
    k = np.arange(owner.size) - np.repeat(np.cumsum(turns) - turns, turns)
    times = (k + 0.5) / f[owner]
    return owner[np.argsort(times, kind="stable")[:n]]


def random_memory(size: GraphSize, num_parts: int) -> int:
    """Bytes :func:`random_assign` needs besides the graph: about ten int64 arrays of ``[N]``
    (the permutation, the weights and sort keys of up to three criteria, the deal's ranks and
    positions)."""
    return 80 * size.num_nodes
