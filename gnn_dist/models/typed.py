"""The base of the models of typed (heterogeneous) partitions: learnable rows for the featureless
types written into the static features (or the features zero-padded to the widest type), then
the layers of :class:`~.basic_gnn.BasicGNN` on the union rows. Each model registers with
``register_model(..., typed=True)`` and builds its convs in :meth:`~.basic_gnn.BasicGNN.init_conv`,
which gets ``num_relations`` and ``num_node_types``."""

from __future__ import annotations

from typing import Any

import torch
from torch import nn

from ..hetero.embedding import TypedEmbedding
from ..hetero.part import TypedPart, featureless_problem
from ..nn.part import PartLike
from .basic_gnn import BasicGNN

__all__ = ["TypedGNN", "typed_input_width"]


def typed_input_width(typed: TypedPart, embedding_dim: int | None) -> int:
    """The first layer's input width: the widest of the feature widths and ``embedding_dim``;
    one line when a type has neither features nor learnable rows."""
    why = featureless_problem([typed.type_names[t] for t in typed.featureless], embedding_dim)
    if why is not None:
        raise ValueError(why)
    return max(typed.feature_dim, embedding_dim or 0)


class TypedGNN(BasicGNN):
    """A :class:`~.basic_gnn.BasicGNN` on a typed part.

    Takes the part's static features ``x`` ``[I, F_x]`` (the featured types' rows, see
    :meth:`~gnn_dist.hetero.TypedPart.static_input`) and writes the featureless types' learnable
    rows into it (:class:`~gnn_dist.hetero.embedding.TypedEmbedding`, ``embedding_dim`` wide,
    this rank's rows only) before the first layer, whose input is the widest of the feature
    widths and ``embedding_dim``.

    Args:
        in_dim (int): ``F_x``, the static features' width (the partition's ``feature_dim``).
        typed (TypedPart): the rank's typed part (types, relations, its rows).
        embedding_dim (int, optional): the learnable rows' width (required when a type has no
            features).
        (the other arguments: :class:`~.basic_gnn.BasicGNN`; the layers' keyword arguments go to
        :meth:`init_conv` with ``num_relations`` and ``num_node_types``)
    """

    accepts_layer_input = False

    def __init__(self, in_dim: int, hidden_dim: int, out_dim: int, num_layers: int, dropout: float = 0.5,
                 seed: int = 0, *, typed: TypedPart, embedding_dim: int | None = None, **kwargs: Any) -> None:
        name = self.__class__.__name__
        if in_dim != typed.feature_dim:
            raise ValueError(f"{name}: in_dim={in_dim} but the typed part's widest feature width is {typed.feature_dim}")
        width = typed_input_width(typed, embedding_dim)
        super().__init__(width, hidden_dim, out_dim, num_layers, dropout, seed, num_relations=len(typed.relations),
                         num_node_types=len(typed.type_names), **kwargs)
        self.num_relations = len(typed.relations)
        """The graph's relations (a relational link decoder's, DistMult's, diagonals)."""
        self.features_in = int(in_dim)
        """The width of the ``x`` it takes (the layers' input is :attr:`in_dim` wide)."""
        self.embedding = (TypedEmbedding(typed, embedding_dim, width, seed)
                          if typed.featureless and embedding_dim else None)

    def forward(self, part: PartLike, x: torch.Tensor) -> torch.Tensor:
        if self.embedding is not None:
            x = self.embedding(x)
        elif x.shape[1] < self.in_dim:
            x = nn.functional.pad(x, (0, self.in_dim - x.shape[1]))
        return super().forward(part, x)
