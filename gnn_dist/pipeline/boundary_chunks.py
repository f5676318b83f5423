"""A part's boundary rows in hash-assigned chunks, and the pieces of a halo exchange by chunk.

Legend: ``I`` inner rows, ``H`` halo rows, ``B`` boundary rows (the inner rows peers read:
``unique(send_index)``), ``S`` send positions (``len(send_index)``), ``n`` chunks.

The ``overlap`` mode (:class:`~.overlap.OverlapPipeline`) computes a hidden layer's boundary
rows chunk by chunk and starts piece ``k`` of the next exchange as soon as chunk ``k`` is
activated; a row's chunk is a hash of its original id, so its owner and its readers agree on it
without communication.
"""

from __future__ import annotations

import torch

from ..distributed.halo import HaloExchanger, HaloSubset
from ..nn import Block
from .block_split import RowsView, rows_view

__all__ = ["chunk_of", "BoundaryChunks"]


def chunk_of(ids: torch.Tensor, n: int) -> torch.Tensor:
    """int64 ids -> chunks in ``[0, n)`` by multiplicative (Fibonacci) hashing, from the high bits
    of the 32-bit product: ids in any pattern (e.g. all even) spread evenly over the chunks."""
    return (((ids * 0x9E3779B1) & 0xFFFFFFFF) * n) >> 32


class BoundaryChunks:
    """A part's boundary rows in ``n`` chunks, and the ``n`` pieces of an exchange.

    Row ``v`` (inner or halo) belongs to chunk ``hash(original_id(v))`` (:func:`chunk_of`): a
    row's owner and its readers agree without communication. Piece ``k`` sends the send
    positions whose row is in chunk ``k`` (``send_chunk``) and fills the halo rows in chunk
    ``k`` (``halo_chunk``), so the pieces of an exchange partition it, each sender's rows of
    chunk ``k`` being ready when chunk ``k`` is. ``rows[k]`` int64 are the boundary rows of
    chunk ``k`` (ascending), ``rest`` the non-boundary rows; together they cover ``[0, I)`` once.
    """

    def __init__(self, block: Block, ex: HaloExchanger, n: int) -> None:
        num_inner, device = ex.num_inner, block.device
        row_chunk = chunk_of(block.src_original_ids.cpu(), n)                    # [I + H]
        send_index = ex.send_index
        self.n = n
        self.num_inner = num_inner
        self.world_size = ex.world_size
        self.send_chunk = row_chunk[send_index]                                  # [S]
        self.halo_chunk = row_chunk[num_inner:]                                  # [H]
        peers = torch.arange(ex.world_size)
        self.send_peer = torch.repeat_interleave(peers, torch.tensor(ex.send_counts, dtype=torch.long))
        self.halo_peer = torch.repeat_interleave(peers, torch.tensor(ex.halo_counts, dtype=torch.long))
        boundary = torch.zeros(num_inner, dtype=torch.bool)
        boundary[send_index] = True
        inner_chunk = row_chunk[:num_inner]
        self.rows = [torch.nonzero(boundary & (inner_chunk == k)).flatten().to(device) for k in range(n)]
        self.rest = torch.nonzero(~boundary).flatten().to(device)
        assert sum(r.numel() for r in self.rows) + self.rest.numel() == num_inner, "the chunks cover the rows once"
        self._all = self._split(torch.arange(len(send_index)), torch.arange(ex.num_halo),
                                torch.ones(ex.num_halo, dtype=torch.float64))
        self._views: dict[int, RowsView] = {}

    def rows_of(self, k: int) -> torch.Tensor:
        """Chunk ``k``'s rows; ``k == n``: the non-boundary rows."""
        return self.rest if k == self.n else self.rows[k]

    def view(self, block: Block, k: int) -> RowsView:
        """The split block of :meth:`rows_of` ``(k)`` (built on first use, kept)."""
        if k not in self._views:
            self._views[k] = rows_view(block, self.rows_of(k))
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

