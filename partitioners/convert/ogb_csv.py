"""Convert an OGB node-property dataset folder in its CSV layout (what ``--input-format ogb``
reads, :mod:`partitioners.io.ogb`) into an npy-dir, block by block.

``raw/edge.csv.gz`` goes to ``src.npy``/``dst.npy`` in its order (OGB's edges as stored, not
symmetrised), ``raw/node-feat.csv.gz`` to ``features.npy`` (float32) and
``raw/node-label.csv.gz`` to ``labels.npy``, each parsed by the OGB reader's own block parsers
(same checks, same messages); ``raw/edge-feat.csv.gz`` to ``edge_attr.npy`` (float32
``[E, D]``, in the edges' order); the split files become the three masks. Memory: one block of text and its rows, plus one byte per node (masks, "no
label" flags).

Every line is bounded before it is parsed (:mod:`partitioners.io._text`): the lines up to a
file's first data line hold at most 1 MiB each, and that line's width bounds the rest, at most
64 bytes per field (at least 64 KiB); a longer line (a gzip member of a few KB can hold a row of
gigabytes) is one line naming the file and the line, exit code 2, read no further.

This module is torch-free.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

from ..io.edgelist import edge_layout, iter_edge_blocks
from ..io.ogb import find_csv
from .ogb_nodes import csv_features, csv_labels, finish_ogb, stored_num_nodes
from ..io.ogb import iter_feature_blocks
from .sinks import EdgeWriter, progress_bar, write_rows

__all__ = ["convert_ogb_csv"]

log = logging.getLogger(__name__)


def convert_ogb_csv(root: Path, folder: Path, *, split: str | None = None, chunk_bytes: int,
                    progress: bool) -> dict[str, Any]:
    """Write the OGB dataset ``root`` into ``folder``; return its ``graph.json`` (without the tool keys)."""
    raw = root / "raw"
    edge_file = find_csv(raw, "edge")
    if edge_file is None:
        raise FileNotFoundError(f"{raw / 'edge.csv.gz'}: no such file; {root} is not an OGB "
                                f"node-property dataset folder in the CSV layout (expected raw/edge.csv.gz)")
    num_nodes = stored_num_nodes(raw)
    layout = edge_layout(edge_file, ",", False, False)
    with EdgeWriter(folder, weighted=False, bar=progress_bar(progress, "edges", "edge")) as edges:
        for block in iter_edge_blocks(layout, num_nodes=num_nodes, chunk_bytes=chunk_bytes):
            edges.add(block.src, block.dst)
            del block
        summary = edges.close()
    features = csv_features(folder, raw, num_nodes, chunk_bytes, progress)
    labels = csv_labels(folder, raw, num_nodes, chunk_bytes, progress)
    edge_feat = find_csv(raw, "edge-feat")
    if edge_feat is not None:
        write_rows(folder / "edge_attr.npy", iter_feature_blocks(edge_feat, chunk_bytes), dtype="float32",
                   rows=summary.num_edges, source=edge_feat, what="edge feature", unit="edges",
                   bar=progress_bar(progress, "edge features", "edge", summary.num_edges))
    files = {"edges": edge_file, "features": features and features.source, "labels": labels and labels.summary.source,
             "edge_features": edge_feat}
    return finish_ogb(folder, root, num_nodes=num_nodes, edges=summary, features=features, labels=labels,
                      split=split, chunk_bytes=chunk_bytes,
                      files={k: str(v.relative_to(root)) for k, v in files.items() if v is not None})
