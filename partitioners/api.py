"""One call from a :class:`~partitioners.Graph` to a partition folder: assign, measure, write.

``partition_graph`` = :func:`partitioners.methods.assign_parts` (which part each node goes to)
+ :func:`partitioners.format.write_partition` (the folder, format v1, and the quality report of
:func:`partitioners.quality.partition_quality`, counted in the writer's own pass over the
edges). Torch-free.
"""

from __future__ import annotations

import logging
import os
import time
from typing import Any, Sequence

import numpy as np

from .format.writer import check_out_dir, write_partition
from .graph import Graph
from .hetero.graph import HeteroGraph

__all__ = ["partition_graph", "warn_sparse_ids"]

log = logging.getLogger(__name__)


def partition_graph(graph: Graph | HeteroGraph, num_parts: int, method: str = "metis",
                    out_dir: str | os.PathLike[str] | None = None, *, seed: int = 0,
                    refine: bool = False, balance: str | Sequence[str] = ("nodes",),
                    overwrite: bool = False, progress: bool = False,
                    read_time_s: float | None = None,
                    extra_meta: dict[str, Any] | None = None, part_weights: Sequence[float] | None = None,
                    refine_objective: str = "volume", device_memory: Sequence[int] | None = None) -> dict[str, Any]:
    """Partition ``graph`` into ``num_parts`` parts with ``method`` and write ``out_dir``.

    A :class:`~partitioners.hetero.HeteroGraph` is partitioned as its union graph, balanced per
    node type and in the target type's training nodes (``balance`` is then ignored), and written
    as a typed folder (format 1.3): :func:`partitioners.hetero.partition.partition_hetero`.

    Args:
        graph: the graph to split (homogeneous or typed).
        num_parts: ``P`` (parts may come out empty on tiny graphs; the format allows it).
        method: a name known to :func:`partitioners.methods.assign_parts` (default: ``"metis"``).
        out_dir: the partition folder to write (required).
        seed: random seed of the method.
        refine: move boundary nodes to lower the communication volume afterwards.
        balance: what the method balances: ``"nodes"``, ``"edges"``, ``"train"`` (one or more).
        overwrite: replace an existing partition folder at ``out_dir``.
        progress: tqdm progress bars.
        read_time_s: time the caller spent reading the graph, recorded as ``time_s.read``.
        extra_meta: more top-level keys for ``partition.json`` (e.g. ``split``: how the masks
            were made), passed to :func:`~partitioners.format.write_partition`.
        part_weights: ``num_parts`` positive numbers sizing the parts to their devices: part
            ``p`` gets ``w_p / sum(w)`` of every balance criterion, within the balance tolerance
            (default: None, equal parts). Recorded, normalised, in ``method_params``.
        refine_objective: what ``refine`` lowers: ``"volume"`` (the total, default) or
            ``"max-volume"`` (the busiest part's halo send/receive volume).
        device_memory: each part's device memory in bytes, when ``part_weights`` were made from
            them (``--device-memory``): recorded in ``method_params`` for the planner.

    Returns:
        The quality report as recorded in ``partition.json`` (``edge_cut``, ``comm_volume``,
        halo fractions, balances, ``part_sizes``, ...) with ``time_s`` per stage
        (``read``, ``partition``, ``quality``, ``write``), ``peak_rss_bytes``, and ``num_parts``,
        ``num_nodes``, ``num_edges``, ``method``, ``seed``, ``out_dir``.
    """
    from .method_record import method_params
    from .methods import assign_parts
    from .methods.refiners import get_refiner
    from .methods.targets import check_part_weights

    fractions = None if part_weights is None else check_part_weights(part_weights, num_parts)
    get_refiner(refine_objective)  # refuse an unknown objective before any work
    if isinstance(graph, HeteroGraph):
        from .hetero.partition import partition_hetero

        return partition_hetero(graph, num_parts, method, out_dir, seed=seed, refine=refine,
                                overwrite=overwrite, progress=progress, read_time_s=read_time_s,
                                extra_meta=extra_meta, part_weights=fractions,
                                refine_objective=refine_objective, device_memory=device_memory)
    if out_dir is None:
        raise ValueError("partition_graph needs out_dir: the partition folder to write")
    check_out_dir(out_dir, overwrite)  # fail before a long partitioning run, not after
    balance_t = (balance,) if isinstance(balance, str) else tuple(balance)
    time_s: dict[str, float] = {}
    if read_time_s is not None:
        time_s["read"] = float(read_time_s)

    warn_sparse_ids(graph)
    t = time.perf_counter()
    assignment = assign_parts(graph, num_parts, method, seed=seed, balance=balance_t, refine=refine,
                              progress=progress, part_weights=fractions,
                              refine_objective=refine_objective)
    time_s["partition"] = time.perf_counter() - t
    log.info("assigned %d nodes to %d parts with %s in %.2fs", graph.num_nodes, num_parts, method,
             time_s["partition"])

    # the quality report comes from the writer's own pass over the edges (halos, cut)
    meta = write_partition(graph, assignment, num_parts, out_dir, method=method,
                           method_params=method_params(balance_t, refine, refine_objective=refine_objective,
                                                       part_weights=fractions, device_memory=device_memory),
                           seed=seed, quality=None, overwrite=overwrite, progress=progress,
                           extra_meta=extra_meta, time_s=time_s)
    report = dict(meta["quality"])
    report.update(num_parts=meta["num_parts"], num_nodes=meta["num_nodes"],
                  num_edges=meta["num_edges"], method=method, seed=seed, out_dir=str(out_dir),
                  method_params=meta["method_params"])
    return report


def warn_sparse_ids(graph: Graph) -> int:
    """Warn (one log line) when most node ids have no edge at all; returns how many have none.

    Readers take the ids in the input as node ids, so ids that are sparse (hashed, global,
    sampled) make a graph of ``max id + 1`` nodes, most of them isolated.
    """
    n = graph.num_nodes
    isolated = _isolated_nodes(graph)
    if 2 * isolated > n:
        log.warning("%d of the %d node ids 0..%d (%.0f%%) have no edge: the input's ids may be "
                    "sparse (node ids are taken as given, num_nodes = max id + 1); relabel them "
                    "to 0..K-1 before partitioning (gnn-dist partition --relabel, for edge lists "
                    "and .npy edge arrays), or the isolated nodes fill the parts",
                    isolated, n, n - 1, 100.0 * isolated / n)
    return isolated


def _isolated_nodes(graph: Graph, chunk_edges: int = 1 << 22) -> int:
    """Nodes with no in-edge and no out-edge. Only the nodes without in-edges can be isolated,
    so the pass over ``indices`` (chunk by chunk, a memory-mapped graph's included) looks up a
    mark per edge instead of counting every out-degree, and is skipped when there are none."""
    candidate = np.diff(graph.indptr) == 0
    if not candidate.any():
        return 0
    for lo in range(0, graph.num_edges, chunk_edges):
        ids = np.asarray(graph.indices[lo:lo + chunk_edges])
        candidate[ids[candidate[ids]]] = False
    return int(np.count_nonzero(candidate))
