"""A typed npy-dir read out of core: its union graph built in scratch memory maps, chunk by chunk.

:func:`read_typed_npy_dir_on_disk` opens the folder as :func:`~.npy_dir.open_typed_npy_dir` does
(every ``.npy`` a checked memory map) and builds what :meth:`HeteroGraph.to_union` builds in
memory, never holding an ``[E]``, ``[N]`` or ``[N, F]`` array whole:

* the union CSR by destination: each relation's ``src``/``dst`` offset by its types' id ranges
  (then, with ``add_reverse``, each relation's ``rev_NAME`` reversed) streamed through
  :func:`~partitioners.outofcore.csr_build.build_csr_on_disk` in a counting and a fill pass, the
  relation id carried as each edge's payload; the stable sort by source keeps a row's edges of
  one source in relation order, as ``to_union``'s ``lexsort`` does, so the arrays are equal;
* ``edge_type`` (int32 ``[E]``), ``node_type`` (int32 ``[N]``), ``in_degree_rel`` (int64
  ``[N, R]``, counted a row range at a time) and the target type's masks (bool ``[N]``) as
  scratch maps; per-type features converted to float32 (or kept, float32/float16) and labels
  to int64 in scratch maps, checked chunk by chunk.

The result is a :class:`DiskHeteroGraph`: a :class:`HeteroGraph` whose arrays are memory maps
and whose :meth:`~DiskHeteroGraph.to_union` returns the union built here, so
:func:`partitioners.hetero.partition.partition_hetero` partitions and writes it unchanged (the
methods, quality report and writer read a memory-mapped ``Graph`` chunk by chunk). Memory
besides the maps: the CSR build's (:func:`~partitioners.outofcore.csr_build.build_memory`), one
chunk, and the masks of the input as ``mask_from_array`` gives them. Torch-free.
"""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Any, Iterator

import numpy as np

from ..chunks import row_ranges
from ..errors import GraphError
from ..graph import Graph
from ..outofcore import npy_dir as _chunking
from ..outofcore.csr_build import build_csr_on_disk
from ..outofcore.npy_dir import _converted, _row_chunks
from ..outofcore.scratch import Scratch
from .graph import REVERSE_PREFIX, HeteroGraph, Relation, UnionGraph
from .npy_dir import TypedNpyDir, open_typed_npy_dir

__all__ = ["DiskHeteroGraph", "disk_sizes", "read_typed_npy_dir_on_disk"]


class DiskHeteroGraph(HeteroGraph):
    """A :class:`HeteroGraph` of memory maps with its union graph built on disk (module docstring).
    Built by :func:`read_typed_npy_dir_on_disk` only (its arrays are checked there, chunk by chunk)."""

    def __init__(self, d: TypedNpyDir, edges: dict[Relation, tuple[np.ndarray, np.ndarray]],
                 features: dict[str, np.ndarray], labels: dict[str, np.ndarray], target: str | None,
                 num_classes: int, union: UnionGraph, name: str) -> None:  # no super(): nothing read whole
        self.name = name
        self.num_nodes_dict = dict(d.counts)
        self.edges = edges
        self.edge_weights: dict[Relation, np.ndarray] = {}
        self.features, self.labels = features, labels
        self.masks = {t: dict(m) for t, m in d.masks.items() if t == target}
        self.target_type, self.num_classes = target, num_classes
        self.type_names: dict[str, np.ndarray] = {}
        self.relation_names: dict[str, str] = {}
        self.preprocessing: dict[str, int] = {}
        self._union = union

    @property
    def scratch_dir(self) -> Any:  # type: ignore[override]
        return self._union.graph.scratch_dir

    def to_union(self) -> UnionGraph:
        """The union graph built on disk (equal to what :meth:`HeteroGraph.to_union` builds)."""
        return self._union

    def with_target(self, target_type: str) -> "HeteroGraph":
        raise GraphError("the target type of a typed npy-dir read out of core is chosen when it is read "
                         "(read_typed_npy_dir_on_disk(..., target_type=...))")


def _relations(d: TypedNpyDir, add_reverse: bool) -> dict[Relation, tuple[np.ndarray, np.ndarray]]:
    """The relations and their (memory-mapped) id arrays, each ``rev_NAME`` after them (as
    :meth:`HeteroGraph.add_reverse` orders them)."""
    edges = dict(d.edges)
    if add_reverse:
        for (s, name, t), (src, dst) in d.edges.items():
            rev = (t, REVERSE_PREFIX + name, s)
            if rev in edges or any(r[1] == rev[1] for r in edges):
                raise GraphError(f"{d.root}: add_reverse: relation name {rev[1]!r} is already used")
            edges[rev] = (dst, src)
    return edges


def _target(d: TypedNpyDir, target_type: str | None) -> str | None:
    target = target_type if target_type is not None else d.target
    labelled = sorted(d.field("labels"))
    if target is None and len(labelled) == 1:
        target = labelled[0]
    if target is not None and target not in d.counts:
        raise GraphError(f"{d.root}: target type {target!r} is not one of the types {list(d.counts)}")
    if target is not None and target not in labelled:
        raise GraphError(f"{d.root}: target type {target!r} has no labels (labelled types: {labelled or 'none'})")
    for t, m in d.masks.items():
        if t != target and m:
            raise GraphError(f"{d.root / t}: node type {t!r} has masks but is not the target type ({target!r}); "
                             f"masks belong to the labelled target type")
    return target


def _features(d: TypedNpyDir, scratch: Scratch) -> dict[str, np.ndarray]:
    """Each type's features, float32 (float16 kept) in a scratch map where converted, every
    value checked finite a chunk at a time."""
    out = {}
    for t, x in d.field("features").items():
        if not (np.issubdtype(x.dtype, np.number) or x.dtype == np.bool_) or np.iscomplexobj(x):
            raise GraphError(f"{d.root / t / 'features.npy'}: features must be numeric, got dtype {x.dtype}")
        x = x if x.dtype in (np.float32, np.float16) else _converted(x, np.float32, scratch, f"features-{t}")
        for lo, rows in _row_chunks(x):
            bad = np.argwhere(~np.isfinite(rows))
            if bad.size:
                r, c = (int(v) for v in bad[0])
                raise GraphError(f"{d.root / t / 'features.npy'}: features[{lo + r}, {c}] = {rows[r, c]} "
                                 f"is not finite (NaN or inf)")
        out[t] = x
    return out


def _labels(d: TypedNpyDir, target: str | None, scratch: Scratch) -> tuple[dict[str, np.ndarray], int]:
    """Each type's labels as int64 (a scratch map where converted) and the target's class count."""
    out, classes = {}, 0
    for t, y in d.field("labels").items():
        path = d.root / t / "labels.npy"
        if y.dtype.kind not in "iu":
            raise GraphError(f"{path}: labels must be int class ids, got dtype {y.dtype}")
        lo_hi = [(int(rows.min()), int(rows.max())) for _, rows in _row_chunks(y) if rows.size]
        if lo_hi and min(lo for lo, _ in lo_hi) < 0:
            raise GraphError(f"{path}: label {min(lo for lo, _ in lo_hi)} is negative; class ids are >= 0")
        out[t] = _converted(y, np.int64, scratch, f"labels-{t}")
        if t == target:
            found = max((hi for _, hi in lo_hi), default=-1) + 1
            if d.classes is not None and found > d.classes:
                raise GraphError(f"{path}: label {found - 1} is out of range for num_classes = {d.classes}")
            classes = d.classes if d.classes is not None else found
    return out, classes


def _edge_chunks(edges: dict[Relation, tuple[np.ndarray, np.ndarray]], offsets: dict[str, int]) -> Any:
    """The union's edges, relation after relation, a chunk at a time: ids offset by their
    types' ranges, the relation id as each edge's payload."""
    def chunks() -> Iterator[tuple[np.ndarray, np.ndarray, np.ndarray]]:
        step = _chunking.CHUNK_EDGES
        for r, ((s, _, t), (src, dst)) in enumerate(edges.items()):
            for lo in range(0, src.shape[0], step):
                a = np.asarray(src[lo:lo + step], dtype=np.int64) + offsets[s]
                b = np.asarray(dst[lo:lo + step], dtype=np.int64) + offsets[t]
                yield a, b, np.full(a.size, r, dtype=np.int64)
    return chunks


def _in_degree_rel(indptr: np.ndarray, edge_type: np.ndarray, num_rel: int, scratch: Scratch) -> np.ndarray:
    """int64 ``[N, R]``: every row's in-edges per relation, a row range of the CSR at a time."""
    n = indptr.shape[0] - 1
    out = scratch.array("in-degree-rel", np.int64, (n, num_rel))
    step = _chunking.CHUNK_EDGES
    ranges = ((a, min(hi, a + step)) for lo, hi in row_ranges(indptr, step) for a in range(lo, hi, step))
    for lo, hi in ranges:  # at most ``step`` entries and ``step`` rows (empty rows count too)
        a, b = int(indptr[lo]), int(indptr[hi])
        rows = np.repeat(np.arange(hi - lo, dtype=np.int64), np.diff(np.asarray(indptr[lo:hi + 1])))
        keys = rows * num_rel + np.asarray(edge_type[a:b], dtype=np.int64)
        out[lo:hi] = np.bincount(keys, minlength=(hi - lo) * num_rel).reshape(hi - lo, num_rel)
    return scratch.freeze(out)


def _node_arrays(d: TypedNpyDir, target: str | None, off: np.ndarray, scratch: Scratch,
                 ) -> tuple[np.ndarray, dict[str, np.ndarray]]:
    """``node_type`` int32 ``[N]`` and the target type's masks as union-wide bool ``[N]`` maps."""
    n = int(off[-1])
    node_type = scratch.array("node-type", np.int32, n)
    for i in range(len(off) - 1):
        node_type[off[i]:off[i + 1]] = i
    masks = {}
    if target is not None:
        i = list(d.counts).index(target)
        for k, m in d.masks.get(target, {}).items():
            full = scratch.array(f"{k}-mask", np.bool_, n)
            full[off[i]:off[i + 1]] = m
            masks[f"{k}_mask"] = scratch.freeze(full)
    return scratch.freeze(node_type), masks


def _build(d: TypedNpyDir, add_reverse: bool, target_type: str | None, scratch: Scratch, progress: bool,
           name: str) -> DiskHeteroGraph:
    target = _target(d, target_type)
    edges = _relations(d, add_reverse)
    features = _features(d, scratch)
    labels, classes = _labels(d, target, scratch)
    off = np.concatenate([[0], np.cumsum(list(d.counts.values()))]).astype(np.int64)
    n = int(off[-1])
    offsets = {t: int(off[i]) for i, t in enumerate(d.counts)}
    total = sum(int(src.shape[0]) for src, _ in edges.values())
    csr = build_csr_on_disk(_edge_chunks(edges, offsets), n, scratch, weighted=True, payload_dtype=np.int64,
                            names=("src.npy (union ids)", "dst.npy (union ids)"), max_entries=total,
                            progress=progress)
    assert csr.edge_weight is not None
    edge_type = _converted(csr.edge_weight, np.int32, scratch, "edge-type")
    in_deg = _in_degree_rel(csr.indptr, edge_type, len(edges), scratch)
    node_type, masks = _node_arrays(d, target, off, scratch)
    graph = Graph(indptr=csr.indptr, indices=csr.indices, name=name, scratch_dir=scratch.path, **masks)
    union = UnionGraph(graph=graph, node_type=node_type, edge_type=edge_type, type_offsets=off,
                       in_degree_rel=in_deg)
    return DiskHeteroGraph(d, edges, features, labels, target, classes, union, name)


def disk_sizes(d: TypedNpyDir, *, add_reverse: bool = False) -> Any:
    """The :class:`~partitioners.memory.GraphSize` of the union graph this folder gives, from its
    headers (no pass over the data): read out of core (``on_disk``), the widest type's feature
    row as float32 (float16 kept), class ids, the target type's masks, the typed balance's
    criteria (a type each and the training nodes)."""
    from ..graph_csr import index_dtype
    from ..memory import GraphSize

    n = sum(d.counts.values())
    edges = sum(int(src.shape[0]) for src, _ in d.edges.values()) * (2 if add_reverse else 1)
    widths = [(2 if x.dtype == np.float16 else 4) * int(np.prod(x.shape[1:], dtype=np.int64))
              for x in d.field("features").values()]
    return GraphSize(num_nodes=n, num_edges=edges, feature_bytes=max(widths, default=0),
                     label_bytes=8 if d.field("labels") else 0, num_masks=max(map(len, d.masks.values()), default=0),
                     index_bytes=np.dtype(index_dtype(n)).itemsize, on_disk=True, typed_criteria=len(d.counts) + 1,
                     num_relations=len(d.edges) * (2 if add_reverse else 1))


def read_typed_npy_dir_on_disk(root: str | Path | TypedNpyDir, *, add_reverse: bool = False,
                               target_type: str | None = None, scratch_dir: str | Path | None = None,
                               progress: bool = False, name: str = "") -> DiskHeteroGraph:
    """The typed npy-dir ``root`` (or opened by :func:`~.npy_dir.open_typed_npy_dir`) as a
    :class:`DiskHeteroGraph` (module docstring), its union graph built in a
    :class:`~partitioners.outofcore.scratch.Scratch` folder inside ``scratch_dir`` (default: the
    system's temporary folder), removed when the graph is garbage-collected. ``add_reverse`` and
    ``target_type`` as :func:`~.readers.read_hetero`'s.

    Raises:
        GraphError: a malformed file, one line naming it.
    """
    d = root if isinstance(root, TypedNpyDir) else open_typed_npy_dir(root)
    scratch = Scratch(scratch_dir if scratch_dir is not None else tempfile.gettempdir())
    try:
        graph = _build(d, add_reverse, target_type, scratch, progress, name or d.root.name)
    except GraphError as exc:
        scratch.close()
        msg = str(exc)
        raise GraphError(msg if msg.startswith(str(d.root)) else f"{d.root}: {msg}") from None
    except BaseException:
        scratch.close()
        raise
    scratch.keep_until_collected(graph)
    return graph
