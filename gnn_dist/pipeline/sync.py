"""``sync``: exchange, then compute (the reference schedule), optionally boundary-sampled."""

from __future__ import annotations


import torch

from ..distributed.halo import HaloExchanger
from ..nn import Block
from .base import LayerSteps, LayerCounter, SubsetFn, SyncExchange

__all__ = ["SyncPipeline"]


class SyncPipeline(LayerSteps):
    """Each layer's exchange runs to completion before the layer computes.

    Without ``subset_fn`` this is exactly the part's own :meth:`~gnn_dist.distributed.HaloExchanger.exchange`
    (tagged with the layer index for the per-layer byte counts); with it (boundary sampling) the
    rows chosen for ``(epoch, layer)`` travel, forward and backward (:class:`~.base.SyncExchange`).

    Args:
        block: the part's block (the view's ``block``).
        exchanger: the part's halo exchanger.
        subset_fn: boundary sampling, or None.
    """

    name = "sync"

    def __init__(self, block: Block, exchanger: HaloExchanger, subset_fn: SubsetFn | None = None) -> None:
        self.block = block
        self.exchanger = exchanger
        self.subset_fn = subset_fn
        self._layers = LayerCounter()

    def begin_step(self, epoch: int) -> "SyncPipeline":
        self._layers.reset(epoch)
        return self

    def exchange(self, h_inner: torch.Tensor) -> torch.Tensor:
        """``[I, F] -> [I + H, F]`` for the next layer of this step (a collective)."""
        layer = self._layers.next()
        if self.subset_fn is None or self.exchanger.world_size == 1:
            return self.exchanger.exchange(h_inner, tag=layer)
        self.exchanger._check_rows(h_inner)
        subset = self.subset_fn(self._layers.epoch, layer)
        return SyncExchange.apply(h_inner, self.exchanger, layer, subset)

    def staleness(self) -> int:
        return 0

    def flush(self) -> None:
        pass

    def __repr__(self) -> str:
        return f"SyncPipeline(sampled={self.subset_fn is not None})"


