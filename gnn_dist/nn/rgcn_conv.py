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
over edges, so the sources may be split into groups (the ``overlap`` schedule). Per destination
type ``t`` the root term and the relations into ``t`` are one product,
``[x_v, agg_r1, agg_r2, ...] @ [W_t^root; W_r1; W_r2; ...]``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
from torch import nn

from .block import Block
from .decomposable import check_first, propagate
from .dropout import DropoutKey
from .relations import TypedRows, check_typed, relation_blocks, typed_rows
from .sparse import spmm

__all__ = ["RGCNConv"]


@dataclass(frozen=True, slots=True)
class _Context:
    typed: TypedRows
    inv: torch.Tensor
    """float ``[D, R]``: 1 / in-edges per destination and relation (0 without)."""
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
        self._rel_types = types.rel_types.cpu()
        typed = typed_rows(block)
        inv = block.cached(("rgcn_inv", x_first.dtype), lambda: _inverse_counts(typed.count, x_first.dtype))
        return _Context(typed, inv, block.dst_rows(x_first)), x_first

    def transform(self, x: torch.Tensor, ctx: _Context) -> torch.Tensor:
        return x

    def aggregate(self, group: Block, z: torch.Tensor, ctx: _Context, *,
                  whole: bool = False) -> list[torch.Tensor | None]:
        """Per relation, the sum over ``group``'s edges of that relation into its destination
        type's rows, each edge scaled by 1 / its destination's count: ``[D_t, F]`` (None: no edge)."""
        out: list[torch.Tensor | None] = []
        for r, rel in enumerate(relation_blocks(group, ctx.typed)):
            if rel.block is None:
                out.append(None)
                continue
            scale = ctx.inv[rel.dst, r].to(z.dtype)
            out.append(spmm(rel.block, z, scale))
        return out

    def merge(self, a: list[torch.Tensor | None], b: list[torch.Tensor | None]) -> list[torch.Tensor | None]:
        return [y if x is None else x if y is None else x + y for x, y in zip(a, b)]

    def update(self, acc: list[torch.Tensor | None], ctx: _Context) -> torch.Tensor:
        weights = self.relation_weights()
        dst_of = self._dst_types()
        outs = []
        for t, rows in enumerate(ctx.typed.rows):
            inputs = [ctx.x_dst.index_select(0, rows)]
            maps = [self.root[t if self.root_per_type else 0]]
            for r in range(self.num_relations):
                if dst_of[r] == t and acc[r] is not None:
                    inputs.append(acc[r])
                    maps.append(weights[r])
            y = torch.cat(inputs, dim=1) @ torch.cat(maps, dim=0) if len(inputs) > 1 else inputs[0] @ maps[0]
            outs.append(y)
        out = torch.cat(outs).index_select(0, ctx.typed.order)
        return out if self.bias is None else out + self.bias

    def _dst_types(self) -> list[int]:
        rel = getattr(self, "_rel_types", None)
        if rel is None:
            raise ValueError(f"{self!r}: run it on a typed block (partition a typed graph: docs/heterogeneous.md)")
        return [int(t) for t in rel[:, 1]]

    def __repr__(self) -> str:
        bases = "" if self.num_bases is None else f", num_bases={self.num_bases}"
        return (f"{self.__class__.__name__}({self.in_channels}, {self.out_channels}, "
                f"num_relations={self.num_relations}{bases})")


def _inverse_counts(count: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    """``[D, R]``: 1 / in-edges per destination and relation (0 without)."""
    return torch.where(count > 0, 1.0 / count.clamp(min=1).to(torch.float64), 0.0).to(dtype)
