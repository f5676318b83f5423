"""Typed view of ``partition.json`` (format v1) and its validation.

:func:`parse_meta` turns the JSON object into a :class:`PartitionMeta` and checks every field a
reader relies on (types, counts, contiguous id ranges, file lists), raising
:class:`~partitioners.errors.PartitionFormatError` that names ``partition.json`` and the field.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import Any

import numpy as np

from ..errors import PartitionFormatError
from .family import FAMILY_FILE
from .graph_digest import SCHEME_1_FIELD, SCHEME_FIELD, TYPED_SCHEME, GraphPrint
from .hetero import HETERO_FILES, HETERO_MINOR_VERSION, check_part_type_counts, parse_hetero, type_files
from .typed_split import TYPED_SPLIT_MINOR_VERSION, parse_typed_split, typed_split_files
from .layout import (EDGE_ATTR, EDGE_WEIGHT, FEATURES, FORMAT_MINOR_VERSION, FORMAT_NAME, FORMAT_VERSION,
                     LABEL_KINDS, LABELS, LINK_FILES,
                     MASKS, META_FILE, NODE_MAP_FILE, OPTIONAL_PART_FILES, ORIGINAL_NAMES_FILE,
                     REQUIRED_PART_FILES, WEIGHTED_DEGREE, part_dir_name)

__all__ = ["FileEntry", "PartMeta", "PartitionMeta", "read_meta_json", "parse_meta", "MAX_DEPTH"]

MAX_DEPTH = 64
"""Deepest nesting of lists and objects a ``partition.json`` may have (v1 documents nest 6)."""

_TOO_DEEP = (f"not a valid {META_FILE}: nesting too deep (lists and objects more than "
             f"{MAX_DEPTH} levels deep; a format v1 document nests 6)")

READ_MINOR_VERSION = max(FORMAT_MINOR_VERSION, HETERO_MINOR_VERSION, TYPED_SPLIT_MINOR_VERSION)
"""The newest minor version this reader reads: homogeneous folders are written with
``FORMAT_MINOR_VERSION``, typed ones (:mod:`.hetero`) with ``HETERO_MINOR_VERSION``, or
``TYPED_SPLIT_MINOR_VERSION`` with an edge split (:mod:`.typed_split`)."""

INT64_MAX = 2**63 - 1
"""Counts, sizes and shapes are stored in int64 arrays: larger values cannot be real."""


@dataclass(kw_only=True, slots=True, frozen=True)
class FileEntry:
    """One array file as ``partition.json`` records it."""

    path: str
    """Path relative to the partition folder, POSIX separators (``part-00000/indptr.npy``)."""
    size: int
    """File size in bytes."""
    sha256: str
    """Hex sha256 of the whole file."""
    dtype: str
    """numpy dtype name of the array (``int64``, ``float32``, ``bool``, ...)."""
    shape: tuple[int, ...]
    """Shape of the array."""

    def to_json(self) -> dict[str, Any]:
        return {"path": self.path, "size": self.size, "sha256": self.sha256, "dtype": self.dtype,
                "shape": list(self.shape)}


@dataclass(kw_only=True, slots=True)
class PartMeta:
    """What ``partition.json`` says about one part."""

    part_id: int
    num_inner: int
    """Rows the part owns (local ids ``[0, num_inner)``)."""
    num_halo: int
    """Rows it holds from other parts (local ids ``[num_inner, num_inner + num_halo)``)."""
    num_local_edges: int
    """Edges stored in the part: all in-edges of its inner nodes."""
    global_id_range: tuple[int, int]
    """``[start, end)`` of new global ids the part owns (``end - start == num_inner``)."""
    num_train: int
    """Training nodes among the inner rows (0 without a train mask)."""
    files: dict[str, FileEntry]
    """File name (``indptr.npy``) -> entry."""

    @property
    def num_local(self) -> int:
        """``num_inner + num_halo``: rows of the part's local feature matrix."""
        return self.num_inner + self.num_halo


@dataclass(kw_only=True, slots=True)
class PartitionMeta:
    """Typed ``partition.json``; :attr:`raw` is the JSON object itself."""

    path: str
    """The partition folder."""
    version: int
    num_parts: int
    num_nodes: int
    num_edges: int
    feature_dim: int
    """0 without features."""
    feature_dtype: str | None
    """``float32``/``float16``, or None without features."""
    num_classes: int
    label_kind: str | None
    """``"class"``, ``"multilabel"``, ``"regression"`` (``num_classes`` is then the target
    width D) or None (unlabelled)."""
    weighted: bool
    directed: bool
    method: str
    method_params: dict[str, Any]
    seed: int | None
    name: str
    quality: dict[str, Any] | None
    files: dict[str, FileEntry]
    """Top-level files (``node_map.npy``, and ``original_names.npy`` for a relabelled input)."""
    parts: list[PartMeta]
    raw: dict[str, Any] = field(repr=False)
    split: dict[str, Any] | None = None
    """How the masks were made when the partitioner made them (``{"kind": "random", "fractions":
    [train, val, test], "seed": S, "counts": {...}}``, ``{"kind": "planetoid", ...}``); None
    when the input's own masks were used, or there are none (and in folders written before)."""
    minor_version: int = 0
    """``partition.json``'s ``minor_version`` (0 when absent: folders written before it existed)."""
    edge_feature_dim: int = 0
    """``D`` of each part's ``edge_attr.npy`` (float32 ``[E_p, D]``); 0 without edge features."""
    edge_split: dict[str, Any] | None = None
    """The edge split for link prediction (minor version 2): ``{"fractions": [train, val, test],
    "seed": S, "counts": {"train": n, "val": n, "test": n}, "removed_edges": n}``, whose pairs
    are each part's ``link_*.npy``; None without one."""
    hetero: dict[str, Any] | None = None
    """The ``hetero`` section of a typed folder (minor version 3, :mod:`.hetero`): node types,
    relations, target type, inner rows per part and type; None for a homogeneous folder."""
    graph_fingerprint: str | None = None
    """The digest of the graph by original node ids, the same for every partition of the graph
    (:mod:`.graph_digest`); None in folders written before it existed."""
    graph_fingerprint_scheme: int = 1
    """How ``graph_fingerprint`` was computed: 2 (``graph_fingerprint_scheme`` in partition.json)
    for a typed folder whose fingerprint covers each edge's relation and the per-type node data,
    1 otherwise (every homogeneous folder, typed folders written before scheme 2): fingerprints of
    different schemes are compared only by the scheme-1 digest a scheme-2 side records beside its own."""
    scheme_1_graph_fingerprint: str | None = None
    """A scheme-2 typed folder's digest of its graph by scheme 1 (``scheme_1_graph_fingerprint`` in
    partition.json): the ``graph_fingerprint`` a typed folder of the same graph cut before scheme 2
    recorded, which compares the two (:attr:`graph_print`); None in other folders and in typed
    folders written before it."""

    @property
    def graph_print(self) -> GraphPrint:
        """The graph fingerprint with its scheme and, when recorded, the scheme-1 digest."""
        return GraphPrint(self.graph_fingerprint, self.graph_fingerprint_scheme, self.scheme_1_graph_fingerprint)

    @property
    def masks(self) -> tuple[str, ...]:
        """Mask files every part has (``train_mask.npy``, ...), possibly none."""
        return tuple(m for m in MASKS if self.parts and m in self.parts[0].files)

    @property
    def part_weights(self) -> tuple[float, ...]:
        """Each part's fraction of the balance criteria, as recorded (``method_params``); equal
        parts (``1 / P`` each) when the folder records none."""
        from ..method_record import recorded_part_weights

        return recorded_part_weights(self.method_params, self.num_parts)

    @property
    def device_memory(self) -> tuple[int, ...] | None:
        """Each part's device memory in bytes, as recorded by ``--device-memory``; None otherwise."""
        from ..method_record import recorded_device_memory

        return recorded_device_memory(self.method_params)

    def part_starts(self) -> np.ndarray:
        """int64 ``[P + 1]``: part ``p`` owns new global ids ``[starts[p], starts[p+1])``."""
        starts = np.zeros(self.num_parts + 1, dtype=np.int64)
        starts[1:] = [pm.global_id_range[1] for pm in self.parts]
        return starts


def _err(meta_path: Path, msg: str, **kw: Any) -> PartitionFormatError:
    return PartitionFormatError(msg, path=str(meta_path), **kw)


def read_meta_json(folder: str | Path) -> tuple[Path, dict[str, Any]]:
    """Read and parse ``folder/partition.json``; check ``format`` and ``version``.

    Returns ``(meta_path, raw)``. Raises :class:`PartitionFormatError` naming the file when it is
    missing, not JSON, not a gnn-dist partition, or of another major version.
    """
    folder = Path(folder)
    meta_path = folder / META_FILE
    if not folder.is_dir():
        raise PartitionFormatError("no such partition folder", path=str(folder))
    if not meta_path.is_file() and (folder / FAMILY_FILE).is_file():
        raise _err(meta_path, f"missing {META_FILE}: {folder} is a partition family ({FAMILY_FILE}); give one "
                              f"of its members ({folder}/pP), or let gnn-dist train pick the member of its world size")
    if not meta_path.is_file():
        raise _err(meta_path, f"missing {META_FILE}: {folder} is not a partition folder, or its "
                              f"writing did not finish (partition.json is written last)")
    try:
        text = meta_path.read_text(encoding="utf-8")
    except OSError as exc:
        raise _err(meta_path, f"cannot be read ({exc.strerror or exc})") from exc
    except UnicodeDecodeError as exc:
        raise _err(meta_path, f"not valid JSON ({exc})") from exc
    try:
        raw = json.loads(text)
    except RecursionError:
        raise _err(meta_path, _TOO_DEEP) from None
    except ValueError as exc:  # JSONDecodeError, and integers of more than 4300 digits
        raise _err(meta_path, f"not valid JSON ({exc})") from exc
    if _depth_exceeds(raw, MAX_DEPTH):
        raise _err(meta_path, _TOO_DEEP)
    if not isinstance(raw, dict) or raw.get("format") != FORMAT_NAME:
        found = raw.get("format") if isinstance(raw, dict) else type(raw).__name__
        raise _err(meta_path, f"not a gnn-dist partition: format is {found!r}, expected {FORMAT_NAME!r}")
    version = raw.get("version")
    if isinstance(version, bool) or not isinstance(version, int) or version != FORMAT_VERSION:
        raise _err(meta_path, f"unknown format version {version!r}: this reader supports version "
                              f"{FORMAT_VERSION} only (re-partition the graph with this gnn-dist, or "
                              f"use the gnn-dist that wrote it)", found=version, expected=FORMAT_VERSION)
    minor = raw.get("minor_version", 0)
    if isinstance(minor, bool) or not isinstance(minor, int) or minor < 0:
        raise _err(meta_path, f"field minor_version must be a non-negative integer (absent: 0), got {minor!r}")
    if minor > READ_MINOR_VERSION:
        raise _err(meta_path, f"format version {version}.{minor} is newer than this reader's "
                              f"{FORMAT_VERSION}.{READ_MINOR_VERSION}: the folder may hold files this gnn-dist does "
                              f"not know; upgrade gnn-dist (or re-partition with this one)",
                   found=f"{version}.{minor}", expected=f"{FORMAT_VERSION}.{READ_MINOR_VERSION}")
    return meta_path, raw


def _depth_exceeds(obj: Any, limit: int) -> bool:
    """True when lists/objects nest more than ``limit`` levels in ``obj`` (without recursion)."""
    stack = [(obj, 1)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, (dict, list)):
            if depth > limit:
                return True
            stack.extend((v, depth + 1) for v in (item.values() if isinstance(item, dict) else item))
    return False


def _int(d: dict[str, Any], key: str, where: str, meta_path: Path, *, minimum: int = 0,
         maximum: int = INT64_MAX, why: str = "it must fit in int64") -> int:
    """The integer field ``d[key]`` (``where`` names its parent), in ``[minimum, maximum]``;
    ``why`` says what bounds it from above."""
    v = d.get(key)
    if key not in d:
        raise _err(meta_path, f"field {where}{key} is missing (an integer is required)")
    if isinstance(v, bool) or not isinstance(v, int):
        raise _err(meta_path, f"field {where}{key} must be an integer, got {v!r}")
    if v < minimum:
        raise _err(meta_path, f"field {where}{key} = {v} must be >= {minimum}")
    if v > maximum:
        raise _err(meta_path, f"field {where}{key} = {v} is impossible: it is larger than "
                              f"{maximum}, and {why}")
    return v


def _file_entry(name: str, d: Any, expected_path: str, where: str, meta_path: Path) -> FileEntry:
    if not isinstance(d, dict):
        raise _err(meta_path, f"field {where}files[{name!r}] must be an object, got {d!r}")
    w = f"{where}files[{name!r}]."
    path = d.get("path", expected_path)
    if not isinstance(path, str) or PurePosixPath(path) != PurePosixPath(expected_path):
        raise _err(meta_path, f"field {w}path = {path!r}: expected {expected_path!r}")
    sha = d.get("sha256")
    if not isinstance(sha, str) or len(sha) != 64:
        raise _err(meta_path, f"field {w}sha256 must be a 64-character hex string, got {sha!r}")
    dtype = d.get("dtype")
    if not isinstance(dtype, str):
        raise _err(meta_path, f"field {w}dtype must be a dtype name, got {dtype!r}")
    shape = d.get("shape")
    if (not isinstance(shape, list) or not all(isinstance(s, int) and not isinstance(s, bool)
                                               and 0 <= s <= INT64_MAX for s in shape)):
        raise _err(meta_path, f"field {w}shape must be a list of non-negative int64 integers, "
                              f"got {shape!r}")
    return FileEntry(path=expected_path, size=_int(d, "size", w, meta_path), sha256=sha, dtype=dtype,
                     shape=tuple(shape))


def _part_meta(d: Any, p: int, meta: dict[str, Any], meta_path: Path) -> PartMeta:
    where = f"parts[{p}]."
    if not isinstance(d, dict):
        raise _err(meta_path, f"field parts[{p}] must be an object, got {type(d).__name__}")
    if d.get("part_id") != p:
        raise _err(meta_path, f"field {where}part_id = {d.get('part_id')!r}: expected {p} (parts are listed in order)")
    rng = d.get("global_id_range")
    if (not isinstance(rng, list) or len(rng) != 2
            or not all(isinstance(r, int) and not isinstance(r, bool) for r in rng)):
        raise _err(meta_path, f"field {where}global_id_range must be [start, end], got {rng!r}")
    files_raw = d.get("files")
    if not isinstance(files_raw, dict):
        raise _err(meta_path, f"field {where}files must be an object, got {files_raw!r}")
    typed = [*HETERO_FILES, *type_files(meta["hetero"])] if meta["hetero"] else []
    typed += typed_split_files(meta["hetero"], meta["edge_split"])
    known = set(REQUIRED_PART_FILES) | set(OPTIONAL_PART_FILES) | set(typed)
    for name in files_raw:
        if name not in known:
            raise _err(meta_path, f"field {where}files lists unknown file {name!r}; format v1 knows "
                                  f"{sorted(known)}")
    for name in REQUIRED_PART_FILES:
        if name not in files_raw:
            raise _err(meta_path, f"field {where}files lacks required file {name!r}")
    wanted = {EDGE_WEIGHT: bool(meta["weighted"]), FEATURES: meta["feature_dim"] > 0,
              LABELS: meta["label_kind"] is not None, EDGE_ATTR: meta["edge_feature_dim"] > 0}
    wanted.update(dict.fromkeys(LINK_FILES.values(), meta["edge_split"]))
    wanted.update(dict.fromkeys(typed, True))
    for name, want in wanted.items():
        if (name in files_raw) != want:
            raise _err(meta_path, f"field {where}files {'lacks' if want else 'has'} {name!r} but "
                                  f"weighted/feature_dim/label_kind/edge_split/edge_feature_dim say it "
                                  f"{'should' if want else 'should not'}")
    if WEIGHTED_DEGREE in files_raw and not meta["weighted"]:
        raise _err(meta_path, f"field {where}files has {WEIGHTED_DEGREE!r} but the graph is not weighted")
    pdir = part_dir_name(p)
    files = {name: _file_entry(name, e, f"{pdir}/{name}", where, meta_path) for name, e in files_raw.items()}
    n, e = meta["num_nodes"], meta["num_edges"]
    ni = _int(d, "num_inner", where, meta_path, maximum=n, why=f"a part owns at most num_nodes = {n} nodes")
    nh = _int(d, "num_halo", where, meta_path, maximum=n - ni,
              why=f"halo rows are nodes of other parts: at most num_nodes - num_inner = {n} - {ni}")
    ne = _int(d, "num_local_edges", where, meta_path, maximum=e,
              why=f"a part stores at most num_edges = {e} edges")
    nt = _int(d, "num_train", where, meta_path, maximum=ni,
              why=f"training nodes are inner rows: at most num_inner = {ni}")
    return PartMeta(part_id=p, num_inner=ni, num_halo=nh, num_local_edges=ne,
                    global_id_range=(int(rng[0]), int(rng[1])), num_train=nt, files=files)


def parse_meta(folder: str | Path, meta_path: Path, raw: dict[str, Any]) -> PartitionMeta:
    """Validate the fields of a format/version-checked ``partition.json`` and type them."""
    num_parts = _int(raw, "num_parts", "", meta_path, minimum=1)
    num_nodes = _int(raw, "num_nodes", "", meta_path, minimum=1)
    num_edges = _int(raw, "num_edges", "", meta_path)
    feature_dim = _int(raw, "feature_dim", "", meta_path)
    num_classes = _int(raw, "num_classes", "", meta_path)
    feature_dtype = raw.get("feature_dtype")
    if feature_dim > 0 and feature_dtype not in ("float32", "float16"):
        raise _err(meta_path, f"field feature_dtype = {feature_dtype!r}: expected 'float32' or 'float16'")
    if feature_dim == 0 and feature_dtype is not None:
        raise _err(meta_path, f"field feature_dtype = {feature_dtype!r} but feature_dim is 0 (expected null)")
    label_kind = raw.get("label_kind")
    if label_kind not in LABEL_KINDS:
        raise _err(meta_path, f"field label_kind = {label_kind!r}: expected one of {list(LABEL_KINDS)}")
    if label_kind == "regression" and num_classes < 1:
        raise _err(meta_path, f"field num_classes = {num_classes}: regression targets need their width D >= 1 "
                              f"(label_kind is 'regression')")
    for key in ("weighted", "directed"):
        if not isinstance(raw.get(key), bool):
            raise _err(meta_path, f"field {key} must be true or false, got {raw.get(key)!r}")
    method, method_params, seed, quality = _method_fields(raw, meta_path)
    parts_raw = raw.get("parts")
    if not isinstance(parts_raw, list) or len(parts_raw) != num_parts:
        n = len(parts_raw) if isinstance(parts_raw, list) else parts_raw
        raise _err(meta_path, f"field parts must list num_parts = {num_parts} parts, got {n!r}")
    minor_version = raw.get("minor_version", 0)   # checked by read_meta_json
    edge_feature_dim = _int(raw, "edge_feature_dim", "", meta_path) if "edge_feature_dim" in raw else 0
    if edge_feature_dim and minor_version < 1:
        raise _err(meta_path, f"field edge_feature_dim = {edge_feature_dim} needs minor_version >= 1 "
                              f"(edge features came with format 1.1), got {minor_version}")
    edge_split = _edge_split(raw, minor_version, meta_path)
    hetero = parse_hetero(raw, minor_version, num_nodes, num_parts, meta_path)
    if edge_split is not None:
        parse_typed_split(edge_split, hetero, minor_version, meta_path)
    checked = {"weighted": raw["weighted"], "feature_dim": feature_dim, "label_kind": label_kind,
               "num_nodes": num_nodes, "num_edges": num_edges, "edge_feature_dim": edge_feature_dim,
               "edge_split": edge_split is not None, "hetero": hetero}
    parts = [_part_meta(d, p, checked, meta_path) for p, d in enumerate(parts_raw)]
    if hetero is not None:
        check_part_type_counts(hetero, [pm.num_inner for pm in parts], meta_path)
    if edge_split is not None:
        _check_link_counts(edge_split, parts, meta_path)
    _check_parts_cover(parts, num_nodes, num_edges, meta_path)
    files = _folder_files(raw, meta_path)
    split = raw.get("split")
    if split is not None and (not isinstance(split, dict) or not isinstance(split.get("kind"), str)):
        raise _err(meta_path, f"field split must be an object with a string 'kind', or null, got {split!r}")
    graph_fingerprint = _graph_fingerprint(raw, meta_path)
    scheme = _fingerprint_scheme(raw, hetero, meta_path)
    scheme_1 = _scheme_1_fingerprint(raw, scheme, meta_path)
    name = raw.get("name") or ""
    if not isinstance(name, str):
        raise _err(meta_path, f"field name must be a string, got {type(name).__name__} {name!r}")
    return PartitionMeta(path=str(folder), version=raw["version"], num_parts=num_parts,
                         num_nodes=num_nodes, num_edges=num_edges, feature_dim=feature_dim,
                         feature_dtype=feature_dtype, num_classes=num_classes, label_kind=label_kind,
                         weighted=raw["weighted"], directed=raw["directed"], method=method,
                         method_params=method_params, seed=seed, name=str(name), quality=quality,
                         files=files, parts=parts, raw=raw, split=split, minor_version=minor_version,
                         edge_feature_dim=edge_feature_dim, edge_split=edge_split, hetero=hetero,
                         graph_fingerprint=graph_fingerprint, graph_fingerprint_scheme=scheme,
                         scheme_1_graph_fingerprint=scheme_1)


def _graph_fingerprint(raw: dict[str, Any], meta_path: Path, key: str = "graph_fingerprint") -> str | None:
    """``graph_fingerprint`` (or ``key``) checked: 64 lowercase hex digits, or absent/null (older folders)."""
    value = raw.get(key)
    if value is None:
        return None
    if not isinstance(value, str) or len(value) != 64 or value.strip("0123456789abcdef"):
        raise _err(meta_path, f"field {key} = {value!r}: expected 64 lowercase hex digits (a sha256) "
                              f"or null; re-partition the graph, or delete the field to read the folder without it")
    return value


def _scheme_1_fingerprint(raw: dict[str, Any], scheme: int, meta_path: Path) -> str | None:
    """``scheme_1_graph_fingerprint`` checked: a digest in a scheme-2 folder (which has a
    ``graph_fingerprint``), or absent/null."""
    value = _graph_fingerprint(raw, meta_path, SCHEME_1_FIELD)
    if value is not None and (scheme == 1 or raw.get("graph_fingerprint") is None):
        raise _err(meta_path, f"field {SCHEME_1_FIELD} is only recorded beside a graph_fingerprint of scheme "
                              f"{TYPED_SCHEME} ({SCHEME_FIELD}); re-partition the graph, or delete the field")
    return value


def _fingerprint_scheme(raw: dict[str, Any], hetero: dict[str, Any] | None, meta_path: Path) -> int:
    """``graph_fingerprint_scheme`` checked: absent (scheme 1), or 2 in a typed folder."""
    if SCHEME_FIELD not in raw:
        return 1
    value = raw[SCHEME_FIELD]
    if hetero is None or type(value) is not int or value != TYPED_SCHEME:
        raise _err(meta_path, f"field {SCHEME_FIELD} = {value!r}: expected {TYPED_SCHEME} in a typed folder (a hetero "
                              f"section) and absent otherwise; re-partition the graph")
    return value


def _method_fields(raw: dict[str, Any], meta_path: Path) -> tuple[str, dict[str, Any], int | None,
                                                                   dict[str, Any] | None]:
    """How the folder was partitioned and how well, checked: ``(method, method_params, seed, quality)``."""
    method = raw.get("method")
    if not isinstance(method, str):
        raise _err(meta_path, f"field method must be a string, got {method!r}")
    method_params = raw.get("method_params") or {}
    if not isinstance(method_params, dict):
        raise _err(meta_path, f"field method_params must be an object, got {method_params!r}")
    _check_part_weights(method_params.get("part_weights"), raw.get("num_parts"), meta_path)
    _check_device_memory(method_params.get("device_memory"), raw.get("num_parts"), meta_path)
    seed = raw.get("seed")
    if seed is not None and (isinstance(seed, bool) or not isinstance(seed, int)
                             or not 0 <= seed <= INT64_MAX):
        raise _err(meta_path, f"field seed must be a non-negative integer or null, got {seed!r}")
    quality = raw.get("quality")
    if quality is not None and not isinstance(quality, dict):
        raise _err(meta_path, f"field quality must be an object or null, got {type(quality).__name__}")
    return method, method_params, seed, quality


def _check_part_weights(weights: Any, num_parts: Any, meta_path: Path) -> None:
    """``method_params.part_weights``, when recorded: one positive fraction per part."""
    if weights is None:
        return
    if (not isinstance(weights, list) or len(weights) != num_parts
            or not all(isinstance(w, (int, float)) and not isinstance(w, bool) and w > 0 for w in weights)):
        raise _err(meta_path, f"field method_params.part_weights must list num_parts = {num_parts} "
                              f"positive numbers, got {weights!r}")


def _check_device_memory(sizes: Any, num_parts: Any, meta_path: Path) -> None:
    """``method_params.device_memory``, when recorded: one positive byte count per part."""
    if sizes is None:
        return
    if (not isinstance(sizes, list) or len(sizes) != num_parts
            or not all(isinstance(b, int) and not isinstance(b, bool) and 0 < b <= INT64_MAX for b in sizes)):
        raise _err(meta_path, f"field method_params.device_memory must list num_parts = {num_parts} "
                              f"positive byte counts, got {sizes!r}")


def _check_parts_cover(parts: list[PartMeta], num_nodes: int, num_edges: int, meta_path: Path) -> None:
    """The parts together: contiguous id ranges owning every node, every edge stored once,
    ``num_train`` 0 without a train mask, and the same masks in every part."""
    start = 0
    for pm in parts:
        lo, hi = pm.global_id_range
        if lo != start or hi - lo != pm.num_inner:
            raise _err(meta_path, f"field parts[{pm.part_id}].global_id_range = [{lo}, {hi}]: expected "
                                  f"[{start}, {start + pm.num_inner}] (ranges are contiguous and hold num_inner ids)")
        start = hi
    if start != num_nodes:
        raise _err(meta_path, f"the parts own {start} nodes but num_nodes is {num_nodes}")
    total_edges = sum(pm.num_local_edges for pm in parts)
    if total_edges != num_edges:
        raise _err(meta_path, f"the parts store {total_edges} edges but num_edges is {num_edges}")
    for pm in parts:
        if MASKS[0] not in pm.files and pm.num_train != 0:
            raise _err(meta_path, f"field parts[{pm.part_id}].num_train = {pm.num_train} but the part "
                                  f"has no train mask (expected 0)")
    mask_sets = {tuple(m for m in MASKS if m in pm.files) for pm in parts}
    if len(mask_sets) > 1:
        raise _err(meta_path, f"parts disagree on which masks they have: {sorted(mask_sets)}")


def _folder_files(raw: dict[str, Any], meta_path: Path) -> dict[str, FileEntry]:
    """The folder-level ``files`` record checked: the node map, and the original names if any."""
    files_raw = raw.get("files")
    if not isinstance(files_raw, dict) or NODE_MAP_FILE not in files_raw:
        raise _err(meta_path, f"field files must list {NODE_MAP_FILE!r}")
    unknown = sorted(set(files_raw) - {NODE_MAP_FILE, ORIGINAL_NAMES_FILE})
    if unknown:
        raise _err(meta_path, f"field files lists unknown files {unknown}")
    return {name: _file_entry(name, entry, name, "", meta_path) for name, entry in files_raw.items()}


def _edge_split(raw: dict[str, Any], minor_version: int, meta_path: Path) -> dict[str, Any] | None:
    """``partition.json``'s ``edge_split`` record checked (None when absent)."""
    if "edge_split" not in raw or raw["edge_split"] is None:
        return None
    record = raw["edge_split"]
    if minor_version < 2:
        raise _err(meta_path, f"field edge_split needs minor_version >= 2 (edge splits came with "
                              f"format 1.2), got {minor_version}")
    if not isinstance(record, dict):
        raise _err(meta_path, f"field edge_split must be an object, got {type(record).__name__}")
    fractions = record.get("fractions")
    if (not isinstance(fractions, list) or len(fractions) != 3
            or not all(isinstance(f, (int, float)) and not isinstance(f, bool) and 0 < f <= 1 for f in fractions)):
        raise _err(meta_path, f"field edge_split.fractions must be 3 numbers in (0, 1] (train, val, test), "
                              f"got {fractions!r}")
    _int(record, "seed", "edge_split.", meta_path)
    _int(record, "removed_edges", "edge_split.", meta_path)
    counts = record.get("counts")
    if not isinstance(counts, dict) or sorted(counts) != sorted(LINK_FILES):
        raise _err(meta_path, f"field edge_split.counts must be an object with keys {sorted(LINK_FILES)}, "
                              f"got {counts!r}")
    for kind in LINK_FILES:
        _int(counts, kind, "edge_split.counts.", meta_path)
    return record


def _check_link_counts(edge_split: dict[str, Any], parts: list[PartMeta], meta_path: Path) -> None:
    """The parts' ``link_*.npy`` hold ``edge_split.counts`` pairs in all (their shapes' sums)."""
    for kind, name in LINK_FILES.items():
        shapes = [pm.files[name].shape for pm in parts]
        total = sum(s[1] for s in shapes if len(s) == 2)
        if total != edge_split["counts"][kind]:
            raise _err(meta_path, f"field edge_split.counts.{kind} = {edge_split['counts'][kind]} but the "
                                  f"parts' {name} hold {total} pairs in all")
