"""Charts of :mod:`gnn_dist_cli.run_report.charts` as inline SVG (no script, no external resource).

Every string drawn (titles, labels, legend entries) is escaped, so a chart is safe to embed in
HTML whatever its text. :func:`render` picks the drawer by the chart's type (:data:`DRAWERS`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from html import escape
from typing import Callable, Sequence

from .charts import BarChart, Chart, LineChart, Series, label_every

__all__ = ["DRAWERS", "PALETTE", "nice_ticks", "render", "tick_label", "value_text"]

WIDTH, HEIGHT = 760, 330
LEFT, RIGHT, BOTTOM = 72, 18, 46
TITLE_Y, LEGEND_Y, LEGEND_ROW = 20, 40, 18
CHAR_W = 6.6
"""Rough width of a character of the 12 px labels, for laying out the legend."""
MAX_MARKERS = 80
"""Line series with more points are drawn without markers."""
DENSE_BARS = 300
"""Bar charts with more bars have no tooltip per bar (the file stays small)."""
PALETTE = ("#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f")
LINE_PALETTE = ("#111111", "#d62728", "#9467bd")


def _t(text: object) -> str:
    return escape(str(text), quote=True)


def _f(v: float) -> str:
    return f"{v:.1f}"


def value_text(v: float) -> str:
    """A bar's value for its tooltip or cut label: whole numbers from 1000 up, else 4 digits."""
    return f"{v:,.0f}" if abs(v) >= 1000 else f"{v:.4g}"


# ----------------------------------------------------------------------------------- axes
_TINY = 1e-12
"""Values closer to 0 than this are drawn at 0 (ticks finer than 1e-13 cannot be labelled)."""


def nice_ticks(lo: float, hi: float, count: int = 5, *, integer: bool = False) -> list[float]:
    """Round tick values covering ``[lo, hi]`` (steps of 1, 2, 2.5 or 5 times a power of ten;
    whole-number steps with ``integer``). The first tick is <= ``lo``, the last >= ``hi``."""
    if not (math.isfinite(lo) and math.isfinite(hi)):
        raise ValueError(f"tick range must be finite, got [{lo}, {hi}]")
    if hi < lo:
        lo, hi = hi, lo
    lo, hi = (0.0 if abs(v) < _TINY else v for v in (lo, hi))   # a 1e-311 loss is 0 on an axis
    if hi - lo < 1e-9 * max(abs(lo), abs(hi)):                  # apart by rounding only: one value
        hi = lo
    if hi == lo and integer:
        hi = lo + 1
    elif hi == lo:
        pad = 1.0 if lo == 0 else abs(lo) * 0.1
        lo, hi = lo - pad, hi + pad
    raw = (hi - lo) / max(1, count)
    mag = 10.0 ** math.floor(math.log10(raw))
    step = next(m * mag for m in (1, 2, 2.5, 5, 10) if m * mag >= raw * (1 - 1e-9))
    if integer:
        step = max(1.0, float(math.ceil(step)))
    first = math.floor(lo / step + 1e-9)
    n = int(math.ceil(hi / step - 1e-9)) - first
    digits = _decimals(step) + 3
    ticks = [round((first + i) * step, digits) for i in range(n + 1)]  # 1.9, not 1.9000000000000001
    if ticks[0] > lo:
        ticks.insert(0, round(ticks[0] - step, digits))
    if ticks[-1] < hi:
        ticks.append(round(ticks[-1] + step, digits))
    return ticks


def _decimals(step: float) -> int:
    """Decimals that tell ticks ``step`` apart (1 for 0.5, 2 for 0.25, 0 for 20)."""
    step = abs(float(f"{step:.12g}"))
    if step == 0 or (step >= 1 and step.is_integer()):
        return 0
    d = max(0, -math.floor(math.log10(step)))
    scaled = step * 10**d
    return d + 1 if abs(scaled - round(scaled)) > 1e-6 else d


def tick_label(value: float, step: float) -> str:
    """``value`` with as many decimals as the tick ``step`` needs (thousands separated; millions
    as ``M`` from 10 million on)."""
    value = 0.0 if abs(value) < abs(step) * 1e-9 else value
    if abs(value) >= 1e7 and step >= 1e5:
        return f"{value / 1e6:,.{_decimals(step / 1e6)}f}M"
    return f"{value:,.{_decimals(step)}f}"


@dataclass(frozen=True, slots=True)
class _Frame:
    """The plot area in pixels and the data ranges it shows."""

    top: float
    x_lo: float
    x_hi: float
    y_lo: float
    y_hi: float

    @property
    def bottom(self) -> float:
        return HEIGHT - BOTTOM

    def px(self, x: float) -> float:
        span = self.x_hi - self.x_lo or 1.0
        return LEFT + (x - self.x_lo) / span * (WIDTH - LEFT - RIGHT)

    def py(self, y: float) -> float:
        span = self.y_hi - self.y_lo or 1.0
        return self.bottom - (min(max(y, self.y_lo), self.y_hi) - self.y_lo) / span * (self.bottom - self.top)


@dataclass(frozen=True, slots=True)
class _Key:
    name: str
    color: str
    line: bool


def _legend(keys: Sequence[_Key]) -> tuple[list[str], float]:
    """The legend's elements and the y where the plot area may start."""
    out, x, y = [], float(LEFT), float(LEGEND_Y)
    for k in keys:
        w = 18 + CHAR_W * len(k.name) + 16
        if x + w > WIDTH - RIGHT and x > LEFT:
            x, y = float(LEFT), y + LEGEND_ROW
        if k.line:
            out.append(f'<line x1="{_f(x)}" y1="{_f(y - 4)}" x2="{_f(x + 14)}" y2="{_f(y - 4)}" '
                       f'stroke="{k.color}" stroke-width="2"/>')
        else:
            out.append(f'<rect x="{_f(x)}" y="{_f(y - 10)}" width="12" height="12" fill="{k.color}"/>')
        out.append(f'<text x="{_f(x + 18)}" y="{_f(y)}">{_t(k.name)}</text>')
        x += w
    return out, (y + 16 if keys else TITLE_Y + 14)


def _svg(title: str, body: list[str]) -> str:
    return (f'<svg xmlns="http://www.w3.org/2000/svg" class="chart" viewBox="0 0 {WIDTH} {HEIGHT}" '
            f'width="{WIDTH}" height="{HEIGHT}" role="img" aria-label="{_t(title)}" '
            f'font-family="sans-serif" font-size="12">'
            f'<title>{_t(title)}</title><rect width="{WIDTH}" height="{HEIGHT}" fill="#fff"/>'
            f'<text x="{LEFT}" y="{TITLE_Y}" font-size="14" font-weight="bold">{_t(title)}</text>'
            + "".join(body) + "</svg>")


def _y_axis(fr: _Frame, ticks: Sequence[float], label: str) -> list[str]:
    step = ticks[1] - ticks[0] if len(ticks) > 1 else 1.0
    out = []
    for v in ticks:
        y = fr.py(v)
        out.append(f'<line x1="{LEFT}" y1="{_f(y)}" x2="{WIDTH - RIGHT}" y2="{_f(y)}" stroke="#e4e4e4"/>')
        out.append(f'<text x="{LEFT - 6}" y="{_f(y + 4)}" text-anchor="end">{_t(tick_label(v, step))}</text>')
    mid = (fr.top + fr.bottom) / 2
    out.append(f'<text x="14" y="{_f(mid)}" text-anchor="middle" transform="rotate(-90 14 {_f(mid)})">'
               f'{_t(label)}</text>')
    out.append(f'<line x1="{LEFT}" y1="{_f(fr.top)}" x2="{LEFT}" y2="{_f(fr.bottom)}" stroke="#333"/>')
    out.append(f'<line x1="{LEFT}" y1="{_f(fr.bottom)}" x2="{WIDTH - RIGHT}" y2="{_f(fr.bottom)}" stroke="#333"/>')
    return out


def _x_label(label: str) -> str:
    return (f'<text x="{_f((LEFT + WIDTH - RIGHT) / 2)}" y="{HEIGHT - 8}" text-anchor="middle">'
            f'{_t(label)}</text>')


def _polyline(fr: _Frame, xs: Sequence[float], ys: Sequence[float | None], color: str) -> list[str]:
    pts = [(fr.px(x), fr.py(y)) for x, y in zip(xs, ys) if y is not None]
    if not pts:
        return []
    out = []
    if len(pts) > 1:
        out.append(f'<polyline fill="none" stroke="{color}" stroke-width="2" points="'
                   + " ".join(f"{_f(x)},{_f(y)}" for x, y in pts) + '"/>')
    if len(pts) <= MAX_MARKERS:
        out += [f'<circle cx="{_f(x)}" cy="{_f(y)}" r="3" fill="{color}"/>' for x, y in pts]
    return out


def _values(series: Sequence[Series]) -> list[float]:
    return [v for s in series for v in s.ys if v is not None]


# ----------------------------------------------------------------------------------- drawers
def line_chart(chart: LineChart) -> str:
    """Lines (with markers up to :data:`MAX_MARKERS` points) over a numeric x axis."""
    keys = [_Key(s.name, PALETTE[i % len(PALETTE)], True) for i, s in enumerate(chart.series)]
    legend, top = _legend(keys)
    xs = [x for s in chart.series for x, y in zip(s.xs, s.ys) if y is not None]
    ys = _values(chart.series)
    if not ys:
        return _svg(chart.title, legend + [f'<text x="{LEFT}" y="{_f(top + 20)}">no data</text>'])
    x_lo, x_hi = chart.x_range or (min(xs), max(xs))
    xt = nice_ticks(x_lo, x_hi, 8, integer=chart.integer_x)
    if x_hi > x_lo:  # the axis spans the data; ticks inside it
        xt = [v for v in xt if x_lo - 1e-9 <= v <= x_hi + 1e-9] or [x_lo, x_hi]
    else:
        x_lo, x_hi = xt[0], xt[-1]
    yt = nice_ticks(*(chart.y_range or (min(ys), max(ys))), 5)
    fr = _Frame(top, x_lo, x_hi, yt[0], yt[-1])
    body = legend + _y_axis(fr, yt, chart.y_label)
    x_step = xt[1] - xt[0] if len(xt) > 1 else 1.0
    for v in xt:
        body.append(f'<text x="{_f(fr.px(v))}" y="{_f(fr.bottom + 16)}" text-anchor="middle">'
                    f'{_t(tick_label(v, x_step))}</text>')
    body.append(_x_label(chart.x_label))
    for s, k in zip(chart.series, keys):
        body += _polyline(fr, s.xs, s.ys, k.color)
    return _svg(chart.title, body)


def _bar_top(chart: BarChart) -> list[float]:
    if chart.stacked:
        heights = [sum(v for v in col if v is not None) for col in zip(*(s.ys for s in chart.series))]
    else:
        heights = _values(chart.series)
    peak = max(heights + _values(chart.lines) + [0.0])
    top = chart.y_max if chart.y_max is not None else peak * 1.05  # headroom above the tallest bar
    return nice_ticks(0.0, top if top > 0 else 1.0, 5)


def bar_chart(chart: BarChart) -> str:
    """Bars per category, grouped or stacked, with optional lines over them; a bar taller than
    the axis is cut there and labelled with its value."""
    keys = ([_Key(s.name, PALETTE[i % len(PALETTE)], False) for i, s in enumerate(chart.series)]
            + [_Key(s.name, LINE_PALETTE[i % len(LINE_PALETTE)], True) for i, s in enumerate(chart.lines)])
    legend, top = _legend(keys)
    n = len(chart.categories)
    if n == 0:
        return _svg(chart.title, legend + [f'<text x="{LEFT}" y="{_f(top + 20)}">no data</text>'])
    yt = _bar_top(chart)
    fr = _Frame(top, -0.5, n - 0.5, yt[0], yt[-1])
    body = legend + _y_axis(fr, yt, chart.y_label)
    band = (WIDTH - LEFT - RIGHT) / n
    every = label_every(n)
    for i, name in enumerate(chart.categories):
        if i % every == 0:
            body.append(f'<text x="{_f(fr.px(i))}" y="{_f(fr.bottom + 16)}" text-anchor="middle">{_t(name)}</text>')
    body.append(_x_label(chart.x_label))
    k = len(chart.series)
    width = band * 0.8 / (1 if chart.stacked else k)
    dense = n * k > DENSE_BARS
    for i in range(n):
        base = 0.0
        for j, s in enumerate(chart.series):
            v = s.ys[i] if i < len(s.ys) else None
            if v is None or v <= 0:
                continue
            lo, hi = (base, base + v) if chart.stacked else (0.0, v)
            x = fr.px(i) - band * 0.4 + (0 if chart.stacked else j * width)
            y_hi, y_lo = fr.py(hi), fr.py(lo)
            if y_lo - y_hi > 0:
                tip = "" if dense else f"<title>{_t(s.name)} {_t(chart.categories[i])}: {_t(value_text(v))}</title>"
                body.append(f'<rect x="{_f(x)}" y="{_f(y_hi)}" width="{_f(max(width - 0.5, 0.5))}" '
                            f'height="{_f(y_lo - y_hi)}" fill="{keys[j].color}">{tip}</rect>')
            base = hi if chart.stacked else base
        tallest = base if chart.stacked else max([v for s in chart.series
                                                  if i < len(s.ys) and (v := s.ys[i]) is not None] + [0.0])
        if tallest > yt[-1]:
            body.append(f'<text x="{_f(fr.px(i) + band * 0.45)}" y="{_f(fr.top + 10)}" font-size="11">'
                        f'{_t(value_text(tallest))} (cut)</text>')
    for s, key in zip(chart.lines, keys[k:]):
        body += _polyline(fr, range(n), s.ys, key.color)
    return _svg(chart.title, body)


DRAWERS: dict[type, Callable[..., str]] = {LineChart: line_chart, BarChart: bar_chart}
"""Chart type -> the function drawing it as SVG."""


def render(chart: Chart) -> str:
    """``chart`` as one ``<svg>`` element."""
    return DRAWERS[type(chart)](chart)
