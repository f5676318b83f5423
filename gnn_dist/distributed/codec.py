"""Wire codecs: how one direction of a halo exchange puts its rows on the wire and takes them off.

A codec turns the rows a rank sends (``[S, F...]``, grouped by destination, ``counts[q]`` rows
for rank ``q``) into one buffer and its per-peer split sizes for ``all_to_all_single``, says what
buffer the rows it receives need, and turns that buffer back into rows. Two kinds:

- :class:`CastCodec` (``fp32``, ``bf16``, ``fp16``): the rows cast to a float dtype, one row a
  split unit.
- :class:`QuantizedCodec` (``int8``, ``int4``, ``int2``, ``int1``, and ``adaptive:B``): each row
  quantised (:mod:`.quantize`) into bytes, one byte a split unit; the bit width of each
  (layer, sender, receiver) comes from a :class:`BitWidths` policy that every rank answers the
  same (a fixed width, or :class:`~.adaptive_bits.AdaptiveBits`).

The bytes counted for an exchange are its buffers' sizes: the real bytes on the wire, scales
included.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

import torch

from ..config.registry import register_choices
from .quantize import BITS, RowKey, decode_rows, encode_rows, row_bytes, row_ranges

__all__ = ["WireCodec", "CastCodec", "QuantizedCodec", "BitWidths", "FixedBits", "CAST_DTYPES",
           "QUANTIZED_BITS", "codec_names", "parse_codec"]

CAST_DTYPES: dict[str, torch.dtype] = {"fp32": torch.float32, "bf16": torch.bfloat16, "fp16": torch.float16}
"""The float wire dtypes by name."""
QUANTIZED_BITS: dict[str, int] = {f"int{b}": b for b in BITS}
"""The fixed quantised widths by name."""


def codec_names() -> tuple[str, ...]:
    """Every fixed-width codec name (``--halo-dtype``'s choices)."""
    return (*CAST_DTYPES, *QUANTIZED_BITS)


register_choices("wire_dtype", codec_names)   # --halo-dtype, --halo-grad-dtype (gnn_dist.config)


class WireCodec(Protocol):
    """One direction's wire format (see the module docstring)."""

    name: str

    def encode(self, rows: torch.Tensor, counts: list[int], ids: Callable[[], torch.Tensor],
               key: RowKey, rank: int) -> tuple[torch.Tensor, list[int]]:
        """``rows [S, F...]`` (``counts[q]`` for rank ``q``) -> (buffer, split sizes). ``ids()``:
        the rows' original ids (asked for only by codecs that key on them)."""
        ...

    def receive_buffer(self, rows: torch.Tensor, counts: list[int], key: RowKey,
                       rank: int) -> tuple[torch.Tensor, list[int], Any]:
        """An empty buffer for ``counts[q]`` rows from rank ``q``, shaped like ``rows``' rows,
        its split sizes, and what :meth:`decode` needs to read it (fixed now: the widths in
        force when the exchange starts)."""
        ...

    def decode(self, buffer: torch.Tensor, counts: list[int], layout: Any, row_shape: tuple[int, ...],
               dtype: torch.dtype) -> torch.Tensor:
        """The received ``buffer`` (``layout``: :meth:`receive_buffer`'s) -> rows
        ``[sum(counts), *row_shape]`` in ``dtype``."""
        ...


@dataclass(frozen=True, slots=True)
class CastCodec:
    """Rows cast to ``dtype`` (None: as they are)."""

    name: str
    dtype: torch.dtype | None

    def _wire(self, rows: torch.Tensor) -> torch.Tensor:
        if self.dtype is not None and rows.is_floating_point():
            return rows.to(self.dtype)
        return rows

    def encode(self, rows: torch.Tensor, counts: list[int], ids: Callable[[], torch.Tensor],
               key: RowKey, rank: int) -> tuple[torch.Tensor, list[int]]:
        return self._wire(rows).contiguous(), counts

    def receive_buffer(self, rows: torch.Tensor, counts: list[int], key: RowKey,
                       rank: int) -> tuple[torch.Tensor, list[int], Any]:
        dtype = self.dtype if self.dtype is not None and rows.is_floating_point() else rows.dtype
        return rows.new_empty((sum(counts), *rows.shape[1:]), dtype=dtype), counts, None

    def decode(self, buffer: torch.Tensor, counts: list[int], layout: Any, row_shape: tuple[int, ...],
               dtype: torch.dtype) -> torch.Tensor:
        return buffer.to(dtype)


AS_IS = CastCodec("as-is", None)
"""Rows as they are (evaluation's)."""


class BitWidths(Protocol):
    """The bits a value travels in, per layer and ordered pair of ranks; every rank must answer
    the same. When ``observes``, ``observe`` is given the statistics of the rows a rank sends to
    each peer: the sum over rows of ``F * (max - min)**2`` (a 0-dim tensor) and the values."""

    observes: bool

    def bits(self, layer: int, src: int, dst: int, backward: bool) -> int:
        ...

    def observe(self, layer: int, dst: int, backward: bool, range_sq: torch.Tensor, values: int) -> None:
        ...

    def describe(self) -> str:
        ...


@dataclass(frozen=True, slots=True)
class FixedBits:
    """Every value in ``width`` bits."""

    width: int
    observes = False

    def bits(self, layer: int, src: int, dst: int, backward: bool) -> int:
        return self.width

    def observe(self, layer: int, dst: int, backward: bool, range_sq: torch.Tensor, values: int) -> None:
        pass

    def describe(self) -> str:
        return f"int{self.width}"


class QuantizedCodec:
    """Rows quantised to the bits ``widths`` gives each (layer, sender, receiver)."""

    def __init__(self, name: str, widths: BitWidths) -> None:
        self.name = name
        self.widths = widths

    def _peer_bits(self, counts: list[int], key: RowKey, rank: int, *, sending: bool) -> list[int]:
        return [self.widths.bits(key.layer, rank, q, key.backward) if sending
                else self.widths.bits(key.layer, q, rank, key.backward) for q in range(len(counts))]

    def encode(self, rows: torch.Tensor, counts: list[int], ids: Callable[[], torch.Tensor],
               key: RowKey, rank: int) -> tuple[torch.Tensor, list[int]]:
        width = math.prod(rows.shape[1:])
        bits = self._peer_bits(counts, key, rank, sending=True)
        all_ids = ids()
        range_sq = None
        if self.widths.observes:
            lo, hi = row_ranges(rows)
            range_sq = (hi - lo).square()
        pieces, splits, start = [], [], 0
        for q, (count, b) in enumerate(zip(counts, bits)):
            if count:
                end = start + count
                if range_sq is not None:
                    self.widths.observe(key.layer, q, key.backward, range_sq[start:end].sum() * width, count * width)
                pieces.append(encode_rows(rows[start:end], all_ids[start:end], b, key).reshape(-1))
                start = end
            splits.append(count * row_bytes(width, b))
        buffer = torch.cat(pieces) if pieces else rows.new_empty((0,), dtype=torch.uint8)
        return buffer, splits

    def receive_buffer(self, rows: torch.Tensor, counts: list[int], key: RowKey,
                       rank: int) -> tuple[torch.Tensor, list[int], Any]:
        width = math.prod(rows.shape[1:])
        bits = self._peer_bits(counts, key, rank, sending=False)
        splits = [c * row_bytes(width, b) for c, b in zip(counts, bits)]
        return rows.new_empty((sum(splits),), dtype=torch.uint8), splits, bits

    def decode(self, buffer: torch.Tensor, counts: list[int], layout: Any, row_shape: tuple[int, ...],
               dtype: torch.dtype) -> torch.Tensor:
        width = math.prod(row_shape)
        out, start = [], 0
        for count, b in zip(counts, layout):
            if count:
                size = count * row_bytes(width, b)
                out.append(decode_rows(buffer[start:start + size].view(count, -1), b, row_shape, dtype))
                start += size
        if not out:
            return buffer.new_empty((0, *row_shape), dtype=dtype)
        return torch.cat(out)

    def __repr__(self) -> str:
        return f"QuantizedCodec({self.widths.describe()})"


def parse_codec(name: str | torch.dtype | None, *, adaptive: Any = None) -> WireCodec:
    """A codec by name (:func:`codec_names`; a float torch dtype; None: as they are), or the
    ``adaptive`` bit-width policy's."""
    if adaptive is not None:
        return QuantizedCodec(adaptive.describe(), adaptive)
    if name is None:
        return AS_IS
    if isinstance(name, torch.dtype):
        if not name.is_floating_point:
            raise ValueError(f"halo_dtype={name} must be a floating-point dtype")
        return CastCodec(str(name).removeprefix("torch."), name)
    if name in CAST_DTYPES:
        return CastCodec(name, CAST_DTYPES[name])
    if name in QUANTIZED_BITS:
        return QuantizedCodec(name, FixedBits(QUANTIZED_BITS[name]))
    raise ValueError(f"halo_dtype={name!r} is not supported; choose from {', '.join(codec_names())}")
