"""Graph attention on a local block, equal to PyG's ``GATConv`` defaults (and its ``edge_dim``)."""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn

from .block import Block
from .decomposable import check_first, propagate
from .dropout import DropoutKey, hash_edge_dropout
from .sparse import edge_softmax, spmm

__all__ = ["GATConv"]


class GATConv(nn.Module):
    r"""The graph attentional operator from the `"Graph Attention Networks"
    <https://arxiv.org/abs/1710.10903>`_ paper

    .. math::
        \mathbf{x}^{\prime}_v = \mathbf{b} + \big\Vert_{k=1}^{H} \sum_{u \in \mathcal{N}(v) \cup \{ v \}}
        \alpha^{k}_{v,u} \mathbf{\Theta}^{k} \mathbf{x}_u, \qquad
        \alpha^{k}_{v,u} = \frac{\exp(\mathrm{LeakyReLU}(\mathbf{a}^{k\top}_{s} \mathbf{\Theta}^{k}
        \mathbf{x}_u + \mathbf{a}^{k\top}_{t} \mathbf{\Theta}^{k} \mathbf{x}_v))}
        {\sum_{w \in \mathcal{N}(v) \cup \{ v \}} \exp(\mathrm{LeakyReLU}(\mathbf{a}^{k\top}_{s}
        \mathbf{\Theta}^{k} \mathbf{x}_w + \mathbf{a}^{k\top}_{t} \mathbf{\Theta}^{k} \mathbf{x}_v))}

    Existing self-loops are removed and one self-loop per node is added (PyG's default); the
    softmax runs over each destination's in-edges, which are all in its block, so it is exact on
    any partition. Heads are concatenated (``concat=True``) or averaged. The attention
    coefficients are an ``[E, H]`` tensor (:func:`~gnn_dist.nn.sparse.edge_softmax`); messages are
    aggregated for all heads at once with :func:`~gnn_dist.nn.sparse.spmm`, never as an
    ``[E, H, F]`` tensor. Edge weights are not used.

    **Edge features** (``edge_dim``, PyG's ``GATConv(edge_dim=...)``): the score of edge
    :math:`u \to v` gains the term :math:`\mathbf{a}^{k\top}_{e} \mathbf{\Theta}^{k}_{e}
    \mathbf{e}_{uv}` (``lin_edge``, no bias; ``att_edge``), with :math:`\mathbf{e}_{uv}` the
    block's :attr:`~gnn_dist.nn.Block.edge_attr` row. The added self-loop of ``v`` gets the mean
    features of ``v``'s other in-edges (0 without any): PyG's ``fill_value="mean"`` with
    ``add_self_loops=True``, the only fill this layer implements. The edge term is computed as
    ``edge_attr @ M`` with ``M`` ``[D_e, H]`` the per-head product of ``lin_edge`` and
    ``att_edge`` (equal to PyG's up to float rounding), so no ``[E, H, C]`` edge tensor is made.

    Attention dropout (``dropout > 0`` in training mode) is keyed by
    ``(seed, step, layer, original source id, original destination id, head)``, so it needs
    ``dropout_key`` (the models pass it); the masks do not depend on the partition.

    Args:
        in_channels (int): size of each input row.
        out_channels (int): size of each output row per head.
        heads (int, optional): number of attention heads :math:`H`. (default: :obj:`1`)
        concat (bool, optional): concatenate the heads (output ``H * out_channels``) or average
            them (output ``out_channels``). (default: :obj:`True`)
        negative_slope (float, optional): LeakyReLU slope. (default: :obj:`0.2`)
        dropout (float, optional): dropout probability of the attention coefficients.
            (default: :obj:`0.`)
        bias (bool, optional): learn an additive bias. (default: :obj:`True`)
        edge_dim (int, optional): width :math:`D_e` of the edge features the scores read; the
            block must then carry ``edge_attr`` ``[E, D_e]``. (default: :obj:`None`: none)

    Shapes:
        - **input:** block with ``S`` sources and ``D`` destinations, source features
          ``x_src`` :math:`(S, F_{in})` (inner rows, then halo rows)
        - **output:** :math:`(D, H \cdot F_{out})` if ``concat`` else :math:`(D, F_{out})`

    ``lin.weight``, ``att_src`` ``[1, H, F_out]``, ``att_dst``, ``lin_edge.weight``, ``att_edge``
    and ``bias`` are named as in PyG.
    """

    uses_dropout_key = True
    """Tells the models to pass ``dropout_key`` to :meth:`forward`."""

    def __init__(self, in_channels: int, out_channels: int, heads: int = 1, concat: bool = True,
                 negative_slope: float = 0.2, dropout: float = 0.0, bias: bool = True,
                 edge_dim: int | None = None) -> None:
        super().__init__()
        if heads < 1:
            raise ValueError(f"GATConv: heads must be >= 1, got {heads}")
        if not 0.0 <= dropout < 1.0:
            raise ValueError(f"GATConv: dropout must be in [0, 1), got {dropout}")
        if edge_dim is not None and (isinstance(edge_dim, bool) or not isinstance(edge_dim, int) or edge_dim < 1):
            raise ValueError(f"GATConv: edge_dim must be a positive int or None, got {edge_dim!r}")
        self.in_channels = in_channels
        self.out_channels = out_channels
        self.heads = heads
        self.concat = concat
        self.negative_slope = negative_slope
        self.dropout = dropout
        self.lin = nn.Linear(in_channels, heads * out_channels, bias=False)
        self.att_src = nn.Parameter(torch.empty(1, heads, out_channels))
        self.att_dst = nn.Parameter(torch.empty(1, heads, out_channels))
        self.edge_dim = edge_dim
        if edge_dim is not None:
            self.lin_edge = nn.Linear(edge_dim, heads * out_channels, bias=False)
            self.att_edge = nn.Parameter(torch.empty(1, heads, out_channels))
        else:
            self.lin_edge = None
            self.register_parameter("att_edge", None)
        if bias:
            self.bias = nn.Parameter(torch.empty(heads * out_channels if concat else out_channels))
        else:
            self.register_parameter("bias", None)
        self.reset_parameters()

    def reset_parameters(self) -> None:
        nn.init.xavier_uniform_(self.lin.weight)
        bound = math.sqrt(6.0 / (self.heads + self.out_channels))  # PyG's glorot on [1, H, C]
        nn.init.uniform_(self.att_src, -bound, bound)
        nn.init.uniform_(self.att_dst, -bound, bound)
        if self.lin_edge is not None:
            nn.init.xavier_uniform_(self.lin_edge.weight)
            nn.init.uniform_(self.att_edge, -bound, bound)
        if self.bias is not None:
            nn.init.zeros_(self.bias)

    def forward(self, block: Block, x_src: torch.Tensor, dropout_key: DropoutKey | None = None) -> torch.Tensor:
        block.check_src(x_src, self.in_channels, repr(self))
        return propagate(self, block, x_src, dropout_key)

    # ---------------------------------------------------------------- the layer protocol
    linear_aggregation = False
    """The attention weights depend on the parameters: no aggregation of the raw rows."""

    def begin(self, block: Block, x_first: torch.Tensor, dropout_key: DropoutKey | None = None, *,
              raw: bool = False) -> tuple[_GATContext, torch.Tensor]:
        """Transforms the rows (``[s, H, C]``) and keeps the destinations' attention terms."""
        check_first(block, x_first, self.in_channels, self)
        if raw:
            raise ValueError(f"{self!r} cannot aggregate its raw input rows: its attention weights depend "
                             f"on its parameters")
        attn_dropout = self.training and self.dropout > 0.0
        if attn_dropout and dropout_key is None:
            raise ValueError(f"{self!r} with dropout={self.dropout} in training mode needs "
                             "dropout_key=DropoutKey(seed, step, layer) so that its attention masks do "
                             "not depend on the partition (the gnn_dist.models pass it)")
        num_dst = block.num_dst
        z = self.transform(x_first, None)                                         # [s, H, C]
        a_src = (z * self.att_src).sum(-1)                                         # [s, H]
        a_dst = (z[:num_dst] * self.att_dst).sum(-1)                               # [D, H]
        ctx = _GATContext(z, a_src, a_dst, block.src_original_ids[:num_dst], dropout_key if attn_dropout else None)
        if self.lin_edge is not None:
            ctx.edge_map = self._edge_map()                                        # [D_e, H]
            ctx.a_edge_self = _mean_edge_attr(self._edge_attr(block), block) @ ctx.edge_map  # [D, H]
        return ctx, z

    def transform(self, x: torch.Tensor, ctx: _GATContext | None) -> torch.Tensor:
        return self.lin(x).view(-1, self.heads, self.out_channels)

    def aggregate(self, group: Block, z: torch.Tensor, ctx: _GATContext, *,
                  whole: bool = False) -> _Attention:
        """Edge scores, then (``whole``) the fused edge softmax with the self term, or a partial
        softmax: numerator and denominator against the running maximum (at least the self score)."""
        H, C = self.heads, self.out_channels
        src, dst = group.indices, group.dst_index
        a_src = ctx.a_src_first if z is ctx.z_first else (z * self.att_src).sum(-1)  # [s, H]
        score = a_src[src] + ctx.a_dst[dst]                                        # [E, H]
        if ctx.edge_map is not None:
            score = score + self._edge_attr(group) @ ctx.edge_map
        score = F.leaky_relu(score, self.negative_slope)
        score = score.masked_fill(group.self_loop_mask.unsqueeze(1), float("-inf"))  # replaced loops
        self_score = ctx.self_scores(self.negative_slope)                          # [D, H]
        values = z.reshape(-1, H * C)
        if whole:
            alpha, alpha_self = edge_softmax(group, score, self_score)            # [E, H], [D, H]
            assert alpha_self is not None
            alpha = self._drop(alpha, ctx, group.src_original_ids[src], ctx.dst_ids[dst])
            alpha_self = self._drop(alpha_self, ctx, ctx.dst_ids, ctx.dst_ids)
            out = spmm(group, values, alpha.to(values.dtype)).view(-1, H, C) + alpha_self.unsqueeze(-1) * z[:group.num_dst]
            return _Attention(out, None, None)
        with torch.no_grad():  # softmax is shift-invariant: the maximum is a constant for autograd
            peak = self_score.clone()
            peak.scatter_reduce_(0, dst.unsqueeze(1).expand_as(score), score, "amax")
        weight = torch.exp(score - peak[dst])                                     # [E, H]
        denom = torch.zeros_like(peak).index_add(0, dst, weight)                  # [D, H]
        weight = self._drop(weight, ctx, group.src_original_ids[src], ctx.dst_ids[dst])
        return _Attention(spmm(group, values, weight.to(values.dtype)).view(-1, H, C), denom, peak)

    def merge(self, a: _Attention, b: _Attention) -> _Attention:
        assert a.peak is not None and b.peak is not None, "a whole aggregate merges with nothing"
        peak = torch.maximum(a.peak, b.peak)
        ra, rb = torch.exp(a.peak - peak), torch.exp(b.peak - peak)                # [D, H], <= 1
        return _Attention(a.num * ra.unsqueeze(-1) + b.num * rb.unsqueeze(-1), a.denom * ra + b.denom * rb, peak)

    def update(self, acc: _Attention, ctx: _GATContext) -> torch.Tensor:
        out = acc.num
        if acc.peak is not None:  # a partial softmax: add the self term, then normalise
            assert acc.denom is not None
            weight_self = torch.exp(ctx.self_scores(self.negative_slope) - acc.peak)   # [D, H]
            denom = acc.denom + weight_self
            weight_self = self._drop(weight_self, ctx, ctx.dst_ids, ctx.dst_ids)
            z_dst = ctx.z_first[:ctx.a_dst.shape[0]]
            out = (out + weight_self.unsqueeze(-1) * z_dst) / denom.unsqueeze(-1)
        out = out.reshape(out.shape[0], self.heads * self.out_channels) if self.concat else out.mean(dim=1)
        if self.bias is not None:
            out = out + self.bias
        return out.to(ctx.z_first.dtype)   # the transformed rows' dtype (bfloat16 under autocast)

    def _edge_map(self) -> torch.Tensor:
        r"""``[D_e, H]``: column ``k`` is :math:`\mathbf{\Theta}^{k\top}_{e} \mathbf{a}^{k}_{e}`, so
        ``edge_attr @ M`` is each edge's score term (``lin_edge`` then ``att_edge``, per head)."""
        assert self.lin_edge is not None and self.att_edge is not None and self.edge_dim is not None
        w = self.lin_edge.weight.view(self.heads, self.out_channels, self.edge_dim)
        return (w * self.att_edge.view(self.heads, self.out_channels, 1)).sum(1).t()

    def _edge_attr(self, block: Block) -> torch.Tensor:
        attr = block.edge_attr
        if attr is None or attr.shape[1] != self.edge_dim:
            found = "none" if attr is None else f"[E, {attr.shape[1]}]"
            raise ValueError(f"{self!r}: edge_dim={self.edge_dim} needs the block's edge_attr [E, {self.edge_dim}], "
                             f"found {found} (partition a graph with edge features, or build the layer without edge_dim)")
        return attr

    def _drop(self, weight: torch.Tensor, ctx: _GATContext, src_ids: torch.Tensor,
              dst_ids: torch.Tensor) -> torch.Tensor:
        if ctx.dropout_key is None:
            return weight
        return hash_edge_dropout(weight, self.dropout, key=ctx.dropout_key, src_ids=src_ids, dst_ids=dst_ids,
                                 training=True)

    def __repr__(self) -> str:
        edge = f", edge_dim={self.edge_dim}" if self.edge_dim is not None else ""
        return f"{self.__class__.__name__}({self.in_channels}, {self.out_channels}, heads={self.heads}{edge})"


def _mean_edge_attr(attr: torch.Tensor, block: Block) -> torch.Tensor:
    """``[D, D_e]``: each destination's mean edge features over its in-edges that are not
    self-loops (0 without any): the features PyG's ``add_self_loops(fill_value="mean")`` gives
    the self-loop it adds. Every in-edge of a destination is in its block, so this is exact."""
    keep = ~block.self_loop_mask
    dst = block.dst_index[keep]
    total = torch.zeros(block.num_dst, attr.shape[1], dtype=attr.dtype, device=attr.device).index_add_(0, dst, attr[keep])
    count = torch.bincount(dst, minlength=block.num_dst).clamp_(min=1).to(attr.dtype)
    return total / count.unsqueeze(1)


@dataclass(slots=True)
class _GATContext:
    z_first: torch.Tensor
    """``[s, H, C]``: the first source rows, transformed (the destinations' first)."""
    a_src_first: torch.Tensor
    """``[s, H]``: their halves of the edge scores."""
    a_dst: torch.Tensor
    """``[D, H]``: the destinations' halves of the edge scores."""
    dst_ids: torch.Tensor
    """``[D]``: the destinations' original ids (the attention dropout's keys)."""
    dropout_key: DropoutKey | None
    """None: no attention dropout this call."""
    self_score: torch.Tensor | None = None
    edge_map: torch.Tensor | None = None
    """``[D_e, H]`` (:meth:`GATConv._edge_map`) with edge features, else None."""
    a_edge_self: torch.Tensor | None = None
    """``[D, H]``: the self-loops' edge terms (their mean features through ``edge_map``), or None."""

    def self_scores(self, negative_slope: float) -> torch.Tensor:
        """``[D, H]``: the scores of the self terms (one self-loop per destination), made on first
        use: after the first group's edge scores, the order of the layer's whole form."""
        if self.self_score is None:
            num_dst = self.a_dst.shape[0]
            score = self.a_src_first[:num_dst] + self.a_dst
            if self.a_edge_self is not None:
                score = score + self.a_edge_self
            self.self_score = F.leaky_relu(score, negative_slope)
        return self.self_score


@dataclass(frozen=True, slots=True)
class _Attention:
    """An aggregate: the numerator ``[D, H, C]``; with ``peak`` ``[D, H]`` (a partial softmax
    against that running maximum, the self term not yet in) its denominator ``[D, H]``;
    ``peak`` None: already normalised (the whole block's fused softmax)."""

    num: torch.Tensor
    denom: torch.Tensor | None
    peak: torch.Tensor | None
