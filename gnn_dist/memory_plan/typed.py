"""What the memory planner needs of a typed (heterogeneous) part: its types and relations, its
inner rows per type, and what a typed model keeps besides a homogeneous one's terms.

An R-GCN layer's parameters are ``R F F'`` relation weights (``B F F' + R B`` with ``B`` bases),
``T F F'`` root weights and the bias; the learnable rows of the featureless types are this
rank's own, ``sum_t I_t D`` values with their gradient and optimizer state, never all-reduced.
Per layer it saves, per destination type ``t``, the concatenation of its rows and of its
relations' aggregates, ``I_t (1 + R_t) F`` (``R_t`` relations into ``t``): over the types,
``(I + A) F`` with ``A = sum_r I_{dst(r)}`` (:attr:`TypedSizes.relation_rows`), plus one scale
per edge (float32). Torch-free.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

__all__ = ["TypedSizes", "typed_sizes", "typed_layer_parameters", "embedding_values"]


@dataclass(frozen=True, slots=True)
class TypedSizes:
    """A typed part as the planner sees it."""

    relations: tuple[tuple[int, int], ...]
    """Each relation's ``(source type, destination type)``."""
    feature_dims: tuple[int, ...]
    """Each type's feature width (0: featureless)."""
    rows: tuple[int, ...]
    """The part's inner rows of each type."""

    @property
    def num_types(self) -> int:
        return len(self.feature_dims)

    @property
    def relation_rows(self) -> int:
        """``A``: the part's inner rows of each relation's destination type, summed over the relations."""
        return sum(self.rows[d] for _, d in self.relations)

    def embedding_rows(self) -> int:
        """The part's inner rows of the featureless types (learnable rows with ``--embedding-dim``)."""
        return sum(n for n, f in zip(self.rows, self.feature_dims) if f == 0)


def typed_sizes(meta: Any, part_id: int) -> TypedSizes | None:
    """Part ``part_id`` of a typed folder's metadata (None for a homogeneous folder)."""
    sec = getattr(meta, "hetero", None)
    if sec is None:
        return None
    index = {t["name"]: i for i, t in enumerate(sec["node_types"])}
    return TypedSizes(relations=tuple((index[s], index[d]) for s, _, d in sec["relations"]),
                      feature_dims=tuple(int(t.get("feature_dim") or 0) for t in sec["node_types"]),
                      rows=tuple(int(c) for c in sec["part_type_counts"][part_id]))


def typed_layer_parameters(typed: TypedSizes, w_in: int, w_out: int, num_bases: int | None) -> int:
    """An R-GCN layer's parameters (module docstring)."""
    r = len(typed.relations)
    relation = r * w_in * w_out if num_bases is None else num_bases * w_in * w_out + r * num_bases
    return relation + typed.num_types * w_in * w_out + w_out


def embedding_values(typed: TypedSizes | None, embedding_dim: int | None) -> int:
    """Values of this rank's learnable rows (0 without)."""
    if typed is None or not embedding_dim:
        return 0
    return typed.embedding_rows() * int(embedding_dim)
