"""How the run report writes its figures: times, metric values, byte counts, epoch ranges, and
what was not recorded. Torch-free."""

from __future__ import annotations

from typing import Sequence

from .task import BOUNDED

NOT_RECORDED = "not recorded"


def fmt_ms(seconds: float | None) -> str:
    return NOT_RECORDED if seconds is None else f"{seconds * 1e3:,.1f} ms"


def fmt_acc(value: float | None) -> str:
    return NOT_RECORDED if value is None else f"{value:.4f}"


def fmt_metric(metric: str, value: float | None) -> str:
    """A metric's value: 4 decimals for one in [0, 1] (an accuracy), 5 significant digits else."""
    if value is None or metric in BOUNDED:
        return fmt_acc(value)
    return f"{value:.5g}"


_BYTE_UNITS = (("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10), ("B", 1))


def byte_unit(largest: float) -> tuple[str, float]:
    """The unit (name, bytes) to show values up to ``largest`` bytes in."""
    for name, size in _BYTE_UNITS:
        if largest >= size:
            return name, size
    return "B", 1


def fmt_bytes(n: float | None) -> str:
    if n is None:
        return NOT_RECORDED
    name, size = byte_unit(n)
    return f"{n:,.0f} B" if size == 1 else f"{n / size:,.2f} {name} ({n:,.0f} B)"


def epoch_range(epochs: Sequence[int]) -> str:
    """``epoch 3`` or ``epoch 0 to 9``."""
    return f"epoch {epochs[0]}" if len(epochs) == 1 else f"epoch {epochs[0]} to {epochs[-1]}"
