"""What every pipeline mode provides (a Protocol, not a base class) and the shared autograd glue.

A mode stands between a model and the part's halo exchanger during a training step: the model
calls ``view.exchange(h)`` once per layer, in layer order, and the mode decides when rows travel
and which ones the layer sees. Evaluation never goes through a mode: it uses the part's exact,
synchronous exchange.

Checkpoints: a mode's ``state_dict()`` is what its next step needs besides the weights (this
rank's only: the halo rows differ per rank), and ``load_state_dict(state)`` restores it into a
fresh mode of the same kind. ``sync`` and ``overlap`` keep nothing between steps (an empty dict,
the :class:`LayerSteps` default); ``stale`` keeps its step count and stale buffers (see
:mod:`.stale`). The trainer writes a non-empty state to one file per rank.

Legend: ``I`` inner rows, ``H`` halo rows, ``F`` feature width.
"""

from __future__ import annotations

from typing import Any, Protocol

import torch

from ..distributed.halo import HaloExchanger, HaloSubset
from ..models.basic_gnn import Activation
from ..nn import Block

__all__ = ["Pipeline", "SubsetFn", "SyncExchange", "LayerSteps", "Activation"]


class SubsetFn(Protocol):
    """Chooses the rows an exchange sends (boundary sampling); None: all of them."""

    def __call__(self, epoch: int, layer: int) -> HaloSubset | None:
        ...


class Pipeline(Protocol):
    """The interface of the halo-exchange schedules (``sync``, ``stale``, ``overlap``).

    Per training step the trainer calls :meth:`begin_step` and runs the model on what it returns
    (a :class:`~gnn_dist.models.PartLike`); before evaluating, checkpointing or ending it calls
    :meth:`flush`, after which no exchange of the mode is in flight.
    """

    name: str
    """The mode's name (``TrainerConfig.pipeline``)."""

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


class SyncExchange(torch.autograd.Function):
    """Blocking exchange of a subset of rows: ``h [I, F] -> [I + H, F]``.

    Forward: ``halo = start(h, subset).wait()`` (rows outside the subset are 0, the others
    rescaled by the subset's ``recv_scale``), output ``cat(h, halo)``. Backward (the transpose):
    ``grad_h = grad[:I] + start_backward(grad[I:], subset).wait()``. With ``subset=None`` this
    equals :class:`~gnn_dist.distributed.HaloExchange`.
    """

    @staticmethod
    def forward(ctx: Any, h: torch.Tensor, ex: HaloExchanger, tag: Any,  # type: ignore[override]
                subset: HaloSubset | None) -> torch.Tensor:
        ctx.ex, ctx.tag, ctx.subset = ex, tag, subset
        halo = ex.start(h, tag=tag, subset=subset).wait()
        return torch.cat([h.detach(), halo], dim=0)

    @staticmethod
    @torch.autograd.function.once_differentiable
    def backward(ctx: Any, grad: torch.Tensor) -> tuple[torch.Tensor, None, None, None]:  # type: ignore[override]
        n = ctx.ex.num_inner
        grad = grad.contiguous()
        contrib = ctx.ex.start_backward(grad[n:], tag=ctx.tag, subset=ctx.subset).wait()
        return grad[:n] + contrib, None, None, None


class LayerCounter:
    """Numbers the ``exchange`` calls of one step: the i-th call is layer i."""

    def __init__(self) -> None:
        self.epoch = 0
        self.layer = 0

    def reset(self, epoch: int) -> None:
        self.epoch, self.layer = epoch, 0

    def next(self) -> int:
        layer = self.layer
        self.layer += 1
        return layer

    def seek(self, layer: int) -> None:
        """The next call is layer ``layer`` (the model announces each layer: one that makes no
        exchange, such as a first layer with static halo rows, does not shift the others)."""
        self.layer = layer


class LayerSteps:
    """What the pipeline modes share: the ``begin_layer`` hook of their views (see
    :class:`~gnn_dist.models.PartLike`), and the checkpoint state of a mode that keeps nothing
    between steps (an empty dict)."""

    _layers: LayerCounter
    name: str

    def begin_layer(self, layer: int) -> None:
        self._layers.seek(layer)

    def state_dict(self) -> dict[str, Any]:
        """Empty: nothing of this mode outlives a step."""
        return {}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Accepts only the empty state.

        Raises:
            ValueError: ``state`` is not empty (it belongs to another mode).
        """
        if state:
            raise ValueError(f"pipeline={self.name!r} keeps no state between steps, got one with keys "
                             f"{sorted(state)}")


def check_block(block: Block, ex: HaloExchanger) -> None:
    """The block's rows against the exchanger's (an internal invariant of a loaded part)."""
    assert block.num_dst == ex.num_inner and block.num_src == ex.num_rows, (block, ex)
