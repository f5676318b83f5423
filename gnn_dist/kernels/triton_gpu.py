"""GPU kernels written in Triton: the SpMM, SDDMM and edge softmax of :mod:`gnn_dist.kernels`,
each fused into one pass over the CSR.

Shapes follow :mod:`gnn_dist.kernels` (``R`` rows, ``C`` columns, ``E`` entries, ``F`` features,
``H`` heads, ``F = H * Fh``).

What they fuse, against the torch backend (cuSPARSE) on the same tensors:

- ``spmm``: edge values, per-head values and both diagonal scalings are applied while the rows
  of ``x`` are gathered, so no ``x * col_scale`` copy is made and the ``H`` heads run in one
  launch instead of ``H`` cuSPARSE calls and a ``cat``.
- ``sddmm``: the dot products are summed as the rows are gathered; the torch backend gathers
  ``E x F`` rows of both sides (in chunks) and then reduces.
- ``edge_softmax`` and its backward: one program per (row, head) runs max, sum and scale over
  the row's entries; the torch backend needs a scatter-max, a gather, an index-add and a
  divide, each a pass over ``E x H``.

Every kernel is row-parallel: one program owns one output row (and one feature block or head)
and sums its entries in a fixed order (tile lane ``i`` takes entries ``i, i + BLOCK_E, ...``,
then the tile is reduced), so results are deterministic run to run and no atomics are used.
Accumulation is in float32 (float64 for float64 inputs); float16/bfloat16 inputs are stored
back in their own type. Row and column offsets are int64 (``R x F`` may pass 2**31).

Whether this or cuSPARSE is the faster CUDA path is measured by ``benchmarks/gpu_check.sh`` on a
lent GPU; until a measurement has chosen, ``GNN_DIST_KERNELS=auto`` keeps cuSPARSE on CUDA and
``GNN_DIST_KERNELS=triton`` selects these kernels.

Without a GPU, Triton's interpreter (``TRITON_INTERPRET=1`` in the environment before this module
is imported) runs the same kernels on CPU tensors with numpy: that is how the tests check them
against the float64 references; :data:`INTERPRETED` tells which mode the kernels were built in.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from .csr import CSR

__all__ = ["TritonBackend", "INTERPRETED", "BLOCK_E", "MAX_BLOCK_F"]

BLOCK_E = 32
"""Entries of a row gathered per step (a ``BLOCK_E x BLOCK_F`` tile per program)."""
MAX_BLOCK_F = 128
"""Feature columns per program at most (wider features use several programs per row)."""


# ----------------------------------------------------------------------------- kernels
@triton.jit
def _spmm_kernel(indptr, indices, eids, values, row_scale, col_scale, x, out, num_feat, width, heads,
                 HAS_VALUES: tl.constexpr, HAS_EIDS: tl.constexpr, MULTI_HEAD: tl.constexpr,
                 HAS_SCALES: tl.constexpr, ACC: tl.constexpr, BLOCK_E: tl.constexpr, BLOCK_F: tl.constexpr):
    """Program (row, feature block): ``out[row, f] = row_scale[row] sum_j w_j x[col_j, f]`` with
    ``w_j = values[eid_j, head(f)] col_scale[col_j]`` (each factor only when given)."""
    row = tl.program_id(0).to(tl.int64)
    offs_f = tl.program_id(1) * BLOCK_F + tl.arange(0, BLOCK_F)
    fmask = offs_f < num_feat
    start = tl.load(indptr + row)
    end = tl.load(indptr + row + 1)
    acc = tl.zeros((BLOCK_E, BLOCK_F), dtype=ACC)
    for e0 in range(start, end, BLOCK_E):
        offs_e = e0 + tl.arange(0, BLOCK_E)
        emask = offs_e < end
        tile = emask[:, None] & fmask[None, :]
        cols = tl.load(indices + offs_e, mask=emask, other=0)
        xv = tl.load(x + cols[:, None] * num_feat + offs_f[None, :], mask=tile, other=0.0).to(ACC)
        if HAS_VALUES:
            if HAS_EIDS:
                eid = tl.load(eids + offs_e, mask=emask, other=0)
            else:
                eid = offs_e
            if MULTI_HEAD:
                w = tl.load(values + eid[:, None] * heads + (offs_f // width)[None, :], mask=tile, other=0.0)
                xv = xv * w.to(ACC)
            else:
                w1 = tl.load(values + eid, mask=emask, other=0.0)
                xv = xv * w1.to(ACC)[:, None]
        if HAS_SCALES:
            cs = tl.load(col_scale + cols, mask=emask, other=0.0)
            xv = xv * cs.to(ACC)[:, None]
        acc += xv
    res = tl.sum(acc, axis=0)
    if HAS_SCALES:
        res = res * tl.load(row_scale + row).to(ACC)
    tl.store(out + row * num_feat + offs_f, res.to(out.dtype.element_ty), mask=fmask)


@triton.jit
def _sddmm_kernel(indptr, indices, eids, a, b, out, num_feat, width, heads,
                  HAS_EIDS: tl.constexpr, ACC: tl.constexpr, BLOCK_E: tl.constexpr, BLOCK_W: tl.constexpr):
    """Program (row, head k): ``out[eid_j, k] = <a[row, head k], b[col_j, head k]>`` for the row's entries."""
    row = tl.program_id(0).to(tl.int64)
    k = tl.program_id(1)
    start = tl.load(indptr + row)
    end = tl.load(indptr + row + 1)
    for e0 in range(start, end, BLOCK_E):
        offs_e = e0 + tl.arange(0, BLOCK_E)
        emask = offs_e < end
        cols = tl.load(indices + offs_e, mask=emask, other=0)
        acc = tl.zeros((BLOCK_E, BLOCK_W), dtype=ACC)
        for w0 in range(0, width, BLOCK_W):
            offs_w = w0 + tl.arange(0, BLOCK_W)
            wmask = offs_w < width
            feat = k * width + offs_w
            av = tl.load(a + row * num_feat + feat, mask=wmask, other=0.0).to(ACC)
            bv = tl.load(b + cols[:, None] * num_feat + feat[None, :], mask=emask[:, None] & wmask[None, :],
                         other=0.0).to(ACC)
            acc += av[None, :] * bv
        dots = tl.sum(acc, axis=1)
        if HAS_EIDS:
            eid = tl.load(eids + offs_e, mask=emask, other=0)
        else:
            eid = offs_e
        tl.store(out + eid * heads + k, dots.to(out.dtype.element_ty), mask=emask)


@triton.jit
def _edge_softmax_kernel(indptr, score, self_score, alpha, alpha_self, heads,
                         HAS_SELF: tl.constexpr, ACC: tl.constexpr, BLOCK_E: tl.constexpr):
    """Program (row, head k): softmax of ``score[j, k]`` over the row's entries (and ``self_score[row, k]``);
    a row whose scores are all ``-inf`` gets 0."""
    row = tl.program_id(0).to(tl.int64)
    k = tl.program_id(1)
    start = tl.load(indptr + row)
    end = tl.load(indptr + row + 1)
    top_e = tl.full((BLOCK_E,), float("-inf"), ACC)
    for e0 in range(start, end, BLOCK_E):
        offs_e = e0 + tl.arange(0, BLOCK_E)
        s = tl.load(score + offs_e * heads + k, mask=offs_e < end, other=float("-inf")).to(ACC)
        top_e = tl.maximum(top_e, s)
    top = tl.max(top_e, axis=0)
    if HAS_SELF:
        s_self = tl.load(self_score + row * heads + k).to(ACC)
        top = tl.maximum(top, s_self)
    top = tl.where(top == float("-inf"), 0.0, top)
    total_e = tl.zeros((BLOCK_E,), ACC)
    for e0 in range(start, end, BLOCK_E):
        offs_e = e0 + tl.arange(0, BLOCK_E)
        s = tl.load(score + offs_e * heads + k, mask=offs_e < end, other=float("-inf")).to(ACC)
        total_e += tl.exp(s - top)
    total = tl.sum(total_e, axis=0)
    if HAS_SELF:
        p_self = tl.exp(s_self - top)
        total += p_self
    inv = tl.where(total > 0.0, 1.0 / tl.where(total > 0.0, total, 1.0), 0.0)
    for e0 in range(start, end, BLOCK_E):
        offs_e = e0 + tl.arange(0, BLOCK_E)
        emask = offs_e < end
        s = tl.load(score + offs_e * heads + k, mask=emask, other=float("-inf")).to(ACC)
        tl.store(alpha + offs_e * heads + k, (tl.exp(s - top) * inv).to(alpha.dtype.element_ty), mask=emask)
    if HAS_SELF:
        tl.store(alpha_self + row * heads + k, (p_self * inv).to(alpha_self.dtype.element_ty))


@triton.jit
def _edge_softmax_backward_kernel(indptr, alpha, alpha_self, grad, grad_self, grad_score, grad_self_score, heads,
                                  HAS_SELF: tl.constexpr, ACC: tl.constexpr, BLOCK_E: tl.constexpr):
    """Program (row, head k): ``grad_score = alpha (grad - dot)``, ``dot = sum_row alpha grad`` (self term included)."""
    row = tl.program_id(0).to(tl.int64)
    k = tl.program_id(1)
    start = tl.load(indptr + row)
    end = tl.load(indptr + row + 1)
    dot_e = tl.zeros((BLOCK_E,), ACC)
    for e0 in range(start, end, BLOCK_E):
        offs_e = e0 + tl.arange(0, BLOCK_E)
        emask = offs_e < end
        av = tl.load(alpha + offs_e * heads + k, mask=emask, other=0.0).to(ACC)
        gv = tl.load(grad + offs_e * heads + k, mask=emask, other=0.0).to(ACC)
        dot_e += av * gv
    dot = tl.sum(dot_e, axis=0)
    if HAS_SELF:
        a_self = tl.load(alpha_self + row * heads + k).to(ACC)
        g_self = tl.load(grad_self + row * heads + k).to(ACC)
        dot += a_self * g_self
    for e0 in range(start, end, BLOCK_E):
        offs_e = e0 + tl.arange(0, BLOCK_E)
        emask = offs_e < end
        av = tl.load(alpha + offs_e * heads + k, mask=emask, other=0.0).to(ACC)
        gv = tl.load(grad + offs_e * heads + k, mask=emask, other=0.0).to(ACC)
        tl.store(grad_score + offs_e * heads + k, (av * (gv - dot)).to(grad_score.dtype.element_ty), mask=emask)
    if HAS_SELF:
        tl.store(grad_self_score + row * heads + k, (a_self * (g_self - dot)).to(grad_self_score.dtype.element_ty))


INTERPRETED: bool = not isinstance(_spmm_kernel, triton.runtime.jit.JITFunction)
"""True when Triton's interpreter runs these kernels (``TRITON_INTERPRET=1`` at import): then
they take CPU tensors, else CUDA tensors."""


# ----------------------------------------------------------------------------- launches
def _acc(dtype: torch.dtype) -> tl.dtype:
    return tl.float64 if dtype == torch.float64 else tl.float32


def _pow2(n: int, cap: int) -> int:
    return max(1, min(cap, triton.next_power_of_2(max(1, n))))


class TritonBackend:
    """Triton kernels (CUDA tensors; CPU tensors under Triton's interpreter)."""

    name = "triton"
    interpreted = INTERPRETED

    def spmm(self, csr: CSR, values: torch.Tensor | None, x: torch.Tensor, row_scale: torch.Tensor | None = None,
             col_scale: torch.Tensor | None = None) -> torch.Tensor:
        """``out [R, F]``: ``out[r] = row_scale[r] sum_j values[eid_j] col_scale[col_j] x[col_j]`` per head
        (scales ``[R]``/``[C]``, both or neither)."""
        num_rows, num_feat = csr.num_rows, x.shape[1]
        if num_rows == 0 or num_feat == 0 or csr.num_entries == 0:
            return x.new_zeros(num_rows, num_feat)
        use_scales = row_scale is not None and col_scale is not None
        assert use_scales or (row_scale is None and col_scale is None), "row_scale and col_scale come together"
        x = x.contiguous()
        out = x.new_empty(num_rows, num_feat)   # every row is written by its programs
        heads = 1 if values is None else values.shape[1]
        vals = x if values is None else values.contiguous()
        block_f = _pow2(num_feat, MAX_BLOCK_F)
        _spmm_kernel[(num_rows, triton.cdiv(num_feat, block_f))](
            csr.indptr, csr.indices, x if csr.eids is None else csr.eids, vals,
            row_scale.contiguous() if use_scales else x, col_scale.contiguous() if use_scales else x, x, out,
            num_feat, num_feat // heads, heads,
            HAS_VALUES=values is not None, HAS_EIDS=csr.eids is not None, MULTI_HEAD=heads > 1,
            HAS_SCALES=use_scales, ACC=_acc(x.dtype), BLOCK_E=BLOCK_E, BLOCK_F=block_f)
        return out

    def sddmm(self, csr: CSR, a: torch.Tensor, b: torch.Tensor, heads: int, chunk_elements: int) -> torch.Tensor:
        """``out [E, H]`` in edge order: ``out[eid_j, k] = <a[row_j, head k], b[col_j, head k]>``
        (``chunk_elements`` bounds the torch backend's temporaries; nothing is gathered here)."""
        if csr.num_entries == 0 or a.shape[1] == 0:
            return a.new_zeros(csr.num_entries, heads)
        a, b = a.contiguous(), b.contiguous()
        out = a.new_empty(csr.num_entries, heads)   # every entry is written once
        width = a.shape[1] // heads
        _sddmm_kernel[(csr.num_rows, heads)](
            csr.indptr, csr.indices, a if csr.eids is None else csr.eids, a, b, out, a.shape[1], width, heads,
            HAS_EIDS=csr.eids is not None, ACC=_acc(a.dtype), BLOCK_E=BLOCK_E, BLOCK_W=_pow2(width, MAX_BLOCK_F))
        return out

    def edge_softmax(self, csr: CSR, score: torch.Tensor,
                     self_score: torch.Tensor | None) -> tuple[torch.Tensor, torch.Tensor | None]:
        """Softmax of ``score [E, H]`` over each row's entries (and ``self_score [R, H]``)."""
        assert csr.eids is None, "edge softmax runs on the CSR in edge order"
        score = score.contiguous()
        alpha = torch.empty_like(score)
        s_self = score if self_score is None else self_score.contiguous()
        alpha_self = None if self_score is None else torch.empty_like(s_self)
        if csr.num_rows and score.shape[1]:
            _edge_softmax_kernel[(csr.num_rows, score.shape[1])](
                csr.indptr, score, s_self, alpha, alpha if alpha_self is None else alpha_self, score.shape[1],
                HAS_SELF=self_score is not None, ACC=_acc(score.dtype), BLOCK_E=BLOCK_E)
        return alpha, alpha_self

    def edge_softmax_backward(self, csr: CSR, alpha: torch.Tensor, alpha_self: torch.Tensor | None,
                              grad: torch.Tensor, grad_self: torch.Tensor | None
                              ) -> tuple[torch.Tensor, torch.Tensor | None]:
        """``grad_score = alpha * (grad - sum_row(alpha * grad))`` (self term included)."""
        assert csr.eids is None, "edge softmax runs on the CSR in edge order"
        alpha, grad = alpha.contiguous(), grad.contiguous()
        has_self = alpha_self is not None
        if has_self:
            assert grad_self is not None
            a_self, g_self = alpha_self.contiguous(), grad_self.contiguous()
        else:
            a_self = g_self = alpha
        grad_score = torch.empty_like(alpha)
        grad_self_score = torch.empty_like(a_self) if has_self else None
        if csr.num_rows and alpha.shape[1]:
            _edge_softmax_backward_kernel[(csr.num_rows, alpha.shape[1])](
                csr.indptr, alpha, a_self, grad, g_self, grad_score,
                grad_score if grad_self_score is None else grad_self_score, alpha.shape[1],
                HAS_SELF=has_self, ACC=_acc(alpha.dtype), BLOCK_E=BLOCK_E)
        return grad_score, grad_self_score
