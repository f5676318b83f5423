"""The ``overlap`` mode's autograd glue: where a layer's rows leave (:class:`SendPiece`), where
the halo rows arrive (:class:`ArriveHalo`) and how a layer's row sets join (:class:`MergeRows`).

Legend: ``I`` inner rows, ``H`` halo rows, ``d`` rows of one piece, ``F`` width.

Each node holds its :class:`~.halo_flight.HaloFlight` (never the other way round, see there).
In backward :class:`ArriveHalo` starts the halo gradients on their way back and each
:class:`SendPiece` waits for its piece only when autograd reaches it, so the rows recorded after
it (the non-boundary rows) run their backward while the gradients travel.
"""

from __future__ import annotations

from typing import Any

import torch

from .halo_flight import HaloFlight

__all__ = ["SendPiece", "ArriveHalo", "MergeRows"]


class SendPiece(torch.autograd.Function):
    """Identity on rows ``[d, F]`` (``rows``; None: all ``I``) that piece ``k`` of ``flight``
    sends: stages them and starts the pieces they complete. Backward: waits for the pieces'
    gradients (:meth:`~.halo_flight.HaloFlight.grad_for`) and adds the peers' contributions to
    these rows."""

    @staticmethod
    def forward(ctx: Any, h: torch.Tensor, flight: HaloFlight, k: int,  # type: ignore[override]
                rows: torch.Tensor | None) -> torch.Tensor:
        ctx.flight, ctx.k, ctx.rows = flight, k, rows
        flight.stage(k, h.detach(), rows)
        flight.start_until(k)
        return h.view_as(h)

    @staticmethod
    @torch.autograd.function.once_differentiable
    def backward(ctx: Any, grad: torch.Tensor) -> tuple[Any, ...]:  # type: ignore[override]
        acc = ctx.flight.grad_for(ctx.k, grad)
        return grad + (acc if ctx.rows is None else acc.index_select(0, ctx.rows)), None, None, None


class ArriveHalo(torch.autograd.Function):
    """``h`` (a dependency only) -> the halo rows ``[H, F]`` of ``flight``; its backward starts
    sending the halo rows' gradient back (not waiting)."""

    @staticmethod
    def forward(ctx: Any, h: torch.Tensor, flight: HaloFlight) -> torch.Tensor:  # type: ignore[override]
        ctx.flight = flight
        return flight.halo()

    @staticmethod
    @torch.autograd.function.once_differentiable
    def backward(ctx: Any, grad_halo: torch.Tensor) -> tuple[Any, ...]:  # type: ignore[override]
        ctx.flight.send_back(grad_halo.contiguous())
        return None, None


class MergeRows(torch.autograd.Function):
    """Row sets ``parts[j] [d_j, F]`` at ids ``rows[j]`` (covering ``[0, num_rows)`` once) ->
    ``[num_rows, F]``; backward slices the gradient back."""

    @staticmethod
    def forward(ctx: Any, rows: list[torch.Tensor], num_rows: int,  # type: ignore[override]
                *parts: torch.Tensor) -> torch.Tensor:
        ctx.rows = rows
        out = parts[0].new_empty((num_rows, *parts[0].shape[1:]))
        for r, p in zip(rows, parts):
            out.index_copy_(0, r, p)
        return out

    @staticmethod
    @torch.autograd.function.once_differentiable
    def backward(ctx: Any, grad: torch.Tensor) -> tuple[Any, ...]:  # type: ignore[override]
        return (None, None, *(grad.index_select(0, r) for r in ctx.rows))

