"""Read a text edge list (CSV, TSV or whitespace-separated; optionally gzipped) into a Graph.

One edge per line, ``src dst`` or ``src dst weight``: the ids in the file are the node ids (no
relabelling), so ``num_nodes`` is ``max(id) + 1`` unless given. Comments (``#``/``%``), blank
lines and one header line are skipped (see :mod:`partitioners.io._text`). The file is parsed in
blocks of ``chunk_bytes``; ids are kept as int32 while they fit, so the parsed edges take
``8 * E`` bytes (``12 * E`` weighted) and the text is never held whole.

With ``relabel=True`` the ids may be any tokens (names, sparse or negative integers): they are
mapped to ``0..N-1`` in sorted order (:mod:`partitioners.io.relabel_ids`) and kept as the
graph's ``node_names``. Integer ids are still parsed as integers; other ids are tokenized as
strings (slower: see ``docs/cli.md``).

Duplicate edges (a ``src dst`` pair on more than one line) are kept, each an edge of its own
(the graph is a multigraph: every copy counts in the aggregation and the degrees), unless
``remove_duplicates`` keeps the first; kept ones are counted and named in one warning line
(:func:`warn_duplicate_edges`, which the other readers of :func:`~.read.read_graph` share).

This module is torch-free.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterator

import numpy as np

from ..errors import GraphError
from ..graph import Graph
from ._common import build_graph, existing_path
from ._text import (DEFAULT_CHUNK_BYTES, NotAnIntegerError, TableLayout, TextChunk, _is_number,
                    detect_layout, iter_chunks)
from .relabel_ids import block_codes, merge_block_names

__all__ = ["EdgeBlock", "count_duplicate_edges", "edge_layout", "iter_edge_blocks", "read_edgelist",
           "read_edge_arrays", "read_edge_names", "warn_duplicate_edges"]

logger = logging.getLogger(__name__)

_INT32_MAX = np.iinfo(np.int32).max

RELABEL_HINT = ("; to read ids that are not integers >= 0 (names, sparse or negative numbers), pass "
                "relabel=True (CLI: --relabel): they are mapped to 0..N-1")
"""Ends the error about an id that is not an integer, or negative, in :func:`read_edgelist`."""


def _narrow(ids: np.ndarray) -> np.ndarray:
    """``ids`` as int32 when every value fits (halves what the chunks hold), else int64."""
    if ids.size == 0 or int(ids.max()) <= _INT32_MAX:
        return ids.astype(np.int32)
    return ids.astype(np.int64, copy=False)


def _check_chunk_ids(chunk: TextChunk, ids: np.ndarray, column: str, num_nodes: int | None,
                     hint: str = "") -> None:
    if ids.size == 0:
        return
    if int(ids.min()) < 0:
        row = int(np.flatnonzero(ids < 0)[0])
        raise chunk.fail(row, f"{column} id {int(ids[row])} is negative; node ids must be >= 0", hint)
    if num_nodes is not None and int(ids.max()) >= num_nodes:
        row = int(np.flatnonzero(ids >= num_nodes)[0])
        raise chunk.fail(row, f"{column} id {int(ids[row])} is out of range: num_nodes is {num_nodes}")


_DUPLICATE_CHUNK = 1 << 22
"""Entries of ``indices`` compared at a time by :func:`count_duplicate_edges`."""


def count_duplicate_edges(indptr: np.ndarray, indices: np.ndarray) -> int:
    """Stored edges that repeat an edge of the graph: the copies beyond the first of each
    ``src -> dst`` pair, counted on the CSR by destination (rows sorted by source, as both CSR
    builders store them), so with no sort: chunk by chunk, memory-mapped arrays too."""
    e = int(indices.shape[0])
    if e < 2:
        return 0
    equal = 0
    for lo in range(1, e, _DUPLICATE_CHUNK):
        a = np.asarray(indices[lo - 1:min(e, lo + _DUPLICATE_CHUNK)])
        equal += int(np.count_nonzero(a[1:] == a[:-1]))
    if equal == 0:
        return 0
    for lo in range(1, int(indptr.shape[0]) - 1, _DUPLICATE_CHUNK):  # neighbours across a row's start
        starts = np.asarray(indptr[lo:lo + _DUPLICATE_CHUNK])
        starts = starts[(starts > 0) & (starts < e)]
        starts = starts[np.concatenate([[True], starts[1:] != starts[:-1]])] if starts.size else starts
        if lo > 1 and starts.size and starts[0] == int(indptr[lo - 1]):
            starts = starts[1:]  # the previous chunk counted it
        equal -= int(np.count_nonzero(np.asarray(indices[starts]) == np.asarray(indices[starts - 1])))
    return equal


def warn_duplicate_edges(path: str | Path, indptr: np.ndarray, indices: np.ndarray) -> int:
    """Count the duplicate edges of a graph's CSR (:func:`count_duplicate_edges`) and, when
    there are any, log one warning naming ``path``, the count and how they are treated; returns
    the count."""
    count = count_duplicate_edges(indptr, indices)
    if count:
        logger.warning("%s: %d duplicate edges (a src -> dst pair that occurs again) are kept as separate "
                       "edges, so each copy counts in the aggregation and the degrees; pass "
                       "remove_duplicates=True (CLI: --remove-duplicates) to keep one of each", path, count)
    return count


def _edge_dtype(ncols: int) -> np.dtype:
    return np.dtype([("src", np.int64), ("dst", np.int64)]
                    + [(f"col{j + 1}", np.float64) for j in range(2, ncols)])


def edge_layout(path: str | Path, delimiter: str | None, header: bool | None,
                weighted: bool, *, warn: bool = True) -> TableLayout:
    """The table's layout, checked for 2 (3 when ``weighted``) fields; warns about unused fields."""
    path = existing_path(path)
    layout = detect_layout(path, delimiter=delimiter, header=header)
    if layout.ncols == 0:
        return layout
    first = layout.where(layout.first_data_line)
    if layout.ncols < 2:
        raise GraphError(f"{first}: an edge line needs 2 fields (src dst), found {layout.ncols}: "
                         f"{layout.first_data_text!r}")
    if weighted and layout.ncols < 3:
        raise GraphError(f"{first}: weighted=True needs a third field (the edge weight), found "
                         f"{layout.ncols} fields: {layout.first_data_text!r}")
    if warn and (layout.ncols > 3 or (layout.ncols == 3 and not weighted)):
        used = 3 if weighted else 2
        logger.warning("%s: lines have %d fields; only the first %d are used, the rest is ignored%s",
                       path, layout.ncols, used, "" if weighted else
                       " (pass weighted=True, CLI: --weighted, to read field 3 as the edge weight)")
    return layout


def _weights(chunk: TextChunk, column: np.ndarray) -> np.ndarray:
    """Field 3 of a block as finite float32 edge weights (a GraphError names a bad line)."""
    w = column.astype(np.float32)
    bad = ~np.isfinite(w)
    if bad.any():
        row = int(np.flatnonzero(bad)[0])
        raise chunk.fail(row, f"edge weight {column[row]} is not finite (or overflows float32)")
    return w


@dataclass(frozen=True, slots=True)
class EdgeBlock:
    """One parsed block of an edge list, its ids checked (see :func:`iter_edge_blocks`)."""

    src: np.ndarray
    """Source ids of the block's lines, int32 when the block's ids fit, else int64."""
    dst: np.ndarray
    """Destination ids, as ``src``."""
    weight: np.ndarray | None
    """Field 3 as finite float32 weights when read ``weighted``, else None."""
    chunk: TextChunk
    """The parsed block (to name a line in an error)."""


def iter_edge_blocks(layout: TableLayout, *, weighted: bool = False, num_nodes: int | None = None,
                     chunk_bytes: int = DEFAULT_CHUNK_BYTES, int_hint: str = "") -> Iterator[EdgeBlock]:
    """The edges of ``layout`` (from :func:`edge_layout`) block by block, in file order.

    Ids are checked per block (negative, or ``>= num_nodes`` when given) so an error names the
    file and line; ``weighted`` reads field 3 as the edge weight (finite float32). ``int_hint``
    ends the error about an id that is not an integer. A consumer that keeps memory flat drops
    its reference to a block before asking for the next.
    """
    if layout.ncols == 0:
        return
    for chunk in iter_chunks(layout, _edge_dtype(layout.ncols), chunk_bytes=chunk_bytes,
                             int_hint=int_hint):
        rows = chunk.rows
        _check_chunk_ids(chunk, rows["src"], "source", num_nodes, int_hint)
        _check_chunk_ids(chunk, rows["dst"], "destination", num_nodes, int_hint)
        block = EdgeBlock(src=_narrow(rows["src"]), dst=_narrow(rows["dst"]),
                          weight=_weights(chunk, rows["col3"]) if weighted else None, chunk=chunk)
        del chunk, rows
        yield block
        del block


def read_edge_arrays(path: str | Path, *, delimiter: str | None = "auto", header: bool | None = None,
                     weighted: bool = False, num_nodes: int | None = None,
                     chunk_bytes: int = DEFAULT_CHUNK_BYTES, int_hint: str = "",
                     ) -> tuple[np.ndarray, np.ndarray, np.ndarray | None, TableLayout]:
    """Parse an edge list into ``(src [E], dst [E], weight float32[E] | None, layout)``.

    Ids are int32 when every id in the file fits, else int64.

    Ids are checked per block (negative, or ``>= num_nodes`` when given) so an error names the
    file and line. ``weighted`` reads column 3 as the edge weight (finite float32).
    ``int_hint`` ends the error about an id that is not an integer.
    """
    layout = edge_layout(path, delimiter, header, weighted)
    srcs: list[np.ndarray] = []
    dsts: list[np.ndarray] = []
    weights: list[np.ndarray] = []
    for block in iter_edge_blocks(layout, weighted=weighted, num_nodes=num_nodes,
                                  chunk_bytes=chunk_bytes, int_hint=int_hint):
        srcs.append(block.src)
        dsts.append(block.dst)
        if block.weight is not None:
            weights.append(block.weight)
        del block
    src = np.concatenate(srcs) if srcs else np.zeros(0, np.int32)
    srcs.clear()
    dst = np.concatenate(dsts) if dsts else np.zeros(0, np.int32)
    dsts.clear()
    weight = None
    if weighted:
        weight = np.concatenate(weights) if weights else np.zeros(0, np.float32)
    return src, dst, weight, layout


def _float_column(chunk: TextChunk, column: np.ndarray) -> np.ndarray:
    """Text field 3 of a block as float64; a GraphError names the first line that is not a number."""
    try:
        return column.astype(np.float64)
    except ValueError:
        for row, token in enumerate(column):
            try:
                float(token)
            except ValueError:
                raise chunk.fail(row, f"field 3 ({str(token)!r}) is not a number") from None
        raise


def _read_int_codes(layout: TableLayout, weighted: bool, chunk_bytes: int,
                    ) -> tuple[np.ndarray, np.ndarray, np.ndarray | None, np.ndarray, TableLayout] | None:
    """:func:`read_edge_names` of a file whose ids are all integers, parsed as integers (fast);
    None when an id is not an integer (then the file is read as text)."""
    if layout.ncols == 0:
        return None
    blocks: list[tuple[np.ndarray, np.ndarray]] = []
    weights: list[np.ndarray] = []
    try:
        for chunk in iter_chunks(layout, _edge_dtype(layout.ncols), chunk_bytes=chunk_bytes):
            rows = chunk.rows
            blocks.append(block_codes(np.stack([rows["src"], rows["dst"]], axis=1)))
            if weighted:
                weights.append(_weights(chunk, rows["col3"]))
            del chunk, rows
    except NotAnIntegerError:
        return None
    names, codes = merge_block_names(blocks)
    codes = codes.reshape(-1, 2)
    weight = (np.concatenate(weights) if weights else np.zeros(0, np.float32)) if weighted else None
    return codes[:, 0].copy(), codes[:, 1].copy(), weight, names.astype(np.int64, copy=False), layout


def read_edge_names(path: str | Path, *, delimiter: str | None = "auto", header: bool | None = None,
                    weighted: bool = False, chunk_bytes: int = DEFAULT_CHUNK_BYTES,
                    ) -> tuple[np.ndarray, np.ndarray, np.ndarray | None, np.ndarray, TableLayout]:
    """Parse an edge list whose ids are any tokens: ``(src [E], dst [E], weight | None, names [N], layout)``.

    ``src``/``dst`` are codes ``0..N-1`` into ``names``, the distinct ids in sorted order (int64
    when all are decimal integers, else unicode): see :mod:`partitioners.io.relabel_ids`.

    ``header=None``: names are not numbers, so a first line without a numeric field is a
    header only when no data line could be one: when its weight field is not a number
    (``weighted``), or when neither of its two ids occurs on any other line (``source,target``).
    A skipped header is logged.
    """
    int_ids = _read_int_codes(edge_layout(path, delimiter, header, weighted), weighted, chunk_bytes)
    if int_ids is not None:
        return int_ids
    auto = header is None
    layout = edge_layout(path, delimiter, False if auto else header, weighted, warn=False)
    blocks: list[tuple[np.ndarray, np.ndarray]] = []
    weights: list[np.ndarray] = []
    header_row = could_be_header = False
    for chunk in iter_chunks(layout, str, chunk_bytes=chunk_bytes) if layout.ncols else ():
        rows = chunk.rows
        if rows.size == 0:
            continue
        if auto and not blocks:  # a header has no number (as without relabel)
            could_be_header = not any(_is_number(str(t)) for t in rows[0])
            if could_be_header and weighted:
                header_row = True  # a data line's weight is a number
                rows = rows.copy()
                rows[0, 2] = "0"
        blocks.append(block_codes(rows[:, :2]))
        if weighted:
            weights.append(_weights(chunk, _float_column(chunk, rows[:, 2])))
        del chunk, rows
    names, codes = merge_block_names(blocks)
    blocks.clear()
    codes = codes.reshape(-1, 2)
    weight = None
    if weighted:
        weight = np.concatenate(weights) if weights else np.zeros(0, np.float32)
    if could_be_header and (header_row or not ((codes[1:] == codes[0, 0]) | (codes[1:] == codes[0, 1])).any()):
        logger.info("%s: line %d (%r) is taken as a header and skipped (%s)", layout.path,
                    layout.first_data_line, layout.first_data_text,
                    "its weight field is not a number" if header_row else "neither id occurs elsewhere")
        codes = codes[1:]
        weight = None if weight is None else weight[1:]
        used = np.unique(codes)
        names = names[used]
        codes = np.searchsorted(used, codes).astype(codes.dtype)
    return codes[:, 0].copy(), codes[:, 1].copy(), weight, names, layout


def read_edgelist(path: str | Path, *, delimiter: str | None = "auto", header: bool | None = None,
                  weighted: bool = False, relabel: bool = False, chunk_bytes: int = DEFAULT_CHUNK_BYTES,
                  **graph_options: Any) -> Graph:
    """Read a text edge list (plain or gzipped) into a :class:`Graph`.

    Args:
        path: the file; gzip is detected from its first bytes.
        delimiter: ``"auto"`` (comma if the first data line has one, else whitespace), or the
            separator; ``" "`` or None mean any whitespace. (default: ``"auto"``)
        header: None detects a header line (first non-comment line with no numeric field);
            True/False force it. (default: None)
        weighted: read field 3 as the edge weight. (default: False)
        relabel: the ids are any tokens, mapped to ``0..N-1`` in sorted order (numeric when all
            are integers); the graph's ``node_names`` keeps them. Node data passed in
            ``graph_options`` is indexed by that order. (default: False)
        chunk_bytes: bytes of text parsed at a time. (default: 32 MiB)
        **graph_options: passed to :meth:`Graph.from_edges` (``num_nodes``, ``symmetrize``,
            ``remove_self_loops``, ``remove_duplicates``, ``num_classes``, ``name``; the name
            defaults to the file name without its extensions).

    Duplicate edges are kept (unless ``remove_duplicates``) and counted in one warning line.

    Raises:
        FileNotFoundError: ``path`` does not exist.
        GraphError: a malformed line (the message names the file, line number and text), a
            negative or non-integer id without ``relabel``, an id ``>= num_nodes``, a non-finite
            weight, or a file with no edge when ``num_nodes`` is not given.
    """
    num_nodes = graph_options.get("num_nodes")
    names = None
    if relabel:
        if num_nodes is not None:
            raise GraphError(f"{path}: relabel=True numbers the nodes that have edges; it does not "
                             f"take num_nodes={num_nodes}")
        src, dst, weight, names, layout = read_edge_names(path, delimiter=delimiter, header=header,
                                                          weighted=weighted, chunk_bytes=chunk_bytes)
    else:
        src, dst, weight, layout = read_edge_arrays(path, delimiter=delimiter, header=header,
                                                    weighted=weighted, num_nodes=num_nodes,
                                                    chunk_bytes=chunk_bytes, int_hint=RELABEL_HINT)
    if src.size == 0 and num_nodes is None:
        raise GraphError(f"{layout.path}: no edges found (only blank, comment or header lines); "
                         f"pass num_nodes= to read an edgeless graph")
    logger.info("%s: read %d edges%s", layout.path, src.size,
                "" if names is None else f" between {names.size} distinct ids (relabelled 0..{names.size - 1})")
    graph = build_graph(layout.path, src, dst, edge_weight=weight, node_names=names, **graph_options)
    if not graph_options.get("remove_duplicates"):
        warn_duplicate_edges(layout.path, graph.indptr, graph.indices)
    return graph
