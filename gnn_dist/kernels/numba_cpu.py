"""Cache-blocked, multi-threaded CPU kernels compiled with numba.

Shapes follow :mod:`gnn_dist.kernels` (``R`` rows, ``C`` columns, ``E`` entries, ``F`` features,
``H`` heads). Every kernel is row-parallel (a row is written by one thread only: no atomics) and
deterministic for a given thread count... and for any thread count, since a row's sum is always
taken in the same order.

Cache blocking: an aggregation reads ``x[col]`` rows at random. When ``x [C, F]`` does not fit the
last-level cache, the columns are split into tiles of ``tile_rows`` rows that fit a fraction of
it (:data:`L3_FRACTION`), and each group of output rows (sized to a fraction of the L2,
:data:`L2_FRACTION`, so it stays in L2 across tiles) walks the tiles in order: the random reads
of one tile hit the shared L3. Rows are walked with a per-row cursor, which needs each row's
entries sorted by column; that sorted copy (and its entry -> edge map) is built once per
structure, only when tiling is needed. Row groups are balanced by entries + rows.

Compilation is lazy (on first use of a dtype) and cached on disk (``cache=True``: next to this
file, else in ``NUMBA_CACHE_DIR`` or the user's cache folder); when no cache location is
writable, the kernels are compiled without a cache and a warning says so. Launches are
serialised by a lock (numba's default workqueue threading layer must not be entered from two
threads at once), and each launch uses ``torch.get_num_threads()`` threads, so torch's and
numba's pools never run more threads than torch was told to.
"""

from __future__ import annotations

import logging
import math
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any, Callable

import numba
import numpy as np
import torch

from .cache_info import cache_sizes
from .csr import CSR

__all__ = ["NumbaBackend", "L2_FRACTION", "L3_FRACTION", "tile_rows_for", "row_groups"]

log = logging.getLogger(__name__)

L3_FRACTION = 0.25
"""Share of the last-level cache one column tile of ``x`` may fill (the rest holds the output
rows, the streamed indices and the other threads' data)."""
L2_FRACTION = 0.5
"""Share of the L2 one group of output rows may fill (it is revisited once per column tile)."""
MIN_GROUPS_PER_THREAD = 4
"""At least this many row groups per thread, for load balance."""

_LAUNCH_LOCK = threading.RLock()
_FASTMATH = {"reassoc", "contract"}  # no nnan/ninf: softmax scores hold -inf on purpose


def _jit(**options: Any) -> Callable[[Callable[..., Any]], Any]:
    """``numba.njit(cache=True, nogil=True, **options)``, falling back to no on-disk cache when
    numba finds no writable cache location (a read-only install without a usable home folder)."""
    def wrap(fn: Callable[..., Any]) -> Any:
        try:
            return numba.njit(cache=True, nogil=True, **options)(fn)
        except RuntimeError as err:  # "cannot cache function ...: no locator available"
            log.warning("numba kernel %s is compiled without an on-disk cache (%s); set NUMBA_CACHE_DIR "
                        "to a writable folder to keep compiled kernels between runs", fn.__name__, err)
            return numba.njit(cache=False, nogil=True, **options)(fn)
    return wrap


# ----------------------------------------------------------------------------- kernels
@_jit(parallel=True, fastmath=_FASTMATH)
def _spmm_kernel(groups, indptr, indices, eids, use_eids, values, use_values, x, out, tile_rows):  # pragma: no cover
    num_cols = x.shape[0]
    num_feat = x.shape[1]
    heads = values.shape[1]
    width = num_feat // heads
    num_tiles = max(1, (num_cols + tile_rows - 1) // tile_rows)
    for g in numba.prange(groups.shape[0] - 1):
        r0 = groups[g]
        r1 = groups[g + 1]
        cursor = np.empty(r1 - r0, np.int64)
        for r in range(r0, r1):
            cursor[r - r0] = indptr[r]
        for t in range(num_tiles):
            hi = min(num_cols, (t + 1) * tile_rows)
            for r in range(r0, r1):
                j = cursor[r - r0]
                end = indptr[r + 1]
                orow = out[r]
                while j < end:
                    u = indices[j]
                    if u >= hi:
                        break
                    xrow = x[u]
                    if not use_values:
                        for f in range(num_feat):
                            orow[f] += xrow[f]
                    elif heads == 1:
                        w = values[eids[j] if use_eids else j, 0]
                        for f in range(num_feat):
                            orow[f] += w * xrow[f]
                    else:
                        e = eids[j] if use_eids else j
                        for k in range(heads):
                            w = values[e, k]
                            base = k * width
                            for f in range(width):
                                orow[base + f] += w * xrow[base + f]
                    j += 1
                cursor[r - r0] = j


@_jit(parallel=True, fastmath=_FASTMATH)
def _sddmm_kernel(groups, indptr, indices, eids, use_eids, a, b, out, tile_rows):  # pragma: no cover
    num_cols = b.shape[0]
    heads = out.shape[1]
    width = a.shape[1] // heads
    num_tiles = max(1, (num_cols + tile_rows - 1) // tile_rows)
    for g in numba.prange(groups.shape[0] - 1):
        r0 = groups[g]
        r1 = groups[g + 1]
        cursor = np.empty(r1 - r0, np.int64)
        for r in range(r0, r1):
            cursor[r - r0] = indptr[r]
        for t in range(num_tiles):
            hi = min(num_cols, (t + 1) * tile_rows)
            for r in range(r0, r1):
                j = cursor[r - r0]
                end = indptr[r + 1]
                arow = a[r]
                while j < end:
                    u = indices[j]
                    if u >= hi:
                        break
                    brow = b[u]
                    e = eids[j] if use_eids else j
                    if heads == 1:
                        acc = arow[0] * brow[0]
                        for f in range(1, width):
                            acc += arow[f] * brow[f]
                        out[e, 0] = acc
                        j += 1
                        continue
                    for k in range(heads):
                        base = k * width
                        acc = arow[base] * brow[base]    # the element type (width >= 1)
                        for f in range(1, width):
                            acc += arow[base + f] * brow[base + f]
                        out[e, k] = acc
                    j += 1
                cursor[r - r0] = j


@_jit(parallel=True)
def _edge_softmax_kernel(indptr, score, self_score, has_self, alpha, alpha_self):  # pragma: no cover
    heads = score.shape[1]
    for r in numba.prange(indptr.shape[0] - 1):
        lo = indptr[r]
        hi = indptr[r + 1]
        for k in range(heads):
            top = self_score[r, k] if has_self else -np.inf
            for j in range(lo, hi):
                if score[j, k] > top:
                    top = score[j, k]
            if top == -np.inf:
                top = 0.0
            total = math.exp(self_score[r, k] - top) if has_self else 0.0
            for j in range(lo, hi):
                p = math.exp(score[j, k] - top)
                alpha[j, k] = p
                total += p
            inv = 1.0 / total if total > 0.0 else 0.0
            for j in range(lo, hi):
                alpha[j, k] *= inv
            if has_self:
                alpha_self[r, k] = math.exp(self_score[r, k] - top) * inv


@_jit(parallel=True)
def _edge_softmax_backward_kernel(indptr, alpha, alpha_self, grad, grad_self, has_self,
                                  grad_score, grad_self_score):  # pragma: no cover
    heads = alpha.shape[1]
    for r in numba.prange(indptr.shape[0] - 1):
        lo = indptr[r]
        hi = indptr[r + 1]
        for k in range(heads):
            dot = alpha_self[r, k] * grad_self[r, k] if has_self else 0.0
            for j in range(lo, hi):
                dot += alpha[j, k] * grad[j, k]
            for j in range(lo, hi):
                grad_score[j, k] = alpha[j, k] * (grad[j, k] - dot)
            if has_self:
                grad_self_score[r, k] = alpha_self[r, k] * (grad_self[r, k] - dot)


@_jit(parallel=True)
def _sort_rows_kernel(indptr, indices, eids, use_eids, sorted_indices, sorted_eids):  # pragma: no cover
    for r in numba.prange(indptr.shape[0] - 1):
        lo = indptr[r]
        hi = indptr[r + 1]
        order = np.argsort(indices[lo:hi], kind="mergesort")
        for i in range(hi - lo):
            sorted_indices[lo + i] = indices[lo + order[i]]
            sorted_eids[lo + i] = eids[lo + order[i]] if use_eids else lo + order[i]


# ----------------------------------------------------------------------------- planning
def tile_rows_for(num_cols: int, row_bytes: int) -> int:
    """Rows of ``x`` per column tile: the tile fills at most ``L3_FRACTION`` of the last-level
    cache; ``num_cols`` (one tile) when ``x`` fits, at least 1."""
    budget = int(cache_sizes().l3_bytes * L3_FRACTION)
    rows = max(1, budget // max(1, row_bytes))
    return max(1, num_cols) if rows >= num_cols else rows


def row_groups(indptr: np.ndarray, row_bytes: int, num_threads: int) -> np.ndarray:
    """int64 ``[G + 1]`` boundaries of row groups with about equal ``entries + rows`` each; ``G``
    is enough for each group's output rows to fit ``L2_FRACTION`` of the L2 on average and at
    least :data:`MIN_GROUPS_PER_THREAD` per thread."""
    num_rows = indptr.shape[0] - 1
    if num_rows <= 0:
        return np.zeros(1, dtype=np.int64)
    l2_rows = max(1, int(cache_sizes().l2_bytes * L2_FRACTION) // max(1, row_bytes))
    num_groups = min(num_rows, max(MIN_GROUPS_PER_THREAD * num_threads, -(-num_rows // l2_rows)))
    cost = indptr + np.arange(num_rows + 1, dtype=np.int64)
    targets = np.linspace(0, cost[-1], num_groups + 1)
    bounds = np.searchsorted(cost, targets, side="left").astype(np.int64)
    bounds[0], bounds[-1] = 0, num_rows
    return np.unique(bounds)


def _index_dtype(bound: int) -> type:
    return np.int32 if bound < 2**31 - 1 else np.int64


def _num_threads() -> int:
    threads = max(1, min(torch.get_num_threads(), numba.config.NUMBA_NUM_THREADS))
    numba.set_num_threads(threads)
    return threads


@contextmanager
def _launch() -> Iterator[int]:
    """Serialise a kernel launch, with numba's thread count at torch's; yields that count.

    Starting numba's OpenMP pool resets the process-wide OpenMP thread count, which is torch's
    too (measured: a rank at ``torch.set_num_threads(1)`` ran at 2 after its first numba call,
    oversubscribing the cores); torch's count is put back after every launch.
    """
    with _LAUNCH_LOCK:
        torch_threads = torch.get_num_threads()
        try:
            yield _num_threads()
        finally:
            if torch.get_num_threads() != torch_threads:
                torch.set_num_threads(torch_threads)


class _Plan:
    """The numpy arrays of one CSR for the kernels: in edge order, and sorted within rows."""

    def __init__(self, csr: CSR) -> None:
        self.indptr = csr.indptr.detach().cpu().numpy().astype(np.int64, copy=False)
        self.indices = csr.indices.detach().cpu().numpy().astype(_index_dtype(csr.num_cols))
        eid_dtype = _index_dtype(csr.num_entries)
        self.use_eids = csr.eids is not None
        self.eids = (csr.eids.detach().cpu().numpy().astype(eid_dtype) if csr.eids is not None
                     else np.zeros(1, dtype=eid_dtype))
        self._sorted: tuple[np.ndarray, np.ndarray] | None = None

    def sorted_rows(self) -> tuple[np.ndarray, np.ndarray, bool]:
        """``(indices, eids, use_eids)`` with each row's entries in ascending column order."""
        if self._sorted is None:
            keys = self.indices
            in_order = np.ones(keys.shape[0], dtype=bool)
            if keys.shape[0] > 1:
                in_order[1:] = keys[1:] >= keys[:-1]
                in_order[self.indptr[1:-1][self.indptr[1:-1] < keys.shape[0]]] = True  # row starts
            if bool(in_order.all()):
                self._sorted = (self.indices, self.eids)
            else:
                s_idx = np.empty_like(self.indices)
                s_eid = np.empty(self.indices.shape[0], dtype=self.eids.dtype)
                with _launch():
                    _sort_rows_kernel(self.indptr, self.indices, self.eids, self.use_eids, s_idx, s_eid)
                self._sorted = (s_idx, s_eid)
        idx, eid = self._sorted
        return idx, eid, self.use_eids or eid is not self.eids

    def layout(self, num_cols: int, row_bytes: int) -> tuple[np.ndarray, np.ndarray, bool, int]:
        """``(indices, eids, use_eids, tile_rows)`` for features of ``row_bytes`` bytes per row."""
        tile = tile_rows_for(num_cols, row_bytes)
        if tile >= num_cols:
            return self.indices, self.eids, self.use_eids, max(1, num_cols)
        idx, eid, use = self.sorted_rows()
        return idx, eid, use, tile


def _plan(csr: CSR) -> _Plan:
    return csr.cached("numba_plan", lambda: _Plan(csr))


def _np(t: torch.Tensor) -> np.ndarray:
    return t.detach().numpy()


class NumbaBackend:
    """CPU kernels compiled with numba (CPU tensors of float32 or float64)."""

    name = "numba"

    def spmm(self, csr: CSR, values: torch.Tensor | None, x: torch.Tensor) -> torch.Tensor:
        """``out [R, F]``: ``out[r] = sum_j values[eid_j] * x[col_j]`` per head."""
        out = x.new_zeros(csr.num_rows, x.shape[1])
        if csr.num_rows == 0 or x.shape[1] == 0 or csr.num_entries == 0:
            return out
        x = x.contiguous()
        plan = _plan(csr)
        row_bytes = x.shape[1] * x.element_size()
        vals = _np(values.contiguous()) if values is not None else np.zeros((1, 1), dtype=_np(x).dtype)
        with _launch() as threads:
            idx, eid, use_eids, tile = plan.layout(x.shape[0], row_bytes)
            groups = csr.cached(("numba_groups", row_bytes, threads),
                                lambda: row_groups(plan.indptr, row_bytes, threads))
            _spmm_kernel(groups, plan.indptr, idx, eid, use_eids, vals, values is not None, _np(x), _np(out), tile)
        return out

    def sddmm(self, csr: CSR, a: torch.Tensor, b: torch.Tensor, heads: int, chunk_elements: int) -> torch.Tensor:
        """``out [E, H]`` in edge order: ``out[eid_j, k] = <a[row_j, head k], b[col_j, head k]>``."""
        out = a.new_zeros(csr.num_entries, heads)
        if csr.num_entries == 0 or a.shape[1] == 0:
            return out
        a, b = a.contiguous(), b.contiguous()
        plan = _plan(csr)
        row_bytes = b.shape[1] * b.element_size()
        with _launch() as threads:
            idx, eid, use_eids, tile = plan.layout(b.shape[0], row_bytes)
            groups = csr.cached(("numba_groups", row_bytes, threads),
                                lambda: row_groups(plan.indptr, row_bytes, threads))
            _sddmm_kernel(groups, plan.indptr, idx, eid, use_eids, _np(a), _np(b), _np(out), tile)
        return out

    def edge_softmax(self, csr: CSR, score: torch.Tensor,
                     self_score: torch.Tensor | None) -> tuple[torch.Tensor, torch.Tensor | None]:
        """Softmax of ``score [E, H]`` over each row's entries (and ``self_score [R, H]``)."""
        assert csr.eids is None, "edge softmax runs on the CSR in edge order"
        score = score.contiguous()
        alpha = torch.empty_like(score)
        has_self = self_score is not None
        s_self = self_score.contiguous() if self_score is not None else score.new_zeros(1, score.shape[1])
        alpha_self = torch.empty_like(s_self)
        with _launch():
            _edge_softmax_kernel(_plan(csr).indptr, _np(score), _np(s_self), has_self, _np(alpha), _np(alpha_self))
        return alpha, (alpha_self if has_self else None)

    def edge_softmax_backward(self, csr: CSR, alpha: torch.Tensor, alpha_self: torch.Tensor | None,
                              grad: torch.Tensor, grad_self: torch.Tensor | None
                              ) -> tuple[torch.Tensor, torch.Tensor | None]:
        """``grad_score = alpha * (grad - sum_row(alpha * grad))`` (self term included)."""
        assert csr.eids is None, "edge softmax runs on the CSR in edge order"
        alpha, grad = alpha.contiguous(), grad.contiguous()
        has_self = alpha_self is not None
        if alpha_self is not None:
            assert grad_self is not None
            a_self, g_self = alpha_self.contiguous(), grad_self.contiguous()
        else:
            a_self = g_self = alpha.new_zeros(1, alpha.shape[1])
        grad_score = torch.empty_like(alpha)
        grad_self_score = torch.empty_like(a_self)
        with _launch():
            _edge_softmax_backward_kernel(_plan(csr).indptr, _np(alpha), _np(a_self), _np(grad), _np(g_self),
                                          has_self, _np(grad_score), _np(grad_self_score))
        return grad_score, (grad_self_score if has_self else None)
