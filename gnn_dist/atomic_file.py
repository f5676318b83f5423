"""Write a file whole or not at all: a temporary file beside it, fsync, rename, fsync the folder.

What every file gnn-dist's runtime writes for later reading goes through (checkpoints and their
checksums, the ``latest`` pointer, model files, predictions): a reader, or a run killed mid-write,
never sees a half-written file, and a failed write leaves the old file and no temporary.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import IO, Any

__all__ = ["atomic_write"]


def _fsync_dir(directory: Path) -> None:
    """Make a rename in ``directory`` durable (best effort: not every OS/filesystem allows it)."""
    try:
        fd = os.open(directory, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def atomic_write(path: Path, write: Callable[[IO[bytes]], Any]) -> None:
    """Write ``path`` with ``write(f)`` (``f`` a binary file) atomically and durably (see above)."""
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as f:
            write(f)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise
    _fsync_dir(path.parent)
