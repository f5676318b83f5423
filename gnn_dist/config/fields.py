"""How a configuration field is declared and how its value is checked: :func:`flag` (the field
and its command-line flag), :class:`ConfigError` (the one error, naming the field), and the
value checks every section's ``__post_init__`` uses (also the components' registered checks,
:mod:`.registry`)."""

from __future__ import annotations

import math
from dataclasses import field
from typing import Any

__all__ = ["ConfigError", "flag", "is_int", "is_number", "require", "check_choice", "int_at_least"]


class ConfigError(ValueError):
    """A configuration value is invalid; ``field`` is its name (e.g. ``"lr"``)."""

    def __init__(self, field_name: str, message: str) -> None:
        super().__init__(f"{field_name}: {message}")
        self.field = field_name
        self.reason = message


def flag(name: str, *, default: Any = None, choices: Any = None, metavar: str | None = None,
         action: str | None = None, const: str = "auto") -> Any:
    """A dataclass field with its command-line flag (``--name``), ``choices`` (a tuple or a
    function returning one, read when the parser is built), ``metavar`` and ``action``
    (``store_true``/``store_false`` for booleans; ``optional`` for a flag whose value may be
    left out, then meaning ``const``: ``--resume`` alone means ``auto``)."""
    return field(default=default, metadata={"flag": name, "choices": choices, "metavar": metavar, "action": action,
                                            "const": const})


def is_int(value: Any) -> bool:
    """An ``int`` and not a ``bool``."""
    return isinstance(value, int) and not isinstance(value, bool)


def is_number(value: Any) -> bool:
    """A finite ``int`` or ``float`` and not a ``bool``."""
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def require(ok: bool, name: str, value: Any, expected: str) -> None:
    """Unless ``ok``: ``ConfigError(name, "<value> is not valid: expected <expected>")``."""
    if not ok:
        raise ConfigError(name, f"{value!r} is not valid: expected {expected}")


def check_choice(name: str, value: Any, choices: tuple[str, ...], *, optional: bool = False) -> None:
    """``value`` one of ``choices`` (or None when ``optional``)."""
    if optional and value is None:
        return
    if value not in choices:
        raise ConfigError(name, f"{value!r} is not one of {', '.join(choices)}")


def int_at_least(name: str, value: Any, minimum: int, *, optional: bool = False, maximum: int | None = None) -> None:
    """``value`` an integer >= ``minimum`` (and <= ``maximum``; or None when ``optional``)."""
    if optional and value is None:
        return
    if maximum is None:
        require(is_int(value) and value >= minimum, name, value, f"an integer >= {minimum}")
    else:
        require(is_int(value) and minimum <= value <= maximum, name, value,
                f"an integer in [{minimum}, {maximum}]")


MAX_WIDTH = 1 << 20
"""The widest layer a run may ask for (``hidden``): 2^20 columns; a wider one is a typo that would
only fail later, allocating, inside the ranks."""
MAX_LAYERS = 4096
"""The deepest model a run may ask for (as a model file's header may hold)."""
MAX_HEADS = 1024
"""The most attention heads a layer may have."""
MAX_SEED = 2**63 - 1
"""Seeds are int64 (torch's generators, the hashed dropout keys)."""
MAX_TIMEOUT_S = 7 * 24 * 3600.0
"""The longest collective timeout, a week: longer values (1e10, inf) overflow the backends' clocks."""
