"""Write a partition folder, format version 1 (``docs/format.md``), atomically.

::

    OUT/
      partition.json          written last; the only entry point
      node_map.npy            int64[N]: original id -> new global id
      [original_names.npy]    int64 or unicode [N]: the input's id of each original id (relabelled inputs)
      part-00000/
        indptr.npy indices.npy [edge_weight.npy] [edge_attr.npy] halo_offsets.npy send_index.npy send_offsets.npy
        global_ids.npy original_ids.npy in_degree.npy out_degree.npy self_loops.npy hotness.npy
        [weighted_degree.npy] [features.npy] [labels.npy] [train_mask.npy] [val_mask.npy] [test_mask.npy]
        [link_train.npy link_val.npy link_test.npy]   (an edge split: Graph.link_pairs)
        [link_train_rel.npy ...]   (a typed folder's split: HeteroFolderData.link_relations, .typed_split)
      part-00001/ ...

Everything is built in a sibling temporary folder ``.OUT.tmp-<pid>-<random>`` that is renamed
into place at the end, so a crash leaves no ``OUT/partition.json`` describing partial data (and
the temporary folder is removed on any exception).

Memory: the graph (memory maps, for an out-of-core graph), O(N) id arrays, the halo lists, the
O(nodes) arrays of one part at a time, and chunks: a part's edge arrays and node data are
gathered and written a chunk at a time (:func:`~.writer_memory.write_memory`).
"""

from __future__ import annotations

import json
import logging
import math
import os
import resource
import time
from contextlib import ExitStack
from pathlib import Path
from typing import Any

import numpy as np
from tqdm.auto import tqdm

from ..atomic_dir import fsync_dir, holds_files, replace_dir, staging_dir
from ..chunks import plain, rows_per_step
from ..graph import Graph
from . import npyio
from .layout import (EDGE_ATTR, EDGE_WEIGHT, FEATURES, FORMAT_MINOR_VERSION, FORMAT_NAME, FORMAT_VERSION, GLOBAL_IDS, HALO_OFFSETS,
                     HOTNESS, IN_DEGREE, INDICES, INDPTR, LABELS, MASKS, META_FILE, NODE_MAP_FILE,
                     ORIGINAL_IDS, ORIGINAL_NAMES_FILE, OUT_DEGREE, SELF_LOOPS, SEND_INDEX,
                     SEND_OFFSETS, TOOL_NAME, WEIGHTED_DEGREE, local_index_dtype, part_dir_name)
from .graph_digest import SCHEME_1_FIELD, SCHEME_FIELD, TYPED_SCHEME, GraphDigest, graph_header
from .hetero import (HETERO_MINOR_VERSION, NODE_TYPE, HeteroFolderData, add_type_rows_digest, edge_positions,
                     hetero_part_arrays)
from .meta import FileEntry
from .typed_split import TYPED_SPLIT_MINOR_VERSION, add_link_digest, link_part_arrays
from ..quality import check_assignment, quality_report
from .relabel import Relabeling, node_chunks, relabel
from .writer_memory import NODE_DATA_STEP_BYTES, write_memory

__all__ = ["write_partition", "check_out_dir", "peak_rss_bytes", "write_memory"]

log = logging.getLogger(__name__)

_RESERVED_KEYS = frozenset({
    "format", "version", "minor_version", "edge_feature_dim", "created_by", "num_parts", "num_nodes", "num_edges", "method",
    "method_params", "seed", "feature_dim", "feature_dtype", "num_classes", "label_kind",
    "weighted", "quality", "files", "parts", "hetero", "graph_fingerprint", SCHEME_FIELD, SCHEME_1_FIELD})
"""Keys of partition.json that ``extra_meta`` may not set (they describe the data)."""


def peak_rss_bytes() -> int:
    """Peak resident set size of this process so far, in bytes.

    On Linux ``VmHWM`` (``/proc/self/status``): ``ru_maxrss`` there also holds the parent's RSS
    at fork, so ``gnn-dist`` started from a large process (a notebook, pytest) would report the
    parent's size. Elsewhere ``ru_maxrss``.
    """
    try:
        with open("/proc/self/status", encoding="ascii") as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError):
        pass
    return int(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss) * 1024


def check_out_dir(out_dir: str | os.PathLike[str], overwrite: bool) -> Path:
    """Check that ``out_dir`` may be (re)written; return it as a Path.

    A missing or empty folder is fine. A folder holding a partition (``partition.json``) is
    replaced only with ``overwrite``. Anything else (a file, a non-empty folder without
    ``partition.json``) is never deleted, even with ``overwrite``. Raises ``FileExistsError``.
    """
    out = Path(out_dir)
    if not holds_files(out):
        return out
    if not (out / META_FILE).is_file():
        raise FileExistsError(f"{out} is a non-empty folder without {META_FILE} (not a partition "
                              f"folder); refusing to replace it even with overwrite (--overwrite): "
                              f"choose another output folder or empty it yourself")
    if not overwrite:
        raise FileExistsError(f"{out} already holds a partition; pass overwrite=True "
                              f"(CLI: --overwrite) to replace it")
    return out


def _jsonable(obj: Any) -> Any:
    """numpy scalars/arrays -> Python; non-finite floats -> None (strict JSON)."""
    if isinstance(obj, dict):
        return {str(k): _jsonable(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_jsonable(v) for v in obj]
    if isinstance(obj, np.ndarray):
        return _jsonable(obj.tolist())
    if isinstance(obj, np.generic):
        obj = obj.item()
    if isinstance(obj, float) and not math.isfinite(obj):
        return None
    return obj


def _fsync_dir(path: Path) -> None:
    if npyio.FSYNC:
        fsync_dir(path)


def _install(tmp: Path, out: Path, overwrite: bool) -> None:
    """Rename the finished ``tmp`` folder to ``out``, moving an old partition aside first."""
    check_out_dir(out, overwrite)
    replace_dir(tmp, out, sync=npyio.FSYNC)


def _write_part(graph: Graph, rl: Relabeling, p: int, tmp: Path, halo_offsets_all: np.ndarray,
                local_of: np.ndarray, weighted_degree: np.ndarray | None, digest: GraphDigest,
                relation_of: np.ndarray | None) -> dict[str, Any]:
    """Write ``part-XXXXX/`` for part ``p``; return its ``parts[p]`` entry of partition.json.

    ``halo_offsets_all[q]`` is part q's halo_offsets; ``local_of`` is an all ``-1`` scratch
    ``[N]`` array, left all ``-1`` again. The part's edge arrays and node data are gathered and
    written in chunks (:class:`~.npyio.ArrayStream`): nothing of size ``E_p`` or ``N_p * F``
    exists in memory. Each chunk of edges and node data is also added to ``digest`` (a typed
    graph's edges with their relation ids, ``relation_of``: the union CSR's ``edge_type``).
    """
    from ._kernels import gather_row_counts  # numba: imported by the writer, not by readers

    num_parts = rl.num_parts
    s, e = int(rl.starts[p]), int(rl.starts[p + 1])
    ni = e - s
    inner = rl.order[s:e]
    halo_gid = rl.halos[p]
    nh = int(halo_gid.size)
    rows = np.concatenate([inner, rl.order[halo_gid]])  # original id of every local row
    pdir = part_dir_name(p)
    (tmp / pdir).mkdir()
    files: dict[str, FileEntry] = {}

    def save(name: str, arr: np.ndarray) -> None:
        files[name] = npyio.save_array(tmp, f"{pdir}/{name}", arr)

    in_degree, out_deg, self_loops = (np.empty(rows.size, rl.node_counts.dtype) for _ in range(3))
    gather_row_counts(plain(graph.indptr), rows, rl.node_counts, local_of, in_degree, out_deg, self_loops)
    indptr = np.zeros(ni + 1, dtype=np.int64)
    np.cumsum(in_degree[:ni], out=indptr[1:])
    save(INDPTR, indptr)
    num_local_edges = int(indptr[-1])
    del indptr
    files.update(_write_part_edges(graph, tmp, pdir, inner, in_degree[:ni], local_of,
                                   num_local_edges, local_index_dtype(ni + nh), rows, digest, relation_of))
    local_of[rows] = -1

    save(HALO_OFFSETS, halo_offsets_all[p])
    # rows part q holds from p, in q's halo order (ascending global id); local id = gid - s
    sends = [rl.halos[q][halo_offsets_all[q, p]:halo_offsets_all[q, p + 1]].astype(np.int64) - s
             for q in range(num_parts)]
    send_offsets = np.zeros(num_parts + 1, dtype=np.int64)
    np.cumsum([x.size for x in sends], out=send_offsets[1:])
    save(SEND_INDEX, np.concatenate(sends) if sends else np.zeros(0, np.int64))
    save(SEND_OFFSETS, send_offsets)
    del sends

    save(GLOBAL_IDS, np.concatenate([np.arange(s, e, dtype=np.int64), halo_gid.astype(np.int64)]))
    save(ORIGINAL_IDS, rows.astype(np.int64, copy=False))
    for name, counts in ((IN_DEGREE, in_degree), (OUT_DEGREE, out_deg), (SELF_LOOPS, self_loops)):
        save(name, counts.astype(np.int64))
    del in_degree, out_deg, self_loops
    if weighted_degree is not None:
        save(WEIGHTED_DEGREE, weighted_degree[rows])
    save(HOTNESS, rl.hotness[inner].astype(np.int64))
    node_data = [(FEATURES, graph.x), (LABELS, graph.y)]
    node_data += [(name, getattr(graph, name.removesuffix(".npy"))) for name in MASKS]
    num_train = 0
    for name, data in node_data:
        if data is None:
            continue
        with _stream(tmp, pdir, name, data.dtype, (ni, *data.shape[1:])) as out:
            step = rows_per_step(data, NODE_DATA_STEP_BYTES)
            for lo in range(0, ni, step):
                chunk = np.take(data, inner[lo:lo + step], axis=0)  # 3x data[idx]
                out.write(chunk)
                digest.add_rows(name, inner[lo:lo + step], chunk)
                if name == MASKS[0]:
                    num_train += int(np.count_nonzero(chunk))
        files[name] = out.entry  # type: ignore[assignment]
    return {"part_id": p, "num_inner": ni, "num_halo": nh, "num_local_edges": num_local_edges,
            "global_id_range": [s, e], "num_train": num_train,
            "files": {name: entry.to_json() for name, entry in files.items()}}


def _stream(tmp: Path, pdir: str, name: str, dtype: Any, shape: tuple[int, ...]) -> npyio.ArrayStream:
    return npyio.ArrayStream(tmp, f"{pdir}/{name}", dtype, shape)


def _write_part_edges(graph: Graph, tmp: Path, pdir: str, inner: np.ndarray, in_degree: np.ndarray,
                      local_of: np.ndarray, num_edges: int, index_dtype: Any, rows: np.ndarray,
                      digest: GraphDigest, relation_of: np.ndarray | None) -> dict[str, FileEntry]:
    """Stream the in-edges of a part's ``inner`` rows (in-degrees ``in_degree``) into its
    ``indices.npy`` (local ids by ``local_of``; ``rows`` maps them back to original ids for
    ``digest``, with the edges' relation ids in ``relation_of``, a typed graph's ``edge_type`` in
    the union CSR's order, when given) and, when the graph has them, ``edge_weight.npy`` and
    ``edge_attr.npy``, in node chunks of about :data:`~.relabel.CHUNK_EDGES` edges; return their
    entries."""
    from ._kernels import gather_edge_rows, gather_part_edges  # numba: imported by the writer, not by readers

    def stream(name: str, dtype: Any, shape: tuple[int, ...]) -> npyio.ArrayStream:
        return _stream(tmp, pdir, name, dtype, shape)

    weighted = graph.edge_weight is not None
    attr_dim = graph.edge_feature_dim
    indptr_all, indices_all = plain(graph.indptr), plain(graph.indices)
    weights_all = plain(graph.edge_weight) if weighted else np.zeros(0, np.float32)
    attrs_all = plain(graph.edge_attr) if attr_dim else None
    with ExitStack() as stack:
        out_idx = stack.enter_context(stream(INDICES, index_dtype, (num_edges,)))
        out_w = stack.enter_context(stream(EDGE_WEIGHT, np.float32, (num_edges,))) if weighted else None
        out_a = stack.enter_context(stream(EDGE_ATTR, np.float32, (num_edges, attr_dim))) if attr_dim else None
        for lo, hi in node_chunks(in_degree):
            nodes = inner[lo:hi]
            count = int(in_degree[lo:hi].sum())
            indices = np.empty(count, dtype=index_dtype)
            weights = np.empty(count if weighted else 0, dtype=np.float32)
            done = gather_part_edges(indptr_all, indices_all, nodes, local_of, indices,
                                     weights_all, weights, weighted)
            assert done == count, "an edge source is neither inner nor halo"
            out_idx.write(indices)
            if out_w is not None:
                out_w.write(weights)
            attrs = None
            if out_a is not None:
                attrs = np.empty((count, attr_dim), dtype=np.float32)
                gather_edge_rows(indptr_all, nodes, attrs_all, attrs)
                out_a.write(attrs)
            relation = None if relation_of is None else np.asarray(relation_of[edge_positions(indptr_all, nodes)])
            digest.add_edges(np.repeat(nodes, in_degree[lo:hi]), rows[indices], weights if weighted else None, attrs,
                             relation)
    files = {INDICES: out_idx.entry}
    if out_w is not None:
        files[EDGE_WEIGHT] = out_w.entry
    if out_a is not None:
        files[EDGE_ATTR] = out_a.entry
    return files  # type: ignore[return-value]


def _meta_document(graph: Graph, num_parts: int, *, method: str, method_params: dict[str, Any],
                   seed: int | None, extra: dict[str, Any]) -> dict[str, Any]:
    """The keys of ``partition.json`` that describe the graph and the method, then ``extra``
    (``quality``, ``files`` and ``parts`` are the caller's to add, in that order)."""
    from .. import __version__

    meta: dict[str, Any] = {
        "format": FORMAT_NAME, "version": FORMAT_VERSION, "minor_version": FORMAT_MINOR_VERSION,
        "created_by": {"tool": TOOL_NAME, "version": __version__},
        "num_parts": num_parts, "num_nodes": graph.num_nodes, "num_edges": graph.num_edges,
        "method": method, "method_params": method_params, "seed": seed,
        "directed": not graph.symmetric,
        "symmetrized": "symmetrize_added" in graph.preprocessing,
        "preprocessing": _jsonable(dict(graph.preprocessing)),
        "feature_dim": graph.feature_dim,
        "feature_dtype": None if graph.x is None else graph.x.dtype.name,
        "num_classes": int(graph.num_classes) if graph.y is not None else 0,
        "label_kind": graph.label_kind,
        "weighted": graph.edge_weight is not None, "edge_feature_dim": graph.edge_feature_dim,
        "name": graph.name,
    }
    meta.update(_jsonable(extra))
    return meta


def _write_meta_file(tmp: Path, meta: dict[str, Any]) -> None:
    """Write ``tmp/partition.json`` (strict JSON, one space indent) and fsync it and ``tmp``."""
    with open(tmp / META_FILE, "w", encoding="utf-8") as f:
        f.write(json.dumps(meta, indent=1, allow_nan=False) + "\n")
        f.flush()
        if npyio.FSYNC:
            os.fsync(f.fileno())
    _fsync_dir(tmp)


def weighted_degree(graph: Graph) -> np.ndarray | None:
    """float32 ``[N, 2]`` (:data:`~.layout.WEIGHTED_DEGREE`) of a weighted graph, None unweighted:
    one pass over the CSR (memory-mapped or not)."""
    if graph.edge_weight is None:
        return None
    from ._kernels import weighted_in_degree

    out = np.empty((graph.num_nodes, 2), dtype=np.float32)
    weighted_in_degree(plain(graph.indptr), plain(graph.indices), plain(graph.edge_weight), 0, graph.num_nodes, out)
    return out


def _split_pairs(graph: Graph, hetero: HeteroFolderData | None) -> tuple[Any, Any]:
    """``(pairs, relations)`` of the edge split: ``graph.link_pairs`` (no relations), or a typed
    split's triples (``hetero.link_pairs``, ``hetero.link_relations``); ``(None, None)`` without."""
    if hetero is not None and hetero.link_pairs is not None:
        return hetero.link_pairs, hetero.link_relations
    return graph.link_pairs, None


def _split_files(pairs: Any, relations: Any, rl: Relabeling, digest: GraphDigest) -> Any:
    """Each part's edge-split files (None without a split), the pairs added to ``digest``."""
    if pairs is None:
        return None
    add_link_digest(digest, pairs, relations)
    return link_part_arrays(pairs, relations, rl.node_map, rl.starts)


def _checked_request(graph: Graph, assignment: Any, num_parts: int, method: str, extra_meta: dict[str, Any] | None,
                     link_pairs: dict[str, np.ndarray] | None) -> tuple[np.ndarray, int, dict[str, Any]]:
    """:func:`write_partition`'s arguments checked: the assignment as int32/int64, ``num_parts``
    as an int, the extra partition.json keys (none of the reserved ones)."""
    if not isinstance(graph, Graph):
        raise TypeError(f"write_partition expects a partitioners.Graph, got {type(graph).__name__}")
    a = check_assignment(assignment, graph.num_nodes, num_parts)
    a = a.astype(np.int32 if num_parts < 2**31 else np.int64, copy=False)
    if not isinstance(method, str) or not method:
        raise ValueError(f"method must be a non-empty string naming how the assignment was made, got {method!r}")
    extra = dict(extra_meta or {})
    clash = sorted(set(extra) & _RESERVED_KEYS)
    if clash:
        raise ValueError(f"extra_meta may not set {clash}: the writer records those from the data")
    if link_pairs is not None:
        counts = {kind: int(pairs.shape[1]) for kind, pairs in link_pairs.items()}
        if (extra.get("edge_split") or {}).get("counts") != counts:
            raise ValueError(f"a graph with link_pairs needs extra_meta['edge_split'], the record of its "
                             f"split with counts {counts} (partitioners.io.edge_split.with_edge_split)")
    elif "edge_split" in extra:
        raise ValueError("extra_meta['edge_split'] describes an edge split, but the graph has no link_pairs")
    return a, int(num_parts), extra


def _quality(graph: Graph, assignment: np.ndarray, num_parts: int, rl: Relabeling, given: dict[str, Any] | None,
             stage_times: dict[str, float], method_params: dict[str, Any]) -> dict[str, Any]:
    """The quality report: ``given``, or computed from the relabelling's halos and cut (which the
    writer finds anyway; balances against ``method_params["part_weights"]`` when recorded), its
    time recorded as ``stage_times["quality"]``."""
    if given is not None:
        return given
    t_quality = time.perf_counter()
    halo = np.array([h.size for h in rl.halos], dtype=np.int64)
    send = sum((np.diff(np.searchsorted(h, rl.starts)) for h in rl.halos),
               np.zeros(num_parts, dtype=np.int64))  # a halo list is grouped by owner part
    fractions = method_params.get("part_weights")
    quality = _jsonable(quality_report(graph, assignment, num_parts, rl.edge_cut, halo, send,
                                       tuple(fractions) if fractions else None))
    stage_times["quality"] = round(time.perf_counter() - t_quality, 6)
    return quality


def _write_parts(graph: Graph, rl: Relabeling, num_parts: int, tmp: Path, links: Any, hetero: HeteroFolderData | None,
                 progress: bool, digest: GraphDigest) -> tuple[list[dict[str, Any]], list[list[int]]]:
    """Write every part's folder into ``tmp`` (its arrays, its link pairs, its typed arrays);
    returns the parts' entries of partition.json and, for a typed graph, each part's count of
    inner nodes per node type."""
    halo_offsets_all = np.stack([np.searchsorted(h, rl.starts) for h in rl.halos]).astype(np.int64)
    wdeg = weighted_degree(graph)
    local_of = np.full(graph.num_nodes, -1, dtype=local_index_dtype(graph.num_nodes))
    parts = []
    type_counts = []
    with npyio.background_io():  # hashing, writing and fsync overlap the next gathers
        for p in tqdm(range(num_parts), desc="write parts", unit="part", disable=not progress):
            parts.append(_write_part(graph, rl, p, tmp, halo_offsets_all, local_of, wdeg, digest,
                                     None if hetero is None else hetero.edge_type))
            for name, pairs in (links[p] if links else {}).items():
                entry = npyio.save_array(tmp, f"{part_dir_name(p)}/{name}", pairs)
                parts[p]["files"][name] = entry.to_json()
            if hetero is not None:
                type_counts.append(_write_typed(graph, rl, p, tmp, hetero, parts[p]["files"], digest))
    return parts, type_counts


def _write_typed(graph: Graph, rl: Relabeling, p: int, tmp: Path, hetero: HeteroFolderData,
                 files: dict[str, Any], digest: GraphDigest) -> list[int]:
    """Write part ``p``'s typed arrays (:func:`hetero_part_arrays`), recording them in ``files``
    and their per-type rows in ``digest``; returns its count of inner nodes per node type."""
    inner = rl.order[rl.starts[p]:rl.starts[p + 1]].astype(np.int64)
    typed = hetero_part_arrays(hetero, plain(graph.indptr), inner, rl.order[rl.halos[p]].astype(np.int64))
    for name, arr in typed.items():
        files[name] = npyio.save_array(tmp, f"{part_dir_name(p)}/{name}", arr).to_json()
    add_type_rows_digest(digest, hetero.section, inner, typed[NODE_TYPE][:inner.size], typed)
    return np.bincount(typed[NODE_TYPE][:inner.size], minlength=len(hetero.section["node_types"])).tolist()


def _record_times(quality: dict[str, Any], stage_times: dict[str, float], t0: float) -> None:
    """Record the stage times (the caller's, the report's own, then the write's) and the peak RSS
    in ``quality``."""
    times = {**stage_times, **dict(quality.get("time_s") or {})}
    times["write"] = round(time.perf_counter() - t0 - stage_times.get("quality", 0.0), 6)
    quality["time_s"] = times
    quality["peak_rss_bytes"] = max(int(quality.get("peak_rss_bytes") or 0), peak_rss_bytes())


def write_partition(graph: Graph, assignment: Any, num_parts: int, out_dir: str | os.PathLike[str], *,
                    method: str, method_params: dict[str, Any] | None, seed: int | None,
                    quality: dict[str, Any] | None = None, overwrite: bool = False,
                    progress: bool = False, extra_meta: dict[str, Any] | None = None,
                    time_s: dict[str, float] | None = None,
                    hetero: HeteroFolderData | None = None) -> dict[str, Any]:
    """Write ``graph`` split by ``assignment`` (part id per node, int ``[N]``) to ``out_dir``.

    Args:
        graph: the graph (CSR by destination) with its optional node data.
        assignment: int ``[N]`` in ``[0, num_parts)``; parts may be empty.
        num_parts: ``P``.
        out_dir: the partition folder to create (see :func:`check_out_dir` for an existing one).
        method, method_params, seed: how ``assignment`` was made (recorded in partition.json).
        quality: the quality report to record; None computes it (the same report as
            :func:`partitioners.quality.partition_quality`) from the writer's own pass over
            the edges, which finds the halos and the cut anyway. The writer adds
            ``time_s.write`` (and ``time_s.quality`` when it computed the report) and
            ``peak_rss_bytes``.
        overwrite: replace an existing partition folder.
        progress: tqdm bars, one step per part.
        extra_meta: more top-level keys for partition.json (not the ones describing the data).
        time_s: the caller's stage times (``read``, ``partition``), recorded first in
            ``quality.time_s``.
        hetero: ``graph`` is the union graph of a typed graph: also write each part's
            ``node_type.npy``, ``edge_type.npy`` and ``in_degree_rel.npy`` and the ``hetero``
            section, with minor version 3 (:mod:`.hetero`). None (the default) writes exactly
            the homogeneous folder.

    Returns:
        The content of ``partition.json``.

    Raises:
        FileExistsError: ``out_dir`` exists and may not be replaced.
        ValueError: bad ``assignment``/``num_parts``/``extra_meta``.
    """
    t0 = time.perf_counter()
    link_pairs, link_rels = _split_pairs(graph, hetero)
    a, num_parts, extra = _checked_request(graph, assignment, num_parts, method, extra_meta, link_pairs)
    out = check_out_dir(out_dir, overwrite)
    given = None if quality is None else _jsonable(dict(quality))
    stage_times = dict(time_s or {})
    method_params = _jsonable(dict(method_params or {}))

    with staging_dir(out) as tmp:
        rl = relabel(graph, a, num_parts, progress=progress)
        quality = _quality(graph, a, num_parts, rl, given, stage_times, method_params)
        del a
        top_files = {NODE_MAP_FILE: npyio.save_array(tmp, NODE_MAP_FILE, rl.node_map).to_json()}
        digest = GraphDigest(scheme_1=hetero is not None)   # a typed graph's scheme-1 digest too
        links = _split_files(link_pairs, link_rels, rl, digest)
        rl.node_map = np.zeros(0, dtype=np.int64)  # not needed any more
        if graph.node_names is not None:
            top_files[ORIGINAL_NAMES_FILE] = npyio.save_array(tmp, ORIGINAL_NAMES_FILE,
                                                              graph.node_names).to_json()
        parts, type_counts = _write_parts(graph, rl, num_parts, tmp, links, hetero, progress, digest)
        del rl, links
        _fsync_dir(tmp)

        _record_times(quality, stage_times, t0)
        meta = _meta_document(graph, num_parts, method=method, method_params=method_params,
                              seed=seed, extra=extra)
        if hetero is not None:
            meta["minor_version"] = HETERO_MINOR_VERSION if link_rels is None else TYPED_SPLIT_MINOR_VERSION
            meta["hetero"] = _jsonable({**hetero.section, "part_type_counts": type_counts})
            meta[SCHEME_FIELD] = TYPED_SCHEME
        header = graph_header(meta, graph.node_names)
        meta["graph_fingerprint"] = digest.hexdigest(header)
        if digest.scheme_1 is not None:
            meta[SCHEME_1_FIELD] = digest.scheme_1.hexdigest(header)
        meta.update(quality=quality, files=top_files, parts=parts)
        _write_meta_file(tmp, meta)
        _install(tmp, out, overwrite)
    log.info("wrote %s: %d parts, %d nodes, %d edges in %.2fs", out, num_parts, graph.num_nodes,
             graph.num_edges, time.perf_counter() - t0)
    return meta
