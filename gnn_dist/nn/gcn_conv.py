"""Graph convolution (Kipf & Welling) on a local block, equal to PyG's ``GCNConv`` defaults."""

from __future__ import annotations

import logging

import torch
from torch import nn

from .block import Block
from .sparse import spmm

__all__ = ["GCNConv"]

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
    graph. The linear map is applied first, then the aggregation, then the bias. Edge weights of
    the block are not used (format v1 stores no global weighted degree); a warning says so once.

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
        if block.edge_weight is not None and not self._warned_weights:
            log.warning("%r ignores the block's edge weights: it needs global weighted degrees, "
                        "which partition format v1 does not store", self)
            self._warned_weights = True
        h = self.lin(x_src)
        edge_norm, self_norm = block.cached(("gcn_norm", h.dtype), lambda: gcn_norm(block, h.dtype))
        out = spmm(block, h, edge_norm) + self_norm.unsqueeze(1) * h[:block.num_dst]
        if self.bias is not None:
            out = out + self.bias
        return out

    def __repr__(self) -> str:
        return f"{self.__class__.__name__}({self.in_channels}, {self.out_channels})"


def gcn_norm(block: Block, dtype: torch.dtype) -> tuple[torch.Tensor, torch.Tensor]:
    """GCN's symmetric normalisation: ``(edge_norm [E], self_norm [D])``.

    ``edge_norm[e] = 1 / sqrt(d[src] d[dst])`` with ``d = in_degree - self_loops + 1`` (global),
    0 on existing self-loop edges (they are replaced by the one self term); ``self_norm[v] = 1 / d[v]``.
    """
    deg = (block.in_degree - block.self_loops + 1).to(dtype)
    dinv = deg.pow(-0.5)
    edge_norm = dinv[block.indices] * dinv[block.dst_index]
    edge_norm = edge_norm.masked_fill(block.self_loop_mask, 0.0)
    self_norm = dinv[:block.num_dst] * dinv[:block.num_dst]
    return edge_norm, self_norm
