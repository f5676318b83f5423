"""Read an OGB node-property dataset folder (e.g. ``ogbn-arxiv``) without the ``ogb`` package.

The layout read (each CSV may also be stored uncompressed as ``.csv``)::

    ROOT/
      raw/edge.csv.gz            rows "src,dst" (no header): edge src -> dst, as OGB stores it
      raw/num-node-list.csv.gz   one integer: the number of nodes        (optional)
      raw/node-feat.csv.gz       one row of floats per node               (optional)
      raw/node-label.csv.gz      one class id per node, or C 0/1 columns (multi-label); NaN = no label
      raw/edge-feat.csv.gz       one row of floats per edge, in edge.csv's order (optional): ``edge_attr``
      split/<scheme>/train.csv.gz, valid.csv.gz, test.csv.gz   node ids, one per line

Edges are kept as stored (OGB's ogbn graphs are directed as stored; pass ``symmetrize=True``
for arxiv-style undirected training). Every CSV is parsed in blocks (see
:mod:`partitioners.io._text`), and feature/label rows are written into one preallocated array
when the node count is known, so peak memory stays near the size of the result.

**Unlabelled nodes** (NaN labels, as in ogbn-papers100M): a node whose label is NaN gets label
0 when it is in none of the split's masks, so it never reaches a loss or a metric; a NaN label
on a node in a train/valid/test split raises :class:`GraphError` naming the split file and node.

This module is torch-free.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any, Iterator

import numpy as np

from ..errors import GraphError
from ..graph import Graph
from ._common import build_graph, existing_path
from ._text import DEFAULT_CHUNK_BYTES, TextChunk, detect_layout, iter_chunks
from .edgelist import read_edge_arrays

__all__ = ["check_unlabelled", "decode_labels", "find_csv", "first_non_finite", "is_ogb_dir",
           "iter_feature_blocks", "iter_label_blocks", "ogb_split_schemes", "read_num_nodes",
           "read_ogb", "read_split_masks"]

logger = logging.getLogger(__name__)

_SPLIT_FILES = (("train", "train_mask"), ("valid", "val_mask"), ("test", "test_mask"))


def find_csv(folder: Path, stem: str) -> Path | None:
    """``folder/stem.csv.gz`` or ``folder/stem.csv``, whichever exists."""
    for suffix in (".csv.gz", ".csv"):
        p = folder / f"{stem}{suffix}"
        if p.is_file():
            return p
    return None


def is_ogb_dir(path: str | Path) -> bool:
    """True when ``path`` is a folder holding ``raw/edge.csv.gz`` (or ``raw/edge.csv``)."""
    p = Path(path)
    return p.is_dir() and find_csv(p / "raw", "edge") is not None


def ogb_split_schemes(path: str | Path) -> list[str]:
    """Names of the split schemes under ``path/split`` (sorted; empty when there is none)."""
    split_dir = Path(path) / "split"
    if not split_dir.is_dir():
        return []
    return sorted(d.name for d in split_dir.iterdir() if d.is_dir())


def _table_chunks(path: Path, dtype: Any, chunk_bytes: int, what: str) -> Iterator[TextChunk]:
    layout = detect_layout(path, delimiter=",", header=False)
    if layout.ncols == 0:
        raise GraphError(f"{path}: the {what} file has no data lines")
    return iter_chunks(layout, dtype, chunk_bytes=chunk_bytes)


def _assemble(path: Path, chunks: Iterator[np.ndarray], num_rows: int | None, what: str,
              unit: str = "nodes") -> np.ndarray:
    """Stack per-chunk row arrays; into one preallocated array when ``num_rows`` (of ``unit``) is known."""
    if num_rows is None:
        parts = list(chunks)
        return np.concatenate(parts) if len(parts) > 1 else parts[0]
    out: np.ndarray | None = None
    filled = 0
    for part in chunks:
        if out is None:
            out = np.empty((num_rows,) + part.shape[1:], dtype=part.dtype)
        if filled + part.shape[0] > num_rows:
            raise GraphError(f"{path}: the {what} file has more than {num_rows} rows, but the "
                             f"dataset has {num_rows} {unit}")
        out[filled:filled + part.shape[0]] = part
        filled += part.shape[0]
    if out is None or filled != num_rows:
        raise GraphError(f"{path}: the {what} file has {filled} rows, but the dataset has {num_rows} {unit}")
    return out


def read_num_nodes(path: Path) -> int:
    values = [int(v) for c in _table_chunks(path, np.int64, DEFAULT_CHUNK_BYTES, "node count")
              for v in c.rows.reshape(-1)]
    if len(values) != 1 or values[0] <= 0:
        raise GraphError(f"{path}: expected one positive node count (one graph), found {values}")
    return values[0]


def first_non_finite(rows: np.ndarray) -> tuple[int, int] | None:
    """``(row, column)`` of the first value of ``rows`` that is not finite, or None."""
    bad = ~np.isfinite(rows)
    if not bad.any():
        return None
    r, c = np.argwhere(bad)[0]
    return int(r), int(c)


def iter_feature_blocks(path: Path, chunk_bytes: int) -> Iterator[np.ndarray]:
    """The rows of a node feature CSV, block by block: float32 ``[n, F]``, every value finite."""
    for chunk in _table_chunks(path, np.float32, chunk_bytes, "node feature"):
        bad = first_non_finite(chunk.rows)
        if bad is not None:
            r, c = bad
            raise chunk.fail(r, f"feature {c + 1} is {chunk.rows[r, c]} (not finite)")
        yield chunk.rows


def _read_features(path: Path, num_nodes: int | None, chunk_bytes: int) -> np.ndarray:
    return _assemble(path, iter_feature_blocks(path, chunk_bytes), num_nodes, "node feature")


def decode_labels(values: np.ndarray) -> tuple[np.ndarray, np.ndarray, tuple[int, int, str] | None]:
    """OGB label rows (float ``[n, C]``, NaN = no label) as ``(labels, unlabelled, problem)``.

    ``labels``: int64 ``[n]`` class ids (C = 1) or uint8 ``[n, C]`` 0/1 (multi-label), with 0
    where the label is NaN; ``unlabelled``: bool ``[n]``, a NaN in the row; ``problem``: None,
    or ``(row, column, message)`` of the first value that is neither a label nor NaN.
    """
    v = values
    nan = np.isnan(v)
    known = np.where(nan, 0.0, v)
    if v.shape[1] == 1:
        bad = (known != np.round(known)) | (known < 0) | np.isinf(known)
        why = "is not a class id (a non-negative integer, or NaN for no label)"
    else:
        bad = (known != 0) & (known != 1)
        why = "is not 0 or 1 (multi-label columns), or NaN for no label"
    problem = None
    if bad.any():
        r, c = np.argwhere(bad)[0]
        problem = (int(r), int(c), f"label field {c + 1} = {v[r, c]} {why}")
    labels = known[:, 0].astype(np.int64) if v.shape[1] == 1 else known.astype(np.uint8)
    return labels, nan.any(axis=1), problem


def iter_label_blocks(path: Path, chunk_bytes: int) -> Iterator[tuple[np.ndarray, np.ndarray]]:
    """The rows of a node label CSV, block by block: ``(labels, unlabelled)`` of :func:`decode_labels`."""
    for chunk in _table_chunks(path, np.float64, chunk_bytes, "node label"):
        labels, unlabelled, problem = decode_labels(chunk.rows)
        if problem is not None:
            raise chunk.fail(problem[0], problem[2])
        yield labels, unlabelled


def _read_labels(path: Path, num_nodes: int | None, chunk_bytes: int) -> tuple[np.ndarray, np.ndarray]:
    """``(labels, unlabelled)``: int64 ``[N]`` (or uint8 ``[N, C]``) with 0 where the label is NaN."""
    unlabelled: list[np.ndarray] = []

    def rows() -> Iterator[np.ndarray]:
        for labels, nan in iter_label_blocks(path, chunk_bytes):
            unlabelled.append(nan)
            yield labels

    labels = _assemble(path, rows(), num_nodes, "node label")
    return labels, np.concatenate(unlabelled)


def _read_ids(path: Path, num_nodes: int, chunk_bytes: int) -> np.ndarray:
    parts = []
    for chunk in _table_chunks(path, np.int64, chunk_bytes, "split"):
        if chunk.layout.ncols != 1:
            raise chunk.fail(0, f"a split file holds one node id per line, found {chunk.layout.ncols} fields")
        ids = chunk.rows[:, 0]
        bad = (ids < 0) | (ids >= num_nodes)
        if bad.any():
            r = int(np.flatnonzero(bad)[0])
            raise chunk.fail(r, f"node id {int(ids[r])} is out of range [0, {num_nodes})")
        parts.append(ids)
    return np.concatenate(parts)


def read_split_masks(root: Path, split: str | None, num_nodes: int,
                chunk_bytes: int) -> tuple[dict[str, np.ndarray], dict[str, Path]]:
    schemes = ogb_split_schemes(root)
    if split is None:
        if not schemes:
            logger.info("%s: no split/ folder; the graph gets no train/val/test masks", root)
            return {}, {}
        if len(schemes) > 1:
            raise GraphError(f"{root}: several split schemes {schemes}; choose one with split=")
        split = schemes[0]
    elif split not in schemes:
        raise GraphError(f"{root}: split scheme {split!r} not found; available: {schemes}")
    folder = root / "split" / split
    masks: dict[str, np.ndarray] = {}
    files: dict[str, Path] = {}
    for stem, mask_name in _SPLIT_FILES:
        f = find_csv(folder, stem)
        if f is None:
            raise FileNotFoundError(f"{folder / (stem + '.csv.gz')}: no such file (every split has "
                                    f"train, valid and test)")
        mask = np.zeros(num_nodes, dtype=bool)
        mask[_read_ids(f, num_nodes, chunk_bytes)] = True
        masks[mask_name], files[mask_name] = mask, f
    logger.info("%s: split %r: %d train, %d valid, %d test nodes", root, split,
                *(int(m.sum()) for m in masks.values()))
    return masks, files


def read_ogb(path: str | Path, *, split: str | None = None, chunk_bytes: int = DEFAULT_CHUNK_BYTES,
             **graph_options: Any) -> Graph:
    """Read an OGB node-property dataset folder (layout in the module docstring) into a :class:`Graph`.

    Args:
        path: the dataset folder (the one holding ``raw/`` and ``split/``).
        split: the split scheme under ``split/``. (default: the only one present; an error
            listing them when there are several)
        chunk_bytes: bytes of CSV text parsed at a time. (default: 32 MiB)
        **graph_options: passed to :meth:`Graph.from_edges` (``symmetrize``,
            ``remove_self_loops``, ``remove_duplicates``, ``num_nodes``, ``num_classes``,
            ``name``; the name defaults to the folder's name).

    Raises:
        FileNotFoundError: the folder, ``raw/edge.csv.gz`` or a split file is missing.
        GraphError: a malformed line (naming file, line and text), row counts that disagree
            with the node count, an unknown or ambiguous split scheme, a NaN label on a node
            in a split.
    """
    root = existing_path(path)
    raw = root / "raw"
    edge_file = find_csv(raw, "edge")
    if edge_file is None:
        raise FileNotFoundError(f"{raw / 'edge.csv.gz'}: no such file; {root} is not an OGB "
                                f"node-property dataset folder (expected raw/edge.csv.gz)")
    num_nodes = graph_options.pop("num_nodes", None)
    count_file = find_csv(raw, "num-node-list")
    if count_file is not None:
        stored = read_num_nodes(count_file)
        if num_nodes is not None and num_nodes != stored:
            raise GraphError(f"{count_file}: the dataset has {stored} nodes but num_nodes={num_nodes} was passed")
        num_nodes = stored
    src, dst, _, _ = read_edge_arrays(edge_file, delimiter=",", header=False, num_nodes=num_nodes,
                                      chunk_bytes=chunk_bytes)
    feat_file, label_file = find_csv(raw, "node-feat"), find_csv(raw, "node-label")
    features = None if feat_file is None else _read_features(feat_file, num_nodes, chunk_bytes)
    labels, unlabelled = (None, None) if label_file is None else _read_labels(label_file, num_nodes, chunk_bytes)
    if num_nodes is None:
        sizes = [int(src.max()) + 1 if src.size else 0, int(dst.max()) + 1 if dst.size else 0]
        sizes += [len(a) for a in (features, labels) if a is not None]
        num_nodes = max(sizes)
        if num_nodes == 0:
            raise GraphError(f"{edge_file}: no edges, and no node count in raw/num-node-list.csv.gz")
    edge_feat = find_csv(raw, "edge-feat")
    edge_attr = None if edge_feat is None else _assemble(edge_feat, iter_feature_blocks(edge_feat, chunk_bytes),
                                                         src.size, "edge feature", "edges")
    masks, split_files = read_split_masks(root, split, num_nodes, chunk_bytes)
    if labels is not None and unlabelled is not None and unlabelled.any():
        check_unlabelled(unlabelled, masks, split_files, label_file)  # type: ignore[arg-type]
        logger.info("%s: %d nodes have no label (NaN); they get label 0 and are in no split",
                    root, int(unlabelled.sum()))
    return build_graph(root, src, dst, num_nodes=num_nodes, features=features, labels=labels,
                       edge_attr=edge_attr, **masks, **graph_options)



def check_unlabelled(unlabelled: np.ndarray, masks: dict[str, np.ndarray],
                      split_files: dict[str, Path], label_file: Path) -> None:
    for name, mask in masks.items():
        bad = mask & unlabelled
        if bad.any():
            node = int(np.flatnonzero(bad)[0])
            raise GraphError(f"{split_files[name]}: node {node} is in this split but has no label "
                             f"(NaN in {label_file}); {int(bad.sum())} such nodes")

