"""Read graphs stored as numpy arrays (``.npz``/``.npy``) or as a scipy sparse ``.npz``.

Array ``.npz`` keys (nothing is unpickled):
  ``src``, ``dst``            int ``[E]``: edge ``src[i] -> dst[i]``; or
  ``edge_index``              int ``[2, E]``: row 0 = sources (PyG's layout)
  ``x`` or ``features``       float ``[N, F]``
  ``y`` or ``labels``         int ``[N]`` (``[N, 1]`` is squeezed) or 0/1 ``[N, C]``, or float
                              ``[N]``/``[N, D]`` regression targets (float32 ``[N, D]`` stored)
  ``train_mask``, ``val_mask``, ``test_mask``   bool ``[N]``
  ``edge_weight``             float ``[E]``
  ``edge_attr``               float ``[E, D]`` (or ``[E]``): edge features, in edge order
  ``num_nodes``, ``num_classes``                scalars
Other keys are ignored with a warning.

A ``.npy`` edge list is int ``[2, E]`` or ``[E, 2]`` (``[2, 2]`` is read as ``[2, E]``); with
``relabel=True`` its ids may be any integers, mapped to ``0..N-1`` in sorted order.

A scipy ``.npz`` (``scipy.sparse.save_npz``) is a square adjacency matrix whose entry ``[u, v]``
is the edge ``u -> v``; stored values become edge weights with ``weighted=True``.

This module is torch-free.
"""

from __future__ import annotations

import logging
import zipfile
from pathlib import Path
from typing import Any

import numpy as np

from ..errors import GraphError
from ..graph import Graph
from ._common import build_graph, default_name, existing_path
from .relabel_ids import relabel_int_ids

__all__ = ["npz_kind", "read_npy", "read_npz", "read_scipy_npz"]

logger = logging.getLogger(__name__)

_ALIASES = {"x": "features", "features": "features", "y": "labels", "labels": "labels",
            "train_mask": "train_mask", "val_mask": "val_mask", "test_mask": "test_mask",
            "edge_weight": "edge_weight", "edge_attr": "edge_attr"}
_EDGE_KEYS = ("src", "dst", "edge_index")
_SCALAR_KEYS = ("num_nodes", "num_classes")
_SCIPY_KEYS = frozenset({"format", "shape"})


def _open_npz(path: Path) -> Any:
    try:
        return np.load(path, allow_pickle=False)
    except (zipfile.BadZipFile, ValueError, OSError, EOFError) as e:
        raise GraphError(f"{path}: not a readable .npz file ({e})") from e


def _array(path: Path, z: Any, key: str) -> np.ndarray:
    try:
        return z[key]
    except ValueError as e:  # an object array, which would need pickle
        raise GraphError(f"{path}: array {key!r} cannot be read without pickle; store plain numeric arrays") from e


def npz_kind(path: str | Path) -> str:
    """``"scipy"`` for a ``scipy.sparse.save_npz`` file, else ``"npz"`` (named arrays)."""
    p = existing_path(path)
    with _open_npz(p) as z:
        keys = set(z.files)
    return "scipy" if _SCIPY_KEYS <= keys and not keys & set(_EDGE_KEYS) else "npz"


def _scalar(path: Path, z: Any, key: str) -> int | None:
    if key not in z.files:
        return None
    a = _array(path, z, key)
    if a.size != 1 or not (np.issubdtype(a.dtype, np.integer) or float(a.reshape(-1)[0]).is_integer()):
        raise GraphError(f"{path}: {key!r} must be one integer, got {a.dtype} array of shape {a.shape}")
    return int(a.reshape(-1)[0])


def read_npz(path: str | Path, **graph_options: Any) -> Graph:
    """Read a ``.npz`` of named arrays (keys in the module docstring) into a :class:`Graph`.

    ``graph_options`` go to :meth:`Graph.from_edges`; ``num_nodes``/``num_classes`` given there
    must agree with the file's. Raises GraphError naming the file and key for a missing,
    ambiguous or malformed array, FileNotFoundError when ``path`` does not exist.
    """
    p = existing_path(path)
    with _open_npz(p) as z:
        keys = set(z.files)
        if _SCIPY_KEYS <= keys and not keys & set(_EDGE_KEYS):
            raise GraphError(f"{p}: this is a scipy.sparse.save_npz file (keys {sorted(keys)}); "
                             f"read it with fmt='scipy'")
        if "edge_index" in keys and keys & {"src", "dst"}:
            raise GraphError(f"{p}: has both 'edge_index' and 'src'/'dst'; keep one edge representation")
        if "edge_index" in keys:
            ei = _array(p, z, "edge_index")
            if ei.ndim != 2 or ei.shape[0] != 2:
                raise GraphError(f"{p}: 'edge_index' must have shape [2, E], got {ei.shape}")
            src, dst = ei[0], ei[1]
        elif {"src", "dst"} <= keys:
            src, dst = _array(p, z, "src"), _array(p, z, "dst")
        else:
            raise GraphError(f"{p}: no edges: expected arrays 'src' and 'dst', or 'edge_index'; "
                             f"found keys {sorted(keys)}")
        data: dict[str, np.ndarray] = {}
        for key in sorted(keys):
            field = _ALIASES.get(key)
            if field is None:
                continue
            if field in data:
                names = sorted(k for k, v in _ALIASES.items() if v == field)
                raise GraphError(f"{p}: two arrays give the {field}; keep one of {names}")
            data[field] = _array(p, z, key)
        for key in _SCALAR_KEYS:
            value = _scalar(p, z, key)
            if value is None:
                continue
            given = graph_options.get(key)
            if given is not None and given != value:
                raise GraphError(f"{p}: the file says {key}={value} but {key}={given} was passed")
            graph_options[key] = value
        ignored = sorted(keys - set(_ALIASES) - set(_EDGE_KEYS) - set(_SCALAR_KEYS))
    if ignored:
        logger.warning("%s: ignoring arrays %s (not part of the graph layout)", p, ignored)
    labels = data.get("labels")
    if labels is not None and labels.ndim == 2 and labels.shape[1] == 1:
        data["labels"] = labels[:, 0]
    return build_graph(p, src, dst, **data, **graph_options)


def read_npy(path: str | Path, *, relabel: bool = False, **graph_options: Any) -> Graph:
    """Read a ``.npy`` edge list of shape ``[2, E]`` or ``[E, 2]`` into a :class:`Graph`.

    ``relabel``: the ids are any integers (sparse, negative), mapped to ``0..N-1`` in sorted
    order and kept as the graph's ``node_names``.
    """
    p = existing_path(path)
    try:
        a = np.load(p, mmap_mode="r", allow_pickle=False)
    except ValueError as e:
        raise GraphError(f"{p}: not a readable .npy array ({e})") from e
    if not isinstance(a, np.ndarray) or a.ndim != 2 or 2 not in a.shape:
        shape = getattr(a, "shape", None)
        raise GraphError(f"{p}: a .npy edge list must have shape [2, E] or [E, 2], got {shape}")
    if a.shape[0] == 2:
        src, dst = a[0], a[1]
    else:
        src, dst = a[:, 0], a[:, 1]
    src, dst = np.asarray(src), np.asarray(dst)
    if relabel:
        if not np.issubdtype(a.dtype, np.integer):
            raise GraphError(f"{p}: relabel=True takes integer ids, got dtype {a.dtype}")
        src, dst, names = relabel_int_ids(src, dst)
        graph_options["node_names"] = names
    return build_graph(p, src, dst, **graph_options)


def read_scipy_npz(path: str | Path, *, weighted: bool = False, **graph_options: Any) -> Graph:
    """Read a ``scipy.sparse.save_npz`` adjacency (entry ``[u, v]`` = edge ``u -> v``).

    Every stored entry is an edge (explicit zeros too); ``weighted`` keeps the values as
    ``edge_weight``.
    """
    import scipy.sparse as sp

    p = existing_path(path)
    try:
        adj = sp.load_npz(p)
    except (ValueError, OSError, KeyError, zipfile.BadZipFile) as e:
        raise GraphError(f"{p}: not a scipy.sparse.save_npz file ({e})") from e
    if adj.shape[0] != adj.shape[1]:
        raise GraphError(f"{p}: the adjacency matrix must be square, got shape {adj.shape}")
    num_nodes = graph_options.pop("num_nodes", None)
    if num_nodes is not None and num_nodes != adj.shape[0]:
        raise GraphError(f"{p}: the matrix has {adj.shape[0]} rows but num_nodes={num_nodes} was passed")
    if not graph_options.get("name"):
        graph_options["name"] = default_name(p)
    try:
        return Graph.from_scipy(adj, use_weights=weighted, **graph_options)
    except GraphError as e:
        raise GraphError(f"{p}: {e}") from e
