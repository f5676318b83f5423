"""A seeded train/val/test split of a typed graph's edges, per relation, for link prediction on
relations (knowledge graphs; ``gnn-dist partition --edge-split ... [--target-relation NAME]``).

The *target relations* are the ones named, or by default every relation that is not the
reverse of another (``rev_NAME`` made by ``--add-reverse`` is left out when ``NAME`` joins the
same types the other way). For each target relation ``r = (s, name, d)``, in relation order, the
candidates are its distinct ``(head, tail)`` pairs (local ids; a self-loop of a relation from a
type into itself stays in the graph and is no candidate). A permutation seeded by ``(seed, r)``
(``numpy.random.default_rng([seed, r])``, so each relation's split depends on its own edges only)
of the pairs sorted by ``(head, tail)`` is cut like the homogeneous split
(:func:`partitioners.io.edge_split.split_sizes`: val, then test, then train, val and test at
least one pair each). Pairs are *directed*: ``(h, r, t)`` is not ``(t, r, h)``.

The val and test triples are removed from the message-passing graph: every edge ``h -> t`` of
``r`` (duplicates too), and every edge ``t -> h`` of ``r``'s reverse (the relation ``rev_NAME``
from ``d`` to ``s``, or ``NAME`` itself when ``r`` is ``rev_NAME``), with their weights, so no
held-out triple leaks into the aggregation. Training triples stay.

The triples are kept as union ids (``head``, ``tail``: type offset + local id) with their
relation id, in :attr:`TypedLinkSplit.pairs` / :attr:`TypedLinkSplit.relations`; the typed
writer stores them per part (``link_*.npy`` and ``link_*_rel.npy``: docs/format.md). Torch-free.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Sequence

import numpy as np

from ..errors import GraphError
from ..format.typed_split import reverse_candidate
from ..io.edge_split import LINK_KINDS, split_sizes
from ..io.split import check_fractions
from .graph import REVERSE_PREFIX, HeteroGraph, Relation

__all__ = ["TypedLinkSplit", "typed_edge_split", "target_relations", "reverse_of"]


@dataclass(eq=False)
class TypedLinkSplit:
    """The triples of each split in union ids (what the typed writer stores)."""

    pairs: dict[str, np.ndarray]
    """split -> int64 ``[2, E_s]``: row 0 the heads, row 1 the tails (union ids)."""
    relations: dict[str, np.ndarray]
    """split -> int32 ``[E_s]``: each triple's relation id."""
    record: dict[str, Any]
    """``partition.json``'s ``edge_split``: the homogeneous record's keys plus ``relations`` (the
    target relations' names) and ``relation_counts`` (name -> triples per split)."""


def reverse_of(hg: HeteroGraph, rel: Relation) -> Relation | None:
    """The relation that reverses ``rel`` (``rev_NAME`` from ``d`` to ``s`` for ``NAME``, or
    ``NAME`` for ``rev_NAME``), None when the graph has none."""
    mate = reverse_candidate(rel)
    return mate if mate in hg.edges else None


def target_relations(hg: HeteroGraph, names: Sequence[str] | None) -> list[Relation]:
    """The relations named (by name, or by the input's name of a renamed one: ``/film/genre``;
    GraphError, one line, for a name that is not a relation), or every relation that is not a
    ``rev_`` reverse of another (module docstring)."""
    by_name = {r[1]: r for r in hg.relations}
    if names:
        given = {v: k for k, v in hg.relation_names.items()}   # the input's names of renamed relations
        unknown = [n for n in names if n not in by_name and n not in given]
        if unknown:
            raise GraphError(f"--target-relation {unknown[0]}: the graph has no relation of that name (its "
                             f"relations: {', '.join(by_name)})")
        wanted = {given.get(n, n) for n in names}
        return [r for r in hg.relations if r[1] in wanted]
    return [r for r in hg.relations if not (r[1].startswith(REVERSE_PREFIX) and reverse_of(hg, r) is not None)]


def _pair_keys(src: np.ndarray, dst: np.ndarray, n_dst: int) -> np.ndarray:
    return src.astype(np.int64) * n_dst + dst.astype(np.int64)


def typed_edge_split(hg: HeteroGraph, fractions: Sequence[float], seed: int,
                     relations: Sequence[str] | None = None) -> HeteroGraph:
    """``hg`` without its held-out triples (and their reverses), with the split as its
    :attr:`~partitioners.hetero.HeteroGraph.link_split` (module docstring), which
    :func:`partitioners.api.partition_graph` writes into the typed folder. GraphError (one line naming the relation) for an unknown relation or one with
    too few distinct pairs for a validation and a test triple."""
    train_f, val_f, test_f = check_fractions(fractions)
    targets = target_relations(hg, relations)
    off = hg.type_offsets
    tid = {t: i for i, t in enumerate(hg.node_types)}
    rel_id = {r: i for i, r in enumerate(hg.relations)}
    edges = dict(hg.edges)
    keep = {r: np.ones(src.size, dtype=bool) for r, (src, _) in hg.edges.items()}
    chosen: dict[str, list[tuple[np.ndarray, np.ndarray, np.ndarray]]] = {k: [] for k in LINK_KINDS}
    per_relation: dict[str, dict[str, int]] = {}
    for rel in targets:
        s, name, d = rel
        src, dst = edges[rel]
        n_dst = hg.num_nodes_dict[d]
        cand = _pair_keys(src, dst, n_dst)
        pairs = np.unique(cand[(src != dst) | (s != d)])
        try:
            counts = split_sizes(pairs.size, (train_f, val_f, test_f), f"relation {name!r}")
        except ValueError as exc:
            raise GraphError(f"{exc}; name other relations with --target-relation") from None
        order = np.random.default_rng([int(seed), rel_id[rel]]).permutation(pairs.size)
        cut = np.concatenate([[0], np.cumsum(counts)])
        split = {k: np.sort(pairs[order[cut[i]:cut[i + 1]]]) for i, k in enumerate(("val", "test", "train"))}
        held = np.concatenate([split["val"], split["test"]])
        keep[rel] &= ~np.isin(cand, held)
        mate = reverse_of(hg, rel)
        if mate is not None:   # the mate's edge t -> h is the held-out h -> t reversed
            msrc, mdst = edges[mate]
            keep[mate] &= ~np.isin(_pair_keys(mdst, msrc, n_dst), held)
        for k in LINK_KINDS:
            head, tail = split[k] // n_dst + off[tid[s]], split[k] % n_dst + off[tid[d]]
            chosen[k].append((head, tail, np.full(head.size, rel_id[rel], dtype=np.int32)))
        per_relation[name] = {k: int(split[k].size) for k in LINK_KINDS}
    removed = sum(int(np.count_nonzero(~m)) for m in keep.values())
    kept = {r: (src[keep[r]], dst[keep[r]]) for r, (src, dst) in edges.items()}
    weights = {r: w[keep[r]] for r, w in hg.edge_weights.items()}
    out = hg._replace(edges=kept, edge_weights=weights or None)
    pairs_out = {k: np.stack([np.concatenate([c[0] for c in chosen[k]]),
                              np.concatenate([c[1] for c in chosen[k]])]).astype(np.int64) for k in LINK_KINDS}
    rels_out = {k: np.concatenate([c[2] for c in chosen[k]]) for k in LINK_KINDS}
    record = {"fractions": [train_f, val_f, test_f], "seed": int(seed),
              "counts": {k: int(rels_out[k].size) for k in LINK_KINDS}, "removed_edges": removed,
              "relations": [r[1] for r in targets], "relation_counts": per_relation}
    out.link_split = TypedLinkSplit(pairs=pairs_out, relations=rels_out, record=record)
    return out
