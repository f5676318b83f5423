"""A typed partition folder read back as the typed graph it was cut from, for a re-cut
(``gnn-dist partition --input TYPED_FOLDER --parts P``, ``gnn-dist train --repartition-on-resize``
on a typed run; the homogeneous reader is :mod:`partitioners.io.partition_input`).

The folder (format 1.3/1.4, :mod:`partitioners.format.hetero`) is read part by part, each part's
files memory-mapped and their checksums verified, into the layout of a typed npy-dir
(:class:`~.npy_dir.TypedNpyDir`) of scratch memory maps: every node type's features, labels and
(the target type's) masks by local id, scattered from the parts' ``features-TYPE.npy``,
``labels-TYPE.npy`` and masks by original id (type ``t`` holds original ids ``[offset_t,
offset_t + count_t)``); every relation's ``src``/``dst`` local ids, split from each part's edges
by ``edge_type.npy`` a chunk at a time (a first pass counts each relation's edges from
``in_degree_rel.npy``). :func:`~.outofcore.read_typed_npy_dir_on_disk` then builds the union
graph from it on disk, as for a ``typed-npy-dir`` input, with no ``add_reverse`` (the relations
are the folder's, reverses included) and the folder's target type and class count. The graph
keeps the folder's node names (``original_names.npy``), ``relation_names``, preprocessing counts
and edge split (the triples by original ids and their relation ids), so a re-cut writes the same
graph fingerprint, and for the same method and P the same parts as a cut of the original input.

Scratch disk: two ids per edge (int32 below ``2**31`` nodes of a type) and the node data; memory:
one part's inner ids and one chunk (an ``[N]`` int64 map of new to original ids with an edge
split). A typed folder with edge weights or edge features is refused (one line): the typed
out-of-core build carries neither. Torch-free.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from ..errors import GraphError

__all__ = ["TYPED_CARRIED_KEYS", "read_typed_partition_input", "typed_input_size"]

TYPED_CARRIED_KEYS = ("input_format", "add_reverse")
"""A typed folder's ``partition.json`` keys on how its graph was read (the reverses it added):
the re-cut records them as they were (``relation_names`` is the graph's, carried with it)."""
_MASK_KINDS = ("train", "val", "test")


def _check_carried(folder: Path, meta: Any) -> None:
    """Refuse (GraphError, one line) what the typed out-of-core build cannot carry."""
    for what, has in (("edge weights", meta.weighted), ("edge features", meta.edge_feature_dim)):
        if has:
            raise GraphError(f"{folder}: a typed partition folder with {what} cannot be re-cut (the typed "
                             f"out-of-core build carries none); partition its typed input again with the "
                             f"--parts you need")


def _index_dtype(counts: list[int]) -> Any:
    from ..graph_csr import index_dtype

    return index_dtype(max(counts))


def typed_input_size(folder: Path, meta: Any) -> Any:
    """The :class:`~partitioners.memory.GraphSize` of the union graph a typed folder holds, from
    its ``partition.json`` (as :func:`~.outofcore.disk_sizes` sizes a typed npy-dir).

    Raises:
        GraphError: a folder with edge weights or edge features.
    """
    from ..memory import GraphSize

    _check_carried(folder, meta)
    types = meta.hetero["node_types"]
    widths = [np.dtype(t["feature_dtype"]).itemsize * t["feature_dim"] for t in types if t.get("feature_dim")]
    return GraphSize(num_nodes=meta.num_nodes, num_edges=meta.num_edges, feature_bytes=max(widths, default=0),
                     label_bytes=8 if any(t.get("labelled") for t in types) else 0, num_masks=len(meta.masks),
                     index_bytes=np.dtype(_index_dtype([meta.num_nodes])).itemsize, on_disk=True,
                     typed_criteria=len(types) + 1, num_relations=len(meta.hetero["relations"]))


def read_typed_partition_input(folder: Path, meta: Any, *, scratch_dir: Path, progress: bool = False) -> Any:
    """The :class:`~.outofcore.DiskHeteroGraph` of the typed folder ``folder`` (``meta``: its
    :class:`~partitioners.format.meta.PartitionMeta`), built in ``scratch_dir`` (module docstring).

    Raises:
        GraphError: edge weights or features; parts that disagree with ``partition.json``.
        PartitionFormatError: a part that fails its checks.
    """
    from ..format.reader import load_original_names
    from ..outofcore.scratch import Scratch
    from .link_split import TypedLinkSplit
    from .outofcore import read_typed_npy_dir_on_disk

    _check_carried(folder, meta)
    sec = meta.hetero
    with Scratch(scratch_dir) as scratch:
        d, link = _as_typed_npy_dir(folder, meta, scratch)
        graph = read_typed_npy_dir_on_disk(d, target_type=sec["target_type"], scratch_dir=scratch_dir,
                                           progress=progress, name=meta.name)
    union = graph.to_union().graph
    union.node_names = load_original_names(folder)
    union.preprocessing = dict(meta.raw.get("preprocessing") or {})
    graph.relation_names = dict(meta.raw.get("relation_names") or {})
    pairs = link.pairs()
    if pairs is not None:
        graph.link_split = TypedLinkSplit(pairs=pairs, relations=link.relations() or {}, record=meta.edge_split)
    return graph


def _relation_counts(folder: Path, meta: Any) -> np.ndarray:
    """int64 ``[R]``: each relation's edges, from the parts' ``in_degree_rel.npy`` (verified)."""
    from ..format.reader import load_part

    counts = np.zeros(len(meta.hetero["relations"]), dtype=np.int64)
    for p in range(meta.num_parts):
        deg = load_part(folder, p, mmap=True, verify=True).typed["in_degree_rel"]
        for lo in range(0, deg.shape[0], 1 << 20):
            counts += np.asarray(deg[lo:lo + (1 << 20)]).sum(axis=0, dtype=np.int64)
    if int(counts.sum()) != meta.num_edges:
        raise GraphError(f"{folder}: the parts' in_degree_rel.npy count {int(counts.sum())} edges but "
                         f"partition.json says num_edges = {meta.num_edges}")
    return counts


def _as_typed_npy_dir(folder: Path, meta: Any, scratch: Any) -> tuple[Any, Any]:
    """The folder's typed graph as a :class:`~.npy_dir.TypedNpyDir` of scratch maps, and its edge
    split's :class:`~partitioners.io.partition_input.LinkPairs`."""
    from ..format.hetero import features_file, labels_file
    from ..format.reader import load_part
    from ..io.partition_input import LinkPairs, scatter_rows
    from .npy_dir import TypedNpyDir

    sec = meta.hetero
    types = sec["node_types"]
    names = [t["name"] for t in types]
    rels = [tuple(r) for r in sec["relations"]]
    off = np.array([t["offset"] for t in types], dtype=np.int64)
    totals = _relation_counts(folder, meta)
    idt = _index_dtype([t["count"] for t in types])
    ends = [(scratch.array(f"src-{r}", idt, int(k)), scratch.array(f"dst-{r}", idt, int(k)))
            for r, k in enumerate(totals)]
    data: dict[str, dict[str, Any]] = {t["name"]: {} for t in types}
    for t in types:
        if t.get("feature_dim"):
            data[t["name"]]["features"] = scratch.array(f"features-{t['name']}", t["feature_dtype"],
                                                        (t["count"], t["feature_dim"]))
        if t.get("labelled"):
            data[t["name"]]["labels"] = scratch.array(f"labels-{t['name']}", np.int64, t["count"])
    target = sec["target_type"]
    for m in meta.masks if target is not None else ():   # the union's masks are the target type's
        data[target][m.removesuffix("_mask.npy")] = scratch.array(m, np.bool_, types[names.index(target)]["count"])
    link = LinkPairs(meta)
    at = np.zeros(len(rels), dtype=np.int64)
    for p in range(meta.num_parts):
        part = load_part(folder, p, mmap=True, verify=False)   # verified by _relation_counts
        inner = np.asarray(part.original_ids[:part.num_inner])
        link.add(part, inner)
        node_type = np.asarray(part.typed["node_type"][:part.num_inner])
        for i, t in enumerate(types):
            sel = node_type == i
            local = _local_ids(folder, p, inner[sel] - off[i], t)
            for key, file in (("features", features_file(t["name"])), ("labels", labels_file(t["name"]))):
                if key in data[t["name"]]:
                    rows = part.typed[file.removesuffix(".npy")]
                    if rows.shape[0] != local.size:
                        raise GraphError(f"{folder}: part {p}'s {file} has {rows.shape[0]} rows but its "
                                         f"node_type.npy {local.size} inner rows of type {t['name']!r}")
                    scatter_rows(data[t["name"]][key], local, rows)
            if t["name"] == target:
                for kind in _MASK_KINDS:
                    if kind in data[target]:
                        scatter_rows(data[target][kind], local, np.asarray(getattr(part, f"{kind}_mask"))[sel])
        _split_edges(folder, p, part, inner, rels, types, ends, at, totals)
    if not np.array_equal(at, totals):
        raise GraphError(f"{folder}: the parts' edge_type.npy count {at.tolist()} edges per relation but their "
                         f"in_degree_rel.npy {totals.tolist()}")
    counts = {t["name"]: int(t["count"]) for t in types}
    edges = {rel: (scratch.freeze(s), scratch.freeze(d)) for rel, (s, d) in zip(rels, ends)}
    frozen = {t: {k: scratch.freeze(a) for k, a in fields.items()} for t, fields in data.items() if fields}
    return TypedNpyDir(folder, counts, target, sec.get("num_classes") or None, edges, frozen), link


def _local_ids(folder: Path, p: int, local: np.ndarray, t: dict[str, Any]) -> np.ndarray:
    """A part's inner rows of type ``t`` as its local ids, checked in range (a hostile node_type.npy)."""
    if local.size and (int(local.min()) < 0 or int(local.max()) >= t["count"]):
        raise GraphError(f"{folder}: part {p}'s node_type.npy gives type {t['name']!r} a node outside its "
                         f"original ids [{t['offset']}, {t['offset'] + t['count']})")
    return local


def _split_edges(folder: Path, p: int, part: Any, inner: np.ndarray, rels: list[tuple[str, ...]],
                 types: list[dict[str, Any]], ends: list[tuple[np.ndarray, np.ndarray]], at: np.ndarray,
                 totals: np.ndarray) -> None:
    """Part ``p``'s edges, a chunk at a time, appended to their relations' ``src``/``dst``
    (local ids of the relation's types, checked in range) from positions ``at`` (advanced)."""
    from ..io.partition_input import part_edge_chunks

    num_rel = len(rels)
    tid = {t["name"]: i for i, t in enumerate(types)}
    off = np.array([t["offset"] for t in types], dtype=np.int64)
    size = np.array([t["count"] for t in types], dtype=np.int64)
    for lo, hi, dst, src in part_edge_chunks(part, inner):
        rel = np.asarray(part.typed["edge_type"][lo:hi]).astype(np.int64)
        if rel.size and (int(rel.min()) < 0 or int(rel.max()) >= num_rel):
            raise GraphError(f"{folder}: part {p}'s edge_type.npy has relation ids outside [0, {num_rel})")
        order = np.argsort(rel, kind="stable")
        cuts = np.searchsorted(rel[order], np.arange(num_rel + 1))
        for r in range(num_rel):
            pick = order[cuts[r]:cuts[r + 1]]
            k = pick.size
            if not k:
                continue
            a, b = tid[rels[r][0]], tid[rels[r][2]]
            s, d = src[pick] - off[a], dst[pick] - off[b]
            if min(int(s.min()), int(d.min())) < 0 or int(s.max()) >= size[a] or int(d.max()) >= size[b]:
                raise GraphError(f"{folder}: part {p}'s edge_type.npy gives relation {rels[r]} an edge between "
                                 f"nodes of other types")
            if at[r] + k > totals[r]:
                raise GraphError(f"{folder}: part {p}'s edge_type.npy has more edges of relation {rels[r]} than "
                                 f"in_degree_rel.npy counts ({int(totals[r])})")
            ends[r][0][at[r]:at[r] + k] = s
            ends[r][1][at[r]:at[r] + k] = d
            at[r] += k
