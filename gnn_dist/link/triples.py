"""Link prediction on relations: a typed split's triples and their corruptions of the right type.

A typed folder's edge split (``gnn-dist partition --edge-split`` on a typed graph) holds
triples ``(head, relation, tail)``: the ``link_*.npy`` pairs (head, tail) and their relation
ids. Their negatives replace one end by a node **of that end's type** (the relation's source
type for a head, its destination type for a tail), drawn by a hash of the triple's original ids
(:func:`~.negatives.typed_corruptions`), so P ranks draw what one rank draws:

- training: one negative per triple, its head or its tail corrupted (:func:`~.negatives.corrupted_side`);
- evaluation: ``M`` tail corruptions and ``M`` head corruptions per triple, each set ranked
  against the triple on its own (the usual "both directions" of knowledge-graph evaluation).

A head corruption ``(h', r, t)`` is scored as the pair ``(t, h')``: the decoders are symmetric
in their two ends (DistMult's :math:`\\sum_k e_h w_r e_t` is), so the anchor of a negative is the
end that stays.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

import numpy as np
import torch

from .negatives import corrupted_side, typed_corruptions

__all__ = ["Triples"]


@dataclass(eq=False)
class Triples:
    """This rank's triples' relations, with the original-id range of each relation's ends."""

    relations: dict[str, torch.Tensor]
    """split -> int64 ``[E_s]``: each stored pair's relation id."""
    ends: np.ndarray
    """int64 ``[R, 2, 2]``: for relation ``r`` and end ``e`` (0 tail, 1 head), ``(offset,
    count)`` of the end's node type in original ids."""

    @classmethod
    def of(cls, typed: Any, relations: dict[str, torch.Tensor]) -> "Triples":
        """From a rank's :class:`~gnn_dist.hetero.TypedPart` and its triples' relation ids."""
        tid = {n: i for i, n in enumerate(typed.type_names)}
        ends = np.array([[[typed.offsets[tid[d]], typed.counts[tid[d]]], [typed.offsets[tid[s]], typed.counts[tid[s]]]]
                         for s, _, d in typed.relations], dtype=np.int64).reshape(-1, 2, 2)
        return cls(relations=dict(relations), ends=ends)

    def _corrupt(self, found: Any, seed: int, step: int, side: np.ndarray, k: int) -> np.ndarray:
        """``[E, k]`` original ids: ``k`` corruptions of end ``side`` of each triple of ``found``."""
        o, rel = found.original.numpy(), found.relations.numpy()
        span = self.ends[rel, side]
        return typed_corruptions(seed, step, o[0], o[1], rel, side, span[:, 0], span[:, 1], k)

    def train_pairs(self, found: Any, seed: int, epoch: int,
                    to_new: Callable[[np.ndarray], torch.Tensor]) -> list[tuple[torch.Tensor, ...]]:
        """The triples of ``found`` (a :class:`~.edges.PairSet`) and one corruption each at ``epoch``:
        ``[(head, tail, rel), (anchor, corrupted, rel)]``."""
        (head, tail), rel = found.pairs, found.relations
        o = found.original.numpy()
        side = corrupted_side(seed, epoch, o[0], o[1], rel.numpy())
        corrupted = to_new(self._corrupt(found, seed, epoch, side, 1)[:, 0])
        anchor = torch.where(torch.from_numpy(side == 1), tail, head)
        return [(head, tail, rel), (anchor, corrupted, rel)]

    def eval_pairs(self, found: Any, seed: int, step: int, k: int,
                   to_new: Callable[[np.ndarray], torch.Tensor]) -> tuple[tuple, list[tuple]]:
        """The triples of ``found`` and two blocks of ``k`` fixed corruptions each (at ``step``):
        ``(head, [E, k] tails, rel)``, then ``(tail, [E, k] heads, rel)``."""
        (head, tail), rel = found.pairs, found.relations
        n = rel.numel()
        tails = to_new(self._corrupt(found, seed, step, np.zeros(n, dtype=np.int64), k))
        heads = to_new(self._corrupt(found, seed, step, np.ones(n, dtype=np.int64), k))
        return (head, tail, rel), [(head, tails, rel), (tail, heads, rel)]
