"""Multi-layer GNNs that run on one rank's part: halo exchange, conv, ReLU, hash dropout.

Legend: ``I`` inner rows (the part's destinations ``D``), ``S`` = inner + halo source rows.
"""

from __future__ import annotations

from typing import Any, Protocol

import torch
import torch.nn.functional as F
from torch import nn

from ..nn import Block, DropoutKey, GATConv, GCNConv, GINConv, SAGEConv, hash_dropout

__all__ = ["PartLike", "FullGraph", "BasicGNN", "GCN", "GraphSAGE", "GAT", "GIN", "MODELS", "build_model"]


class PartLike(Protocol):
    """What a model runs on: a block and a differentiable halo exchange.

    A part may also offer ``layer(conv, h_inner, *, dropout_key=None) -> [I, F']``, which runs
    one conv with its exchange folded in (the ``overlap`` pipeline mode); the models then call
    it instead of ``exchange`` followed by the conv."""

    block: Block

    def exchange(self, h_inner: torch.Tensor) -> torch.Tensor:
        """``[I, F]`` inner rows -> ``[S, F]`` inner rows then halo rows (differentiable)."""
        ...


class FullGraph:
    """A whole graph on one device as a :class:`PartLike`: no halo, ``exchange`` is the identity.

    ``FullGraph(Block.from_graph(indptr, indices))`` runs a model without any process group.
    """

    def __init__(self, block: Block) -> None:
        if block.num_halo:
            raise ValueError(f"FullGraph needs a block without halo rows, got {block!r}")
        self.block = block

    def exchange(self, h_inner: torch.Tensor) -> torch.Tensor:
        return h_inner

    def __repr__(self) -> str:
        return f"FullGraph({self.block!r})"


class BasicGNN(nn.Module):
    r"""Base of the built-in models (after PyG's ``BasicGNN``): ``num_layers`` convs in
    :attr:`convs`, built in a loop by :meth:`init_conv`, the only method subclasses override.

    Forward on a part, for each layer ``i``:

    .. code-block:: text

        h_all = part.exchange(h)          # [I, F] -> [S, F]: inner rows then halo rows
        h = conv_i(part.block, h_all)     # [I, F']   (or h = part.layer(conv_i, h) if the part has it)
        if i < num_layers - 1:  h = hash_dropout(relu(h), dropout, seed, dropout_step, i, original ids)

    Dropout masks are keyed by ``(seed, dropout_step, layer, original node id, feature)``, so P
    ranks equal one device with dropout on. ``dropout_step`` is an int64 buffer (saved in the
    state dict, so a resumed run continues the same masks), incremented after each training-mode
    forward.

    Args:
        in_dim (int): input feature width.
        hidden_dim (int): width of the hidden layers.
        out_dim (int): output width (number of classes).
        num_layers (int): number of convs (>= 1).
        dropout (float, optional): feature dropout after each hidden layer. (default: :obj:`0.5`)
        seed (int, optional): dropout seed. (default: :obj:`0`)
        **layer_kwargs: passed to :meth:`init_conv`.

    Shapes:
        - **input:** ``part`` (a :class:`PartLike`), ``x`` :math:`(I, F_{in})` inner rows
        - **output:** logits :math:`(I, F_{out})`
    """

    def __init__(self, in_dim: int, hidden_dim: int, out_dim: int, num_layers: int, dropout: float = 0.5,
                 seed: int = 0, **layer_kwargs: Any) -> None:
        super().__init__()
        name = self.__class__.__name__
        for arg, v in (("in_dim", in_dim), ("hidden_dim", hidden_dim), ("out_dim", out_dim),
                       ("num_layers", num_layers)):
            if not isinstance(v, int) or v < 1:
                raise ValueError(f"{name}: {arg} must be a positive int, got {v!r}")
        if not 0.0 <= dropout < 1.0:
            raise ValueError(f"{name}: dropout must be in [0, 1), got {dropout}")
        self.in_dim = in_dim
        self.hidden_dim = hidden_dim
        self.out_dim = out_dim
        self.num_layers = num_layers
        self.dropout = float(dropout)
        self.seed = int(seed)
        self.convs = nn.ModuleList()
        for i in range(num_layers):
            last = i == num_layers - 1
            self.convs.append(self.init_conv(in_dim if i == 0 else hidden_dim, out_dim if last else hidden_dim,
                                             last=last, **layer_kwargs))
        self.register_buffer("dropout_step", torch.zeros((), dtype=torch.long))

    def init_conv(self, in_channels: int, out_channels: int, *, last: bool, **kwargs: Any) -> nn.Module:
        """The conv mapping ``in_channels`` to ``out_channels`` (``last``: the output layer)."""
        raise NotImplementedError

    def reset_parameters(self) -> None:
        """Re-initialise the convs (``dropout_step`` is kept)."""
        for conv in self.convs:
            conv.reset_parameters()

    def forward(self, part: PartLike, x: torch.Tensor) -> torch.Tensor:
        block = part.block
        name = self.__class__.__name__
        if x.dim() != 2 or x.shape[1] != self.in_dim:
            got = x.shape[1] if x.dim() == 2 else list(x.shape)
            raise ValueError(f"{name}: x has {got} features per row but the model's in_dim is {self.in_dim}")
        if x.shape[0] != block.num_dst:
            raise ValueError(f"{name}: x has {x.shape[0]} rows but the part has {block.num_dst} inner rows")
        ids = block.src_original_ids[:block.num_dst]
        step = self.dropout_step
        h = x
        layer = getattr(part, "layer", None)
        for i, conv in enumerate(self.convs):
            key = DropoutKey(self.seed, step, i) if getattr(conv, "uses_dropout_key", False) else None
            if layer is not None:
                h = layer(conv, h, dropout_key=key)
            elif key is not None:
                h = conv(block, part.exchange(h), dropout_key=key)
            else:
                h = conv(block, part.exchange(h))
            if i < self.num_layers - 1:
                h = F.relu(h)
                h = hash_dropout(h, self.dropout, seed=self.seed, step=step, layer=i, row_ids=ids,
                                 training=self.training)
        if self.training:
            with torch.no_grad():
                self.dropout_step += 1
        return h

    def __repr__(self) -> str:
        return f"{self.__class__.__name__}({self.in_dim}, {self.out_dim}, num_layers={self.num_layers})"


class GCN(BasicGNN):
    """Graph convolutional network: :class:`~gnn_dist.nn.GCNConv` layers (see :class:`BasicGNN`)."""

    def init_conv(self, in_channels: int, out_channels: int, *, last: bool, **kwargs: Any) -> nn.Module:
        return GCNConv(in_channels, out_channels, **kwargs)


class GraphSAGE(BasicGNN):
    """GraphSAGE with mean aggregation: :class:`~gnn_dist.nn.SAGEConv` layers (see :class:`BasicGNN`)."""

    def init_conv(self, in_channels: int, out_channels: int, *, last: bool, **kwargs: Any) -> nn.Module:
        return SAGEConv(in_channels, out_channels, **kwargs)


class GAT(BasicGNN):
    """Graph attention network: :class:`~gnn_dist.nn.GATConv` layers (see :class:`BasicGNN`).

    As in PyG's GAT example: hidden layers have ``heads`` heads (default 8) of width
    ``hidden_dim // heads``, concatenated (so ``hidden_dim`` is the total width and must be a
    multiple of ``heads``); the output layer has ``out_heads`` heads (default 1), averaged.
    ``attn_dropout`` (default 0) is the attention-coefficient dropout of every layer, keyed like
    the feature dropout. Other keyword arguments go to every :class:`~gnn_dist.nn.GATConv`.
    """

    def init_conv(self, in_channels: int, out_channels: int, *, last: bool, heads: int = 8, out_heads: int = 1,
                  attn_dropout: float = 0.0, **kwargs: Any) -> nn.Module:
        if last:
            return GATConv(in_channels, out_channels, heads=out_heads, concat=False, dropout=attn_dropout, **kwargs)
        if heads < 1 or out_channels % heads:
            raise ValueError(f"GAT: hidden_dim = {out_channels} must be a positive multiple of heads = {heads} "
                             f"(each of the {heads} heads is hidden_dim // heads wide)")
        return GATConv(in_channels, out_channels // heads, heads=heads, concat=True, dropout=attn_dropout, **kwargs)


class GIN(BasicGNN):
    """Graph isomorphism network: :class:`~gnn_dist.nn.GINConv` layers whose network is
    ``Linear(in, out) - ReLU - Linear(out, out)`` (see :class:`BasicGNN`)."""

    def init_conv(self, in_channels: int, out_channels: int, *, last: bool, **kwargs: Any) -> nn.Module:
        mlp = nn.Sequential(nn.Linear(in_channels, out_channels), nn.ReLU(), nn.Linear(out_channels, out_channels))
        return GINConv(mlp, **kwargs)


MODELS: dict[str, type[BasicGNN]] = {"gcn": GCN, "sage": GraphSAGE, "gat": GAT, "gin": GIN}
"""The built-in models by CLI name."""


def build_model(name: str, *, in_dim: int, hidden_dim: int, out_dim: int, num_layers: int, dropout: float = 0.5,
                seed: int = 0, heads: int | None = None, **layer_kwargs: Any) -> BasicGNN:
    """The model ``MODELS[name]``; ``heads`` (GAT only) is left at the model's default when None."""
    if name not in MODELS:
        raise ValueError(f"unknown model {name!r}; choose one of {', '.join(sorted(MODELS))}")
    if heads is not None:
        if name != "gat":
            raise ValueError(f"heads={heads} applies to the 'gat' model only, not {name!r}")
        layer_kwargs["heads"] = heads
    return MODELS[name](in_dim, hidden_dim, out_dim, num_layers, dropout=dropout, seed=seed, **layer_kwargs)
