"""Publish a folder built beside its destination in one rename: the partition writer's and
``gnn-dist convert``'s last step. Torch-free."""

from __future__ import annotations

import os
import secrets
import shutil
from pathlib import Path

__all__ = ["fsync_dir", "replace_dir"]


def fsync_dir(path: Path) -> None:
    """fsync a folder (its entries: the names of the files renamed or created in it)."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def replace_dir(tmp: Path, out: Path, *, sync: bool = True) -> None:
    """Rename the finished ``tmp`` to ``out``. A non-empty ``out`` (the caller checked that it
    may go) is first renamed aside and removed only once ``tmp`` is in place, so a failure
    leaves the old folder; an empty one is removed. ``sync``: fsync the parent afterwards."""
    if out.exists() and any(out.iterdir()):
        aside = out.parent / f".{out.name}.old-{os.getpid()}-{secrets.token_hex(4)}"
        os.rename(out, aside)
        try:
            os.rename(tmp, out)
        except BaseException:
            os.rename(aside, out)
            raise
        shutil.rmtree(aside, ignore_errors=True)
    else:
        if out.exists():
            out.rmdir()  # empty folder
        os.rename(tmp, out)
    if sync:
        fsync_dir(out.absolute().parent)
