"""GraphSAGE convolution with mean aggregation, equal to PyG's ``SAGEConv`` defaults."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from .block import Block
from .sparse import spmm

__all__ = ["SAGEConv"]


class SAGEConv(nn.Module):
    r"""The GraphSAGE operator from the `"Inductive Representation Learning on Large Graphs"
    <https://arxiv.org/abs/1706.02216>`_ paper

    .. math::
        \mathbf{x}^{\prime}_v = \mathbf{W}_1 \mathbf{x}_v + \mathbf{W}_2 \cdot
        \mathrm{mean}_{u \in \mathcal{N}(v)} \mathbf{x}_u + \mathbf{b}

    The mean runs over the destination's in-edges as stored (self-loops and duplicate edges
    included); a node without in-edges aggregates to 0. When ``out_channels < in_channels`` the
    linear map is applied before the mean (the same result, less work). Edge weights are not
    used (as in PyG).

    Args:
        in_channels (int): size of each input row.
        out_channels (int): size of each output row.
        bias (bool, optional): learn an additive bias (held by ``lin_l``). (default: :obj:`True`)

    Shapes:
        - **input:** block with ``S`` sources and ``D`` destinations, source features
          ``x_src`` :math:`(S, F_{in})` (inner rows, then halo rows)
        - **output:** destination features :math:`(D, F_{out})`

    Parameters ``lin_l.weight``, ``lin_l.bias`` (:math:`\mathbf{W}_2`, :math:`\mathbf{b}`) and
    ``lin_r.weight`` (:math:`\mathbf{W}_1`) are named as in PyG.
    """

    def __init__(self, in_channels: int, out_channels: int, bias: bool = True) -> None:
        super().__init__()
        self.in_channels = in_channels
        self.out_channels = out_channels
        self.lin_l = nn.Linear(in_channels, out_channels, bias=bias)
        self.lin_r = nn.Linear(in_channels, out_channels, bias=False)
        self.reset_parameters()

    def reset_parameters(self) -> None:
        self.lin_l.reset_parameters()
        self.lin_r.reset_parameters()

    def forward(self, block: Block, x_src: torch.Tensor) -> torch.Tensor:
        block.check_src(x_src, self.in_channels, repr(self))
        if self.out_channels < self.in_channels:
            out = spmm(block, F.linear(x_src, self.lin_l.weight), reduce="mean")
            if self.lin_l.bias is not None:
                out = out + self.lin_l.bias
        else:
            out = self.lin_l(spmm(block, x_src, reduce="mean"))
        return out + self.lin_r(x_src[:block.num_dst])

    def __repr__(self) -> str:
        return f"{self.__class__.__name__}({self.in_channels}, {self.out_channels}, aggr=mean)"
