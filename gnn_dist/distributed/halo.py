"""Halo exchange: fill each rank's halo rows from their owners, differentiably.

Legend (per rank ``r`` of ``P``)::

    N_in    num_inner: rows this rank owns
    N_halo  num_halo = halo_offsets[P]: rows it reads from other ranks
    S       len(send_index) = send_offsets[P]: rows it sends (a row may go to several peers)
    F...    trailing feature dims of the exchanged tensor (any number, any sizes, may be 0)

Send/halo lists follow the on-disk format v1 (``docs/format.md``): rank ``r`` sends
``h[send_index[send_offsets[q]:send_offsets[q+1]]]`` to rank ``q``, in exactly the order in which
``q`` stores them as its halo rows ``[N_in_q + halo_offsets_q[r], N_in_q + halo_offsets_q[r+1])``.
No rank sends to itself.

Concurrency and stream assumptions:

- Every exchange is one ``all_to_all_single`` (with per-peer split sizes) in the forward and one
  in the backward, synchronous on the calling thread; on NCCL the collective is ordered after the
  work already queued on the current CUDA stream and the current stream waits for it. It works on
  gloo (CPU) and NCCL (CUDA tensors).
- It is a collective: every rank of the group must run the same exchanges in the same order (the
  same layers), forwards and backwards. In particular every rank's loss must depend on every
  exchange output (a rank without training nodes still backpropagates a zero loss through its
  graph, e.g. ``logits[empty_mask].sum()``, never a detached constant), or the other ranks wait
  in the backward until the group's timeout.
- No other thread may issue collectives on the same group while an exchange runs.
- Dtypes go over the wire as they are: gloo in torch 2.13 supports ``all_to_all_single`` for
  float16, bfloat16, float32 and float64 on CPU (verified by the tests), so nothing is upcast.
- The backward's ``index_add_`` sums the gradients of a row sent to several peers; on CPU it is
  deterministic, on CUDA it uses atomics (order of float additions not fixed).
- A world size of 1 (or no process group) is the identity: no halo rows, no collective.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Sequence
from typing import Any

import numpy as np
import torch
import torch.distributed as dist
from torch.autograd.function import FunctionCtx, once_differentiable

from .errors import HaloSpecError
from .keepalive import keep_alive
from .process_group import get_rank, get_world_size

__all__ = ["HaloExchanger", "HaloExchange"]

logger = logging.getLogger(__name__)

_IntArrayLike = Sequence[int] | np.ndarray | torch.Tensor


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
    """One rank's halo exchange plan, with byte counters.

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

    Raises:
        HaloSpecError: (a ``ValueError``) malformed or inconsistent lists; the message names
            the argument and the bad value.

    Counters (bytes of tensor data on the wire, this rank's side; the forward sends ``S`` rows
    and receives ``N_halo``, the backward the opposite): ``bytes_sent``, ``bytes_received``
    (cumulative since construction or :meth:`reset_stats`), ``last_bytes_sent``,
    ``last_bytes_received`` (the most recent forward or backward), ``num_forward``,
    ``num_backward``.
    """

    def __init__(self, send_index: _IntArrayLike, send_offsets: _IntArrayLike,
                 halo_offsets: _IntArrayLike, num_inner: int, *,
                 group: dist.ProcessGroup | None = None, world_size: int | None = None,
                 rank: int | None = None, check: bool = True) -> None:
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

    def exchange(self, h_inner: torch.Tensor) -> torch.Tensor:
        """``[N_in, F...] -> [N_in + N_halo, F...]``: the inner rows, then the halo rows grouped
        by owner rank; differentiable (see :class:`HaloExchange`). A collective."""
        if h_inner.ndim < 1 or h_inner.shape[0] != self.num_inner:
            raise ValueError(f"exchange expects {self.num_inner} rows (num_inner), got a tensor "
                             f"of shape {tuple(h_inner.shape)}")
        if self.world_size == 1:
            return h_inner
        return HaloExchange.apply(h_inner, self)

    def reset_stats(self) -> None:
        """Zero the byte and call counters."""
        self.bytes_sent = 0
        self.bytes_received = 0
        self.last_bytes_sent = 0
        self.last_bytes_received = 0
        self.num_forward = 0
        self.num_backward = 0

    def stats(self) -> dict[str, int]:
        """The counters as a dict (for logs and training history)."""
        return {"bytes_sent": self.bytes_sent, "bytes_received": self.bytes_received,
                "last_bytes_sent": self.last_bytes_sent,
                "last_bytes_received": self.last_bytes_received,
                "num_forward": self.num_forward, "num_backward": self.num_backward}

    def __repr__(self) -> str:
        return (f"HaloExchanger(rank={self.rank}, world_size={self.world_size}, "
                f"num_inner={self.num_inner}, num_halo={self.num_halo}, num_send={self.num_send})")

    # ----------------------------------------------------------------------------- internals

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

    def _row_bytes(self, t: torch.Tensor) -> int:
        return math.prod(t.shape[1:]) * t.element_size()

    def _record(self, sent_rows: int, received_rows: int, row_bytes: int, *, backward: bool) -> None:
        self.last_bytes_sent = sent_rows * row_bytes
        self.last_bytes_received = received_rows * row_bytes
        self.bytes_sent += self.last_bytes_sent
        self.bytes_received += self.last_bytes_received
        if backward:
            self.num_backward += 1
        else:
            self.num_forward += 1

    def _forward(self, h_inner: torch.Tensor) -> torch.Tensor:
        n_in = self.num_inner
        out = h_inner.new_empty((n_in + self.num_halo, *h_inner.shape[1:]))
        out[:n_in].copy_(h_inner)
        send = h_inner.index_select(0, self._index_on(h_inner.device))
        recv = out[n_in:]
        dist.all_to_all_single(recv, send, output_split_sizes=self.halo_counts,
                               input_split_sizes=self.send_counts, group=self.group)
        keep_alive(send)  # a temporary: see keepalive.py
        self._record(self.num_send, self.num_halo, self._row_bytes(h_inner), backward=False)
        return out

    def _backward(self, grad_out: torch.Tensor) -> torch.Tensor:
        n_in = self.num_inner
        grad_out = grad_out.contiguous()
        grad_inner = grad_out[:n_in].clone()
        grad_halo = grad_out[n_in:]
        recv = grad_out.new_empty((self.num_send, *grad_out.shape[1:]))
        dist.all_to_all_single(recv, grad_halo, output_split_sizes=self.send_counts,
                               input_split_sizes=self.halo_counts, group=self.group)
        keep_alive(recv)
        if self.num_send:
            grad_inner.index_add_(0, self._index_on(grad_inner.device), recv)
        self._record(self.num_halo, self.num_send, self._row_bytes(grad_out), backward=True)
        return grad_inner


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
    receives ``S``. Both are one ``all_to_all_single`` on the exchanger's group, bounded by the
    group's timeout.
    """

    @staticmethod
    def forward(ctx: FunctionCtx, h_inner: torch.Tensor,  # type: ignore[override]
                exchanger: HaloExchanger) -> torch.Tensor:
        ctx.exchanger = exchanger  # type: ignore[attr-defined]
        return exchanger._forward(h_inner)

    @staticmethod
    @once_differentiable
    def backward(ctx: FunctionCtx, grad_out: torch.Tensor  # type: ignore[override]
                 ) -> tuple[torch.Tensor, None]:
        exchanger: HaloExchanger = ctx.exchanger  # type: ignore[attr-defined]
        return exchanger._backward(grad_out), None
