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


def int_at_least(name: str, value: Any, minimum: int, *, optional: bool = False) -> None:
    """``value`` an integer >= ``minimum`` (or None when ``optional``)."""
    if optional and value is None:
        return
    require(is_int(value) and value >= minimum, name, value, f"an integer >= {minimum}")
