"""What the layers of typed blocks share (:mod:`.rgcn_conv`, :mod:`.hgt_conv`, :mod:`.hetero_conv`):
the destinations' rows per type, the in-edges per destination and relation, each relation's
edges as a sub-block, and a linear map per node type.

Legend: ``D`` destinations, ``S`` sources, ``E`` edges, ``R`` relations, ``T`` node types,
``D_t`` destinations of type ``t``, ``E_r`` edges of relation ``r``.

Every block holds all in-edges of its destinations, so the per-(destination, relation) counts
are global counts, whatever the partition.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch

from .block import Block
from .block_types import BlockTypes

__all__ = ["TypeIndex", "TypedRows", "RelationEdges", "check_typed", "type_index", "typed_rows", "source_types",
           "relation_blocks", "typed_linear"]


@dataclass(frozen=True, slots=True)
class TypeIndex:
    """Rows grouped by node type."""

    rows: tuple[torch.Tensor, ...]
    """Per node type, its rows (int64, ascending)."""
    pos: torch.Tensor
    """int64 ``[n]``: each row's position among those of its type."""
    order: torch.Tensor
    """int64 ``[n]``: each row's position in the per-type rows concatenated (``cat(per type)[order]``
    is in row order)."""


@dataclass(frozen=True, slots=True)
class TypedRows:
    """What a layer needs of a block's destinations' types (per block, cached)."""

    index: TypeIndex
    """The destinations by type."""
    count: torch.Tensor
    """int64 ``[D, R]``: in-edges per destination and relation."""

    @property
    def rows(self) -> tuple[torch.Tensor, ...]:
        return self.index.rows

    @property
    def pos(self) -> torch.Tensor:
        return self.index.pos

    @property
    def order(self) -> torch.Tensor:
        return self.index.order


@dataclass(frozen=True, slots=True)
class RelationEdges:
    """One relation's edges of a block."""

    block: Block | None
    """The edges as a block over the destinations of the relation's destination type (in their
    order) and the block's sources; None: no such edge."""
    dst: torch.Tensor
    """int64 ``[E_r]``: the edges' destinations (ids in ``[0, D)``)."""
    edges: torch.Tensor
    """int64 ``[E_r]``: the edges' positions in the block."""


def check_typed(block: Block, layer: Any, num_relations: int, num_node_types: int | None, name: str) -> BlockTypes:
    """The block's types; ``ValueError`` for a homogeneous block or other counts of relations
    (or more node types than ``num_node_types``, unless None)."""
    types = block.types
    if types is None:
        raise ValueError(f"{layer!r}: the block has no node and edge types (a homogeneous graph); {name} runs on "
                         f"a typed graph (docs/heterogeneous.md)")
    if types.num_relations != num_relations or (num_node_types is not None and types.num_types > num_node_types):
        raise ValueError(f"{layer!r}: the block has {types.num_relations} relations and {types.num_types} node "
                         f"types, the layer was built for {num_relations} and {num_node_types}")
    return types


def type_index(node_type: torch.Tensor, num_types: int) -> TypeIndex:
    """The rows of ``node_type`` (int64 ``[n]``) grouped by type."""
    device = node_type.device
    rows = tuple(torch.nonzero(node_type == t).flatten() for t in range(max(num_types, 1)))
    n = node_type.numel()
    pos = torch.empty(n, dtype=torch.long, device=device)
    for t_rows in rows:
        pos[t_rows] = torch.arange(t_rows.numel(), device=device)
    order = torch.empty(n, dtype=torch.long, device=device)
    order[torch.cat(rows)] = torch.arange(n, device=device)
    return TypeIndex(rows, pos, order)


def typed_rows(block: Block) -> TypedRows:
    """The destinations' per-type rows and per-(destination, relation) in-edge counts (cached)."""
    def build() -> TypedRows:
        types = block.types
        assert types is not None
        d, r = block.num_dst, types.num_relations
        count = torch.bincount(block.dst_index * r + types.edge_type, minlength=d * r).reshape(d, r)
        return TypedRows(type_index(types.node_type[:d], types.num_types), count)
    return block.cached(("typed_rows",), build)


def source_types(group: Block) -> TypeIndex:
    """The group's source rows grouped by type (cached)."""
    def build() -> TypeIndex:
        types = group.types
        assert types is not None
        return type_index(types.node_type, types.num_types)
    return group.cached(("typed_sources",), build)


def relation_blocks(group: Block, typed: TypedRows) -> list[RelationEdges]:
    """Per relation ``r``, ``group``'s edges of ``r`` (:class:`RelationEdges`; cached on ``group``).

    ``typed`` is the whole block's (``group`` shares its destinations). A relation's block keeps
    ``group``'s sources and their numbering (its first sources are not its destinations): for
    the sparse ops, not for a layer that reads its destinations' rows from its sources."""
    def build() -> list[RelationEdges]:
        types = group.types
        assert types is not None
        out = []
        for r in range(types.num_relations):
            edges = torch.nonzero(types.edge_type == r).flatten()
            if edges.numel() == 0:
                out.append(RelationEdges(None, edges, edges))
                continue
            dst = group.dst_index[edges]
            local = typed.pos[dst]
            n = typed.rows[int(types.rel_types[r, 1])].numel()
            indptr = torch.zeros(n + 1, dtype=torch.long, device=group.device)
            torch.cumsum(torch.bincount(local, minlength=n), 0, out=indptr[1:])
            sub = Block(num_src=group.num_src, num_dst=n, indptr=indptr, indices=group.indices[edges],
                        edge_weight=None, in_degree=group.in_degree, out_degree=group.out_degree,
                        self_loops=group.self_loops, src_original_ids=group.src_original_ids,
                        kernels=group.kernels)
            sub._cache["dst_index"] = local
            out.append(RelationEdges(sub, dst, edges))
        return out
    return group.cached(("relation_blocks",), build)


def typed_linear(x: torch.Tensor, index: TypeIndex, weight: torch.Tensor, bias: torch.Tensor | None) -> torch.Tensor:
    """``[n, F']``: row ``i`` of ``x`` ``[n, F]`` through its type's map, ``x_i W_t + b_t``
    (``weight`` ``[T, F, F']``, ``bias`` ``[T, F']`` or None); one product per type."""
    outs = []
    for t, rows in enumerate(index.rows):
        y = x.index_select(0, rows) @ weight[t]
        outs.append(y if bias is None else y + bias[t])
    return torch.cat(outs).index_select(0, index.order)
