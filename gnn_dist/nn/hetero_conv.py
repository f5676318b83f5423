r"""A conv per relation on a typed block, their outputs summed per destination: PyG's
``HeteroConv`` (and what ``to_hetero`` makes of a homogeneous model).

Legend: ``D`` destinations, ``S`` sources, ``R`` relations, ``D_t`` destinations of type ``t``,
``F``/``F'`` input/output width, ``tau(v)`` the type of ``v``.

.. math::
    \mathbf{x}'_v = \bigoplus_{r \in \mathcal{R},\ \mathrm{dst}(r) = \tau(v)}
        \mathrm{conv}_r\big(\{\mathbf{x}_u : u \in \mathcal{N}_r(v)\},\ \mathbf{x}_v\big)

with :math:`\bigoplus` a sum (``aggr="sum"``) or a mean over the relations into ``tau(v)``
(``aggr="mean"``) and ``N_r(v)`` the in-neighbours of ``v`` along relation ``r``. Each
relation's conv runs on a block of its own: its destinations are the block's destinations of
the relation's destination type (in their order), its sources those destinations first, then
the other sources of the relation's edges, so a conv reads its destinations' rows from its
first sources (SAGE's root term, GAT's self term) as on any block. That block's in-degrees and
self-loop counts of its destinations are the relation's (all in the block: global counts), so
a mean over the in-edges (SAGE) is the mean over the relation's edges; its sources' other
degrees (out-degrees) are the union graph's, so a conv normalising by its sources' degrees per
relation (GCN's symmetric normalisation) is refused. A relation with no edge in the block
still runs its conv (SAGE's root term). A node type that no relation enters gets zeros (PyG's
``HeteroConv`` returns no output for it). Edge weights are not read.

The convs may be any layer with ``forward(block, x_src[, dropout_key])``, decomposable or not;
the wrapper itself is a plain layer (the ``overlap`` schedule runs it exchange-then-compute).
"""

from __future__ import annotations

from collections.abc import Mapping

import torch
from torch import nn

from .block import Block
from .dropout import DropoutKey
from .gcn_conv import GCNConv
from .relations import TypedRows, check_typed, typed_rows

__all__ = ["HeteroConv"]

AGGRS = ("sum", "mean")


class HeteroConv(nn.Module):
    r"""One conv per relation, summed per destination (see the module docstring).

    Args:
        convs (Mapping[int, nn.Module]): relation index -> its conv (relations left out are not
            read); every conv's output is ``out_channels`` wide.
        out_channels (int): ``F'``, the convs' output width.
        aggr (str, optional): ``"sum"`` or ``"mean"`` over the relations into a type.
            (default: :obj:`"sum"`)

    Shapes:
        - **input:** a typed :class:`~gnn_dist.nn.Block` (``block.types``), ``x_src`` :math:`(S, F)`
        - **output:** :math:`(D, F')`
    """

    uses_dropout_key = True
    """Passes ``dropout_key`` to the convs that take it."""

    def __init__(self, convs: Mapping[int, nn.Module], out_channels: int, aggr: str = "sum") -> None:
        super().__init__()
        if not convs:
            raise ValueError("HeteroConv: no conv given")
        if aggr not in AGGRS:
            raise ValueError(f"HeteroConv: aggr must be one of {', '.join(AGGRS)}, got {aggr!r}")
        for r, conv in convs.items():
            if isinstance(conv, GCNConv):
                raise ValueError(f"HeteroConv: relation {r}: GCNConv normalises by its sources' degrees per relation, "
                                 f"which a part does not hold; use SAGEConv or GATConv")
        self.convs = nn.ModuleDict({str(int(r)): conv for r, conv in sorted(convs.items())})
        self.out_channels = int(out_channels)
        self.aggr = aggr

    def reset_parameters(self) -> None:
        for conv in self.convs.values():
            conv.reset_parameters()

    def forward(self, block: Block, x_src: torch.Tensor, dropout_key: DropoutKey | None = None) -> torch.Tensor:
        block.check_src(x_src, None, repr(self))
        types = check_typed(block, self, block.types.num_relations if block.types is not None else 0, None,
                            "HeteroConv")
        relations = [int(r) for r in self.convs]
        if max(relations) >= types.num_relations:
            raise ValueError(f"{self!r}: a conv for relation {max(relations)}, the block has {types.num_relations}")
        typed = typed_rows(block)
        out = x_src.new_zeros(block.num_dst, self.out_channels)
        into = torch.zeros(len(typed.rows), dtype=x_src.dtype)
        for r in relations:
            t = int(types.rel_types[r, 1])
            sub, src_rows = _relation_block(block, typed, r, t)
            conv = self.convs[str(r)]
            x = x_src.index_select(0, src_rows)
            y = conv(sub, x, dropout_key) if getattr(conv, "uses_dropout_key", False) else conv(sub, x)
            out = out.index_add(0, typed.rows[t], y)
            into[t] += 1
        if self.aggr == "mean":
            out = out / into.clamp(min=1).to(out.device)[types.node_type[:block.num_dst]].unsqueeze(1)
        return out

    def __repr__(self) -> str:
        return f"{self.__class__.__name__}(relations={len(self.convs)}, aggr={self.aggr})"


def _relation_block(block: Block, typed: TypedRows, r: int, t: int) -> tuple[Block, torch.Tensor]:
    """Relation ``r``'s block (see the module docstring) and its sources' rows in ``block``;
    ``t`` is the relation's destination type (cached on ``block``)."""
    def build() -> tuple[Block, torch.Tensor]:
        types = block.types
        assert types is not None
        edges = torch.nonzero(types.edge_type == r).flatten()
        rows_t = typed.rows[t]
        n = rows_t.numel()
        src, local_dst = block.indices[edges], typed.pos[block.dst_index[edges]]
        # a source that is one of the relation's destinations is that destination's row
        is_dst = (src < block.num_dst) & (types.node_type[src] == t)
        extra = torch.unique(src[~is_dst])
        local_src = torch.where(is_dst, typed.pos[src.clamp(max=max(block.num_dst - 1, 0))],
                                n + torch.searchsorted(extra, src))
        src_rows = torch.cat([rows_t, extra])
        indptr = torch.zeros(n + 1, dtype=torch.long, device=block.device)
        torch.cumsum(torch.bincount(local_dst, minlength=n), 0, out=indptr[1:])
        in_degree, self_loops = block.in_degree[src_rows].clone(), block.self_loops[src_rows].clone()
        in_degree[:n] = typed.count[rows_t, r]
        self_loops[:n] = torch.bincount(local_dst[local_src == local_dst], minlength=n)
        sub = Block.from_csr(indptr=indptr, indices=local_src, num_src=src_rows.numel(), in_degree=in_degree,
                             out_degree=block.out_degree[src_rows], self_loops=self_loops,
                             src_original_ids=block.src_original_ids[src_rows], kernels=block.kernels,
                             edge_attr=None if block.edge_attr is None else block.edge_attr[edges])
        return sub, src_rows
    return block.cached(("hetero_conv_relation", r), build)
