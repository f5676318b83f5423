"""The graph fingerprint: a digest of the graph by original node ids, the same for every
partition of the graph whatever the number of parts or the method (``partition.json``'s
``graph_fingerprint``, ``docs/format.md``).

The writer goes part by part, chunk by chunk, so the digest is order-independent: every edge
and every row of node data hashes to a 64-bit word keyed by original ids (an edge by its
destination, source, weight and edge features; a row by its original id, the file it belongs
to and its bytes), and the words of each kind are summed modulo ``2**64``: a multiset hash, so
duplicate edges count twice and no order of the parts, chunks or rows matters. The fingerprint
is the sha256 of a header (counts, dtypes, label kind, the input's node names, a typed graph's
``hetero`` section) and those sums. A typed folder's (scheme :data:`TYPED_SCHEME`) also folds
each edge's relation id into its word and adds the per-type rows (``features-TYPE.npy``,
``labels-TYPE.npy``) by original id; a node's type is its original id's range in the header.
Its writer also records the typed graph's scheme-1 digest (:data:`SCHEME_1_FIELD`, what a typed
folder cut before scheme 2 recorded) from the same chunks: :attr:`GraphDigest.scheme_1`.
It tells "the same graph cut again" from "another graph"; it is not a cryptographic commitment
(a 64-bit sum can be forged on purpose, not by accident).

Nothing here loads the graph: :class:`GraphDigest` takes the chunks the writer gathers anyway.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from typing import Any

import numpy as np

__all__ = ["GraphDigest", "GraphPrint", "HEADER_KEYS", "SCHEME_1_FIELD", "SCHEME_FIELD", "TYPED_SCHEME", "graph_header",
           "row_words"]

SCHEME_FIELD = "graph_fingerprint_scheme"
"""``partition.json``'s record of how ``graph_fingerprint`` was computed (absent: scheme 1)."""
TYPED_SCHEME = 2
"""The scheme of typed folders whose fingerprint covers each edge's relation and the per-type
node data; typed folders written before it, and every homogeneous folder, are scheme 1 (no field:
homogeneous fingerprints are unchanged)."""
SCHEME_1_FIELD = "scheme_1_graph_fingerprint"
"""``partition.json``'s scheme-1 digest of a scheme-2 typed folder's graph: the ``graph_fingerprint``
a typed folder of the same graph cut before scheme 2 recorded (absent in typed folders written
before it and in every scheme-1 folder)."""
_STEP_BYTES = 1 << 24
"""Bytes of rows hashed at once by :meth:`GraphDigest.add_rows` (bounds its temporaries)."""

_M1, _M2 = np.uint64(0xBF58476D1CE4E5B9), np.uint64(0x94D049BB133111EB)
_GOLDEN = np.uint64(0x9E3779B97F4A7C15)
_S30, _S27, _S31 = np.uint64(30), np.uint64(27), np.uint64(31)


def _mix(x: np.ndarray) -> np.ndarray:
    """The splitmix64 finaliser on uint64 words (a bijection; array ops wrap modulo 2**64)."""
    x = x ^ (x >> _S30)
    x = x * _M1
    x = x ^ (x >> _S27)
    x = x * _M2
    return x ^ (x >> _S31)


def _tag(name: str) -> np.uint64:
    """A 64-bit key of a name (``features.npy``, ``edges``)."""
    return np.uint64(int.from_bytes(hashlib.sha256(name.encode()).digest()[:8], "little"))


def row_words(chunk: np.ndarray) -> np.ndarray:
    """uint64 ``[n]``: a hash of each row's bytes (``chunk`` ``[n, ...]`` of any dtype): the
    row's 8-byte words times odd keys of their positions, summed modulo 2**64 (one ``dot``: any
    one changed word changes the sum, since an odd key is invertible), then mixed."""
    n = chunk.shape[0]
    raw = np.ascontiguousarray(chunk).reshape(n, -1).view(np.uint8).reshape(n, -1)
    pad = (-raw.shape[1]) % 8
    if pad:
        raw = np.concatenate([raw, np.zeros((n, pad), np.uint8)], axis=1)
    words = raw.view(np.uint64) if raw.shape[1] else np.zeros((n, 1), np.uint64)
    keys = _mix(np.arange(words.shape[1], dtype=np.uint64) * _GOLDEN + _GOLDEN) | np.uint64(1)
    return _mix(words.dot(keys))


def _ids(ids: np.ndarray, tag: np.uint64) -> np.ndarray:
    return _mix(np.asarray(ids).astype(np.uint64) ^ tag)


def _edge_words(h: np.ndarray, weight: np.ndarray | None, attr: np.ndarray | None) -> np.ndarray:
    """The edges' words from their id (and relation) words ``h``, with their weights' bits and
    their feature rows' words (:func:`row_words`) when given."""
    if weight is not None:
        h = _mix(h ^ weight)
    if attr is not None:
        h = _mix(h + attr)
    return h


class GraphDigest:
    """Accumulates the graph fingerprint from the writer's chunks (see the module docstring).

    ``scheme_1``: a typed graph's writer (or ``--verify`` of a folder recording
    :data:`SCHEME_1_FIELD`) also gets the graph's scheme-1 digest, :attr:`scheme_1`."""

    def __init__(self, scheme_1: bool = False) -> None:
        self.sums: dict[str, int] = {}
        self.scheme_1: GraphDigest | None = GraphDigest() if scheme_1 else None
        """The scheme-1 digest of the same graph, fed the same words but each edge's without its
        relation and none of the per-type rows (what the writer computed for a typed graph before
        scheme 2); None unless asked for."""

    def _add(self, kind: str, words: np.ndarray) -> None:
        if words.size:   # an empty chunk adds nothing, not even the kind: chunking never shows
            self.sums[kind] = (self.sums.get(kind, 0) + int(words.sum(dtype=np.uint64))) % (1 << 64)

    def _add_both(self, kind: str, words: np.ndarray, scheme_1_words: np.ndarray | None) -> None:
        """``words`` to this digest's sum of ``kind``; ``scheme_1_words`` (None: nothing) to
        :attr:`scheme_1`'s, when there is one."""
        self._add(kind, words)
        if self.scheme_1 is not None and scheme_1_words is not None:
            self.scheme_1._add(kind, scheme_1_words)

    def add_edges(self, dst: np.ndarray, src: np.ndarray, weight: np.ndarray | None = None,
                  attr: np.ndarray | None = None, relation: np.ndarray | None = None) -> None:
        """Edges ``src -> dst`` (original ids), with their weights, feature rows and (a typed
        graph's) relation ids if any."""
        h = _mix(_ids(dst, _tag("edges.dst")) ^ np.asarray(src).astype(np.uint64))
        bits = None if weight is None else \
            np.ascontiguousarray(weight, dtype=np.float32).view(np.uint32).astype(np.uint64)
        rows = None if attr is None else row_words(attr)
        if relation is None:
            words = _edge_words(h, bits, rows)
            self._add_both("edges", words, words)
            return
        typed = _edge_words(_mix(h ^ _ids(relation, _tag("edges.relation"))), bits, rows)
        self._add_both("edges", typed, None if self.scheme_1 is None else _edge_words(h, bits, rows))

    def add_rows(self, name: str, ids: np.ndarray, chunk: np.ndarray, *, per_type: bool = False) -> None:
        """Rows of the node data ``name`` (``features.npy``, ``labels.npy``, a mask) of the nodes
        ``ids`` (original ids), a few MiB at a time. ``per_type``: rows of a typed graph's
        ``features-TYPE.npy``/``labels-TYPE.npy``, which scheme 1 does not cover (not added to
        :attr:`scheme_1`)."""
        step = max(1, _STEP_BYTES // max(1, chunk[:1].nbytes))
        for lo in range(0, len(ids), step):
            words = _mix(_ids(ids[lo:lo + step], _tag(name)) + row_words(chunk[lo:lo + step]))
            self._add_both(name, words, None if per_type else words)

    def add_pairs(self, name: str, pairs: np.ndarray) -> None:
        """Node pairs ``[2, n]`` (original ids) of the set ``name`` (an edge split's ``train``)."""
        pairs = np.asarray(pairs)
        words = _mix(_ids(pairs[1], _tag(name)) ^ pairs[0].astype(np.uint64))
        self._add_both(f"pairs.{name}", words, words)

    def hexdigest(self, header: dict[str, Any]) -> str:
        """The fingerprint: hex sha256 of ``header`` (:func:`graph_header`) and the sums."""
        doc = {"header": header, "sums": {k: f"{v:016x}" for k, v in sorted(self.sums.items())}}
        return hashlib.sha256(json.dumps(doc, sort_keys=True).encode()).hexdigest()


@dataclass(frozen=True)
class GraphPrint:
    """A graph fingerprint as a partition folder or a checkpoint records it: the digest (None
    when it has none), its scheme, and a scheme-2 typed folder's scheme-1 digest (None without)."""

    digest: str | None
    scheme: int = 1
    scheme_1: str | None = None

    def by_scheme(self, scheme: int) -> str | None:
        """The digest of the graph by ``scheme``, where known: the own one, or the recorded scheme-1 one."""
        if scheme == self.scheme:
            return self.digest
        return self.scheme_1 if scheme == 1 else None

    def compare(self, other: "GraphPrint") -> tuple[int, str, str] | None:
        """``(scheme, mine, other's)``: both digests by the newest scheme both have (the own one
        when the schemes agree; else scheme 1, the older's own and the newer's recorded one);
        None when one of them has no digest of that scheme (they cannot be compared)."""
        for scheme in dict.fromkeys((self.scheme, 1)):
            mine, theirs = self.by_scheme(scheme), other.by_scheme(scheme)
            if mine is not None and theirs is not None:
                return scheme, mine, theirs
        return None


HEADER_KEYS = ("num_nodes", "num_edges", "feature_dim", "feature_dtype", "label_kind", "num_classes", "weighted",
               "edge_feature_dim")
"""The fields of ``partition.json`` the fingerprint records (they describe the graph, not the cut)."""


def graph_header(meta: dict[str, Any], node_names: np.ndarray | None) -> dict[str, Any]:
    """What the fingerprint records besides the edges and rows, from ``partition.json``'s fields
    (``meta``: the writer's document or the reader's ``raw``): :data:`HEADER_KEYS` (an absent
    ``edge_feature_dim`` is 0, as the format reads it), a typed graph's ``hetero`` section
    (without the per-part counts) and the sha256 of the input's node names
    (``original_names.npy``), if any."""
    hetero = meta.get("hetero")
    return {**{k: meta.get(k) for k in HEADER_KEYS}, "edge_feature_dim": meta.get("edge_feature_dim", 0),
            "hetero": None if hetero is None else {k: v for k, v in hetero.items() if k != "part_type_counts"},
            "node_names": None if node_names is None else
            hashlib.sha256(np.ascontiguousarray(node_names).tobytes()).hexdigest()}
