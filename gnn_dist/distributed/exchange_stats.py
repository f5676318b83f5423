"""What halo exchanges cost: bytes, calls and time, accumulated while they run.

An exchanger adds every exchange to its lifetime totals and to each :class:`ExchangeStats` a
caller is recording with (``with exchanger.recording() as stats:``), so a training step gets its
own figures as a value, not as the difference of counters before and after it. Bytes are
counted when an exchange starts, times when it is waited for (an exchange started in one step and
waited for in the next counts its time in the next).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

__all__ = ["ExchangeStats"]


@dataclass(slots=True)
class ExchangeStats:
    """Halo-exchange figures of one rank (its side: the forward sends the ``S`` send rows and
    receives the halo rows, the backward the opposite; bytes as they travel, in the wire dtype)."""

    bytes_sent: int = 0
    bytes_received: int = 0
    num_forward: int = 0
    """Exchanges started in the forward direction."""
    num_backward: int = 0
    comm_time_s: float = 0.0
    """Sum over waited-for exchanges of their duration: start to completion, or the simulated
    link's latency + bytes / bandwidth when longer (time queueing for the link is not counted twice)."""
    exposed_comm_s: float = 0.0
    """Time the caller spent blocked waiting for exchanges."""
    bytes_by_tag: dict[Any, int] = field(default_factory=dict)
    """Bytes sent per tag the exchanges were given (e.g. the layer index)."""
    last_bytes_sent: int = 0
    """Bytes of the most recent exchange started."""
    last_bytes_received: int = 0

    def add_start(self, sent: int, received: int, tag: Any, *, backward: bool) -> None:
        self.last_bytes_sent, self.last_bytes_received = sent, received
        self.bytes_sent += sent
        self.bytes_received += received
        if tag is not None:
            self.bytes_by_tag[tag] = self.bytes_by_tag.get(tag, 0) + sent
        if backward:
            self.num_backward += 1
        else:
            self.num_forward += 1

    def add_wait(self, exposed_s: float, comm_s: float) -> None:
        self.exposed_comm_s += exposed_s
        self.comm_time_s += comm_s

    def bytes_per_layer(self, num_layers: int) -> list[int]:
        """Bytes sent per integer tag ``0 .. max(num_layers, highest tag + 1) - 1``."""
        n = max([num_layers] + [k + 1 for k in self.bytes_by_tag if isinstance(k, int)])
        return [self.bytes_by_tag.get(i, 0) for i in range(n)]
