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


def _metis_typed(union: UnionGraph, num_parts: int, W_CN: np.ndarray, seed: int, imbalance: float) -> np.ndarray:
    from ..methods.metis import (_as_int32, _import_pymetis, combined_weights, induced_subgraph,
                                 place_isolated, symmetric_adjacency)

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
                                    options=options)
        assignment[connected] = _as_int32(result.vertex_part)
    if not connected.all():
        place_isolated(assignment, ~connected, W_CN, num_parts)
    return assignment


def rebalance_typed(union: UnionGraph, assignment: np.ndarray, num_parts: int, names: tuple[str, ...],
                    W_CN: np.ndarray, *, imbalance: float = 0.03, seed: int = 0,
                    max_rounds: int = 16) -> np.ndarray:
    """``assignment`` with nodes moved until every part is within every typed bound: the loop of
    :func:`partitioners.methods.refine.rebalance_parts` with the typed criteria ``W_CN``."""
    from ..methods._common import balance_bounds
    from ..methods.refine import _drain, _simple_in_adjacency, _State, volume_table

    graph = union.graph
    P = int(num_parts)
    part = np.asarray(assignment, dtype=np.int32).copy()
    load_CP = np.stack([np.bincount(part, weights=w, minlength=P) for w in W_CN]).astype(np.int64)
    bound_C = balance_bounds(W_CN, P, imbalance)
    if P == 1 or np.all(load_CP <= bound_C[:, None]):
        return part
    ptr, src, mult = _simple_in_adjacency(graph)
    cnt = volume_table(ptr, src, mult, part, P)
    state = _State(ptr, src, mult, cnt, part, W_CN, load_CP, bound_C, W_CN.sum(axis=1) / P)
    tie = np.random.default_rng(seed).permutation(graph.num_nodes)
    for _ in range(max_rounds):
        over_CP = state.load_CP > bound_C[:, None]
        if not over_CP.any():
            break
        moves = 0
        r = state.leaving()
        for c, a in zip(*np.nonzero(over_CP)):
            moves += _drain(state, int(c), int(a), r, tie)
        if moves == 0:
            break
    excess = (state.load_CP / bound_C[:, None]).max(axis=1)
    if np.any(excess > 1.0 + 1e-12):
        log.warning("typed rebalance: could not bring every part within bounds; heaviest part / bound "
                    "per criterion: %s", dict(zip(names, np.round(excess, 3).tolist())))
    return state.part


def assign_typed(hg: HeteroGraph, union: UnionGraph, num_parts: int, method: str = "metis", *,
                 seed: int = 0, refine: bool = False, imbalance: float = 0.03,
                 progress: bool = False) -> np.ndarray:
    """int32 ``[N]`` part of every union node, balanced per type and in training nodes
    (module docstring)."""
    from ..methods import assign_parts
    from ..methods._common import check_imbalance, check_num_parts

    num_parts = check_num_parts(num_parts, union.graph.num_nodes)
    imbalance = check_imbalance(imbalance)
    if num_parts == 1:
        return np.zeros(union.graph.num_nodes, dtype=np.int32)
    names, W_CN = typed_weights(union, hg.node_types)
    if method == "metis":
        assignment = _metis_typed(union, num_parts, W_CN, seed, imbalance)
        if refine:
            from ..methods.refine import refine_volume

            assignment = refine_volume(union.graph, assignment, num_parts, balance=("nodes",),
                                       imbalance=imbalance, seed=seed)
    else:
        assignment = assign_parts(union.graph, num_parts, method, seed=seed, balance=("nodes",),
                                  refine=refine, imbalance=imbalance, progress=progress)
    return rebalance_typed(union, assignment, num_parts, names, W_CN, imbalance=imbalance, seed=seed)


def type_balance(union: UnionGraph, assignment: np.ndarray, num_parts: int,
                 types: list[str]) -> dict[str, float]:
    """Heaviest part / mean part per typed criterion (1.0 = perfect)."""
    names, W_CN = typed_weights(union, types)
    load = np.stack([np.bincount(assignment, weights=w, minlength=num_parts) for w in W_CN])
    mean = W_CN.sum(axis=1) / num_parts
    return {n: float(x) for n, x in zip(names, load.max(axis=1) / mean)}


def partition_hetero(hg: HeteroGraph, num_parts: int, method: str = "metis",
                     out_dir: str | os.PathLike[str] | None = None, *, seed: int = 0,
                     refine: bool = False, overwrite: bool = False, progress: bool = False,
                     read_time_s: float | None = None, imbalance: float = 0.03,
                     extra_meta: dict[str, Any] | None = None) -> dict[str, Any]:
    """Partition ``hg`` and write a typed folder (format 1.3) at ``out_dir``; the report of
    :func:`partitioners.api.partition_graph`, with ``type_balance`` (heaviest / mean part per
    type and for the training nodes)."""
    from ..format.writer import check_out_dir, write_partition

    if out_dir is None:
        raise ValueError("partition_graph needs out_dir: the partition folder to write")
    check_out_dir(out_dir, overwrite)
    time_s: dict[str, float] = {}
    if read_time_s is not None:
        time_s["read"] = float(read_time_s)
    t = time.perf_counter()
    union = hg.to_union()
    assignment = assign_typed(hg, union, num_parts, method, seed=seed, refine=refine,
                              imbalance=imbalance, progress=progress)
    time_s["partition"] = time.perf_counter() - t
    balance = type_balance(union, assignment, num_parts, hg.node_types)
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
    data = HeteroFolderData(node_type=union.node_type, edge_type=union.edge_type,
                            in_degree_rel=union.in_degree_rel, section=section,
                            features=hg.features, labels=hg.labels)
    meta = write_partition(union.graph, assignment, num_parts, out_dir, method=method,
                           method_params={"balance": ["types", "train"], "refine": bool(refine)},
                           seed=seed, overwrite=overwrite, progress=progress, extra_meta=extra_meta,
                           time_s=time_s, hetero=data)
    report = dict(meta["quality"])
    report.update(num_parts=meta["num_parts"], num_nodes=meta["num_nodes"], num_edges=meta["num_edges"],
                  method=method, seed=seed, out_dir=str(out_dir), type_balance=balance)
    return report
