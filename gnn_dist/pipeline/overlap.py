"""``overlap`` (exact): each layer starts its halo exchange, aggregates the inner-source edges
while the rows travel, waits, then adds the halo-source part; the backward mirrors it.

Legend: ``I`` inner rows (= destinations ``D``), ``H`` halo rows, ``E_in``/``E_h`` the edges
from inner/halo sources, ``F`` width, ``K`` attention heads, ``C`` width per head.

The block is split once (when the mode is built) into an inner-source block (``I`` sources) and
a halo-source block (``H`` sources, ids shifted by ``-I``), both keeping the full block's edge
order, so per-edge factors computed on the full block (GCN's normalisation, GAT's dropout masks)
are sliced, never recomputed. Per layer (autograd glue in :class:`_Start`/:class:`_Arrive`)::

    forward:  start(h) ... inner part from h[:I] ... halo = wait() ... + halo part(halo)
    backward: grad of the halo part -> start_backward(grad_halo) ... backward of the inner part
              ... wait() and add into grad h

The backward order follows from autograd's: the halo part was recorded after the inner part, so
its backward runs first, and :class:`_Start`'s backward (the wait) runs only after every use of
``h`` has produced its gradient. The sums are split, so results equal ``sync`` up to the order of
float additions (GAT merges the two partial softmaxes with their running max and sum).

Built-in layers (:class:`~gnn_dist.nn.GCNConv`, :class:`~gnn_dist.nn.SAGEConv`,
:class:`~gnn_dist.nn.GINConv`, :class:`~gnn_dist.nn.GATConv`) are split here from their
parameters; any other layer falls back to exchange-then-compute (a warning says so once).
"""

from __future__ import annotations

import logging
from typing import Any

import torch
import torch.nn.functional as F

from ..distributed.halo import HaloExchanger, HaloHandle, HaloSubset
from ..nn import Block, DropoutKey, GATConv, GCNConv, GINConv, SAGEConv, gcn_norm, hash_edge_dropout, spmm
from .base import LayerCounter, SubsetFn, SyncExchange

__all__ = ["OverlapPipeline", "SplitBlock", "split_block"]

log = logging.getLogger(__name__)


class SplitBlock:
    """A block's edges split by source: ``inner`` (sources ``[0, I)``) and ``halo`` (sources
    ``[I, I + H)``, renumbered ``[0, H)``); ``inner_edges``/``halo_edges`` int64 are the edges'
    positions in the full block."""

    def __init__(self, block: Block) -> None:
        d = block.num_dst
        is_halo = block.indices >= d
        self.full = block
        self.inner_edges = torch.nonzero(~is_halo).flatten()
        self.halo_edges = torch.nonzero(is_halo).flatten()
        self.inner = _sub_block(block, self.inner_edges, 0, d)
        self.halo = _sub_block(block, self.halo_edges, d, block.num_src)


def _sub_block(block: Block, edges: torch.Tensor, lo: int, hi: int) -> Block:
    """The edges ``edges`` of ``block`` (whose sources lie in ``[lo, hi)``) over sources
    ``[lo, hi)`` renumbered from 0; destinations unchanged. Degrees stay the full graph's."""
    dst = block.dst_index[edges]
    indptr = torch.zeros(block.num_dst + 1, dtype=torch.long, device=block.device)
    torch.cumsum(torch.bincount(dst, minlength=block.num_dst), 0, out=indptr[1:])
    rows = slice(lo, hi)
    return Block(num_src=hi - lo, num_dst=block.num_dst, indptr=indptr, indices=block.indices[edges] - lo,
                 edge_weight=None if block.edge_weight is None else block.edge_weight[edges],
                 in_degree=block.in_degree[rows], out_degree=block.out_degree[rows],
                 self_loops=block.self_loops[rows], src_original_ids=block.src_original_ids[rows])


def split_block(block: Block) -> SplitBlock:
    """The :class:`SplitBlock` of ``block`` (cached on it)."""
    return block.cached("overlap_split", lambda: SplitBlock(block))


class _Box:
    """The two exchanges of one layer in flight."""

    __slots__ = ("forward", "backward", "subset")

    def __init__(self, subset: HaloSubset | None = None) -> None:
        self.subset = subset
        self.forward: HaloHandle | None = None
        self.backward: HaloHandle | None = None


class _Start(torch.autograd.Function):
    """Identity on ``h [I, F]`` that starts the forward exchange; its backward waits for the
    backward exchange (started by :class:`_Arrive`) and adds the peers' gradients."""

    @staticmethod
    def forward(ctx: Any, h: torch.Tensor, ex: HaloExchanger, box: _Box,  # type: ignore[override]
                tag: int) -> torch.Tensor:
        ctx.ex, ctx.box, ctx.tag = ex, box, tag
        box.forward = ex.start(h, tag=tag, subset=box.subset)
        return h.view_as(h)

    @staticmethod
    @torch.autograd.function.once_differentiable
    def backward(ctx: Any, grad: torch.Tensor) -> tuple[Any, ...]:  # type: ignore[override]
        box: _Box = ctx.box
        if box.backward is None:  # the halo rows got no gradient: still take part in the collective
            box.backward = ctx.ex.start_backward(grad.new_zeros((ctx.ex.num_halo, *grad.shape[1:])), tag=ctx.tag,
                                                 subset=box.subset)
        contrib = box.backward.wait()
        box.backward = None
        return grad + contrib, None, None, None


class _Arrive(torch.autograd.Function):
    """``h`` (a dependency only) -> the halo rows ``[H, F]`` of the exchange :class:`_Start`
    began; its backward starts sending the halo rows' gradient back (not waiting)."""

    @staticmethod
    def forward(ctx: Any, h: torch.Tensor, ex: HaloExchanger, box: _Box,  # type: ignore[override]
                tag: int) -> torch.Tensor:
        ctx.ex, ctx.box, ctx.tag = ex, box, tag
        assert box.forward is not None
        halo = box.forward.wait()
        box.forward = None
        return halo

    @staticmethod
    @torch.autograd.function.once_differentiable
    def backward(ctx: Any, grad_halo: torch.Tensor) -> tuple[Any, ...]:  # type: ignore[override]
        ctx.box.backward = ctx.ex.start_backward(grad_halo.contiguous(), tag=ctx.tag, subset=ctx.box.subset)
        return None, None, None, None


class OverlapPipeline:
    """The ``overlap`` schedule (see the module docstring) as a :class:`~.base.Pipeline`.

    The models call :meth:`layer` (instead of ``exchange`` then the conv) when their part has it.

    Args:
        block: the part's block (split now).
        exchanger: the part's halo exchanger.
        subset_fn: boundary sampling, or None (then the mode is exact).
    """

    name = "overlap"

    def __init__(self, block: Block, exchanger: HaloExchanger, subset_fn: SubsetFn | None = None) -> None:
        self.block = block
        self.exchanger = exchanger
        self.subset_fn = subset_fn
        self.split = split_block(block)
        self._layers = LayerCounter()
        self._warned: set[str] = set()

    def begin_step(self, epoch: int) -> "OverlapPipeline":
        self._layers.reset(epoch)
        return self

    def staleness(self) -> int:
        return 0

    def flush(self) -> None:
        pass

    def exchange(self, h_inner: torch.Tensor) -> torch.Tensor:
        """The blocking exchange (for layers this mode cannot split)."""
        tag = self._layers.next()
        if self.subset_fn is None or self.exchanger.world_size == 1:
            return self.exchanger.exchange(h_inner, tag=tag)
        return SyncExchange.apply(h_inner, self.exchanger, tag, self.subset_fn(self._layers.epoch, tag))

    def layer(self, conv: torch.nn.Module, h_inner: torch.Tensor, *,
              dropout_key: DropoutKey | None = None) -> torch.Tensor:
        """``conv`` on this part with the exchange overlapped: ``[I, F_in] -> [I, F_out]``."""
        kind = _SPLITS.get(type(conv))
        if kind is None or self.exchanger.world_size == 1:
            if kind is None and type(conv).__name__ not in self._warned:
                self._warned.add(type(conv).__name__)
                log.warning("overlap: %s has no split form; it runs exchange-then-compute", type(conv).__name__)
            h_all = self.exchange(h_inner)
            if getattr(conv, "uses_dropout_key", False):
                return conv(self.block, h_all, dropout_key=dropout_key)
            return conv(self.block, h_all)
        tag = self._layers.next()
        ex = self.exchanger
        ex._check_rows(h_inner)
        box = _Box(self.subset_fn(self._layers.epoch, tag) if self.subset_fn is not None else None)
        h = _Start.apply(h_inner, ex, box, tag)
        return kind(conv, self.split, h, lambda: _Arrive.apply(h, ex, box, tag), dropout_key)

    def __repr__(self) -> str:
        return f"OverlapPipeline(sampled={self.subset_fn is not None})"


# ------------------------------------------------------------------------ split layer forms
# Each takes (conv, split, h_inner, arrive, dropout_key): computes the inner-source part from
# h_inner, then calls arrive() for the halo rows [H, F_in] and adds the halo-source part.


def _gcn(conv: GCNConv, sb: SplitBlock, h: torch.Tensor, arrive: Any, _key: Any) -> torch.Tensor:
    full = sb.full
    z_in = conv.lin(h)
    edge_norm, self_norm = full.cached(("gcn_norm", z_in.dtype), lambda: gcn_norm(full, z_in.dtype))
    agg = spmm(sb.inner, z_in, edge_norm[sb.inner_edges].contiguous())
    self_term = self_norm.unsqueeze(1) * z_in
    z_halo = conv.lin(arrive())
    out = (agg + spmm(sb.halo, z_halo, edge_norm[sb.halo_edges].contiguous())) + self_term
    if conv.bias is not None:
        out = out + conv.bias
    return out


def _inv_count(full: Block, dtype: torch.dtype) -> torch.Tensor:
    return full.cached(("overlap_inv_count", dtype),
                       lambda: full.in_count.clamp(min=1).to(dtype).reciprocal().unsqueeze(1))


def _sage(conv: SAGEConv, sb: SplitBlock, h: torch.Tensor, arrive: Any, _key: Any) -> torch.Tensor:
    inv = _inv_count(sb.full, h.dtype)
    root = conv.lin_r(h)
    if conv.out_channels < conv.in_channels:
        w = conv.lin_l.weight
        agg = spmm(sb.inner, F.linear(h, w))
        agg = (agg + spmm(sb.halo, F.linear(arrive(), w))) * inv
        if conv.lin_l.bias is not None:
            agg = agg + conv.lin_l.bias
        return agg + root
    agg = spmm(sb.inner, h)
    agg = (agg + spmm(sb.halo, arrive())) * inv
    return conv.lin_l(agg) + root


def _gin(conv: GINConv, sb: SplitBlock, h: torch.Tensor, arrive: Any, _key: Any) -> torch.Tensor:
    agg = spmm(sb.inner, h)
    self_term = (1 + conv.eps) * h
    return conv.nn((agg + spmm(sb.halo, arrive())) + self_term)


def _gat(conv: GATConv, sb: SplitBlock, h: torch.Tensor, arrive: Any, key: DropoutKey | None) -> torch.Tensor:
    full = sb.full
    attn_dropout = conv.training and conv.dropout > 0.0
    if attn_dropout and key is None:
        raise ValueError(f"{conv!r} with dropout={conv.dropout} in training mode needs dropout_key")
    d, K, C = full.num_dst, conv.heads, conv.out_channels
    ids = full.src_original_ids
    dst_all = full.dst_index

    def scores(z: torch.Tensor, a_dst: torch.Tensor, block: Block, edges: torch.Tensor) -> torch.Tensor:
        a_src = (z * conv.att_src).sum(-1)                                        # [S_part, K]
        s = F.leaky_relu(a_src[block.indices] + a_dst[dst_all[edges]], conv.negative_slope)
        return s.masked_fill(full.self_loop_mask[edges].unsqueeze(1), float("-inf"))  # [E_part, K]

    def drop(p: torch.Tensor, edges: torch.Tensor | None) -> torch.Tensor:
        if not attn_dropout:
            return p
        assert key is not None
        if edges is None:  # the self terms
            return hash_edge_dropout(p, conv.dropout, key=key, src_ids=ids[:d], dst_ids=ids[:d], training=True)
        return hash_edge_dropout(p, conv.dropout, key=key, src_ids=ids[full.indices[edges]],
                                 dst_ids=ids[dst_all[edges]], training=True)

    def weighted(block: Block, z: torch.Tensor, p: torch.Tensor) -> torch.Tensor:         # [D, K, C]
        return torch.stack([spmm(block, z[:, k].contiguous(), p[:, k].contiguous()) for k in range(K)], dim=1)

    # inner sources: the self term and the inner edges, against their own running max
    z_in = conv.lin(h).view(-1, K, C)                                              # [I, K, C]
    a_dst = (z_in * conv.att_dst).sum(-1)                                           # [D, K]
    s_in = scores(z_in, a_dst, sb.inner, sb.inner_edges)                            # [E_in, K]
    s_self = F.leaky_relu((z_in * conv.att_src).sum(-1) + a_dst, conv.negative_slope)  # [D, K]
    dst_in = dst_all[sb.inner_edges]
    with torch.no_grad():  # softmax is shift-invariant: the max is a constant for autograd
        m_in = s_self.clone()
        m_in.scatter_reduce_(0, dst_in.unsqueeze(1).expand_as(s_in), s_in, "amax")
    p_in = torch.exp(s_in - m_in[dst_in])
    p_self = torch.exp(s_self - m_in)
    denom_in = p_self.index_add(0, dst_in, p_in)                                    # [D, K]
    num_in = weighted(sb.inner, z_in, drop(p_in, sb.inner_edges)) + drop(p_self, None).unsqueeze(-1) * z_in
    # halo sources: merge with the running max and sum
    z_h = conv.lin(arrive()).view(-1, K, C)                                         # [H, K, C]
    s_h = scores(z_h, a_dst, sb.halo, sb.halo_edges)                                # [E_h, K]
    dst_h = dst_all[sb.halo_edges]
    with torch.no_grad():
        m = m_in.clone()
        m.scatter_reduce_(0, dst_h.unsqueeze(1).expand_as(s_h), s_h, "amax")
    rescale = torch.exp(m_in - m)                                                   # [D, K], <= 1
    p_h = torch.exp(s_h - m[dst_h])
    denom = (denom_in * rescale).index_add(0, dst_h, p_h)
    num = num_in * rescale.unsqueeze(-1) + weighted(sb.halo, z_h, drop(p_h, sb.halo_edges))
    out = num / denom.unsqueeze(-1)                                                 # [D, K, C]
    out = out.reshape(d, K * C) if conv.concat else out.mean(dim=1)
    if conv.bias is not None:
        out = out + conv.bias
    return out


_SPLITS: dict[type, Any] = {GCNConv: _gcn, SAGEConv: _sage, GINConv: _gin, GATConv: _gat}
