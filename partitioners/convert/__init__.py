"""``gnn-dist convert``: an input graph into an npy-dir (the out-of-core input layout, ``docs/format.md``).

Edge lists (text, gzip) and OGB node-property datasets (the CSV layout, and the binary
``raw/data.npz`` layout of the large ones) are read block by block and written array by array,
so memory stays bounded by the block size (``chunk_bytes``) plus one byte per node, whatever
the number of edges or the feature width. :func:`convert_graph` is the entry point
(:mod:`.api`); one module per input format; :mod:`.npy_stream` writes a ``.npy`` of unknown
length, :mod:`.npz_stream` reads ``.npz`` members in blocks, :mod:`.sinks` are the arrays'
writers, :mod:`.out_dir` the output folder's atomic install.

This package is torch-free.
"""

from __future__ import annotations

from .api import CONVERT_FORMATS, CONVERTERS, GRAPH_JSON, Converter, convert_graph, infer_convert_format
from .out_dir import is_npy_dir

__all__ = ["CONVERTERS", "CONVERT_FORMATS", "GRAPH_JSON", "Converter", "convert_graph", "infer_convert_format",
           "is_npy_dir"]
