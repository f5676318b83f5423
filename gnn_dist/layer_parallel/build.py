"""A layer-parallel run's layout, groups, part, model and trainer (what ``gnn_dist.train``
builds when ``parallel`` is ``layer`` or ``hybrid``)."""

from __future__ import annotations

from typing import Any

import torch

from ..config import RunConfig
from ..distributed import all_gather_json, get_rank, get_world_size
from .layout import StageGroups, StageLayout, build_groups, stage_layout

__all__ = ["load_stage", "build_trainer"]


def load_stage(path: str, mode: str, stages: int, num_layers: int, *, device: Any = None, verify: bool = True,
               kernels: Any = None) -> tuple[Any, StageLayout, StageGroups]:
    """This rank's stage layout, its groups and its part of ``path`` (a collective: every rank
    creates every group; the stage's graph group loads the folder's parts, and all ranks check
    that they read the same folder). The layout errors are raised on every rank before any
    collective."""
    from partitioners.format import load_partition_meta

    from ..partition import load_partition, partition_fingerprint

    meta = load_partition_meta(path)
    layout = stage_layout(mode, stages, get_world_size(), get_rank(), int(meta.num_parts), num_layers, str(path))
    groups = build_groups(layout)
    part = load_partition(path, device=device, verify=verify, group=groups.graph, kernels=kernels)
    prints = all_gather_json(partition_fingerprint(part.meta), what="gather of the stages' partition fingerprints")
    if len(set(prints)) > 1:
        raise ValueError(f"{path}: the stages loaded different partitions; every rank must read the same folder")
    return part, layout, groups


def build_trainer(config: RunConfig, device: Any = None, kernels: Any = None) -> Any:
    """The layer-parallel trainer of ``config`` (a collective)."""
    from ..models import build_model
    from .trainer import LayerParallelTrainer

    p = config.trainer.parallel
    part, layout, groups = load_stage(config.data.data, p.parallel, p.stages, config.model.layers, device=device,
                                      verify=config.data.verify, kernels=kernels)
    torch.manual_seed(config.model.seed)
    model = build_model(config.model, in_dim=part.feature_dim, out_dim=part.num_classes)
    return LayerParallelTrainer(model, part, config.trainer, layout=layout, groups=groups,
                                timeout=config.distributed.timeout, run_config=config.to_dict())
