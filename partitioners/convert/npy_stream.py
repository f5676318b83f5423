"""Write a ``.npy`` file block by block, without knowing its length in advance.

:class:`NpyStreamWriter` writes a fixed-size placeholder header (:data:`HEADER_BYTES`, a
multiple of 64, so the data stays aligned for memory maps), appends C-order blocks of rows,
and at :meth:`~NpyStreamWriter.close` rewrites the header with the row count it saw. The file
is a plain ``.npy`` (format 1.0, native byte order, no pickle) that ``np.load`` reads. Memory:
one block at a time. :meth:`~NpyStreamWriter.widen` converts what was written so far to a
wider dtype (int32 ids that meet an id above 2**31 - 1), in blocks, once.

This module is torch-free.
"""

from __future__ import annotations

import os
import struct
from pathlib import Path
from typing import Any

import numpy as np

__all__ = ["HEADER_BYTES", "NpyStreamWriter", "npy_header"]

HEADER_BYTES = 128
"""Bytes of every header this module writes (magic, length, padded dict): room for two 20-digit axes."""

_COPY_ROWS_BYTES = 16 << 20
"""Bytes converted at a time by :meth:`NpyStreamWriter.widen`."""


def npy_header(dtype: np.dtype, shape: tuple[int, ...]) -> bytes:
    """The :data:`HEADER_BYTES`-byte format-1.0 header of a C-order ``dtype[shape]`` array."""
    fmt = np.lib.format
    text = repr({"descr": fmt.dtype_to_descr(dtype), "fortran_order": False,
                 "shape": tuple(int(s) for s in shape)})
    room = HEADER_BYTES - fmt.MAGIC_LEN - 2
    if len(text) + 1 > room:  # internal invariant: numeric dtypes and <= 2 axes fit
        raise ValueError(f"a .npy header for {dtype}{list(shape)} needs more than {HEADER_BYTES} bytes")
    return fmt.magic(1, 0) + struct.pack("<H", room) + (text.ljust(room - 1) + "\n").encode("latin1")


class NpyStreamWriter:
    """A ``.npy`` file at ``path`` of ``dtype`` rows shaped ``row_shape``, written block by block.

    ``rows``: the row count the caller expects (checked at :meth:`close`), or None to take
    whatever was appended. Not thread-safe; :meth:`abort` closes without a valid header (the
    caller removes the file, e.g. with its folder).
    """

    def __init__(self, path: Path, dtype: Any, row_shape: tuple[int, ...] = (), rows: int | None = None) -> None:
        self.path = Path(path)
        self.dtype = np.dtype(dtype).newbyteorder("=")
        if self.dtype.hasobject or self.dtype.names is not None:
            raise TypeError(f"{path}: NpyStreamWriter writes plain numeric arrays, not {self.dtype}")
        self.row_shape = tuple(int(s) for s in row_shape)
        self.expected_rows = rows
        self.rows = 0
        self._f = open(self.path, "wb")
        self._f.write(b"\0" * HEADER_BYTES)

    def append(self, block: np.ndarray) -> None:
        """Write ``block`` (``[n, *row_shape]``, cast to the writer's dtype) after the rows so far."""
        block = np.ascontiguousarray(block, dtype=self.dtype)
        if block.shape[1:] != self.row_shape:
            raise ValueError(f"{self.path}: a block of shape {block.shape} does not have rows of "
                             f"shape {self.row_shape}")
        if block.size:
            self._f.write(memoryview(block).cast("B"))
        self.rows += block.shape[0]

    def widen(self, dtype: Any) -> None:
        """Rewrite the rows so far as ``dtype`` (e.g. int32 -> int64) and append in it from now on."""
        dtype = np.dtype(dtype).newbyteorder("=")
        if dtype == self.dtype:
            return
        self._f.close()
        narrow = self.path.with_name(self.path.name + ".narrow")
        os.replace(self.path, narrow)
        old_dtype, rows = self.dtype, self.rows
        self.dtype, self.rows = dtype, 0
        self._f = open(self.path, "wb")
        self._f.write(b"\0" * HEADER_BYTES)
        if rows:
            old = np.memmap(narrow, dtype=old_dtype, mode="r", offset=HEADER_BYTES,
                            shape=(rows, *self.row_shape))
            step = max(1, _COPY_ROWS_BYTES // max(1, old.itemsize * int(np.prod(self.row_shape))))
            for start in range(0, rows, step):
                self.append(np.asarray(old[start:start + step]))
            del old
        narrow.unlink()

    def close(self) -> tuple[int, ...]:
        """Write the header, flush and fsync; return the array's shape. ValueError (the file is
        left for the caller to remove) when ``rows`` was given and differs."""
        try:
            if self.expected_rows is not None and self.rows != self.expected_rows:
                raise ValueError(f"{self.path.name}: {self.rows} rows were written, {self.expected_rows} "
                                 f"expected")
            shape = (self.rows, *self.row_shape)
            self._f.seek(0)
            self._f.write(npy_header(self.dtype, shape))
            self._f.flush()
            os.fsync(self._f.fileno())
        finally:
            self._f.close()
        return shape

    def abort(self) -> None:
        """Close the file as it is (its header is not valid)."""
        self._f.close()

    def __enter__(self) -> "NpyStreamWriter":
        return self

    def __exit__(self, exc_type: Any, *rest: Any) -> None:
        if exc_type is None:
            self.close()
        else:
            self.abort()
