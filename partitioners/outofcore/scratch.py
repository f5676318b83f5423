"""Scratch files of an out-of-core run: raw arrays on disk, memory-mapped.

A :class:`Scratch` is a private folder (``.gnn-dist-scratch-<pid>-<hex>`` inside a folder the
caller chooses, by default the partition folder's parent, which has room for the partition
anyway). :meth:`Scratch.array` makes a writable memory map of a new raw file;
:meth:`Scratch.freeze` reopens it read-only. On Linux and macOS the file is unlinked as soon as
it is mapped read-only: the mapping keeps its pages, the disk space comes back when the array is
garbage-collected or the process exits, and a crash leaves nothing behind. Pages of a memory map
are file-backed, so they count against the page cache, not the process's anonymous memory, and
the kernel can write them out under memory pressure.
"""

from __future__ import annotations

import logging
import os
import secrets
import shutil
import weakref
from pathlib import Path
from typing import Any

import numpy as np

__all__ = ["Scratch"]

log = logging.getLogger(__name__)


def _reserve(fd: int, size: int, path: Path) -> None:
    """Allocate ``size`` bytes of disk for the file now: a memory map that cannot write a page
    when the disk is full gets SIGBUS (the process dies without a word), so a full disk must be
    found here, as an OSError naming the folder and the fix."""
    try:
        if hasattr(os, "posix_fallocate"):
            os.posix_fallocate(fd, 0, size)
        else:  # no fallocate (macOS): a sparse file; a full disk shows later
            os.ftruncate(fd, size)
    except OSError as exc:
        raise OSError(exc.errno, f"scratch folder {path.parent.parent}: no room for a work array "
                                 f"of {size:,} bytes ({exc.strerror}); free space there or pass "
                                 f"--scratch-dir on a disk with room (about 8 bytes per edge, 16 "
                                 f"with --symmetrize)") from None


class Scratch:
    """A private temporary folder for memory-mapped work arrays (module docstring)."""

    def __init__(self, parent: str | os.PathLike[str]) -> None:
        parent = Path(parent)
        if not parent.is_dir():
            raise FileNotFoundError(f"scratch folder {parent} does not exist; pass an existing "
                                    f"folder with room for the graph's edges (--scratch-dir)")
        self.path = parent / f".gnn-dist-scratch-{os.getpid()}-{secrets.token_hex(4)}"
        self.path.mkdir()
        self._count = 0
        self._kept: list[Path] = []

    def array(self, name: str, dtype: Any, shape: int | tuple[int, ...]) -> np.memmap:
        """A new zero-filled writable memory map ``dtype[shape]``, its disk allocated up front
        (a full disk is an OSError here, not a crash later). A zero-length array is an in-memory
        empty array."""
        shape = (shape,) if isinstance(shape, int) else tuple(shape)
        if int(np.prod(shape)) == 0:
            return np.zeros(shape, dtype=dtype)  # type: ignore[return-value]
        self._count += 1
        path = self.path / f"{self._count:03d}-{name}.raw"
        size = int(np.prod(shape)) * np.dtype(dtype).itemsize
        with open(path, "wb") as f:
            _reserve(f.fileno(), size, path)
        return np.memmap(path, dtype=dtype, mode="r+", shape=shape)

    def freeze(self, arr: np.ndarray, length: int | None = None) -> np.ndarray:
        """``arr`` (from :meth:`array`) read-only, its first ``length`` entries (default: all);
        the file is truncated to them and unlinked once mapped (kept until :meth:`close` where
        an open file cannot be unlinked)."""
        if not isinstance(arr, np.memmap) or arr.filename is None:
            return arr if length is None else arr[:length]
        path = Path(arr.filename)
        dtype, shape = arr.dtype, arr.shape
        if length is not None:
            shape = (int(length), *shape[1:])
        del arr  # no msync: the read-only map of the same file sees the page cache
        size = int(np.prod(shape)) * dtype.itemsize
        os.truncate(path, size)
        if size == 0:
            path.unlink()
            return np.zeros(shape, dtype=dtype)
        frozen = np.memmap(path, dtype=dtype, mode="r", shape=shape)
        try:
            path.unlink()
        except OSError:  # Windows: an open file stays; removed at close()
            self._kept.append(path)
        return frozen

    def keep_until_collected(self, owner: object) -> None:
        """Remove the folder when ``owner`` (the graph whose arrays live here) is garbage-collected
        or at interpreter exit, whichever comes first."""
        weakref.finalize(owner, shutil.rmtree, self.path, True)

    def close(self) -> None:
        """Remove the folder (what :meth:`freeze` could not unlink, and unfrozen arrays)."""
        shutil.rmtree(self.path, ignore_errors=True)

    def __enter__(self) -> "Scratch":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
