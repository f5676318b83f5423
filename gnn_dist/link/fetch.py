"""The embedding rows of any nodes, fetched from the ranks that own them (a differentiable exchange).

A rank needs the rows of a step's edge endpoints (its positives' sources, its negatives'
destinations), wherever they live. :class:`RowFetch` is built once per step for those nodes: the
ranks tell each owner which of its rows they need (one ``all_to_all_single`` of counts, one of
ids: a named collective bounded by the group's timeout), and the rows then travel through a
:class:`~gnn_dist.distributed.halo.HaloExchanger` whose halo is exactly the requested rows — the
halo machinery, so the backward sends each row's gradient back to its owner and scatter-adds it
into the row that was sent.

Shapes: ``gids`` ``[M]`` new global ids (repeats allowed), ``h_inner`` ``[I, D]`` -> ``[M, D]``.
"""

from __future__ import annotations

from typing import Sequence

import torch
import torch.distributed as dist

from ..distributed import get_rank, get_world_size, is_distributed
from ..distributed.collectives import comm_device, named_collective
from ..distributed.halo import HaloExchanger
from ..distributed.keepalive import keep_alive

__all__ = ["RowFetch"]


def _offsets(counts: Sequence[int]) -> list[int]:
    out = [0]
    for c in counts:
        out.append(out[-1] + int(c))
    return out


class RowFetch:
    """The rows of nodes ``gids`` of every rank's inner-row tensor (a collective to build: every
    rank builds its own at the same point).

    Args:
        gids: int64 ``[M]`` new global ids of the rows this rank needs (any owner, any order).
        starts: ``P + 1`` ints: rank ``q`` owns new global ids ``[starts[q], starts[q+1])`` (its
            inner rows, in that order).
        num_inner: this rank's inner rows ``I``.
        group: the process group (default: the default group).
    """

    def __init__(self, gids: torch.Tensor, starts: Sequence[int], num_inner: int,
                 group: dist.ProcessGroup | None = None) -> None:
        self.rank, self.world_size = get_rank(group), get_world_size(group)
        if len(starts) != self.world_size + 1:
            raise ValueError(f"starts has {len(starts)} entries for {self.world_size} ranks (needs P + 1)")
        gids = gids.to(torch.int64).cpu()
        uniq, inverse = torch.unique(gids, return_inverse=True)   # sorted: grouped by owner, ascending
        bounds = torch.tensor(list(starts), dtype=torch.int64)
        owner = torch.searchsorted(bounds, uniq, right=True) - 1
        if uniq.numel() and (int(uniq[0]) < starts[0] or int(uniq[-1]) >= starts[-1]):
            raise ValueError(f"node ids must be in [{starts[0]}, {starts[-1]}), got {int(uniq[0])}..{int(uniq[-1])}")
        mine = owner == self.rank
        remote = uniq[~mine]
        recv_counts = torch.bincount(owner[~mine], minlength=self.world_size).tolist()
        send_index, send_counts = self._requests(remote, recv_counts, group)
        start = int(starts[self.rank])
        self.exchanger = HaloExchanger(send_index - start, _offsets(send_counts), _offsets(recv_counts), num_inner,
                                       group=group, world_size=self.world_size, rank=self.rank, check=False)
        position = torch.empty_like(uniq)
        position[mine] = uniq[mine] - start
        position[~mine] = num_inner + torch.arange(remote.numel(), dtype=torch.int64)
        self.index = position[inverse]
        """int64 ``[M]``: the row of each requested node in the exchange's ``[I + R]`` output."""
        self.rows_received = int(remote.numel())
        self.rows_sent = int(sum(send_counts))

    def _requests(self, remote: torch.Tensor, recv_counts: list[int],
                  group: dist.ProcessGroup | None) -> tuple[torch.Tensor, list[int]]:
        """``(ids the peers ask this rank for, grouped by asking rank; their counts)``."""
        if not is_distributed(group):
            return torch.zeros(0, dtype=torch.int64), [0] * self.world_size
        device = comm_device(group)
        mine = torch.tensor(recv_counts, dtype=torch.int64, device=device)
        theirs = torch.empty_like(mine)
        with named_collective("link-prediction row request (counts)", group):
            dist.all_to_all_single(theirs, mine, group=group)
        send_counts = theirs.tolist()
        asked = torch.empty(sum(send_counts), dtype=torch.int64, device=device)
        wanted = remote.to(device)
        with named_collective("link-prediction row request (ids)", group):
            dist.all_to_all_single(asked, wanted, output_split_sizes=send_counts,
                                   input_split_sizes=recv_counts, group=group)
        keep_alive(mine, theirs, asked, wanted)
        return asked.cpu(), send_counts

    def table(self, h_inner: torch.Tensor) -> torch.Tensor:
        """``[I, D] -> [I + R, D]``: the inner rows, then each requested remote row once (row
        :attr:`index` ``[m]`` is node ``gids[m]``'s), differentiable."""
        return self.exchanger.exchange(h_inner, tag="link-prediction rows")

    def __call__(self, h_inner: torch.Tensor) -> torch.Tensor:
        """``[I, D] -> [M, D]``: the requested rows, differentiable (gradients reach their owners)."""
        full = self.table(h_inner)
        return full[self.index.to(full.device)]
