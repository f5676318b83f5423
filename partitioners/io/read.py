"""``read_graph``: one entry point that picks the reader from ``fmt`` or from the path.

Edge lists, ``.npz``/``.npy`` arrays and scipy matrices keep duplicate edges (unless
``remove_duplicates``) and say so in one warning line with their count
(:func:`~.edgelist.warn_duplicate_edges`; the npy-dir reader does the same).

This module is torch-free.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Callable

from ..graph import Graph
from ._common import GRAPH_OPTIONS, NODE_DATA_OPTIONS, existing_path
from .arrays import npz_kind, read_npy, read_npz, read_scipy_npz
from .edgelist import read_edgelist, warn_duplicate_edges
from .ogb import is_ogb_dir, read_ogb
from .planetoid import is_planetoid_dir, read_planetoid
from ..outofcore.npy_dir import is_npy_dir, read_npy_dir
from .partition_input import PARTITION_FORMAT, is_partition_input, read_partition_input

__all__ = ["FORMATS", "infer_format", "read_graph"]


def read_partition_graph(path: str | Path, *, scratch_dir: Any = None, progress: bool = False, **options: Any) -> Graph:
    """The graph of a partition folder or family (:func:`~.partition_input.read_partition_input`),
    without the keys its new ``partition.json`` would carry; it is read as it was cut (a build
    option such as ``symmetrize`` is refused)."""
    if options:
        raise ValueError(f"read_graph(fmt={PARTITION_FORMAT!r}) reads the folder's graph as it was cut: "
                         f"{sorted(options)} do not apply (partition the original input with them)")
    return read_partition_input(path, scratch_dir=scratch_dir, progress=progress)[0]


_READERS: dict[str, tuple[Callable[..., Graph], frozenset[str]]] = {
    "edgelist": (read_edgelist, frozenset({"delimiter", "header", "weighted", "relabel", "chunk_bytes"})
                 | NODE_DATA_OPTIONS),
    "npz": (read_npz, frozenset()),
    "npy": (read_npy, frozenset({"relabel"}) | NODE_DATA_OPTIONS),
    "scipy": (read_scipy_npz, frozenset({"weighted"}) | NODE_DATA_OPTIONS),
    "ogb": (read_ogb, frozenset({"split", "chunk_bytes"})),
    "planetoid": (read_planetoid, frozenset({"planetoid_name"})),
    "npy-dir": (read_npy_dir, frozenset({"scratch_dir", "progress"})),
    PARTITION_FORMAT: (read_partition_graph, frozenset({"scratch_dir", "progress"})),
}
FORMATS: tuple[str, ...] = tuple(_READERS)
"""The formats :func:`read_graph` reads."""



_EDGELIST_SUFFIXES = (".csv", ".tsv", ".txt", ".edgelist", ".edges", ".el")
_COUNTS_DUPLICATES = ("npz", "npy", "scipy")
"""Formats whose duplicate edges :func:`read_graph` counts (``read_edgelist`` counts its own)."""


def infer_format(path: str | Path) -> str:
    """The format of ``path``: ``partition`` for a partition folder (``partition.json``) or family
    (``family.json``), read back by original ids (:mod:`.partition_input`); ``npy-dir`` for a folder with ``src.npy`` and ``dst.npy``;
    ``ogb`` for a folder with ``raw/edge.csv.gz``; a typed format of
    :mod:`partitioners.hetero.readers` (``ogb-hetero``: ``raw/num-node-dict.csv.gz``;
    ``typed-npy-dir``: ``nodes.json``; ``triples``: ``.triples``, or a ``.tsv`` whose first data
    line is three tab-separated fields with a relation name in the middle and a tail that is not a
    number), whose graph :func:`partitioners.hetero.readers.read_hetero` reads; ``planetoid`` for a
    folder with ``ind.NAME.graph`` (or ``raw/ind.NAME.graph``); ``npz`` or ``scipy`` for ``.npz``
    (from its keys); ``npy``; ``edgelist`` for ``.csv/.tsv/.txt/.edgelist/.edges/.el``,
    optionally followed by ``.gz``. A ValueError says when it cannot tell.
    """
    p = existing_path(path)
    if p.is_dir():
        if is_partition_input(p):
            return PARTITION_FORMAT
        if is_npy_dir(p):
            return "npy-dir"
        if is_ogb_dir(p):
            return "ogb"
        if is_planetoid_dir(p):
            return "planetoid"
        typed = _typed_format(p)
        if typed is not None:
            return typed
        raise ValueError(f"{p}: a folder is read as an npy-dir (src.npy, dst.npy), an OGB dataset "
                         f"(raw/edge.csv.gz or, typed, raw/num-node-dict.csv.gz), a Planetoid set "
                         f"(ind.NAME.graph, ...), a typed npy-dir (nodes.json) or a partition folder or family "
                         f"(partition.json, family.json), but it has none; pass fmt= "
                         f"one of {list(_all_formats())}")
    typed = _typed_format(p)
    if typed is not None:
        return typed
    name = p.name.lower()
    if name.endswith(".npz"):
        return npz_kind(p)
    if name.endswith(".npy"):
        return "npy"
    if name.endswith(".gz"):
        name = name[:-3]
    if name.endswith(_EDGELIST_SUFFIXES):
        return "edgelist"
    raise ValueError(f"{p}: cannot tell the format from the name; pass fmt= one of {list(_all_formats())}")


def _typed_format(path: Path) -> str | None:
    """The typed format of ``path`` (:mod:`partitioners.hetero.readers`), or None."""
    from ..hetero.readers import detect_typed_format

    return detect_typed_format(path)


def _all_formats() -> tuple[str, ...]:
    from ..hetero.readers import typed_format_names

    return (*FORMATS, *typed_format_names())


def read_graph(path: str | Path, fmt: str | None = None, **options: Any) -> Graph:
    """Read a graph file or dataset folder into a :class:`Graph`.

    Args:
        path: the file or folder.
        fmt: one of :data:`FORMATS` (``edgelist``, ``npz``, ``npy``, ``scipy``, ``ogb``,
            ``planetoid``, ``npy-dir``: read out of core, memory-mapped; ``partition``: a partition folder or
            family, read back out of core); None infers it with :func:`infer_format`. (default: None)
        **options: the reader's own options (edgelist: ``delimiter``, ``header``, ``weighted``,
            ``relabel``, ``chunk_bytes``; npy: ``relabel``; scipy: ``weighted``; ogb: ``split``,
            ``chunk_bytes``; planetoid: ``planetoid_name``; npy-dir and partition: ``scratch_dir``, ``progress``) and the
            :meth:`Graph.from_edges` options ``num_nodes``, ``symmetrize``,
            ``remove_self_loops``, ``remove_duplicates``, ``num_classes``, ``name``,
            ``label_kind`` (what the labels hold; None infers it). Formats with
            no node data (edgelist, npy, scipy) also take ``features``, ``labels`` and masks.

    Duplicate edges of an edge list, ``.npz``/``.npy`` arrays or a scipy matrix are kept
    (``remove_duplicates`` keeps one of each) and counted in one warning line.

    Raises:
        ValueError: an unknown ``fmt``, an option the format does not take, or a path whose
            format cannot be inferred.
        FileNotFoundError: ``path`` does not exist.
        GraphError: the file's content is malformed (see each reader).
    """
    if fmt is not None and fmt not in _READERS and fmt in _all_formats():
        raise ValueError(f"fmt={fmt!r} is a typed format (a heterogeneous graph): read it with "
                         f"partitioners.hetero.readers.read_hetero")
    if fmt is not None and fmt not in _READERS:
        raise ValueError(f"unknown graph format fmt={fmt!r}; valid formats: {list(FORMATS)}")
    p = existing_path(path)
    fmt = fmt or infer_format(p)
    if fmt not in _READERS:
        raise ValueError(f"{p} is a typed input ({fmt}): read it with partitioners.hetero.readers.read_hetero")
    reader, own = _READERS[fmt]
    unknown = sorted(set(options) - own - GRAPH_OPTIONS)
    if unknown:
        raise ValueError(f"read_graph(fmt={fmt!r}) does not take option(s) {unknown}; "
                         f"valid options: {sorted(own | GRAPH_OPTIONS)}")
    graph = reader(p, **options)
    if fmt in _COUNTS_DUPLICATES and not options.get("remove_duplicates"):
        warn_duplicate_edges(p, graph.indptr, graph.indices)
    return graph
