"""Partition algorithms: which part each node goes to.

Every method maps a :class:`~partitioners.graph.Graph` to an assignment, int32 ``[N]`` with
values in ``[0, P)``; writing the partition folder is :mod:`partitioners.format`'s job and
measuring it :mod:`partitioners.quality`'s.

=========  ===========================================================================
``metis``  multilevel k-way min-cut on the symmetrised graph (pymetis); best quality
``random`` seeded balanced deal, structure-blind; the baseline
``ldg``    one-pass streaming, Linear Deterministic Greedy
``fennel`` one-pass streaming, Fennel
=========  ===========================================================================

``refine=True`` then moves boundary nodes to lower the communication volume
(:func:`refine_volume`). Balance criteria: ``nodes`` (default), ``edges`` (in-degree: local
edges per part), ``train`` (training nodes per part). Empty parts are possible (METIS may leave
one on tiny or disconnected graphs) and are valid output.
This package is torch-free.
"""

from __future__ import annotations

import logging
from typing import Any, Iterable

import numpy as np

from ..graph import Graph
from ._common import BALANCE_CRITERIA, check_imbalance, check_num_parts, normalize_balance
from .metis import metis_assign
from .random_parts import random_assign
from .refine import refine_volume
from .streaming import fennel_assign, ldg_assign

__all__ = ["METHODS", "BALANCE_CRITERIA", "assign_parts", "refine_volume", "metis_assign",
           "random_assign", "ldg_assign", "fennel_assign"]

logger = logging.getLogger(__name__)

METHODS = ("metis", "random", "ldg", "fennel")
"""Names accepted by :func:`assign_parts`."""


def assign_parts(graph: Graph, num_parts: int, method: str = "metis", *, seed: int = 0,
                 balance: str | Iterable[str] = ("nodes",), refine: bool = False,
                 imbalance: float = 0.03, progress: bool = False) -> np.ndarray:
    """Assign every node of ``graph`` to one of ``num_parts`` parts.

    Args:
        graph: the graph to partition.
        num_parts: ``P``, between 1 and ``graph.num_nodes``.
        method: one of :data:`METHODS` (default: ``"metis"``).
        seed: makes the result deterministic; different seeds give different partitions.
        balance: criteria to balance, from ``nodes``, ``edges``, ``train`` (default: nodes).
        refine: afterwards, move boundary nodes to lower the communication volume.
        imbalance: allowed excess of the heaviest part over the mean (default: 0.03).
        progress: show a progress bar where the method has one (streaming, refinement).

    Returns:
        int32 ``[N]`` part ids in ``[0, P)``. ``P == 1`` gives all zeros.

    Raises:
        ValueError: bad ``num_parts``, ``method``, ``balance``, ``imbalance`` or ``seed``, or
            ``metis`` without pymetis installed.
    """
    n = graph.num_nodes
    num_parts = check_num_parts(num_parts, n)
    if method not in METHODS:
        raise ValueError(f"unknown partition method {method!r}; valid methods are {', '.join(METHODS)}")
    balance_t = normalize_balance(balance)
    imbalance = check_imbalance(imbalance)
    if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)) or seed < 0:
        raise ValueError(f"seed must be a non-negative integer, got {seed!r}")
    seed = int(seed)
    if "train" in balance_t and graph.train_mask is None:
        raise ValueError("balance criterion 'train' needs a train_mask, but the graph has none; "
                         "set graph.train_mask or drop 'train' from balance")
    if num_parts == 1:
        return np.zeros(n, dtype=np.int32)
    common: dict[str, Any] = {"seed": seed, "balance": balance_t}
    if method == "metis":
        assignment = metis_assign(graph, num_parts, imbalance=imbalance, **common)
    elif method == "random":
        assignment = random_assign(graph, num_parts, **common)
    elif method == "ldg":
        assignment = ldg_assign(graph, num_parts, imbalance=imbalance, progress=progress, **common)
    else:
        assignment = fennel_assign(graph, num_parts, imbalance=imbalance, progress=progress, **common)
    if refine:
        assignment = refine_volume(graph, assignment, num_parts, balance=balance_t,
                                   imbalance=imbalance, seed=seed)
    assert assignment.dtype == np.int32 and assignment.shape == (n,)
    return assignment
