"""The compressed-row structure every kernel runs on, with a cache for backend-derived arrays.

Legend: ``R`` rows (the aggregation's outputs), ``C`` columns (its inputs), ``E`` entries.

A :class:`~gnn_dist.nn.Block` holds two of these: the CSR by destination (rows = destinations,
columns = sources, entries in the block's edge order) and its transpose (rows = sources, columns =
destinations), whose ``eids`` map each entry back to the block's edge order, so per-edge values
are always passed in one order and never permuted per call.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Hashable, TypeVar

import torch

__all__ = ["CSR"]

T = TypeVar("T")


@dataclass(kw_only=True, eq=False)
class CSR:
    """Rows ``indptr [R + 1]`` over column ids ``indices [E]``; entry ``j`` carries edge ``eids[j]``.

    Shapes: ``indptr`` int64 ``[R + 1]``, ``indices`` int64 ``[E]`` in ``[0, C)``, ``eids`` int64
    ``[E]`` (a permutation of ``[0, E)``) or None for the identity (entry ``j`` is edge ``j``).
    """

    indptr: torch.Tensor
    indices: torch.Tensor
    eids: torch.Tensor | None
    num_cols: int
    _cache: dict[Hashable, Any] = field(default_factory=dict, init=False, repr=False)

    @property
    def num_rows(self) -> int:
        return int(self.indptr.numel()) - 1

    @property
    def num_entries(self) -> int:
        return int(self.indices.numel())

    def cached(self, key: Hashable, build: Callable[[], T]) -> T:
        """A backend's derived array for this structure, built once under ``key``."""
        if key not in self._cache:
            self._cache[key] = build()
        return self._cache[key]

    @property
    def row_index(self) -> torch.Tensor:
        """int64 ``[E]``: the row of each entry (cached)."""
        return self.cached("row_index", lambda: torch.repeat_interleave(
            torch.arange(self.num_rows, dtype=torch.long, device=self.indptr.device), self.indptr.diff(),
            output_size=self.num_entries))
