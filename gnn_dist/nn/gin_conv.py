"""Graph isomorphism convolution, equal to PyG's ``GINConv``."""

from __future__ import annotations

import torch
from torch import nn

from .block import Block
from .decomposable import check_first, propagate
from .dropout import DropoutKey
from .sparse import spmm

__all__ = ["GINConv"]


class GINConv(nn.Module):
    r"""The graph isomorphism operator from the `"How Powerful are Graph Neural Networks?"
    <https://arxiv.org/abs/1810.00826>`_ paper

    .. math::
        \mathbf{x}^{\prime}_v = h_{\mathbf{\Theta}} \left( (1 + \epsilon) \cdot \mathbf{x}_v +
        \sum_{u \in \mathcal{N}(v)} \mathbf{x}_u \right)

    The sum runs over the destination's in-edges as stored (self-loops and duplicates included).

    Args:
        nn (torch.nn.Module): the network :math:`h_{\mathbf{\Theta}}`, mapping ``[D, F_in]`` to
            ``[D, F_out]`` (e.g. an MLP).
        eps (float, optional): initial :math:`\epsilon`. (default: :obj:`0.`)
        train_eps (bool, optional): learn :math:`\epsilon` (a parameter instead of a buffer).
            (default: :obj:`False`)

    Shapes:
        - **input:** block with ``S`` sources and ``D`` destinations, source features
          ``x_src`` :math:`(S, F_{in})` (inner rows, then halo rows)
        - **output:** destination features :math:`(D, F_{out})`

    ``nn.*`` and ``eps`` are named as in PyG.
    """

    def __init__(self, nn: torch.nn.Module, eps: float = 0.0, train_eps: bool = False) -> None:
        super().__init__()
        self.nn = nn
        self.initial_eps = float(eps)
        if train_eps:
            self.eps = torch.nn.Parameter(torch.empty(1))
        else:
            self.register_buffer("eps", torch.empty(1))
        self.reset_parameters()

    def reset_parameters(self) -> None:
        for m in self.nn.modules():
            if hasattr(m, "reset_parameters"):
                m.reset_parameters()
        with torch.no_grad():
            self.eps.fill_(self.initial_eps)

    def forward(self, block: Block, x_src: torch.Tensor) -> torch.Tensor:
        block.check_src(x_src, None, repr(self))
        return propagate(self, block, x_src)

    # ---------------------------------------------------------------- the layer protocol
    linear_aggregation = True
    """The sum reads no parameter: the source rows are aggregated as they are."""

    def begin(self, block: Block, x_first: torch.Tensor, dropout_key: DropoutKey | None = None, *,
              raw: bool = False) -> tuple[torch.Tensor, torch.Tensor]:
        """The context is the destinations' rows ``[D, F]`` (the ``(1 + eps)`` term's)."""
        check_first(block, x_first, None, self)
        return block.dst_rows(x_first), x_first

    def transform(self, x: torch.Tensor, ctx: torch.Tensor) -> torch.Tensor:
        return x

    def aggregate(self, group: Block, z: torch.Tensor, ctx: torch.Tensor, *, whole: bool = False) -> torch.Tensor:
        return spmm(group, z)

    def merge(self, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        return a + b

    def update(self, acc: torch.Tensor, ctx: torch.Tensor) -> torch.Tensor:
        return self.nn(acc + (1 + self.eps) * ctx)

    def fixed_update(self, acc: torch.Tensor, ctx: torch.Tensor) -> torch.Tensor | None:
        """``acc + (1 + eps) x``, which reads no trained parameter unless ``train_eps``."""
        return None if self.eps.requires_grad else acc + (1 + self.eps) * ctx

    def learned_update(self, fixed: torch.Tensor, ctx: torch.Tensor) -> torch.Tensor:
        return self.nn(fixed)

    def __repr__(self) -> str:
        return f"{self.__class__.__name__}(nn={self.nn})"
