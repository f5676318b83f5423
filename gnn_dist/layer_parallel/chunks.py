"""Node chunks and the rows a layer reads at each chunk: this epoch's or the historical ones.

A row's chunk is ``hash(seed, original id) mod K`` (:func:`chunk_of`, ``--chunk-by hash``): the
same on every stage and every part, so a halo row has the chunk its owner gives it. With
``--chunk-by graph`` (:func:`row_chunks`) the chunks are a METIS partition of each part's own rows
(the subgraph of its inner rows, balanced rows, fewest edges between chunks), so fewer of the rows a
chunk reads belong to later chunks and are historical; a halo row's chunk is fetched from its
owner once. Every stage of a part computes the same partition (METIS is deterministic for a
seed). Stage ``s`` computes its layers
for the destinations of chunk ``k = 0, ..., K-1`` in turn. A layer's input rows arrive in
*groups* (:class:`InputGroup`): one per chunk, as the previous layer or stage computes them, or
one group of every row (the first stage's first layer, whose input the row-local stem computes
at once). At chunk ``k`` the layer reads, for every source row,

.. math::
    x_u = \\begin{cases} x_u^{(t)} & \\text{its group has arrived (chunk } \\le k) \\\\
                        \\bar x_u^{(t-1)} & \\text{otherwise: the history (GNNPipe)} \\end{cases}

where :math:`\\bar x^{(t-1)}` is the previous epoch's input (or its bias-corrected moving average,
``history_smoothing``: :class:`~gnn_dist.pipeline.stale.EMABuffer`). With ``K = 1`` no row is
historical: exact. A fresh run's first step (no history yet) runs with one chunk.

:class:`InputPlan` orders a layer input's rows by group (inner rows then halo rows of each
group), so the rows of the groups arrived so far are a prefix: the source rows of chunk ``k``
are one ``cat`` of the arrived groups' tensors and the rest of the history, indexed once.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from ..config.registry import register_choices
from ..distributed import HaloExchanger, HaloSubset
from ..hashing import hash_bits
from ..nn.block import Block

__all__ = ["CHUNK_DOMAIN", "CHUNKINGS", "chunk_of", "row_chunks", "ChunkUnit", "InputGroup", "InputPlan",
           "chunk_units", "input_plan"]

CHUNK_DOMAIN = 0x63686E6B  # "chnk"


def chunk_of(original_ids: torch.Tensor, chunks: int, seed: int) -> torch.Tensor:
    """int64 chunk ids in ``[0, chunks)`` of rows with these original ids."""
    if chunks == 1:
        return torch.zeros_like(original_ids)
    return torch.remainder(hash_bits(seed, CHUNK_DOMAIN, original_ids, device=original_ids.device), chunks)


def _hash_chunks(part: Any, chunks: int, seed: int) -> torch.Tensor:
    return chunk_of(part.original_ids, chunks, seed)


def _graph_chunks(part: Any, chunks: int, seed: int) -> torch.Tensor:
    """METIS's ``chunks``-way partition of the part's inner rows (the edges between them, made
    undirected), seeded; halo rows get their owner's chunk (a collective of the part's graph group)."""
    from partitioners.graph import Graph
    from partitioners.methods.metis import metis_assign

    block, num_inner = part.block, int(part.num_inner)
    indptr, indices = block.indptr.cpu().numpy(), block.indices.cpu().numpy()
    dst = np.repeat(np.arange(num_inner, dtype=np.int64), np.diff(indptr))   # the block's rows: the inner rows
    keep = indices < num_inner
    graph = Graph.from_edges(indices[keep], dst[keep], num_nodes=num_inner)
    inner = torch.from_numpy(metis_assign(graph, min(chunks, max(1, num_inner)), seed=seed).astype(np.int64))
    ex = part.exchanger
    halo = ex.fetch_rows(inner[ex.send_index.cpu()], tag="chunk ids")
    return torch.cat([inner, halo.to(torch.int64)]).to(part.original_ids.device)


CHUNKINGS: dict[str, Callable[[Any, int, int], torch.Tensor]] = {"hash": _hash_chunks, "graph": _graph_chunks}
"""``--chunk-by``: how rows are assigned to chunks (``part, chunks, seed -> int64 [I + H]``)."""
register_choices("chunk_by", lambda: tuple(CHUNKINGS))   # --chunk-by (gnn_dist.config)


def row_chunks(part: Any, chunks: int, seed: int, by: str = "hash") -> torch.Tensor:
    """int64 ``[I + H]`` chunk ids in ``[0, chunks)`` of the part's inner then halo rows, as
    :data:`CHUNKINGS` ``[by]`` assigns them (one chunk: all 0). ``graph`` is a collective of the
    part's graph group."""
    if chunks == 1:
        return torch.zeros_like(part.original_ids)
    return CHUNKINGS[by](part, chunks, seed)


@dataclass(frozen=True, slots=True)
class ChunkUnit:
    """Chunk ``k``'s destinations ``rows`` (inner row ids, ascending), the block of their in-edges
    and its source rows ``src`` (ids in the part's ``[0, I + H)``)."""

    rows: torch.Tensor
    block: Block
    src: torch.Tensor


def chunk_units(block: Block, chunk: torch.Tensor, chunks: int) -> list[ChunkUnit]:
    """The :class:`ChunkUnit` of each chunk (``chunk``: the inner rows' chunk ids); one chunk is
    the whole block."""
    if chunks == 1:
        return [ChunkUnit(torch.arange(block.num_dst, device=block.device), block,
                          torch.arange(block.num_src, device=block.device))]
    units = []
    for k in range(chunks):
        rows = torch.nonzero(chunk[:block.num_dst] == k).flatten()
        sub, src = block.sub_block(rows)
        units.append(ChunkUnit(rows, sub, src))
    return units


@dataclass(frozen=True, slots=True)
class InputGroup:
    """Rows of a layer input that arrive together, at the start of chunk ``arrives_at``: inner rows
    ``inner`` and halo rows ``halo`` (0-based in the halo); ``subset``: the halo exchange of just
    these rows (None: all of them, or no halo)."""

    arrives_at: int
    inner: torch.Tensor
    halo: torch.Tensor
    subset: HaloSubset | None

    @property
    def size(self) -> int:
        return int(self.inner.numel() + self.halo.numel())


@dataclass(frozen=True, slots=True)
class InputPlan:
    """A layer input's groups, and ``position`` int64 ``[I + H]``: each row's place in the order
    of the groups (group 0's inner, then halo rows, group 1's ...); ``order`` its inverse."""

    groups: list[InputGroup]
    position: torch.Tensor
    order: torch.Tensor
    num_inner: int

    def arrived(self, k: int) -> int:
        """How many groups have arrived by chunk ``k``."""
        return sum(1 for g in self.groups if g.arrives_at <= k)

    @property
    def historical(self) -> bool:
        """True when some chunk reads rows that arrive later (the input keeps a history)."""
        return any(g.arrives_at > 0 for g in self.groups)


def _subset(exchanger: HaloExchanger, send_keep: torch.Tensor, halo_keep: torch.Tensor) -> HaloSubset:
    """The exchange of the sent positions ``send_keep`` and halo rows ``halo_keep`` (bool masks),
    per peer in the exchange's order."""
    so, ho = exchanger.send_offsets, exchanger.halo_offsets
    P = exchanger.world_size
    send_keep, halo_keep = send_keep.cpu(), halo_keep.cpu()
    return HaloSubset(send_pos=torch.nonzero(send_keep).flatten(),
                      send_counts=[int(send_keep[so[q]:so[q + 1]].sum()) for q in range(P)],
                      recv_pos=torch.nonzero(halo_keep).flatten(),
                      recv_counts=[int(halo_keep[ho[q]:ho[q + 1]].sum()) for q in range(P)],
                      recv_scale=torch.ones(int(halo_keep.sum())))


def input_plan(chunk: torch.Tensor, num_inner: int, exchanger: HaloExchanger, chunks: int, *,
               at_once: bool) -> InputPlan:
    """The plan of a layer input over rows with chunk ids ``chunk`` ``[I + H]``: one group per
    chunk, or (``at_once``) one group of every row, there from chunk 0."""
    device = chunk.device
    inner_chunk, halo_chunk = chunk[:num_inner], chunk[num_inner:]
    if at_once or chunks == 1:
        groups = [InputGroup(0, torch.arange(num_inner, device=device),
                             torch.arange(halo_chunk.numel(), device=device), None)]
    else:
        sent_chunk = inner_chunk.cpu()[exchanger.send_index]
        groups = []
        for k in range(chunks):
            halo_keep = halo_chunk == k
            groups.append(InputGroup(k, torch.nonzero(inner_chunk == k).flatten(), torch.nonzero(halo_keep).flatten(),
                                     _subset(exchanger, sent_chunk == k, halo_keep)))
    order = torch.cat([torch.cat([g.inner, num_inner + g.halo]) for g in groups])
    position = torch.empty_like(order)
    position[order] = torch.arange(order.numel(), device=device)
    return InputPlan(groups, position, order, num_inner)
