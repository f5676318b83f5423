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

Methods are looked up by name in :mod:`.registry`: one module per method and one
:func:`register_method` line below (user code registers its own the same way, see
``docs/extending.md``). :data:`METHODS` is the tuple of the names registered so far, read
afresh on each access.

``refine=True`` then moves boundary nodes to lower the communication volume
(:func:`refine_volume`), or, with ``refine_objective="max-volume"``, the busiest link: the
largest halo volume one part sends or receives (:func:`~.refine_maxvol.refine_max_volume`;
objectives are registered in :mod:`.refiners`). ``part_weights`` size the parts: part ``p``
gets the fraction ``w_p / sum(w)`` of every balance criterion (:mod:`.targets`). Balance criteria: ``nodes`` (default), ``edges`` (in-degree: local
edges per part), ``train`` (training nodes per part). Empty parts are possible (METIS may leave
one on tiny or disconnected graphs) and are valid output.
This package is torch-free.
"""

from __future__ import annotations

import logging
from typing import Any, Iterable

import numpy as np

from ..argcheck import check_seed
from ..graph import Graph
from ..quality import check_assignment
from ._common import BALANCE_CRITERIA, check_imbalance, check_num_parts, normalize_balance
from .metis import metis_assign, metis_memory
from .random_parts import random_assign, random_memory
from .refine import refine_volume
from .refine_maxvol import refine_max_volume
from .refiners import get_refiner, refiner_names, register_refiner
from .registry import PartitionMethod, get_method, method_names, register_method
from .targets import check_part_weights
from .streaming import fennel_assign, ldg_assign, streaming_memory

__all__ = ["METHODS", "BALANCE_CRITERIA", "PartitionMethod", "assign_parts", "get_method",
           "register_method", "refine_volume", "refine_max_volume", "metis_assign", "random_assign",
           "ldg_assign", "fennel_assign", "refiner_names"]

logger = logging.getLogger(__name__)

register_method("metis", metis_assign, options=("imbalance", "part_weights"), memory=metis_memory,
                description="multilevel k-way min-cut on the symmetrised graph (pymetis)")
register_method("random", random_assign, options=("part_weights",), memory=random_memory,
                description="seeded balanced deal, structure-blind; the baseline")
register_method("ldg", ldg_assign, options=("imbalance", "progress", "part_weights"),
                memory=streaming_memory, description="one-pass streaming, Linear Deterministic Greedy")
register_method("fennel", fennel_assign, options=("imbalance", "progress", "part_weights"),
                memory=streaming_memory, description="one-pass streaming, Fennel")
register_refiner("volume", refine_volume, "the total communication volume (halo rows over all parts)")
register_refiner("max-volume", refine_max_volume,
                 "the busiest link: the largest halo volume one part sends or receives per layer")


def __getattr__(name: str) -> Any:
    if name == "METHODS":  # computed on access, so it includes methods registered later
        return method_names()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


METHODS: tuple[str, ...]
"""Names accepted by :func:`assign_parts`: every registered method, built-ins first."""


def assign_parts(graph: Graph, num_parts: int, method: str = "metis", *, seed: int = 0,
                 balance: str | Iterable[str] = ("nodes",), refine: bool = False,
                 imbalance: float = 0.03, progress: bool = False, part_weights: Any = None,
                 refine_objective: str = "volume") -> np.ndarray:
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
        part_weights: ``P`` positive numbers: part ``p`` gets the fraction ``w_p / sum(w)`` of
            every balance criterion, within ``imbalance`` of it (default: None, equal parts).
        refine_objective: what ``refine`` lowers, one of :func:`refiner_names` (default:
            ``"volume"``, the total; ``"max-volume"``: the busiest part's send/receive volume).

    Returns:
        int32 ``[N]`` part ids in ``[0, P)``. ``P == 1`` gives all zeros.

    Raises:
        ValueError: bad ``num_parts``, ``method``, ``balance``, ``imbalance``, ``seed``,
            ``part_weights`` (or a method registered without them) or ``refine_objective``,
            ``metis`` without pymetis installed, or a registered method that returns an invalid
            assignment.
    """
    n = graph.num_nodes
    num_parts = check_num_parts(num_parts, n)
    spec = get_method(method)
    balance_t = normalize_balance(balance)
    imbalance = check_imbalance(imbalance)
    seed = check_seed(seed)
    fractions = check_part_weights(part_weights, num_parts)
    refiner = get_refiner(refine_objective) if refine else None
    if fractions is not None and "part_weights" not in spec.options:
        raise ValueError(f"partition method {method!r} does not take part_weights (registered without "
                         f"the option); use metis, random, ldg or fennel, or equal parts")
    if "train" in balance_t and graph.train_mask is None:
        raise ValueError("balance criterion 'train' needs a train_mask, but the graph has none; "
                         "set graph.train_mask or drop 'train' from balance")
    if num_parts == 1:
        return np.zeros(n, dtype=np.int32)
    given: dict[str, Any] = {"imbalance": imbalance, "progress": progress, "part_weights": fractions}
    options = {k: given[k] for k in spec.options}
    assignment = _checked(spec, spec.assign(graph, num_parts, seed=seed, balance=balance_t, **options),
                          n, num_parts)
    if refiner is not None:
        assignment = refiner(graph, assignment, num_parts, balance=balance_t, imbalance=imbalance,
                             seed=seed, part_weights=fractions)
    assert assignment.dtype == np.int32 and assignment.shape == (n,)
    return assignment


def _checked(spec: PartitionMethod, assignment: Any, num_nodes: int, num_parts: int) -> np.ndarray:
    """The method's result as int32 ``[N]``; ValueError naming the method when it is invalid."""
    try:
        a = check_assignment(assignment, num_nodes, num_parts)
    except ValueError as exc:
        raise ValueError(f"partition method {spec.name!r} ({spec.assign.__module__}."
                         f"{spec.assign.__qualname__}) returned an invalid assignment: {exc}") from None
    return a.astype(np.int32, copy=False)
