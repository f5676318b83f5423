"""A typed folder's edge split (link prediction on relations): format 1.4's additions.

A typed folder (format 1.3, :mod:`.hetero`) written with ``--edge-split`` has ``minor_version``
4, the homogeneous split's ``link_train.npy`` / ``link_val.npy`` / ``link_test.npy`` in every
part (int64 ``[2, E_s]``: row 0 the **head**, row 1 the **tail**, new global ids, each triple
in the part that owns its tail; *directed*, so a head may have the larger id) and beside each its
relation ids, ``link_train_rel.npy`` ... (int32 ``[E_s]``, indices into ``hetero.relations``);
a part's triples are sorted by ``(tail, head, relation)`` without repeats. ``partition.json``'s
``edge_split`` adds ``relations`` (the target relations' names) and ``relation_counts`` (name ->
``{train, val, test}`` triples) to the homogeneous record's keys.

Rules (the reader's per-part checks, ``inspect --verify`` across parts): relation ids in range,
each triple's head and tail of its relation's source and destination types, the three sets
disjoint, every training triple an edge of its relation, no val/test triple an edge of its
relation nor, reversed, of its reverse relation (``rev_NAME``, as ``--add-reverse`` makes), and
the per-relation counts summing to the split's. Folders before 1.4 still read. Torch-free.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from ..errors import PartitionFormatError
from ..hetero.graph import REVERSE_PREFIX
from .layout import LINK_FILES

__all__ = ["TYPED_SPLIT_MINOR_VERSION", "LINK_REL_FILES", "typed_split_files", "parse_typed_split",
           "link_part_arrays", "typed_link_part_problems", "typed_link_cross_problems", "add_link_digest",
           "reverse_candidate"]

TYPED_SPLIT_MINOR_VERSION = 4
"""The minor version of typed folders with an edge split (the ``link_*_rel.npy`` files)."""
LINK_REL_FILES = {kind: name.replace(".npy", "_rel.npy") for kind, name in LINK_FILES.items()}
"""split -> its triples' relation ids file (``link_train_rel.npy`` ...)."""


def typed_split_files(hetero: dict[str, Any] | None, edge_split: Any) -> list[str]:
    """The relation files of a typed folder with an edge split (none otherwise)."""
    return list(LINK_REL_FILES.values()) if hetero is not None and edge_split else []


def parse_typed_split(record: dict[str, Any], hetero: dict[str, Any] | None, minor_version: int,
                      meta_path: Path) -> None:
    """``edge_split.relations`` / ``relation_counts`` checked against the ``hetero`` section (a
    typed folder's split has them; a homogeneous folder's has neither)."""
    def err(msg: str) -> PartitionFormatError:
        return PartitionFormatError(msg, path=str(meta_path))

    if hetero is None:
        if "relations" in record or "relation_counts" in record:
            raise err("field edge_split.relations belongs to typed folders (a hetero section); this folder has none")
        return
    if minor_version < TYPED_SPLIT_MINOR_VERSION:
        raise err(f"field edge_split in a typed folder needs minor_version >= {TYPED_SPLIT_MINOR_VERSION} (typed "
                  f"edge splits came with format 1.{TYPED_SPLIT_MINOR_VERSION}), got {minor_version}")
    names = [r[1] for r in hetero["relations"]]
    rels, counts = record.get("relations"), record.get("relation_counts")
    if not isinstance(rels, list) or not rels or any(r not in names for r in rels) or len(set(rels)) != len(rels):
        raise err(f"field edge_split.relations = {rels!r} must list distinct relation names among {names}")
    if not isinstance(counts, dict) or sorted(counts) != sorted(rels):
        raise err(f"field edge_split.relation_counts must give the triples of each of {rels}")
    for kind in LINK_FILES:
        per = [counts[r].get(kind) if isinstance(counts[r], dict) else None for r in rels]
        if not all(type(c) is int and c >= 0 for c in per) or sum(per) != record["counts"][kind]:
            raise err(f"field edge_split.relation_counts: the {kind} triples per relation must be counts summing to "
                      f"edge_split.counts.{kind} = {record['counts'][kind]}")


def link_part_arrays(pairs: dict[str, np.ndarray], relations: dict[str, np.ndarray] | None,
                     node_map: np.ndarray, starts: np.ndarray) -> list[dict[str, np.ndarray]]:
    """Per part, the split's files: the pairs (original ids) in new global ids, in the part owning
    the destination, sorted by (destination, source[, relation]); with ``relations``, their ids."""
    out: list[dict[str, np.ndarray]] = [{} for _ in range(len(starts) - 1)]
    for kind, name in LINK_FILES.items():
        p = node_map[pairs[kind]]
        keys = (p[0], p[1]) if relations is None else (relations[kind], p[0], p[1])
        order = np.lexsort(keys)
        p = p[:, order]
        cuts = np.searchsorted(p[1], starts)
        for q in range(len(starts) - 1):
            out[q][name] = np.ascontiguousarray(p[:, cuts[q]:cuts[q + 1]])
            if relations is not None:
                out[q][LINK_REL_FILES[kind]] = relations[kind][order][cuts[q]:cuts[q + 1]].astype(np.int32)
    return out


def add_link_digest(digest: Any, pairs: dict[str, np.ndarray], relations: dict[str, np.ndarray] | None) -> None:
    """The split's pairs (original ids) into the graph fingerprint; a typed split's relation ids too."""
    for kind, p in pairs.items():
        digest.add_pairs(kind, p)
        if relations is not None:
            digest.add_pairs(f"{kind}.relation", np.stack([p[0], relations[kind].astype(np.int64)]))


def typed_link_part_problems(hetero: dict[str, Any], a: dict[str, np.ndarray]) -> list[tuple[str, str]]:
    """One part's relation files: ids in range, one per pair, pairs sorted by (tail, head,
    relation) without repeats (replaces the homogeneous order check)."""
    num_rel = len(hetero["relations"])
    for kind, name in LINK_FILES.items():
        rel_name = LINK_REL_FILES[kind]
        if name not in a or rel_name not in a:
            continue
        rel = np.asarray(a[rel_name]).astype(np.int64)
        head, tail = (np.asarray(row, dtype=np.int64) for row in a[name])
        if rel.shape != head.shape:
            return [(rel_name, f"has {rel.size} relation ids for the {head.size} pairs of {name}")]
        if rel.size and (int(rel.min()) < 0 or int(rel.max()) >= num_rel):
            return [(rel_name, f"relation ids must be in [0, {num_rel}), got {int(rel.min())} .. {int(rel.max())}")]
        key = np.stack([tail, head, rel])
        if rel.size > 1:
            d = np.diff(key, axis=1)
            later = (d[0] > 0) | ((d[0] == 0) & ((d[1] > 0) | ((d[1] == 0) & (d[2] > 0))))
            if not later.all():
                return [(name, "triples must be sorted by (tail, head, relation), without repeats")]
    return []


def typed_link_cross_problems(root: Path, meta: Any, parts: list[dict[str, np.ndarray]],
                              orig_of: np.ndarray) -> list[str]:
    """The typed split across parts (module docstring's rules), ``orig_of`` the original id of
    each new global id."""
    sec = meta.hetero
    rels = [tuple(r) for r in sec["relations"]]
    num_rel, n = len(rels), meta.num_nodes
    offsets = np.array([t["offset"] for t in sec["node_types"]], dtype=np.int64)
    tid = {t["name"]: i for i, t in enumerate(sec["node_types"])}
    problems: list[str] = []
    keys: dict[str, np.ndarray] = {}
    for kind, name in LINK_FILES.items():
        per = []
        for a in parts:
            head, tail = (np.asarray(row, dtype=np.int64) for row in a[name])
            rel = np.asarray(a[LINK_REL_FILES[kind]]).astype(np.int64)
            src_t = np.array([tid[r[0]] for r in rels])[rel]
            dst_t = np.array([tid[r[2]] for r in rels])[rel]
            ht = np.searchsorted(offsets, orig_of[head], side="right") - 1
            tt = np.searchsorted(offsets, orig_of[tail], side="right") - 1
            if np.any((ht != src_t) | (tt != dst_t)):
                problems.append(f"{root}: a {kind} triple's head or tail is not of its relation's types")
            per.append((head * n + tail) * num_rel + rel)
        keys[kind] = np.sort(np.concatenate(per))
    every = np.sort(np.concatenate(list(keys.values())))
    if np.any(every[1:] == every[:-1]):
        problems.append(f"{root}: a triple is in two of link_train/link_val/link_test (or twice in one)")
    stored = []
    for p, a in enumerate(parts):
        ni = meta.parts[p].num_inner
        gids = np.asarray(a["global_ids.npy"]).astype(np.int64)
        dst = np.repeat(gids[:ni], np.diff(np.asarray(a["indptr.npy"])))
        src = gids[np.asarray(a["indices.npy"]).astype(np.int64)]
        stored.append((src * n + dst) * num_rel + np.asarray(a["edge_type.npy"]).astype(np.int64))
    edges = np.concatenate(stored) if stored else np.zeros(0, np.int64)
    if not np.isin(keys["train"], edges).all():
        problems.append(f"{root}: a training triple is not an edge of its relation in the parts")
    held = np.concatenate([keys["val"], keys["test"]])
    if np.isin(held, edges).any():
        problems.append(f"{root}: a val/test triple is still an edge of its relation (it leaks into message passing)")
    mate = np.array([_mate(rels, r) for r in range(num_rel)], dtype=np.int64)
    rel, pair = held % num_rel, held // num_rel
    has = mate[rel] >= 0
    reverse = ((pair % n) * n + pair // n) * num_rel + mate[rel]
    if np.isin(reverse[has], edges).any():
        problems.append(f"{root}: a val/test triple's reverse is still an edge of the reverse relation (a leak)")
    return problems


def reverse_candidate(rel: tuple[str, ...]) -> tuple[str, str, str]:
    """The relation that would reverse ``rel = (s, NAME, d)``: ``(d, rev_NAME, s)``, or
    ``(d, NAME, s)`` for ``rel = (s, rev_NAME, d)`` (the names ``--add-reverse`` gives)."""
    s, name, d = rel
    return (d, name[len(REVERSE_PREFIX):], s) if name.startswith(REVERSE_PREFIX) else (d, REVERSE_PREFIX + name, s)


def _mate(rels: list[tuple[str, ...]], r: int) -> int:
    """The id of relation ``r``'s reverse, -1 without one."""
    want = reverse_candidate(rels[r])
    return rels.index(want) if want in rels else -1
