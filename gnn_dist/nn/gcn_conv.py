"""Graph convolution (Kipf & Welling) on a local block, equal to PyG's ``GCNConv`` defaults."""

from __future__ import annotations

import logging
from dataclasses import dataclass

import torch
from torch import nn

from .block import Block
from .decomposable import check_first, propagate
from .dropout import DropoutKey
from .sparse import spmm, spmm_scaled

__all__ = ["GCNConv", "GCNContext", "gcn_norm", "gcn_context", "gcn_aggregate", "gcn_self_term"]

log = logging.getLogger(__name__)


class GCNConv(nn.Module):
    r"""The graph convolutional operator from the `"Semi-supervised Classification with Graph
    Convolutional Networks" <https://arxiv.org/abs/1609.02907>`_ paper

    .. math::
        \mathbf{x}^{\prime}_v = \mathbf{b} + \sum_{u \in \mathcal{N}(v) \cup \{ v \}}
        \frac{1}{\sqrt{\hat{d}_u \hat{d}_v}} \mathbf{\Theta}^{\top} \mathbf{x}_u

    with one self-loop per node (existing self-loops are replaced, as PyG's
    ``add_remaining_self_loops`` does for an unweighted graph) and
    :math:`\hat{d}_v = \deg_{\mathrm{in}}(v) - \mathrm{loops}(v) + 1` taken from the block's
    *global* degrees at both ends, so a part computes exactly what PyG computes on the whole
    graph.

    A weighted block (``edge_weight`` with its ``weighted_degree``) computes PyG's weighted GCN:

    .. math::
        \mathbf{x}^{\prime}_v = \mathbf{b} + \frac{\ell_v}{\hat{d}_v} \mathbf{\Theta}^{\top} \mathbf{x}_v
        + \sum_{u \to v,\ u \ne v} \frac{w_{uv}}{\sqrt{\hat{d}_u \hat{d}_v}} \mathbf{\Theta}^{\top} \mathbf{x}_u,
        \qquad \hat{d}_v = \ell_v + \sum_{u \to v,\ u \ne v} w_{uv}

    with :math:`\ell_v` the weight of ``v``'s self-loop, 1 when it has none (PyG's
    ``add_remaining_self_loops(fill_value=1)``; with several self-loops the last in CSR order),
    the weighted degrees global (stored at partition time). A block with edge weights but no
    weighted degrees (a folder written before they were stored) runs unweighted, with a warning.

    The aggregation is linear, so it runs on whichever side of the linear map moves fewer bytes
    (as DGL's ``GraphConv`` does): on the ``F_in`` input features when
    ``F_in * (1 + x_src needs a gradient) <= F_out * (1 + the linear output needs one)``, else on
    the ``F_out`` outputs. Each SpMM of width ``F`` is one forward pass, and one transposed pass
    in backward only if its input needs a gradient: a first layer (``x_src`` without gradient)
    aggregates first unless ``F_in > 2 F_out`` and never runs a backward SpMM. The normalisation
    scales rows inside the SpMM kernel, ``D^{-1/2} A D^{-1/2} h`` (no per-edge factors to read), and
    adds the self term; existing self-loop edges, which the SpMM counts, are subtracted from it.
    Both orders equal PyG to float rounding.

    Args:
        in_channels (int): size of each input row.
        out_channels (int): size of each output row.
        bias (bool, optional): learn an additive bias. (default: :obj:`True`)

    Shapes:
        - **input:** block with ``S`` sources and ``D`` destinations, source features
          ``x_src`` :math:`(S, F_{in})` (inner rows, then halo rows)
        - **output:** destination features :math:`(D, F_{out})`

    Parameters ``lin.weight`` and ``bias`` are named as in PyG, so state dicts load both ways.
    """

    def __init__(self, in_channels: int, out_channels: int, bias: bool = True) -> None:
        super().__init__()
        self.in_channels = in_channels
        self.out_channels = out_channels
        self.lin = nn.Linear(in_channels, out_channels, bias=False)
        self.bias = nn.Parameter(torch.empty(out_channels)) if bias else None
        self._warned_weights = False
        self.reset_parameters()

    def reset_parameters(self) -> None:
        nn.init.xavier_uniform_(self.lin.weight)  # PyG's glorot
        if self.bias is not None:
            nn.init.zeros_(self.bias)

    def forward(self, block: Block, x_src: torch.Tensor) -> torch.Tensor:
        block.check_src(x_src, self.in_channels, repr(self))
        return propagate(self, block, x_src)

    def aggregates_first(self, x_src: torch.Tensor) -> bool:
        """Whether aggregating ``x_src`` before the linear map runs fewer SpMM columns (see the
        class docstring); ties aggregate first."""
        grad = torch.is_grad_enabled()
        agg_passes = 1 + int(grad and x_src.requires_grad)
        lin_passes = 1 + int(grad and (x_src.requires_grad or self.lin.weight.requires_grad))
        return self.in_channels * agg_passes <= self.out_channels * lin_passes

    def narrows(self, x: torch.Tensor) -> bool:
        """The linear map comes first (:meth:`aggregates_first`) and narrows the rows: the mapped
        rows may travel instead."""
        return self.out_channels < self.in_channels and not self.aggregates_first(x)

    # ---------------------------------------------------------------- the layer protocol
    linear_aggregation = True
    """The aggregation is linear and, aggregating first, reads no parameter (``begin(raw=True)``)."""

    def begin(self, block: Block, x_first: torch.Tensor, dropout_key: DropoutKey | None = None, *,
              raw: bool = False) -> tuple[GCNContext, torch.Tensor]:
        """Chooses the side of the linear map (:meth:`aggregates_first`, or the input rows when
        ``raw``) and keeps the destinations' ``d^{-1/2}``, self-term coefficients and rows."""
        check_first(block, x_first, self.in_channels, self)
        if block.edge_weight is not None and not _weighted(block) and not self._warned_weights:
            log.warning("%r ignores the block's edge weights: it needs their global weighted degrees, "
                        "which this partition folder does not store (partition it again)", self)
            self._warned_weights = True
        first = raw or self.aggregates_first(x_first)
        z = x_first if first else self.lin(x_first)
        return gcn_context(block, z, first), z

    def transform(self, x: torch.Tensor, ctx: GCNContext) -> torch.Tensor:
        return x if ctx.aggregates_first else self.lin(x)

    def aggregate(self, group: Block, z: torch.Tensor, ctx: GCNContext, *, whole: bool = False) -> torch.Tensor:
        """``dinv[v] sum over u -> v of dinv[u] z[u]`` in one scaled SpMM (self-loop edges included;
        :meth:`update` takes them back out of the self term); weighted: one SpMM with the per-edge
        factors ``dinv[v] w_uv dinv[u]``, 0 on self-loop edges."""
        return gcn_aggregate(group, z, ctx)

    def merge(self, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        return a + b

    def update(self, acc: torch.Tensor, ctx: GCNContext) -> torch.Tensor:
        """Adds the self term ``(1 - loops[v]) z[v] / d_v``, then the linear map (when it comes
        second) and the bias."""
        out = gcn_self_term(acc, ctx)
        if ctx.aggregates_first:
            return nn.functional.linear(out, self.lin.weight, self.bias)
        return out if self.bias is None else out.add_(self.bias)   # a fresh tensor: no extra [D, F] pass

    def fixed_update(self, acc: torch.Tensor, ctx: GCNContext) -> torch.Tensor | None:
        """The self term (when the linear map comes second, as on raw rows)."""
        return gcn_self_term(acc, ctx) if ctx.aggregates_first else None

    def learned_update(self, fixed: torch.Tensor, ctx: GCNContext) -> torch.Tensor:
        return nn.functional.linear(fixed, self.lin.weight, self.bias)

    def __repr__(self) -> str:
        return f"{self.__class__.__name__}({self.in_channels}, {self.out_channels})"


@dataclass(frozen=True, slots=True)
class GCNContext:
    aggregates_first: bool
    dst_scale: torch.Tensor
    """``[D]``: the destinations' ``d^{-1/2}``."""
    self_coef: torch.Tensor
    """``[D, 1]``: ``(1 - loops[v]) / d_v`` (weighted: ``l_v / d_v``)."""
    z_dst: torch.Tensor
    """``[D, F]``: the destinations' transformed rows."""
    weighted: bool = False
    """The block's edge weights apply (it has their global weighted degrees)."""


def gcn_context(block: Block, z: torch.Tensor, aggregates_first: bool) -> GCNContext:
    """What GCN's normalised aggregation of the rows ``z`` (``[s >= D, F]``, destinations first)
    needs of ``block``'s destinations: their ``d^{-1/2}``, self-term coefficients and rows."""
    num_dst = block.num_dst
    weighted = _weighted(block)
    dinv = _dinv(block, z.dtype)
    if weighted:
        self_coef = block.cached(("gcn_self_coef_w", z.dtype), lambda: (
            _loop_weight(block, z.dtype)[:num_dst] * dinv[:num_dst].square()).unsqueeze(1))
    else:
        self_coef = block.cached(("gcn_self_coef", z.dtype), lambda: (
            (1 - block.self_loops[:num_dst]).to(z.dtype) * dinv[:num_dst].square()).unsqueeze(1))
    return GCNContext(aggregates_first, dinv[:num_dst], self_coef, block.dst_rows(z), weighted)


def gcn_aggregate(group: Block, z: torch.Tensor, ctx: GCNContext) -> torch.Tensor:
    """``dinv[v] sum over u -> v of dinv[u] z[u]`` over ``group``'s edges in one scaled SpMM
    (self-loop edges included; :func:`gcn_self_term` takes them back out); weighted: one SpMM
    with the per-edge factors ``dinv[v] w_uv dinv[u]``, 0 on self-loop edges."""
    if ctx.weighted:
        norm = group.cached(("gcn_edge_norm_w", z.dtype), lambda: (
            ctx.dst_scale[group.dst_index] * group.edge_weight.to(z.dtype) * _dinv(group, z.dtype)[group.indices]
        ).masked_fill(group.self_loop_mask, 0.0))
        return spmm(group, z, norm)
    return spmm_scaled(group, z, ctx.dst_scale, _dinv(group, z.dtype))


def gcn_self_term(acc: torch.Tensor, ctx: GCNContext) -> torch.Tensor:
    """The aggregate of every source plus the self term: ``D^{-1/2} (A + I) D^{-1/2} z`` at the
    destinations (a fresh tensor)."""
    return torch.addcmul(acc, ctx.self_coef, ctx.z_dst)


def _weighted(block: Block) -> bool:
    return block.edge_weight is not None and block.weighted_degree is not None


def _loop_weight(block: Block, dtype: torch.dtype) -> torch.Tensor:
    """``[S]``: the weight of each source row's one self-loop: its stored self-loop's, else 1."""
    return torch.where(block.self_loops > 0, block.weighted_degree[:, 1], 1.0).to(dtype)


def _dinv(block: Block, dtype: torch.dtype) -> torch.Tensor:
    """``[S]``: ``d^{-1/2}`` of the block's source rows, ``d = in_degree - self_loops + 1`` (global
    degrees, one self-loop in place of the stored ones; weighted: ``d = l + non-loop in-weight``,
    0 where ``d`` is 0, as PyG); cached on the block."""
    if _weighted(block):
        def weighted() -> torch.Tensor:
            d = block.weighted_degree[:, 0].to(dtype) + _loop_weight(block, dtype)
            out = d.pow(-0.5)
            return out.masked_fill(torch.isinf(out), 0.0)
        return block.cached(("gcn_dinv_w", dtype), weighted)
    return block.cached(("gcn_dinv", dtype), lambda: (block.in_degree - block.self_loops + 1).to(dtype).pow(-0.5))


def gcn_norm(block: Block, dtype: torch.dtype) -> tuple[torch.Tensor, torch.Tensor]:
    """GCN's symmetric normalisation as per-edge weights: ``(edge_norm [E], self_norm [D])``.

    ``edge_norm[e] = 1 / sqrt(d[src] d[dst])`` with ``d = in_degree - self_loops + 1`` (global),
    0 on existing self-loop edges (they are replaced by the one self term); ``self_norm[v] = 1 / d[v]``.
    Weighted blocks (see :class:`GCNConv`): ``edge_norm[e] = w_e / sqrt(d[src] d[dst])`` and
    ``self_norm[v] = l_v / d[v]``.
    """
    dinv = _dinv(block, dtype)
    edge_norm = dinv[block.indices] * dinv[block.dst_index]
    self_norm = dinv[:block.num_dst].square()
    if _weighted(block):
        edge_norm = edge_norm * block.edge_weight.to(dtype)
        self_norm = self_norm * _loop_weight(block, dtype)[:block.num_dst]
    return edge_norm.masked_fill(block.self_loop_mask, 0.0), self_norm
