"""Node data from ``.npy`` files, attached to a graph read from any input.

``gnn-dist partition --features F.npy --labels L.npy --train-mask M.npy ...`` (and the Python
API) give each array as a ``.npy`` file, opened with ``mmap_mode="r"`` and ``allow_pickle=False``:

  features   float (any numeric dtype) ``[N, F]`` (``[N]`` is one feature)
  labels     int ``[N]`` class ids (``[N, 1]`` is squeezed), or 0/1 ``[N, C]`` multi-label, or
             float ``[N]``/``[N, D]`` regression targets (floats that are all whole numbers,
             or all 0/1 in ``[N, C]``, are read as class ids / multi-label)
  masks      bool ``[N]``, or an integer array of node ids (any length, distinct ids in ``[0, N)``)

The dtype tells a mask from an id list: a bool array is a mask, an integer array lists ids (an
integer array of length ``N`` holding only 0 and 1 is refused as ambiguous: save it as bool).
Rows are node ids as the graph numbers them (after ``relabel``: the sorted order of the input's
ids, ``original_names.npy`` in the folder). A shape that does not fit is one error line naming
the flag, the file and the expected shape.

When the node count came from the largest id of an edge list, node data with more rows adds the
missing ids as isolated nodes (an edge list cannot mention a node without edges).

This module is torch-free.
"""

from __future__ import annotations

import dataclasses
import logging
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from ..errors import GraphError
from ..graph import Graph
from ..graph_checks import check_features, check_labels, label_kind_of

__all__ = ["NODE_FIELDS", "NodeDataFiles", "attach_node_data", "mask_from_array", "open_node_array"]

logger = logging.getLogger(__name__)

NODE_FIELDS = ("features", "labels", "train_mask", "val_mask", "test_mask")
"""The node data a file may give, in the order they are checked."""

_GRAPH_ATTR = {"features": "x", "labels": "y", "train_mask": "train_mask", "val_mask": "val_mask",
               "test_mask": "test_mask"}
_EXPECTED = {"features": "[{n}, F] numbers", "labels": "[{n}] int class ids or [{n}, C] 0/1",
             "train_mask": "bool [{n}] or int node ids", "val_mask": "bool [{n}] or int node ids",
             "test_mask": "bool [{n}] or int node ids"}


@dataclass(frozen=True, slots=True)
class NodeDataFiles:
    """The ``.npy`` file of each node array, and how to name it in messages (the CLI flag)."""

    paths: dict[str, Path]
    """Field (``features``, ``labels``, ``train_mask``, ...) -> file."""
    labels: dict[str, str] = dataclasses.field(default_factory=dict)
    """Field -> how messages name it (``--features``); the field name when absent."""

    def what(self, field: str) -> str:
        """``'--features F.npy'``: the flag (or field) and the file."""
        return f"{self.labels.get(field, field)} {self.paths[field]}"


def open_node_array(what: str, path: str | Path) -> np.ndarray:
    """``path`` as an array, memory-mapped when it can be, never unpickled (``what`` names it)."""
    p = Path(path)
    if not p.is_file():
        raise FileNotFoundError(f"{what}: no such file")
    try:
        try:
            a = np.load(p, mmap_mode="r", allow_pickle=False)
        except ValueError:  # cannot be memory-mapped: read it (object arrays fail here too)
            a = np.load(p, allow_pickle=False)
    except ValueError as exc:  # object arrays (pickle), bad headers
        raise GraphError(f"{what}: not a plain .npy array ({exc}); save a numeric array with "
                         f"np.save (nothing is unpickled)") from None
    except (OSError, EOFError) as exc:
        raise GraphError(f"{what}: not a readable .npy file ({exc})") from None
    if not isinstance(a, np.ndarray):
        raise GraphError(f"{what}: a .npz archive, not one .npy array; save each array with np.save")
    return a


def _rows(field: str, a: np.ndarray) -> int | None:
    """Rows that stand for nodes (None: an id list, which has no row per node)."""
    if field.endswith("_mask") and a.dtype != np.bool_:
        return None
    return int(a.shape[0]) if a.ndim else 0


def mask_from_array(what: str, a: np.ndarray, num_nodes: int) -> np.ndarray:
    """A bool ``[N]`` mask from a bool ``[N]`` array or an integer array of distinct node ids."""
    if a.dtype == np.bool_:
        if a.shape != (num_nodes,):
            raise GraphError(f"{what}: shape {list(a.shape)} but the graph has {num_nodes} nodes; "
                             f"expected a bool [{num_nodes}] mask or int node ids")
        return np.array(a, dtype=bool)
    if not np.issubdtype(a.dtype, np.integer) or a.ndim != 1:
        raise GraphError(f"{what}: dtype {a.dtype}, shape {list(a.shape)}; expected a bool "
                         f"[{num_nodes}] mask or a 1-D int array of node ids")
    ids = np.asarray(a, dtype=np.int64)
    if ids.size and (int(ids.min()) < 0 or int(ids.max()) >= num_nodes):
        bad = int(np.flatnonzero((ids < 0) | (ids >= num_nodes))[0])
        raise GraphError(f"{what}: node id {int(ids[bad])} (entry {bad}) is out of range: the "
                         f"graph has {num_nodes} nodes, ids are in [0, {num_nodes})")
    mask = np.zeros(num_nodes, dtype=bool)
    mask[ids] = True
    if int(np.count_nonzero(mask)) != ids.size:
        if ids.size == num_nodes and np.isin(ids, (0, 1)).all():
            raise GraphError(f"{what}: an int array of 0/1 of length {num_nodes}: a mask or node ids? "
                             f"save a mask as bool (np.save(path, m.astype(bool))), or list node ids")
        raise GraphError(f"{what}: node ids repeat ({ids.size - int(np.count_nonzero(mask))} "
                         f"duplicates); list each node once")
    return mask


def _check_rows(files: NodeDataFiles, arrays: dict[str, np.ndarray], num_nodes: int) -> None:
    for field, a in arrays.items():
        rows = _rows(field, a)
        if rows is not None and rows != num_nodes:
            expected = _EXPECTED[field].format(n=num_nodes)
            raise GraphError(f"{files.what(field)}: shape {list(a.shape)} but the graph has {num_nodes} "
                             f"nodes; expected {expected}")


def _extend(graph: Graph, num_nodes: int) -> Graph:
    """``graph`` (without node data) with isolated nodes ``graph.num_nodes .. num_nodes - 1`` added."""
    extra = num_nodes - graph.num_nodes
    indptr = np.concatenate([graph.indptr, np.full(extra, graph.indptr[-1], dtype=np.int64)])
    return dataclasses.replace(graph, indptr=indptr)


def attach_node_data(graph: Graph, files: NodeDataFiles, *, extend: bool = False,
                     label_kind: str | None = None) -> Graph:
    """``graph`` with the node data of ``files`` (a new Graph; the input's arrays are kept).

    ``label_kind``: what the labels file holds (:attr:`Graph.label_kind`; None infers it).

    ``extend``: the node count came from the largest id of an edge list, so node data with more
    rows adds isolated nodes up to its row count (when the graph has no node data of its own).
    Raises GraphError for a field the graph already has, an unreadable file or a shape that does
    not fit; FileNotFoundError for a missing file.
    """
    arrays = {f: open_node_array(files.what(f), files.paths[f]) for f in NODE_FIELDS if f in files.paths}
    if not arrays:
        return graph
    for field in arrays:
        if getattr(graph, _GRAPH_ATTR[field]) is not None:
            raise GraphError(f"{files.what(field)}: the input already has {field.replace('_', ' ')}; "
                             f"drop {files.labels.get(field, field)} or use an input without them")
    n = graph.num_nodes
    rows = [r for f, a in arrays.items() if (r := _rows(f, a)) is not None]
    bare = graph.node_names is None and all(getattr(graph, a) is None for a in _GRAPH_ATTR.values())
    if extend and bare and rows and max(rows) > n:
        logger.info("%d nodes from the node data (the edges' largest id is %d): ids %d..%d have no edge",
                    max(rows), n - 1, n, max(rows) - 1)
        graph = _extend(graph, max(rows))
        n = graph.num_nodes
    _check_rows(files, arrays, n)
    data = {field: _checked(field, files.what(field), a, n, label_kind) for field, a in arrays.items()}
    labels = data.get("labels")
    return dataclasses.replace(graph, x=data.get("features", graph.x),
                               y=graph.y if labels is None else labels[0],
                               num_classes=graph.num_classes if labels is None else labels[1],
                               label_kind=graph.label_kind if labels is None else label_kind_of(labels[0]),
                               train_mask=data.get("train_mask", graph.train_mask),
                               val_mask=data.get("val_mask", graph.val_mask),
                               test_mask=data.get("test_mask", graph.test_mask))


def _checked(field: str, what: str, a: np.ndarray, num_nodes: int, label_kind: str | None = None) -> Any:
    """One array as the graph stores it; a bad value is a GraphError naming ``what``."""
    if field.endswith("_mask"):
        return mask_from_array(what, a, num_nodes)
    try:
        if field == "features":
            return check_features(a, num_nodes)
        if a.ndim == 2 and a.shape[1] == 1:
            a = a[:, 0]
        return check_labels(a, num_nodes, None, label_kind)
    except GraphError as exc:  # NaN features, negative labels, ...
        raise GraphError(f"{what}: {exc}") from exc
