r"""Adaptive bit widths for quantised halo messages (``--halo-bits adaptive:B``), as AdaQP does.

The exchanges are grouped by (layer, direction, sender, receiver). Stochastic rounding of a row
with range :math:`R` (max - min) to :math:`b` bits adds, per value, a variance of at most
:math:`s^2/4` with :math:`s = R / (2^b - 1)` (:mod:`.quantize`); a group's total is then

.. math::
    V_g(b) = \frac{C_g}{4\,(2^b - 1)^2}, \qquad C_g = \sum_{\text{rows}} F \cdot R^2 .

Every ``every`` training steps (first after step 0) each rank reports the :math:`C_g` and value
counts :math:`n_g` of what it sent since the last decision (one ``all_gather`` of a few numbers
per group), and every rank solves, identically,

.. math::
    \min_{b_g \in \{1, 2, 4, 8\}} \sum_g V_g(b_g) \quad \text{s.t.} \quad
    \sum_g n_g b_g \le B \sum_g n_g

greedily: all groups start at 1 bit, and the upgrade with the largest variance saved per extra
bit that still fits the budget is taken until none fits or none saves anything (a group of
constant rows, whose rounding is exact, stays at 1 bit). Until the first decision every group
travels in the widest width not above ``B``. The widths in force when an exchange starts are the
ones it is encoded and decoded with, even if a decision comes while it is in flight.
"""

from __future__ import annotations

import logging
import math
import re
from dataclasses import dataclass
from typing import Any

import torch

from .collectives import all_gather_json
from .process_group import get_rank
from .quantize import BITS

__all__ = ["AdaptiveBitsSpec", "AdaptiveBits", "allocate_bits"]

log = logging.getLogger(__name__)

_SPEC = re.compile(r"^adaptive:(?P<budget>[0-9]+(\.[0-9]+)?)$")


@dataclass(frozen=True, slots=True)
class AdaptiveBitsSpec:
    """``adaptive:B``: an average of ``budget`` bits per value (``1 <= B <= 8``), re-decided
    every ``every`` training steps."""

    budget: float
    every: int = 10

    def __post_init__(self) -> None:
        if not (isinstance(self.budget, (int, float)) and 1 <= self.budget <= 8):
            raise ValueError(f"halo_bits budget {self.budget!r} must be a number of bits per value in [1, 8]")
        if isinstance(self.every, bool) or not isinstance(self.every, int) or self.every < 1:
            raise ValueError(f"halo_bits_every={self.every!r} must be an int >= 1 (training steps between "
                             f"bit-width decisions)")

    @classmethod
    def parse(cls, text: str, every: int = 10) -> "AdaptiveBitsSpec":
        m = _SPEC.match(text.strip())
        if m is None:
            raise ValueError(f"halo_bits={text!r} is not 'adaptive:B' (B: average bits per value, 1 to 8, "
                             f"e.g. adaptive:3)")
        return cls(float(m.group("budget")), every)

    def __str__(self) -> str:
        return f"adaptive:{self.budget:g}"


Group = tuple[int, bool, int, int]
"""(layer, backward, sender, receiver)."""


def allocate_bits(stats: dict[Group, tuple[float, int]], budget: float) -> dict[Group, int]:
    """The greedy allocation of the module docstring: ``stats[g] = (C_g, n_g)`` -> ``b_g``."""
    groups = sorted(stats)
    widths = sorted(BITS)
    bits = {g: widths[0] for g in groups}
    total = sum(stats[g][1] for g in groups)
    spent = float(total * widths[0])
    allowed = budget * total

    def variance(g: Group, b: int) -> float:
        return stats[g][0] / (4.0 * ((1 << b) - 1) ** 2)
    while True:
        best, best_rate = None, 0.0
        for g in groups:
            b = bits[g]
            if b == widths[-1] or stats[g][1] == 0:
                continue
            nxt = widths[widths.index(b) + 1]
            cost = stats[g][1] * (nxt - b)
            if spent + cost > allowed + 1e-9:
                continue
            rate = (variance(g, b) - variance(g, nxt)) / cost
            if rate > best_rate:
                best, best_rate = g, rate
        if best is None:
            return bits
        b = bits[best]
        nxt = widths[widths.index(b) + 1]
        spent += stats[best][1] * (nxt - b)
        bits[best] = nxt


class AdaptiveBits:
    """The :class:`~.codec.BitWidths` policy of ``--halo-bits adaptive:B`` (module docstring).

    :meth:`begin_step` is a collective on the steps it decides at: every rank of ``group`` calls
    it with the same steps (the schedules do, at each step's start)."""

    observes = True

    def __init__(self, spec: AdaptiveBitsSpec, *, group: Any = None) -> None:
        self.spec = spec
        self.group = group
        self.rank = get_rank(group)
        self.initial = max(b for b in BITS if b <= spec.budget)
        self.table: dict[Group, int] = {}
        """The decided widths (groups not in it travel in :attr:`initial` bits)."""
        self._stats: dict[tuple[int, bool, int], list[Any]] = {}

    def bits(self, layer: int, src: int, dst: int, backward: bool) -> int:
        return self.table.get((layer, backward, src, dst), self.initial)

    def observe(self, layer: int, dst: int, backward: bool, range_sq: torch.Tensor, values: int) -> None:
        entry = self._stats.setdefault((layer, backward, dst), [0.0, 0])
        entry[0] = entry[0] + range_sq.detach().to(torch.float64)
        entry[1] += values

    def begin_step(self, step: int) -> None:
        if step >= 1 and (step - 1) % self.spec.every == 0:
            self.decide()

    def decide(self) -> None:
        """Agree on new widths from the statistics since the last decision (a collective)."""
        mine = [[layer, backward, self.rank, dst, float(c), int(n)]
                for (layer, backward, dst), (c, n) in sorted(self._stats.items())]
        self._stats.clear()
        stats: dict[Group, tuple[float, int]] = {}
        for rows in all_gather_json(mine, self.group):
            for layer, backward, src, dst, c, n in rows:
                c = float(c) if math.isfinite(float(c)) else 0.0
                stats[(int(layer), bool(backward), int(src), int(dst))] = (c, int(n))
        if stats:
            self.table = allocate_bits(stats, self.spec.budget)
            values = sum(n for _, n in stats.values())
            mean = sum(self.table[g] * stats[g][1] for g in stats) / max(values, 1)
            if self.rank == 0:
                log.info("halo bits %s: %.2f bits a value over %d groups (%s)", self.spec, mean, len(stats),
                         ", ".join(f"{b} bits: {sum(1 for v in self.table.values() if v == b)}"
                                   for b in sorted(set(self.table.values()))))

    def state_dict(self) -> dict[str, Any]:
        """What the next decisions read: the widths in force and every rank's statistics since the
        last decision (gathered: a collective), for a checkpoint's main file (JSON-able)."""
        mine = [[layer, backward, dst, float(c), int(n)] for (layer, backward, dst), (c, n) in sorted(self._stats.items())]
        return {"budget": self.spec.budget, "every": self.spec.every,
                "table": [[layer, backward, src, dst, b] for (layer, backward, src, dst), b in sorted(self.table.items())],
                "stats": all_gather_json(mine, self.group)}

    def load_state_dict(self, state: dict[str, Any]) -> str | None:
        """Restore :meth:`state_dict`'s output; returns why it cannot (another budget or
        interval: nothing is restored), or None."""
        if float(state.get("budget", -1)) != self.spec.budget or int(state.get("every", -1)) != self.spec.every:
            return (f"the checkpoint's adaptive halo widths were decided for adaptive:{state.get('budget')} every "
                    f"{state.get('every')} steps, this run has {self.spec} every {self.spec.every}")
        self.table = {(int(layer), bool(backward), int(src), int(dst)): int(b)
                      for layer, backward, src, dst, b in state["table"]}
        rows = state["stats"][self.rank] if self.rank < len(state["stats"]) else []
        self._stats = {(int(layer), bool(backward), int(dst)): [float(c), int(n)] for layer, backward, dst, c, n in rows}
        return None

    def describe(self) -> str:
        return str(self.spec)

    def __repr__(self) -> str:
        return f"AdaptiveBits({self.spec}, every={self.spec.every}, groups={len(self.table)})"
