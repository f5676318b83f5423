"""The environment variables gnn-dist reads, all in this one module.

Everything else gets their values from here (or as arguments), once per run, so no hot path
reads the environment and a test can see every variable that matters in one table.

==================================  =========================================================
``RANK``, ``WORLD_SIZE``,           torchrun's launch variables (:func:`launch_variables`,
``LOCAL_RANK``, ``MASTER_ADDR``,    parsed by :mod:`gnn_dist.distributed.env`;
``MASTER_PORT``,                    ``LOCAL_WORLD_SIZE``: the ranks that share this machine's
``LOCAL_WORLD_SIZE``                memory, :mod:`gnn_dist.memory_plan.guard`)
``GNN_DIST_KERNELS``                the default aggregation kernels (``--kernels`` wins)
``GNN_DIST_AGENT_PID``              the launcher agent's pid, set by ``gnn-dist train`` for its
                                    ranks (:mod:`gnn_dist.distributed.parent_watch`)
``THP_MEM_ALLOC_ENABLE``            torch's huge-page CPU allocations, which turn on the ranks'
                                    malloc tuning (:mod:`gnn_dist.distributed.allocator`);
                                    defaulted to 1 by a rank itself (:func:`rank_defaults`), so
                                    ranks started by torchrun directly run as ``gnn-dist
                                    train``'s do
``TORCHELASTIC_RESTART_COUNT``     torchrun's count of restarts (keys the rendezvous store of
                                    each start, :mod:`gnn_dist.distributed.process_group`)
``GNN_DIST_RDZV_ROUND``             the rendezvous round of an elastic job's start, set by
                                    ``gnn-dist train``'s agent (keys the rendezvous store with
                                    the restart count: a node joining restarts the ranks, not
                                    the count)
``TORCHELASTIC_RUN_ID``            torchrun's ``--rdzv-id``, the same for every restart of a job
                                    (names the run holding a checkpoint folder,
                                    :mod:`gnn_dist.run_lock`)
``TORCHELASTIC_ERROR_FILE``        where torchrun reads a failed rank's reason (the one line a
                                    user error gets, :mod:`gnn_dist.failure_note`), shown in its
                                    summary's root cause
``TORCH_NCCL_ASYNC_ERROR_HANDLING`` set (unless the user set it) before an NCCL group starts
``TORCH_DISABLE_SHARE_RDZV_TCP_STORE`` read by the loopback agent (a warning: a store on every
                                    interface)
``OMP_NUM_THREADS``,                a rank's thread pools (:data:`THREAD_VARIABLES`): torch's
``NUMBA_NUM_THREADS``,              intra-op and numba's pool sizes, OpenMP's idle-thread policy;
``OMP_WAIT_POLICY``,                defaulted by ``gnn-dist train`` and by a rank itself to its
``KMP_BLOCKTIME``                   CPU share, ``PASSIVE`` and ``0`` unless the user set them
                                    (:mod:`gnn_dist.rank_threads`)
==================================  =========================================================
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator, Mapping

__all__ = ["KERNELS", "launch_variables", "launch_rank", "launch_world_size", "local_world_size", "world_size_as",
           "restart_count", "rendezvous_round", "ROUND_VARIABLE", "elastic_run_id", "error_file", "kernels", "set_default", "set_variable", "rank_defaults", "RANK_DEFAULTS",
           "THREAD_VARIABLES", "thread_settings"]

KERNELS = "GNN_DIST_KERNELS"


def launch_variables() -> Mapping[str, str]:
    """The process's environment, for the parsers of launch variables (a live view)."""
    return os.environ


def launch_rank() -> int:
    """This process's ``RANK`` as torchrun set it; 0 when unset or malformed (the launch
    parser, :func:`gnn_dist.distributed.env.read_launch_env`, reports a malformed one)."""
    try:
        return max(0, int(os.environ.get("RANK", "0")))
    except ValueError:
        return 0


def launch_world_size() -> int:
    """``WORLD_SIZE`` as torchrun set it (the ranks of the job); 1 when unset or malformed."""
    try:
        return max(1, int(os.environ.get("WORLD_SIZE", "1")))
    except ValueError:
        return 1


def local_world_size() -> int:
    """``LOCAL_WORLD_SIZE`` (the ranks on this machine, as torchrun set it); 1 when unset."""
    try:
        return max(1, int(os.environ.get("LOCAL_WORLD_SIZE", "1")))
    except ValueError:
        return 1


def restart_count() -> int:
    """``TORCHELASTIC_RESTART_COUNT`` (0 when unset or malformed: a first start)."""
    try:
        return max(0, int(os.environ.get("TORCHELASTIC_RESTART_COUNT", "0")))
    except ValueError:
        return 0


ROUND_VARIABLE = "GNN_DIST_RDZV_ROUND"
"""The rendezvous round the ranks started in, set by ``gnn-dist train``'s elastic agent."""


def rendezvous_round() -> int:
    """:data:`ROUND_VARIABLE` (0 when unset or malformed: torchrun started the ranks itself)."""
    try:
        return max(0, int(os.environ.get(ROUND_VARIABLE, "0")))
    except ValueError:
        return 0


def elastic_run_id() -> str | None:
    """``TORCHELASTIC_RUN_ID`` (torchrun's ``--rdzv-id``, kept across restarts), or None when unset or empty."""
    value = os.environ.get("TORCHELASTIC_RUN_ID", "").strip()
    return value or None


def error_file() -> str | None:
    """``TORCHELASTIC_ERROR_FILE`` (set by torchrun for each worker), or None when unset or empty."""
    value = os.environ.get("TORCHELASTIC_ERROR_FILE", "").strip()
    return value or None


def kernels() -> str | None:
    """``GNN_DIST_KERNELS`` (stripped, lower case), or None when unset or empty."""
    value = os.environ.get(KERNELS, "").strip().lower()
    return value or None


THREAD_VARIABLES = ("OMP_NUM_THREADS", "NUMBA_NUM_THREADS", "OMP_WAIT_POLICY", "KMP_BLOCKTIME")
"""The variables that size a rank's thread pools and say how their idle threads wait."""


def thread_settings(environ: Mapping[str, str] | None = None) -> dict[str, str]:
    """The :data:`THREAD_VARIABLES` set (non-empty) in ``environ`` (default: this process's)."""
    environ = os.environ if environ is None else environ
    return {name: environ[name].strip() for name in THREAD_VARIABLES if environ.get(name, "").strip()}


@contextlib.contextmanager
def world_size_as(size: int, run_id: str | None = None) -> Iterator[None]:
    """``WORLD_SIZE`` is ``size`` (and ``TORCHELASTIC_RUN_ID`` ``run_id``, when given) inside the
    block, as before after it: the agent's pre-launch check of the ranks' configuration (a
    partition family's member is the world size's; a node joining a running elastic job finds
    the checkpoint folder held by that job's ranks, which :func:`elastic_run_id` tells apart)."""
    values = {"WORLD_SIZE": str(size), **({"TORCHELASTIC_RUN_ID": run_id} if run_id else {})}
    saved = {name: os.environ.get(name) for name in values}
    os.environ.update(values)
    try:
        yield
    finally:
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value


def set_variable(name: str, value: str) -> None:
    """Set ``name`` for this process's children (the launcher agent tells its ranks its pid)."""
    os.environ[name] = value


RANK_DEFAULTS = {"THP_MEM_ALLOC_ENABLE": "1"}
"""What a rank sets for itself unless the user set it (``gnn-dist train`` sets the same for its
ranks): torch reads it once, at the process's first CPU allocation."""


def rank_defaults() -> None:
    """Set :data:`RANK_DEFAULTS` in a rank's entry point before torch is imported (a no-op once it
    is: an in-process call, a notebook, leaves the host's environment alone)."""
    import sys

    if "torch" in sys.modules:
        return
    for name, value in RANK_DEFAULTS.items():
        os.environ.setdefault(name, value)


def set_default(name: str, value: str) -> None:
    """Set ``name`` for this process and its children unless the user set it."""
    os.environ.setdefault(name, value)
