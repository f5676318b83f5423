"""Per-part consistency rules of format v1, shared by the reader and the verifier.

Each function returns a list of ``(file_name, message)`` problems instead of raising, so
:func:`~partitioners.format.reader.load_part` can raise on the first one and
:func:`~partitioners.format.verify.verify_partition` can report them all.

Legend: ``ni`` = num_inner, ``nh`` = num_halo, ``P`` = num_parts, ``N`` = num_nodes.
"""

from __future__ import annotations

import numpy as np

from .layout import (EDGE_ATTR, EDGE_WEIGHT, FEATURES, GLOBAL_IDS, HALO_OFFSETS, HOTNESS, IN_DEGREE, INDICES,
                     INDPTR, LABELS, LINK_FILES, MASKS, ORIGINAL_IDS, OUT_DEGREE, SELF_LOOPS,
                     SEND_INDEX, SEND_OFFSETS, WEIGHTED_DEGREE, local_index_dtype)
from .hetero import hetero_layout, hetero_part_problems
from .meta import PartitionMeta, PartMeta
from .typed_split import typed_link_part_problems, typed_split_files

__all__ = ["Problem", "expected_layout", "layout_problems", "structure_problems", "value_problems"]

Problem = tuple[str, str]
"""``(file name, message)``."""

Shape = tuple[int | None, ...]


def expected_layout(meta: PartitionMeta, pm: PartMeta) -> dict[str, tuple[str, Shape]]:
    """dtype name and shape (None = any length) that format v1 requires of each file of part ``pm``."""
    ni, nl, ne, p1 = pm.num_inner, pm.num_local, pm.num_local_edges, meta.num_parts + 1
    out: dict[str, tuple[str, Shape]] = {
        INDPTR: ("int64", (ni + 1,)),
        INDICES: (local_index_dtype(nl).name, (ne,)),
        HALO_OFFSETS: ("int64", (p1,)),
        SEND_INDEX: ("int64", (None,)),
        SEND_OFFSETS: ("int64", (p1,)),
        GLOBAL_IDS: ("int64", (nl,)),
        ORIGINAL_IDS: ("int64", (nl,)),
        IN_DEGREE: ("int64", (nl,)),
        OUT_DEGREE: ("int64", (nl,)),
        SELF_LOOPS: ("int64", (nl,)),
        HOTNESS: ("int64", (ni,)),
    }
    if meta.weighted:
        out[EDGE_WEIGHT] = ("float32", (ne,))
        out[WEIGHTED_DEGREE] = ("float32", (nl, 2))
    if meta.edge_feature_dim:
        out[EDGE_ATTR] = ("float32", (ne, meta.edge_feature_dim))
    if meta.feature_dim:
        out[FEATURES] = (str(meta.feature_dtype), (ni, meta.feature_dim))
    if meta.label_kind == "class":
        out[LABELS] = ("int64", (ni,))
    elif meta.label_kind == "multilabel":
        out[LABELS] = ("uint8", (ni, meta.num_classes))
    elif meta.label_kind == "regression":
        out[LABELS] = ("float32", (ni, meta.num_classes))
    for m in MASKS:
        out[m] = ("bool", (ni,))
    if meta.edge_split is not None:
        for name in LINK_FILES.values():
            out[name] = ("int64", (2, None))
        for name in typed_split_files(meta.hetero, meta.edge_split):
            out[name] = ("int32", (None,))
    if meta.hetero is not None:
        out.update(hetero_layout(meta.hetero, pm.part_id, ni, nl, ne))
    return out


def layout_problems(meta: PartitionMeta, pm: PartMeta) -> list[Problem]:
    """Entries of ``partition.json`` whose dtype/shape differ from what the format requires."""
    problems: list[Problem] = []
    want = expected_layout(meta, pm)
    for name, entry in pm.files.items():
        dtype, shape = want[name]
        ok_shape = len(shape) == len(entry.shape) and all(s is None or s == e for s, e in zip(shape, entry.shape))
        if entry.dtype != dtype or not ok_shape:
            shown = [("any" if s is None else s) for s in shape]
            problems.append((name, f"is {entry.dtype}{list(entry.shape)} but format v1 requires "
                                   f"{dtype}{shown} for this part"))
    return problems


def _offsets_problems(name: str, off: np.ndarray, total: int, own: int) -> list[Problem]:
    if off[0] != 0 or off[-1] != total:
        return [(name, f"must run from 0 to {total}, got {int(off[0])} .. {int(off[-1])}")]
    if np.any(np.diff(off) < 0):
        return [(name, "must be non-decreasing")]
    if off[own + 1] != off[own]:
        return [(name, f"has {int(off[own + 1] - off[own])} rows for the part itself (must be 0)")]
    return []


def structure_problems(meta: PartitionMeta, pm: PartMeta, a: dict[str, np.ndarray]) -> list[Problem]:
    """O(P) checks of a loaded part: CSR and offset endpoints."""
    problems: list[Problem] = []
    indptr = a[INDPTR]
    if indptr[0] != 0 or indptr[-1] != pm.num_local_edges:
        problems.append((INDPTR, f"must run from 0 to num_local_edges = {pm.num_local_edges}, "
                                 f"got {int(indptr[0])} .. {int(indptr[-1])}"))
    p = pm.part_id
    problems += _offsets_problems(HALO_OFFSETS, a[HALO_OFFSETS], pm.num_halo, p)
    problems += _offsets_problems(SEND_OFFSETS, a[SEND_OFFSETS], int(a[SEND_INDEX].shape[0]), p)
    return problems


def value_problems(meta: PartitionMeta, pm: PartMeta, a: dict[str, np.ndarray]) -> list[Problem]:
    """O(edges) checks of one part's values: id ranges, halo order, degrees, hotness, labels.

    Assumes :func:`structure_problems` found nothing.
    """
    ni, nl = pm.num_inner, pm.num_local
    starts = meta.part_starts()
    indices = np.asarray(a[INDICES])
    row_len = np.diff(np.asarray(a[INDPTR]))
    problems = _csr_problems(indices, row_len, nl)
    if problems:
        return problems
    problems += _id_problems(meta, pm, a, starts)
    send = np.asarray(a[SEND_INDEX])
    if send.size and (int(send.min()) < 0 or int(send.max()) >= ni):
        problems.append((SEND_INDEX, f"send rows must be inner local ids in [0, {ni})"))
        return problems
    problems += _send_order_problems(send, np.asarray(a[SEND_OFFSETS]))
    problems += _degree_problems(pm, a, indices, row_len)
    if EDGE_ATTR in a and not _all_finite(a[EDGE_ATTR]):
        problems.append((EDGE_ATTR, "edge features must be finite (a NaN or inf)"))
    problems += _hotness_problems(pm, a, indices, send)
    for name in (IN_DEGREE, OUT_DEGREE, SELF_LOOPS):
        if nl and int(np.asarray(a[name]).min()) < 0:
            problems.append((name, "must be non-negative"))
    problems += _label_problems(meta, pm, a) + _link_problems(meta, pm, a)
    if meta.hetero is not None and not problems:
        problems += hetero_part_problems(meta.hetero, pm.part_id, a, ni)
    return problems


def _csr_problems(indices: np.ndarray, row_len: np.ndarray, nl: int) -> list[Problem]:
    """The CSR's rows and local source ids (the first problem only: the other checks read them)."""
    if np.any(row_len < 0):
        return [(INDPTR, "must be non-decreasing")]
    if indices.size and (int(indices.min()) < 0 or int(indices.max()) >= nl):
        return [(INDICES, f"local source ids must be in [0, num_inner + num_halo = {nl}), "
                          f"got [{int(indices.min())}, {int(indices.max())}]")]
    return []


def _id_problems(meta: PartitionMeta, pm: PartMeta, a: dict[str, np.ndarray], starts: np.ndarray,
                 ) -> list[Problem]:
    """Global ids (the inner rows' range, the halo rows ascending and grouped by owner, as
    ``halo_offsets`` says against the parts' first ids ``starts``) and original ids in ``[0, N)``."""
    problems: list[Problem] = []
    ni, nh, nl, n = pm.num_inner, pm.num_halo, pm.num_local, meta.num_nodes
    gids = np.asarray(a[GLOBAL_IDS])
    lo, hi = pm.global_id_range
    if not np.array_equal(gids[:ni], np.arange(lo, hi, dtype=np.int64)):
        problems.append((GLOBAL_IDS, f"inner rows must have global ids {lo}, {lo}+1, ..., {hi}-1"))
    halo = gids[ni:]
    if nh and (np.any(np.diff(halo) <= 0) or halo[0] < 0 or halo[-1] >= n):
        problems.append((GLOBAL_IDS, f"halo global ids must be strictly ascending in [0, {n})"))
    elif not np.array_equal(np.searchsorted(halo, starts), a[HALO_OFFSETS]):
        problems.append((HALO_OFFSETS, "halo rows are not grouped by the part that owns them "
                                       "(halo_offsets disagrees with the halo global ids)"))
    orig = np.asarray(a[ORIGINAL_IDS])
    if nl and (int(orig.min()) < 0 or int(orig.max()) >= n):
        problems.append((ORIGINAL_IDS, f"original ids must be in [0, num_nodes = {n})"))
    return problems


def _send_order_problems(send: np.ndarray, send_off: np.ndarray) -> list[Problem]:
    """The rows sent to each peer strictly ascending (that peer's halo order)."""
    step = np.diff(send)
    if send.size > 1:
        boundary = np.zeros(send.size - 1, dtype=bool)
        cuts = send_off[1:-1]
        boundary[cuts[(cuts > 0) & (cuts < send.size)] - 1] = True
        if np.any((step <= 0) & ~boundary):
            return [(SEND_INDEX, "rows sent to one part must be strictly ascending (that part's halo order)")]
    return []


def _degree_problems(pm: PartMeta, a: dict[str, np.ndarray], indices: np.ndarray,
                     row_len: np.ndarray) -> list[Problem]:
    """Every halo row a source of some local edge; the inner rows' in-degrees, self-loops and
    weighted in-degrees as the CSR counts them."""
    problems: list[Problem] = []
    ni, nh = pm.num_inner, pm.num_halo
    used_halo = np.bincount(indices[indices >= ni].astype(np.int64) - ni, minlength=nh)
    if nh and np.any(used_halo == 0):
        problems.append((GLOBAL_IDS, f"{int(np.sum(used_halo == 0))} halo rows are not the source of any "
                                     f"local edge"))
    if not np.array_equal(np.asarray(a[IN_DEGREE])[:ni], row_len):
        problems.append((IN_DEGREE, "in_degree of inner rows differs from their CSR row lengths"))
    rows = np.repeat(np.arange(ni, dtype=np.int64), row_len)
    loops = np.bincount(rows[indices.astype(np.int64) == rows], minlength=ni)
    if not np.array_equal(np.asarray(a[SELF_LOOPS])[:ni], loops):
        problems.append((SELF_LOOPS, "self_loops of inner rows differ from the self-loop edges in the CSR"))
    if WEIGHTED_DEGREE in a and EDGE_WEIGHT in a:
        w = np.asarray(a[EDGE_WEIGHT], dtype=np.float64)
        loop_edge = indices.astype(np.int64) == rows
        local = np.bincount(rows[~loop_edge], weights=w[~loop_edge], minlength=ni)
        wd = np.asarray(a[WEIGHTED_DEGREE], dtype=np.float64)
        if not np.all(np.isfinite(wd)):
            problems.append((WEIGHTED_DEGREE, "must be finite"))
        elif not np.allclose(wd[:ni, 0], local, rtol=1e-5, atol=1e-6):
            problems.append((WEIGHTED_DEGREE, "in-edge weights of inner rows differ from their CSR rows' weights"))
    return problems


def _hotness_problems(pm: PartMeta, a: dict[str, np.ndarray], indices: np.ndarray,
                      send: np.ndarray) -> list[Problem]:
    """Hotness (local out-edges + peers a row is sent to) as stored, and the inner rows in its
    order (descending, ties by ascending original id)."""
    ni = pm.num_inner
    src_inner = indices[indices < ni].astype(np.int64)
    hot = np.bincount(src_inner, minlength=ni) + np.bincount(send, minlength=ni)
    hotness = np.asarray(a[HOTNESS])
    if not np.array_equal(hotness, hot):
        return [(HOTNESS, "hotness differs from (local out-edges + peers the row is sent to)")]
    if ni > 1:
        dh = np.diff(hotness)
        orig = np.asarray(a[ORIGINAL_IDS])
        if np.any((dh > 0) | ((dh == 0) & (np.diff(orig[:ni]) <= 0))):
            return [(HOTNESS, "inner rows are not in hotness order (descending hotness, "
                              "ties by ascending original id)")]
    return []


def _link_problems(meta: PartitionMeta, pm: PartMeta, a: dict[str, np.ndarray]) -> list[Problem]:
    """An edge split's pairs: global ids in ``[0, N)``, each destination (row 1) owned by this
    part, no self-pair, sorted strictly by (destination, source)."""
    problems: list[Problem] = []
    lo, hi = pm.global_id_range
    for name in LINK_FILES.values():
        if name not in a:
            continue
        src, dst = (np.asarray(row, dtype=np.int64) for row in a[name])
        if src.size and (int(src.min()) < 0 or int(src.max()) >= meta.num_nodes):
            problems.append((name, f"source ids (row 0) must be global ids in [0, num_nodes = {meta.num_nodes})"))
        elif dst.size and (int(dst.min()) < lo or int(dst.max()) >= hi):
            problems.append((name, f"destination ids (row 1) must be owned by part {pm.part_id}, i.e. in "
                                   f"[{lo}, {hi}): a pair is stored in the part that owns its destination"))
        elif np.any(src == dst):
            problems.append((name, "a pair joins a node to itself"))
        elif meta.hetero is None and src.size > 1 and np.any((np.diff(dst) < 0)
                                                           | ((np.diff(dst) == 0) & (np.diff(src) <= 0))):
            problems.append((name, "pairs must be sorted by (destination, source), without repeats"))
    if meta.hetero is not None:   # triples: (tail, head, relation) order, relation ids
        problems += typed_link_part_problems(meta.hetero, a)
    return problems


def _all_finite(a: np.ndarray, step: int = 1 << 20) -> bool:
    """Whether every value of ``a`` (a memory map, say) is finite, ``step`` rows at a time."""
    return all(np.isfinite(np.asarray(a[lo:lo + step])).all() for lo in range(0, a.shape[0], step))


def _label_problems(meta: PartitionMeta, pm: PartMeta, a: dict[str, np.ndarray]) -> list[Problem]:
    """Class ids in range, a 0/1 multi-label matrix, finite regression targets, and ``num_train``
    against the train mask."""
    problems: list[Problem] = []
    if LABELS in a:
        y = np.asarray(a[LABELS])
        if meta.label_kind == "class" and y.size and (int(y.min()) < 0 or int(y.max()) >= meta.num_classes):
            problems.append((LABELS, f"class ids must be in [0, num_classes = {meta.num_classes})"))
        if meta.label_kind == "multilabel" and y.size and int(y.max()) > 1:
            problems.append((LABELS, "a multi-label matrix holds only 0 and 1"))
        if meta.label_kind == "regression" and y.size and not np.isfinite(y).all():
            problems.append((LABELS, "regression targets must be finite (a NaN or inf at row "
                                     f"{int(np.argwhere(~np.isfinite(y))[0][0])})"))
    train = a.get(MASKS[0])
    if train is not None and int(np.count_nonzero(train)) != pm.num_train:
        problems.append((MASKS[0], f"num_train is {pm.num_train} in partition.json but the mask has "
                                   f"{int(np.count_nonzero(train))} training rows"))
    return problems

