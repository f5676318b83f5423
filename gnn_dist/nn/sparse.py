"""Sparse aggregation over a :class:`~gnn_dist.nn.Block`: the one place a kernel backend plugs in.

Legend: ``S`` sources, ``D`` destinations, ``E`` edges, ``F`` feature width, ``H`` heads
(``F = H * Fh``: head ``k`` owns feature columns ``[k Fh, (k + 1) Fh)``).

The autograd functions here run the raw kernels of :mod:`gnn_dist.kernels` (numba CPU kernels,
or torch.sparse: see there for the choice, which the block holds: ``block.kernels``):

- :func:`spmm`: ``out[v] = sum over in-edges e = (u -> v) of values[e] * x_src[u]`` (per head);
  backward is the same kernel on the block's transposed CSR (built once per block, its entries
  mapped back to the block's edge order, so edge values are never permuted per call) and an
  SDDMM for the edge values. No ``E x F`` message tensor is ever held.
- :func:`spmm_scaled`: the unweighted SpMM between diagonal row and column scalings (GCN's
  symmetric normalisation) in one pass; backward swaps the scales on the transposed CSR.
- :func:`sddmm`: per-edge (per-head) dot products; backward is two SpMMs.
- :func:`edge_softmax`: softmax over each destination's in-edges (and an optional self term);
  backward in one pass over the same rows.

The backend chosen at forward is kept for backward. Custom layers call these functions.
"""

from __future__ import annotations

from typing import Any

import torch

from ..kernels import CSR, KernelBackend
from .block import Block

__all__ = ["spmm", "spmm_scaled", "sddmm", "edge_softmax", "prepare"]

_CHUNK_ELEMENTS = 1 << 22
"""Edges x features gathered at once by the torch backend's SDDMM (bounds its temporary memory)."""


def _csr(block: Block) -> CSR:
    """The block's CSR by destination (rows = destinations, entries in edge order)."""
    return block.cached(("kernels", "csr"), lambda: CSR(indptr=block.indptr, indices=block.indices, eids=None,
                                                         num_cols=block.num_src))


def _csr_t(block: Block) -> CSR:
    """The transposed CSR (rows = sources); ``eids`` maps its entries to the block's edge order."""
    def build() -> CSR:
        indptr_t, indices_t, perm = block._transpose()
        return CSR(indptr=indptr_t, indices=indices_t, eids=perm, num_cols=block.num_dst)
    return block.cached(("kernels", "csr_t"), build)


def prepare(block: Block) -> Block:
    """Build the block's kernel structures now (the transposed CSR for backward passes) instead of
    on first use; returns the block. Call it once after loading a partition."""
    _csr(block)
    _csr_t(block)
    return block


class _SpMM(torch.autograd.Function):
    """``out [D, F] = R A(values) C @ x_src [S, F]`` per head, ``A`` the block's ``[D, S]`` CSR and
    ``R = diag(dst_scale [D])``, ``C = diag(src_scale [S])`` (constants; both or neither).

    ``values [E, H]`` or None (all ones). Backward: ``grad_x [S, F] = C A(values)^T R @ grad_out``
    (transposed CSR, the scales swapped) and ``grad_values [E, H] = sddmm(R grad_out, C x_src)``.
    Not twice differentiable.
    """

    @staticmethod
    def forward(ctx: Any, x_src: torch.Tensor, values: torch.Tensor | None, block: Block, backend: KernelBackend,
                dst_scale: torch.Tensor | None = None, src_scale: torch.Tensor | None = None) -> torch.Tensor:
        ctx.block, ctx.backend = block, backend
        # x_src is needed only for the edge values' gradient: not kept alive otherwise
        ctx.save_for_backward(x_src if values is not None and values.requires_grad else None, values,
                              dst_scale, src_scale)
        return backend.spmm(_csr(block), values, x_src, dst_scale, src_scale)

    @staticmethod
    @torch.autograd.function.once_differentiable
    def backward(ctx: Any, grad_out: torch.Tensor) -> tuple[torch.Tensor | None, ...]:
        block: Block = ctx.block
        backend: KernelBackend = ctx.backend
        x_src, values, dst_scale, src_scale = ctx.saved_tensors
        grad_out = grad_out.contiguous()
        grad_x = grad_values = None
        if ctx.needs_input_grad[0]:
            grad_x = backend.spmm(_csr_t(block), values, grad_out, src_scale, dst_scale)
        if values is not None and ctx.needs_input_grad[1]:
            if dst_scale is not None:
                grad_out, x_src = grad_out * dst_scale.unsqueeze(1), x_src * src_scale.unsqueeze(1)
            grad_values = backend.sddmm(_csr(block), grad_out, x_src, values.shape[1], _CHUNK_ELEMENTS)
        return grad_x, grad_values, None, None, None, None


class _SDDMM(torch.autograd.Function):
    """``out [E, H]``: ``out[e, k] = <a_dst[dst_e, head k], b_src[src_e, head k]>``.

    Backward: ``grad_a [D, F] = A(grad_out) @ b_src`` and ``grad_b [S, F] = A(grad_out)^T @ a_dst``.
    """

    @staticmethod
    def forward(ctx: Any, a_dst: torch.Tensor, b_src: torch.Tensor, heads: int, block: Block,
                backend: KernelBackend) -> torch.Tensor:
        ctx.block, ctx.backend = block, backend
        ctx.save_for_backward(a_dst, b_src)
        return backend.sddmm(_csr(block), a_dst, b_src, heads, _CHUNK_ELEMENTS)

    @staticmethod
    @torch.autograd.function.once_differentiable
    def backward(ctx: Any, grad_out: torch.Tensor) -> tuple[torch.Tensor | None, ...]:
        block: Block = ctx.block
        backend: KernelBackend = ctx.backend
        a_dst, b_src = ctx.saved_tensors
        grad_out = grad_out.contiguous()
        grad_a = backend.spmm(_csr(block), grad_out, b_src) if ctx.needs_input_grad[0] else None
        grad_b = backend.spmm(_csr_t(block), grad_out, a_dst) if ctx.needs_input_grad[1] else None
        return grad_a, grad_b, None, None, None


class _EdgeSoftmax(torch.autograd.Function):
    """``alpha [E, H], alpha_self [D, H]`` = softmax over each destination's in-edge scores and
    its self score. Backward: ``grad_score = alpha * (grad - sum_row(alpha * grad))``."""

    @staticmethod
    def forward(ctx: Any, score: torch.Tensor, self_score: torch.Tensor | None, block: Block,
                backend: KernelBackend) -> tuple[torch.Tensor, torch.Tensor | None]:
        ctx.block, ctx.backend = block, backend
        alpha, alpha_self = backend.edge_softmax(_csr(block), score, self_score)
        ctx.save_for_backward(alpha, alpha_self)
        return alpha, alpha_self

    @staticmethod
    @torch.autograd.function.once_differentiable
    def backward(ctx: Any, grad: torch.Tensor | None, grad_self: torch.Tensor | None
                 ) -> tuple[torch.Tensor | None, ...]:
        block: Block = ctx.block
        backend: KernelBackend = ctx.backend
        alpha, alpha_self = ctx.saved_tensors
        grad = torch.zeros_like(alpha) if grad is None else grad
        if alpha_self is not None and grad_self is None:
            grad_self = torch.zeros_like(alpha_self)
        grad_score, grad_self_score = backend.edge_softmax_backward(_csr(block), alpha, alpha_self, grad, grad_self)
        return grad_score, grad_self_score, None, None


def _check_heads_values(who: str, block: Block, values: torch.Tensor, num_feat: int, dtype: torch.dtype) -> int:
    """Heads ``H`` of ``values`` (``[E]`` -> 1, ``[E, H]`` -> H), checked against the block and ``F``."""
    if values.dim() not in (1, 2) or values.shape[0] != block.num_edges:
        raise ValueError(f"{who}: edge_values has shape {list(values.shape)} but the block has "
                         f"{block.num_edges} edges; expected [{block.num_edges}] or [{block.num_edges}, heads]")
    if values.dtype != dtype:
        raise ValueError(f"{who}: edge_values has dtype {values.dtype} but x_src has {dtype}")
    heads = 1 if values.dim() == 1 else values.shape[1]
    if heads < 1 or num_feat % heads:
        raise ValueError(f"{who}: edge_values has {heads} heads but x_src has {num_feat} features, "
                         "which is not a multiple of it")
    return heads


def spmm(block: Block, x_src: torch.Tensor, edge_values: torch.Tensor | None = None,
         reduce: str = "sum") -> torch.Tensor:
    r"""Aggregate source rows into destinations along the block's edges.

    .. math::
        \mathbf{out}_v = \bigoplus_{e = (u \to v)} w_e \, \mathbf{x}_u

    with :math:`\bigoplus` a sum (``reduce="sum"``) or the sum divided by the number of local
    in-edges of ``v`` (``reduce="mean"``; 0 for a destination without in-edges). Self-loops and
    duplicate edges count like any other edge. With ``H`` heads of values, head ``k``'s factors
    scale feature columns ``[k F/H, (k + 1) F/H)``.

    Args:
        block (Block): the local graph.
        x_src (torch.Tensor): source features ``[S, F]``.
        edge_values (torch.Tensor, optional): per-edge factors ``w`` ``[E]`` or ``[E, H]`` (``H``
            dividing ``F``) in the block's edge order, same dtype as ``x_src``; differentiable.
            Edge weights are not applied unless passed here. (default: :obj:`None`, all ones)
        reduce (str): ``"sum"`` or ``"mean"``. (default: :obj:`"sum"`)

    Returns:
        torch.Tensor: ``[D, F]``.
    """
    block.check_src(x_src, None, "spmm")
    if not x_src.is_floating_point():
        raise ValueError(f"spmm: x_src must be a floating-point tensor, got {x_src.dtype}")
    if reduce not in ("sum", "mean"):
        raise ValueError(f"spmm: reduce must be 'sum' or 'mean', got {reduce!r}")
    values = None
    if edge_values is not None:
        _check_heads_values("spmm", block, edge_values, x_src.shape[1], x_src.dtype)
        values = edge_values if edge_values.dim() == 2 else edge_values.unsqueeze(1)
    out = _SpMM.apply(x_src.contiguous(), values, block, block.backend_for(x_src))
    if reduce == "mean":
        count = block.cached(("in_count_inv", out.dtype, out.device),
                             lambda: block.in_count.clamp(min=1).to(out.dtype).reciprocal().unsqueeze(1))
        out = out * count
    return out


def spmm_scaled(block: Block, x_src: torch.Tensor, dst_scale: torch.Tensor, src_scale: torch.Tensor) -> torch.Tensor:
    r"""The unweighted sum of :func:`spmm` between two diagonal scalings, in one kernel pass.

    .. math::
        \mathbf{out}_v = s^{\mathrm{dst}}_v \sum_{u \to v} s^{\mathrm{src}}_u \, \mathbf{x}_u

    (GCN's ``D^{-1/2} A D^{-1/2}``). The scales are constants (no gradient flows into them);
    backward is the same kernel on the transposed CSR with the scales swapped. Not exported from
    :mod:`gnn_dist.nn`: :class:`~gnn_dist.nn.GCNConv` uses it.

    Args:
        block (Block): the local graph.
        x_src (torch.Tensor): source features ``[S, F]``, floating point.
        dst_scale (torch.Tensor): ``[D]``, same dtype and device as ``x_src``.
        src_scale (torch.Tensor): ``[S]``, same dtype and device as ``x_src``.

    Returns:
        torch.Tensor: ``[D, F]``.
    """
    block.check_src(x_src, None, "spmm_scaled")
    if not x_src.is_floating_point():
        raise ValueError(f"spmm_scaled: x_src must be a floating-point tensor, got {x_src.dtype}")
    for name, scale, rows in (("dst_scale", dst_scale, block.num_dst), ("src_scale", src_scale, block.num_src)):
        if tuple(scale.shape) != (rows,) or scale.dtype != x_src.dtype or scale.requires_grad:
            raise ValueError(f"spmm_scaled: {name} has shape {list(scale.shape)}, dtype {scale.dtype} and "
                             f"requires_grad={scale.requires_grad}; expected a constant [{rows}] of {x_src.dtype}")
    return _SpMM.apply(x_src.contiguous(), None, block, block.backend_for(x_src), dst_scale.contiguous(),
                       src_scale.contiguous())


def sddmm(block: Block, a_dst: torch.Tensor, b_src: torch.Tensor, heads: int | None = None) -> torch.Tensor:
    """Per-edge dot products ``out[e] = <a_dst[dst_e], b_src[src_e]>``: ``[D, F] x [S, F] -> [E]``.

    With ``heads=H`` (dividing ``F``), one dot product per head: ``-> [E, H]``. Differentiable
    in both inputs; never holds an ``E x F`` tensor with the numba backend (the torch backend
    gathers edges in chunks).
    """
    if a_dst.dim() != 2 or b_src.dim() != 2 or a_dst.shape[1] != b_src.shape[1]:
        raise ValueError(f"sddmm: a_dst and b_src must be 2-D with the same width, got {list(a_dst.shape)} "
                         f"and {list(b_src.shape)}")
    if a_dst.shape[0] != block.num_dst or b_src.shape[0] != block.num_src:
        raise ValueError(f"sddmm: a_dst has {a_dst.shape[0]} rows and b_src {b_src.shape[0]}, but the block has "
                         f"num_dst = {block.num_dst} and num_src = {block.num_src}")
    if a_dst.dtype != b_src.dtype or not a_dst.is_floating_point():
        raise ValueError(f"sddmm: a_dst and b_src must share a floating dtype, got {a_dst.dtype} and {b_src.dtype}")
    num_heads = 1 if heads is None else int(heads)
    if num_heads < 1 or a_dst.shape[1] % num_heads:
        raise ValueError(f"sddmm: heads = {heads} must be >= 1 and divide the width {a_dst.shape[1]}")
    out = _SDDMM.apply(a_dst.contiguous(), b_src.contiguous(), num_heads, block, block.backend_for(b_src))
    return out[:, 0] if heads is None else out


def edge_softmax(block: Block, score: torch.Tensor,
                 self_score: torch.Tensor | None = None) -> tuple[torch.Tensor, torch.Tensor | None]:
    r"""Softmax of edge scores over each destination's in-edges, with an optional self term.

    .. math::
        \alpha_e = \frac{\exp s_e}{\exp s^{\mathrm{self}}_v + \sum_{e' \to v} \exp s_{e'}}

    Scores of ``-inf`` get weight 0; a destination whose scores are all ``-inf`` (or that has no
    in-edge and no self term) gets all-zero weights. Differentiable in both scores.

    Args:
        block (Block): the local graph.
        score (torch.Tensor): ``[E]`` or ``[E, H]`` scores in the block's edge order.
        self_score (torch.Tensor, optional): ``[D]`` or ``[D, H]`` (as ``score``) scores of a
            self term per destination, not stored as an edge. (default: :obj:`None`)

    Returns:
        ``(alpha, alpha_self)`` shaped like ``score`` and ``self_score`` (``alpha_self`` None
        without a self term).
    """
    squeeze = score.dim() == 1
    s = score.unsqueeze(1) if squeeze else score
    if s.dim() != 2 or s.shape[0] != block.num_edges or not s.is_floating_point():
        raise ValueError(f"edge_softmax: score has shape {list(score.shape)} and dtype {score.dtype}; expected a "
                         f"floating [{block.num_edges}] or [{block.num_edges}, heads] tensor")
    ss = None
    if self_score is not None:
        ss = self_score.unsqueeze(1) if squeeze else self_score
        if tuple(ss.shape) != (block.num_dst, s.shape[1]) or ss.dtype != s.dtype:
            raise ValueError(f"edge_softmax: self_score has shape {list(self_score.shape)} and dtype "
                             f"{self_score.dtype}; expected {[block.num_dst] + list(score.shape[1:])} of {score.dtype}")
    alpha, alpha_self = _EdgeSoftmax.apply(s.contiguous(), None if ss is None else ss.contiguous(), block,
                                           block.backend_for(s))
    if squeeze:
        return alpha[:, 0], None if alpha_self is None else alpha_self[:, 0]
    return alpha, alpha_self
