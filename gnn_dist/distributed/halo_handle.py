"""One direction of a halo exchange in flight: wait for it, time it, and name it when it fails.

See :mod:`.halo` for the exchange itself; a handle reports its waiting time and duration to the
exchanger that started it (its recorders, :mod:`.exchange_stats`).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import torch

from .errors import CollectiveError

if TYPE_CHECKING:
    from .halo import HaloExchanger

__all__ = ["HaloHandle", "describe_failure"]


class HaloHandle:
    """One direction of an exchange in flight (from :meth:`HaloExchanger.start` or
    :meth:`HaloExchanger.start_backward`).

    :meth:`wait` blocks until the rows have arrived (and, on a simulated link, until the link
    would have delivered them), then returns the result; later calls return the same tensor. The
    time spent blocked is added to the exchanger's recorders' ``exposed_comm_s``, the exchange's
    duration (start to completion) to their ``comm_time_s``.
    """

    __slots__ = ("_exchanger", "_work", "_finish", "_result", "_done_at", "start_s", "deadline_s", "link_s",
                 "tag", "bytes_sent", "bytes_received", "backward", "peers")

    def __init__(self, exchanger: "HaloExchanger", work: Any, finish: Callable[[], torch.Tensor], *,
                 start_s: float, deadline_s: float, tag: Any, bytes_sent: int = 0, bytes_received: int = 0,
                 link_s: float = 0.0, backward: bool = False, peers: tuple[int, ...] = ()) -> None:
        self._exchanger = exchanger
        self._work = work
        self._finish = finish
        self._result: torch.Tensor | None = None
        self._done_at: list[float] = []
        self.start_s = start_s
        """``time.perf_counter()`` when the exchange was started."""
        self.deadline_s = deadline_s
        """Earliest completion the simulated link allows (``start_s`` without one)."""
        self.link_s = link_s
        """This transfer's own time on the simulated link (latency + bytes / bandwidth; 0 without)."""
        self.tag = tag
        """What the caller labelled the exchange with (e.g. the layer index), or None."""
        self.bytes_sent = bytes_sent
        self.bytes_received = bytes_received
        self.backward = backward
        self.peers = peers
        """The ranks this exchange sends to or receives from."""
        if work is not None and exchanger._timing_futures:
            try:  # completion time, recorded by gloo's/NCCL's thread: the true communication time
                work.get_future().then(lambda _f: self._done_at.append(time.perf_counter()))
            except (RuntimeError, AttributeError):  # a backend without futures: timed at the wait
                exchanger._timing_futures = False

    @property
    def done(self) -> bool:
        """True once :meth:`wait` has returned."""
        return self._result is not None

    def wait(self) -> torch.Tensor:
        """The received rows (see the starting method for their shape); blocks as needed.

        Raises:
            CollectiveError: the exchange failed or timed out (a peer died or stalled); the
                message names the exchange, its direction and the peer ranks.
        """
        if self._result is not None:
            return self._result
        t0 = time.perf_counter()
        if self._work is not None:
            try:
                self._work.wait()
            except RuntimeError as exc:
                raise CollectiveError(self._describe_failure(exc)) from exc
        now = time.perf_counter()
        done = self._done_at[0] if self._done_at else now
        if self.deadline_s > now:
            time.sleep(self.deadline_s - now)
            now = time.perf_counter()
        self._result = self._finish()
        # the transfer's own duration: the real one, or the simulated link's (not the time spent
        # queueing behind earlier transfers, which they already account for)
        self._exchanger._add_wait(now - t0, max(done - self.start_s, self.link_s))
        self._work = None
        self._finish = _finished
        return self._result

    def _describe_failure(self, exc: BaseException) -> str:
        return describe_failure(self._exchanger.rank, self.tag, self.backward, self.peers, exc)


def describe_failure(rank: int, tag: Any, backward: bool, peers: tuple[int, ...], exc: BaseException) -> str:
    """The message of a :class:`~.errors.CollectiveError` for a halo exchange that failed."""
    what = "halo exchange" + ("" if tag is None else f" of layer {tag}" if isinstance(tag, int) else f" {tag!r}")
    reason = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
    return (f"rank {rank}: the {what} ({'backward' if backward else 'forward'}) with peer rank(s) "
            f"{', '.join(map(str, peers)) or 'none'} did not complete: {reason}. A peer has died, stalled or is "
            f"past the collective timeout; the first rank that failed says why")


def _finished() -> torch.Tensor:
    raise AssertionError("a finished handle has no pending work")
