"""The local bipartite graph a rank's layers run on.

Legend: ``S`` = ``num_src`` (inner rows then halo rows), ``D`` = ``num_dst`` (the inner rows),
``E`` = number of local edges, ``F`` = feature width.

A rank owns ``D`` destination nodes; every in-edge of one of them is stored locally. Its sources
are local ids: the inner rows ``[0, D)`` (so a destination's own row is its source row too) and
then ``S - D`` halo rows owned by other ranks. Degrees are those of the *whole* graph, one per
local row, so a layer can normalise exactly without talking to other ranks.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass, field, replace
from typing import Any, Callable, Hashable, TypeVar

import torch

from ..kernels import Kernels, KernelBackend, default_kernels, resolve_kernels
from .block_checks import (BlockError, as_long, check_local_counts, checked_csr, checked_edge_attr, checked_edge_weight,
                           checked_weighted_degree, graph_weighted_degree, node_arrays)
from .block_types import BlockTypes

__all__ = ["Block", "BlockError"]

T = TypeVar("T")


@dataclass(kw_only=True, eq=False)
class Block:
    """A local bipartite block: ``D`` destinations, ``S`` sources, CSR by destination.

    Build one with :meth:`from_csr` (validated) or :meth:`from_graph` (from a whole graph in
    memory). Derived structures (:attr:`edge_index`, :attr:`adj`, :attr:`adj_t`,
    :attr:`self_loop_mask`, ...) are built on first use and cached on the block.

    Shapes:
        ``indptr`` int64 ``[D + 1]``, ``indices`` int64 ``[E]`` (local source ids),
        ``edge_weight`` float ``[E]`` or None, ``edge_attr`` float ``[E, D_e]`` or None (both in
        edge order), ``in_degree``/``out_degree``/``self_loops``/``src_original_ids`` int64 ``[S]``.
    """

    num_src: int
    """Number of source rows ``S``: the inner rows, then the halo rows."""
    num_dst: int
    """Number of destination rows ``D``: the inner rows, which are also sources ``[0, D)``."""
    indptr: torch.Tensor
    """int64 ``[D + 1]``: in-edges of destination ``v`` are ``indptr[v]:indptr[v + 1]``."""
    indices: torch.Tensor
    """int64 ``[E]``: local source id of each edge."""
    edge_weight: torch.Tensor | None
    """float ``[E]`` edge weights, or None for an unweighted graph."""
    in_degree: torch.Tensor
    """int64 ``[S]``: in-degree of each local row in the whole graph (self-loops and duplicates counted)."""
    out_degree: torch.Tensor
    """int64 ``[S]``: out-degree of each local row in the whole graph."""
    self_loops: torch.Tensor
    """int64 ``[S]``: number of self-loop edges ``v -> v`` of each local row in the whole graph."""
    src_original_ids: torch.Tensor
    """int64 ``[S]``: the input graph's id of each local row (destinations are the first ``D``)."""
    weighted_degree: torch.Tensor | None = None
    """float32 ``[S, 2]`` of a weighted graph: each local row's in-edge weight sum in the whole
    graph without self-loops, and the weight of its self-loop (0 without one); None when
    unweighted or not stored (partition folders written before it was)."""
    edge_attr: torch.Tensor | None = None
    """float32 ``[E, D_e]`` edge features, row ``e`` those of edge ``e`` (CSR order, aligned with
    :attr:`indices` and :attr:`edge_index`), or None. Every block derived from this one (a
    sub-block, a split by source) carries its edges' rows."""
    types: BlockTypes | None = None
    """A typed block's node and edge types (:class:`~gnn_dist.nn.block_types.BlockTypes`), carried
    by every block derived from it; None for a homogeneous graph."""
    kernels: Kernels | None = None
    """The aggregation kernels of this block (and the blocks derived from it); None: the
    process's default (:func:`~gnn_dist.kernels.default_kernels`). See :meth:`with_kernels`."""
    _cache: dict[Hashable, Any] = field(default_factory=dict, init=False, repr=False)

    # ------------------------------------------------------------------ builders
    @classmethod
    def from_csr(cls, *, indptr: Any, indices: Any, num_src: int, in_degree: Any, out_degree: Any,
                 self_loops: Any, src_original_ids: Any, edge_weight: Any = None,
                 weighted_degree: Any = None, kernels: str | Kernels | None = None,
                 edge_attr: Any = None) -> "Block":
        """Validate and build a block from its CSR arrays (numpy arrays or tensors).

        Checks shapes, id ranges and that the block holds every in-edge of its destinations
        (``in_degree``/``self_loops`` of rows ``[0, D)`` equal the local counts). Raises
        :class:`BlockError` naming the field.
        """
        indptr_t = as_long("indptr", indptr)
        indices_t = as_long("indices", indices)
        num_src = int(num_src)
        num_dst, counts = checked_csr(indptr_t, indices_t, num_src)
        arrays = node_arrays(num_src, in_degree=in_degree, out_degree=out_degree, self_loops=self_loops,
                              src_original_ids=src_original_ids)
        dst = check_local_counts(arrays, counts, indices_t, num_dst)
        weight = checked_edge_weight(edge_weight, indices_t.numel())
        wdeg = checked_weighted_degree(weighted_degree, weight, num_src)
        block = cls(num_src=num_src, num_dst=num_dst, indptr=indptr_t, indices=indices_t, edge_weight=weight,
                    weighted_degree=wdeg, kernels=None if kernels is None else resolve_kernels(kernels),
                    edge_attr=checked_edge_attr(edge_attr, indices_t.numel()), **arrays)
        block._cache["dst_index"] = dst
        return block

    @classmethod
    def from_graph(cls, indptr: Any, indices: Any, dst_nodes: Any = None, *, edge_weight: Any = None,
                   original_ids: Any = None, edge_attr: Any = None) -> "Block":
        """The block of destinations ``dst_nodes`` of a whole graph held in memory.

        The graph is given as CSR by destination over ``N = len(indptr) - 1`` nodes (``indices``
        are source ids). ``dst_nodes`` (default: all nodes, in order) become the inner rows in the
        given order; the halo rows are the other sources of their in-edges, in ascending id.
        Degrees are computed on the whole graph. ``original_ids`` (int64 ``[N]``, default
        ``arange(N)``) gives each node's id for :attr:`src_original_ids`; ``edge_attr`` ``[E, D_e]``
        (CSR order) the edges' features, kept with their edges. This is how a single
        device runs a model on a whole graph, and how tests build the parts of a split graph.
        """
        g_indptr = as_long("indptr", indptr)
        g_indices = as_long("indices", indices)
        n = g_indptr.numel() - 1
        if n < 0 or int(g_indptr[-1]) != g_indices.numel():
            raise BlockError(f"indices has {g_indices.numel()} entries but indptr[-1] = "
                             f"{int(g_indptr[-1]) if g_indptr.numel() else None}")
        if g_indices.numel() and (int(g_indices.min()) < 0 or int(g_indices.max()) >= n):
            raise BlockError(f"indices must lie in [0, {n}), got [{int(g_indices.min())}, {int(g_indices.max())}]")
        g_counts = g_indptr.diff()
        g_dst = torch.repeat_interleave(torch.arange(n, dtype=torch.long), g_counts)
        in_degree = g_counts.clone()
        out_degree = torch.bincount(g_indices, minlength=n)
        self_loops = torch.bincount(g_dst[g_indices == g_dst], minlength=n)
        orig = torch.arange(n, dtype=torch.long) if original_ids is None else as_long("original_ids", original_ids)
        if orig.numel() != n:
            raise BlockError(f"original_ids has {orig.numel()} entries but the graph has {n} nodes")
        weight = None if edge_weight is None else torch.as_tensor(edge_weight)
        wdeg = None if weight is None else graph_weighted_degree(g_dst, g_indices, weight.to(torch.float32), n)
        attr = checked_edge_attr(edge_attr, g_indices.numel())
        if dst_nodes is None:
            return cls.from_csr(indptr=g_indptr, indices=g_indices, num_src=n, in_degree=in_degree,
                                out_degree=out_degree, self_loops=self_loops, src_original_ids=orig,
                                edge_weight=weight, weighted_degree=wdeg, edge_attr=attr)
        dst_t = as_long("dst_nodes", dst_nodes)
        if dst_t.numel() and (int(dst_t.min()) < 0 or int(dst_t.max()) >= n):
            raise BlockError(f"dst_nodes must lie in [0, {n})")
        if torch.unique(dst_t).numel() != dst_t.numel():
            raise BlockError("dst_nodes has repeated ids")
        starts, counts = g_indptr[dst_t], g_counts[dst_t]
        local_indptr = torch.zeros(dst_t.numel() + 1, dtype=torch.long)
        torch.cumsum(counts, 0, out=local_indptr[1:])
        # position of each kept edge in the global CSR, row by row in dst_nodes order
        row = torch.repeat_interleave(torch.arange(dst_t.numel()), counts)
        edge_pos = starts[row] + torch.arange(int(local_indptr[-1])) - local_indptr[:-1][row]
        src_global = g_indices[edge_pos]
        local_of = torch.full((n,), -1, dtype=torch.long)
        local_of[dst_t] = torch.arange(dst_t.numel())
        is_inner = torch.zeros(n, dtype=torch.bool)
        is_inner[dst_t] = True
        halo = torch.unique(src_global[~is_inner[src_global]])  # sorted ascending
        local_of[halo] = dst_t.numel() + torch.arange(halo.numel())
        rows = torch.cat([dst_t, halo])
        return cls.from_csr(indptr=local_indptr, indices=local_of[src_global], num_src=rows.numel(),
                            in_degree=in_degree[rows], out_degree=out_degree[rows],
                            self_loops=self_loops[rows], src_original_ids=orig[rows],
                            edge_weight=None if weight is None else weight[edge_pos],
                            weighted_degree=None if wdeg is None else wdeg[rows],
                            edge_attr=None if attr is None else attr[edge_pos])

    # ------------------------------------------------------------------ views
    def sub_block(self, dst_rows: Any) -> tuple["Block", torch.Tensor]:
        """The block of destinations ``dst_rows`` with all their in-edges, and its source rows.

        ``dst_rows`` (int64 ``[D']``, distinct ids in ``[0, D)``) become the new destinations in
        the given order; the new sources are those rows first, then the other sources of their
        edges in ascending id. Returns ``(sub, src_rows)`` with ``src_rows`` int64 ``[S']`` the
        new sources' ids in this block, so ``conv(sub, x_src[src_rows])`` equals
        ``conv(self, x_src)[dst_rows]`` for every layer whose output row depends only on its
        in-edges (all built-in ones): degrees, self-loop counts and original ids are carried
        over, edges keep their order within each destination. This is how a layer runs on a
        chunk of destinations (the chunked first layer) or on a subset first (boundary rows).
        """
        dst = as_long("dst_rows", dst_rows).to(self.device)
        if dst.numel() and (int(dst.min()) < 0 or int(dst.max()) >= self.num_dst):
            raise BlockError(f"dst_rows must lie in [0, num_dst={self.num_dst}), got "
                             f"[{int(dst.min())}, {int(dst.max())}]")
        counts = self.in_count[dst]
        indptr = torch.zeros(dst.numel() + 1, dtype=torch.long, device=self.device)
        torch.cumsum(counts, 0, out=indptr[1:])
        num_edges = int(indptr[-1])
        row = torch.repeat_interleave(torch.arange(dst.numel(), device=self.device), counts,
                                      output_size=num_edges)
        edge_pos = self.indptr[dst][row] + torch.arange(num_edges, device=self.device) - indptr[:-1][row]
        src = self.indices[edge_pos]
        local_of = torch.full((self.num_src,), -1, dtype=torch.long, device=self.device)
        local_of[dst] = torch.arange(dst.numel(), device=self.device)
        if int((local_of[dst] != torch.arange(dst.numel(), device=self.device)).sum()):
            raise BlockError("dst_rows has repeated ids")
        others = torch.unique(src[local_of[src] < 0])
        local_of[others] = dst.numel() + torch.arange(others.numel(), device=self.device)
        rows = torch.cat([dst, others])
        sub = self.derived(rows, edge_pos, num_src=rows.numel(), num_dst=dst.numel(), indptr=indptr,
                           indices=local_of[src])
        sub._cache["dst_index"] = row
        return sub, rows

    def derived(self, rows: Any, edges: torch.Tensor, *, num_src: int, num_dst: int, indptr: torch.Tensor,
                indices: torch.Tensor) -> "Block":
        """A block of this one's source rows ``rows`` (an index tensor or a slice) and edges
        ``edges``, on the CSR ``indptr``/``indices`` given: every per-row field (degrees stay the
        whole graph's) and per-edge field picked, the types too (:meth:`sub_block`, the overlap
        schedule's split)."""
        def pick(t: torch.Tensor | None, at: Any) -> torch.Tensor | None:
            return None if t is None else t[at]
        return Block(num_src=num_src, num_dst=num_dst, indptr=indptr, indices=indices,
                     edge_weight=pick(self.edge_weight, edges), in_degree=self.in_degree[rows],
                     out_degree=self.out_degree[rows], self_loops=self.self_loops[rows],
                     src_original_ids=self.src_original_ids[rows], weighted_degree=pick(self.weighted_degree, rows),
                     edge_attr=pick(self.edge_attr, edges),
                     types=None if self.types is None else self.types.derived(rows, edges), kernels=self.kernels)

    @property
    def num_edges(self) -> int:
        return int(self.indices.numel())

    @property
    def edge_dim(self) -> int:
        """``D_e``, the width of :attr:`edge_attr`; 0 without edge features."""
        return 0 if self.edge_attr is None else int(self.edge_attr.shape[1])

    @property
    def num_halo(self) -> int:
        return self.num_src - self.num_dst

    @property
    def device(self) -> torch.device:
        return self.indptr.device

    def with_kernels(self, kernels: str | Kernels) -> "Block":
        """This block with the aggregation kernels ``kernels`` (a name or a
        :class:`~gnn_dist.kernels.Kernels`); the arrays are shared, the caches not."""
        return replace(self, kernels=resolve_kernels(kernels))

    def backend_for(self, t: torch.Tensor) -> KernelBackend:
        """The kernel backend this block's aggregations run on for tensors like ``t``."""
        return (self.kernels or default_kernels()).for_tensor(t)

    def cached(self, key: Hashable, build: Callable[[], T]) -> T:
        """The value cached on this block under ``key``, built by ``build()`` on first use.

        Layers keep per-block constants here (e.g. GCN's edge normalisation). The cache is
        dropped by :meth:`to`.
        """
        if key not in self._cache:
            self._cache[key] = build()
        return self._cache[key]

    @property
    def dst_index(self) -> torch.Tensor:
        """int64 ``[E]``: destination id of each edge, in CSR order."""
        return self.cached("dst_index", lambda: torch.repeat_interleave(
            torch.arange(self.num_dst, dtype=torch.long, device=self.device), self.indptr.diff(),
            output_size=self.num_edges))

    @property
    def in_count(self) -> torch.Tensor:
        """int64 ``[D]``: number of local in-edges of each destination (``indptr.diff()``)."""
        return self.cached("in_count", lambda: self.indptr.diff())

    @property
    def edge_index(self) -> torch.Tensor:
        """int64 ``[2, E]``: row 0 = source, row 1 = destination (PyG convention), CSR order.

        Any PyG ``MessagePassing`` layer runs on the block with
        ``conv((x_src, x_src[:num_dst]), block.edge_index, size=(num_src, num_dst))``.
        """
        return self.cached("edge_index", lambda: torch.stack([self.indices, self.dst_index]))

    @property
    def self_loop_mask(self) -> torch.Tensor:
        """bool ``[E]``: True on self-loop edges (source id == destination id)."""
        return self.cached("self_loop_mask", lambda: self.indices == self.dst_index)

    def _transpose(self) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """CSR of the transpose: ``(indptr_t [S + 1], indices_t [E] (dst ids), perm [E])``.

        ``perm`` maps the transpose's edge order to the block's: values of the transpose are
        ``values[perm]``.
        """
        def build() -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
            perm = torch.argsort(self.indices, stable=True)
            indptr_t = torch.zeros(self.num_src + 1, dtype=torch.long, device=self.device)
            torch.cumsum(torch.bincount(self.indices, minlength=self.num_src), 0, out=indptr_t[1:])
            return indptr_t, self.dst_index[perm], perm
        return self.cached("transpose", build)

    def ones(self, dtype: torch.dtype) -> torch.Tensor:
        """``[E]`` ones of ``dtype`` (cached): the values of the unweighted adjacency."""
        return self.cached(("ones", dtype), lambda: torch.ones(self.num_edges, dtype=dtype, device=self.device))

    def csr(self, values: torch.Tensor) -> torch.Tensor:
        """Sparse CSR ``[D, S]`` with ``values [E]`` (in edge order) at ``[dst, src]``."""
        return _sparse_csr(self.indptr, self.indices, values, (self.num_dst, self.num_src))

    def csr_t(self, values: torch.Tensor) -> torch.Tensor:
        """Sparse CSR ``[S, D]``: the transpose of :meth:`csr` for the same ``values [E]``."""
        indptr_t, indices_t, perm = self._transpose()
        return _sparse_csr(indptr_t, indices_t, values[perm], (self.num_src, self.num_dst))

    @property
    def adj(self) -> torch.Tensor:
        """Sparse CSR ``[D, S]`` float32 adjacency pattern (ones; edge weights are not applied)."""
        return self.cached("adj", lambda: self.csr(self.ones(torch.float32)))

    @property
    def adj_t(self) -> torch.Tensor:
        """Sparse CSR ``[S, D]``: the transpose of :attr:`adj`, precomputed for backward passes."""
        return self.cached("adj_t", lambda: self.csr_t(self.ones(torch.float32)))

    def to(self, device: torch.device | str, non_blocking: bool = False) -> "Block":
        """A copy of the block on ``device`` (caches are rebuilt there on use)."""
        def mv(t: torch.Tensor | None) -> torch.Tensor | None:
            return None if t is None else t.to(device, non_blocking=non_blocking)
        return replace(self, indptr=mv(self.indptr), indices=mv(self.indices), edge_weight=mv(self.edge_weight),
                       in_degree=mv(self.in_degree), out_degree=mv(self.out_degree),
                       self_loops=mv(self.self_loops), src_original_ids=mv(self.src_original_ids),
                       weighted_degree=mv(self.weighted_degree), edge_attr=mv(self.edge_attr),
                       types=None if self.types is None else self.types.to(device))

    def dst_rows(self, x_src: torch.Tensor) -> torch.Tensor:
        """The destinations' rows of ``x_src`` (``[S, ...]``, destinations first): ``x_src[:D]``, or
        ``x_src`` itself when it has no other rows (a whole graph's block), which spares autograd
        the slice's backward (a zero fill and a copy of ``[S, ...]``)."""
        return x_src if x_src.shape[0] == self.num_dst else x_src[:self.num_dst]

    def check_src(self, x_src: torch.Tensor, in_channels: int | None, who: str) -> None:
        """Raise ``ValueError`` unless ``x_src`` is ``[S, in_channels]`` (``who`` names the layer)."""
        if not isinstance(x_src, torch.Tensor) or x_src.dim() != 2:
            shape = list(x_src.shape) if isinstance(x_src, torch.Tensor) else type(x_src).__name__
            raise ValueError(f"{who}: x_src must be a 2-D tensor [num_src, in_channels], got {shape}")
        if x_src.shape[0] != self.num_src:
            raise ValueError(f"{who}: x_src has {x_src.shape[0]} rows but the block has num_src = "
                             f"{self.num_src} (inner rows then halo rows)")
        if in_channels is not None and x_src.shape[1] != in_channels:
            raise ValueError(f"{who}: x_src has {x_src.shape[1]} features per row but in_channels = {in_channels}")

    def __repr__(self) -> str:
        w = (", weighted" if self.edge_weight is not None else "") + (f", edge_dim={self.edge_dim}" if self.edge_dim else "")
        return (f"Block(num_src={self.num_src}, num_dst={self.num_dst}, num_halo={self.num_halo}, "
                f"num_edges={self.num_edges}{w}, device={self.device})")


def _sparse_csr(crow: torch.Tensor, col: torch.Tensor, values: torch.Tensor, size: tuple[int, int]) -> torch.Tensor:
    with warnings.catch_warnings():  # torch warns once that sparse CSR is "beta"
        warnings.filterwarnings("ignore", message=".*[Ss]parse CSR tensor support is in beta.*")
        return torch.sparse_csr_tensor(crow, col, values, size=size, check_invariants=False)
