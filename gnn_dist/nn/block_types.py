"""The types of a typed (heterogeneous) block's rows and edges, carried by every block derived
from it (a sub-block of destinations, a split by source), like its degrees.

Legend: ``S`` source rows (destinations first), ``E`` edges (CSR order), ``T`` node types,
``R`` relations.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

__all__ = ["BlockTypes"]


@dataclass(frozen=True, slots=True, eq=False)
class BlockTypes:
    """``node_type`` int64 ``[S]`` (each row's type id), ``edge_type`` int64 ``[E]`` (each edge's
    relation id), and the relations' ``(src_type, dst_type)`` ids ``rel_types`` int64 ``[R, 2]``."""

    node_type: torch.Tensor
    edge_type: torch.Tensor
    rel_types: torch.Tensor
    num_types: int

    @property
    def num_relations(self) -> int:
        return int(self.rel_types.shape[0])

    def rows(self, rows: torch.Tensor | slice) -> "BlockTypes":
        """The types of source rows ``rows`` (a block over those sources)."""
        return BlockTypes(self.node_type[rows], self.edge_type, self.rel_types, self.num_types)

    def edges(self, positions: torch.Tensor) -> "BlockTypes":
        """The relations of the edges at ``positions`` (a block over those edges)."""
        return BlockTypes(self.node_type, self.edge_type[positions], self.rel_types, self.num_types)

    def derived(self, rows: torch.Tensor | slice, positions: torch.Tensor) -> "BlockTypes":
        """A block over source rows ``rows`` and the edges at ``positions``."""
        return BlockTypes(self.node_type[rows], self.edge_type[positions], self.rel_types, self.num_types)

    def to(self, device: torch.device | str) -> "BlockTypes":
        return BlockTypes(self.node_type.to(device), self.edge_type.to(device), self.rel_types.to(device),
                          self.num_types)
