"""A :class:`~gnn_dist_cli.run_report.content.Report` as one self-contained HTML page.

No script and no external resource: charts are inline SVG (``svg.py``), the style is inline,
and a Content-Security-Policy forbids everything else. Every string from the metrics file or
the partition folder is escaped (``html.escape``). A summary row carries its figure in base
units as ``data-value`` (seconds, bytes, fractions) next to the formatted text.
"""

from __future__ import annotations

import json
from html import escape

from . import svg
from .content import Report, Section, Table

__all__ = ["render_html"]

_CSP = "default-src 'none'; style-src 'unsafe-inline'"

_STYLE = """
body { font-family: sans-serif; margin: 2em auto; max-width: 800px; color: #222; }
h1 { font-size: 1.5em; } h2 { font-size: 1.2em; border-bottom: 1px solid #ccc; padding-bottom: .2em; }
table { border-collapse: collapse; margin: .5em 0 1em; }
th, td { border: 1px solid #ddd; padding: .25em .6em; text-align: left; vertical-align: top; }
td.num { text-align: right; } caption { text-align: left; font-weight: bold; padding: .3em 0; }
dl.header { display: grid; grid-template-columns: max-content auto; gap: .2em 1em; }
dl.header dt { font-weight: bold; } dl.header dd { margin: 0; }
ul.notes li { color: #8a4b00; } p.note { color: #555; font-size: .9em; margin: .2em 0; }
svg.chart { display: block; max-width: 100%; height: auto; margin: .5em 0; }
pre { background: #f6f6f6; padding: .6em; overflow-x: auto; font-size: .85em; }
"""


def _t(text: object) -> str:
    return escape(str(text), quote=True)


def _table(table: Table) -> str:
    head = "".join(f"<th>{_t(c)}</th>" for c in table.columns)
    rows = "".join("<tr>" + "".join(f"<td>{_t(v)}</td>" for v in row) + "</tr>" for row in table.rows)
    caption = f"<caption>{_t(table.caption)}</caption>" if table.caption else ""
    return f"<table>{caption}<thead><tr>{head}</tr></thead><tbody>{rows}</tbody></table>"


def _section(section: Section) -> str:
    parts = [f'<section id="{_t(section.key)}"><h2>{_t(section.title)}</h2>']
    parts += [svg.render(chart) for chart in section.charts]
    parts += [_table(table) for table in section.tables]
    parts += [f'<p class="note">{_t(note)}</p>' for note in section.notes]
    return "".join(parts) + "</section>"


def _summary(report: Report) -> str:
    rows = []
    for row in report.summary:
        value = "" if row.value is None else f' data-value="{_t(repr(float(row.value)))}"'
        rows.append(f'<tr data-key="{_t(row.key)}"><th>{_t(row.label)}</th><td{value}>{_t(row.text)}</td></tr>')
    return (f'<section id="summary"><h2>Summary</h2><table class="summary"><tbody>{"".join(rows)}'
            f'</tbody></table></section>')


def render_html(report: Report) -> bytes:
    """The page, UTF-8."""
    header = "".join(f"<dt>{_t(k)}</dt><dd>{_t(v)}</dd>" for k, v in report.header)
    notes = ("" if not report.notes else '<section id="notes"><h2>Notes</h2><ul class="notes">'
             + "".join(f"<li>{_t(n)}</li>" for n in report.notes) + "</ul></section>")
    config = ("<p>no config record in the file</p>" if report.config is None else
              "<details><summary>the run's resolved configuration (the file's config record)</summary>"
              f"<pre>{_t(json.dumps(report.config, indent=2, sort_keys=True))}</pre></details>")
    page = (
        "<!DOCTYPE html>\n"
        f'<html lang="en"><head><meta charset="utf-8">'
        f'<meta http-equiv="Content-Security-Policy" content="{_CSP}">'
        f'<meta name="viewport" content="width=device-width, initial-scale=1">'
        f"<title>{_t(report.title)}</title><style>{_STYLE}</style></head><body>"
        f'<header id="header"><h1>{_t(report.title)}</h1><p>metrics file: <code>{_t(report.source)}</code></p>'
        f'<dl class="header">{header}</dl></header>'
        f"{notes}{_summary(report)}{''.join(_section(s) for s in report.sections)}"
        f'<section id="config"><h2>Configuration</h2>{config}</section>'
        "<footer><p class=\"note\">written by gnn-dist report</p></footer></body></html>\n"
    )
    return page.encode("utf-8")
