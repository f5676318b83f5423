"""Build a folder beside its destination and publish it in one rename: how the partition writer
and ``gnn-dist convert`` write their output folders. Torch-free."""

from __future__ import annotations

import contextlib
import os
import secrets
import shutil
from pathlib import Path
from typing import Iterator

__all__ = ["fsync_dir", "holds_files", "replace_dir", "staging_dir"]


def holds_files(out: Path) -> bool:
    """Whether the output folder ``out`` holds something: False when it is missing or an empty
    folder (free to write), True for a non-empty folder (the caller decides whether it may be
    replaced). A file or a symlink is never replaced: ``FileExistsError``."""
    if not out.exists() and not out.is_symlink():
        return False
    if not out.is_dir() or out.is_symlink():
        raise FileExistsError(f"{out} exists and is not a folder (or is a symlink); choose another output folder")
    return any(out.iterdir())


@contextlib.contextmanager
def staging_dir(out: Path) -> Iterator[Path]:
    """A new temporary folder ``.NAME.tmp-<pid>-<hex>`` beside ``out`` (its parent made first) to
    build the output in; removed when the block raises (the block publishes it with
    :func:`replace_dir`)."""
    parent = out.absolute().parent
    parent.mkdir(parents=True, exist_ok=True)
    tmp = parent / f".{out.name}.tmp-{os.getpid()}-{secrets.token_hex(4)}"
    tmp.mkdir()
    try:
        yield tmp
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise


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
