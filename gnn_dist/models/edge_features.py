"""Which edge features a model reads: ``--edge-dim`` resolved against the partition.

A model class that reads edge features says so with ``edge_features``: ``"required"`` (GINE)
or ``"optional"`` (GAT: its attention scores read them when the partition has them). The run's
:class:`~gnn_dist.config.ModelConfig` ``edge_dim`` is left unset by default and resolved here,
once, from the partition's ``edge_feature_dim`` before the model is built, so the model file and
the checkpoints record the width the weights were built for.
"""

from __future__ import annotations

import dataclasses
from typing import Any

__all__ = ["resolve_edge_dim"]


def resolve_edge_dim(model: Any, partition_edge_dim: int, where: str = "the partition") -> Any:
    """``model`` (a :class:`~gnn_dist.config.ModelConfig`) with ``edge_dim`` resolved against a
    partition whose edge features are ``partition_edge_dim`` wide (0: none).

    Unset, it becomes the partition's width for a model that reads edge features (and stays unset
    for one that does not, or when the partition has none and the model may go without). Raises
    ``ValueError`` naming ``--edge-dim`` when the model needs edge features the partition lacks,
    or the width given is not the partition's.
    """
    from . import MODELS

    reads = getattr(MODELS.get(model.model), "edge_features", None)
    given = model.edge_dim
    if reads is None:
        return model
    if given is None:
        if partition_edge_dim:
            return dataclasses.replace(model, edge_dim=int(partition_edge_dim))
        if reads == "required":
            raise ValueError(f"--model {model.model} reads edge features but {where} has none (edge_feature_dim 0); "
                             f"partition a graph with edge features (npz edge_attr, npy-dir edge_attr.npy, OGB "
                             f"raw/edge-feat.csv.gz; e.g. --dataset sbm-edges)")
        return model
    if given and given != partition_edge_dim:
        raise ValueError(f"--edge-dim {given} but {where} has edge_feature_dim {partition_edge_dim}; leave "
                         f"--edge-dim unset to use the partition's" + ("" if reads == "required" else ", or 0 to ignore them"))
    return model
