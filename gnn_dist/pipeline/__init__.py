"""Halo-exchange schedules for training (``TrainerConfig.pipeline``) and boundary sampling.

- :class:`SyncPipeline` (``sync``): exchange, then compute; the reference.
- :class:`StalePipeline` (``stale``, PipeGCN): previous-epoch halo features and gradients, this
  epoch's exchange in the background; optional moving-average smoothing.
- :class:`OverlapPipeline` (``overlap``): a hidden layer computes its boundary rows first, in
  chunks that each start their piece of the next layer's exchange, then its other rows while the
  pieces travel; within a layer the inner-source edges are aggregated while its input rows
  travel; exact.
- :class:`BoundarySampler` (BNS-GCN): a random fraction of the boundary rows per epoch,
  combinable with either mode.

The modes share the :class:`Pipeline` protocol; :func:`build_pipeline` makes one for a part.
Imports ``gnn_dist.distributed`` and ``gnn_dist.nn`` (never the trainer).
"""

from __future__ import annotations

from typing import Any

from .base import Pipeline, SubsetFn, SyncExchange
from .overlap import OverlapPipeline, SplitBlock, split_block
from .sampling import BoundarySampler
from .stale import EMABuffer, StalePipeline
from .sync import SyncPipeline

__all__ = ["Pipeline", "SubsetFn", "SyncExchange", "SyncPipeline", "StalePipeline", "OverlapPipeline",
           "SplitBlock", "split_block", "EMABuffer", "BoundarySampler", "PIPELINES", "build_pipeline"]

PIPELINES = ("sync", "stale", "overlap")
"""The accepted ``pipeline`` names."""


def build_pipeline(name: str, part: Any, *, stale_smoothing: float | None = None,
                   boundary_sample_rate: float = 1.0, seed: int = 0) -> Pipeline:
    """The mode ``name`` for ``part`` (anything with ``block`` and ``exchanger``).

    ``boundary_sample_rate < 1`` adds a :class:`BoundarySampler` seeded with ``seed``.
    """
    if name not in PIPELINES:
        raise ValueError(f"pipeline={name!r} is not supported; choose from {', '.join(PIPELINES)}")
    sampler = None
    if boundary_sample_rate != 1.0:
        sampler = BoundarySampler(part.exchanger, boundary_sample_rate, seed)
    if name == "overlap":
        return OverlapPipeline(part.block, part.exchanger, subset_fn=sampler)
    if name == "stale":
        return StalePipeline(part.block, part.exchanger, smoothing=stale_smoothing, subset_fn=sampler)
    return SyncPipeline(part.block, part.exchanger, subset_fn=sampler)
