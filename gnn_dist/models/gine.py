"""GINE: a node encoder, then GIN layers whose messages read the edge features (:class:`~gnn_dist.nn.GINEConv`)."""

from __future__ import annotations

from typing import Any

import torch
from torch import nn

from ..nn import GINEConv
from ..nn.part import PartLike
from .basic_gnn import BasicGNN
from .saved import gine_outside, gine_saved
from .spec import register_model
from .shared import check_inner_rows

__all__ = ["GINE"]


@register_model("gine", saved=gine_saved, outside=gine_outside)
class GINE(BasicGNN):
    r"""Graph isomorphism network with edge features, as PyG's GINE examples build it: a node
    encoder :attr:`encoder` ``Linear(in, hidden)``, then :class:`~gnn_dist.nn.GINEConv` layers
    whose network is ``Linear(hidden, out) - ReLU - Linear(out, out)`` (as
    :class:`~gnn_dist.models.GIN`'s), each mapping the edge features to the hidden width with its
    own ``lin`` (see :class:`~gnn_dist.models.BasicGNN` for the layers, activations and dropout).

    .. math::
        \mathbf{h}^{(0)}_v = \mathbf{W} \mathbf{x}_v + \mathbf{b}, \qquad
        \mathbf{h}^{(i+1)}_v = \mathrm{MLP}_i \Big( (1 + \epsilon) \mathbf{h}^{(i)}_v +
        \sum_{u \to v} \mathrm{ReLU}\big(\mathbf{h}^{(i)}_u + \mathbf{\Theta}^{(i)}_e \mathbf{e}_{uv}\big) \Big)

    The encoder maps the inner rows before the first exchange (the encoded rows travel, hidden
    wide), so the messages sum hidden-wide rows whose sign the ReLU does not simply cut off, as
    it does raw input features; ``input_dropout`` drops the encoder's output. The model takes
    the features as a tensor (no feature store: ``accepts_layer_input`` is False).

    ``edge_dim`` (``--edge-dim``, default the partition's ``edge_feature_dim``) is the edge
    features' width; None builds layers without the map (the edge features must then be
    ``hidden`` wide). Other keyword arguments (``eps``, ``train_eps``) go to every conv.
    """

    edge_features = "required"
    """The model reads the block's ``edge_attr`` (:mod:`gnn_dist.models.edge_features`)."""

    accepts_layer_input = False
    """Its first map is a linear map of the inner rows: the Trainer passes the features as a tensor."""

    def __init__(self, in_dim: int, hidden_dim: int, out_dim: int, num_layers: int, *args: Any, **kwargs: Any) -> None:
        super().__init__(in_dim, hidden_dim, out_dim, num_layers, *args, **kwargs)
        self.encoder = nn.Linear(in_dim, hidden_dim)

    def init_conv(self, in_channels: int, out_channels: int, *, last: bool, edge_dim: int | None = None,
                  **kwargs: Any) -> nn.Module:
        width = self.hidden_dim   # every conv reads the encoder's (or a hidden layer's) rows
        mlp = nn.Sequential(nn.Linear(width, out_channels), nn.ReLU(), nn.Linear(out_channels, out_channels))
        return GINEConv(mlp, edge_dim=edge_dim, **kwargs)

    def reset_parameters(self) -> None:
        super().reset_parameters()
        self.encoder.reset_parameters()

    def forward(self, part: PartLike, x: torch.Tensor) -> torch.Tensor:
        check_inner_rows("GINE", x, part.block, self.in_dim)
        return super().forward(part, self.encoder(x))

    def _check_input(self, x: Any, block: Any) -> None:
        check_inner_rows("GINE", x, block, self.hidden_dim)   # the encoded rows (forward checked the features)
