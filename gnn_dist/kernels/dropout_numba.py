"""The partition-independent dropout (:mod:`gnn_dist.nn.dropout`) on CPU, compiled with numba:
the keep mask in one pass per element (the torch path makes ~12 int64 passes over temporaries)
and the masked scale ``x * mask * s`` in one pass (torch's product with a boolean mask converts
it element by element: ~10x slower); a hidden layer's ReLU, its mask and its scale in one pass
(:func:`relu_dropout`), and their backward in one. The same bits as the torch path
(``tests/gnn_dist/nn/test_dropout_numba.py`` compares them).
"""

from __future__ import annotations

import numba
import numpy as np

from .hash_numba import GOLDEN64, as_uint64, mix64
from .njit import cached_njit

__all__ = ["keep_mask", "masked_scale", "relu_dropout", "relu_dropout_backward"]


@cached_njit()
def _column_keys(width: int) -> np.ndarray:
    """uint64 ``[width]``: each feature's hash, ``mix(j + GOLDEN)``."""
    cols = np.empty(width, dtype=np.uint64)
    for j in range(width):
        cols[j] = mix64(np.uint64(j) + GOLDEN64)
    return cols


@cached_njit()
def _row_key(base: np.uint64, node_id: np.int64) -> np.uint64:
    """A row's hash, ``mix(absorb(base, id))``."""
    return mix64(base + mix64(np.uint64(node_id) + GOLDEN64))


@cached_njit()
def _kept(row: np.uint64, col: np.uint64, threshold: np.uint64) -> bool:
    """Whether the dropout keeps the element of row hash ``row`` and feature hash ``col``."""
    return (mix64(row + col) >> np.uint64(32)) >= threshold


@cached_njit(parallel=True)
def _keep_rows(ids: np.ndarray, base: np.uint64, threshold: np.uint64, out: np.ndarray) -> None:
    """out bool [N, F]: ``(mix(absorb(base, ids[i]) + mix(j + GOLDEN)) >> 32) >= threshold``."""
    cols = _column_keys(out.shape[1])
    for i in numba.prange(out.shape[0]):
        row = _row_key(base, ids[i])
        for j in range(out.shape[1]):
            out[i, j] = _kept(row, cols[j], threshold)


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


RELU_PASSES = np.uint8(2)
"""Bit of :func:`relu_dropout`'s code: ReLU's backward passes the gradient (its output > 0 or NaN)."""
KEPT = np.uint8(1)
"""Bit of :func:`relu_dropout`'s code: dropout keeps the element."""


@cached_njit(parallel=True)
def _relu_dropout(x: np.ndarray, ids: np.ndarray, base: np.uint64, threshold: np.uint64, scale: np.float32,
                  out: np.ndarray, code: np.ndarray) -> None:
    cols = _column_keys(x.shape[1])
    one = np.float32(1.0)
    zero = np.float32(0.0)
    for i in numba.prange(x.shape[0]):
        row = _row_key(base, ids[i])
        for j in range(x.shape[1]):
            keep = _kept(row, cols[j], threshold)
            v = x[i, j]
            r = zero if v < zero else v          # torch.relu: -0.0 and NaN pass as they are
            out[i, j] = r * (one if keep else zero) * scale
            code[i, j] = (KEPT if keep else np.uint8(0)) | (np.uint8(0) if r <= zero else RELU_PASSES)


def relu_dropout(x: np.ndarray, row_ids: np.ndarray, base: int, threshold: int, scale: float
                 ) -> tuple[np.ndarray, np.ndarray]:
    """``(out, code)``: float32 ``out [N, F]`` = ``masked_scale(relu(x), keep_mask(row_ids, base,
    threshold, F), scale)`` bit for bit (torch's ``relu`` then the hash dropout), in one pass; uint8
    ``code [N, F]`` what the backward needs (:data:`KEPT`, :data:`RELU_PASSES`): one byte an
    element, where the two separate ops keep the mask and ReLU's float output."""
    out = np.empty_like(x)
    code = np.empty(x.shape, dtype=np.uint8)
    if out.size:
        _relu_dropout(x, np.ascontiguousarray(row_ids, dtype=np.int64), as_uint64(base), np.uint64(threshold),
                      np.float32(scale), out, code)
    return out, code


@cached_njit(parallel=True)
def _relu_dropout_backward(grad: np.ndarray, code: np.ndarray, scale: np.float32, out: np.ndarray) -> None:
    one = np.float32(1.0)
    zero = np.float32(0.0)
    for i in numba.prange(grad.shape[0]):
        for j in range(grad.shape[1]):
            c = code[i, j]
            out[i, j] = grad[i, j] * (one if c & KEPT else zero) * scale if c & RELU_PASSES else zero


def relu_dropout_backward(grad: np.ndarray, code: np.ndarray, scale: float) -> np.ndarray:
    """The gradient of :func:`relu_dropout`'s input from its output's ``grad [N, F]``: the
    dropout's backward (``grad * mask * scale``), then ReLU's (0 where its output was <= 0), as
    torch's two backward ops compute it, bit for bit."""
    out = np.empty_like(grad)
    if out.size:
        _relu_dropout_backward(grad, code, np.float32(scale), out)
    return out
