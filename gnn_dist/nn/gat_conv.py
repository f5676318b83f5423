"""Graph attention on a local block, equal to PyG's ``GATConv`` defaults."""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import nn

from .block import Block
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

    Shapes:
        - **input:** block with ``S`` sources and ``D`` destinations, source features
          ``x_src`` :math:`(S, F_{in})` (inner rows, then halo rows)
        - **output:** :math:`(D, H \cdot F_{out})` if ``concat`` else :math:`(D, F_{out})`

    ``lin.weight``, ``att_src`` ``[1, H, F_out]``, ``att_dst`` and ``bias`` are named as in PyG.
    """

    uses_dropout_key = True
    """Tells the models to pass ``dropout_key`` to :meth:`forward`."""

    def __init__(self, in_channels: int, out_channels: int, heads: int = 1, concat: bool = True,
                 negative_slope: float = 0.2, dropout: float = 0.0, bias: bool = True) -> None:
        super().__init__()
        if heads < 1:
            raise ValueError(f"GATConv: heads must be >= 1, got {heads}")
        if not 0.0 <= dropout < 1.0:
            raise ValueError(f"GATConv: dropout must be in [0, 1), got {dropout}")
        self.in_channels = in_channels
        self.out_channels = out_channels
        self.heads = heads
        self.concat = concat
        self.negative_slope = negative_slope
        self.dropout = dropout
        self.lin = nn.Linear(in_channels, heads * out_channels, bias=False)
        self.att_src = nn.Parameter(torch.empty(1, heads, out_channels))
        self.att_dst = nn.Parameter(torch.empty(1, heads, out_channels))
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
        if self.bias is not None:
            nn.init.zeros_(self.bias)

    def forward(self, block: Block, x_src: torch.Tensor, dropout_key: DropoutKey | None = None) -> torch.Tensor:
        block.check_src(x_src, self.in_channels, repr(self))
        attn_dropout = self.training and self.dropout > 0.0
        if attn_dropout and dropout_key is None:
            raise ValueError(f"{self!r} with dropout={self.dropout} in training mode needs "
                             "dropout_key=DropoutKey(seed, step, layer) so that its attention masks do "
                             "not depend on the partition (the gnn_dist.models pass it)")
        num_dst, H, C = block.num_dst, self.heads, self.out_channels
        h = self.lin(x_src).view(-1, H, C)                       # [S, H, C]
        a_src = (h * self.att_src).sum(-1)                       # [S, H]
        a_dst = (h[:num_dst] * self.att_dst).sum(-1)             # [D, H]
        src, dst = block.indices, block.dst_index
        score = F.leaky_relu(a_src[src] + a_dst[dst], self.negative_slope)              # [E, H]
        score = score.masked_fill(block.self_loop_mask.unsqueeze(1), float("-inf"))     # replaced loops
        score_self = F.leaky_relu(a_src[:num_dst] + a_dst, self.negative_slope)         # [D, H]
        alpha, alpha_self = edge_softmax(block, score, score_self)     # [E, H], [D, H]
        assert alpha_self is not None
        if attn_dropout:
            assert dropout_key is not None
            ids = block.src_original_ids
            alpha = hash_edge_dropout(alpha, self.dropout, key=dropout_key, src_ids=ids[src],
                                      dst_ids=ids[dst], training=True)
            alpha_self = hash_edge_dropout(alpha_self, self.dropout, key=dropout_key, src_ids=ids[:num_dst],
                                           dst_ids=ids[:num_dst], training=True)
        out = spmm(block, h.reshape(-1, H * C), alpha).view(num_dst, H, C) \
            + alpha_self.unsqueeze(-1) * h[:num_dst]             # [D, H, C]
        out = out.reshape(num_dst, H * C) if self.concat else out.mean(dim=1)
        if self.bias is not None:
            out = out + self.bias
        return out

    def __repr__(self) -> str:
        return f"{self.__class__.__name__}({self.in_channels}, {self.out_channels}, heads={self.heads})"
