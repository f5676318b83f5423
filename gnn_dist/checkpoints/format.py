"""The checkpoint format's constants, the names of its files and its error
(:class:`CheckpointError`); how the files are written and read is :mod:`.files`."""

from __future__ import annotations

import os
import re

__all__ = ["CheckpointError", "CHECKPOINT_FORMAT", "CHECKPOINT_VERSION", "REQUIRED_KEYS", "RANK_STATE_FORMAT"]

LATEST = "latest"
"""Name of the pointer file in the checkpoint folder."""
CHECKPOINT_FORMAT = "gnn-dist-checkpoint"
"""Value of the ``format`` key of every checkpoint."""
CHECKPOINT_VERSION = 2
"""Value of the ``version`` key; a reader refuses other versions (1: Python objects, no checksum)."""
REQUIRED_KEYS = ("model", "optimizer", "epoch", "rng", "config")
"""Keys a checkpoint must hold (besides ``format`` and ``version``)."""
RANK_STATE_FORMAT = "gnn-dist-rank-state"
"""Value of the ``format`` key of every rank file (its ``version`` is :data:`CHECKPOINT_VERSION`)."""

_NAME_RE = re.compile(r"^checkpoint-(\d{6,})\.pt$")
_SUM_RE = re.compile(r"^checkpoint-(\d{6,})\.pt\.sha256$")
_RANK_NAME_RE = re.compile(r"^checkpoint-(\d{6,})\.rank-(\d{5,})-of-(\d{5,})\.pt$")
_PARTIAL_RE = re.compile(r"^\.(checkpoint-\d{6,}\S*|latest)\.[^.]+\.tmp$")
_SUFFIX = ".sha256"
_SHA256_RE = re.compile(r"^[0-9a-f]{64}$")


class CheckpointError(ValueError):
    """A checkpoint file or folder is missing, unreadable, corrupt or does not fit the run.

    ``path`` is the file (or folder) that is wrong.
    """

    def __init__(self, message: str, *, path: str | os.PathLike | None = None) -> None:
        super().__init__(f"{path}: {message}" if path is not None else message)
        self.path = None if path is None else str(path)
