"""HGT on a typed (heterogeneous) partition: learnable rows for the featureless types, then
:class:`~gnn_dist.nn.hgt_conv.HGTConv` layers (see :class:`~.typed.TypedGNN` and
:class:`~.basic_gnn.BasicGNN` for the loop, the activations and the hash dropout keyed by
original ids)."""

from __future__ import annotations

from typing import Any

from torch import nn

from ..nn.hgt_conv import HGTConv
from . import saved
from .spec import register_model
from .typed import TypedGNN

__all__ = ["HGT"]


def _hgt_check(model: Any) -> tuple[str, str] | None:
    """A hidden HGT layer's width is split among its heads: a multiple of the heads."""
    if model.layers > 1 and model.hidden % (model.heads or 1):
        return "hidden", f"{model.hidden} is the width of an hgt layer, split among its heads: it must be a multiple of heads = {model.heads}"
    return None


@register_model("hgt", saved=saved.hgt_saved, options=("heads",), check=_hgt_check, typed=True, workspace_factor=2.4,
                workspace_edge=2)
class HGT(TypedGNN):
    """Heterogeneous Graph Transformer (Hu et al., 2020): :class:`~gnn_dist.nn.hgt_conv.HGTConv`
    layers (per-type keys, queries and values, per-relation attention and messages, the softmax
    over all in-edges of a destination, the gated skip connection where a layer keeps its width).

    The hidden layers have ``heads`` heads (default 1) of width ``hidden_dim // heads``
    (``hidden_dim`` a multiple of ``heads``); the output layer, ``out_dim`` wide, has one head.
    The featureless types' learnable rows and the input width: :class:`~.typed.TypedGNN`.
    """

    def init_conv(self, in_channels: int, out_channels: int, *, last: bool, num_relations: int = 1,
                  num_node_types: int = 1, heads: int = 1, **kwargs: Any) -> nn.Module:
        if not last and (heads < 1 or out_channels % heads):
            raise ValueError(f"HGT: hidden_dim = {out_channels} must be a positive multiple of heads = {heads}")
        return HGTConv(in_channels, out_channels, num_relations, num_node_types, heads=1 if last else heads, **kwargs)
