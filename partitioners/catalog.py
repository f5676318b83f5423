"""The catalog of named built-in datasets: synthetic presets generated on demand (no download).

Two families at four sizes each (see ``datasets/README.md`` for how each is made, and the
measured accuracies, generation times and memory):

=========  ===========  ===============  =====================================================
size       nodes        stored edges     use
=========  ===========  ===============  =====================================================
tiny       1,000        ~14k-15k         unit tests (milliseconds)
small      10,000       ~170k-190k       quick experiments, CI (tens of milliseconds)
medium     200,000      ~3.6M-4M         benchmarks on one machine (under a second)
large      2,000,000    ~36M-40M         scale tests (~5-6 s and ~0.9 GB peak RSS to generate)
=========  ===========  ===============  =====================================================

``sbm-*`` (:func:`~partitioners.synthetic.sbm_graph`) have learnable labels and planted
communities (250, 500, 1000 and 1000 nodes from tiny to large; 95% of the edges inside one), so
partitioners have locality to find, as in real graphs; ``rmat-*``
(:func:`~partitioners.synthetic.rmat_graph`) have skewed degrees and random labels, for scale and
partition quality only; ``sbm-regression`` is ``sbm-tiny``'s graph with float regression targets
(:func:`~partitioners.synthetic.regression_targets`) as labels, for node regression;
``sbm-multilabel`` is ``sbm-tiny``'s graph with 8 binary labels thresholded from such a signal
(:func:`~partitioners.synthetic.multilabel_targets`), for multi-label classification;
``sbm-edges`` is ``sbm-tiny`` with 4 edge features whose first column says, noisily, whether an
edge joins two nodes of one class (:func:`~partitioners.synthetic_edges.planted_edge_features`),
for the layers that read edge features (``--model gine``, GAT); ``mag-tiny`` and ``mag-small``
are heterogeneous, shaped like ogbn-mag (:func:`~partitioners.hetero.synthetic.mag_graph`: paper,
author, institution, field; four relations and their reverses; only papers featured and
labelled, with a planted class signal): :func:`load_dataset` returns a
:class:`~partitioners.hetero.HeteroGraph` for them (``docs/heterogeneous.md``). Edge counts are stored (directed) edges, both directions of each
undirected edge, measured with seed 0; other seeds differ by a few percent.
"""

from __future__ import annotations

import dataclasses
import logging
from dataclasses import dataclass, field
from typing import Any

from .graph import Graph
from .hetero.graph import HeteroGraph
from .memory import GraphSize
from .synthetic import rmat_graph, sbm_graph

__all__ = ["DatasetInfo", "list_datasets", "dataset_info", "load_dataset"]

log = logging.getLogger(__name__)


@dataclass(frozen=True, kw_only=True, slots=True)
class DatasetInfo:
    """One catalog entry: what :func:`load_dataset` builds for ``name``."""

    name: str
    """Catalog name, ``<family>-<size>``, e.g. ``"sbm-small"``."""
    family: str
    """Generator family: ``"sbm"``, ``"rmat"`` or ``"mag"`` (heterogeneous: a
    :class:`~partitioners.hetero.HeteroGraph`; ``num_nodes`` counts all types, ``feature_dim``
    and ``num_classes`` are the papers')."""
    num_nodes: int
    """Exact node count."""
    num_edges: int
    """Approximate stored (directed) edge count: measured with seed 0, rounded to 3 digits."""
    feature_dim: int
    """Feature columns (float32)."""
    num_classes: int
    """Number of label classes (the target width D for regression)."""
    label_kind: str = "class"
    """``"class"``, ``"regression"`` (float32 ``[N, D]`` targets: ``sbm-regression``) or
    ``"multilabel"`` (a uint8 ``[N, C]`` 0/1 matrix: ``sbm-multilabel``)."""
    description: str
    """One line for listings."""
    params: dict[str, Any] = field(default_factory=dict)
    """Keyword arguments of the generator (everything except ``seed`` and ``name``)."""
    edge_feature_dim: int = 0
    """Edge feature columns (float32, :func:`~partitioners.synthetic_edges.planted_edge_features`); 0: none."""

    def sizes(self) -> GraphSize:
        """The sizes of the graph :func:`load_dataset` builds, for a memory estimate before it
        is generated (float32 features, int64 labels, float32 targets or uint8 multi-labels, three
        masks, symmetric)."""
        label_bytes = {"regression": 4 * self.num_classes, "multilabel": self.num_classes}.get(self.label_kind, 8)
        return GraphSize(num_nodes=self.num_nodes, num_edges=self.num_edges, symmetric=True,
                         feature_bytes=4 * self.feature_dim, label_bytes=label_bytes, num_masks=3,
                         edge_attr_bytes=4 * self.edge_feature_dim)


def _sbm(size: str, num_nodes: int, num_edges: int, num_classes: int, feature_dim: int,
         description: str, **params: Any) -> DatasetInfo:
    params = {"num_nodes": num_nodes, "num_classes": num_classes, "feature_dim": feature_dim,
              "avg_degree": 20.0, "p_in_ratio": 8.0, "degree_exponent": 3.0,
              "community_size": 1000, "p_local": 0.95, "feature_noise": 0.75, **params}
    kind, width = "class", num_classes
    for key, planted in (("target_dim", "regression"), ("multilabel_dim", "multilabel")):
        if params.get(key) is not None:
            kind, width = planted, params[key]
    return DatasetInfo(name=f"sbm-{size}", family="sbm", num_nodes=num_nodes, num_edges=num_edges,
                       feature_dim=feature_dim, num_classes=width, label_kind=kind,
                       description=description, params=params)


def _rmat(size: str, num_nodes: int, num_edges: int, num_classes: int, feature_dim: int,
          draws: int, description: str) -> DatasetInfo:
    params = {"num_nodes": num_nodes, "num_edges": draws, "num_classes": num_classes,
              "feature_dim": feature_dim}
    return DatasetInfo(name=f"rmat-{size}", family="rmat", num_nodes=num_nodes,
                       num_edges=num_edges, feature_dim=feature_dim, num_classes=num_classes,
                       description=description, params=params)


def _mag(size: str, num_nodes: int, num_edges: int, num_classes: int, feature_dim: int,
         draws: int, description: str) -> DatasetInfo:
    params = {"num_nodes": num_nodes, "num_edges": draws, "num_classes": num_classes,
              "feature_dim": feature_dim}
    return DatasetInfo(name=f"mag-{size}", family="mag", num_nodes=num_nodes, num_edges=num_edges,
                       feature_dim=feature_dim, num_classes=num_classes, description=description,
                       params=params)


_MAG_NOTE = ("heterogeneous, shaped like ogbn-mag: paper/author/institution/field, 4 relations + reverses, "
             "papers featured and labelled (planted class signal)")

_SBM_NOTE = "degree-corrected SBM with communities, learnable labels"
_RMAT_NOTE = "Graph500 R-MAT, skewed degrees, random labels (scale/partitioning only)"
_REGRESSION_NOTE = ("sbm-tiny's graph and features with 4 regression targets planted over it (a random linear "
                    "map of the 2-hop mean features, plus noise): node regression")

_MULTILABEL_NOTE = ("sbm-tiny's graph and features with 8 binary labels planted over it (the 2-hop signal of "
                    "sbm-regression, thresholded: 10-40% of the nodes per label): multi-label classification")

_EDGES_NOTE = ("sbm-tiny with 4 edge features, the first a noisy same-class flag: for gine and gat with "
               "edge features")

_CATALOG: dict[str, DatasetInfo] = {d.name: d for d in (
    _sbm("tiny", 1_000, 13_700, 4, 16, f"{_SBM_NOTE}; for unit tests",
         avg_degree=16.0, p_in_ratio=6.0, feature_noise=0.9, community_size=250),
    _sbm("small", 10_000, 173_000, 8, 32, f"{_SBM_NOTE}; quick experiments", community_size=500),
    _sbm("medium", 200_000, 3_650_000, 8, 64, f"{_SBM_NOTE}; single-machine benchmarks"),
    _sbm("large", 2_000_000, 36_500_000, 8, 64, f"{_SBM_NOTE}; scale tests"),
    _rmat("tiny", 1_000, 14_300, 4, 16, 10_000, f"{_RMAT_NOTE}; for unit tests"),
    _rmat("small", 10_000, 190_000, 8, 32, 140_000, _RMAT_NOTE),
    _rmat("medium", 200_000, 3_960_000, 8, 64, 2_300_000, _RMAT_NOTE),
    _rmat("large", 2_000_000, 40_200_000, 8, 64, 21_000_000, _RMAT_NOTE),
    _sbm("regression", 1_000, 13_700, 4, 16, _REGRESSION_NOTE, avg_degree=16.0, p_in_ratio=6.0,
         feature_noise=0.9, community_size=250, target_dim=4, train_frac=0.5, val_frac=0.2, test_frac=0.3),
    _sbm("multilabel", 1_000, 13_700, 4, 16, _MULTILABEL_NOTE, avg_degree=16.0, p_in_ratio=6.0,
         feature_noise=0.9, community_size=250, multilabel_dim=8, train_frac=0.5, val_frac=0.2, test_frac=0.3),
    dataclasses.replace(_sbm("edges", 1_000, 13_700, 4, 16, _EDGES_NOTE, avg_degree=16.0, p_in_ratio=6.0,
                             feature_noise=0.9, community_size=250), edge_feature_dim=4),
    _mag("tiny", 1_000, 11_700, 4, 16, 6_000, f"{_MAG_NOTE}; for unit tests"),
    _mag("small", 16_000, 239_000, 8, 32, 120_000, f"{_MAG_NOTE}; benchmarks"),
)}


def list_datasets() -> list[DatasetInfo]:
    """Every catalog entry, SBM first, each family from tiny to large, then the planted ones
    (``sbm-regression``, ``sbm-multilabel``, ``sbm-edges``), then the heterogeneous ``mag-*``."""
    return list(_CATALOG.values())


def dataset_info(name: str) -> DatasetInfo:
    """The entry called ``name``; ``ValueError`` listing the valid names when there is none."""
    try:
        return _CATALOG[name]
    except (KeyError, TypeError):
        raise ValueError(f"unknown dataset {name!r}; choose one of: {', '.join(_CATALOG)}") from None


def load_dataset(name: str, seed: int = 0) -> Graph | HeteroGraph:
    """Generate the catalog dataset ``name`` with ``seed`` (same seed, same bytes).

    Returns a symmetric :class:`~partitioners.graph.Graph` with features, labels and
    train/val/test masks, whose :attr:`~partitioners.graph.Graph.name` is ``name``; for the
    ``mag-*`` entries a :class:`~partitioners.hetero.HeteroGraph` (reverses included).
    """
    info = dataset_info(name)
    log.info("generating %s (%s nodes, ~%s edges, seed %s)", name, f"{info.num_nodes:,}",
             f"{info.num_edges:,}", seed)
    if info.family == "mag":
        from .hetero.synthetic import mag_graph

        return mag_graph(**info.params, seed=seed, name=name)
    make = sbm_graph if info.family == "sbm" else rmat_graph
    graph = make(**info.params, seed=seed, name=name)
    if info.edge_feature_dim:
        from .synthetic_edges import planted_edge_features

        graph = dataclasses.replace(graph, edge_attr=planted_edge_features(graph, info.edge_feature_dim, seed=seed))
    return graph
