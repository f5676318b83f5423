r"""The relational graph convolution (R-GCN) of Schlichtkrull et al., "Modeling Relational Data
with Graph Convolutional Networks" (ESWC 2018), on a typed block.

Legend: ``D`` destinations, ``S`` sources, ``R`` relations, ``T`` node types, ``B`` bases,
``F``/``F'`` input/output width, ``D_t`` destinations of type ``t``.

.. math::
    \mathbf{x}'_v = \mathbf{W}_{\tau(v)}^{root} \mathbf{x}_v + \mathbf{b}
        + \sum_{r \in \mathcal{R}} \frac{1}{|\mathcal{N}_r(v)|} \sum_{u \in \mathcal{N}_r(v)} \mathbf{W}_r \mathbf{x}_u

with ``tau(v)`` the type of ``v`` (one root weight per node type, or one shared), ``N_r(v)`` the
in-neighbours of ``v`` along relation ``r`` (its global count: a part holds every in-edge of its
inner rows), and with ``num_bases`` the basis decomposition
:math:`\mathbf{W}_r = \sum_b a_{rb} \mathbf{V}_b`. With one shared root it is PyG's
``RGCNConv(aggr="mean")``. Edge weights are not read.

The layer implements the layer protocol (:mod:`.decomposable`): each relation's mean is a sum
over edges, so the sources may be split into groups (the ``overlap`` schedule). All relations
are aggregated in one SpMM (one transposed SpMM in backward) over fused rows: per destination
type ``t`` with ``R_t`` relations into it, ``D_t R_t`` rows, row ``d R_t + j`` the mean of
relation ``j`` into destination ``d``, so the type's rows viewed as ``[D_t, R_t F]`` are its
relations' aggregates side by side, without a copy. Per destination type the output is then
``x_t W_t^root + [agg_r1, agg_r2, ...] [W_r1; W_r2; ...]`` (one ``addmm``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
from torch import nn

from .block import Block
from .decomposable import check_first, propagate
from .dropout import DropoutKey
from .relations import TypedRows, check_typed, typed_rows
from .sparse import spmm

__all__ = ["RGCNConv"]


@dataclass(frozen=True, slots=True)
class _Fused:
    """The fused aggregate's layout of a block's destinations (per block, cached)."""

    typed: TypedRows
    inv: torch.Tensor
    """float ``[D, R]``: 1 / in-edges per destination and relation (0 without)."""
    perm: torch.Tensor
    """int64 ``[D]``: the destinations grouped by type (each type's ascending)."""
    sizes: tuple[int, ...]
    """Destinations per type."""
    slots: tuple[tuple[int, ...], ...]
    """Per type, the relations into it (ascending)."""
    row_ptr: tuple[int, ...]
    """``T + 1`` offsets of the types' rows in the fused aggregate: type ``t`` holds
    ``D_t * R_t`` rows, row ``d R_t + j`` the aggregate of relation ``slots[t][j]`` into its
    ``d``-th destination (so its rows viewed as ``[D_t, R_t F]`` are the relations side by side)."""

    def row_sizes(self) -> list[int]:
        """Fused rows per type."""
        return [b - a for a, b in zip(self.row_ptr, self.row_ptr[1:])]


@dataclass(frozen=True, slots=True)
class _Context:
    fused: _Fused
    x_dst: torch.Tensor


class RGCNConv(nn.Module):
    r"""R-GCN layer with mean aggregation per relation (see the module docstring).

    Args:
        in_channels (int): input width ``F``.
        out_channels (int): output width ``F'``.
        num_relations (int): ``R``.
        num_node_types (int, optional): ``T``, the number of root weights with ``root_per_type``.
            (default: :obj:`1`)
        num_bases (int, optional): basis decomposition with this many bases (None: a full weight
            per relation). (default: :obj:`None`)
        root_per_type (bool, optional): one root weight per node type (else one shared, as PyG's).
            (default: :obj:`True`)
        bias (bool, optional): (default: :obj:`True`)

    Shapes:
        - **input:** a typed :class:`~gnn_dist.nn.Block` (``block.types``), ``x_src`` :math:`(S, F)`
        - **output:** :math:`(D, F')`
    """

    linear_aggregation = False

    def __init__(self, in_channels: int, out_channels: int, num_relations: int, num_node_types: int = 1, *,
                 num_bases: int | None = None, root_per_type: bool = True, bias: bool = True) -> None:
        super().__init__()
        if num_relations < 1 or num_node_types < 1 or (num_bases is not None and num_bases < 1):
            raise ValueError(f"RGCNConv: num_relations ({num_relations}), num_node_types ({num_node_types}) and "
                             f"num_bases ({num_bases}) must be positive")
        self.in_channels, self.out_channels = int(in_channels), int(out_channels)
        self.num_relations, self.num_node_types = int(num_relations), int(num_node_types)
        self.num_bases = None if num_bases is None else int(num_bases)
        self.root_per_type = bool(root_per_type)
        if self.num_bases is None:
            self.weight = nn.Parameter(torch.empty(num_relations, in_channels, out_channels))
            self.register_parameter("comp", None)
        else:
            self.weight = nn.Parameter(torch.empty(self.num_bases, in_channels, out_channels))
            self.comp = nn.Parameter(torch.empty(num_relations, self.num_bases))
        roots = num_node_types if self.root_per_type else 1
        self.root = nn.Parameter(torch.empty(roots, in_channels, out_channels))
        self.bias = nn.Parameter(torch.empty(out_channels)) if bias else None
        self.reset_parameters()

    def reset_parameters(self) -> None:
        """Glorot-uniform weights (each relation's, basis' and root's ``[F, F']`` alone), zero bias."""
        bound = math.sqrt(6.0 / (self.in_channels + self.out_channels))
        for w in (self.weight, self.root):
            nn.init.uniform_(w, -bound, bound)
        if self.comp is not None:
            b = math.sqrt(6.0 / (self.num_relations + self.num_bases))
            nn.init.uniform_(self.comp, -b, b)
        if self.bias is not None:
            nn.init.zeros_(self.bias)

    def relation_weights(self) -> torch.Tensor:
        """``[R, F, F']``: each relation's weight (from the bases with ``num_bases``)."""
        if self.comp is None:
            return self.weight
        return (self.comp @ self.weight.reshape(self.num_bases, -1)).reshape(
            self.num_relations, self.in_channels, self.out_channels)

    def forward(self, block: Block, x_src: torch.Tensor, dropout_key: DropoutKey | None = None) -> torch.Tensor:
        block.check_src(x_src, self.in_channels, repr(self))
        return propagate(self, block, x_src)

    # ---------------------------------------------------------------- the layer protocol
    def begin(self, block: Block, x_first: torch.Tensor, dropout_key: DropoutKey | None = None, *,
              raw: bool = False) -> tuple[_Context, torch.Tensor]:
        """The destinations' types and per-relation counts; the rows are aggregated as they are."""
        check_first(block, x_first, self.in_channels, self)
        types = check_typed(block, self, self.num_relations, self.num_node_types if self.root_per_type else None,
                            "R-GCN")
        fused = block.cached(("rgcn_fused_rows", x_first.dtype),
                             lambda: _fused_rows(typed_rows(block), types.rel_types, x_first.dtype))
        return _Context(fused, block.dst_rows(x_first)), x_first

    def transform(self, x: torch.Tensor, ctx: _Context) -> torch.Tensor:
        return x

    def aggregate(self, group: Block, z: torch.Tensor, ctx: _Context, *,
                  whole: bool = False) -> torch.Tensor | None:
        """Per relation, the sum over ``group``'s edges of that relation into its destination
        type's rows, each edge scaled by 1 / its destination's count, all relations in one SpMM:
        the fused rows ``[sum_t D_t R_t, F]`` (:attr:`_Fused.row_ptr`; None: no edge)."""
        fused = group.cached(("rgcn_fused", self.num_relations), lambda: _fused_block(group, ctx.fused))
        if fused is None:
            return None
        sub, scale = fused
        return spmm(sub, z, scale.to(z.dtype))

    def merge(self, a: torch.Tensor | None, b: torch.Tensor | None) -> torch.Tensor | None:
        return b if a is None else a if b is None else a + b

    def update(self, acc: torch.Tensor | None, ctx: _Context) -> torch.Tensor:
        """Per destination type ``t``: ``x_t W_t^root + [agg_r1, agg_r2, ...] [W_r1; W_r2; ...]``
        (the aggregates a view of the fused rows: no copy), the rows back in the block's order."""
        weights = self.relation_weights()
        typed = ctx.fused
        # the destinations grouped by type (one gather) and the fused rows split per type: views
        # whose gradients autograd joins in one copy (a slice's would be zero-filled per type)
        xs = ctx.x_dst.index_select(0, typed.perm).split(list(typed.sizes))
        aggs = (None,) * len(xs) if acc is None else acc.split(typed.row_sizes())
        outs = []
        for t, rel in enumerate(typed.slots):
            y = xs[t] @ self.root[t if self.root_per_type else 0]
            if aggs[t] is not None and rel:
                agg = aggs[t].view(xs[t].shape[0], len(rel) * aggs[t].shape[1])
                maps = weights[rel[0]] if len(rel) == 1 else torch.cat([weights[r] for r in rel], dim=0)
                y = torch.addmm(y, agg, maps)
            outs.append(y)
        out = torch.cat(outs).index_select(0, typed.typed.order)
        return out if self.bias is None else out + self.bias

    def __repr__(self) -> str:
        bases = "" if self.num_bases is None else f", num_bases={self.num_bases}"
        return (f"{self.__class__.__name__}({self.in_channels}, {self.out_channels}, "
                f"num_relations={self.num_relations}{bases})")


def _fused_rows(typed: TypedRows, rel_types: torch.Tensor, dtype: torch.dtype) -> _Fused:
    """The fused layout of a block's destinations (:class:`_Fused`), from their per-type rows
    and per-(destination, relation) counts (the block holds every in-edge of its destinations)."""
    count = typed.count
    inv = torch.where(count > 0, 1.0 / count.clamp(min=1).to(torch.float64), 0.0).to(dtype)
    dst_of = [int(t) for t in rel_types[:, 1]]
    rows = typed.rows
    slots = tuple(tuple(q for q in range(len(dst_of)) if dst_of[q] == t) for t in range(len(rows)))
    row_ptr = [0]
    for t, t_rows in enumerate(rows):
        row_ptr.append(row_ptr[-1] + t_rows.numel() * len(slots[t]))
    return _Fused(typed, inv, torch.cat(rows), tuple(int(t_rows.numel()) for t_rows in rows), slots, tuple(row_ptr))


def _fused_block(group: Block, typed: _Fused) -> tuple[Block, torch.Tensor] | None:
    """``group``'s edges as one block over the fused rows (:attr:`_Fused.row_ptr`) and
    ``group``'s sources, each row's edges in ``group``'s order, with each edge's scale
    (1 / its destination's count of its relation); None where ``group`` has no edge."""
    types = group.types
    assert types is not None
    if group.indices.numel() == 0:
        return None
    device = group.device
    num_rel = types.rel_types.shape[0]
    slot = torch.zeros(num_rel, dtype=torch.long, device=device)
    width = torch.ones(num_rel, dtype=torch.long, device=device)
    base = torch.zeros(num_rel, dtype=torch.long, device=device)
    for t, rel in enumerate(typed.slots):
        for j, r in enumerate(rel):
            slot[r], width[r], base[r] = j, len(rel), typed.row_ptr[t]
    dst, et = group.dst_index, types.edge_type
    row = base[et] + typed.typed.pos[dst] * width[et] + slot[et]
    order = torch.argsort(row, stable=True)
    n = typed.row_ptr[-1]
    indptr = torch.zeros(n + 1, dtype=torch.long, device=device)
    torch.cumsum(torch.bincount(row, minlength=n), 0, out=indptr[1:])
    sub = Block(num_src=group.num_src, num_dst=n, indptr=indptr, indices=group.indices[order].contiguous(),
                edge_weight=None, in_degree=group.in_degree, out_degree=group.out_degree,
                self_loops=group.self_loops, src_original_ids=group.src_original_ids, kernels=group.kernels)
    sub._cache["dst_index"] = row[order]
    scale = typed.inv[dst[order], et[order]].contiguous()
    return sub, scale
