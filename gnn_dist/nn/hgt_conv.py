r"""The Heterogeneous Graph Transformer (HGT) layer of Hu et al., "Heterogeneous Graph
Transformer" (WWW 2020), on a typed block, equal to PyG's ``HGTConv``.

Legend: ``D`` destinations, ``S`` sources, ``E`` edges, ``R`` relations, ``T`` node types,
``H`` heads of width ``d = F' / H``, ``F``/``F'`` input/output width, ``D_t`` destinations of
type ``t``, ``tau(v)`` the type of ``v``, ``phi(e)`` the relation of edge ``e``.

.. math::
    \mathbf{k}_u, \mathbf{q}_u, \mathbf{v}_u = \mathbf{x}_u \mathbf{W}^{K|Q|V}_{\tau(u)} + \mathbf{b}^{K|Q|V}_{\tau(u)}
    \qquad \text{(per head } h\text{: its } d \text{ columns)}

    \alpha^h_{uv} = \underset{e = (u \to v),\ \text{all relations}}{\mathrm{softmax}}
        \Big( \frac{\mu^h_{\phi(e)}}{\sqrt{d}}\ \mathbf{q}^h_v \cdot \big(\mathbf{k}^h_u \mathbf{W}^{ATT,h}_{\phi(e)}\big) \Big)

    \tilde{\mathbf{h}}^h_v = \sum_{e = (u \to v)} \alpha^h_{uv}\ \mathbf{v}^h_u \mathbf{W}^{MSG,h}_{\phi(e)}

    \mathbf{x}'_v = \beta_{\tau(v)}\, \big(\mathrm{GELU}(\Vert_h \tilde{\mathbf{h}}^h_v)\, \mathbf{A}_{\tau(v)}
        + \mathbf{a}_{\tau(v)}\big) + (1 - \beta_{\tau(v)})\, \mathbf{x}_v,
    \qquad \beta_t = \sigma(s_t)

The softmax runs over all in-edges of ``v`` across relations (a destination's in-edges are all
in its block: exact on any partition); the skip term is there when ``F = F'`` (else
:math:`\mathbf{x}'_v` is the mapped message alone). A destination without in-edges gets
``GELU(0) A + a`` (then the skip term), as in PyG; a node type that no relation enters gets the
same (PyG's ``HGTConv`` returns no output for it). Self-loops and duplicate edges count as any
edge; edge weights are not read. Parameters, PyG's names in brackets: ``kqv_weight`` ``[T, F,
3F']`` and ``kqv_bias`` ``[T, 3F']`` (``kqv_lin``, columns ``k | q | v``), ``k_rel``/``v_rel``
``[R, H, d, d]`` (``W^ATT``, ``W^MSG``: PyG's ``k_rel``/``v_rel`` with type ``h R + r``),
``p_rel`` ``[R, H]`` (``mu``), ``out_weight`` ``[T, F', F']``, ``out_bias`` ``[T, F']``
(``out_lin``), ``skip`` ``[T]`` (when ``F = F'``).

The layer implements the layer protocol (:mod:`.decomposable`): the softmax-weighted sum is
kept as numerators per relation, a denominator and a running maximum per destination and head
(as :class:`~gnn_dist.nn.GATConv`'s), so the sources may be split (the ``overlap`` schedule).
The relation maps are moved to the destination side: the score is
:math:`(\mathbf{W}^{ATT}_r \mathbf{q}_v) \cdot \mathbf{k}_u` (one
:func:`~gnn_dist.nn.sparse.sddmm` per relation) and :math:`\mathbf{W}^{MSG}_r` applies to each
relation's aggregate of the :math:`\mathbf{v}_u` (one :func:`~gnn_dist.nn.sparse.spmm`), so no
per-edge or per-(relation, source) tensor of features is made.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn

from .block import Block
from .decomposable import check_first, propagate
from .dropout import DropoutKey
from .relations import TypedRows, check_typed, relation_blocks, source_types, typed_linear, typed_rows
from .sparse import edge_softmax, sddmm, spmm

__all__ = ["HGTConv"]


@dataclass(frozen=True, slots=True)
class _Context:
    typed: TypedRows
    x_dst: torch.Tensor
    """``[D, F]``: the destinations' input rows (the skip term's)."""
    q_rel: list[torch.Tensor]
    """Per relation ``[D_t, F']``: its destinations' queries through ``W^ATT_r``, scaled by
    ``mu_r / sqrt(d)``."""
    dst_types: list[int]
    """Per relation, its destination type."""

    @property
    def dst_rows(self) -> list[torch.Tensor]:
        """Per relation, the destinations of its destination type."""
        return [self.typed.rows[t] for t in self.dst_types]


@dataclass(frozen=True, slots=True)
class _Attention:
    """An aggregate: per relation the numerator ``[D_t, F']`` (None: no edge), with ``peak``
    ``[D, H]`` (a partial softmax against that running maximum, ``-inf`` for a destination
    without an edge yet) its denominator ``[D, H]``; ``peak`` None: already normalised."""

    num: list[torch.Tensor | None]
    denom: torch.Tensor | None
    peak: torch.Tensor | None
    dst_rows: list[torch.Tensor]


class HGTConv(nn.Module):
    r"""HGT layer (see the module docstring for the math and the parameters).

    Args:
        in_channels (int): input width ``F`` (every type's: the union rows).
        out_channels (int): output width ``F'``, a multiple of ``heads``.
        num_relations (int): ``R``.
        num_node_types (int): ``T``.
        heads (int, optional): ``H``. (default: :obj:`1`)

    Shapes:
        - **input:** a typed :class:`~gnn_dist.nn.Block` (``block.types``), ``x_src`` :math:`(S, F)`
        - **output:** :math:`(D, F')`
    """

    linear_aggregation = False

    def __init__(self, in_channels: int, out_channels: int, num_relations: int, num_node_types: int,
                 heads: int = 1) -> None:
        super().__init__()
        if num_relations < 1 or num_node_types < 1 or heads < 1:
            raise ValueError(f"HGTConv: num_relations ({num_relations}), num_node_types ({num_node_types}) and heads "
                             f"({heads}) must be positive")
        if out_channels % heads:
            raise ValueError(f"HGTConv: out_channels = {out_channels} must be a multiple of heads = {heads}")
        self.in_channels, self.out_channels, self.heads = int(in_channels), int(out_channels), int(heads)
        self.num_relations, self.num_node_types = int(num_relations), int(num_node_types)
        d, t, r = out_channels // heads, num_node_types, num_relations
        self.kqv_weight = nn.Parameter(torch.empty(t, in_channels, 3 * out_channels))
        self.kqv_bias = nn.Parameter(torch.empty(t, 3 * out_channels))
        self.k_rel = nn.Parameter(torch.empty(r, heads, d, d))
        self.v_rel = nn.Parameter(torch.empty(r, heads, d, d))
        self.p_rel = nn.Parameter(torch.empty(r, heads))
        self.out_weight = nn.Parameter(torch.empty(t, out_channels, out_channels))
        self.out_bias = nn.Parameter(torch.empty(t, out_channels))
        if in_channels == out_channels:
            self.skip = nn.Parameter(torch.empty(t))
        else:   # no skip term (PyG's is there and unused)
            self.register_parameter("skip", None)
        self.reset_parameters()

    def reset_parameters(self) -> None:
        """PyG's: each map uniform in ``±1/sqrt(fan_in)`` (its bias too), ``p_rel`` and ``skip`` ones."""
        for w, fan_in in ((self.kqv_weight, self.in_channels), (self.kqv_bias, self.in_channels),
                          (self.k_rel, self.out_channels // self.heads), (self.v_rel, self.out_channels // self.heads),
                          (self.out_weight, self.out_channels), (self.out_bias, self.out_channels)):
            bound = 1.0 / math.sqrt(fan_in)
            nn.init.uniform_(w, -bound, bound)
        nn.init.ones_(self.p_rel)
        if self.skip is not None:
            nn.init.ones_(self.skip)

    def forward(self, block: Block, x_src: torch.Tensor, dropout_key: DropoutKey | None = None) -> torch.Tensor:
        block.check_src(x_src, self.in_channels, repr(self))
        return propagate(self, block, x_src)

    # ---------------------------------------------------------------- the layer protocol
    def begin(self, block: Block, x_first: torch.Tensor, dropout_key: DropoutKey | None = None, *,
              raw: bool = False) -> tuple[_Context, torch.Tensor]:
        """The destinations' queries through each relation's ``W^ATT``; the rows pass as they are
        (keys and values are computed per group, by the rows' types)."""
        check_first(block, x_first, self.in_channels, self)
        if raw:
            raise ValueError(f"{self!r} cannot aggregate its raw input rows: its attention weights depend on its "
                             f"parameters")
        types = check_typed(block, self, self.num_relations, self.num_node_types, "HGT")
        typed = typed_rows(block)
        x_dst = block.dst_rows(x_first)
        f, h, d = self.out_channels, self.heads, self.out_channels // self.heads
        w_q, b_q = self.kqv_weight[:, :, f:2 * f], self.kqv_bias[:, f:2 * f]
        q = [x_dst.index_select(0, rows) @ w_q[t] + b_q[t] for t, rows in enumerate(typed.rows)]
        scale = self.p_rel / math.sqrt(d)                                                      # [R, H]
        dst_types = [int(t) for t in types.rel_types[:, 1].tolist()]
        q_rel = [torch.einsum("nhd,hed->nhe", q[t].view(-1, h, d), self.k_rel[r] * scale[r].view(h, 1, 1))
                 .reshape(-1, f) for r, t in enumerate(dst_types)]
        return _Context(typed, x_dst, q_rel, dst_types), x_first

    def transform(self, x: torch.Tensor, ctx: _Context) -> torch.Tensor:
        return x

    def aggregate(self, group: Block, z: torch.Tensor, ctx: _Context, *, whole: bool = False) -> _Attention:
        """Keys and values of ``group``'s rows by their types, each relation's scores; then
        (``whole``) the edge softmax over every destination's in-edges, or a partial softmax:
        numerators and denominator against the running maximum."""
        f, h = self.out_channels, self.heads
        w = torch.cat([self.kqv_weight[:, :, :f], self.kqv_weight[:, :, 2 * f:]], dim=2)
        b = torch.cat([self.kqv_bias[:, :f], self.kqv_bias[:, 2 * f:]], dim=1)
        k, v = typed_linear(z, source_types(group), w, b).split(f, dim=1)
        k, v = k.contiguous(), v.contiguous()
        rels = relation_blocks(group, ctx.typed)
        scores = {r: sddmm(rel.block, ctx.q_rel[r], k, heads=h) for r, rel in enumerate(rels) if rel.block is not None}
        if not scores:
            return _Attention([None] * len(rels), torch.zeros(group.num_dst, h, dtype=z.dtype, device=z.device),
                              torch.full((group.num_dst, h), float("-inf"), dtype=z.dtype, device=z.device),
                              ctx.dst_rows)
        edges = torch.cat([rels[r].edges for r in scores])
        if whole:
            inv = torch.empty_like(edges)
            inv[edges] = torch.arange(edges.numel(), device=edges.device)
            alpha, _ = edge_softmax(group, torch.cat(list(scores.values())).index_select(0, inv))       # [E, H]
            weights = dict(zip(scores, alpha.index_select(0, edges).split([s.shape[0] for s in scores.values()])))
            denom = peak = None
        else:
            dst = torch.cat([rels[r].dst for r in scores])
            score = torch.cat(list(scores.values()))
            with torch.no_grad():   # softmax is shift-invariant: the maximum is a constant for autograd
                peak = torch.full((group.num_dst, h), float("-inf"), dtype=score.dtype, device=score.device)
                peak.scatter_reduce_(0, dst.unsqueeze(1).expand_as(score), score, "amax")
            weight = torch.exp(score - peak[dst])                                                    # [E, H]
            denom = torch.zeros_like(peak).index_add(0, dst, weight)
            weights = dict(zip(scores, weight.split([s.shape[0] for s in scores.values()])))
        num = [spmm(rel.block, v, weights[r].to(v.dtype)) if r in weights else None for r, rel in enumerate(rels)]
        return _Attention(num, denom, peak, ctx.dst_rows)

    def merge(self, a: _Attention, b: _Attention) -> _Attention:
        assert a.peak is not None and b.peak is not None and a.denom is not None and b.denom is not None, \
            "a whole aggregate merges with nothing"
        peak = torch.maximum(a.peak, b.peak)
        ra, rb = _rescale(a.peak, peak), _rescale(b.peak, peak)                                    # [D, H], <= 1
        h = self.heads
        num = []
        for x, y, rows in zip(a.num, b.num, a.dst_rows):
            parts = [(n, s.index_select(0, rows)) for n, s in ((x, ra), (y, rb)) if n is not None]
            scaled = [(n.view(n.shape[0], h, -1) * s.unsqueeze(-1)).view(n.shape) for n, s in parts]
            num.append(None if not scaled else scaled[0] if len(scaled) == 1 else scaled[0] + scaled[1])
        return _Attention(num, a.denom * ra + b.denom * rb, peak, a.dst_rows)

    def update(self, acc: _Attention, ctx: _Context) -> torch.Tensor:
        f, h, d = self.out_channels, self.heads, self.out_channels // self.heads
        rel_dst = ctx.dst_types
        x_dst = ctx.x_dst
        outs = []
        for t, rows in enumerate(ctx.typed.rows):
            msg = None
            for r, num in enumerate(acc.num):
                if rel_dst[r] != t or num is None:
                    continue
                y = torch.einsum("nhd,hde->nhe", num.view(-1, h, d), self.v_rel[r])
                msg = y if msg is None else msg + y
            if msg is None:
                msg = x_dst.new_zeros(rows.numel(), h, d)
            elif acc.denom is not None:
                denom = acc.denom.index_select(0, rows)
                msg = msg / torch.where(denom > 0, denom, torch.ones_like(denom)).unsqueeze(-1)
            out = F.gelu(msg.reshape(-1, f)) @ self.out_weight[t] + self.out_bias[t]
            if self.skip is not None:
                beta = torch.sigmoid(self.skip[t])
                out = beta * out + (1 - beta) * x_dst.index_select(0, rows)
            outs.append(out)
        return torch.cat(outs).index_select(0, ctx.typed.order)

    def __repr__(self) -> str:
        return (f"{self.__class__.__name__}({self.in_channels}, {self.out_channels}, num_relations={self.num_relations}, "
                f"heads={self.heads})")


def _rescale(peak: torch.Tensor, new_peak: torch.Tensor) -> torch.Tensor:
    """``exp(peak - new_peak)``, 0 where ``peak`` is ``-inf`` (no edge yet)."""
    return torch.where(torch.isinf(peak), torch.zeros_like(peak), torch.exp(peak - new_peak))
