"""A run's exclusive hold on an output folder (its ``--checkpoint-dir``): the lock file ``DIR/.lock``.

Two runs writing checkpoints into one folder overwrite each other's, and the loser's work is
gone. So a run holds ``DIR/.lock`` for its whole life: an advisory ``fcntl.flock`` (exclusive)
on that file, which also records its owner as JSON (``pid``, ``host``, ``run_id``, ``started``)
so that a refusal can name it.

- **Refused**: the flock is held by another process (a live run): :class:`RunLockError` (a
  ``ValueError``, so one line and exit code 2) naming the folder, the owner and the fix.
- **Stale**: the file exists but its flock is free. The kernel drops a flock when its process
  dies however it dies (even SIGKILL), so a free flock means its owner is gone: the lock is
  taken over, with one warning naming the old owner. A restart of the same job (same run id:
  torchrun's ``--rdzv-id`` and agent, :func:`default_run_id`) re-takes it with an info line.
- **Released**: at the end of the run the file is deleted (under the flock), so only a crash
  leaves a stale one. An acquirer checks, once it holds the flock, that the file it locked is
  still the one at ``DIR/.lock`` (a releasing owner may have just deleted it), else it retries.
- **In-process re-entry**: a process that already holds the folder's lock for the same run id
  gets the same hold back (counted; released when every holder released it).

Only rank 0 of a job takes the lock (the ranks of one job share the folder; see
:func:`gnn_dist.checkpoints.hold_checkpoint_dir`). The descriptor is opened ``O_CLOEXEC`` (no
program the run starts inherits it) and a forked child closes its copy at once (without
unlocking: the parent still holds it), so no other process keeps the lock alive after the run.
:func:`check_free` is the pre-launch check (``gnn_dist.train --validate``): it reports a live
holder without taking the lock. A filesystem without ``flock`` support is a warning and an
unlocked run, never a refusal.
"""

from __future__ import annotations

import atexit
import fcntl
import json
import logging
import os
import socket
import threading
import time
import uuid
from dataclasses import asdict, dataclass
from datetime import datetime
from pathlib import Path

from . import environ

__all__ = ["LOCK_NAME", "Owner", "RunLock", "RunLockError", "acquire", "check_free", "default_run_id", "read_owner"]

log = logging.getLogger(__name__)

LOCK_NAME = ".lock"
"""The lock file's name inside the locked folder."""
RETRY_S = 0.5
"""How long :func:`acquire` retries a busy lock before refusing (a pre-launch :func:`check_free`
holds a shared flock for an instant)."""

_TOKEN = uuid.uuid4().hex[:8]
"""Tells this process's run id from another process's that had the same pid."""
_HELD: dict[str, "RunLock"] = {}
"""The locks this process holds, by the lock file's real path."""
_GUARD = threading.Lock()


class RunLockError(ValueError):
    """The folder is locked by another live run (a ``ValueError``: the user's input, one line)."""


@dataclass(frozen=True, slots=True)
class Owner:
    """Who holds (or held) a lock: what its lock file records."""

    pid: int | None
    host: str
    run_id: str
    started: str

    def describe(self) -> str:
        pid = "pid ?" if self.pid is None else f"pid {self.pid}"
        return f"{pid} on host {self.host or '?'}, run id {self.run_id or '?'}, started {self.started or '?'}"

    @classmethod
    def parse(cls, text: str) -> Owner | None:
        """The owner a lock file's text names; None when it is empty or not a gnn-dist record."""
        try:
            data = json.loads(text)
        except ValueError:
            return None
        if not isinstance(data, dict):
            return None
        pid = data.get("pid")
        return cls(pid if isinstance(pid, int) else None, str(data.get("host", "")), str(data.get("run_id", "")),
                   str(data.get("started", "")))


def default_run_id() -> str:
    """This process's run id: under torchrun, ``TORCHELASTIC_RUN_ID`` (its ``--rdzv-id``; every
    ``gnn-dist train`` job uses the same one) and the agent's pid, which a restart of the job
    (``--max-restarts``) keeps and another job does not; else one of its own."""
    run = environ.elastic_run_id()
    if run is not None:
        return f"{run}/agent-{os.getppid()}"
    return f"pid-{os.getpid()}-{_TOKEN}"


def read_owner(directory: str | os.PathLike) -> Owner | None:
    """The owner ``DIR/.lock`` names (held or stale), or None when there is none or it is unreadable."""
    try:
        return Owner.parse((Path(directory) / LOCK_NAME).read_text())
    except (OSError, UnicodeDecodeError):
        return None


def _refusal(directory: str | os.PathLike, owner: Owner | None, what: str) -> RunLockError:
    who = "another run" if owner is None else f"another run ({owner.describe()})"
    return RunLockError(f"{what} {directory} is in use by {who}, which holds its lock file "
                        f"{Path(directory) / LOCK_NAME}; wait for that run to finish, or choose another {what}")


class RunLock:
    """This process's hold on a folder (from :func:`acquire`); :meth:`release` (or the end of a
    ``with`` block, or the process's exit) gives it up."""

    def __init__(self, directory: Path, fd: int | None, owner: Owner, key: str) -> None:
        self.directory = directory
        self.path = directory / LOCK_NAME
        self.owner = owner
        self._fd = fd
        self._key = key
        self._count = 1

    @property
    def held(self) -> bool:
        """Whether this process holds the flock (False once released, or when the filesystem has
        no flock and the run goes on unlocked)."""
        return self._fd is not None

    def release(self) -> None:
        """Give up one hold; the last one deletes the lock file and drops the flock. Idempotent."""
        with _GUARD:
            if self._count == 0:
                return
            self._count -= 1
            if self._count:
                return
            if _HELD.get(self._key) is self:
                del _HELD[self._key]
            fd, self._fd = self._fd, None
        if fd is None:
            return
        try:
            if _same_file(fd, self.path):   # still ours: delete it while holding the flock
                self.path.unlink()
        except OSError as exc:
            log.debug(f"cannot delete the lock file {self.path} ({exc})")
        finally:
            os.close(fd)   # drops the flock (this process's only descriptor of it)

    def _forget(self) -> None:
        """In a forked child: close the inherited descriptor without unlocking (the parent holds it)."""
        fd, self._fd, self._count = self._fd, None, 0
        if fd is not None:
            try:
                os.close(fd)
            except OSError:
                pass

    def __enter__(self) -> RunLock:
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()

    def __repr__(self) -> str:
        return f"RunLock({str(self.directory)!r}, {'held' if self.held else 'not held'}, run id {self.owner.run_id})"


def _same_file(fd: int, path: Path) -> bool:
    try:
        a, b = os.fstat(fd), os.stat(path)
    except FileNotFoundError:
        return False
    return (a.st_dev, a.st_ino) == (b.st_dev, b.st_ino)


def _now() -> str:
    return datetime.now().astimezone().isoformat(timespec="seconds")


def acquire(directory: str | os.PathLike, *, run_id: str | None = None, what: str = "folder",
            retry_s: float = RETRY_S) -> RunLock:
    """Lock ``directory`` (created if missing) for this run (see the module docstring).

    ``run_id`` defaults to :func:`default_run_id`; ``what`` names the folder in messages
    (``--checkpoint-dir``).

    Raises:
        RunLockError: another live process holds it (after ``retry_s`` seconds of retries); the
            message names the folder, the owner's pid, host, run id and start, and the fix.
    """
    d = Path(directory)
    run_id = run_id or default_run_id()
    me = Owner(os.getpid(), socket.gethostname(), run_id, _now())
    try:
        d.mkdir(parents=True, exist_ok=True)
        key = os.path.realpath(d / LOCK_NAME)
    except OSError as exc:
        log.warning(f"{what} {d}: cannot create the folder to lock it ({exc}); the run goes on without its lock")
        return RunLock(d, None, me, "")
    with _GUARD:
        mine = _HELD.get(key)
        if mine is not None:
            if mine.owner.run_id != run_id:
                raise _refusal(d, mine.owner, what)
            mine._count += 1
            return mine
    deadline = time.monotonic() + retry_s
    while True:
        try:
            fd = os.open(d / LOCK_NAME, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
        except OSError as exc:
            log.warning(f"{what} {d}: cannot open its lock file ({exc}); the run goes on without its lock")
            return RunLock(d, None, me, key)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            if time.monotonic() < deadline:
                time.sleep(0.05)
                continue
            raise _refusal(d, read_owner(d), what) from None
        except OSError as exc:   # ENOLCK, EOPNOTSUPP ...: a filesystem without flock
            os.close(fd)
            log.warning(f"{what} {d}: the filesystem cannot lock its lock file ({exc}); the run goes on "
                        f"without its lock, so make sure no other run uses this folder")
            return RunLock(d, None, me, key)
        if not _same_file(fd, d / LOCK_NAME):   # its owner deleted it as we locked it: lock the new one
            os.close(fd)
            continue
        break
    previous: Owner | None = None
    try:
        previous = Owner.parse(os.pread(fd, 1 << 16, 0).decode("utf-8", "replace"))
        os.ftruncate(fd, 0)
        os.pwrite(fd, (json.dumps(asdict(me)) + "\n").encode(), 0)
    except OSError as exc:   # e.g. a full disk: the flock holds all the same, a refusal just cannot name us
        log.warning(f"{what} {d}: cannot record this run in its lock file ({exc}); the folder is locked all the same")
    lock = RunLock(d, fd, me, key)
    with _GUARD:
        _HELD[key] = lock
    if previous is not None:
        if previous.run_id == run_id:
            log.info(f"{what} {d}: re-taking the lock of this run (run id {run_id}) from its previous start "
                     f"(pid {previous.pid}, which is gone)")
        else:
            log.warning(f"{what} {d}: taking over the stale lock of a run that is gone ({previous.describe()}; "
                        f"the lock was not released: it crashed or was killed)")
    return lock


def check_free(directory: str | os.PathLike, *, what: str = "folder", job: str | None = None) -> None:
    """Raise :class:`RunLockError` (naming the owner) when another live process holds
    ``directory``'s lock; never takes it, creates nothing. A stale or missing lock passes, and
    so does a holder of the elastic job ``job`` (torchrun's ``--rdzv-id``; the run ids of its
    starts are ``job/agent-PID``, :func:`default_run_id`): a node joining that running job.

    The probe is a shared flock held for an instant (:func:`acquire` retries past it)."""
    if _HELD.get(os.path.realpath(Path(directory) / LOCK_NAME)) is not None:
        return   # this process holds it
    try:
        fd = os.open(Path(directory) / LOCK_NAME, os.O_RDONLY | os.O_CLOEXEC)
    except OSError:
        return   # no lock file (or none readable): the job itself decides
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except BlockingIOError:
        owner = read_owner(directory)
        if job is not None and owner is not None and owner.run_id.startswith(f"{job}/"):
            return   # the running elastic job this node joins
        raise _refusal(directory, owner, what) from None
    except OSError:
        return
    finally:
        os.close(fd)


def _release_all() -> None:
    """At exit: release what is still held, so a clean exit leaves no stale lock file."""
    for lock in list(_HELD.values()):
        lock._count = 1
        lock.release()


def _after_fork_in_child() -> None:
    global _GUARD
    _GUARD = threading.Lock()   # another thread may have held it at the fork
    for lock in list(_HELD.values()):
        lock._forget()
    _HELD.clear()


atexit.register(_release_all)
os.register_at_fork(after_in_child=_after_fork_in_child)
