"""Plain torch kernels: torch.sparse CSR matmul (cuSPARSE on CUDA, MKL/native on CPU), gathers
and scatters. The fallback on CPU when numba is unavailable, and the path for CUDA tensors.

Shapes follow :mod:`gnn_dist.kernels`: ``values`` ``[E, H]`` in edge order, features ``[*, F]`` with
``F = H * Fh`` (head ``k`` owns columns ``[k Fh, (k + 1) Fh)``).
"""

from __future__ import annotations

import warnings

import torch

from .csr import CSR

__all__ = ["TorchBackend"]

_CPU_WIDENED = (torch.bfloat16, torch.float16)
"""Dtypes whose CPU SpMM runs in float32 (no CPU sparse kernel of their own)."""


def _sparse_csr(csr: CSR, values: torch.Tensor) -> torch.Tensor:
    with warnings.catch_warnings():  # torch warns once that sparse CSR is "beta"
        warnings.filterwarnings("ignore", message=".*[Ss]parse CSR tensor support is in beta.*")
        return torch.sparse_csr_tensor(csr.indptr, csr.indices, values, size=(csr.num_rows, csr.num_cols),
                                       check_invariants=False)


class TorchBackend:
    """Kernels written with torch ops only (any device)."""

    name = "torch"

    def spmm(self, csr: CSR, values: torch.Tensor | None, x: torch.Tensor, row_scale: torch.Tensor | None = None,
             col_scale: torch.Tensor | None = None) -> torch.Tensor:
        """``out [R, F]``: ``out[r] = row_scale[r] sum_j values[eid_j] col_scale[col_j] x[col_j]`` per head
        (scales ``[R]``/``[C]``, both or neither)."""
        if col_scale is not None:
            x = x * col_scale.unsqueeze(1)
        out = self._spmm(csr, values, x)
        return out if row_scale is None else out.mul_(row_scale.unsqueeze(1))

    def _spmm(self, csr: CSR, values: torch.Tensor | None, x: torch.Tensor) -> torch.Tensor:
        if x.device.type == "cpu" and x.dtype in _CPU_WIDENED:
            # torch's CPU sparse matmul has no half/bfloat16 kernel (MKL): accumulate in float32,
            # hand back the input's dtype (what a GPU's SpMM with a float32 compute type returns)
            wide = None if values is None else values.float()
            return self._spmm(csr, wide, x.float()).to(x.dtype)
        num_rows, num_feat = csr.num_rows, x.shape[1]
        if num_rows == 0 or num_feat == 0 or csr.num_entries == 0:
            return x.new_zeros(num_rows, num_feat)
        if values is None:
            vals = csr.cached(("ones", x.dtype), lambda: torch.ones(csr.num_entries, 1, dtype=x.dtype,
                                                                    device=x.device))
        else:
            vals = values if csr.eids is None else values[csr.eids]
        heads = vals.shape[1]
        with torch.autocast(x.device.type, enabled=False):   # the dtype is the caller's: x's
            if heads == 1:
                return _sparse_csr(csr, vals[:, 0].contiguous()) @ x
            width = num_feat // heads
            return torch.cat([_sparse_csr(csr, vals[:, k].contiguous()) @ x[:, k * width:(k + 1) * width].contiguous()
                              for k in range(heads)], dim=1)

    def sddmm(self, csr: CSR, a: torch.Tensor, b: torch.Tensor, heads: int, chunk_elements: int) -> torch.Tensor:
        """``out [E, H]`` in edge order: ``out[eid_j, k] = <a[row_j, head k], b[col_j, head k]>``."""
        num_entries = csr.num_entries
        out = a.new_empty(num_entries, heads)
        width = a.shape[1] // heads if heads else 0
        step = max(1, chunk_elements // max(1, a.shape[1]))
        rows, cols = csr.row_index, csr.indices
        for lo in range(0, num_entries, step):
            hi = min(num_entries, lo + step)
            prod = a[rows[lo:hi]].view(hi - lo, heads, width) * b[cols[lo:hi]].view(hi - lo, heads, width)
            torch.sum(prod, dim=2, out=out[lo:hi])
        if csr.eids is not None:
            out = torch.empty_like(out).index_copy_(0, csr.eids, out)
        return out

    def edge_softmax(self, csr: CSR, score: torch.Tensor,
                     self_score: torch.Tensor | None) -> tuple[torch.Tensor, torch.Tensor | None]:
        """Softmax of ``score [E, H]`` over each row's entries (and ``self_score [R, H]``)."""
        assert csr.eids is None, "edge softmax runs on the CSR in edge order"
        rows = csr.row_index.unsqueeze(1).expand_as(score)
        if self_score is None:
            top = score.new_full((csr.num_rows, score.shape[1]), float("-inf"))
        else:
            top = self_score.clone()
        top.scatter_reduce_(0, rows, score, "amax")
        top = torch.where(torch.isinf(top), torch.zeros_like(top), top)   # rows of -inf only: alpha = 0
        p_edge = torch.exp(score - top[csr.row_index])
        p_self = None if self_score is None else torch.exp(self_score - top)
        denom = (torch.zeros_like(top) if p_self is None else p_self).index_add(0, csr.row_index, p_edge)
        denom = torch.where(denom > 0, denom, torch.ones_like(denom))
        alpha = p_edge / denom[csr.row_index]
        return alpha, (None if p_self is None else p_self / denom)

    def edge_softmax_backward(self, csr: CSR, alpha: torch.Tensor, alpha_self: torch.Tensor | None,
                              grad: torch.Tensor, grad_self: torch.Tensor | None
                              ) -> tuple[torch.Tensor, torch.Tensor | None]:
        """``grad_score = alpha * (grad - sum_row(alpha * grad))`` (self term included)."""
        assert csr.eids is None, "edge softmax runs on the CSR in edge order"
        dot = alpha.new_zeros(csr.num_rows, alpha.shape[1]).index_add_(0, csr.row_index, alpha * grad)
        if alpha_self is not None:
            assert grad_self is not None
            dot = dot + alpha_self * grad_self
        grad_score = alpha * (grad - dot[csr.row_index])
        grad_self_score = None if alpha_self is None else alpha_self * (grad_self - dot)
        return grad_score, grad_self_score
