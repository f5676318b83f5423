"""Names, version and per-file dtype rules of the partition folder, format version 1.

See ``docs/format.md``: this module is its machine-readable half (file names, which files are
required, and what dtype each must have). Torch-free.
"""

from __future__ import annotations

import numpy as np

__all__ = [
    "FORMAT_NAME", "FORMAT_VERSION", "FORMAT_MINOR_VERSION", "TOOL_NAME", "META_FILE", "NODE_MAP_FILE", "ORIGINAL_NAMES_FILE",
    "INDPTR", "INDICES", "EDGE_WEIGHT", "EDGE_ATTR", "HALO_OFFSETS", "SEND_INDEX", "SEND_OFFSETS",
    "GLOBAL_IDS", "ORIGINAL_IDS", "IN_DEGREE", "OUT_DEGREE", "SELF_LOOPS", "HOTNESS",
    "FEATURES", "LABELS", "MASKS", "LINK_FILES", "REQUIRED_PART_FILES", "OPTIONAL_PART_FILES",
    "LABEL_KINDS", "part_dir_name", "local_index_dtype",
]

FORMAT_NAME = "gnn-dist-partition"
"""Value of ``partition.json``'s ``format`` field."""
FORMAT_VERSION = 1
"""The one major version this code writes and reads."""
FORMAT_MINOR_VERSION = 2
"""The minor version this code writes (``partition.json``'s ``minor_version``; absent = 0) and
the newest it reads. A minor version only adds optional files and fields, so a reader reads
every folder of its major version up to its own minor; 1 added edge features
(:data:`EDGE_ATTR`, ``edge_feature_dim``), 2 the edge split (:data:`LINK_FILES`, ``edge_split``)."""
TOOL_NAME = "gnn-dist"

META_FILE = "partition.json"
NODE_MAP_FILE = "node_map.npy"
ORIGINAL_NAMES_FILE = "original_names.npy"
"""Optional top-level file: int64 or unicode ``[N]``, the input's id of each original id (when
the input's ids were relabelled: ``gnn-dist partition --relabel``)."""

INDPTR = "indptr.npy"
INDICES = "indices.npy"
EDGE_WEIGHT = "edge_weight.npy"
EDGE_ATTR = "edge_attr.npy"
"""Optional (minor version 1), graphs with edge features: float32 ``[E_p, D]``, row ``e`` the
features of the part's CSR edge ``e`` (``D`` = ``edge_feature_dim``)."""
WEIGHTED_DEGREE = "weighted_degree.npy"
"""Optional, weighted graphs: float32 ``[ni + nh, 2]``, each local row's global in-edge weight sum
without self-loops, and its self-loop's weight (0 without one). Written since gnn-dist 0.x for
weighted GCN; folders without it still read (GCN then ignores the weights, with a warning)."""
HALO_OFFSETS = "halo_offsets.npy"
SEND_INDEX = "send_index.npy"
SEND_OFFSETS = "send_offsets.npy"
GLOBAL_IDS = "global_ids.npy"
ORIGINAL_IDS = "original_ids.npy"
IN_DEGREE = "in_degree.npy"
OUT_DEGREE = "out_degree.npy"
SELF_LOOPS = "self_loops.npy"
HOTNESS = "hotness.npy"
FEATURES = "features.npy"
LABELS = "labels.npy"
MASKS = ("train_mask.npy", "val_mask.npy", "test_mask.npy")
LINK_FILES = {"train": "link_train.npy", "val": "link_val.npy", "test": "link_test.npy"}
"""Optional (minor version 2), folders with an edge split (``edge_split``): int64 ``[2, E_s]``
pairs of new global ids, row 0 the source, row 1 the destination (the larger original id),
each pair in the part that owns its destination, sorted by (destination, source)."""

REQUIRED_PART_FILES = (INDPTR, INDICES, HALO_OFFSETS, SEND_INDEX, SEND_OFFSETS, GLOBAL_IDS,
                       ORIGINAL_IDS, IN_DEGREE, OUT_DEGREE, SELF_LOOPS, HOTNESS)
"""Files every part folder has (an empty part included)."""
OPTIONAL_PART_FILES = (EDGE_WEIGHT, WEIGHTED_DEGREE, EDGE_ATTR, FEATURES, LABELS, *MASKS, *LINK_FILES.values())
"""Files a part folder has when the graph has that data (then every part has them;
:data:`WEIGHTED_DEGREE` may be missing from a weighted folder written before it existed)."""

LABEL_KINDS = ("class", "multilabel", "regression", None)
"""``partition.json``'s ``label_kind``: int64 ``[n]`` class ids, uint8 ``[n, C]`` 0/1 labels,
float32 ``[n, D]`` regression targets (``num_classes`` = D), or no labels."""


def part_dir_name(part_id: int) -> str:
    """Folder of part ``part_id`` inside the partition folder: ``part-00000``, ``part-00001``, ..."""
    return f"part-{part_id:05d}"


def local_index_dtype(num_local_rows: int) -> np.dtype:
    """dtype of ``indices.npy`` for a part with ``num_inner + num_halo`` rows (int32 when it fits)."""
    return np.dtype(np.int32) if num_local_rows < 2**31 - 1 else np.dtype(np.int64)
