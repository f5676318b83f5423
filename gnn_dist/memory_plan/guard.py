"""How much memory a training rank needs, from the partition's metadata before it starts, and
the guard that refuses a run that would not fit (``--max-memory``).

The estimate is the memory planner's (:mod:`gnn_dist.memory_plan`: runtime, block, features,
halo buffers, activations, optimizer, workspace, each a formula of the part's sizes), for ranks
on the CPU: the machine's memory is what ``--max-memory`` bounds.

The machine's ranks share its memory: ``gnn-dist train`` (``--validate``) adds up the estimates
of every part before torchrun starts; each rank checks its own share
(``max_memory / local ranks``) again at start. On a cluster whose ranks differ, ``--max-memory
40G,20G,20G`` gives each world rank its own limit (one size per rank): every rank is checked
against its own, before the launch and again at start, and a refusal names the rank. A refusal
is one line with the estimate, the limit and the fix (exit code 2). How close the planner comes to the measured peaks:
``docs/performance.md`` ("Memory planner").
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import Any

from partitioners.memory import MemoryLimitError, available_memory, format_bytes, parse_size, parse_size_list

from .model import RUNTIME_BYTES

__all__ = ["RUNTIME_BYTES", "RankEstimate", "estimate_rank_memory", "world_ranks", "check_training_memory",
           "memory_limit", "rank_limits"]

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class RankEstimate:
    """The estimated peak of one rank, in bytes, with its terms."""

    part_id: int
    parts: dict[str, int] = field(default_factory=dict)
    stage: int | None = None
    """The rank's stage in a layer/hybrid-parallel run (None: graph parallelism)."""

    @property
    def where(self) -> str:
        """``part P`` (and ``, stage S``)."""
        return f"part {self.part_id}" + ("" if self.stage is None else f", stage {self.stage}")

    @property
    def total(self) -> int:
        return sum(self.parts.values())

    def describe(self) -> str:
        terms = ", ".join(f"{k} {format_bytes(v)}" for k, v in self.parts.items())
        return f"~{format_bytes(self.total)} ({terms})"


def estimate_rank_memory(meta: Any, rank: int, config: Any) -> RankEstimate:
    """The planner's prediction for world rank ``rank`` of a run on ``meta`` (a ``PartitionMeta``)
    trained as ``config`` (a :class:`~gnn_dist.config.RunConfig`) says, on the CPU: part ``rank``
    of a graph-parallel run; of a layer/hybrid-parallel one (``r = s P + g``), stage ``rank // P``
    over part ``rank % P``."""
    from . import Workload, plan_rank, sizes_from_meta

    sizes = sizes_from_meta(meta)
    stage, part = divmod(rank, len(sizes))
    staged = config.trainer.parallel.parallel != "graph"
    plan = plan_rank(sizes[part], Workload.from_config(config, "cpu", meta), stage)
    return RankEstimate(part, plan.bytes(), stage if staged else None)


def world_ranks(meta: Any, config: Any) -> list[int]:
    """Every rank of a run of ``config`` on ``meta``: a rank per part, times the stages of a
    layer/hybrid-parallel run."""
    return list(range(int(meta.num_parts) * config.trainer.parallel.stages))


def memory_limit(config: Any) -> tuple[int, str]:
    """``(bytes, where it came from)``: ``--max-memory``, else the machine's available memory."""
    spec = config.distributed.max_memory
    if spec is None:
        return available_memory(), "the available memory (the --max-memory default)"
    return parse_size(spec), f"--max-memory {spec}"


def rank_limits(config: Any) -> tuple[int, ...] | None:
    """Each world rank's own limit in bytes when ``--max-memory`` lists several sizes (one per
    rank), else None (one size, or none: the machine's, shared by its ranks)."""
    spec = config.distributed.max_memory
    limits = None if spec is None else parse_size_list(spec)
    return limits if limits is not None and len(limits) > 1 else None


def check_training_memory(meta: Any, config: Any, ranks: list[int], *, local_ranks: int) -> int:
    """Refuse (:class:`~partitioners.memory.MemoryLimitError`, a ``ValueError``) when the world
    ranks ``ranks`` (:func:`estimate_rank_memory`), on a machine that runs ``local_ranks`` ranks,
    need more than their share of the limit (with a limit per rank, :func:`rank_limits`: when
    one of them needs more than its own); else log the estimate. Returns the estimated bytes of
    ``ranks``."""
    estimates = [estimate_rank_memory(meta, r, config) for r in ranks]
    total = sum(e.total for e in estimates)
    limits = rank_limits(config)
    if limits is not None:
        _check_each_rank(meta, config, dict(zip(ranks, estimates)), limits)
        return total
    limit, source = memory_limit(config)
    share = limit * len(ranks) // max(local_ranks, 1)
    largest = max(estimates, key=lambda e: e.total)
    who = f"{len(ranks)} rank(s) on this machine"
    if share < limit:
        source = f"their {len(ranks)}/{local_ranks} share of {source}"
    if total > share:
        raise MemoryLimitError(
            f"training {config.data.data} needs ~{format_bytes(total)} for {who} (the largest, "
            f"{largest.where}: {largest.describe()}), more than {source} ({format_bytes(share)}); pass a larger "
            f"--max-memory if the machine has it, recompute in backward (--recompute layers or all; gnn-dist plan "
            f"--data DIR --device cpu --device-memory SIZE names the cheapest settings that fit), or spread the parts "
            f"over more machines (ranks on one machine share its memory: more parts there need more of it, not less)")
    log.info("memory estimate: ~%s for %s (the largest, %s: %s); limit %s (%s)", format_bytes(total), who,
             largest.where, largest.describe(), format_bytes(share), source)
    return total


def _check_each_rank(meta: Any, config: Any, estimates: dict[int, RankEstimate], limits: tuple[int, ...]) -> None:
    """Every world rank of ``estimates`` against its own limit (``limits[rank]``); the refusal
    names the first rank over its limit."""
    spec, world = config.distributed.max_memory, len(world_ranks(meta, config))
    if len(limits) != world:
        raise MemoryLimitError(f"--max-memory {spec} gives {len(limits)} sizes for the {world} ranks of "
                               f"{config.data.data}; give one size per rank (world rank order), or one size for "
                               f"the machine's ranks to share")
    over = [r for r, e in estimates.items() if e.total > limits[r]]
    if over:
        r, e = over[0], estimates[over[0]]
        more = f" (and {len(over) - 1} more rank(s))" if len(over) > 1 else ""
        raise MemoryLimitError(
            f"training {config.data.data}: rank {r} ({e.where}) needs {e.describe()}, more than its own "
            f"--max-memory {format_bytes(limits[r])} (size {r + 1} of {spec}){more}; give its part less of the graph "
            f"(gnn-dist partition --device-memory {spec} sizes the parts to the devices), recompute in backward "
            f"(gnn-dist plan --data DIR --device-memory {spec} names the cheapest settings that fit), or give the "
            f"rank a larger device")
    for r, e in estimates.items():
        log.info("memory estimate of rank %d (%s): %s; its limit %s (size %d of --max-memory %s)", r, e.where,
                 e.describe(), format_bytes(limits[r]), r + 1, spec)
