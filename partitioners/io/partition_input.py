"""A partition folder (or a partition family: its largest member) read back as the graph it was
cut from, by original node ids: ``gnn-dist partition --input FOLDER --parts P ...`` (format
``partition``, inferred from ``partition.json`` or ``family.json``), and the runtime's
``--repartition-on-resize`` (:mod:`gnn_dist.resize_cut`).

Streaming and memory-bounded: each part is opened as memory maps (its files' checksums verified),
its inner rows' node data scattered by original id into scratch memory maps, its edges written as
``(source, destination)`` original ids a chunk at a time, so the folder becomes an npy-dir of
scratch maps that :func:`~partitioners.outofcore.npy_dir.read_npy_dir` builds into a memory-mapped
:class:`~partitioners.graph.Graph` on disk, as any npy-dir input. Nothing of size ``E`` or
``N x F`` is held in memory; scratch disk is about 20 bytes per edge plus the node data
(``scratch_dir``; the scratch files are unlinked as soon as they are mapped).

The graph keeps what the folder recorded about it: node names (``original_names.npy``), an edge
split's pairs, whether it is symmetric, its preprocessing counts, and the provenance keys of
``partition.json`` (:data:`CARRIED_KEYS`: the split of the masks, the edge split,
``normalize_features``), returned for the new ``partition.json`` with ``repartitioned_from``;
so the new folder's ``graph_fingerprint`` equals the old one's. A typed folder is read back the same
way into a typed npy-dir of scratch maps (:mod:`partitioners.hetero.partition_input`), which the
typed out-of-core reader builds, as any ``typed-npy-dir`` input. Torch-free.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path
from typing import Any, Iterator

import numpy as np

from ..errors import GraphError
from .edge_split import LINK_KINDS

__all__ = ["CARRIED_KEYS", "PARTITION_FORMAT", "LinkPairs", "input_size", "is_partition_input", "part_edge_chunks",
           "read_partition_input", "scatter_rows", "scratch_bytes", "source_folder"]

PARTITION_FORMAT = "partition"
"""The ``--input-format`` of a partition folder or family."""
CARRIED_KEYS = ("split", "edge_split", "normalize_features")
"""``partition.json``'s keys saying how the graph's data was made: the new folder records them as they were."""
_EDGE_CHUNK = 1 << 20
_ROW_BYTES = 32 << 20
_NODE_FIELDS = ("features", "labels", "train_mask", "val_mask", "test_mask")


def is_partition_input(path: str | os.PathLike[str]) -> bool:
    """Whether ``path`` is a partition folder (``partition.json``) or a partition family (``family.json``)."""
    from ..format.family import is_family
    from ..format.layout import META_FILE

    p = Path(path)
    return p.is_dir() and ((p / META_FILE).is_file() or is_family(p))


def source_folder(path: str | os.PathLike[str]) -> Path:
    """The partition folder read for ``path``: itself, or a family's largest member."""
    from ..format.family import is_family, read_family

    if is_family(path):
        family = read_family(path)
        return family.member_path(family.parts[-1])
    return Path(path)


def _meta(path: str | os.PathLike[str]) -> Any:
    from ..format import load_partition_meta

    return load_partition_meta(source_folder(path))


def input_size(path: str | os.PathLike[str]) -> Any:
    """The :class:`~partitioners.memory.GraphSize` of the graph a folder holds, from ``partition.json``
    (read out of core: its arrays are memory maps; a typed folder's union graph:
    :func:`~partitioners.hetero.partition_input.typed_input_size`).

    Raises:
        GraphError: a typed folder this reader cannot carry (edge weights or features).
    """
    from ..memory import GraphSize

    meta = _meta(path)
    if meta.hetero is not None:
        from ..hetero.partition_input import typed_input_size

        return typed_input_size(source_folder(path), meta)
    entries = meta.parts[0].files if meta.parts else {}

    def width(name: str) -> int:
        entry = entries.get(name)
        if entry is None:
            return 0
        return int(np.prod(entry.shape[1:], dtype=np.int64)) * np.dtype(entry.dtype).itemsize
    return GraphSize(num_nodes=meta.num_nodes, num_edges=meta.num_edges, symmetric=not meta.directed,
                     feature_bytes=width("features.npy"), label_bytes=width("labels.npy"),
                     num_masks=len(meta.masks), weighted=meta.weighted,
                     edge_attr_bytes=4 * meta.edge_feature_dim,
                     index_bytes=4 if meta.num_nodes < 2**31 - 1 else 8, on_disk=True)


def scratch_bytes(size: Any) -> int:
    """About the scratch disk a re-cut of a folder of ``size`` (:func:`input_size`) needs: the
    edges read back and built (20 bytes each; a typed folder: its relations' two ids each, then the
    typed union build's CSR, payload and relation ids, about 20 more, and ``in_degree_rel``, 8 per
    node and relation) and the node data."""
    per_edge = 20 + (2 * size.index_bytes if size.typed_criteria else 0)
    per_node = size.feature_bytes + size.label_bytes + size.num_masks + 8 * size.num_relations
    return per_edge * size.num_edges + per_node * size.num_nodes


def read_partition_input(path: str | os.PathLike[str], *, scratch_dir: str | os.PathLike[str] | None = None,
                         progress: bool = False) -> tuple[Any, dict[str, Any]]:
    """``(graph, extra partition.json keys)`` of the folder (or family) ``path`` (module docstring);
    a typed folder's graph is a :class:`~partitioners.hetero.outofcore.DiskHeteroGraph`.

    Raises:
        GraphError: a typed folder with edge weights or features. PartitionFormatError: a folder
        that fails its checks.
    """
    from ..format.reader import load_original_names
    from ..graph_checks import check_labels, label_kind_of
    from ..outofcore.npy_dir import read_npy_dir
    from ..outofcore.scratch import Scratch

    folder = source_folder(path)
    meta = _meta(folder)
    where = Path(scratch_dir) if scratch_dir is not None else Path(tempfile.gettempdir())
    extra = _provenance(folder, meta)
    if meta.hetero is not None:
        from ..hetero.partition_input import read_typed_partition_input

        return read_typed_partition_input(folder, meta, scratch_dir=where, progress=progress), extra
    with Scratch(where) as scratch:
        npy_dir, pairs = _as_npy_dir(folder, meta, scratch)
        labels = npy_dir.node_arrays.get("labels")
        one_column = labels is not None and labels.ndim == 2 and labels.shape[1] == 1   # an npy-dir's [N, 1] is [N]
        if one_column:
            del npy_dir.node_arrays["labels"]
        graph = read_npy_dir(npy_dir, num_nodes=meta.num_nodes, num_classes=meta.num_classes or None,
                             label_kind=None if one_column else meta.label_kind, name=meta.name, scratch_dir=where,
                             progress=progress)
    if one_column:   # a one-label multi-label matrix (or a one-target regression) stays [N, 1]
        graph.y, graph.num_classes = check_labels(labels, graph.num_nodes, meta.num_classes, meta.label_kind)
        graph.label_kind = label_kind_of(graph.y)
    graph.symmetric = not meta.directed
    graph.preprocessing = dict(meta.raw.get("preprocessing") or {})
    graph.node_names = load_original_names(folder)
    graph.link_pairs = pairs
    return graph, extra


def _provenance(folder: Path, meta: Any) -> dict[str, Any]:
    """The new ``partition.json``'s keys carried from the folder's (:data:`CARRIED_KEYS`, a typed
    folder's :data:`~partitioners.hetero.partition_input.TYPED_CARRIED_KEYS` too) and
    ``repartitioned_from``."""
    from ..format.graph_digest import SCHEME_FIELD

    keys = CARRIED_KEYS
    if meta.hetero is not None:
        from ..hetero.partition_input import TYPED_CARRIED_KEYS

        keys += TYPED_CARRIED_KEYS
    extra = {key: meta.raw[key] for key in keys if meta.raw.get(key) is not None}
    extra["repartitioned_from"] = {"folder": str(folder), "num_parts": meta.num_parts, "method": meta.method,
                                   "graph_fingerprint": meta.graph_fingerprint}
    if meta.graph_fingerprint_scheme != 1:
        extra["repartitioned_from"][SCHEME_FIELD] = meta.graph_fingerprint_scheme
    return extra


def _as_npy_dir(folder: Path, meta: Any, scratch: Any) -> tuple[Any, dict[str, np.ndarray] | None]:
    """The folder's graph as an :class:`~partitioners.outofcore.npy_dir.NpyDir` of scratch maps
    (edges and node data by original id), and its edge split's pairs (original ids) if any."""
    from ..format.reader import load_part
    from ..outofcore.npy_dir import NpyDir

    n, e = meta.num_nodes, meta.num_edges
    src, dst = scratch.array("src", np.int64, e), scratch.array("dst", np.int64, e)
    weight = scratch.array("edge-weight", np.float32, e) if meta.weighted else None
    attr = scratch.array("edge-attr", np.float32, (e, meta.edge_feature_dim)) if meta.edge_feature_dim else None
    nodes: dict[str, np.ndarray] = {}
    link = LinkPairs(meta)
    at = 0
    for p in range(meta.num_parts):
        part = load_part(folder, p, mmap=True, verify=True)
        inner = np.asarray(part.original_ids[:part.num_inner])
        link.add(part, inner)
        for field in _NODE_FIELDS:
            rows = getattr(part, field)
            if rows is None:
                continue
            if field not in nodes:
                nodes[field] = scratch.array(field, rows.dtype, (n, *rows.shape[1:]))
            scatter_rows(nodes[field], inner, rows)
        at = _copy_edges(part, inner, at, src, dst, weight, attr)
    if at != e:
        raise GraphError(f"{folder}: the parts hold {at} edges but partition.json says num_edges = {e}")
    pairs_out = link.pairs()
    frozen = {field: scratch.freeze(a) for field, a in nodes.items()}
    return NpyDir(path=folder, src=scratch.freeze(src), dst=scratch.freeze(dst),
                  edge_weight=None if weight is None else scratch.freeze(weight), node_arrays=frozen, meta={},
                  edge_attr=None if attr is None else scratch.freeze(attr)), pairs_out


def scatter_rows(out: np.ndarray, ids: np.ndarray, rows: np.ndarray) -> None:
    """``out[ids] = rows`` a block of rows at a time (``rows``: a part's memory map)."""
    step = max(1, _ROW_BYTES // max(1, rows[:1].nbytes))
    for lo in range(0, ids.size, step):
        out[ids[lo:lo + step]] = rows[lo:lo + step]


def part_edge_chunks(part: Any, inner: np.ndarray) -> Iterator[tuple[int, int, np.ndarray, np.ndarray]]:
    """Part ``part``'s stored edges a chunk at a time: ``(lo, hi, dst, src)``, the chunk's range of
    the part's CSR and its destinations and sources as original ids (``inner``: the part's inner
    rows' original ids)."""
    indptr = np.asarray(part.indptr)
    total = int(indptr[-1])
    for lo in range(0, total, _EDGE_CHUNK):
        hi = min(total, lo + _EDGE_CHUNK)
        rows = np.searchsorted(indptr, np.arange(lo, hi), side="right") - 1
        yield lo, hi, inner[rows], np.asarray(part.original_ids[np.asarray(part.indices[lo:hi])])


def _copy_edges(part: Any, inner: np.ndarray, at: int, src: np.ndarray, dst: np.ndarray,
                weight: np.ndarray | None, attr: np.ndarray | None) -> int:
    """Part ``part``'s edges as original ids into ``src``/``dst`` (and their weights and feature
    rows) from position ``at``; returns the position after them."""
    total = 0
    for lo, hi, d, s in part_edge_chunks(part, inner):
        dst[at + lo:at + hi], src[at + lo:at + hi] = d, s
        if weight is not None:
            weight[at + lo:at + hi] = part.edge_weight[lo:hi]
        if attr is not None:
            attr[at + lo:at + hi] = np.asarray(part.edge_attr[lo:hi]).reshape(hi - lo, -1)
        total = hi
    return at + total


class LinkPairs:
    """An edge split's pairs gathered part by part (new global ids), returned as original ids;
    a typed folder's relation ids of the triples with them (``link_*_rel.npy``)."""

    def __init__(self, meta: Any) -> None:
        # new global id -> original id: the pairs' (only when the folder has a split)
        self._orig_of = np.zeros(meta.num_nodes, dtype=np.int64) if meta.edge_split is not None else None
        self._pairs: dict[str, list[np.ndarray]] = {}
        self._rels: dict[str, list[np.ndarray]] = {}

    def add(self, part: Any, inner: np.ndarray) -> None:
        """Part ``part``'s pairs (``inner``: its inner rows' original ids)."""
        if self._orig_of is None:
            return
        lo, hi = part.global_id_range
        self._orig_of[lo:hi] = inner
        for kind in LINK_KINDS:
            pairs = getattr(part, f"link_{kind}")
            if pairs is not None:
                self._pairs.setdefault(kind, []).append(np.asarray(pairs, dtype=np.int64))
            rel = (part.typed or {}).get(f"link_{kind}_rel")
            if rel is not None:
                self._rels.setdefault(kind, []).append(np.asarray(rel, dtype=np.int32))

    def pairs(self) -> dict[str, np.ndarray] | None:
        """split -> int64 ``[2, E_s]`` original ids; None without a split."""
        if self._orig_of is None or not self._pairs:
            return None
        return {kind: self._orig_of[np.concatenate(chunks, axis=1)] for kind, chunks in self._pairs.items()}

    def relations(self) -> dict[str, np.ndarray] | None:
        """split -> int32 ``[E_s]``: each pair's relation id (a typed split); None without."""
        return {kind: np.concatenate(chunks) for kind, chunks in self._rels.items()} or None
