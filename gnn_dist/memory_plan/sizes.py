"""What the memory planner needs to know of one rank's part: its row, edge and send counts, and
the graph's widths; from a partition folder's metadata, or from a size spec and a halo model
for a graph that is not on disk.

The halo model (a size spec has no partition to read its halo rows from): the halo rows of a
part are ``H = a (P - 1)^b I`` for ``P`` parts of ``I = N / P`` inner rows, at most ``N - I``.
:data:`HALO_MODELS` holds the fits of METIS partitions of the catalog graphs at P = 2, 4, 8, 16
(``gnn-dist partition --method metis``, the mean of ``H / I`` over the parts):

- ``rmat`` (``a = 0.42, b = 0.68``, rmat-medium: R-MAT, skewed degrees, no community structure:
  0.42, 0.88, 1.48, 2.63): the pessimistic end, the default;
- ``sbm`` (``a = 0.35, b = 0.37``, sbm-medium: 8 planted communities: 0.35, 0.62, 0.81, 0.95):
  a graph whose communities METIS finds.

A real graph lies between; ``--halo-ratio R`` sets ``H / I`` itself. The send rows (rows of this
part that peers hold as halo rows) are taken equal to ``H`` (the halo volume is symmetric on
an undirected graph). Every part is assumed to have the mean size: METIS balances the rows, but
the halo rows of the largest part were up to 2.9x the mean on rmat-medium at P = 16 (1.1x on sbm).

Link prediction (``--task link``) also needs each split's positive pairs: a folder's metadata
has each part's (``link_{train,val,test}.npy`` shapes) and the split's global counts; a size spec
splits its published edges by ``edge_split`` fractions and gives each part ``1 / P`` of them.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from .typed import TypedSizes, typed_sizes

__all__ = ["PartSizes", "HALO_MODELS", "LINK_SPLITS", "SPEC_EDGE_SPLIT", "sizes_from_meta", "sizes_from_spec"]

HALO_MODELS: dict[str, tuple[float, float]] = {"rmat": (0.42, 0.68), "sbm": (0.35, 0.37)}
"""Halo model name -> ``(a, b)`` of ``H / I = a (P - 1)^b`` (module docstring)."""
SPEC_EDGE_SPLIT = (0.85, 0.05, 0.1)
"""The train, val and test fractions a size spec's edges are split by for link prediction
(``gnn-dist plan --task link`` without ``--data``: the ``--edge-split`` example of docs/cli.md)."""
LINK_SPLITS = ("train", "val", "test")
"""The edge split's splits, in the order of :attr:`PartSizes.link_pairs` (``gnn_dist.link``'s)."""


@dataclass(frozen=True, slots=True)
class PartSizes:
    """One rank's part as the planner sees it (counts, not bytes)."""

    part_id: int
    num_parts: int
    inner: int
    """``I``: rows the part owns (its destinations)."""
    halo: int
    """``H``: rows it holds from peers."""
    edges: int
    """``E``: its local edges (every in-edge of its inner rows)."""
    send: int
    """``R``: rows it sends to peers per exchange (the send list's length)."""
    feature_dim: int
    num_classes: int
    num_nodes: int = 0
    """``N``: the graph's nodes (link prediction's node map; 0: unknown)."""
    link_pairs: tuple[int, int, int] = (0, 0, 0)
    """This part's positive pairs of the edge split's train, val and test splits (0: no split)."""
    link_global: tuple[int, int, int] = (0, 0, 0)
    """The same over every part (the split's ``counts``)."""
    typed: TypedSizes | None = None
    """A typed part's types, relations and rows per type (:mod:`.typed`); None when homogeneous."""

    @property
    def rows(self) -> int:
        """``S = I + H``: the source rows of the part's block."""
        return self.inner + self.halo


def sizes_from_meta(meta: Any) -> list[PartSizes]:
    """Every part of a ``PartitionMeta`` (``partition.json``: no part file is read)."""
    split = getattr(meta, "edge_split", None)
    counts = split["counts"] if split else {}
    link_global = tuple(int(counts.get(s, 0)) for s in LINK_SPLITS)
    out = []
    for pm in meta.parts:
        send = pm.files.get("send_index.npy")
        out.append(PartSizes(part_id=int(pm.part_id), num_parts=int(meta.num_parts), inner=int(pm.num_inner),
                             halo=int(pm.num_halo), edges=int(pm.num_local_edges),
                             send=int(send.shape[0]) if send is not None else int(pm.num_halo),
                             feature_dim=_feature_dim(meta), num_classes=_num_classes(meta),
                             num_nodes=int(meta.num_nodes), link_pairs=_part_pairs(pm.files),
                             link_global=link_global, typed=typed_sizes(meta, int(pm.part_id))))  # type: ignore[arg-type]
    return out


def _feature_dim(meta: Any) -> int:
    """The features' width (a typed folder: its widest type's)."""
    sec = getattr(meta, "hetero", None)
    if sec is None:
        return int(meta.feature_dim)
    return max(int(t.get("feature_dim") or 0) for t in sec["node_types"])


def _num_classes(meta: Any) -> int:
    """The classes (a typed folder: its target type's)."""
    sec = getattr(meta, "hetero", None)
    return int(meta.num_classes) if sec is None else int(sec.get("num_classes", 0))


def _part_pairs(files: dict[str, Any]) -> tuple[int, int, int]:
    """A part's pairs per split: the second dimension of its ``link_{split}.npy`` ``[2, E]`` (0 when
    the folder has no edge split)."""
    shapes = [files.get(f"link_{s}.npy") for s in LINK_SPLITS]
    return tuple(int(f.shape[1]) if f is not None else 0 for f in shapes)  # type: ignore[return-value]


def halo_ratio(num_parts: int, model: str = "rmat") -> float:
    """``H / I`` of a part of a ``num_parts``-way METIS partition by halo model ``model``."""
    a, b = HALO_MODELS[model]
    return 0.0 if num_parts <= 1 else a * (num_parts - 1) ** b


def sizes_from_spec(*, nodes: int, edges: int, feature_dim: int, num_classes: int, num_parts: int,
                    halo: float | None = None, halo_model: str = "rmat", symmetric: bool = True,
                    edge_split: Sequence[float] | None = None) -> PartSizes:
    """The mean part of a graph of ``nodes`` and ``edges`` (directed edges as published;
    ``symmetric``: the partitioner stores both directions, ``--symmetrize``) split into
    ``num_parts``; ``halo`` is ``H / I`` (default: the halo model's); ``edge_split``: the train,
    val and test fractions of the published edges (link prediction's pairs, ``1 / P`` per part;
    the message-passing graph keeps the training edges only)."""
    inner = -(-nodes // num_parts)
    ratio = halo_ratio(num_parts, halo_model) if halo is None else float(halo)
    num_halo = min(int(round(ratio * inner)), nodes - inner)
    link_global = tuple(int(f * edges) for f in edge_split) if edge_split else (0, 0, 0)
    passing = link_global[0] if edge_split else edges   # an edge split keeps only its training edges
    stored = passing * (2 if symmetric else 1)
    return PartSizes(part_id=0, num_parts=num_parts, inner=inner, halo=num_halo, edges=-(-stored // num_parts),
                     send=num_halo, feature_dim=feature_dim, num_classes=num_classes, num_nodes=nodes,
                     link_pairs=tuple(-(-g // num_parts) for g in link_global),  # type: ignore[arg-type]
                     link_global=link_global)  # type: ignore[arg-type]
