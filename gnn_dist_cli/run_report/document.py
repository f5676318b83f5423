"""The run report as data: its header, summary rows and sections (charts, tables, notes), built
by :mod:`.content` and drawn by ``html.py`` or ``png.py``. Torch-free."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Sequence

from .charts import Chart

__all__ = ["Report", "Section", "SummaryRow", "Table"]


@dataclass(frozen=True, slots=True)
class Table:
    columns: tuple[str, ...]
    rows: Sequence[tuple[str, ...]]
    caption: str = ""


@dataclass(frozen=True, slots=True)
class Section:
    key: str
    """A stable id (the HTML section's ``id``)."""
    title: str
    charts: Sequence[Chart] = ()
    tables: Sequence[Table] = ()
    notes: Sequence[str] = ()
    """What is missing or how to read the charts."""


@dataclass(frozen=True, slots=True)
class SummaryRow:
    key: str
    """A stable id (``data-key`` in the HTML)."""
    label: str
    text: str
    value: float | None = None
    """The figure in base units (seconds, bytes, a fraction, a count); None when not recorded."""


@dataclass(frozen=True, slots=True)
class Report:
    title: str
    source: str
    """The metrics file."""
    header: Sequence[tuple[str, str]]
    summary: Sequence[SummaryRow]
    sections: Sequence[Section]
    notes: Sequence[str] = ()
    """Warnings of the reader and the fields the records lack."""
    config: dict[str, Any] | None = field(default=None, repr=False)
