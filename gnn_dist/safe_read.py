"""Reading a file gnn-dist may not have written: a checkpoint, its ``latest`` pointer and checksum
files, a rank file, a model file.

Every such read goes through here, so a hostile or damaged file is refused with one line naming
it, before anything is allocated for what it merely claims:

- :func:`open_regular`: the opened file is checked (``fstat`` on the descriptor, so a rename in
  between cannot swap it) to be a **regular file** of a bounded size. A symlink to ``/dev/zero``
  or ``/dev/urandom``, a FIFO (opened non-blocking, so the open does not wait for a writer), a
  socket or a folder is refused instead of being read until memory runs out; a symlink to a
  regular file is followed (users link model files).
- :func:`read_small`: a file that is a few bytes by nature (``latest``, a ``.sha256``) is read
  only up to :data:`MAX_SMALL_FILE` bytes.
- :func:`check_torch_archive`: before ``torch.load`` (even ``weights_only``, which runs no code,
  but reads every record whole into memory), the zip archive ``torch.save`` writes is checked:
  the legacy non-zip format (which allocates the storage sizes its header states before reading
  them) is refused, and the records' uncompressed sizes must add up to at most
  :data:`MAX_INFLATION` times the file's size (``torch.save`` stores records uncompressed, but
  ``torch.load`` also inflates deflated ones: a 0.5 MB file can hold a 700 MiB record).
- :func:`check_loaded`: what ``torch.load`` returned is walked (no recursion, at most
  :data:`MAX_DEPTH` levels) and every tensor must be dense (strided), on the CPU, of an
  allowed dtype, not quantized or nested, and own the bytes its shape says: a sparse tensor
  claiming 2^30 x 2^30, a meta tensor of 2^40 elements, or a view with stride 0 (2^30 elements
  on a 4-byte storage, which ``.contiguous()`` would turn into 4 GiB) are refused.
- :func:`json_too_deep`: a bracket-depth pre-scan of JSON text, so ``json.loads`` never recurses
  100,000 levels deep (``RecursionError``).

The errors are the caller's type (``error(message, path=...)``, e.g.
:class:`~gnn_dist.checkpoints.CheckpointError` or :class:`~gnn_dist.model_file.ModelFileError`,
both ``ValueError``: one line, exit code 2).
"""

from __future__ import annotations

import fcntl
import io
import os
import re
import stat
import zipfile
from collections.abc import Callable
from typing import IO, Any

import torch

__all__ = ["MAX_SMALL_FILE", "MAX_DEPTH", "MAX_INFLATION", "ALLOWED_DTYPES", "open_regular", "read_small",
           "read_exactly", "check_torch_archive", "check_loaded", "check_tensor", "json_too_deep"]

MAX_SMALL_FILE = 4096
"""Most bytes of a file that is tiny by nature (``latest``: one file name; a ``.sha256``: a digest,
a size and a name)."""
MAX_DEPTH = 64
"""Deepest nesting of containers (dicts, lists, tuples; JSON objects and arrays) accepted in a
loaded file (a checkpoint nests 5, a model file's header 4)."""
MAX_INFLATION = 2
"""Most the records of a ``torch.save`` archive may add up to, uncompressed, as a multiple of the
archive's size (``torch.save`` writes them uncompressed: 1)."""
ALLOWED_DTYPES = frozenset({torch.float16, torch.bfloat16, torch.float32, torch.float64, torch.uint8, torch.int8,
                            torch.int16, torch.int32, torch.int64, torch.bool})
"""The tensor dtypes a checkpoint or model file may hold (weights, optimizer moments, counters,
RNG states)."""

Error = Callable[..., Exception]
"""``error(message, path=path)``: the caller's exception type."""

_KINDS = ((stat.S_ISDIR, "a folder"), (stat.S_ISFIFO, "a FIFO (named pipe)"), (stat.S_ISCHR, "a character device"),
          (stat.S_ISBLK, "a block device"), (stat.S_ISSOCK, "a socket"))


def _kind(mode: int) -> str:
    return next((name for test, name in _KINDS if test(mode)), "not a regular file")


def open_regular(path: str | os.PathLike, what: str, error: Error, *,
                 max_size: int | None = None) -> tuple[IO[bytes], int]:
    """``(file, size)``: ``path`` opened for reading, checked on the open descriptor to be a
    regular file of at most ``max_size`` bytes (when given). The caller closes the file.

    Raises:
        FileNotFoundError: there is no such file (callers word that themselves).
        error: ``path`` is not a regular file (a device such as ``/dev/zero``, a FIFO, a folder,
            a socket), is larger than ``max_size``, or cannot be opened.
    """
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    except FileNotFoundError:
        raise
    except OSError as exc:
        raise error(f"cannot open the {what} ({exc.strerror or exc})", path=path) from None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise error(f"the {what} is {_kind(st.st_mode)}, not a regular file: refused (a link to /dev/zero or a "
                        f"pipe would be read without end)", path=path)
        if max_size is not None and st.st_size > max_size:
            raise error(f"the {what} is {st.st_size} bytes, more than one can be ({max_size} at most): refused",
                        path=path)
        flags = fcntl.fcntl(fd, fcntl.F_GETFL)
        fcntl.fcntl(fd, fcntl.F_SETFL, flags & ~os.O_NONBLOCK)
        f = os.fdopen(fd, "rb")
    except BaseException:
        os.close(fd)
        raise
    return f, int(st.st_size)


def read_exactly(f: IO[bytes], size: int) -> bytes:
    """Up to ``size + 1`` bytes of ``f`` (one more than expected shows a file that grew since its
    ``fstat``), never more."""
    out = io.BytesIO()
    left = size + 1
    while left > 0:
        chunk = f.read(min(left, 1 << 24))
        if not chunk:
            break
        out.write(chunk)
        left -= len(chunk)
    return out.getvalue()


def read_small(path: str | os.PathLike, what: str, error: Error, *, limit: int = MAX_SMALL_FILE) -> bytes:
    """The bytes of a file that is tiny by nature (at most ``limit`` bytes), checked by
    :func:`open_regular`. Raises ``FileNotFoundError`` or ``error`` as it does."""
    f, _ = open_regular(path, what, error, max_size=limit)
    with f:
        try:
            data = read_exactly(f, limit)
        except OSError as exc:
            raise error(f"cannot read the {what} ({exc.strerror or exc})", path=path) from None
    if len(data) > limit:
        raise error(f"the {what} is more than {limit} bytes, more than one can be: refused", path=path)
    return data


def check_torch_archive(source: bytes | IO[bytes], size: int, what: str, error: Error, path: str | os.PathLike) -> None:
    """Refuse (``error``) what ``torch.load`` should not read: anything but the zip archive
    ``torch.save`` writes (the legacy format allocates the sizes it states), or an archive whose
    records add up to more than :data:`MAX_INFLATION` times its ``size`` uncompressed.
    ``source``: the file's bytes, or the open file (left at offset 0)."""
    f = io.BytesIO(source) if isinstance(source, (bytes, bytearray, memoryview)) else source
    f.seek(0)
    magic = f.read(4)
    f.seek(0)
    if magic != b"PK\x03\x04":
        raise error(f"not a readable {what}: not the zip archive torch.save writes", path=path)
    try:
        with zipfile.ZipFile(f) as z:
            entries = z.infolist()
    except (zipfile.BadZipFile, zipfile.LargeZipFile, OSError, ValueError, EOFError) as exc:
        raise error(f"not a readable {what}: a damaged zip archive ({exc})", path=path) from None
    finally:
        f.seek(0)
    total = sum(max(int(e.file_size), 0) for e in entries)
    bound = MAX_INFLATION * max(int(size), 0)
    if total > bound:
        largest = max(entries, key=lambda e: e.file_size)
        raise error(f"not a readable {what}: its records would take {total} bytes uncompressed, more than "
                    f"{MAX_INFLATION} x its {size} bytes (record {largest.filename!r} alone {largest.file_size}); "
                    f"torch.save writes records uncompressed, so it was crafted or damaged", path=path)


def check_tensor(t: torch.Tensor, where: str, what: str, error: Error, path: str | os.PathLike) -> None:
    """Refuse a tensor that is not dense, on the CPU, of an :data:`ALLOWED_DTYPES` dtype, and
    backed by as many bytes as its shape says (``where`` names it in the message)."""
    if t.layout != torch.strided or t.is_nested:
        raise error(f"{what} field {where} is a {str(t.layout).removeprefix('torch.')} tensor; only dense tensors "
                    f"are accepted", path=path)
    if t.device.type != "cpu":
        raise error(f"{what} field {where} is a tensor on the {t.device.type} device; only CPU tensors are accepted",
                    path=path)
    if t.is_quantized or t.dtype not in ALLOWED_DTYPES:
        raise error(f"{what} field {where} is a tensor of dtype {str(t.dtype).removeprefix('torch.')}, which no "
                    f"gnn-dist file holds", path=path)
    need = t.numel() * t.element_size()
    have = t.untyped_storage().nbytes() - t.storage_offset() * t.element_size()
    if need > have:
        raise error(f"{what} field {where} is a tensor of shape {list(t.shape)} ({need} bytes) over a storage of "
                    f"{max(have, 0)} bytes (a stride-0 view): refused", path=path)


def check_loaded(obj: Any, what: str, error: Error, path: str | os.PathLike, *, max_depth: int = MAX_DEPTH) -> None:
    """Walk ``obj`` (what ``torch.load(weights_only=True)`` returned; no recursion): containers at
    most ``max_depth`` deep, and every tensor accepted by :func:`check_tensor`."""
    stack: list[tuple[Any, str, int]] = [(obj, "", 0)]
    while stack:
        item, where, depth = stack.pop()
        if isinstance(item, torch.Tensor):
            check_tensor(item, where or "(top level)", what, error, path)
            continue
        if isinstance(item, dict):
            children = [(v, f"{where}[{k!r}]" if where else str(k)) for k, v in item.items()]
        elif isinstance(item, (list, tuple)):
            children = [(v, f"{where}[{i}]") for i, v in enumerate(item)]
        else:
            continue
        if depth >= max_depth:
            raise error(f"not a readable {what}: containers nested more than {max_depth} deep (at {where})",
                        path=path)
        stack.extend((v, w, depth + 1) for v, w in children)


_STRING = re.compile(rb'"(?:[^"\\]|\\.)*"', re.S)
_BRACKET = re.compile(rb"[\[\]{}]")


def json_too_deep(text: str | bytes, limit: int = MAX_DEPTH) -> bool:
    """Whether JSON ``text`` nests arrays/objects more than ``limit`` deep (brackets inside
    strings do not count); linear, no recursion: run it before ``json.loads``."""
    data = text.encode("utf-8", "surrogatepass") if isinstance(text, str) else bytes(text)
    depth = 0
    for m in _BRACKET.finditer(_STRING.sub(b"", data)):
        if m.group() in (b"[", b"{"):
            depth += 1
            if depth > limit:
                return True
        else:
            depth -= 1
    return False

