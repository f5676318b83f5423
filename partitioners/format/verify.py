"""Check a whole partition folder: every part as the reader does, plus cross-part consistency.

Cross-part rules (format v1): what part q sends to part p (``send_index`` slice p of q, as
global ids) is exactly p's halo rows from q, in order; ``node_map`` is a permutation of
``[0, N)`` that maps every row's ``original_ids`` to its ``global_ids``; a halo row carries the
same original id, in-degree and self-loop count as its owner's row; every row's out-degree is
the number of stored edges with that source, over all parts; ``original_names`` (when present)
holds ``N`` distinct int64 or unicode names; an edge split's pairs (``link_*.npy``) are oriented
from the smaller original id to the larger, each pair is in one set only, the training pairs are
edges of the graph and the val/test pairs are not (in either direction: no leak); the graph
fingerprint, when recorded, is the digest of the parts' data (:mod:`.verify_digest`).
"""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np

from ..errors import PartitionFormatError
from .checks import layout_problems, structure_problems, value_problems
from .layout import (GLOBAL_IDS, HALO_OFFSETS, IN_DEGREE, INDICES, INDPTR, LINK_FILES, NODE_MAP_FILE, ORIGINAL_IDS,
                     ORIGINAL_NAMES_FILE, OUT_DEGREE, SELF_LOOPS, SEND_INDEX, SEND_OFFSETS,
                     part_dir_name)
from .meta import PartitionMeta
from .npyio import load_array
from .reader import load_partition_meta
from .typed_split import typed_link_cross_problems
from .verify_digest import graph_fingerprint_problems

__all__ = ["verify_partition"]

Arrays = dict[str, np.ndarray]


def _load_parts(root: Path, meta: PartitionMeta, check_hashes: bool,
                problems: list[str]) -> list[Arrays | None]:
    loaded: list[Arrays | None] = []
    for pm in meta.parts:
        found = [f"{root / pm.files[name].path}: partition.json entry {msg}"
                 for name, msg in layout_problems(meta, pm)]
        arrays: Arrays = {}
        if not found:
            for name, entry in pm.files.items():
                try:
                    arrays[name] = load_array(root, entry, mmap=True, check_hash=check_hashes)
                except PartitionFormatError as exc:
                    found.append(str(exc))
        if not found:
            checks = structure_problems(meta, pm, arrays) or value_problems(meta, pm, arrays)
            found = [f"{root / pm.files[name].path}: {msg}" for name, msg in checks]
        problems += found
        loaded.append(None if found else arrays)
    return loaded


def _cross_problems(root: Path, meta: PartitionMeta, parts: list[Arrays],
                    node_map: np.ndarray | None) -> list[str]:
    problems: list[str] = []
    n, num_parts = meta.num_nodes, meta.num_parts
    starts = meta.part_starts()
    ni = [pm.num_inner for pm in meta.parts]

    def where(p: int, name: str) -> str:
        return str(root / part_dir_name(p) / name)

    for p in range(num_parts):
        gids_p, hoff_p = parts[p][GLOBAL_IDS], parts[p][HALO_OFFSETS]
        for q in range(num_parts):
            if q == p:
                continue
            soff_q = parts[q][SEND_OFFSETS]
            sent = np.asarray(parts[q][SEND_INDEX][soff_q[p]:soff_q[p + 1]]) + starts[q]
            halo = np.asarray(gids_p[ni[p] + hoff_p[q]:ni[p] + hoff_p[q + 1]])
            if not np.array_equal(sent, halo):
                problems.append(f"{where(q, SEND_INDEX)}: the {sent.size} rows part {q} sends to part {p} "
                                f"are not part {p}'s {halo.size} halo rows from part {q} (in order)")

    orig_of = np.empty(n, dtype=np.int64)
    in_of = np.empty(n, dtype=np.int64)
    loops_of = np.empty(n, dtype=np.int64)
    out_count = np.zeros(n, dtype=np.int64)
    for p, a in enumerate(parts):
        s, e = starts[p], starts[p + 1]
        orig_of[s:e] = a[ORIGINAL_IDS][:ni[p]]
        in_of[s:e] = a[IN_DEGREE][:ni[p]]
        loops_of[s:e] = a[SELF_LOOPS][:ni[p]]
        gids = np.asarray(a[GLOBAL_IDS])
        out_count += np.bincount(gids[np.asarray(a[INDICES])], minlength=n)
    for p, a in enumerate(parts):
        gids = np.asarray(a[GLOBAL_IDS])
        for name, ref in ((ORIGINAL_IDS, orig_of), (IN_DEGREE, in_of), (SELF_LOOPS, loops_of)):
            if not np.array_equal(np.asarray(a[name])[ni[p]:], ref[gids[ni[p]:]]):
                problems.append(f"{where(p, name)}: halo rows disagree with their owners' rows")
        if not np.array_equal(np.asarray(a[OUT_DEGREE]), out_count[gids]):
            problems.append(f"{where(p, OUT_DEGREE)}: out_degree differs from the number of stored "
                            f"edges each row is the source of (over all parts)")

    if meta.edge_split is not None and meta.hetero is not None:   # triples of relations, directed
        problems += typed_link_cross_problems(root, meta, parts, orig_of)
    elif meta.edge_split is not None:
        problems += _link_cross_problems(root, meta, parts, orig_of)
    if node_map is not None:
        nm_path = root / NODE_MAP_FILE
        nm = np.asarray(node_map)
        if nm.dtype != np.int64 or nm.shape != (n,):
            problems.append(f"{nm_path}: must be int64[{n}], got {nm.dtype}{list(nm.shape)}")
        elif nm.size and (int(nm.min()) < 0 or int(nm.max()) >= n
                          or not np.all(np.bincount(nm, minlength=n) == 1)):
            problems.append(f"{nm_path}: is not a permutation of [0, {n})")
        else:
            for p, a in enumerate(parts):
                if not np.array_equal(nm[np.asarray(a[ORIGINAL_IDS])], np.asarray(a[GLOBAL_IDS])):
                    problems.append(f"{where(p, ORIGINAL_IDS)}: node_map[original_ids] != global_ids")
    return problems


def _link_cross_problems(root: Path, meta: PartitionMeta, parts: list[Arrays],
                         orig_of: np.ndarray) -> list[str]:
    """The edge split's pairs against each other and the parts' edges (keys ``min * N + max`` of
    global ids): oriented by original id, disjoint sets, train pairs present, val/test absent."""
    n = meta.num_nodes
    problems: list[str] = []
    keys: dict[str, np.ndarray] = {}
    for kind, name in LINK_FILES.items():
        per_part = []
        for p, a in enumerate(parts):
            src, dst = (np.asarray(row, dtype=np.int64) for row in a[name])
            if np.any(orig_of[src] >= orig_of[dst]):
                problems.append(f"{root / part_dir_name(p) / name}: a pair is not oriented from the smaller "
                                f"original id (row 0) to the larger (row 1)")
            per_part.append(np.minimum(src, dst) * n + np.maximum(src, dst))
        keys[kind] = np.sort(np.concatenate(per_part))
    every = np.sort(np.concatenate(list(keys.values())))
    if np.any(every[1:] == every[:-1]):
        problems.append(f"{root}: a pair is in two of link_train/link_val/link_test (or twice in one)")
    held_out = np.concatenate([keys["val"], keys["test"]])
    found = np.zeros(keys["train"].size, dtype=bool)
    for p, a in enumerate(parts):
        gids = np.asarray(a[GLOBAL_IDS])
        ni = meta.parts[p].num_inner
        dst = np.repeat(gids[:ni], np.diff(np.asarray(a[INDPTR])))
        src = gids[np.asarray(a[INDICES])]
        edge_keys = np.minimum(src, dst) * n + np.maximum(src, dst)
        if np.isin(edge_keys, held_out).any():
            problems.append(f"{root / part_dir_name(p) / INDICES}: the part's edges include a val/test "
                            f"pair of the edge split (it leaks into message passing)")
        found |= np.isin(keys["train"], edge_keys)
    if not found.all():
        problems.append(f"{root}: {int(np.count_nonzero(~found))} training pairs of the edge split "
                        f"are not edges of the graph")
    return problems


def _names_problems(root: Path, meta: PartitionMeta, check_hashes: bool) -> list[str]:
    path = root / ORIGINAL_NAMES_FILE
    try:
        names = load_array(root, meta.files[ORIGINAL_NAMES_FILE], mmap=True, check_hash=check_hashes)
    except PartitionFormatError as exc:
        return [str(exc)]
    if names.shape != (meta.num_nodes,) or not (names.dtype == np.int64 or names.dtype.kind == "U"):
        return [f"{path}: must be int64 or unicode [{meta.num_nodes}], got {names.dtype}{list(names.shape)}"]
    if np.unique(names).size != names.size:
        return [f"{path}: names are not distinct (two nodes have the same input id)"]
    return []


def _original_names(root: Path, meta: PartitionMeta) -> np.ndarray | None:
    """``original_names.npy``, or None without it (or when unreadable: reported by
    :func:`_names_problems`)."""
    if ORIGINAL_NAMES_FILE not in meta.files:
        return None
    try:
        return load_array(root, meta.files[ORIGINAL_NAMES_FILE], mmap=True, check_hash=False)
    except PartitionFormatError:
        return None


def verify_partition(path: str | os.PathLike[str], *, check_hashes: bool = True) -> list[str]:
    """All problems found in the partition folder ``path`` (an empty list means it is valid).

    Each problem starts with the path of the file it concerns. ``check_hashes=False`` skips the
    sha256 of the files (sizes, dtypes, shapes and values are still checked).
    """
    root = Path(path)
    try:
        meta = load_partition_meta(root)
    except PartitionFormatError as exc:
        return [str(exc)]
    problems: list[str] = []
    node_map = None
    try:
        node_map = load_array(root, meta.files[NODE_MAP_FILE], mmap=True, check_hash=check_hashes)
    except PartitionFormatError as exc:
        problems.append(str(exc))
    if ORIGINAL_NAMES_FILE in meta.files:
        problems += _names_problems(root, meta, check_hashes)
    parts = _load_parts(root, meta, check_hashes, problems)
    if all(a is not None for a in parts):
        loaded = [a for a in parts if a is not None]
        problems += _cross_problems(root, meta, loaded, node_map)
        problems += graph_fingerprint_problems(root, meta, loaded, _original_names(root, meta))
    else:
        problems.append(f"{root}: cross-part checks skipped because some parts have problems")
    return problems
