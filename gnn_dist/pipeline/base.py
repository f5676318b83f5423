"""What every pipeline mode provides (a Protocol, not a base class) and what the modes share.

A mode stands between a model and the part's halo exchanger during a training step: the model
calls ``view.run_layer(i, conv, h, ...)`` (or ``view.exchange(h)``, once per layer, in layer
order) and the mode decides when rows travel and which ones the layer sees, in its
:class:`~gnn_dist.distributed.Transport` (the wire dtype and simulated link of training).
Evaluation never goes through a mode: it uses the part's exact, synchronous exchange.

Checkpoints: a mode declares ``stateful``. A stateful mode's ``state_dict()`` is what its next
step needs besides the weights (this rank's only: the halo rows differ per rank), and
``load_state_dict(state)`` restores it into a fresh mode of the same kind; the checkpoint
manager writes it to one file per rank. A stateless mode keeps nothing between steps
(:class:`Stateless`: an empty dict).

Legend: ``I`` inner rows, ``H`` halo rows, ``F`` feature width.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Protocol

import torch
from torch import nn

from ..distributed import HaloSubset
from ..nn import DropoutKey
from ..nn.part import Activation, LayerInput, exchange_then_run

__all__ = ["Pipeline", "SubsetFn", "LayerCounter", "Stateless", "ExchangeBeforeLayer", "Activation"]


class SubsetFn(Protocol):
    """Chooses the rows an exchange sends (boundary sampling); None: all of them."""

    def __call__(self, epoch: int, layer: int) -> HaloSubset | None:
        ...


class Pipeline(Protocol):
    """The interface of the halo-exchange schedules (``sync``, ``stale``, ``overlap`` ...).

    Per training step the trainer calls :meth:`begin_step` and runs the model on what it returns
    (a :class:`~gnn_dist.nn.part.PartLike`: ``block``, ``exchange`` and ``run_layer``); before
    evaluating, checkpointing or ending it calls :meth:`flush`, after which no exchange of the
    mode is in flight.
    """

    name: str
    """The mode's registered name (``pipeline=``)."""
    stateful: bool
    """Whether the next step reads state besides the weights (checkpoints then keep it per rank)."""
    recompute_modes: tuple[str, ...]
    """The ``recompute`` modes it runs under (:mod:`.recompute`; optional, default ``("none",)``):
    ``layers`` needs each layer's exchange to run before the layer, ``all`` also an exchange that
    may run again in backward."""
    recompute_refusal: str
    """Optional: why the modes it leaves out cannot run (the config's refusal says it)."""
    held_rows: Callable[..., tuple[int, int]]
    """Optional, for the memory planner: ``held_rows(inner=I, halo=H, send=R, smoothing=g) ->
    (kept, wire)``, the rows of each exchanged layer's width the schedule holds at its peak, in
    the activation dtype (buffers kept between steps) and in the wire dtype (exchanges in flight).
    Without it the planner counts one exchange in flight, ``R + H`` rows of the widest layer."""

    def begin_step(self, epoch: int) -> Any:
        """Start training step ``epoch``; returns the part-like view the model runs on."""
        ...

    def staleness(self) -> int:
        """How many epochs old the halo rows (and halo gradients) of the last step were."""
        ...

    def flush(self) -> None:
        """Wait for every exchange in flight (their results are kept for the next step)."""
        ...

    def state_dict(self) -> dict[str, Any]:
        """This rank's state that the next step reads (empty: none); waits for the exchanges
        in flight first, so a collective when there are any."""
        ...

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Restore :meth:`state_dict`'s output (of this rank, same mode and partition)."""
        ...


class LayerCounter:
    """Which layer an exchange belongs to: :meth:`at` when the model names the layer
    (``run_layer``), else the exchange calls of a step in order (custom models)."""

    def __init__(self) -> None:
        self.epoch = 0
        self.layer = 0

    def reset(self, epoch: int) -> None:
        self.epoch, self.layer = epoch, 0

    def at(self, layer: int) -> None:
        """The next exchange is layer ``layer`` (a layer that makes none, such as a first layer
        with static halo rows, does not shift the others)."""
        self.layer = layer

    def next(self) -> int:
        layer = self.layer
        self.layer += 1
        return layer


class Stateless:
    """The checkpoint state of a mode that keeps nothing between steps: an empty dict."""

    name: str
    stateful = False

    def state_dict(self) -> dict[str, Any]:
        return {}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Accepts only the empty state.

        Raises:
            ValueError: ``state`` is not empty (it belongs to another mode).
        """
        if state:
            raise ValueError(f"pipeline={self.name!r} keeps no state between steps, got one with keys "
                             f"{sorted(state)}")



class ExchangeBeforeLayer:
    """``run_layer`` of a mode whose ``exchange`` hands each layer its input rows before the layer
    runs (``sync``, ``stale``): the layer's index numbers its exchange, then
    :func:`~gnn_dist.nn.part.exchange_then_run`."""

    _layers: LayerCounter
    recompute_modes: tuple[str, ...] = ("none", "layers")
    recompute_refusal = "its exchange hands out last epoch's halo rows and starts this epoch's, once per step"

    def run_layer(self, index: int, conv: nn.Module, h: torch.Tensor | LayerInput, *,
                  dropout_key: DropoutKey | None = None, activation: Activation | None = None) -> torch.Tensor:
        self._layers.at(index)
        return exchange_then_run(self, conv, h, dropout_key=dropout_key, activation=activation)  # type: ignore[arg-type]
