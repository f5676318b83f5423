"""Helpers shared by the readers: path checks, default names, and the final Graph build.

This module is torch-free.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from ..errors import GraphError
from ..graph import Graph

__all__ = ["GRAPH_OPTIONS", "NODE_DATA_OPTIONS", "build_graph", "default_name", "existing_path"]

GRAPH_OPTIONS = frozenset({"num_nodes", "symmetrize", "remove_self_loops", "remove_duplicates",
                           "num_classes", "name", "label_kind"})
"""Options every reader passes to :meth:`Graph.from_edges` (``label_kind``: what the input's
labels hold, :attr:`Graph.label_kind`; None infers it)."""

NODE_DATA_OPTIONS = frozenset({"features", "labels", "train_mask", "val_mask", "test_mask"})
"""Node data a caller may attach when the file itself holds none (edge lists, .npy, scipy)."""

_NAME_SUFFIXES = (".gz", ".csv", ".tsv", ".txt", ".edgelist", ".edges", ".el", ".npz", ".npy")


def existing_path(path: str | Path) -> Path:
    """``path`` as a Path; FileNotFoundError naming it when it does not exist."""
    p = Path(path)
    if not p.exists():
        raise FileNotFoundError(f"{p}: no such file or directory")
    return p


def default_name(path: Path) -> str:
    """The file (or folder) name without its data extensions: ``edges.txt.gz`` -> ``edges``."""
    name = path.name
    while True:
        for suffix in _NAME_SUFFIXES:
            if name.lower().endswith(suffix) and len(name) > len(suffix):
                name = name[: -len(suffix)]
                break
        else:
            return name


def build_graph(path: Path, src: np.ndarray, dst: np.ndarray, **kwargs: Any) -> Graph:
    """:meth:`Graph.from_edges` with ``name`` defaulting to the file's name and errors prefixed by ``path``."""
    if not kwargs.get("name"):
        kwargs["name"] = default_name(path)
    try:
        return Graph.from_edges(src, dst, **kwargs)
    except GraphError as e:
        raise GraphError(f"{path}: {e}") from e
