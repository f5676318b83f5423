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

**Inner sources first (within a layer).** A layer whose input rows are still in flight runs the
part of its aggregation that reads inner sources, then waits, then adds the halo-source part
(per chunk of destinations too: each chunk's block is split at its first halo source). The split
forms are written here for the built-in layers from their parameters
(:class:`~gnn_dist.nn.GCNConv`, :class:`~gnn_dist.nn.SAGEConv`, :class:`~gnn_dist.nn.GINConv`,
:class:`~gnn_dist.nn.GATConv`; GAT merges the two partial softmaxes with their running max and
sum); any other layer runs exchange-then-compute on the whole block (a warning says so once).

Blocks are split once (the part's on it, the chunks' in the mode's plan, built when a layer
that reads an exchange is chunked: the chunks' blocks and their splits, about two more copies of
the block's edges); edges keep their order within each destination
(:meth:`~gnn_dist.nn.Block.sub_block`). Autograd glue: :class:`_Send` (identity on the rows a
piece sends; starts the piece, and in backward waits for its gradients), :class:`_Arrive` (the
halo rows; its backward sends their gradients back) and :class:`_Merge` (the chunks' rows into
``[I, F]``; the next exchange hangs on the chunks only).

Every rank makes the same collectives in the same order (``n`` pieces per exchange of a chunked
layer, even where a chunk has no rows), as :mod:`gnn_dist.distributed.halo` requires.
"""

from __future__ import annotations

import logging
import weakref
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch
import torch.nn.functional as F

from ..distributed.halo import HaloExchanger, HaloHandle, HaloSubset
from ..nn import Block, DropoutKey, GATConv, GCNConv, GINConv, SAGEConv, hash_edge_dropout, spmm
from ..nn.dropout import call_conv
from .base import Activation, LayerCounter, LayerSteps, SubsetFn

__all__ = ["OverlapPipeline", "SplitBlock", "split_block"]

log = logging.getLogger(__name__)

DEFAULT_CHUNKS = 4
"""Chunks of boundary rows per hidden layer (pieces per exchange) by default."""
MAX_CHUNKS = 1024
"""The most chunks :class:`OverlapPipeline` accepts."""


# ------------------------------------------------------------------------------------ blocks
class SplitBlock:
    """A block's edges split by source at ``num_first`` (default: ``D``): ``inner`` (sources
    ``[0, num_first)``, which start with the destinations) and ``halo`` (sources
    ``[num_first, S)``, renumbered from 0); ``inner_edges``/``halo_edges`` int64 are the edges'
    positions in the full block. Both keep the full block's destinations and edge order."""

    def __init__(self, block: Block, num_first: int | None = None) -> None:
        s = block.num_dst if num_first is None else int(num_first)
        assert block.num_dst <= s <= block.num_src, (block, s)
        is_halo = block.indices >= s
        self.full = block
        self.num_first = s
        self.inner_edges = torch.nonzero(~is_halo).flatten()
        self.halo_edges = torch.nonzero(is_halo).flatten()
        self.inner = _sub_block(block, self.inner_edges, 0, s)
        self.halo = _sub_block(block, self.halo_edges, s, block.num_src)


def _sub_block(block: Block, edges: torch.Tensor, lo: int, hi: int) -> Block:
    """The edges ``edges`` of ``block`` (whose sources lie in ``[lo, hi)``) over sources
    ``[lo, hi)`` renumbered from 0; destinations unchanged. Degrees stay the full graph's."""
    dst = block.dst_index[edges]
    indptr = torch.zeros(block.num_dst + 1, dtype=torch.long, device=block.device)
    torch.cumsum(torch.bincount(dst, minlength=block.num_dst), 0, out=indptr[1:])
    rows = slice(lo, hi)
    return Block(num_src=hi - lo, num_dst=block.num_dst, indptr=indptr, indices=block.indices[edges] - lo,
                 edge_weight=None if block.edge_weight is None else block.edge_weight[edges],
                 in_degree=block.in_degree[rows], out_degree=block.out_degree[rows],
                 self_loops=block.self_loops[rows], src_original_ids=block.src_original_ids[rows])


def split_block(block: Block) -> SplitBlock:
    """The :class:`SplitBlock` of ``block`` at its halo rows (cached on it)."""
    return block.cached("overlap_split", lambda: SplitBlock(block))


@dataclass(frozen=True, slots=True)
class _RowsView:
    """Destinations ``rows`` of a part's block as their own split block.

    ``split`` is the sub-block of ``rows`` (:meth:`~gnn_dist.nn.Block.sub_block`) split at its
    first halo source; its sources are the inner rows ``first`` (``rows`` first) then the halo
    rows ``halo`` (0-based within the halo)."""

    rows: torch.Tensor
    split: SplitBlock
    first: torch.Tensor
    halo: torch.Tensor


def _rows_view(block: Block, rows: torch.Tensor) -> _RowsView:
    sub, src = block.sub_block(rows)
    num_first = int((src < block.num_dst).sum())
    # sub_block lists the rows, then the other sources by ascending id: inner ones, then halo
    assert bool((src[num_first:] >= block.num_dst).all()), "sub_block: halo sources must come last"
    return _RowsView(rows, SplitBlock(sub, num_first), src[:num_first], src[num_first:] - block.num_dst)


def _chunk_of(ids: torch.Tensor, n: int) -> torch.Tensor:
    """int64 ids -> chunks in ``[0, n)`` by multiplicative (Fibonacci) hashing, from the high bits
    of the 32-bit product: ids in any pattern (e.g. all even) spread evenly over the chunks."""
    return (((ids * 0x9E3779B1) & 0xFFFFFFFF) * n) >> 32


class _Chunks:
    """A part's boundary rows in ``n`` chunks, and the ``n`` pieces of an exchange.

    Row ``v`` (inner or halo) belongs to chunk ``hash(original_id(v))`` (:func:`_chunk_of`): a
    row's owner and its readers agree without communication. Piece ``k`` sends the send positions whose row is in
    chunk ``k`` (``send_chunk``) and fills the halo rows in chunk ``k`` (``halo_chunk``), so the
    pieces of an exchange partition it, each sender's rows of chunk ``k`` being ready when chunk
    ``k`` is. ``rows[k]`` int64 are the boundary rows of chunk ``k`` (ascending), ``rest`` the
    non-boundary rows; together they cover ``[0, I)`` once.
    """

    def __init__(self, block: Block, ex: HaloExchanger, n: int) -> None:
        num_inner, device = ex.num_inner, block.device
        chunk_of = _chunk_of(block.src_original_ids.cpu(), n)                    # [I + H]
        send_index = ex.send_index
        self.n = n
        self.num_inner = num_inner
        self.world_size = ex.world_size
        self.send_chunk = chunk_of[send_index]                                   # [S]
        self.halo_chunk = chunk_of[num_inner:]                                   # [H]
        peers = torch.arange(ex.world_size)
        self.send_peer = torch.repeat_interleave(peers, torch.tensor(ex.send_counts, dtype=torch.long))
        self.halo_peer = torch.repeat_interleave(peers, torch.tensor(ex.halo_counts, dtype=torch.long))
        boundary = torch.zeros(num_inner, dtype=torch.bool)
        boundary[send_index] = True
        inner_chunk = chunk_of[:num_inner]
        self.rows = [torch.nonzero(boundary & (inner_chunk == k)).flatten().to(device) for k in range(n)]
        self.rest = torch.nonzero(~boundary).flatten().to(device)
        assert sum(r.numel() for r in self.rows) + self.rest.numel() == num_inner, "the chunks cover the rows once"
        self._all = self._split(torch.arange(len(send_index)), torch.arange(ex.num_halo),
                                torch.ones(ex.num_halo, dtype=torch.float64))
        self._views: dict[int, _RowsView] = {}

    def rows_of(self, k: int) -> torch.Tensor:
        """Chunk ``k``'s rows; ``k == n``: the non-boundary rows."""
        return self.rest if k == self.n else self.rows[k]

    def view(self, block: Block, k: int) -> _RowsView:
        """The split block of :meth:`rows_of` ``(k)`` (built on first use, kept)."""
        if k not in self._views:
            self._views[k] = _rows_view(block, self.rows_of(k))
        return self._views[k]

    def pieces(self, subset: HaloSubset | None) -> list[HaloSubset]:
        """The ``n`` pieces of an exchange of ``subset`` (None: every row, factor 1)."""
        if subset is None:
            return self._all
        return self._split(subset.send_pos.cpu(), subset.recv_pos.cpu(), subset.recv_scale.cpu())

    def _split(self, send_pos: torch.Tensor, recv_pos: torch.Tensor, scale: torch.Tensor) -> list[HaloSubset]:
        out = []
        send_chunk, recv_chunk = self.send_chunk[send_pos], self.halo_chunk[recv_pos]
        for k in range(self.n):
            mine, theirs = send_pos[send_chunk == k], recv_chunk == k
            recv = recv_pos[theirs]
            out.append(HaloSubset(
                send_pos=mine, send_counts=self._counts(self.send_peer[mine]),
                recv_pos=recv, recv_counts=self._counts(self.halo_peer[recv]), recv_scale=scale[theirs]))
        return out

    def _counts(self, peer: torch.Tensor) -> list[int]:
        return torch.bincount(peer, minlength=self.world_size).tolist()


# ------------------------------------------------------------------------------ autograd glue
class _Flight:
    """One layer's halo exchange in flight, sent in pieces (one piece: the whole exchange).

    Forward: :meth:`stage` copies rows into the send buffer and :meth:`start_until` starts the
    pieces, in order, whose rows are staged; :meth:`halo` waits for every piece and returns the
    halo rows ``[H, F]``. Backward: :meth:`send_back` starts every piece's backward exchange, the
    last piece first (the owner needs them in that order); :meth:`grad_for` ``(k)`` waits for
    piece ``k`` and returns the gradients it brought ``[I, F]`` (all of them for the rows of
    chunk ``k``, which no other piece sends).

    The autograd nodes hold their flight, so it holds no tensor of the graph (that would be a
    cycle through the graph, which Python's collector cannot free): the sending layer's output
    only as a weak reference, buffers and handles only until they are used.
    """

    def __init__(self, ex: HaloExchanger, tag: int, pieces: list[HaloSubset | None]) -> None:
        self.ex, self.tag, self.pieces = ex, tag, pieces
        self.fwd: list[HaloHandle | None] = []
        self.bwd: list[HaloHandle | None] | None = None
        self.lowest: int | None = None
        """The first piece with a :class:`_Send` node (the last to run in backward: it also
        waits for the pieces that had no rows here)."""
        self.buf: torch.Tensor | None = None
        self.output: weakref.ref[torch.Tensor] | None = None
        """The sending layer's output ``[I, F]``, whose rows travel (the next layer's input)."""

    def is_input(self, h: torch.Tensor, tag: int) -> bool:
        """Whether ``h`` is the output this exchange carries to layer ``tag``."""
        return self.tag == tag and self.output is not None and self.output() is h

    def stage(self, k: int, rows_h: torch.Tensor, rows: torch.Tensor | None) -> None:
        self.lowest = k if self.lowest is None else self.lowest
        if rows is None:
            self.buf = rows_h
            return
        if self.buf is None:
            self.buf = rows_h.new_empty((self.ex.num_inner, *rows_h.shape[1:]))
        self.buf.index_copy_(0, rows, rows_h)

    def start_until(self, k: int, fallback: torch.Tensor | None = None) -> None:
        """Start pieces up to ``k`` (once a buffer exists: ``fallback`` when none was staged)."""
        buf = self.buf if self.buf is not None else fallback
        if buf is None:
            return
        while len(self.fwd) <= k:
            self.fwd.append(self.ex.start(buf, tag=self.tag, subset=self.pieces[len(self.fwd)]))
        if len(self.fwd) == len(self.pieces):
            self.buf = None  # start() has gathered what it sends

    def halo(self) -> torch.Tensor:
        assert len(self.fwd) == len(self.pieces), "every piece starts before the halo rows are read"
        handles, self.fwd = self.fwd, [None] * len(self.fwd)
        assert handles[0] is not None, "the halo rows are read once"
        out = handles[0].wait()
        for handle, piece in zip(handles[1:], self.pieces[1:]):
            assert handle is not None and piece is not None
            pos = piece.recv_pos.to(out.device)  # a piece's rows; 0 elsewhere
            out.index_copy_(0, pos, handle.wait().index_select(0, pos))
        return out

    def send_back(self, grad_halo: torch.Tensor) -> None:
        assert self.bwd is None, "one backward per exchange"
        handles: list[HaloHandle | None] = [None] * len(self.pieces)
        for k in reversed(range(len(self.pieces))):
            handles[k] = self.ex.start_backward(grad_halo, tag=self.tag, subset=self.pieces[k])
        self.bwd = handles

    def grad_for(self, k: int, like: torch.Tensor) -> torch.Tensor:
        if self.bwd is None:  # the halo rows got no gradient: still take part in the collectives
            self.send_back(like.new_zeros((self.ex.num_halo, *like.shape[1:])))
        assert self.bwd is not None
        handle, self.bwd[k] = self.bwd[k], None
        assert handle is not None, "one backward per piece"
        got = handle.wait()
        if k == self.lowest:  # the last node in backward also waits for the pieces without rows here
            self.drain()
        return got

    def drain(self) -> None:
        """Wait for whatever of this exchange was started and not waited for."""
        for handles in (self.fwd, self.bwd or []):
            for j, handle in enumerate(handles):
                if handle is not None:
                    handle.wait()
                    handles[j] = None


class _Send(torch.autograd.Function):
    """Identity on rows ``[d, F]`` (``rows``; None: all ``I``) that piece ``k`` of ``flight``
    sends: stages them and starts the pieces they complete. Backward: waits for the pieces'
    gradients (:meth:`_Flight.grad_for`) and adds the peers' contributions to these rows."""

    @staticmethod
    def forward(ctx: Any, h: torch.Tensor, flight: _Flight, k: int,  # type: ignore[override]
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


class _Arrive(torch.autograd.Function):
    """``h`` (a dependency only) -> the halo rows ``[H, F]`` of ``flight``; its backward starts
    sending the halo rows' gradient back (not waiting)."""

    @staticmethod
    def forward(ctx: Any, h: torch.Tensor, flight: _Flight) -> torch.Tensor:  # type: ignore[override]
        ctx.flight = flight
        return flight.halo()

    @staticmethod
    @torch.autograd.function.once_differentiable
    def backward(ctx: Any, grad_halo: torch.Tensor) -> tuple[Any, ...]:  # type: ignore[override]
        ctx.flight.send_back(grad_halo.contiguous())
        return None, None


class _Merge(torch.autograd.Function):
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


def _once(fn: Callable[[], torch.Tensor]) -> Callable[[], torch.Tensor]:
    """``fn()`` on the first call, the same tensor afterwards."""
    box: list[torch.Tensor] = []

    def get() -> torch.Tensor:
        if not box:
            box.append(fn())
        return box[0]
    return get


# ------------------------------------------------------------------------------------ the mode
class OverlapPipeline(LayerSteps):
    """The ``overlap`` schedule (see the module docstring) as a :class:`~.base.Pipeline`.

    The models call :meth:`layer` (and :meth:`input_layer` for a
    :class:`~gnn_dist.models.LayerInput`) instead of ``exchange`` then the conv.

    Args:
        block: the part's block (split now).
        exchanger: the part's halo exchanger.
        subset_fn: boundary sampling, or None (then the mode is exact).
        chunks: the chunks a hidden layer computes its boundary rows in, each starting its piece
            of the next exchange (``n``, >= 1); 0 turns boundary-first off (each layer then only
            overlaps its own exchange with its inner-source part). (default: 4)
    """

    name = "overlap"

    def __init__(self, block: Block, exchanger: HaloExchanger, subset_fn: SubsetFn | None = None, *,
                 chunks: int = DEFAULT_CHUNKS) -> None:
        if isinstance(chunks, bool) or not isinstance(chunks, int) or not 0 <= chunks <= MAX_CHUNKS:
            raise ValueError(f"chunks={chunks!r} must be an int in [0, {MAX_CHUNKS}] (0: no boundary-first "
                             f"schedule; each chunk is one more collective per exchange)")
        self.block = block
        self.exchanger = exchanger
        self.subset_fn = subset_fn
        self.chunks = chunks
        self.split = split_block(block)
        self._layers = LayerCounter()
        self._plan: _Chunks | None = None
        self._flights: list[_Flight] = []
        self._pending: _Flight | None = None
        self._input_tag: int | None = None
        self._input_memo: tuple[torch.Tensor, torch.Tensor] | None = None
        self._warned: set[str] = set()

    # -------------------------------------------------------------- Pipeline protocol
    def begin_step(self, epoch: int) -> "OverlapPipeline":
        self.flush()
        self._layers.reset(epoch)
        return self

    def staleness(self) -> int:
        return 0

    def flush(self) -> None:
        for flight in self._flights:
            flight.drain()
        self._flights.clear()
        self._pending = None

    # -------------------------------------------------------------- the model's hooks
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
        form = _FORMS.get(type(conv))
        if self.exchanger.world_size == 1:
            return _activate(call_conv(conv, self.block, h_inner, dropout_key), activation)
        if form is None:
            if type(conv).__name__ not in self._warned:
                self._warned.add(type(conv).__name__)
                log.warning("overlap: %s has no split form; it runs exchange-then-compute", type(conv).__name__)
            return _activate(call_conv(conv, self.block, self._exchange(h_inner, tag), dropout_key), activation)
        flight, h = self._incoming(h_inner, tag)
        halo = _once(lambda: _Arrive.apply(h, flight))

        def compute(k: int | None) -> torch.Tensor:
            if k is None:
                return form(conv, self.split, h, halo, dropout_key)
            view = self._chunks().view(self.block, k)
            return form(conv, view.split, h.index_select(0, view.first),
                        lambda: halo().index_select(0, view.halo), dropout_key)
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
                parts.append(_Send.apply(activation(compute(k), r), flight, k, r))
                rows.append(r)
            else:
                flight.start_until(k)
        if plan.rest.numel():
            parts.append(activation(compute(plan.n), plan.rest))
            rows.append(plan.rest)
        h = _Merge.apply(rows, plan.num_inner, *parts) if parts else activation(compute(None), None)
        flight.start_until(plan.n - 1, fallback=h.detach())
        flight.output = weakref.ref(h)
        self._pending = flight
        return h

    def _chunks(self) -> _Chunks:
        if self._plan is None:
            self._plan = _Chunks(self.block, self.exchanger, max(self.chunks, 1))
        return self._plan

    def _subset(self, tag: int) -> HaloSubset | None:
        return None if self.subset_fn is None else self.subset_fn(self._layers.epoch, tag)

    def _new_flight(self, tag: int, pieces: list[HaloSubset | None]) -> _Flight:
        flight = _Flight(self.exchanger, tag, pieces)
        self._flights.append(flight)
        return flight

    def _incoming(self, h_inner: torch.Tensor, tag: int) -> tuple[_Flight, torch.Tensor]:
        """The exchange of ``h_inner`` for layer ``tag`` (the one the previous layer started, or
        a new one, of one piece, started now) and the rows to compute from (``h_inner``, through
        the new exchange's :class:`_Send`)."""
        pending, self._pending = self._pending, None
        if pending is not None and pending.is_input(h_inner, tag):
            return pending, h_inner
        self.exchanger._check_rows(h_inner)
        flight = self._new_flight(tag, [self._subset(tag)])
        return flight, _Send.apply(h_inner, flight, 0, None)

    def _exchange(self, h_inner: torch.Tensor, tag: int) -> torch.Tensor:
        if self.exchanger.world_size == 1:
            return self.exchanger.exchange(h_inner, tag=tag)
        flight, h = self._incoming(h_inner, tag)
        return torch.cat([h, _Arrive.apply(h, flight)])

    def __repr__(self) -> str:
        return f"OverlapPipeline(sampled={self.subset_fn is not None}, chunks={self.chunks})"


def _activate(out: torch.Tensor, activation: Activation | None) -> torch.Tensor:
    return out if activation is None else activation(out, None)


# ------------------------------------------------------------------------ split layer forms
# Each takes (conv, split, h, arrive, dropout_key): ``h [s, F_in]`` the split's first sources
# (its destinations first), ``arrive() -> [S' - s, F_in]`` its other sources (called once, after
# the inner-source part); returns the destinations' output ``[d, F_out]``.


def _gcn_aggregates_first(conv: GCNConv, h: torch.Tensor) -> bool:
    """GCNConv's choice of side for the aggregation (its class docstring): aggregate the inputs
    first when ``F_in * (1 + h needs a gradient) <= F_out * (1 + the linear output needs one)``."""
    grad = torch.is_grad_enabled()
    agg_passes = 1 + int(grad and h.requires_grad)
    lin_passes = 1 + int(grad and (h.requires_grad or conv.lin.weight.requires_grad))
    return conv.in_channels * agg_passes <= conv.out_channels * lin_passes


def _gcn(conv: GCNConv, sb: SplitBlock, h: torch.Tensor, arrive: Any, _key: Any) -> torch.Tensor:
    """``dinv[v] (A (dinv z) + (1 - loops[v]) (dinv z)[v])`` with ``z = h`` or ``h W`` (GCNConv's
    sums), ``A`` split by source; the SpMM counts existing self-loop edges, the self term the
    one that replaces them."""
    full, d, s = sb.full, sb.full.num_dst, sb.num_first
    aggregate_first = _gcn_aggregates_first(conv, h)
    dinv = full.cached(("overlap_gcn_dinv", h.dtype), lambda: (full.in_degree - full.self_loops + 1)
                       .to(h.dtype).pow(-0.5).unsqueeze(1))                                 # [S', 1]
    self_coef = full.cached(("overlap_gcn_self", h.dtype),
                            lambda: (1 - full.self_loops[:d]).to(h.dtype).unsqueeze(1))    # [D, 1]
    z = h if aggregate_first else conv.lin(h)
    zs = z * dinv[:s]
    agg = spmm(sb.inner, zs)
    z_halo = arrive()
    z_halo = z_halo if aggregate_first else conv.lin(z_halo)
    out = (agg + spmm(sb.halo, z_halo * dinv[s:])).addcmul_(self_coef, zs[:d]).mul_(dinv[:d])
    if aggregate_first:
        return F.linear(out, conv.lin.weight, conv.bias)
    return out if conv.bias is None else out + conv.bias


def _inv_count(full: Block, dtype: torch.dtype) -> torch.Tensor:
    return full.cached(("overlap_inv_count", dtype),
                       lambda: full.in_count.clamp(min=1).to(dtype).reciprocal().unsqueeze(1))


def _sage(conv: SAGEConv, sb: SplitBlock, h: torch.Tensor, arrive: Any, _key: Any) -> torch.Tensor:
    inv = _inv_count(sb.full, h.dtype)
    root = conv.lin_r(h[:sb.full.num_dst])
    if conv.out_channels < conv.in_channels:
        w = conv.lin_l.weight
        agg = spmm(sb.inner, F.linear(h, w))
        agg = (agg + spmm(sb.halo, F.linear(arrive(), w))) * inv
        if conv.lin_l.bias is not None:
            agg = agg + conv.lin_l.bias
        return agg + root
    agg = spmm(sb.inner, h)
    agg = (agg + spmm(sb.halo, arrive())) * inv
    return conv.lin_l(agg) + root


def _gin(conv: GINConv, sb: SplitBlock, h: torch.Tensor, arrive: Any, _key: Any) -> torch.Tensor:
    agg = spmm(sb.inner, h)
    self_term = (1 + conv.eps) * h[:sb.full.num_dst]
    return conv.nn((agg + spmm(sb.halo, arrive())) + self_term)


def _gat(conv: GATConv, sb: SplitBlock, h: torch.Tensor, arrive: Any, key: DropoutKey | None) -> torch.Tensor:
    full = sb.full
    attn_dropout = conv.training and conv.dropout > 0.0
    if attn_dropout and key is None:
        raise ValueError(f"{conv!r} with dropout={conv.dropout} in training mode needs dropout_key")
    d, K, C = full.num_dst, conv.heads, conv.out_channels
    ids = full.src_original_ids
    dst_all = full.dst_index

    def scores(z: torch.Tensor, a_dst: torch.Tensor, block: Block, edges: torch.Tensor) -> torch.Tensor:
        a_src = (z * conv.att_src).sum(-1)                                        # [S_part, K]
        s = F.leaky_relu(a_src[block.indices] + a_dst[dst_all[edges]], conv.negative_slope)
        return s.masked_fill(full.self_loop_mask[edges].unsqueeze(1), float("-inf"))  # [E_part, K]

    def drop(p: torch.Tensor, edges: torch.Tensor | None) -> torch.Tensor:
        if not attn_dropout:
            return p
        assert key is not None
        if edges is None:  # the self terms
            return hash_edge_dropout(p, conv.dropout, key=key, src_ids=ids[:d], dst_ids=ids[:d], training=True)
        return hash_edge_dropout(p, conv.dropout, key=key, src_ids=ids[full.indices[edges]],
                                 dst_ids=ids[dst_all[edges]], training=True)

    def weighted(block: Block, z: torch.Tensor, p: torch.Tensor) -> torch.Tensor:         # [D, K, C]
        return torch.stack([spmm(block, z[:, k].contiguous(), p[:, k].contiguous()) for k in range(K)], dim=1)

    # inner sources: the self term and the inner edges, against their own running max
    z_in = conv.lin(h).view(-1, K, C)                                              # [s, K, C]
    z_dst = z_in[:d]                                                                # [D, K, C]
    a_dst = (z_dst * conv.att_dst).sum(-1)                                          # [D, K]
    s_in = scores(z_in, a_dst, sb.inner, sb.inner_edges)                            # [E_in, K]
    s_self = F.leaky_relu((z_dst * conv.att_src).sum(-1) + a_dst, conv.negative_slope)  # [D, K]
    dst_in = dst_all[sb.inner_edges]
    with torch.no_grad():  # softmax is shift-invariant: the max is a constant for autograd
        m_in = s_self.clone()
        m_in.scatter_reduce_(0, dst_in.unsqueeze(1).expand_as(s_in), s_in, "amax")
    p_in = torch.exp(s_in - m_in[dst_in])
    p_self = torch.exp(s_self - m_in)
    denom_in = p_self.index_add(0, dst_in, p_in)                                    # [D, K]
    num_in = weighted(sb.inner, z_in, drop(p_in, sb.inner_edges)) + drop(p_self, None).unsqueeze(-1) * z_dst
    # halo sources: merge with the running max and sum
    z_h = conv.lin(arrive()).view(-1, K, C)                                         # [H, K, C]
    s_h = scores(z_h, a_dst, sb.halo, sb.halo_edges)                                # [E_h, K]
    dst_h = dst_all[sb.halo_edges]
    with torch.no_grad():
        m = m_in.clone()
        m.scatter_reduce_(0, dst_h.unsqueeze(1).expand_as(s_h), s_h, "amax")
    rescale = torch.exp(m_in - m)                                                   # [D, K], <= 1
    p_h = torch.exp(s_h - m[dst_h])
    denom = (denom_in * rescale).index_add(0, dst_h, p_h)
    num = num_in * rescale.unsqueeze(-1) + weighted(sb.halo, z_h, drop(p_h, sb.halo_edges))
    out = num / denom.unsqueeze(-1)                                                 # [D, K, C]
    out = out.reshape(d, K * C) if conv.concat else out.mean(dim=1)
    if conv.bias is not None:
        out = out + conv.bias
    return out


_FORMS: dict[type, Any] = {GCNConv: _gcn, SAGEConv: _sage, GINConv: _gin, GATConv: _gat}
