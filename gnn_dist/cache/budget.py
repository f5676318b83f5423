"""Byte budgets for the device tier: ``"4GB"``, ``"1.5GiB"``, ``"25%"``, ``0.25``, ``123``.

Decimal units (``B``, ``KB``, ``MB``, ``GB``, ``TB``) are powers of 1000 and binary units
(``KiB``, ``MiB``, ``GiB``, ``TiB``) powers of 1024, case-insensitive. Sizes are parsed
exactly (``fractions.Fraction``), so ``"1.5GiB"`` is ``1610612736`` bytes, never off by one.
"""

from __future__ import annotations

import math
import numbers
import re
from fractions import Fraction

__all__ = ["BUDGET_FORMS", "format_bytes", "parse_budget"]

BUDGET_FORMS = (
    "None (no limit), an int of bytes >= 0, a float fraction in [0, 1] of the rows' bytes, "
    "or a string such as '4GB', '512MiB', '123' (bytes) or '25%'"
)
"""The accepted forms, quoted by every error of :func:`parse_budget`."""

_UNITS = {
    "": 1, "b": 1,
    "kb": 1000, "mb": 1000**2, "gb": 1000**3, "tb": 1000**4,
    "kib": 1024, "mib": 1024**2, "gib": 1024**3, "tib": 1024**4,
}
_UNIT_NAMES = "B, KB, MB, GB, TB (powers of 1000), KiB, MiB, GiB, TiB (powers of 1024)"
_SIZE = re.compile(r"^\s*(?P<num>(?:\d+\.?\d*|\.\d+)(?:e[+-]?\d+)?)\s*(?P<unit>[a-z]*)\s*$", re.IGNORECASE)


def parse_budget(spec: str | int | float | None, total_bytes: int) -> int:
    """Bytes the device tier may hold.

    Args:
        spec: ``None`` (no limit: ``total_bytes``); an ``int`` of bytes (``>= 0``); a ``float``
            in ``[0, 1]``, a fraction of ``total_bytes`` (a float above 1 is an error: pass an
            int of bytes or a size string); a ``str``: ``"4GB"``, ``"1.5GiB"``, ``"123"``
            (bytes) or ``"25%"`` (a fraction of ``total_bytes``).
        total_bytes: the bytes of every row the store holds (what a fraction refers to).

    Returns:
        The budget in bytes, as parsed: it may exceed ``total_bytes`` (the store caches at most
        what it holds). Fractions round down.

    Raises:
        ValueError: naming the value and the accepted forms.
    """
    if isinstance(total_bytes, bool) or not isinstance(total_bytes, numbers.Integral) or total_bytes < 0:
        raise ValueError(f"total_bytes must be an int >= 0, got {total_bytes!r}")
    total = int(total_bytes)
    if spec is None:
        return total
    if isinstance(spec, bool):
        raise ValueError(f"cache budget {spec!r} is a bool; expected {BUDGET_FORMS}")
    if isinstance(spec, numbers.Integral):
        if spec < 0:
            raise ValueError(f"cache budget {spec!r} is negative; expected {BUDGET_FORMS}")
        return int(spec)
    if isinstance(spec, numbers.Real):
        value = float(spec)
        if not math.isfinite(value) or value < 0:
            raise ValueError(f"cache budget {spec!r} is not a fraction in [0, 1]; expected {BUDGET_FORMS}")
        if value > 1:
            raise ValueError(
                f"cache budget {spec!r}: a float is a fraction in [0, 1] of the rows' bytes; "
                f"for a size pass an int of bytes or a size string such as '4GB'"
            )
        return math.floor(Fraction(value) * total)
    if isinstance(spec, str):
        return _parse_budget_str(spec, total)
    raise ValueError(f"cache budget {spec!r} has type {type(spec).__name__}; expected {BUDGET_FORMS}")


def _parse_budget_str(spec: str, total: int) -> int:
    """:func:`parse_budget` for a string: a size with an optional unit, or a percentage."""
    text = spec.strip()
    if text.endswith("%"):
        match = _SIZE.match(text[:-1])
        if match is None or match["unit"]:
            raise ValueError(f"cache budget {spec!r} is not a percentage; expected {BUDGET_FORMS}")
        percent = Fraction(match["num"])
        if percent > 100:
            raise ValueError(f"cache budget {spec!r} is above 100%; expected {BUDGET_FORMS}")
        return math.floor(percent * total / 100)
    match = _SIZE.match(text)
    if match is None:
        raise ValueError(f"cache budget {spec!r} is not a size; expected {BUDGET_FORMS}")
    scale = _UNITS.get(match["unit"].lower())
    if scale is None:
        raise ValueError(f"cache budget {spec!r} has an unknown unit {match['unit']!r} (units: {_UNIT_NAMES}); "
                         f"expected {BUDGET_FORMS}")
    return math.floor(Fraction(match["num"]) * scale)


def format_bytes(num_bytes: int) -> str:
    """``num_bytes`` in binary units for messages and reprs: ``"512 B"``, ``"1.50 MiB"``."""
    value = float(num_bytes)
    for unit in ("B", "KiB", "MiB", "GiB"):
        if abs(value) < 1024:
            return f"{int(value)} B" if unit == "B" else f"{value:.2f} {unit}"
        value /= 1024
    return f"{value:.2f} TiB"
