"""A process's threads as Linux schedules them: their states and their time waiting on a run queue.

Read from ``/proc/PID/task/TID/stat`` (the thread's name and state: ``R`` runnable, ``S``
sleeping, ...) and ``/proc/PID/task/TID/schedstat`` (three numbers: ns on a CPU, ns waiting on a
run queue while runnable, time slices). ``/proc/PID/schedstat`` alone is the main thread's, not
the process's, so a process's wait is the sum over its threads. Where ``/proc`` has no schedstat
(not Linux, or a kernel without ``CONFIG_SCHED_INFO``) the readers return None.

The trainer records a step's wait as ``wait_cpu_s`` (:func:`snapshot` before the step,
:func:`wait_since` after it); the run-queue benchmark (``benchmarks/run_queue_wait.py``) and the
thread tests count the threads with :func:`thread_states`.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

__all__ = ["ThreadState", "ThreadTimes", "snapshot", "thread_states", "wait_since"]

ThreadTimes = dict[int, tuple[int, int]]
"""``{tid: (ns on a CPU, ns waiting on a run queue)}`` of a process's live threads."""


@dataclass(frozen=True, slots=True)
class ThreadState:
    """One thread of a process: its id, name (``comm``) and scheduler state letter."""

    tid: int
    name: str
    state: str

    @property
    def runnable(self) -> bool:
        """On a CPU or waiting for one (state ``R``)."""
        return self.state == "R"


def _tasks(pid: int | str) -> list[str]:
    try:
        return os.listdir(f"/proc/{pid}/task")
    except OSError:
        return []


def snapshot(pid: int | str = "self") -> ThreadTimes | None:
    """The CPU and run-queue times of ``pid``'s threads now; None where there is no schedstat.
    A thread that exits while it is read is left out."""
    if not os.path.exists(f"/proc/{pid}/schedstat"):
        return None
    times: ThreadTimes = {}
    for tid in _tasks(pid):
        try:
            with open(f"/proc/{pid}/task/{tid}/schedstat") as f:
                fields = f.read().split()
            times[int(tid)] = (int(fields[0]), int(fields[1]))
        except (OSError, ValueError, IndexError):
            continue
    return times


def wait_since(before: ThreadTimes | None, pid: int | str = "self") -> float | None:
    """Seconds ``pid``'s threads waited on a run queue since ``before`` (a :func:`snapshot`), summed
    over its threads: a thread started since counts whole, one that exited since is left out, so
    the figure is never negative. None when ``before`` is None (no schedstat)."""
    if before is None:
        return None
    now = snapshot(pid)
    if now is None:
        return None
    waited = sum(wait - before.get(tid, (0, 0))[1] for tid, (_, wait) in now.items())
    return max(0, waited) / 1e9


def thread_states(pid: int | str = "self") -> list[ThreadState]:
    """``pid``'s threads now (empty where ``/proc`` has none, or the process is gone)."""
    out = []
    for tid in _tasks(pid):
        try:
            with open(f"/proc/{pid}/task/{tid}/stat") as f:
                text = f.read()
        except OSError:
            continue
        close = text.rfind(")")   # the name may hold spaces and parentheses
        out.append(ThreadState(int(tid), text[text.find("(") + 1:close], text[close + 2:close + 3]))
    return out
