"""The graph container every reader produces and every partitioner consumes.

A :class:`Graph` is a directed graph stored in CSR **by destination**: the in-edges of node ``v``
are ``indices[indptr[v]:indptr[v+1]]`` (their sources), which is the order a GNN aggregates in.
An undirected graph is stored with both directions of each edge. Every input edge is one stored
edge unless the caller asks for ``symmetrize``, ``remove_self_loops`` or ``remove_duplicates``;
what each option changed is counted in :attr:`Graph.preprocessing`.

Node data, all optional, indexed by node id:
  ``x``            float32/float16 ``[N, F]`` features
  ``y``            int64 ``[N]`` class ids in ``[0, num_classes)``, or uint8 ``[N, C]`` 0/1 multi-label
  ``*_mask``       bool ``[N]`` train/val/test masks
Edge data: ``edge_weight`` float32 ``[E]`` in CSR order.

This module is torch-free.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Iterator

import numpy as np

from .errors import GraphError

__all__ = ["Graph", "index_dtype"]

_MASK_NAMES = ("train_mask", "val_mask", "test_mask")


def index_dtype(num_nodes: int) -> np.dtype:
    """The narrowest id dtype for ``num_nodes`` nodes: int32 when it fits, else int64."""
    return np.dtype(np.int32) if num_nodes < 2**31 - 1 else np.dtype(np.int64)


def _first_bad(mask: np.ndarray) -> int:
    return int(np.flatnonzero(mask)[0])


def _check_ids(name: str, ids: np.ndarray, num_nodes: int) -> None:
    if ids.size == 0:
        return
    lo, hi = int(ids.min()), int(ids.max())
    if lo < 0:
        i = _first_bad(ids < 0)
        raise GraphError(f"{name}[{i}] = {int(ids[i])} is negative; node ids must be in [0, {num_nodes})")
    if hi >= num_nodes:
        i = _first_bad(ids >= num_nodes)
        raise GraphError(f"{name}[{i}] = {int(ids[i])} is out of range: num_nodes is {num_nodes}, "
                         f"ids must be in [0, {num_nodes})")


def _as_int_array(name: str, a: Any) -> np.ndarray:
    a = np.asarray(a)
    if a.ndim != 1:
        raise GraphError(f"{name} must be a 1-D array of node ids, got shape {a.shape}")
    if a.size and not np.issubdtype(a.dtype, np.integer):
        if np.issubdtype(a.dtype, np.floating) and np.all(np.isfinite(a)) and np.all(a == np.round(a)):
            return a.astype(np.int64)
        raise GraphError(f"{name} must hold integer node ids, got dtype {a.dtype}")
    if a.dtype == np.int64 or (np.issubdtype(a.dtype, np.integer) and a.dtype.itemsize < 8):
        return a  # int8..int32/uint32 are kept: _build_csr widens once, into its sort key
    if a.size and int(a.max()) > np.iinfo(np.int64).max:
        i = _first_bad(a > np.iinfo(np.int64).max)
        raise GraphError(f"{name}[{i}] = {int(a[i])} does not fit in int64")
    return a.astype(np.int64)


def _check_features(x: Any, num_nodes: int) -> np.ndarray:
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
    finite = np.isfinite(x)
    if not finite.all():
        r, c = np.argwhere(~finite)[0]
        raise GraphError(f"features[{r}, {c}] = {x[r, c]} is not finite (NaN or inf)")
    return np.ascontiguousarray(x)


def _check_labels(y: Any, num_nodes: int, num_classes: int | None) -> tuple[np.ndarray, int]:
    y = np.asarray(y)
    if y.shape[:1] != (num_nodes,):
        raise GraphError(f"labels has {y.shape[0] if y.ndim else 0} rows but the graph has {num_nodes} nodes")
    if y.ndim == 2:  # multi-label 0/1 matrix
        if y.size and not np.isin(y, (0, 1)).all():
            r, c = np.argwhere(~np.isin(y, (0, 1)))[0]
            raise GraphError(f"multi-label labels[{r}, {c}] = {y[r, c]}; a multi-label matrix holds only 0 and 1")
        if num_classes is not None and num_classes != y.shape[1]:
            raise GraphError(f"num_classes={num_classes} but the multi-label matrix has {y.shape[1]} columns")
        return y.astype(np.uint8), int(y.shape[1])
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
        i = _first_bad(y < 0)
        raise GraphError(f"labels[{i}] = {int(y[i])} is negative; class ids must be in [0, {num_classes})")
    if inferred > num_classes:
        i = _first_bad(y >= num_classes)
        raise GraphError(f"labels[{i}] = {int(y[i])} is out of range: num_classes is {num_classes}")
    return y, int(num_classes)


def _check_mask(name: str, m: Any, num_nodes: int) -> np.ndarray:
    m = np.asarray(m)
    if m.ndim != 1 or m.shape[0] != num_nodes:
        raise GraphError(f"{name} has shape {m.shape} but the graph has {num_nodes} nodes; "
                         f"masks are bool [num_nodes] (use Graph.mask_from_index for id lists)")
    if m.dtype != np.bool_:
        if m.size and not np.isin(m, (0, 1)).all():
            i = _first_bad(~np.isin(m, (0, 1)))
            raise GraphError(f"{name}[{i}] = {m[i]}; a mask holds only 0/1 or True/False")
        m = m.astype(bool)
    return m


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
    """int64 ``[N]`` class ids, or uint8 ``[N, C]`` multi-label matrix, or None."""
    train_mask: np.ndarray | None = None
    val_mask: np.ndarray | None = None
    test_mask: np.ndarray | None = None
    num_classes: int = 0
    """Number of classes (columns for multi-label); 0 when there are no labels."""
    symmetric: bool = False
    """True when every edge u->v has its reverse v->u (set by symmetrize or checked on demand)."""
    name: str = ""
    preprocessing: dict[str, int] = field(default_factory=dict)
    """What the build options changed: ``symmetrize_added``, ``self_loops_removed``, ``duplicates_removed``."""

    def __post_init__(self) -> None:
        self.indptr = np.asarray(self.indptr, dtype=np.int64)
        if self.indptr.ndim != 1 or self.indptr.size < 1:
            raise GraphError("indptr must be a 1-D array of length num_nodes + 1")
        n = self.indptr.size - 1
        if n == 0:
            raise GraphError("the graph is empty: num_nodes is 0")
        if self.indptr[0] != 0 or np.any(np.diff(self.indptr) < 0):
            raise GraphError("indptr must start at 0 and be non-decreasing")
        self.indices = np.asarray(self.indices)
        if self.indices.shape != (int(self.indptr[-1]),):
            raise GraphError(f"indices has {self.indices.size} entries but indptr[-1] = {int(self.indptr[-1])}")
        _check_ids("indices", self.indices, n)
        self.indices = self.indices.astype(index_dtype(n), copy=False)
        if self.edge_weight is not None:
            w = np.asarray(self.edge_weight, dtype=np.float32)
            if w.shape != self.indices.shape:
                raise GraphError(f"edge_weight has {w.size} entries but the graph has {self.indices.size} edges")
            if not np.isfinite(w).all():
                i = _first_bad(~np.isfinite(w))
                raise GraphError(f"edge_weight[{i}] = {w[i]} is not finite")
            self.edge_weight = w
        if self.x is not None:
            self.x = _check_features(self.x, n)
        if self.y is not None:
            self.y, self.num_classes = _check_labels(self.y, n, self.num_classes or None)
        for name in _MASK_NAMES:
            m = getattr(self, name)
            if m is not None:
                setattr(self, name, _check_mask(name, m, n))

    # ------------------------------------------------------------------ builders
    @classmethod
    def from_edges(cls, src: Any, dst: Any, num_nodes: int | None = None, *,
                   features: Any = None, labels: Any = None, train_mask: Any = None,
                   val_mask: Any = None, test_mask: Any = None, edge_weight: Any = None,
                   num_classes: int | None = None, symmetrize: bool = False,
                   remove_self_loops: bool = False, remove_duplicates: bool = False,
                   name: str = "") -> "Graph":
        """Build from parallel arrays of edge sources and destinations (edge ``src[i] -> dst[i]``).

        ``num_nodes`` defaults to ``max(id) + 1`` (or the feature/label row count when larger).
        Options, each counted in :attr:`preprocessing`: ``symmetrize`` adds the reverse of every
        edge whose reverse is missing; ``remove_self_loops``; ``remove_duplicates`` keeps the first
        of repeated (src, dst) pairs (and its weight).
        """
        src = _as_int_array("src", src)
        dst = _as_int_array("dst", dst)
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
        if num_nodes > _MAX_NODES:
            raise GraphError(f"num_nodes = {num_nodes} is too large: at most {_MAX_NODES} nodes "
                             f"are supported (edge keys dst * num_nodes + src must fit in int64)")
        _check_ids("src", src, num_nodes)
        _check_ids("dst", dst, num_nodes)
        w = None
        if edge_weight is not None:
            w = np.asarray(edge_weight, dtype=np.float32)
            if w.shape != src.shape:
                raise GraphError(f"edge_weight has {w.size} entries but there are {src.size} edges")
            if not np.isfinite(w).all():  # checked here so the index is the caller's, not CSR order
                i = _first_bad(~np.isfinite(w))
                raise GraphError(f"edge_weight[{i}] = {w[i]} is not finite")
        indptr, indices, w, report = _build_csr(src, dst, num_nodes, w, symmetrize=symmetrize,
                                                remove_self_loops=remove_self_loops,
                                                remove_duplicates=remove_duplicates)
        return cls(indptr=indptr, indices=indices, edge_weight=w, x=features, y=labels,
                   train_mask=train_mask, val_mask=val_mask, test_mask=test_mask,
                   num_classes=num_classes or 0, symmetric=symmetrize, name=name,
                   preprocessing=report)

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
                      weight_key: str | None = None, **kwargs: Any) -> "Graph":
        """Build from a networkx graph; nodes are numbered in ``g.nodes`` order.

        An undirected graph gives both directions of each edge. Node attributes ``feature_key``
        and ``label_key`` become features and labels when every node has them.
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
        if not g.is_directed():
            loops = src == dst
            src, dst = np.concatenate([src, dst[~loops]]), np.concatenate([dst, src[~loops]])
            if w is not None:
                w = np.concatenate([w, w[~loops]])

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
        y = np_of("y")
        if y is not None and y.ndim == 2 and y.shape[1] == 1:
            y = y[:, 0]
        return cls.from_edges(ei[0], ei[1], data.num_nodes, features=np_of("x"), labels=y,
                              train_mask=np_of("train_mask"), val_mask=np_of("val_mask"),
                              test_mask=np_of("test_mask"), edge_weight=w, **kwargs)

    @classmethod
    def from_dgl(cls, g: Any, *, feature_key: str = "feat", label_key: str = "label",
                 **kwargs: Any) -> "Graph":
        """Build from a homogeneous ``dgl.DGLGraph``; ndata ``feat``/``label``/``*_mask`` are taken."""
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
        ids = _as_int_array(name, ids)
        _check_ids(name, ids, num_nodes)
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
    def multilabel(self) -> bool:
        return self.y is not None and self.y.ndim == 2

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
        step = max(_CHUNK, n)
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
            parts.append(f"num_classes={self.num_classes}" + (" multilabel" if self.multilabel else ""))
        return f"Graph({', '.join(parts)})"


# ---------------------------------------------------------------------------- CSR builder
# Edge ``src -> dst`` is the int64 key ``dst * n + src``, so sorting keys sorts edges by
# (destination, source). Without weights equal keys are identical edges and an in-place
# (unstable) sort gives the same arrays as a stable one; with weights the builder takes a stable
# argsort, because repeated edges keep their weights in input order. Every step works on sorted
# int64 arrays (sort, run detection, merge); none looks keys up in random order, which is what
# makes the build fast at scale (a binary search per edge costs a cache miss per probe).

_MAX_NODES = 3_037_000_499
"""Largest ``num_nodes`` whose edge keys ``dst * n + src`` fit in int64 (``isqrt(2**63 - 1)``)."""

_CHUNK = 1 << 20
"""Elements per step of the chunked loops: bounds their temporaries, never changes a result."""


def _build_csr(src: np.ndarray, dst: np.ndarray, n: int, w: np.ndarray | None, *,
               symmetrize: bool, remove_self_loops: bool, remove_duplicates: bool,
               ) -> tuple[np.ndarray, np.ndarray, np.ndarray | None, dict[str, int]]:
    """Sort edges by (dst, src) into CSR, applying the cleaning options; returns the counts.

    ``src``, ``dst`` integer ``[E]`` (validated ids), ``w`` float32 ``[E]`` or None. Returns
    ``(indptr, indices, edge_weight, report)`` as :func:`_csr_from_keys`.
    """
    report: dict[str, int] = {}
    # unweighted symmetrize writes the reverses after the keys: room is reserved, not touched
    room = src.size if (symmetrize and w is None) else 0
    keys, num_keys, w, loops = _edge_keys(src, dst, n, w, drop_self_loops=remove_self_loops,
                                          room=room)
    if remove_self_loops:
        report["self_loops_removed"] = loops
    return _csr_from_keys(keys, n, w, num_keys=num_keys, symmetrize=symmetrize,
                          remove_duplicates=remove_duplicates, report=report)


def _edge_keys(src: np.ndarray, dst: np.ndarray, n: int, w: np.ndarray | None, *,
               drop_self_loops: bool, room: int = 0,
               ) -> tuple[np.ndarray, int, np.ndarray | None, int]:
    """Keys ``dst * n + src`` and weights of the edges, self-loops dropped when asked.

    Returns ``(keys, num_keys, w, loops)``: an int64 buffer whose first ``num_keys`` entries are
    the keys, built chunk by chunk, followed by ``room`` unused entries (untouched memory, so
    free until written); the kept weights ``[num_keys]`` or None; the self-loops dropped.
    """
    keys = np.empty(src.size + room, dtype=np.int64)
    w_kept = np.empty_like(w) if (w is not None and drop_self_loops) else w
    filled = 0
    for lo in range(0, src.size, _CHUNK):
        s, d = src[lo:lo + _CHUNK], dst[lo:lo + _CHUNK]
        k = d.astype(np.int64)
        k *= n
        k += s
        if drop_self_loops:
            keep = s != d
            k = k[keep]
            if w_kept is not None:
                w_kept[filled:filled + k.size] = w[lo:lo + _CHUNK][keep]  # type: ignore[index]
        keys[filled:filled + k.size] = k
        filled += k.size
    if w_kept is not None:
        w_kept = w_kept[:filled]
    return keys, filled, w_kept, src.size - filled


def _csr_from_keys(keys: np.ndarray, n: int, w: np.ndarray | None = None, *,
                   num_keys: int | None = None, symmetrize: bool = False,
                   remove_duplicates: bool = False, report: dict[str, int] | None = None,
                   ) -> tuple[np.ndarray, np.ndarray, np.ndarray | None, dict[str, int]]:
    """CSR by destination of the edges given as keys ``dst * n + src``: the core of
    :meth:`Graph.from_edges`, shared with the generators in :mod:`partitioners.synthetic`.

    Args:
        keys: int64 buffer whose first ``num_keys`` entries (default: all) are the edge keys in
            input order, each in ``[0, n * n)``. The buffer is consumed: sorted and overwritten
            in place. Unweighted ``symmetrize`` writes the reverses into the entries after the
            keys when there is room for ``num_keys`` more, instead of into a new array.
        n: number of nodes, ``1 <= n <= _MAX_NODES``.
        w: float32 ``[num_keys]`` weights in input order, or None.
        num_keys: ``M``, the number of keys at the front of ``keys`` (default: ``keys.size``).
        symmetrize, remove_duplicates: as in :meth:`Graph.from_edges` (self-loops are the
            caller's to drop, before this step).
        report: counts so far (e.g. ``self_loops_removed``); ``duplicates_removed`` and
            ``symmetrize_added`` are added to it, in that order.

    Returns ``(indptr, indices, edge_weight, report)``: int64 ``[n+1]``, int32/int64 ``[E]``
    (:func:`index_dtype`), float32 ``[E]`` or None, and the report.
    """
    report = {} if report is None else report
    buffer = keys
    keys = buffer[:buffer.size if num_keys is None else num_keys]
    if w is None:
        keys.sort()  # equal keys are identical edges, so any sort gives the stable order
        if remove_duplicates:
            m = keys.size
            keys = _dedupe_sorted(keys)
            report["duplicates_removed"] = int(m - keys.size)
        if symmetrize:
            keys, added = _symmetric_union(buffer, keys.size, n, unique=remove_duplicates)
            report["symmetrize_added"] = added
        del buffer
    else:
        del buffer
        order = _stable_key_order(keys, n)  # duplicates keep their weights in input order
        keys[:] = keys[order]  # back into the caller's buffer: one [M] key array at a time
        w = w[order]
        del order
        first: np.ndarray | None = _run_starts(keys)
        if remove_duplicates:
            assert first is not None
            kept = int(np.count_nonzero(first))
            report["duplicates_removed"] = int(keys.size - kept)
            keys[:kept] = keys[first]
            keys, w = keys[:kept], w[first]
            first = None  # every key is now the first of its run
        if symmetrize:
            added_keys, added_w = _missing_reverses(keys, w, n, first)
            report["symmetrize_added"] = int(added_keys.size)
            keys, w = _insert_sorted(keys, w, added_keys, added_w)
    # the in-edges of destination v are the keys in [v * n, (v + 1) * n)
    indptr = np.searchsorted(keys, np.arange(n + 1, dtype=np.int64) * n).astype(np.int64, copy=False)
    indices = np.empty(keys.size, dtype=index_dtype(n))
    np.remainder(keys, n, out=indices)  # buffered cast: no int64 temporary of [E]
    return indptr, indices, w, report


def _run_starts(keys: np.ndarray) -> np.ndarray:
    """bool ``[M]``: True where a sorted key differs from the one before (the first of each run)."""
    first = np.empty(keys.size, dtype=bool)
    if keys.size:
        first[0] = True
        np.not_equal(keys[1:], keys[:-1], out=first[1:])
    return first


def _dedupe_sorted(keys: np.ndarray) -> np.ndarray:
    """Drop repeats from a sorted 1-D array in place; returns the leading view that holds them.

    Chunk by chunk, the first key of each run moves forward to its final place, which is never
    after where it was, so no chunk is overwritten before it is read.
    """
    out = 0
    last = None
    for lo in range(0, keys.size, _CHUNK):
        chunk = keys[lo:lo + _CHUNK]
        first = _run_starts(chunk)
        if last is not None:
            first[0] = chunk[0] != last
        last = chunk[-1].copy()
        kept = chunk[first]  # a copy, taken before anything in this chunk is written
        keys[out:out + kept.size] = kept
        out += kept.size
    return keys[:out]


def _reverse_keys(keys: np.ndarray, n: int, out: np.ndarray | None = None) -> np.ndarray:
    """Keys ``src * n + dst`` of the reversed edges (int64, same shape), computed in chunks."""
    out = np.empty_like(keys) if out is None else out
    for lo in range(0, keys.size, _CHUNK):
        d, s = np.divmod(keys[lo:lo + _CHUNK], n)
        s *= n
        s += d
        out[lo:lo + _CHUNK] = s
    return out


def _symmetric_union(buffer: np.ndarray, m: int, n: int, *, unique: bool,
                     ) -> tuple[np.ndarray, int]:
    """The ``m`` sorted keys at the front of ``buffer`` (repeats allowed unless ``unique``) plus,
    once, the reverse of each edge whose reverse is missing: returns the sorted result (in
    ``buffer`` when it has room for the reverses) and the number of reverses added.

    With ``U`` the distinct keys and ``R`` their reverses, the result is the set ``U | R`` plus
    the repeats of the input (each key beyond the first of its run), so ``|R - U|`` are added.
    """
    keys = buffer[:m]
    repeats = None
    if not unique:
        repeats = keys[~_run_starts(keys)]
        keys = _dedupe_sorted(keys)
    m = keys.size
    if buffer.size >= 2 * m:
        union = buffer[:2 * m]
    else:
        union = np.empty(2 * m, dtype=np.int64)
        union[:m] = keys
    del keys, buffer
    _reverse_keys(union[:m], n, out=union[m:])
    union.sort()
    union = _dedupe_sorted(union)
    added = int(union.size - m)
    if repeats is not None and repeats.size:
        union = np.concatenate([union, repeats])
        union.sort()
    return union, added


def _stable_order_by(values: np.ndarray, bound: int) -> np.ndarray:
    """Stable argsort (int64 ``[M]``) of int64 ``values`` in ``[0, bound)``; ``values`` is consumed.

    Sorts the distinct composites ``value * M + position`` in place, which is several times
    faster than ``argsort(kind="stable")``; falls back to that when a composite would overflow.
    """
    m = values.size
    if bound * m > 2**63:
        return np.argsort(values, kind="stable")
    values *= m
    for lo in range(0, m, _CHUNK):  # + position, chunk by chunk (no arange of [M])
        values[lo:lo + _CHUNK] += np.arange(lo, min(m, lo + _CHUNK), dtype=np.int64)
    values.sort()
    np.remainder(values, max(m, 1), out=values)
    return values


def _stable_key_order(keys: np.ndarray, n: int) -> np.ndarray:
    """Stable argsort of edge keys: by source, then stably by destination (LSD, two passes)."""
    order = _stable_order_by(keys % n, n)
    dst = keys[order]
    dst //= n
    result = _stable_order_by(dst, n)
    for lo in range(0, result.size, _CHUNK):  # result = order[result], in place
        result[lo:lo + _CHUNK] = order[result[lo:lo + _CHUNK]]
    return result


def _sorted_isin(queries: np.ndarray, sorted_keys: np.ndarray) -> np.ndarray:
    """bool ``[Q]``: membership of sorted ``queries`` in sorted ``sorted_keys``, in chunks.

    Sorted queries make each binary search start where the last one ended (cache friendly).
    """
    found = np.zeros(queries.size, dtype=bool)
    if sorted_keys.size == 0:
        return found
    for lo in range(0, queries.size, _CHUNK):
        q = queries[lo:lo + _CHUNK]
        pos = np.searchsorted(sorted_keys, q)
        np.minimum(pos, sorted_keys.size - 1, out=pos)
        found[lo:lo + _CHUNK] = sorted_keys[pos] == q
    return found


def _missing_reverses(keys: np.ndarray, w: np.ndarray, n: int, first: np.ndarray | None,
                      ) -> tuple[np.ndarray, np.ndarray]:
    """Sorted keys of the reverses missing from sorted ``keys``, once each, and their weights:
    the weight of the first forward edge (``first`` marks run starts; None when keys are unique)."""
    if first is not None:
        keys, w = keys[first], w[first]
    # keys are sorted by (dst, src): a stable sort by src orders their reverses by (src, dst)
    by_src = _stable_order_by(keys % n, n)
    rev, w_rev = keys[by_src], w[by_src]
    del by_src
    _reverse_keys(rev, n, out=rev)
    missing = ~_sorted_isin(rev, keys)
    return rev[missing], w_rev[missing]


def _insert_sorted(keys: np.ndarray, w: np.ndarray, new_keys: np.ndarray, new_w: np.ndarray,
                   ) -> tuple[np.ndarray, np.ndarray]:
    """Merge sorted ``new_keys`` (none equal to a key of ``keys``) and their weights into sorted
    ``keys`` and ``w``; the order of ``keys`` among themselves is kept."""
    at = np.empty(new_keys.size, dtype=np.int64)
    for lo in range(0, new_keys.size, _CHUNK):  # final positions of the new keys
        hi = min(new_keys.size, lo + _CHUNK)
        at[lo:hi] = np.searchsorted(keys, new_keys[lo:hi])
        at[lo:hi] += np.arange(lo, hi)
    mask = np.zeros(keys.size + new_keys.size, dtype=bool)
    mask[at] = True
    del at
    merged_keys = np.empty(mask.size, dtype=np.int64)
    merged_w = np.empty(mask.size, dtype=w.dtype)
    merged_keys[mask] = new_keys  # a boolean mask fills its places in order
    merged_w[mask] = new_w
    np.logical_not(mask, out=mask)
    merged_keys[mask] = keys
    merged_w[mask] = w
    return merged_keys, merged_w
