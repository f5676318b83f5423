"""The chunk steps every bounded-memory pass takes (graph checks, the out-of-core read, the
writer, the quality report): rows of an array by a byte budget, CSR rows by an entry budget,
and memory maps handed to numba's kernels. Torch-free."""

from __future__ import annotations

from typing import Iterator

import numpy as np

__all__ = ["plain", "row_ranges", "rows_per_step"]


def plain(a: np.ndarray) -> np.ndarray:
    """The array as a base ndarray: a memory map's own view (numba's kernels type it as a
    plain array), else ``np.asarray``."""
    return a.view(np.ndarray) if isinstance(a, np.memmap) else np.asarray(a)


def rows_per_step(a: np.ndarray, budget: int) -> int:
    """Rows of ``a`` (along its first axis) that fit in ``budget`` bytes, at least one."""
    row = max(1, int(np.prod(a.shape[1:], dtype=np.int64)) * a.dtype.itemsize)
    return max(1, budget // row)


def row_ranges(indptr: np.ndarray, limit: int) -> Iterator[tuple[int, int]]:
    """Row ranges ``[lo, hi)`` of a CSR with at most ``limit`` entries each (or one row)."""
    n = indptr.size - 1
    lo = 0
    while lo < n:
        hi = int(np.searchsorted(indptr, int(indptr[lo]) + limit, side="right")) - 1
        hi = min(n, max(hi, lo + 1))
        yield lo, hi
        lo = hi
