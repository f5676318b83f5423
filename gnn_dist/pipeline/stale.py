"""``stale`` (PipeGCN): every layer uses the halo features and halo gradients of the previous
epoch while this epoch's exchange runs in the background.

Reference: Wan et al., "PipeGCN: Efficient Full-Graph Training of Graph Convolutional Networks
with Pipelined Feature Communication", ICLR 2022 (https://arxiv.org/abs/2203.10428).

Schedule for layer ``l`` at epoch ``t`` (``t`` counts the steps of this pipeline object):

- ``t = 0``: synchronous (exchange, then compute; no zero-filled buffers). The received halo
  rows and halo-gradient contributions fill the buffers.
- ``t >= 1``, forward: wait for the exchange started at ``t - 1`` (if still in flight: its rows
  are the features of epoch ``t - 1``) and fold it into the feature buffer; the layer sees
  ``cat(h, buffer)``; start sending this epoch's ``h`` (waited for at ``t + 1``).
- ``t >= 1``, backward: likewise for gradients: the inner rows get ``grad[:I]`` plus the buffer
  of halo-gradient contributions of epoch ``t - 1``; this epoch's halo gradients start their way
  back to the owners. The buffer holds only the ``B`` rows this rank sends (the others' are 0),
  added into a copy of ``grad[:I]`` at those rows: the same sums as a zero-filled ``[I, F]``
  buffer, without filling, adding and (with smoothing) averaging ``I`` rows.

Smoothing (``gamma``, PipeGCN's "-GF" variant with Adam-style bias correction): the buffer holds
``m_n = gamma * m_{n-1} + (1 - gamma) * x_n`` (``m_0 = 0``) divided by ``1 - gamma ** n``, for
features and gradients alike; ``gamma = 0`` (or None) is plain staleness.

All ranks run the same schedule (it depends only on the step count), so the collectives match.

Checkpoints (:meth:`StalePipeline.state_dict` / :meth:`StalePipeline.load_state_dict`): the
step count and, per layer, both moving averages (``count`` and ``m``; ``value`` is recomputed by
the same expression, so it is bit-identical). ``state_dict`` first waits for the exchanges in
flight and folds them in, exactly as the next step would before reading the buffers (folding
earlier does not change a value: the same updates run in the same order), so a pipeline loaded
from it takes the next step exactly as this one would. The state is per rank (its halo rows).
Size per rank: ``sum over exchanging layers l of (H + B) * F_l * itemsize`` bytes, ``H`` halo
rows, ``B <= min(I, S)`` the distinct rows this rank sends (``S`` = ``len(send_index)``): the
gradient buffer is ``[B, F]``, the rows of ``HaloExchanger.sent_rows_on``. Over all
ranks ``sum B <= sum S = sum H``: at most ``2 * (total halo rows) * F * layers * itemsize``,
and the halo rows' original ids (``halo_ids``, int64 ``[H]``).

On another cut of the same graph (:meth:`StalePipeline.load_other_cut`) the halo rows' averages
are placed by those ids, each row carrying the value its owner last sent; the halo gradients,
which belong to the cut, restart (:mod:`.stale_reshard`).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import torch
from ..distributed import EXACT, HaloExchanger, HaloHandle, HaloSubset, Transport
from ..nn import Block
from .base import ExchangeBeforeLayer, LayerCounter, SubsetFn
from .registry import register_schedule
from .stale_reshard import NoRowIds, collect

__all__ = ["StalePipeline", "EMABuffer"]


class EMABuffer:
    """An exponential moving average with bias correction (``gamma`` None or 0: the last value).

    ``update(x)`` folds ``x`` in; ``value`` is ``m_n / (1 - gamma ** n)``. ``state_dict()`` /
    ``load_state_dict(state)``: ``gamma``, ``count`` and ``m`` (``value`` is recomputed).
    """

    def __init__(self, gamma: float | None = None) -> None:
        if gamma is not None and not 0.0 <= gamma < 1.0:
            raise ValueError(f"stale_smoothing={gamma} must be in [0, 1)")
        self.gamma = gamma or 0.0
        self.count = 0
        self._m: torch.Tensor | None = None
        self.value: torch.Tensor | None = None

    def update(self, x: torch.Tensor) -> torch.Tensor:
        self.count += 1
        if self.gamma == 0.0 or self._m is None:
            self._m = (1.0 - self.gamma) * x if self.gamma else x
        else:
            self._m = self.gamma * self._m + (1.0 - self.gamma) * x
        return self._refresh()

    def _refresh(self) -> torch.Tensor | None:
        """``value`` from ``m`` and ``count`` (one expression for update and load: bit-identical)."""
        if self._m is None:
            self.value = None
        else:
            self.value = self._m / (1.0 - self.gamma ** self.count) if self.gamma else self._m
        return self.value

    def state_dict(self) -> dict[str, Any]:
        """``{"gamma", "count", "m"}`` (``m`` None before the first update)."""
        return {"gamma": self.gamma, "count": self.count, "m": self._m}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Restore :meth:`state_dict`'s output (``m`` as given: move it to the device first).

        Raises:
            ValueError: ``state`` was saved with another ``gamma``, or is malformed.
        """
        gamma, count, m = state.get("gamma"), state.get("count"), state.get("m")
        if gamma != self.gamma:
            raise ValueError(f"the saved moving average has gamma={gamma}, this one gamma={self.gamma} "
                             f"(stale_smoothing must match to restore it)")
        if not isinstance(count, int) or count < 0 or (m is None) != (count == 0) or not (
                m is None or isinstance(m, torch.Tensor)):
            raise ValueError(f"malformed moving-average state (count={count!r}, m of type {type(m).__name__})")
        self.count, self._m = count, m
        self._refresh()

    def set_rows(self, rows: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
        """Start the rows ``rows`` of the average at ``x[rows]`` (as if they had read ``x`` at
        every update so far): ``value`` holds ``x``'s rows exactly; returns ``value``."""
        assert self._m is not None and self.value is not None
        scale = 1.0 - self.gamma ** self.count if self.gamma else 1.0
        self._m[rows] = x[rows].to(self._m.dtype) * scale if self.gamma else x[rows].to(self._m.dtype)
        self.value = self.value.clone()
        self.value[rows] = x[rows].to(self.value.dtype)
        return self.value


class _LayerState:
    """Per layer: the feature and gradient buffers and the exchanges in flight."""

    def __init__(self, gamma: float | None) -> None:
        self.features = EMABuffer(gamma)
        self.grads = EMABuffer(gamma)
        self.pending_features: HaloHandle | None = None
        self.pending_grads: HaloHandle | None = None
        self.missing: torch.Tensor | None = None
        """After a load from another cut: the halo rows without a saved value (the next forward
        waits for its exchange and reads them from it, :mod:`.stale_reshard`)."""

    def settle_features(self) -> None:
        if self.pending_features is not None:
            self.features.update(self.pending_features.wait())
            self.pending_features = None

    def settle_grads(self) -> None:
        if self.pending_grads is not None:
            self.grads.update(self.pending_grads.wait())
            self.pending_grads = None


class _StaleExchange(torch.autograd.Function):
    """``h [I, F] -> cat(h, halo) [I + H, F]`` with the halo rows of the previous epoch.

    Forward: ``halo`` = the layer's feature buffer (after folding in the exchange started last
    epoch); then start sending ``h``. First step: a blocking exchange fills the buffer.
    Backward: ``grad_h = grad[:I]`` plus the grad buffer (the previous epoch's contributions to
    the ``B`` sent rows, folded in after waiting) at those rows; then start sending
    ``grad[I:]``. First step: blocking. The halo rows are data,
    not a function of ``h``: their gradients only travel to the owners.
    """

    @staticmethod
    def forward(ctx: Any, h: torch.Tensor, ex: HaloExchanger, state: _LayerState,  # type: ignore[override]
                tag: int, subset: HaloSubset | None, first: bool, transport: Transport) -> torch.Tensor:
        ctx.ex, ctx.state, ctx.tag, ctx.subset, ctx.first, ctx.transport = ex, state, tag, subset, first, transport
        if first:
            halo = state.features.update(ex.start(h, tag=tag, subset=subset, transport=transport).wait())
        else:
            state.settle_features()
            halo = state.features.value
            state.pending_features = ex.start(h, tag=tag, subset=subset, transport=transport)
            if state.missing is not None:   # rows the old cut never sent: this epoch's, waited for
                halo = state.features.set_rows(state.missing.to(h.device), state.pending_features.wait())
                state.missing = None
        assert halo is not None
        return torch.cat([h.detach(), halo.to(h.dtype)], dim=0)

    @staticmethod
    @torch.autograd.function.once_differentiable
    def backward(ctx: Any, grad: torch.Tensor) -> tuple[Any, ...]:  # type: ignore[override]
        ex: HaloExchanger = ctx.ex
        state: _LayerState = ctx.state
        n = ex.num_inner
        grad = grad.contiguous()
        send = ex.start_backward(grad[n:], tag=ctx.tag, subset=ctx.subset, transport=ctx.transport,
                                 sent_rows_only=True)
        if ctx.first or (state.grads.value is None and state.pending_grads is None):
            contrib = state.grads.update(send.wait())
        else:
            state.settle_grads()
            contrib = state.grads.value
            state.pending_grads = send
        assert contrib is not None
        # one addition per element at the sent rows, as grad[:n] + a zero-filled [I, F] buffer
        grad_h = grad[:n].clone().index_add_(0, ex.sent_rows_on(grad.device), contrib.to(grad.dtype))
        return grad_h, None, None, None, None, None, None


@register_schedule("stale")
class StalePipeline(ExchangeBeforeLayer):
    """PipeGCN's schedule (see the module docstring) as a :class:`~.base.Pipeline`.

    Args:
        block: the part's block.
        exchanger: the part's halo exchanger.
        options: the schedule's configuration; its ``stale_smoothing`` is ``gamma`` of the moving
            average of stale features and gradients, in ``[0, 1)``; None or 0: none.
        subset_fn: boundary sampling, or None.
        transport: the wire dtype and simulated link of the exchanges.
    """

    name = "stale"
    stateful = True
    """The previous epoch's halo rows and halo gradients are read by the next step."""

    def __init__(self, block: Block, exchanger: HaloExchanger, options: Any = None, *,
                 subset_fn: SubsetFn | None = None, transport: Transport = EXACT) -> None:
        smoothing = None if options is None else options.stale_smoothing
        self.block = block
        self.exchanger = exchanger
        self.smoothing = smoothing
        EMABuffer(smoothing)  # checks the value
        self.subset_fn = subset_fn
        self.transport = transport
        self._layers = LayerCounter()
        self._states: dict[int, _LayerState] = {}
        self._steps = 0
        self._first = True

    @staticmethod
    def held_rows(*, inner: int, halo: int, send: int, smoothing: float | None) -> tuple[int, int]:
        """The planner's rows per exchanged layer (:class:`~.base.Pipeline`): kept, the feature
        buffer's ``H`` halo rows and the gradient buffer's ``B <= min(I, R)`` sent rows (``R``:
        ``send``, a row once per reader; twice with a moving average: its sum and its value), and
        the received gradients summed into ``B`` rows before they replace the buffer; on the wire
        at the backward's peak, this step's feature exchange and its gradients' both in flight,
        ``2 (R + H)``."""
        sent = min(inner, send)
        return (halo + sent) * (2 if smoothing else 1) + sent, 2 * (send + halo)

    def begin_step(self, epoch: int) -> "StalePipeline":
        self._layers.reset(epoch)
        self.transport.begin_step(epoch)
        self._first = self._steps == 0
        self._steps += 1
        return self

    def exchange(self, h_inner: torch.Tensor) -> torch.Tensor:
        """``[I, F] -> [I + H, F]`` for the next layer: this epoch's inner rows, the previous
        epoch's halo rows (a collective: it starts this epoch's exchange)."""
        layer = self._layers.next()
        ex = self.exchanger
        ex._check_rows(h_inner)
        if ex.world_size == 1:
            return h_inner
        state = self._states.setdefault(layer, _LayerState(self.smoothing))
        first = self._first or state.features.value is None
        subset = self.subset_fn(self._layers.epoch, layer) if self.subset_fn is not None else None
        return _StaleExchange.apply(h_inner, ex, state, layer, subset, first, self.transport)

    def staleness(self) -> int:
        return 0 if self._first else 1

    def flush(self) -> None:
        for state in self._states.values():
            state.settle_features()
            state.settle_grads()

    def state_dict(self) -> dict[str, Any]:
        """This rank's state: ``{"steps": int, "layers": {layer: {"features": ..., "grads": ...}}}``.

        A collective when exchanges are in flight: it waits for them first (:meth:`flush`), so
        the buffers hold exactly what the next step would read. ``features`` is the layer's
        :class:`EMABuffer` state (``m`` ``[H, F]``); ``grads`` likewise (``m`` ``[B, F]``, the sent
        rows; see the module docstring). Tensors stay on their device.
        """
        self.flush()
        layers = {layer: {"features": state.features.state_dict(), "grads": state.grads.state_dict()}
                  for layer, state in sorted(self._states.items())}
        halo_ids = self.exchanger.row_ids
        return {"steps": self._steps, "layers": layers,
                "halo_ids": None if halo_ids is None else halo_ids[self.exchanger.num_inner:].cpu()}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Continue from :meth:`state_dict`'s output (saved on this rank of the same partition,
        with the same ``smoothing``); tensors move to the block's device.

        Raises:
            ValueError: the state is malformed, or its shapes do not fit this rank's halo rows.
        """
        steps, saved = state.get("steps"), state.get("layers")
        if not isinstance(steps, int) or steps < 0 or not isinstance(saved, dict):
            raise ValueError(f"malformed stale pipeline state (steps={steps!r}, layers of type "
                             f"{type(saved).__name__})")
        self.flush()
        ex, device = self.exchanger, self.block.device
        states: dict[int, _LayerState] = {}
        for layer, entry in saved.items():
            layer_state = _LayerState(self.smoothing)
            for name, buffer, num_rows in (("features", layer_state.features, ex.num_halo),
                                           ("grads", layer_state.grads, ex.sent_rows_on(device).numel())):
                buf = dict(entry[name])
                m = buf.get("m")
                if m is not None:
                    if not isinstance(m, torch.Tensor) or m.ndim < 1 or m.shape[0] != num_rows:
                        raise ValueError(f"layer {layer} {name}: saved buffer of shape "
                                         f"{tuple(getattr(m, 'shape', ()))} does not fit this rank's "
                                         f"{num_rows} rows")
                    buf["m"] = m.to(device)
                buffer.load_state_dict(buf)
            states[int(layer)] = layer_state
        self._states, self._steps = states, steps
        self._first = steps == 0

    @property
    def other_cut_refusal(self) -> str | None:
        """Why a state saved on another cut cannot be placed on this one (None: it can)."""
        if self.subset_fn is not None:
            return "with boundary sampling each rank's halo rows are its own sample, not their owners' rows"
        return None

    def load_other_cut(self, states: Iterable[dict[str, Any]]) -> dict[str, int]:
        """Continue from the saved states of every rank of another cut of the same graph (any
        number of ranks, read one at a time): each halo row's moving average is its saved value,
        picked by original id; rows without one are read from the first resumed step's exchange;
        the halo gradients restart (:mod:`.stale_reshard` says why). Returns this rank's counts:
        ``{"restored": rows, "fetched": rows}`` (summed over the exchanging layers).

        Raises:
            NoRowIds: the states, or the exchanger, hold no original row ids.
            ValueError: boundary sampling is on (:attr:`other_cut_refusal`), or the states are
                malformed or disagree.
        """
        if self.other_cut_refusal is not None:
            raise ValueError(self.other_cut_refusal)
        ex = self.exchanger
        if ex.row_ids is None:
            raise NoRowIds("the halo exchanger has no original row ids to place the saved rows by")
        self.flush()
        steps, carried = collect(states, ex.row_ids[ex.num_inner:])
        self._states, counts = {}, {"restored": 0, "fetched": 0}
        for layer, entry in carried.items():
            state = _LayerState(self.smoothing)
            state.features.load_state_dict({"gamma": entry.gamma, "count": entry.count,
                                            "m": entry.m.to(self.block.device)})
            missing = (~entry.found).nonzero().squeeze(1)
            state.missing = missing if missing.numel() else None
            counts["restored"] += int(entry.found.sum())
            counts["fetched"] += missing.numel()
            self._states[layer] = state
        self._steps = steps
        self._first = steps == 0
        return counts

    @staticmethod
    def describe_other_cut(counts: list[dict[str, int]]) -> str:
        """What :meth:`load_other_cut` did on every rank (``counts``: each rank's), a clause of the resume line."""
        restored = sum(c.get("restored", 0) for c in counts)
        fetched = sum(c.get("fetched", 0) for c in counts)
        return (f" re-sharded by node id ({restored} halo rows restored, {fetched} never sent on the old cut "
                f"read from the first resumed step; the halo gradients restart from it)")

    def __repr__(self) -> str:
        return f"StalePipeline(smoothing={self.smoothing}, sampled={self.subset_fn is not None})"
