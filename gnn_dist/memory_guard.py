"""How much memory a training rank needs, from the partition's metadata before it starts, and
the guard that refuses a run that would not fit (``--max-memory``).

The estimate is the memory planner's (:mod:`gnn_dist.memory_plan`: runtime, block, features,
halo buffers, activations, optimizer, workspace, each a formula of the part's sizes), for ranks
on the CPU: the machine's memory is what ``--max-memory`` bounds.

The machine's ranks share its memory: ``gnn-dist train`` (``--validate``) adds up the estimates
of every part before torchrun starts; each rank checks its own share
(``max_memory / local ranks``) again at start. A refusal is one line with the estimate, the
limit and the fix (exit code 2). How close the planner comes to the measured peaks:
``docs/performance.md`` ("Memory planner").
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import Any

from partitioners.memory import MemoryLimitError, available_memory, format_bytes, parse_size

from .memory_plan import RUNTIME_BYTES

__all__ = ["RUNTIME_BYTES", "RankEstimate", "estimate_rank_memory", "check_training_memory", "memory_limit"]

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class RankEstimate:
    """The estimated peak of one rank, in bytes, with its terms."""

    part_id: int
    parts: dict[str, int] = field(default_factory=dict)

    @property
    def total(self) -> int:
        return sum(self.parts.values())

    def describe(self) -> str:
        terms = ", ".join(f"{k} {format_bytes(v)}" for k, v in self.parts.items())
        return f"~{format_bytes(self.total)} ({terms})"


def estimate_rank_memory(meta: Any, part_id: int, config: Any) -> RankEstimate:
    """The planner's prediction for part ``part_id`` of ``meta`` (a ``PartitionMeta``) trained as
    ``config`` (a :class:`~gnn_dist.config.RunConfig`) says, on the CPU."""
    from .memory_plan import Workload, plan_rank, sizes_from_meta

    plan = plan_rank(sizes_from_meta(meta)[part_id], Workload.from_config(config, "cpu"))
    return RankEstimate(part_id, plan.bytes())


def memory_limit(config: Any) -> tuple[int, str]:
    """``(bytes, where it came from)``: ``--max-memory``, else the machine's available memory."""
    spec = config.distributed.max_memory
    if spec is None:
        return available_memory(), "the available memory (the --max-memory default)"
    return parse_size(spec), f"--max-memory {spec}"


def check_training_memory(meta: Any, config: Any, part_ids: list[int], *, local_ranks: int) -> int:
    """Refuse (:class:`~partitioners.memory.MemoryLimitError`, a ``ValueError``) when the ranks
    of ``part_ids``, on a machine that runs ``local_ranks`` ranks, need more than their share of
    the limit; else log the estimate. Returns the estimated bytes of ``part_ids``."""
    estimates = [estimate_rank_memory(meta, p, config) for p in part_ids]
    total = sum(e.total for e in estimates)
    limit, source = memory_limit(config)
    share = limit * len(part_ids) // max(local_ranks, 1)
    largest = max(estimates, key=lambda e: e.total)
    ranks = f"{len(part_ids)} rank(s) on this machine"
    if share < limit:
        source = f"their {len(part_ids)}/{local_ranks} share of {source}"
    if total > share:
        raise MemoryLimitError(
            f"training {config.data.data} needs ~{format_bytes(total)} for {ranks} (the largest, part "
            f"{largest.part_id}: {largest.describe()}), more than {source} ({format_bytes(share)}); pass a larger "
            f"--max-memory if the machine has it, recompute in backward (--recompute layers or all; gnn-dist plan "
            f"--data DIR --device cpu --device-memory SIZE names the cheapest settings that fit), or partition into "
            f"more parts")
    log.info("memory estimate: ~%s for %s (the largest, part %d: %s); limit %s (%s)", format_bytes(total), ranks,
             largest.part_id, largest.describe(), format_bytes(share), source)
    return total
