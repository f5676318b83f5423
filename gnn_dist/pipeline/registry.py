"""The registry of halo-exchange schedules: a new mode is one module that registers its class,
plus one import line in :mod:`gnn_dist.pipeline` (or the user's own import).

A registered class is built by :func:`build_schedule` as
``cls(part.block, part.exchanger, options, subset_fn=..., transport=...)``: ``options`` is the
schedule's configuration (``pipeline``, ``stale_smoothing``, ``overlap_chunks`` ...: anything
with those attributes, e.g. :class:`gnn_dist.config.ScheduleConfig`), ``subset_fn`` the boundary
sampler when ``boundary_sample_rate < 1``, ``transport`` the wire dtype and simulated link that
training exchanges use. It implements :class:`~.base.Pipeline`.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

from ..config.registry import register_choices
from ..distributed import Transport
from ..distributed.adaptive_bits import AdaptiveBitsSpec
from .base import Pipeline
from .sampling import BoundarySampler

__all__ = ["SCHEDULES", "register_schedule", "build_schedule", "schedule_names"]

SCHEDULES: dict[str, type] = {}
"""Registered schedules by name (``pipeline=``)."""

C = TypeVar("C", bound=type)


def register_schedule(name: str) -> Callable[[C], C]:
    """Class decorator: register the schedule under ``name`` (its ``name`` attribute is set)."""
    def deco(cls: C) -> C:
        if name in SCHEDULES and SCHEDULES[name] is not cls:
            raise ValueError(f"a schedule named {name!r} is already registered ({SCHEDULES[name].__qualname__})")
        cls.name = name  # type: ignore[attr-defined]
        SCHEDULES[name] = cls
        return cls
    return deco


def schedule_names() -> tuple[str, ...]:
    """The registered names, sorted."""
    return tuple(sorted(SCHEDULES))


register_choices("schedule", schedule_names)   # --pipeline (gnn_dist.config)


def build_schedule(options: Any, part: Any, *, seed: int = 0) -> Pipeline:
    """A fresh schedule ``options.pipeline`` for ``part`` (anything with ``block`` and
    ``exchanger``); boundary samples and the quantised codecs' rounding are seeded with ``seed``."""
    name = options.pipeline
    if name not in SCHEDULES:
        raise ValueError(f"pipeline={name!r} is not a registered schedule; choose from {', '.join(schedule_names())}")
    sampler = None
    if options.boundary_sample_rate != 1.0:
        sampler = BoundarySampler(part.exchanger, options.boundary_sample_rate, seed)
    bits = getattr(options, "halo_bits", None)
    transport = Transport.build(options.halo_dtype, options.simulate_link,
                                halo_grad_dtype=getattr(options, "halo_grad_dtype", None),
                                halo_bits=None if bits is None else AdaptiveBitsSpec.parse(
                                    bits, getattr(options, "halo_bits_every", 10)),
                                seed=seed, group=part.exchanger.group)
    return SCHEDULES[name](part.block, part.exchanger, options, subset_fn=sampler, transport=transport)
