"""Partition a :class:`~partitioners.hetero.HeteroGraph`: its union graph, balanced per type.

What matters for a typed graph is that every part gets its share of **each node type** (the
rows of each type's features, embeddings and per-relation work) and of the **training nodes**
of the target type (only they carry the loss). :func:`typed_weights` gives one balance
criterion per type plus ``train``; :func:`assign_typed` partitions the union graph with them:

* ``metis``: METIS on the union graph's symmetric pattern with one combined vertex weight (the
  criteria each scaled to the same total: pymetis passes a single constraint, see
  :mod:`partitioners.methods.metis`), isolated nodes placed by the typed weights, then
* any other method (``ldg``, ``fennel``, ``random``, a registered one) runs unchanged on the
  union graph (balancing nodes);
* ``refine`` then lowers the volume as for a homogeneous graph, and finally
  :func:`rebalance_typed` moves nodes until every part is within ``(1 + imbalance)`` of the mean
  in every typed criterion (the moves of :func:`partitioners.methods.refine.rebalance_parts`,
  with the typed weights).

:func:`partition_hetero` then writes the folder of the union graph with the typed files
(:mod:`partitioners.format.hetero`). Torch-free.
"""

from __future__ import annotations

import logging
import os
import time
from typing import Any

import numpy as np

from ..format.hetero import HeteroFolderData
from .graph import HeteroGraph, UnionGraph

__all__ = ["typed_weights", "assign_typed", "rebalance_typed", "partition_hetero", "type_balance"]

log = logging.getLogger(__name__)


def typed_weights(union: UnionGraph, types: list[str]) -> tuple[tuple[str, ...], np.ndarray]:
    """``(names, W_CN)``: one 0/1 criterion per node type (``type:NAME``) and, when the target
    type has a non-empty train mask, ``train``; int64 ``[C, N]``."""
    rows = [(union.node_type == t).astype(np.int64) for t in range(len(types))]
    names = [f"type:{t}" for t in types]
    train = union.graph.train_mask
    if train is not None and train.any():
        rows.append(train.astype(np.int64))
        names.append("train")
    return tuple(names), np.stack(rows)


def _metis_typed(union: UnionGraph, num_parts: int, W_CN: np.ndarray, seed: int, imbalance: float,
                 fractions: tuple[float, ...] | None = None) -> np.ndarray:
    from ..methods.metis import (_as_int32, _import_pymetis, combined_weights, induced_subgraph,
                                 metis_tpwgts, place_isolated, symmetric_adjacency)

    graph = union.graph
    n = graph.num_nodes
    pymetis = _import_pymetis()
    idx_dtype = np.int64 if pymetis._internal._idx_type_width() == 64 else np.int32
    xadj, adjncy = symmetric_adjacency(graph, idx_dtype)
    vweights = combined_weights(W_CN).astype(idx_dtype)
    connected = np.diff(xadj) > 0
    if not connected.all():
        xadj, adjncy = induced_subgraph(xadj, adjncy, connected)
        vweights = vweights[connected]
    options = pymetis.Options(seed=int(seed), ufactor=max(1, int(round(1000 * imbalance))))
    assignment = np.zeros(n, dtype=np.int32)
    if xadj.size > 1:
        result = pymetis.part_graph(num_parts, pymetis.CSRAdjacency(xadj, adjncy), vweights=vweights,
                                    options=options, tpwgts=metis_tpwgts(fractions))
        assignment[connected] = _as_int32(result.vertex_part)
    if not connected.all():
        place_isolated(assignment, ~connected, W_CN, num_parts, fractions)
    return assignment


def rebalance_typed(union: UnionGraph, assignment: np.ndarray, num_parts: int, names: tuple[str, ...],
                    W_CN: np.ndarray, *, imbalance: float = 0.03, seed: int = 0,
                    max_rounds: int = 16, part_weights: Any = None) -> np.ndarray:
    """``assignment`` with nodes moved until every part is within every typed bound (its own,
    with ``part_weights``): :func:`partitioners.methods.rebalance.rebalance_weights` with the
    typed criteria ``W_CN``."""
    from ..methods.rebalance import rebalance_weights

    part = np.asarray(assignment, dtype=np.int32).copy()
    return rebalance_weights(union.graph, part, num_parts, names, W_CN, imbalance=imbalance,
                             seed=seed, max_rounds=max_rounds, part_weights=part_weights,
                             what="typed rebalance")


def assign_typed(hg: HeteroGraph, union: UnionGraph, num_parts: int, method: str = "metis", *,
                 seed: int = 0, refine: bool = False, imbalance: float = 0.03,
                 progress: bool = False, part_weights: Any = None,
                 refine_objective: str = "volume") -> np.ndarray:
    """int32 ``[N]`` part of every union node, balanced per type and in training nodes, each
    part to its share of ``part_weights`` (module docstring)."""
    from ..methods import assign_parts
    from ..methods._common import check_imbalance, check_num_parts
    from ..methods.targets import check_part_weights

    num_parts = check_num_parts(num_parts, union.graph.num_nodes)
    imbalance = check_imbalance(imbalance)
    fractions = check_part_weights(part_weights, num_parts)
    if num_parts == 1:
        return np.zeros(union.graph.num_nodes, dtype=np.int32)
    names, W_CN = typed_weights(union, hg.node_types)
    if method == "metis":
        assignment = _metis_typed(union, num_parts, W_CN, seed, imbalance, fractions)
        if refine:
            from ..methods.refiners import get_refiner

            assignment = get_refiner(refine_objective)(
                union.graph, assignment, num_parts, balance=("nodes",), imbalance=imbalance,
                seed=seed, part_weights=fractions)
    else:
        assignment = assign_parts(union.graph, num_parts, method, seed=seed, balance=("nodes",),
                                  refine=refine, imbalance=imbalance, progress=progress,
                                  part_weights=fractions, refine_objective=refine_objective)
    return rebalance_typed(union, assignment, num_parts, names, W_CN, imbalance=imbalance, seed=seed,
                           part_weights=fractions)


def type_balance(union: UnionGraph, assignment: np.ndarray, num_parts: int,
                 types: list[str], part_weights: Any = None) -> dict[str, float]:
    """Heaviest part / its target per typed criterion (1.0 = perfect; the target is the mean
    part, or the part's share of ``part_weights``)."""
    from ..methods.targets import check_part_weights, part_targets

    names, W_CN = typed_weights(union, types)
    load = np.stack([np.bincount(assignment, weights=w, minlength=num_parts) for w in W_CN])
    target = part_targets(W_CN, num_parts, check_part_weights(part_weights, num_parts))
    return {n: float(x) for n, x in zip(names, (load / target).max(axis=1))}


def partition_hetero(hg: HeteroGraph, num_parts: int, method: str = "metis",
                     out_dir: str | os.PathLike[str] | None = None, *, seed: int = 0,
                     refine: bool = False, overwrite: bool = False, progress: bool = False,
                     read_time_s: float | None = None, imbalance: float = 0.03,
                     extra_meta: dict[str, Any] | None = None, part_weights: Any = None,
                     refine_objective: str = "volume", device_memory: Any = None) -> dict[str, Any]:
    """Partition ``hg`` and write a typed folder (format 1.3) at ``out_dir``; the report of
    :func:`partitioners.api.partition_graph`, with ``type_balance`` (heaviest part / its target
    per type and for the training nodes). The folder keeps the input's node names
    (``original_names.npy``, union order) when ``hg.type_names`` has them, and ``relation_names``
    (relation -> the input's name) in ``partition.json`` when some relations were renamed."""
    from ..format.writer import check_out_dir, write_partition
    from ..method_record import method_params
    from ..methods.targets import check_part_weights

    if out_dir is None:
        raise ValueError("partition_graph needs out_dir: the partition folder to write")
    check_out_dir(out_dir, overwrite)
    time_s: dict[str, float] = {}
    if read_time_s is not None:
        time_s["read"] = float(read_time_s)
    t = time.perf_counter()
    union = hg.to_union()
    fractions = check_part_weights(part_weights, num_parts)
    assignment = assign_typed(hg, union, num_parts, method, seed=seed, refine=refine,
                              imbalance=imbalance, progress=progress, part_weights=fractions,
                              refine_objective=refine_objective)
    time_s["partition"] = time.perf_counter() - t
    balance = type_balance(union, assignment, num_parts, hg.node_types, fractions)
    log.info("assigned %d typed nodes to %d parts with %s in %.2fs; heaviest/mean per type: %s",
             union.graph.num_nodes, num_parts, method, time_s["partition"],
             {k: round(v, 3) for k, v in balance.items()})
    off = hg.type_offsets
    section = {
        "node_types": [{"name": t, "count": int(n), "offset": int(off[i]),
                        "feature_dim": int(hg.features[t].shape[1]) if t in hg.features else 0,
                        "feature_dtype": hg.features[t].dtype.name if t in hg.features else None,
                        "labelled": t in hg.labels}
                       for i, (t, n) in enumerate(hg.num_nodes_dict.items())],
        "relations": [list(r) for r in hg.relations],
        "target_type": hg.target_type,
        "num_classes": hg.num_classes,
    }
    if hg.relation_names:  # the input's names of the relations renamed to valid names (triples)
        extra_meta = {**(extra_meta or {}), "relation_names": dict(hg.relation_names)}
    split = hg.link_split
    if split is not None:   # link prediction on relations: the triples and their record
        extra_meta = {**(extra_meta or {}), "edge_split": split.record}
    data = HeteroFolderData(node_type=union.node_type, edge_type=union.edge_type,
                            in_degree_rel=union.in_degree_rel, section=section,
                            features=hg.features, labels=hg.labels,
                            link_pairs=None if split is None else split.pairs,
                            link_relations=None if split is None else split.relations)
    meta = write_partition(union.graph, assignment, num_parts, out_dir, method=method,
                           method_params=method_params(["types", "train"], refine,
                                                       refine_objective=refine_objective,
                                                       part_weights=fractions, device_memory=device_memory),
                           seed=seed, overwrite=overwrite, progress=progress, extra_meta=extra_meta,
                           time_s=time_s, hetero=data)
    report = dict(meta["quality"])
    report.update(num_parts=meta["num_parts"], num_nodes=meta["num_nodes"], num_edges=meta["num_edges"],
                  method=method, seed=seed, out_dir=str(out_dir), type_balance=balance,
                  method_params=meta["method_params"])
    return report
