"""The partition-independent dropout (:mod:`gnn_dist.nn.dropout`) on CPU, compiled with numba:
the keep mask in one pass per element (the torch path makes ~12 int64 passes over temporaries)
and the masked scale ``x * mask * s`` in one pass (torch's product with a boolean mask converts
it element by element: ~10x slower). The same bits as the torch path
(``tests/gnn_dist/nn/test_dropout_numba.py`` compares them).
"""

from __future__ import annotations

import numba
import numpy as np

from .hash_numba import GOLDEN64, as_uint64, mix64
from .njit import cached_njit

__all__ = ["keep_mask", "masked_scale"]


@cached_njit(parallel=True)
def _keep_rows(ids: np.ndarray, base: np.uint64, threshold: np.uint64, out: np.ndarray) -> None:
    """out bool [N, F]: ``(mix(absorb(base, ids[i]) + mix(j + GOLDEN)) >> 32) >= threshold``."""
    width = out.shape[1]
    cols = np.empty(width, dtype=np.uint64)
    for j in range(width):
        cols[j] = mix64(np.uint64(j) + GOLDEN64)
    for i in numba.prange(out.shape[0]):
        row = mix64(base + mix64(np.uint64(ids[i]) + GOLDEN64))
        for j in range(width):
            out[i, j] = (mix64(row + cols[j]) >> np.uint64(32)) >= threshold


def keep_mask(row_ids: np.ndarray, base: int, threshold: int, width: int) -> np.ndarray:
    """bool ``[N, width]``: the keep mask of :func:`gnn_dist.nn.dropout.hash_dropout` for rows of
    original ids ``row_ids`` (int64 ``[N]``), ``base`` the key's hash (an int64 value) and
    ``threshold`` ``p * 2**32``: the torch path's mask, bit for bit."""
    out = np.empty((row_ids.shape[0], width), dtype=np.bool_)
    if out.size:
        _keep_rows(np.ascontiguousarray(row_ids, dtype=np.int64), as_uint64(base), np.uint64(threshold), out)
    return out


@cached_njit(parallel=True)
def _masked_scale(x: np.ndarray, mask: np.ndarray, scale: np.float32, out: np.ndarray) -> None:
    one = np.float32(1.0)
    zero = np.float32(0.0)
    for i in numba.prange(x.shape[0]):
        for j in range(x.shape[1]):
            out[i, j] = x[i, j] * (one if mask[i, j] else zero) * scale


def masked_scale(x: np.ndarray, mask: np.ndarray, scale: float) -> np.ndarray:
    """float32 ``x [N, F] * mask * float32(scale)``, as torch's ``x.mul(mask).mul_(scale)``
    computes it (``x * 1`` or ``x * 0``, then one rounding of the product with the scale): the
    same bits, signed zeros and NaNs included."""
    out = np.empty_like(x)
    if out.size:
        _masked_scale(x, mask, np.float32(scale), out)
    return out
