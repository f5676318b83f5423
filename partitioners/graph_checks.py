"""Checks of the arrays a :class:`~partitioners.graph.Graph` holds: node ids, features, labels,
masks. Each returns the array in the dtype the graph stores, or raises
:class:`~partitioners.errors.GraphError` naming the array, the first bad index and its value.

This module is torch-free.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from .chunks import rows_per_step
from .errors import GraphError

__all__ = ["as_int_array", "check_edge_weight", "check_features", "check_ids", "check_labels", "check_mask",
           "check_node_names", "first_bad"]


CHECK_BYTES = 64 << 20
"""Bytes of an array checked per step: the checks of a memory-mapped array (an out-of-core
graph) never make a temporary of the whole array."""


def _row_steps(a: np.ndarray) -> range:
    """Start rows of the steps over ``a``'s first axis, :data:`CHECK_BYTES` at a time."""
    return range(0, a.shape[0], rows_per_step(a, CHECK_BYTES))


def _first_where(a: np.ndarray, test: Any) -> tuple[int, ...] | None:
    """Index of the first element of ``a`` where ``test(chunk)`` (a bool array) is True."""
    steps = _row_steps(a)
    for lo in steps:
        chunk = np.asarray(a[lo:lo + steps.step])
        bad = test(chunk)
        if bad.any():
            idx = tuple(int(i) for i in np.argwhere(bad)[0])
            return (idx[0] + lo, *idx[1:])
    return None


def first_bad(mask: np.ndarray) -> int:
    """Index of the first True of the bool array ``mask`` (which has one)."""
    return int(np.flatnonzero(mask)[0])


def check_ids(name: str, ids: np.ndarray, num_nodes: int) -> None:
    """GraphError unless every id of ``ids`` is in ``[0, num_nodes)``."""
    if ids.size == 0:
        return
    lo, hi = int(ids.min()), int(ids.max())
    if lo < 0:
        i = first_bad(ids < 0)
        raise GraphError(f"{name}[{i}] = {int(ids[i])} is negative; node ids must be in [0, {num_nodes})")
    if hi >= num_nodes:
        i = first_bad(ids >= num_nodes)
        raise GraphError(f"{name}[{i}] = {int(ids[i])} is out of range: num_nodes is {num_nodes}, "
                         f"ids must be in [0, {num_nodes})")


def as_int_array(name: str, a: Any) -> np.ndarray:
    """``a`` as a 1-D integer id array (whole floats converted; int8..int32 kept as they are)."""
    a = np.asarray(a)
    if a.ndim != 1:
        raise GraphError(f"{name} must be a 1-D array of node ids, got shape {a.shape}")
    if a.size and not np.issubdtype(a.dtype, np.integer):
        if np.issubdtype(a.dtype, np.floating) and np.all(np.isfinite(a)) and np.all(a == np.round(a)):
            return a.astype(np.int64)
        raise GraphError(f"{name} must hold integer node ids, got dtype {a.dtype}")
    if a.dtype == np.int64 or (np.issubdtype(a.dtype, np.integer) and a.dtype.itemsize < 8):
        return a  # int8..int32/uint32 are kept: build_csr widens once, into its sort key
    if a.size and int(a.max()) > np.iinfo(np.int64).max:
        i = first_bad(a > np.iinfo(np.int64).max)
        raise GraphError(f"{name}[{i}] = {int(a[i])} does not fit in int64")
    return a.astype(np.int64)


def check_features(x: Any, num_nodes: int) -> np.ndarray:
    """Features as a C-contiguous float32/float16 ``[N, F]`` array of finite values."""
    x = np.asarray(x)
    if x.ndim == 1:
        x = x[:, None]
    if x.ndim != 2:
        raise GraphError(f"features must be 2-D [num_nodes, dim], got shape {x.shape}")
    if x.shape[0] != num_nodes:
        raise GraphError(f"features has {x.shape[0]} rows but the graph has {num_nodes} nodes")
    if x.dtype not in (np.float32, np.float16):
        if not (np.issubdtype(x.dtype, np.floating) or np.issubdtype(x.dtype, np.integer)
                or x.dtype == np.bool_):
            raise GraphError(f"features must be numeric (float32 or float16), got dtype {x.dtype}")
        x = x.astype(np.float32)
    bad = _first_where(x, lambda c: ~np.isfinite(c))
    if bad is not None:
        r, c = bad
        raise GraphError(f"features[{r}, {c}] = {x[r, c]} is not finite (NaN or inf)")
    return np.ascontiguousarray(x)


def check_labels(y: Any, num_nodes: int, num_classes: int | None) -> tuple[np.ndarray, int]:
    """``(labels, num_classes)``: int64 ``[N]`` class ids or a uint8 ``[N, C]`` 0/1 matrix."""
    y = np.asarray(y)
    if y.shape[:1] != (num_nodes,):
        raise GraphError(f"labels has {y.shape[0] if y.ndim else 0} rows but the graph has {num_nodes} nodes")
    if y.ndim == 2:  # multi-label 0/1 matrix
        bad = _first_where(y, lambda c: ~np.isin(c, (0, 1)))
        if bad is not None:
            r, c = bad
            raise GraphError(f"multi-label labels[{r}, {c}] = {y[r, c]}; a multi-label matrix holds only 0 and 1")
        if num_classes is not None and num_classes != y.shape[1]:
            raise GraphError(f"num_classes={num_classes} but the multi-label matrix has {y.shape[1]} columns")
        return y.astype(np.uint8, copy=False), int(y.shape[1])
    if y.ndim != 1:
        raise GraphError(f"labels must be 1-D class ids or a 2-D 0/1 matrix, got shape {y.shape}")
    if y.size and not np.issubdtype(y.dtype, np.integer):
        if np.issubdtype(y.dtype, np.floating) and np.all(y == np.round(y)):
            y = y.astype(np.int64)
        else:
            raise GraphError(f"labels must be integer class ids, got dtype {y.dtype}")
    y = y.astype(np.int64, copy=False)
    inferred = int(y.max()) + 1 if y.size else 0
    if num_classes is None:
        num_classes = inferred
    if y.size and y.min() < 0:
        i = first_bad(y < 0)
        raise GraphError(f"labels[{i}] = {int(y[i])} is negative; class ids must be in [0, {num_classes})")
    if inferred > num_classes:
        i = first_bad(y >= num_classes)
        raise GraphError(f"labels[{i}] = {int(y[i])} is out of range: num_classes is {num_classes}")
    return y, int(num_classes)


def check_mask(name: str, m: Any, num_nodes: int) -> np.ndarray:
    """A bool ``[N]`` mask (0/1 values converted)."""
    m = np.asarray(m)
    if m.ndim != 1 or m.shape[0] != num_nodes:
        raise GraphError(f"{name} has shape {m.shape} but the graph has {num_nodes} nodes; "
                         f"masks are bool [num_nodes] (use Graph.mask_from_index for id lists)")
    if m.dtype != np.bool_:
        bad = _first_where(m, lambda c: ~np.isin(c, (0, 1)))
        if bad is not None:
            i = bad[0]
            raise GraphError(f"{name}[{i}] = {m[i]}; a mask holds only 0/1 or True/False")
        m = m.astype(bool)
    return m


def check_edge_weight(w: Any, num_edges: int, where: str) -> np.ndarray:
    """float32 ``[E]`` edge weights, all finite; ``where`` ends the size message
    (``"the graph has"``, ``"there are"``)."""
    w = np.asarray(w, dtype=np.float32)
    if w.shape != (num_edges,):
        raise GraphError(f"edge_weight has {w.size} entries but {where} {num_edges} edges")
    bad = _first_where(w, lambda c: ~np.isfinite(c))
    if bad is not None:
        i = bad[0]
        raise GraphError(f"edge_weight[{i}] = {w[i]} is not finite")
    return w


def check_node_names(names: Any, num_nodes: int) -> np.ndarray:
    """The input's ids of the nodes: int64 or unicode ``[N]`` (stored without pickle)."""
    names = np.asarray(names)
    if names.shape != (num_nodes,):
        raise GraphError(f"node_names has shape {names.shape} but the graph has {num_nodes} nodes")
    if names.dtype.kind in "iu":
        return names.astype(np.int64)
    if names.dtype.kind == "U":
        return names
    raise GraphError(f"node_names must be integers or unicode strings, got dtype {names.dtype}")
