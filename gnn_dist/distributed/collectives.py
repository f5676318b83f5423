"""Collectives the trainer uses, with the world-size-1 no-op path and buffer keep-alive.

Every function here is a no-op (returns its input unchanged) when no process group exists or
the group has one rank, so single-process code needs no branches. Every buffer that crosses
the wire is passed to :func:`~.keepalive.keep_alive` (see that module for why). Collectives are
synchronous and time out after the group's timeout.

Shapes: any; the reductions work in place and return the same tensor.
"""

from __future__ import annotations

import contextlib
import json
import logging
from collections.abc import Iterable, Iterator
from typing import Any

import torch
import torch.distributed as dist
from torch import nn

from .errors import CollectiveError
from .keepalive import keep_alive
from .per_rank import is_per_rank
from .process_group import get_world_size, is_distributed

__all__ = [
    "named_collective",
    "comm_device",
    "raise_on_all_ranks",
    "all_ranks_agree",
    "all_gather_json",
    "broadcast_json",
    "broadcast_bytes",
    "gather_rows",
    "all_gather_rows",
    "all_reduce_sum",
    "all_reduce_max",
    "all_reduce_min",
    "all_reduce_mean",
    "all_reduce_scalar",
    "barrier",
    "broadcast_module",
    "all_reduce_grads",
]

logger = logging.getLogger(__name__)

DEFAULT_BUCKET_BYTES = 25 * 2**20
"""Gradient bucket size for :func:`all_reduce_grads` (as DDP's default)."""


@contextlib.contextmanager
def named_collective(what: str, group: dist.ProcessGroup | None = None) -> Iterator[None]:
    """Turn a failed collective inside the block into a :class:`~.errors.CollectiveError` that
    names it (``what``) and the ranks it waited for, keeping the backend's reason."""
    try:
        yield
    except RuntimeError as exc:
        if isinstance(exc, CollectiveError):
            raise
        me, world = dist.get_rank(group), dist.get_world_size(group)
        peers = ", ".join(str(r) for r in range(world) if r != me)
        reason = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise CollectiveError(f"rank {me}: the {what} with peer rank(s) {peers} did not complete: {reason}. "
                              f"A peer has died, stalled or is past the collective timeout; the first rank "
                              f"that failed says why") from exc


def _all_reduce(tensor: torch.Tensor, op: dist.ReduceOp.RedOpType,
                group: dist.ProcessGroup | None) -> torch.Tensor:
    if not is_distributed(group):
        return tensor
    buffer = tensor if tensor.is_contiguous() else tensor.contiguous()
    with named_collective("all-reduce", group):
        dist.all_reduce(buffer, op=op, group=group)
    keep_alive(buffer)
    if buffer is not tensor:
        tensor.copy_(buffer)
    return tensor


def all_reduce_sum(tensor: torch.Tensor, group: dist.ProcessGroup | None = None) -> torch.Tensor:
    """Sum ``tensor`` over ranks, in place; returns it."""
    return _all_reduce(tensor, dist.ReduceOp.SUM, group)


def all_reduce_max(tensor: torch.Tensor, group: dist.ProcessGroup | None = None) -> torch.Tensor:
    """Element-wise maximum over ranks, in place; returns it."""
    return _all_reduce(tensor, dist.ReduceOp.MAX, group)


def all_reduce_min(tensor: torch.Tensor, group: dist.ProcessGroup | None = None) -> torch.Tensor:
    """Element-wise minimum over ranks, in place; returns it."""
    return _all_reduce(tensor, dist.ReduceOp.MIN, group)


def all_reduce_mean(tensor: torch.Tensor, group: dist.ProcessGroup | None = None) -> torch.Tensor:
    """Mean over ranks, in place (floating tensors only); returns it."""
    if not tensor.is_floating_point():
        raise TypeError(f"all_reduce_mean needs a floating tensor, got dtype {tensor.dtype}")
    _all_reduce(tensor, dist.ReduceOp.SUM, group)
    if is_distributed(group):
        tensor.div_(get_world_size(group))
    return tensor


def all_reduce_scalar(value: float, op: str = "sum", *,
                      group: dist.ProcessGroup | None = None) -> float:
    """Reduce one Python number over ranks (``op``: ``"sum"``, ``"max"``, ``"min"``,
    ``"mean"``), in float64 on CPU (on NCCL, on the current CUDA device)."""
    ops = {"sum": all_reduce_sum, "max": all_reduce_max, "min": all_reduce_min,
           "mean": all_reduce_mean}
    if op not in ops:
        raise ValueError(f"op={op!r} is not one of {sorted(ops)}")
    device = torch.device("cpu")
    if is_distributed(group) and dist.get_backend(group) == "nccl":
        device = torch.device("cuda", torch.cuda.current_device())
    t = torch.tensor([float(value)], dtype=torch.float64, device=device)
    return float(ops[op](t, group).item())


def barrier(group: dist.ProcessGroup | None = None) -> None:
    """Wait for every rank (no-op without a multi-rank group)."""
    if is_distributed(group):
        dist.barrier(group=group)


def _module_tensors(module: nn.Module) -> list[tuple[str, torch.Tensor]]:
    named = [(f"parameter {n}", p) for n, p in module.named_parameters() if not is_per_rank(p)]
    named += [(f"buffer {n}", b) for n, b in module.named_buffers()]
    return named


def _flat_broadcast(tensors: list[torch.Tensor], src: int, group: dist.ProcessGroup | None) -> None:
    """Broadcast same-dtype, same-device tensors as one flat buffer and copy back."""
    flat = torch.cat([t.detach().reshape(-1) for t in tensors])
    dist.broadcast(flat, src=src, group=group)
    keep_alive(flat)
    offset = 0
    with torch.no_grad():
        for t in tensors:
            n = t.numel()
            t.copy_(flat[offset:offset + n].view_as(t))
            offset += n


def broadcast_module(module: nn.Module, src: int = 0, *,
                     group: dist.ProcessGroup | None = None) -> nn.Module:
    """Copy every parameter **and buffer** of ``module`` from rank ``src`` to all ranks (not the
    parameters that hold a rank's own rows, :mod:`.per_rank`).

    Before any tensor moves, the ranks compare the list of names, shapes and dtypes; a module
    that differs from ``src``'s raises ``ValueError`` on every rank, naming the first
    difference (instead of silently mixing tensors). Tensors are sent in one flat buffer per
    (dtype, device). No-op without a multi-rank group. Returns ``module``.
    """
    if not is_distributed(group):
        return module
    world = dist.get_world_size(group)
    if not 0 <= src < world:
        raise ValueError(f"src={src} is not a rank of the group (world size {world})")
    named = _module_tensors(module)
    spec = [[name, list(t.shape), str(t.dtype)] for name, t in named]
    src_spec = broadcast_json(spec, src, group)
    mismatch = ""
    if src_spec != spec:
        for mine, theirs in zip(spec, src_spec):
            if mine != theirs:
                mismatch = f"this rank has {tuple(mine)}, rank {src} has {tuple(theirs)}"
                break
        else:
            mismatch = f"this rank has {len(spec)} tensors, rank {src} has {len(src_spec)}"
    bad = [(r, m) for r, m in enumerate(all_gather_json(mismatch, group)) if m]
    if bad:
        r, m = bad[0]
        raise ValueError(f"broadcast_module: the module on rank {r} differs from rank {src}'s: "
                         f"{m} (build the same model on every rank)")
    buckets: dict[tuple[torch.dtype, torch.device], list[torch.Tensor]] = {}
    for _, t in named:
        buckets.setdefault((t.dtype, t.device), []).append(t)
    for key in sorted(buckets, key=lambda k: (str(k[0]), str(k[1]))):
        _flat_broadcast(buckets[key], src, group)
    return module


def all_reduce_grads(parameters: Iterable[nn.Parameter], *, average: bool = False,
                     bucket_bytes: int = DEFAULT_BUCKET_BYTES,
                     group: dist.ProcessGroup | None = None) -> None:
    """Sum (or average) the ``.grad`` of ``parameters`` over ranks, in buckets of at most
    ``bucket_bytes`` per (dtype, device); a parameter without ``.grad`` counts as zeros (its
    ``.grad`` is created), so every rank runs the same collectives. No-op without a
    multi-rank group. Parameters that hold a rank's own rows (:mod:`.per_rank`) are left out.

    Every rank must pass the same parameters in the same order (the model's
    ``parameters()``).
    """
    if bucket_bytes <= 0:
        raise ValueError(f"bucket_bytes must be positive, got {bucket_bytes}")
    if not is_distributed(group):
        return
    params = [p for p in parameters if p.requires_grad and not is_per_rank(p)]
    for p in params:
        if p.grad is None:
            p.grad = torch.zeros_like(p)
    groups: dict[tuple[torch.dtype, torch.device], list[torch.Tensor]] = {}
    for p in params:
        assert p.grad is not None
        groups.setdefault((p.grad.dtype, p.grad.device), []).append(p.grad)
    world = dist.get_world_size(group)
    for key in sorted(groups, key=lambda k: (str(k[0]), str(k[1]))):
        for bucket in _buckets(groups[key], bucket_bytes):
            flat = torch.cat([g.reshape(-1) for g in bucket])
            with named_collective("gradient all-reduce", group):
                dist.all_reduce(flat, group=group)
            keep_alive(flat)
            if average:
                flat.div_(world)
            offset = 0
            for g in bucket:
                g.copy_(flat[offset:offset + g.numel()].view_as(g))
                offset += g.numel()


def _buckets(tensors: list[torch.Tensor], cap_bytes: int) -> Iterator[list[torch.Tensor]]:
    """Consecutive runs of ``tensors`` of at most ``cap_bytes`` (a larger tensor goes alone)."""
    bucket: list[torch.Tensor] = []
    size = 0
    for t in tensors:
        nbytes = t.numel() * t.element_size()
        if bucket and size + nbytes > cap_bytes:
            yield bucket
            bucket, size = [], 0
        bucket.append(t)
        size += nbytes
    if bucket:
        yield bucket


def raise_on_all_ranks(error: BaseException | None, what: str,
                       group: dist.ProcessGroup | None = None) -> None:
    """Make a step that may fail on some ranks fail on **every** rank (a collective: all call it).

    Each rank passes the exception its own step raised (or None). Every rank learns which ranks
    failed (one gather, which also acts as a barrier); a failed rank re-raises its
    own exception, the others raise ``ValueError`` (when the first failure was one: bad user
    input) or ``RuntimeError`` naming the first failed rank and its message. So no rank walks on
    into a collective its failed peer will never join. Without a multi-rank group it re-raises
    ``error`` (if any) and returns.
    """
    if not is_distributed(group):
        if error is not None:
            raise error
        return
    mine = None if error is None else [isinstance(error, ValueError), f"{type(error).__name__}: {error}"]
    with named_collective(f"agreement after {what}", group):
        gathered = all_gather_json(mine, group)
    if error is not None:
        raise error
    for r, item in enumerate(gathered):
        if item is not None:
            is_value_error, message = item
            kind = ValueError if is_value_error else RuntimeError
            raise kind(f"{what} failed on rank {r}: {message}")


@contextlib.contextmanager
def all_ranks_agree(what: str, group: dist.ProcessGroup | None = None) -> Iterator[None]:
    """``with all_ranks_agree("writing the checkpoint"):`` around a step that may fail on some
    ranks only (a file one rank writes or reads): afterwards every rank has raised if any rank
    failed (see :func:`raise_on_all_ranks`; a collective, so every rank enters the block)."""
    error: BaseException | None = None
    try:
        yield
    except Exception as exc:  # shared with the peers, then re-raised
        error = exc
    raise_on_all_ranks(error, what, group)



def comm_device(group: dist.ProcessGroup | None = None) -> torch.device:
    """Where ``group``'s collectives take their tensors: the current CUDA device for NCCL, else the CPU."""
    if dist.get_backend(group) == "nccl":
        return torch.device("cuda", torch.cuda.current_device())
    return torch.device("cpu")


def _gather_bytes(data: bytes, group: dist.ProcessGroup | None) -> list[bytes]:
    device = comm_device(group)
    world = dist.get_world_size(group)
    size = torch.tensor([len(data)], dtype=torch.int64, device=device)
    sizes = [torch.zeros_like(size) for _ in range(world)]
    dist.all_gather(sizes, size, group=group)
    longest = max(int(s.item()) for s in sizes)
    mine = torch.zeros(longest, dtype=torch.uint8, device=device)
    mine[:len(data)] = torch.frombuffer(bytearray(data), dtype=torch.uint8) if data else mine[:0]
    parts = [torch.empty_like(mine) for _ in range(world)]
    dist.all_gather(parts, mine, group=group)
    keep_alive(size, mine, *sizes, *parts)
    return [bytes(p[:int(n.item())].cpu().numpy().tobytes()) for p, n in zip(parts, sizes)]


def broadcast_bytes(data: bytes | None, src: int = 0, group: dist.ProcessGroup | None = None) -> bytes | None:
    """Rank ``src``'s ``data`` (or None) on every rank, as raw bytes over the group (a
    collective): how a file only rank ``src`` can read reaches the others, never unpickled."""
    if not is_distributed(group):
        return data
    device = comm_device(group)
    size = torch.tensor([-1 if data is None else len(data)], dtype=torch.int64, device=device)
    dist.broadcast(size, src=src, group=group)
    n = int(size.item())
    if n < 0:
        return None
    buf = torch.empty(n, dtype=torch.uint8, device=device)
    if dist.get_rank(group) == src and n:
        assert data is not None
        buf.copy_(torch.frombuffer(bytearray(data), dtype=torch.uint8))
    dist.broadcast(buf, src=src, group=group)
    keep_alive(size, buf)
    return bytes(buf.cpu().numpy().tobytes())


def all_gather_json(value: Any, group: dist.ProcessGroup | None = None, *,
                    what: str = "gather of JSON values") -> list[Any]:
    """Every rank's JSON-able ``value`` (tuples arrive as lists), in rank order (a collective;
    ``[value]`` without a group; a failure is a :class:`~.errors.CollectiveError` naming
    ``what``). JSON, not pickle: a peer's bytes are data, never code."""
    if not is_distributed(group):
        return [value]
    with named_collective(what, group):
        gathered = _gather_bytes(json.dumps(value).encode(), group)
    return [json.loads(b) for b in gathered]


def broadcast_json(value: Any, src: int = 0, group: dist.ProcessGroup | None = None) -> Any:
    """Rank ``src``'s JSON-able ``value`` on every rank (a collective; ``value`` without a group)."""
    if not is_distributed(group):
        return value
    data = broadcast_bytes(json.dumps(value).encode() if dist.get_rank(group) == src else b"", src, group)
    assert data is not None
    return json.loads(data)


def _padded_rows(tensor: torch.Tensor, group: dist.ProcessGroup | None) -> tuple[torch.Tensor, list[int]]:
    """``tensor`` padded to the longest rank's rows on the group's device, and every rank's row
    count (one all-gather of the counts)."""
    device = comm_device(group)
    count = torch.tensor([tensor.shape[0]], dtype=torch.int64, device=device)
    counts = [torch.zeros_like(count) for _ in range(dist.get_world_size(group))]
    dist.all_gather(counts, count, group=group)
    keep_alive(count, *counts)
    sizes = [int(c.item()) for c in counts]
    padded = torch.zeros((max(sizes), *tensor.shape[1:]), dtype=tensor.dtype, device=device)
    padded[:tensor.shape[0]] = tensor
    return padded, sizes


def gather_rows(tensor: torch.Tensor, dst: int = 0,
                group: dist.ProcessGroup | None = None) -> list[torch.Tensor] | None:
    """Every rank's ``tensor`` ``[n_r, ...]`` (same trailing shape and dtype, any ``n_r``) on rank
    ``dst``, in rank order; None on the other ranks (a collective: one gather of the row counts,
    one of the rows padded to the longest). ``[tensor]`` without a group."""
    if not is_distributed(group):
        return [tensor]
    world, me = dist.get_world_size(group), dist.get_rank(group)
    with named_collective(f"gather of rows to rank {dst}", group):
        padded, sizes = _padded_rows(tensor, group)
        parts = [torch.empty_like(padded) for _ in range(world)] if me == dst else None
        dist.gather(padded, parts, dst=dst, group=group)
    keep_alive(padded, *(parts or []))
    return None if parts is None else [p[:n] for p, n in zip(parts, sizes)]


def all_gather_rows(tensor: torch.Tensor, group: dist.ProcessGroup | None = None) -> list[torch.Tensor]:
    """Every rank's ``tensor`` ``[n_r, ...]`` (same trailing shape and dtype, any ``n_r``) on every
    rank, in rank order (a collective: one all-gather of the row counts, one of the rows padded to
    the longest). ``[tensor]`` without a group."""
    if not is_distributed(group):
        return [tensor]
    with named_collective("all-gather of rows", group):
        padded, sizes = _padded_rows(tensor, group)
        parts = [torch.empty_like(padded) for _ in range(len(sizes))]
        dist.all_gather(parts, padded, group=group)
    keep_alive(padded, *parts)
    return [p[:n] for p, n in zip(parts, sizes)]
