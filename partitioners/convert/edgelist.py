"""Convert a text edge list (plain or gzipped) into an npy-dir, block by block.

The file is parsed with the edge-list reader's own block parser
(:func:`partitioners.io.edgelist.iter_edge_blocks`: same delimiter, header, comment and weight
rules, same messages), and each block goes straight to ``src.npy``/``dst.npy`` (and
``edge_weight.npy``), in the file's order. Ids are taken as they are: non-negative integers,
``num_nodes`` = the largest + 1. Memory: one block of text and its parsed rows.

This module is torch-free.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ..errors import GraphError
from ..io._common import default_name
from ..io.edgelist import edge_layout, iter_edge_blocks
from .sinks import EdgeWriter, progress_bar

__all__ = ["ID_HINT", "convert_edgelist"]

ID_HINT = ("; gnn-dist convert takes the ids as they are (integers >= 0): relabel the file first, or "
           "partition it directly with `gnn-dist partition --input FILE --relabel`")
"""Ends the message about an id that is not an integer >= 0."""


def convert_edgelist(path: Path, folder: Path, *, weighted: bool = False, delimiter: str | None = "auto",
                     header: bool | None = None, chunk_bytes: int, progress: bool) -> dict[str, Any]:
    """Write the edges of ``path`` into ``folder``; return its ``graph.json`` (without the tool keys)."""
    layout = edge_layout(path, delimiter, header, weighted)
    with EdgeWriter(folder, weighted=weighted, bar=progress_bar(progress, "edges", "edge")) as edges:
        for block in iter_edge_blocks(layout, weighted=weighted, chunk_bytes=chunk_bytes, int_hint=ID_HINT):
            edges.add(block.src, block.dst, block.weight)
            del block
        summary = edges.close()
    if summary.num_edges == 0:
        raise GraphError(f"{path}: no edges found (only blank, comment or header lines); an npy-dir "
                         f"needs at least one edge")
    return {"num_nodes": summary.max_id + 1, "name": default_name(path),
            "source": {"num_edges": summary.num_edges, "id_dtype": summary.dtype, "weighted": weighted,
                       "delimiter": "whitespace" if layout.delimiter is None else layout.delimiter,
                       "header_line": layout.header_line or None}}
