"""The halo quantiser (:mod:`.quantize`) on CPU: one pass per row, compiled with numba.

Bit for bit what the torch path computes (the same float32 operations in the same order, the
same hash in uint64 arithmetic; ``tests/gnn_dist/test_halo_quantize.py`` compares the two), at
a fraction of its cost: the torch path makes ~20 passes over an ``[R, F]`` temporary (the hash
alone ~12 int64 ones). Single-threaded: it runs on the thread that starts the exchange.
"""

from __future__ import annotations

import numpy as np

from ..kernels.hash_numba import GOLDEN64 as _GOLDEN
from ..kernels.hash_numba import as_uint64
from ..kernels.hash_numba import mix64 as _mix
from ..kernels.njit import cached_njit

__all__ = ["encode_rows_cpu", "decode_rows_cpu"]


@cached_njit()
def _encode(x: np.ndarray, ids: np.ndarray, base: np.uint64, bits: int, out: np.ndarray,
            zeros: np.ndarray, scales: np.ndarray) -> None:
    """x float32 [R, F], ids int64 [R] -> out uint8 [R, ceil(F bits / 8)], zeros float32 [R],
    scales uint16 [R] (bfloat16 bits). Per row: the range, then the hashes, the rounding noise,
    the levels and the packed bytes, each a plain loop over a row-sized scratch (loops LLVM can
    vectorise: 2x the one-loop version)."""
    rows, width = x.shape
    levels = np.float32((1 << bits) - 1)
    byte_shift = {8: 0, 4: 1, 2: 2, 1: 3}[bits]  # log2(values per byte)
    per_byte = 1 << byte_shift
    groups = (width + 3) // 4
    cols = np.empty(groups, dtype=np.uint64)
    for g in range(groups):
        cols[g] = _mix(np.uint64(g) + _GOLDEN)
    unit = np.float32(1.0 / 65536.0)
    half = np.float32(0.5)
    fbuf = np.empty(1, dtype=np.float32)
    ubuf = fbuf.view(np.uint32)
    hashes = np.empty(groups, dtype=np.uint64)
    noise = np.empty(groups * 4, dtype=np.float32)
    q = np.zeros(out.shape[1] * per_byte, dtype=np.uint8)
    for r in range(rows):
        lo = np.float32(np.inf)
        hi = np.float32(-np.inf)
        bad = np.float32(0.0)
        for j in range(width):
            v = x[r, j]
            bad += v - v  # NaN once a value is NaN or +-inf
            lo = min(lo, v)
            hi = max(hi, v)
        if width == 0:
            lo = np.float32(0.0)
            hi = np.float32(0.0)
        fbuf[0] = np.float32((hi - lo) / levels)
        b32 = (ubuf[0] + np.uint32(0xFFFF)) & np.uint32(0xFFFF0000)  # round up to bfloat16
        if b32 == 0:
            b32 = np.uint32(0x3F800000)  # 1.0: a constant row
        ubuf[0] = b32
        inv = np.float32(1.0) / fbuf[0]
        scales[r] = np.uint16(b32 >> np.uint32(16))
        if bad != 0:
            zeros[r] = np.float32(np.nan)
            continue
        zeros[r] = lo
        h_row = _mix(base + _mix(np.uint64(ids[r]) + _GOLDEN))
        for g in range(groups):
            hashes[g] = _mix(h_row + cols[g])
        for j in range(groups * 4):
            lane = (hashes[j >> 2] >> np.uint64(16 * (j & 3))) & np.uint64(0xFFFF)
            noise[j] = (np.float32(lane) + half) * unit
        for j in range(width):
            level = np.floor(np.float32((x[r, j] - lo) * inv + noise[j]))
            q[j] = np.uint8(min(max(level, np.float32(0.0)), levels))
        if per_byte == 1:
            for j in range(width):
                out[r, j] = q[j]
        else:
            for b in range(out.shape[1]):
                acc = np.uint8(0)
                for k in range(per_byte):
                    acc |= np.uint8(q[b * per_byte + k] << np.uint8(k * bits))
                out[r, b] = acc


@cached_njit()
def _decode(packed: np.ndarray, zeros: np.ndarray, scales: np.ndarray, bits: int, width: int,
            out: np.ndarray) -> None:
    rows = packed.shape[0]
    byte_shift = {8: 0, 4: 1, 2: 2, 1: 3}[bits]
    lane_mask = (1 << byte_shift) - 1
    mask = np.uint8((1 << bits) - 1)
    fbuf = np.empty(1, dtype=np.float32)
    ubuf = fbuf.view(np.uint32)
    for r in range(rows):
        zero = zeros[r]
        ubuf[0] = np.uint32(scales[r]) << np.uint32(16)
        scale = fbuf[0]
        for j in range(width):
            q = (packed[r, j >> byte_shift] >> np.uint8((j & lane_mask) * bits)) & mask
            out[r, j] = zero + scale * np.float32(q)


def encode_rows_cpu(x: np.ndarray, ids: np.ndarray, base: int, bits: int, nbytes: int) -> np.ndarray:
    """uint8 ``[R, nbytes + 6]``: the wire rows of float32 ``x [R, F]`` (see :mod:`.quantize`)."""
    rows = x.shape[0]
    out = np.empty((rows, nbytes + 6), dtype=np.uint8)
    packed = np.zeros((rows, nbytes), dtype=np.uint8)
    zeros = np.empty(rows, dtype=np.float32)
    scales = np.empty(rows, dtype=np.uint16)
    _encode(np.ascontiguousarray(x, dtype=np.float32), np.ascontiguousarray(ids, dtype=np.int64),
            as_uint64(base), bits, packed, zeros, scales)
    out[:, :nbytes] = packed
    out[:, nbytes:nbytes + 4] = zeros.view(np.uint8).reshape(rows, 4)
    out[:, nbytes + 4:] = scales.view(np.uint8).reshape(rows, 2)
    return out


def decode_rows_cpu(wire: np.ndarray, bits: int, width: int) -> np.ndarray:
    """float32 ``[R, width]`` from the wire rows ``[R, nbytes + 6]``."""
    rows = wire.shape[0]
    zeros = np.ascontiguousarray(wire[:, -6:-2]).view(np.float32).reshape(rows)
    scales = np.ascontiguousarray(wire[:, -2:]).view(np.uint16).reshape(rows)
    out = np.empty((rows, width), dtype=np.float32)
    _decode(np.ascontiguousarray(wire[:, :-6]), zeros, scales, bits, width, out)
    return out

