"""GCNII's layer: graph convolution with initial residual and identity mapping, equal to PyG's ``GCN2Conv``."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import torch
from torch import nn

from .block import Block
from .decomposable import check_first, propagate
from .dropout import DropoutKey
from .gcn_conv import GCNContext, gcn_aggregate, gcn_context, gcn_self_term

__all__ = ["GCN2Conv"]


class GCN2Conv(nn.Module):
    r"""The graph convolutional operator with initial residual connections and identity mapping
    (GCNII) from the `"Simple and Deep Graph Convolutional Networks"
    <https://arxiv.org/abs/2007.02133>`_ paper

    .. math::
        \mathbf{X}^{\prime} = \left( (1 - \alpha) \mathbf{\hat{P}}\mathbf{X} +
        \alpha \mathbf{X^{(0)}}\right) \left( (1 - \beta) \mathbf{I} + \beta
        \mathbf{\Theta} \right)

    with :math:`\mathbf{\hat{P}} = \mathbf{\hat{D}}^{-1/2} \mathbf{\hat{A}} \mathbf{\hat{D}}^{-1/2}`
    GCN's normalised adjacency with one self-loop per node, its degrees global (weighted on a
    block with edge weights and their weighted degrees, as :class:`~gnn_dist.nn.GCNConv`),
    :math:`\mathbf{X^{(0)}}` the destinations' initial representation and
    :math:`\beta = \log(\theta / \ell + 1)` (1 without ``theta`` and ``layer``). With
    ``shared_weights=False`` the initial term has its own :math:`\mathbf{\Theta}_2`.

    The layer reads two inputs, so it is called as ``conv(block, x_src, x_0)`` or bound first:
    ``conv.bind(x_0, block)`` is a one-input layer (``bound(b, x_src)``) that implements the layer
    protocol (:mod:`gnn_dist.nn.decomposable`), which is what a model hands to
    ``part.run_layer`` (so the ``overlap`` schedule aggregates its inner sources while the halo
    rows travel). ``x_0`` never travels: only the destinations' rows are read; bound with the
    part's ``block``, the layer also runs on any block of a subset of its destinations (the
    ``overlap`` schedule's boundary chunks) and reads their rows of ``x_0``, found by original id.

    Args:
        channels (int): width of ``x_src``, ``x_0`` and the output.
        alpha (float): the initial residual's strength :math:`\alpha`.
        theta (float, optional): :math:`\theta` of the identity mapping's :math:`\beta`.
        layer (int, optional): :math:`\ell`, the layer's 1-based depth, for :math:`\beta`.
        shared_weights (bool, optional): one :math:`\mathbf{\Theta}` for both terms. (default: :obj:`True`)

    Shapes:
        - **input:** block with ``S`` sources and ``D`` destinations, ``x_src`` :math:`(S, C)`
          (inner rows, then halo rows), ``x_0`` :math:`(D', C)` with :math:`D' \ge D` (its first
          ``D`` rows are read)
        - **output:** :math:`(D, C)`

    Parameters ``weight1`` and ``weight2`` are named as in PyG, so state dicts load both ways.
    """

    def __init__(self, channels: int, alpha: float, theta: float | None = None, layer: int | None = None,
                 shared_weights: bool = True) -> None:
        super().__init__()
        if (theta is None) != (layer is None):
            raise ValueError(f"GCN2Conv: theta={theta!r} and layer={layer!r} must be given together (or neither)")
        if layer is not None and layer < 1:
            raise ValueError(f"GCN2Conv: layer={layer} is a 1-based depth (>= 1)")
        self.channels = channels
        self.alpha = float(alpha)
        self.beta = 1.0 if theta is None else math.log(theta / layer + 1)
        self.weight1 = nn.Parameter(torch.empty(channels, channels))
        self.weight2 = None if shared_weights else nn.Parameter(torch.empty(channels, channels))
        self.reset_parameters()

    def reset_parameters(self) -> None:
        for w in (self.weight1, self.weight2):
            if w is not None:
                nn.init.xavier_uniform_(w)  # PyG's glorot

    def forward(self, block: Block, x_src: torch.Tensor, x_0: torch.Tensor) -> torch.Tensor:
        return self.bind(x_0)(block, x_src)

    def bind(self, x_0: torch.Tensor, block: Block | None = None) -> "InitialResidual":
        """This layer with its initial representation ``x_0`` (the rows of ``block``'s
        destinations, when given): a one-input layer."""
        return InitialResidual(self, x_0, block)

    def finish(self, propagated: torch.Tensor, x_0: torch.Tensor) -> torch.Tensor:
        """The output from :math:`\\hat{P} X` at the destinations ``[D, C]`` and ``x_0``, in PyG's order
        of operations."""
        x = propagated * (1 - self.alpha)
        x0 = self.alpha * x_0[:x.shape[0]]
        if self.weight2 is None:
            out = x + x0
            return torch.addmm(out, out, self.weight1, beta=1.0 - self.beta, alpha=self.beta)
        return (torch.addmm(x, x, self.weight1, beta=1.0 - self.beta, alpha=self.beta)
                + torch.addmm(x0, x0, self.weight2, beta=1.0 - self.beta, alpha=self.beta))

    def __repr__(self) -> str:
        return f"{self.__class__.__name__}({self.channels}, alpha={self.alpha}, beta={self.beta:.4g})"


@dataclass(frozen=True, slots=True)
class _Context:
    gcn: GCNContext
    x_0: torch.Tensor


class InitialResidual:
    """A :class:`GCN2Conv` bound to its ``x_0``: ``bound(block, x_src)`` and the layer protocol
    (aggregation: GCN's over the raw rows; update: the initial residual and identity mapping)."""

    def __init__(self, conv: GCN2Conv, x_0: torch.Tensor, block: Block | None = None) -> None:
        self.conv = conv
        self.x_0 = x_0
        self.block = block

    def _x0_for(self, block: Block) -> torch.Tensor:
        """``x_0``'s rows of ``block``'s destinations: its first rows, or (a block of some of the
        bound block's destinations) the rows with their original ids."""
        home = self.block
        if home is None or block is home:
            return self.x_0
        ids = home.src_original_ids[:home.num_dst]
        if block.num_dst == home.num_dst and torch.equal(block.src_original_ids[:block.num_dst], ids):
            return self.x_0
        order, sorted_ids = home.cached("gcn2_dst_id_order", lambda: (lambda o: (o, ids[o]))(torch.argsort(ids)))
        want = block.src_original_ids[:block.num_dst].to(sorted_ids.device)
        pos = torch.searchsorted(sorted_ids, want).clamp_(max=max(sorted_ids.numel() - 1, 0))
        if not bool((sorted_ids[pos] == want).all()):
            raise ValueError(f"{self.conv!r}: the block's destinations are not among the bound block's")
        return self.x_0.index_select(0, order[pos])

    def __call__(self, block: Block, x_src: torch.Tensor) -> torch.Tensor:
        return self.forward(block, x_src)

    def forward(self, block: Block, x_src: torch.Tensor) -> torch.Tensor:
        block.check_src(x_src, self.conv.channels, repr(self.conv))
        return propagate(self, block, x_src)

    def begin(self, block: Block, x_first: torch.Tensor, dropout_key: DropoutKey | None = None, *,
              raw: bool = False) -> tuple[_Context, torch.Tensor]:
        check_first(block, x_first, self.conv.channels, self.conv)
        if self.x_0.dim() != 2 or self.x_0.shape[0] < block.num_dst or self.x_0.shape[1] != self.conv.channels:
            raise ValueError(f"{self.conv!r}: x_0 must be [>= {block.num_dst} destinations, {self.conv.channels}], "
                             f"got {list(self.x_0.shape)}")
        return _Context(gcn_context(block, x_first, True), self._x0_for(block)), x_first

    def transform(self, x: torch.Tensor, ctx: _Context) -> torch.Tensor:
        return x

    def aggregate(self, group: Block, z: torch.Tensor, ctx: _Context, *, whole: bool = False) -> torch.Tensor:
        return gcn_aggregate(group, z, ctx.gcn)

    def merge(self, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        return a + b

    def update(self, acc: torch.Tensor, ctx: _Context) -> torch.Tensor:
        return self.conv.finish(gcn_self_term(acc, ctx.gcn), ctx.x_0)

    def __getattr__(self, name: str) -> Any:  # parameters, training flag ... of the conv
        if name.startswith("__"):
            raise AttributeError(name)
        return getattr(self.__dict__["conv"], name)

    def __repr__(self) -> str:
        return f"{self.conv!r}.bind(x_0)"
