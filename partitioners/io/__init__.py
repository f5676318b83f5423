"""Graph readers: text edge lists, numpy/scipy arrays, and OGB dataset folders, into a Graph.

``read_graph(path, fmt=None, **options)`` is the entry point; the per-format readers are public
too. Large text files are parsed in blocks, so memory stays near the size of the final graph.

This package is torch-free.
"""

from __future__ import annotations

from .arrays import npz_kind, read_npy, read_npz, read_scipy_npz
from .edgelist import read_edgelist
from .ogb import is_ogb_dir, ogb_split_schemes, read_ogb
from .read import FORMATS, infer_format, read_graph

__all__ = ["FORMATS", "infer_format", "is_ogb_dir", "npz_kind", "ogb_split_schemes", "read_edgelist",
           "read_graph", "read_npy", "read_npz", "read_ogb", "read_scipy_npz"]
