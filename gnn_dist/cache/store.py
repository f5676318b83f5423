"""The tiered feature store: a device tier of the hottest rows, the rest in host memory or on disk.

Shapes: ``S`` rows in all (a part's inner rows, then its halo rows), ``F`` features per row,
``C`` rows in the device tier, ``n`` rows requested.

CUDA and streams: every copy is enqueued on the *current* stream of ``device``. Rows read
from the segments are staged in pinned buffers from PyTorch's caching host allocator and copied
with ``non_blocking=True``; the allocator records the copy, so a buffer is not reused before its
copy has run. The ``host`` tier itself is pinned in place (``cudaHostRegister``) and unpinned
when the store is collected, after a device synchronisation; otherwise the store never
synchronises the device. A result is ready for kernels on the current stream; another stream
must wait on it first. Requested ids are read on the host (a CUDA ``ids`` tensor costs one
device-to-host copy, which synchronises).
"""

from __future__ import annotations

import warnings
import weakref
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import torch

from gnn_dist.cache.budget import format_bytes, parse_budget
from gnn_dist.cache.policies import CachePolicy, RowInfo, get_policy

__all__ = ["STORAGES", "FeatureStore", "Segment"]

STORAGES = ("device", "host", "mmap")
"""Where the rows outside the device tier live: ``device`` (nowhere: every row is on the
device), ``host`` (one host tensor, pinned for CUDA), ``mmap`` (the segments as given, read in
place: an ``np.memmap`` is paged in row by row)."""

Segment = np.ndarray | torch.Tensor
"""A block of rows ``[rows, F]``: a numpy array or ``np.memmap``, or a torch tensor."""

_FILL_CHUNK_BYTES = 64 << 20
"""Rows staged at a time while filling the device tier (bounds the pinned staging memory)."""


def _segment_dtype(seg: Segment, index: int) -> torch.dtype:
    """The torch dtype of ``segments[index]``; ``ValueError`` when torch cannot hold it."""
    if isinstance(seg, torch.Tensor):
        return seg.dtype
    try:
        return torch.from_numpy(np.empty(0, dtype=seg.dtype)).dtype
    except (TypeError, ValueError) as exc:
        raise ValueError(f"segments[{index}] has dtype {seg.dtype}, which torch cannot hold "
                         f"(convert it to a native-endian float or int dtype)") from exc


def _check_segments(segments: Sequence[Segment] | Segment) -> tuple[list[Segment], int, torch.dtype]:
    """``(segments as a list, F, dtype)``; ``ValueError`` naming the first segment that differs."""
    if isinstance(segments, (np.ndarray, torch.Tensor)):
        segments = [segments]
    segs = list(segments)
    if not segs:
        raise ValueError("segments must hold at least one [rows, F] array")
    dim, dtype = -1, torch.float32
    for i, seg in enumerate(segs):
        if not isinstance(seg, (np.ndarray, torch.Tensor)):
            raise ValueError(f"segments[{i}] is a {type(seg).__name__}; expected a numpy array, "
                             f"np.memmap or torch.Tensor of shape [rows, F]")
        if seg.ndim != 2:
            raise ValueError(f"segments[{i}] has shape {tuple(seg.shape)}; expected [rows, F]")
        seg_dtype = _segment_dtype(seg, i)
        if i == 0:
            dim, dtype = int(seg.shape[1]), seg_dtype
        elif int(seg.shape[1]) != dim:
            raise ValueError(f"segments[{i}] has {seg.shape[1]} features per row, segments[0] has "
                             f"{dim}: all segments must have the same width")
        elif seg_dtype != dtype:
            raise ValueError(f"segments[{i}] has dtype {seg_dtype}, segments[0] has {dtype}: all "
                             f"segments must have the same dtype (the store never converts)")
    return [s.detach() if isinstance(s, torch.Tensor) else s for s in segs], dim, dtype


def _permutation(order: np.ndarray | torch.Tensor, num_rows: int) -> np.ndarray:
    """``order`` as ``np.int64 [S]``; ``ValueError`` unless it is a permutation of ``[0, S)``."""
    if isinstance(order, torch.Tensor):
        order = order.detach().cpu().numpy()
    arr = np.asarray(order)
    if arr.ndim != 1 or arr.shape[0] != num_rows or not (np.issubdtype(arr.dtype, np.integer) or arr.size == 0):
        raise ValueError(f"order must be a 1-D integer permutation of [0, {num_rows}), got shape "
                         f"{arr.shape} and dtype {arr.dtype}")
    arr = arr.astype(np.int64, copy=False)
    if num_rows and (arr.min() < 0 or arr.max() >= num_rows
                     or not np.all(np.bincount(arr, minlength=num_rows) == 1)):
        raise ValueError(f"order must be a permutation of [0, {num_rows}): every row id exactly once")
    return arr


def _pin_in_place(tensor: torch.Tensor, device: torch.device) -> Callable[[], None]:
    """Page-lock ``tensor``'s memory (``cudaHostRegister``); returns the function that unpins it.

    Used for the host tier, which lives as long as the store, instead of
    ``torch.empty(pin_memory=True)``: PyTorch's caching host allocator rounds every pinned
    allocation up to a power of two (a 5 GiB tier would pin 8 GiB). The unpin function first
    waits for ``device`` (a copy from the tier may still be running).
    """
    cudart = torch.cuda.cudart()
    ptr, num_bytes = tensor.data_ptr(), tensor.numel() * tensor.element_size()
    err = int(cudart.cudaHostRegister(ptr, num_bytes, 0))
    if err != 0:
        raise RuntimeError(f"cudaHostRegister of the {format_bytes(num_bytes)} host tier failed with CUDA "
                           f"error {err}; pass pin_memory=False to keep it pageable")

    def unpin() -> None:
        torch.cuda.synchronize(device if device.type == "cuda" else None)
        cudart.cudaHostUnregister(ptr)

    return unpin


class _HostRows:
    """Rows ``[0, S)`` of host segments laid end to end, read without copying whole segments.

    ``segments`` are numpy arrays (``np.memmap`` included) or CPU tensors of one dtype and width.
    """

    def __init__(self, segments: list[Segment], dim: int, dtype: torch.dtype) -> None:
        self.segments = segments
        self.dim, self.dtype = dim, dtype
        self.offsets = np.cumsum([0] + [int(s.shape[0]) for s in segments]).astype(np.int64)
        """``[k + 1]``: segment ``j`` holds rows ``[offsets[j], offsets[j+1])``."""

    def _buffer(self, num_rows: int, pin: bool) -> torch.Tensor:
        """An uninitialised ``[num_rows, F]`` host tensor (pinned when ``pin``)."""
        return torch.empty((num_rows, self.dim), dtype=self.dtype, pin_memory=pin)

    def read(self, ids: torch.Tensor, pin: bool, *,
             ids_sorted: bool = False) -> tuple[torch.Tensor, torch.Tensor | None]:
        """``(rows [n, F], perm)``: ``rows[j]`` is row ``ids[perm[j]]`` (``perm`` None: ``ids[j]``).

        ``ids`` is a CPU int64 tensor of valid row ids. One torch segment is indexed directly;
        otherwise the ids are sorted, so each segment (a memmap: the file) is read in ascending
        row order, and the caller scatters the rows back by ``perm``.
        """
        segs = self.segments
        if len(segs) == 1 and isinstance(segs[0], torch.Tensor):
            if not pin:
                return segs[0].index_select(0, ids), None
            return torch.index_select(segs[0], 0, ids, out=self._buffer(ids.shape[0], pin)), None
        perm = None
        if not ids_sorted:
            ids, perm = torch.sort(ids)
        ids_np = ids.numpy()
        bounds = np.searchsorted(ids_np, self.offsets)
        buf = self._buffer(ids.shape[0], pin)
        buf_np = buf.numpy() if any(isinstance(s, np.ndarray) for s in segs) else None
        for j, seg in enumerate(segs):
            lo, hi = int(bounds[j]), int(bounds[j + 1])
            if hi == lo:
                continue
            local = ids_np[lo:hi] - self.offsets[j]
            if isinstance(seg, np.ndarray):
                np.take(seg, local, axis=0, out=buf_np[lo:hi], mode="clip")
            else:
                torch.index_select(seg, 0, torch.from_numpy(local), out=buf[lo:hi])
        return buf, perm

    def read_range(self, start: int, stop: int, pin: bool) -> torch.Tensor:
        """Rows ``[start, stop)`` as ``[stop - start, F]``: a view when one torch segment holds
        them all (it may share memory with the segment), else a new (pinned when ``pin``) tensor."""
        j = int(np.searchsorted(self.offsets, start, side="right")) - 1
        if j < len(self.segments) and isinstance(self.segments[j], torch.Tensor) and stop <= self.offsets[j + 1]:
            return self.segments[j][start - int(self.offsets[j]): stop - int(self.offsets[j])]
        buf = self._buffer(stop - start, pin)
        self.copy_range(start, stop, buf)
        return buf

    def copy_range(self, start: int, stop: int, out: torch.Tensor) -> None:
        """Write rows ``[start, stop)`` into the host tensor ``out`` ``[stop - start, F]``."""
        out_np = None
        for j, seg in enumerate(self.segments):
            lo, hi = max(start, int(self.offsets[j])), min(stop, int(self.offsets[j + 1]))
            if hi <= lo:
                continue
            src = slice(lo - int(self.offsets[j]), hi - int(self.offsets[j]))
            if isinstance(seg, np.ndarray):
                out_np = out.numpy() if out_np is None else out_np
                out_np[lo - start: hi - start] = seg[src]
            else:
                out[lo - start: hi - start].copy_(seg[src])


class FeatureStore:
    """``S`` feature rows served on ``device``: the top ``C`` rows of ``order`` in a device
    tier, the others read from host memory or disk on demand.

    Args:
        segments: row blocks ``[rows_j, F]`` concatenated logically (e.g. the inner rows as an
            ``np.memmap`` of ``features.npy``, then the halo rows as a tensor); one width and
            dtype for all. bfloat16 rows come as torch tensors (numpy has no bfloat16).
        device: where :meth:`gather` returns rows and the device tier lives (default: ``"cpu"``,
            where the tier is a separate tensor, which tests use).
        budget_bytes: bytes of the device tier; ``C = min(S, budget_bytes // row_bytes)``
            (``None``: every row). See :func:`~gnn_dist.cache.parse_budget` for ``"4GB"``-style
            specs. Ignored, with a warning, when ``storage="device"``.
        order: ``[S]`` a permutation of the row ids, hottest first (default: stored order;
            unused with ``storage="device"``).
        storage: one of :data:`STORAGES`. ``"device"``: every row copied to ``device``;
            ``"host"``: the rows copied into one host tensor (pinned when ``pin_memory``);
            ``"mmap"``: numpy segments read in place, CPU tensors kept as they are.
        pin_memory: pin host buffers for asynchronous copies (default: when ``device`` is CUDA).
        count_accesses: count the rows requested (:attr:`access_counts`) until :meth:`rerank`.

    The store never converts the dtype. Torch segments on another device are copied to the host
    (``host``/``mmap``). When the tier holds exactly the rows ``[0, C)`` (often the ``degree`` policy's
    inner rows), a row is a hit when ``id < C`` and :meth:`gather_range` slices both tiers;
    otherwise a slot map ``[S]`` gives each row's place in the tier (``-1``: not cached).

    Attributes (read them; :meth:`reset_stats` zeroes the counters):
        hits, misses: rows served from the device tier / from the host tier, summed over calls.
        h2d_bytes: bytes of missed rows copied host-to-device (``misses * row_bytes``; counted
            on CPU too, where the "device" tier is a separate tensor).
        num_rows, dim, dtype, row_bytes: ``S``, ``F``, the stored dtype, ``F * itemsize``.
        storage, device, pin_memory, budget_bytes: as resolved from the arguments.
        prefix_cached: the tier holds exactly rows ``[0, C)``.
    """

    def __init__(
        self,
        segments: Sequence[Segment] | Segment,
        *,
        device: torch.device | str = "cpu",
        budget_bytes: int | None = None,
        order: np.ndarray | torch.Tensor | None = None,
        storage: str = "host",
        pin_memory: bool | None = None,
        count_accesses: bool = False,
    ) -> None:
        if storage not in STORAGES:
            raise ValueError(f"storage={storage!r} is not one of {', '.join(STORAGES)}")
        if budget_bytes is not None and (isinstance(budget_bytes, bool)
                                         or not isinstance(budget_bytes, (int, np.integer)) or budget_bytes < 0):
            raise ValueError(f"budget_bytes must be an int >= 0 or None, got {budget_bytes!r} "
                             f"(parse a '4GB'-style size with gnn_dist.cache.parse_budget)")
        segs, self.dim, self.dtype = _check_segments(segments)
        self.device = torch.device(device)
        self.storage = storage
        self.num_rows = int(sum(int(s.shape[0]) for s in segs))
        self.row_bytes = self.dim * self.dtype.itemsize
        if pin_memory and not torch.cuda.is_available():
            raise ValueError("pin_memory=True needs CUDA, which is not available; pass None or False")
        self.pin_memory = bool(self.device.type == "cuda" if pin_memory is None else pin_memory)
        if storage == "device" and budget_bytes is not None:
            warnings.warn(f"budget_bytes={budget_bytes} is ignored with storage='device': every row "
                          f"is on the device", stacklevel=2)
            budget_bytes = None
        self.budget_bytes = budget_bytes
        self._order = (np.arange(self.num_rows, dtype=np.int64) if order is None or storage == "device"
                       else _permutation(order, self.num_rows))
        self.hits = 0
        self.misses = 0
        self.h2d_bytes = 0
        self._counts: torch.Tensor | None = None
        self._counting = False
        if count_accesses:
            self.start_counting()

        source = _HostRows([s.cpu() if isinstance(s, torch.Tensor) else s for s in segs], self.dim, self.dtype)
        num_cached = self._capacity()
        self._host: _HostRows | None = None
        if storage == "mmap":
            self._host = source
        elif storage == "host" and num_cached < self.num_rows:
            host = torch.empty((self.num_rows, self.dim), dtype=self.dtype)
            source.copy_range(0, self.num_rows, host)
            if self.pin_memory and host.numel():
                weakref.finalize(self, _pin_in_place(host, self.device)).atexit = False
            self._host = source = _HostRows([host], self.dim, self.dtype)
        self._tier = torch.empty((0, self.dim), dtype=self.dtype, device=self.device)
        self._slot: torch.Tensor | None = None
        self._fill_tier(source)

    @classmethod
    def from_policy(
        cls,
        segments: Sequence[Segment] | Segment,
        policy: str | CachePolicy,
        info: RowInfo,
        *,
        budget: str | int | float | None = None,
        device: torch.device | str = "cpu",
        storage: str = "host",
        pin_memory: bool | None = None,
    ) -> FeatureStore:
        """A store ranked by ``policy`` (a name in :data:`~gnn_dist.cache.POLICIES` or an
        instance) over ``info``'s rows, with the tier limited to ``parse_budget(budget, S * row_bytes)``.

        ``none`` caches no row; ``frequency`` turns on access counting (call :meth:`rerank`
        after the first epoch).
        """
        pol = get_policy(policy) if isinstance(policy, str) else policy
        segs, dim, dtype = _check_segments(segments)
        num_rows = sum(int(s.shape[0]) for s in segs)
        if info.num_rows != num_rows:
            raise ValueError(f"info describes {info.num_rows} rows (num_inner={info.num_inner} + "
                             f"num_halo={info.num_halo}), the segments hold {num_rows}")
        budget_bytes = None
        order = None
        if storage != "device":
            budget_bytes = parse_budget(budget, num_rows * dim * dtype.itemsize) if pol.uses_device_cache else 0
            order = pol.order(info)
        return cls(segs, device=device, budget_bytes=budget_bytes, order=order, storage=storage,
                   pin_memory=pin_memory, count_accesses=pol.counts_accesses)

    # ----------------------------------------------------------------- tiers

    def _capacity(self) -> int:
        """``C``: rows the budget allows, at most ``S``."""
        if self.budget_bytes is None or self.row_bytes == 0:
            return self.num_rows
        return min(self.num_rows, self.budget_bytes // self.row_bytes)

    def _fill_tier(self, source: _HostRows) -> None:
        """(Re)build the device tier from the first ``C`` rows of ``self._order``, stored in
        ascending row id; the old tier is released first."""
        num_cached = self._capacity()
        top = np.sort(self._order[:num_cached])
        self.prefix_cached = num_cached == 0 or int(top[-1]) == num_cached - 1
        self._tier = torch.empty((0, self.dim), dtype=self.dtype, device=self.device)
        self._slot = None
        tier = torch.empty((num_cached, self.dim), dtype=self.dtype, device=self.device)
        chunk = max(1, _FILL_CHUNK_BYTES // max(self.row_bytes, 1))
        for start in range(0, num_cached, chunk):
            stop = min(num_cached, start + chunk)
            if self.prefix_cached:
                rows = source.read_range(start, stop, self.pin_memory)
            else:
                rows, _ = source.read(torch.from_numpy(top[start:stop]), self.pin_memory, ids_sorted=True)
            tier[start:stop].copy_(rows, non_blocking=True)
        self._tier = tier
        if not self.prefix_cached:
            self._slot = torch.full((self.num_rows,), -1, dtype=torch.int64)
            self._slot[torch.from_numpy(top)] = torch.arange(num_cached, dtype=torch.int64)

    def rerank(self, order: np.ndarray | torch.Tensor | None = None) -> None:
        """Refill the device tier (same budget) by ``order``, and stop counting accesses.

        ``order`` (default): rows by :attr:`access_counts` descending, ties in the current
        order. Rows move host-to-device once here (not counted in :attr:`h2d_bytes`).
        With ``storage="device"`` every row is cached already: only counting stops.
        """
        if order is None:
            if self._counts is None:
                raise ValueError("rerank() without an order ranks by access counts: build the store with "
                                 "count_accesses=True (or call start_counting()) first, or pass an order")
            counts = self._counts.numpy()
            new_order = self._order[np.argsort(-counts[self._order], kind="stable")]
        else:
            new_order = _permutation(order, self.num_rows)
        self._counting = False
        if self.storage == "device":
            return
        self._order = new_order
        if self._host is not None:
            self._fill_tier(self._host)

    # ----------------------------------------------------------------- reads

    def _check_ids(self, ids: torch.Tensor | np.ndarray) -> torch.Tensor:
        """``ids`` as a CPU int64 tensor; ``ValueError`` unless 1-D integers in ``[0, S)``."""
        if isinstance(ids, np.ndarray):
            ids = torch.from_numpy(ids)
        if not isinstance(ids, torch.Tensor):
            raise ValueError(f"ids must be a 1-D integer tensor, got a {type(ids).__name__}")
        if ids.dim() != 1 or ids.dtype == torch.bool or ids.is_floating_point() or ids.is_complex():
            raise ValueError(f"ids must be a 1-D integer tensor, got shape {tuple(ids.shape)} and dtype {ids.dtype}")
        ids_cpu = ids.to("cpu", torch.int64)
        if ids_cpu.numel():
            low, high = torch.aminmax(ids_cpu)
            if int(low) < 0 or int(high) >= self.num_rows:
                bad = int(ids_cpu[(ids_cpu < 0) | (ids_cpu >= self.num_rows)][0])
                raise ValueError(f"row id {bad} is out of range: the store holds {self.num_rows} rows "
                                 f"(ids must lie in [0, {self.num_rows}))")
        return ids_cpu

    def _count(self, num_hits: int, num_misses: int) -> None:
        self.hits += num_hits
        self.misses += num_misses
        self.h2d_bytes += num_misses * self.row_bytes

    def _to_device(self, index: torch.Tensor) -> torch.Tensor:
        return index.to(self.device, non_blocking=True)

    def gather(self, ids: torch.Tensor | np.ndarray) -> torch.Tensor:
        """Rows ``ids`` (``[n]`` integers, any order, repeats allowed, on any device) as a new
        ``[n, F]`` tensor on :attr:`device`, equal to indexing the concatenated segments.

        Hits are read from the device tier; misses from the host tier (sorted by id per segment
        for locality), staged in pinned memory on CUDA and copied in one ``non_blocking`` copy.
        """
        ids_cpu = self._check_ids(ids)
        if self._counting:
            self._counts.index_add_(0, ids_cpu, torch.ones(ids_cpu.shape[0], dtype=torch.int64))
        return self._gather(ids_cpu)

    def _gather(self, ids: torch.Tensor) -> torch.Tensor:
        """:meth:`gather` of valid CPU int64 ``ids`` ``[n]``, without access counting."""
        num = ids.shape[0]
        if num == 0:
            return torch.empty((0, self.dim), dtype=self.dtype, device=self.device)
        if self._host is None or self.cached_rows == self.num_rows:
            self._count(num, 0)
            return self._tier.index_select(0, self._to_device(ids))
        if self.prefix_cached:
            hit, tier_index = ids < self.cached_rows, ids
        else:
            tier_index = self._slot[ids]
            hit = tier_index >= 0
        num_hits = int(hit.sum())
        self._count(num_hits, num - num_hits)
        if num_hits == num:
            return self._tier.index_select(0, self._to_device(tier_index))
        out = None
        miss_pos = None  # None: every requested row is a miss, in request order
        if num_hits:
            out = torch.empty((num, self.dim), dtype=self.dtype, device=self.device)
            hit_pos = hit.nonzero().squeeze(1)
            out[self._to_device(hit_pos)] = self._tier.index_select(0, self._to_device(tier_index[hit_pos]))
            miss_pos = (~hit).nonzero().squeeze(1)
        rows, perm = self._host.read(ids if miss_pos is None else ids[miss_pos], self.pin_memory)
        rows = rows.to(self.device, non_blocking=True)
        if miss_pos is None and perm is None:
            return rows
        if out is None:
            out = torch.empty((num, self.dim), dtype=self.dtype, device=self.device)
        if miss_pos is None:
            pos = perm
        else:
            pos = miss_pos if perm is None else miss_pos[perm]
        out[self._to_device(pos)] = rows
        return out

    def gather_range(self, start: int, stop: int) -> torch.Tensor:
        """Rows ``[start, stop)`` as ``[stop - start, F]`` on :attr:`device`.

        When the device tier holds the whole range (``storage="device"``, or a prefix-cached
        range below ``C``) the result is a view of the tier: read it, never write to it.
        Otherwise it is a new tensor: the cached part sliced from the tier and the cold suffix
        copied from one contiguous host range in one copy (``non_blocking`` from pinned memory).
        """
        for name, value in (("start", start), ("stop", stop)):
            if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
                raise ValueError(f"gather_range: {name} must be an int, got {value!r}")
        if not 0 <= start <= stop <= self.num_rows:
            raise ValueError(f"gather_range({start}, {stop}): need 0 <= start <= stop <= {self.num_rows} (rows)")
        start, stop = int(start), int(stop)
        if self._counting:
            self._counts[start:stop] += 1
        if not self.prefix_cached:
            return self._gather(torch.arange(start, stop, dtype=torch.int64))
        num = stop - start
        num_cached = max(0, min(stop, self.cached_rows) - start)
        self._count(num_cached, num - num_cached)
        if num_cached == num:
            return self._tier[start:stop]
        out = torch.empty((num, self.dim), dtype=self.dtype, device=self.device)
        out[:num_cached] = self._tier[start:start + num_cached]
        out[num_cached:].copy_(self._host.read_range(start + num_cached, stop, self.pin_memory), non_blocking=True)
        return out

    # ----------------------------------------------------------------- counters

    @property
    def cached_rows(self) -> int:
        """``C``: rows in the device tier."""
        return int(self._tier.shape[0])

    @property
    def cached_bytes(self) -> int:
        """Bytes of the device tier (``C * row_bytes``)."""
        return self.cached_rows * self.row_bytes

    @property
    def hit_rate(self) -> float:
        """``hits / (hits + misses)`` (rows), ``nan`` before any request."""
        total = self.hits + self.misses
        return self.hits / total if total else float("nan")

    @property
    def order(self) -> np.ndarray:
        """``np.int64 [S]`` the current ranking, hottest first (a copy)."""
        return self._order.copy()

    @property
    def access_counts(self) -> np.ndarray | None:
        """``np.int64 [S]`` rows requested per row id while counting (repeats count), or None
        when the store never counted. Shares memory with the store: copy it to keep a snapshot."""
        return None if self._counts is None else self._counts.numpy()

    @property
    def counting(self) -> bool:
        """Whether requests are being counted (until :meth:`rerank`)."""
        return self._counting

    def start_counting(self, reset: bool = True) -> None:
        """Count requested rows into :attr:`access_counts` (from zero when ``reset``)."""
        if self._counts is None or reset:
            self._counts = torch.zeros(self.num_rows, dtype=torch.int64)
        self._counting = True

    def reset_stats(self) -> None:
        """Zero :attr:`hits`, :attr:`misses` and :attr:`h2d_bytes`."""
        self.hits = self.misses = self.h2d_bytes = 0

    def stats(self) -> dict[str, Any]:
        """The counters and the layout as a JSON-ready dict."""
        return {
            "hits": self.hits, "misses": self.misses, "hit_rate": self.hit_rate, "h2d_bytes": self.h2d_bytes,
            "cached_rows": self.cached_rows, "cached_bytes": self.cached_bytes, "num_rows": self.num_rows,
            "dim": self.dim, "dtype": str(self.dtype).removeprefix("torch."), "row_bytes": self.row_bytes,
            "storage": self.storage, "device": str(self.device), "prefix_cached": self.prefix_cached,
        }

    def __repr__(self) -> str:
        dtype = str(self.dtype).removeprefix("torch.")
        return (f"FeatureStore(rows={self.num_rows}, dim={self.dim}, dtype={dtype}, storage={self.storage!r}, "
                f"device='{self.device}', cached={self.cached_rows} rows / {format_bytes(self.cached_bytes)})")
