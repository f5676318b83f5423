"""Which rank holds which stage and which part, and the process groups between them.

With ``S`` stages and ``G`` graph parts, ``P = S * G`` ranks; world rank ``r = s * G + g`` holds
stage ``s`` (layers ``[s * L / S, (s + 1) * L / S)``) over part ``g``:

.. code-block:: text

              part 0   part 1  ...  part G-1
    stage 0   rank 0   rank 1       rank G-1        <- a graph group (halo exchange, the stage's
    stage 1   rank G   rank G+1     rank 2G-1          gradient all-reduce)
    ...
                 ^ a pipeline group (the S stages of part g: chunks flow down, gradients up)

``layer`` is ``G = 1`` (a 1-part folder, every stage holds the whole graph); ``hybrid`` is
``G`` = the folder's parts. The checks here depend only on the config, the world size and the
folder's metadata (the same on every rank), so every rank raises them by itself, before any
collective.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch.distributed as dist

from ..config import ConfigError
from ..distributed import new_group

__all__ = ["StageLayout", "StageGroups", "stage_layout", "build_groups"]


@dataclass(frozen=True, slots=True)
class StageLayout:
    """Stages ``S``, graph parts ``G``, this rank's world rank; the layers ``L``."""

    stages: int
    graph_parts: int
    rank: int
    num_layers: int

    @property
    def stage(self) -> int:
        return self.rank // self.graph_parts

    @property
    def graph_rank(self) -> int:
        return self.rank % self.graph_parts

    @property
    def world_size(self) -> int:
        return self.stages * self.graph_parts

    @property
    def first(self) -> bool:
        return self.stage == 0

    @property
    def last(self) -> bool:
        return self.stage == self.stages - 1

    def rank_of(self, stage: int, graph_rank: int | None = None) -> int:
        """The world rank of ``stage`` over part ``graph_rank`` (default: this rank's part)."""
        return stage * self.graph_parts + (self.graph_rank if graph_rank is None else graph_rank)

    def layers_of(self, stage: int) -> range:
        per = self.num_layers // self.stages
        return range(stage * per, (stage + 1) * per)

    @property
    def layers(self) -> range:
        """This stage's layers."""
        return self.layers_of(self.stage)


def stage_layout(mode: str, stages: int, world_size: int, rank: int, num_parts: int, num_layers: int,
                 path: str = "") -> StageLayout:
    """The layout of ``mode`` (``layer``/``hybrid``) with ``stages`` stages on ``world_size`` ranks
    over a folder of ``num_parts`` parts; a :class:`ConfigError` naming the fix when they do not fit."""
    if world_size % stages:
        raise ConfigError("stages", f"{stages} stages do not divide the {world_size} ranks: launch S x G ranks "
                                    f"(G: the folder's parts)")
    graph_parts = world_size // stages
    where = f"{path}: " if path else ""
    if mode == "layer" and num_parts != 1:
        raise ConfigError("parallel", f"{where}layer runs every stage over the whole graph, a 1-part folder, but it has "
                                      f"{num_parts} parts: partition with --parts 1, or train with --parallel hybrid "
                                      f"on {stages * num_parts} ranks")
    if graph_parts != num_parts:
        raise ConfigError("stages", f"{where}{stages} stages on {world_size} ranks make {graph_parts} rank(s) per "
                                    f"stage, but the folder has {num_parts} parts: launch {stages * num_parts} ranks "
                                    f"(stages x parts)")
    if num_layers % stages:
        raise ConfigError("stages", f"{stages} stages do not divide the model's {num_layers} layers (choose a divisor "
                                    f"of {num_layers})")
    return StageLayout(stages, graph_parts, rank, num_layers)


@dataclass(frozen=True, slots=True)
class StageGroups:
    """This rank's graph group (its stage's ``G`` ranks) and pipeline group (the ``S`` ranks of
    its part); None where there is no process group."""

    graph: dist.ProcessGroup | None
    pipeline: dist.ProcessGroup | None


def build_groups(layout: StageLayout) -> StageGroups:
    """Every stage's graph group and every part's pipeline group (a collective: every rank creates
    every group, in the same order); this rank's two."""
    if not (dist.is_available() and dist.is_initialized()):
        return StageGroups(None, None)
    S, G = layout.stages, layout.graph_parts
    graph = pipeline = None
    for s in range(S):
        group = new_group([s * G + g for g in range(G)])
        if s == layout.stage:
            graph = group
    for g in range(G):
        group = new_group([s * G + g for s in range(S)])
        if g == layout.graph_rank:
            pipeline = group
    return StageGroups(graph, pipeline)
