"""Boundary sampling (BNS-GCN): each epoch, each rank sends a random fraction of its boundary
rows to each peer, rescaled so the aggregate is unbiased.

Reference: Wan et al., "BNS-GCN: Efficient Full-Graph Training of Graph Convolutional Networks
with Partition-Parallelism and Random Boundary Node Sampling", MLSys 2022
(https://arxiv.org/abs/2203.10983).

For the rows rank ``s`` sends to rank ``r`` (``n`` of them, in the order ``r`` stores them as
halo rows) at ``(epoch, layer)``, both ranks draw the same ``k = max(1, round(p * n))`` of the
``n`` positions uniformly without replacement, from a generator seeded with
``(seed, epoch, layer, s, r)``: the receiver knows ``n`` (its halo count from ``s``), so no
extra round trip is needed. Each sampled row arrives multiplied by ``n / k`` (``1 / p`` up to
rounding) and the other halo rows read as 0, so every row's expected value is its exact value:
an aggregation that is linear in the source rows (GCN, GraphSAGE, GIN) is unbiased. The backward
sends the sampled rows' gradients with the same factor (the transpose). ``p = 1`` selects every
row with factor 1: exactly the full exchange.
"""

from __future__ import annotations

import numpy as np
import torch

from ..distributed.halo import HaloExchanger, HaloSubset

__all__ = ["BoundarySampler"]


class BoundarySampler:
    """The rows of each ``(epoch, layer)`` exchange under boundary sampling (a ``SubsetFn``).

    Args:
        exchanger: the part's halo exchanger (its counts and rank).
        rate: the fraction ``p`` in ``(0, 1]`` of boundary rows sent to each peer.
        seed: shared by all ranks (the trainer uses the model's seed).
    """

    def __init__(self, exchanger: HaloExchanger, rate: float, seed: int = 0) -> None:
        if not 0.0 < rate <= 1.0:
            raise ValueError(f"boundary_sample_rate={rate} must be in (0, 1]")
        self.exchanger = exchanger
        self.rate = float(rate)
        self.seed = int(seed)

    def _pick(self, epoch: int, layer: int, sender: int, receiver: int, n: int) -> torch.Tensor:
        """Sorted positions ``[k]`` in ``[0, n)`` chosen for this pair (the same on both sides)."""
        if n == 0:
            return torch.zeros(0, dtype=torch.long)
        k = max(1, round(self.rate * n))
        if k >= n:
            return torch.arange(n, dtype=torch.long)
        key = np.random.SeedSequence([self.seed & (2**63 - 1), epoch, layer, sender, receiver])
        gen = torch.Generator().manual_seed(int(key.generate_state(1, np.uint64)[0] >> np.uint64(1)))
        return torch.sort(torch.randperm(n, generator=gen)[:k]).values

    def __call__(self, epoch: int, layer: int) -> HaloSubset:
        ex = self.exchanger
        me = ex.rank
        send_pos, send_counts, recv_pos, recv_counts, scales = [], [], [], [], []
        for q in range(ex.world_size):
            mine = self._pick(epoch, layer, me, q, ex.send_counts[q])
            send_pos.append(ex.send_offsets[q] + mine)
            send_counts.append(int(mine.numel()))
            theirs = self._pick(epoch, layer, q, me, ex.halo_counts[q])
            recv_pos.append(ex.halo_offsets[q] + theirs)
            recv_counts.append(int(theirs.numel()))
            if theirs.numel():
                scales.append(torch.full((theirs.numel(),), ex.halo_counts[q] / theirs.numel(),
                                         dtype=torch.float64))
        return HaloSubset(send_pos=torch.cat(send_pos), send_counts=send_counts,
                          recv_pos=torch.cat(recv_pos), recv_counts=recv_counts,
                          recv_scale=torch.cat(scales) if scales else torch.zeros(0, dtype=torch.float64))

    def __repr__(self) -> str:
        return f"BoundarySampler(rate={self.rate}, seed={self.seed})"
