"""GINE: a GIN whose messages read the edge features (:class:`~gnn_dist.nn.GINEConv`)."""

from __future__ import annotations

from typing import Any

from torch import nn

from ..nn import GINEConv
from .basic_gnn import BasicGNN, register_model

__all__ = ["GINE"]


@register_model("gine")
class GINE(BasicGNN):
    r"""Graph isomorphism network with edge features: :class:`~gnn_dist.nn.GINEConv` layers whose
    network is ``Linear(in, out) - ReLU - Linear(out, out)`` (as :class:`~gnn_dist.models.GIN`'s),
    each mapping the edge features to its input width with its own ``lin`` (see
    :class:`~gnn_dist.models.BasicGNN` for the layers, activations and dropout).

    .. math::
        \mathbf{h}^{(i+1)}_v = \mathrm{MLP}_i \Big( (1 + \epsilon) \mathbf{h}^{(i)}_v +
        \sum_{u \to v} \mathrm{ReLU}\big(\mathbf{h}^{(i)}_u + \mathbf{\Theta}^{(i)}_e \mathbf{e}_{uv}\big) \Big)

    ``edge_dim`` (``--edge-dim``, default the partition's ``edge_feature_dim``) is the edge
    features' width; None builds layers without the map (the edge features must then be as wide as
    every layer's input). Other keyword arguments (``eps``, ``train_eps``) go to every conv.
    """

    edge_features = "required"
    """The model reads the block's ``edge_attr`` (:mod:`gnn_dist.models.edge_features`)."""

    def init_conv(self, in_channels: int, out_channels: int, *, last: bool, edge_dim: int | None = None,
                  **kwargs: Any) -> nn.Module:
        mlp = nn.Sequential(nn.Linear(in_channels, out_channels), nn.ReLU(), nn.Linear(out_channels, out_channels))
        return GINEConv(mlp, edge_dim=edge_dim, **kwargs)
