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

__all__ = ["as_int_array", "check_edge_attr", "check_edge_weight", "check_features", "check_ids", "check_labels", "check_link_pairs",
           "check_mask", "check_node_names", "check_targets", "first_bad", "label_kind_of", "LABEL_KINDS"]


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


LABEL_KINDS = ("class", "multilabel", "regression")
"""What labels can be: class ids, a 0/1 multi-label matrix, or real-valued regression targets."""


def label_kind_of(y: np.ndarray | None) -> str | None:
    """The kind of labels stored as a :class:`~partitioners.graph.Graph` stores them (after
    :func:`check_labels`): float32 ``[N, D]`` regression targets, uint8 ``[N, C]`` multi-label,
    int64 ``[N]`` class ids; None without labels."""
    if y is None:
        return None
    if np.issubdtype(y.dtype, np.floating):
        return "regression"
    return "multilabel" if y.ndim == 2 else "class"


def _infer_label_kind(y: np.ndarray) -> str:
    """The kind of labels given as ``y`` when none is named: integers (and bools) are class ids
    (``[N]``) or a 0/1 matrix (``[N, C]``); floats are read as those when their values are (whole
    numbers ``[N]``, only 0 and 1 ``[N, C]``: how PyG and numpy users often store them), and as
    regression targets otherwise."""
    if not np.issubdtype(y.dtype, np.floating):
        return "multilabel" if y.ndim == 2 else "class"
    if y.ndim == 1 and y.size and _first_where(y, lambda c: ~(c == np.round(c))) is None:
        return "class"
    if y.ndim == 2 and _first_where(y, lambda c: ~np.isin(c, (0, 1))) is None:
        return "multilabel"
    return "regression"


def check_targets(y: np.ndarray, num_classes: int | None) -> tuple[np.ndarray, int]:
    """``(targets, D)``: regression targets as a float32 ``[N, D]`` array of finite values (a 1-D
    ``[N]`` becomes ``[N, 1]``; a float32 input, a memory map included, is kept as it is)."""
    if y.ndim not in (1, 2) or (y.ndim == 2 and y.shape[1] == 0):
        raise GraphError(f"regression targets must be [num_nodes] or [num_nodes, D] with D >= 1, got shape {y.shape}")
    if not (np.issubdtype(y.dtype, np.floating) or np.issubdtype(y.dtype, np.integer) or y.dtype == np.bool_):
        raise GraphError(f"regression targets must be numbers, got dtype {y.dtype}")
    if np.issubdtype(y.dtype, np.floating):
        bad = _first_where(y, lambda c: ~np.isfinite(c))
        if bad is not None:
            where = ", ".join(str(i) for i in bad)
            raise GraphError(f"labels[{where}] = {y[bad]} is not finite (NaN or inf); regression targets must be "
                             f"finite: drop or fill the nodes without a target")
    y = y.reshape(-1, 1) if y.ndim == 1 else y
    if y.dtype != np.float32:
        y = y.astype(np.float32)
    width = int(y.shape[1])
    if num_classes is not None and num_classes != width:
        raise GraphError(f"num_classes={num_classes} but the regression targets have {width} columns "
                         f"(for regression num_classes is the target width D)")
    return y, width


def check_labels(y: Any, num_nodes: int, num_classes: int | None,
                 kind: str | None = None) -> tuple[np.ndarray, int]:
    """``(labels, num_classes)``: int64 ``[N]`` class ids, a uint8 ``[N, C]`` 0/1 matrix, or
    float32 ``[N, D]`` regression targets (``num_classes`` is then ``D``). ``kind`` (one of
    :data:`LABEL_KINDS`) says whether ``y`` holds regression targets or categories (``class`` and
    ``multilabel`` alike: which of them is ``y``'s shape, ``[N]`` or ``[N, C]``, so a graph
    copied with ``dataclasses.replace(g, y=...)`` may change between them); None infers it
    (:func:`_infer_label_kind`)."""
    y = np.asarray(y)
    if y.shape[:1] != (num_nodes,):
        raise GraphError(f"labels has {y.shape[0] if y.ndim else 0} rows but the graph has {num_nodes} nodes")
    if kind is not None and kind not in LABEL_KINDS:
        raise GraphError(f"label_kind={kind!r} is not one of {', '.join(LABEL_KINDS)}")
    kind = kind or _infer_label_kind(y)
    if kind == "regression":
        return check_targets(y, num_classes)
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


def check_edge_attr(a: Any, num_edges: int, where: str) -> np.ndarray:
    """float32 ``[E, D]`` edge features (``D >= 1``; ``[E]`` is read as ``[E, 1]``), all finite;
    ``where`` ends the size message (``"the graph has"``, ``"there are"``)."""
    a = np.asarray(a)
    if a.ndim == 1:
        a = a.reshape(-1, 1)
    if a.ndim != 2 or a.shape[0] != num_edges or a.shape[1] < 1:
        raise GraphError(f"edge_attr has shape {list(a.shape)} but {where} {num_edges} edges; "
                         f"edge features are [num_edges, D] with D >= 1")
    if not (np.issubdtype(a.dtype, np.number) or a.dtype == np.bool_) or np.issubdtype(a.dtype, np.complexfloating):
        raise GraphError(f"edge_attr must hold real numbers, got dtype {a.dtype}")
    a = a.astype(np.float32, copy=False)
    bad = _first_where(a, lambda c: ~np.isfinite(c))
    if bad is not None:
        raise GraphError(f"edge_attr[{bad[0]}, {bad[1]}] = {a[bad]} is not finite")
    return a


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


def check_link_pairs(pairs: Any, num_nodes: int) -> dict[str, np.ndarray]:
    """An edge split's pairs (:attr:`Graph.link_pairs`): ``train``, ``val``, ``test`` -> int64
    ``[2, E_s]`` node ids, row 0 below row 1."""
    if not isinstance(pairs, dict) or sorted(pairs) != ["test", "train", "val"]:
        raise GraphError(f"link_pairs must map 'train', 'val', 'test' to [2, E] arrays, got "
                         f"{sorted(pairs) if isinstance(pairs, dict) else type(pairs).__name__}")
    out = {}
    for kind, a in pairs.items():
        a = np.asarray(a)
        if a.ndim != 2 or a.shape[0] != 2 or not (a.size == 0 or np.issubdtype(a.dtype, np.integer)):
            raise GraphError(f"link_pairs[{kind!r}] must be integer node ids of shape [2, E], got "
                             f"{a.dtype}{list(a.shape)}")
        check_ids(f"link_pairs[{kind!r}]", a.reshape(-1), num_nodes)
        if np.any(a[0] >= a[1]):
            raise GraphError(f"link_pairs[{kind!r}]: every pair (u, v) must have u < v (oriented by id)")
        out[kind] = a.astype(np.int64, copy=False)
    return out
