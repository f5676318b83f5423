"""Graph readers: text edge lists, numpy/scipy arrays, OGB and Planetoid dataset folders, and a
partition folder read back by original ids (:mod:`.partition_input`), into a Graph.

``read_graph(path, fmt=None, **options)`` is the entry point; the per-format readers are public
too. Large text files are parsed in blocks, so memory stays near the size of the final graph.
Node data from ``.npy`` files (:func:`attach_node_data`) and a random split
(:func:`with_random_split`) can be added to any graph read. Pickled inputs (Planetoid) go
through :func:`partitioners.io.safe_pickle.restricted_load` (an allow-list; imported on use, as
it imports scipy).

This package is torch-free.
"""

from __future__ import annotations

from .arrays import npz_kind, read_npy, read_npz, read_scipy_npz
from .edgelist import read_edgelist
from .node_data import NodeDataFiles, attach_node_data
from .ogb import is_ogb_dir, ogb_split_schemes, read_ogb
from .planetoid import is_planetoid_dir, planetoid_names, read_planetoid
from .read import FORMATS, infer_format, read_graph
from .split import with_random_split

__all__ = ["FORMATS", "NodeDataFiles", "attach_node_data", "infer_format", "is_ogb_dir",
           "is_planetoid_dir", "npz_kind", "ogb_split_schemes", "planetoid_names",
           "read_edgelist", "read_graph", "read_npy", "read_npz", "read_ogb", "read_planetoid",
           "read_scipy_npz", "with_random_split"]
