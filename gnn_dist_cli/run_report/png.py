"""A :class:`~gnn_dist_cli.run_report.content.Report` as one PNG image, drawn with matplotlib's Agg
backend (an optional dependency: ``pip install 'gnn-dist[report]'``).

No pyplot: the figure is a standalone ``matplotlib.figure.Figure`` on an Agg canvas, so neither
the user's backend nor pyplot's global state is touched. Math text is off, so a ``$`` in a
string from the metrics file is drawn as it is.
"""

from __future__ import annotations

import importlib
import io
import math
import textwrap
from typing import Any, Callable

from .charts import BarChart, LineChart, label_every
from .content import Report, Table

__all__ = ["MATPLOTLIB_HINT", "render_png", "require_matplotlib"]

MATPLOTLIB_HINT = ("pip install 'gnn-dist[report]' (or pip install matplotlib), or write an HTML "
                   "report instead (--out report.html)")
COLORS = ("#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f")
LINE_COLORS = ("#111111", "#d62728", "#9467bd")
MAX_MARKERS = 80
DENSE_BARS = 150
"""Stacked bar charts with more categories are drawn as filled step bands."""


def require_matplotlib() -> None:
    """Raise ``ModuleNotFoundError`` (with :data:`MATPLOTLIB_HINT`) unless matplotlib imports."""
    try:
        importlib.import_module("matplotlib.backends.backend_agg")
    except ImportError:
        raise ModuleNotFoundError(f"a PNG report needs matplotlib, which is not installed: "
                                  f"{MATPLOTLIB_HINT}") from None


def _line(ax: Any, chart: LineChart) -> None:
    from matplotlib.ticker import MaxNLocator

    for i, s in enumerate(chart.series):
        pts = [(x, y) for x, y in zip(s.xs, s.ys) if y is not None]
        ax.plot([x for x, _ in pts], [y for _, y in pts], color=COLORS[i % len(COLORS)], label=s.name,
                marker="o" if len(pts) <= MAX_MARKERS else None, markersize=3)
    if chart.y_range is not None:
        ax.set_ylim(*chart.y_range)
    if chart.x_range is not None and chart.x_range[1] > chart.x_range[0]:
        ax.set_xlim(*chart.x_range)
    if chart.integer_x:
        ax.xaxis.set_major_locator(MaxNLocator(integer=True))


def _bar(ax: Any, chart: BarChart) -> None:
    n, k = len(chart.categories), max(1, len(chart.series))
    width = 0.8 / (1 if chart.stacked else k)
    base = [0.0] * n
    tallest = [0.0] * n
    dense = n > DENSE_BARS
    for j, s in enumerate(chart.series):
        vals = [0.0 if (i >= len(s.ys) or s.ys[i] is None) else float(s.ys[i]) for i in range(n)]
        color = COLORS[j % len(COLORS)]
        if dense and chart.stacked:  # one filled band per series: thousands of bars draw slowly
            ax.fill_between(range(n), base, [b + v for b, v in zip(base, vals)], step="mid", color=color,
                            label=s.name, linewidth=0)
        else:
            xs = [i - 0.4 + width / 2 + (0 if chart.stacked else j * width) for i in range(n)]
            ax.bar(xs, vals, width=width * 0.95, bottom=base if chart.stacked else None, color=color,
                   label=s.name)
        if chart.stacked:
            base = [b + v for b, v in zip(base, vals)]
            tallest = base
        else:
            tallest = [max(t, v) for t, v in zip(tallest, vals)]
    for j, s in enumerate(chart.lines):
        pts = [(i, v) for i, v in enumerate(s.ys) if v is not None]
        ax.plot([i for i, _ in pts], [v for _, v in pts], color=LINE_COLORS[j % len(LINE_COLORS)],
                label=s.name, marker="o" if len(pts) <= MAX_MARKERS else None, markersize=3, zorder=3)
    if chart.y_max is not None:
        ax.set_ylim(0, chart.y_max)
        for i, t in enumerate(tallest):
            if t > chart.y_max:
                ax.text(i + 0.45, chart.y_max * 0.96, f"{t:,.0f} (cut)", fontsize=7, va="top")
    every = label_every(n)
    ax.set_xticks([i for i in range(n) if i % every == 0])
    ax.set_xticklabels([c for i, c in enumerate(chart.categories) if i % every == 0])
    ax.set_xlim(-0.6, n - 0.4)


DRAWERS: dict[type, Callable[[Any, Any], None]] = {LineChart: _line, BarChart: _bar}
"""Chart type -> the function drawing it on a matplotlib Axes."""


WIDTH_IN, MARGIN_IN, GAP_IN = 14.0, 0.9, 0.35
"""Figure width, left/right margin and the space between blocks, inches."""
ROW_IN = 0.2
"""Height of a table row or header line."""
CHART_IN, CHART_GAP_IN = 3.2, 0.85
"""Height of a chart, and the space under it for its x labels and the next title."""


def _text_table(ax: Any, table: Table, font: float = 8.0) -> None:
    ax.axis("off")
    ax.set_title(table.caption, fontsize=10, loc="left")
    cells = [list(r) for r in table.rows] or [["—"] * len(table.columns)]
    t = ax.table(cellText=cells, colLabels=list(table.columns), cellLoc="left", bbox=[0, 0, 1, 1])
    t.auto_set_font_size(False)
    t.set_fontsize(font)


def _chart(ax: Any, chart: Any) -> None:
    DRAWERS[type(chart)](ax, chart)
    ax.set_title(chart.title, fontsize=10)
    ax.set_xlabel(chart.x_label)
    ax.set_ylabel(chart.y_label)
    ax.grid(axis="y", color="#e4e4e4")
    ax.set_axisbelow(True)
    ax.legend(fontsize=7, loc="best", framealpha=0.85)


def _figure(report: Report) -> Any:
    """The page laid out top-down in inches (no layout engine: one draw only)."""
    from matplotlib.figure import Figure

    charts = [c for s in report.sections for c in s.charts]
    tables = [Table(("figure", "value"), [(r.label, r.text) for r in report.summary], "Summary")]
    tables += [t for s in report.sections for t in s.tables]
    header = "   ".join(f"{k}: {v}" for k, v in report.header)
    lines = textwrap.wrap(header, 140) + [w for n in report.notes[:6] for w in textwrap.wrap(f"note: {n}", 140)]
    blocks: list[tuple[float, Callable[[Any], None] | None]] = [(0.35 + ROW_IN * len(lines), None)]
    blocks += [(ROW_IN * (len(t.rows) + 1) + GAP_IN, None) for t in tables]
    chart_rows = math.ceil(len(charts) / 2)
    height = 0.4 + sum(h for h, _ in blocks) + GAP_IN * len(blocks) + (CHART_IN + CHART_GAP_IN) * chart_rows
    fig = Figure(figsize=(WIDTH_IN, height), dpi=80)

    def axes(top: float, h: float, col: int | None = None) -> Any:
        full = WIDTH_IN - 2 * MARGIN_IN
        w, left = (full, MARGIN_IN) if col is None else ((full - 0.9) / 2, MARGIN_IN + col * (full + 0.9) / 2)
        return fig.add_axes((left / WIDTH_IN, (height - top - h) / height, w / WIDTH_IN, h / height))

    y = 0.3
    head = axes(y, 0.3 + ROW_IN * len(lines))
    head.axis("off")
    head.text(0, 1, report.title, va="top", fontsize=13, fontweight="bold", transform=head.transAxes)
    head.text(0, 1 - 0.3 / (0.3 + ROW_IN * len(lines)), "\n".join(lines), va="top", fontsize=10,
              transform=head.transAxes)
    y += 0.35 + ROW_IN * len(lines) + GAP_IN
    for table in tables:
        y += GAP_IN  # the caption
        h = ROW_IN * (len(table.rows) + 1)
        _text_table(axes(y, h), table)
        y += h + GAP_IN
    y += 0.1
    for i, chart in enumerate(charts):
        _chart(axes(y + (i // 2) * (CHART_IN + CHART_GAP_IN), CHART_IN, i % 2), chart)
    return fig


def render_png(report: Report) -> bytes:
    """The image, PNG bytes."""
    require_matplotlib()
    import matplotlib
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    with matplotlib.rc_context({"text.parse_math": False, "text.usetex": False}):
        fig = _figure(report)
        FigureCanvasAgg(fig)
        buf = io.BytesIO()
        fig.savefig(buf, format="png")
    return buf.getvalue()
