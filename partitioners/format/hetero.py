"""Typed (heterogeneous) partition folders: format 1.3's ``hetero`` section and per-part files.

A folder written from a :class:`~partitioners.hetero.HeteroGraph` is the folder of its union
graph (types laid out contiguously in *original* ids: type ``t`` holds original ids
``[offset_t, offset_t + count_t)``) with ``minor_version`` 3, a ``hetero`` object in
``partition.json``::

    "hetero": {"node_types": [{"name": "paper", "count": 500, "offset": 0}, ...],
               "relations": [["author", "writes", "paper"], ...],
               "target_type": "paper",
               "part_type_counts": [[inner rows of type 0, of type 1, ...] per part]}

and three more files in every part:

``node_type.npy``      int32 ``[I+H]``: the type id of every local row (inner, then halo)
``edge_type.npy``      int32 ``[E_p]``: the relation id of every stored edge, CSR order
``in_degree_rel.npy``  int64 ``[I, R]``: in-edges of every inner row per relation (global:
                       a part stores all in-edges of its inner rows)
``features-TYPE.npy``  ``[I_t, F_t]`` (a type with ``feature_dim`` > 0; dtype ``feature_dtype``):
                       the features of the part's inner rows of type TYPE, in local row order
``labels-TYPE.npy``    int64 ``[I_t]`` (a type with ``labelled``): their class ids

The union graph's own ``features.npy``/``labels.npy`` are absent (widths differ per type); its
masks (``train_mask.npy`` ...) are the target type's, False on the other types.

Rules (checked by the reader's per-part checks and ``inspect --verify``): ``node_type[i]`` is
the type whose range holds ``original_ids[i]``; each edge's relation has the source type of its
source row and the destination type of its row; ``in_degree_rel`` counts ``edge_type`` per row
and sums to ``in_degree``; the part's inner rows of each type number ``part_type_counts[p]``.
Homogeneous folders are unchanged (no section, no files, their own minor version).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from ..errors import PartitionFormatError

__all__ = ["HETERO_MINOR_VERSION", "NODE_TYPE", "EDGE_TYPE", "IN_DEGREE_REL", "HETERO_FILES",
           "HeteroFolderData", "parse_hetero", "hetero_layout", "hetero_part_problems",
           "hetero_part_arrays", "check_part_type_counts", "edge_positions", "add_type_rows_digest"]

HETERO_MINOR_VERSION = 3
"""The minor version of typed folders (the ``hetero`` section and the files below)."""
NODE_TYPE = "node_type.npy"
EDGE_TYPE = "edge_type.npy"
IN_DEGREE_REL = "in_degree_rel.npy"
HETERO_FILES = (NODE_TYPE, EDGE_TYPE, IN_DEGREE_REL)


@dataclass(eq=False)
class HeteroFolderData:
    """What the writer needs to add the typed files (indexed by original = union id)."""

    node_type: np.ndarray
    """int32 ``[N]``."""
    edge_type: np.ndarray
    """int32 ``[E]`` in the union graph's CSR order."""
    in_degree_rel: np.ndarray
    """int64 ``[N, R]``."""
    section: dict[str, Any]
    """``node_types``, ``relations``, ``target_type`` (``part_type_counts`` is the writer's)."""
    features: dict[str, np.ndarray]
    """type name -> its features ``[n_t, F_t]`` (local ids of the type)."""
    labels: dict[str, np.ndarray]
    """type name -> its class ids ``[n_t]``."""
    link_pairs: dict[str, np.ndarray] | None = None
    """An edge split on relations (:mod:`.typed_split`): split -> int64 ``[2, E_s]`` head and
    tail union ids."""
    link_relations: dict[str, np.ndarray] | None = None
    """split -> int32 ``[E_s]``: each triple's relation id."""


def features_file(t: str) -> str:
    return f"features-{t}.npy"


def labels_file(t: str) -> str:
    return f"labels-{t}.npy"


def type_files(sec: dict[str, Any]) -> list[str]:
    """The per-type node data files a typed folder's parts hold."""
    out = []
    for t in sec["node_types"]:
        if t.get("feature_dim"):
            out.append(features_file(t["name"]))
        if t.get("labelled"):
            out.append(labels_file(t["name"]))
    return out


def _err(meta_path: Path, msg: str) -> PartitionFormatError:
    return PartitionFormatError(msg, path=str(meta_path))


def parse_hetero(raw: dict[str, Any], minor_version: int, num_nodes: int, num_parts: int,
                 meta_path: Path) -> dict[str, Any] | None:
    """``partition.json``'s ``hetero`` section checked (None when absent)."""
    sec = raw.get("hetero")
    if sec is None:
        return None
    if minor_version < HETERO_MINOR_VERSION:
        raise _err(meta_path, f"field hetero needs minor_version >= {HETERO_MINOR_VERSION} (typed graphs came "
                              f"with format 1.{HETERO_MINOR_VERSION}), got {minor_version}")
    if not isinstance(sec, dict):
        raise _err(meta_path, f"field hetero must be an object, got {type(sec).__name__}")
    types = sec.get("node_types")
    if not isinstance(types, list) or not types:
        raise _err(meta_path, "field hetero.node_types must be a non-empty list")
    names: list[str] = []
    start = 0
    for i, t in enumerate(types):
        ok = (isinstance(t, dict) and isinstance(t.get("name"), str)
              and all(isinstance(t.get(k), int) and not isinstance(t.get(k), bool) for k in ("count", "offset")))
        fd = t.get("feature_dim", 0) if isinstance(t, dict) else None
        ok = ok and isinstance(fd, int) and not isinstance(fd, bool) and fd >= 0
        ok = ok and (not fd or t.get("feature_dtype") in ("float32", "float16"))
        ok = ok and isinstance(t.get("labelled", False), bool)
        if not ok or t["count"] < 1 or t["offset"] != start or t["name"] in names:
            raise _err(meta_path, f"field hetero.node_types[{i}] = {t!r}: expected {{name, count >= 1, "
                                  f"offset = {start}}} with a new name (types are contiguous in original ids)")
        names.append(t["name"])
        start += t["count"]
    if start != num_nodes:
        raise _err(meta_path, f"field hetero.node_types: the types hold {start} nodes but num_nodes is {num_nodes}")
    rels = sec.get("relations")
    if not isinstance(rels, list) or not rels:
        raise _err(meta_path, "field hetero.relations must be a non-empty list of [src_type, name, dst_type]")
    for i, r in enumerate(rels):
        if (not isinstance(r, list) or len(r) != 3 or not all(isinstance(x, str) for x in r)
                or r[0] not in names or r[2] not in names):
            raise _err(meta_path, f"field hetero.relations[{i}] = {r!r}: expected [src_type, name, dst_type] "
                                  f"with types among {names}")
    target = sec.get("target_type")
    if target is not None and target not in names:
        raise _err(meta_path, f"field hetero.target_type = {target!r} is not one of the types {names}")
    counts = sec.get("part_type_counts")
    if (not isinstance(counts, list) or len(counts) != num_parts
            or not all(isinstance(row, list) and len(row) == len(names)
                       and all(isinstance(c, int) and not isinstance(c, bool) and c >= 0 for c in row)
                       for row in counts)):
        raise _err(meta_path, f"field hetero.part_type_counts must list, for each of the {num_parts} parts, "
                              f"{len(names)} non-negative counts (inner rows per type)")
    for i, name in enumerate(names):
        total = sum(row[i] for row in counts)
        if total != types[i]["count"]:
            raise _err(meta_path, f"field hetero.part_type_counts: the parts own {total} nodes of type "
                                  f"{name!r} but it has {types[i]['count']}")
    return sec


def check_part_type_counts(sec: dict[str, Any], num_inner: list[int], meta_path: Path) -> None:
    """Each part's type counts sum to its ``num_inner``."""
    for p, (row, ni) in enumerate(zip(sec["part_type_counts"], num_inner)):
        if sum(row) != ni:
            raise _err(meta_path, f"field hetero.part_type_counts[{p}] sums to {sum(row)} but part {p} "
                                  f"has num_inner = {ni}")


def hetero_layout(sec: dict[str, Any], part_id: int, ni: int, nl: int,
                  ne: int) -> dict[str, tuple[str, tuple[int, ...]]]:
    """dtype and shape of each typed file of a part."""
    out: dict[str, tuple[str, tuple[int, ...]]] = {
        NODE_TYPE: ("int32", (nl,)), EDGE_TYPE: ("int32", (ne,)),
        IN_DEGREE_REL: ("int64", (ni, len(sec["relations"])))}
    for i, t in enumerate(sec["node_types"]):
        count = sec["part_type_counts"][part_id][i]
        if t.get("feature_dim"):
            out[features_file(t["name"])] = (t["feature_dtype"], (count, t["feature_dim"]))
        if t.get("labelled"):
            out[labels_file(t["name"])] = ("int64", (count,))
    return out


def hetero_part_problems(sec: dict[str, Any], part_id: int, a: dict[str, np.ndarray],
                         ni: int) -> list[tuple[str, str]]:
    """The typed files of one loaded part against its ids, CSR and degrees (module docstring)."""
    offsets = np.array([t["offset"] for t in sec["node_types"]] + [0], dtype=np.int64)
    offsets[-1] = offsets[-2] + sec["node_types"][-1]["count"]
    num_types, rels = len(sec["node_types"]), sec["relations"]
    tid = {t["name"]: i for i, t in enumerate(sec["node_types"])}
    node_type = np.asarray(a[NODE_TYPE])
    want = (np.searchsorted(offsets, np.asarray(a["original_ids.npy"]), side="right") - 1).astype(np.int32)
    bad = np.flatnonzero(node_type != want)
    if bad.size:
        i = int(bad[0])
        return [(NODE_TYPE, f"row {i} has type {int(node_type[i])} but its original id "
                            f"{int(a['original_ids.npy'][i])} lies in the range of type {int(want[i])} "
                            f"({sec['node_types'][int(want[i])]['name']!r}); {bad.size} rows differ")]
    counts = np.bincount(node_type[:ni], minlength=num_types)
    if counts.tolist() != list(sec["part_type_counts"][part_id]):
        return [(NODE_TYPE, f"inner rows per type {counts.tolist()} differ from hetero.part_type_counts"
                            f"[{part_id}] = {sec['part_type_counts'][part_id]}")]
    edge_type = np.asarray(a[EDGE_TYPE]).astype(np.int64)
    if edge_type.size and (int(edge_type.min()) < 0 or int(edge_type.max()) >= len(rels)):
        return [(EDGE_TYPE, f"relation ids must be in [0, {len(rels)}), got {int(edge_type.min())} .. "
                            f"{int(edge_type.max())}")]
    src_t = np.array([tid[r[0]] for r in rels], dtype=np.int32)
    dst_t = np.array([tid[r[2]] for r in rels], dtype=np.int32)
    indptr = np.asarray(a["indptr.npy"])
    row = np.repeat(np.arange(ni, dtype=np.int64), np.diff(indptr))
    src = np.asarray(a["indices.npy"]).astype(np.int64)
    bad = np.flatnonzero((src_t[edge_type] != node_type[src]) | (dst_t[edge_type] != node_type[row]))
    if bad.size:
        e = int(bad[0])
        r = rels[int(edge_type[e])]
        return [(EDGE_TYPE, f"edge {e} has relation {int(edge_type[e])} {r} but joins a "
                            f"{sec['node_types'][int(node_type[src[e]])]['name']!r} row to a "
                            f"{sec['node_types'][int(node_type[row[e]])]['name']!r} row; {bad.size} edges differ")]
    k = sec.get("num_classes") or 0
    for t in sec["node_types"]:
        if t.get("labelled"):
            y = np.asarray(a[labels_file(t["name"])])
            if y.size and (int(y.min()) < 0 or (k and int(y.max()) >= k)):
                return [(labels_file(t["name"]), f"class ids must be in [0, {k}), got {int(y.min())} .. {int(y.max())}")]
        if t.get("feature_dim"):
            x = np.asarray(a[features_file(t["name"])])
            if x.size and not np.isfinite(x).all():
                return [(features_file(t["name"]), "features must be finite (a NaN or inf)")]
    deg = np.asarray(a[IN_DEGREE_REL])
    if ni and int(deg.min()) < 0:
        return [(IN_DEGREE_REL, "must be non-negative")]
    if not np.array_equal(deg.sum(axis=1), np.asarray(a["in_degree.npy"])[:ni]):
        return [(IN_DEGREE_REL, "rows must sum to in_degree of the inner rows")]
    stored = np.bincount(row * len(rels) + edge_type, minlength=ni * len(rels)).reshape(ni, len(rels))
    bad_rows = np.flatnonzero((stored != deg).any(axis=1))
    if bad_rows.size:
        i = int(bad_rows[0])
        return [(IN_DEGREE_REL, f"row {i} counts {deg[i].tolist()} in-edges per relation but edge_type.npy "
                                f"has {stored[i].tolist()}; {bad_rows.size} rows differ "
                                f"(edge_type.npy or in_degree_rel.npy is wrong)")]
    return []


def edge_positions(indptr: np.ndarray, rows: np.ndarray) -> np.ndarray:
    """int64: the positions in a CSR (``indptr``) of the in-edges of ``rows``, row by row."""
    rows = np.asarray(rows, dtype=np.int64)
    starts = np.asarray(indptr[rows], dtype=np.int64)
    lens = np.asarray(indptr[rows + 1], dtype=np.int64) - starts
    first = np.zeros(lens.size, dtype=np.int64)
    np.cumsum(lens[:-1], out=first[1:])
    return np.repeat(starts - first, lens) + np.arange(int(lens.sum()), dtype=np.int64)


def add_type_rows_digest(digest: Any, sec: dict[str, Any], inner_ids: np.ndarray, inner_type: np.ndarray,
                         arrays: dict[str, np.ndarray]) -> None:
    """Add a part's per-type node data (``features-TYPE.npy``, ``labels-TYPE.npy`` in ``arrays``)
    to ``digest`` (a :class:`~.graph_digest.GraphDigest`), each row by its original id:
    ``inner_ids``/``inner_type`` are the original id and type id of the part's inner rows."""
    for i, t in enumerate(sec["node_types"]):
        names = [f for f in (features_file(t["name"]), labels_file(t["name"])) if f in arrays]
        ids = np.asarray(inner_ids)[np.asarray(inner_type) == i] if names else None
        for name in names:
            digest.add_rows(name, ids, np.asarray(arrays[name]), per_type=True)


def hetero_part_arrays(data: HeteroFolderData, indptr: np.ndarray, inner: np.ndarray,
                       halo: np.ndarray) -> dict[str, np.ndarray]:
    """The typed files of a part whose inner rows are the original ids ``inner`` (local order)
    and halo rows ``halo``; ``indptr`` is the union graph's."""
    rows = np.concatenate([inner, halo]).astype(np.int64)
    idx = edge_positions(indptr, inner)
    out = {NODE_TYPE: data.node_type[rows].astype(np.int32),
           EDGE_TYPE: data.edge_type[idx].astype(np.int32),
           IN_DEGREE_REL: np.ascontiguousarray(data.in_degree_rel[inner].astype(np.int64))}
    inner_type = out[NODE_TYPE][:inner.size]
    for i, t in enumerate(data.section["node_types"]):
        local = inner[inner_type == i] - int(t["offset"])
        if t["name"] in data.features:
            out[features_file(t["name"])] = np.ascontiguousarray(data.features[t["name"]][local])
        if t["name"] in data.labels:
            out[labels_file(t["name"])] = data.labels[t["name"]][local].astype(np.int64)
    return out
