"""The decoder's logits of pairs of nodes whose embedding rows live on any rank.

:func:`score_pairs` is what link prediction's loss and metrics score with (the task's pairs, in
new global ids) and what ``gnn-dist predict --pairs`` scores a chunk of given pairs with: one
:class:`~.fetch.RowFetch` for all the endpoints (each node's row fetched once from its owner),
then the decoder on the endpoints' rows. A collective: every rank calls it at the same point.
"""

from __future__ import annotations

from typing import Sequence

import torch

from .fetch import RowFetch

__all__ = ["score_pairs", "decode"]


def decode(decoder: torch.nn.Module, h_src: torch.Tensor, h_dst: torch.Tensor,
           relations: torch.Tensor | None) -> torch.Tensor:
    """The decoder's logits of rows ``[E, D]`` (or ``[E, M, D]``); a relational decoder's
    (``relational = True``: DistMult) with each pair's relation id ``[E]`` (None: relation 0)."""
    if relations is None or not getattr(decoder, "relational", False):
        return decoder(h_src, h_dst)
    return decoder(h_src, h_dst, relations.to(h_src.device))


def score_pairs(decoder: torch.nn.Module, h: torch.Tensor, pairs: list[tuple[torch.Tensor, ...]],
                starts: Sequence[int], num_inner: int,
                chunk: int | None = None) -> tuple[list[torch.Tensor], RowFetch]:
    """The logits of each ``(src [E], dst [E] or [E, M][, relation ids [E]])`` of ``pairs`` (new
    global ids, any owner; :func:`decode`), from this rank's embeddings ``h`` ``[I, D]``
    (``starts``: the ``P + 1`` bounds of each rank's ids, ``num_inner``: ``I``): one :class:`RowFetch` for all their endpoints, then
    scored ``chunk`` sources at a time (all at once: None). Differentiable. Returns the logits
    and the :class:`RowFetch` (its exchanger counts the bytes it moved)."""
    ids = [t.reshape(-1) for pair in pairs for t in pair[:2]]
    fetch = RowFetch(torch.cat(ids) if ids else torch.zeros(0, dtype=torch.int64), starts, num_inner)
    table = fetch.table(h)
    where = fetch.index.to(table.device)
    out, at = [], 0
    for src, dst, *rest in pairs:
        rel = rest[0] if rest else None
        s_rows = where[at:at + src.numel()]
        at += src.numel()
        d_rows = where[at:at + dst.numel()].reshape(dst.shape)
        at += dst.numel()
        step = src.numel() if chunk is None else chunk
        parts = []
        for a in range(0, src.numel(), max(step, 1)):
            hs, hd = table[s_rows[a:a + step]], table[d_rows[a:a + step]]
            if dst.dim() == 2:   # [E, M] negatives of each source
                hs = hs.unsqueeze(1).expand_as(hd)
            parts.append(decode(decoder, hs, hd, None if rel is None else rel[a:a + step]))
        out.append(torch.cat(parts) if parts else table.new_zeros(dst.shape) + 0 * table.sum())
    return out, fetch
