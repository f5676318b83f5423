"""The cheapest settings that fit: candidate memory settings in order of their cost, the first
whose largest rank fits the device.

The order (each rung tried as configured, then, on CUDA, with the features off the device and
the largest cache budget that fits):

1. **as configured**: nothing to pay.
2. **feature cache budget** (``--feature-storage host --feature-cache-budget SIZE``, CUDA only):
   exact; the rows outside the budget are copied host-to-device each epoch (the first layer
   runs in chunks). On CPU the host tier is the same memory, so it saves nothing and is skipped.
3. **recompute layers**: exact (bit-identical losses), ~1.15x epoch time (the layers' forward
   again in backward), no extra communication.
4. **bf16**: faster (0.8x epoch time on CPU), halves activations and halo bytes, but not exact
   (bfloat16 rounding; accuracy within 0.3 points on the catalog: ``benchmarks/recompute.py``).
   So it comes after the exact low-cost option, and with recompute layers next.
5. **recompute all**: exact, ~1.3x epoch time and one more halo exchange per layer in backward
   (a real network pays it), so after bf16; then bf16 with it.
6. **offload activations** (CUDA only): the saved tensors cross PCIe twice per step; last.

When none fits, the answer says so, with the cheapest rung's need and how many parts would fit.

The device is one size for every rank, or one size per rank (a cluster whose devices differ,
``gnn-dist plan --device-memory 40G,20G,20G``, in world-rank order): a setting fits when every
rank fits its own device, and the rank that binds is the one with the least room on its own
(the largest rank when the devices are alike).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from .model import MiB, RankPlan, Workload, plan_rank
from .layers import tensor_input
from .sizes import PartSizes
from .stages import stage_count

__all__ = ["LADDER", "DeviceMemory", "Recommendation", "candidates", "recommend"]

DeviceMemory = int | tuple[int, ...]
"""Bytes of one device for every rank, or of each world rank's own device."""

LADDER: tuple[tuple[str, dict[str, object]], ...] = (
    ("as configured", {}),
    ("recompute layers", {"recompute": "layers"}),
    ("bf16", {"precision": "bf16"}),
    ("bf16, recompute layers", {"precision": "bf16", "recompute": "layers"}),
    ("recompute all", {"recompute": "all"}),
    ("bf16, recompute all", {"precision": "bf16", "recompute": "all"}),
    ("recompute all, offload", {"recompute": "all", "offload": True}),
    ("bf16, recompute all, offload", {"precision": "bf16", "recompute": "all", "offload": True}),
)
"""The rungs (name, the workload fields they set), cheapest first (module docstring)."""


@dataclass(frozen=True, slots=True)
class Recommendation:
    """The first candidate that fits (``fits``), or the last one tried and why none did."""

    fits: bool
    name: str
    workload: Workload
    largest: RankPlan
    """The plan of the rank that binds under ``workload``: the largest, or with a device per rank
    the one with the least room on its own."""
    device_memory: DeviceMemory
    parts_needed: int | None = None
    """When nothing fits: the fewest parts (a power of two times the current) that would (one
    device size for every rank only)."""
    limit: int = 0
    """The device of the rank that binds (bytes)."""

    @property
    def flags(self) -> list[str]:
        return self.workload.flags()


def _valid(w: Workload) -> bool:
    from ..pipeline.recompute import recompute_error

    return (not w.offload or w.device == "cuda") and recompute_error(w.recompute, w.pipeline) is None


def candidates(base: Workload) -> list[tuple[str, Workload]]:
    """The rungs applied to ``base`` (a rung never undoes a setting ``base`` already has), valid
    for its pipeline and device, duplicates dropped."""
    from ..pipeline.recompute import RECOMPUTE_MODES

    rank = {mode: i for i, mode in enumerate(RECOMPUTE_MODES)}   # none < layers < all
    out: list[tuple[str, Workload]] = []
    for name, changes in LADDER:
        w = base.replace(**changes)
        if rank[w.recompute] < rank[base.recompute] or (base.precision == "bf16" and w.precision != "bf16") \
                or (base.offload and not w.offload):
            w = w.replace(recompute=max(w.recompute, base.recompute, key=rank.__getitem__),
                          precision="bf16" if "bf16" in (w.precision, base.precision) else w.precision,
                          offload=w.offload or base.offload)
        if _valid(w) and all(w != seen for _, seen in out):
            out.append((name, w))
    return out


def _binding(sizes: list[PartSizes], w: Workload, device_memory: DeviceMemory) -> tuple[RankPlan, int]:
    """The rank that binds under ``w`` and its device: the largest against one size; with a size
    per world rank (``r = s P + g``), the rank with the least room on its own."""
    plans = [plan_rank(s, w, stage) for stage in range(stage_count(w)) for s in sizes]
    if isinstance(device_memory, int):
        return max(plans, key=lambda p: p.total), device_memory
    if len(device_memory) != len(plans):
        raise ValueError(f"{len(device_memory)} device sizes for {len(plans)} ranks: give one per rank")
    i = min(range(len(plans)), key=lambda i: device_memory[i] - plans[i].total)
    return plans[i], device_memory[i]


def _with_budget(sizes: list[PartSizes], w: Workload, device_memory: DeviceMemory) -> Workload | None:
    """``w`` with the features in host memory and the largest cache budget (whole MiB) that fits
    every rank's device, or None (CPU, or nothing left for a cache)."""
    if w.device != "cuda" or tensor_input(w.model):
        return None
    empty = w.replace(feature_storage="host", feature_cache_budget=0)
    plan, limit = _binding(sizes, empty, device_memory)
    room = limit - plan.total
    if room < 0:
        return None
    budget = f"{room // MiB}MiB"
    return w.replace(feature_storage="host", feature_cache_budget=budget)


def recommend(sizes: list[PartSizes], base: Workload, device_memory: DeviceMemory,
              more_parts: Callable[[int], list[PartSizes]] | None = None) -> Recommendation:
    """The first candidate of :func:`candidates` (each as is, then with a cache budget) under
    which every rank fits ``device_memory`` (one size, or a size per world rank); else the
    cheapest rung's plan with ``fits=False`` and, given ``more_parts`` (P -> the parts' sizes at
    P parts) and one device size, the fewest parts that fit."""
    tried = candidates(base)
    for name, w in tried:
        for option, label in ((w, name), (_with_budget(sizes, w, device_memory), f"{name}, feature cache budget")):
            if option is None:
                continue
            plan, limit = _binding(sizes, option, device_memory)
            if plan.total <= limit:
                return Recommendation(True, label, option, plan, device_memory, limit=limit)
    name, w = tried[-1]
    needed = None
    if more_parts is not None and isinstance(device_memory, int):
        p = sizes[0].num_parts
        for _ in range(12):
            p *= 2
            if recommend(more_parts(p), base, device_memory).fits:
                needed = p
                break
    plan, limit = _binding(sizes, w, device_memory)
    return Recommendation(False, name, w, plan, device_memory, needed, limit)
