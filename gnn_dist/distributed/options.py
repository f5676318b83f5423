"""The transport options of the schedule section, checked once with the config.

:class:`~gnn_dist.config.ScheduleConfig` checks its own values; the rules of how halo rows
travel are this package's and are registered into the config's checks
(:mod:`gnn_dist.config.registry`): ``halo_bits`` (adaptive widths, :mod:`.adaptive_bits`; not
with a fixed ``halo_dtype``) and ``simulate_link`` (a :class:`~.link.LinkModel`, or its
``"latency_ms=L,gbps=B"`` string or a dict of its fields, turned into one here). The choices of
``halo_dtype`` are the codecs' names (registered by :mod:`.codec`).
"""

from __future__ import annotations

from typing import Any

from ..config.fields import ConfigError, require
from ..config.registry import register_check
from .adaptive_bits import AdaptiveBitsSpec
from .link import LinkModel, LinkSpecError

__all__ = ["check_transport_options"]


def check_transport_options(schedule: Any) -> None:
    """``halo_bits`` parsed and alone; ``simulate_link`` a :class:`~.link.LinkModel` (its string
    or dict replaced by one) or None."""
    if schedule.halo_bits is not None:
        try:
            AdaptiveBitsSpec.parse(schedule.halo_bits, schedule.halo_bits_every)
        except ValueError as exc:
            raise ConfigError("halo_bits", str(exc)) from None
        if schedule.halo_dtype is not None:
            raise ConfigError("halo_bits", f"{schedule.halo_bits} chooses the halo rows' widths; it cannot be "
                                           f"combined with halo_dtype={schedule.halo_dtype!r} (drop one)")
    if isinstance(schedule.simulate_link, (str, dict)):
        try:
            schedule.simulate_link = (LinkModel.parse(schedule.simulate_link) if isinstance(schedule.simulate_link, str)
                                      else LinkModel(**schedule.simulate_link))
        except (LinkSpecError, TypeError) as exc:
            raise ConfigError("simulate_link", str(exc)) from None
    require(schedule.simulate_link is None or isinstance(schedule.simulate_link, LinkModel), "simulate_link",
            schedule.simulate_link, "'latency_ms=L,gbps=B' or a LinkModel")


register_check("schedule", check_transport_options)
