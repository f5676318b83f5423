"""The built-in layers split by source: the inner-source part first, the halo-source part once
the halo rows arrive.

Legend: ``D`` (or ``d``) destinations, ``S'`` sources of the split block, ``s`` its first
sources (``num_first``), ``F`` width, ``K`` attention heads, ``C`` width per head.

A split form takes ``(conv, split, h, arrive, dropout_key)``: ``h [s, F_in]`` the split's first
sources (its destinations first), ``arrive() -> [S' - s, F_in]`` its other sources (called once,
after the inner-source part); it returns the destinations' output ``[d, F_out]``, equal to
``conv(split.full, cat(h, arrive()))`` up to the order of float additions. Forms are written
from the layers' parameters for :class:`~gnn_dist.nn.GCNConv`, :class:`~gnn_dist.nn.SAGEConv`,
:class:`~gnn_dist.nn.GINConv` and :class:`~gnn_dist.nn.GATConv` (GAT merges the two partial
softmaxes with their running max and sum); :func:`split_form` is None for any other layer.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch
import torch.nn.functional as F

from ..nn import Block, DropoutKey, GATConv, GCNConv, GINConv, SAGEConv, hash_edge_dropout, spmm
from .block_split import SplitBlock

__all__ = ["ArriveFn", "SplitForm", "split_form"]

ArriveFn = Callable[[], torch.Tensor]
"""``arrive() -> [S' - s, F_in]``: the split's other sources (waits for the halo rows)."""
SplitForm = Callable[[Any, SplitBlock, torch.Tensor, ArriveFn, DropoutKey | None], torch.Tensor]
"""``form(conv, split, h [s, F_in], arrive, dropout_key) -> [d, F_out]`` (see the module docstring)."""


def split_form(conv: torch.nn.Module) -> SplitForm | None:
    """The split form of ``conv``'s exact type (a subclass may compute otherwise), or None."""
    return _FORMS.get(type(conv))


def _gcn(conv: GCNConv, sb: SplitBlock, h: torch.Tensor, arrive: ArriveFn, _key: Any) -> torch.Tensor:
    """``dinv[v] (A (dinv z) + (1 - loops[v]) (dinv z)[v])`` with ``z = h`` or ``h W`` (GCNConv's
    sums), ``A`` split by source; the SpMM counts existing self-loop edges, the self term the
    one that replaces them."""
    full, d, s = sb.full, sb.full.num_dst, sb.num_first
    aggregate_first = conv.aggregates_first(h)  # GCNConv's choice of side for the aggregation
    dinv = full.cached(("overlap_gcn_dinv", h.dtype), lambda: (full.in_degree - full.self_loops + 1)
                       .to(h.dtype).pow(-0.5).unsqueeze(1))                                 # [S', 1]
    self_coef = full.cached(("overlap_gcn_self", h.dtype),
                            lambda: (1 - full.self_loops[:d]).to(h.dtype).unsqueeze(1))    # [D, 1]
    z = h if aggregate_first else conv.lin(h)
    zs = z * dinv[:s]
    agg = spmm(sb.inner, zs)
    z_halo = arrive()
    z_halo = z_halo if aggregate_first else conv.lin(z_halo)
    out = (agg + spmm(sb.halo, z_halo * dinv[s:])).addcmul_(self_coef, zs[:d]).mul_(dinv[:d])
    if aggregate_first:
        return F.linear(out, conv.lin.weight, conv.bias)
    return out if conv.bias is None else out + conv.bias


def _inv_count(full: Block, dtype: torch.dtype) -> torch.Tensor:
    return full.cached(("overlap_inv_count", dtype),
                       lambda: full.in_count.clamp(min=1).to(dtype).reciprocal().unsqueeze(1))


def _sage(conv: SAGEConv, sb: SplitBlock, h: torch.Tensor, arrive: ArriveFn, _key: Any) -> torch.Tensor:
    inv = _inv_count(sb.full, h.dtype)
    root = conv.lin_r(h[:sb.full.num_dst])
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


def _gin(conv: GINConv, sb: SplitBlock, h: torch.Tensor, arrive: ArriveFn, _key: Any) -> torch.Tensor:
    agg = spmm(sb.inner, h)
    self_term = (1 + conv.eps) * h[:sb.full.num_dst]
    return conv.nn((agg + spmm(sb.halo, arrive())) + self_term)


def _gat(conv: GATConv, sb: SplitBlock, h: torch.Tensor, arrive: ArriveFn, key: DropoutKey | None) -> torch.Tensor:
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
    z_in = conv.lin(h).view(-1, K, C)                                              # [s, K, C]
    z_dst = z_in[:d]                                                                # [D, K, C]
    a_dst = (z_dst * conv.att_dst).sum(-1)                                          # [D, K]
    s_in = scores(z_in, a_dst, sb.inner, sb.inner_edges)                            # [E_in, K]
    s_self = F.leaky_relu((z_dst * conv.att_src).sum(-1) + a_dst, conv.negative_slope)  # [D, K]
    dst_in = dst_all[sb.inner_edges]
    with torch.no_grad():  # softmax is shift-invariant: the max is a constant for autograd
        m_in = s_self.clone()
        m_in.scatter_reduce_(0, dst_in.unsqueeze(1).expand_as(s_in), s_in, "amax")
    p_in = torch.exp(s_in - m_in[dst_in])
    p_self = torch.exp(s_self - m_in)
    denom_in = p_self.index_add(0, dst_in, p_in)                                    # [D, K]
    num_in = weighted(sb.inner, z_in, drop(p_in, sb.inner_edges)) + drop(p_self, None).unsqueeze(-1) * z_dst
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


_FORMS: dict[type, SplitForm] = {GCNConv: _gcn, SAGEConv: _sage, GINConv: _gin, GATConv: _gat}
