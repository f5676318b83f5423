"""Sparse aggregation over a :class:`~gnn_dist.nn.Block`: the one place a kernel backend plugs in.

Legend: ``S`` sources, ``D`` destinations, ``E`` edges, ``F`` feature width.

:func:`spmm` computes ``out[v] = sum over in-edges e = (u -> v) of values[e] * x_src[u]`` with a
torch sparse CSR matmul. Its backward does not differentiate through sparse ops: the gradient of
``x_src`` is the transposed matmul with the block's precomputed transposed CSR, and the gradient
of the edge values is a sampled dense-dense product (SDDMM) computed in edge chunks, so no
``E x F`` message tensor is ever held whole.
"""

from __future__ import annotations

from typing import Any

import torch

from .block import Block

__all__ = ["spmm", "sddmm"]

_CHUNK_ELEMENTS = 1 << 22
"""Edges x features processed at once by :func:`sddmm` (bounds its temporary memory)."""


class _SpMM(torch.autograd.Function):
    """``out [D, F] = A(values) @ x_src [S, F]`` where ``A`` is the block's ``[D, S]`` CSR.

    Forward: CSR matmul. Backward: ``grad_x [S, F] = A(values)^T @ grad_out`` (transposed CSR,
    built once per block) and ``grad_values [E] = sddmm(grad_out, x_src)``. ``values`` is None for
    the unweighted adjacency (all ones). Not twice differentiable.
    """

    @staticmethod
    def forward(ctx: Any, x_src: torch.Tensor, values: torch.Tensor | None, block: Block) -> torch.Tensor:
        vals = block.ones(x_src.dtype) if values is None else values
        ctx.block = block
        ctx.has_values = values is not None
        ctx.save_for_backward(x_src, vals)
        if block.num_dst == 0 or x_src.shape[1] == 0:
            return x_src.new_zeros(block.num_dst, x_src.shape[1])
        return block.csr(vals) @ x_src

    @staticmethod
    @torch.autograd.function.once_differentiable
    def backward(ctx: Any, grad_out: torch.Tensor) -> tuple[torch.Tensor | None, torch.Tensor | None, None]:
        block: Block = ctx.block
        x_src, vals = ctx.saved_tensors
        grad_out = grad_out.contiguous()
        grad_x = grad_values = None
        if ctx.needs_input_grad[0]:
            if block.num_dst == 0 or grad_out.shape[1] == 0:
                grad_x = x_src.new_zeros(x_src.shape)
            else:
                grad_x = block.csr_t(vals) @ grad_out
        if ctx.has_values and ctx.needs_input_grad[1]:
            grad_values = sddmm(block, grad_out, x_src)
        return grad_x, grad_values, None


def spmm(block: Block, x_src: torch.Tensor, edge_values: torch.Tensor | None = None,
         reduce: str = "sum") -> torch.Tensor:
    r"""Aggregate source rows into destinations along the block's edges.

    .. math::
        \mathbf{out}_v = \bigoplus_{e = (u \to v)} w_e \, \mathbf{x}_u

    with :math:`\bigoplus` a sum (``reduce="sum"``) or the sum divided by the number of local
    in-edges of ``v`` (``reduce="mean"``; 0 for a destination without in-edges). Self-loops and
    duplicate edges count like any other edge.

    Args:
        block (Block): the local graph.
        x_src (torch.Tensor): source features ``[S, F]``.
        edge_values (torch.Tensor, optional): per-edge factors ``w`` ``[E]`` in the block's edge
            order, same dtype as ``x_src``; differentiable. Edge weights are not applied unless
            passed here. (default: :obj:`None`, all ones)
        reduce (str): ``"sum"`` or ``"mean"``. (default: :obj:`"sum"`)

    Returns:
        torch.Tensor: ``[D, F]``.
    """
    block.check_src(x_src, None, "spmm")
    if not x_src.is_floating_point():
        raise ValueError(f"spmm: x_src must be a floating-point tensor, got {x_src.dtype}")
    if reduce not in ("sum", "mean"):
        raise ValueError(f"spmm: reduce must be 'sum' or 'mean', got {reduce!r}")
    if edge_values is not None:
        if edge_values.shape != (block.num_edges,):
            raise ValueError(f"spmm: edge_values has shape {list(edge_values.shape)} but the block has "
                             f"{block.num_edges} edges; expected [{block.num_edges}]")
        if edge_values.dtype != x_src.dtype:
            raise ValueError(f"spmm: edge_values has dtype {edge_values.dtype} but x_src has {x_src.dtype}")
    out = _SpMM.apply(x_src.contiguous(), edge_values, block)
    if reduce == "mean":
        count = block.cached(("in_count_inv", out.dtype),
                             lambda: block.in_count.clamp(min=1).to(out.dtype).reciprocal().unsqueeze(1))
        out = out * count
    return out


def sddmm(block: Block, a_dst: torch.Tensor, b_src: torch.Tensor) -> torch.Tensor:
    """Per-edge dot products ``out[e] = <a_dst[dst_e], b_src[src_e]>``: ``[D, F] x [S, F] -> [E]``.

    Computed in chunks of edges, so memory stays bounded; not differentiable (used in backward).
    """
    num_edges = block.num_edges
    out = a_dst.new_empty(num_edges)
    step = max(1, _CHUNK_ELEMENTS // max(1, a_dst.shape[1]))
    src, dst = block.indices, block.dst_index
    for lo in range(0, num_edges, step):
        hi = min(num_edges, lo + step)
        torch.sum(a_dst[dst[lo:hi]] * b_src[src[lo:hi]], dim=1, out=out[lo:hi])
    return out
