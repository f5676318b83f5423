"""Rows and gradients between neighbouring stages: point-to-point sends and receives, named.

Stage ``s`` sends chunk ``k``'s output rows to stage ``s + 1`` (same part) as soon as they are
computed (``isend``), and stage ``s + 1`` has posted the receive (``irecv``) of every chunk at the
start of the step, so the stages overlap; gradients travel back the same way, last chunk first.
Every wait is bounded by the run's timeout and a failure is one
:class:`~gnn_dist.distributed.CollectiveError` naming the transfer, its chunk and the peer rank,
as a halo exchange's. Bytes are counted as sent. On a simulated link (``--simulate-link``) a
transfer is delivered no earlier than its arrival plus the link's time for its bytes, queued
behind the receiver's earlier transfers.
"""

from __future__ import annotations

import time
from datetime import timedelta
from typing import Any

import torch
import torch.distributed as dist

from ..distributed import CollectiveError
from ..distributed.keepalive import keep_alive
from ..distributed.link import LinkModel, SimulatedLink

__all__ = ["StageLink", "Transfer"]


class Transfer:
    """One send or receive in flight; :meth:`wait` returns the tensor (received, or sent)."""

    def __init__(self, link: "StageLink", work: Any, tensor: torch.Tensor, what: str, peer: int,
                 receive: bool) -> None:
        self.link, self.work, self.tensor, self.what, self.peer, self.receive = link, work, tensor, what, peer, receive
        self._done_at: list[float] = []
        self.done = work is None
        if work is not None:
            try:
                work.get_future().then(lambda _f: self._done_at.append(time.perf_counter()))
            except (RuntimeError, AttributeError):
                pass

    def wait(self) -> torch.Tensor:
        if self.done:
            return self.tensor
        t0 = time.perf_counter()
        try:
            self.work.wait(timeout=timedelta(seconds=self.link.timeout))
        except RuntimeError as exc:
            reason = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
            raise CollectiveError(f"rank {self.link.rank}: the {self.what} with peer rank {self.peer} did not complete: "
                                  f"{reason}. A peer has died, stalled or is past the collective timeout; the first "
                                  f"rank that failed says why") from exc
        if self.receive and self.link.simulated is not None:
            arrived = self._done_at[0] if self._done_at else time.perf_counter()
            deadline, _ = self.link.simulated.schedule(arrived, self.tensor.numel() * self.tensor.element_size())
            now = time.perf_counter()
            if deadline > now:
                time.sleep(deadline - now)
        self.done = True
        self.work = None
        self.link.waited_s += time.perf_counter() - t0
        return self.tensor


class StageLink:
    """This rank's transfers to and from the ranks of its neighbouring stages (world ranks)."""

    def __init__(self, rank: int, timeout: float, simulate_link: LinkModel | None = None) -> None:
        self.rank = rank
        self.timeout = float(timeout)
        self.simulated = None if simulate_link is None else SimulatedLink(simulate_link)
        self.bytes_sent = 0
        self.waited_s = 0.0
        """Seconds spent in :meth:`Transfer.wait` (the stage's bubble, with the halo waits)."""

    def send(self, tensor: torch.Tensor, peer: int, tag: int, what: str) -> Transfer:
        buf = tensor.detach().contiguous()
        if not buf.numel():   # both sides know the chunk's size: nothing travels
            return Transfer(self, None, buf, what, peer, receive=False)
        self.bytes_sent += buf.numel() * buf.element_size()
        try:
            work = dist.isend(buf, dst=peer, tag=tag)
        except RuntimeError as exc:
            raise CollectiveError(f"rank {self.rank}: the {what} to peer rank {peer} could not start: {exc}") from exc
        keep_alive(buf)
        return Transfer(self, work, buf, what, peer, receive=False)

    def recv(self, shape: tuple[int, ...], dtype: torch.dtype, device: torch.device, peer: int, tag: int,
             what: str) -> Transfer:
        buf = torch.empty(shape, dtype=dtype, device=device)
        if not buf.numel():
            return Transfer(self, None, buf, what, peer, receive=True)
        try:
            work = dist.irecv(buf, src=peer, tag=tag)
        except RuntimeError as exc:
            raise CollectiveError(f"rank {self.rank}: the {what} from peer rank {peer} could not start: {exc}") from exc
        keep_alive(buf)
        return Transfer(self, work, buf, what, peer, receive=True)
