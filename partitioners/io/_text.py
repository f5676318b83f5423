"""Chunked reading of delimited numeric text tables (edge lists, OGB's CSV files).

A table is read in blocks of about ``chunk_bytes`` bytes, cut at line ends, and each block is
parsed by numpy's C parser (``np.loadtxt``), so the text of the whole file is never held in
memory: the peak is one block plus the parsed arrays. gzip is detected by its magic bytes, not
by the file name.

Rules of a table: blank lines are skipped; a line whose first non-blank character is ``#`` or
``%`` is a comment (text after such a character on a data line is ignored too); an optional
header line (the first non-comment line, when none of its fields is a number) is skipped; every
data line has the same number of fields. A line that breaks a rule raises
:class:`~partitioners.errors.GraphError` naming the file, the line number and the line's text
(then the caller's ``int_hint`` when an integer field is not an integer). A table read with
``dtype=str`` keeps every field as text (any token is valid; only field counts are checked).

Line lengths are bounded, so a small (gzipped) file cannot make one huge line: a line before the
first data line (comments, the header, the first data line itself) may hold at most
:data:`MAX_LINE_BYTES` (1 MiB), and they may hold :data:`MAX_HEAD_BYTES` (4 MiB) together (blank
lines too: they are read one at a time); after it every line may hold at most
:attr:`TableLayout.max_line_bytes`, 64 bytes per field of the first data line and at least
64 KiB (:data:`MIN_LINE_BYTES`). A longer line is a :class:`~partitioners.errors.GraphError`
naming the file and the line, raised before the line is parsed: what a read holds is one block of
``chunk_bytes`` plus one line at most.

This module is torch-free.
"""

from __future__ import annotations

import contextlib
import gzip
import io
import re
import warnings
import zlib
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO, Iterator

import numpy as np

from ..errors import GraphError

__all__ = ["DEFAULT_CHUNK_BYTES", "LINE_BYTES_PER_FIELD", "MAX_HEAD_BYTES", "MAX_LINE_BYTES", "MIN_LINE_BYTES",
           "NotAnIntegerError", "TableLayout", "TextChunk", "detect_layout", "iter_chunks", "open_binary"]

DEFAULT_CHUNK_BYTES = 32 << 20
"""Bytes of text parsed at a time (about 2-3 million edge lines)."""
MAX_LINE_BYTES = 1 << 20
"""The longest line (bytes, without its newline) read before the table's width is known: the
comments and header at its top and its first data line (which sets the width)."""
MAX_HEAD_BYTES = 4 << 20
"""The most bytes read line by line looking for the first data line (comments, blank lines, the
header): a table whose first data line is further is refused."""
MIN_LINE_BYTES = 64 << 10
"""The longest line any table may have, whatever its width (a long comment, long names)."""
LINE_BYTES_PER_FIELD = 64
"""Bytes a data line may take per field of the first data line (a float's longest text is 24)."""

_GZIP_MAGIC = b"\x1f\x8b"
_COMMENT_CHARS = ("#", "%")
_INT_RE = re.compile(r"[+-]?[0-9]+")
_WORD_RE = re.compile(r"\S+")


class NotAnIntegerError(GraphError):
    """A field read as an integer is not one (a relabelling reader then reads the ids as text)."""


def open_binary(path: Path) -> BinaryIO:
    """Open ``path`` for binary reading, decompressing transparently when it starts with gzip's magic."""
    with open(path, "rb") as f:
        magic = f.read(2)
    if magic == _GZIP_MAGIC:
        return gzip.open(path, "rb")  # type: ignore[return-value]
    return open(path, "rb")


@contextlib.contextmanager
def _named_read_errors(path: Path) -> Iterator[None]:
    """Turn a corrupt or truncated gzip stream into a GraphError naming the file."""
    try:
        yield
    except (EOFError, gzip.BadGzipFile, zlib.error) as e:
        raise GraphError(f"{path}: corrupt or truncated gzip data ({e})") from e


def _shown(text: str | bytes, limit: int = 60) -> str:
    """The start of a line for a message: ``repr`` of its first ``limit`` characters, ``...`` after."""
    if isinstance(text, bytes):
        text = text[:limit * 4].decode("utf-8", "replace")
    return repr(text) if len(text) <= limit else repr(text[:limit]) + "..."


def _too_long(path: Path, line: int, limit: int, start: bytes, why: str) -> GraphError:
    return GraphError(f"{path}, line {line}: a line longer than {limit} bytes, the most {why}; it starts "
                      f"{_shown(start)}")


def _strip_comment(text: str) -> str:
    cut = min((i for i in (text.find(c) for c in _COMMENT_CHARS) if i >= 0), default=-1)
    return (text if cut < 0 else text[:cut]).strip()


def _split(text: str, delimiter: str | None) -> list[str]:
    return text.split() if delimiter is None else [t.strip() for t in text.split(delimiter)]


def _count_fields(text: str, delimiter: str | None) -> int:
    """``len(_split(text, delimiter))`` without making the tokens."""
    if delimiter is not None:
        return text.count(delimiter) + 1
    return sum(1 for _ in _WORD_RE.finditer(text))


def _is_number(token: str) -> bool:
    try:
        float(token)
    except ValueError:
        return False
    return "_" not in token


@dataclass(frozen=True, slots=True)
class TableLayout:
    """What :func:`detect_layout` found at the top of a table."""

    path: Path
    delimiter: str | None
    """Field separator; None means any run of whitespace."""
    header_line: int
    """1-based line number of the header line, or 0 when there is none."""
    ncols: int
    """Fields per data line; 0 when the table has no data line."""
    first_data_line: int
    """1-based line number of the first data line (0 when there is none)."""
    first_data_text: str
    """Text of the first data line ('' when there is none)."""

    def where(self, line: int) -> str:
        """``'PATH, line N'``: the prefix of every message about one line."""
        return f"{self.path}, line {line}"

    @property
    def max_line_bytes(self) -> int:
        """The longest line (bytes, without its newline) a block of the table may hold:
        :data:`LINE_BYTES_PER_FIELD` per field of the first data line, at least
        :data:`MIN_LINE_BYTES`."""
        return max(MIN_LINE_BYTES, LINE_BYTES_PER_FIELD * self.ncols)


def detect_layout(path: Path, *, delimiter: str | None = "auto", header: bool | None = None) -> TableLayout:
    """Read the first lines of ``path``: the delimiter, the header line (if any) and the column count.

    ``delimiter="auto"`` picks ``","`` when the first data line has a comma, else whitespace;
    ``" "`` also means any whitespace. ``header=None`` treats the first non-comment line as a
    header when none of its fields is a number; ``True``/``False`` force it.
    """
    if delimiter == " ":
        delimiter = None
    header_line = 0
    first = (0, "")
    header_checked = header is False
    with _named_read_errors(path), open_binary(path) as f:
        lineno = head = 0
        while raw := f.readline(MAX_LINE_BYTES + 2):   # a line, its newline, one byte too many
            lineno += 1
            head += len(raw)
            if head > MAX_HEAD_BYTES + MAX_LINE_BYTES + 2:   # the last line read may be the first data line
                raise GraphError(f"{path}: no data line in its first {MAX_HEAD_BYTES >> 20} MiB (line {lineno} "
                                 f"and before: comments, blank lines or a header); is this a text table?")
            if len(raw.rstrip(b"\r\n")) > MAX_LINE_BYTES:
                raise _too_long(path, lineno, MAX_LINE_BYTES, raw,
                                "read before a table's first data line sets its width (1 MiB)")
            text = raw.decode("utf-8", "replace").rstrip("\r\n")
            content = _strip_comment(text)
            if not content:
                continue
            if not header_checked:
                header_checked = True
                sep = delimiter if delimiter != "auto" else ("," if "," in content else None)
                if header or not any(_is_number(t) for t in _split(content, sep)):
                    header_line = lineno
                    continue
            if delimiter == "auto":
                delimiter = "," if "," in content else None
            first = (lineno, text)
            break
    if delimiter == "auto":
        delimiter = None
    ncols = len(_split(_strip_comment(first[1]), delimiter)) if first[0] else 0
    return TableLayout(path=path, delimiter=delimiter, header_line=header_line, ncols=ncols,
                       first_data_line=first[0], first_data_text=first[1])


@dataclass(slots=True)
class TextChunk:
    """One parsed block of a table: ``rows`` plus what is needed to name a row's line in errors."""

    layout: TableLayout
    block: bytes
    first_line: int
    """1-based file line number of the block's first line."""
    rows: np.ndarray
    """Parsed data lines: 2-D ``[n, ncols]`` for a plain dtype, 1-D for a structured one."""

    def locate(self, row: int) -> tuple[int, str]:
        """``(line number, text)`` of data row ``row`` (0-based) of this block."""
        seen = -1
        for offset, raw in enumerate(self.block.split(b"\n")):
            text = raw.decode("utf-8", "replace").rstrip("\r")
            if _strip_comment(text):
                seen += 1
                if seen == row:
                    return self.first_line + offset, text
        raise AssertionError(f"row {row} is not in the block")  # internal invariant

    def fail(self, row: int, reason: str, hint: str = "") -> GraphError:
        """A :class:`GraphError` about data row ``row``, naming the file, line and text (then ``hint``)."""
        line, text = self.locate(row)
        return GraphError(f"{self.layout.where(line)}: {reason}: {_shown(text, 200)}{hint}")


def _column_kinds(dtype: np.dtype, ncols: int) -> list[str]:
    if dtype.names is not None:
        kinds = [dtype.fields[n][0].kind for n in dtype.names]  # type: ignore[index]
    else:
        kinds = [dtype.kind] * ncols
    return ["int" if k in "iu" else "text" if k in "US" else "number" for k in kinds]


def _find_bad_line(block: bytes, first_line: int, layout: TableLayout,
                   kinds: list[str]) -> tuple[int, str, str] | None:
    """The first line of ``block`` that breaks the table's rules: ``(line, text, reason)``."""
    for offset, raw in enumerate(block.split(b"\n")):
        text = raw.decode("utf-8", "replace").rstrip("\r")
        content = _strip_comment(text)
        if not content:
            continue
        found = _count_fields(content, layout.delimiter)   # before splitting: a long line's tokens are not made
        if found != len(kinds):
            return first_line + offset, text, f"expected {len(kinds)} fields, found {found}"
        tokens = _split(content, layout.delimiter)
        for j, (tok, kind) in enumerate(zip(tokens, kinds)):
            if kind == "text":
                continue
            if kind == "int":
                ok = bool(_INT_RE.fullmatch(tok)) and -(2**63) <= int(tok) < 2**63
            else:
                ok = _is_number(tok)
            if not ok:
                what = "an integer" if kind == "int" else "a number"
                return first_line + offset, text, f"field {j + 1} ({tok!r}) is not {what}"
    return None


def _parse_block(block: bytes, first_line: int, layout: TableLayout, dtype: np.dtype,
                 int_hint: str = "") -> np.ndarray:
    comments = [c for c in _COMMENT_CHARS if c.encode() in block] or None
    if comments is not None and len(comments) == 1:
        comments = comments[0]  # type: ignore[assignment]  # one char parses ~2x faster than a list
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", UserWarning)  # "input contained no data"
            rows = np.loadtxt(io.BytesIO(block), dtype=dtype, delimiter=layout.delimiter,
                              comments=comments, ndmin=1 if dtype.names else 2)
    except ValueError as e:
        bad = _find_bad_line(block, first_line, layout, _column_kinds(dtype, layout.ncols))
        if bad is None:  # numpy refused something the line check accepts: still name the lines
            last = first_line + block.count(b"\n")
            raise GraphError(f"{layout.path}, lines {first_line}-{last}: cannot parse: {e}") from e
        line, text, reason = bad
        if reason.endswith("is not an integer"):
            raise NotAnIntegerError(f"{layout.where(line)}: {reason}: {_shown(text, 200)}{int_hint}") from e
        raise GraphError(f"{layout.where(line)}: {reason}: {_shown(text, 200)}") from e
    if rows.size and dtype.names is None and rows.shape[1] != layout.ncols:
        bad = _find_bad_line(block, first_line, layout, _column_kinds(dtype, layout.ncols))
        assert bad is not None, "a column count mismatch has a line to show"
        line, text, reason = bad
        raise GraphError(f"{layout.where(line)}: {reason}: {_shown(text, 200)}")
    return rows


def _check_open_line(layout: TableLayout, line: int, text: bytes, limit: int) -> None:
    """Refuse line ``line``, whose first bytes (no newline yet) are ``text``, once it is too long."""
    if len(text.rstrip(b"\r")) > limit:
        raise _too_long(layout.path, line, limit, text, _LIMIT_WHY.format(layout.ncols))


_LIMIT_WHY = (f"a line of this table may hold ({LINE_BYTES_PER_FIELD} per field of the {{}} of its first data line, "
              f"at least {MIN_LINE_BYTES >> 10} KiB)")


def _check_line_lengths(layout: TableLayout, first_line: int, block: bytes, limit: int) -> None:
    """Refuse the first line of ``block`` (whose first line is file line ``first_line``) longer
    than ``limit`` bytes. Probes every ``limit // 2`` bytes for the next newline (a line that long
    holds a probe at least ``limit // 2`` bytes before its end), so a block of short lines costs a
    few ``bytes.find`` calls, and nothing is split or copied."""
    if len(block) <= limit:
        return
    step = max(1, limit // 2)
    for probe in range(0, len(block), step):
        end = block.find(b"\n", probe)
        end = len(block) if end < 0 else end
        if end - probe <= step:
            continue
        start = block.rfind(b"\n", 0, probe) + 1
        length = end - start - (end > start and block[end - 1] == 0x0D)   # a "\r" before the newline
        if length > limit:
            raise _too_long(layout.path, first_line + block.count(b"\n", 0, start), limit,
                            block[start:start + 240], _LIMIT_WHY.format(layout.ncols))


def iter_chunks(layout: TableLayout, dtype: np.dtype | type, *,
                chunk_bytes: int = DEFAULT_CHUNK_BYTES, int_hint: str = "") -> Iterator[TextChunk]:
    """Parse the data lines of ``layout.path`` in blocks of about ``chunk_bytes`` bytes.

    ``dtype`` is a plain dtype (rows come as ``[n, ncols]``) or a structured dtype with one field
    per column (rows come as ``[n]`` records). A block always ends at a line end; a line longer
    than ``chunk_bytes`` makes its block longer, and a line longer than
    :attr:`TableLayout.max_line_bytes` is refused (GraphError) before it is parsed.
    ``dtype=str`` gives ``[n, ncols]`` text rows. ``int_hint`` ends the message about a field that
    is not an integer (e.g. how to read such ids).
    """
    if chunk_bytes < 1:
        raise ValueError(f"chunk_bytes must be >= 1, got {chunk_bytes}")
    dtype = np.dtype(dtype)
    limit = layout.max_line_bytes
    with _named_read_errors(layout.path), open_binary(layout.path) as f:
        line = 1
        for _ in range(layout.header_line):   # detect_layout read these: each MAX_LINE_BYTES at most
            f.readline(MAX_LINE_BYTES + 2)
            line += 1
        pending = b""
        while True:
            data = f.read(chunk_bytes)
            eof = not data
            buf = pending + data
            del data  # not held while its block is parsed
            if not eof:
                cut = buf.rfind(b"\n")
                if cut < 0:
                    _check_open_line(layout, line, buf, limit)
                    pending = buf
                    continue
                block, pending = buf[:cut + 1], buf[cut + 1:]
                if len(pending) > limit:
                    _check_open_line(layout, line + block.count(b"\n"), pending, limit)
            else:
                block, pending = buf, b""
            del buf
            if block:
                _check_line_lengths(layout, line, block, limit)
                rows = _parse_block(block, line, layout, dtype, int_hint)
                yield TextChunk(layout=layout, block=block, first_line=line, rows=rows)
                line += block.count(b"\n")
                del rows  # not held while the next block is read and parsed
            del block
            if eof:
                return
