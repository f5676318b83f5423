"""Write a file whole or not at all: a temporary file beside it, fsync, rename, fsync the folder.

What every file gnn-dist's runtime writes for later reading goes through (checkpoints and their
checksums, the ``latest`` pointer, model files, predictions): a reader, or a run killed mid-write,
never sees a half-written file, and a failed write leaves the old file and no temporary.

A write the filesystem refuses (a full disk, ``ENOSPC``; a quota, ``EDQUOT``; a read-only mount,
``EROFS``; no permission; an I/O error) raises :class:`StorageError`: one line naming the file and
the reason, after the temporary file is removed. It is an ``OSError`` (not a ``ValueError``: the
input was fine, the machine was not), which ``gnn_dist.train`` reports as one line with exit code
1. Around a write that one rank makes, :func:`all_ranks_write` makes every rank raise it;
:func:`rescued_write` writes what a refused write held to another folder (``--save-model``'s
weights). :func:`check_output_file` checks a path a run will write to, before it runs.
"""

from __future__ import annotations

import contextlib
import errno as errno_codes
import os
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import IO, Any

__all__ = ["atomic_write", "StorageError", "all_ranks_write", "check_output_file", "rescued_write"]


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


def check_output_file(path: str | os.PathLike, what: str) -> Path:
    """``path`` as a file this process may write: its folder exists, it is not a folder itself.
    Raises ``ValueError`` naming ``what`` (the flag) and the fix."""
    p = Path(path)
    if p.is_dir():
        raise ValueError(f"{what} {path}: is a folder; give the path of a file")
    parent = p.parent if str(p.parent) else Path(".")
    if not parent.is_dir():
        raise ValueError(f"{what} {path}: the folder {parent} does not exist; create it first")
    if not os.access(parent, os.W_OK):
        raise ValueError(f"{what} {path}: the folder {parent} is not writable")
    return p


def rescued_write(failed: StorageError, path: Path, write: Callable[[Any], None],
                  folders: Sequence[str | os.PathLike], what: str) -> StorageError:
    """The error to raise for a write of ``path`` the filesystem refused (``failed``), after
    writing the same file (``write(f)``) to the first of ``folders`` that takes it (same name,
    or a timestamped one if taken), so what it holds is not lost (``--save-model``'s trained
    weights): its message names where it is, or why no folder took it."""
    tried: list[str] = []
    seen: set[str] = set()
    for folder in folders:
        d = Path(folder)
        key = os.path.realpath(d)
        if key in seen or key == os.path.realpath(path.parent) or not d.is_dir():
            continue
        seen.add(key)
        target = d / path.name
        if target.exists() or os.path.realpath(target) == os.path.realpath(path):
            target = d / f"{path.stem}.{time.strftime('%Y%m%d-%H%M%S')}-{os.getpid()}{path.suffix}"
        try:
            atomic_write(target, write, what=what)
        except StorageError as exc:
            tried.append(f"{d}: {exc.reason}")
            continue
        return StorageError(f"{failed}; the trained weights were saved to {target} instead: move it to {path} (or "
                            f"predict with --model-file {target})", path=path, code=failed.errno)
    where = f" (tried {'; '.join(tried)})" if tried else " (no other folder to try)"
    return StorageError(f"{failed}; the trained weights could not be saved elsewhere either{where}: free space and "
                        f"train again (or resume from a checkpoint)", path=path, code=failed.errno)
