"""Layer-level model parallelism (GNNPipe, Chen et al. 2023), alone and with graph parallelism.

``--parallel layer --stages S``: S ranks each hold a stage of consecutive layers over the whole
graph; node chunks (``--chunks K``) flow stage to stage, and rows of chunks not yet computed this
epoch are the previous epoch's (historical embeddings, optionally smoothed). ``--parallel hybrid``:
``P = S x G`` ranks, each stage graph-parallel over the G parts of the folder. See
``docs/layer_parallel.md``. Modules, one concept each: :mod:`.layout` (ranks and groups),
:mod:`.staged` (the stage protocol and the model adapters), :mod:`.chunks` (chunks and the rows a
layer reads), :mod:`.transport` (stage-to-stage transfers), :mod:`.engine` (a stage's step),
:mod:`.state` (history and checkpoints), :mod:`.reshard` (the history on another layout, by node id),
:mod:`.trainer`, :mod:`.build`, :mod:`.options`.

Reference: Chen et al., "GNNPipe: Scaling Deep GNN Training with Pipelined Model Parallelism"
(https://arxiv.org/abs/2308.10087).
"""

from __future__ import annotations

import importlib
from typing import Any

_EXPORTS = {"LayerParallelTrainer": "trainer", "StageLayout": "layout", "StageGroups": "layout",
            "stage_layout": "layout", "StagedModel": "staged", "StagedBasicGNN": "staged", "StagedGCNII": "staged",
            "StagedResidualGNN": "staged", "register_adapter": "staged",
            "staged_model": "staged", "build_trainer": "build", "load_stage": "build"}
"""Imported on first use: the config's checks import :mod:`.options` alone."""


def __getattr__(name: str) -> Any:
    if name in _EXPORTS:
        return getattr(importlib.import_module(f"{__name__}.{_EXPORTS[name]}"), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = ["LayerParallelTrainer", "StageLayout", "StageGroups", "StagedModel", "StagedBasicGNN", "StagedGCNII",
           "StagedResidualGNN", "build_trainer", "load_stage",
           "register_adapter", "stage_layout", "staged_model"]
