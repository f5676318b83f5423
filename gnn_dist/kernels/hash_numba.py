"""The counter-based hash of :mod:`gnn_dist.hashing` in numba, on CPU: the same bits in uint64
arithmetic, one pass per element instead of the torch path's ~12 int64 passes over temporaries.

Used by the halo quantiser's stochastic rounding (:mod:`gnn_dist.distributed.quantize_numba`) and
by the partition-independent dropout's masks (:mod:`.dropout_numba`); their tests compare them
with the torch path bit for bit.
"""

from __future__ import annotations

import numba
import numpy as np

from ..hashing import GOLDEN, MUL1, MUL2
from .njit import cached_njit

__all__ = ["GOLDEN64", "mix64", "as_uint64"]

_M64 = (1 << 64) - 1
GOLDEN64 = np.uint64(GOLDEN & _M64)
"""The hash's constants as uint64 (:mod:`gnn_dist.hashing` holds them as int64)."""
_MUL1 = np.uint64(MUL1 & _M64)
_MUL2 = np.uint64(MUL2 & _M64)


def as_uint64(value: int) -> np.uint64:
    """An int64 hash value (torch's) as the uint64 word of the same bits."""
    return np.uint64(value & _M64)


@cached_njit()
def mix64(z: np.uint64) -> np.uint64:
    """:func:`gnn_dist.hashing.mix` on one uint64 word."""
    z = (z ^ (z >> np.uint64(30))) * _MUL1
    z = (z ^ (z >> np.uint64(27))) * _MUL2
    return z ^ (z >> np.uint64(31))
