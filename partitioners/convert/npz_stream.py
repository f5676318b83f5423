"""Read the ``.npy`` members of an ``.npz`` archive block by block, never a member whole.

An ``.npz`` is a zip archive of ``.npy`` files (stored by ``np.savez``, deflated by
``np.savez_compressed``). :meth:`NpzArchive.member` reads one member's ``.npy`` header;
:meth:`NpzArchive.data` opens its data as a stream of elements in C order, read ``n`` at a time
(zipfile decompresses as it goes, and checks the member's CRC-32 at its end). Pickled members
(object dtypes) are never read, and neither are Fortran-order ones: :meth:`NpzMember.require_plain`
refuses them in one line naming the archive and the key.

This module is torch-free.
"""

from __future__ import annotations

import contextlib
import math
import zipfile
import zlib
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Iterator

import numpy as np

from ..errors import GraphError

__all__ = ["MemberData", "NpzArchive", "NpzMember"]

_READ_ERRORS = (zipfile.BadZipFile, zlib.error, EOFError, NotImplementedError, RuntimeError)
"""What zipfile raises on corrupt data, an unknown compression method, an encrypted member."""
_HEADER_ERRORS = (ValueError, TypeError, SyntaxError, EOFError, OverflowError, UnicodeDecodeError)


@dataclass(frozen=True, slots=True)
class NpzMember:
    """The header of one ``.npy`` member: what it holds, before any data is read."""

    archive: Path
    key: str
    """The array's name (the member's file name without ``.npy``)."""
    dtype: np.dtype
    shape: tuple[int, ...]
    fortran_order: bool

    @property
    def where(self) -> str:
        """``'ARCHIVE, array KEY'``: the prefix of every message about the member."""
        return f"{self.archive}, array {self.key!r}"

    @property
    def is_none(self) -> bool:
        """A 0-d object member: how ``np.savez`` stores ``None`` (OGB's missing ``node_feat``)."""
        return self.dtype.hasobject and self.shape == ()

    def require_plain(self, kinds: str, what: str) -> None:
        """GraphError unless the member is a C-order array of a dtype kind in ``kinds`` (``"iu"``...)."""
        if self.dtype.hasobject:
            raise GraphError(f"{self.where}: dtype {self.dtype} holds pickled Python objects, which are "
                             f"never read; store {what} as a plain numeric array")
        if self.fortran_order and len(self.shape) > 1:
            raise GraphError(f"{self.where}: stored in Fortran order; save it in C order "
                             f"(np.ascontiguousarray) to convert it")
        if self.dtype.kind not in kinds:
            raise GraphError(f"{self.where}: dtype {self.dtype} is not {what}")


class MemberData:
    """The data of one member, read as C-order elements (see :meth:`NpzArchive.data`)."""

    def __init__(self, member: NpzMember, fp: IO[bytes]) -> None:
        self.member = member
        self._fp = fp
        self.left = math.prod(member.shape)
        """Elements not read yet."""

    def read(self, count: int) -> np.ndarray:
        """The next ``count`` elements (1-D, the member's dtype); GraphError when the data ends first."""
        if count > self.left:
            raise ValueError(f"{self.member.where}: {count} elements asked, {self.left} left")  # internal
        need = count * self.member.dtype.itemsize
        with _named_errors(self.member):
            buf = self._fp.read(need)
            while len(buf) < need:
                more = self._fp.read(need - len(buf))
                if not more:
                    raise GraphError(f"{self.member.where}: the data ends early (truncated archive?); "
                                     f"its header promises {self.member.dtype}{list(self.member.shape)}")
                buf += more
        self.left -= count
        return np.frombuffer(buf, dtype=self.member.dtype)

    def blocks(self, rows: int, row_elems: int, block_rows: int) -> Iterator[tuple[int, np.ndarray]]:
        """``(first row, block [n, row_elems])`` for the next ``rows`` rows, ``block_rows`` at a time."""
        for start in range(0, rows, block_rows):
            n = min(block_rows, rows - start)
            yield start, self.read(n * row_elems).reshape(n, row_elems)

    def finish(self) -> None:
        """Check that every element was read and that the member ends there (its CRC-32 is checked)."""
        with _named_errors(self.member):
            extra = self._fp.read(1)
        if self.left or extra:
            raise GraphError(f"{self.member.where}: the member holds more bytes than its header "
                             f"describes ({self.member.dtype}{list(self.member.shape)}); the archive is corrupt")


@contextlib.contextmanager
def _named_errors(member: NpzMember) -> Iterator[None]:
    try:
        yield
    except _READ_ERRORS as exc:
        raise GraphError(f"{member.where}: corrupt or truncated archive data ({exc})") from exc


class NpzArchive:
    """An open ``.npz`` archive (a context manager); GraphError when ``path`` is not a zip."""

    def __init__(self, path: Path) -> None:
        self.path = Path(path)
        try:
            self._zip = zipfile.ZipFile(self.path)
        except (zipfile.BadZipFile, OSError) as exc:
            raise GraphError(f"{self.path}: not an .npz archive ({exc}); expected the zip file "
                             f"np.savez or np.savez_compressed writes") from exc
        self._names = {n[:-4]: n for n in self._zip.namelist() if n.endswith(".npy")}

    def keys(self) -> list[str]:
        """The arrays in the archive, in its order."""
        return list(self._names)

    def _open(self, key: str) -> tuple[NpzMember, IO[bytes]]:
        if key not in self._names:
            raise GraphError(f"{self.path}: no array {key!r} in the archive (it holds {self.keys()})")
        fmt = np.lib.format
        fp = self._zip.open(self._names[key])
        try:
            version = fmt.read_magic(fp)
            if version not in ((1, 0), (2, 0)):
                raise ValueError(f".npy format version {version} (this reader knows 1.0 and 2.0)")
            read = fmt.read_array_header_1_0 if version == (1, 0) else fmt.read_array_header_2_0
            shape, fortran_order, dtype = read(fp)
        except _READ_ERRORS as exc:
            fp.close()
            raise GraphError(f"{self.path}, array {key!r}: corrupt or truncated archive data ({exc})") from exc
        except _HEADER_ERRORS as exc:
            fp.close()
            raise GraphError(f"{self.path}, array {key!r}: not a readable .npy member ({exc})") from exc
        member = NpzMember(self.path, key, dtype, tuple(int(s) for s in shape), bool(fortran_order))
        return member, fp

    def member(self, key: str) -> NpzMember:
        """The header of array ``key`` (GraphError naming the archive when it is missing or unreadable)."""
        member, fp = self._open(key)
        fp.close()
        return member

    @contextlib.contextmanager
    def data(self, key: str) -> Iterator[MemberData]:
        """The data of array ``key`` as a :class:`MemberData` stream (call its ``finish`` at the end)."""
        member, fp = self._open(key)
        try:
            yield MemberData(member, fp)
        finally:
            fp.close()

    def small(self, key: str, limit: int = 1 << 20) -> np.ndarray:
        """A small integer array read whole (e.g. ``num_nodes_list``): at most ``limit`` elements."""
        member = self.member(key)
        member.require_plain("iu", "an integer array")
        n = math.prod(member.shape)
        if n > limit:
            raise GraphError(f"{member.where}: {n} elements; expected a short list")
        with self.data(key) as data:
            values = data.read(n)
            data.finish()
        return values.reshape(member.shape)

    def close(self) -> None:
        self._zip.close()

    def __enter__(self) -> "NpzArchive":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
