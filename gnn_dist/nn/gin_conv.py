"""Graph isomorphism convolution, equal to PyG's ``GINConv``."""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F
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
    When :math:`h_{\mathbf{\Theta}}` starts with a linear map :math:`\mathbf{W}\mathbf{x} +
    \mathbf{b}` (``nn`` a ``torch.nn.Linear``, or a ``torch.nn.Sequential`` whose first module is
    one) that narrows the rows, the map's weight is applied before the sum (the same result, less
    work: the sum and its backward run at the narrower width),

    .. math::
        h_{\mathbf{\Theta}}(\cdot) = g\Big((1 + \epsilon) \cdot \mathbf{W}\mathbf{x}_v +
        \sum_{u \in \mathcal{N}(v)} \mathbf{W}\mathbf{x}_u + \mathbf{b}\Big)

    where :math:`g` is the rest of ``nn``.

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
              raw: bool = False) -> tuple[_GINContext, torch.Tensor]:
        """Applies the network's first linear map before the sum when it narrows the rows (not
        when ``raw``); the context holds the destinations' rows (the ``(1 + eps)`` term's)."""
        check_first(block, x_first, None, self)
        first = None if raw else self._narrowing_map()
        z = x_first if first is None else F.linear(x_first, first.weight)
        return _GINContext(block.dst_rows(z), first is not None), z

    def transform(self, x: torch.Tensor, ctx: _GINContext) -> torch.Tensor:
        first = self._narrowing_map() if ctx.map_first else None
        return x if first is None else F.linear(x, first.weight)

    def aggregate(self, group: Block, z: torch.Tensor, ctx: _GINContext, *, whole: bool = False) -> torch.Tensor:
        return spmm(group, z)

    def merge(self, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        return a + b

    def update(self, acc: torch.Tensor, ctx: _GINContext) -> torch.Tensor:
        h = acc + (1 + self.eps) * ctx.x_dst
        if not ctx.map_first:
            return self.nn(h)
        bias = self._narrowing_map().bias   # map_first: begin found the map
        if bias is not None:
            h = h + bias
        return self.nn[1:](h) if isinstance(self.nn, nn.Sequential) else h

    def fixed_update(self, acc: torch.Tensor, ctx: _GINContext) -> torch.Tensor | None:
        """``acc + (1 + eps) x``, which reads no trained parameter unless ``train_eps`` (raw rows:
        the network's map comes after it)."""
        return None if self.eps.requires_grad or ctx.map_first else acc + (1 + self.eps) * ctx.x_dst

    def learned_update(self, fixed: torch.Tensor, ctx: _GINContext) -> torch.Tensor:
        return self.nn(fixed)

    def _narrowing_map(self) -> nn.Linear | None:
        """The network's first module when it is a ``Linear`` that narrows the rows, else None."""
        first = self.nn[0] if isinstance(self.nn, nn.Sequential) and len(self.nn) else self.nn
        if isinstance(first, nn.Linear) and first.out_features < first.in_features:
            return first
        return None

    def __repr__(self) -> str:
        return f"{self.__class__.__name__}(nn={self.nn})"


@dataclass(frozen=True, slots=True)
class _GINContext:
    x_dst: torch.Tensor
    """``[D, F]``: the destinations' rows, mapped when :attr:`map_first` (the ``(1 + eps)`` term's)."""
    map_first: bool
    """The network's first linear map was applied to the source rows (before the sum)."""
