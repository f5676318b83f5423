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

- :meth:`HaloExchanger.exchange`: differentiable, blocking; forward and backward are one
  exchange each (:class:`HaloExchange`), of all rows or of a :class:`HaloSubset` (boundary
  sampling).
- :meth:`HaloExchanger.start` / :meth:`HaloExchanger.start_backward`: start one direction of the
  exchange and return a :class:`HaloHandle` at once (``all_to_all_single(async_op=True)``);
  :meth:`HaloHandle.wait` returns the received rows. Not differentiable: the pipeline schedules
  (``gnn_dist.pipeline``) build their own autograd around them.

Each call may name a :class:`~gnn_dist.distributed.wire.Transport` (a wire codec per direction:
a float dtype or quantised bits, :mod:`.codec`; and a simulated link): the training schedule's.
Without one, rows travel as they are, at once: what evaluation uses, so it is exact whatever the
training schedule does. The exchanger itself holds no such
setting, only the plan and its counters (:mod:`.exchange_stats`).

Concurrency and stream assumptions:

- Each direction of an exchange is one ``all_to_all_single`` with per-peer split sizes. On
  gloo the collective runs on gloo's worker threads, so the calling thread computes while it is
  in flight. On NCCL it runs on NCCL's internal stream, ordered after the work already queued on
  the current stream; :meth:`HaloHandle.wait` makes the current stream wait for it (a
  stream-to-stream dependency, no host synchronisation) unless a simulated link or the timing
  counters need the host to see the completion (the link model sleeps on the host by design).
- It is a collective: every rank of the group must start the same exchanges in the same order
  (the same layers), forwards and backwards. In particular every rank's loss must depend on every
  differentiable exchange output (a rank without training nodes still backpropagates a zero loss
  through its graph, e.g. ``logits[empty_mask].sum()``, never a detached constant), or the other
  ranks wait in the backward until the group's timeout. Several exchanges may be in flight at
  once (each collective has its own tag); they complete independently. A wait that fails (a peer
  died, stalled past the timeout) raises :class:`~.errors.CollectiveError` naming the exchange
  (its tag: the layer), its direction and the peer ranks.
- No other thread may issue collectives on the same group while an exchange is being started.
- Wire codec: bytes are counted as sent, the codec's buffers (quantised rows: their packed bytes
  and per-row scales, as uint8 split in bytes). gloo in torch 2.13 supports ``all_to_all_single``
  for uint8, float16, bfloat16, float32 and float64 on CPU (verified by the tests).
- The backward's ``index_add_`` sums the gradients of a row sent to several peers; on CPU it is
  deterministic, on CUDA it uses atomics (order of float additions not fixed).
- A world size of 1 (or no process group) is the identity: no halo rows, no collective.
"""

from __future__ import annotations

import contextlib
import logging
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch
import torch.distributed as dist
from torch.autograd.function import FunctionCtx, once_differentiable

from .collectives import all_gather_json, comm_device
from .errors import CollectiveError, HaloSpecError
from .exchange_stats import ExchangeStats
from .halo_handle import HaloHandle, describe_failure
from .keepalive import keep_alive
from .process_group import get_rank, get_world_size
from .wire import EXACT, Transport

__all__ = ["HaloExchanger", "HaloExchange", "HaloHandle", "HaloSubset"]

logger = logging.getLogger(__name__)

_IntArrayLike = Sequence[int] | np.ndarray | torch.Tensor


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
        row_ids: int64 ``[N_in + N_halo]``: each row's original (partition-independent) id,
            the key of the quantised codecs' rounding; None: no quantised transport.

    Raises:
        HaloSpecError: (a ``ValueError``) malformed or inconsistent lists; the message names
            the argument and the bad value.

    Counters: :attr:`totals` (an :class:`~.exchange_stats.ExchangeStats` of every exchange since
    construction or :meth:`reset_stats`; ``bytes_sent``, ``exposed_comm_s`` ... read through), and
    :meth:`recording` for the figures of one stretch of work.
    """

    def __init__(self, send_index: _IntArrayLike, send_offsets: _IntArrayLike,
                 halo_offsets: _IntArrayLike, num_inner: int, *,
                 group: dist.ProcessGroup | None = None, world_size: int | None = None,
                 rank: int | None = None, check: bool = True, row_ids: torch.Tensor | None = None) -> None:
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
        self._timing_futures = True

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
        if row_ids is not None and tuple(row_ids.shape) != (self.num_inner + self.num_halo,):
            raise HaloSpecError(f"row_ids has shape {tuple(row_ids.shape)}; it needs one id per row: "
                                f"[num_inner + num_halo] = [{self.num_inner + self.num_halo}]")
        self.row_ids = None if row_ids is None else row_ids.detach().to(torch.int64)
        self._send_index_cpu = index
        self._send_index: dict[torch.device, torch.Tensor] = {}
        self._sent: dict[torch.device, tuple[torch.Tensor, torch.Tensor]] = {}
        self.totals = ExchangeStats()
        """Every exchange since construction (or :meth:`reset_stats`)."""
        self._recorders: list[ExchangeStats] = [self.totals]
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

    def exchange(self, h_inner: torch.Tensor, *, tag: Any = None, subset: HaloSubset | None = None,
                 transport: Transport = EXACT) -> torch.Tensor:
        """``[N_in, F...] -> [N_in + N_halo, F...]``: the inner rows, then the halo rows grouped
        by owner rank (rows outside ``subset`` read as 0); differentiable (see
        :class:`HaloExchange`). A collective, blocking; ``tag`` labels its bytes in
        ``bytes_by_tag`` (forward and backward)."""
        self._check_rows(h_inner)
        if self.world_size == 1:
            return h_inner
        return HaloExchange.apply(h_inner, self, tag, subset, transport)

    def start(self, h_inner: torch.Tensor, *, tag: Any = None, subset: HaloSubset | None = None,
              transport: Transport = EXACT) -> HaloHandle:
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
            rows = idx
            send_counts, recv_counts = self.send_counts, self.halo_counts
        else:
            rows = idx[subset.send_pos.to(h.device)]
            send_counts, recv_counts = subset.send_counts, subset.recv_counts
        send = h.index_select(0, rows)
        out_dtype = h.dtype

        def finish(recv: torch.Tensor) -> torch.Tensor:
            recv = recv.to(out_dtype)
            if subset is None:
                return recv
            out = recv.new_zeros(recv_shape)
            scale = subset.recv_scale.to(device=recv.device, dtype=out_dtype)
            out.index_copy_(0, subset.recv_pos.to(recv.device), recv * scale.view(-1, *[1] * (recv.dim() - 1)))
            return out
        return self._launch(send, send_counts, recv_counts, finish, tag, backward=False, transport=transport,
                            ids=lambda: self._ids_of(rows))

    def fetch_rows(self, send_rows: torch.Tensor, *, tag: Any = None) -> torch.Tensor:
        """Blocking, not differentiable: send ``send_rows [num_send, F...]`` (the caller's
        ``h[send_index]``, e.g. read straight from disk) and return the halo rows
        ``[N_halo, F...]``, exactly as they are (for one-time transfers such as the static halo
        input features). A collective."""
        if send_rows.ndim < 1 or send_rows.shape[0] != self.num_send:
            raise ValueError(f"fetch_rows expects {self.num_send} rows (len(send_index)), got a tensor "
                             f"of shape {tuple(send_rows.shape)}")
        rows = send_rows.detach()
        if self.world_size == 1:
            return rows.new_zeros((self.num_halo, *rows.shape[1:]))
        return self._launch(rows, self.send_counts, self.halo_counts, lambda recv: recv, tag, backward=False,
                            transport=EXACT).wait()

    def start_backward(self, grad_halo: torch.Tensor, *, tag: Any = None, subset: HaloSubset | None = None,
                       transport: Transport = EXACT, into: torch.Tensor | None = None,
                       sent_rows_only: bool = False) -> HaloHandle:
        """Start sending the halo rows' gradients ``grad_halo [N_halo, F...]`` back to their
        owners; the handle's ``wait()`` returns ``[N_in, F...]``: the gradients received from the
        readers, summed into the rows that were sent (0 elsewhere), or, with ``into`` (``[N_in,
        F...]``, not modified), summed into a copy of ``into``: the inner rows' own gradient plus
        the readers', with no zero-filled ``[N_in, F...]`` and no pass to add it; or, with
        ``sent_rows_only``, ``[B, F...]``: only the rows of :meth:`sent_rows_on` (the distinct
        sent rows, ascending), the others being 0 (the same sums, in the same order). With
        ``subset`` only its rows travel, multiplied by ``recv_scale`` (the transpose of
        :meth:`start` with the same subset). A collective."""
        if grad_halo.ndim < 1 or grad_halo.shape[0] != self.num_halo:
            raise ValueError(f"start_backward expects {self.num_halo} rows (num_halo), got a tensor "
                             f"of shape {tuple(grad_halo.shape)}")
        if into is not None and sent_rows_only:
            raise ValueError("start_backward: into and sent_rows_only exclude each other")
        g = grad_halo.detach()
        out_dtype, device = g.dtype, g.device
        positions = self._sent_positions_on(device) if sent_rows_only else self._index_on(device)
        out_rows = int(self.sent_rows_on(device).numel()) if sent_rows_only else self.num_inner
        out_shape = (out_rows, *g.shape[1:])
        if into is not None and tuple(into.shape) != out_shape:
            raise ValueError(f"start_backward: into has shape {tuple(into.shape)}, expected {out_shape}")
        if self.world_size == 1:
            return self._finished_handle(g.new_zeros(out_shape) if into is None else into.detach().clone(), tag)
        if subset is None:
            send, send_counts, recv_counts = g.contiguous(), self.halo_counts, self.send_counts
            rows = positions
            halo_rows = None
        else:
            scale = subset.recv_scale.to(device=device, dtype=out_dtype)
            halo_rows = subset.recv_pos.to(device)
            send = g.index_select(0, halo_rows) * scale.view(-1, *[1] * (g.dim() - 1))
            send_counts, recv_counts = subset.recv_counts, subset.send_counts
            rows = positions[subset.send_pos.to(device)]

        def finish(recv: torch.Tensor) -> torch.Tensor:
            out = recv.new_zeros(out_shape, dtype=out_dtype) if into is None else into.detach().clone()
            if recv.shape[0]:
                out.index_add_(0, rows, recv.to(out_dtype))
            return out

        def ids() -> torch.Tensor:
            halo = self._ids_of(None)[self.num_inner:]
            return halo if halo_rows is None else halo[halo_rows.to(halo.device)]
        return self._launch(send, send_counts, recv_counts, finish, tag, backward=True, transport=transport, ids=ids)

    @contextlib.contextmanager
    def recording(self) -> Iterator[ExchangeStats]:
        """``with exchanger.recording() as stats:``: ``stats`` holds the figures of the exchanges
        started (bytes) and waited for (times) inside the block."""
        stats = ExchangeStats()
        self._recorders.append(stats)
        try:
            yield stats
        finally:
            self._recorders[:] = [r for r in self._recorders if r is not stats]

    def reset_stats(self) -> None:
        """Zero the lifetime totals."""
        self._recorders[0] = self.totals = ExchangeStats()

    def stats(self) -> dict[str, Any]:
        """The lifetime totals as a dict (``bytes_by_tag`` apart)."""
        t = self.totals
        return {"bytes_sent": t.bytes_sent, "bytes_received": t.bytes_received,
                "last_bytes_sent": t.last_bytes_sent, "last_bytes_received": t.last_bytes_received,
                "num_forward": t.num_forward, "num_backward": t.num_backward,
                "comm_time_s": t.comm_time_s, "exposed_comm_s": t.exposed_comm_s}

    bytes_sent = property(lambda self: self.totals.bytes_sent, doc="Lifetime bytes sent.")
    bytes_received = property(lambda self: self.totals.bytes_received, doc="Lifetime bytes received.")
    exposed_comm_s = property(lambda self: self.totals.exposed_comm_s, doc="Lifetime time blocked in waits.")
    comm_time_s = property(lambda self: self.totals.comm_time_s, doc="Lifetime exchange durations.")
    bytes_by_tag = property(lambda self: self.totals.bytes_by_tag, doc="Lifetime bytes sent per tag.")
    last_bytes_sent = property(lambda self: self.totals.last_bytes_sent, doc="The latest exchange's bytes sent.")
    last_bytes_received = property(lambda self: self.totals.last_bytes_received,
                                   doc="The latest exchange's bytes received.")
    num_forward = property(lambda self: self.totals.num_forward, doc="Forward exchanges started.")
    num_backward = property(lambda self: self.totals.num_backward, doc="Backward exchanges started.")

    def __repr__(self) -> str:
        return (f"HaloExchanger(rank={self.rank}, world_size={self.world_size}, "
                f"num_inner={self.num_inner}, num_halo={self.num_halo}, num_send={self.num_send})")

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

    def sent_rows_on(self, device: torch.device) -> torch.Tensor:
        """int64 ``[B]`` on ``device``: the distinct inner rows this rank sends, ascending (a row
        read by several ranks is in ``send_index`` once per reader); cached per device."""
        return self._sent_on(device)[0]

    def _sent_positions_on(self, device: torch.device) -> torch.Tensor:
        """int64 ``[S]``: each ``send_index`` entry's position in :meth:`sent_rows_on`."""
        return self._sent_on(device)[1]

    def _sent_on(self, device: torch.device) -> tuple[torch.Tensor, torch.Tensor]:
        got = self._sent.get(device)
        if got is None:
            rows, positions = torch.unique(self._send_index_cpu, sorted=True, return_inverse=True)
            got = self._sent[device] = (rows.to(device), positions.to(device))
        return got

    def _check_with_peers(self) -> None:
        device = comm_device(self.group)
        mine = torch.tensor(self.send_counts, dtype=torch.int64, device=device)
        theirs = torch.empty_like(mine)
        dist.all_to_all_single(theirs, mine, group=self.group)
        keep_alive(mine, theirs)
        received = theirs.tolist()
        problems = [f"rank {self.rank} expects {self.halo_counts[q]} halo rows from rank {q} "
                    f"(halo_offsets) but rank {q} sends {received[q]} (its send_offsets)"
                    for q in range(self.world_size) if received[q] != self.halo_counts[q]]
        found = [p for ps in all_gather_json(problems, self.group) for p in ps]
        if found:
            raise HaloSpecError("halo lists disagree between ranks: " + "; ".join(found[:5])
                                + (f"; and {len(found) - 5} more" if len(found) > 5 else ""))

    def _finished_handle(self, result: torch.Tensor, tag: Any) -> HaloHandle:
        now = time.perf_counter()
        handle = HaloHandle(self, None, lambda: result, start_s=now, deadline_s=now, tag=tag)
        handle.wait()
        return handle

    def _launch(self, send: torch.Tensor, send_counts: list[int], recv_counts: list[int],
                finish: Callable[[torch.Tensor], torch.Tensor], tag: Any, *, backward: bool,
                transport: Transport, ids: Callable[[], torch.Tensor] | None = None) -> HaloHandle:
        """Encode ``send`` in the transport's codec for this direction, start the
        ``all_to_all_single``, count its bytes, queue it on the transport's link."""
        codec, key = transport.codec(backward=backward), transport.key(tag, backward=backward)
        row_shape = tuple(send.shape[1:])
        payload, send_splits = codec.encode(send, send_counts, ids or self._no_ids, key, self.rank)
        recv, recv_splits, layout = codec.receive_buffer(send, recv_counts, key, self.rank)
        sent, received = payload.numel() * payload.element_size(), recv.numel() * recv.element_size()
        peers = tuple(q for q in range(self.world_size) if send_counts[q] or recv_counts[q])
        start_s = time.perf_counter()
        try:
            work = dist.all_to_all_single(recv, payload, output_split_sizes=recv_splits,
                                          input_split_sizes=send_splits, group=self.group, async_op=True)
        except RuntimeError as exc:  # the group is broken (a peer died) before this exchange could start
            raise CollectiveError(describe_failure(self.rank, tag, backward, peers, exc)) from exc
        keep_alive(payload, recv)  # temporaries handed to gloo: see keepalive.py
        deadline, link_s = start_s, 0.0
        if transport.link is not None:
            deadline, link_s = transport.link.schedule(start_s, max(sent, received))
        for stats in self._recorders:
            stats.add_start(sent, received, tag, backward=backward)
        out_dtype = send.dtype

        def receive(_payload: torch.Tensor = payload) -> torch.Tensor:  # holds the send buffer until the wait
            return finish(codec.decode(recv, recv_counts, layout, row_shape, out_dtype))
        return HaloHandle(self, work, receive, start_s=start_s, deadline_s=deadline, tag=tag,
                          bytes_sent=sent, bytes_received=received, link_s=link_s, backward=backward, peers=peers)

    def _ids_of(self, local_rows: torch.Tensor | None) -> torch.Tensor:
        """The original ids of local rows ``local_rows`` (None: of every row ``[I + H]``)."""
        if self.row_ids is None:
            raise HaloSpecError("quantised halo rows are rounded by their original ids: build the "
                                "HaloExchanger with row_ids= (load_partition does)")
        ids = self.row_ids
        return ids if local_rows is None else ids.to(local_rows.device)[local_rows]

    @staticmethod
    def _no_ids() -> torch.Tensor:
        raise HaloSpecError("this exchange has no row ids to key a quantised codec by")

    def _add_wait(self, exposed_s: float, comm_s: float) -> None:
        for stats in self._recorders:
            stats.add_wait(exposed_s, comm_s)


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
    With a :class:`HaloSubset` only its rows travel (the others read as 0), each multiplied by
    its ``recv_scale`` in both directions. ``forward`` sends ``S`` rows and receives ``N_halo``;
    ``backward`` sends ``N_halo`` and receives ``S``. Each is one ``all_to_all_single`` on the
    exchanger's group (started, then waited for at once), bounded by the group's timeout, in the
    ``transport``'s wire codecs and on its link.
    """

    @staticmethod
    def forward(ctx: FunctionCtx, h_inner: torch.Tensor, exchanger: HaloExchanger,  # type: ignore[override]
                tag: Any = None, subset: HaloSubset | None = None, transport: Transport = EXACT) -> torch.Tensor:
        ctx.exchanger, ctx.tag, ctx.subset, ctx.transport = exchanger, tag, subset, transport  # type: ignore[attr-defined]
        halo = exchanger.start(h_inner, tag=tag, subset=subset, transport=transport).wait()
        return torch.cat([h_inner.detach(), halo], dim=0)

    @staticmethod
    @once_differentiable
    def backward(ctx: FunctionCtx, grad_out: torch.Tensor) -> tuple[Any, ...]:  # type: ignore[override]
        ex: HaloExchanger = ctx.exchanger  # type: ignore[attr-defined]
        n_in = ex.num_inner
        grad_out = grad_out.contiguous()
        grad_inner = ex.start_backward(grad_out[n_in:], tag=ctx.tag, subset=ctx.subset,  # type: ignore[attr-defined]
                                       transport=ctx.transport, into=grad_out[:n_in]).wait()  # type: ignore[attr-defined]
        return grad_inner, None, None, None, None
