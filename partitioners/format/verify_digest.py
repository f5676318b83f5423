"""``gnn-dist inspect --verify``'s check of ``graph_fingerprint``: the digest recomputed from the
parts' stored data (:mod:`.graph_digest`, by original ids: every inner row's node data, every
stored edge, the edge split's pairs and a typed split's relations; a scheme-2 typed folder's edge
relations and per-type rows too) is the one ``partition.json`` records, and so is the scheme-1
digest a scheme-2 folder records beside it (``scheme_1_graph_fingerprint``), from the same pass."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from .graph_digest import SCHEME_1_FIELD, TYPED_SCHEME, GraphDigest, graph_header
from .hetero import EDGE_TYPE, NODE_TYPE, add_type_rows_digest
from .layout import (EDGE_ATTR, EDGE_WEIGHT, FEATURES, INDICES, INDPTR, LABELS, LINK_FILES, MASKS, META_FILE,
                     ORIGINAL_IDS)
from .meta import PartitionMeta
from .typed_split import LINK_REL_FILES, add_link_digest

__all__ = ["graph_fingerprint_problems"]

_ROWS = 1 << 16
"""Rows (or edges) hashed at once: bounds the temporaries whatever the part's size."""


def _add_part(digest: GraphDigest, meta: PartitionMeta, p: int, a: dict[str, np.ndarray],
              orig_of: np.ndarray) -> None:
    """Part ``p``'s inner rows, in-edges and link pairs (``orig_of``: new global id -> original id)."""
    ni = meta.parts[p].num_inner
    orig = np.asarray(a[ORIGINAL_IDS])
    typed = meta.graph_fingerprint_scheme == TYPED_SCHEME
    if typed:
        add_type_rows_digest(digest, meta.hetero, orig[:ni], np.asarray(a[NODE_TYPE])[:ni], a)
    for name in (FEATURES, LABELS, *MASKS):
        if name in a:
            for lo in range(0, ni, _ROWS):
                hi = min(ni, lo + _ROWS)
                digest.add_rows(name, orig[lo:hi], np.asarray(a[name][lo:hi]))
    dst = np.repeat(orig[:ni], np.diff(np.asarray(a[INDPTR])))
    for lo in range(0, dst.size, _ROWS):
        hi = min(dst.size, lo + _ROWS)
        weight = np.asarray(a[EDGE_WEIGHT][lo:hi]) if EDGE_WEIGHT in a else None
        attr = np.asarray(a[EDGE_ATTR][lo:hi]) if EDGE_ATTR in a else None
        relation = np.asarray(a[EDGE_TYPE][lo:hi]) if typed else None
        digest.add_edges(dst[lo:hi], orig[np.asarray(a[INDICES][lo:hi])], weight, attr, relation)
    pairs = {kind: orig_of[np.asarray(a[name], dtype=np.int64)] for kind, name in LINK_FILES.items() if name in a}
    rels = {kind: np.asarray(a[LINK_REL_FILES[kind]]) for kind in pairs if LINK_REL_FILES[kind] in a}
    add_link_digest(digest, pairs, rels or None)


def graph_fingerprint_problems(root: Path, meta: PartitionMeta, parts: list[dict[str, np.ndarray]],
                               names: np.ndarray | None) -> list[str]:
    """One problem when the recomputed digest is not ``meta.graph_fingerprint`` (none without
    the field), one when the scheme-1 digest is not ``meta.scheme_1_graph_fingerprint`` (when
    recorded). ``parts`` are every part's checked arrays; ``names`` ``original_names.npy``."""
    if meta.graph_fingerprint is None:
        return []
    orig_of = np.empty(meta.num_nodes, dtype=np.int64)
    starts = meta.part_starts()
    for p, a in enumerate(parts):
        orig_of[starts[p]:starts[p + 1]] = np.asarray(a[ORIGINAL_IDS])[:meta.parts[p].num_inner]
    digest = GraphDigest(scheme_1=meta.scheme_1_graph_fingerprint is not None)
    for p, a in enumerate(parts):
        _add_part(digest, meta, p, a, orig_of)
    header = graph_header(meta.raw, names)
    recorded = [("graph_fingerprint", meta.graph_fingerprint, digest)]
    if digest.scheme_1 is not None:
        recorded.append((SCHEME_1_FIELD, meta.scheme_1_graph_fingerprint, digest.scheme_1))
    problems = []
    for field, want, computed in recorded:
        got = computed.hexdigest(header)
        if got != want:
            problems.append(f"{root / META_FILE}: field {field} = {str(want)[:16]}... is not the digest of the "
                            f"parts' data ({got[:16]}...): the data or the field was modified; re-partition the graph")
    return problems
