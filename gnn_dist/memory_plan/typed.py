"""What the memory planner needs of a typed (heterogeneous) part: its types and relations, its
inner rows per type, and what a typed model keeps besides a homogeneous one's terms.

A typed model's layers' parameters are counted by building it on the meta device
(:mod:`.parameters`); the learnable rows of the featureless types are this
rank's own, ``sum_t I_t D`` values with their gradient and optimizer state, never all-reduced.
What a layer saves is its model's formula (:mod:`gnn_dist.models.saved`), in the part's sizes and
two of a typed part's: ``A = sum_r I_{dst(r)}`` (:attr:`TypedSizes.relation_rows`; R-GCN saves
``(I + A) F`` and a scale per edge) and ``B``, the relations' source rows counted per relation
(:meth:`TypedSizes.relation_source_rows`, hetero-sage's). At a checkpoint or model file rank 0
holds every rank's learnable rows (:func:`gathered_rows_bytes`). Torch-free.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

__all__ = ["HALO_RELATIONS", "TypedSizes", "typed_sizes", "embedding_values", "gathered_rows_bytes", "TYPED_SPECS", "typed_sizes_from_spec"]


HALO_RELATIONS = 1.5
"""The relations a halo row is a source of, on average: at least one (it is in the part for an
edge into it), at most its type's relations out; measured 1.33-1.50 on METIS parts of
ogbn-mag-shaped graphs (``mag_graph``, 16k and 100k nodes, P = 2) against 2.9-3.1 for the
bound (the metadata counts a part's halo rows, not per type or relation)."""


@dataclass(frozen=True, slots=True)
class TypedSizes:
    """A typed part as the planner sees it."""

    relations: tuple[tuple[int, int], ...]
    """Each relation's ``(source type, destination type)``."""
    feature_dims: tuple[int, ...]
    """Each type's feature width (0: featureless)."""
    rows: tuple[int, ...]
    """The part's inner rows of each type."""
    type_counts: tuple[int, ...] = ()
    """The graph's nodes of each type (every part's)."""

    @property
    def num_types(self) -> int:
        return len(self.feature_dims)

    @property
    def relation_rows(self) -> int:
        """``A``: the part's inner rows of each relation's destination type, summed over the relations."""
        return sum(self.rows[d] for _, d in self.relations)

    def relation_source_rows(self, halo: int) -> float:
        """``B``: each relation's source rows in a block of its own (the destinations of its
        destination type first, then its other sources), summed over the relations:
        ``I_d + I_s`` for a relation between two types (every inner row of the source type taken
        as a source of it; within one type its inner sources are its destinations), and each of
        the part's ``halo`` rows in :data:`HALO_RELATIONS` relations' blocks."""
        return sum(self.rows[d] + (self.rows[s] if s != d else 0) for s, d in self.relations) + HALO_RELATIONS * halo

    def embedding_rows(self) -> int:
        """The part's inner rows of the featureless types (learnable rows with ``--embedding-dim``)."""
        return sum(n for n, f in zip(self.rows, self.feature_dims) if f == 0)

    def all_embedding_rows(self) -> int:
        """The graph's nodes of the featureless types (every rank's learnable rows)."""
        return sum(n for n, f in zip(self.type_counts, self.feature_dims) if f == 0)


def typed_sizes(meta: Any, part_id: int) -> TypedSizes | None:
    """Part ``part_id`` of a typed folder's metadata (None for a homogeneous folder)."""
    sec = getattr(meta, "hetero", None)
    if sec is None:
        return None
    index = {t["name"]: i for i, t in enumerate(sec["node_types"])}
    return TypedSizes(relations=tuple((index[s], index[d]) for s, _, d in sec["relations"]),
                      feature_dims=tuple(int(t.get("feature_dim") or 0) for t in sec["node_types"]),
                      rows=tuple(int(c) for c in sec["part_type_counts"][part_id]),
                      type_counts=tuple(int(t["count"]) for t in sec["node_types"]))


def embedding_values(typed: TypedSizes | None, embedding_dim: int | None) -> int:
    """Values of this rank's learnable rows (0 without)."""
    if typed is None or not embedding_dim:
        return 0
    return typed.embedding_rows() * int(embedding_dim)


def gathered_rows_bytes(typed: TypedSizes | None, embedding_dim: int | None, tables: int, groups: int) -> int:
    """Rank 0's extra at a save of a typed run's learnable rows (a checkpoint or a model file:
    :mod:`gnn_dist.checkpoints.node_rows` gathers every rank's rows by id on rank 0): ``tables``
    whole tables of ``N D`` float32 values (the weights, the optimizer's per-row state, the best
    epoch's weights) in ``groups`` gathers, each with its int64 ids ``8 N``, and while the last
    is gathered the received rows and their concatenation before the sort by id, ``2 N (4 D + 8)``
    (``N``: the graph's featureless nodes, :meth:`TypedSizes.all_embedding_rows`). 0 without
    learnable rows."""
    if typed is None or not embedding_dim or not tables:
        return 0
    n = typed.all_embedding_rows()
    return n * (tables * 4 * int(embedding_dim) + groups * 8) + 2 * n * (4 * int(embedding_dim) + 8)


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
                       rows=tuple(-(-c // num_parts) for c in counts), type_counts=tuple(counts))
    return PartSizes(part_id=0, num_parts=num_parts, inner=inner, halo=num_halo, edges=-(-edges // num_parts),
                     send=num_halo, feature_dim=max(typed.feature_dims), num_classes=int(spec["classes"]),
                     num_nodes=nodes, typed=typed)
