"""One graph and one partition for ``benchmarks/peers.py``: gnn-dist trains on the parts DGL cut.

The graph is a degree-corrected SBM of the generator (``partitioners.synthetic.sbm_graph``),
written once as arrays for the DGL side (:func:`write_graph_npz`); DGL partitions it as PipeGCN
and BNS-GCN do (``peers_dgl.py``) and reports the part of every node; gnn-dist's folder is then
written from that assignment (:func:`write_gnn_dist_folder`) over the graph the peers train on:
theirs adds a self-loop to every node (their ``load_data``), so the same edges are given to
gnn-dist (:func:`with_self_loops`). Same nodes per part, so both exchange the same halo rows;
:func:`parts_match` checks it node for node. numpy at import time (the DGL venv imports
:func:`assignment_from_dgl`); ``partitioners`` when a graph is made or written.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

__all__ = ["make_graph", "with_self_loops", "write_graph_npz", "assignment_from_dgl",
           "write_gnn_dist_folder", "parts_match"]


def make_graph(num_nodes: int, *, feature_dim: int = 64, num_classes: int = 8, seed: int = 0) -> Any:
    """The benchmark's graph: an SBM like the catalog's ``sbm-*`` (average degree 20), symmetric."""
    from partitioners.synthetic import sbm_graph

    return sbm_graph(num_nodes, num_classes, feature_dim, seed=seed, name=f"sbm-{num_nodes}")


def _edges(graph: Any) -> tuple[np.ndarray, np.ndarray]:
    """(src, dst) of a CSR by destination."""
    dst = np.repeat(np.arange(graph.num_nodes, dtype=np.int64), np.diff(graph.indptr))
    return np.asarray(graph.indices, dtype=np.int64), dst


def with_self_loops(graph: Any) -> Any:
    """``graph`` with its self-loops removed and one added to every node, as the peers load it."""
    from partitioners.graph import Graph

    src, dst = _edges(graph)
    keep = src != dst
    loops = np.arange(graph.num_nodes, dtype=np.int64)
    return Graph.from_edges(np.concatenate([src[keep], loops]), np.concatenate([dst[keep], loops]),
                            graph.num_nodes, features=graph.x, labels=graph.y, train_mask=graph.train_mask,
                            val_mask=graph.val_mask, test_mask=graph.test_mask,
                            num_classes=graph.num_classes, name=graph.name)


def write_graph_npz(graph: Any, path: str | Path) -> Path:
    """The arrays ``peers_dgl.peer_graph`` reads (temp file + rename)."""
    src, dst = _edges(graph)
    path = Path(path)
    tmp = path.with_name(path.name + ".tmp.npz")
    np.savez(tmp, src=src, dst=dst, num_nodes=np.int64(graph.num_nodes), features=graph.x,
             labels=np.asarray(graph.y, dtype=np.int64), train_mask=graph.train_mask, val_mask=graph.val_mask,
             test_mask=graph.test_mask)
    tmp.replace(path)
    return path


def assignment_from_dgl(config: dict[str, Any], orig_nids: np.ndarray) -> np.ndarray:
    """The part of every original node id from a DGL partition: its config's ``node_map`` (each
    part's range of new ids; one node type) and ``partition_graph``'s ``orig_nids`` (the original
    id of each new id)."""
    node_map = config["node_map"]
    if len(node_map) != 1:
        raise ValueError(f"DGL partition with node types {sorted(node_map)}: one type expected")
    ranges = np.asarray(next(iter(node_map.values())), dtype=np.int64)
    if ranges.ndim != 2 or ranges.shape[1] != 2 or ranges[0, 0] != 0 or np.any(ranges[1:, 0] != ranges[:-1, 1]):
        raise ValueError(f"DGL node_map {ranges.tolist()}: contiguous [start, end) ranges from 0 expected")
    num_nodes = int(ranges[-1, 1])
    orig_nids = np.asarray(orig_nids, dtype=np.int64)
    if orig_nids.shape != (num_nodes,) or not np.array_equal(np.sort(orig_nids), np.arange(num_nodes)):
        raise ValueError(f"orig_nids: a permutation of {num_nodes} ids expected, got shape {orig_nids.shape}")
    assignment = np.empty(num_nodes, dtype=np.int64)
    assignment[orig_nids] = np.repeat(np.arange(len(ranges)), ranges[:, 1] - ranges[:, 0])
    return assignment


def write_gnn_dist_folder(graph: Any, assignment: np.ndarray, out: str | Path) -> Path:
    """gnn-dist's partition folder of ``graph`` cut by ``assignment`` (method ``dgl-metis``)."""
    from partitioners.format.writer import write_partition

    num_parts = int(assignment.max()) + 1
    write_partition(graph, assignment, num_parts, out, method="dgl-metis",
                    method_params={"source": "dgl.distributed.partition_graph"}, seed=None, overwrite=True)
    return Path(out)


def parts_match(folder: str | Path, assignment: np.ndarray) -> list[str]:
    """Problems (none: the folder holds exactly the nodes ``assignment`` gives each part)."""
    from partitioners.format import load_partition_meta
    from partitioners.format.layout import part_dir_name

    meta = load_partition_meta(folder)
    problems = [] if meta.num_parts == int(assignment.max()) + 1 else \
        [f"{meta.num_parts} parts in the folder, {int(assignment.max()) + 1} assigned"]
    for pm in meta.parts:
        p = pm.part_id
        held = np.sort(np.load(Path(folder) / part_dir_name(p) / "original_ids.npy")[:pm.num_inner])
        want = np.flatnonzero(assignment == p)
        if not np.array_equal(held, want):
            problems.append(f"part {p}: {held.size} nodes, {want.size} assigned, "
                            f"{np.setxor1d(held, want).size} differ")
    return problems
