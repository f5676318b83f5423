"""Convert an OGB node-property dataset in its binary layout (the large datasets, e.g.
ogbn-papers100M) into an npy-dir, member by member, block by block.

The layout::

    ROOT/
      raw/data.npz          edge_index int [2, E] (row 0 sources, row 1 destinations),
                            node_feat float [N, F] (or None), num_nodes_list [1], num_edges_list [1],
                            edge_feat float [E, D] (optional, edge_index's column order) -> edge_attr.npy
      raw/node-label.npz    node_label [N, 1] class ids, or [N, C] 0/1; NaN = no label
                            (or raw/node-label.csv.gz, as in the CSV layout)
      split/<scheme>/train.csv.gz, valid.csv.gz, test.csv.gz

Each member is read through :class:`~.npz_stream.NpzArchive` (stored or deflated, its .npy
header first, then its data in blocks of ``chunk_bytes``), never loaded whole: ``edge_index``
is C order, so row 0 streams into ``src.npy`` and then row 1 into ``dst.npy``; ``edge_feat``
streams into ``edge_attr.npy`` (float32 ``[E, D]``, row ``e`` for edge ``e``, the order the
edges are written in). Ids are checked against ``num_nodes_list``; features must be finite
(node features: float16 and float32 are kept, float64 is stored as float32, as a partition
stores it; edge features: any real numbers, stored float32); labels follow :mod:`partitioners.io.ogb`. A
``None`` member (``np.savez`` stores it as a pickled 0-d object) is treated as absent and
never unpickled; any other object or Fortran-order member is refused.

A block holds at least one row, so the rows' width is bounded by the member's header: a
feature or label matrix whose rows hold more than :data:`MAX_ROW_VALUES` (1,048,576) values is
refused before any of its data is read (a small deflated archive could otherwise declare, and
hold, one row of gigabytes). Memory: one block, ``max(chunk_bytes, one row)`` bytes, and its
float32 copy.

This module is torch-free.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any, Iterator

import numpy as np

from ..errors import GraphError
from ..io.ogb import decode_labels, first_non_finite
from .npz_stream import NpzArchive, NpzMember
from .ogb_nodes import LabelResult, csv_labels, finish_ogb, stored_num_nodes, write_label_blocks
from .sinks import EdgeSummary, IdColumn, RowsSummary, close_id_columns, progress_bar, write_rows

__all__ = ["MAX_ROW_VALUES", "convert_ogb_npz", "is_ogb_npz_dir"]

MAX_ROW_VALUES = 1 << 20
"""The most values a row of a feature or label matrix may hold (a row is read whole: 8 MiB of
float64 at most)."""

log = logging.getLogger(__name__)

_USED = ("edge_index", "node_feat", "edge_feat", "num_nodes_list", "num_edges_list")


def is_ogb_npz_dir(path: str | Path) -> bool:
    """True when ``path`` is a folder holding ``raw/data.npz``."""
    p = Path(path)
    return p.is_dir() and (p / "raw" / "data.npz").is_file()


def _block_rows(chunk_bytes: int, row_bytes: int) -> int:
    return max(1, chunk_bytes // max(1, row_bytes))


def _one_count(npz: NpzArchive, key: str) -> int | None:
    if key not in npz.keys():
        return None
    values = npz.small(key).reshape(-1)
    if values.size != 1 or int(values[0]) < 0:
        raise GraphError(f"{npz.path}, array {key!r}: expected one count (one graph), found {values.tolist()}")
    return int(values[0])


def _check_ids(ids: np.ndarray, member: NpzMember, row: int, start: int, what: str,
               num_nodes: int | None) -> None:
    if ids.size == 0:
        return
    if ids.dtype.kind == "i" and int(ids.min()) < 0:
        i = int(np.flatnonzero(ids < 0)[0])
        raise GraphError(f"{member.where}[{row}, {start + i}]: {what} id {int(ids[i])} is negative; "
                         f"node ids must be >= 0")
    if num_nodes is not None and int(ids.max()) >= num_nodes:
        i = int(np.flatnonzero(ids >= num_nodes)[0])
        raise GraphError(f"{member.where}[{row}, {start + i}]: {what} id {int(ids[i])} is out of range: "
                         f"num_nodes_list says {num_nodes} nodes")


def _check_count(member: NpzMember, rows: int | None, said: str) -> None:
    """GraphError unless ``member`` has ``rows`` rows (``said``: where that count comes from)."""
    if rows is not None and member.shape[0] != rows:
        one = said.split()[-1][:-1]
        raise GraphError(f"{member.where}: {member.shape[0]} rows, but {said.format(rows)} (one row per {one})")


def _check_width(member: NpzMember, width: int, what: str) -> None:
    """GraphError when a row of ``member`` (``width`` values) is wider than :data:`MAX_ROW_VALUES`."""
    if width > MAX_ROW_VALUES:
        raise GraphError(f"{member.where}: shape {list(member.shape)}: rows of {width} {what}s; at most "
                         f"{MAX_ROW_VALUES} per row are read (a row is read whole)")


def _check_rows(member: NpzMember, num_nodes: int | None) -> None:
    _check_count(member, num_nodes, "num_nodes_list says {} nodes")


def _edges(npz: NpzArchive, folder: Path, num_nodes: int | None, chunk_bytes: int,
           progress: bool) -> EdgeSummary:
    member = npz.member("edge_index")
    member.require_plain("iu", "an integer array of node ids")
    if len(member.shape) != 2 or member.shape[0] != 2:
        raise GraphError(f"{member.where}: shape {list(member.shape)}; expected [2, E] (row 0 the "
                         f"sources, row 1 the destinations)")
    num_edges = member.shape[1]
    stored = _one_count(npz, "num_edges_list")
    if stored is not None and stored != num_edges:
        raise GraphError(f"{npz.path}: num_edges_list says {stored} edges but edge_index holds {num_edges}")
    columns = (IdColumn(folder / "src.npy", rows=num_edges), IdColumn(folder / "dst.npy", rows=num_edges))
    step = _block_rows(chunk_bytes, member.dtype.itemsize)
    try:
        with npz.data("edge_index") as data:
            for row, (column, what) in enumerate(zip(columns, ("source", "destination"))):
                with progress_bar(progress, f"edges ({what}s)", "edge", num_edges) as bar:
                    for start, block in data.blocks(num_edges, 1, step):
                        ids = block.reshape(-1)
                        _check_ids(ids, member, row, start, what, num_nodes)
                        column.append(ids)
                        bar.update(ids.size)
                        del block, ids
            data.finish()
        dtype = close_id_columns(*columns)
    except BaseException:
        for column in columns:
            column.abort()
        raise
    return EdgeSummary(num_edges, max(c.max_id for c in columns), dtype.name)


def _float_rows(npz: NpzArchive, key: str, path: Path, *, rows: int | None, said: str, dtype: np.dtype | None,
                kinds: str, what: str, chunk_bytes: int, progress: bool) -> RowsSummary | None:
    """Member ``key`` (``[rows, D]`` finite numbers) streamed into ``path`` as ``dtype`` (None: float16
    kept, anything else float32); None when the member is absent or None.

    ``said``: where ``rows`` comes from, for the message (``"edge_index holds {} edges"``).
    """
    if key not in npz.keys():
        return None
    member = npz.member(key)
    if member.is_none:
        log.info("%s: %s is None (a pickled object, not read): the npy-dir gets no %ss", member.where, key, what)
        return None
    member.require_plain(kinds, f"a numeric array of {what}s")
    unit = said.split()[-1]
    if len(member.shape) != 2:
        raise GraphError(f"{member.where}: shape {list(member.shape)}; expected [{unit[0].upper()}, D] "
                         f"(one row per {unit[:-1]})")
    _check_count(member, rows, said)
    count, width = member.shape
    _check_width(member, width, what)
    if dtype is None:
        dtype = np.dtype(np.float16) if member.dtype == np.float16 else np.dtype(np.float32)

    def blocks() -> Iterator[np.ndarray]:
        with npz.data(key) as data:
            for start, block in data.blocks(count, width, _block_rows(chunk_bytes, width * member.dtype.itemsize)):
                block = block.astype(dtype)
                bad = first_non_finite(block)
                if bad is not None:
                    r, c = bad
                    raise GraphError(f"{member.where}[{start + r}, {c}]: feature is not finite "
                                     f"(or overflows {dtype}); {what}s must be finite numbers")
                yield block
                del block
            data.finish()

    return write_rows(path, blocks(), dtype=dtype, rows=count, source=npz.path, what=what, unit=unit,
                      bar=progress_bar(progress, f"{what}s", unit[:-1], count))


def _features(npz: NpzArchive, folder: Path, num_nodes: int | None, chunk_bytes: int,
              progress: bool) -> RowsSummary | None:
    return _float_rows(npz, "node_feat", folder / "features.npy", rows=num_nodes, said="num_nodes_list says {} nodes",
                       dtype=None, kinds="f", what="node feature", chunk_bytes=chunk_bytes, progress=progress)


def _edge_features(npz: NpzArchive, folder: Path, num_edges: int, chunk_bytes: int,
                   progress: bool) -> RowsSummary | None:
    """``edge_feat`` into ``edge_attr.npy``: float32 ``[E, D]``, row ``e`` for column ``e`` of ``edge_index``."""
    return _float_rows(npz, "edge_feat", folder / "edge_attr.npy", rows=num_edges,
                       said="edge_index holds {} edges", dtype=np.dtype(np.float32), kinds="fiub",
                       what="edge feature", chunk_bytes=chunk_bytes, progress=progress)


def _npz_labels(path: Path, folder: Path, num_nodes: int | None, chunk_bytes: int,
                progress: bool) -> LabelResult | None:
    with NpzArchive(path) as npz:
        member = npz.member("node_label")
        member.require_plain("fiub", "a numeric array of labels")
        if len(member.shape) not in (1, 2):
            raise GraphError(f"{member.where}: shape {list(member.shape)}; expected [N, 1] class ids or "
                             f"[N, C] 0/1 labels")
        rows = member.shape[0]
        width = member.shape[1] if len(member.shape) == 2 else 1
        _check_width(member, width, "label")
        _check_rows(member, num_nodes)

        def blocks() -> Iterator[tuple[np.ndarray, np.ndarray]]:
            step = _block_rows(chunk_bytes, width * max(8, member.dtype.itemsize))
            with npz.data("node_label") as data:
                for start, block in data.blocks(rows, width, step):
                    labels, unlabelled, problem = decode_labels(block.astype(np.float64))
                    if problem is not None:
                        r, _, message = problem
                        raise GraphError(f"{member.where}, row {start + r}: {message}")
                    yield labels, unlabelled
                data.finish()

        return write_label_blocks(folder, blocks(), path, num_nodes, progress)


def convert_ogb_npz(root: Path, folder: Path, *, split: str | None = None, chunk_bytes: int,
                    progress: bool) -> dict[str, Any]:
    """Write the binary OGB dataset ``root`` into ``folder``; return its ``graph.json`` (without the tool keys)."""
    raw = root / "raw"
    data_file = raw / "data.npz"
    if not data_file.is_file():
        raise FileNotFoundError(f"{data_file}: no such file; {root} is not an OGB node-property dataset "
                                f"folder in the binary layout (expected raw/data.npz)")
    files = {"edges": data_file}
    with NpzArchive(data_file) as npz:
        num_nodes = _one_count(npz, "num_nodes_list")
        if num_nodes is None:
            num_nodes = stored_num_nodes(raw)
        elif num_nodes == 0:
            raise GraphError(f"{data_file}, array 'num_nodes_list': the graph has 0 nodes")
        edges = _edges(npz, folder, num_nodes, chunk_bytes, progress)
        features = _features(npz, folder, num_nodes, chunk_bytes, progress)
        if features is not None:
            files["features"] = data_file
        if _edge_features(npz, folder, edges.num_edges, chunk_bytes, progress) is not None:
            files["edge_features"] = data_file
        ignored = [k for k in npz.keys() if k not in _USED]
        if ignored:
            log.info("%s: not converted: %s", data_file, ", ".join(ignored))
    label_npz = raw / "node-label.npz"
    if label_npz.is_file():
        labels = _npz_labels(label_npz, folder, num_nodes, chunk_bytes, progress)
    else:
        labels = csv_labels(folder, raw, num_nodes, chunk_bytes, progress)
    if labels is not None:
        files["labels"] = labels.summary.source
    else:
        log.info("%s: no raw/node-label.npz: the npy-dir gets no labels", root)
    return finish_ogb(folder, root, num_nodes=num_nodes, edges=edges, features=features, labels=labels,
                      split=split, chunk_bytes=chunk_bytes,
                      files={k: str(v.relative_to(root)) for k, v in files.items()})
