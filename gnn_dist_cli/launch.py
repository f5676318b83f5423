"""Run and supervise the torchrun agent of ``gnn-dist train``: signals, leftovers, failure summary.

Torch-free (the agent is a child process). The command is built by
:func:`gnn_dist_cli.command.train_command`; the agent is ``python -m gnn_dist.distributed.local_run``
(torchrun with its stores on loopback; its docstring says why).

Decisions:

- **Signals are forwarded, once, and the wait is bounded.** SIGINT, SIGTERM and SIGHUP to
  ``gnn-dist`` are sent on to the agent (torchrun sends them on to its ranks and waits for
  them); if the agent is not gone :data:`SHUTDOWN_GRACE_S` later, or the signal comes a second
  time, the agent's process group and every process of its tree get SIGKILL. A signal ignored
  when ``gnn-dist`` starts (SIGHUP under ``nohup``) stays ignored. ``gnn-dist`` then
  exits ``128 + signal`` (130 SIGINT, 143 SIGTERM, 129 SIGHUP); otherwise it exits with the
  agent's code (``128 + N`` when the agent was killed by signal ``N``).
- **The agent has its own session** (``start_new_session``): a terminal's Ctrl-C reaches only
  ``gnn-dist``, which forwards it once, instead of hitting every rank at the same time as the
  agent; and a kill of that process group reaches the agent and anything it did not move out of
  it. torchrun starts each rank in a session of its own, so the group alone is not enough:
  every :data:`TRACK_INTERVAL_S` the launcher records the agent's descendants (psutil, which
  knows each process by pid *and* start time, so a reused pid is never killed).
- **Nothing outlives the launcher.** When the agent is gone (done, failed, or killed behind our
  back), recorded descendants still running get :data:`REAP_GRACE_S` to exit (a rank whose
  agent is gone exits by itself within a second: ``gnn_dist/distributed/parent_watch.py``),
  then SIGKILL. The agent in turn watches ``gnn-dist`` (``--watch-pid``), so a SIGKILL of
  ``gnn-dist`` itself stops the ranks too.
- **Failure report: one line per failed rank.** Unless ``verbose``, the agent prints
  ``rank R failed: Type: message`` per failed rank instead of torchrun's report
  (``--summarize``), and :class:`FailureFilter` withholds, on the agent's stderr, the ranks'
  uncaught-exception tracebacks (torch prefixes their lines with ``[rankR]: ``) and any other
  ``Traceback (most recent call last):`` block; everything else (the ranks' own log lines)
  passes through as it comes. The withheld lines are dropped when summary lines were seen or
  the run was stopped by a signal, and otherwise written out at the end, in order, so an
  unexpected failure is never hidden. ``verbose`` leaves the agent's stderr alone (no pipe).
"""

from __future__ import annotations

import logging
import os
import re
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Mapping, Sequence
from types import FrameType
from typing import IO, Any

__all__ = ["FORWARDED_SIGNALS", "REAP_GRACE_S", "SHUTDOWN_GRACE_S", "TRACK_INTERVAL_S",
           "FailureFilter", "exit_code", "run_torchrun"]

log = logging.getLogger(__name__)

SHUTDOWN_GRACE_S = 10.0
"""After forwarding a signal: how long the agent gets to stop its ranks and exit before SIGKILL."""
REAP_GRACE_S = 5.0
"""After the agent is gone: how long its leftover descendants get to exit before SIGKILL."""
TRACK_INTERVAL_S = 1.0
"""How often the agent's process tree is recorded (and the launcher checks its deadlines)."""
FORWARDED_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)
"""Signals ``gnn-dist train`` forwards to the agent (each also one torchrun handles)."""

_POLL_S = 0.2
_READER_JOIN_S = 2.0
_RANK_TRACEBACK = re.compile(r"^\[rank\d+\]: ")
"""torch's excepthook in a rank with a process group prefixes each line of the traceback."""
_SUMMARY = re.compile(r"^\[gnn-dist\] (?:error: )?rank \d+ failed: ")
"""A line of the agent's ``--summarize`` report (``gnn_dist/distributed/local_run.py``)."""
_TRACEBACK_START = "Traceback (most recent call last):"
_CHAINED = ("During handling of the above exception, another exception occurred:",
            "The above exception was the direct cause of the following exception:")


def exit_code(returncode: int, signum: int | None = None) -> int:
    """``gnn-dist train``'s exit code: ``128 + signum`` after a forwarded signal; else the
    agent's ``returncode``, ``128 + N`` for a ``-N`` (killed by signal ``N``)."""
    if signum is not None:
        return 128 + int(signum)
    return 128 - returncode if returncode < 0 else returncode


class FailureFilter:
    """Line filter of the agent's stderr (see the module docstring); :meth:`feed` says whether
    a line goes through now; :attr:`withheld` keeps the others in order."""

    _NORMAL, _IN_TRACEBACK, _AFTER_TRACEBACK = range(3)

    def __init__(self) -> None:
        self.withheld: list[str] = []
        self.num_summary_lines = 0
        self._state = self._NORMAL

    def feed(self, line: str) -> bool:
        text = line.rstrip("\r\n")
        if _RANK_TRACEBACK.match(text):
            self.withheld.append(line)
            return False
        if self._state == self._IN_TRACEBACK:
            if not text[:1].isspace():  # the exception line ends the frames
                self._state = self._AFTER_TRACEBACK
            self.withheld.append(line)
            return False
        if self._state == self._AFTER_TRACEBACK:
            if not text.strip() or text in _CHAINED or text == _TRACEBACK_START:
                if text == _TRACEBACK_START:
                    self._state = self._IN_TRACEBACK
                self.withheld.append(line)
                return False
            self._state = self._NORMAL
        if text == _TRACEBACK_START:
            self._state = self._IN_TRACEBACK
            self.withheld.append(line)
            return False
        if _SUMMARY.match(text):
            self.num_summary_lines += 1
        return True


class _Tree:
    """The agent's descendants seen so far (psutil processes: pid and start time)."""

    def __init__(self, pid: int) -> None:
        import psutil

        self._psutil = psutil
        self.pid = pid
        self.seen: dict[int, Any] = {}
        try:
            self._root = psutil.Process(pid)
        except psutil.Error:
            self._root = None

    def record(self) -> None:
        if self._root is None:
            return
        try:
            for child in self._root.children(recursive=True):
                self.seen.setdefault(child.pid, child)
        except self._psutil.Error:  # the agent is gone (its orphans are no longer below it)
            pass

    def running(self) -> list[Any]:
        alive = []
        for proc in self.seen.values():
            try:
                if proc.is_running() and proc.status() != self._psutil.STATUS_ZOMBIE:
                    alive.append(proc)
            except self._psutil.Error:
                pass
        return alive

    def kill(self) -> list[int]:
        """SIGKILL every recorded descendant still running; their pids."""
        killed = []
        for proc in self.running():
            try:
                proc.kill()  # psutil checks the pid still names the same process first
                killed.append(proc.pid)
            except self._psutil.Error:
                pass
        return killed

    def wait_gone(self, timeout: float) -> list[Any]:
        deadline = time.monotonic() + timeout
        while True:
            alive = self.running()
            if not alive or time.monotonic() >= deadline:
                return alive
            time.sleep(_POLL_S)


class _Forwarder:
    """Signal handlers for the run: forward the first signal, note a second one."""

    def __init__(self) -> None:
        self.proc: subprocess.Popen | None = None
        self.signum: int | None = None
        self.received_at: float | None = None
        self.repeated = False
        self._previous: dict[int, Any] = {}

    def _handle(self, signum: int, frame: FrameType | None) -> None:
        if self.signum is not None:
            self.repeated = True
            return
        self.signum, self.received_at = signum, time.monotonic()
        self._forward()

    def _forward(self) -> None:
        if self.proc is not None and self.signum is not None:
            try:
                self.proc.send_signal(self.signum)
            except OSError:  # already gone
                pass

    def started(self, proc: subprocess.Popen) -> None:
        """The agent runs: a signal that came while it was starting is forwarded now."""
        self.proc = proc
        self._forward()

    def install(self) -> None:
        if threading.current_thread() is not threading.main_thread():
            log.debug("not in the main thread: signals are not forwarded to torchrun")
            return
        for sig in FORWARDED_SIGNALS:
            if signal.getsignal(sig) is signal.SIG_IGN:  # e.g. SIGHUP under nohup: keep ignoring it
                continue
            self._previous[sig] = signal.signal(sig, self._handle)

    def restore(self) -> None:
        for sig, previous in self._previous.items():
            signal.signal(sig, signal.SIG_DFL if previous is None else previous)
        self._previous.clear()


def _pump(stream: IO[bytes], filt: FailureFilter | None) -> None:
    """Copy the agent's stderr to ours line by line, through ``filt``."""
    writable = True
    for raw in iter(stream.readline, b""):
        line = raw.decode("utf-8", errors="replace")
        if (filt is None or filt.feed(line)) and writable:
            try:
                sys.stderr.write(line)
                sys.stderr.flush()
            except (OSError, ValueError):  # our stderr is gone: keep draining, or the ranks block
                writable = False
    stream.close()


def _kill_group(pgid: int) -> None:
    try:
        os.killpg(pgid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


def run_torchrun(cmd: Sequence[str], env: Mapping[str, str], *, verbose: bool = False,
                 grace_s: float = SHUTDOWN_GRACE_S, reap_grace_s: float = REAP_GRACE_S) -> int:
    """Run the agent ``cmd`` in its own session, supervise it as the module docstring says and
    return ``gnn-dist train``'s exit code (:func:`exit_code`)."""
    forwarder = _Forwarder()
    forwarder.install()  # before the agent starts: no signal may end us without forwarding
    announced = killed = False
    next_record = 0.0
    try:
        proc = subprocess.Popen(list(cmd), env=dict(env), start_new_session=True,
                                stderr=None if verbose else subprocess.PIPE)
        forwarder.started(proc)
        tree = _Tree(proc.pid)
        filt = None if verbose else FailureFilter()
        reader = None
        if proc.stderr is not None:
            reader = threading.Thread(target=_pump, args=(proc.stderr, filt), daemon=True,
                                      name="gnn-dist-torchrun-stderr")
            reader.start()

        def announce() -> None:
            """Say once that a signal came and what is done with it (also when torchrun ended
            within the poll interval after it: the signal still ended the job)."""
            nonlocal announced
            if forwarder.signum is not None and not announced:
                announced = True
                tree.record()
                log.warning(f"got {signal.Signals(forwarder.signum).name}: stopping torchrun "
                            f"(pid {proc.pid}) and its ranks, at most {grace_s:g} s (send it again "
                            f"to kill them now)")

        while True:
            try:
                returncode = proc.wait(timeout=_POLL_S)
                announce()
                break
            except subprocess.TimeoutExpired:
                pass
            now = time.monotonic()
            if now >= next_record:
                tree.record()
                next_record = now + TRACK_INTERVAL_S
            announce()
            if not killed and forwarder.received_at is not None and (
                    forwarder.repeated or now - forwarder.received_at >= grace_s):
                killed = True
                why = ("a second signal" if forwarder.repeated
                       else f"torchrun did not stop within {grace_s:g} s")
                log.warning(f"{why}: killing torchrun (pid {proc.pid}) and its ranks")
                tree.record()
                _kill_group(proc.pid)  # still our unreaped child: the group id is not reused
                tree.kill()
    finally:
        forwarder.restore()
    leftovers = tree.wait_gone(0.0 if killed else reap_grace_s)
    if leftovers:
        pids = tree.kill()
        if pids:
            log.warning(f"killed {len(pids)} process(es) torchrun left running: pids "
                        f"{', '.join(map(str, sorted(pids)))}")
        tree.wait_gone(reap_grace_s)
    if reader is not None:
        reader.join(_READER_JOIN_S)
    if filt is not None and filt.withheld and not filt.num_summary_lines and forwarder.signum is None:
        sys.stderr.writelines(filt.withheld)  # unrecognised failure: show it all, unchanged
        sys.stderr.flush()
    return exit_code(returncode, forwarder.signum)
