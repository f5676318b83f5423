"""Parse the launch environment torchrun gives each worker.

torchrun (``python -m torch.distributed.run``) sets, per worker: ``RANK``, ``WORLD_SIZE``,
``LOCAL_RANK``, ``LOCAL_WORLD_SIZE``, ``MASTER_ADDR`` and ``MASTER_PORT``. A process started
without them is a single-process run. A partial or malformed environment is a
:class:`DistributedConfigError` that names the variable, so a bad launch fails before any
rendezvous instead of hanging in one.

This module reads a mapping it is given (the process's environment, through
:mod:`gnn_dist.environ`, by default) and touches no torch state.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from .errors import DistributedConfigError

__all__ = ["LaunchEnv", "read_launch_env"]

# Presence of either of these means "launched as one rank of a group".
_TRIGGERS = ("RANK", "WORLD_SIZE")


@dataclass(frozen=True, kw_only=True, slots=True)
class LaunchEnv:
    """The parsed torchrun variables of one worker."""

    rank: int
    """Global rank, ``0 <= rank < world_size``."""
    world_size: int
    """Number of ranks in the job (``>= 1``)."""
    local_rank: int
    """Rank within this machine: the CUDA device index this worker uses."""
    master_addr: str
    """Host of the rendezvous store."""
    master_port: int
    """Port of the rendezvous store, in ``[1, 65535]``."""


def _int_var(environ: Mapping[str, str], name: str, *, minimum: int) -> int:
    raw = environ[name]
    try:
        value = int(raw.strip())
    except ValueError as exc:
        raise DistributedConfigError(
            f"environment variable {name}={raw!r} is not an integer; torchrun sets it to one "
            f"(launch with `torchrun --nproc-per-node N ...` or fix the variable)",
            variable=name) from exc
    if value < minimum:
        raise DistributedConfigError(
            f"environment variable {name}={raw!r} must be >= {minimum}", variable=name)
    return value


def _require(environ: Mapping[str, str], name: str) -> None:
    if name not in environ or not environ[name].strip():
        found = [n for n in _TRIGGERS if n in environ]
        present = " and ".join(found)
        verb = "is" if len(found) == 1 else "are"
        raise DistributedConfigError(
            f"environment variable {name} is not set, but {present} {verb}: the launch environment "
            f"is incomplete (launch with torchrun, or unset {present} for a single-process run)",
            variable=name)


def read_launch_env(environ: Mapping[str, str] | None = None) -> LaunchEnv | None:
    """Read the torchrun variables; ``None`` when the process was not launched as a rank.

    ``LOCAL_RANK`` defaults to 0 when absent (a CPU job started by hand); everything else is
    required once ``RANK`` or ``WORLD_SIZE`` is present.

    Raises:
        DistributedConfigError: a variable is missing, not an integer, or out of range; the
            message and ``.variable`` name it, and the ``int()`` failure is chained.
    """
    if environ is None:
        from ..environ import launch_variables
        environ = launch_variables()
    if not any(name in environ for name in _TRIGGERS):
        return None
    for name in ("RANK", "WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT"):
        _require(environ, name)
    world_size = _int_var(environ, "WORLD_SIZE", minimum=1)
    rank = _int_var(environ, "RANK", minimum=0)
    if rank >= world_size:
        raise DistributedConfigError(
            f"environment variable RANK={environ['RANK']!r} is out of range for "
            f"WORLD_SIZE={world_size}: it must be in [0, {world_size})", variable="RANK")
    local_rank = _int_var(environ, "LOCAL_RANK", minimum=0) if "LOCAL_RANK" in environ else 0
    port = _int_var(environ, "MASTER_PORT", minimum=1)
    if port > 65535:
        raise DistributedConfigError(
            f"environment variable MASTER_PORT={environ['MASTER_PORT']!r} is not a TCP port "
            f"(must be in [1, 65535])", variable="MASTER_PORT")
    return LaunchEnv(rank=rank, world_size=world_size, local_rank=local_rank,
                     master_addr=environ["MASTER_ADDR"].strip(), master_port=port)
