"""A rank's CPU share, and its thread pools kept within it.

Why: on a busy machine, a rank that keeps more threads runnable than the CPUs it may use waits on
the run queue for them. Measured (2 CPUs, two busy processes and other tenants beside a 2-rank
``sbm-small`` GCN, ``benchmarks/run_queue_wait.py``): with 2 OpenMP threads per rank and
OpenMP's default wait policy, each rank's idle OpenMP thread spun between parallel regions: 59.8
CPU-s and 300 s of run-queue wait per rank, 995 ms per epoch; with the same threads waiting
passively 13.2 CPU-s, 37 s, 81 ms; with one thread per rank (the share of 2 ranks on 2 CPUs)
13.2 CPU-s, 30 s, 62 ms. docs/performance.md has the figures and how to rerun them.

Decisions:

- **The share** (:func:`rank_share`): the CPUs this process may use (:func:`usable_cpus`: its
  affinity mask, capped by the cgroup's CPU quota, so a container limited to 2 CPUs of a 64-CPU
  host counts 2, where ``os.cpu_count()`` says 64) divided among the ranks on this machine
  (``LOCAL_WORLD_SIZE``, or ``--nproc`` in the launcher), at least 1.
- **Pools sized to it** (:func:`thread_defaults`): ``OMP_NUM_THREADS`` (torch's intra-op pool,
  and MKL's) is the share unless the user set it; ``NUMBA_NUM_THREADS`` (numba's pool, which
  starts this many OpenMP threads and resets OpenMP's count to it) is torch's count, so the two
  pools are one set of threads of torch's size. Torch's inter-op pool is set to 1 thread
  (:func:`limit_pools`): training never uses it, and it starts lazily, so it never runs.
- **Idle threads sleep**: ``OMP_WAIT_POLICY=PASSIVE`` (GNU and Intel OpenMP) and
  ``KMP_BLOCKTIME=0`` (Intel's): a pool thread with no work blocks at once instead of spinning
  for milliseconds after every parallel region, which on a busy machine takes the CPU from the
  thread with work. Numerics do not change (the thread counts and the kernels' sum orders are
  the same; the numba kernels give the same bits for any thread count).
- **Set before torch** (:func:`rank_defaults`): OpenMP reads these when torch loads it, numba
  when it is imported, so a rank's entry point sets them first (``gnn-dist train`` sets the same
  for its ranks, :func:`thread_defaults`); a user's own values are kept. Gloo's threads (one
  event loop, two workers), the launcher watch (a poll every 0.5 s) and the stale schedule (no
  thread of its own) block between their work.
"""

from __future__ import annotations

import logging
import math
import os
import sys
from collections.abc import Mapping
from pathlib import Path

from . import environ

__all__ = ["IDLE_POLICY", "cgroup_cpu_limit", "describe", "limit_pools", "rank_defaults", "rank_share",
           "thread_defaults", "usable_cpus"]

log = logging.getLogger(__name__)

IDLE_POLICY = {"OMP_WAIT_POLICY": "PASSIVE", "KMP_BLOCKTIME": "0"}
"""OpenMP's idle threads block at once instead of spinning (GNU's and Intel's runtimes)."""
CGROUP_ROOT = Path("/sys/fs/cgroup")


def _own_cgroups(proc_cgroup: Path) -> dict[str, str]:
    """``{controllers: path}`` of this process's ``/proc/self/cgroup`` (``""`` for cgroup v2)."""
    try:
        lines = proc_cgroup.read_text().splitlines()
    except OSError:
        return {}
    return {parts[1]: parts[2] for parts in (line.split(":", 2) for line in lines) if len(parts) == 3}


def _quota(folder: Path) -> float | None:
    """CPUs of the quota set in ``folder`` (cgroup v2 ``cpu.max``, or v1 ``cpu.cfs_*``), or None."""
    try:
        if (folder / "cpu.max").is_file():
            quota, period = (folder / "cpu.max").read_text().split()[:2]
            return None if quota == "max" else int(quota) / int(period)
        quota_us = int((folder / "cpu.cfs_quota_us").read_text())
        period_us = int((folder / "cpu.cfs_period_us").read_text())
    except (OSError, ValueError):
        return None
    return quota_us / period_us if quota_us > 0 and period_us > 0 else None


def cgroup_cpu_limit(root: Path = CGROUP_ROOT, proc_cgroup: Path = Path("/proc/self/cgroup")) -> float | None:
    """The CPUs this process's cgroup may use (its CPU quota / period, the smallest along its
    cgroup path), or None when no quota is set or no cgroup is found (not Linux)."""
    folders = []
    for controllers, path in _own_cgroups(proc_cgroup).items():
        if controllers == "" or "cpu" in controllers.split(","):
            base = root if controllers == "" else root / controllers
            own = base / path.lstrip("/")
            folders += [own, *[p for p in own.parents if p.is_relative_to(base)]]
    limits = [q for q in map(_quota, dict.fromkeys(folders)) if q is not None]
    return min(limits) if limits else None


def usable_cpus() -> int:
    """The CPUs this process may run on: its affinity mask (``os.cpu_count()`` where there is
    none), capped by its cgroup's CPU quota (rounded up); at least 1."""
    try:
        cpus = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        cpus = os.cpu_count() or 1
    limit = cgroup_cpu_limit()
    return max(1, min(cpus, math.ceil(limit)) if limit is not None else cpus)


def rank_share(ranks: int) -> int:
    """CPUs per rank when ``ranks`` ranks share this machine's :func:`usable_cpus`; at least 1."""
    return max(1, usable_cpus() // max(1, ranks))


def _positive(text: str | None) -> int | None:
    try:
        value = int(text) if text is not None else 0
    except ValueError:
        return None
    return value if value > 0 else None


def thread_defaults(ranks: int, settings: Mapping[str, str] | None = None) -> dict[str, str]:
    """The thread variables for a rank among ``ranks`` on this machine that ``settings`` (the
    user's, :func:`gnn_dist.environ.thread_settings`) leaves unset: ``OMP_NUM_THREADS`` the
    :func:`rank_share`, ``NUMBA_NUM_THREADS`` torch's count (the user's ``OMP_NUM_THREADS`` when
    valid), and :data:`IDLE_POLICY`."""
    settings = environ.thread_settings() if settings is None else settings
    torch_threads = _positive(settings.get("OMP_NUM_THREADS")) or rank_share(ranks)
    wanted = {"OMP_NUM_THREADS": str(torch_threads), "NUMBA_NUM_THREADS": str(torch_threads), **IDLE_POLICY}
    return {name: value for name, value in wanted.items() if name not in settings}


def rank_defaults() -> None:
    """A rank's entry point, before torch is imported: :func:`gnn_dist.environ.rank_defaults` and
    the :func:`thread_defaults` of its ``LOCAL_WORLD_SIZE`` (a no-op once torch is imported: an
    in-process call, a notebook, leaves the host's environment and pools alone)."""
    if "torch" in sys.modules:
        return
    environ.rank_defaults()
    for name, value in thread_defaults(environ.local_world_size()).items():
        environ.set_default(name, value)


def limit_pools() -> None:
    """Torch's inter-op pool to 1 thread (training does not use it); a no-op once it has started."""
    import torch

    try:
        torch.set_num_interop_threads(1)
    except RuntimeError:   # already started, or already set: it keeps its size
        pass


def describe() -> str:
    """One line: this rank's pools, OpenMP's idle policy and its CPU share; logged at start."""
    import numba
    import torch

    ranks = environ.local_world_size()
    policy = environ.thread_settings().get("OMP_WAIT_POLICY", "unset (idle threads spin)")
    return (f"threads per rank: torch {torch.get_num_threads()} (inter-op {torch.get_num_interop_threads()}), "
            f"numba {numba.config.NUMBA_NUM_THREADS}, OpenMP wait policy {policy}; CPU share "
            f"{rank_share(ranks)} ({usable_cpus()} usable CPUs, {ranks} rank(s) on this machine)")
