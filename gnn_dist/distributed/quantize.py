r"""Halo rows in 8, 4, 2 or 1 bits a value: per-row scale and zero point, unbiased stochastic rounding.

For a row :math:`x \in \mathbb{R}^F` (the trailing dims of a halo row, flattened) and ``b`` bits,
:math:`L = 2^b - 1` levels above the zero point:

.. math::
    z = \min_j x_j, \qquad
    s = \Big\lceil \frac{\max_j x_j - z}{L} \Big\rceil_{bf16}, \qquad
    q_j = \min\!\big(L, \lfloor (x_j - z)/s + u_j \rfloor\big), \qquad
    \hat x_j = z + s\, q_j

(:math:`\lceil\cdot\rceil_{bf16}`: rounded up to bfloat16, so the levels cover the row and
nothing is clipped; :math:`z` travels as float32, so a row far from 0 keeps its resolution). With :math:`u_j` uniform in
``[0, 1)``, :math:`\mathbb{E}[q_j] = (x_j - z)/s`: the estimate is unbiased, its variance
:math:`s^2 f_j (1 - f_j) \le s^2/4` (:math:`f_j` the fractional part of :math:`(x_j - z)/s`),
and :math:`|\hat x_j - x_j| < s`. A row whose values are all equal travels exactly (rows a ReLU
cleared, gradients of rows no loss reads).

Random bits: :math:`u_j` is 16 bits of the hash of ``(domain, seed, step, layer, original row
id, j // 4)`` (:mod:`gnn_dist.hashing`; one 64-bit hash gives 4 values' bits), plus half a
unit: a pure function of the key, so a row is rounded the same on any rank of any partition and
a resumed run rounds as the uninterrupted one did. (16 bits bound the rounding's bias by
:math:`2^{-17} s`.) The gradients' domain differs from the rows'.

Wire layout of one row: the ``q_j`` packed ``8 // b`` to a byte, value ``k`` of a byte at bits
``[k b, (k + 1) b)``, ``ceil(F b / 8)`` bytes, then ``z`` as float32 and ``s`` as bfloat16
(6 bytes, native byte order: every rank of a job shares it). Vectorised torch ops on any device;
on CPU a numba kernel writes the same bytes in one pass per row (:mod:`.quantize_numba`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch

from ..hashing import CHUNK_ELEMENTS, GOLDEN, IntLike, absorb, hash_bits, mix

__all__ = ["BITS", "HEADER_BYTES", "RowKey", "row_bytes", "encode_rows", "decode_rows", "encode_rows_torch",
           "decode_rows_torch", "rounding_noise", "row_ranges"]

BITS = (8, 4, 2, 1)
"""The bit widths a value can travel in."""
HEADER_BYTES = 6
"""Per row: the zero point (float32) and the scale (bfloat16)."""
_ROWS_DOMAIN = 0x68616C6F  # "halo": the rows of a forward exchange
_GRADS_DOMAIN = 0x67726164  # "grad": the halo gradients of a backward one


@dataclass(frozen=True, slots=True)
class RowKey:
    """What the rounding of one exchange is keyed by, besides each row's original id and the
    feature: the run's seed, the training step, the layer (the exchange's tag) and the direction."""

    seed: int
    step: IntLike
    layer: int
    backward: bool = False

    def base(self, device: torch.device) -> torch.Tensor:
        return hash_bits(_GRADS_DOMAIN if self.backward else _ROWS_DOMAIN, self.seed, self.step, self.layer,
                         device=device)


def row_bytes(num_values: int, bits: int) -> int:
    """Bytes one row of ``num_values`` values takes on the wire in ``bits`` bits (header included)."""
    _check_bits(bits)
    return (num_values * bits + 7) // 8 + HEADER_BYTES


def _check_bits(bits: int) -> None:
    if bits not in BITS:
        raise ValueError(f"bits={bits!r}: a halo value travels in one of {', '.join(map(str, BITS))} bits")


def rounding_noise(ids: torch.Tensor, num_values: int, key: RowKey) -> torch.Tensor:
    """float32 ``[R, num_values]`` in ``(0, 1)``: the :math:`u_j` of rows with original ids ``ids``."""
    device = ids.device
    groups = (num_values + 3) // 4
    out = torch.empty((ids.shape[0], groups * 4), dtype=torch.float32, device=device)
    if out.numel() == 0:
        return out[:, :num_values]
    base = key.base(device)
    cols = mix(torch.arange(groups, dtype=torch.long, device=device) + GOLDEN)
    shifts = torch.arange(0, 64, 16, dtype=torch.long, device=device)
    rows_per_chunk = max(1, CHUNK_ELEMENTS // groups)
    for lo in range(0, ids.shape[0], rows_per_chunk):
        hi = min(ids.shape[0], lo + rows_per_chunk)
        h = mix(absorb(base, ids[lo:hi].to(torch.long)).unsqueeze(1) + cols)  # [r, groups]
        lanes = (h.unsqueeze(2) >> shifts) & 0xFFFF  # four 16-bit lanes of each hash
        out[lo:hi] = ((lanes.to(torch.float32) + 0.5) * (1.0 / 65536.0)).reshape(hi - lo, groups * 4)
    return out[:, :num_values]


def row_ranges(rows: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """float32 ``[R]`` minima and maxima of the rows ``[R, F...]`` (flattened)."""
    flat = rows.reshape(rows.shape[0], -1).to(torch.float32)
    if flat.shape[1] == 0:
        zero = flat.new_zeros(flat.shape[0])
        return zero, zero
    lo, hi = torch.aminmax(flat, dim=1)
    return lo, hi


def _round_bf16(x: torch.Tensor) -> torch.Tensor:
    """``x`` (float32, >= 0) rounded up to bfloat16: its bits plus 0xFFFF, the low 16 cleared (int32
    ops on any device; the numba kernel does the same)."""
    bits = (x.contiguous().view(torch.int32) + 0xFFFF) & -0x10000
    return bits.view(torch.float32).to(torch.bfloat16)


def encode_rows(rows: torch.Tensor, ids: torch.Tensor, bits: int, key: RowKey) -> torch.Tensor:
    """uint8 ``[R, row_bytes(F, bits)]``: the rows ``[R, F...]`` (any float dtype) quantised.

    ``ids`` int64 ``[R]``: each row's original id (the rounding's key with ``key``). CPU rows
    take the numba kernel (:mod:`.quantize_numba`), others the torch ops: the same bytes."""
    _check_bits(bits)
    flat = rows.reshape(rows.shape[0], -1).to(torch.float32)
    if flat.device.type == "cpu":
        from .quantize_numba import encode_rows_cpu

        base = int(key.base(flat.device))
        return torch.from_numpy(encode_rows_cpu(flat.numpy(), ids.to(torch.int64).numpy(), base, bits,
                                                row_bytes(flat.shape[1], bits) - HEADER_BYTES))
    return encode_rows_torch(flat, ids, bits, key)


def encode_rows_torch(flat: torch.Tensor, ids: torch.Tensor, bits: int, key: RowKey) -> torch.Tensor:
    """:func:`encode_rows` of float32 ``[R, F]`` rows in torch ops (any device)."""
    num = flat.shape[0]
    width = flat.shape[1]
    levels = (1 << bits) - 1
    zero, hi = row_ranges(flat)
    scale = _round_bf16((hi - zero) / levels)
    scale = torch.where(scale == 0, torch.ones_like(scale), scale)
    t = (flat - zero.unsqueeze(1)) * (1.0 / scale.to(torch.float32)).unsqueeze(1)
    q = torch.floor(t + rounding_noise(ids, width, key)).clamp_(0, levels)
    finite = torch.isfinite(hi - zero)  # a row holding NaN or inf arrives as NaN
    q = torch.where(finite.unsqueeze(1), q, 0.0).to(torch.uint8)
    zero = torch.where(finite, zero, float("nan"))
    per_byte = 8 // bits
    pad = (-width) % per_byte
    if pad:
        q = torch.nn.functional.pad(q, (0, pad))
    if per_byte > 1:
        shifts = torch.arange(0, 8, bits, dtype=torch.uint8, device=q.device)
        q = (q.reshape(num, -1, per_byte) << shifts).sum(dim=2, dtype=torch.uint8)
    return torch.cat([q, zero.unsqueeze(1).view(torch.uint8), scale.unsqueeze(1).view(torch.uint8)], dim=1)


def _bytes_as(columns: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    """uint8 ``[R, k]`` columns (any strides and offset) read as ``dtype``: a fresh aligned copy."""
    return torch.empty(columns.shape, dtype=torch.uint8, device=columns.device).copy_(columns).view(dtype)


def decode_rows(wire: torch.Tensor, bits: int, row_shape: tuple[int, ...], dtype: torch.dtype) -> torch.Tensor:
    """``[R, *row_shape]`` in ``dtype``: rows encoded by :func:`encode_rows` (CPU: numba)."""
    _check_bits(bits)
    width = math.prod(row_shape)
    if wire.device.type == "cpu":
        from .quantize_numba import decode_rows_cpu

        out = torch.from_numpy(decode_rows_cpu(wire.contiguous().numpy(), bits, width))
        return out.to(dtype).reshape(wire.shape[0], *row_shape)
    return decode_rows_torch(wire, bits, row_shape, dtype)


def decode_rows_torch(wire: torch.Tensor, bits: int, row_shape: tuple[int, ...], dtype: torch.dtype) -> torch.Tensor:
    """:func:`decode_rows` in torch ops (any device)."""
    num = wire.shape[0]
    width = math.prod(row_shape)
    packed = wire[:, :-HEADER_BYTES]
    zero = _bytes_as(wire[:, -HEADER_BYTES:-2], torch.float32)  # [R, 1]
    scale = _bytes_as(wire[:, -2:], torch.bfloat16).to(torch.float32)  # [R, 1]
    per_byte = 8 // bits
    if per_byte > 1:
        shifts = torch.arange(0, 8, bits, dtype=torch.uint8, device=wire.device)
        q = ((packed.unsqueeze(2) >> shifts) & ((1 << bits) - 1)).reshape(num, -1)[:, :width]
    else:
        q = packed
    out = zero + scale * q.to(torch.float32)
    return out.to(dtype).reshape(num, *row_shape)
