"""A network link simulated on one machine, for measuring schedules as a slower network would
run them (``--simulate-link latency_ms=L,gbps=B``).

One link per rank, full duplex, carrying one transfer at a time: exchanges in flight together
queue for it, in the order they were started. A transfer of ``max(bytes sent, bytes received)``
starts when its exchange starts or when the link is free, whichever is later, occupies the link
for ``bytes / bandwidth`` and arrives ``latency`` after that; the exchange's wait does not return
before then (:class:`SimulatedLink`). The delay is a deadline checked at the wait, so the calling
thread computes meanwhile: an exchange waited for late costs nothing.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass

__all__ = ["LinkModel", "LinkSpecError", "SimulatedLink"]


class LinkSpecError(ValueError):
    """A simulated-link description (``"latency_ms=L,gbps=B"``) is malformed."""


@dataclass(frozen=True, slots=True)
class LinkModel:
    """A network link simulated on one machine: each exchange completes no earlier than
    ``latency_ms`` plus its bytes at ``gbps`` gigabits per second after it started.

    Build one directly or with :meth:`parse` from ``"latency_ms=L,gbps=B"`` (the CLI's
    ``--simulate-link``).
    """

    latency_ms: float
    """One-way latency per exchange in milliseconds (>= 0)."""
    gbps: float
    """Bandwidth in gigabits (1e9 bits) per second (> 0)."""

    def __post_init__(self) -> None:
        for name, value in (("latency_ms", self.latency_ms), ("gbps", self.gbps)):
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
                raise LinkSpecError(f"simulate_link: {name}={value!r} must be a finite number")
        if self.latency_ms < 0:
            raise LinkSpecError(f"simulate_link: latency_ms={self.latency_ms} must be >= 0")
        if self.gbps <= 0:
            raise LinkSpecError(f"simulate_link: gbps={self.gbps} must be > 0")

    @classmethod
    def parse(cls, spec: str) -> "LinkModel":
        """``"latency_ms=L,gbps=B"`` (both keys, in any order) -> a :class:`LinkModel`."""
        if not isinstance(spec, str) or not spec.strip():
            raise LinkSpecError(f"simulate_link: expected 'latency_ms=L,gbps=B', got {spec!r}")
        values: dict[str, float] = {}
        for item in spec.split(","):
            key, eq, raw = item.strip().partition("=")
            key = key.strip()
            if not eq or key not in ("latency_ms", "gbps"):
                raise LinkSpecError(f"simulate_link: {item.strip()!r} in {spec!r} is not latency_ms=L or "
                                    f"gbps=B; expected 'latency_ms=L,gbps=B'")
            if key in values:
                raise LinkSpecError(f"simulate_link: {key} is given twice in {spec!r}")
            if not re.fullmatch(r"\s*[-+]?(\d+\.?\d*|\.\d+)([eE][-+]?\d+)?\s*", raw):
                raise LinkSpecError(f"simulate_link: {key}={raw.strip()!r} in {spec!r} is not a number")
            values[key] = float(raw)
        missing = [k for k in ("latency_ms", "gbps") if k not in values]
        if missing:
            raise LinkSpecError(f"simulate_link: {spec!r} lacks {' and '.join(missing)}; expected "
                                f"'latency_ms=L,gbps=B'")
        return cls(latency_ms=values["latency_ms"], gbps=values["gbps"])

    def delay_s(self, num_bytes: int) -> float:
        """Seconds a transfer of ``num_bytes`` takes on this link (latency + bytes / bandwidth)."""
        return self.latency_ms * 1e-3 + num_bytes * 8.0 / (self.gbps * 1e9)

    def __str__(self) -> str:
        return f"latency_ms={self.latency_ms:g},gbps={self.gbps:g}"



class SimulatedLink:
    """One rank's simulated link (:class:`LinkModel`) and when it is next free: the state of the
    queue of transfers. A schedule owns one for its training steps; evaluation has none."""

    def __init__(self, model: LinkModel) -> None:
        self.model = model
        self._free_at = 0.0

    def schedule(self, start_s: float, num_bytes: int) -> tuple[float, float]:
        """Queue a transfer of ``num_bytes`` started at ``start_s`` (``time.perf_counter()``);
        returns ``(deadline_s, link_s)``: when it arrives, and its own time on the link (latency
        + bytes / bandwidth)."""
        link_s = self.model.delay_s(num_bytes)
        latency_s = self.model.latency_ms * 1e-3
        self._free_at = max(start_s, self._free_at) + link_s - latency_s
        return self._free_at + latency_s, link_s

    def __repr__(self) -> str:
        return f"SimulatedLink({self.model})"
