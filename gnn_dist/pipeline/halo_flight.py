"""One layer's halo exchange in flight, sent in pieces: the state the ``overlap`` mode's autograd
nodes (:mod:`.overlap_autograd`) share.

Legend: ``I`` inner rows, ``H`` halo rows, ``F`` width.

Every rank starts the same pieces in the same order, forward and backward (even a piece with no
rows here), as :mod:`gnn_dist.distributed.halo` requires.
"""

from __future__ import annotations

import weakref

import torch

from ..distributed import HaloExchanger, HaloHandle, HaloSubset, Transport

__all__ = ["HaloFlight"]


class HaloFlight:
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

    def __init__(self, ex: HaloExchanger, tag: int, pieces: list[HaloSubset | None], transport: Transport) -> None:
        self.ex, self.tag, self.pieces, self.transport = ex, tag, pieces, transport
        self.fwd: list[HaloHandle | None] = []
        self.bwd: list[HaloHandle | None] | None = None
        self.lowest: int | None = None
        """The first piece with a :class:`~.overlap_autograd.SendPiece` node (the last to run in
        backward: it also waits for the pieces that had no rows here)."""
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
            piece = self.pieces[len(self.fwd)]
            self.fwd.append(self.ex.start(buf, tag=self.tag, subset=piece, transport=self.transport))
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
            handles[k] = self.ex.start_backward(grad_halo, tag=self.tag, subset=self.pieces[k],
                                                transport=self.transport)
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

