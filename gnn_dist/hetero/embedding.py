"""Learnable rows for the node types without features (ogbn-mag's authors, institutions, fields).

Each row lives on the rank that owns its node only: a parameter ``[I_t, D]`` per featureless
type, over the part's inner rows of that type. Its gradient comes back to the owner through the
halo exchange's backward (a halo row's gradient is sent to its owner and added there), so it is
the whole graph's gradient of that row: it is never all-reduced nor broadcast (the parameters
are marked :data:`PER_RANK`), and an element-wise optimizer (Adam, AdamW, SGD) steps each row
exactly as one device would, moments of rows with a zero gradient included.

The initial values are a function of ``(seed, type, the row's id within its type)`` alone, drawn
in chunks of :data:`CHUNK_ROWS` ids from a generator seeded per chunk: the same table for any
number of ranks or cut, each rank drawing only the chunks that hold its rows.

Legend: ``I`` inner rows, ``I_t`` inner rows of type ``t``, ``n_t`` nodes of type ``t``,
``D`` the embedding width, ``F`` the layer input width (>= ``D``).
"""

from __future__ import annotations

import math

import torch
from torch import nn

from ..distributed.per_rank import PER_RANK, is_per_rank, mark_per_rank
from .part import TypedPart

__all__ = ["PER_RANK", "CHUNK_ROWS", "TypedEmbedding", "initial_rows", "is_per_rank"]

CHUNK_ROWS = 1 << 14
"""Ids per chunk of the initial values' generator."""
_MIX = (0x9E3779B97F4A7C15, 0xBF58476D1CE4E5B9, 0x94D049BB133111EB)


def initial_rows(ids: torch.Tensor, count: int, dim: int, seed: int, type_index: int) -> torch.Tensor:
    """float32 ``[len(ids), dim]``: the initial rows of ids ``ids`` (of a type with ``count``
    nodes): uniform in ``±sqrt(6 / (count + dim))`` (Glorot's bound of the ``[count, dim]``
    table), the same values whichever rank draws them."""
    bound = math.sqrt(6.0 / (count + dim))
    out = torch.empty(ids.numel(), dim, dtype=torch.float32, device=ids.device)
    if ids.numel() == 0 or ids.device.type == "meta":   # no rows (a model built to be checked, not trained)
        return out
    chunk = ids // CHUNK_ROWS
    for c in torch.unique(chunk).tolist():
        key = (int(seed) * _MIX[0] + (type_index + 1) * _MIX[1] + (c + 1) * _MIX[2]) % (1 << 63)
        rows = min(CHUNK_ROWS, count - c * CHUNK_ROWS)
        table = torch.rand(rows, dim, generator=torch.Generator().manual_seed(key)) * (2 * bound) - bound
        mine = chunk == c
        out[mine] = table[ids[mine] - c * CHUNK_ROWS]
    return out


class TypedEmbedding(nn.Module):
    """The layer input of a typed part: the static features, then each featureless type's
    learnable rows written into its rows (zero-padded to ``F``).

    Args:
        typed (TypedPart): the rank's typed part.
        dim (int): ``D``, the width of the learnable rows.
        width (int): ``F``, the layer input width (the widest of ``D`` and the feature widths).
        seed (int): the initial values' seed.
    """

    def __init__(self, typed: TypedPart, dim: int, width: int, seed: int) -> None:
        super().__init__()
        self.dim, self.width = int(dim), int(width)
        self.types = typed.featureless
        self.weights = nn.ParameterList()
        self._rows: list[torch.Tensor] = []   # this rank's rows of each type: plain attributes, not buffers
        self._ids: list[torch.Tensor] = []    # (they differ in length between ranks)
        for t in self.types:
            ids = typed.type_local_ids(t)
            self.weights.append(mark_per_rank(nn.Parameter(initial_rows(ids, typed.counts[t], self.dim, seed, t)), ids))
            self._rows.append(typed.inner_rows[t].clone())
            self._ids.append(ids.clone())

    def rows(self, i: int, device: torch.device | None = None) -> torch.Tensor:
        """The local rows of the ``i``-th featureless type (:attr:`types`), on ``device``."""
        if device is not None and self._rows[i].device != device:
            self._rows[i] = self._rows[i].to(device)
        return self._rows[i]

    def ids(self, i: int) -> torch.Tensor:
        """The type's own ids (original id - the type's offset) of those rows."""
        return self._ids[i]

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """``x`` ``[I, F_x]`` (the static features) -> ``[I, F]`` with the learnable rows in."""
        if x.shape[1] < self.width:
            x = nn.functional.pad(x, (0, self.width - x.shape[1]))
        for i, w in enumerate(self.weights):
            rows = w if self.dim == self.width else nn.functional.pad(w, (0, self.width - self.dim))
            x = x.index_copy(0, self.rows(i, x.device), rows.to(x.dtype))
        return x

    def extra_repr(self) -> str:
        return f"types={list(self.types)}, dim={self.dim}, rows={[w.shape[0] for w in self.weights]}"
