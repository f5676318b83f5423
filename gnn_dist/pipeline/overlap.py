"""``overlap`` (exact): hide each halo exchange behind work that does not need it.

Legend: ``I`` inner rows (= destinations ``D``), ``H`` halo rows, ``B`` boundary rows (the inner
rows peers read: ``unique(send_index)``), ``R`` the other inner rows, ``n`` chunks, ``F`` width,
``K`` attention heads, ``C`` width per head.

Two overlaps, both exact (results equal ``sync`` up to the order of float additions):

**Boundary first (across layers).** A hidden layer computes its output rows ``B`` first, in
``n`` chunks (boundary rows by a hash of their original id, so sender and reader agree on a
row's chunk without talking), and starts piece ``k`` of the *next* layer's exchange (a
:class:`~gnn_dist.distributed.HaloSubset` of the rows of chunk ``k``) as soon as chunk ``k`` is
activated; then it computes the rows ``R``, usually most of the work when the partition is good,
while the pieces travel. The next layer waits for all pieces, only when it needs the halo rows::

    forward (layer i, hidden):  for k < n: rows B_k -> act -> start piece k of exchange i+1
                                rows R -> act ; h = merge(B_0 .. B_{n-1}, R)
    backward:  (layer i+1) grad of its halo part -> start every piece's backward, last first
               (layer i)   R's backward (no wait: autograd runs the later-recorded rows first)
                           for k = n-1 .. 0: wait piece k's gradients -> B_k's backward

The first layer's input is either a tensor (exchanged like any layer's input) or a
:class:`~gnn_dist.models.LayerInput` that holds its halo rows (no exchange: :meth:`input_layer`
computes its chunks with ``x.layer(conv, part, rows=...)``; one that exchanges them every step,
``needs_exchange``, runs whole). With boundary sampling each piece is the sample's rows of its
chunk; without, the pieces of an exchange send exactly the rows (and bytes) of ``sync``'s.

**Inner sources first (within a layer).** A layer whose input rows are still in flight
aggregates the edges from its inner sources, then waits, then aggregates those from the halo
sources and merges the two (per chunk of destinations too: each chunk's block is split at its
first halo source). This is the layer protocol (:mod:`gnn_dist.nn.decomposable`): any layer that
implements it (the built-in ones do; GAT merges two partial softmaxes with their running maximum)
gets this schedule; any other layer runs exchange-then-compute on the whole block (a warning
says so once).

Blocks are split once (:mod:`.block_split`; the part's on it, the chunks' in the mode's plan,
:class:`~.boundary_chunks.BoundaryChunks`, built when a layer that reads an exchange is chunked:
the chunks' blocks and their splits, about two more copies of the block's edges); edges keep
their order within each destination (:meth:`~gnn_dist.nn.Block.sub_block`). An exchange in
flight is a :class:`~.halo_flight.HaloFlight`; autograd glue (:mod:`.overlap_autograd`):
:class:`~.overlap_autograd.SendPiece` (identity on the rows a piece sends; starts the piece, and
in backward waits for its gradients), :class:`~.overlap_autograd.ArriveHalo` (the halo rows; its
backward sends their gradients back) and :class:`~.overlap_autograd.MergeRows` (the chunks' rows
into ``[I, F]``; the next exchange hangs on the chunks only).

Every rank makes the same collectives in the same order (``n`` pieces per exchange of a chunked
layer, even where a chunk has no rows), as :mod:`gnn_dist.distributed.halo` requires.
"""

from __future__ import annotations

import logging
import weakref
from collections.abc import Callable
from typing import Any

import torch

from ..distributed import EXACT, HaloExchanger, HaloSubset, Transport
from ..nn import Block, DropoutKey
from ..nn.decomposable import is_decomposable, propagate_groups
from ..nn.dropout import call_conv
from ..nn.part import LayerInput
from .base import Activation, LayerCounter, Stateless, SubsetFn
from .block_split import SplitBlock, split_block
from .boundary_chunks import BoundaryChunks
from .halo_flight import HaloFlight
from .overlap_autograd import ArriveHalo, MergeRows, SendPiece
from .registry import register_schedule

__all__ = ["OverlapPipeline", "SplitBlock", "split_block"]  # the last two: re-exported from .block_split

log = logging.getLogger(__name__)

MAX_CHUNKS = 1024
"""The most chunks :class:`OverlapPipeline` accepts."""

# ------------------------------------------------------------------------------------ the mode
@register_schedule("overlap")
class OverlapPipeline(Stateless):
    """The ``overlap`` schedule (see the module docstring) as a :class:`~.base.Pipeline`.

    The models' :meth:`run_layer` runs each layer with its exchange overlapped.

    Args:
        block: the part's block (split now).
        exchanger: the part's halo exchanger.
        options: the schedule's configuration; its ``overlap_chunks`` is the number of chunks a
            hidden layer computes its boundary rows in, each starting its piece of the next
            exchange (``n``, in ``[0, 1024]``); 0 turns boundary-first off (each layer then only
            overlaps its own exchange with its inner-source part). None: 4.
        subset_fn: boundary sampling, or None (then the mode is exact).
        transport: the wire dtype and simulated link of the exchanges.
    """

    name = "overlap"
    recompute_modes = ("none",)
    recompute_refusal = "its layers start the next layer's exchange from inside the layer"

    def __init__(self, block: Block, exchanger: HaloExchanger, options: Any = None, *,
                 subset_fn: SubsetFn | None = None, transport: Transport = EXACT) -> None:
        chunks = 4 if options is None else options.overlap_chunks
        if isinstance(chunks, bool) or not isinstance(chunks, int) or not 0 <= chunks <= MAX_CHUNKS:
            raise ValueError(f"overlap_chunks={chunks!r} must be an int in [0, {MAX_CHUNKS}] (0: no boundary-first "
                             f"schedule; each chunk is one more collective per exchange)")
        self.block = block
        self.exchanger = exchanger
        self.subset_fn = subset_fn
        self.transport = transport
        self.chunks = chunks
        self.split = split_block(block)
        self._layers = LayerCounter()
        self._plan: BoundaryChunks | None = None
        self._flights: list[HaloFlight] = []
        self._pending: HaloFlight | None = None
        self._input_tag: int | None = None
        self._input_memo: tuple[torch.Tensor, torch.Tensor] | None = None
        self._warned: set[str] = set()

    # -------------------------------------------------------------- Pipeline protocol
    def begin_step(self, epoch: int) -> "OverlapPipeline":
        self.flush()
        self._layers.reset(epoch)
        self.transport.begin_step(epoch)
        return self

    def staleness(self) -> int:
        return 0

    def flush(self) -> None:
        for flight in self._flights:
            flight.drain()
        self._flights.clear()
        self._pending = None

    # -------------------------------------------------------------- the model's interface
    def run_layer(self, index: int, conv: torch.nn.Module, h: torch.Tensor | LayerInput, *,
                  dropout_key: DropoutKey | None = None, activation: Activation | None = None) -> torch.Tensor:
        """Layer ``index``: :meth:`layer` for a tensor input, :meth:`input_layer` for a
        :class:`~gnn_dist.nn.part.LayerInput`."""
        self._layers.at(index)
        if isinstance(h, torch.Tensor):
            return self.layer(conv, h, dropout_key=dropout_key, activation=activation)
        return self.input_layer(conv, h, dropout_key=dropout_key, activation=activation)

    def exchange(self, h_inner: torch.Tensor) -> torch.Tensor:
        """The blocking exchange ``[I, F] -> [I + H, F]`` (custom models, layers without a split
        form, a :class:`~gnn_dist.models.LayerInput` fetching its halo rows: once per
        :meth:`input_layer`, for the same tensor)."""
        if self._input_tag is not None:
            if self._input_memo is not None and self._input_memo[0] is h_inner:
                return self._input_memo[1]
            out = self._exchange(h_inner, self._input_tag)
            self._input_memo = (h_inner, out)
            return out
        return self._exchange(h_inner, self._layers.next())

    def layer(self, conv: torch.nn.Module, h_inner: torch.Tensor, *, dropout_key: DropoutKey | None = None,
              activation: Activation | None = None) -> torch.Tensor:
        """``conv`` on this part with its exchange overlapped, then ``activation`` (None: the
        output layer): ``[I, F_in] -> [I, F_out]``. With an activation the boundary rows come
        first and start the next layer's exchange."""
        tag = self._layers.next()
        if self.exchanger.world_size == 1:
            return _activate(call_conv(conv, self.block, h_inner, dropout_key), activation)
        if not is_decomposable(conv):
            if type(conv).__name__ not in self._warned:
                self._warned.add(type(conv).__name__)
                log.warning("overlap: %s does not implement the layer protocol (gnn_dist.nn.DecomposableLayer); "
                            "it runs exchange-then-compute", type(conv).__name__)
            return _activate(call_conv(conv, self.block, self._exchange(h_inner, tag), dropout_key), activation)
        flight, h = self._incoming(h_inner, tag)
        halo = _once(lambda: ArriveHalo.apply(h, flight))

        def compute(k: int | None) -> torch.Tensor:
            if k is None:
                split, first, rest = self.split, h, halo
            else:
                view = self._chunks().view(self.block, k)
                split, first = view.split, h.index_select(0, view.first)
                rest = lambda: halo().index_select(0, view.halo)  # noqa: E731
            return propagate_groups(conv, split.full, (split.inner, first), (split.halo, rest),
                                    dropout_key=dropout_key)
        return self._run(tag, compute, activation)

    def input_layer(self, conv: torch.nn.Module, x: Any, *, dropout_key: DropoutKey | None = None,
                    activation: Activation | None = None) -> torch.Tensor:
        """The first layer on a :class:`~gnn_dist.models.LayerInput` ``x`` (``[I, F_out]``, after
        ``activation``): boundary rows first, by ``x.layer(conv, self, rows=...)``. An input
        that exchanges its halo rows every step (``x.needs_exchange``) runs whole, once."""
        tag = self._layers.next()
        self._input_tag, self._input_memo = tag, None
        try:
            def compute(k: int | None) -> torch.Tensor:
                rows = None if k is None else self._chunks().rows_of(k)
                return x.layer(conv, self, dropout_key=dropout_key, rows=rows)
            if self.exchanger.world_size == 1 or getattr(x, "needs_exchange", False):
                return _activate(compute(None), activation)
            return self._run(tag, compute, activation)
        finally:
            self._input_tag, self._input_memo = None, None

    # -------------------------------------------------------------- internals
    def _run(self, tag: int, compute: Callable[[int | None], torch.Tensor],
             activation: Activation | None) -> torch.Tensor:
        """One layer: whole (output layer, boundary-first off) or boundary rows first."""
        if activation is None or self.chunks == 0:
            return _activate(compute(None), activation)
        plan = self._chunks()
        flight = self._new_flight(tag + 1, plan.pieces(self._subset(tag + 1)))
        parts: list[torch.Tensor] = []
        rows: list[torch.Tensor] = []
        for k in range(plan.n):
            r = plan.rows_of(k)
            if r.numel():
                parts.append(SendPiece.apply(activation(compute(k), r), flight, k, r))
                rows.append(r)
            else:
                flight.start_until(k)
        if plan.rest.numel():
            parts.append(activation(compute(plan.n), plan.rest))
            rows.append(plan.rest)
        h = MergeRows.apply(rows, plan.num_inner, *parts) if parts else activation(compute(None), None)
        flight.start_until(plan.n - 1, fallback=h.detach())
        flight.output = weakref.ref(h)
        self._pending = flight
        return h

    def _chunks(self) -> BoundaryChunks:
        if self._plan is None:
            self._plan = BoundaryChunks(self.block, self.exchanger, max(self.chunks, 1))
        return self._plan

    def _subset(self, tag: int) -> HaloSubset | None:
        return None if self.subset_fn is None else self.subset_fn(self._layers.epoch, tag)

    def _new_flight(self, tag: int, pieces: list[HaloSubset | None]) -> HaloFlight:
        flight = HaloFlight(self.exchanger, tag, pieces, self.transport)
        self._flights.append(flight)
        return flight

    def _incoming(self, h_inner: torch.Tensor, tag: int) -> tuple[HaloFlight, torch.Tensor]:
        """The exchange of ``h_inner`` for layer ``tag`` (the one the previous layer started, or
        a new one, of one piece, started now) and the rows to compute from (``h_inner``, through
        the new exchange's :class:`~.overlap_autograd.SendPiece`)."""
        pending, self._pending = self._pending, None
        if pending is not None and pending.is_input(h_inner, tag):
            return pending, h_inner
        self.exchanger._check_rows(h_inner)
        flight = self._new_flight(tag, [self._subset(tag)])
        return flight, SendPiece.apply(h_inner, flight, 0, None)

    def _exchange(self, h_inner: torch.Tensor, tag: int) -> torch.Tensor:
        if self.exchanger.world_size == 1:
            return h_inner
        flight, h = self._incoming(h_inner, tag)
        return torch.cat([h, ArriveHalo.apply(h, flight)])

    def __repr__(self) -> str:
        return f"OverlapPipeline(sampled={self.subset_fn is not None}, chunks={self.chunks})"


def _activate(out: torch.Tensor, activation: Activation | None) -> torch.Tensor:
    return out if activation is None else activation(out, None)


def _once(fn: Callable[[], torch.Tensor]) -> Callable[[], torch.Tensor]:
    """``fn()`` on the first call, the same tensor afterwards."""
    box: list[torch.Tensor] = []

    def get() -> torch.Tensor:
        if not box:
            box.append(fn())
        return box[0]
    return get
