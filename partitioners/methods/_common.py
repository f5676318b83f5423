"""Helpers shared by the partition methods: argument checks and balance weights.

Balance criteria (``balance=`` of every method) and the vertex weight each one gives:

  ``nodes``  1 per node (part sizes)
  ``edges``  the node's in-degree (the edges a part stores: edges are counted at their destination)
  ``train``  1 per training node (``graph.train_mask``)

Weights are an int64 array ``W_CN`` of shape ``[C, N]``, one row per criterion, in the order asked.
This module is torch-free.
"""

from __future__ import annotations

import logging
import math
from typing import Any, Iterable, Iterator

import numpy as np

from ..graph import Graph

__all__ = ["BALANCE_CRITERIA", "balance_bounds", "check_num_parts", "check_imbalance",
           "normalize_balance", "vertex_weights", "progress_bar", "shuffled_chunks"]

logger = logging.getLogger(__name__)

BALANCE_CRITERIA = ("nodes", "edges", "train")
"""The balance criteria every method understands."""


def check_num_parts(num_parts: Any, num_nodes: int) -> int:
    """``num_parts`` as an int; ValueError unless ``1 <= num_parts <= num_nodes``."""
    if isinstance(num_parts, bool) or not isinstance(num_parts, (int, np.integer)):
        raise ValueError(f"num_parts must be an integer, got {num_parts!r}")
    num_parts = int(num_parts)
    if num_parts < 1:
        raise ValueError(f"num_parts={num_parts} is invalid; it must be at least 1")
    if num_parts > num_nodes:
        raise ValueError(f"num_parts={num_parts} exceeds num_nodes={num_nodes}; "
                         f"use at most {num_nodes} parts")
    return num_parts


def check_imbalance(imbalance: Any) -> float:
    """``imbalance`` as a float; ValueError unless it is finite and ``>= 0``."""
    try:
        value = float(imbalance)
    except (TypeError, ValueError):
        raise ValueError(f"imbalance must be a number such as 0.03, got {imbalance!r}") from None
    if not math.isfinite(value) or value < 0:
        raise ValueError(f"imbalance={imbalance!r} is invalid; it must be a finite number >= 0 "
                         f"(0.03 allows parts 3% above the mean)")
    return value


def normalize_balance(balance: str | Iterable[str]) -> tuple[str, ...]:
    """Validate ``balance`` (a name or names from :data:`BALANCE_CRITERIA`); duplicates dropped."""
    names = (balance,) if isinstance(balance, str) else tuple(balance)
    if not names:
        raise ValueError(f"balance is empty; give one or more of {', '.join(BALANCE_CRITERIA)}")
    out: list[str] = []
    for name in names:
        if name not in BALANCE_CRITERIA:
            raise ValueError(f"unknown balance criterion {name!r}; valid criteria are "
                             f"{', '.join(BALANCE_CRITERIA)}")
        if name not in out:
            out.append(name)
    return tuple(out)


def vertex_weights(graph: Graph, balance: str | Iterable[str]) -> tuple[tuple[str, ...], np.ndarray]:
    """The criteria kept and their weights ``W_CN`` (int64 ``[C, N]``).

    A criterion whose total weight is 0 (no edges, an all-False train mask) constrains nothing:
    it is dropped with a warning; if nothing is left, ``nodes`` is used. ``train`` without a
    ``train_mask`` is a ValueError.
    """
    names = normalize_balance(balance)
    rows: list[np.ndarray] = []
    kept: list[str] = []
    for name in names:
        if name == "nodes":
            w = np.ones(graph.num_nodes, dtype=np.int64)
        elif name == "edges":
            w = np.diff(graph.indptr).astype(np.int64, copy=False)
        else:
            if graph.train_mask is None:
                raise ValueError("balance criterion 'train' needs a train_mask, but the graph has none; "
                                 "set graph.train_mask or drop 'train' from balance")
            w = graph.train_mask.astype(np.int64)
        if int(w.sum()) == 0:
            logger.warning("balance criterion %r has total weight 0 on this graph; ignoring it", name)
            continue
        kept.append(name)
        rows.append(w)
    if not rows:
        kept, rows = ["nodes"], [np.ones(graph.num_nodes, dtype=np.int64)]
    return tuple(kept), np.stack(rows)


def balance_bounds(W_CN: np.ndarray, num_parts: int, imbalance: float) -> np.ndarray:
    """float64 ``[C]``: the largest allowed part weight per criterion.

    ``max((1 + imbalance) * mean, ceil(mean))`` with ``mean = total / num_parts``: the ceiling
    keeps a bound reachable when the mean is fractional (3 nodes in 2 parts need a part of 2).
    """
    mean = W_CN.sum(axis=1).astype(np.float64) / num_parts
    return np.maximum((1.0 + imbalance) * mean, np.ceil(mean))


def shuffled_chunks(graph: Graph, chunk_nodes: int, seed: int,
                    ) -> Iterator[tuple[int, np.ndarray, np.ndarray]]:
    """Like :meth:`Graph.iter_in_adjacency`, but the chunks come in a seeded random order.

    Each chunk is read once (a slice of ``indptr``/``indices``, so a memory-mapped graph reads
    only that chunk); nodes keep id order within a chunk.
    """
    n = graph.num_nodes
    starts = np.arange(0, n, chunk_nodes)
    order = np.random.default_rng(seed).permutation(starts.size)
    for lo in starts[order]:
        lo = int(lo)
        hi = min(n, lo + chunk_nodes)
        a, b = int(graph.indptr[lo]), int(graph.indptr[hi])
        yield lo, np.asarray(graph.indptr[lo:hi + 1]) - a, np.asarray(graph.indices[a:b])


def progress_bar(enabled: bool, total: int, desc: str) -> Any:
    """A tqdm bar when ``enabled`` (and tqdm imports), else None."""
    if not enabled:
        return None
    try:
        from tqdm.auto import tqdm
    except ImportError:  # tqdm is a dependency, but progress is never worth a crash
        logger.info("tqdm is not installed; no progress bar for %s", desc)
        return None
    return tqdm(total=total, desc=desc, unit="node")
