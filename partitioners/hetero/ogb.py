"""Read an OGB heterogeneous node-property dataset (ogbn-mag's layout) without the ``ogb`` package.

The dataset folder (or its ``raw/`` folder directly)::

    raw/num-node-dict.csv.gz                      header: type names; one row: their counts
    raw/relations/SRC___REL___DST/edge.csv.gz     one "src,dst" line per edge (local ids)
    raw/node-feat/TYPE/node-feat.csv.gz           one line of floats per node of TYPE (optional)
    raw/node-label/TYPE/node-label.csv.gz         one class id per node of TYPE (optional)
    split/NAME/TYPE/train.csv.gz, valid.csv.gz, test.csv.gz   node ids of TYPE (optional)

(``.csv`` without ``.gz`` is read too; other files, e.g. ``num-edge-dict``, ``edge_reltype``,
``node_year``, are ignored). Types keep the order of ``num-node-dict``, relations the sorted
order of their folders. A label that is not a whole number (OGB writes NaN for unlabelled
nodes) makes its node unlabelled: it gets class 0 and leaves the split. The target type is the
labelled one. Each problem is one :class:`~partitioners.errors.GraphError` line naming the file.
The files are read whole with numpy (ogbn-mag's 736k x 128 paper features take a minute and
about 1 GB); a streaming, out-of-core typed reader is not there yet. Torch-free.
"""

from __future__ import annotations

import gzip
import io
from pathlib import Path
from typing import Any

import numpy as np

from ..errors import GraphError
from .graph import HeteroGraph

__all__ = ["read_ogb_hetero"]

_SPLIT_FILES = {"train": "train", "val": "valid", "test": "test"}


def _find(folder: Path, stem: str) -> Path | None:
    for name in (f"{stem}.csv.gz", f"{stem}.csv"):
        if (folder / name).is_file():
            return folder / name
    return None


def _text(path: Path) -> str:
    try:
        if path.suffix == ".gz":
            with gzip.open(path, "rt", encoding="utf-8") as f:
                return f.read()
        return path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError, EOFError) as exc:
        raise GraphError(f"{path}: cannot be read ({exc})") from None


def _table(path: Path, dtype: Any, width: int | None = None) -> np.ndarray:
    """The comma-separated numbers of ``path`` as a 2-D array (rows may not be ragged)."""
    text = _text(path)
    if not text.strip():
        return np.zeros((0, width or 0), dtype=dtype)
    try:
        a = np.loadtxt(io.StringIO(text), delimiter=",", dtype=np.float64, ndmin=2)
    except ValueError as exc:
        raise GraphError(f"{path}: not a table of comma-separated numbers ({exc})") from None
    if width is not None and a.shape[1] != width:
        raise GraphError(f"{path}: expected {width} columns per line, got {a.shape[1]}")
    if np.issubdtype(dtype, np.integer):
        if not np.all(np.isfinite(a)) or np.any(a != np.round(a)):
            raise GraphError(f"{path}: expected integer ids, found a value that is not a whole number")
        return a.astype(dtype)
    return a.astype(dtype)


def _counts(raw: Path) -> dict[str, int]:
    path = _find(raw, "num-node-dict")
    if path is None:
        raise GraphError(f"{raw}: no num-node-dict.csv.gz: not an OGB heterogeneous dataset folder "
                         f"(expected raw/num-node-dict.csv.gz and raw/relations/SRC___REL___DST/)")
    lines = [ln.strip() for ln in _text(path).splitlines() if ln.strip()]
    if len(lines) != 2:
        raise GraphError(f"{path}: expected a header of type names and one line of counts, got {len(lines)} lines")
    names, values = lines[0].split(","), lines[1].split(",")
    if len(names) != len(values):
        raise GraphError(f"{path}: {len(names)} type names but {len(values)} counts")
    try:
        return {n.strip(): int(v) for n, v in zip(names, values)}
    except ValueError:
        raise GraphError(f"{path}: the counts must be integers, got {lines[1]!r}") from None


def read_ogb_hetero(root: str | Path, *, split: str | None = None, add_reverse: bool = False,
                    name: str = "") -> HeteroGraph:
    """The :class:`HeteroGraph` of the OGB heterogeneous dataset folder ``root`` (module
    docstring). ``split``: the folder under ``split/`` to use (default: the only one, if any);
    ``add_reverse``: add ``rev_*`` relations."""
    root = Path(root)
    raw = root if _find(root, "num-node-dict") is not None else root / "raw"
    if not raw.is_dir():
        raise GraphError(f"{root}: no such dataset folder (expected {root}/raw/num-node-dict.csv.gz)")
    counts = _counts(raw)
    rel_dir = raw / "relations"
    if not rel_dir.is_dir():
        raise GraphError(f"{rel_dir}: missing: an OGB heterogeneous dataset has one folder per relation, "
                         f"relations/SRC___REL___DST/edge.csv.gz")
    edges: dict[tuple[str, str, str], tuple[np.ndarray, np.ndarray]] = {}
    for folder in sorted(p for p in rel_dir.iterdir() if p.is_dir()):
        parts = folder.name.split("___")
        if len(parts) != 3:
            raise GraphError(f"{folder}: a relation folder is named SRC___REL___DST, got {folder.name!r}")
        path = _find(folder, "edge")
        if path is None:
            raise GraphError(f"{folder}: no edge.csv.gz")
        pairs = _table(path, np.int64, 2)
        for t in (parts[0], parts[2]):
            if t not in counts:
                raise GraphError(f"{path}: relation {tuple(parts)!r} names type {t!r}, which num-node-dict "
                                 f"does not list ({list(counts)})")
        edges[(parts[0], parts[1], parts[2])] = (pairs[:, 0], pairs[:, 1])
    if not edges:
        raise GraphError(f"{rel_dir}: no relation folders (SRC___REL___DST/edge.csv.gz)")
    features: dict[str, np.ndarray] = {}
    labels: dict[str, np.ndarray] = {}
    known: dict[str, np.ndarray] = {}
    for t, n in counts.items():
        path = _find(raw / "node-feat" / t, "node-feat")
        if path is not None:
            x = _table(path, np.float32)
            if x.shape[0] != n:
                raise GraphError(f"{path}: {x.shape[0]} rows but node type {t!r} has {n} nodes (num-node-dict)")
            features[t] = x
        path = _find(raw / "node-label" / t, "node-label")
        if path is not None:
            y = _table(path, np.float64)
            if y.shape != (n, 1):
                raise GraphError(f"{path}: expected {n} lines of one class id (node type {t!r}), got shape {y.shape}")
            y = y[:, 0]
            ok = np.isfinite(y) & (y == np.round(y)) & (y >= 0)
            labels[t] = np.where(ok, y, 0).astype(np.int64)
            known[t] = ok
    masks = _split_masks(root, counts, labels, known, split)
    try:
        g = HeteroGraph(counts, edges, features=features, labels=labels, masks=masks, name=name or root.name)
    except GraphError as exc:
        raise GraphError(f"{root}: {exc}") from None
    return g.add_reverse() if add_reverse else g


def _split_masks(root: Path, counts: dict[str, int], labels: dict[str, np.ndarray],
                 known: dict[str, np.ndarray], split: str | None) -> dict[str, dict[str, np.ndarray]]:
    split_root = root / "split"
    if not split_root.is_dir():
        if split is not None:
            raise GraphError(f"{split_root}: no split folder, but split {split!r} was asked for")
        return {}
    names = sorted(p.name for p in split_root.iterdir() if p.is_dir())
    if split is None:
        if len(names) != 1:
            raise GraphError(f"{split_root}: {len(names)} splits ({names}); choose one (split=NAME)")
        split = names[0]
    folder = split_root / split
    if not folder.is_dir():
        raise GraphError(f"{folder}: no such split; the dataset has {names}")
    masks: dict[str, dict[str, np.ndarray]] = {}
    for t in sorted(p.name for p in folder.iterdir() if p.is_dir()):
        if t not in counts:
            raise GraphError(f"{folder / t}: the split names type {t!r}, which num-node-dict does not list")
        if t not in labels:
            raise GraphError(f"{folder / t}: the split is on type {t!r}, which has no node-label/{t}/")
        masks[t] = {}
        for key, stem in _SPLIT_FILES.items():
            path = _find(folder / t, stem)
            if path is None:
                continue
            ids = _table(path, np.int64, 1)[:, 0]
            if ids.size and (int(ids.min()) < 0 or int(ids.max()) >= counts[t]):
                raise GraphError(f"{path}: node id out of range [0, {counts[t]}) of type {t!r}")
            m = np.zeros(counts[t], dtype=bool)
            m[ids] = True
            masks[t][key] = m & known[t]
    return masks
