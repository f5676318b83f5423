"""GraphSAGE on a typed (heterogeneous) partition, one :class:`~gnn_dist.nn.SAGEConv` per relation
summed per destination (:class:`~gnn_dist.nn.hetero_conv.HeteroConv`): PyG's
``HeteroConv({relation: SAGEConv})``, what ``to_hetero(GraphSAGE, metadata, aggr="sum")`` makes
of its GraphSAGE (see :class:`~.typed.TypedGNN` and :class:`~.basic_gnn.BasicGNN` for the loop,
the activations and the hash dropout keyed by original ids)."""

from __future__ import annotations

from typing import Any

from torch import nn

from ..nn import SAGEConv
from ..nn.hetero_conv import HeteroConv
from . import saved
from .spec import register_model
from .typed import TypedGNN

__all__ = ["HeteroGraphSAGE"]


@register_model("hetero-sage", saved=saved.hetero_sage_saved, typed=True, workspace_factor=1.6)
class HeteroGraphSAGE(TypedGNN):
    """Per layer a mean-aggregating :class:`~gnn_dist.nn.SAGEConv` per relation (its mean over the
    relation's in-edges, its own root weight and bias), the relations' outputs summed per
    destination; a node type that no relation enters gets zeros. The featureless types'
    learnable rows and the input width: :class:`~.typed.TypedGNN`."""

    def init_conv(self, in_channels: int, out_channels: int, *, last: bool, num_relations: int = 1,
                  num_node_types: int = 1, **kwargs: Any) -> nn.Module:
        return HeteroConv({r: SAGEConv(in_channels, out_channels, **kwargs) for r in range(num_relations)},
                          out_channels)
