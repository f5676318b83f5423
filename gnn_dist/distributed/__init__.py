"""The distributed layer: process-group lifecycle, collectives, and the halo exchange.

Imports nothing from ``gnn_dist.nn`` or ``gnn_dist.models``.
"""

from __future__ import annotations

from .collectives import (
    all_gather_json,
    all_ranks_agree,
    broadcast_bytes,
    broadcast_json,
    all_reduce_grads,
    all_reduce_max,
    all_reduce_mean,
    all_reduce_min,
    all_reduce_scalar,
    all_reduce_sum,
    barrier,
    broadcast_module,
    gather_rows,
    all_gather_rows,
    raise_on_all_ranks,
)
from .env import LaunchEnv, read_launch_env
from .errors import CollectiveError, DistributedConfigError, HaloSpecError
from .exchange_stats import ExchangeStats
from .halo import HaloExchange, HaloExchanger, HaloSubset
from .halo_handle import HaloHandle
from .link import LinkModel, LinkSpecError, SimulatedLink
from .wire import EXACT, WIRE_DTYPES, Transport, parse_wire_dtype
from .keepalive import keep_alive
from .process_group import (
    DEFAULT_TIMEOUT,
    DistContext,
    default_group_timeout,
    get_rank,
    get_world_size,
    init_distributed,
    is_distributed,
    new_group,
    shutdown_process_group,
)

__all__ = [
    "all_gather_json",
    "all_ranks_agree",
    "broadcast_bytes",
    "broadcast_json",
    "CollectiveError",
    "EXACT",
    "ExchangeStats",
    "SimulatedLink",
    "Transport",
    "WIRE_DTYPES",
    "parse_wire_dtype",
    "DEFAULT_TIMEOUT",
    "DistContext",
    "default_group_timeout",
    "DistributedConfigError",
    "HaloExchange",
    "HaloExchanger",
    "HaloHandle",
    "HaloSubset",
    "LinkModel",
    "LinkSpecError",
    "HaloSpecError",
    "LaunchEnv",
    "all_reduce_grads",
    "all_reduce_max",
    "all_reduce_mean",
    "all_reduce_min",
    "all_reduce_scalar",
    "all_reduce_sum",
    "barrier",
    "broadcast_module",
    "gather_rows",
    "all_gather_rows",
    "get_rank",
    "get_world_size",
    "init_distributed",
    "is_distributed",
    "keep_alive",
    "new_group",
    "raise_on_all_ranks",
    "read_launch_env",
    "shutdown_process_group",
]
