"""GraphSAGE convolution with mean aggregation, equal to PyG's ``SAGEConv`` defaults."""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn

from .block import Block
from .decomposable import check_first, propagate
from .dropout import DropoutKey
from .sparse import spmm

__all__ = ["SAGEConv", "SAGE_INITS"]

SAGE_INITS = ("pyg", "concat")
"""The initialisations of :class:`SAGEConv`'s weights (its ``init`` argument)."""


class SAGEConv(nn.Module):
    r"""The GraphSAGE operator from the `"Inductive Representation Learning on Large Graphs"
    <https://arxiv.org/abs/1706.02216>`_ paper

    .. math::
        \mathbf{x}^{\prime}_v = \mathbf{W}_1 \mathbf{x}_v + \mathbf{W}_2 \cdot
        \mathrm{mean}_{u \in \mathcal{N}(v)} \mathbf{x}_u + \mathbf{b}

    The mean runs over the destination's in-edges as stored (self-loops and duplicate edges
    included); a node without in-edges aggregates to 0. When ``out_channels < in_channels`` the
    linear map is applied before the mean (the same result, less work). Edge weights are not
    used (as in PyG). Mapping first with only the destinations' rows given (one rank's whole
    graph, the ``overlap`` schedule's inner rows), both weights apply in one product.

    Args:
        in_channels (int): size of each input row.
        out_channels (int): size of each output row.
        bias (bool, optional): learn an additive bias (held by ``lin_l``). (default: :obj:`True`)
        init (str, optional): the initial weights: ``"pyg"``, each map drawn as its own
            ``nn.Linear(in_channels, out_channels)`` (PyG's ``SAGEConv``: uniform in
            :math:`\pm 1/\sqrt{F_{in}}`); ``"concat"``, both maps and the bias drawn as the one
            ``nn.Linear(2 in_channels, out_channels)`` of the concatenation
            :math:`[\mathrm{mean}\, x_u, x_v]` (uniform in :math:`\pm 1/\sqrt{2 F_{in}}`: the
            GraphSAGE paper's :math:`W \cdot \mathrm{CONCAT}`, PipeGCN's and BNS-GCN's
            precomputed layer), so the sum of the two terms starts at a single map's scale.
            (default: :obj:`"pyg"`)

    Shapes:
        - **input:** block with ``S`` sources and ``D`` destinations, source features
          ``x_src`` :math:`(S, F_{in})` (inner rows, then halo rows)
        - **output:** destination features :math:`(D, F_{out})`

    Parameters ``lin_l.weight``, ``lin_l.bias`` (:math:`\mathbf{W}_2`, :math:`\mathbf{b}`) and
    ``lin_r.weight`` (:math:`\mathbf{W}_1`) are named as in PyG.
    """

    def __init__(self, in_channels: int, out_channels: int, bias: bool = True, init: str = "pyg") -> None:
        super().__init__()
        if init not in SAGE_INITS:
            raise ValueError(f"SAGEConv: init={init!r} is not one of {', '.join(SAGE_INITS)}")
        self.in_channels = in_channels
        self.out_channels = out_channels
        self.init = init
        self.lin_l = nn.Linear(in_channels, out_channels, bias=bias)
        self.lin_r = nn.Linear(in_channels, out_channels, bias=False)
        self.reset_parameters()

    def reset_parameters(self) -> None:
        if self.init == "pyg":
            self.lin_l.reset_parameters()
            self.lin_r.reset_parameters()
            return
        bound = 1.0 / math.sqrt(2 * self.in_channels)   # nn.Linear's bound for the fan-in 2 F_in
        with torch.no_grad():
            for p in (self.lin_l.weight, self.lin_r.weight, self.lin_l.bias):
                if p is not None:
                    p.uniform_(-bound, bound)

    def forward(self, block: Block, x_src: torch.Tensor) -> torch.Tensor:
        block.check_src(x_src, self.in_channels, repr(self))
        return propagate(self, block, x_src)

    # ---------------------------------------------------------------- the layer protocol
    linear_aggregation = True
    """The mean is linear and, on the input rows, reads no parameter (``begin(raw=True)``)."""

    def narrows(self, x: torch.Tensor) -> bool:
        """``W_2`` comes before the mean (``F_out < F_in``): the mapped rows may travel instead."""
        return self.out_channels < self.in_channels

    def begin(self, block: Block, x_first: torch.Tensor, dropout_key: DropoutKey | None = None, *,
              raw: bool = False) -> tuple[_SAGEContext, torch.Tensor]:
        """Applies ``W_2`` before the mean when it narrows the rows (not when ``raw``)."""
        check_first(block, x_first, self.in_channels, self)
        map_first = not raw and self.narrows(x_first)
        root = None
        if map_first and x_first.shape[0] == block.num_dst:
            # the rows are the destinations': one product for both weights reads them once
            z, root = F.linear(x_first, torch.cat([self.lin_l.weight, self.lin_r.weight])).split(
                self.out_channels, dim=1)
        else:
            z = F.linear(x_first, self.lin_l.weight) if map_first else x_first
        inv_count = block.cached(("in_count_inv", z.dtype, z.device),
                                 lambda: block.in_count.clamp(min=1).to(z.dtype).reciprocal().unsqueeze(1))
        return _SAGEContext(map_first, inv_count, block.dst_rows(x_first), root), z

    def transform(self, x: torch.Tensor, ctx: _SAGEContext) -> torch.Tensor:
        return F.linear(x, self.lin_l.weight) if ctx.map_first else x

    def aggregate(self, group: Block, z: torch.Tensor, ctx: _SAGEContext, *, whole: bool = False) -> torch.Tensor:
        """The sum over ``group``'s edges (divided by the in-edge count in :meth:`update`)."""
        return spmm(group, z)

    def merge(self, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        return a + b

    def update(self, acc: torch.Tensor, ctx: _SAGEContext) -> torch.Tensor:
        out = acc * ctx.inv_count
        if ctx.map_first:
            if self.lin_l.bias is not None:
                out = out + self.lin_l.bias
            return out + (self.lin_r(ctx.x_dst) if ctx.root is None else ctx.root)
        return self._with_root(self.lin_l(out), ctx)

    def fixed_update(self, acc: torch.Tensor, ctx: _SAGEContext) -> torch.Tensor | None:
        """The mean (when ``W_2`` comes after it, as on raw rows)."""
        return None if ctx.map_first else acc * ctx.inv_count

    def learned_update(self, fixed: torch.Tensor, ctx: _SAGEContext) -> torch.Tensor:
        return self._with_root(self.lin_l(fixed), ctx)

    def _with_root(self, out: torch.Tensor, ctx: _SAGEContext) -> torch.Tensor:
        """``out + W_1 x_v``, the product accumulated into ``out`` (a fresh tensor whose backward
        does not read it): no third ``[D, F_out]`` tensor and no pass to add it. Under autocast
        (``out`` in bfloat16, the weight in float32) the sum of the two maps, as autocast casts."""
        weight = self.lin_r.weight
        if out.dtype == ctx.x_dst.dtype == weight.dtype:
            return out.addmm_(ctx.x_dst, weight.t())
        return out + self.lin_r(ctx.x_dst)

    def __repr__(self) -> str:
        return f"{self.__class__.__name__}({self.in_channels}, {self.out_channels}, aggr=mean)"


@dataclass(frozen=True, slots=True)
class _SAGEContext:
    map_first: bool
    """``W_2`` was applied to the source rows (before the mean)."""
    inv_count: torch.Tensor
    """``[D, 1]``: ``1 / max(1, local in-edges)``."""
    x_dst: torch.Tensor
    """``[D, F_in]``: the destinations' input rows (the root term's)."""
    root: torch.Tensor | None = None
    """``[D, F_out]``: the root term ``W_1 x_v``, when :meth:`SAGEConv.begin` computed it with the
    mapped source rows (``map_first`` and the first rows are exactly the destinations)."""
