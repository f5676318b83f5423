"""Activation recomputation (``--recompute``): a training step's layers keep only their inputs for
backward and compute the rest again when backward reaches them.

A layer's forward leaves autograd more than its output: GCN keeps the aggregated rows for the
linear map's weight gradient and the layer's output for the ReLU, the dropout its factors, GAT
its scores and softmax per edge and head. Recomputation drops them in forward (a non-reentrant
:func:`torch.utils.checkpoint.checkpoint` region per layer) and runs the region again in
backward, on the same inputs: the same kernels on the same values, so the gradients, and every
loss after them, are bit-identical to the plain run's. Dropout is keyed by the model's step
*value* (the built-in models copy their ``dropout_step`` at the start of forward), so the
region draws the same masks in backward, after the model advanced its step.

Modes, per layer ``l`` with ``I`` inner rows, ``S = I + H`` source rows and width ``w``:

========== ===========================================================================================
``none``   what autograd saves: about ``(S + 3 I) w`` values for GCN (and ``3 E k`` for GAT's ``k``
           heads)
``layers`` the region is the conv and its activation (ReLU, dropout), from the layer's exchanged
           rows ``[S, w]``, which are kept: no extra communication. Schedules that exchange before
           the layer: ``sync``, ``stale`` (its halo rows are last epoch's). A layer that narrows
           its rows under ``sync`` exchanges its mapped rows from inside the layer
           (:func:`~gnn_dist.nn.part.exchange_then_run`): it runs as in the plain run (it keeps
           its ``[I, w]`` input and ``[S, w']`` mapped rows, ``w' < w``: no more than a region's input).
``all``    the region also holds the exchange, from the inner rows ``[I, w]`` alone: backward
           exchanges the halo rows once more (one more forward exchange per layer, counted in the
           step's bytes; keyed stochastic rounding sends the same rows again). ``sync`` only: a
           ``stale`` exchange hands out last epoch's rows and starts this epoch's, once.
========== ===========================================================================================

A first layer fed by the feature store (a :class:`~gnn_dist.nn.part.LayerInput`) is one region
with no tensor input: backward reads its rows from the store again (the cache counts those reads
too). Left as it is: an input that recomputes its own chunks already (``recomputed``), and, in
``layers`` mode or under ``stale``, one that exchanges its halo rows every step
(``needs_exchange``).

``overlap`` is refused: its layers start the next layer's exchange from inside the layer (the
boundary rows first), which a region run twice would start twice.
"""

from __future__ import annotations

from typing import Any

import torch
from torch import nn
from torch.utils.checkpoint import checkpoint

from ..config.registry import register_check, register_choices
from ..nn import Block, DropoutKey
from ..nn.dropout import call_conv
from ..nn.part import Activation, LayerInput, maps_before_exchange

__all__ = ["RECOMPUTE_MODES", "RecomputeView", "recompute_error", "with_recompute"]

RECOMPUTE_MODES = ("none", "layers", "all")
"""``recompute=``: nothing, each layer's conv and activation, or each layer with its exchange."""

def recompute_error(mode: str, pipeline: str) -> str | None:
    """Why ``recompute=mode`` cannot run under ``pipeline=pipeline`` (None: it can), from the
    schedules' own ``recompute_modes`` (a schedule without them runs ``none`` only)."""
    from .registry import SCHEDULES

    cls = SCHEDULES.get(pipeline)
    if mode == "none" or cls is None or mode in _modes(cls):
        return None
    allowed = [name for name, other in sorted(SCHEDULES.items()) if mode in _modes(other)]
    why = getattr(cls, "recompute_refusal", "it does not declare recompute_modes (its exchanges may not run "
                                            "before each layer)")
    others = [m for m in _modes(cls) if m != "none"]
    fix = f" or recompute={others[-1]!r}" if others else ""
    return (f"{mode!r} needs pipeline {' or '.join(map(repr, allowed))}, not {pipeline!r}: {why}; "
            f"use pipeline='sync'{fix}")


def _modes(schedule_cls: type) -> tuple[str, ...]:
    return tuple(getattr(schedule_cls, "recompute_modes", ("none",)))


def check_recompute(trainer: Any) -> tuple[str, str] | None:
    """``("recompute", why)`` when a :class:`~gnn_dist.config.TrainerConfig`'s ``recompute``
    cannot run under its ``pipeline`` (:func:`recompute_error`), else None."""
    why = recompute_error(trainer.memory.recompute, trainer.schedule.pipeline)
    return None if why is None else ("recompute", why)


register_choices("recompute", lambda: RECOMPUTE_MODES)   # --recompute (gnn_dist.config)
register_check("trainer", check_recompute)


class RecomputeView:
    """A schedule's view (a :class:`~gnn_dist.nn.part.PartLike`) whose layers recompute in
    backward (``mode`` ``"layers"`` or ``"all"``, see the module docstring); ``exchange`` is the
    view's own (custom models that exchange themselves are not recomputed)."""

    def __init__(self, view: Any, mode: str) -> None:
        if mode not in ("layers", "all"):
            raise ValueError(f"recompute={mode!r}: a RecomputeView recomputes 'layers' or 'all'")
        self.view = view
        self.mode = mode
        self.block: Block = view.block

    def exchange(self, h_inner: torch.Tensor) -> torch.Tensor:
        return self.view.exchange(h_inner)

    def run_layer(self, index: int, conv: nn.Module, h: torch.Tensor | LayerInput, *,
                  dropout_key: DropoutKey | None = None, activation: Activation | None = None) -> torch.Tensor:
        view = self.view
        if not torch.is_grad_enabled():
            return view.run_layer(index, conv, h, dropout_key=dropout_key, activation=activation)
        if not isinstance(h, torch.Tensor):
            if getattr(h, "recomputed", False) or (getattr(h, "needs_exchange", False) and self.mode == "layers"):
                return view.run_layer(index, conv, h, dropout_key=dropout_key, activation=activation)
            return _region(lambda: view.run_layer(index, conv, h, dropout_key=dropout_key, activation=activation))
        if self.mode == "all":
            return _region(lambda x: view.run_layer(index, conv, x, dropout_key=dropout_key, activation=activation),
                           h)
        if maps_before_exchange(view, conv, h):
            # its exchanged rows are the mapped ones, inside the layer: run as the plain run does
            return view.run_layer(index, conv, h, dropout_key=dropout_key, activation=activation)
        return view.run_layer(index, _Recomputed(conv, activation), h, dropout_key=dropout_key, activation=None)

    def __repr__(self) -> str:
        return f"RecomputeView({self.mode}, {self.view!r})"


def with_recompute(view: Any, mode: str) -> Any:
    """``view`` itself for ``mode="none"``, else its :class:`RecomputeView`."""
    return view if mode == "none" else RecomputeView(view, mode)


class _Recomputed:
    """``conv`` then ``activation`` as one region on the exchanged rows (what ``call_conv`` calls
    in place of the conv in ``layers`` mode)."""

    uses_dropout_key = True

    def __init__(self, conv: nn.Module, activation: Activation | None) -> None:
        self.conv, self.activation = conv, activation

    def __call__(self, block: Block, x_src: torch.Tensor, dropout_key: DropoutKey | None = None) -> torch.Tensor:
        conv, act = self.conv, self.activation

        def run(x: torch.Tensor) -> torch.Tensor:
            out = call_conv(conv, block, x, dropout_key)
            return out if act is None else act(out, None)
        return _region(run, x_src)

    def __repr__(self) -> str:
        return f"Recomputed({self.conv!r})"


def _region(fn: Any, *inputs: torch.Tensor) -> torch.Tensor:
    """``fn(*inputs)`` whose saved tensors are dropped and recomputed in backward. The RNG state
    is kept (a user's layer may draw from torch's generator; the built-in ones hash)."""
    return checkpoint(fn, *inputs, use_reentrant=False, preserve_rng_state=True)
