"""What the run report says: its header, summary figures, sections (charts, tables, notes),
computed once from a :class:`~gnn_dist_cli.run_report.metrics_file.RunMetrics` (and a partition
folder's metadata) and drawn by ``html.py`` or ``png.py``. Torch-free.

Byte and time figures are rank 0's (the metrics file is rank 0's): the bytes it sent, its step's
compute and communication time.

Here: :func:`build_report`, which assembles the report and its notes. The parts: the header
(:mod:`.header`), the summary figures (:mod:`.summary`), the sections (:mod:`.sections`), read off
the run (:mod:`.run_view`) and written as :mod:`.text` says; the report's data types:
:mod:`.document`.
"""

from __future__ import annotations

from pathlib import Path

from partitioners.format import PartitionMeta

from .document import Report, Section, SummaryRow, Table
from .header import header_rows
from .metrics_file import RunMetrics
from .run_view import RunView
from .sections import SECTIONS
from .summary import summary_rows

__all__ = ["Report", "Section", "SummaryRow", "Table", "build_report"]


def _notes(run: RunView) -> list[str]:
    m = run.metrics
    notes = list(m.warnings)
    if m.config is None:
        notes.append("the file has no config record: model, layers, hidden and schedule are not known")
    if m.missing:
        n = len(m.epochs)
        notes.append("fields missing from epoch records: " + ", ".join(
            f"{name} ({count} of {n})" for name, count in m.missing.items()))
    return notes


def build_report(metrics: RunMetrics, meta: PartitionMeta | None = None) -> Report:
    """The report of ``metrics`` (with ``meta``: the partition's section and its edge count)."""
    run = RunView(metrics, meta)
    sections = [s for build in SECTIONS if (s := build(run)) is not None]
    return Report(title=f"gnn-dist run report: {Path(metrics.path).name}", source=metrics.path,
                  header=header_rows(run), summary=summary_rows(run), sections=sections, notes=_notes(run),
                  config=metrics.config)
