"""The ``gnn-dist`` log line: ``[gnn-dist] message``, with ``warning:``/``error:`` in front of those
levels. The CLI and the ``train`` launcher's agent (``gnn_dist.distributed.local_run``) both use it,
so a user reads one format whichever process speaks."""

from __future__ import annotations

import logging

__all__ = ["CliFormatter"]


class CliFormatter(logging.Formatter):
    """``[gnn-dist] message``; ``[gnn-dist] warning: ...`` and ``[gnn-dist] error: ...``."""

    def format(self, record: logging.LogRecord) -> str:
        msg = super().format(record)
        if record.levelno >= logging.WARNING:
            return f"[gnn-dist] {record.levelname.lower()}: {msg}"
        return f"[gnn-dist] {msg}"
