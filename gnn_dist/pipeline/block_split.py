"""A block's edges split by source: the part that reads inner sources, and the part that reads
halo sources (what a layer can aggregate before, and only after, its halo rows arrive).

Legend: ``D`` destinations, ``S`` sources (inner rows ``[0, D)``, then halo rows), ``s`` the
split point (``num_first``), ``E`` edges.

Both halves keep the full block's destinations, degrees and edge order within each destination
(:meth:`~gnn_dist.nn.Block.sub_block` for a subset of destinations), so a layer that implements
the layer protocol (:mod:`gnn_dist.nn.decomposable`), aggregating the two halves as two source
groups, sums the same terms as on the whole block.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from ..nn import Block

__all__ = ["SplitBlock", "split_block", "RowsView", "rows_view"]


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
    sub = block.derived(slice(lo, hi), edges, num_src=hi - lo, num_dst=block.num_dst, indptr=indptr,
                        indices=block.indices[edges] - lo)
    # its sources are renumbered from ``lo``: which edges are self-loops is the full block's answer
    sub._cache["self_loop_mask"] = block.self_loop_mask[edges]
    return sub


def split_block(block: Block) -> SplitBlock:
    """The :class:`SplitBlock` of ``block`` at its halo rows (cached on it)."""
    return block.cached("overlap_split", lambda: SplitBlock(block))


@dataclass(frozen=True, slots=True)
class RowsView:
    """Destinations ``rows`` of a part's block as their own split block.

    ``split`` is the sub-block of ``rows`` (:meth:`~gnn_dist.nn.Block.sub_block`) split at its
    first halo source; its sources are the inner rows ``first`` (``rows`` first) then the halo
    rows ``halo`` (0-based within the halo)."""

    rows: torch.Tensor
    split: SplitBlock
    first: torch.Tensor
    halo: torch.Tensor


def rows_view(block: Block, rows: torch.Tensor) -> RowsView:
    """Destinations ``rows`` (int64, distinct, in ``[0, D)``) of ``block`` as a :class:`RowsView`."""
    sub, src = block.sub_block(rows)
    num_first = int((src < block.num_dst).sum())
    # sub_block lists the rows, then the other sources by ascending id: inner ones, then halo
    assert bool((src[num_first:] >= block.num_dst).all()), "sub_block: halo sources must come last"
    return RowsView(rows, SplitBlock(sub, num_first), src[:num_first], src[num_first:] - block.num_dst)

