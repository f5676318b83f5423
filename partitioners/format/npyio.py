"""Write ``.npy`` files while hashing them, and check one stored file against its entry.

Every array of a partition folder goes through :func:`save_array`, which returns the
:class:`FileEntry` (relative path, size, sha256, dtype, shape) that ``partition.json`` records,
and comes back through :func:`load_array`, which checks the file against that entry and names
the file in any :class:`~partitioners.errors.PartitionFormatError`.
"""

from __future__ import annotations

import hashlib
import math
from collections import deque
import os
import tokenize
from contextlib import contextmanager
from pathlib import Path
from typing import Any, BinaryIO, Iterator

import numpy as np

from ..errors import PartitionFormatError
from .meta import FileEntry

__all__ = ["save_array", "ArrayStream", "background_io", "load_array", "read_npy_header", "sha256_file", "check_entry_file",
           "HashingWriter", "FSYNC"]

FSYNC = True
"""fsync every file and folder the writer makes, so a power loss cannot leave a renamed folder
whose files are not on disk yet."""

_CHUNK = 1 << 22


class _Chunk:
    """One chunk's hash and write (two futures) as one future: done when both are; the first
    exception of the two."""

    def __init__(self, *futures: Any) -> None:
        self.futures = futures

    def done(self) -> bool:
        return all(f.done() for f in self.futures)

    def exception(self) -> BaseException | None:
        errors = [f.exception() for f in self.futures]
        return next((e for e in errors if e is not None), None)

    def result(self) -> None:
        for f in self.futures:
            f.result()


class _Background:
    """Three worker threads for the writer (see :func:`background_io`): one hashes the chunks
    of :class:`ArrayStream` files in order, one writes them in order (the two run side by side
    on the same bytes), one fsyncs finished files. All release the GIL in their system calls
    and in sha256, so they overlap the main thread's gathering and each other."""

    MAX_PENDING = 2
    """Chunks queued for writing at most: the main thread waits beyond (bounds the memory)."""

    def __init__(self) -> None:
        from concurrent.futures import ThreadPoolExecutor

        self.hasher = ThreadPoolExecutor(max_workers=1, thread_name_prefix="npy-hash")
        self.writer = ThreadPoolExecutor(max_workers=1, thread_name_prefix="npy-write")
        self.syncer = ThreadPoolExecutor(max_workers=1, thread_name_prefix="npy-fsync")
        self.writes: deque[_Chunk] = deque()
        self.syncs: list[Any] = []

    def write(self, w: HashingWriter, data: memoryview) -> _Chunk:
        """Queue ``data`` for ``w`` (its hash on one thread, its write on another); returns the
        chunk's future."""
        while len(self.writes) >= self.MAX_PENDING:
            self.writes.popleft().result()
        w.size += len(data)
        chunk = _Chunk(self.hasher.submit(w.h.update, data), self.writer.submit(w.f.write, data))
        self.writes.append(chunk)
        return chunk

    def fsync(self, fd: int) -> None:
        dup = os.dup(fd)  # the caller closes its file; this copy stays open until synced

        def sync() -> None:
            try:
                os.fsync(dup)
            finally:
                os.close(dup)
        self.syncs.append(self.syncer.submit(sync))

    def wait(self) -> None:
        try:
            for future in [*self.writes, *self.syncs]:
                future.result()  # the first failure (disk full, I/O error) is raised here
        finally:
            for pool in (self.hasher, self.writer, self.syncer):
                pool.shutdown(wait=True)


_BACKGROUND: _Background | None = None


@contextmanager
def background_io() -> Iterator[None]:
    """Within the block, :class:`ArrayStream` hashes its chunks on a background thread and
    writes them on another, and the fsync of every file :func:`save_array` and
    :class:`ArrayStream` write runs on a third; leaving the block waits for all of them (and raises the first error), so what
    comes after (the rename that publishes a folder) finds every file on disk. The arrays given
    to :meth:`ArrayStream.write` inside the block must not be changed afterwards."""
    global _BACKGROUND
    if _BACKGROUND is not None:
        yield
        return
    _BACKGROUND = _Background()
    background = _BACKGROUND
    try:
        yield
    finally:
        _BACKGROUND = None
        background.wait()


def _fsync(f: BinaryIO) -> None:
    f.flush()
    if not FSYNC:
        return
    if _BACKGROUND is not None:
        _BACKGROUND.fsync(f.fileno())
    else:
        os.fsync(f.fileno())


class HashingWriter:
    """A write-only file object that forwards bytes to ``f`` and feeds them to sha256: ``size``
    counts them, ``h`` hashes them (also for checkpoints, :mod:`gnn_dist.checkpoints`)."""

    def __init__(self, f: BinaryIO) -> None:
        self.f = f
        self.h = hashlib.sha256()
        self.size = 0

    def write(self, data: bytes | memoryview) -> int:
        self.h.update(data)
        self.size += len(data)
        return self.f.write(data)

    def flush(self) -> None:
        self.f.flush()


def save_array(root: Path, rel_path: str, arr: np.ndarray) -> FileEntry:
    """Write ``arr`` to ``root / rel_path`` as ``.npy`` (no pickle) and return its entry.

    Inside :func:`background_io` the hashing and writing run on its thread (``arr`` must not be
    changed afterwards); the bytes are the same."""
    arr = np.ascontiguousarray(arr)
    if _BACKGROUND is not None and arr.ndim >= 1:
        with ArrayStream(root, rel_path, arr.dtype, arr.shape) as out:
            out.write(arr)
        assert out.entry is not None
        return out.entry
    path = root / rel_path
    with open(path, "wb") as f:
        w = HashingWriter(f)
        np.lib.format.write_array(w, arr, allow_pickle=False)
        _fsync(f)
    return FileEntry(path=rel_path, size=w.size, sha256=w.h.hexdigest(), dtype=arr.dtype.name,
                     shape=tuple(int(s) for s in arr.shape))


class ArrayStream:
    """Write one ``.npy`` of a known dtype and shape chunk by chunk, hashing it as it goes: the
    bytes are those :func:`save_array` writes for the whole array, which never exists.

    ::

        with ArrayStream(root, "part-00000/features.npy", np.float32, (n, f)) as out:
            for rows in chunks:
                out.write(rows)
        entry = out.entry

    Leaving the block early (an exception) leaves a partial file for the caller's temporary
    folder to remove; leaving it normally with rows missing raises ValueError.
    """

    def __init__(self, root: Path, rel_path: str, dtype: np.dtype | type, shape: tuple[int, ...]) -> None:
        self.root, self.rel_path = root, rel_path
        self.dtype, self.shape = np.dtype(dtype), tuple(int(s) for s in shape)
        self.rows = 0
        self.entry: FileEntry | None = None
        self._f: BinaryIO | None = None
        self._w: HashingWriter | None = None
        self._bg: _Background | None = None
        self._pending: list[Any] = []

    def __enter__(self) -> "ArrayStream":
        self._f = open(self.root / self.rel_path, "wb")
        self._w = HashingWriter(self._f)
        header = {"descr": np.lib.format.dtype_to_descr(self.dtype), "fortran_order": False,
                  "shape": self.shape}
        np.lib.format.write_array_header_1_0(self._w, header)
        self._bg = _BACKGROUND
        return self

    def write(self, rows: np.ndarray) -> None:
        """Append ``rows`` (``[k, *shape[1:]]``, cast to the stream's dtype)."""
        rows = np.ascontiguousarray(rows, dtype=self.dtype)
        if rows.shape[1:] != self.shape[1:]:
            raise ValueError(f"{self.rel_path}: rows of shape {rows.shape[1:]}, expected {self.shape[1:]}")
        self.rows += rows.shape[0] if rows.ndim else 1
        if self.shape and self.rows > self.shape[0]:
            raise ValueError(f"{self.rel_path}: more than the {self.shape[0]} rows of the header")
        assert self._w is not None
        data = memoryview(rows.reshape(-1)).cast("B")  # no copy of the rows
        if self._bg is None:
            self._w.write(data)
        else:
            self._pending = [f for f in self._pending if not (f.done() and f.exception() is None)]
            self._pending.append(self._bg.write(self._w, data))

    def __exit__(self, exc_type: object, *rest: object) -> None:
        assert self._f is not None and self._w is not None
        try:
            failed = None
            for future in self._pending:  # this file's chunks are written before it closes
                if future.exception() is not None and failed is None:
                    failed = future.exception()
            if failed is not None and exc_type is None:
                raise failed
            if exc_type is None:
                expected = self.shape[0] if self.shape else 1
                if self.rows != expected:
                    raise ValueError(f"{self.rel_path}: {self.rows} rows written, the header says {expected}")
                _fsync(self._f)
                self.entry = FileEntry(path=self.rel_path, size=self._w.size,
                                       sha256=self._w.h.hexdigest(), dtype=self.dtype.name,
                                       shape=self.shape)
        finally:
            self._f.close()


def sha256_file(path: Path) -> str:
    """Hex sha256 of a file, read in 4 MiB chunks."""
    h = hashlib.sha256()
    with open(path, "rb") as f:
        while chunk := f.read(_CHUNK):
            h.update(chunk)
    return h.hexdigest()


def check_entry_file(root: Path, entry: FileEntry, *, check_hash: bool) -> Path:
    """Check that the file of ``entry`` exists and has its size (and sha256); return its path."""
    path = root / entry.path
    if not path.is_file():
        raise PartitionFormatError(f"missing file (listed in partition.json as {entry.path!r})",
                                   path=str(path))
    size = path.stat().st_size
    if size != entry.size:
        raise PartitionFormatError(f"size mismatch: the file has {size} bytes, partition.json says "
                                   f"{entry.size} (truncated or replaced?)", path=str(path))
    if check_hash:
        digest = sha256_file(path)
        if digest != entry.sha256:
            raise PartitionFormatError(f"sha256 mismatch: the file hashes to {digest}, partition.json "
                                       f"says {entry.sha256} (the file is corrupt or was modified)",
                                       path=str(path))
    return path


_HEADER_ERRORS = (ValueError, TypeError, SyntaxError, EOFError, OSError, OverflowError,
                  RecursionError, MemoryError, UnicodeDecodeError, tokenize.TokenError)
"""What numpy's header parser raises on malformed bytes (it evaluates the header as a literal)."""


def read_npy_header(path: Path) -> tuple[np.dtype, tuple[int, ...], bool, int]:
    """``(dtype, shape, fortran_order, data_offset)`` from the header of the ``.npy`` at ``path``.

    Checks, before any data is read, that the header parses (format versions 1.0 and 2.0, no
    pickled objects) and that the file holds exactly the bytes the header promises. Raises
    :class:`PartitionFormatError` naming the file otherwise.
    """
    fmt = np.lib.format
    try:
        with open(path, "rb") as f:
            version = fmt.read_magic(f)
            if version not in ((1, 0), (2, 0)):
                raise ValueError(f".npy format version {version} (this reader knows 1.0 and 2.0)")
            read = fmt.read_array_header_1_0 if version == (1, 0) else fmt.read_array_header_2_0
            shape, fortran_order, dtype = read(f)
            offset = f.tell()
    except _HEADER_ERRORS as exc:
        raise PartitionFormatError(f"not a readable .npy file: bad header ({exc})",
                                   path=str(path)) from None
    if dtype.hasobject:
        raise PartitionFormatError(f"not a plain .npy array: dtype {dtype} holds Python objects",
                                   path=str(path))
    if any(s < 0 for s in shape):
        raise PartitionFormatError(f"not a readable .npy file: the header's shape {list(shape)} "
                                   f"has a negative length", path=str(path))
    data_bytes = math.prod(shape) * dtype.itemsize
    size = path.stat().st_size
    if offset + data_bytes != size:
        raise PartitionFormatError(f"not a readable .npy file: the header promises {data_bytes} "
                                   f"bytes of data ({dtype}{list(shape)}) after {offset} header "
                                   f"bytes, but the file has {size} bytes (truncated or "
                                   f"corrupt?)", path=str(path))
    return dtype, shape, bool(fortran_order), offset


def load_array(root: Path, entry: FileEntry, *, mmap: bool, check_hash: bool) -> np.ndarray:
    """Load the ``.npy`` of ``entry`` after :func:`check_entry_file` and :func:`read_npy_header`;
    check its dtype and shape against the entry. ``mmap`` opens it with ``mmap_mode="r"``."""
    path = check_entry_file(root, entry, check_hash=check_hash)
    dtype, shape, fortran_order, _ = read_npy_header(path)
    if dtype.name != entry.dtype:
        raise PartitionFormatError(f"dtype mismatch: the file holds {dtype.name}, partition.json "
                                   f"says {entry.dtype}", path=str(path))
    if not dtype.isnative:
        raise PartitionFormatError(f"byte order {dtype.str!r} is not this machine's; rewrite the "
                                   f"partition on this machine", path=str(path))
    if tuple(shape) != entry.shape:
        raise PartitionFormatError(f"shape mismatch: the file holds {list(shape)}, partition.json "
                                   f"says {list(entry.shape)}", path=str(path))
    if fortran_order and len(shape) > 1:
        raise PartitionFormatError("the array is stored in Fortran order; format v1 stores "
                                   "C order (rewrite the partition)", path=str(path))
    try:
        arr = np.load(path, mmap_mode="r" if mmap else None, allow_pickle=False)
    except (ValueError, OSError, EOFError) as exc:
        raise PartitionFormatError(f"not a readable .npy file ({exc})", path=str(path)) from exc
    if not isinstance(arr, np.ndarray):
        raise PartitionFormatError("not a plain .npy array", path=str(path))
    return arr
