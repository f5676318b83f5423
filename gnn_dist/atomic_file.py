"""Write a file whole or not at all: a temporary file beside it, fsync, rename, fsync the folder.

What every file gnn-dist's runtime writes for later reading goes through (checkpoints and their
checksums, the ``latest`` pointer, model files, predictions): a reader, or a run killed mid-write,
never sees a half-written file, and a failed write leaves the old file and no temporary.

A write the filesystem refuses (a full disk, ``ENOSPC``; a quota, ``EDQUOT``; a read-only mount,
``EROFS``; no permission; an I/O error) raises :class:`StorageError`: one line naming the file and
the reason, after the temporary file is removed. It is an ``OSError`` (not a ``ValueError``: the
input was fine, the machine was not), which ``gnn_dist.train`` reports as one line with exit code
1. Around a write that one rank makes, :func:`all_ranks_write` makes every rank raise it.
"""

from __future__ import annotations

import contextlib
import errno as errno_codes
import os
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import IO, Any

__all__ = ["atomic_write", "StorageError", "all_ranks_write"]


class StorageError(OSError):
    """A file could not be written (disk full, quota, read-only, permissions, I/O error); nothing
    of it was left behind. ``path`` is the file, ``errno`` the system's code (None: unknown)."""

    def __init__(self, message: str, *, path: str | os.PathLike | None = None, code: int | None = None,
                 reason: str | None = None) -> None:
        super().__init__(message)
        self.path = None if path is None else str(path)
        self.errno = code
        self.reason = reason or message
        """The system's words alone (``No space left on device``)."""

    @classmethod
    def of(cls, exc: OSError, path: str | os.PathLike, what: str = "") -> "StorageError":
        """The error of a write of ``path`` (``what`` names it: ``"the model file "``) that failed
        with ``exc``."""
        reason = exc.strerror or str(exc) or type(exc).__name__
        code = errno_codes.errorcode.get(exc.errno or -1)
        return cls(f"cannot write {what}{path}: {reason}" + (f" ({code})" if code else "")
                   + "; nothing was written (a previous file there is unchanged)", path=path, code=exc.errno,
                   reason=reason)


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


def _remove(tmp: str) -> None:
    try:
        os.unlink(tmp)
    except FileNotFoundError:
        pass
    except OSError:   # nothing more can be done; the next start removes it (checkpoint.remove_partial_writes)
        pass


def atomic_write(path: Path, write: Callable[[IO[bytes]], Any], *, what: str = "") -> None:
    """Write ``path`` with ``write(f)`` (``f`` a binary file) atomically and durably (see above).

    Raises:
        StorageError: the filesystem refused the write (``what``, e.g. ``"the model file "``,
            prefixes the path in its message); the temporary file is removed and ``path`` is
            as it was. Any other exception of ``write`` is raised as it is, also after the
            temporary file is removed.
    """
    path = Path(path)
    try:
        fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    except OSError as exc:
        raise StorageError.of(exc, path, what) from exc
    try:
        with os.fdopen(fd, "wb") as f:
            write(f)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException as exc:
        _remove(tmp)
        cause = _os_error(exc)
        if cause is None or isinstance(exc, StorageError):
            raise
        raise StorageError.of(cause, path, what) from exc
    _fsync_dir(path.parent)


def _os_error(exc: BaseException) -> OSError | None:
    """The ``OSError`` of a failed write: ``exc`` itself, or the one it was raised while handling
    (``torch.save``'s archive writer, closing after a write raised ENOSPC, raises a
    ``RuntimeError`` of its own over it)."""
    seen: set[int] = set()
    item: BaseException | None = exc
    while item is not None and id(item) not in seen:
        if isinstance(item, OSError):
            return item
        seen.add(id(item))
        item = item.__cause__ or item.__context__
    return None


@contextlib.contextmanager
def all_ranks_write(what: str) -> Iterator[None]:
    """``with all_ranks_write("writing the checkpoint ..."):`` around a write some ranks make (a
    collective: every rank enters it). A :class:`StorageError` on any rank is raised on every
    rank as a :class:`StorageError` (the failed rank's own, the others' naming it), so the job
    ends with one line and exit code 1 rather than a traceback; any other failure is shared as
    :func:`~gnn_dist.distributed.all_ranks_agree` shares it."""
    from .distributed import all_gather_json, all_ranks_agree

    failed: StorageError | None = None
    with all_ranks_agree(what):
        try:
            yield
        except StorageError as exc:
            failed = exc
    gathered = all_gather_json(None if failed is None else str(failed), what=f"agreement after {what}")
    if failed is not None:
        raise failed
    for rank, message in enumerate(gathered):
        if message is not None:
            raise StorageError(f"{what} failed on rank {rank}: {message}")
