"""Exit when the process that launched this one is gone: an orphaned rank must not train on.

Why: torchrun's agent is the only thing that stops a job's ranks. When the agent dies without
stopping them (SIGKILL, OOM killer, or a ``gnn-dist train`` killed before it could forward a
signal), the ranks keep training on their own, unobserved, for as long as the run lasts (a
fault corpus found them at epoch 1,323). Each rank therefore watches its parent.

Decisions:

- **Polling, not only ``PR_SET_PDEATHSIG``.** A daemon thread compares ``os.getppid()`` with
  the parent recorded at start every :data:`POLL_INTERVAL_S` (0.5 s); a changed parent (the
  rank was re-parented to init or a subreaper) means the launcher is gone. Linux's
  ``prctl(PR_SET_PDEATHSIG)`` is deliberately not used: it fires when the parent *thread* that
  forked us exits, not the parent process, so an agent that ever spawns ranks from a helper
  thread would have healthy ranks killed; it cannot log why; and it exists on Linux only. The
  poll is portable, cheap (one syscall per interval) and within a second.
- **The expected parent closes the start-up window.** A rank needs a few seconds to import torch
  before :func:`watch_launcher` runs; an agent killed in that window would leave the rank
  already re-parented, and ``getppid()`` at start would record the wrong process.
  :mod:`gnn_dist.distributed.local_run` (the agent ``gnn-dist train`` runs) exports its pid as
  :data:`AGENT_PID_ENV`; a rank whose parent is not that pid while that pid is dead exits at once.
  A stale variable (its pid alive but not our parent) is ignored.
- **Exit, don't clean up.** The peers and the store may be gone too, so a barrier or a graceful
  shutdown would wait for the collective timeout (minutes). The watch logs one line (``rank R:
  the launcher (pid N) is gone; exiting``), flushes stdout/stderr for at most
  :data:`FLUSH_TIMEOUT_S` (a pipe whose reader died may block a flush), and calls
  ``os._exit(`` :data:`EXIT_ORPHANED` ``)``: no atexit hooks, no collectives.
- **Only under a launcher.** :func:`watch_launcher` (called at the top of
  ``gnn_dist.train.main``) starts the watch when ``RANK`` or ``WORLD_SIZE`` is set (the variables
  that make :func:`~gnn_dist.distributed.init_distributed` start a group); a plain single-process
  run and library use get none. The watch is per process (the parent is a process-wide fact),
  so a second call returns the running one.
"""

from __future__ import annotations

import logging
import os
import sys
import threading
from collections.abc import Callable, Mapping

from ..environ import launch_variables

__all__ = [
    "AGENT_PID_ENV",
    "EXIT_ORPHANED",
    "FLUSH_TIMEOUT_S",
    "POLL_INTERVAL_S",
    "ParentWatch",
    "expected_parent",
    "start_parent_watch",
    "watch_launcher",
]

logger = logging.getLogger(__name__)

AGENT_PID_ENV = "GNN_DIST_AGENT_PID"
"""Set by :mod:`.local_run` for its ranks: the pid of the agent that started them."""
POLL_INTERVAL_S = 0.5
"""How often the watch compares ``os.getppid()`` with the expected parent."""
FLUSH_TIMEOUT_S = 1.0
"""Longest wait for the last log line and the stdout/stderr flush before ``os._exit``."""
EXIT_ORPHANED = 1
"""Exit code of a rank that exits because its launcher is gone."""

_LAUNCH_VARS = ("RANK", "WORLD_SIZE")
_lock = threading.Lock()
_launcher_watch: ParentWatch | None = None


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # exists, owned by someone else
        return True
    return True


def expected_parent(environ: Mapping[str, str] | None = None) -> int:
    """The pid this process's parent must be: the agent named by :data:`AGENT_PID_ENV` when that
    variable is set and either is our parent or is dead (then we are already orphaned), else
    ``os.getppid()`` (no variable, a malformed one, or a stale one naming a live stranger)."""
    environ = launch_variables() if environ is None else environ
    ppid = os.getppid()
    try:
        agent = int(environ.get(AGENT_PID_ENV, "").strip())
    except ValueError:
        return ppid
    if agent <= 0 or agent == ppid or _alive(agent):
        return ppid
    return agent


class ParentWatch:
    """A daemon thread that calls ``on_gone(parent_pid)`` once, when the parent is gone.

    Args:
        on_gone: called in the watch thread with the pid that is gone; it usually exits.
        parent_pid: the parent to expect (default: :func:`expected_parent`).
        interval: seconds between polls (default: :data:`POLL_INTERVAL_S`).
    """

    def __init__(self, on_gone: Callable[[int], None], *, parent_pid: int | None = None,
                 interval: float = POLL_INTERVAL_S) -> None:
        if interval <= 0:
            raise ValueError(f"interval must be a positive number of seconds, got {interval!r}")
        self.parent_pid = expected_parent() if parent_pid is None else parent_pid
        self.interval = interval
        self._on_gone = on_gone
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="gnn-dist-parent-watch", daemon=True)

    def start(self) -> ParentWatch:
        self._thread.start()
        return self

    def stop(self) -> None:
        """End the watch (the thread exits within one interval)."""
        self._stop.set()

    @property
    def running(self) -> bool:
        return self._thread.is_alive()

    def parent_gone(self) -> bool:
        return os.getppid() != self.parent_pid

    def exit_if_gone(self) -> None:
        """Call ``on_gone`` now (in this thread) when the parent is gone; else return. For an
        error path: a collective that failed because an orphaned peer already exited should end
        this rank the orphan's way (one line), not with the collective's traceback."""
        if self.parent_gone():
            self._stop.set()
            self._on_gone(self.parent_pid)

    def _run(self) -> None:
        while not self._stop.is_set():
            if self.parent_gone():
                self._on_gone(self.parent_pid)
                return
            self._stop.wait(self.interval)


def start_parent_watch(on_gone: Callable[[int], None], *, parent_pid: int | None = None,
                       interval: float = POLL_INTERVAL_S) -> ParentWatch:
    """Start and return a :class:`ParentWatch`."""
    return ParentWatch(on_gone, parent_pid=parent_pid, interval=interval).start()


def _flush_streams() -> None:
    for handler in logging.getLogger().handlers:
        try:
            handler.flush()
        except Exception:
            pass
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except Exception:
            pass


def _exit_orphaned(rank: str, parent_pid: int) -> None:
    """Log the reason, flush (bounded), and end the process at once."""
    def say() -> None:
        try:
            logger.error("rank %s: the launcher (pid %d) is gone; exiting", rank, parent_pid)
        finally:
            _flush_streams()

    speaker = threading.Thread(target=say, name="gnn-dist-orphan-exit", daemon=True)
    speaker.start()
    speaker.join(FLUSH_TIMEOUT_S)
    os._exit(EXIT_ORPHANED)


def watch_launcher(environ: Mapping[str, str] | None = None) -> ParentWatch | None:
    """Under a launcher (``RANK`` or ``WORLD_SIZE`` set), start the watch that exits this rank
    when its launcher is gone; ``None`` otherwise. Idempotent per process."""
    global _launcher_watch
    environ = launch_variables() if environ is None else environ
    if not any(name in environ for name in _LAUNCH_VARS):
        return None
    with _lock:
        if _launcher_watch is None or not _launcher_watch.running:
            rank = environ.get("RANK", "?").strip() or "?"
            _launcher_watch = start_parent_watch(lambda pid: _exit_orphaned(rank, pid),
                                                 parent_pid=expected_parent(environ))
        return _launcher_watch
