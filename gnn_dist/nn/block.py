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

import numpy as np
import torch

from ..kernels import Kernels, KernelBackend, default_kernels, resolve_kernels
from .block_types import BlockTypes

__all__ = ["Block", "BlockError"]

T = TypeVar("T")


class BlockError(ValueError):
    """A block's arrays are inconsistent; the message names the field and the bad value."""


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
        indptr_t = _as_long("indptr", indptr)
        indices_t = _as_long("indices", indices)
        num_src = int(num_src)
        num_dst, counts = _checked_csr(indptr_t, indices_t, num_src)
        arrays = _node_arrays(num_src, in_degree=in_degree, out_degree=out_degree, self_loops=self_loops,
                              src_original_ids=src_original_ids)
        dst = _check_local_counts(arrays, counts, indices_t, num_dst)
        weight = _edge_weight(edge_weight, indices_t.numel())
        wdeg = _given_weighted_degree(weighted_degree, weight, num_src)
        block = cls(num_src=num_src, num_dst=num_dst, indptr=indptr_t, indices=indices_t, edge_weight=weight,
                    weighted_degree=wdeg, kernels=None if kernels is None else resolve_kernels(kernels),
                    edge_attr=_edge_attr(edge_attr, indices_t.numel()), **arrays)
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
        g_indptr = _as_long("indptr", indptr)
        g_indices = _as_long("indices", indices)
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
        orig = torch.arange(n, dtype=torch.long) if original_ids is None else _as_long("original_ids", original_ids)
        if orig.numel() != n:
            raise BlockError(f"original_ids has {orig.numel()} entries but the graph has {n} nodes")
        weight = None if edge_weight is None else torch.as_tensor(edge_weight)
        wdeg = None if weight is None else _weighted_degree(g_dst, g_indices, weight.to(torch.float32), n)
        attr = _edge_attr(edge_attr, g_indices.numel())
        if dst_nodes is None:
            return cls.from_csr(indptr=g_indptr, indices=g_indices, num_src=n, in_degree=in_degree,
                                out_degree=out_degree, self_loops=self_loops, src_original_ids=orig,
                                edge_weight=weight, weighted_degree=wdeg, edge_attr=attr)
        dst_t = _as_long("dst_nodes", dst_nodes)
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
        dst = _as_long("dst_rows", dst_rows).to(self.device)
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
        sub = Block(num_src=rows.numel(), num_dst=dst.numel(), indptr=indptr, indices=local_of[src],
                    edge_weight=None if self.edge_weight is None else self.edge_weight[edge_pos],
                    in_degree=self.in_degree[rows], out_degree=self.out_degree[rows],
                    self_loops=self.self_loops[rows], src_original_ids=self.src_original_ids[rows],
                    weighted_degree=None if self.weighted_degree is None else self.weighted_degree[rows],
                    edge_attr=None if self.edge_attr is None else self.edge_attr[edge_pos],
                    types=None if self.types is None else self.types.derived(rows, edge_pos), kernels=self.kernels)
        sub._cache["dst_index"] = row
        return sub, rows

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


def _weighted_degree(dst: torch.Tensor, src: torch.Tensor, weight: torch.Tensor, n: int) -> torch.Tensor:
    """float32 ``[n, 2]`` (:attr:`Block.weighted_degree`) of a whole graph's edges ``src -> dst``
    in CSR order: non-loop in-edge weights summed in float64, the last self-loop's weight."""
    loop = src == dst
    out = torch.zeros(n, 2, dtype=torch.float64)
    out[:, 0].index_add_(0, dst[~loop], weight[~loop].to(torch.float64))
    pos = torch.nonzero(loop).flatten()
    last = torch.full((n,), -1, dtype=torch.long).scatter_reduce_(0, dst[pos], pos, "amax")
    has = last >= 0
    out[has, 1] = weight[last[has]].to(torch.float64)
    return out.to(torch.float32)


def _checked_csr(indptr: torch.Tensor, indices: torch.Tensor, num_src: int) -> tuple[int, torch.Tensor]:
    """``(num_dst, row lengths [D])`` of a block's CSR, after checking it: ``indptr`` starts at 0,
    never decreases and ends at ``E``, ``D <= S``, and every index is in ``[0, S)``."""
    if indptr.numel() < 1:
        raise BlockError("indptr must be a 1-D array of length num_dst + 1, got an empty array")
    num_dst = indptr.numel() - 1
    if num_src < num_dst:
        raise BlockError(f"num_src = {num_src} is smaller than num_dst = {num_dst} (len(indptr) - 1); "
                         "the destinations must be the first num_dst sources")
    if int(indptr[0]) != 0:
        raise BlockError(f"indptr[0] = {int(indptr[0])}, expected 0")
    counts = indptr.diff()
    if bool((counts < 0).any()):
        i = int(torch.nonzero(counts < 0)[0])
        raise BlockError(f"indptr must be non-decreasing, but indptr[{i + 1}] < indptr[{i}]")
    if int(indptr[-1]) != indices.numel():
        raise BlockError(f"indices has {indices.numel()} entries but indptr[-1] = {int(indptr[-1])}")
    if indices.numel():
        bad = (indices < 0) | (indices >= num_src)
        if bool(bad.any()):
            i = int(torch.nonzero(bad)[0])
            raise BlockError(f"indices[{i}] = {int(indices[i])} is out of range [0, num_src={num_src})")
    return num_dst, counts


def _node_arrays(num_src: int, **given: Any) -> dict[str, torch.Tensor]:
    """The per-row arrays ``given`` (``in_degree``, ``out_degree``, ``self_loops``,
    ``src_original_ids``) as int64 ``[S]`` tensors, after checking that the counts are
    non-negative and ``self_loops <= in_degree``."""
    arrays = {}
    for name, a in given.items():
        t = _as_long(name, a)
        if t.numel() != num_src:
            raise BlockError(f"{name} has {t.numel()} entries but num_src = {num_src}")
        arrays[name] = t
    for name in ("in_degree", "out_degree", "self_loops"):
        if num_src and int(arrays[name].min()) < 0:
            i = int(torch.nonzero(arrays[name] < 0)[0])
            raise BlockError(f"{name}[{i}] = {int(arrays[name][i])} is negative")
    over = arrays["self_loops"] > arrays["in_degree"]
    if bool(over.any()):
        i = int(torch.nonzero(over)[0])
        raise BlockError(f"self_loops[{i}] = {int(arrays['self_loops'][i])} exceeds "
                         f"in_degree[{i}] = {int(arrays['in_degree'][i])}")
    return arrays


def _check_local_counts(arrays: dict[str, torch.Tensor], counts: torch.Tensor, indices: torch.Tensor,
                        num_dst: int) -> torch.Tensor:
    """Check that the block holds every in-edge and self-loop of its destinations (``in_degree``
    and ``self_loops`` of rows ``[0, D)`` equal the CSR's counts); returns each edge's destination
    (int64 ``[E]``)."""
    local_in = arrays["in_degree"][:num_dst] != counts
    if bool(local_in.any()):
        i = int(torch.nonzero(local_in)[0])
        raise BlockError(f"in_degree[{i}] = {int(arrays['in_degree'][i])} but the block holds "
                         f"{int(counts[i])} in-edges of destination {i}; every in-edge of a "
                         "destination must be in its block")
    dst = torch.repeat_interleave(torch.arange(num_dst, dtype=torch.long, device=counts.device), counts,
                                  output_size=indices.numel())
    local_loops = torch.bincount(dst[indices == dst], minlength=num_dst)
    bad_loops = arrays["self_loops"][:num_dst] != local_loops
    if bool(bad_loops.any()):
        i = int(torch.nonzero(bad_loops)[0])
        raise BlockError(f"self_loops[{i}] = {int(arrays['self_loops'][i])} but the block holds "
                         f"{int(local_loops[i])} self-loop edges of destination {i}")
    return dst


def _edge_weight(edge_weight: Any, num_edges: int) -> torch.Tensor | None:
    """``edge_weight`` as a finite float ``[E]`` tensor (float32 unless floating already), or
    None; BlockError naming ``edge_weight`` otherwise."""
    if edge_weight is None:
        return None
    weight = torch.as_tensor(np.asarray(edge_weight) if not isinstance(edge_weight, torch.Tensor)
                             else edge_weight)
    if weight.dim() != 1 or weight.numel() != num_edges:
        raise BlockError(f"edge_weight has shape {list(weight.shape)} but the block has "
                         f"{num_edges} edges")
    if not weight.is_floating_point():
        weight = weight.float()
    if not bool(torch.isfinite(weight).all()):
        i = int(torch.nonzero(~torch.isfinite(weight))[0])
        raise BlockError(f"edge_weight[{i}] = {float(weight[i])} is not finite")
    return weight


def _given_weighted_degree(weighted_degree: Any, weight: torch.Tensor | None, num_src: int,
                           ) -> torch.Tensor | None:
    """``weighted_degree`` as a finite float32 ``[S, 2]`` tensor, or None; BlockError when it is
    given without ``edge_weight`` or malformed."""
    if weighted_degree is None:
        return None
    wdeg = torch.as_tensor(np.asarray(weighted_degree) if not isinstance(weighted_degree, torch.Tensor)
                           else weighted_degree).to(torch.float32)
    if weight is None:
        raise BlockError("weighted_degree is given but the block has no edge_weight")
    if tuple(wdeg.shape) != (num_src, 2):
        raise BlockError(f"weighted_degree has shape {list(wdeg.shape)}; expected [num_src, 2] = "
                         f"[{num_src}, 2]")
    if not bool(torch.isfinite(wdeg).all()):
        raise BlockError("weighted_degree holds a value that is not finite")
    return wdeg


def _edge_attr(a: Any, num_edges: int) -> torch.Tensor | None:
    """``a`` as a float ``[E, D_e]`` tensor of finite values (float32 unless floating already), or
    None; BlockError naming ``edge_attr`` otherwise."""
    if a is None:
        return None
    t = a if isinstance(a, torch.Tensor) else torch.from_numpy(np.array(a))  # a copy: mmaps are read-only
    if t.dim() != 2 or t.shape[0] != num_edges or t.shape[1] < 1:
        raise BlockError(f"edge_attr has shape {list(t.shape)} but the block has {num_edges} edges; "
                         f"edge features are [num_edges, D] with D >= 1")
    if not t.is_floating_point():
        t = t.float()
    if not bool(torch.isfinite(t).all()):
        e = int(torch.nonzero(~torch.isfinite(t))[0, 0])
        raise BlockError(f"edge_attr[{e}] holds a value that is not finite")
    return t


def _as_long(name: str, a: Any) -> torch.Tensor:
    """``a`` (numpy array, tensor or sequence) as a 1-D int64 tensor; BlockError otherwise."""
    if isinstance(a, torch.Tensor):
        t = a
    else:
        arr = np.asarray(a)
        if arr.dtype.kind not in "iu" and arr.size:
            raise BlockError(f"{name} must hold integers, got dtype {arr.dtype}")
        t = torch.from_numpy(np.array(arr, dtype=np.int64))  # a copy: mmap'd arrays are read-only
    if t.is_floating_point() or t.is_complex() or t.dtype == torch.bool:
        raise BlockError(f"{name} must hold integers, got dtype {t.dtype}")
    if t.dim() != 1:
        raise BlockError(f"{name} must be 1-D, got shape {list(t.shape)}")
    return t.long()


def _sparse_csr(crow: torch.Tensor, col: torch.Tensor, values: torch.Tensor, size: tuple[int, int]) -> torch.Tensor:
    with warnings.catch_warnings():  # torch warns once that sparse CSR is "beta"
        warnings.filterwarnings("ignore", message=".*[Ss]parse CSR tensor support is in beta.*")
        return torch.sparse_csr_tensor(crow, col, values, size=size, check_invariants=False)
