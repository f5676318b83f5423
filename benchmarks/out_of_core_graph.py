"""The generated input of ``benchmarks/out_of_core.py``: a graph with community structure written
as an npy-dir (``docs/format.md``'s layout: ``src.npy``, ``dst.npy``, ``features.npy``, ...) in
bounded memory, its ``.npz`` twin for the in-memory path, and the symmetric adjacency pymetis
alone partitions.

The graph. Node ``v`` belongs to block ``v % B`` (``B = nodes // block_size``), so a block's
members are spread over the whole id range and no method gains from the id order. Each edge's
source is uniform over the nodes; its destination is, with probability ``p_local`` (0.9), a
uniform member of the source's block, and otherwise uniform over all nodes. Labels are the
block's class (``block % classes``), replaced by a uniform class for 20% of the nodes; features
are standard normal noise plus half the class's centroid; masks split the nodes 60/20/20 at
random. Self-loops and repeated edges are left in, as a raw edge dump would have them (rare:
well under 1% of the edges each at the default sizes).

Everything is drawn in fixed-size chunks, chunk ``k`` from its own generator seeded with
``(seed, stream, k)``, and written through ``np.lib.format.open_memmap``: the memory in use is a
few chunks, whatever the graph's size (measured on the default 4M-node graph: a peak RssAnon of
132 MiB, the interpreter included), and the same spec gives the same bytes.

Products are made once per spec and kept under the cache folder (``.cache/out_of_core/<key>``),
each built under a temporary name and renamed when complete, so an interrupted run leaves
nothing that a later run would take for finished.
"""

from __future__ import annotations

import json
import os
import shutil
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np

__all__ = ["GraphSpec", "GraphCache", "ARRAYS", "generate_npy_dir", "write_peer_npz",
           "build_symmetric_adjacency"]

GENERATOR_VERSION = 1
"""Bumped when the generator draws differently: part of the cache key."""

EDGE_CHUNK = 1 << 20
"""Edges drawn per chunk (a chunk's arrays take about 60 MiB)."""
NODE_CHUNK = 1 << 17
"""Nodes drawn per chunk (features: ``NODE_CHUNK * F`` float32)."""

ARRAYS = ("src", "dst", "features", "labels", "train_mask", "val_mask", "test_mask")
"""The npy-dir files written, in order (each ``<name>.npy``)."""


@dataclass(frozen=True, kw_only=True, slots=True)
class GraphSpec:
    """What the generated graph is; the cache key is made from it."""

    nodes: int = 4_000_000
    edges: int = 40_000_000
    """Directed edges ``src -> dst`` (int64)."""
    features: int = 64
    """Feature width (float32)."""
    classes: int = 16
    block_size: int = 1000
    """Nodes per community block."""
    p_local: float = 0.9
    """Probability that an edge stays inside its source's block."""
    seed: int = 0

    def __post_init__(self) -> None:
        if self.nodes < 2 or self.edges < 1 or self.features < 1 or self.classes < 1:
            raise ValueError(f"GraphSpec: need nodes >= 2, edges, features, classes >= 1; got {self}")
        if not 0.0 <= self.p_local <= 1.0 or self.block_size < 1:
            raise ValueError(f"GraphSpec: p_local in [0, 1] and block_size >= 1; got {self}")

    @property
    def blocks(self) -> int:
        return max(1, self.nodes // self.block_size)

    @property
    def key(self) -> str:
        return (f"n{self.nodes}-e{self.edges}-f{self.features}-c{self.classes}-b{self.block_size}"
                f"-p{self.p_local:g}-s{self.seed}-g{GENERATOR_VERSION}")

    def array_bytes(self) -> dict[str, int]:
        """The data bytes of each npy-dir array (headers, 128 bytes each, not counted)."""
        n, e = self.nodes, self.edges
        return {"src": 8 * e, "dst": 8 * e, "features": 4 * n * self.features, "labels": 8 * n,
                "train_mask": n, "val_mask": n, "test_mask": n}

    def input_bytes(self) -> int:
        return sum(self.array_bytes().values())


def _rng(spec: GraphSpec, stream: int, chunk: int) -> np.random.Generator:
    return np.random.default_rng([spec.seed, stream, chunk])


def _edge_chunk(spec: GraphSpec, k: int, m: int) -> tuple[np.ndarray, np.ndarray]:
    rng = _rng(spec, 1, k)
    n, nb = spec.nodes, spec.blocks
    src = rng.integers(0, n, m, dtype=np.int64)
    block = src % nb
    members = (n - block + nb - 1) // nb                     # nodes b, b + nb, ... below n
    local = block + nb * (rng.random(m) * members).astype(np.int64)
    far = rng.integers(0, n, m, dtype=np.int64)
    dst = np.where(rng.random(m) < spec.p_local, local, far)
    return src, dst


def _node_chunk(spec: GraphSpec, lo: int, hi: int, centroids: np.ndarray) -> dict[str, np.ndarray]:
    rng = _rng(spec, 2, lo // NODE_CHUNK)
    m = hi - lo
    labels = (np.arange(lo, hi, dtype=np.int64) % spec.blocks) % spec.classes
    flip = rng.random(m) < 0.2
    labels[flip] = rng.integers(0, spec.classes, int(flip.sum()), dtype=np.int64)
    feats = rng.standard_normal((m, spec.features), dtype=np.float32)
    feats += 0.5 * centroids[labels]
    u = rng.random(m)
    return {"features": feats, "labels": labels, "train_mask": u < 0.6,
            "val_mask": (u >= 0.6) & (u < 0.8), "test_mask": u >= 0.8}


def generate_npy_dir(spec: GraphSpec, folder: str | os.PathLike[str]) -> dict[str, Any]:
    """Write the graph of ``spec`` as an npy-dir into ``folder`` (created; must not exist) in
    bounded memory. Returns ``{"seconds", "intra_block_fraction"}``."""
    folder = Path(folder)
    folder.mkdir(parents=True)
    t0 = time.perf_counter()
    n, e = spec.nodes, spec.edges
    src = np.lib.format.open_memmap(folder / "src.npy", mode="w+", dtype=np.int64, shape=(e,))
    dst = np.lib.format.open_memmap(folder / "dst.npy", mode="w+", dtype=np.int64, shape=(e,))
    intra = 0
    for k, lo in enumerate(range(0, e, EDGE_CHUNK)):
        hi = min(e, lo + EDGE_CHUNK)
        s, d = _edge_chunk(spec, k, hi - lo)
        src[lo:hi], dst[lo:hi] = s, d
        intra += int(np.count_nonzero(s % spec.blocks == d % spec.blocks))
    src.flush(), dst.flush()
    del src, dst
    centroids = _rng(spec, 3, 0).standard_normal((spec.classes, spec.features), dtype=np.float32)
    shapes = {"features": ((n, spec.features), np.float32), "labels": ((n,), np.int64),
              "train_mask": ((n,), np.bool_), "val_mask": ((n,), np.bool_), "test_mask": ((n,), np.bool_)}
    out = {name: np.lib.format.open_memmap(folder / f"{name}.npy", mode="w+", dtype=dt, shape=shape)
           for name, (shape, dt) in shapes.items()}
    for lo in range(0, n, NODE_CHUNK):
        hi = min(n, lo + NODE_CHUNK)
        for name, values in _node_chunk(spec, lo, hi, centroids).items():
            out[name][lo:hi] = values
    for arr in out.values():
        arr.flush()
    del out
    (folder / "graph.json").write_text(json.dumps({"num_nodes": n, "num_classes": spec.classes,
                                                   "name": f"ooc-{spec.key}"}) + "\n")
    return {"seconds": time.perf_counter() - t0, "intra_block_fraction": intra / e}


def write_peer_npz(npy_dir: str | os.PathLike[str], path: str | os.PathLike[str], spec: GraphSpec) -> float:
    """The same arrays as one uncompressed ``.npz`` (the in-memory path's input). ``np.savez``
    copies each memory-mapped array in 16 MiB blocks, so this too runs in bounded memory.
    Returns the seconds taken."""
    t0 = time.perf_counter()
    npy_dir = Path(npy_dir)
    arrays = {name: np.load(npy_dir / f"{name}.npy", mmap_mode="r") for name in ARRAYS}
    np.savez(path, **arrays, num_nodes=np.int64(spec.nodes), num_classes=np.int64(spec.classes))
    return time.perf_counter() - t0


def build_symmetric_adjacency(npy_dir: str | os.PathLike[str], out: str | os.PathLike[str],
                              num_nodes: int, index_dtype: Any) -> dict[str, Any]:
    """The undirected simple graph under the edges (both directions, no self-loops, no repeats)
    as CSR ``xadj.npy``/``adjncy.npy`` of ``index_dtype`` in folder ``out`` (created). Built
    once, in memory, with scipy (int32 indices while they fit). When ``index_dtype`` is wider
    than int32 and the values fit, the same CSR is also saved as ``xadj32.npy``/``adjncy32.npy``
    (the benchmark's control input, which pymetis has to convert)."""
    import scipy.sparse as sp

    t0 = time.perf_counter()
    npy_dir, out = Path(npy_dir), Path(out)
    small = np.int32 if num_nodes < 2**31 else np.int64
    src = np.load(npy_dir / "src.npy", mmap_mode="r")
    dst = np.load(npy_dir / "dst.npy", mmap_mode="r")
    rows = np.concatenate([src, dst]).astype(small, copy=False)
    cols = np.concatenate([dst, src]).astype(small, copy=False)
    keep = rows != cols
    rows, cols = rows[keep], cols[keep]
    del keep
    ones = np.ones(rows.size, dtype=np.bool_)
    csr = sp.coo_matrix((ones, (rows, cols)), shape=(num_nodes, num_nodes)).tocsr()
    del rows, cols, ones
    csr.sum_duplicates()
    out.mkdir(parents=True)
    np.save(out / "xadj.npy", csr.indptr.astype(index_dtype))
    np.save(out / "adjncy.npy", csr.indices.astype(index_dtype))
    int32_copy = np.dtype(index_dtype).itemsize > 4 and int(csr.indptr[-1]) < 2**31 and num_nodes < 2**31
    if int32_copy:
        np.save(out / "xadj32.npy", csr.indptr.astype(np.int32))
        np.save(out / "adjncy32.npy", csr.indices.astype(np.int32))
    degree = np.diff(csr.indptr)
    return {"seconds": time.perf_counter() - t0, "undirected_edges": int(csr.nnz // 2), "int32_copy": int32_copy,
            "isolated_nodes": int(np.count_nonzero(degree == 0)), "max_degree": int(degree.max()),
            "index_bytes": int(np.dtype(index_dtype).itemsize)}


class GraphCache:
    """The products of one :class:`GraphSpec` under ``root/<spec.key>``: ``npy/`` (the npy-dir),
    ``peer.npz`` and ``adjacency/``, each made on first use and reused after; ``info.json``
    records how each was made (time, statistics)."""

    def __init__(self, root: str | os.PathLike[str], spec: GraphSpec) -> None:
        self.spec = spec
        self.dir = Path(root) / spec.key
        self.npy_dir = self.dir / "npy"
        self.npz_path = self.dir / "peer.npz"
        self.adjacency_dir = self.dir / "adjacency"
        self._info_path = self.dir / "info.json"

    def cached(self, what: str, index_bytes: int | None = None) -> dict[str, Any] | None:
        """How product ``what`` (``npy``, ``npz``, ``adjacency``) was made, if it is complete on
        disk (the adjacency: in ``index_bytes`` wide indices), else None."""
        done = self.info().get(what)
        path = {"npy": self.npy_dir, "npz": self.npz_path, "adjacency": self.adjacency_dir}[what]
        if not done or not path.exists():
            return None
        if what == "adjacency" and index_bytes is not None and done.get("index_bytes") != index_bytes:
            return None
        return done

    def annotate(self, what: str, **fields: Any) -> None:
        """Add ``fields`` (say, the peak memory of the child that made it) to ``what``'s record."""
        self._record(what, {**self.info().get(what, {}), **fields})

    def info(self) -> dict[str, Any]:
        try:
            return json.loads(self._info_path.read_text())
        except (OSError, ValueError):
            return {}

    def _record(self, key: str, value: dict[str, Any]) -> None:
        info = self.info()
        info[key] = value
        info["spec"] = asdict(self.spec)
        tmp = self._info_path.with_name(f".info.{os.getpid()}.tmp")
        tmp.write_text(json.dumps(info, indent=2) + "\n")
        os.replace(tmp, self._info_path)

    def _tmp(self, final: Path) -> Path:
        """A temporary sibling of ``final``; first removes what an interrupted run left."""
        for stale in self.dir.glob(".*.tmp-*"):
            if stale.is_dir():
                shutil.rmtree(stale)
            else:
                stale.unlink()
        return final.with_name(f".{final.name}.tmp-{os.getpid()}")

    def ensure_npy_dir(self) -> dict[str, Any]:
        """Generate the npy-dir unless cached; ``{"cached", "seconds", ...}``."""
        if self.cached("npy"):
            return {"cached": True, **self.info()["npy"]}
        self.dir.mkdir(parents=True, exist_ok=True)
        tmp = self._tmp(self.npy_dir)
        try:
            made = generate_npy_dir(self.spec, tmp)
            if self.npy_dir.exists():
                shutil.rmtree(self.npy_dir)
            os.replace(tmp, self.npy_dir)
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
        made["file_bytes"] = self.npy_dir_bytes()
        self._record("npy", made)
        return {"cached": False, **made}

    def npy_dir_bytes(self) -> dict[str, int]:
        """On-disk size of each ``.npy`` file of the npy-dir (headers included)."""
        return {name: (self.npy_dir / f"{name}.npy").stat().st_size for name in ARRAYS}

    def ensure_npz(self) -> dict[str, Any]:
        if self.cached("npz"):
            return {"cached": True, **self.info()["npz"]}
        tmp = self.dir / f".peer.tmp-{os.getpid()}.npz"  # np.savez appends .npz to other names
        try:
            seconds = write_peer_npz(self.npy_dir, tmp, self.spec)
            os.replace(tmp, self.npz_path)
        finally:
            if tmp.exists():
                tmp.unlink()
        made = {"seconds": seconds, "file_bytes": self.npz_path.stat().st_size}
        self._record("npz", made)
        return {"cached": False, **made}

    def ensure_adjacency(self, index_dtype: Any) -> dict[str, Any]:
        done = self.cached("adjacency", int(np.dtype(index_dtype).itemsize))
        if done:
            return {"cached": True, **done}
        tmp = self._tmp(self.adjacency_dir)
        try:
            made = build_symmetric_adjacency(self.npy_dir, tmp, self.spec.nodes, index_dtype)
            if self.adjacency_dir.exists():
                shutil.rmtree(self.adjacency_dir)
            os.replace(tmp, self.adjacency_dir)
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
        made["file_bytes"] = sum(f.stat().st_size for f in self.adjacency_dir.iterdir())
        self._record("adjacency", made)
        return {"cached": False, **made}

