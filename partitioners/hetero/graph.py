"""A typed graph: node types and relations ``(src_type, name, dst_type)``; its union graph.

Node type ``t`` has ``num_nodes[t]`` nodes with local ids ``0..n_t-1`` and, optionally, its own
features (``[n_t, F_t]`` float32/float16, any width), labels (int64 class ids ``[n_t]``) and
train/val/test masks (bool ``[n_t]``). A relation ``(s, name, d)`` has edges ``src -> dst`` with
``src`` local ids of type ``s`` and ``dst`` local ids of type ``d``, and optional float32
weights. Types and relations keep the order they were given in: that order is their id.

The **union graph** (:meth:`HeteroGraph.to_union`) is the homogeneous
:class:`~partitioners.Graph` of all types laid out contiguously, ``global = offset[t] + local``
with ``offset`` the running sum of the counts in type order, holding every relation's edges in
CSR by destination (each row sorted by source, then relation id); ``edge_type[e]`` is the
relation of its stored edge ``e`` and ``node_type[v]`` the type of node ``v``. A homogeneous
graph is the one-type case (:meth:`HeteroGraph.from_graph`).

Every check raises :class:`~partitioners.errors.GraphError` with one line naming the type,
relation or array. Torch-free.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Mapping

import numpy as np

from ..errors import GraphError
from ..graph import Graph, index_dtype
from ..graph_checks import as_int_array, check_features, check_node_names

__all__ = ["HeteroGraph", "UnionGraph", "Relation", "REVERSE_PREFIX"]

REVERSE_PREFIX = "rev_"
"""Prefix of the reverse of a relation made by :meth:`HeteroGraph.add_reverse` (OGB/PyG recipes)."""

_NAME = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.-]{0,63}")
"""Type and relation names: they name files and JSON keys, so letters, digits, ``_ . -``."""

Relation = tuple[str, str, str]
"""``(src_type, name, dst_type)``."""

_MASKS = ("train", "val", "test")


def _check_name(kind: str, name: Any) -> str:
    if not isinstance(name, str) or not _NAME.fullmatch(name):
        raise GraphError(f"{kind} name {name!r} is invalid: use 1-64 letters, digits, '_', '.' or '-' "
                         f"(not starting with '.' or '-')")
    return name


def _ids(what: str, a: Any, bound: int) -> np.ndarray:
    a = as_int_array(what, a).astype(np.int64, copy=False)
    if a.size:
        lo, hi = int(a.min()), int(a.max())
        if lo < 0 or hi >= bound:
            bad = lo if lo < 0 else hi
            raise GraphError(f"{what} has id {bad} out of range [0, {bound})")
    return a


@dataclass(eq=False)
class UnionGraph:
    """:meth:`HeteroGraph.to_union`'s result: the union graph and the types of its nodes and edges."""

    graph: Graph
    """The homogeneous union graph (CSR by destination), with the target type's masks (False on
    the other types) and no features or labels (their widths differ per type)."""
    node_type: np.ndarray
    """int32 ``[N]``: the type id of every union node (non-decreasing: types are contiguous)."""
    edge_type: np.ndarray
    """int32 ``[E]``: the relation id of every stored edge, in the union graph's CSR order."""
    type_offsets: np.ndarray
    """int64 ``[T+1]``: type ``t`` holds union ids ``[type_offsets[t], type_offsets[t+1])``."""
    in_degree_rel: np.ndarray
    """int64 ``[N, R]``: in-edges of every union node per relation (the global in-degrees the
    per-relation normalisations need)."""


class HeteroGraph:
    """Node types and relations, checked on construction.

    Args:
        num_nodes: type name -> node count (the order is the type order).
        edges: ``(src_type, name, dst_type)`` -> ``(src, dst)`` local id arrays (the order is the
            relation order).
        features: type name -> float ``[n_t, F_t]`` (only the types that have them).
        labels: type name -> int class ids ``[n_t]``.
        masks: type name -> ``{"train": bool [n_t], "val": ..., "test": ...}``.
        edge_weights: relation -> float ``[E_r]``.
        target_type: the labelled type node classification predicts (default: the only labelled
            type, if exactly one). It must have labels.
        num_classes: classes of the target labels (default: ``max + 1``).
        name: the dataset's name.
        type_names: type name -> the input's name of each node (int64 or unicode ``[n_t]``), for
            every type or none; distinct over all types. The union graph's ``node_names`` (the
            folder's ``original_names.npy``) are their concatenation in type order.
        relation_names: relation name -> the input's name of that relation, where they differ
            (an input name that is not a valid relation name); recorded in ``partition.json``.
    """

    def __init__(self, num_nodes: Mapping[str, int], edges: Mapping[Relation, tuple[Any, Any]], *,
                 features: Mapping[str, Any] | None = None, labels: Mapping[str, Any] | None = None,
                 masks: Mapping[str, Mapping[str, Any]] | None = None,
                 edge_weights: Mapping[Relation, Any] | None = None, target_type: str | None = None,
                 num_classes: int | None = None, name: str = "",
                 type_names: Mapping[str, Any] | None = None,
                 relation_names: Mapping[str, str] | None = None) -> None:
        if not isinstance(num_nodes, Mapping) or not num_nodes:
            raise GraphError("a heterogeneous graph needs at least one node type: num_nodes = {type: count}")
        self.name = name
        self.num_nodes_dict: dict[str, int] = {}
        for t, n in num_nodes.items():
            _check_name("node type", t)
            if isinstance(n, bool) or not isinstance(n, (int, np.integer)) or int(n) < 1:
                raise GraphError(f"node type {t!r}: count must be a positive integer, got {n!r}")
            self.num_nodes_dict[t] = int(n)
        self.edges: dict[Relation, tuple[np.ndarray, np.ndarray]] = {}
        for rel, pair in edges.items():
            checked = self._check_relation(rel)  # before its edges: they need the types
            self.edges[checked] = self._check_edges(checked, pair)
        self.edge_weights: dict[Relation, np.ndarray] = self._checked_edge_weights(edge_weights or {})
        self.features: dict[str, np.ndarray] = {}
        for t, x in (features or {}).items():
            n = self._count("features", t)
            x = np.asarray(x)
            if x.ndim != 2 or x.shape[0] != n:
                raise GraphError(f"node type {t!r}: features have shape {x.shape} but the type has {n} "
                                 f"nodes (expected [{n}, F])")
            self.features[t] = check_features(x, n)
        self.labels: dict[str, np.ndarray] = {}
        for t, y in (labels or {}).items():
            n = self._count("labels", t)
            y = np.asarray(y)
            if y.shape != (n,):
                raise GraphError(f"node type {t!r}: labels have shape {y.shape} but the type has {n} "
                                 f"nodes (expected [{n}] class ids)")
            y = _ids(f"node type {t!r}: labels", y, np.iinfo(np.int64).max)
            self.labels[t] = y
        self.masks: dict[str, dict[str, np.ndarray]] = self._checked_masks(masks or {})
        self.target_type, self.num_classes = self._checked_target(target_type, num_classes)
        self.type_names: dict[str, np.ndarray] = self._checked_type_names(type_names or {})
        self.relation_names: dict[str, str] = dict(relation_names or {})
        self.name = name
        self.preprocessing: dict[str, int] = {}

    # ------------------------------------------------------------------ checks
    def _checked_edge_weights(self, edge_weights: Mapping[Relation, Any]) -> dict[Relation, np.ndarray]:
        """The relations' edge weights as float32, one finite weight per edge of a relation."""
        checked: dict[Relation, np.ndarray] = {}
        for rel, w in edge_weights.items():
            if rel not in self.edges:
                raise GraphError(f"edge_weights names relation {rel!r}, which has no edges")
            w = np.asarray(w, dtype=np.float32)
            if w.shape != self.edges[rel][0].shape:
                raise GraphError(f"relation {rel!r}: edge weights have shape {w.shape} but the relation "
                                 f"has {self.edges[rel][0].size} edges")
            if not np.all(np.isfinite(w)):
                raise GraphError(f"relation {rel!r}: edge weights must be finite (a NaN or inf)")
            checked[rel] = w
        return checked

    def _checked_masks(self, masks: Mapping[str, Mapping[str, Any]]) -> dict[str, dict[str, np.ndarray]]:
        """The types' split masks as bool, one flag per node of the type (a None mask is left out)."""
        checked: dict[str, dict[str, np.ndarray]] = {}
        for t, ms in masks.items():
            n = self._count("masks", t)
            checked[t] = {}
            for k, m in ms.items():
                if k not in _MASKS:
                    raise GraphError(f"node type {t!r}: unknown mask {k!r}; masks are {', '.join(_MASKS)}")
                if m is None:
                    continue
                m = np.asarray(m)
                if m.shape != (n,) or not (m.dtype == np.bool_ or np.isin(m, (0, 1)).all()):
                    raise GraphError(f"node type {t!r}: {k} mask has shape {m.shape} and dtype {m.dtype} "
                                     f"but the type has {n} nodes (expected bool [{n}])")
                checked[t][k] = m.astype(bool)
        return checked

    def _checked_target(self, target_type: str | None, num_classes: int | None) -> tuple[str | None, int]:
        """The target type (default: the only labelled type) and its number of classes, checked
        against the labels and masks."""
        if target_type is None and len(self.labels) == 1:
            target_type = next(iter(self.labels))
        if target_type is not None:
            self._count("target_type", target_type)
            if target_type not in self.labels:
                raise GraphError(f"target type {target_type!r} has no labels (labelled types: "
                                 f"{sorted(self.labels) or 'none'})")
        for t in self.masks:
            if t != target_type and self.masks[t]:
                raise GraphError(f"node type {t!r} has masks but is not the target type ({target_type!r}); "
                                 f"masks belong to the labelled target type")
        if target_type is not None:
            y = self.labels[target_type]
            found = int(y.max()) + 1 if y.size else 0
            if num_classes is None:
                num_classes = found
            elif found > num_classes:
                raise GraphError(f"node type {target_type!r}: label {found - 1} is out of range for "
                                 f"num_classes = {num_classes}")
        return target_type, int(num_classes or 0)

    def _checked_type_names(self, type_names: Mapping[str, Any]) -> dict[str, np.ndarray]:
        """Every type's input names (or none), distinct over all types."""
        if not type_names:
            return {}
        missing = [t for t in self.num_nodes_dict if t not in type_names]
        if missing:
            raise GraphError(f"type_names gives the names of some types but not of {missing}: give every "
                             f"type's names or none")
        checked = {}
        for t, names in type_names.items():
            try:
                checked[t] = check_node_names(names, self._count("type_names", t))
            except GraphError as exc:
                raise GraphError(f"node type {t!r}: {exc}") from None
        every = np.concatenate([checked[t] for t in self.num_nodes_dict])
        if np.unique(every).size != every.size:
            raise GraphError("type_names: two nodes have the same name (names are distinct over all types)")
        return checked

    def _count(self, what: str, t: Any) -> int:
        if t not in self.num_nodes_dict:
            raise GraphError(f"{what} names node type {t!r}, which is not one of the types "
                             f"{list(self.num_nodes_dict)}")
        return self.num_nodes_dict[t]

    def _check_relation(self, rel: Any) -> Relation:
        if not (isinstance(rel, tuple) and len(rel) == 3):
            raise GraphError(f"a relation is (src_type, name, dst_type), got {rel!r}")
        s, name, d = rel
        _check_name("relation", name)
        for role, t in (("source", s), ("destination", d)):
            if t not in self.num_nodes_dict:
                raise GraphError(f"relation {rel!r} names unknown {role} type {t!r}; the node types are "
                                 f"{list(self.num_nodes_dict)}")
        if any(r[1] == name for r in self.edges):
            raise GraphError(f"relation {rel!r}: the name {name!r} is used by another relation; "
                             f"relation names must be distinct")
        return (s, name, d)

    def _check_edges(self, rel: Relation, pair: Any) -> tuple[np.ndarray, np.ndarray]:
        if not (isinstance(pair, (tuple, list)) and len(pair) == 2):
            pair_a = np.asarray(pair)
            if pair_a.ndim != 2 or pair_a.shape[0] != 2:
                raise GraphError(f"relation {rel!r}: edges must be (src, dst) arrays or a [2, E] array")
            pair = (pair_a[0], pair_a[1])
        s, _, d = rel
        src = _ids(f"relation {rel!r}: src", pair[0], self.num_nodes_dict[s])
        dst = _ids(f"relation {rel!r}: dst", pair[1], self.num_nodes_dict[d])
        if src.shape != dst.shape:
            raise GraphError(f"relation {rel!r}: src has {src.size} ids but dst has {dst.size}")
        return src, dst

    # ------------------------------------------------------------------ views
    @property
    def node_types(self) -> list[str]:
        return list(self.num_nodes_dict)

    @property
    def relations(self) -> list[Relation]:
        return list(self.edges)

    @property
    def num_nodes(self) -> int:
        """Nodes of all types."""
        return sum(self.num_nodes_dict.values())

    @property
    def num_edges(self) -> int:
        """Edges of all relations."""
        return sum(src.size for src, _ in self.edges.values())

    @property
    def type_offsets(self) -> np.ndarray:
        """int64 ``[T+1]``: the union id range of each type."""
        return np.concatenate([[0], np.cumsum(list(self.num_nodes_dict.values()))]).astype(np.int64)

    # the attributes the CLI's generic checks read (memory estimate, untrainable warning)
    symmetric = False
    scratch_dir = None
    edge_weight = None
    node_names = None
    link_pairs = None
    link_split: Any = None
    """An edge split on relations (:func:`partitioners.hetero.link_split.typed_edge_split`), or None."""

    @property
    def x(self) -> np.ndarray | None:
        """The target type's features (for the CLI's generic checks and memory estimate)."""
        return self.features.get(self.target_type) if self.target_type else None

    @property
    def y(self) -> np.ndarray | None:
        return self.labels.get(self.target_type) if self.target_type else None

    def _mask(self, k: str) -> np.ndarray | None:
        return self.masks.get(self.target_type or "", {}).get(k)

    @property
    def train_mask(self) -> np.ndarray | None:
        return self._mask("train")

    @property
    def val_mask(self) -> np.ndarray | None:
        return self._mask("val")

    @property
    def test_mask(self) -> np.ndarray | None:
        return self._mask("test")

    @property
    def indices(self) -> np.ndarray:  # only its itemsize is read (memory estimate)
        return np.zeros(0, dtype=index_dtype(self.num_nodes))

    def __repr__(self) -> str:
        types = ", ".join(f"{t}={n}" for t, n in self.num_nodes_dict.items())
        rels = ", ".join(f"{s}-{r}-{d}={self.edges[(s, r, d)][0].size}" for s, r, d in self.edges)
        return (f"HeteroGraph({self.name + ': ' if self.name else ''}{self.num_nodes} nodes ({types}), "
                f"{self.num_edges} edges ({rels}), target={self.target_type!r})")

    # ------------------------------------------------------------------ builders
    @classmethod
    def from_graph(cls, graph: Graph, node_type: str = "node", relation: str = "to") -> "HeteroGraph":
        """The one-type, one-relation graph of a homogeneous ``graph`` (its edges in CSR order)."""
        dst = np.repeat(np.arange(graph.num_nodes, dtype=np.int64), np.diff(graph.indptr))
        rel = (node_type, relation, node_type)
        masks = {k: getattr(graph, f"{k}_mask") for k in _MASKS if getattr(graph, f"{k}_mask") is not None}
        return cls({node_type: graph.num_nodes}, {rel: (np.asarray(graph.indices, np.int64), dst)},
                   features={node_type: graph.x} if graph.x is not None else None,
                   labels={node_type: graph.y} if graph.y is not None and graph.label_kind == "class" else None,
                   masks={node_type: masks} if masks and graph.label_kind == "class" and graph.y is not None else None,
                   edge_weights={rel: graph.edge_weight} if graph.edge_weight is not None else None,
                   num_classes=graph.num_classes or None, name=graph.name)

    def _replace(self, **changes: Any) -> "HeteroGraph":
        """A copy with some constructor arguments changed (checked again)."""
        args: dict[str, Any] = dict(
            num_nodes=self.num_nodes_dict, edges=self.edges, features=self.features, labels=self.labels,
            masks=self.masks, edge_weights=self.edge_weights or None, target_type=self.target_type,
            num_classes=self.num_classes or None, name=self.name, type_names=self.type_names,
            relation_names=self.relation_names)
        args.update(changes)
        return HeteroGraph(args.pop("num_nodes"), args.pop("edges"), **args)

    def with_target(self, target_type: str) -> "HeteroGraph":
        """A copy whose target type (the labelled type the masks and the balance are for) is
        ``target_type``: a GraphError line when it is not a type or has no labels."""
        if target_type not in self.num_nodes_dict:
            raise GraphError(f"{target_type!r} is not a node type of the graph (types: {self.node_types})")
        if target_type not in self.labels:
            raise GraphError(f"node type {target_type!r} has no labels (labelled types: "
                             f"{sorted(self.labels) or 'none'}); choose a labelled type")
        if target_type == self.target_type:
            return self
        return self._replace(target_type=target_type, num_classes=None)

    @classmethod
    def from_pyg(cls, data: Any, **options: Any) -> "HeteroGraph":
        """The typed graph of a PyG ``HeteroData``: :func:`partitioners.hetero.adapters.from_pyg`."""
        from .adapters import from_pyg

        return from_pyg(data, **options)

    @classmethod
    def from_dgl(cls, g: Any, **options: Any) -> "HeteroGraph":
        """The typed graph of a DGL heterograph: :func:`partitioners.hetero.adapters.from_dgl`."""
        from .adapters import from_dgl

        return from_dgl(g, **options)

    def add_reverse(self, prefix: str = REVERSE_PREFIX) -> "HeteroGraph":
        """A copy with ``(d, prefix + name, s)`` added after the relations for every ``(s, name, d)``
        (edges reversed, weights kept), as the OGB/PyG recipes do for ogbn-mag."""
        edges = dict(self.edges)
        weights = dict(self.edge_weights)
        for (s, name, d), (src, dst) in self.edges.items():
            rev = (d, prefix + name, s)
            if rev in edges or any(r[1] == rev[1] for r in edges):
                raise GraphError(f"add_reverse: relation name {rev[1]!r} is already used")
            edges[rev] = (dst, src)
            if (s, name, d) in self.edge_weights:
                weights[rev] = self.edge_weights[(s, name, d)]
        return self._replace(edges=edges, edge_weights=weights or None)

    # ------------------------------------------------------------------ union
    def to_union(self) -> UnionGraph:
        """The union homogeneous graph with ``node_type``, ``edge_type`` (CSR order) and the
        per-relation global in-degrees (module docstring)."""
        off = self.type_offsets
        tid = {t: i for i, t in enumerate(self.num_nodes_dict)}
        n = int(off[-1])
        srcs, dsts, rels, ws = [], [], [], []
        weighted = bool(self.edge_weights)
        for r, (rel, (src, dst)) in enumerate(self.edges.items()):
            srcs.append(src + off[tid[rel[0]]])
            dsts.append(dst + off[tid[rel[2]]])
            rels.append(np.full(src.size, r, dtype=np.int32))
            if weighted:
                ws.append(self.edge_weights.get(rel, np.ones(src.size, np.float32)))
        src = np.concatenate(srcs) if srcs else np.zeros(0, np.int64)
        dst = np.concatenate(dsts) if dsts else np.zeros(0, np.int64)
        rel_id = np.concatenate(rels) if rels else np.zeros(0, np.int32)
        order = np.lexsort((rel_id, src, dst))
        indptr = np.zeros(n + 1, dtype=np.int64)
        np.cumsum(np.bincount(dst, minlength=n), out=indptr[1:])
        node_type = np.repeat(np.arange(len(off) - 1, dtype=np.int32), np.diff(off))
        masks: dict[str, np.ndarray] = {}
        if self.target_type is not None:
            lo, hi = off[tid[self.target_type]], off[tid[self.target_type] + 1]
            for k, m in self.masks.get(self.target_type, {}).items():
                full = np.zeros(n, dtype=bool)
                full[lo:hi] = m
                masks[f"{k}_mask"] = full
        names = np.concatenate([self.type_names[t] for t in self.num_nodes_dict]) if self.type_names else None
        graph = Graph(indptr=indptr, indices=src[order], name=self.name, node_names=names,
                      edge_weight=np.concatenate(ws)[order] if weighted else None, **masks)
        num_rel = len(self.edges)
        in_deg = np.bincount(dst * num_rel + rel_id, minlength=n * num_rel).reshape(n, num_rel)
        return UnionGraph(graph=graph, node_type=node_type, edge_type=rel_id[order].astype(np.int32),
                          type_offsets=off, in_degree_rel=np.ascontiguousarray(in_deg))
