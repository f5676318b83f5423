"""Read a typed npy-dir: ``nodes.json``, one folder per node type and one per relation, of ``.npy`` files.

::

    nodes.json              {"num_nodes": {"paper": 736389, "author": 1134649, ...},
                             "target_type": "paper", "num_classes": 349}   (the last two optional)
    TYPE/features.npy       float [n_t, F_t]                  (optional, per type)
    TYPE/labels.npy         int class ids [n_t]               (optional)
    TYPE/train_mask.npy     bool [n_t], or int node ids; also val_mask.npy, test_mask.npy (optional)
    SRC__REL__DST/src.npy   int local ids of type SRC [E_r]   (one folder per relation)
    SRC__REL__DST/dst.npy   int local ids of type DST [E_r]

Types keep the order of ``num_nodes``, relations the sorted order of their folders. A folder
named after a type of ``nodes.json`` is that type's; any other folder must be ``SRC__REL__DST``.
Every ``.npy`` file is opened memory-mapped (:func:`partitioners.io.node_data.open_node_array`:
never unpickled), and each count in ``nodes.json`` is checked against the files: a type's
node files have exactly its count of rows, and a type without node files may not have more
nodes than its relations use (its largest id + 1), so a count cannot ask for more than the
files hold. Each problem is one :class:`~partitioners.errors.GraphError` line naming the file.

:func:`read_typed_npy_dir` builds a :class:`HeteroGraph` (its arrays read into memory when the
graph is checked; the in-memory union graph of :meth:`HeteroGraph.to_union`);
:func:`partitioners.hetero.outofcore.read_typed_npy_dir_on_disk` builds the union graph in
scratch memory maps instead, from the same :func:`open_typed_npy_dir`. Torch-free.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from ..errors import GraphError
from ..io.node_data import mask_from_array, open_node_array
from .graph import HeteroGraph, Relation, _check_name

__all__ = ["NODES_JSON", "TypedNpyDir", "is_typed_npy_dir", "open_typed_npy_dir", "read_typed_npy_dir"]

NODES_JSON = "nodes.json"
_MAX_JSON_BYTES = 1 << 20
_MASKS = {"train": "train_mask.npy", "val": "val_mask.npy", "test": "test_mask.npy"}
_KEYS = ("num_nodes", "target_type", "num_classes")


def is_typed_npy_dir(path: Path) -> bool:
    """A folder with ``nodes.json``."""
    return path.is_dir() and (path / NODES_JSON).is_file()


def _nodes_json(root: Path) -> tuple[dict[str, int], str | None, int | None]:
    """``nodes.json`` checked: the counts, the target type, the number of classes."""
    path = root / NODES_JSON
    if path.stat().st_size > _MAX_JSON_BYTES:
        raise GraphError(f"{path}: larger than {_MAX_JSON_BYTES >> 20} MiB; it holds the type counts only")
    try:
        doc = json.loads(path.read_text(encoding="utf-8"))
    except (ValueError, UnicodeDecodeError) as exc:
        raise GraphError(f"{path}: not valid JSON ({exc})") from None
    if not isinstance(doc, dict) or not isinstance(doc.get("num_nodes"), dict) or not doc["num_nodes"]:
        raise GraphError(f'{path}: expected {{"num_nodes": {{"TYPE": count, ...}}, "target_type": TYPE, '
                         f'"num_classes": C}} (target_type and num_classes optional)')
    unknown = sorted(set(doc) - set(_KEYS))
    if unknown:
        raise GraphError(f"{path}: unknown key {unknown[0]!r}; the keys are {', '.join(_KEYS)}")
    counts = {}
    for t, n in doc["num_nodes"].items():
        try:
            _check_name("node type", t)
        except GraphError as exc:
            raise GraphError(f"{path}: {exc}") from None
        if isinstance(n, bool) or not isinstance(n, int) or n < 1:
            raise GraphError(f"{path}: num_nodes[{t!r}] = {n!r}; a type's count is a positive integer")
        counts[t] = n
    target, classes = doc.get("target_type"), doc.get("num_classes")
    if target is not None and target not in counts:
        raise GraphError(f"{path}: target_type {target!r} is not one of the types {list(counts)}")
    if classes is not None and (isinstance(classes, bool) or not isinstance(classes, int) or classes < 1):
        raise GraphError(f"{path}: num_classes = {classes!r}; expected a positive integer")
    return counts, target, classes


def _relation(folder: Path, counts: dict[str, int]) -> Relation:
    parts = folder.name.split("__")
    if len(parts) != 3:
        raise GraphError(f"{folder}: neither a node type of {NODES_JSON} ({list(counts)}) nor a relation folder "
                         f"SRC__REL__DST")
    for role, t in (("source", parts[0]), ("destination", parts[2])):
        if t not in counts:
            raise GraphError(f"{folder}: relation {tuple(parts)!r} names {role} type {t!r}, which {NODES_JSON} "
                             f"does not list ({list(counts)})")
    return parts[0], parts[1], parts[2]


def _edges(folder: Path, rel: Relation, counts: dict[str, int]) -> tuple[np.ndarray, np.ndarray]:
    ids = []
    for end, t in (("src", rel[0]), ("dst", rel[2])):
        path = folder / f"{end}.npy"
        a = open_node_array(str(path), path)
        if a.ndim != 1 or a.dtype.kind not in "iu":
            raise GraphError(f"{path}: expected int ids [E] of type {t!r}, got {a.dtype}{list(a.shape)}")
        if a.size and (int(a.min()) < 0 or int(a.max()) >= counts[t]):
            bad = int(a.min()) if int(a.min()) < 0 else int(a.max())
            raise GraphError(f"{path}: id {bad} is out of range [0, {counts[t]}) of type {t!r} ({NODES_JSON})")
        ids.append(a)
    if ids[0].size != ids[1].size:
        raise GraphError(f"{folder}: src.npy has {ids[0].size} ids but dst.npy has {ids[1].size}")
    return ids[0], ids[1]


def _node_data(folder: Path, t: str, n: int) -> dict[str, Any]:
    """The type's node files (memory-mapped), their rows checked against its count ``n``."""
    data: dict[str, Any] = {}
    for key, file in (("features", "features.npy"), ("labels", "labels.npy"), *_MASKS.items()):
        path = folder / file
        if not path.is_file():
            continue
        a = open_node_array(str(path), path)
        if key in _MASKS:
            data[key] = mask_from_array(str(path), a, n)
            continue
        rows = int(a.shape[0]) if a.ndim else 0
        if rows != n or a.ndim != (2 if key == "features" else 1):
            shape = f"[{n}, F]" if key == "features" else f"[{n}]"
            raise GraphError(f"{path}: shape {list(a.shape)} but node type {t!r} has {n} nodes ({NODES_JSON}); "
                             f"expected {shape}")
        data[key] = a
    return data


def _check_sizes(root: Path, counts: dict[str, int], edges: dict[Relation, tuple[np.ndarray, np.ndarray]],
                 with_files: set[str]) -> None:
    """A type without node files has no more nodes than its relations use."""
    for t, n in counts.items():
        if t in with_files:
            continue
        used = [int(ids.max()) + 1 for rel, pair in edges.items() for ids, end in zip(pair, (rel[0], rel[2]))
                if end == t and ids.size]
        if max(used, default=0) < n:
            raise GraphError(f"{root / NODES_JSON}: num_nodes[{t!r}] = {n} but type {t!r} has no node files and its "
                             f"relations use ids up to {max(used, default=0) - 1}; give its count as "
                             f"{max(used, default=0)} (or its node files)")


@dataclass(eq=False)
class TypedNpyDir:
    """The opened folder, every array a checked memory map (nothing read whole): the in-memory
    reader (:func:`read_typed_npy_dir`) and the out-of-core one (:mod:`.outofcore`) share it."""

    root: Path
    counts: dict[str, int]
    target: str | None
    classes: int | None
    edges: dict[Relation, tuple[np.ndarray, np.ndarray]]
    data: dict[str, dict[str, Any]]
    """type -> its node files (``features``, ``labels``, ``train``/``val``/``test`` masks)."""

    @property
    def masks(self) -> dict[str, dict[str, np.ndarray]]:
        return {t: {k: d[k] for k in _MASKS if k in d} for t, d in self.data.items() if any(k in d for k in _MASKS)}

    def field(self, key: str) -> dict[str, Any]:
        """type -> its array ``key`` (``features``, ``labels``), for the types that have one."""
        return {t: d[key] for t, d in self.data.items() if key in d}


def open_typed_npy_dir(root: str | Path) -> TypedNpyDir:
    """The typed npy-dir ``root`` opened and checked (module docstring), its arrays memory maps."""
    root = Path(root)
    if not is_typed_npy_dir(root):
        raise GraphError(f"{root}: no {NODES_JSON}: a typed npy-dir has nodes.json, TYPE/ and SRC__REL__DST/ folders")
    counts, target, classes = _nodes_json(root)
    edges: dict[Relation, tuple[np.ndarray, np.ndarray]] = {}
    for folder in sorted(p for p in root.iterdir() if p.is_dir() and p.name not in counts):
        rel = _relation(folder, counts)
        edges[rel] = _edges(folder, rel, counts)
    if not edges:
        raise GraphError(f"{root}: no relation folders (SRC__REL__DST/src.npy, dst.npy)")
    data = {t: _node_data(root / t, t, n) for t, n in counts.items() if (root / t).is_dir()}
    _check_sizes(root, counts, edges, {t for t, d in data.items() if d})
    if target is not None and "labels" not in data.get(target, {}):
        raise GraphError(f"{root / NODES_JSON}: target_type {target!r} has no labels (no {target}/labels.npy)")
    return TypedNpyDir(root, counts, target, classes, edges, data)


def read_typed_npy_dir(root: str | Path, *, name: str = "") -> HeteroGraph:
    """The :class:`HeteroGraph` of the typed npy-dir ``root`` (module docstring)."""
    d = open_typed_npy_dir(root)
    try:
        return HeteroGraph(d.counts, d.edges, features=d.field("features"), labels=d.field("labels"),
                           masks=d.masks, target_type=d.target, num_classes=d.classes, name=name or d.root.name)
    except GraphError as exc:
        raise GraphError(f"{d.root}: {exc}") from None
