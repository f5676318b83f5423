"""Typed (heterogeneous) graphs at run time: a rank's typed part (:mod:`.part`) and the
learnable rows of the featureless types (:mod:`.embedding`); the models are
:mod:`gnn_dist.models.rgcn`, the layer :mod:`gnn_dist.nn.rgcn_conv`."""

from .embedding import PER_RANK, TypedEmbedding, is_per_rank
from .part import TypedPart, check_target_type, training_meta

__all__ = ["TypedPart", "TypedEmbedding", "PER_RANK", "is_per_rank", "training_meta", "check_target_type"]
