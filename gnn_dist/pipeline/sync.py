"""``sync``: exchange, then compute (the reference schedule), optionally boundary-sampled."""

from __future__ import annotations

from typing import Any

import torch
from ..distributed import EXACT, HaloExchanger, Transport
from ..nn import Block
from .base import ExchangeBeforeLayer, LayerCounter, Stateless, SubsetFn
from .registry import register_schedule

__all__ = ["SyncPipeline"]


@register_schedule("sync")
class SyncPipeline(ExchangeBeforeLayer, Stateless):
    """Each layer's exchange runs to completion before the layer computes.

    Each exchange is the part's :meth:`~gnn_dist.distributed.HaloExchanger.exchange`, tagged with
    the layer index (the per-layer byte counts), in the schedule's transport; with ``subset_fn``
    (boundary sampling) only the rows chosen for ``(epoch, layer)`` travel, forward and backward.

    Every recompute mode runs under it: its exchange is a plain function of the layer's input,
    run again in backward by ``recompute="all"``.

    Args:
        block: the part's block (the view's ``block``).
        exchanger: the part's halo exchanger.
        options: the schedule's configuration (unused: ``sync`` has no options of its own).
        subset_fn: boundary sampling, or None.
        transport: the wire dtype and simulated link of the exchanges.
        maps_before_exchange: a layer that narrows its rows (``F_out < F_in``) maps its inner
            rows first and the mapped rows travel (:func:`~gnn_dist.nn.part.exchange_then_run`);
            False: every layer's input rows travel, as under ``overlap`` and ``stale`` (the same
            rows a peer system sends; the same rows rounded under a lossy wire format).
    """

    recompute_modes = ("none", "layers", "all")

    name = "sync"

    def __init__(self, block: Block, exchanger: HaloExchanger, options: Any = None, *,
                 subset_fn: SubsetFn | None = None, transport: Transport = EXACT,
                 maps_before_exchange: bool = True) -> None:
        self.block = block
        self.maps_before_exchange = maps_before_exchange
        self.exchanger = exchanger
        self.subset_fn = subset_fn
        self.transport = transport
        self._layers = LayerCounter()

    def begin_step(self, epoch: int) -> "SyncPipeline":
        self._layers.reset(epoch)
        self.transport.begin_step(epoch)
        return self

    def exchange(self, h_inner: torch.Tensor) -> torch.Tensor:
        """``[I, F] -> [I + H, F]`` for the next layer of this step (a collective)."""
        layer = self._layers.next()
        subset = None if self.subset_fn is None else self.subset_fn(self._layers.epoch, layer)
        return self.exchanger.exchange(h_inner, tag=layer, subset=subset, transport=self.transport)

    def staleness(self) -> int:
        return 0

    def flush(self) -> None:
        pass

    def __repr__(self) -> str:
        return f"SyncPipeline(sampled={self.subset_fn is not None}, {self.transport})"
