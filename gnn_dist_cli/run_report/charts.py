"""What a chart of the run report shows, independent of how it is drawn (``svg.py`` draws it for
the HTML page, ``png.py`` with matplotlib). Values are already in display units (ms, MiB, ...);
the axis labels say which."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Sequence

__all__ = ["BarChart", "Chart", "LineChart", "Series", "label_every"]


@dataclass(frozen=True, slots=True)
class Series:
    """A named sequence of values: ``(x, y)`` points for a line chart, one value per category for a
    bar chart (None: no bar or point)."""

    name: str
    ys: Sequence[float | None]
    xs: Sequence[float] = ()
    """Line charts only: the x of each value."""


@dataclass(frozen=True, slots=True)
class LineChart:
    """Lines with markers over a numeric x axis."""

    title: str
    x_label: str
    y_label: str
    series: Sequence[Series]
    y_range: tuple[float, float] | None = None
    """Fixed y axis limits (accuracies: 0..1); None: from the data."""
    x_range: tuple[float, float] | None = None
    """The x axis's span (the run's epochs); None: the data's."""
    integer_x: bool = True
    """x ticks at whole numbers only (epochs)."""


@dataclass(frozen=True, slots=True)
class BarChart:
    """Bars per category: the series side by side (``stacked=False``) or on top of each other."""

    title: str
    x_label: str
    y_label: str
    categories: Sequence[str]
    series: Sequence[Series]
    stacked: bool = False
    lines: Sequence[Series] = field(default=())
    """Values drawn as a line with markers over the bars (one value per category)."""
    y_max: float | None = None
    """Top of the y axis; taller bars are cut there and labelled with their value."""


Chart = LineChart | BarChart



def label_every(n: int, most: int = 16) -> int:
    """Label every k-th of ``n`` categories: the smallest k of 1, 2, 5, 10, 20, 50, ... that
    leaves at most ``most`` labels."""
    k = 1
    while math.ceil(n / k) > most:
        k = k * 5 // 2 if str(k)[0] == "2" else k * 2
    return k
