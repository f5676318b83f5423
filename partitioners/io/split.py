"""A seeded random train/val/test split of a graph's nodes (``gnn-dist partition --split``).

The nodes are shuffled by a generator seeded with ``(seed, SPLIT_STREAM)`` (so the split does not
share its random stream with the partitioning method seeded with the same ``seed``), then cut at
the rounded cumulative fractions: train = the first ``round(f_train N)``, val = up to
``round((f_train + f_val) N)``, test = up to ``round((f_train + f_val + f_test) N)``. Fractions
summing to less than 1 leave the rest of the nodes in no split. The same graph size, fractions
and seed always give the same masks.

This module is torch-free.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Sequence

import numpy as np

from ..graph import Graph

__all__ = ["SPLIT_STREAM", "check_fractions", "random_split", "with_random_split"]

SPLIT_STREAM = 0x5711
"""Second word of the split's seed sequence."""


def check_fractions(fractions: Sequence[float]) -> tuple[float, float, float]:
    """``(train, val, test)``, each in ``[0, 1]``, summing to at most 1, train above 0; a
    ValueError says what is wrong."""
    values = tuple(float(f) for f in fractions)
    if len(values) != 3:
        raise ValueError(f"a split is 3 fractions TRAIN,VAL,TEST (e.g. 0.6,0.2,0.2), got {len(values)}")
    if not all(0.0 <= f <= 1.0 for f in values):  # also refuses NaN
        raise ValueError(f"split fractions must be in [0, 1], got {','.join(map(str, values))}")
    if sum(values) > 1.0 + 1e-9:
        raise ValueError(f"split fractions sum to {sum(values):g}, more than 1; e.g. 0.6,0.2,0.2")
    if values[0] == 0.0:
        raise ValueError("the train fraction is 0: the folder would have no training nodes")
    return values  # type: ignore[return-value]


def random_split(num_nodes: int, fractions: Sequence[float], seed: int,
                 ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Disjoint bool ``[num_nodes]`` train/val/test masks (see the module docstring)."""
    train, val, test = check_fractions(fractions)
    order = np.random.default_rng([int(seed), SPLIT_STREAM]).permutation(num_nodes)
    cuts = [min(num_nodes, int(round(c * num_nodes))) for c in (train, train + val, train + val + test)]
    masks = []
    lo = 0
    for hi in cuts:
        m = np.zeros(num_nodes, dtype=bool)
        m[order[lo:hi]] = True
        masks.append(m)
        lo = hi
    return masks[0], masks[1], masks[2]


def with_random_split(graph: Graph, fractions: Sequence[float], seed: int) -> tuple[Graph, dict[str, Any]]:
    """``graph`` with :func:`random_split` masks, and the record ``partition.json`` keeps as ``split``."""
    train, val, test = random_split(graph.num_nodes, fractions, seed)
    record = {"kind": "random", "fractions": list(check_fractions(fractions)), "seed": int(seed),
              "counts": {"train": int(train.sum()), "val": int(val.sum()), "test": int(test.sum())}}
    return dataclasses.replace(graph, train_mask=train, val_mask=val, test_mask=test), record
