"""A part's positive edges of each split, their original ids, and the negatives of a step.

The partition folder (``gnn-dist partition --edge-split``) stores each split's pairs in the part
that owns the destination, as new global ids (``link_train.npy`` ...; see ``docs/format.md``).
:class:`LinkEdges` adds what the hash negatives need: each pair's original ids and the map from
original ids back to new global ids (the folder's ``node_map.npy``, memory-mapped), and the
pairs a step scores (:meth:`LinkEdges.train_pairs`, :meth:`LinkEdges.eval_pairs`). A typed
folder's pairs are triples with a relation each (:mod:`.triples`: the corruptions of the right
node type).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch

from .negatives import EVAL_STEP, negative_destinations, pair_sample
from .triples import Triples

__all__ = ["LinkEdges", "LINK_SPLITS", "PairSet", "Scored", "load_node_map"]

LINK_SPLITS = ("train", "val", "test")

Scored = tuple[torch.Tensor, torch.Tensor, "torch.Tensor | None"]
"""Pairs to score: ``(src [E], dst [E] or [E, M], relation ids [E] or None)`` (new global ids)."""


@dataclass(eq=False)
class PairSet:
    """Some pairs of a split: ``pairs`` int64 ``[2, E]`` new global ids, ``original`` the same in
    original ids, ``relations`` int64 ``[E]`` (a typed split's; None otherwise)."""

    pairs: torch.Tensor
    original: torch.Tensor
    relations: torch.Tensor | None


def load_node_map(path: str | Path, meta: Any, *, verify: bool = True) -> np.ndarray:
    """int64 ``[N]``, memory-mapped: original id -> new global id, the ``node_map.npy`` of the
    partition folder ``path`` (``meta`` its ``PartitionMeta``; ``verify`` checks its sha256)."""
    from partitioners.format.layout import NODE_MAP_FILE
    from partitioners.format.npyio import load_array

    return load_array(Path(path), meta.files[NODE_MAP_FILE], mmap=True, check_hash=verify)


@dataclass(eq=False)
class LinkEdges:
    """This rank's positive pairs by split, with the whole graph's id maps.

    ``pairs[split]`` int64 ``[2, E_s]`` new global ids (row 0 sources, row 1 destinations owned by
    this rank); ``original[split]`` the same pairs' original ids; ``global_counts[split]`` the
    pairs of the split over all parts (from the metadata); ``node_map`` int64 ``[N]`` original id
    -> new global id; ``starts`` ``P + 1`` ints (rank ``q`` owns ``[starts[q], starts[q+1])``).
    """

    pairs: dict[str, torch.Tensor]
    original: dict[str, torch.Tensor]
    global_counts: dict[str, int]
    node_map: np.ndarray
    starts: list[int]
    triples: Triples | None = None
    """A typed split's relations and node types (None: pairs of a homogeneous graph)."""

    @property
    def num_nodes(self) -> int:
        return int(self.node_map.shape[0])

    @classmethod
    def from_partition(cls, part: Any, *, verify: bool = True) -> "LinkEdges":
        """The link edges of a :class:`~gnn_dist.partition.LocalPartition` whose folder has an edge
        split (``ValueError`` naming the folder and the fix otherwise)."""
        split = getattr(part.meta, "edge_split", None)
        if split is None or part.link_pairs is None:
            raise ValueError(f"{part.path}: the partition has no edge split to train link prediction on; "
                             f"partition with gnn-dist partition ... --edge-split 0.85,0.05,0.1")
        node_map = load_node_map(part.path, part.meta, verify=verify)
        inverse = np.empty(node_map.shape[0], dtype=np.int64)   # new global id -> original id (transient)
        inverse[np.asarray(node_map)] = np.arange(node_map.shape[0], dtype=np.int64)
        original = {s: torch.from_numpy(inverse[p.numpy()]) for s, p in part.link_pairs.items()}
        counts = {s: int(split["counts"][s]) for s in LINK_SPLITS}
        triples = None if part.link_relations is None else Triples.of(part.typed, part.link_relations)
        return cls(pairs=dict(part.link_pairs), original=original, global_counts=counts, node_map=node_map,
                   starts=[int(v) for v in part.meta.part_starts()], triples=triples)

    def to_new(self, original: np.ndarray) -> torch.Tensor:
        """int64 tensor of the new global ids of original ids ``original`` (any shape)."""
        return torch.from_numpy(np.asarray(self.node_map[original.reshape(-1)], dtype=np.int64).reshape(original.shape))

    def negatives(self, split: str, seed: int, step: int, k: int) -> torch.Tensor:
        """int64 ``[E_s, k]`` new global ids: the ``k`` negative destinations of each pair of
        ``split`` at ``step`` (:func:`~.negatives.negative_destinations`, keyed by original ids)."""
        return self.negatives_of(self.original[split], seed, step, k)

    def negatives_of(self, original: torch.Tensor, seed: int, step: int, k: int) -> torch.Tensor:
        """:meth:`negatives` of the pairs of original ids ``original`` ``[2, E]``."""
        o = original.numpy()
        return self.to_new(negative_destinations(seed, step, o[0], o[1], self.num_nodes, k))

    def sample(self, split: str, fraction: float, seed: int) -> PairSet:
        """The pairs of ``split`` kept by a hash of ``(seed, original ids)`` with probability
        ``fraction`` (:func:`~.negatives.pair_sample`): the same pairs on any number of ranks; all
        of them when ``fraction >= 1``."""
        rels = None if self.triples is None else self.triples.relations[split]
        found = PairSet(self.pairs[split], self.original[split], rels)
        if fraction >= 1:
            return found
        o = found.original.numpy()
        keep = torch.from_numpy(pair_sample(seed, o[0], o[1], fraction))
        return PairSet(found.pairs[:, keep], found.original[:, keep], None if rels is None else rels[keep])

    def train_pairs(self, seed: int, epoch: int) -> list[Scored]:
        """The positives of this rank's training split and one negative each at ``epoch``: a
        corrupted destination (a typed split: a corrupted head or tail of its type)."""
        if self.triples is not None:
            return self.triples.train_pairs(self.sample("train", 1.0, seed), seed, epoch, self.to_new)
        src, dst = self.pairs["train"]
        return [(src, dst, None), (src, self.negatives("train", seed, epoch, 1)[:, 0], None)]

    def eval_pairs(self, found: PairSet, split: str, seed: int, k: int) -> tuple[Scored, list[Scored]]:
        """``found``'s positives and their blocks of ``k`` fixed negatives each (split ``split``'s
        draw): one block of corrupted destinations; a typed split's two, tails then heads."""
        if self.triples is not None:
            return self.triples.eval_pairs(found, seed, EVAL_STEP[split], k, self.to_new)
        src, dst = found.pairs
        return (src, dst, None), [(src, self.negatives_of(found.original, seed, EVAL_STEP[split], k), None)]
