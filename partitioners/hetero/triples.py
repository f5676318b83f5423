"""Read a knowledge graph's triples, ``head<TAB>relation<TAB>tail`` per line, into a HeteroGraph.

The file (plain or gzipped, detected by its bytes) holds one triple per line, three
tab-separated fields; blank lines and ``#``/``%`` comments are skipped (the shared table reader,
:mod:`partitioners.io._text`: a name cannot hold ``#`` or ``%``), there is no header line, and
every line is bounded in length. The file is parsed in blocks, each block's names turned into
codes (:mod:`partitioners.io.relabel_ids`), so the text is never held whole. Every count comes
from the lines read: the nodes are the distinct head/tail names, the relations the distinct
relation names.

* **Node types.** One type, ``entity``, holding every name, unless *every* head and tail is
  ``TYPE:NAME`` (``TYPE`` a type name: letters, digits, ``_ . -``; ``NAME`` not empty and not
  starting with ``/``, so URIs stay whole): then ``TYPE`` is the node's type. Types are in sorted
  order; in each type the nodes are numbered in the sorted order of their names (as ``--relabel``
  does), and the names as written (``paper:12``) are kept: the folder's ``original_names.npy``.
* **Relations.** One relation per distinct relation name, in sorted order, from ``entity`` to
  ``entity`` (typed: from its heads' type to its tails' type; a relation whose triples join two
  type pairs is refused). A name that is not a valid relation name (``/film/film/genre``) becomes
  one (``film_film_genre``: other characters as ``_``; ``_2``, ... on a clash) and the input's
  name is kept in :attr:`HeteroGraph.relation_names` (``partition.json``'s ``relation_names``).

There are no features, labels or masks (a knowledge graph's triples have none). A bad line is one
:class:`~partitioners.errors.GraphError` naming the file and line. Torch-free.
"""

from __future__ import annotations

import logging
import re
from pathlib import Path

import numpy as np

from ..errors import GraphError
from ..io._common import default_name, existing_path
from ..io._text import DEFAULT_CHUNK_BYTES, detect_layout, iter_chunks
from ..io.relabel_ids import block_codes, merge_block_names
from .graph import HeteroGraph, _NAME

__all__ = ["ENTITY", "TRIPLES_SUFFIXES", "is_triples_file", "read_triples", "relation_name"]

log = logging.getLogger(__name__)

ENTITY = "entity"
"""The one node type of an untyped triples file."""
TRIPLES_SUFFIXES = (".triples", ".triples.gz")
"""Files of these names are triples; a ``.tsv`` is when its first data line looks like one
(:func:`is_triples_file`)."""
_FIELDS = ("head", "relation", "tail")


def _is_number(token: str) -> bool:
    try:
        float(token)
    except ValueError:
        return False
    return True


def is_triples_file(path: Path) -> bool:
    """A ``.triples`` file, or a ``.tsv`` (optionally ``.gz``) whose first data line (after a first
    line without numbers, which an edge list may have as its header) has three tab-separated
    fields with a relation name in the middle and a tail that is not a number (an edge list's
    middle field is a node id and its third a weight)."""
    name = path.name.lower()
    if name.endswith(TRIPLES_SUFFIXES):
        return True
    if not path.is_file() or not name.removesuffix(".gz").endswith(".tsv"):
        return False
    try:  # a header line (no number: src dst weight) is skipped, as the edge-list reader does
        layout = detect_layout(path, delimiter="\t", header=None)
    except GraphError:
        return False  # the edge-list reader names the problem
    fields = [f.strip() for f in layout.first_data_text.split("\t")]
    return layout.ncols == 3 and all(fields) and not _is_number(fields[1]) and not _is_number(fields[2])


def relation_name(name: str, taken: set[str]) -> str:
    """``name`` when it is a valid relation name, else one made of it (module docstring), not in ``taken``."""
    if _NAME.fullmatch(name) and name not in taken:
        return name
    base = re.sub(r"[^A-Za-z0-9_.-]", "_", name).strip("_.-")[:60] or "relation"
    candidate, k = base, 1
    while candidate in taken or not _NAME.fullmatch(candidate):
        k += 1
        candidate = f"{base}_{k}"
    return candidate


def _read_codes(path: Path, chunk_bytes: int) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """``(entity names [N] sorted, head/tail codes [E, 2], relation names [R] sorted, relation codes [E])``."""
    layout = detect_layout(path, delimiter="\t", header=False)
    if layout.ncols == 0:
        raise GraphError(f"{path}: no triples (only blank or comment lines); expected head<TAB>relation<TAB>tail lines")
    if layout.ncols != 3:
        raise GraphError(f"{layout.where(layout.first_data_line)}: a triple is head<TAB>relation<TAB>tail, found "
                         f"{layout.ncols} tab-separated fields: {layout.first_data_text[:200]!r}")
    entities: list[tuple[np.ndarray, np.ndarray]] = []
    relations: list[tuple[np.ndarray, np.ndarray]] = []
    for chunk in iter_chunks(layout, str, chunk_bytes=chunk_bytes):
        rows = np.char.strip(chunk.rows.astype(str))
        empty = rows == ""
        if empty.any():
            row, col = (int(i[0]) for i in np.nonzero(empty))
            raise chunk.fail(row, f"the {_FIELDS[col]} (field {col + 1}) is empty; a triple is "
                                  f"head<TAB>relation<TAB>tail")
        entities.append(block_codes(rows[:, [0, 2]]))
        relations.append(block_codes(rows[:, 1]))
        del chunk, rows
    names, pair_codes = merge_block_names(entities)
    rel_names, rel_codes = merge_block_names(relations)
    return names.astype(str), pair_codes.reshape(-1, 2), rel_names.astype(str), rel_codes


def _node_types(names: np.ndarray) -> tuple[list[str], np.ndarray, np.ndarray]:
    """``(types, type id of every name, local id of every name)``: typed when every name is
    ``TYPE:NAME`` (module docstring), else the one type ``entity``."""
    prefix, sep, rest = (np.char.partition(names, ":")[:, i] for i in range(3))
    typed = bool(names.size) and bool(np.all(sep == ":")) and bool(np.all(rest != ""))
    typed = typed and not np.char.startswith(rest, "/").any()
    types = sorted(set(prefix.tolist())) if typed else [ENTITY]
    if typed and not all(_NAME.fullmatch(t) for t in types):
        typed, types = False, [ENTITY]
    if not typed:
        return types, np.zeros(names.size, np.int64), np.arange(names.size, dtype=np.int64)
    type_id = np.searchsorted(np.array(types), prefix).astype(np.int64)
    order = np.argsort(type_id, kind="stable")  # by type, then by name (names are sorted)
    counts = np.bincount(type_id, minlength=len(types))
    local = np.empty(names.size, np.int64)
    local[order] = np.arange(names.size) - np.repeat(np.cumsum(counts) - counts, counts)
    return types, type_id, local


def read_triples(path: str | Path, *, name: str = "", chunk_bytes: int = DEFAULT_CHUNK_BYTES) -> HeteroGraph:
    """The :class:`HeteroGraph` of the triples file ``path`` (module docstring)."""
    path = existing_path(path)
    names, pairs, rel_input, rel_codes = _read_codes(path, chunk_bytes)
    types, type_id, local = _node_types(names)
    head_t, tail_t = type_id[pairs[:, 0]], type_id[pairs[:, 1]]
    order = np.argsort(rel_codes, kind="stable")
    bounds = np.concatenate([[0], np.cumsum(np.bincount(rel_codes, minlength=rel_input.size))])
    edges, renamed, taken = {}, {}, set()
    for r, input_name in enumerate(rel_input.tolist()):
        sel = order[bounds[r]:bounds[r + 1]]
        pair_types = np.unique(np.stack([head_t[sel], tail_t[sel]], axis=1), axis=0)
        if len(pair_types) > 1:
            (a, b), (c, d) = pair_types[:2].tolist()
            raise GraphError(f"{path}: relation {input_name!r} joins {types[a]} -> {types[b]} and {types[c]} -> "
                             f"{types[d]}; typed triples need one head type and one tail type per relation: "
                             f"give each type pair its own relation name")
        rel = relation_name(input_name, taken)
        taken.add(rel)
        if rel != input_name:
            renamed[rel] = input_name
        s, d = pair_types[0].tolist()
        edges[(types[s], rel, types[d])] = (local[pairs[sel, 0]], local[pairs[sel, 1]])
    counts = np.bincount(type_id, minlength=len(types))
    type_names = {t: names[type_id == i] for i, t in enumerate(types)}
    log.info("%s: read %d triples, %d %s, %d relations%s", path, pairs.shape[0], names.size,
             "entities" if types == [ENTITY] else f"nodes of {len(types)} types", len(edges),
             f" ({len(renamed)} renamed to valid names)" if renamed else "")
    try:
        return HeteroGraph({t: int(n) for t, n in zip(types, counts)}, edges, name=name or default_name(path),
                           type_names=type_names, relation_names=renamed)
    except GraphError as exc:
        raise GraphError(f"{path}: {exc}") from None
