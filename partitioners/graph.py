"""The graph container every reader produces and every partitioner consumes.

A :class:`Graph` is a directed graph stored in CSR **by destination**: the in-edges of node ``v``
are ``indices[indptr[v]:indptr[v+1]]`` (their sources), which is the order a GNN aggregates in.
An undirected graph is stored with both directions of each edge. Every input edge is one stored
edge unless the caller asks for ``symmetrize``, ``remove_self_loops`` or ``remove_duplicates``;
what each option changed is counted in :attr:`Graph.preprocessing`.

Node data, all optional, indexed by node id:
  ``x``            float32/float16 ``[N, F]`` features
  ``y``            int64 ``[N]`` class ids in ``[0, num_classes)``, or uint8 ``[N, C]`` 0/1 multi-label,
                   or float32 ``[N, D]`` regression targets (``num_classes`` is then ``D``; a 1-D
                   float target is stored as ``[N, 1]``): see :attr:`Graph.label_kind`
  ``*_mask``       bool ``[N]`` train/val/test masks
  ``node_names``   int64 or unicode ``[N]``: the input's id of each node, when a reader relabelled
                   them to ``0..N-1`` (``relabel=True``); None when the ids are the input's own
Edge data, in CSR order: ``edge_weight`` float32 ``[E]``, ``edge_attr`` float32 ``[E, D]`` (edge features).

The checks of each array are in :mod:`partitioners.graph_checks`, the CSR builder in
:mod:`partitioners.graph_csr`. This module is torch-free.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterator, Sequence

import numpy as np

from .errors import GraphError
from .graph_checks import (as_int_array, check_edge_attr, check_edge_weight, check_features, check_ids,
                           check_labels, check_link_pairs, check_mask, check_node_names, label_kind_of)
from . import graph_csr
from .graph_edge_keys import dgl_edge_rows, networkx_edge_rows, no_edge_attr_given
from .graph_csr import MAX_NODES, build_csr_edge_data, index_dtype

__all__ = ["Graph", "index_dtype"]

_MASK_NAMES = ("train_mask", "val_mask", "test_mask")


def _non_decreasing(a: np.ndarray) -> bool:
    """True when ``a[i] <= a[i+1]`` everywhere, checked in chunks (``a`` may be a memory map)."""
    step = graph_csr.CHUNK
    for lo in range(0, a.size - 1, step):
        part = np.asarray(a[lo:lo + step + 1])
        if np.any(part[1:] < part[:-1]):
            return False
    return True


@dataclass(eq=False)
class Graph:
    """A directed graph in CSR by destination, with optional node features, labels and masks.

    Build one with :meth:`from_edges`, :meth:`from_scipy`, :meth:`from_networkx`,
    :meth:`from_pyg` or :meth:`from_dgl`; the constructor itself only validates.
    """

    indptr: np.ndarray
    """int64 ``[N+1]``: in-edges of ``v`` are ``indices[indptr[v]:indptr[v+1]]``."""
    indices: np.ndarray
    """int32/int64 ``[E]``: source node of each edge, sorted by (destination, source)."""
    edge_weight: np.ndarray | None = None
    """float32 ``[E]`` in CSR order, or None."""
    x: np.ndarray | None = None
    """float32/float16 ``[N, F]`` node features, or None."""
    y: np.ndarray | None = None
    """int64 ``[N]`` class ids, or uint8 ``[N, C]`` multi-label matrix, or float32 ``[N, D]``
    regression targets, or None."""
    train_mask: np.ndarray | None = None
    val_mask: np.ndarray | None = None
    test_mask: np.ndarray | None = None
    num_classes: int = 0
    """Number of classes (columns for multi-label, the target width ``D`` for regression); 0 when
    there are no labels."""
    symmetric: bool = False
    """True when every edge u->v has its reverse v->u (set by symmetrize or checked on demand)."""
    name: str = ""
    preprocessing: dict[str, int] = field(default_factory=dict)
    """What the build options changed: ``symmetrize_added``, ``self_loops_removed``, ``duplicates_removed``."""
    node_names: np.ndarray | None = None
    """int64 or unicode ``[N]``: the input's id of node ``i`` (after relabelling), or None."""
    scratch_dir: Path | None = None
    """Set for a graph read out of core (:mod:`partitioners.outofcore`), whose arrays are memory
    maps: the folder where later stages put their own scratch files (METIS's adjacency). None:
    the arrays are in memory."""
    label_kind: str | None = None
    """What ``y`` holds: ``"class"``, ``"multilabel"`` or ``"regression"`` (None without labels).
    Given, it decides how ``y`` is read (``"regression"``: whole-valued or 0/1 float targets stay
    targets); left None it is inferred: integers are class ids (``[N]``) or a 0/1 matrix
    (``[N, C]``), floats the same when their values are, and regression targets otherwise."""
    edge_attr: np.ndarray | None = None
    """float32 ``[E, D]`` edge features in CSR order (row ``e`` belongs to edge ``indices[e]``), or None."""
    link_pairs: dict[str, np.ndarray] | None = None
    """An edge split for link prediction (:func:`partitioners.io.edge_split.with_edge_split`):
    ``"train"``, ``"val"``, ``"test"`` -> int64 ``[2, E_s]`` pairs of original ids, row 0 the
    source ``u``, row 1 the destination ``v > u``; the val/test pairs are not edges of the graph.
    The writer stores them as each part's ``link_*.npy``. None without a split."""

    def __post_init__(self) -> None:
        self.indptr = np.asarray(self.indptr, dtype=np.int64)
        if self.indptr.ndim != 1 or self.indptr.size < 1:
            raise GraphError("indptr must be a 1-D array of length num_nodes + 1")
        n = self.indptr.size - 1
        if n == 0:
            raise GraphError("the graph is empty: num_nodes is 0")
        if self.indptr[0] != 0 or not _non_decreasing(self.indptr):
            raise GraphError("indptr must start at 0 and be non-decreasing")
        self.indices = np.asarray(self.indices)
        if self.indices.shape != (int(self.indptr[-1]),):
            raise GraphError(f"indices has {self.indices.size} entries but indptr[-1] = {int(self.indptr[-1])}")
        check_ids("indices", self.indices, n)
        self.indices = self.indices.astype(index_dtype(n), copy=False)
        if self.edge_weight is not None:
            self.edge_weight = check_edge_weight(self.edge_weight, self.indices.size, "the graph has")
        if self.edge_attr is not None:
            self.edge_attr = check_edge_attr(self.edge_attr, self.indices.size, "the graph has")
        if self.x is not None:
            self.x = check_features(self.x, n)
        if self.y is not None:
            self.y, self.num_classes = check_labels(self.y, n, self.num_classes or None, self.label_kind)
        self.label_kind = label_kind_of(self.y)
        for name in _MASK_NAMES:
            m = getattr(self, name)
            if m is not None:
                setattr(self, name, check_mask(name, m, n))
        if self.node_names is not None:
            self.node_names = check_node_names(self.node_names, n)
        if self.link_pairs is not None:
            self.link_pairs = check_link_pairs(self.link_pairs, n)

    # ------------------------------------------------------------------ builders
    @classmethod
    def from_edges(cls, src: Any, dst: Any, num_nodes: int | None = None, *,
                   features: Any = None, labels: Any = None, train_mask: Any = None,
                   val_mask: Any = None, test_mask: Any = None, edge_weight: Any = None,
                   num_classes: int | None = None, symmetrize: bool = False,
                   remove_self_loops: bool = False, remove_duplicates: bool = False,
                   name: str = "", node_names: Any = None, label_kind: str | None = None,
                   edge_attr: Any = None) -> "Graph":
        """Build from parallel arrays of edge sources and destinations (edge ``src[i] -> dst[i]``).

        ``num_nodes`` defaults to ``max(id) + 1`` (or the feature/label row count when larger).
        Options, each counted in :attr:`preprocessing`: ``symmetrize`` adds the reverse of every
        edge whose reverse is missing; ``remove_self_loops``; ``remove_duplicates`` keeps the first
        of repeated (src, dst) pairs (and its weight and features). ``edge_attr``: edge features
        ``[E, D]`` in input order, kept in CSR order like the weights; a reverse added by
        ``symmetrize`` gets the features (and weight) of the first edge it reverses.
        ``node_names``: the input's id of each
        node when the caller relabelled them (kept as :attr:`node_names`). ``label_kind``: what
        ``labels`` hold (:attr:`label_kind`; default: inferred).
        """
        src = as_int_array("src", src)
        dst = as_int_array("dst", dst)
        if src.shape != dst.shape:
            raise GraphError(f"src has {src.size} entries but dst has {dst.size}; they must be the same length")
        if num_nodes is None:
            sizes = [int(src.max()) + 1 if src.size else 0, int(dst.max()) + 1 if dst.size else 0]
            for a in (features, labels, train_mask, val_mask, test_mask):
                if a is not None:
                    sizes.append(len(a))
            num_nodes = max(sizes)
        num_nodes = int(num_nodes)
        if num_nodes <= 0:
            raise GraphError("the graph is empty: num_nodes is 0")
        if num_nodes > MAX_NODES:
            raise GraphError(f"num_nodes = {num_nodes} is too large: at most {MAX_NODES} nodes "
                             f"are supported (edge keys dst * num_nodes + src must fit in int64)")
        check_ids("src", src, num_nodes)
        check_ids("dst", dst, num_nodes)
        w = None
        if edge_weight is not None:  # checked here so the index is the caller's, not CSR order
            w = check_edge_weight(edge_weight, src.size, "there are")
        attr = None if edge_attr is None else check_edge_attr(edge_attr, src.size, "there are")
        indptr, indices, w, attr, report = build_csr_edge_data(
            src, dst, num_nodes, w, attr, symmetrize=symmetrize, remove_self_loops=remove_self_loops,
            remove_duplicates=remove_duplicates)
        return cls(indptr=indptr, indices=indices, edge_weight=w, edge_attr=attr, x=features, y=labels,
                   train_mask=train_mask, val_mask=val_mask, test_mask=test_mask,
                   num_classes=num_classes or 0, symmetric=symmetrize, name=name,
                   preprocessing=report, node_names=node_names, label_kind=label_kind)

    @classmethod
    def from_scipy(cls, adj: Any, *, use_weights: bool = False, **kwargs: Any) -> "Graph":
        """Build from a square scipy sparse matrix where entry ``[u, v]`` is the edge ``u -> v``.

        Stored entries (explicit zeros included) are edges; their values become ``edge_weight``
        when ``use_weights``. Other keyword arguments go to :meth:`from_edges`.
        """
        import scipy.sparse as sp

        if not sp.issparse(adj):
            raise GraphError(f"from_scipy expects a scipy sparse matrix, got {type(adj).__name__}")
        if adj.shape[0] != adj.shape[1]:
            raise GraphError(f"adjacency matrix must be square, got shape {adj.shape}")
        coo = adj.tocoo()
        return cls.from_edges(coo.row, coo.col, adj.shape[0],
                              edge_weight=coo.data if use_weights else None, **kwargs)

    @classmethod
    def from_networkx(cls, g: Any, *, feature_key: str | None = "x", label_key: str | None = "y",
                      weight_key: str | None = None, edge_attr_key: str | Sequence[str] | None = None,
                      **kwargs: Any) -> "Graph":
        """Build from a networkx graph; nodes are numbered in ``g.nodes`` order.

        An undirected graph gives both directions of each edge (with the same weight and
        features). Node attributes ``feature_key`` and ``label_key`` become features and labels
        when every node has them. ``edge_attr_key``: the edge attribute(s) whose values (numbers
        or sequences of numbers, on every edge) become ``edge_attr``, side by side
        (:mod:`partitioners.graph_edge_keys`).
        """
        nodes = list(g.nodes)
        if not nodes:
            raise GraphError("the graph is empty: num_nodes is 0")
        pos = {v: i for i, v in enumerate(nodes)}
        edges = list(g.edges(data=True))
        src = np.fromiter((pos[u] for u, _, _ in edges), dtype=np.int64, count=len(edges))
        dst = np.fromiter((pos[v] for _, v, _ in edges), dtype=np.int64, count=len(edges))
        w = None
        if weight_key is not None:
            w = np.array([d.get(weight_key, 1.0) for _, _, d in edges], dtype=np.float32)
        attr = None
        if edge_attr_key is not None:
            no_edge_attr_given(kwargs)
            attr = networkx_edge_rows(edges, edge_attr_key) if edges else None
        if not g.is_directed():
            loops = src == dst
            src, dst = np.concatenate([src, dst[~loops]]), np.concatenate([dst, src[~loops]])
            w = None if w is None else np.concatenate([w, w[~loops]])
            attr = None if attr is None else np.concatenate([attr, attr[~loops]])
        if attr is not None:
            kwargs["edge_attr"] = attr

        def node_attr(key: str | None) -> np.ndarray | None:
            if key is None or not all(key in g.nodes[v] for v in nodes):
                return None
            return np.asarray([g.nodes[v][key] for v in nodes])

        kwargs.setdefault("features", node_attr(feature_key))
        kwargs.setdefault("labels", node_attr(label_key))
        return cls.from_edges(src, dst, len(nodes), edge_weight=w, **kwargs)

    @classmethod
    def from_pyg(cls, data: Any, **kwargs: Any) -> "Graph":
        """Build from a ``torch_geometric.data.Data`` (``edge_index`` row 0 = source)."""
        def np_of(name: str) -> np.ndarray | None:
            t = getattr(data, name, None)
            return None if t is None else t.detach().cpu().numpy()

        ei = np_of("edge_index")
        if ei is None:
            raise GraphError("the PyG Data object has no edge_index")
        w = np_of("edge_weight")
        kwargs.setdefault("edge_attr", np_of("edge_attr"))
        y = np_of("y")
        if y is not None and y.ndim == 2 and y.shape[1] == 1:
            y = y[:, 0]
        return cls.from_edges(ei[0], ei[1], data.num_nodes, features=np_of("x"), labels=y,
                              train_mask=np_of("train_mask"), val_mask=np_of("val_mask"),
                              test_mask=np_of("test_mask"), edge_weight=w, **kwargs)

    @classmethod
    def from_dgl(cls, g: Any, *, feature_key: str = "feat", label_key: str = "label",
                 edge_attr_key: str | None = None, **kwargs: Any) -> "Graph":
        """Build from a homogeneous ``dgl.DGLGraph``; ndata ``feat``/``label``/``*_mask`` are taken,
        and ``edata[edge_attr_key]`` (``[E]`` or ``[E, D]``) as ``edge_attr`` when given."""
        if edge_attr_key is not None:
            no_edge_attr_given(kwargs)
            kwargs["edge_attr"] = dgl_edge_rows(g, edge_attr_key)
        src, dst = g.edges()
        nd = g.ndata

        def np_of(key: str) -> np.ndarray | None:
            return nd[key].detach().cpu().numpy() if key in nd else None

        return cls.from_edges(src.cpu().numpy(), dst.cpu().numpy(), g.num_nodes(),
                              features=np_of(feature_key), labels=np_of(label_key),
                              train_mask=np_of("train_mask"), val_mask=np_of("val_mask"),
                              test_mask=np_of("test_mask"), **kwargs)

    @staticmethod
    def mask_from_index(ids: Any, num_nodes: int, name: str = "mask") -> np.ndarray:
        """A bool mask of length ``num_nodes`` that is True at ``ids`` (validated)."""
        ids = as_int_array(name, ids)
        check_ids(name, ids, num_nodes)
        m = np.zeros(num_nodes, dtype=bool)
        m[ids] = True
        return m

    # ------------------------------------------------------------------ views
    @property
    def num_nodes(self) -> int:
        return int(self.indptr.size - 1)

    @property
    def num_edges(self) -> int:
        return int(self.indices.size)

    @property
    def feature_dim(self) -> int:
        return 0 if self.x is None else int(self.x.shape[1])

    @property
    def edge_feature_dim(self) -> int:
        """``D`` of :attr:`edge_attr`; 0 without edge features."""
        return 0 if self.edge_attr is None else int(self.edge_attr.shape[1])

    @property
    def multilabel(self) -> bool:
        return self.label_kind == "multilabel"

    def in_degree(self) -> np.ndarray:
        """int64 ``[N]``: number of in-edges of each node."""
        return np.diff(self.indptr)

    def out_degree(self) -> np.ndarray:
        """int64 ``[N]``: number of out-edges of each node.

        Counted chunk by chunk, so the int64 copy ``bincount`` makes of ``indices`` holds at most
        ``max(N, 2**20)`` entries instead of ``E``.
        """
        n = self.num_nodes
        deg = np.zeros(n, dtype=np.int64)
        step = max(graph_csr.CHUNK, n)
        for lo in range(0, self.num_edges, step):
            deg += np.bincount(self.indices[lo:lo + step], minlength=n)
        return deg

    def dst_of_edges(self) -> np.ndarray:
        """Destination id of every edge, in CSR order (same dtype as ``indices``)."""
        return np.repeat(np.arange(self.num_nodes, dtype=self.indices.dtype), self.in_degree())

    def edges(self) -> tuple[np.ndarray, np.ndarray]:
        """``(src, dst)`` of every edge, in CSR order."""
        return self.indices, self.dst_of_edges()

    def to_scipy(self) -> Any:
        """``scipy.sparse.csr_matrix`` ``A`` with ``A[dst, src]`` = weight (1 when unweighted).

        The matrix shares ``indices`` (and ``edge_weight``) with the graph: copy it before
        changing it in place (``sum_duplicates``, ``sort_indices``, writing ``data``).
        """
        import scipy.sparse as sp

        data = self.edge_weight if self.edge_weight is not None else np.ones(self.num_edges, np.float32)
        return sp.csr_matrix((data, self.indices, self.indptr), shape=(self.num_nodes, self.num_nodes))

    def iter_in_adjacency(self, chunk_nodes: int = 1 << 16) -> Iterator[tuple[int, np.ndarray, np.ndarray]]:
        """Yield ``(first_node, indptr_chunk, indices_chunk)`` over consecutive destination ranges.

        ``indptr_chunk`` is rebased to 0; this is the stream the streaming partitioners read.
        """
        n = self.num_nodes
        for lo in range(0, n, chunk_nodes):
            hi = min(n, lo + chunk_nodes)
            a, b = int(self.indptr[lo]), int(self.indptr[hi])
            yield lo, self.indptr[lo:hi + 1] - a, self.indices[a:b]

    def is_symmetric(self) -> bool:
        """True when every edge has its reverse (computed; cached in :attr:`symmetric` if True)."""
        if not self.symmetric:
            import scipy.sparse as sp

            # own copies: sum_duplicates works in place and must not touch the graph's arrays
            a = sp.csr_matrix((np.ones(self.num_edges, np.int8), self.indices.copy(), self.indptr.copy()),
                              shape=(self.num_nodes, self.num_nodes))
            a.sum_duplicates()
            a.data[:] = 1  # after summing: a repeated edge still counts as one edge
            self.symmetric = (a != a.T).nnz == 0
        return self.symmetric

    def __repr__(self) -> str:
        parts = [f"num_nodes={self.num_nodes}", f"num_edges={self.num_edges}"]
        if self.x is not None:
            parts.append(f"x={self.x.dtype}[{self.x.shape[0]}, {self.x.shape[1]}]")
        if self.y is not None:
            parts.append(f"num_classes={self.num_classes}" + ("" if self.label_kind == "class" else f" {self.label_kind}"))
        return f"Graph({', '.join(parts)})"
