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
Rows are node ids as the graph numbers them. A shape that does not fit is one error line naming
the flag, the file and the expected shape.

Named nodes (a graph read with ``relabel``, whose ``node_names`` are the input's ids) take node
data only with the name of every row (``--node-ids FILE``, :attr:`NodeDataFiles.node_ids`): a
text file with one name per line (optionally gzipped), or a ``.npy`` of names, in the rows'
order, shared by every node-data file. The rows are then joined to the nodes by name
(:func:`~.relabel_ids.nodes_of_names`, a binary search over the sorted names) and reordered; an
integer mask lists rows (0-based lines of the names file). Node data of named nodes without
their names is refused: the order of the rows is never guessed. Every name must be a node of
the graph (a node without edges cannot be named: ``relabel`` numbers the nodes the edges name),
once, and every node must be listed; each rule broken is one error line.

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
from ._text import _named_read_errors, open_binary
from .relabel_ids import nodes_of_names

__all__ = ["NODE_FIELDS", "NodeDataFiles", "attach_node_data", "mask_from_array", "open_node_array",
           "read_node_ids"]

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
    """Field -> how messages name it (``--features``, ``node_ids``: ``--node-ids``); the field
    name when absent."""
    node_ids: Path | None = None
    """The name of each row of every file, in order (:func:`read_node_ids`): required when the
    graph's nodes are named (``relabel``), refused otherwise."""

    def what(self, field: str) -> str:
        """``'--features F.npy'``: the flag (or field) and the file."""
        path = self.node_ids if field == "node_ids" else self.paths[field]
        return f"{self.labels.get(field, field)} {path}"


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
            count = (f"the graph has {num_nodes} nodes" if files.node_ids is None
                     else f"{files.what('node_ids')} names {num_nodes} rows")
            raise GraphError(f"{files.what(field)}: shape {list(a.shape)} but {count}; expected {expected}")


_NAMES_BLOCK_BYTES = 16 << 20
"""Bytes of a names file decoded at a time."""


def _int_names(what: str, text: np.ndarray, first_line: int) -> np.ndarray:
    """Names as int64 (the graph's names are integers); a name that is not one is not a node."""
    try:
        return text.astype(np.int64)
    except (ValueError, OverflowError):
        for k, token in enumerate(text.tolist()):
            try:
                int(token)
            except ValueError:
                raise GraphError(f"{what}, line {first_line + k}: {token!r} is not a node of the graph "
                                 f"(its nodes are named by integers)") from None
        raise GraphError(f"{what}: a name is out of the int64 range, so not a node of the graph") from None


def _text_blocks(what: str, path: Path) -> Any:
    """``(first line number, stripped lines)`` of a text file, block by block."""
    line = 1
    with _named_read_errors(path), open_binary(path) as f:
        pending = b""
        while True:
            data = f.read(_NAMES_BLOCK_BYTES)
            eof = not data
            buf = pending + data
            del data
            if not eof and (cut := buf.rfind(b"\n")) >= 0:
                block, pending = buf[:cut + 1], buf[cut + 1:]
            elif not eof:
                pending = buf
                continue
            else:
                block, pending = buf, b""
            del buf
            if not block:
                return
            try:
                text = block.decode("utf-8")
            except UnicodeDecodeError as exc:
                bad = line + block[:exc.start].count(b"\n")
                raise GraphError(f"{what}, line {bad}: not UTF-8 text ({exc.reason})") from None
            lines = [t.strip() for t in text.split("\n")]
            del text
            if block.endswith(b"\n"):
                lines.pop()  # the (empty) rest after the last line end
            if "" in lines:
                raise GraphError(f"{what}, line {line + lines.index('')}: an empty line; the file lists "
                                 f"one name per line, the name of each row of the node data in order")
            yield line, lines
            line += len(lines)
            if eof:
                return


def read_node_ids(what: str, path: str | Path, *, numeric: bool) -> np.ndarray:
    """The names of a node-ids file, in its order: int64 when ``numeric`` (the graph's names
    are integers), else unicode (``what`` names the file in messages).

    A text file (gzip detected by its bytes) has one name per line, no header, whitespace
    around a name ignored; a ``.npy`` is a 1-D array of names (integers or strings). Read once,
    a block at a time: the memory is the names array and one block of text.
    """
    p = Path(path)
    if not p.is_file():
        raise FileNotFoundError(f"{what}: no such file")
    if p.name.lower().endswith(".npy"):
        a = open_node_array(what, p)
        if a.ndim != 1 or a.dtype.kind not in "iuUS":
            raise GraphError(f"{what}: a .npy of names must be a 1-D array of integers or strings, got "
                             f"{a.dtype}{list(a.shape)}")
        if a.dtype.kind in "iu":
            return np.asarray(a, np.int64) if numeric else np.asarray(a).astype(str)
        text = np.asarray(a).astype(str)
        return _int_names(what, text, 1) if numeric else text
    blocks = []
    for first, lines in _text_blocks(what, p):
        text = np.array(lines, dtype=str)
        del lines
        blocks.append(_int_names(what, text, first) if numeric else text)
    if not blocks:
        return np.zeros(0, np.int64 if numeric else str)
    return np.concatenate(blocks) if len(blocks) > 1 else blocks[0]


def _row_of_node(graph: Graph, files: NodeDataFiles) -> np.ndarray:
    """The row of each node of a named graph (int64 ``[N]``), from the names file of ``files``;
    one GraphError for a name that is not a node, a name listed twice, or a node not listed."""
    assert graph.node_names is not None and files.node_ids is not None
    what = files.what("node_ids")
    names = graph.node_names
    listed = read_node_ids(what, files.node_ids, numeric=names.dtype.kind in "iu")
    nodes = nodes_of_names(names, listed)
    absent = np.flatnonzero(nodes < 0)
    if absent.size:
        k = int(absent[0])
        raise GraphError(f"{what}: {absent.size} name(s) are not nodes of the graph, e.g. {listed[k].item()!r} "
                         f"on line {k + 1}; the nodes are the names the edges mention (a node without "
                         f"edges cannot be added): drop their rows from the node data and the names file")
    n = graph.num_nodes
    seen = np.zeros(n, dtype=bool)
    seen[nodes] = True
    distinct = int(np.count_nonzero(seen))
    if distinct < nodes.size:
        order = np.argsort(nodes, kind="stable")
        repeat = np.flatnonzero(nodes[order[1:]] == nodes[order[:-1]])
        second = int(order[1:][repeat].min())
        first = int(np.flatnonzero(nodes == nodes[second])[0])
        raise GraphError(f"{what}: {nodes.size - distinct} name(s) are listed more than once, e.g. "
                         f"{listed[second].item()!r} on lines {first + 1} and {second + 1}; list each node "
                         f"once, one line per row of the node data")
    if distinct < n:
        missing = np.flatnonzero(~seen)
        raise GraphError(f"{what}: {missing.size} of the graph's {n} nodes are not listed, e.g. "
                         f"{names[missing[0]].item()!r}; every node the edges mention needs its row in "
                         f"the node data and its name in this file")
    rows = np.empty(n, dtype=np.int64)
    rows[nodes] = np.arange(n, dtype=np.int64)
    return rows


def _names_refusal(files: NodeDataFiles, field: str) -> GraphError:
    flag = files.labels.get("node_ids", "node_ids")
    return GraphError(f"{files.what(field)}: the graph's nodes are named (relabelled), so the node data "
                      f"must say which row is which node: pass {flag} FILE, a text file with the name "
                      f"of each row, one per line, in the order the rows were saved (the same for "
                      f"every node-data file); the rows are never assumed to be in any order")


def _extend(graph: Graph, num_nodes: int) -> Graph:
    """``graph`` (without node data) with isolated nodes ``graph.num_nodes .. num_nodes - 1`` added."""
    extra = num_nodes - graph.num_nodes
    indptr = np.concatenate([graph.indptr, np.full(extra, graph.indptr[-1], dtype=np.int64)])
    return dataclasses.replace(graph, indptr=indptr)


def attach_node_data(graph: Graph, files: NodeDataFiles, *, extend: bool = False,
                     label_kind: str | None = None) -> Graph:
    """``graph`` with the node data of ``files`` (a new Graph; the input's arrays are kept).

    ``label_kind``: what the labels file holds (:attr:`Graph.label_kind`; None infers it).

    A graph with ``node_names`` (relabelled) needs ``files.node_ids``: the rows are matched to
    the nodes by name (module docstring); without it the node data is refused.

    ``extend``: the node count came from the largest id of an edge list, so node data with more
    rows adds isolated nodes up to its row count (when the graph has no node data of its own).
    Raises GraphError for a field the graph already has, an unreadable file or a shape that does
    not fit; FileNotFoundError for a missing file.
    """
    arrays = {f: open_node_array(files.what(f), files.paths[f]) for f in NODE_FIELDS if f in files.paths}
    if files.node_ids is not None:
        flag = files.labels.get("node_ids", "node_ids")
        if graph.node_names is None:
            raise GraphError(f"{files.what('node_ids')}: the graph's nodes are not named (row i of the "
                             f"node data is node i); {flag} gives the rows' order for a relabelled input")
        if not arrays:
            raise GraphError(f"{files.what('node_ids')}: there is no node data to order (features, labels, "
                             f"masks); drop {flag}")
    if not arrays:
        return graph
    for field in arrays:
        if getattr(graph, _GRAPH_ATTR[field]) is not None:
            raise GraphError(f"{files.what(field)}: the input already has {field.replace('_', ' ')}; "
                             f"drop {files.labels.get(field, field)} or use an input without them")
    if graph.node_names is not None and files.node_ids is None:
        raise _names_refusal(files, next(iter(arrays)))
    n = graph.num_nodes
    rows = [r for f, a in arrays.items() if (r := _rows(f, a)) is not None]
    bare = graph.node_names is None and all(getattr(graph, a) is None for a in _GRAPH_ATTR.values())
    if extend and bare and rows and max(rows) > n:
        logger.info("%d nodes from the node data (the edges' largest id is %d): ids %d..%d have no edge",
                    max(rows), n - 1, n, max(rows) - 1)
        graph = _extend(graph, max(rows))
        n = graph.num_nodes
    row_of_node = None if files.node_ids is None else _row_of_node(graph, files)
    _check_rows(files, arrays, n)
    data = {field: _checked(field, files.what(field), a, n, label_kind) for field, a in arrays.items()}
    if row_of_node is not None:  # rows in the names file's order -> node order
        data = {field: ((np.asarray(v[0])[row_of_node], v[1]) if field == "labels" else np.asarray(v)[row_of_node])
                for field, v in data.items()}
        logger.info("node data rows matched to the %d nodes by name (%s)", n, files.what("node_ids"))
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
