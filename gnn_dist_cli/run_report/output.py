"""Which file a report is written as (by ``--out``'s extension: :data:`RENDERERS`), and writing it
(temp file in the same folder, then rename: a reader never sees half a report)."""

from __future__ import annotations

import os
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from partitioners.format import load_partition_meta

from .content import Report, build_report
from .html import render_html
from .metrics_file import read_metrics
from .png import render_png, require_matplotlib

__all__ = ["RENDERERS", "Renderer", "ReportOutputError", "check_output", "write_report"]


class ReportOutputError(ValueError):
    """``--out`` cannot be written as asked: unknown extension, missing folder, missing matplotlib."""


def _available() -> None:
    """Every renderer's default check: nothing to install."""


@dataclass(frozen=True, slots=True)
class Renderer:
    render: Callable[[Report], bytes]
    check: Callable[[], None] = _available
    """Raises (ImportError) when the renderer cannot run here; called before any work."""


RENDERERS: dict[str, Renderer] = {
    ".html": Renderer(render_html),
    ".png": Renderer(render_png, require_matplotlib),
}
"""``--out`` extension (lower case) -> how the report is drawn."""


def check_output(out: str | os.PathLike[str]) -> Renderer:
    """The renderer for ``out``; ReportOutputError when the extension is unknown, the folder does
    not exist, ``out`` is a folder, or the renderer's dependency is missing."""
    path = Path(out)
    suffix = path.suffix.lower()
    if suffix not in RENDERERS:
        raise ReportOutputError(f"--out {out}: unknown report type {suffix or '(no extension)'!r}; "
                                f"end the name in {' or '.join(RENDERERS)}")
    if path.is_dir():
        raise ReportOutputError(f"--out {out}: is a folder; give a file name ending in {suffix}")
    folder = path.parent
    if not folder.is_dir():
        raise ReportOutputError(f"--out {out}: the folder {folder} does not exist; create it first")
    renderer = RENDERERS[suffix]
    try:
        renderer.check()
    except ImportError as exc:
        raise ReportOutputError(f"--out {out}: {exc}") from None
    return renderer


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def write_atomic(path: Path, data: bytes) -> None:
    """Write ``data`` to ``path`` through a temp file in its folder and a rename."""
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        os.chmod(tmp, 0o666 & ~_umask())
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


def write_report(metrics: str | os.PathLike[str], out: str | os.PathLike[str], *,
                 partition: str | os.PathLike[str] | None = None) -> Report:
    """Read the metrics file ``metrics`` (and ``partition/partition.json``), write the report to
    ``out`` (``.html`` or ``.png``), return it.

    Raises:
        ReportOutputError: ``out`` cannot be written as asked (checked before anything is read).
        MetricsFileError: the metrics file is missing or malformed.
        PartitionFormatError: ``partition`` is not a readable partition folder.
        OSError: a file cannot be read or written.
    """
    renderer = check_output(out)
    run = read_metrics(metrics)
    meta = load_partition_meta(partition) if partition is not None else None
    report = build_report(run, meta)
    write_atomic(Path(out), renderer.render(report))
    return report
