"""A whole run's memory plan: every rank's prediction, the largest, and the recommendation for a
device of a given size (what ``gnn-dist plan`` prints and ``train`` logs)."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from .model import COMPONENTS, RankPlan, Workload, plan_rank
from .search import DeviceMemory, Recommendation, recommend
from .sizes import PartSizes, sizes_from_meta
from .stages import stage_count

__all__ = ["MemoryPlan", "plan_memory", "plan_from_meta", "scaled_parts"]


@dataclass(frozen=True, slots=True)
class MemoryPlan:
    """Per-rank predictions of one workload, and the recommendation when a device size is given."""

    workload: Workload
    ranks: list[RankPlan]
    sizes: list[PartSizes]
    """Every part's sizes (a layer/hybrid-parallel run's ``ranks`` are every stage over every
    part, in world-rank order ``r = s G + g``)."""
    recommendation: Recommendation | None = None

    @property
    def largest(self) -> RankPlan:
        return max(self.ranks, key=lambda r: r.total)

    def to_json(self) -> dict[str, Any]:
        """Plain JSON values (``gnn-dist plan --json``)."""
        staged = stage_count(self.workload) > 1

        def rank(r: RankPlan, s: PartSizes) -> dict[str, Any]:
            return {"part": r.part_id, **({"stage": r.stage} if staged else {}), "inner": s.inner, "halo": s.halo, "edges": s.edges, "send": s.send,
                    "components": r.bytes(), "host": {k: c.host for k, c in r.components.items() if c.host},
                    "total": r.total, "allocated": r.allocated}
        out: dict[str, Any] = {"workload": {k: getattr(self.workload, k) for k in self.workload.__slots__},
                               "components": list(COMPONENTS),
                               "ranks": [rank(r, self.sizes[i % len(self.sizes)]) for i, r in enumerate(self.ranks)],
                               "largest": {"part": self.largest.part_id, "total": self.largest.total}}
        rec = self.recommendation
        if rec is not None:
            out["recommendation"] = {"fits": rec.fits, "setting": rec.name, "flags": rec.flags,
                                     "device_memory": rec.device_memory, "largest_total": rec.largest.total,
                                     "binding": {"part": rec.largest.part_id, "stage": rec.largest.stage,
                                                 "total": rec.largest.total, "device_memory": rec.limit},
                                     "parts_needed": rec.parts_needed}
        return out


def scaled_parts(sizes: list[PartSizes]) -> Callable[[int], list[PartSizes]]:
    """P -> the largest part of ``sizes`` scaled to ``P`` parts (rows, edges, send rows and link
    pairs by the ratio of the parts, the halo share of the inner rows kept: an estimate for a
    folder)."""
    big = max(sizes, key=lambda s: s.rows + s.edges)

    def at(parts: int) -> list[PartSizes]:
        f = big.num_parts / parts
        return [dataclasses.replace(big, part_id=0, num_parts=parts, inner=max(1, int(big.inner * f)),
                                    halo=int(big.halo * f), edges=int(big.edges * f), send=int(big.send * f),
                                    link_pairs=tuple(int(n * f) for n in big.link_pairs))]
    return at


def plan_memory(sizes: list[PartSizes], workload: Workload, device_memory: DeviceMemory | None = None,
                more_parts: Callable[[int], list[PartSizes]] | None = None) -> MemoryPlan:
    """The plan of ``workload`` on parts ``sizes``; with ``device_memory`` (bytes: one device
    for every rank, or a tuple of each world rank's own) the cheapest settings under which every
    rank fits (:func:`~.search.recommend`)."""
    ranks = [plan_rank(s, workload, stage) for stage in range(stage_count(workload)) for s in sizes]
    rec = None if device_memory is None else recommend(sizes, workload, device_memory,
                                                       more_parts or scaled_parts(sizes))
    return MemoryPlan(workload, ranks, sizes, rec)


def plan_from_meta(meta: Any, config: Any, device: str = "cpu",
                   device_memory: DeviceMemory | None = None) -> MemoryPlan:
    """The plan of a partition folder's metadata (``PartitionMeta``) trained as ``config`` (a
    :class:`~gnn_dist.config.RunConfig`) on ``device`` (``cpu``/``cuda``)."""
    return plan_memory(sizes_from_meta(meta), Workload.from_config(config, device, meta), device_memory)
