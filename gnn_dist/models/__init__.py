"""Built-in multi-layer GNNs (GCN, GraphSAGE, GAT, GIN, GCNII) that run on one rank's part."""

from __future__ import annotations

from .basic_gnn import (GAT, GCN, GIN, MODELS, Activation, BasicGNN, FullGraph, GraphSAGE, LayerInput, PartLike,
                        build_model, register_model)
from .gcnii import GCNII

__all__ = ["BasicGNN", "GCN", "GraphSAGE", "GAT", "GIN", "GCNII", "MODELS", "build_model", "register_model", "FullGraph",
           "PartLike",
           "LayerInput", "Activation"]
