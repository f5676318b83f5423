"""Multi-process test harness: run one function on P gloo ranks and collect what each returns.

Usage (``fn`` must be a module-level function, so the spawned processes can import it)::

    def check(rank, world_size, n):          # runs in every rank, group already initialised
        t = torch.full((n,), float(rank)); dist.all_reduce(t); return t.tolist()

    results = run_ranks(check, 3, 4, timeout=60)   # [rank0_result, rank1_result, rank2_result]

How it works:

- ``world_size`` fresh processes, forks of a *forkserver* that preloaded torch (see
  :func:`_context`), each with the caller's current environment. Each initialises
  a gloo default group by file rendezvous (``file://`` in a private temporary folder: no ports),
  runs ``fn(rank, world_size, *args)``, writes its result (or its exception, type, message and
  traceback) to a pickle in that folder by temp-file + rename, shuts the group down with
  ``gnn_dist.distributed.shutdown_process_group`` (barrier on success, abort on error) and exits.
  Results travel by file, not by a queue, so a rank killed mid-write cannot corrupt the others.
- Each rank's stdout/stderr go to a log file; the tail of a failed rank's log is in the report.
- The parent watches the process sentinels. When a rank fails (exception, non-zero exit code or
  signal), the others get ``grace`` seconds to exit by themselves, then are killed (SIGKILL). At
  ``timeout`` seconds every remaining rank is killed. Nothing outlives the call; the temporary
  folder is removed.
- :func:`run_ranks` returns the results or raises :class:`RankFailure` (an ``AssertionError``,
  so pytest reports a failure) whose message names each failed rank with its error and
  traceback, its signal (negative exit code), or "killed by the harness" (timeout / straggler),
  first failure first; ``.outcomes`` holds the details. :func:`launch_ranks` returns the
  per-rank :class:`RankOutcome` list without raising, for tests that assert on failures.

Cost: the first launch of a session starts the fork server (an interpreter importing torch, 2-3 s
on a loaded 2-core machine); later launches cost about 0.1 s a rank plus the import of ``fn``'s
module. Still, run many checks inside one ``fn`` rather than one launch per assertion.
"""

from __future__ import annotations

import os
import pickle
import shutil
import signal
import sys
import tempfile
import time
import traceback
from collections.abc import Callable
from dataclasses import dataclass
from datetime import timedelta
from multiprocessing.connection import wait
from pathlib import Path
from typing import Any

import torch.multiprocessing as mp

__all__ = ["RankFailure", "RankOutcome", "launch_ranks", "run_ranks"]

_LOG_TAIL_CHARS = 3000


@dataclass
class RankOutcome:
    """What happened to one rank."""

    rank: int
    exitcode: int | None = None
    """Process exit code; negative ``-N`` means killed by signal ``N``."""
    reported: bool = False
    """The rank wrote a result or error file."""
    result: Any = None
    exc_type: str | None = None
    """Qualified name of the exception ``fn`` raised (``None`` if it returned)."""
    error: str | None = None
    """``"Type: message"`` of that exception."""
    traceback: str | None = None
    exception: BaseException | None = None
    """The exception itself when it could be pickled."""
    killed_by_harness: str | None = None
    """Why the harness killed the rank (``"timeout"`` or ``"straggler"``), else ``None``."""
    exit_time_s: float | None = None
    """Seconds from launch to the observed exit."""
    failed_s: float | None = None
    """Seconds from launch to the failure (when ``fn`` raised, else the exit): root cause
    first in reports."""
    log_tail: str = ""

    @property
    def ok(self) -> bool:
        """Returned normally and exited 0."""
        return self.exitcode == 0 and self.reported and self.exc_type is None

    def describe(self) -> str:
        """One paragraph for a failure report."""
        when = f" after {self.exit_time_s:.1f} s" if self.exit_time_s is not None else ""
        if self.killed_by_harness == "timeout":
            head = f"rank {self.rank}: timed out{when}; killed by the harness"
        elif self.killed_by_harness == "straggler":
            head = (f"rank {self.rank}: still running after another rank failed; killed by the "
                    f"harness{when}")
        elif self.exc_type is not None:
            head = f"rank {self.rank}: raised {self.error} (exit code {self.exitcode}){when}"
        elif self.exitcode is not None and self.exitcode < 0:
            head = f"rank {self.rank}: killed by signal {_signal_name(-self.exitcode)} " \
                   f"(exit code {self.exitcode}){when}"
        elif self.exitcode != 0:
            head = f"rank {self.rank}: exited with code {self.exitcode}{when}"
        elif not self.reported:
            head = f"rank {self.rank}: exited 0 without reporting a result{when}"
        else:
            head = f"rank {self.rank}: ok"
        parts = [head]
        if self.traceback:
            parts.append(self.traceback.rstrip())
        if self.log_tail.strip():
            parts.append(f"--- rank {self.rank} log (tail) ---\n{self.log_tail.rstrip()}")
        return "\n".join(parts)


class RankFailure(AssertionError):
    """At least one rank failed; ``outcomes`` is every rank's :class:`RankOutcome`."""

    def __init__(self, message: str, outcomes: list[RankOutcome]) -> None:
        super().__init__(message)
        self.outcomes = outcomes


def _signal_name(num: int) -> str:
    try:
        return signal.Signals(num).name
    except ValueError:
        return f"signal {num}"


def _write_atomic(path: Path, payload: dict[str, Any]) -> None:
    tmp = path.with_suffix(f".tmp-{os.getpid()}")
    with open(tmp, "wb") as f:
        pickle.dump(payload, f)
    os.replace(tmp, path)


def _rank_entry(fn: Callable[..., Any], rank: int, world_size: int, args: tuple[Any, ...],
                workdir: str, init_group: bool, pg_timeout_s: float, environ: dict[str, str]) -> None:
    """Body of one spawned rank (runs in the child)."""
    os.environ.clear()  # the caller's environment now, not the fork server's at its start
    os.environ.update(environ)
    work = Path(workdir)
    log_fd = os.open(work / f"rank-{rank}.log", os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    os.dup2(log_fd, 1)
    os.dup2(log_fd, 2)
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    import torch
    import torch.distributed as dist

    from gnn_dist.distributed import shutdown_process_group

    torch.set_num_threads(1)
    out = work / f"rank-{rank}.pkl"
    clean = False
    try:
        if init_group:
            dist.init_process_group("gloo", init_method=f"file://{work / 'store'}", rank=rank,
                                    world_size=world_size,
                                    timeout=timedelta(seconds=pg_timeout_s))
        result = fn(rank, world_size, *args)
        try:
            _write_atomic(out, {"ok": True, "result": result})
        except Exception as exc:
            raise TypeError(f"the result of rank {rank} cannot be pickled: {exc}") from exc
        clean = True
    except BaseException as exc:
        payload: dict[str, Any] = {
            "ok": False, "raised_at": time.time(),
            "exc_type": f"{type(exc).__module__}.{type(exc).__qualname__}",
            "error": f"{type(exc).__name__}: {exc}", "traceback": traceback.format_exc()}
        try:
            pickle.dumps(exc)
            payload["exception"] = exc
        except Exception:
            pass
        _write_atomic(out, payload)
        sys.stderr.flush()
    finally:
        shutdown_process_group(clean=clean, barrier_timeout=timedelta(seconds=pg_timeout_s))
        sys.stdout.flush()
        sys.stderr.flush()
    if not clean:
        sys.exit(1)


def _read_outcome(outcome: RankOutcome, work: Path, start_wall: float) -> None:
    path = work / f"rank-{outcome.rank}.pkl"
    if path.exists():
        try:
            with open(path, "rb") as f:
                payload = pickle.load(f)
        except Exception as exc:  # e.g. an exception type the parent cannot import
            payload = {"ok": False, "exc_type": "harness.UnreadableResult",
                       "error": f"UnreadableResult: {exc}", "traceback": None}
        outcome.reported = True
        if payload["ok"]:
            outcome.result = payload["result"]
        else:
            outcome.exc_type = payload["exc_type"]
            outcome.error = payload["error"]
            outcome.traceback = payload["traceback"]
            outcome.exception = payload.get("exception")
            if payload.get("raised_at") is not None:
                outcome.failed_s = payload["raised_at"] - start_wall
    log = work / f"rank-{outcome.rank}.log"
    if log.exists():
        text = log.read_text(errors="replace")
        outcome.log_tail = text[-_LOG_TAIL_CHARS:]


_PRELOAD = ["torch", "torch.distributed", "torch._dynamo", "numpy", "scipy.sparse", "numba", "gnn_dist", "gnn_dist.distributed",
            "gnn_dist.trainer", "gnn_dist.models", "gnn_dist.kernels.numba_cpu", "partitioners"]
"""Imported once by the fork server (none of them starts a thread or touches a device at import;
torch._dynamo is what the first optimizer imports: 1-2 s a rank otherwise)."""


def _context() -> Any:
    """The *forkserver* context, its server preloaded with torch and gnn_dist: a rank is a fork
    of that server (about 0.1 s) instead of a fresh interpreter importing torch (2-3 s), and
    still starts from a clean process that never ran a test (no inherited threads, groups or
    CUDA state, unlike a fork of pytest itself)."""
    ctx = mp.get_context("forkserver")
    ctx.set_forkserver_preload(_PRELOAD)
    return ctx


def launch_ranks(fn: Callable[..., Any], world_size: int, *args: Any, timeout: float = 60.0,
                 grace: float = 2.0, init_group: bool = True,
                 pg_timeout: float | None = None) -> list[RankOutcome]:
    """Run ``fn(rank, world_size, *args)`` on ``world_size`` spawned ranks; never raises for a
    rank's failure. Returns one :class:`RankOutcome` per rank.

    Args:
        timeout: seconds until every rank still running is killed.
        grace: seconds the other ranks get to exit by themselves after a rank fails.
        init_group: initialise a gloo default group (file rendezvous) before ``fn``.
        pg_timeout: the group's collective timeout in seconds (default: ``timeout``).
    """
    if world_size < 1:
        raise ValueError(f"world_size must be >= 1, got {world_size}")
    ctx = _context()
    work = Path(tempfile.mkdtemp(prefix="gnn-dist-ranks-"))
    outcomes = [RankOutcome(rank=r) for r in range(world_size)]
    procs = []
    start, start_wall = time.monotonic(), time.time()
    try:
        for r in range(world_size):
            p = ctx.Process(target=_rank_entry, name=f"rank-{r}",
                            args=(fn, r, world_size, args, str(work), init_group,
                                  float(pg_timeout if pg_timeout is not None else timeout), dict(os.environ)))
            p.start()
            procs.append(p)
        deadline = start + timeout
        failed_at: float | None = None
        running = dict(enumerate(procs))
        while running:
            now = time.monotonic()
            limit = deadline if failed_at is None else min(deadline, failed_at + grace)
            wait([p.sentinel for p in running.values()], timeout=max(0.0, min(0.25, limit - now)))
            now = time.monotonic()
            for r, p in list(running.items()):
                if p.exitcode is not None:
                    outcomes[r].exitcode = p.exitcode
                    outcomes[r].exit_time_s = now - start
                    del running[r]
                    if p.exitcode != 0 and failed_at is None:
                        failed_at = now
            if running and (now >= deadline or (failed_at is not None and now >= failed_at + grace)):
                reason = "timeout" if now >= deadline else "straggler"
                for r, p in running.items():
                    p.kill()
                    outcomes[r].killed_by_harness = reason
                for r, p in running.items():
                    p.join(10)
                    outcomes[r].exitcode = p.exitcode
                    outcomes[r].exit_time_s = time.monotonic() - start
                running.clear()
        for o in outcomes:
            _read_outcome(o, work, start_wall)
            if not o.ok and o.failed_s is None:
                o.failed_s = o.exit_time_s
        return outcomes
    finally:
        for p in procs:
            if p.is_alive():
                p.kill()
                p.join(10)
        shutil.rmtree(work, ignore_errors=True)


def run_ranks(fn: Callable[..., Any], world_size: int, *args: Any, timeout: float = 60.0,
              grace: float = 2.0, init_group: bool = True,
              pg_timeout: float | None = None) -> list[Any]:
    """Run ``fn(rank, world_size, *args)`` on ``world_size`` gloo ranks; return each rank's
    result in rank order, or raise :class:`RankFailure` describing every failed rank (first
    failure first, with traceback). Arguments as :func:`launch_ranks`."""
    outcomes = launch_ranks(fn, world_size, *args, timeout=timeout, grace=grace,
                            init_group=init_group, pg_timeout=pg_timeout)
    if all(o.ok for o in outcomes):
        return [o.result for o in outcomes]
    # Root cause first: by time of failure; ranks the harness had to kill last.
    failed = sorted((o for o in outcomes if not o.ok),
                    key=lambda o: (o.killed_by_harness is not None, o.failed_s or 0.0))
    message = (f"{len(failed)} of {world_size} ranks failed running "
               f"{getattr(fn, '__qualname__', fn)!s}:\n\n" + "\n\n".join(o.describe() for o in failed))
    cause = next((o.exception for o in failed if o.exception is not None), None)
    raise RankFailure(message, outcomes) from cause
