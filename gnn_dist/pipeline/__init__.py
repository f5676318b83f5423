"""Halo-exchange schedules for training (``pipeline=``) and boundary sampling.

- :class:`SyncPipeline` (``sync``): exchange, then compute; the reference.
- :class:`StalePipeline` (``stale``, PipeGCN): previous-epoch halo features and gradients, this
  epoch's exchange in the background; optional moving-average smoothing.
- :class:`OverlapPipeline` (``overlap``): a hidden layer computes its boundary rows first, in
  chunks that each start their piece of the next layer's exchange, then its other rows while the
  pieces travel; within a layer the inner-source edges are aggregated while its input rows
  travel (the layer protocol, :mod:`gnn_dist.nn.decomposable`); exact.
- :class:`BoundarySampler` (BNS-GCN): a random fraction of the boundary rows per epoch,
  combinable with any mode.

The modes share the :class:`Pipeline` protocol and are found through the registry
(:mod:`.registry`): a new mode is one module with a ``@register_schedule("name")`` class, plus
its import below. :func:`build_schedule` makes one for a part. Imports ``gnn_dist.distributed``
and ``gnn_dist.nn`` (never the trainer).
"""

from __future__ import annotations

from .base import Pipeline, Stateless, SubsetFn
from .registry import SCHEDULES, build_schedule, register_schedule, schedule_names
from .sampling import BoundarySampler

# the built-in modes (each registers itself)
from .sync import SyncPipeline  # noqa: E402
from .stale import EMABuffer, StalePipeline  # noqa: E402
from .overlap import OverlapPipeline, SplitBlock, split_block  # noqa: E402

__all__ = ["Pipeline", "Stateless", "SubsetFn", "SyncPipeline", "StalePipeline", "OverlapPipeline", "SplitBlock",
           "split_block", "EMABuffer", "BoundarySampler", "SCHEDULES", "register_schedule", "build_schedule",
           "schedule_names"]
