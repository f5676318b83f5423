"""Check at load that each pair of parts agrees on the halo rows one sends the other.

For every ordered pair (``p`` sends to ``q``), the sender's list is the global ids of its
``send_index`` slice for ``q`` (in send order), and the receiver's list is the global ids of its
halo rows owned by ``p`` (in ``halo_offsets`` order). The halo exchange depends on these two lists
being the same: if they are not, halo rows get the wrong node's features and training carries on
with wrong results. Each part's checksums only show that its own files are as written, not that
the parts agree with each other. Each rank hashes its own lists (``O(S + H)``) and the ranks
all-gather only the row counts and digests (``O(P^2)`` small values in one collective). Every
rank compares the same gathered values, so a mismatch raises the same
:class:`HaloMismatchError` on every rank, naming the pair of parts, their files and the fix.
``gnn-dist inspect DIR --verify`` compares the full lists; this check compares only digests.

Shapes: ``global_ids`` int64 ``[I + H]``, ``send_index`` int64 ``[S]``, offsets ``P + 1`` ints.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import torch.distributed as dist

from partitioners.format.layout import GLOBAL_IDS, HALO_OFFSETS, SEND_INDEX, SEND_OFFSETS, part_dir_name

from .collectives import all_gather_json
from .errors import HaloSpecError

__all__ = ["HaloMismatchError", "halo_digests", "check_halo_agreement"]

Digests = dict[str, list[list[Any]]]
"""``{"send": [[q, count, digest], ...], "recv": [[p, count, digest], ...]}``: one entry per
peer with a non-empty list (JSON-able, for the all-gather)."""

_SHOWN = 3
"""How many disagreeing pairs the message lists (then a count of the rest)."""


class HaloMismatchError(HaloSpecError):
    """Two parts of a partition folder disagree on the halo rows one sends the other (a
    ``ValueError``: the folder is bad input)."""


def _digest(ids: np.ndarray) -> str:
    """Hex blake2b (128-bit) of an int64 id list as little-endian bytes."""
    return hashlib.blake2b(np.ascontiguousarray(ids, dtype="<i8"), digest_size=16).hexdigest()


def halo_digests(global_ids: np.ndarray, send_index: np.ndarray, send_offsets: Sequence[int],
                 halo_offsets: Sequence[int], num_inner: int) -> Digests:
    """This part's digest for each peer it sends to (the global ids of ``send_index`` slice ``q``)
    and each peer it receives from (the global ids of its halo rows from ``p``).

    Assumes that the lists have already been checked locally (offsets from 0 to their totals,
    ``send_index`` holding inner rows), as :class:`~.halo.HaloExchanger` does.
    """
    gids = np.asarray(global_ids)
    sent = gids[np.asarray(send_index, dtype=np.int64)]
    halo = gids[num_inner:]
    out: Digests = {"send": [], "recv": []}
    for key, ids, off in (("send", sent, send_offsets), ("recv", halo, halo_offsets)):
        for peer in range(len(off) - 1):
            a, b = int(off[peer]), int(off[peer + 1])
            if b > a:
                out[key].append([peer, b - a, _digest(ids[a:b])])
    return out


def _mismatches(everyone: list[Digests]) -> list[tuple[int, int, int, int]]:
    """``(p, q, sent, expected)`` for each ordered pair whose lists differ: ``p`` sends ``sent``
    rows to ``q``, which expects ``expected`` from ``p`` (equal counts: the ids differ)."""
    send = [{int(q): (int(n), d) for q, n, d in g["send"]} for g in everyone]
    recv = [{int(p): (int(n), d) for p, n, d in g["recv"]} for g in everyone]
    found = []
    for p in range(len(everyone)):
        for q in range(len(everyone)):
            if q == p:
                continue
            mine, theirs = send[p].get(q, (0, "")), recv[q].get(p, (0, ""))
            if mine != theirs:
                found.append((p, q, mine[0], theirs[0]))
    return found


def _describe(p: int, q: int, sent: int, expected: int) -> str:
    src, dst = part_dir_name(p), part_dir_name(q)
    if sent != expected:
        return (f"part {p} sends {sent} rows to part {q} ({src}/{SEND_OFFSETS}) but part {q} expects "
                f"{expected} halo rows from part {p} ({dst}/{HALO_OFFSETS})")
    return (f"the {sent} rows part {p} sends to part {q} ({src}/{SEND_INDEX}) are not the global ids of "
            f"part {q}'s halo rows from part {p} ({dst}/{GLOBAL_IDS}, in {HALO_OFFSETS} order)")


def check_halo_agreement(path: str | Path, digests: Digests,
                         group: dist.ProcessGroup | None = None) -> None:
    """Compare this rank's :func:`halo_digests` with every peer's (a collective: one all-gather;
    the rank in ``group`` is the part id). Raises :class:`HaloMismatchError` on every rank when a
    pair of parts disagrees (counts or ids), naming the parts, their files, the folder and the fix.
    Without a multi-rank group there is nothing to compare."""
    everyone = all_gather_json(digests, group, what="gather of the parts' halo digests")
    if len(everyone) < 2:
        return
    found = _mismatches(everyone)
    if not found:
        return
    listed = "; ".join(_describe(*m) for m in found[:_SHOWN])
    more = f"; and {len(found) - _SHOWN} more pair(s)" if len(found) > _SHOWN else ""
    raise HaloMismatchError(
        f"{path}: the parts disagree on their halo rows: {listed}{more}. The folder's files are "
        f"inconsistent with each other although each matches its checksum; check it with "
        f"`gnn-dist inspect {path} --verify` and re-partition (gnn-dist partition ... --overwrite)")
