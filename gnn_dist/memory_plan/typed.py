"""What the memory planner needs of a typed (heterogeneous) part: its types and relations, its
inner rows per type, and what a typed model keeps besides a homogeneous one's terms.

A typed model's layers' parameters are counted by building it on the meta device
(:mod:`.model`); the learnable rows of the featureless types are this
rank's own, ``sum_t I_t D`` values with their gradient and optimizer state, never all-reduced.
Per layer it saves, per destination type ``t``, the concatenation of its rows and of its
relations' aggregates, ``I_t (1 + R_t) F`` (``R_t`` relations into ``t``): over the types,
``(I + A) F`` with ``A = sum_r I_{dst(r)}`` (:attr:`TypedSizes.relation_rows`), plus one scale
per edge (float32). Torch-free.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

__all__ = ["TypedSizes", "typed_sizes", "embedding_values", "TYPED_SPECS", "typed_sizes_from_spec"]


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


def embedding_values(typed: TypedSizes | None, embedding_dim: int | None) -> int:
    """Values of this rank's learnable rows (0 without)."""
    if typed is None or not embedding_dim:
        return 0
    return typed.embedding_rows() * int(embedding_dim)


TYPED_SPECS: dict[str, dict[str, Any]] = {
    "ogbn-mag": {
        "node_types": {"paper": (736_389, 128), "author": (1_134_649, 0), "institution": (8_740, 0),
                       "field_of_study": (59_965, 0)},
        "relations": {("author", "affiliated_with", "institution"): 1_043_998,
                      ("author", "writes", "paper"): 7_145_660, ("paper", "cites", "paper"): 5_416_271,
                      ("paper", "has_topic", "field_of_study"): 7_505_078},
        "classes": 349, "reverse": True},
}
"""Published typed graphs the planner knows by name (``gnn-dist plan --typed-spec NAME``): each
node type's ``(count, feature width)``, each relation's edges, the target type's classes, and
whether the recipe adds each relation's reverse (OGB's ``raw/`` counts)."""


def typed_sizes_from_spec(name: str, num_parts: int, halo_model: str = "rmat", halo: float | None = None) -> Any:
    """The mean part of the published typed graph ``name`` (:data:`TYPED_SPECS`) cut into
    ``num_parts`` parts: every type and relation split evenly, the halo rows by the halo model
    (:func:`~.sizes.halo_ratio`) or ``halo`` (``H / I``)."""
    from .sizes import PartSizes, halo_ratio

    spec = TYPED_SPECS[name]
    names = list(spec["node_types"])
    rels = [(names.index(s), names.index(d)) for s, _, d in spec["relations"]]
    edges = sum(spec["relations"].values())
    if spec["reverse"]:
        rels += [(d, s) for s, d in rels]
        edges *= 2
    counts = [c for c, _ in spec["node_types"].values()]
    nodes = sum(counts)
    inner = -(-nodes // num_parts)
    ratio = halo_ratio(num_parts, halo_model) if halo is None else float(halo)
    num_halo = min(int(round(ratio * inner)), nodes - inner)
    typed = TypedSizes(relations=tuple(rels), feature_dims=tuple(f for _, f in spec["node_types"].values()),
                       rows=tuple(-(-c // num_parts) for c in counts))
    return PartSizes(part_id=0, num_parts=num_parts, inner=inner, halo=num_halo, edges=-(-edges // num_parts),
                     send=num_halo, feature_dim=max(typed.feature_dims), num_classes=int(spec["classes"]),
                     num_nodes=nodes, typed=typed)
