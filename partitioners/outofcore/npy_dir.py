"""Read an **npy-dir** (``docs/format.md``, "Input: npy-dir") out of core.

The folder's arrays are opened as read-only memory maps and never loaded whole: the CSR is built
on disk by :func:`~.csr_build.build_csr_on_disk` from chunks of ``src.npy``/``dst.npy``, and the
node data stays mapped where its dtype is the one a :class:`~partitioners.graph.Graph` holds
(else it is converted chunk by chunk into a scratch map: float64 features to float32, int32
labels to int64, float64 regression targets to float32; 0/1 integer masks become bool in memory, a byte per node). The result is a Graph whose arrays are memory maps and whose
:attr:`~partitioners.graph.Graph.scratch_dir` names where later out-of-core stages (METIS's
adjacency) put their files.

Node data may also come from ``.npy`` files outside the folder (``node_data``: ``gnn-dist
partition --input DIR --features F.npy ...``): memory-mapped and converted the same way, one
row per node of the folder (``graph.json``'s ``num_nodes``), masks as the flags take them (bool
``[N]``, or integer node ids); a field the folder has too is refused. Duplicate edges are kept
unless ``remove_duplicates`` and counted in one warning line, as the in-memory readers do.
This module is torch-free.
"""

from __future__ import annotations

import dataclasses
import json
import logging
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterator

import numpy as np
from tqdm.auto import tqdm

from ..chunks import rows_per_step
from ..errors import GraphError
from ..graph import Graph
from ..graph_checks import LABEL_KINDS
from ..graph_csr import MAX_NODES
from .csr_build import EdgeChunk, build_csr_on_disk
from .scratch import Scratch

__all__ = ["NpyDir", "is_npy_dir", "open_npy_dir", "read_npy_dir", "CHUNK_EDGES", "CHUNK_BYTES"]

log = logging.getLogger(__name__)

CHUNK_EDGES = 1 << 22
"""Edges per chunk read from ``src.npy``/``dst.npy``."""
CHUNK_BYTES = 64 << 20
"""Bytes of node data per chunk of the streaming checks and conversions."""

EDGE_FILES = ("src.npy", "dst.npy")
NODE_FILES = ("features.npy", "labels.npy", "train_mask.npy", "val_mask.npy", "test_mask.npy")
META_FILE = "graph.json"
EDGE_ATTR_FILE = "edge_attr.npy"
KNOWN_FILES = frozenset((*EDGE_FILES, *NODE_FILES, "edge_weight.npy", EDGE_ATTR_FILE, META_FILE))
_META_KEYS = frozenset({"num_nodes", "num_classes", "name", "source", "label_kind"})


def is_npy_dir(path: str | Path) -> bool:
    """True for a folder holding ``src.npy`` and ``dst.npy``."""
    p = Path(path)
    return p.is_dir() and all((p / f).is_file() for f in EDGE_FILES)


def _open(path: Path) -> np.ndarray:
    try:
        a = np.load(path, mmap_mode="r", allow_pickle=False)
    except (ValueError, OSError, EOFError) as exc:
        raise GraphError(f"{path}: not a readable .npy array ({exc}); npy-dir files are plain "
                         f"numpy arrays (numpy.save, no objects)") from None
    if not isinstance(a, np.ndarray):
        raise GraphError(f"{path}: not a single .npy array")
    if a.dtype.hasobject:
        raise GraphError(f"{path}: dtype {a.dtype} holds Python objects; store plain numbers")
    if a.ndim > 1 and not a.flags.c_contiguous:
        raise GraphError(f"{path}: stored in Fortran order; save it in C order "
                         f"(numpy.save(path, numpy.ascontiguousarray(a)))")
    return a


def _row_chunks(a: np.ndarray) -> Iterator[tuple[int, np.ndarray]]:
    step = rows_per_step(a, CHUNK_BYTES)
    for lo in range(0, a.shape[0], step):
        yield lo, np.asarray(a[lo:lo + step])


@dataclass(eq=False)
class NpyDir:
    """The opened folder: its memory maps and ``graph.json``, before any pass over the edges."""

    path: Path
    src: np.ndarray
    dst: np.ndarray
    edge_weight: np.ndarray | None
    node_arrays: dict[str, np.ndarray]
    """Field (``features``, ``labels``, ``train_mask``, ...) -> its memory map."""
    meta: dict[str, Any]
    edge_attr: np.ndarray | None = None
    """``edge_attr.npy``'s map: numbers ``[E]`` or ``[E, D]``, in ``src``/``dst`` order."""
    _num_nodes: int | None = None

    @property
    def num_edges(self) -> int:
        return int(self.src.shape[0])

    def num_nodes(self) -> int:
        """``graph.json``'s ``num_nodes``, else the largest id + 1 (a pass over the edges) or the
        node data's row count when larger."""
        given = self.meta.get("num_nodes")
        if given is not None:
            return int(given)
        if self._num_nodes is not None:
            return self._num_nodes
        hi = -1
        for lo in range(0, self.num_edges, CHUNK_EDGES):
            for a in (self.src, self.dst):
                part = a[lo:lo + CHUNK_EDGES]
                if part.size:
                    hi = max(hi, int(part.max()))
        rows = [a.shape[0] for a in self.node_arrays.values()]
        self._num_nodes = max([hi + 1, *rows])
        return self._num_nodes

    def sizes(self, num_nodes: int, *, symmetric: bool = False) -> Any:
        """The :class:`~partitioners.memory.GraphSize` of the graph this folder gives."""
        from ..memory import GraphSize

        x, y = self.node_arrays.get("features"), self.node_arrays.get("labels")
        feature_bytes = 0
        if x is not None:
            width = int(np.prod(x.shape[1:], dtype=np.int64)) if x.ndim > 1 else 1
            feature_bytes = width * (2 if x.dtype == np.float16 else 4)
        label_bytes = 0 if y is None else (y.shape[1] if y.ndim == 2 and y.shape[1] > 1 else 8)
        if y is not None and np.issubdtype(y.dtype, np.floating):   # regression targets, float32 [N, D]
            label_bytes = 4 * (y.shape[1] if y.ndim == 2 else 1)
        masks = sum(m in self.node_arrays for m in ("train_mask", "val_mask", "test_mask"))
        # symmetrising adds at most one reverse per edge
        return GraphSize(num_nodes=num_nodes, num_edges=self.num_edges * (2 if symmetric else 1),
                         symmetric=symmetric,
                         feature_bytes=feature_bytes, label_bytes=label_bytes, num_masks=masks,
                         weighted=self.edge_weight is not None,
                         edge_attr_bytes=0 if self.edge_attr is None else 4 * _attr_width(self.edge_attr),
                         index_bytes=4 if num_nodes < 2**31 - 1 else 8, on_disk=True)


def open_npy_dir(path: str | Path) -> NpyDir:
    """Open the folder's arrays as memory maps and check their shapes and dtypes (no pass over
    the data). Raises GraphError naming the file and the fix."""
    p = Path(path)
    if not is_npy_dir(p):
        raise GraphError(f"{p}: an npy-dir holds src.npy and dst.npy (docs/format.md); "
                         f"make one with `gnn-dist convert`")
    src, dst = _open(p / "src.npy"), _open(p / "dst.npy")
    for name, a in (("src.npy", src), ("dst.npy", dst)):
        if a.ndim != 1 or not np.issubdtype(a.dtype, np.integer):
            raise GraphError(f"{p / name}: must be a 1-D integer array [E], got {a.dtype}{list(a.shape)}")
    if src.shape != dst.shape:
        raise GraphError(f"{p}: src.npy has {src.shape[0]} edges but dst.npy has {dst.shape[0]}; "
                         f"they must be the same length")
    weight = None
    if (p / "edge_weight.npy").is_file():
        weight = _open(p / "edge_weight.npy")
        if weight.shape != src.shape or not np.issubdtype(weight.dtype, np.number):
            raise GraphError(f"{p / 'edge_weight.npy'}: must be a numeric [E] array with E = "
                             f"{src.shape[0]}, got {weight.dtype}{list(weight.shape)}")
    attr = None
    if (p / EDGE_ATTR_FILE).is_file():
        attr = _open(p / EDGE_ATTR_FILE)
        if (attr.ndim not in (1, 2) or attr.shape[0] != src.shape[0] or _attr_width(attr) < 1
                or not np.issubdtype(attr.dtype, np.number) or np.issubdtype(attr.dtype, np.complexfloating)):
            raise GraphError(f"{p / EDGE_ATTR_FILE}: must be a real numeric [E, D] (or [E]) array with E = "
                             f"{src.shape[0]}, D >= 1, got {attr.dtype}{list(attr.shape)}")
    node_arrays = {f.removesuffix(".npy"): _open(p / f) for f in NODE_FILES if (p / f).is_file()}
    meta: dict[str, Any] = {}
    if (p / META_FILE).is_file():
        try:
            meta = json.loads((p / META_FILE).read_text(encoding="utf-8"))
        except (ValueError, UnicodeDecodeError) as exc:
            raise GraphError(f"{p / META_FILE}: not valid JSON ({exc})") from None
        if not isinstance(meta, dict):
            raise GraphError(f"{p / META_FILE}: must be a JSON object like {{\"num_nodes\": 100}}")
        for key in ("num_nodes", "num_classes"):
            v = meta.get(key)
            if v is not None and (not isinstance(v, int) or isinstance(v, bool) or v < 0):
                raise GraphError(f"{p / META_FILE}: {key!r} must be a non-negative integer, got {v!r}")
        kind = meta.get("label_kind")
        if kind is not None and kind not in LABEL_KINDS:
            raise GraphError(f"{p / META_FILE}: 'label_kind' must be one of {', '.join(LABEL_KINDS)}, got {kind!r}")
        unknown = sorted(set(meta) - _META_KEYS)
        if unknown:
            log.warning("%s: ignoring keys %s (known: %s)", p / META_FILE, unknown, sorted(_META_KEYS))
    extra = sorted(f.name for f in p.iterdir() if f.name not in KNOWN_FILES)
    if extra:
        log.warning("%s: ignoring %s (not part of the npy-dir layout, docs/format.md)", p, extra)
    return NpyDir(path=p, src=src, dst=dst, edge_weight=weight, node_arrays=node_arrays, meta=meta,
                  edge_attr=attr)


def _edge_chunks(d: NpyDir) -> Any:
    """The edge chunks of the CSR build: with edge features their payload is each edge's input
    position (int64), which the build keeps with its edge (:func:`_gather_edge_data` then reads
    the weights and feature rows by it), else the weights."""
    def chunks() -> Iterator[EdgeChunk]:
        for lo in range(0, d.num_edges, CHUNK_EDGES):
            w = None if d.edge_weight is None else np.asarray(d.edge_weight[lo:lo + CHUNK_EDGES])
            if w is not None and not np.isfinite(w).all():
                i = int(np.flatnonzero(~np.isfinite(w))[0])
                raise GraphError(f"{d.path / 'edge_weight.npy'}: edge_weight[{lo + i}] = {w[i]} is not finite")
            src, dst = np.asarray(d.src[lo:lo + CHUNK_EDGES]), np.asarray(d.dst[lo:lo + CHUNK_EDGES])
            if d.edge_attr is not None:
                w = np.arange(lo, lo + src.size, dtype=np.int64)
            yield src, dst, w
    return chunks


def _attr_width(a: np.ndarray) -> int:
    return 1 if a.ndim == 1 else int(a.shape[1])


def _check_edge_attr(d: NpyDir) -> None:
    """Every value of ``edge_attr.npy`` finite (one sequential pass; a GraphError names the first bad one)."""
    assert d.edge_attr is not None
    for lo, rows in _row_chunks(d.edge_attr):
        bad = ~np.isfinite(rows)
        if bad.any():
            at = np.argwhere(bad.reshape(rows.shape[0], -1))[0]
            raise GraphError(f"{d.path / EDGE_ATTR_FILE}: edge_attr[{lo + int(at[0])}, {int(at[1])}] = "
                             f"{rows.reshape(rows.shape[0], -1)[at[0], at[1]]} is not finite")


def _gather_edge_data(d: NpyDir, origin: np.ndarray, scratch: Scratch,
                      ) -> tuple[np.ndarray | None, np.ndarray]:
    """The weights (float32 ``[E']``, or None) and feature rows (float32 ``[E', D]``) of the
    stored edges, whose input positions are ``origin`` (CSR order), gathered chunk by chunk into
    scratch maps."""
    assert d.edge_attr is not None
    width = _attr_width(d.edge_attr)
    attr = scratch.array("edge-attr", np.float32, (origin.size, width))
    weight = None if d.edge_weight is None else scratch.array("edge-weight", np.float32, origin.size)
    step = max(1, CHUNK_BYTES // (4 * width + 8))
    for lo in range(0, origin.size, step):
        pos = np.asarray(origin[lo:lo + step])
        attr[lo:lo + pos.size] = np.asarray(d.edge_attr[pos]).reshape(pos.size, width)
        if weight is not None:
            weight[lo:lo + pos.size] = d.edge_weight[pos]  # type: ignore[index]
    return (None if weight is None else scratch.freeze(weight)), scratch.freeze(attr)


def _converted(a: np.ndarray, dtype: Any, scratch: Scratch, name: str) -> np.ndarray:
    """``a`` in ``dtype``: the map itself when it is, else a scratch map filled chunk by chunk."""
    if a.dtype == dtype:
        return a
    out = scratch.array(name, dtype, a.shape)
    for lo, rows in _row_chunks(a):
        out[lo:lo + rows.shape[0]] = rows
    return scratch.freeze(out)


def _given_node_data(d: NpyDir, node_data: Any) -> tuple[NpyDir, dict[str, str], dict[str, np.ndarray]]:
    """``d`` with the node arrays of ``node_data`` (a :class:`~partitioners.io.node_data.NodeDataFiles`)
    added as memory maps, how messages name each array, and the integer masks (node id lists,
    applied once the node count is known)."""
    from ..io.node_data import open_node_array

    sources = {field: str(d.path / f"{field}.npy") for field in d.node_arrays}
    if node_data is None or not node_data.paths:
        return d, sources, {}
    if node_data.node_ids is not None:
        raise GraphError(f"{node_data.what('node_ids')}: an npy-dir's nodes are its integer ids (row i is "
                         f"node i); node names apply to a relabelled edge list")
    arrays, id_masks = dict(d.node_arrays), {}
    for field, path in node_data.paths.items():
        what = node_data.what(field)
        if field in d.node_arrays:
            raise GraphError(f"{what}: the npy-dir already has {field}.npy; give the array once")
        a = open_node_array(what, path)
        if field.endswith("_mask") and a.dtype != np.bool_:
            id_masks[field] = a  # node ids (or refused as ambiguous), no row per node
        else:
            arrays[field] = a
        sources[field] = what
    return dataclasses.replace(d, node_arrays=arrays, _num_nodes=None), sources, id_masks


def _node_data(d: NpyDir, n: int, scratch: Scratch, sources: dict[str, str] | None = None,
               ) -> dict[str, np.ndarray]:
    """The node arrays in the Graph's dtypes, checked chunk by chunk (one line naming the file
    and the first bad row; ``sources``: how to name each array, default its file)."""
    out: dict[str, np.ndarray] = {}
    for field, a in d.node_arrays.items():
        path = (sources or {}).get(field) or d.path / f"{field}.npy"
        if a.shape[0] != n:
            raise GraphError(f"{path}: has {a.shape[0]} rows but the graph has {n} nodes")
        if field == "features":
            if a.ndim == 1:
                a = a.reshape(-1, 1)
            if a.ndim != 2 or not (np.issubdtype(a.dtype, np.number) or a.dtype == np.bool_):
                raise GraphError(f"{path}: features must be numeric [N, F], got {a.dtype}{list(a.shape)}")
            a = a if a.dtype in (np.float32, np.float16) else _converted(a, np.float32, scratch, field)
        elif field == "labels":
            if a.ndim == 2 and a.shape[1] == 1:
                a = a.reshape(-1)
            if a.ndim == 1 and np.issubdtype(a.dtype, np.integer):
                a = _converted(a, np.int64, scratch, field)
            elif a.ndim == 2 and (np.issubdtype(a.dtype, np.integer) or a.dtype == np.bool_):
                a = _converted(a, np.uint8, scratch, field)
            elif a.ndim in (1, 2) and np.issubdtype(a.dtype, np.floating):
                a = _converted(a, np.float32, scratch, field)   # regression targets (or whole/0-1 floats)
            else:
                raise GraphError(f"{path}: labels must be int class ids [N], 0/1 [N, C] or float regression "
                                 f"targets [N] / [N, D], got {a.dtype}{list(a.shape)}")
        elif a.ndim != 1 or not (a.dtype == np.bool_ or np.issubdtype(a.dtype, np.integer)):
            # 0/1 integers are checked and made bool by the Graph (N bytes)
            raise GraphError(f"{path}: a mask must be bool [N], got {a.dtype}{list(a.shape)}")
        out[field] = a
    return out


def read_npy_dir(path: str | Path | NpyDir, *, num_nodes: int | None = None, symmetrize: bool = False,
                 remove_self_loops: bool = False, remove_duplicates: bool = False,
                 num_classes: int | None = None, name: str = "", label_kind: str | None = None,
                 scratch_dir: str | Path | None = None, progress: bool = False, node_data: Any = None) -> Graph:
    """Read the npy-dir at ``path`` (or opened by :func:`open_npy_dir`) into a memory-mapped
    :class:`Graph` (module docstring).

    The options are :meth:`Graph.from_edges`'s (``num_nodes``/``num_classes`` must agree with
    ``graph.json``'s); the result's arrays are equal to what ``Graph.from_edges`` builds from the
    same arrays; ``label_kind`` given wins over ``graph.json``'s. ``scratch_dir``: where the on-disk CSR goes (default: the system's temporary
    folder; the CLI's default is the partition folder's parent). ``progress``: tqdm bars
    counting edges. ``node_data``: a :class:`~partitioners.io.node_data.NodeDataFiles` of node
    arrays outside the folder (module docstring).

    Raises:
        GraphError: a malformed file, naming it and the fix.
    """
    import tempfile

    d = path if isinstance(path, NpyDir) else open_npy_dir(path)
    d, sources, id_masks = _given_node_data(d, node_data)
    for key, given in (("num_nodes", num_nodes), ("num_classes", num_classes)):
        if given is not None and d.meta.get(key) not in (None, given):
            raise GraphError(f"{d.path / META_FILE}: says {key}={d.meta[key]} but {key}={given} was passed")
    n = int(num_nodes) if num_nodes is not None else d.num_nodes()
    if n <= 0:
        raise GraphError(f"{d.path}: the graph is empty: num_nodes is 0")
    if n > MAX_NODES:
        raise GraphError(f"{d.path}: num_nodes = {n} is too large: at most {MAX_NODES} nodes are supported")
    scratch = Scratch(scratch_dir if scratch_dir is not None else tempfile.gettempdir())
    try:
        with_attr = d.edge_attr is not None
        if with_attr:
            _check_edge_attr(d)
        csr = build_csr_on_disk(_edge_chunks(d), n, scratch, weighted=with_attr or d.edge_weight is not None,
                                symmetrize=symmetrize, remove_self_loops=remove_self_loops,
                                remove_duplicates=remove_duplicates,
                                names=(str(d.path / "src.npy"), str(d.path / "dst.npy")),
                                payload_dtype=np.int64 if with_attr else np.float32,
                                max_entries=d.num_edges * (2 if symmetrize else 1), progress=progress)
        edge_weight, edge_attr = csr.edge_weight, None
        if with_attr:
            assert csr.edge_weight is not None
            edge_weight, edge_attr = _gather_edge_data(d, csr.edge_weight, scratch)
        if not remove_duplicates:
            from ..io.edgelist import warn_duplicate_edges

            warn_duplicate_edges(d.path, csr.indptr, csr.indices)
        data = _node_data(d, n, scratch, sources)
        if id_masks:
            from ..io.node_data import mask_from_array

            data.update({f: mask_from_array(sources[f], a, n) for f, a in id_masks.items()})
        with tqdm(total=1, desc="check node data", disable=not progress):
            graph = Graph(indptr=csr.indptr, indices=csr.indices, edge_weight=edge_weight, edge_attr=edge_attr,
                          x=data.get("features"), y=data.get("labels"),
                          train_mask=data.get("train_mask"), val_mask=data.get("val_mask"),
                          test_mask=data.get("test_mask"),
                          num_classes=num_classes or d.meta.get("num_classes") or 0,
                          label_kind=label_kind or d.meta.get("label_kind"),
                          symmetric=symmetrize, name=name or d.meta.get("name") or d.path.name,
                          preprocessing=csr.report, scratch_dir=scratch.path)
    except GraphError as exc:
        scratch.close()
        msg = str(exc)
        named = msg.startswith(str(d.path)) or any(msg.startswith(f"{what}:") for what in sources.values())
        raise GraphError(msg if named else f"{d.path}: {msg}") from None
    except BaseException:
        scratch.close()
        raise
    scratch.keep_until_collected(graph)
    return graph
