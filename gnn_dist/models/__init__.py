"""Built-in multi-layer GNNs (GCN, GraphSAGE, GAT, GIN, GINE, GCNII, ResGCN, ResGraphSAGE; R-GCN, HGT and
per-relation GraphSAGE on typed graphs) that run on one rank's part."""

from __future__ import annotations

from .basic_gnn import GAT, GCN, GIN, Activation, BasicGNN, FullGraph, GraphSAGE, LayerInput, PartLike, build_model
from .edge_features import resolve_edge_dim
from .gcnii import GCNII
from .gine import GINE
from .residual import DeepResidualGNN, ResGCN, ResGraphSAGE
from .hetero_sage import HeteroGraphSAGE
from .hgt import HGT
from .rgcn import RGCN
from .typed import TypedGNN
from .spec import MODEL_SPECS, MODELS, ModelSpec, model_spec, register_model, spec_of_class

__all__ = ["BasicGNN", "GCN", "GraphSAGE", "GAT", "GIN", "GINE", "resolve_edge_dim", "GCNII", "DeepResidualGNN", "ResGCN", "ResGraphSAGE", "RGCN", "HGT", "HeteroGraphSAGE",
           "TypedGNN",
           "MODELS", "MODEL_SPECS", "ModelSpec", "model_spec", "spec_of_class", "build_model", "register_model",
           "FullGraph",
           "PartLike",
           "LayerInput", "Activation"]
