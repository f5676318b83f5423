"""Read the Planetoid citation graphs (Cora, CiteSeer, PubMed) from their published files.

A folder (or its ``raw/`` subfolder, PyG's layout) holding, for one dataset ``NAME``::

    ind.NAME.x  ind.NAME.tx  ind.NAME.allx     features: training, test and all non-test rows
    ind.NAME.y  ind.NAME.ty  ind.NAME.ally     one-hot labels of the same rows
    ind.NAME.graph                             {node: [neighbours]} (a dict of lists)
    ind.NAME.test.index                        the test nodes' ids, one per line, in tx's row order

The first seven are Python pickles: they are read with
:func:`partitioners.io.safe_pickle.restricted_load`, which builds numpy arrays, scipy sparse
matrices and dicts of lists and refuses any other name in the file (nothing in it runs).

The graph is the one the usual loaders (Kipf & Welling's, PyG's) build:

- nodes: ``allx``'s rows are nodes ``0..len(allx)-1``; ``tx`` row ``k`` is node
  ``test.index[k]``; ``N = max(len(allx), max(test.index) + 1)``. Ids between that are not in
  ``test.index`` (CiteSeer has some) get zero features, label 0 and no split, as those loaders do.
- labels: the argmax of the one-hot rows (an all-zero row gives 0).
- split (the standard one): train = the first ``len(y)`` nodes (20 per class), val = the next
  500 (fewer when ``allx`` has fewer rows), test = the ids of ``test.index``.
- edges: every ``u -> v`` of the dict, made undirected (``symmetrize``), self-loops and repeated
  edges removed (as PyG's loader does).

This module is torch-free.
"""

from __future__ import annotations

import logging
import pickle
from pathlib import Path
from typing import Any

import numpy as np

from ..errors import GraphError
from ..graph import Graph
from ._common import build_graph, existing_path

__all__ = ["PLANETOID_PARTS", "PLANETOID_VAL_SIZE", "is_planetoid_dir", "planetoid_names",
           "planetoid_split_record", "read_planetoid"]

logger = logging.getLogger(__name__)

PLANETOID_PARTS = ("x", "tx", "allx", "y", "ty", "ally", "graph", "test.index")
"""The file suffixes of one dataset, ``ind.NAME.<suffix>``."""
PLANETOID_VAL_SIZE = 500
"""Validation nodes of the standard split: the ``len(y)`` .. ``len(y) + 500`` rows."""

_READ_ERRORS = (pickle.UnpicklingError, EOFError, ValueError, TypeError, AttributeError, IndexError,
                KeyError, MemoryError, OverflowError, UnicodeDecodeError, RecursionError)


def _data_dir(path: Path) -> Path:
    """``path``, or ``path/raw`` when only that holds the files (PyG's ``Cora/raw``)."""
    if not any(path.glob("ind.*.graph")) and any((path / "raw").glob("ind.*.graph")):
        return path / "raw"
    return path


def planetoid_names(path: str | Path) -> list[str]:
    """The dataset names with an ``ind.NAME.graph`` file in ``path`` (or ``path/raw``), sorted."""
    folder = _data_dir(Path(path))
    return sorted(p.name[len("ind."):-len(".graph")] for p in folder.glob("ind.*.graph"))


def is_planetoid_dir(path: str | Path) -> bool:
    """True when ``path`` is a folder holding ``ind.NAME.graph`` (or its ``raw/`` does)."""
    return Path(path).is_dir() and bool(planetoid_names(path))


def _pick_name(folder: Path, name: str | None) -> str:
    found = planetoid_names(folder)
    if name is None:
        if len(found) == 1:
            return found[0]
        if not found:
            raise GraphError(f"{folder}: no Planetoid files (ind.NAME.graph, ind.NAME.x, ...) in it or in raw/")
        raise GraphError(f"{folder}: holds the Planetoid sets {found}; choose one with planetoid_name= "
                         f"(CLI: --planetoid-name)")
    lowered = {f.lower(): f for f in found}
    if name.lower() not in lowered:
        raise GraphError(f"{folder}: no Planetoid set {name!r} (no ind.{name.lower()}.graph); the folder "
                         f"holds {found or 'none'}")
    return lowered[name.lower()]


def _load(path: Path) -> Any:
    from .safe_pickle import UnsafePickleError, restricted_load  # scipy: only when reading one

    if not path.is_file():
        raise GraphError(f"{path}: missing (a Planetoid set has ind.NAME.{{{','.join(PLANETOID_PARTS)}}})")
    try:
        return restricted_load(path, encoding="latin1")
    except UnsafePickleError as exc:
        raise GraphError(str(exc)) from None
    except _READ_ERRORS as exc:
        raise GraphError(f"{path}: not a readable Planetoid pickle ({type(exc).__name__}: {exc})") from None


def _matrix(folder: Path, stem: str, suffix: str, dtype: Any) -> np.ndarray:
    from .safe_pickle import sparse_to_dense

    path = folder / f"{stem}.{suffix}"
    try:
        return sparse_to_dense(_load(path), str(path), dtype)
    except ValueError as exc:
        raise GraphError(str(exc)) from None


def _test_index(path: Path) -> np.ndarray:
    if not path.is_file():
        raise GraphError(f"{path}: missing (the test nodes' ids, one per line)")
    ids = []
    for lineno, line in enumerate(path.read_text(encoding="utf-8", errors="replace").splitlines(), 1):
        text = line.strip()
        if not text:
            continue
        try:
            ids.append(int(text))
        except ValueError:
            raise GraphError(f"{path}, line {lineno}: {text[:40]!r} is not a node id") from None
        if not 0 <= ids[-1] < 1 << 62:
            raise GraphError(f"{path}, line {lineno}: {text[:40]!r} is not a node id (a negative or huge number)")
    a = np.asarray(ids, dtype=np.int64)
    if a.size == 0:
        raise GraphError(f"{path}: no test node ids")
    if np.unique(a).size != a.size:
        raise GraphError(f"{path}: a test node id is listed twice")
    return a


def _graph_edges(path: Path, num_nodes: int) -> tuple[np.ndarray, np.ndarray]:
    graph = _load(path)
    if not isinstance(graph, dict):
        raise GraphError(f"{path}: expected a dict {{node: [neighbours]}}, got {type(graph).__name__}")
    src: list[int] = []
    dst: list[int] = []
    for node, neighbours in dict(graph).items():
        if not isinstance(node, (int, np.integer)) or not isinstance(neighbours, (list, tuple)) \
                or not all(isinstance(v, (int, np.integer)) for v in neighbours):
            raise GraphError(f"{path}: entry {node!r} is not node id -> list of node ids")
        src.extend([int(node)] * len(neighbours))
        dst.extend(int(v) for v in neighbours)
    s, d = np.asarray(src, np.int64), np.asarray(dst, np.int64)
    ids = np.concatenate([s, d])
    if ids.size and (int(ids.min()) < 0 or int(ids.max()) >= num_nodes):
        bad = int(ids[(ids < 0) | (ids >= num_nodes)][0])
        raise GraphError(f"{path}: node id {bad} is out of range: the features give {num_nodes} nodes")
    return s, d


def read_planetoid(path: str | Path, *, planetoid_name: str | None = None, **graph_options: Any) -> Graph:
    """Read one Planetoid set from the folder ``path`` (see the module docstring).

    ``planetoid_name`` (``cora``, ``citeseer``, ``pubmed``; any case) may be left out when the
    folder holds one set. ``graph_options`` go to :meth:`Graph.from_edges`; ``symmetrize``,
    ``remove_self_loops`` and ``remove_duplicates`` are on (the usual loaders' graph) unless
    passed as False. Raises GraphError naming the file for anything missing, refused or malformed.
    """
    root = existing_path(path)
    if not root.is_dir():
        raise GraphError(f"{root}: a Planetoid set is a folder of ind.NAME.* files, not a file")
    folder = _data_dir(root)
    name = _pick_name(folder, planetoid_name)
    stem = f"ind.{name}"
    allx = _matrix(folder, stem, "allx", np.float32)
    tx = _matrix(folder, stem, "tx", np.float32)
    ally = _matrix(folder, stem, "ally", np.float32)
    ty = _matrix(folder, stem, "ty", np.float32)
    y = _matrix(folder, stem, "y", np.float32)
    x_train = _matrix(folder, stem, "x", np.float32)  # allx's first len(y) rows: read to be checked
    test = _test_index(folder / f"{stem}.test.index")
    where = folder / stem
    if allx.shape[0] != ally.shape[0] or tx.shape[0] != ty.shape[0] or tx.shape[0] != test.size:
        raise GraphError(f"{where}.*: row counts disagree: allx {allx.shape[0]}, ally {ally.shape[0]}, "
                         f"tx {tx.shape[0]}, ty {ty.shape[0]}, test.index {test.size}")
    if allx.shape[1] != tx.shape[1] or ally.shape[1] != ty.shape[1] or y.shape[1] != ally.shape[1]:
        raise GraphError(f"{where}.*: column counts disagree: allx {allx.shape[1]}, tx {tx.shape[1]} "
                         f"features; ally {ally.shape[1]}, ty {ty.shape[1]}, y {y.shape[1]} classes")
    if y.shape[0] > allx.shape[0] or x_train.shape != (y.shape[0], allx.shape[1]):
        raise GraphError(f"{where}.x/.y: {x_train.shape[0]} and {y.shape[0]} rows (the training nodes, "
                         f"at most allx's {allx.shape[0]}), x with {x_train.shape[1]} columns (allx: "
                         f"{allx.shape[1]})")
    del x_train
    if int(test.min()) < allx.shape[0]:
        raise GraphError(f"{where}.test.index: test node {int(test.min())} is one of allx's rows "
                         f"(0..{allx.shape[0] - 1}); test nodes follow them")
    num_all = allx.shape[0]
    n = max(num_all, int(test.max()) + 1)
    if n - num_all - test.size > test.size:     # checked before the n-row arrays are allocated
        raise GraphError(f"{where}.test.index: its largest id {int(test.max())} leaves {n - num_all - test.size} "
                         f"ids after allx's {num_all} rows that are not test nodes (more than its {test.size} "
                         f"test nodes: CiteSeer has 15 such gaps)")
    given = graph_options.pop("num_nodes", None)
    if given is not None and given != n:
        raise GraphError(f"{where}.*: the files give {n} nodes but num_nodes={given} was passed")
    missing = n - num_all - test.size
    if missing:
        logger.info("%s.test.index: %d ids in %d..%d are not test nodes (as in CiteSeer): they get zero "
                    "features, label 0 and no split", where, missing, allx.shape[0], n - 1)
    x = np.zeros((n, allx.shape[1]), dtype=np.float32)
    x[:allx.shape[0]] = allx
    x[test] = tx
    onehot = np.zeros((n, ally.shape[1]), dtype=np.float32)
    onehot[:allx.shape[0]] = ally
    onehot[test] = ty
    del allx, tx, ally, ty
    labels = onehot.argmax(axis=1).astype(np.int64) if onehot.shape[1] else np.zeros(n, np.int64)
    num_train = y.shape[0]
    num_val = min(PLANETOID_VAL_SIZE, num_all - num_train)
    train = np.zeros(n, bool)
    train[:num_train] = True
    val = np.zeros(n, bool)
    val[num_train:num_train + num_val] = True
    test_mask = np.zeros(n, bool)
    test_mask[test] = True
    src, dst = _graph_edges(folder / f"{stem}.graph", n)
    options = {"symmetrize": True, "remove_self_loops": True, "remove_duplicates": True, "name": name,
               "num_classes": int(onehot.shape[1])}
    options.update({k: v for k, v in graph_options.items() if v is not None})
    logger.info("%s: %d nodes, %d features, %d classes; split train %d, val %d, test %d", where, n,
                x.shape[1], onehot.shape[1], num_train, num_val, test.size)
    return build_graph(folder, src, dst, num_nodes=n, features=x, labels=labels, train_mask=train,
                       val_mask=val, test_mask=test_mask, **options)


def planetoid_split_record(graph: Graph) -> dict[str, Any]:
    """The ``split`` entry ``partition.json`` keeps for a Planetoid graph's standard split."""
    counts = {k: int(np.count_nonzero(getattr(graph, f"{k}_mask"))) for k in ("train", "val", "test")}
    return {"kind": "planetoid", "counts": counts}
