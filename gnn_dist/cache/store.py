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

import contextlib
import warnings
import weakref
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from gnn_dist.cache.budget import format_bytes, parse_budget
from gnn_dist.cache.host_rows import HostRows, Segment, check_segments, permutation, pin_in_place
from gnn_dist.cache.policies import CachePolicy, RowInfo, get_policy
from gnn_dist.config.registry import register_choices

__all__ = ["STORAGES", "FeatureStore", "Segment", "StoreCounts"]

STORAGES = ("device", "host", "mmap")
"""Where the rows outside the device tier live: ``device`` (nowhere: every row is on the
device), ``host`` (one host tensor, pinned for CUDA), ``mmap`` (the segments as given, read in
place: an ``np.memmap`` is paged in row by row)."""
register_choices("feature_storage", lambda: STORAGES)   # --feature-storage (gnn_dist.config)



@dataclass(slots=True)
class StoreCounts:
    """Rows a store served from its device tier (``hits``) and from host memory or disk
    (``misses``), and the bytes of the misses copied host-to-device."""

    hits: int = 0
    misses: int = 0
    h2d_bytes: int = 0

_FILL_CHUNK_BYTES = 64 << 20
"""Rows staged at a time while filling the device tier (bounds the pinned staging memory)."""


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
        segs, self.dim, self.dtype = check_segments(segments)
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
                       else permutation(order, self.num_rows))
        self.hits = 0
        self.misses = 0
        self.h2d_bytes = 0
        self._recorders: list[StoreCounts] = []
        self._counts: torch.Tensor | None = None
        self._counting = False
        if count_accesses:
            self.start_counting()

        source = HostRows([s.cpu() if isinstance(s, torch.Tensor) else s for s in segs], self.dim, self.dtype)
        num_cached = self._capacity()
        self._host: HostRows | None = None
        if storage == "mmap":
            self._host = source
        elif storage == "host" and num_cached < self.num_rows:
            host = torch.empty((self.num_rows, self.dim), dtype=self.dtype)
            source.copy_range(0, self.num_rows, host)
            if self.pin_memory and host.numel():
                weakref.finalize(self, pin_in_place(host, self.device)).atexit = False
            self._host = source = HostRows([host], self.dim, self.dtype)
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
        segs, dim, dtype = check_segments(segments)
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

    def _fill_tier(self, source: HostRows) -> None:
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
            new_order = permutation(order, self.num_rows)
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
        for counts in self._recorders:
            counts.hits += num_hits
            counts.misses += num_misses
            counts.h2d_bytes += num_misses * self.row_bytes

    @contextlib.contextmanager
    def recording(self) -> Iterator[StoreCounts]:
        """``with store.recording() as counts:``: the rows served (hits, misses) and bytes copied
        host-to-device inside the block."""
        counts = StoreCounts()
        self._recorders.append(counts)
        try:
            yield counts
        finally:
            self._recorders[:] = [r for r in self._recorders if r is not counts]

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
