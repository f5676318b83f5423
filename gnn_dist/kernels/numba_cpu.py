"""Multi-threaded CPU kernels compiled with numba: source-blocked or prefetched gathers of rows.

Shapes follow :mod:`gnn_dist.kernels` (``R`` rows, ``C`` columns, ``E`` entries, ``F`` features,
``H`` heads). Every kernel is row-parallel (a row is written by one thread only: no atomics).

Sum order: each row sums its entries in ascending column (source) order, whatever order the
CSR lists them in (a row's entries are sorted once per CSR, stably, and ``eids`` map them back to
the CSR's edge order), so a result is the same bits for any thread count, any blocking below and
any order of a row's edges.

Source blocking: an aggregation reads ``x[col]`` rows at random. When those rows outgrow the
last-level cache, the kernels walk the columns in :func:`source_blocks` blocks of
:data:`SOURCE_BLOCK_FRACTION` of it, in column order: every row takes its entries of block 0, then
of block 1, ... (``split`` says where each row crosses into the next block), so each block's rows
are read from the cache instead of memory, at the cost of one more pass over the output rows per
block (measured on 100k nodes x 4M edges x 128 float32 features, 1 thread, 32 MiB L3: 245 ms
unblocked, 98-122 ms in 7 blocks; DGL's CPU SpMM blocks its sources the same way). The order of
each row's sum is unchanged by it (the entries are sorted by column).

Latency hiding: without blocking, the SpMM and SDDMM kernels walk each group of rows in entry
order and prefetch every cache line of the row gathered :data:`PREFETCH_AHEAD` entries later, so
many misses are in flight at once instead of one per row (same graph, 2 cores: 92 ms to 52 ms;
``benchmarks/kernels.py`` shows it with and without); inside a block the rows are in the cache and
prefetching only costs instructions. Output rows are zeroed by the thread that fills them (no
separate fill pass). Row groups are balanced by entries + rows and sized to a fraction of the L2
(:data:`L2_FRACTION`).

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

import numba
import numpy as np
import torch
from llvmlite import ir
from numba.core import cgutils, types
from numba.extending import intrinsic

from .cache_info import cache_sizes
from .njit import cached_njit
from .csr import CSR

__all__ = ["NumbaBackend", "L2_FRACTION", "PREFETCH_AHEAD", "SOURCE_BLOCK_FRACTION", "MIN_BLOCK_ENTRIES",
           "row_groups", "source_blocks"]

log = logging.getLogger(__name__)

PREFETCH_AHEAD = 16
"""Entries ahead of the current one whose gathered row the SpMM/SDDMM kernels prefetch (0: no
prefetching). 16 rows of 64-512 B keep 16-128 cache lines in flight per thread; 8 to 32 measured
within noise of each other for widths 64-256."""
L2_FRACTION = 0.5
"""Share of the L2 one group of output rows may fill (the group's rows are written while its
gathered rows stream through)."""
MIN_GROUPS_PER_THREAD = 4
"""At least this many row groups per thread, for load balance."""
SOURCE_BLOCK_FRACTION = 0.25
"""Share of the last-level cache one block of gathered rows fills. Measured on 100k nodes x 4M
edges x 128 float32 features (2 cores, 32 MiB L3, 1 thread): blocks of 4-8 MiB 98-122 ms, 12 MiB
114-144 ms, 16 MiB 142-196 ms, no blocking 245 ms; the other threads, the output rows and the
indices share the cache with the block."""
MIN_BLOCK_ENTRIES = 2
"""Fewest entries per row per source block, on average: every block reads and writes each
output row once more, which costs more than it saves when a row gathers less than this from
the block."""
SERIAL_WORK = 1 << 17
"""A launch of less work than this (entries x width: multiply-adds) runs on the calling thread
alone: waking the pool costs more than it saves, and far more on a busy machine, where a parallel
region waits for its other threads to be scheduled (measured, 2 cores under load 5: a 150-row,
1,200-entry, 16-wide SpMM took 2 ms in the pool, 22 us on a quiet machine). One thread computes
every row as the pool does, so the results are the same bits."""

_LAUNCH_LOCK = threading.RLock()
_FASTMATH = {"reassoc", "contract"}  # no nnan/ninf: softmax scores hold -inf on purpose


# ----------------------------------------------------------------------------- kernels
@intrinsic
def _prefetch(typingctx, arr, row, col):  # pragma: no cover (compiled)
    """Prefetch the cache line holding ``arr[row, col]`` (2-D array) for reading, into all levels."""
    sig = types.void(arr, row, col)

    def codegen(context, builder, signature, args):
        aryty = signature.args[0]
        ary = context.make_array(aryty)(context, builder, args[0])
        idx = [context.cast(builder, args[k], signature.args[k], types.intp) for k in (1, 2)]
        ptr = cgutils.get_item_pointer(context, builder, aryty, ary, idx)
        i8p, i32 = ir.IntType(8).as_pointer(), ir.IntType(32)
        fn = builder.module.declare_intrinsic("llvm.prefetch", [i8p],
                                              ir.FunctionType(ir.VoidType(), [i8p, i32, i32, i32]))
        builder.call(fn, [builder.bitcast(ptr, i8p), i32(0), i32(3), i32(1)])  # read, keep in L1, data
        return context.get_dummy_value()
    return sig, codegen


@cached_njit(fastmath=_FASTMATH)
def _prefetch_row(x, u, line):  # pragma: no cover
    """Prefetch every cache line of row ``u`` of ``x`` (``line`` elements per cache line)."""
    for f in range(0, x.shape[1], line):
        _prefetch(x, u, f)


@cached_njit(parallel=True, fastmath=_FASTMATH)
def _spmm_kernel(groups, indptr, indices, split, eids, use_eids, values, use_values, row_scale, col_scale,
                 use_scales, x, out, ahead):  # pragma: no cover
    num_feat = x.shape[1]
    heads = values.shape[1]
    width = num_feat // heads
    line = max(1, 64 // x.itemsize)
    blocks = split.shape[1] + 1
    ahead_rows = ahead if blocks == 1 else 0   # a block's rows are in the cache: no prefetching them
    for b in range(blocks):          # source blocks in column order: each row's sum keeps its entry order
        last = b == blocks - 1
        for g in numba.prange(groups.shape[0] - 1):
            r0 = groups[g]
            r1 = groups[g + 1]
            stop = indptr[r1]
            for r in range(r0, r1):
                orow = out[r]
                if b == 0:
                    for f in range(num_feat):
                        orow[f] = 0
                lo = indptr[r] + split[r, b - 1] if b > 0 else indptr[r]
                hi = indptr[r + 1] if last else indptr[r] + split[r, b]
                limit = stop if blocks == 1 else hi     # one block: prefetch across the group's rows
                if not use_values and not use_scales:   # each case its own loop: no branch per entry
                    for j in range(lo, hi):
                        if ahead_rows > 0 and j + ahead_rows < limit:
                            _prefetch_row(x, indices[j + ahead_rows], line)
                        xrow = x[indices[j]]
                        for f in range(num_feat):
                            orow[f] += xrow[f]
                elif heads == 1:
                    for j in range(lo, hi):
                        if ahead_rows > 0 and j + ahead_rows < limit:
                            _prefetch_row(x, indices[j + ahead_rows], line)
                        if use_values and use_eids and ahead > 0 and j + ahead < limit:
                            _prefetch(values, eids[j + ahead], 0)
                        u = indices[j]
                        if use_values:
                            w = values[eids[j] if use_eids else j, 0]
                            if use_scales:
                                w *= col_scale[u]
                        else:
                            w = col_scale[u]
                        xrow = x[u]
                        for f in range(num_feat):
                            orow[f] += w * xrow[f]
                else:
                    for j in range(lo, hi):
                        if ahead_rows > 0 and j + ahead_rows < limit:
                            _prefetch_row(x, indices[j + ahead_rows], line)
                        if use_eids and ahead > 0 and j + ahead < limit:
                            _prefetch(values, eids[j + ahead], 0)
                        u = indices[j]
                        xrow = x[u]
                        e = eids[j] if use_eids else j
                        for k in range(heads):
                            w = values[e, k] * col_scale[u] if use_scales else values[e, k]
                            base = k * width
                            for f in range(width):
                                orow[base + f] += w * xrow[base + f]
                if use_scales and last:
                    s = row_scale[r]
                    for f in range(num_feat):
                        orow[f] *= s


@cached_njit(parallel=True, fastmath=_FASTMATH)
def _sddmm_kernel(groups, indptr, indices, eids, use_eids, a, b, out, ahead):  # pragma: no cover
    heads = out.shape[1]
    width = a.shape[1] // heads
    line = max(1, 64 // b.itemsize)
    for g in numba.prange(groups.shape[0] - 1):
        r0 = groups[g]
        r1 = groups[g + 1]
        stop = indptr[r1]
        for r in range(r0, r1):
            arow = a[r]
            for j in range(indptr[r], indptr[r + 1]):
                if ahead > 0 and j + ahead < stop:
                    _prefetch_row(b, indices[j + ahead], line)
                brow = b[indices[j]]
                e = eids[j] if use_eids else j
                for k in range(heads):
                    base = k * width
                    acc = arow[base] * brow[base]    # the element type (width >= 1)
                    for f in range(1, width):
                        acc += arow[base + f] * brow[base + f]
                    out[e, k] = acc


@cached_njit(parallel=True)
def _row_order_kernel(indptr, indices, perm):  # pragma: no cover
    """``perm``: each row's entries in ascending column order (stable: equal columns keep their
    order); returns the number of rows whose entries were out of order."""
    unsorted = 0
    for r in numba.prange(indptr.shape[0] - 1):
        lo = indptr[r]
        hi = indptr[r + 1]
        ordered = True
        for j in range(lo + 1, hi):
            if indices[j] < indices[j - 1]:
                ordered = False
                break
        if ordered:
            for j in range(lo, hi):
                perm[j] = j
        else:
            unsorted += 1
            order = np.argsort(indices[lo:hi], kind="mergesort")
            for k in range(hi - lo):
                perm[lo + k] = lo + order[k]
    return unsorted


@cached_njit(parallel=True)
def _block_split_kernel(indptr, indices, block_cols, split):  # pragma: no cover
    """``split[r, b]``: entries of row ``r`` (columns ascending) before column ``(b + 1) block_cols``."""
    for r in numba.prange(indptr.shape[0] - 1):
        lo = indptr[r]
        hi = indptr[r + 1]
        j = lo
        for b in range(split.shape[1]):
            end = (b + 1) * block_cols
            while j < hi and indices[j] < end:
                j += 1
            split[r, b] = j - lo


@cached_njit(parallel=True)
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


@cached_njit(parallel=True)
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


# ----------------------------------------------------------------------------- planning
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


def _num_threads(work: int | None = None) -> int:
    """numba's thread count for a launch of ``work`` multiply-adds (None: a large one), set."""
    small = work is not None and work < SERIAL_WORK
    threads = 1 if small else max(1, min(torch.get_num_threads(), numba.config.NUMBA_NUM_THREADS))
    numba.set_num_threads(threads)
    return threads


@contextmanager
def _launch(work: int) -> Iterator[int]:
    """Serialise a kernel launch of ``work`` multiply-adds, with numba's thread count at torch's
    (1 below :data:`SERIAL_WORK`); yields that count.

    Starting numba's OpenMP pool resets the process-wide OpenMP thread count, which is torch's
    too (measured: a rank at ``torch.set_num_threads(1)`` ran at 2 after its first numba call,
    oversubscribing the cores); torch's count is put back after every launch.
    """
    with _LAUNCH_LOCK:
        torch_threads = torch.get_num_threads()
        try:
            yield _num_threads(work)
        finally:
            if torch.get_num_threads() != torch_threads:
                torch.set_num_threads(torch_threads)


def source_blocks(indptr: np.ndarray, num_cols: int, row_bytes: int) -> int:
    """How many blocks of columns an aggregation over ``num_cols`` gathered rows of ``row_bytes``
    walks (1: no blocking).

    Enough for one block of gathered rows to fill :data:`SOURCE_BLOCK_FRACTION` of the last-level
    cache, and no more than :data:`MIN_BLOCK_ENTRIES` entries per row per block allow on average
    (each block reads and writes every output row once more).
    """
    num_rows = indptr.shape[0] - 1
    if num_rows <= 0 or num_cols <= 0:
        return 1
    block_bytes = max(1, int(cache_sizes().l3_bytes * SOURCE_BLOCK_FRACTION))
    wanted = -(-num_cols * row_bytes // block_bytes)
    affordable = int(indptr[-1]) // (num_rows * MIN_BLOCK_ENTRIES)
    return max(1, min(wanted, affordable, num_cols))


class _Plan:
    """The numpy arrays of one CSR for the kernels: each row's entries in ascending column order
    (``eids`` then map them back to the CSR's edge order), indices and edge ids as int32 when they
    fit."""

    def __init__(self, csr: CSR) -> None:
        self.indptr = csr.indptr.detach().cpu().numpy().astype(np.int64, copy=False)
        indices = csr.indices.detach().cpu().numpy()
        eid_dtype = _index_dtype(csr.num_entries)
        perm = np.empty(csr.num_entries, dtype=eid_dtype)
        with _launch(csr.num_entries):
            unsorted = _row_order_kernel(self.indptr, indices, perm)
        if unsorted:
            indices = indices[perm]
        self.indices = indices.astype(_index_dtype(csr.num_cols))
        self.use_eids = csr.eids is not None or bool(unsorted)
        if csr.eids is not None:
            eids = csr.eids.detach().cpu().numpy()
            self.eids = (eids[perm] if unsorted else eids).astype(eid_dtype)
        else:
            self.eids = perm if unsorted else np.zeros(1, dtype=eid_dtype)


def _plan(csr: CSR) -> _Plan:
    return csr.cached("numba_plan", lambda: _Plan(csr))


def _groups(csr: CSR, plan: _Plan, x: torch.Tensor, threads: int) -> np.ndarray:
    """The row groups of ``csr`` for gathered rows like those of ``x`` (cached per row size)."""
    row_bytes = x.shape[1] * x.element_size()
    return csr.cached(("numba_groups", row_bytes, threads), lambda: row_groups(plan.indptr, row_bytes, threads))


def _split(csr: CSR, plan: _Plan, x: torch.Tensor) -> np.ndarray:
    """int32 ``[R, B - 1]``: where each row's entries cross into the next of the ``B`` source blocks
    for gathered rows like those of ``x`` (``[R, 0]``: one block), cached per ``B``."""
    blocks = source_blocks(plan.indptr, csr.num_cols, x.shape[1] * x.element_size())

    def build() -> np.ndarray:
        split = np.empty((csr.num_rows, blocks - 1), dtype=np.int32)
        if blocks > 1:
            with _launch(csr.num_entries):
                _block_split_kernel(plan.indptr, plan.indices, -(-csr.num_cols // blocks), split)
        return split
    return csr.cached(("numba_split", blocks), build)


def _np(t: torch.Tensor) -> np.ndarray:
    return t.detach().numpy()


class NumbaBackend:
    """CPU kernels compiled with numba (CPU tensors of float32 or float64)."""

    name = "numba"

    def spmm(self, csr: CSR, values: torch.Tensor | None, x: torch.Tensor, row_scale: torch.Tensor | None = None,
             col_scale: torch.Tensor | None = None) -> torch.Tensor:
        """``out [R, F]``: ``out[r] = row_scale[r] sum_j values[eid_j] col_scale[col_j] x[col_j]`` per head
        (scales ``[R]``/``[C]``, both or neither)."""
        if csr.num_rows == 0 or x.shape[1] == 0 or csr.num_entries == 0:
            return x.new_zeros(csr.num_rows, x.shape[1])
        x = x.contiguous()
        out = x.new_empty(csr.num_rows, x.shape[1])   # every row is zeroed by the kernel
        plan = _plan(csr)
        dtype = _np(x).dtype
        vals = _np(values.contiguous()) if values is not None else np.zeros((1, 1), dtype=dtype)
        use_scales = row_scale is not None and col_scale is not None
        assert use_scales or (row_scale is None and col_scale is None), "row_scale and col_scale come together"
        rs = _np(row_scale.contiguous()) if row_scale is not None else np.ones(1, dtype=dtype)
        cs = _np(col_scale.contiguous()) if col_scale is not None else np.ones(1, dtype=dtype)
        split = _split(csr, plan, x)
        with _launch(csr.num_entries * x.shape[1]) as threads:
            _spmm_kernel(_groups(csr, plan, x, threads), plan.indptr, plan.indices, split, plan.eids, plan.use_eids, vals,
                         values is not None, rs, cs, use_scales, _np(x), _np(out), PREFETCH_AHEAD)
        return out

    def sddmm(self, csr: CSR, a: torch.Tensor, b: torch.Tensor, heads: int, chunk_elements: int) -> torch.Tensor:
        """``out [E, H]`` in edge order: ``out[eid_j, k] = <a[row_j, head k], b[col_j, head k]>``."""
        if csr.num_entries == 0 or a.shape[1] == 0:
            return a.new_zeros(csr.num_entries, heads)
        a, b = a.contiguous(), b.contiguous()
        out = a.new_empty(csr.num_entries, heads)   # every entry is written once
        plan = _plan(csr)
        with _launch(csr.num_entries * a.shape[1]) as threads:   # not source-blocked: measured slower
            _sddmm_kernel(_groups(csr, plan, b, threads), plan.indptr, plan.indices, plan.eids, plan.use_eids,
                          _np(a), _np(b), _np(out), PREFETCH_AHEAD)
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
        with _launch(score.numel()):
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
        with _launch(alpha.numel()):
            _edge_softmax_backward_kernel(_plan(csr).indptr, _np(alpha), _np(a_self), _np(grad), _np(g_self),
                                          has_self, _np(grad_score), _np(grad_self_score))
        return grad_score, (grad_self_score if has_self else None)
