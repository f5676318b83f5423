"""A seeded random train/val/test split of a graph's nodes (``gnn-dist partition --split``).

The masks are :func:`partitioners.synthetic.random_split`'s (the split of the built-in
datasets): a seeded permutation of the nodes cut at the rounded cumulative fractions, each set
at least one node; fractions summing to less than 1 leave the other nodes in no split. The same
graph size, fractions and seed always give the same masks.

This module is torch-free.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Sequence

from ..graph import Graph

__all__ = ["check_fractions", "with_random_split"]


def check_fractions(fractions: Sequence[float]) -> tuple[float, float, float]:
    """``(train, val, test)``: three fractions in ``(0, 1]`` summing to at most 1; a ValueError
    says what is wrong (the flag's check, before any reading)."""
    values = tuple(float(f) for f in fractions)
    if len(values) != 3:
        raise ValueError(f"a split is 3 fractions TRAIN,VAL,TEST (e.g. 0.6,0.2,0.2), got {len(values)}")
    if not all(0.0 < f <= 1.0 for f in values):  # also refuses NaN
        raise ValueError(f"split fractions must be in (0, 1], got {','.join(map(str, values))}")
    if sum(values) > 1.0 + 1e-9:
        raise ValueError(f"split fractions sum to {sum(values):g}, more than 1; e.g. 0.6,0.2,0.2")
    return values  # type: ignore[return-value]


def with_random_split(graph: Graph, fractions: Sequence[float], seed: int) -> tuple[Graph, dict[str, Any]]:
    """``graph`` with random train/val/test masks, and the record ``partition.json`` keeps as
    ``split`` (``kind``, ``fractions``, ``seed``, ``counts``)."""
    from ..synthetic import random_split

    values = check_fractions(fractions)
    train, val, test = random_split(graph.num_nodes, *values, seed=int(seed))
    record = {"kind": "random", "fractions": list(values), "seed": int(seed),
              "counts": {"train": int(train.sum()), "val": int(val.sum()), "test": int(test.sum())}}
    return dataclasses.replace(graph, train_mask=train, val_mask=val, test_mask=test), record
