"""Halo exchange: fill each rank's halo rows from their owners, differentiably or asynchronously.

Legend (per rank ``r`` of ``P``)::

    N_in    num_inner: rows this rank owns
    N_halo  num_halo = halo_offsets[P]: rows it reads from other ranks
    S       len(send_index) = send_offsets[P]: rows it sends (a row may go to several peers)
    F...    trailing feature dims of the exchanged tensor (any number, any sizes, may be 0)

Send/halo lists follow the on-disk format v1 (``docs/format.md``): rank ``r`` sends
``h[send_index[send_offsets[q]:send_offsets[q+1]]]`` to rank ``q``, in exactly the order in which
``q`` stores them as its halo rows ``[N_in_q + halo_offsets_q[r], N_in_q + halo_offsets_q[r+1])``.
No rank sends to itself.

Two ways to exchange:

- :meth:`HaloExchanger.exchange` (``sync``): differentiable, blocking; forward and backward are
  one exchange each (:class:`HaloExchange`).
- :meth:`HaloExchanger.start` / :meth:`HaloExchanger.start_backward`: start one direction of the
  exchange and return a :class:`HaloHandle` at once (``all_to_all_single(async_op=True)``);
  :meth:`HaloHandle.wait` returns the received rows. Not differentiable: the pipeline schedules
  (``gnn_dist.pipeline``) build their own autograd around them.

Concurrency and stream assumptions:

- Each direction of an exchange is one ``all_to_all_single`` with per-peer split sizes. On
  gloo the collective runs on gloo's worker threads, so the calling thread computes while it is
  in flight. On NCCL it runs on NCCL's internal stream, ordered after the work already queued on
  the current stream; :meth:`HaloHandle.wait` makes the current stream wait for it (a
  stream-to-stream dependency, no host synchronisation) unless a :class:`LinkModel` or the timing
  counters need the host to see the completion (the link model sleeps on the host by design).
- It is a collective: every rank of the group must start the same exchanges in the same order
  (the same layers), forwards and backwards. In particular every rank's loss must depend on every
  differentiable exchange output (a rank without training nodes still backpropagates a zero loss
  through its graph, e.g. ``logits[empty_mask].sum()``, never a detached constant), or the other
  ranks wait in the backward until the group's timeout. Several exchanges may be in flight at
  once (each collective has its own tag); they complete independently.
- No other thread may issue collectives on the same group while an exchange is being started.
- Wire dtype: rows travel as ``wire_dtype`` when set (cast before sending, cast back to the
  input's dtype on arrival: compute stays in the model's dtype); bytes are counted as sent, in
  the wire dtype. gloo in torch 2.13 supports ``all_to_all_single`` for float16, bfloat16,
  float32 and float64 on CPU (verified by the tests).
- The backward's ``index_add_`` sums the gradients of a row sent to several peers; on CPU it is
  deterministic, on CUDA it uses atomics (order of float additions not fixed).
- A :class:`LinkModel` delays completion: one link per rank, full duplex, carrying one transfer
  at a time (exchanges in flight together queue for it, in the order they were started). A
  transfer of ``max(bytes sent, bytes received)`` starts when the exchange starts or when the
  link is free, whichever is later, occupies the link for ``bytes / bandwidth``, and arrives
  ``latency`` after that; a handle's :meth:`~HaloHandle.wait` does not return before then. The
  delay is a deadline checked at the wait, so the calling thread computes meanwhile: an exchange
  waited for late costs nothing.
- A world size of 1 (or no process group) is the identity: no halo rows, no collective.
"""

from __future__ import annotations

import logging
import math
import re
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch
import torch.distributed as dist
from torch.autograd.function import FunctionCtx, once_differentiable

from .errors import HaloSpecError
from .keepalive import keep_alive
from .process_group import get_rank, get_world_size

__all__ = ["HaloExchanger", "HaloExchange", "HaloHandle", "HaloSubset", "LinkModel", "LinkSpecError",
           "WIRE_DTYPES", "parse_wire_dtype"]

logger = logging.getLogger(__name__)

_IntArrayLike = Sequence[int] | np.ndarray | torch.Tensor

WIRE_DTYPES: dict[str, torch.dtype] = {"fp32": torch.float32, "bf16": torch.bfloat16,
                                       "fp16": torch.float16}
"""Accepted ``halo_dtype`` names and the dtypes rows travel as."""


def parse_wire_dtype(name: str | torch.dtype | None) -> torch.dtype | None:
    """``"fp32"``/``"bf16"``/``"fp16"`` (or a floating torch dtype, or None) -> the dtype."""
    if name is None or isinstance(name, torch.dtype):
        if isinstance(name, torch.dtype) and not name.is_floating_point:
            raise ValueError(f"halo_dtype={name} must be a floating-point dtype")
        return name
    if name not in WIRE_DTYPES:
        raise ValueError(f"halo_dtype={name!r} is not supported; choose from {', '.join(WIRE_DTYPES)}")
    return WIRE_DTYPES[name]


class LinkSpecError(ValueError):
    """A simulated-link description (``"latency_ms=L,gbps=B"``) is malformed."""


@dataclass(frozen=True, slots=True)
class LinkModel:
    """A network link simulated on one machine: each exchange completes no earlier than
    ``latency_ms`` plus its bytes at ``gbps`` gigabits per second after it started.

    Build one directly or with :meth:`parse` from ``"latency_ms=L,gbps=B"`` (the CLI's
    ``--simulate-link``).
    """

    latency_ms: float
    """One-way latency per exchange in milliseconds (>= 0)."""
    gbps: float
    """Bandwidth in gigabits (1e9 bits) per second (> 0)."""

    def __post_init__(self) -> None:
        for name, value in (("latency_ms", self.latency_ms), ("gbps", self.gbps)):
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
                raise LinkSpecError(f"simulate_link: {name}={value!r} must be a finite number")
        if self.latency_ms < 0:
            raise LinkSpecError(f"simulate_link: latency_ms={self.latency_ms} must be >= 0")
        if self.gbps <= 0:
            raise LinkSpecError(f"simulate_link: gbps={self.gbps} must be > 0")

    @classmethod
    def parse(cls, spec: str) -> "LinkModel":
        """``"latency_ms=L,gbps=B"`` (both keys, in any order) -> a :class:`LinkModel`."""
        if not isinstance(spec, str) or not spec.strip():
            raise LinkSpecError(f"simulate_link: expected 'latency_ms=L,gbps=B', got {spec!r}")
        values: dict[str, float] = {}
        for item in spec.split(","):
            key, eq, raw = item.strip().partition("=")
            key = key.strip()
            if not eq or key not in ("latency_ms", "gbps"):
                raise LinkSpecError(f"simulate_link: {item.strip()!r} in {spec!r} is not latency_ms=L or "
                                    f"gbps=B; expected 'latency_ms=L,gbps=B'")
            if key in values:
                raise LinkSpecError(f"simulate_link: {key} is given twice in {spec!r}")
            if not re.fullmatch(r"\s*[-+]?(\d+\.?\d*|\.\d+)([eE][-+]?\d+)?\s*", raw):
                raise LinkSpecError(f"simulate_link: {key}={raw.strip()!r} in {spec!r} is not a number")
            values[key] = float(raw)
        missing = [k for k in ("latency_ms", "gbps") if k not in values]
        if missing:
            raise LinkSpecError(f"simulate_link: {spec!r} lacks {' and '.join(missing)}; expected "
                                f"'latency_ms=L,gbps=B'")
        return cls(latency_ms=values["latency_ms"], gbps=values["gbps"])

    def delay_s(self, num_bytes: int) -> float:
        """Seconds a transfer of ``num_bytes`` takes on this link (latency + bytes / bandwidth)."""
        return self.latency_ms * 1e-3 + num_bytes * 8.0 / (self.gbps * 1e9)

    def __str__(self) -> str:
        return f"latency_ms={self.latency_ms:g},gbps={self.gbps:g}"


@dataclass(frozen=True, slots=True)
class HaloSubset:
    """A subset of the rows of an exchange (boundary sampling), agreed on by both sides.

    ``send_pos`` int64 ``[S']``: positions in ``send_index`` to send, grouped by destination rank
    (``send_counts[q]`` of them for rank ``q``); ``recv_pos`` int64 ``[H']``: halo rows (0-based
    within the halo) that arrive, grouped by owner rank (``recv_counts[q]``), in the order the
    owner sends them; ``recv_scale`` ``[H']``: the factor each arriving row is multiplied by (the
    reader applies it, in the forward to the features and in the backward to the gradients sent
    back, so the backward is the forward's transpose). Halo rows not in ``recv_pos`` read as 0.
    """

    send_pos: torch.Tensor
    send_counts: list[int]
    recv_pos: torch.Tensor
    recv_counts: list[int]
    recv_scale: torch.Tensor


def _as_offsets(name: str, offsets: _IntArrayLike, world_size: int, total: int | None) -> list[int]:
    arr = offsets.detach().cpu().numpy() if isinstance(offsets, torch.Tensor) else np.asarray(offsets)
    if arr.ndim != 1 or (arr.size and not np.issubdtype(arr.dtype, np.integer)):
        raise HaloSpecError(f"{name} must be a 1-D sequence of integers, got shape {arr.shape} "
                            f"dtype {arr.dtype}")
    values = [int(v) for v in arr]
    if len(values) != world_size + 1:
        raise HaloSpecError(f"{name} has {len(values)} entries but the world size is "
                            f"{world_size}: it needs world_size + 1 = {world_size + 1}")
    if values[0] != 0:
        raise HaloSpecError(f"{name}[0] = {values[0]}; offsets must start at 0")
    for q in range(world_size):
        if values[q + 1] < values[q]:
            raise HaloSpecError(f"{name} decreases at {q}: {name}[{q}] = {values[q]} > "
                                f"{name}[{q + 1}] = {values[q + 1]}")
    if total is not None and values[-1] != total:
        raise HaloSpecError(f"{name}[-1] = {values[-1]} but send_index has {total} entries; "
                            f"they must be equal")
    return values


class HaloHandle:
    """One direction of an exchange in flight (from :meth:`HaloExchanger.start` or
    :meth:`HaloExchanger.start_backward`).

    :meth:`wait` blocks until the rows have arrived (and, with a :class:`LinkModel`, until the
    simulated link would have delivered them), then returns the result; later calls return the
    same tensor. The time spent blocked is added to the exchanger's ``exposed_comm_s``, the
    exchange's duration (start to completion) to its ``comm_time_s``.
    """

    __slots__ = ("_exchanger", "_work", "_finish", "_result", "_done_at", "start_s", "deadline_s", "link_s",
                 "tag", "bytes_sent", "bytes_received")

    def __init__(self, exchanger: "HaloExchanger", work: Any, finish: Callable[[], torch.Tensor],
                 start_s: float, deadline_s: float, tag: Any, bytes_sent: int, bytes_received: int,
                 link_s: float = 0.0) -> None:
        self._exchanger = exchanger
        self._work = work
        self._finish = finish
        self._result: torch.Tensor | None = None
        self._done_at: list[float] = []
        self.start_s = start_s
        """``time.perf_counter()`` when the exchange was started."""
        self.deadline_s = deadline_s
        """Earliest completion the link model allows (``start_s`` without a link)."""
        self.link_s = link_s
        """This transfer's own time on the simulated link (latency + bytes / bandwidth; 0 without)."""
        self.tag = tag
        """What the caller labelled the exchange with (e.g. the layer index), or None."""
        self.bytes_sent = bytes_sent
        self.bytes_received = bytes_received
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
        """The received rows (see the starting method for their shape); blocks as needed."""
        if self._result is not None:
            return self._result
        t0 = time.perf_counter()
        if self._work is not None:
            self._work.wait()
        now = time.perf_counter()
        done = self._done_at[0] if self._done_at else now
        if self.deadline_s > now:
            time.sleep(self.deadline_s - now)
            now = time.perf_counter()
        self._result = self._finish()
        ex = self._exchanger
        ex.exposed_comm_s += now - t0
        # the transfer's own duration: the real one, or the simulated link's (not the time spent
        # queueing behind earlier transfers, which they already account for)
        ex.comm_time_s += max(done - self.start_s, self.link_s)
        self._work = None
        self._finish = _finished
        return self._result


def _finished() -> torch.Tensor:
    raise AssertionError("a finished handle has no pending work")


class HaloExchanger:
    """One rank's halo exchange plan, with byte and time counters.

    Args:
        send_index: int64 ``[S]`` local inner ids to send, grouped by destination rank.
        send_offsets: ``P + 1`` ints: rows for rank ``q`` are ``send_index[off[q]:off[q+1]]``.
        halo_offsets: ``P + 1`` ints: halo rows owned by rank ``q`` are output rows
            ``num_inner + [off[q], off[q+1])``.
        num_inner: ``N_in``, the rows of the input of :meth:`exchange`.
        group: process group (default: the default group).
        world_size, rank: default: from ``group`` (1 and 0 without a process group). Given
            explicitly they must agree with the group when one exists.
        check: compare the send counts with the peers' halo counts once, now (a collective:
            every rank must construct its exchanger together). A mismatch raises
            :class:`HaloSpecError` on every rank, naming the pair of ranks.
        wire_dtype: rows travel in this dtype (``"fp32"``, ``"bf16"``, ``"fp16"`` or a torch
            dtype) and are cast back on arrival; None sends them as they are. Settable later as
            the attribute ``wire_dtype`` (a torch dtype or None); every rank must use the same.
        link: a :class:`LinkModel` (or its ``"latency_ms=L,gbps=B"`` string) that delays every
            exchange; None: no delay. Settable later as the attribute ``link``.

    Raises:
        HaloSpecError: (a ``ValueError``) malformed or inconsistent lists; the message names
            the argument and the bad value.

    Counters (this rank's side; the forward sends ``S`` rows and receives ``N_halo``, the backward
    the opposite; bytes as they travel, in the wire dtype): ``bytes_sent``, ``bytes_received``
    (cumulative since construction or :meth:`reset_stats`), ``last_bytes_sent``,
    ``last_bytes_received`` (the most recent exchange started), ``num_forward``, ``num_backward``;
    ``comm_time_s`` (sum over completed exchanges of their duration: start to completion, or the
    simulated link's latency + bytes / bandwidth when longer; time queueing for the link is not
    counted twice), ``exposed_comm_s`` (time the caller spent blocked waiting for them), and
    ``bytes_by_tag`` (bytes sent per tag given to :meth:`exchange`/:meth:`start`, e.g. per layer).
    """

    def __init__(self, send_index: _IntArrayLike, send_offsets: _IntArrayLike,
                 halo_offsets: _IntArrayLike, num_inner: int, *,
                 group: dist.ProcessGroup | None = None, world_size: int | None = None,
                 rank: int | None = None, check: bool = True,
                 wire_dtype: str | torch.dtype | None = None,
                 link: LinkModel | str | None = None) -> None:
        have_group = dist.is_available() and dist.is_initialized()
        if world_size is None:
            world_size = get_world_size(group)
        if rank is None:
            rank = get_rank(group)
        if world_size < 1:
            raise HaloSpecError(f"world_size must be >= 1, got {world_size}")
        if not 0 <= rank < world_size:
            raise HaloSpecError(f"rank={rank} is out of range for world_size={world_size}")
        if have_group and (world_size, rank) != (dist.get_world_size(group), dist.get_rank(group)):
            raise HaloSpecError(
                f"world_size={world_size}, rank={rank} disagree with the process group "
                f"(world size {dist.get_world_size(group)}, rank {dist.get_rank(group)})")
        if world_size > 1 and not have_group:
            raise HaloSpecError(f"world_size={world_size} needs an initialised process group "
                                f"(call gnn_dist.init_distributed() first)")
        if isinstance(num_inner, bool) or not isinstance(num_inner, (int, np.integer)) or num_inner < 0:
            raise HaloSpecError(f"num_inner must be a non-negative int, got {num_inner!r}")
        self.num_inner = int(num_inner)
        self.world_size = int(world_size)
        self.rank = int(rank)
        self.group = group
        self.wire_dtype: torch.dtype | None = parse_wire_dtype(wire_dtype)
        self.link: LinkModel | None = LinkModel.parse(link) if isinstance(link, str) else link
        self._timing_futures = True
        self._link_free_at = 0.0

        index = send_index if isinstance(send_index, torch.Tensor) else torch.as_tensor(
            np.asarray(send_index))
        if index.ndim != 1:
            raise HaloSpecError(f"send_index must be 1-D, got shape {tuple(index.shape)}")
        if index.numel() and (index.is_floating_point() or index.is_complex() or index.dtype == torch.bool):
            raise HaloSpecError(f"send_index must hold integer row ids, got dtype {index.dtype}")
        index = index.detach().to(device="cpu", dtype=torch.int64).contiguous()
        if index.numel():
            bad = (index < 0) | (index >= self.num_inner)
            if bool(bad.any()):
                i = int(torch.nonzero(bad)[0, 0])
                raise HaloSpecError(f"send_index[{i}] = {int(index[i])} is not an inner row: it "
                                    f"must be in [0, num_inner={self.num_inner})")
        self.send_offsets = _as_offsets("send_offsets", send_offsets, self.world_size,
                                        index.numel())
        self.halo_offsets = _as_offsets("halo_offsets", halo_offsets, self.world_size, None)
        self.send_counts = [b - a for a, b in zip(self.send_offsets, self.send_offsets[1:])]
        self.halo_counts = [b - a for a, b in zip(self.halo_offsets, self.halo_offsets[1:])]
        if self.send_counts[self.rank] or self.halo_counts[self.rank]:
            raise HaloSpecError(
                f"rank {self.rank} sends {self.send_counts[self.rank]} and receives "
                f"{self.halo_counts[self.rank]} rows to/from itself; send_offsets and "
                f"halo_offsets must give an empty range for the own rank")
        self.num_halo = self.halo_offsets[-1]
        self.num_send = index.numel()
        self._send_index_cpu = index
        self._send_index: dict[torch.device, torch.Tensor] = {}
        self.reset_stats()
        if check and self.world_size > 1:
            self._check_with_peers()

    # ----------------------------------------------------------------------------- public

    @property
    def num_rows(self) -> int:
        """Rows of :meth:`exchange`'s output: ``N_in + N_halo``."""
        return self.num_inner + self.num_halo

    @property
    def send_index(self) -> torch.Tensor:
        """int64 ``[S]`` (CPU)."""
        return self._send_index_cpu

    def exchange(self, h_inner: torch.Tensor, *, tag: Any = None) -> torch.Tensor:
        """``[N_in, F...] -> [N_in + N_halo, F...]``: the inner rows, then the halo rows grouped
        by owner rank; differentiable (see :class:`HaloExchange`). A collective, blocking;
        ``tag`` labels its bytes in ``bytes_by_tag`` (forward and backward)."""
        self._check_rows(h_inner)
        if self.world_size == 1:
            return h_inner
        return HaloExchange.apply(h_inner, self, tag)

    def start(self, h_inner: torch.Tensor, *, tag: Any = None, subset: HaloSubset | None = None) -> HaloHandle:
        """Start sending ``h_inner[send_index]`` to the peers; the handle's ``wait()`` returns the
        halo rows ``[N_halo, F...]`` (``h_inner``'s dtype; rows outside ``subset`` are 0).
        Not differentiable (``h_inner`` is read as data). A collective."""
        self._check_rows(h_inner)
        h = h_inner.detach()
        recv_shape = (self.num_halo, *h.shape[1:])
        if self.world_size == 1:
            return self._finished_handle(h.new_zeros(recv_shape), tag)
        idx = self._index_on(h.device)
        if subset is None:
            send, send_counts, recv_counts = h.index_select(0, idx), self.send_counts, self.halo_counts
        else:
            send = h.index_select(0, idx[subset.send_pos.to(h.device)])
            send_counts, recv_counts = subset.send_counts, subset.recv_counts
        out_dtype = h.dtype

        def finish(recv: torch.Tensor) -> torch.Tensor:
            recv = recv.to(out_dtype)
            if subset is None:
                return recv
            out = recv.new_zeros(recv_shape)
            scale = subset.recv_scale.to(device=recv.device, dtype=out_dtype)
            out.index_copy_(0, subset.recv_pos.to(recv.device), recv * scale.view(-1, *[1] * (recv.dim() - 1)))
            return out
        return self._launch(send, send_counts, recv_counts, finish, tag, backward=False)

    def fetch_rows(self, send_rows: torch.Tensor, *, tag: Any = None) -> torch.Tensor:
        """Blocking, not differentiable: send ``send_rows [num_send, F...]`` (the caller's
        ``h[send_index]``, e.g. read straight from disk) and return the halo rows
        ``[N_halo, F...]``. The rows travel in their own dtype (the wire dtype does not apply:
        this is for one-time exact transfers such as the static halo input features). A collective."""
        if send_rows.ndim < 1 or send_rows.shape[0] != self.num_send:
            raise ValueError(f"fetch_rows expects {self.num_send} rows (len(send_index)), got a tensor "
                             f"of shape {tuple(send_rows.shape)}")
        rows = send_rows.detach()
        if self.world_size == 1:
            return rows.new_zeros((self.num_halo, *rows.shape[1:]))
        handle = self._launch(rows, self.send_counts, self.halo_counts, lambda recv: recv, tag,
                              backward=False, wire=False)
        return handle.wait()

    def start_backward(self, grad_halo: torch.Tensor, *, tag: Any = None,
                       subset: HaloSubset | None = None) -> HaloHandle:
        """Start sending the halo rows' gradients ``grad_halo [N_halo, F...]`` back to their
        owners; the handle's ``wait()`` returns ``[N_in, F...]``: the gradients received from the
        readers, summed into the rows that were sent (0 elsewhere). With ``subset`` only its rows
        travel, multiplied by ``recv_scale`` (the transpose of :meth:`start` with the same subset).
        A collective."""
        if grad_halo.ndim < 1 or grad_halo.shape[0] != self.num_halo:
            raise ValueError(f"start_backward expects {self.num_halo} rows (num_halo), got a tensor "
                             f"of shape {tuple(grad_halo.shape)}")
        g = grad_halo.detach()
        out_shape = (self.num_inner, *g.shape[1:])
        if self.world_size == 1:
            return self._finished_handle(g.new_zeros(out_shape), tag)
        out_dtype, device = g.dtype, g.device
        if subset is None:
            send, send_counts, recv_counts = g.contiguous(), self.halo_counts, self.send_counts
            rows = self._index_on(device)
        else:
            scale = subset.recv_scale.to(device=device, dtype=out_dtype)
            send = g.index_select(0, subset.recv_pos.to(device)) * scale.view(-1, *[1] * (g.dim() - 1))
            send_counts, recv_counts = subset.recv_counts, subset.send_counts
            rows = self._index_on(device)[subset.send_pos.to(device)]

        def finish(recv: torch.Tensor) -> torch.Tensor:
            out = recv.new_zeros(out_shape, dtype=out_dtype)
            if recv.shape[0]:
                out.index_add_(0, rows, recv.to(out_dtype))
            return out
        return self._launch(send, send_counts, recv_counts, finish, tag, backward=True)

    def reset_stats(self) -> None:
        """Zero the byte, call and time counters."""
        self.bytes_sent = 0
        self.bytes_received = 0
        self.last_bytes_sent = 0
        self.last_bytes_received = 0
        self.num_forward = 0
        self.num_backward = 0
        self.comm_time_s = 0.0
        self.exposed_comm_s = 0.0
        self.bytes_by_tag: dict[Any, int] = {}

    def stats(self) -> dict[str, int | float]:
        """The counters as a dict (for logs and training history; ``bytes_by_tag`` apart)."""
        return {"bytes_sent": self.bytes_sent, "bytes_received": self.bytes_received,
                "last_bytes_sent": self.last_bytes_sent,
                "last_bytes_received": self.last_bytes_received,
                "num_forward": self.num_forward, "num_backward": self.num_backward,
                "comm_time_s": self.comm_time_s, "exposed_comm_s": self.exposed_comm_s}

    def __repr__(self) -> str:
        extra = "" if self.wire_dtype is None else f", wire_dtype={self.wire_dtype}"
        extra += "" if self.link is None else f", link={self.link}"
        return (f"HaloExchanger(rank={self.rank}, world_size={self.world_size}, "
                f"num_inner={self.num_inner}, num_halo={self.num_halo}, num_send={self.num_send}{extra})")

    # ----------------------------------------------------------------------------- internals

    def _check_rows(self, h_inner: torch.Tensor) -> None:
        if h_inner.ndim < 1 or h_inner.shape[0] != self.num_inner:
            raise ValueError(f"exchange expects {self.num_inner} rows (num_inner), got a tensor "
                             f"of shape {tuple(h_inner.shape)}")

    def _index_on(self, device: torch.device) -> torch.Tensor:
        idx = self._send_index.get(device)
        if idx is None:
            idx = self._send_index_cpu.to(device)
            self._send_index[device] = idx
        return idx

    def _comm_device(self) -> torch.device:
        if dist.get_backend(self.group) == "nccl":
            return torch.device("cuda", torch.cuda.current_device())
        return torch.device("cpu")

    def _check_with_peers(self) -> None:
        device = self._comm_device()
        mine = torch.tensor(self.send_counts, dtype=torch.int64, device=device)
        theirs = torch.empty_like(mine)
        dist.all_to_all_single(theirs, mine, group=self.group)
        keep_alive(mine, theirs)
        received = theirs.tolist()
        problems = [f"rank {self.rank} expects {self.halo_counts[q]} halo rows from rank {q} "
                    f"(halo_offsets) but rank {q} sends {received[q]} (its send_offsets)"
                    for q in range(self.world_size) if received[q] != self.halo_counts[q]]
        gathered: list[Any] = [None] * self.world_size
        dist.all_gather_object(gathered, problems, group=self.group)
        found = [p for ps in gathered for p in ps]
        if found:
            raise HaloSpecError("halo lists disagree between ranks: " + "; ".join(found[:5])
                                + (f"; and {len(found) - 5} more" if len(found) > 5 else ""))

    def _finished_handle(self, result: torch.Tensor, tag: Any) -> HaloHandle:
        now = time.perf_counter()
        handle = HaloHandle(self, None, lambda: result, now, now, tag, 0, 0)
        handle.wait()
        return handle

    def _launch(self, send: torch.Tensor, send_counts: list[int], recv_counts: list[int],
                finish: Callable[[torch.Tensor], torch.Tensor], tag: Any, *, backward: bool,
                wire: bool = True) -> HaloHandle:
        """Cast ``send`` to the wire dtype (unless ``wire`` is False), start the
        ``all_to_all_single``, count its bytes."""
        use_wire = wire and self.wire_dtype is not None and send.is_floating_point()
        wire_dtype = self.wire_dtype if use_wire else send.dtype
        send = send.to(wire_dtype).contiguous()
        recv = send.new_empty((sum(recv_counts), *send.shape[1:]))
        row_bytes = math.prod(send.shape[1:]) * send.element_size()
        sent, received = sum(send_counts) * row_bytes, sum(recv_counts) * row_bytes
        start_s = time.perf_counter()
        work = dist.all_to_all_single(recv, send, output_split_sizes=recv_counts,
                                      input_split_sizes=send_counts, group=self.group, async_op=True)
        keep_alive(send, recv)  # temporaries handed to gloo: see keepalive.py
        deadline, link_s = start_s, 0.0
        if self.link is not None:
            link_s = self.link.delay_s(max(sent, received))
            begin = max(start_s, self._link_free_at)
            self._link_free_at = begin + self.link.delay_s(max(sent, received)) - self.link.latency_ms * 1e-3
            deadline = self._link_free_at + self.link.latency_ms * 1e-3
        self._record(sent, received, tag, backward=backward)
        return HaloHandle(self, work, lambda s=send: finish(recv), start_s, deadline, tag, sent, received, link_s)

    def _record(self, sent: int, received: int, tag: Any, *, backward: bool) -> None:
        self.last_bytes_sent = sent
        self.last_bytes_received = received
        self.bytes_sent += sent
        self.bytes_received += received
        if tag is not None:
            self.bytes_by_tag[tag] = self.bytes_by_tag.get(tag, 0) + sent
        if backward:
            self.num_backward += 1
        else:
            self.num_forward += 1

    def _forward(self, h_inner: torch.Tensor, tag: Any = None) -> torch.Tensor:
        halo = self.start(h_inner, tag=tag).wait()
        return torch.cat([h_inner.detach(), halo], dim=0)

    def _backward(self, grad_out: torch.Tensor, tag: Any = None) -> torch.Tensor:
        n_in = self.num_inner
        grad_out = grad_out.contiguous()
        contrib = self.start_backward(grad_out[n_in:], tag=tag).wait()
        return grad_out[:n_in] + contrib


class HaloExchange(torch.autograd.Function):
    """Differentiable halo exchange (call through :meth:`HaloExchanger.exchange`).

    Shapes (legend in the module docstring)::

        forward   h_inner   [N_in, F...]          -> out   [N_in + N_halo, F...]
                  send      [S, F...]    = h_inner[send_index]           (to peers, by split)
                  recv      [N_halo, F...] = out[N_in:]                  (from owners, by split)
        backward  grad_out  [N_in + N_halo, F...] -> grad_h_inner [N_in, F...]
                  send      [N_halo, F...] = grad_out[N_in:]             (back to owners)
                  recv      [S, F...]                                    (from readers)
                  grad_h_inner = grad_out[:N_in] + index_add(send_index, recv)

    Duals: the forward is a gather (``out[N_in + k] = h_owner[send_index_owner[j]]`` for the
    matching position ``j`` on the owner), so the backward is its transpose: the gradient of
    each halo row travels back along the same edge (split sizes swapped) and is scatter-added
    into the row that was sent; a row sent to several peers accumulates all their gradients.
    ``forward`` sends ``S`` rows and receives ``N_halo``; ``backward`` sends ``N_halo`` and
    receives ``S``. Each is one ``all_to_all_single`` on the exchanger's group (started, then
    waited for at once), bounded by the group's timeout.
    """

    @staticmethod
    def forward(ctx: FunctionCtx, h_inner: torch.Tensor,  # type: ignore[override]
                exchanger: HaloExchanger, tag: Any = None) -> torch.Tensor:
        ctx.exchanger = exchanger  # type: ignore[attr-defined]
        ctx.tag = tag  # type: ignore[attr-defined]
        return exchanger._forward(h_inner, tag)

    @staticmethod
    @once_differentiable
    def backward(ctx: FunctionCtx, grad_out: torch.Tensor  # type: ignore[override]
                 ) -> tuple[torch.Tensor, None, None]:
        exchanger: HaloExchanger = ctx.exchanger  # type: ignore[attr-defined]
        return exchanger._backward(grad_out, ctx.tag), None, None  # type: ignore[attr-defined]
