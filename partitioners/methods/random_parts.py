"""The ``random`` method: a seeded, structure-blind, balanced assignment.

Nodes are dealt to parts like cards: they are put in a seeded random order, then dealt
boustrophedon (parts ``0..P-1``, then ``P-1..0``, ...), and finally the part labels themselves are
permuted by the seed. So every part gets ``floor(N/P)`` or ``ceil(N/P)`` nodes.

With ``balance`` criteria beyond ``nodes`` the deal is stratified: nodes are sorted first by
training flag (``train``: training nodes are dealt first, so each part gets ``floor``/``ceil`` of
them) and then by in-degree descending (``edges``: heavy nodes are dealt first, snake order evens
out their sums), with the random order breaking ties. Node counts stay within one of each other.

It ignores the edges entirely: its edge cut is ``(1 - 1/P)`` of the edges in expectation. It is
the baseline, and the right choice when the graph has no locality to exploit.
This module is torch-free.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from ..graph import Graph
from ._common import vertex_weights

if TYPE_CHECKING:
    from ..memory import GraphSize

__all__ = ["random_assign", "random_memory"]


def random_assign(graph: Graph, num_parts: int, *, seed: int = 0,
                  balance: str | tuple[str, ...] = ("nodes",)) -> np.ndarray:
    """int32 ``[N]``: a seeded balanced random assignment (arguments checked by the caller)."""
    n = graph.num_nodes
    rng = np.random.default_rng(seed)
    keys = [rng.permutation(n)]  # np.lexsort: last key is the primary one
    names, W_CN = vertex_weights(graph, balance)
    if "edges" in names:
        keys.append(-W_CN[names.index("edges")])
    if "train" in names:
        keys.append(-W_CN[names.index("train")])
    order = keys[0] if len(keys) == 1 else np.lexsort(keys)
    rank = np.arange(n, dtype=np.int64)
    position = rank % num_parts
    backward = (rank // num_parts) % 2 == 1
    position[backward] = num_parts - 1 - position[backward]
    relabel = rng.permutation(num_parts).astype(np.int32)
    assignment = np.empty(n, dtype=np.int32)
    assignment[order] = relabel[position]
    return assignment


def random_memory(size: GraphSize, num_parts: int) -> int:
    """Bytes :func:`random_assign` needs besides the graph: about ten int64 arrays of ``[N]``
    (the permutation, the weights and sort keys of up to three criteria, the deal's ranks and
    positions)."""
    return 80 * size.num_nodes
