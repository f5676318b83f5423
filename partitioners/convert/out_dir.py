"""The output folder of ``convert``: built aside, renamed into place whole or not at all.

:func:`staged_npy_dir` yields a sibling temporary folder ``.NAME.tmp-<pid>-<hex>``; when the
block finishes, the folder is renamed to ``NAME`` (an npy-dir already there is moved aside
first and removed after the rename), and on any exception (Ctrl-C included) it is removed. So
``NAME`` never holds a half-written conversion. An existing ``NAME`` is replaced only when it
is empty, or an npy-dir (``src.npy`` and ``dst.npy``) and ``overwrite`` is given; a file or a
folder of other content is never deleted.

This module is torch-free.
"""

from __future__ import annotations

import contextlib
import os
from pathlib import Path
from typing import Iterator

from ..atomic_dir import fsync_dir, holds_files, replace_dir, staging_dir

__all__ = ["check_convert_out", "is_npy_dir", "staged_npy_dir"]


def is_npy_dir(path: str | os.PathLike[str]) -> bool:
    """True when ``path`` is a folder holding ``src.npy`` and ``dst.npy``."""
    p = Path(path)
    return p.is_dir() and (p / "src.npy").is_file() and (p / "dst.npy").is_file()


def check_convert_out(out: str | os.PathLike[str], overwrite: bool, source: Path | None = None) -> Path:
    """Check that ``out`` may be written (module docstring); return it. Raises ``FileExistsError``.

    ``source``: the input, which may not lie inside an ``out`` that would be replaced.
    """
    out = Path(out)
    if not holds_files(out):
        return out
    if not is_npy_dir(out):
        raise FileExistsError(f"{out} is a non-empty folder that is not an npy-dir (no src.npy and "
                              f"dst.npy); refusing to replace it even with overwrite (--overwrite): "
                              f"choose another output folder or empty it yourself")
    if not overwrite:
        raise FileExistsError(f"{out} already holds an npy-dir; pass overwrite=True (CLI: --overwrite) "
                              f"to replace it")
    if source is not None and source.resolve().is_relative_to(out.resolve()):
        raise FileExistsError(f"the input {source} is inside {out}, which --overwrite would replace; "
                              f"write the npy-dir to another folder")
    return out


def _install(tmp: Path, out: Path, overwrite: bool, source: Path | None) -> None:
    check_convert_out(out, overwrite, source)  # again: the folder may have changed meanwhile
    replace_dir(tmp, out)


@contextlib.contextmanager
def staged_npy_dir(out: str | os.PathLike[str], *, overwrite: bool = False,
                   source: Path | None = None) -> Iterator[Path]:
    """A temporary folder beside ``out`` to write into; renamed to ``out`` when the block ends."""
    out = Path(os.path.abspath(check_convert_out(out, overwrite, source)))  # "." and ".." resolved
    with staging_dir(out) as tmp:
        yield tmp
        fsync_dir(tmp)
        _install(tmp, out, overwrite, source)
