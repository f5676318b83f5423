"""DeepGCN's pre-activation residual block ("res+"), equal to PyG's ``DeepGCNLayer(block="res+")``."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

import torch
from torch import nn

from .block import Block
from .decomposable import check_first, is_decomposable, propagate
from .dropout import DropoutKey, hash_dropout

__all__ = ["DeepGCNLayer"]


class DeepGCNLayer(nn.Module):
    r"""The skip connection of the `"DeepGCNs: Can GCNs Go as Deep as CNNs?"
    <https://arxiv.org/abs/1904.03751>`_ and `"DeeperGCN: All You Need to Train Deeper GCNs"
    <https://arxiv.org/abs/2006.07739>`_ papers, in its pre-activation form ``res+``:

    .. math::
        \mathbf{x}^{\prime}_v = \mathbf{x}_v + \mathrm{conv}\Big(
        \mathrm{Dropout}\big(\sigma(\mathrm{Norm}(\mathbf{x}))\big)\Big)_v

    ``Norm`` and :math:`\sigma` act on each row alone (a LayerNorm, not a BatchNorm, whose
    statistics would be the whole graph's), and the dropout is :func:`~gnn_dist.nn.hash_dropout`
    keyed by the layer's :class:`~gnn_dist.nn.DropoutKey` and each row's original id: the
    pre-activation of a source row is the same on every rank that reads it. So the rows that
    travel are the residual stream :math:`\mathbf{x}` itself, and each reader normalises,
    activates and drops its halo rows as their owner does its inner rows.

    The layer implements the layer protocol (:mod:`gnn_dist.nn.decomposable`) when ``conv``
    does: a group's rows are pre-activated in :meth:`aggregate`, where the group's block gives
    their original ids (``transform`` is the identity), then handed to ``conv``'s own
    transform and aggregation; :meth:`update` is ``conv``'s plus the destinations' rows. So the
    ``overlap`` schedule runs it as it runs ``conv``.

    Args:
        conv (nn.Module): the graph convolution, mapping width ``C`` to ``C``
            (:class:`~gnn_dist.nn.GCNConv`, :class:`~gnn_dist.nn.SAGEConv`, ...).
        norm (nn.Module, optional): the row-wise normalisation (``torch.nn.LayerNorm(C)``), or
            None. (default: :obj:`None`)
        act (callable, optional): the nonlinearity, or None. (default: :obj:`None`)
        dropout (float, optional): the dropout probability before ``conv``. (default: :obj:`0.`)

    Shapes:
        - **input:** block with ``S`` sources and ``D`` destinations, ``x_src`` :math:`(S, C)`
          (inner rows, then halo rows); ``dropout_key`` (a
          :class:`~gnn_dist.nn.DropoutKey`, needed when training with ``dropout > 0``)
        - **output:** :math:`(D, C)`

    Submodules ``conv`` and ``norm`` are named as in PyG, so state dicts load both ways.
    """

    uses_dropout_key = True
    """``call_conv`` passes the model's :class:`~gnn_dist.nn.DropoutKey` (its dropout's key)."""

    def __init__(self, conv: nn.Module, norm: nn.Module | None = None,
                 act: Callable[[torch.Tensor], torch.Tensor] | None = None, dropout: float = 0.0) -> None:
        super().__init__()
        if not 0.0 <= dropout < 1.0:
            raise ValueError(f"DeepGCNLayer: dropout must be in [0, 1), got {dropout}")
        if not is_decomposable(conv):
            raise ValueError(f"DeepGCNLayer: {type(conv).__name__} does not implement the layer protocol "
                             f"(gnn_dist.nn.DecomposableLayer), which the block's pre-activation is run inside")
        c_in, c_out = getattr(conv, "in_channels", None), getattr(conv, "out_channels", None)
        if c_in is not None and c_out is not None and c_in != c_out:
            raise ValueError(f"DeepGCNLayer: {conv!r} maps {c_in} to {c_out} channels; the skip connection "
                             f"adds its input, so they must be equal")
        self.conv = conv
        self.norm = norm
        self.act = act
        self.dropout = float(dropout)

    def reset_parameters(self) -> None:
        self.conv.reset_parameters()
        if self.norm is not None:
            self.norm.reset_parameters()

    def pre_activation(self, x: torch.Tensor, row_ids: torch.Tensor, dropout_key: DropoutKey | None) -> torch.Tensor:
        r"""``Dropout(act(Norm(x)))`` of rows ``x`` ``[n, C]`` whose original ids are ``row_ids`` ``[n]``."""
        h = x if self.norm is None else self.norm(x)
        h = h if self.act is None else self.act(h)
        if not self.training or self.dropout == 0.0:
            return h
        if dropout_key is None:
            raise ValueError(f"{self!r}: dropout={self.dropout} in training needs the model's dropout_key "
                             f"(a gnn_dist.nn.DropoutKey)")
        k = dropout_key
        return hash_dropout(h, self.dropout, seed=k.seed, step=k.step, layer=k.layer, row_ids=row_ids)

    def forward(self, block: Block, x_src: torch.Tensor, dropout_key: DropoutKey | None = None) -> torch.Tensor:
        return propagate(self, block, x_src, dropout_key)

    # ---------------------------------------------------------------- the layer protocol
    def begin(self, block: Block, x_first: torch.Tensor, dropout_key: DropoutKey | None = None, *,
              raw: bool = False) -> tuple["_Context", torch.Tensor]:
        """``conv``'s begin on the pre-activated rows; the raw rows come back as ``z`` (their
        aggregation, :meth:`aggregate`, knows them by identity and reuses ``conv``'s ``z``)."""
        if raw:
            raise ValueError(f"{self!r}: the aggregation is over pre-activated rows, not the raw input "
                             f"(linear_aggregation is False)")
        check_first(block, x_first, None, self)
        pre = self.pre_activation(x_first, block.src_original_ids[:x_first.shape[0]], dropout_key)
        inner, z = self.conv.begin(block, pre, dropout_key)
        return _Context(inner, block.dst_rows(x_first), x_first, z, dropout_key), x_first

    def transform(self, x: torch.Tensor, ctx: "_Context") -> torch.Tensor:
        return x   # the pre-activation needs the rows' original ids: it runs in aggregate

    def aggregate(self, group: Block, z: torch.Tensor, ctx: "_Context", *, whole: bool = False) -> Any:
        if z is ctx.first:
            z_conv = ctx.z_first
        else:
            pre = self.pre_activation(z, group.src_original_ids[:z.shape[0]], ctx.dropout_key)
            z_conv = self.conv.transform(pre, ctx.inner)
        return self.conv.aggregate(group, z_conv, ctx.inner, whole=whole)

    def merge(self, a: Any, b: Any) -> Any:
        return self.conv.merge(a, b)

    def update(self, acc: Any, ctx: "_Context") -> torch.Tensor:
        return ctx.residual + self.conv.update(acc, ctx.inner)

    def __repr__(self) -> str:
        return f"{self.__class__.__name__}(block=res+, {self.conv!r}, dropout={self.dropout})"


@dataclass(frozen=True, slots=True)
class _Context:
    inner: Any
    """``conv``'s context."""
    residual: torch.Tensor
    """``[D, C]``: the destinations' input rows (the skip connection)."""
    first: torch.Tensor
    """The raw first source rows :meth:`DeepGCNLayer.begin` returned as ``z``."""
    z_first: torch.Tensor
    """``conv``'s transform of their pre-activation."""
    dropout_key: DropoutKey | None
