"""R-GCN on a typed (heterogeneous) partition: learnable rows for the featureless types, then
:class:`~gnn_dist.nn.RGCNConv` layers (see :class:`~.typed.TypedGNN` and
:class:`~.basic_gnn.BasicGNN` for the loop, the activations and the hash dropout keyed by
original ids)."""

from __future__ import annotations

from typing import Any

from torch import nn

from ..hetero.part import TypedPart
from ..nn.rgcn_conv import RGCNConv
from . import saved
from .spec import register_model
from .typed import TypedGNN, typed_input_width

__all__ = ["RGCN", "typed_input_width"]


@register_model("rgcn", saved=saved.rgcn_saved, options=("num_bases",), typed=True)
class RGCN(TypedGNN):
    """R-GCN (Schlichtkrull et al., 2018) with per-relation mean aggregation, per-type root
    weights and optional basis decomposition (``num_bases``), after OGB's ogbn-mag baseline.

    The featureless types' learnable rows and the input width: :class:`~.typed.TypedGNN`.

    Args:
        num_bases (int, optional): bases of the relation weights (None: one weight each).
        (the other arguments: :class:`~.typed.TypedGNN`)
    """

    def __init__(self, in_dim: int, hidden_dim: int, out_dim: int, num_layers: int, dropout: float = 0.5,
                 seed: int = 0, *, typed: TypedPart, embedding_dim: int | None = None,
                 num_bases: int | None = None, **kwargs: Any) -> None:
        super().__init__(in_dim, hidden_dim, out_dim, num_layers, dropout, seed, typed=typed,
                         embedding_dim=embedding_dim, num_bases=num_bases, **kwargs)

    def init_conv(self, in_channels: int, out_channels: int, *, last: bool, num_relations: int = 1,
                  num_node_types: int = 1, num_bases: int | None = None, **kwargs: Any) -> nn.Module:
        return RGCNConv(in_channels, out_channels, num_relations, num_node_types, num_bases=num_bases, **kwargs)
