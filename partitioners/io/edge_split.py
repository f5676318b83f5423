"""A seeded train/val/test split of a graph's edges for link prediction (``gnn-dist partition
--edge-split``).

The candidates are the graph's unique unordered pairs ``{u, v}``, ``u != v``, of original ids,
each oriented ``(src, dst) = (min, max)``. A seeded permutation (``numpy.random.default_rng(seed)``)
of the pairs, sorted by ``(src, dst)``, is cut at the rounded cumulative fractions in the order
val, test, train: sizes ``round(c_i M) - round(c_{i-1} M)`` of ``M`` pairs (``c`` the cumulative
sums of VAL, TEST, TRAIN), val and test raised to at least 1 pair. Pairs in none of the three stay
in the graph but are no positives.

The val and test pairs are removed from the message-passing graph in both directions, every
duplicate, with their ``edge_weight`` and ``edge_attr`` rows: the partition (CSR, degrees,
halos) is of the training graph, so no evaluation edge leaks into the aggregation. The training
pairs stay. The same graph, fractions and seed give the same pairs, whatever the partition.

This module is torch-free.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Sequence

import numpy as np

from ..graph import Graph
from .split import check_fractions

__all__ = ["LINK_KINDS", "with_edge_split", "split_sizes"]

LINK_KINDS = ("train", "val", "test")
"""The sets of :attr:`Graph.link_pairs`, in the order of the fractions."""


def split_sizes(m: int, fractions: tuple[float, float, float], what: str) -> np.ndarray:
    """int64 ``[3]``: the val, test and train sizes of ``m`` candidate pairs cut at the rounded
    cumulative ``(train, val, test)`` fractions (val, then test, then train; val and test at least
    one pair each); a ValueError naming ``what`` when ``m`` is too few for that."""
    train_f, val_f, test_f = fractions
    bounds = np.round(np.cumsum([0.0, val_f, test_f, train_f]) * m).astype(np.int64)
    counts = np.diff(bounds)
    counts[:2] = np.maximum(counts[:2], 1)
    if counts[0] + counts[1] > m:
        raise ValueError(f"--edge-split: {what} has {m} edge pairs {{u, v}} (u != v), too few for a "
                         f"non-empty validation and test set")
    counts[2] = min(counts[2], m - counts[0] - counts[1])
    return counts


def with_edge_split(graph: Graph, fractions: Sequence[float], seed: int) -> tuple[Graph, dict[str, Any]]:
    """``graph`` without its val/test pairs (both directions) and with :attr:`Graph.link_pairs`,
    and the record ``partition.json`` keeps as ``edge_split`` (``fractions``, ``seed``,
    ``counts``, ``removed_edges``: the directed edges removed).

    Raises ValueError for bad fractions, too few pairs for a non-empty val and test set, or a
    graph read out of core (whose edges are memory maps; split an in-memory graph).
    """
    if graph.scratch_dir is not None:
        raise ValueError("an edge split needs the graph in memory, not read out of core (npy-dir): "
                         "give the graph as another --input format, or split its edges yourself")
    train_f, val_f, test_f = check_fractions(fractions)
    n = graph.num_nodes
    src = np.asarray(graph.indices, dtype=np.int64)
    dst = np.repeat(np.arange(n, dtype=np.int64), graph.in_degree())
    key = np.minimum(src, dst) * n + np.maximum(src, dst)   # unordered pair; self-loops are u * (n + 1)
    pairs = np.unique(key[src != dst])
    m = pairs.size
    counts = split_sizes(m, (train_f, val_f, test_f), "the graph")
    order = np.random.default_rng(int(seed)).permutation(m)
    cut = np.concatenate([[0], np.cumsum(counts)])
    chosen = {kind: np.sort(pairs[order[cut[i]:cut[i + 1]]]) for i, kind in enumerate(("val", "test", "train"))}
    keep = ~np.isin(key, np.concatenate([chosen["val"], chosen["test"]]))
    indptr = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(np.bincount(dst[keep], minlength=n), out=indptr[1:])
    link_pairs = {kind: np.stack([chosen[kind] // n, chosen[kind] % n]) for kind in LINK_KINDS}
    split = dataclasses.replace(
        graph, indptr=indptr, indices=graph.indices[keep], link_pairs=link_pairs,
        edge_weight=None if graph.edge_weight is None else graph.edge_weight[keep],
        edge_attr=None if graph.edge_attr is None else graph.edge_attr[keep])
    record = {"fractions": [train_f, val_f, test_f], "seed": int(seed),
              "counts": {kind: int(link_pairs[kind].shape[1]) for kind in LINK_KINDS},
              "removed_edges": int(keep.size - np.count_nonzero(keep))}
    return split, record
