"""Process-group lifecycle: start it from the torchrun environment, end it on every exit path.

Decisions (see ``docs`` and DESIGN.md, "Runtime"):

- **No torchrun environment => world size 1, no process group.** A plain ``python train.py``
  gets a :class:`DistContext` with ``backend=None``; every helper in this package
  (:mod:`.collectives`, :class:`~.halo.HaloExchanger`) treats that as "nothing to communicate"
  and runs no collective. Launched by torchrun, even with one process, a real group is created,
  so ``--nproc-per-node 1`` exercises the same code as a multi-rank job.
- **Backend**: NCCL when CUDA is available, gloo otherwise (``backend=`` overrides). On NCCL the
  device is bound first (``torch.cuda.set_device(LOCAL_RANK)``, then ``device_id=``) and
  ``TORCH_NCCL_ASYNC_ERROR_HANDLING=3`` is set (unless the user set it), so a dead peer or a
  collective that exceeds ``timeout`` tears the worker down instead of hanging it.
- **Timeout**: every collective of the group times out after ``timeout`` (default 5 minutes).
- **Clean shutdown** (measured on torch 2.13, gloo/CPU: without it about half of successful
  2-rank runs abort with SIGABRT at interpreter exit): barrier (bounded by the timeout) ->
  destroy the group -> pause :data:`SHUTDOWN_PAUSE_S` -> drop the buffers held by
  :mod:`.keepalive`. It runs from :meth:`DistContext.close` and from ``with init_distributed()``
  on exit. No process-wide hook is installed (no ``sys.excepthook``, no ``atexit``): the context
  owns the group. A context that is never closed is aborted when it is collected or at
  interpreter exit (:func:`weakref.finalize` on the context itself), with a warning: without a
  ``with`` block nothing says whether the script failed, so that path never waits on a peer.
- **Error path**: never wait on peers that may be dead. ``close(clean=False)`` (the context
  manager uses it when an exception escapes) skips the barrier and aborts the group.
"""

from __future__ import annotations

import logging
import math
import time
import weakref
from dataclasses import dataclass, field
from datetime import timedelta
from types import TracebackType

import torch
import torch.distributed as dist

from .. import environ
from .env import read_launch_env
from .errors import DistributedConfigError
from .keepalive import release_all

__all__ = [
    "DEFAULT_TIMEOUT",
    "SHUTDOWN_PAUSE_S",
    "DistContext",
    "init_distributed",
    "default_group_timeout",
    "new_group",
    "shutdown_process_group",
    "is_distributed",
    "get_rank",
    "get_world_size",
]

logger = logging.getLogger(__name__)

DEFAULT_TIMEOUT = timedelta(minutes=5)
"""Collective timeout when ``init_distributed`` is not given one."""

SHUTDOWN_PAUSE_S = 0.15
"""Pause between destroying the group and dropping kept buffers (lets gloo threads finish)."""

_BACKENDS = ("gloo", "nccl")

_group_timeout: timedelta | None = None
"""The timeout of the default group this process started or adopted (:func:`init_distributed`):
what :func:`new_group` gives every subgroup."""


@dataclass(kw_only=True, slots=True, weakref_slot=True)
class DistContext:
    """What this process is in the job; closing it ends the process group.

    Use as ``with init_distributed() as ctx: ...``: the group is destroyed on every exit path
    (after a barrier on success; aborted without one when an exception escapes, which is then
    re-raised). Called as a bare statement, as ``torch.distributed.init_process_group()`` is, the
    context that owns the group is kept alive by this module until :meth:`close` or the end of the
    process (then the group is torn down without a barrier), never by the caller's reference.
    """

    rank: int
    """Global rank (0 in a single-process run)."""
    world_size: int
    """Number of ranks (1 in a single-process run)."""
    local_rank: int
    """Rank within the machine (the CUDA device index on NCCL)."""
    device: torch.device
    """Where this rank computes: ``cuda:LOCAL_RANK`` on NCCL, else CPU (or ``cuda`` when a
    single-process run has CUDA)."""
    backend: str | None
    """``"nccl"``, ``"gloo"``, or ``None`` when no process group exists (world size 1)."""
    timeout: timedelta = DEFAULT_TIMEOUT
    """Timeout of every collective of the group."""
    owns_group: bool = True
    """Whether :meth:`close` destroys the group (``False`` if it existed before this context,
    or when there is none)."""
    closed: bool = False
    """Set by :meth:`close`."""
    _finalizer: weakref.finalize | None = field(default=None, init=False, repr=False)

    def __post_init__(self) -> None:
        if self.owns_group:
            _OWNED.append(self)   # the group lives until close() or exit, whoever holds the context
            self._finalizer = weakref.finalize(self, _close_at_exit, self.rank)

    @property
    def is_distributed(self) -> bool:
        """True when a process group exists (collectives are real)."""
        return self.backend is not None

    @property
    def is_main(self) -> bool:
        """True on rank 0 (the rank that logs and writes files)."""
        return self.rank == 0

    def close(self, *, clean: bool = True) -> None:
        """End the process group (idempotent).

        Args:
            clean: ``True`` on the success path: all ranks meet at a barrier first. ``False``
                on an error path: no barrier (peers may be dead), the group is aborted.
        """
        if self.closed:
            return
        self.closed = True
        if self._finalizer is not None:
            self._finalizer.detach()
        _OWNED[:] = [c for c in _OWNED if c is not self]
        if self.owns_group:
            shutdown_process_group(clean=clean, barrier_timeout=self.timeout)

    def __enter__(self) -> DistContext:
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        clean = exc_type is None or (isinstance(exc, SystemExit) and exc.code in (0, None))
        if clean:
            self.close(clean=True)
            return
        try:
            self.close(clean=False)
        except Exception:  # keep the original exception, which is re-raised
            logger.exception("closing the process group after an error failed")


def shutdown_process_group(*, clean: bool = True, barrier_timeout: timedelta | None = None) -> None:
    """Destroy the default process group safely; a no-op (besides releasing kept buffers) when
    there is none.

    ``clean=True``: barrier (waiting at most ``barrier_timeout``; a failed or timed-out barrier
    is logged and the shutdown continues as unclean) -> destroy -> pause -> release buffers.
    ``clean=False``: abort the group without a barrier -> pause -> release buffers.
    """
    if not dist.is_initialized():
        release_all()
        return
    if clean:
        try:
            work = dist.barrier(async_op=True)
            if barrier_timeout is None:
                work.wait()
            else:
                work.wait(timeout=barrier_timeout)
        except Exception as exc:  # a peer died or timed out: do not wait any further
            logger.warning("shutdown barrier failed (%s: %s); aborting the process group "
                           "without it", type(exc).__name__, exc)
            clean = False
    if clean:
        dist.destroy_process_group()
    else:
        abort = getattr(dist.distributed_c10d, "_abort_process_group", None)
        try:
            if abort is None:
                raise RuntimeError("torch has no _abort_process_group")
            abort()
        except Exception as exc:
            logger.warning("aborting the process group failed (%s); destroying it instead", exc)
            if dist.is_initialized():
                dist.destroy_process_group()
    time.sleep(SHUTDOWN_PAUSE_S)
    release_all()


def _attempt_store(rank: int, world_size: int, timeout: timedelta) -> dist.Store:
    """The rendezvous store of this start of the job (``env://``), keyed by torchrun's restart
    count and the rendezvous round: after an elastic restart (``--max-restarts``) or a node's
    joining (a new round, the same count) the agent's store still holds the dead ranks'
    addresses, and a rank that read one would connect to a process that is gone."""
    store, _, _ = next(dist.rendezvous("env://", rank, world_size, timeout=timeout))
    key = f"attempt-{environ.restart_count()}" + (f"-round-{r}" if (r := environ.rendezvous_round()) else "")
    return dist.PrefixStore(f"gnn-dist/{key}/", store)


_OWNED: list[DistContext] = []
"""The open contexts that own the default group: held here, so a bare ``init_distributed()``
keeps its group for the process's life (the context's finalizer then runs at exit)."""


def _close_at_exit(rank: int) -> None:
    """The process ends with the group open (a bare ``init_distributed()``): tear it down without
    a barrier (the peers may have ended already) and release the buffers."""
    if dist.is_initialized():
        logger.debug("rank %d: closing the process group at exit", rank)
        shutdown_process_group(clean=False)


def _resolve_backend(backend: str | None) -> str:
    if backend is None:
        return "nccl" if torch.cuda.is_available() else "gloo"
    if backend not in _BACKENDS:
        raise DistributedConfigError(
            f"backend={backend!r} is not supported; use one of {_BACKENDS} or None (NCCL when "
            f"CUDA is available, else gloo)", variable="backend")
    if backend == "nccl" and not torch.cuda.is_available():
        raise DistributedConfigError(
            "backend='nccl' needs CUDA, but torch.cuda.is_available() is False; use "
            "backend='gloo' (or None) on CPU", variable="backend")
    return backend


def _context_from_existing_group(timeout: timedelta) -> DistContext:
    backend = str(dist.get_backend())
    try:
        local_rank = int(environ.launch_variables().get("LOCAL_RANK", "0"))
    except ValueError:
        local_rank = 0
    if "nccl" in backend and torch.cuda.is_available():
        device = torch.device("cuda", torch.cuda.current_device())
    else:
        device = torch.device("cpu")
    return DistContext(rank=dist.get_rank(), world_size=dist.get_world_size(),
                       local_rank=local_rank, device=device, backend=backend, timeout=timeout,
                       owns_group=False)


def _as_timeout(timeout: timedelta | float) -> timedelta:
    if isinstance(timeout, (int, float)) and not isinstance(timeout, bool):
        if not math.isfinite(timeout):
            raise DistributedConfigError(f"timeout must be finite, got {timeout!r}", variable="timeout")
        timeout = timedelta(seconds=float(timeout))
    if not isinstance(timeout, timedelta) or timeout.total_seconds() <= 0:
        raise DistributedConfigError(
            f"timeout must be a positive datetime.timedelta or number of seconds, got {timeout!r}",
            variable="timeout")
    return timeout


def init_distributed(backend: str | None = None, *,
                     timeout: timedelta | float = DEFAULT_TIMEOUT) -> DistContext:
    """Start this rank's process group from the torchrun environment.

    Args:
        backend: ``"nccl"``, ``"gloo"`` or ``None`` (default: NCCL when CUDA is available,
            else gloo).
        timeout: timeout of every collective of the group, a ``timedelta`` or seconds
            (default: 5 minutes).

    Returns:
        The :class:`DistContext`. Without torchrun variables: world size 1, ``backend=None``
        and no group. If a default group already exists, a warning is logged and a context
        describing it is returned (``owns_group=False``: closing it leaves the group alone).

    Raises:
        DistributedConfigError: (a ``ValueError``) a torchrun variable is missing, malformed or
            out of range (the message names it; the parse error is chained), ``timeout`` is not
            positive, ``backend`` is unknown or NCCL without CUDA, or
            ``LOCAL_RANK`` has no CUDA device.
    """
    timeout = _as_timeout(timeout)
    if dist.is_available() and dist.is_initialized():
        logger.warning("init_distributed: a default process group is already initialised "
                       "(backend %s, world size %d); using it as is and leaving its lifetime "
                       "to its creator", dist.get_backend(), dist.get_world_size())
        _remember_timeout(timeout)
        return _context_from_existing_group(timeout)
    env = read_launch_env()
    if env is None:
        device = torch.device("cuda") if torch.cuda.is_available() else torch.device("cpu")
        logger.info("init_distributed: no torchrun environment; single process, no process group")
        return DistContext(rank=0, world_size=1, local_rank=0, device=device, backend=None,
                           timeout=timeout, owns_group=False)
    resolved = _resolve_backend(backend)
    if resolved == "nccl":
        num_devices = torch.cuda.device_count()
        if env.local_rank >= num_devices:
            raise DistributedConfigError(
                f"environment variable LOCAL_RANK={env.local_rank} has no CUDA device: this "
                f"machine has {num_devices}; launch at most {num_devices} processes per node",
                variable="LOCAL_RANK")
        environ.set_default("TORCH_NCCL_ASYNC_ERROR_HANDLING", "3")
        device = torch.device("cuda", env.local_rank)
        torch.cuda.set_device(device)
        dist.init_process_group("nccl", timeout=timeout, rank=env.rank, world_size=env.world_size,
                                store=_attempt_store(env.rank, env.world_size, timeout), device_id=device)
    else:
        device = torch.device("cpu")
        dist.init_process_group("gloo", timeout=timeout, rank=env.rank, world_size=env.world_size,
                                store=_attempt_store(env.rank, env.world_size, timeout))
    _remember_timeout(timeout)
    logger.info("init_distributed: rank %d/%d, local rank %d, backend %s, device %s, timeout %s",
                env.rank, env.world_size, env.local_rank, resolved, device, timeout)
    return DistContext(rank=env.rank, world_size=env.world_size, local_rank=env.local_rank,
                       device=device, backend=resolved, timeout=timeout, owns_group=True)


def _remember_timeout(timeout: timedelta) -> None:
    global _group_timeout
    _group_timeout = timeout


def new_group(ranks: list[int]) -> dist.ProcessGroup:
    """A subgroup of ``ranks`` (a collective on the default group: every rank creates every
    subgroup, in the same order) whose collectives time out after the job's timeout.
    ``torch.distributed.new_group`` without ``timeout=`` gives a subgroup torch's own default
    (30 minutes on gloo), not the default group's, so a stalled peer would hold a survivor there
    that long instead of ``--timeout``."""
    return dist.new_group(ranks, timeout=default_group_timeout())


def default_group_timeout() -> timedelta:
    """The collective timeout of the default group: read from its backend's options, else the one
    :func:`init_distributed` was given, else :data:`DEFAULT_TIMEOUT`."""
    try:
        group = dist.distributed_c10d._get_default_group()
        device = torch.device("cuda") if dist.get_backend() == "nccl" else torch.device("cpu")
        timeout = group._get_backend(device).options._timeout
        if isinstance(timeout, timedelta) and timeout.total_seconds() > 0:
            return timeout
    except (AttributeError, RuntimeError, ValueError):
        pass
    return _group_timeout or DEFAULT_TIMEOUT


def is_distributed(group: dist.ProcessGroup | None = None) -> bool:
    """True when a process group exists and has more than one rank (collectives are needed)."""
    return dist.is_available() and dist.is_initialized() and dist.get_world_size(group) > 1


def get_rank(group: dist.ProcessGroup | None = None) -> int:
    """This process's rank in ``group``; 0 when no process group exists."""
    return dist.get_rank(group) if dist.is_available() and dist.is_initialized() else 0


def get_world_size(group: dist.ProcessGroup | None = None) -> int:
    """The size of ``group``; 1 when no process group exists."""
    return dist.get_world_size(group) if dist.is_available() and dist.is_initialized() else 1
