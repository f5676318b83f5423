"""The node side of an OGB dataset in an npy-dir: features, labels, the split's masks, ``graph.json``.

Shared by the two OGB layouts (:mod:`.ogb_csv`, :mod:`.ogb_npz`). The rules are those of
:func:`partitioners.io.read_ogb`: the node count is ``raw/num-node-list`` when present, else
the largest of (largest id + 1, feature rows, label rows); every node-data file has one row per
node; a NaN label means "no label": the node gets label 0 and may be in no split (a NaN label
on a node of a train/valid/test file is an error naming both files).

This module is torch-free.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterator

import numpy as np

from ..errors import GraphError
from ..io._common import default_name
from ..io.ogb import find_csv, iter_feature_blocks, iter_label_blocks, read_num_nodes
from .sinks import EdgeSummary, RowsSummary, progress_bar, write_labels, write_rows, write_split_masks

__all__ = ["LabelResult", "csv_features", "csv_labels", "finish_ogb", "stored_num_nodes",
           "write_label_blocks"]


@dataclass(frozen=True, slots=True)
class LabelResult:
    summary: RowsSummary
    num_classes: int
    unlabelled: np.ndarray
    """bool [N]: the nodes whose label is NaN."""


def stored_num_nodes(raw: Path) -> int | None:
    """The node count of ``raw/num-node-list.csv(.gz)``, or None without that file."""
    count_file = find_csv(raw, "num-node-list")
    return None if count_file is None else read_num_nodes(count_file)


def csv_features(folder: Path, raw: Path, num_nodes: int | None, chunk_bytes: int,
                 progress: bool) -> RowsSummary | None:
    """``raw/node-feat.csv(.gz)`` streamed into ``features.npy`` (float32); None without the file."""
    feat_file = find_csv(raw, "node-feat")
    if feat_file is None:
        return None
    return write_rows(folder / "features.npy", iter_feature_blocks(feat_file, chunk_bytes), dtype=np.float32,
                      rows=num_nodes, source=feat_file, what="node feature",
                      bar=progress_bar(progress, "features", "node", num_nodes))


def write_label_blocks(folder: Path, blocks: Iterator[tuple[np.ndarray, np.ndarray]], source: Path,
                       num_nodes: int | None, progress: bool) -> LabelResult | None:
    """Decoded label blocks into ``labels.npy``."""
    written = write_labels(folder / "labels.npy", blocks, rows=num_nodes, source=source,
                           bar=progress_bar(progress, "labels", "node", num_nodes))
    return None if written is None else LabelResult(*written)


def csv_labels(folder: Path, raw: Path, num_nodes: int | None, chunk_bytes: int,
               progress: bool) -> LabelResult | None:
    """``raw/node-label.csv(.gz)`` streamed into ``labels.npy``; None without the file."""
    label_file = find_csv(raw, "node-label")
    if label_file is None:
        return None
    return write_label_blocks(folder, iter_label_blocks(label_file, chunk_bytes), label_file, num_nodes,
                              progress)


def _node_count(root: Path, num_nodes: int | None, edges: EdgeSummary,
                node_files: list[tuple[str, RowsSummary]]) -> int:
    if num_nodes is not None:
        return num_nodes  # the writers checked every row count against it
    num_nodes = max([edges.max_id + 1] + [s.rows for _, s in node_files])
    if num_nodes == 0:
        raise GraphError(f"{root}: no edges and no node data, and no node count in raw/num-node-list")
    for what, summary in node_files:
        if summary.rows != num_nodes:
            raise GraphError(f"{summary.source}: the {what} file has {summary.rows} rows, but the dataset has "
                             f"{num_nodes} nodes (the largest node id + 1)")
    return num_nodes


def finish_ogb(folder: Path, root: Path, *, num_nodes: int | None, edges: EdgeSummary,
               features: RowsSummary | None, labels: LabelResult | None, split: str | None,
               chunk_bytes: int, files: dict[str, str]) -> dict[str, Any]:
    """The node count, the split's masks, and the ``graph.json`` of an OGB dataset's npy-dir.

    ``files``: what was read, by role (``{"edges": "raw/edge.csv.gz", ...}``), recorded in the
    ``source`` section.
    """
    node_files = [("node feature", features)] if features is not None else []
    if labels is not None:
        node_files.append(("node label", labels.summary))
    n = _node_count(root, num_nodes, edges, node_files)
    scheme = write_split_masks(folder, root, split, n, chunk_bytes,
                               None if labels is None else labels.unlabelled,
                               None if labels is None else labels.summary.source)
    meta: dict[str, Any] = {"num_nodes": n, "name": default_name(root)}
    if labels is not None:
        meta["num_classes"] = labels.num_classes
    meta["source"] = {"num_edges": edges.num_edges, "id_dtype": edges.dtype, "split": scheme,
                      "files": {k: str(v) for k, v in files.items()},
                      "unlabelled_nodes": None if labels is None else int(labels.unlabelled.sum())}
    return meta
