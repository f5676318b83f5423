"""Built-in multi-layer GNNs (GCN, GraphSAGE, GAT, GIN) that run on one rank's part."""

from __future__ import annotations

from .basic_gnn import (GAT, GCN, GIN, MODELS, Activation, BasicGNN, FullGraph, GraphSAGE, LayerInput, PartLike,
                        build_model, register_model)

__all__ = ["BasicGNN", "GCN", "GraphSAGE", "GAT", "GIN", "MODELS", "build_model", "register_model", "FullGraph",
           "PartLike",
           "LayerInput", "Activation"]
