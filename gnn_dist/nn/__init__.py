"""Layers that run on a rank's local bipartite block (no collectives in this package).

Each layer's ``forward(block, x_src)`` maps source rows ``[S, F_in]`` (inner rows, then halo rows)
to destination rows ``[D, F_out]`` and equals the PyG layer of the same name on the whole graph.
"""

from __future__ import annotations

from .activations import ACTIVATIONS, get_activation, register_activation
from .block import Block, BlockError
from .deep_gcn_layer import DeepGCNLayer
from .decomposable import DecomposableLayer, is_decomposable, propagate, propagate_groups
from .dropout import (INPUT_LAYER, INPUT_ROOT_LAYER, DropoutKey, RowDropout, hash_bits, hash_dropout,
                      hash_edge_dropout, relu_hash_dropout)
from .gat_conv import GATConv
from .gcn2_conv import GCN2Conv
from .gcn_conv import GCNConv, gcn_norm
from .gin_conv import GINConv
from .gine_conv import GINEConv
from .sage_conv import SAGEConv
from .sparse import edge_softmax, prepare, sddmm, spmm

__all__ = [
    "Block",
    "BlockError",
    "DecomposableLayer",
    "is_decomposable",
    "propagate",
    "propagate_groups",
    "spmm",
    "sddmm",
    "edge_softmax",
    "prepare",
    "GCNConv",
    "gcn_norm",
    "GCN2Conv",
    "SAGEConv",
    "GATConv",
    "GINConv",
    "GINEConv",
    "DeepGCNLayer",
    "DropoutKey",
    "RowDropout",
    "INPUT_LAYER",
    "INPUT_ROOT_LAYER",
    "hash_dropout",
    "relu_hash_dropout",
    "hash_edge_dropout",
    "hash_bits",
    "ACTIVATIONS",
    "get_activation",
    "register_activation",
]
