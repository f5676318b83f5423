"""Typed graphs from PyG's ``HeteroData`` and DGL heterographs (optional, duck-typed).

:func:`from_pyg` reads a ``torch_geometric.data.HeteroData``: ``data.node_types`` (each store's
``num_nodes``, ``x``, ``y``, ``train_mask``/``val_mask``/``test_mask``) and ``data.edge_types``
(each store's ``edge_index`` ``[2, E]`` and optional ``edge_weight``). :func:`from_dgl` reads a
DGL heterograph: ``g.ntypes``, ``g.canonical_etypes``, ``g.num_nodes(t)``,
``g.nodes[t].data`` (``feat``, ``label``, the masks: the keys are arguments) and
``g.edges(etype=...)``.

Neither library is imported: the objects are read through those attributes, and tensors are
turned into numpy arrays through ``.detach().cpu().numpy()`` (so this module stays torch-free
and works without DGL installed). An object without them is a TypeError saying what was
expected. Labels of shape ``[n, 1]`` are flattened; everything else is checked by
:class:`HeteroGraph` (one line naming the type, relation or array).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from .graph import HeteroGraph

__all__ = ["from_pyg", "from_dgl"]

_MASKS = ("train", "val", "test")


def _numpy(value: Any) -> np.ndarray | None:
    """A tensor (torch, or anything with ``.numpy()``) or array-like as a numpy array; None stays None."""
    if value is None:
        return None
    if hasattr(value, "detach"):
        value = value.detach()
    if hasattr(value, "cpu"):
        value = value.cpu()
    if hasattr(value, "numpy"):
        value = value.numpy()
    return np.asarray(value)


def _labels(y: np.ndarray | None) -> np.ndarray | None:
    if y is not None and y.ndim == 2 and y.shape[1] == 1:
        return y[:, 0]
    return y


def _require(obj: Any, attrs: tuple[str, ...], what: str) -> None:
    missing = [a for a in attrs if not hasattr(obj, a)]
    if missing:
        raise TypeError(f"expected {what}, got {type(obj).__name__} without {', '.join(missing)}")


def _node_data(per_type: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """HeteroGraph's ``features``/``labels``/``masks`` from ``{type: {x, y, train, val, test}}``."""
    features = {t: d["x"] for t, d in per_type.items() if d.get("x") is not None}
    labels = {t: _labels(d["y"]) for t, d in per_type.items() if d.get("y") is not None}
    masks = {t: {k: d[k] for k in _MASKS if d.get(k) is not None} for t, d in per_type.items()}
    return {"features": features, "labels": labels, "masks": {t: m for t, m in masks.items() if m}}


def _attr(store: Any, key: str) -> Any:
    try:
        return getattr(store, key, None)
    except (KeyError, AttributeError):
        return None


def from_pyg(data: Any, *, target_type: str | None = None, num_classes: int | None = None,
             name: str = "") -> HeteroGraph:
    """The :class:`HeteroGraph` of a PyG ``HeteroData`` (module docstring); types and relations
    keep ``data``'s order."""
    _require(data, ("node_types", "edge_types"), "a torch_geometric.data.HeteroData (node_types, edge_types)")
    counts, per_type = {}, {}
    for t in data.node_types:
        store = data[t]
        counts[t] = int(store.num_nodes) if store.num_nodes is not None else 0
        per_type[t] = {"x": _numpy(_attr(store, "x")), "y": _numpy(_attr(store, "y")),
                       **{k: _numpy(_attr(store, f"{k}_mask")) for k in _MASKS}}
    edges, weights = {}, {}
    for rel in data.edge_types:
        store = data[rel]
        edges[tuple(rel)] = _numpy(store.edge_index)
        w = _numpy(_attr(store, "edge_weight"))
        if w is not None:
            weights[tuple(rel)] = w
    return HeteroGraph(counts, edges, **_node_data(per_type), edge_weights=weights or None,
                       target_type=target_type, num_classes=num_classes, name=name)


def from_dgl(g: Any, *, feature_key: str = "feat", label_key: str = "label", target_type: str | None = None,
             num_classes: int | None = None, name: str = "") -> HeteroGraph:
    """The :class:`HeteroGraph` of a DGL heterograph (module docstring): ``g.nodes[t].data[feature_key]``,
    ``[label_key]`` and ``train_mask``/``val_mask``/``test_mask``; types and relations keep
    ``g.ntypes`` and ``g.canonical_etypes`` order."""
    _require(g, ("ntypes", "canonical_etypes", "num_nodes", "nodes", "edges"),
             "a DGL heterograph (ntypes, canonical_etypes, num_nodes, nodes, edges)")
    counts, per_type = {}, {}
    for t in g.ntypes:
        counts[t] = int(g.num_nodes(t))
        data = g.nodes[t].data
        per_type[t] = {"x": _numpy(data.get(feature_key)), "y": _numpy(data.get(label_key)),
                       **{k: _numpy(data.get(f"{k}_mask")) for k in _MASKS}}
    edges = {}
    for rel in g.canonical_etypes:
        src, dst = g.edges(etype=rel)
        edges[tuple(rel)] = (_numpy(src), _numpy(dst))
    return HeteroGraph(counts, edges, **_node_data(per_type), target_type=target_type,
                       num_classes=num_classes, name=name)
