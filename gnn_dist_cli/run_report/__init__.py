"""``gnn-dist report``: a training run's report (HTML with inline SVG charts, or PNG) from its
metrics file (``gnn_dist.train --metrics PATH``) and, optionally, its partition folder. Torch-free.

Reading and checking the file: :mod:`.metrics_file`; what the report says: :mod:`.content`
(its header, summary and sections in :mod:`.header`, :mod:`.summary` and :mod:`.sections`; chart
specs in :mod:`.charts`); drawing it: :mod:`.svg` and :mod:`.html`, or :mod:`.png`
(matplotlib); the output file: :mod:`.output`.
"""

from __future__ import annotations

from .content import Report, build_report
from .metrics_file import MetricsFileError, RunMetrics, read_metrics
from .output import RENDERERS, ReportOutputError, write_report

__all__ = ["RENDERERS", "MetricsFileError", "Report", "ReportOutputError", "RunMetrics", "build_report",
           "read_metrics", "write_report"]
