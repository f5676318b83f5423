"""A partition family: one graph cut for several numbers of parts, in one folder (``docs/concepts.md``).

``gnn-dist partition --parts 2,4,8 --out DIR`` reads the graph once and writes one partition
folder per ``P``, ``DIR/p2``, ``DIR/p4``, ``DIR/p8`` (each an ordinary partition folder with the
same ``graph_fingerprint``), then ``DIR/family.json`` last, atomically::

    {"format": "gnn-dist-family", "version": 1, "graph_fingerprint": "...",
     "members": [{"num_parts": 2, "dir": "p2"}, {"num_parts": 4, "dir": "p4"}, ...]}

A folder without ``family.json`` is not a family (an unfinished write is never taken for one).
``gnn-dist train --data DIR`` and the ranks (``gnn_dist.train``, ``gnn_dist.predict``) pick the
member of their world size (:func:`resolve_member`); a world size with no member is one line naming
the members and the fix. Torch-free.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..errors import PartitionFormatError

__all__ = ["FAMILY_FILE", "FAMILY_FORMAT", "Family", "MissingMemberError", "is_family", "member_dir_name",
           "read_family", "resolve_member", "write_family_json"]

FAMILY_FILE = "family.json"
FAMILY_FORMAT = "gnn-dist-family"
FAMILY_VERSION = 1
_MAX_BYTES = 1 << 20


class MissingMemberError(ValueError):
    """A world size the family has no member for (a usage error: exit code 2)."""


def member_dir_name(num_parts: int) -> str:
    """The subfolder of the ``num_parts`` member: ``p4``."""
    return f"p{int(num_parts)}"


def is_family(path: str | os.PathLike[str]) -> bool:
    """Whether ``path`` is a folder holding ``family.json``."""
    return (Path(path) / FAMILY_FILE).is_file()


@dataclass(frozen=True)
class Family:
    """A family folder as ``family.json`` describes it."""

    path: Path
    graph_fingerprint: str | None
    members: dict[int, str]
    """num_parts -> subfolder name, in increasing num_parts."""

    @property
    def parts(self) -> list[int]:
        return sorted(self.members)

    def parts_text(self) -> str:
        return ",".join(map(str, self.parts))

    def member_path(self, num_parts: int) -> Path:
        return self.path / self.members[num_parts]

    def member(self, num_parts: int, what: str) -> Path:
        """The folder of the ``num_parts`` member; else :class:`MissingMemberError`, one line
        naming ``what`` asked for it, the members and the fix."""
        if num_parts in self.members:
            return self.member_path(num_parts)
        wanted = ",".join(map(str, sorted({*self.parts, num_parts})))
        raise MissingMemberError(
            f"{self.path}: the partition family has members P={self.parts_text()}, none for {what} {num_parts}; "
            f"run on {' or '.join(map(str, self.parts))} ranks, or add the member: gnn-dist partition "
            f"--parts {wanted} ... --out {self.path} --overwrite")


def _err(path: Path, msg: str) -> PartitionFormatError:
    return PartitionFormatError(msg, path=str(path / FAMILY_FILE))


def read_family(path: str | os.PathLike[str]) -> Family:
    """Read and check ``path/family.json``; :class:`PartitionFormatError` naming the file."""
    root = Path(path)
    try:
        with open(root / FAMILY_FILE, "rb") as f:
            data = f.read(_MAX_BYTES + 1)
        raw = json.loads(data.decode("utf-8"))
    except OSError as exc:
        raise _err(root, f"cannot be read ({exc.strerror or exc})") from exc
    except (UnicodeDecodeError, ValueError, RecursionError) as exc:
        raise _err(root, f"not valid JSON ({exc})") from None
    if len(data) > _MAX_BYTES or not isinstance(raw, dict) or raw.get("format") != FAMILY_FORMAT:
        raise _err(root, f"not a gnn-dist partition family (format {FAMILY_FORMAT!r} expected)")
    if raw.get("version") != FAMILY_VERSION:
        raise _err(root, f"unknown family version {raw.get('version')!r}: this reader supports {FAMILY_VERSION}")
    members: dict[int, str] = {}
    for entry in raw.get("members") if isinstance(raw.get("members"), list) else [None]:
        p = entry.get("num_parts") if isinstance(entry, dict) else None
        if isinstance(p, bool) or not isinstance(p, int) or p < 1 or p in members \
                or entry.get("dir") != member_dir_name(p):
            raise _err(root, f"field members: each entry is {{\"num_parts\": P, \"dir\": \"pP\"}} with a "
                             f"distinct P >= 1, got {json.dumps(entry)[:60]}")
        members[p] = entry["dir"]
    if not members:
        raise _err(root, "field members: the family lists no member")
    fingerprint = raw.get("graph_fingerprint")
    return Family(root, fingerprint if isinstance(fingerprint, str) else None, dict(sorted(members.items())))


def write_family_json(path: str | os.PathLike[str], members: dict[int, str | None]) -> Path:
    """Write ``path/family.json`` atomically (temp file, fsync, rename) for ``members``
    (num_parts -> that member's graph fingerprint, which must all be the same)."""
    root = Path(path)
    prints = set(members.values())
    if len(prints) != 1:
        raise ValueError(f"{root}: the members' graph fingerprints differ ({', '.join(map(str, prints))}): "
                         f"they are not cuts of one graph")
    doc: dict[str, Any] = {"format": FAMILY_FORMAT, "version": FAMILY_VERSION, "graph_fingerprint": prints.pop(),
                           "members": [{"num_parts": p, "dir": member_dir_name(p)} for p in sorted(members)]}
    target = root / FAMILY_FILE
    tmp = root / f".{FAMILY_FILE}.tmp-{os.getpid()}"
    with open(tmp, "w", encoding="utf-8") as f:
        f.write(json.dumps(doc, indent=2) + "\n")
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, target)
    return target


def resolve_member(data: str, world_size: int, what: str = "world size") -> str:
    """``data`` unchanged when it is not a family, else the folder of its ``world_size`` member
    (:class:`MissingMemberError` when there is none)."""
    if not data or not is_family(data):
        return data
    return str(read_family(data).member(world_size, what))
