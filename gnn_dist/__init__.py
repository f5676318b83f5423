"""gnn-dist runtime: exact distributed full-graph GNN training, one rank per partition.

The public names are imported lazily (PEP 562), so ``import gnn_dist`` stays cheap and a
submodule's import error surfaces where that submodule is used.
"""

from __future__ import annotations

import importlib
from typing import Any

__version__ = "0.1.0"

_LAZY = {
    "init_distributed": "gnn_dist.distributed",
    "DistContext": "gnn_dist.distributed",
    "load_partition": "gnn_dist.partition",
    "LocalPartition": "gnn_dist.partition",
    "Trainer": "gnn_dist.trainer",
    "TrainerConfig": "gnn_dist.trainer",
}
_SUBMODULES = ("distributed", "nn", "models", "partition", "trainer", "checkpoints", "train", "cache", "model_file",
               "predict")

__all__ = [*_LAZY, *_SUBMODULES, "__version__"]


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        return getattr(importlib.import_module(_LAZY[name]), name)
    if name in _SUBMODULES:
        return importlib.import_module(f"gnn_dist.{name}")
    raise AttributeError(f"module 'gnn_dist' has no attribute {name!r}")
