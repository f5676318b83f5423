"""The arrays of an npy-dir, written as their blocks arrive: edge ids, node rows, labels, masks.

Every writer holds one block at a time (:class:`~.npy_stream.NpyStreamWriter`). Ids are stored
as int32 while every id seen fits and widened once to int64 otherwise; ``src.npy`` and
``dst.npy`` always end with the same dtype. Only the masks and the "no label" flags, one byte
per node, are held whole (O(N)).

This module is torch-free.
"""

from __future__ import annotations

import logging
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterator

import numpy as np

from ..errors import GraphError
from .npy_stream import NpyStreamWriter

__all__ = ["EdgeSummary", "EdgeWriter", "IdColumn", "RowsSummary", "close_id_columns", "progress_bar",
           "save_whole", "write_labels", "write_rows", "write_split_masks"]

log = logging.getLogger(__name__)

_INT32_MAX = int(np.iinfo(np.int32).max)


def progress_bar(enabled: bool, desc: str, unit: str, total: int | None = None) -> Any:
    """A tqdm bar on stderr counting ``unit``s (rows), disabled unless ``enabled``."""
    from tqdm.auto import tqdm

    return tqdm(total=total, desc=desc, unit=f" {unit}", unit_scale=True, disable=not enabled,
                file=sys.stderr, dynamic_ncols=True)


def save_whole(path: Path, arr: np.ndarray) -> None:
    """Write a small in-memory array (a mask) as ``.npy`` through the same writer (fsynced)."""
    arr = np.asarray(arr)
    with NpyStreamWriter(path, arr.dtype, arr.shape[1:], rows=arr.shape[0]) as w:
        w.append(arr)


class IdColumn:
    """``src.npy`` or ``dst.npy``: int32 ids until one does not fit, then int64 (:meth:`append`)."""

    def __init__(self, path: Path, rows: int | None = None) -> None:
        self.writer = NpyStreamWriter(path, np.int32, rows=rows)
        self.max_id = -1

    def append(self, ids: np.ndarray) -> None:
        """Append a block of ids already checked to be >= 0."""
        if ids.size:
            top = int(ids.max())
            if top > _INT32_MAX and self.writer.dtype == np.int32:
                log.debug("%s: id %d needs int64; widening the ids written so far", self.writer.path, top)
                self.writer.widen(np.int64)
            self.max_id = max(self.max_id, top)
        self.writer.append(ids)

    def abort(self) -> None:
        self.writer.abort()


def close_id_columns(src: IdColumn, dst: IdColumn) -> np.dtype:
    """Give both columns the wider of their dtypes, close them; return that dtype."""
    dtype = np.promote_types(src.writer.dtype, dst.writer.dtype)
    for column in (src, dst):
        column.writer.widen(dtype)
        column.writer.close()
    return dtype


@dataclass(frozen=True, slots=True)
class EdgeSummary:
    num_edges: int
    max_id: int
    """The largest id of either column (-1 without edges)."""
    dtype: str
    """The ids' dtype: ``int32`` or ``int64``."""


class EdgeWriter:
    """``src.npy``, ``dst.npy`` (and ``edge_weight.npy`` when ``weighted``) from blocks of edge pairs."""

    def __init__(self, folder: Path, *, weighted: bool, bar: Any) -> None:
        self.src = IdColumn(folder / "src.npy")
        self.dst = IdColumn(folder / "dst.npy")
        self.weight = NpyStreamWriter(folder / "edge_weight.npy", np.float32) if weighted else None
        self.bar = bar

    def add(self, src: np.ndarray, dst: np.ndarray, weight: np.ndarray | None = None) -> None:
        self.src.append(src)
        self.dst.append(dst)
        if self.weight is not None:
            self.weight.append(weight)  # type: ignore[arg-type]
        self.bar.update(src.size)

    def close(self) -> EdgeSummary:
        self.bar.close()
        if self.weight is not None:
            self.weight.close()
        num_edges = self.src.writer.rows
        dtype = close_id_columns(self.src, self.dst)
        return EdgeSummary(num_edges, max(self.src.max_id, self.dst.max_id), dtype.name)

    def abort(self) -> None:
        for w in (self.src.writer, self.dst.writer, self.weight):
            if w is not None:
                w.abort()

    def __enter__(self) -> "EdgeWriter":
        return self

    def __exit__(self, exc_type: Any, *rest: Any) -> None:
        if exc_type is not None:
            self.bar.close()
            self.abort()


@dataclass(frozen=True, slots=True)
class RowsSummary:
    """What :func:`write_rows` wrote: the file, its shape and dtype."""

    path: Path
    shape: tuple[int, ...]
    dtype: str
    source: Path
    """The file the rows came from."""

    @property
    def rows(self) -> int:
        return self.shape[0]


def write_rows(path: Path, blocks: Iterator[np.ndarray], *, dtype: Any, rows: int | None, source: Path,
               what: str, bar: Any, unit: str = "nodes") -> RowsSummary | None:
    """Write node rows (``[n, ...]`` blocks, cast to ``dtype``, or kept as they come when None) to
    ``path``; None when there is no block.

    ``rows``: the dataset's node count when known: a GraphError names ``source`` as soon as it
    has more rows, and at the end when it has fewer (``unit``: what the rows are, ``edges`` for
    edge features).
    """
    writer: NpyStreamWriter | None = None
    try:
        for block in blocks:
            if writer is None:
                writer = NpyStreamWriter(path, block.dtype if dtype is None else dtype, block.shape[1:])
            if rows is not None and writer.rows + block.shape[0] > rows:
                raise GraphError(f"{source}: the {what} file has more than {rows} rows, but the "
                                 f"dataset has {rows} {unit}")
            writer.append(block)
            bar.update(block.shape[0])
            del block
        if writer is None:
            return None
        if rows is not None and writer.rows != rows:
            raise GraphError(f"{source}: the {what} file has {writer.rows} rows, but the dataset has "
                             f"{rows} {unit}")
        shape = writer.close()
        return RowsSummary(path, shape, writer.dtype.name, source)
    except BaseException:
        if writer is not None:
            writer.abort()
        raise
    finally:
        bar.close()


def write_labels(path: Path, blocks: Iterator[tuple[np.ndarray, np.ndarray]], *, rows: int | None,
                 source: Path, bar: Any) -> tuple[RowsSummary, int, np.ndarray] | None:
    """Write decoded label blocks (``(labels, unlabelled)``, :func:`partitioners.io.ogb.decode_labels`)
    to ``path``: ``(summary, num_classes, unlabelled bool [N])``, or None when there is no row.

    ``num_classes`` is what :class:`~partitioners.graph.Graph` infers: the largest class id + 1,
    or the number of columns of a multi-label matrix.
    """
    flags: list[np.ndarray] = []
    top = [-1]

    def labels() -> Iterator[np.ndarray]:
        for values, unlabelled in blocks:
            flags.append(unlabelled)
            if values.ndim == 1 and values.size:
                top[0] = max(top[0], int(values.max()))
            yield values

    summary = write_rows(path, labels(), dtype=None, rows=rows, source=source, what="node label", bar=bar)
    if summary is None:
        return None
    num_classes = summary.shape[1] if len(summary.shape) == 2 else top[0] + 1
    return summary, num_classes, np.concatenate(flags)


def write_split_masks(folder: Path, root: Path, split: str | None, num_nodes: int, chunk_bytes: int,
                      unlabelled: np.ndarray | None, label_file: Path | None) -> str | None:
    """The OGB split files of ``root`` as ``train_mask.npy``, ``val_mask.npy``, ``test_mask.npy``;
    return the split scheme (None when the dataset has no ``split/``).

    As :func:`partitioners.io.read_ogb`: a node without a label (NaN) in a split is an error.
    """
    from ..io.ogb import check_unlabelled, read_split_masks

    masks, files = read_split_masks(root, split, num_nodes, chunk_bytes)
    if not masks:
        return None
    if unlabelled is not None and label_file is not None and unlabelled.any():
        check_unlabelled(unlabelled, masks, files, label_file)
        log.info("%s: %d nodes have no label (NaN); they get label 0 and are in no split", root,
                 int(unlabelled.sum()))
    for name, mask in masks.items():
        save_whole(folder / f"{name}.npy", mask)
    return files["train_mask"].parent.name
