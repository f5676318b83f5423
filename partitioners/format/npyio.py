"""Write ``.npy`` files while hashing them, and check one stored file against its entry.

Every array of a partition folder goes through :func:`save_array`, which returns the
:class:`FileEntry` (relative path, size, sha256, dtype, shape) that ``partition.json`` records,
and comes back through :func:`load_array`, which checks the file against that entry and names
the file in any :class:`~partitioners.errors.PartitionFormatError`.
"""

from __future__ import annotations

import hashlib
import os
from pathlib import Path
from typing import BinaryIO

import numpy as np

from ..errors import PartitionFormatError
from .meta import FileEntry

__all__ = ["save_array", "load_array", "sha256_file", "check_entry_file", "HashingWriter", "FSYNC"]

FSYNC = True
"""fsync every file and folder the writer makes, so a power loss cannot leave a renamed folder
whose files are not on disk yet."""

_CHUNK = 1 << 22


class HashingWriter:
    """A write-only file object that forwards bytes to ``f`` and feeds them to sha256: ``size``
    counts them, ``h`` hashes them (also for checkpoints, :mod:`gnn_dist.checkpoint`)."""

    def __init__(self, f: BinaryIO) -> None:
        self.f = f
        self.h = hashlib.sha256()
        self.size = 0

    def write(self, data: bytes) -> int:
        self.h.update(data)
        self.size += len(data)
        return self.f.write(data)

    def flush(self) -> None:
        self.f.flush()


def save_array(root: Path, rel_path: str, arr: np.ndarray) -> FileEntry:
    """Write ``arr`` to ``root / rel_path`` as ``.npy`` (no pickle) and return its entry."""
    arr = np.ascontiguousarray(arr)
    path = root / rel_path
    with open(path, "wb") as f:
        w = HashingWriter(f)
        np.lib.format.write_array(w, arr, allow_pickle=False)
        f.flush()
        if FSYNC:
            os.fsync(f.fileno())
    return FileEntry(path=rel_path, size=w.size, sha256=w.h.hexdigest(), dtype=arr.dtype.name,
                     shape=tuple(int(s) for s in arr.shape))


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


def load_array(root: Path, entry: FileEntry, *, mmap: bool, check_hash: bool) -> np.ndarray:
    """Load the ``.npy`` of ``entry`` after :func:`check_entry_file`; check its dtype and shape
    against the entry. ``mmap`` opens it with ``mmap_mode="r"``."""
    path = check_entry_file(root, entry, check_hash=check_hash)
    try:
        arr = np.load(path, mmap_mode="r" if mmap else None, allow_pickle=False)
    except (ValueError, OSError, EOFError) as exc:
        raise PartitionFormatError(f"not a readable .npy file ({exc})", path=str(path)) from exc
    if not isinstance(arr, np.ndarray):
        raise PartitionFormatError("not a plain .npy array", path=str(path))
    if arr.dtype.name != entry.dtype:
        raise PartitionFormatError(f"dtype mismatch: the file holds {arr.dtype.name}, partition.json "
                                   f"says {entry.dtype}", path=str(path))
    if not arr.dtype.isnative:
        raise PartitionFormatError(f"byte order {arr.dtype.str!r} is not this machine's; rewrite the "
                                   f"partition on this machine", path=str(path))
    if tuple(arr.shape) != entry.shape:
        raise PartitionFormatError(f"shape mismatch: the file holds {list(arr.shape)}, partition.json "
                                   f"says {list(entry.shape)}", path=str(path))
    return arr
