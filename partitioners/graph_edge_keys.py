"""Edge features taken from the named edge attributes of a networkx or DGL graph.

:meth:`Graph.from_networkx(edge_attr_key=...) <partitioners.graph.Graph.from_networkx>` and
:meth:`Graph.from_dgl(edge_attr_key=...) <partitioners.graph.Graph.from_dgl>` build
``edge_attr`` from them, one row per edge in the order the adapter lists the edges:

* networkx: each named data key of every edge holds a number or a sequence of numbers; the
  keys' values, flattened, are laid side by side, so keys ``("w", "v")`` with ``w`` a number
  and ``v`` a pair give rows ``[w, v0, v1]`` (``D = 3``). Every edge needs every key, with the
  same width each time.
* DGL: ``g.edata[key]``, ``[E]`` or ``[E, D]``, in edge-id order (the order of ``g.edges()``).

A missing key or a value of another width or kind is a GraphError naming the edge and the key.
This module is torch-free (a DGL tensor is read through ``.detach().cpu().numpy()``).
"""

from __future__ import annotations

from typing import Any, Sequence

import numpy as np

from .errors import GraphError

__all__ = ["dgl_edge_rows", "networkx_edge_rows", "no_edge_attr_given"]


def no_edge_attr_given(kwargs: dict[str, Any]) -> None:
    """GraphError when an adapter is given ``edge_attr_key`` and an ``edge_attr`` array both."""
    if kwargs.get("edge_attr") is not None:
        raise GraphError("pass edge_attr_key (the edge attribute to read) or edge_attr (an [E, D] array "
                         "in the adapter's edge order), not both")


def _key_names(keys: str | Sequence[str]) -> tuple[str, ...]:
    names = (keys,) if isinstance(keys, str) else tuple(keys) if isinstance(keys, (list, tuple)) else ()
    if not names or not all(isinstance(k, str) for k in names):
        raise GraphError(f"edge_attr_key must be an edge attribute name or a list of names, got {keys!r}")
    return names


def _value_row(value: Any, u: Any, v: Any, key: str) -> np.ndarray:
    try:
        row = np.asarray(value, dtype=np.float64).reshape(-1)
    except (TypeError, ValueError):
        row = None
    if row is None or row.size == 0:
        raise GraphError(f"edge ({u!r}, {v!r}): attribute {key!r} = {value!r} is not a number or a "
                         f"sequence of numbers (edge_attr_key={key!r})")
    return row


def networkx_edge_rows(edges: list[tuple[Any, Any, dict]], keys: str | Sequence[str]) -> np.ndarray:
    """float64 ``[E, D]``: the ``keys`` of each ``(u, v, data)`` of ``edges``, flattened and laid side by side."""
    names = _key_names(keys)
    rows = np.empty((len(edges), 0))
    for key in names:
        width = None
        column: list[np.ndarray] = []
        for u, v, data in edges:
            if key not in data:
                raise GraphError(f"edge ({u!r}, {v!r}) has no attribute {key!r}; edge_attr_key={key!r} "
                                 f"needs it on every edge")
            row = _value_row(data[key], u, v, key)
            if width is None:
                width = row.size
            elif row.size != width:
                raise GraphError(f"edge ({u!r}, {v!r}): attribute {key!r} has {row.size} values, but the "
                                 f"first edge's has {width}; edge_attr_key={key!r} needs the same width on every edge")
            column.append(row)
        if column:
            rows = np.concatenate([rows, np.stack(column)], axis=1)
    return rows


def dgl_edge_rows(g: Any, key: str) -> np.ndarray:
    """``g.edata[key]`` as a NumPy array (``[E]`` or ``[E, D]``, edge-id order)."""
    if not isinstance(key, str):
        raise GraphError(f"edge_attr_key must be the name of an edata field, got {key!r}")
    if key not in g.edata:
        raise GraphError(f"the DGL graph has no edata {key!r} (edge_attr_key); its edge fields: "
                         f"{sorted(g.edata.keys())}")
    return g.edata[key].detach().cpu().numpy()
